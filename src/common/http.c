/* http.c - the HTTP server and router (see http.h).
 *
 * libmicrohttpd calls answer() several times per request: once with the
 * headers, then with body chunks, then a last time with nothing left to
 * read. The body is accumulated in a per-connection buffer (bounded by
 * [api] max_request_body_size) and the request is dispatched on the last
 * call: route lookup, token check, microversion negotiation, handler, and
 * rendering of the response or of the error recorded in the context. */
#include "common/http.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_ROUTES 512
#define MAX_SEGS 16

struct route {
    const char *method;
    char *pattern;        /* as registered, for the policy guard */
    char *segs[MAX_SEGS]; /* "{…}" marks a parameter */
    int nsegs;
    int nexact;
    nb_handler_fn fn;
    int flags;
};

static struct route routes[MAX_ROUTES];
static int nroutes;
static nb_auth_fn auth_fn;
static nb_guard_fn guard_fn;
static struct MHD_Daemon *daemon_;
static char base_url[256];
static size_t max_body;

void nb_http_route(const char *method, const char *pattern, nb_handler_fn fn, int flags)
{
    if (nroutes == MAX_ROUTES)
        abort();
    struct route *r = &routes[nroutes++];
    r->method = method;
    r->fn = fn;
    r->flags = flags;
    r->pattern = strdup(pattern);
    char *copy = strdup(pattern), *save = NULL;
    for (char *tok = strtok_r(copy, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        if (r->nsegs == MAX_SEGS)
            abort();
        r->segs[r->nsegs++] = strdup(tok);
        if (tok[0] != '{')
            r->nexact++;
    }
    free(copy);
}

void nb_http_set_auth(nb_auth_fn fn)
{
    auth_fn = fn;
}
void nb_http_set_guard(nb_guard_fn fn)
{
    guard_fn = fn;
}
void nb_http_routes_each(void (*fn)(void *opaque, const char *method, const char *pattern,
                                    int flags),
                         void *opaque)
{
    for (int i = 0; i < nroutes; i++)
        fn(opaque, routes[i].method, routes[i].pattern, routes[i].flags);
}
const char *nb_http_base_url(void)
{
    return base_url;
}
void nb_http_set_base_url(const char *url)
{
    nb_strlcpy(base_url, url, sizeof(base_url));
}

static enum nb_service service_of(const char *path)
{
    if (nb_startswith(path, "/identity"))
        return NB_SVC_IDENTITY;
    if (nb_startswith(path, "/compute"))
        return NB_SVC_COMPUTE;
    if (nb_startswith(path, "/image"))
        return NB_SVC_IMAGE;
    if (nb_startswith(path, "/placement"))
        return NB_SVC_PLACEMENT;
    if (nb_startswith(path, "/volume"))
        return NB_SVC_VOLUME;
    if (nb_startswith(path, "/networking"))
        return NB_SVC_NETWORK;
    return NB_SVC_OTHER;
}

static const char *svc_logger(enum nb_service s)
{
    switch (s) {
    case NB_SVC_IDENTITY: return "nubo.identity.wsgi";
    case NB_SVC_COMPUTE: return "nubo.api.wsgi";
    case NB_SVC_IMAGE: return "nubo.image.wsgi";
    case NB_SVC_PLACEMENT: return "nubo.placement.wsgi";
    case NB_SVC_VOLUME: return "nubo.volume.wsgi";
    default: return "nubo.api.wsgi";
    }
}

static void url_decode(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (*p == '%' && p[1] && p[2]) {
            char hex[3] = {p[1], p[2], 0};
            char *end;
            long v = strtol(hex, &end, 16);
            if (!*end) {
                *o++ = (char)v;
                p += 2;
                continue;
            }
        }
        *o++ = *p;
    }
    *o = '\0';
}

/* Whether a trailing slash is significant for the routes of a service.
 * Nova, Glance, Cinder and Placement route with Routes mappers that match
 * "/servers" but not "/servers/" (404), except their version documents,
 * which answer with and without the slash. Keystone strips a trailing slash
 * from every path (its URLNormalizingMiddleware) and Neutron's pecan
 * routing ignores it, so for them (and anything else) it never matters. */
static bool slash_is_significant(enum nb_service svc)
{
    return svc == NB_SVC_COMPUTE || svc == NB_SVC_IMAGE || svc == NB_SVC_VOLUME ||
           svc == NB_SVC_PLACEMENT;
}

/* True if route r may answer req: a path with a trailing slash only reaches
 * a version document (the unauthenticated routes) where the slash is
 * significant. */
static bool slash_ok(const struct nb_req *req, const struct route *r)
{
    return !req->trailing_slash || !slash_is_significant(req->service) ||
           (r->flags & NB_ROUTE_NO_AUTH);
}

/* Finds the route for method+path, filling req params. Sets *method_mismatch
 * when the path exists with another method. */
static const struct route *match(struct nb_req *req, const char *method, bool *method_mismatch)
{
    char *copy = strdup(req->path), *save = NULL;
    char *segs[MAX_SEGS + 1];
    int nsegs = 0;
    for (char *tok = strtok_r(copy, "/", &save); tok && nsegs <= MAX_SEGS;
         tok = strtok_r(NULL, "/", &save))
        segs[nsegs++] = tok;
    const struct route *best = NULL;
    *method_mismatch = false;
    for (int pass = 0; pass < 2 && !best; pass++) {
        /* pass 1: HEAD falls back to GET */
        const char *m = pass == 0 ? method : (strcmp(method, "HEAD") == 0 ? "GET" : NULL);
        if (!m)
            break;
        for (int i = 0; i < nroutes; i++) {
            const struct route *r = &routes[i];
            if (r->nsegs != nsegs)
                continue;
            bool ok = true;
            for (int k = 0; k < nsegs && ok; k++)
                if (r->segs[k][0] != '{' && strcmp(r->segs[k], segs[k]) != 0)
                    ok = false;
            if (!ok || !slash_ok(req, r))
                continue;
            if (strcmp(r->method, m) != 0) {
                *method_mismatch = true;
                continue;
            }
            if (!best || r->nexact > best->nexact)
                best = r;
        }
    }
    if (best) {
        *method_mismatch = false;
        for (int k = 0; k < nsegs && req->nparams < 8; k++) {
            if (best->segs[k][0] != '{')
                continue;
            char *name = best->segs[k] + 1;
            req->param_names[req->nparams] = name; /* "name}" -> compared without '}' */
            char *v = strdup(segs[k]);
            url_decode(v);
            req->param_values[req->nparams++] = v;
        }
    }
    free(copy);
    return best;
}

const char *nb_req_param(const struct nb_req *req, const char *name)
{
    size_t n = strlen(name);
    for (int i = 0; i < req->nparams; i++)
        if (strncmp(req->param_names[i], name, n) == 0 && req->param_names[i][n] == '}')
            return req->param_values[i];
    return NULL;
}

const char *nb_req_header(const struct nb_req *req, const char *name)
{
    if (req->conn)
        return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
    for (const char *const *h = req->dispatch_headers; h && h[0]; h += 2)
        if (strcasecmp(h[0], name) == 0)
            return h[1];
    return NULL;
}

const char *nb_req_query(const struct nb_req *req, const char *name)
{
    if (req->conn)
        return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
    for (int i = 0; i < req->nquery; i++)
        if (strcmp(req->query_keys[i], name) == 0)
            return req->query_values[i];
    return NULL;
}

struct each_ctx {
    void (*fn)(void *, const char *, const char *);
    void *opaque;
};

static enum MHD_Result each_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value)
{
    (void)kind;
    struct each_ctx *e = cls;
    e->fn(e->opaque, key, value ? value : "");
    return MHD_YES;
}

void nb_req_query_each(const struct nb_req *req,
                       void (*fn)(void *opaque, const char *key, const char *value), void *opaque)
{
    if (req->conn) {
        struct each_ctx e = {fn, opaque};
        MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, each_cb, &e);
        return;
    }
    for (int i = 0; i < req->nquery; i++)
        fn(opaque, req->query_keys[i], req->query_values[i]);
}

int nb_resp_json(struct nb_resp *resp, int status, json_t *body)
{
    resp->status = status;
    json_decref(resp->body);
    resp->body = body;
    return 0;
}

int nb_resp_empty(struct nb_resp *resp, int status)
{
    resp->status = status;
    json_decref(resp->body);
    resp->body = NULL;
    return 0;
}

void nb_resp_header(struct nb_resp *resp, const char *name, const char *value)
{
    if (resp->nheaders == 8)
        return;
    resp->header_names[resp->nheaders] = strdup(name);
    resp->header_values[resp->nheaders++] = strdup(value);
}

int nb_resp_file(struct nb_resp *resp, int status, int fd, uint64_t size, const char *content_type)
{
    resp->status = status;
    json_decref(resp->body);
    resp->body = NULL;
    free(resp->raw);
    resp->raw = NULL;
    if (resp->has_file)
        close(resp->file_fd);
    resp->has_file = true;
    resp->file_fd = fd;
    resp->file_size = size;
    resp->content_type = content_type;
    return 0;
}

json_t *nb_req_json_object(struct nb_ctx *ctx, struct nb_req *req)
{
    if (!req->json) {
        if (req->body_len == 0)
            nb_error(ctx, 400, NULL, "The request body is empty; a JSON object is required.");
        else
            nb_error(ctx, 400, NULL, "Malformed request body");
        return NULL;
    }
    if (!json_is_object(req->json)) {
        nb_error(ctx, 400, NULL, "The request body must be a JSON object.");
        return NULL;
    }
    return req->json;
}

static const char *status_title(int status)
{
    switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 409: return "Conflict";
    case 413: return "Request Entity Too Large";
    case 415: return "Unsupported Media Type";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Error";
    }
}

/* Renders the error recorded in ctx in the service's shape into resp. */
/* Glance's errors are webob pages: JSON, HTML or text by Accept. */
static void render_image_error(const char *accept, int st, const char *msg, struct nb_resp *resp)
{
    char code[64];
    snprintf(code, sizeof(code), "%d %s", st, status_title(st));
    if (accept && strstr(accept, "application/json")) {
        char *m = nb_strdup_printf("%s<br /><br />\n\n\n", msg);
        resp->body =
            json_pack("{s:s, s:s, s:s}", "message", m, "code", code, "title", status_title(st));
        free(m);
    } else if (accept && (strstr(accept, "text/html") || strstr(accept, "*/*"))) {
        resp->raw = nb_strdup_printf("<html>\n <head>\n  <title>%s</title>\n </head>\n <body>\n"
                                     "  <h1>%s</h1>\n  %s<br /><br />\n\n\n\n </body>\n</html>",
                                     code, code, msg);
        resp->raw_len = strlen(resp->raw);
        resp->content_type = "text/html; charset=UTF-8";
    } else {
        resp->raw = nb_strdup_printf("%s\n\n%s\n\n   ", code, msg);
        resp->raw_len = strlen(resp->raw);
        resp->content_type = "text/plain; charset=UTF-8";
    }
}

static void render_error(struct nb_ctx *ctx, enum nb_service svc, const char *accept,
                         struct nb_resp *resp)
{
    int st = ctx->err_status ? ctx->err_status : 500;
    const char *msg = ctx->err_msg[0] ? ctx->err_msg : "An unknown error occurred.";
    json_decref(resp->body);
    resp->body = NULL;
    free(resp->raw);
    resp->raw = NULL;
    resp->status = st;
    switch (svc) {
    case NB_SVC_IDENTITY:
        resp->body = json_pack("{s:{s:i, s:s, s:s}}", "error", "code", st, "message", msg, "title",
                               status_title(st));
        break;
    case NB_SVC_PLACEMENT: {
        const char *code =
            nb_startswith(ctx->err_name, "placement.") ? ctx->err_name : "placement.undefined_code";
        json_t *e = json_pack("{s:i, s:s, s:s, s:s}", "status", st, "title", status_title(st),
                              "detail", msg, "request_id", ctx->request_id);
        /* error codes appeared in placement 1.23 */
        if (ctx->mv_major == 1 && ctx->mv_minor >= 23)
            json_object_set_new(e, "code", json_string(code));
        resp->body = json_pack("{s:[o]}", "errors", e);
        break;
    }
    case NB_SVC_IMAGE: render_image_error(accept, st, msg, resp); break;
    case NB_SVC_NETWORK: { /* neutron/api/api_common.py; generic names as webob's */
        char type[64];
        if (ctx->err_name[0] >= 'A' && ctx->err_name[0] <= 'Z')
            nb_strlcpy(type, ctx->err_name, sizeof(type));
        else
            snprintf(type, sizeof(type), "HTTP%s", status_title(st));
        for (char *c = type; (c = strchr(c, ' '));)
            memmove(c, c + 1, strlen(c));
        resp->body = json_pack("{s:{s:s, s:s, s:s}}", "NeutronError", "type", type, "message", msg,
                               "detail", "");
        break;
    }
    default:
        resp->body = json_pack("{s:{s:i, s:s}}", ctx->err_name[0] ? ctx->err_name : "computeFault",
                               "code", st, "message", msg);
    }
}

/* Parses "X.Y" into maj and min. 0/-1. */
static int parse_version(const char *s, int *maj, int *min)
{
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || *end != '.')
        return -1;
    const char *p = end + 1;
    long b = strtol(p, &end, 10);
    if (end == p || *end)
        return -1;
    *maj = (int)a;
    *min = (int)b;
    return 0;
}

/* Finds the version requested for service in an OpenStack-API-Version
 * header ("compute 2.53, placement 1.10"). Copies it into out. */
static bool header_version(const char *hdr, const char *service, char *out, size_t n)
{
    if (!hdr)
        return false;
    char *copy = strdup(hdr), *save = NULL;
    bool found = false;
    for (char *item = strtok_r(copy, ",", &save); item && !found;
         item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ')
            item++;
        size_t sl = strlen(service);
        if (strncasecmp(item, service, sl) == 0 && item[sl] == ' ') {
            char *v = item + sl;
            while (*v == ' ')
                v++;
            char *e = v + strlen(v);
            while (e > v && e[-1] == ' ')
                *--e = '\0';
            nb_strlcpy(out, v, n);
            found = true;
        }
    }
    free(copy);
    return found;
}

/* Negotiates the microversion for compute/placement. 0, or -1 with the
 * error recorded (400 for a malformed value, 406 out of range). */
static int negotiate(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    char v[32] = "", hdr[64];
    int maj, min, lo_maj, lo_min, hi_maj, hi_min;
    const char *svc;
    if (req->service == NB_SVC_COMPUTE && nb_startswith(req->path, "/compute/v2.1/")) {
        svc = "compute";
        lo_maj = NB_COMPUTE_MV_MIN_MAJOR, lo_min = NB_COMPUTE_MV_MIN_MINOR;
        hi_maj = NB_COMPUTE_MV_MAX_MAJOR, hi_min = NB_COMPUTE_MV_MAX_MINOR;
        if (!header_version(nb_req_header(req, "OpenStack-API-Version"), svc, v, sizeof(v))) {
            const char *legacy = nb_req_header(req, "X-OpenStack-Nova-API-Version");
            if (legacy)
                nb_strlcpy(v, legacy, sizeof(v));
        }
    } else if (req->service == NB_SVC_PLACEMENT && strcmp(req->path, "/placement") != 0 &&
               strcmp(req->path, "/placement/") != 0) {
        svc = "placement";
        lo_maj = 1, lo_min = 0, hi_maj = 1, hi_min = NB_PLACEMENT_MV_MAX_MINOR;
        header_version(nb_req_header(req, "OpenStack-API-Version"), svc, v, sizeof(v));
    } else {
        return 0;
    }
    if (!v[0]) {
        maj = lo_maj, min = lo_min;
    } else if (strcasecmp(v, "latest") == 0) {
        maj = hi_maj, min = hi_min;
    } else if (parse_version(v, &maj, &min) < 0) {
        return nb_error(
            ctx, 400, NULL,
            "API Version String %s is of invalid format. Must be of format MajorNum.MinorNum.", v);
    } else if (maj < lo_maj || (maj == lo_maj && min < lo_min) || maj > hi_maj ||
               (maj == hi_maj && min > hi_min)) {
        if (req->service == NB_SVC_PLACEMENT)
            return nb_error(ctx, 406, "placement.undefined_code", "Unacceptable version header: %s",
                            v);
        return nb_error(
            ctx, 406, "notAcceptable",
            "Version %s is not supported by the API. Minimum is %d.%d and maximum is %d.%d.", v,
            lo_maj, lo_min, hi_maj, hi_min);
    }
    ctx->mv_major = maj;
    ctx->mv_minor = min;
    snprintf(hdr, sizeof(hdr), "%s %d.%d", svc, maj, min);
    nb_resp_header(resp, "OpenStack-API-Version", hdr);
    if (req->service == NB_SVC_COMPUTE) {
        snprintf(hdr, sizeof(hdr), "%d.%d", maj, min);
        nb_resp_header(resp, "X-OpenStack-Nova-API-Version", hdr);
        nb_resp_header(resp, "Vary", "OpenStack-API-Version, X-OpenStack-Nova-API-Version");
    } else {
        nb_resp_header(resp, "Vary", "openstack-api-version");
    }
    return 0;
}

/* Answers a request without a valid token as keystonemiddleware does on
 * every service: the identity error shape plus WWW-Authenticate. */
static void reject_unauthenticated(struct nb_ctx *ctx, struct nb_resp *resp)
{
    if (!ctx->err_status || ctx->err_status == 401) {
        ctx->err_status = 0;
        nb_error(ctx, 401, "Unauthorized", "The request you have made requires authentication.");
        render_error(ctx, NB_SVC_IDENTITY, NULL, resp);
        char hdr[320];
        snprintf(hdr, sizeof(hdr), "Keystone uri=\"%s/identity\"", base_url);
        nb_resp_header(resp, "WWW-Authenticate", hdr);
        return;
    }
    render_error(ctx, NB_SVC_IDENTITY, NULL, resp);
}

/* Routing, body size check, token check and negotiation. Returns the route,
 * or NULL with the outcome (an error) rendered into resp. */
static const struct route *prepare(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    resp->status = 200;
    const char *grid = nb_req_header(req, "X-OpenStack-Request-ID");
    if (grid && nb_startswith(grid, "req-") && strlen(grid) < sizeof(ctx->global_request_id))
        nb_strlcpy(ctx->global_request_id, grid, sizeof(ctx->global_request_id));

    bool mismatch = false;
    const struct route *r = match(req, req->method, &mismatch);
    if (!r) {
        if (mismatch)
            nb_error(ctx, 405, NULL, "The method %s is not allowed for this resource.",
                     req->method);
        else
            nb_error(ctx, 404, NULL, "The resource could not be found.");
        render_error(ctx, req->service, nb_req_header(req, "Accept"), resp);
        return NULL;
    }
    if (!(r->flags & NB_ROUTE_STREAM_BODY) && req->body_len > max_body) {
        nb_error(ctx, 413, NULL, "Request is too large.");
        render_error(ctx, req->service, nb_req_header(req, "Accept"), resp);
        return NULL;
    }
    if (!(r->flags & NB_ROUTE_NO_AUTH)) {
        const char *tok = nb_req_header(req, "X-Auth-Token");
        if (!tok || !*tok || !auth_fn || auth_fn(ctx, tok) < 0) {
            reject_unauthenticated(ctx, resp);
            return NULL;
        }
    }
    if (negotiate(ctx, req, resp) < 0 || (guard_fn && guard_fn(ctx, req, r->pattern) < 0)) {
        render_error(ctx, req->service, nb_req_header(req, "Accept"), resp);
        return NULL;
    }
    return r;
}

/* Calls the handler (or a stream callback) and renders its error, if any. */
static void run_handler(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, int rc)
{
    if (rc < 0 || (ctx->err_status && resp->status < 400)) {
        if (!ctx->err_status)
            nb_error(ctx, 500, NULL, "An unexpected error occurred.");
        if (resp->has_file) {
            close(resp->file_fd);
            resp->has_file = false;
        }
        render_error(ctx, req->service, nb_req_header(req, "Accept"), resp);
    }
}

/* The 413 of a streamed body above [image] image_size_cap, in Glance's words. */
static uint64_t stream_cap(void)
{
    long long cap = nb_conf_int("image", "image_size_cap", 1099511627776LL);
    return cap > 0 ? (uint64_t)cap : 0;
}

static int stream_too_big(struct nb_ctx *ctx)
{
    return nb_error(ctx, 413, NULL,
                    "The incoming image is too large: The provided image is too large.");
}

/* Runs one parsed request through routing, auth, negotiation and the
 * handler; leaves the outcome in resp. A streamed route gets the buffered
 * body as one chunk (in-process dispatch). */
static void handle(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const struct route *r = prepare(ctx, req, resp);
    if (!r)
        return;
    if (r->flags & NB_ROUTE_STREAM_BODY) {
        const char *body = req->body;
        size_t len = req->body_len;
        req->body = "";
        req->body_len = 0;
        int rc = r->fn(ctx, req, resp);
        if (rc == 0 && !ctx->err_status && req->body_end) {
            if (len > stream_cap()) {
                stream_too_big(ctx);
                rc = -1;
            } else if (len && req->body_chunk(ctx, req, body, len) < 0) {
                rc = -1;
            }
            if (rc < 0)
                req->body_abort(ctx, req);
            else
                rc = req->body_end(ctx, req, resp);
        }
        run_handler(ctx, req, resp, rc);
        return;
    }
    if (req->body_len > 0) {
        const char *ct = nb_req_header(req, "Content-Type");
        if (!ct || !nb_startswith(ct, "application/octet-stream"))
            req->json = json_loadb(req->body, req->body_len, JSON_DECODE_ANY, NULL);
    }
    run_handler(ctx, req, resp, r->fn(ctx, req, resp));
}

static void req_free(struct nb_req *req, struct nb_resp *resp)
{
    for (int i = 0; i < req->nparams; i++)
        free(req->param_values[i]);
    for (int i = 0; i < req->nquery; i++) {
        free(req->query_keys[i]);
        free(req->query_values[i]);
    }
    json_decref(req->json);
    json_decref(resp->body);
    free(resp->raw);
    if (resp->has_file)
        close(resp->file_fd);
    for (int i = 0; i < resp->nheaders; i++) {
        free(resp->header_names[i]);
        free(resp->header_values[i]);
    }
}

/* Body text of resp (malloc'd) and its length. */
static char *resp_text(struct nb_resp *resp, size_t *len)
{
    if (resp->has_file) {
        char *buf = malloc(resp->file_size + 1);
        size_t got = 0;
        while (buf && got < resp->file_size) {
            ssize_t n = pread(resp->file_fd, buf + got, resp->file_size - got, (off_t)got);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        if (buf)
            buf[got] = '\0';
        *len = buf ? got : 0;
        return buf ? buf : strdup("");
    }
    if (resp->raw) {
        *len = resp->raw_len;
        char *raw = resp->raw;
        resp->raw = NULL;
        return raw;
    }
    if (resp->body) {
        char *s = json_dumps(resp->body, JSON_COMPACT | JSON_ENCODE_ANY);
        *len = strlen(s);
        return s;
    }
    *len = 0;
    return strdup("");
}

/* Per-connection state between the calls of answer() for one request. */
struct conn_state {
    /* buffered body */
    char *buf;
    size_t len, cap;
    bool too_big;
    /* streamed body (NB_ROUTE_STREAM_BODY) */
    bool streaming;
    bool rendered;  /* resp holds the outcome; discard the rest of the body */
    bool body_open; /* body_end or body_abort still owed */
    uint64_t received, cap_bytes;
    double t0;
    struct nb_ctx ctx;
    struct nb_req req;
    struct nb_resp resp;
    char path[2048];
    bool trailing_slash; /* the URL ended in '/' (stripped from path) */
};

static void log_request(struct nb_ctx *ctx, struct nb_req *req, int status, size_t len, double t0)
{
    char mv[32] = "";
    if (ctx->mv_major)
        snprintf(mv, sizeof(mv), " microversion: %d.%d", ctx->mv_major, ctx->mv_minor);
    nb_log(status >= 500 ? NB_LOG_ERROR : NB_LOG_INFO, svc_logger(req->service), ctx, NULL,
           "\"%s %s%s\" status: %d len: %zu%s time: %.4f", req->method, req->path,
           req->trailing_slash ? "/" : "", status, len, mv, nb_time_mono() - t0);
}

/* Copies url into path without its trailing slashes; returns true if
 * there were any (the router decides whether they matter). */
static bool set_path(char *path, size_t n, const char *url)
{
    nb_strlcpy(path, url, n);
    size_t pl = strlen(path);
    bool trailing = pl > 1 && path[pl - 1] == '/';
    while (pl > 1 && path[pl - 1] == '/')
        path[--pl] = '\0';
    return trailing;
}

/* True if method+path routes to a NB_ROUTE_STREAM_BODY route. */
static bool is_stream_route(const char *method, const char *path, bool trailing_slash)
{
    struct nb_req probe = {0};
    probe.path = path;
    probe.service = service_of(path);
    probe.trailing_slash = trailing_slash;
    bool mismatch;
    const struct route *r = match(&probe, method, &mismatch);
    for (int i = 0; i < probe.nparams; i++)
        free(probe.param_values[i]);
    return r && (r->flags & NB_ROUTE_STREAM_BODY);
}

/* Queues resp (a file or a memory body) on conn, logs and frees the request. */
static enum MHD_Result send_response(struct MHD_Connection *conn, struct nb_ctx *ctx,
                                     struct nb_req *req, struct nb_resp *resp, double t0)
{
    size_t len;
    struct MHD_Response *r;
    if (resp->has_file) {
        len = (size_t)resp->file_size;
        r = MHD_create_response_from_fd64(resp->file_size, resp->file_fd);
        resp->has_file = false; /* MHD closes it */
        if (!r)
            return MHD_NO;
        MHD_add_response_header(r, "Content-Type",
                                resp->content_type ? resp->content_type
                                                   : "application/octet-stream");
    } else {
        char *text = resp_text(resp, &len);
        r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
        if (len || resp->body || resp->raw)
            MHD_add_response_header(r, "Content-Type",
                                    resp->content_type ? resp->content_type : "application/json");
    }
    MHD_add_response_header(r, "x-openstack-request-id", ctx->request_id);
    if (req->service == NB_SVC_COMPUTE)
        MHD_add_response_header(r, "x-compute-request-id", ctx->request_id);
    for (int i = 0; i < resp->nheaders; i++)
        MHD_add_response_header(r, resp->header_names[i], resp->header_values[i]);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    log_request(ctx, req, resp->status, len, t0);
    req_free(req, resp);
    return ret;
}

/* First call of a streamed request: prepare and call the handler. */
static void stream_begin(struct conn_state *st, struct MHD_Connection *conn, const char *method)
{
    st->t0 = nb_time_mono();
    nb_ctx_init(&st->ctx);
    st->req.method = method;
    st->req.path = st->path;
    st->req.trailing_slash = st->trailing_slash;
    st->req.service = service_of(st->path);
    st->req.conn = conn;
    st->req.body = "";
    st->cap_bytes = stream_cap();
    const struct route *r = prepare(&st->ctx, &st->req, &st->resp);
    if (!r) {
        st->rendered = true;
        return;
    }
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (cl && strtoull(cl, NULL, 10) > st->cap_bytes) {
        stream_too_big(&st->ctx);
        run_handler(&st->ctx, &st->req, &st->resp, -1);
        st->rendered = true;
        return;
    }
    int rc = r->fn(&st->ctx, &st->req, &st->resp);
    if (rc < 0 || st->ctx.err_status || !st->req.body_end) {
        run_handler(&st->ctx, &st->req, &st->resp, rc);
        st->rendered = true;
        return;
    }
    st->body_open = true;
}

/* One piece of a streamed body. */
static void stream_chunk(struct conn_state *st, const char *data, size_t len)
{
    if (st->rendered)
        return; /* discarded */
    st->received += len;
    int rc = 0;
    if (st->received > st->cap_bytes) {
        rc = stream_too_big(&st->ctx);
    } else if (st->req.body_chunk(&st->ctx, &st->req, data, len) < 0) {
        rc = -1;
    }
    if (rc < 0) {
        st->body_open = false;
        st->req.body_abort(&st->ctx, &st->req);
        run_handler(&st->ctx, &st->req, &st->resp, -1);
        st->rendered = true;
    }
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_size, void **con_cls)
{
    (void)cls;
    (void)version;
    struct conn_state *st = *con_cls;
    if (!st) {
        st = calloc(1, sizeof(*st));
        if (!st)
            return MHD_NO;
        *con_cls = st;
        st->trailing_slash = set_path(st->path, sizeof(st->path), url);
        if (is_stream_route(method, st->path, st->trailing_slash)) {
            st->streaming = true;
            stream_begin(st, conn, method);
        }
        return MHD_YES;
    }
    if (st->streaming) {
        if (*upload_size) {
            stream_chunk(st, upload_data, *upload_size);
            *upload_size = 0;
            return MHD_YES;
        }
        if (!st->rendered) {
            st->body_open = false;
            run_handler(&st->ctx, &st->req, &st->resp,
                        st->req.body_end(&st->ctx, &st->req, &st->resp));
            st->rendered = true;
        }
        st->streaming = false; /* answered: completed() has nothing left to abort */
        return send_response(conn, &st->ctx, &st->req, &st->resp, st->t0);
    }
    if (*upload_size) {
        if (st->len + *upload_size > max_body) {
            st->too_big = true;
        } else {
            if (st->len + *upload_size + 1 > st->cap) {
                st->cap = (st->len + *upload_size + 1) * 2;
                st->buf = realloc(st->buf, st->cap);
            }
            memcpy(st->buf + st->len, upload_data, *upload_size);
            st->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }

    double t0 = nb_time_mono();
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    struct nb_req req = {0};
    struct nb_resp resp = {0};
    req.method = method;
    req.path = st->path;
    req.trailing_slash = st->trailing_slash;
    req.service = service_of(st->path);
    req.conn = conn;
    req.body = st->buf ? st->buf : "";
    if (st->buf)
        st->buf[st->len] = '\0';
    req.body_len = st->too_big ? max_body + 1 : st->len;
    handle(&ctx, &req, &resp);
    return send_response(conn, &ctx, &req, &resp, t0);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    struct conn_state *st = *con_cls;
    if (st) {
        if (st->streaming) {
            /* the request ended before it was answered (client gone, timeout) */
            if (st->body_open) {
                nb_error(&st->ctx, 499, NULL, "The client closed the connection mid-upload.");
                st->req.body_abort(&st->ctx, &st->req);
            }
            nb_log(NB_LOG_WARNING, svc_logger(st->req.service), &st->ctx, NULL,
                   "\"%s %s\" aborted after %llu body bytes (termination code %d)", st->req.method,
                   st->req.path, (unsigned long long)st->received, (int)toe);
            req_free(&st->req, &st->resp);
        }
        free(st->buf);
        free(st);
    }
    *con_cls = NULL;
}

int nb_http_start(const char *host, int port, int nthreads)
{
    max_body = (size_t)nb_conf_int("api", "max_request_body_size", 114688);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fprintf(stderr, "nubo: bad listen address %s\n", host);
        return -1;
    }
    daemon_ = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC | MHD_USE_ERROR_LOG,
        (uint16_t)port, NULL, NULL, answer, NULL, MHD_OPTION_SOCK_ADDR, &addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)nthreads, MHD_OPTION_NOTIFY_COMPLETED, completed,
        NULL, MHD_OPTION_CONNECTION_TIMEOUT, 120U, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1U,
        MHD_OPTION_END);
    if (!daemon_) {
        fprintf(stderr, "nubo: cannot listen on %s:%d\n", host, port);
        return -1;
    }
    if (!base_url[0])
        snprintf(base_url, sizeof(base_url), "http://%s:%d", host, port);
    return 0;
}

void nb_http_stop(void)
{
    if (!daemon_)
        return;
    MHD_quiesce_daemon(daemon_);
    MHD_stop_daemon(daemon_);
    daemon_ = NULL;
}

char *nb_http_dispatch(const char *method, const char *path, const char *query,
                       const char *const *headers, const char *body, int *status)
{
    if (!max_body)
        max_body = (size_t)nb_conf_int("api", "max_request_body_size", 114688);
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    struct nb_req req = {0};
    struct nb_resp resp = {0};
    char p[2048];
    req.trailing_slash = set_path(p, sizeof(p), path);
    req.method = method;
    req.path = p;
    req.service = service_of(p);
    req.dispatch_headers = headers;
    req.body = body ? body : "";
    req.body_len = strlen(req.body);
    if (query) {
        char *q = strdup(query), *save = NULL;
        for (char *kv = strtok_r(q, "&", &save); kv && req.nquery < 32;
             kv = strtok_r(NULL, "&", &save)) {
            char *eq = strchr(kv, '=');
            if (eq)
                *eq = '\0';
            char *k = strdup(kv), *v = strdup(eq ? eq + 1 : "");
            for (char *c = v; *c; c++)
                if (*c == '+')
                    *c = ' ';
            url_decode(k);
            url_decode(v);
            req.query_keys[req.nquery] = k;
            req.query_values[req.nquery++] = v;
        }
        free(q);
    }
    handle(&ctx, &req, &resp);
    size_t len;
    char *text = resp_text(&resp, &len);
    *status = resp.status;
    req_free(&req, &resp);
    return text;
}

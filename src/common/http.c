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
#include "common/healthcheck.h"
#include "common/metrics.h"
#include "common/http_guard.h"
#include "common/http_int.h"
#include "common/json.h"
#include "common/log.h"
#include "common/sbuf.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <malloc.h>
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
    void *opaque; /* handed to the handler as req->route_opaque */
};

static struct route routes[MAX_ROUTES];
static int nroutes;
static nb_auth_fn auth_fn;
static nb_auth_reject_fn auth_reject;
static nb_guard_fn guard_fn;
static struct nb_http_guard *guard_;
static char base_url[256];
static size_t max_body;

#define MAX_SERVICES 16
static const struct nb_http_service *services[MAX_SERVICES];
static int nservices;
static const struct nb_http_service *fallback_;

void nb_http_service_register(const struct nb_http_service *svc, bool fallback)
{
    for (int i = 0; i < nservices; i++)
        if (services[i] == svc)
            return;
    if (nservices == MAX_SERVICES)
        abort();
    services[nservices++] = svc;
    if (fallback && !fallback_)
        fallback_ = svc;
}

const struct nb_http_service *nb_http_service_of(const char *path)
{
    for (int i = 0; i < nservices; i++)
        if (nb_startswith(path, services[i]->prefix))
            return services[i];
    return NULL;
}

const struct nb_http_service *nb_http_fallback_service(void)
{
    return fallback_;
}

/* The logger of svc's requests (the fallback's for none). */
static const char *svc_logger(const struct nb_http_service *svc)
{
    if (!svc)
        svc = fallback_;
    return svc ? svc->logger : "nubo.http";
}

void nb_http_route(const char *method, const char *pattern, nb_handler_fn fn, int flags)
{
    nb_http_route_opaque(method, pattern, fn, flags, NULL);
}

void nb_http_route_opaque(const char *method, const char *pattern, nb_handler_fn fn, int flags,
                          void *opaque)
{
    if (nroutes == MAX_ROUTES)
        abort();
    struct route *r = &routes[nroutes++];
    r->method = method;
    r->fn = fn;
    r->flags = flags;
    r->opaque = opaque;
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

void nb_http_set_auth(nb_auth_fn fn, nb_auth_reject_fn reject)
{
    auth_fn = fn;
    auth_reject = reject;
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

/* True if route r may answer req: a path with a trailing slash only reaches
 * a version document (the unauthenticated routes) where the slash is
 * significant. */
static bool slash_ok(const struct nb_req *req, const struct route *r)
{
    return !req->trailing_slash || !req->service || !req->service->slash_significant ||
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
        /* pass 1: HEAD falls back to GET, where the service allows it */
        bool head_get = !req->service || !req->service->head_not_get;
        const char *m =
            pass == 0 ? method : (head_get && strcmp(method, "HEAD") == 0 ? "GET" : NULL);
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
        req->route_opaque = best->opaque;
        req->route = best->pattern;
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
 * header ("<name> 2.53, <other> 1.10"). Copies it into out. */
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

/* Negotiates the microversion of req's service, if it has one. 0, or -1
 * with the error recorded (400 for a malformed value, 406 out of range). */
static int negotiate(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const struct nb_http_microversions *mv = req->service ? req->service->microversions : NULL;
    if (!mv || !nb_startswith(req->path, mv->under))
        return 0;
    char v[32] = "", hdr[64];
    int maj, min;
    if (!header_version(nb_req_header(req, "OpenStack-API-Version"), mv->name, v, sizeof(v)) &&
        mv->legacy_header) {
        const char *legacy = nb_req_header(req, mv->legacy_header);
        if (legacy)
            nb_strlcpy(v, legacy, sizeof(v));
    }
    if (!v[0]) {
        maj = mv->min_major, min = mv->min_minor;
    } else if (strcasecmp(v, "latest") == 0) {
        maj = mv->max_major, min = mv->max_minor;
    } else if (parse_version(v, &maj, &min) < 0) {
        return nb_error(
            ctx, 400, NULL,
            "API Version String %s is of invalid format. Must be of format MajorNum.MinorNum.", v);
    } else if (maj < mv->min_major || (maj == mv->min_major && min < mv->min_minor) ||
               maj > mv->max_major || (maj == mv->max_major && min > mv->max_minor)) {
        return mv->unacceptable(ctx, v, mv);
    }
    ctx->mv_major = maj;
    ctx->mv_minor = min;
    snprintf(hdr, sizeof(hdr), "%s %d.%d", mv->name, maj, min);
    nb_resp_header(resp, "OpenStack-API-Version", hdr);
    if (mv->legacy_header) {
        snprintf(hdr, sizeof(hdr), "%d.%d", maj, min);
        nb_resp_header(resp, mv->legacy_header, hdr);
    }
    nb_resp_header(resp, "Vary", mv->vary);
    return 0;
}

/* Answers a request without a valid token through the auth hook's reject
 * (without one: the recorded error, or a plain 401). */
static void reject_unauthenticated(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (auth_reject) {
        auth_reject(ctx, resp);
        return;
    }
    nb_error(ctx, 401, NULL, "The request you have made requires authentication.");
    nb_http_render_error(ctx, req->service, NULL, resp);
}

/* A service's URLs may name the project after project_url_prefix:
 * <prefix>{project_id}/servers is <prefix>servers (the project ID being
 * hex and dashes). When req's path is one, removes that segment from it
 * (the path is the server's per-request buffer), copies it into project
 * and returns true. */
static bool strip_url_project(struct nb_req *req, char *project, size_t n)
{
    const char *prefix = req->service ? req->service->project_url_prefix : NULL;
    if (!prefix || !nb_startswith(req->path, prefix))
        return false;
    char *seg = (char *)req->path + strlen(prefix);
    size_t len = strspn(seg, "0123456789abcdef-");
    if (len == 0 || len >= n || seg[len] != '/' || !seg[len + 1])
        return false;
    memcpy(project, seg, len);
    project[len] = '\0';
    memmove(seg, seg + len + 1, strlen(seg + len + 1) + 1);
    for (int i = 0; i < req->nparams; i++)
        free(req->param_values[i]);
    req->nparams = 0;
    return true;
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
    char url_project[NB_ID_LEN] = "";
    const struct route *r = match(req, req->method, &mismatch);
    if (!r && strip_url_project(req, url_project, sizeof(url_project)))
        r = match(req, req->method, &mismatch);
    if (!r) {
        if (mismatch)
            nb_error(ctx, 405, NULL, "The method %s is not allowed for this resource.",
                     req->method);
        else
            nb_error(ctx, 404, NULL, "The resource could not be found.");
        nb_http_render_error(ctx, req->service, nb_req_header(req, "Accept"), resp);
        return NULL;
    }
    if (!(r->flags & NB_ROUTE_STREAM_BODY) && req->body_len > max_body) {
        nb_error(ctx, 413, NULL, "Request is too large.");
        nb_http_render_error(ctx, req->service, nb_req_header(req, "Accept"), resp);
        return NULL;
    }
    if (!(r->flags & NB_ROUTE_NO_AUTH)) {
        const char *tok = nb_req_header(req, "X-Auth-Token");
        if (!tok || !*tok || !auth_fn || auth_fn(ctx, tok) < 0) {
            reject_unauthenticated(ctx, req, resp);
            return NULL;
        }
    }
    if (url_project[0] && ctx->project_id[0] && strcmp(url_project, ctx->project_id) != 0 &&
        req->service->project_mismatch)
        req->service->project_mismatch(ctx, url_project);
    if (nb_ctx_failed(ctx) || negotiate(ctx, req, resp) < 0 ||
        (guard_fn && guard_fn(ctx, req, r->pattern) < 0)) {
        nb_http_render_error(ctx, req->service, nb_req_header(req, "Accept"), resp);
        return NULL;
    }
    return r;
}

/* Calls the handler (or a stream callback) and renders its error, if any. */
static void run_handler(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, int rc)
{
    if (rc < 0 || (nb_ctx_failed(ctx) && resp->status < 400)) {
        const struct nb_http_service *svc = req->service;
        if (!nb_ctx_failed(ctx))
            nb_error(ctx, 500, NULL, "%s",
                     svc && svc->unexpected_error ? svc->unexpected_error
                                                  : "An unexpected error occurred.");
        if (nb_ctx_status(ctx) >= 500 && svc && svc->error_logger)
            nb_log(NB_LOG_ERROR, svc->error_logger, ctx, NULL, "%s %s failed: %s", req->method,
                   req->path, nb_ctx_message(ctx));
        if (resp->has_file) {
            close(resp->file_fd);
            resp->has_file = false;
        }
        nb_http_render_error(ctx, req->service, nb_req_header(req, "Accept"), resp);
    }
}

/* The body limit of svc's streamed routes, and the 413 over it. */
static uint64_t stream_cap(const struct nb_http_service *svc)
{
    return svc && svc->stream_cap ? svc->stream_cap() : UINT64_MAX;
}

static int stream_too_big(const struct nb_http_service *svc, struct nb_ctx *ctx)
{
    if (svc && svc->stream_too_big)
        return svc->stream_too_big(ctx);
    return nb_error(ctx, 413, NULL, "Request is too large.");
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
        if (rc == 0 && !nb_ctx_failed(ctx) && req->body_end) {
            if (len > stream_cap(req->service)) {
                stream_too_big(req->service, ctx);
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
    free(resp->header_names);
    free(resp->header_values);
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
        return nb_json_dump_len(resp->body, len);
    }
    *len = 0;
    return strdup("");
}

/* Per-connection state between the calls of answer() for one request,
 * made by the URI log callback (the request line is in). */
struct conn_state {
    bool started; /* answer() saw the headers */
    char *uri;    /* the target as the client sent it (path and query) */
    char version[16];
    /* buffered body */
    char *buf;
    size_t len, cap;
    bool too_big;
    bool answered_now; /* answered before the body ended (413): nothing left to send */
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
    bool big_answer;     /* its response body passed BIG_ANSWER: trim the heap after it */
};

/* A response this large (a detail list of a thousand servers) leaves its
 * thread's malloc arena holding megabytes it no longer uses; they go back
 * to the system when the request completes. */
enum { BIG_ANSWER = 512 * 1024 };

/* The logger and the access line's shape of a service: the requestlog line
 * or eventlet's wsgi line. */
static void log_access(struct nb_ctx *ctx, const struct nb_http_service *svc, const char *peer,
                       const char *method, const char *uri, const char *version, int status,
                       long long len, double t0)
{
    nb_log_access_line(svc_logger(svc), ctx, peer, method, uri,
                       svc && svc->requestlog_access ? NULL : (version && *version ? version : "-"),
                       status, len, nb_time_mono() - t0);
}

/* The request's series of nubo_http_request_duration_seconds: the route's
 * pattern, never the path, so IDs do not multiply the series. */
static void observe(const struct nb_req *req, int status, double t0)
{
    char code[16];
    snprintf(code, sizeof(code), "%d", status);
    const char *svc = req->service && req->service->prefix ? req->service->prefix : "/";
    const char *labels[] = {svc[0] == '/' && svc[1] ? svc + 1 : "-", req->method,
                            req->route ? req->route : "(no route)", code};
    nb_metrics_observe(NB_M_HTTP_REQUEST_SECONDS, nb_time_mono() - t0, labels);
}

static void log_request(struct MHD_Connection *conn, struct conn_state *st, struct nb_ctx *ctx,
                        struct nb_req *req, int status, size_t len, double t0)
{
    observe(req, status, t0);
    char peer[64];
    log_access(ctx, req->service, nb_http_guard_peer(conn, peer, sizeof(peer)), req->method,
               st->uri ? st->uri : req->path, st->version, status, (long long)len, t0);
}

/* The service whose root_alias url starts with (a whole segment), or NULL. */
static const struct nb_http_service *aliased(const char *url)
{
    for (int i = 0; i < nservices; i++) {
        const char *alias = services[i]->root_alias;
        size_t len = alias ? strlen(alias) : 0;
        if (len && !strncmp(url, alias, len) && (url[len] == '/' || !url[len]))
            return services[i];
    }
    return NULL;
}

/* Copies url into path without its trailing slashes; returns true if
 * there were any (the router decides whether they matter). A URL under a
 * service's root_alias (its own port layout at the root) is served under
 * the service's prefix; the access line still shows the URL as sent. */
static bool set_path(char *path, size_t n, const char *url)
{
    const struct nb_http_service *svc = aliased(url);
    if (svc)
        snprintf(path, n, "%s%s", svc->prefix, url);
    else
        nb_strlcpy(path, url, n);
    size_t pl = strlen(path);
    bool trailing = pl > 1 && path[pl - 1] == '/';
    while (pl > 1 && path[pl - 1] == '/')
        path[--pl] = '\0';
    return trailing;
}

/* The route method+path goes to, or NULL. */
static const struct route *route_of(const char *method, const char *path, bool trailing_slash)
{
    struct nb_req probe = {0};
    probe.path = path;
    probe.service = nb_http_service_of(path);
    probe.trailing_slash = trailing_slash;
    bool mismatch;
    const struct route *r = match(&probe, method, &mismatch);
    for (int i = 0; i < probe.nparams; i++)
        free(probe.param_values[i]);
    return r;
}

/* True if method+path routes to a NB_ROUTE_STREAM_BODY route. */
static bool is_stream_route(const char *method, const char *path, bool trailing_slash)
{
    const struct route *r = route_of(method, path, trailing_slash);
    return r && (r->flags & NB_ROUTE_STREAM_BODY);
}

/* The path of a request target (path and query, as on the request line). */
static void target_path(const char *target, char *path, size_t n)
{
    nb_strlcpy(path, target, n);
    path[strcspn(path, "?")] = '\0';
}

/* True if a request for target (path and query, percent-encoded, as on
 * the request line) goes to a NB_ROUTE_STREAM_BODY route. */
static bool target_streams(const char *method, const char *target)
{
    char path[2048];
    target_path(target, path, sizeof(path));
    url_decode(path);
    char clean[2048];
    bool slash = set_path(clean, sizeof(clean), path);
    return is_stream_route(method, clean, slash);
}

/* The guard's body limit: the service's stream_cap on a streamed route,
 * else [api] max_request_body_size. */
static uint64_t body_limit(void *opaque, const char *method, const char *target)
{
    (void)opaque;
    char path[2048];
    target_path(target, path, sizeof(path));
    return target_streams(method, target) ? stream_cap(nb_http_service_of(path)) : max_body;
}

/* The whole HTTP/1.1 response text of resp (a memory body), closing the
 * connection: what the guard and answer_now() write on the socket. */
static char *raw_response(struct nb_ctx *ctx, const struct nb_http_service *svc,
                          struct nb_resp *resp, size_t *len)
{
    size_t blen;
    char *body = resp_text(resp, &blen);
    struct nb_sbuf h = {0};
    char *head = nb_strdup_printf("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                                  "x-openstack-request-id: %s\r\n",
                                  resp->status, nb_http_status_title(resp->status),
                                  resp->content_type ? resp->content_type : "application/json",
                                  blen, ctx->request_id);
    if (!head || !body) {
        free(head);
        free(body);
        return NULL;
    }
    nb_sbuf_str(&h, head);
    free(head);
    if (svc && svc->request_id_header) {
        nb_sbuf_str(&h, svc->request_id_header);
        nb_sbuf_str(&h, ": ");
        nb_sbuf_str(&h, ctx->request_id);
        nb_sbuf_str(&h, "\r\n");
    }
    for (int i = 0; i < resp->nheaders; i++) {
        nb_sbuf_str(&h, resp->header_names[i]);
        nb_sbuf_str(&h, ": ");
        nb_sbuf_str(&h, resp->header_values[i]);
        nb_sbuf_str(&h, "\r\n");
    }
    nb_sbuf_str(&h, "Connection: close\r\n\r\n");
    nb_sbuf_add(&h, body, blen);
    free(body);
    *len = h.len;
    return h.s;
}

/* The guard refused a request head: render the error in the service's
 * shape, log it, and return the response text. */
static char *reject(void *opaque, const struct nb_http_head *head, int status, const char *msg,
                    size_t *len)
{
    (void)opaque;
    double t0 = nb_time_mono();
    char path[2048] = "";
    if (head->target)
        target_path(head->target, path, sizeof(path));
    const struct nb_http_service *svc = nb_http_service_of(path);
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    if (status == 413 && head->method && head->target && target_streams(head->method, head->target))
        stream_too_big(svc, &ctx); /* an upload: the service's words */
    else
        nb_error(&ctx, status, NULL, "%s", msg);
    struct nb_resp resp = {0};
    nb_http_render_error(&ctx, svc, head->accept, &resp);
    char *text = raw_response(&ctx, svc, &resp, len);
    log_access(&ctx, svc, head->peer, head->method ? head->method : "-",
               head->target ? head->target : "-", head->version, status,
               text ? (long long)(*len) : -1, t0);
    struct nb_req none = {0};
    req_free(&none, &resp);
    return text;
}

/* Answers st's request now, while its body still arrives (libmicrohttpd
 * queues nothing then): the 413 of a body over the limit. */
static void answer_now(struct MHD_Connection *conn, struct conn_state *st, struct nb_ctx *ctx,
                       struct nb_req *req, struct nb_resp *resp, double t0)
{
    size_t len = 0;
    char *text = raw_response(ctx, req->service, resp, &len);
    if (text)
        nb_http_guard_answer_now(conn, text, len);
    free(text);
    log_request(conn, st, ctx, req, resp->status, len, t0);
    st->answered_now = true;
}

/* Queues resp (a file or a memory body) on conn, logs and frees the request. */
static enum MHD_Result send_response(struct MHD_Connection *conn, struct conn_state *st,
                                     struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                                     double t0)
{
    size_t len;
    struct MHD_Response *r;
    bool file = resp->has_file;
    if (resp->oom) {
        nb_error(ctx, 500, NULL, "Out of memory while building the response.");
        nb_http_render_error(ctx, req->service, nb_req_header(req, "Accept"), resp);
        resp->nheaders = 0; /* the names stay allocated until req_free */
    }
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
        bool typed = resp->body || resp->raw;
        char *text = resp_text(resp, &len);
        r = text ? MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE) : NULL;
        if (!r) {
            free(text);
            req_free(req, resp);
            return MHD_NO;
        }
        if (len || typed)
            MHD_add_response_header(r, "Content-Type",
                                    resp->content_type ? resp->content_type : "application/json");
    }
    MHD_add_response_header(r, "x-openstack-request-id", ctx->request_id);
    if (req->service && req->service->request_id_header)
        MHD_add_response_header(r, req->service->request_id_header, ctx->request_id);
    for (int i = 0; i < resp->nheaders; i++)
        MHD_add_response_header(r, resp->header_names[i], resp->header_values[i]);
    nb_http_guard_answering(conn);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    log_request(conn, st, ctx, req, resp->status, len, t0);
    req_free(req, resp);
    if (st && len >= BIG_ANSWER && !file)
        st->big_answer = true;
    return ret;
}

/* A declared Content-Length over limit: 413 before any body byte. */
static bool declared_too_big(struct MHD_Connection *conn, uint64_t limit)
{
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    return cl && strtoull(cl, NULL, 10) > limit;
}

/* First call of a streamed request: prepare and call the handler. */
static void stream_begin(struct conn_state *st, struct MHD_Connection *conn, const char *method)
{
    st->t0 = nb_time_mono();
    nb_ctx_init(&st->ctx);
    st->req.method = method;
    st->req.path = st->path;
    st->req.trailing_slash = st->trailing_slash;
    st->req.service = nb_http_service_of(st->path);
    st->req.conn = conn;
    st->req.body = "";
    st->cap_bytes = stream_cap(st->req.service);
    const struct route *r = prepare(&st->ctx, &st->req, &st->resp);
    if (!r) {
        st->rendered = true;
        return;
    }
    if (declared_too_big(conn, st->cap_bytes)) {
        stream_too_big(st->req.service, &st->ctx);
        run_handler(&st->ctx, &st->req, &st->resp, -1);
        st->rendered = true;
        return;
    }
    int rc = r->fn(&st->ctx, &st->req, &st->resp);
    if (rc < 0 || nb_ctx_failed(&st->ctx) || !st->req.body_end) {
        run_handler(&st->ctx, &st->req, &st->resp, rc);
        st->rendered = true;
        return;
    }
    st->body_open = true;
}

/* One piece of a streamed body. */
static void stream_chunk(struct MHD_Connection *conn, struct conn_state *st, const char *data,
                         size_t len)
{
    if (st->rendered)
        return; /* discarded */
    st->received += len;
    bool over = st->received > st->cap_bytes;
    int rc = 0;
    if (over) {
        rc = stream_too_big(st->req.service, &st->ctx);
    } else if (st->req.body_chunk(&st->ctx, &st->req, data, len) < 0) {
        rc = -1;
    }
    if (rc < 0) {
        st->body_open = false;
        st->req.body_abort(&st->ctx, &st->req);
        run_handler(&st->ctx, &st->req, &st->resp, -1);
        st->rendered = true;
        if (over)
            answer_now(conn, st, &st->ctx, &st->req, &st->resp, st->t0);
    }
}

/* The body calls and the last call of a streamed request. */
static enum MHD_Result stream_answer(struct MHD_Connection *conn, struct conn_state *st,
                                     const char *upload_data, size_t *upload_size)
{
    if (*upload_size) {
        nb_http_guard_body(conn, *upload_size);
        if (!st->answered_now)
            stream_chunk(conn, st, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (!st->rendered) {
        st->body_open = false;
        run_handler(&st->ctx, &st->req, &st->resp, st->req.body_end(&st->ctx, &st->req, &st->resp));
        st->rendered = true;
    }
    st->streaming = false; /* answered: completed() has nothing left to abort */
    return send_response(conn, st, &st->ctx, &st->req, &st->resp, st->t0);
}

/* A piece of a buffered body; 0, or -1 when out of memory. */
static int buffer_chunk(struct conn_state *st, const char *data, size_t n)
{
    if (st->len + n > max_body) {
        st->too_big = true;
        return 0;
    }
    if (st->len + n + 1 > st->cap) {
        size_t cap = (st->len + n + 1) * 2;
        char *buf = realloc(st->buf, cap);
        if (!buf)
            return -1;
        st->buf = buf;
        st->cap = cap;
    }
    memcpy(st->buf + st->len, data, n);
    st->len += n;
    return 0;
}

/* Renders a 413 for a buffered request into a fresh context and resp. */
static void buffered_413(struct conn_state *st, struct MHD_Connection *conn, const char *method,
                         struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    nb_ctx_init(ctx);
    req->method = method;
    req->path = st->path;
    req->service = nb_http_service_of(st->path);
    req->conn = conn;
    req->body = "";
    nb_error(ctx, 413, NULL, "Request is too large.");
    nb_http_render_error(ctx, req->service, nb_req_header(req, "Accept"), resp);
}

/* The first call for a request: its headers are in. */
static enum MHD_Result request_begin(struct MHD_Connection *conn, struct conn_state *st,
                                     const char *url, const char *method)
{
    st->started = true;
    nb_http_guard_headers_in(conn);
    st->trailing_slash = set_path(st->path, sizeof(st->path), url);
    if (is_stream_route(method, st->path, st->trailing_slash)) {
        st->streaming = true;
        stream_begin(st, conn, method);
        if (st->rendered && declared_too_big(conn, st->cap_bytes)) {
            st->streaming = false; /* answered early: libmicrohttpd discards the body */
            return send_response(conn, st, &st->ctx, &st->req, &st->resp, st->t0);
        }
        return MHD_YES;
    }
    if (declared_too_big(conn, max_body)) {
        double t0 = nb_time_mono();
        struct nb_ctx ctx;
        struct nb_req req = {0};
        struct nb_resp resp = {0};
        buffered_413(st, conn, method, &ctx, &req, &resp);
        st->answered_now = true;
        return send_response(conn, st, &ctx, &req, &resp, t0);
    }
    return MHD_YES;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_size, void **con_cls)
{
    (void)cls;
    struct conn_state *st = *con_cls;
    if (!st)
        return MHD_NO; /* made by uri_logged() */
    if (!st->started) {
        nb_strlcpy(st->version, version, sizeof(st->version));
        return request_begin(conn, st, url, method);
    }
    if (st->streaming)
        return stream_answer(conn, st, upload_data, upload_size);
    if (*upload_size) {
        nb_http_guard_body(conn, *upload_size);
        bool was_big = st->too_big;
        if (!st->answered_now && buffer_chunk(st, upload_data, *upload_size) < 0)
            return MHD_NO;
        *upload_size = 0;
        if (st->too_big && !was_big && !st->answered_now) {
            /* a chunked body over the limit: answer at once */
            double t0 = nb_time_mono();
            struct nb_ctx ctx;
            struct nb_req req = {0};
            struct nb_resp resp = {0};
            buffered_413(st, conn, method, &ctx, &req, &resp);
            answer_now(conn, st, &ctx, &req, &resp, t0);
            req_free(&req, &resp);
        }
        return MHD_YES;
    }
    if (st->answered_now)
        return MHD_NO;

    double t0 = nb_time_mono();
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    struct nb_req req = {0};
    struct nb_resp resp = {0};
    req.method = method;
    req.path = st->path;
    req.trailing_slash = st->trailing_slash;
    req.service = nb_http_service_of(st->path);
    req.conn = conn;
    req.body = st->buf ? st->buf : "";
    if (st->buf)
        st->buf[st->len] = '\0';
    req.body_len = st->too_big ? max_body + 1 : st->len;
    handle(&ctx, &req, &resp);
    return send_response(conn, st, &ctx, &req, &resp, t0);
}

/* MHD_OPTION_URI_LOG_CALLBACK: the request line is in; its target, as
 * the client sent it, is what the access line shows. */
static void *uri_logged(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)cls;
    (void)conn;
    struct conn_state *st = calloc(1, sizeof(*st));
    if (st)
        st->uri = strdup(uri);
    return st;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    struct conn_state *st = *con_cls;
    nb_http_guard_completed(conn);
    if (st) {
        if (st->streaming) {
            /* the request ended before it was answered (client gone, timeout) */
            if (st->body_open) {
                nb_error(&st->ctx, 499, NULL, "The client closed the connection mid-upload.");
                st->req.body_abort(&st->ctx, &st->req);
            }
            if (!st->answered_now)
                nb_log(NB_LOG_WARNING, svc_logger(st->req.service), &st->ctx, NULL,
                       "\"%s %s\" aborted after %llu body bytes (termination code %d)",
                       st->req.method, st->req.path, (unsigned long long)st->received, (int)toe);
            req_free(&st->req, &st->resp);
        }
        bool trim = st->big_answer;
        free(st->uri);
        free(st->buf);
        free(st);
        if (trim)
            malloc_trim(0);
    }
    *con_cls = NULL;
}

/* GET/HEAD /healthcheck, on the API listener. */
int nb_http_healthcheck(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    struct nb_healthcheck hc;
    if (nb_healthcheck_answer(req->method, nb_req_header(req, "Accept"), &hc) < 0)
        return nb_error(ctx, 500, NULL, "Out of memory.");
    resp->status = hc.status;
    resp->raw = hc.body;
    resp->raw_len = hc.len;
    resp->content_type = hc.content_type;
    return 0;
}

/* GET /metrics: Prometheus's text format (common/metrics.h), no token, as
 * /healthcheck; [metrics] enabled = false answers 404. */
static int http_metrics(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)req;
    if (!nb_conf_bool("metrics", "enabled", true))
        return nb_error(ctx, 404, NULL, "The resource could not be found.");
    size_t len = 0;
    char *text = nb_metrics_render(&len);
    if (!text)
        return nb_error(ctx, 500, NULL, "Out of memory while rendering the metrics.");
    resp->raw = text;
    resp->raw_len = len;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    return 0;
}

void nb_http_init_routes(void)
{
    nb_http_route("GET", "/healthcheck", nb_http_healthcheck, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/metrics", http_metrics, NB_ROUTE_NO_AUTH);
}

int nb_http_start(const char *host, int port, int nthreads)
{
    max_body = (size_t)nb_conf_int("api", "max_request_body_size", 114688);
    struct nb_http_limits lim;
    if (nb_http_limits_load("api", 2048, &lim) < 0)
        return -1;
    /* [api] reuse_port: several control planes on one machine share the
     * address (SO_REUSEPORT), the kernel spreading connections over them */
    int fd = nb_http_listen(host, port, nb_conf_bool("api", "reuse_port", false));
    if (fd < 0)
        return -1;
    guard_ = nb_http_guard_new("api", &lim, reject, body_limit, NULL);
    const struct nb_http_callbacks cb = {answer, completed, uri_logged, NULL};
    if (!guard_ || nb_http_guard_serve(guard_, fd, (unsigned)nthreads, &cb) < 0) {
        fprintf(stderr, "nubo: cannot serve on %s:%d\n", host, port);
        nb_http_guard_free(guard_);
        guard_ = NULL;
        close(fd);
        return -1;
    }
    if (!base_url[0])
        snprintf(base_url, sizeof(base_url), "http://%s:%d", host, port);
    return 0;
}

void nb_http_stop(void)
{
    if (!guard_)
        return;
    nb_http_guard_stop(guard_);
    nb_http_guard_free(guard_);
    guard_ = NULL;
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
    req.service = nb_http_service_of(p);
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

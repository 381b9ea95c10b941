/* svc_client.c - placement and image calls of a compute agent: direct in an
 * all-in-one, else HTTP with a service user's token (see svc_client.h).
 *
 * HTTP goes through libcurl, one easy handle per request (requests are
 * rare: registrations, inventory changes, image fetches, snapshots). The
 * token and its catalog are cached process-wide under a mutex; a request
 * answered 401 drops the token and is retried once with a new one. Every
 * request carries the caller's request ID as X-OpenStack-Request-ID, so the
 * service's log lines of a boot carry the same ID as the agent's. */
#include "compute/agent/svc_client.h"

#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "image/image.h"
#include "placement/placement.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOGGER "nubo.compute.report"
#define PLACEMENT_VERSION "OpenStack-API-Version: placement 1.39"
#define RENEW_BEFORE_S 120.0
#define GENERATION_RETRIES 4

static bool remote;

/* The service user's token and catalog; guarded by tok_lock. */
static pthread_mutex_t tok_lock = PTHREAD_MUTEX_INITIALIZER;
static char *tok_id;
static double tok_expires;
static json_t *tok_catalog;

void nb_svc_init(bool local)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    remote = !local || !strcmp(nb_conf_str("compute", "use_service_apis", "auto"), "http");
    NB_INFO(LOGGER, NULL, NULL, "placement and image service reached %s",
            remote ? "over HTTP with the [service_user] credentials" : "in-process");
}

bool nb_svc_remote(void)
{
    return remote;
}

void nb_svc_shutdown(void)
{
    pthread_mutex_lock(&tok_lock);
    free(tok_id);
    tok_id = NULL;
    json_decref(tok_catalog);
    tok_catalog = NULL;
    pthread_mutex_unlock(&tok_lock);
}

/* ---- one HTTP exchange ---------------------------------------------------- */

/* Where a 200 response body goes instead of memory (image download). */
struct sink {
    int fd;
    EVP_MD_CTX *sha512, *md5;
    bool failed; /* a write failed: errno in err */
    int err;
};

struct exchange {
    /* request */
    const char *method, *url, *token, *body, *version;
    const char *request_id;
    FILE *upload; /* streamed request body (PUT of a file) */
    curl_off_t upload_size;
    struct sink *sink;
    /* response */
    CURL *curl;
    long status;
    struct nb_sbuf resp;
    char subject_token[1024];
    char content_md5[64];
    char err[CURL_ERROR_SIZE];
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *opaque)
{
    struct exchange *x = opaque;
    size_t n = size * nmemb;
    long status = 0;
    curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
    if (!x->sink || status != 200) {
        nb_sbuf_add(&x->resp, data, n);
        return n;
    }
    EVP_DigestUpdate(x->sink->sha512, data, n);
    EVP_DigestUpdate(x->sink->md5, data, n);
    for (size_t off = 0; off < n;) {
        ssize_t w = write(x->sink->fd, data + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            x->sink->failed = true;
            x->sink->err = errno;
            return 0; /* aborts the transfer */
        }
        off += (size_t)w;
    }
    return n;
}

/* Keeps X-Subject-Token and Content-MD5. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *opaque)
{
    struct exchange *x = opaque;
    size_t n = size * nmemb;
    static const struct {
        const char *name;
        size_t off, cap;
    } keep[] = {
        {"X-Subject-Token:", offsetof(struct exchange, subject_token), 1024},
        {"Content-MD5:", offsetof(struct exchange, content_md5), 64},
    };
    for (size_t k = 0; k < sizeof(keep) / sizeof(keep[0]); k++) {
        size_t len = strlen(keep[k].name);
        if (n <= len || strncasecmp(data, keep[k].name, len) != 0)
            continue;
        const char *v = data + len;
        size_t vn = n - len;
        while (vn && (*v == ' ' || *v == '\t'))
            v++, vn--;
        while (vn && (v[vn - 1] == '\r' || v[vn - 1] == '\n' || v[vn - 1] == ' '))
            vn--;
        char *dst = (char *)x + keep[k].off;
        if (vn >= keep[k].cap)
            vn = keep[k].cap - 1;
        memcpy(dst, v, vn);
        dst[vn] = '\0';
    }
    return n;
}

/* Runs the exchange; x->status is 0 when no answer came (x->err says why).
 * The response body (unless sunk) is in x->resp. */
static void perform(struct exchange *x)
{
    CURL *c = x->curl = curl_easy_init();
    x->status = 0;
    if (!c) {
        nb_strlcpy(x->err, "cannot initialise libcurl", sizeof(x->err));
        return;
    }
    struct curl_slist *h = curl_slist_append(NULL, "Accept: application/json");
    _cleanup_free_ char *auth = x->token ? nb_strdup_printf("X-Auth-Token: %s", x->token) : NULL;
    _cleanup_free_ char *rid = x->request_id && *x->request_id
                                   ? nb_strdup_printf("X-OpenStack-Request-ID: %s", x->request_id)
                                   : NULL;
    if (auth)
        h = curl_slist_append(h, auth);
    if (rid)
        h = curl_slist_append(h, rid);
    if (x->version)
        h = curl_slist_append(h, x->version);
    if (x->body)
        h = curl_slist_append(h, "Content-Type: application/json");
    if (x->upload) {
        h = curl_slist_append(h, "Content-Type: application/octet-stream");
        h = curl_slist_append(h, "Expect:");
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READDATA, x->upload);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, x->upload_size);
    } else if (x->body || strcmp(x->method, "GET")) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, x->body ? x->body : "");
    }
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, x->method);
    curl_easy_setopt(c, CURLOPT_URL, x->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, x->err);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    if (x->sink || x->upload) {
        /* data transfers: no total limit, but give up on a stalled one */
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    } else {
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    }
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &x->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    x->curl = NULL;
}

static void exchange_free(struct exchange *x)
{
    free(x->resp.s);
    x->resp.s = NULL;
    x->resp.len = x->resp.cap = 0;
}

/* The message of an error body: placement's {"errors": [{"detail"}]},
 * an OpenStack {"<name>": {"message"}}, else the text itself. Into out. */
static void error_text(const char *text, char *out, size_t n)
{
    _cleanup_json_ json_t *j = text ? nb_json_parse(text) : NULL;
    const char *m = nb_json_str(json_array_get(json_object_get(j, "errors"), 0), "detail");
    const char *k;
    json_t *v;
    if (!m && json_is_object(j))
        json_object_foreach (j, k, v)
            if ((m = nb_json_str(v, "message")))
                break;
    nb_strlcpy(out, m ? m : (text ? text : ""), n);
    /* one line, as it goes into faults and logs */
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

/* Records x's failure on ctx: the service's status and message, or 503
 * when it could not be reached. what names the call ("placement PUT …"). */
static int fail(struct nb_ctx *ctx, const struct exchange *x, const char *what)
{
    if (!x->status)
        return nb_error(ctx, 503, NULL, "%s: the service at %s cannot be reached: %s", what, x->url,
                        x->err);
    char msg[768];
    error_text(x->resp.s, msg, sizeof(msg));
    return nb_error(ctx, (int)x->status, NULL, "%s failed (%ld): %s", what, x->status, msg);
}

/* ---- the service user's token --------------------------------------------- */

static const char *su(const char *key, const char *def)
{
    const char *v = nb_conf_str("service_user", key, def);
    return v && *v ? v : def;
}

/* POSTs the password authentication; on success stores token and catalog
 * (tok_lock held). 0/-1 with the error on ctx. */
static int authenticate_locked(struct nb_ctx *ctx)
{
    const char *auth_url = su("auth_url", NULL), *user = su("username", NULL);
    const char *password = su("password", NULL);
    if (!auth_url || !user || !password)
        return nb_error(ctx, 500, NULL,
                        "The compute agent reaches placement and the image service over HTTP "
                        "and needs a service user: set [service_user] auth_url, username, "
                        "password and project_name in the configuration");
    size_t len = strlen(auth_url);
    while (len && auth_url[len - 1] == '/')
        len--;
    bool v3 = len >= 3 && !strncmp(auth_url + len - 3, "/v3", 3);
    _cleanup_free_ char *url =
        nb_strdup_printf("%.*s%s/auth/tokens", (int)len, auth_url, v3 ? "" : "/v3");
    _cleanup_json_ json_t *req = json_pack(
        "{s:{s:{s:[s], s:{s:{s:s, s:{s:s}, s:s}}}, s:{s:{s:s, s:{s:s}}}}}", "auth", "identity",
        "methods", "password", "password", "user", "name", user, "domain", "name",
        su("user_domain_name", "Default"), "password", password, "scope", "project", "name",
        su("project_name", "service"), "domain", "name", su("project_domain_name", "Default"));
    _cleanup_free_ char *body = nb_json_dump(req);
    struct exchange x = {.method = "POST", .url = url, .body = body, .request_id = ctx->request_id};
    perform(&x);
    if (x.status != 201 || !x.subject_token[0]) {
        int rc = fail(ctx, &x, "Authentication of the service user");
        exchange_free(&x);
        return rc;
    }
    _cleanup_json_ json_t *resp = nb_json_parse(x.resp.s);
    exchange_free(&x);
    json_t *token = json_object_get(resp, "token");
    const char *exp = nb_json_str(token, "expires_at");
    free(tok_id);
    tok_id = strdup(x.subject_token);
    tok_expires = exp ? nb_time_parse(exp) : nb_time_now() + 3600;
    json_decref(tok_catalog);
    tok_catalog = json_incref(json_object_get(token, "catalog"));
    NB_INFO(LOGGER, ctx, NULL, "Service user %s authenticated at %s (token expires %s)", user, url,
            exp ? exp : "?");
    return 0;
}

/* A copy of a valid token (renewed when it expires within two minutes),
 * or NULL after an error on ctx. Caller frees. */
static char *token_get(struct nb_ctx *ctx)
{
    pthread_mutex_lock(&tok_lock);
    char *t = NULL;
    if ((tok_id && nb_time_now() < tok_expires - RENEW_BEFORE_S) || authenticate_locked(ctx) == 0)
        t = strdup(tok_id);
    pthread_mutex_unlock(&tok_lock);
    return t;
}

/* Drops the token t after a 401 (unless another thread renewed it). */
static void token_drop(const char *t)
{
    pthread_mutex_lock(&tok_lock);
    if (tok_id && t && !strcmp(tok_id, t)) {
        free(tok_id);
        tok_id = NULL;
    }
    pthread_mutex_unlock(&tok_lock);
}

/* The URL of a service of type (without trailing slash): the section's
 * endpoint_override, else the catalog's endpoint with the section's
 * valid_interfaces (first match; default public) in [DEFAULT] region_name.
 * NULL after an error on ctx. Caller frees. */
static char *endpoint(struct nb_ctx *ctx, const char *section, const char *type)
{
    const char *over = nb_conf_str(section, "endpoint_override", NULL);
    char *url = NULL;
    if (over && *over) {
        url = strdup(over);
    } else {
        _cleanup_free_ char *t = token_get(ctx);
        if (!t)
            return NULL;
        const char *region =
            nb_conf_str(section, "region_name", nb_conf_str("DEFAULT", "region_name", "RegionOne"));
        char ifaces[128];
        nb_strlcpy(ifaces, nb_conf_str(section, "valid_interfaces", "public"), sizeof(ifaces));
        pthread_mutex_lock(&tok_lock);
        char *save = NULL;
        for (char *want = strtok_r(ifaces, ", ", &save); want && !url;
             want = strtok_r(NULL, ", ", &save)) {
            size_t i, k;
            json_t *svc, *ep;
            json_array_foreach (tok_catalog, i, svc) {
                if (strcmp(nb_json_str(svc, "type") ? nb_json_str(svc, "type") : "", type))
                    continue;
                json_array_foreach (json_object_get(svc, "endpoints"), k, ep) {
                    const char *iface = nb_json_str(ep, "interface");
                    const char *r = nb_json_str(ep, "region_id") ? nb_json_str(ep, "region_id")
                                                                 : nb_json_str(ep, "region");
                    if (!url && iface && !strcmp(iface, want) && (!r || !strcmp(r, region)) &&
                        nb_json_str(ep, "url"))
                        url = strdup(nb_json_str(ep, "url"));
                }
            }
        }
        pthread_mutex_unlock(&tok_lock);
        if (!url) {
            nb_error(ctx, 500, NULL,
                     "No %s endpoint (interface %s, region %s) in the service catalog; set "
                     "[%s] endpoint_override",
                     type, nb_conf_str(section, "valid_interfaces", "public"), region, section);
            return NULL;
        }
    }
    size_t n = strlen(url);
    while (n && url[n - 1] == '/')
        url[--n] = '\0';
    return url;
}

/* Performs x with the service token, renewing it once after a 401.
 * 0 when an answer came (any status), -1 after an error on ctx (no token,
 * or no answer), or -1 with nothing recorded when x's sink failed. */
static int authed(struct nb_ctx *ctx, struct exchange *x, const char *what)
{
    for (int attempt = 0;; attempt++) {
        _cleanup_free_ char *t = token_get(ctx);
        if (!t)
            return -1;
        x->token = t;
        x->request_id = ctx->request_id;
        if (x->upload)
            rewind(x->upload);
        perform(x);
        x->token = NULL;
        if (x->sink && x->sink->failed)
            return -1; /* a local write failed: the caller reports it */
        if (!x->status)
            return fail(ctx, x, what);
        if (x->status != 401 || attempt > 0)
            return 0;
        NB_INFO(LOGGER, ctx, NULL, "%s: token refused (401), authenticating again", what);
        token_drop(t);
        exchange_free(x);
    }
}

/* A JSON request to a service; the parsed body on an expected status
 * (new ref; json null for an empty body), else NULL with *status set (0
 * after an error recorded on ctx; else the status, the body's message in
 * msg). */
static json_t *call_json(struct nb_ctx *ctx, const char *method, const char *url,
                         const char *version, json_t *body, long *status, char *msg, size_t n)
{
    _cleanup_free_ char *text = body ? nb_json_dump(body) : NULL;
    struct exchange x = {.method = method, .url = url, .body = text, .version = version};
    _cleanup_free_ char *what = nb_strdup_printf("%s %s", method, url);
    *status = 0;
    if (authed(ctx, &x, what) < 0) {
        exchange_free(&x);
        return NULL;
    }
    *status = x.status;
    json_t *j = NULL;
    if (x.status >= 200 && x.status < 300)
        j = x.resp.s && x.resp.len ? nb_json_parse(x.resp.s) : json_null();
    else
        error_text(x.resp.s, msg, n);
    exchange_free(&x);
    return j;
}

/* ---- placement ------------------------------------------------------------ */

/* The provider's generation, creating or renaming it as needed; -1 after
 * an error on ctx. */
static long long rp_ensure(struct nb_ctx *ctx, const char *base, const char *uuid, const char *name)
{
    _cleanup_free_ char *url = nb_strdup_printf("%s/resource_providers/%s", base, uuid);
    char msg[512] = "";
    long st;
    for (int attempt = 0; attempt < GENERATION_RETRIES; attempt++) {
        _cleanup_json_ json_t *rp =
            call_json(ctx, "GET", url, PLACEMENT_VERSION, NULL, &st, msg, sizeof(msg));
        if (rp && !strcmp(nb_json_str(rp, "name") ? nb_json_str(rp, "name") : "", name))
            return nb_json_int(rp, "generation", 0);
        if (rp) {
            _cleanup_json_ json_t *upd =
                call_json(ctx, "PUT", url, PLACEMENT_VERSION, json_pack("{s:s}", "name", name), &st,
                          msg, sizeof(msg));
            if (upd)
                return nb_json_int(upd, "generation", 0);
        } else if (st == 404) {
            _cleanup_free_ char *create = nb_strdup_printf("%s/resource_providers", base);
            _cleanup_json_ json_t *body = json_pack("{s:s, s:s}", "uuid", uuid, "name", name);
            _cleanup_json_ json_t *made =
                call_json(ctx, "POST", create, PLACEMENT_VERSION, body, &st, msg, sizeof(msg));
            if (made) {
                NB_INFO(LOGGER, ctx, NULL, "Created resource provider %s (%s) in placement", name,
                        uuid);
                return nb_json_int(made, "generation", 0);
            }
        }
        if (st != 409) /* 409: created or renamed concurrently; look again */
            break;
    }
    if (st)
        nb_error(ctx, (int)st, NULL, "placement: resource provider %s (%s): %s", name, uuid, msg);
    return -1;
}

/* PUTs body (which gets "resource_provider_generation") to url, refreshing
 * the generation after a 409 concurrent update. The new generation, or -1
 * after an error on ctx. */
static long long rp_put_generation(struct nb_ctx *ctx, const char *base, const char *uuid,
                                   const char *url, json_t *body, long long gen, const char *what)
{
    char msg[512] = "";
    long st = 0;
    for (int attempt = 0; attempt < GENERATION_RETRIES; attempt++) {
        json_object_set_new(body, "resource_provider_generation", json_integer(gen));
        _cleanup_json_ json_t *r =
            call_json(ctx, "PUT", url, PLACEMENT_VERSION, body, &st, msg, sizeof(msg));
        if (r)
            return nb_json_int(r, "resource_provider_generation", gen + 1);
        if (st != 409 || strstr(msg, "in use"))
            break;
        NB_INFO(LOGGER, ctx, NULL, "%s of provider %s: generation %lld is stale, retrying", what,
                uuid, gen);
        _cleanup_free_ char *rp_url = nb_strdup_printf("%s/resource_providers/%s", base, uuid);
        _cleanup_json_ json_t *rp =
            call_json(ctx, "GET", rp_url, PLACEMENT_VERSION, NULL, &st, msg, sizeof(msg));
        if (!rp)
            break;
        gen = nb_json_int(rp, "generation", 0);
    }
    if (st)
        nb_error(ctx, (int)st, NULL, "placement: %s of provider %s: %s", what, uuid, msg);
    return -1;
}

/* Creates the custom traits among traits (PUT /traits/{name}). 0/-1. */
static int custom_traits(struct nb_ctx *ctx, const char *base, json_t *traits)
{
    size_t i;
    json_t *t;
    json_array_foreach (traits, i, t) {
        const char *name = json_string_value(t);
        if (!name || !nb_startswith(name, "CUSTOM_"))
            continue;
        _cleanup_free_ char *url = nb_strdup_printf("%s/traits/%s", base, name);
        char msg[512] = "";
        long st;
        _cleanup_json_ json_t *r =
            call_json(ctx, "PUT", url, PLACEMENT_VERSION, NULL, &st, msg, sizeof(msg));
        if (!r)
            return st ? nb_error(ctx, (int)st, NULL, "placement: trait %s: %s", name, msg) : -1;
    }
    return 0;
}

static int placement_http(struct nb_ctx *ctx, const char *uuid, const char *name,
                          json_t *inventories, json_t *traits)
{
    _cleanup_free_ char *base = endpoint(ctx, "placement", "placement");
    if (!base)
        return -1;
    long long gen = rp_ensure(ctx, base, uuid, name);
    if (gen < 0)
        return -1;
    _cleanup_free_ char *inv_url =
        nb_strdup_printf("%s/resource_providers/%s/inventories", base, uuid);
    _cleanup_json_ json_t *inv = json_pack("{s:O}", "inventories", inventories);
    if ((gen = rp_put_generation(ctx, base, uuid, inv_url, inv, gen, "inventory update")) < 0)
        return -1;
    if (custom_traits(ctx, base, traits) < 0)
        return -1;
    _cleanup_free_ char *tr_url = nb_strdup_printf("%s/resource_providers/%s/traits", base, uuid);
    _cleanup_json_ json_t *tr = json_pack("{s:O}", "traits", traits);
    return rp_put_generation(ctx, base, uuid, tr_url, tr, gen, "traits update") < 0 ? -1 : 0;
}

int nb_svc_placement_report(struct nb_ctx *ctx, const char *rp_uuid, const char *name,
                            json_t *inventories, json_t *traits)
{
    if (remote)
        return placement_http(ctx, rp_uuid, name, inventories, traits);
    return nb_placement_ensure_provider(ctx, rp_uuid, name) < 0 ||
                   nb_placement_set_inventories(ctx, rp_uuid, inventories) < 0 ||
                   nb_placement_set_traits(ctx, rp_uuid, traits) < 0
               ? -1
               : 0;
}

/* ---- image service -------------------------------------------------------- */

/* The image URL ".../v2/images/<id><suffix>", or NULL after an error. */
static char *image_url(struct nb_ctx *ctx, const char *image_id, const char *suffix)
{
    _cleanup_free_ char *base = endpoint(ctx, "glance", "image");
    return base ? nb_strdup_printf("%s/v2/images/%s%s", base, image_id, suffix) : NULL;
}

static json_t *image_show_http(struct nb_ctx *ctx, const char *image_id)
{
    _cleanup_free_ char *url = image_url(ctx, image_id, "");
    if (!url)
        return NULL;
    char msg[512] = "";
    long st;
    _cleanup_json_ json_t *img = call_json(ctx, "GET", url, NULL, NULL, &st, msg, sizeof(msg));
    if (!img) {
        if (st == 404)
            nb_error(ctx, 404, NULL, "Image %s could not be found.", image_id);
        else if (st)
            nb_error(ctx, (int)st, NULL, "image service: GET %s failed (%ld): %s", url, st, msg);
        return NULL;
    }
    const char *status = nb_json_str(img, "status");
    if (!status || strcmp(status, "active")) {
        nb_error(ctx, 409, NULL, "Image %s is not active (status %s).", image_id,
                 status ? status : "unknown");
        return NULL;
    }
    static const char *const keys[] = {
        "id",           "name",     "disk_format",  "container_format", "size",
        "virtual_size", "checksum", "os_hash_algo", "os_hash_value"};
    json_t *info = json_object();
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        json_t *v = json_object_get(img, keys[i]);
        json_object_set(info, keys[i], v ? v : json_null());
    }
    return info;
}

json_t *nb_svc_image_show(struct nb_ctx *ctx, const char *image_id)
{
    if (remote)
        return image_show_http(ctx, image_id);
    json_t *info = NULL;
    int fd = nb_image_data_open(ctx, image_id, &info);
    if (fd < 0)
        return NULL;
    close(fd);
    return info;
}

static void hex_of(EVP_MD_CTX *md, char *hex, size_t cap)
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    EVP_DigestFinal_ex(md, d, &dl);
    hex[0] = '\0';
    for (unsigned i = 0; i < dl && 2 * i + 2 < cap; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

/* Copies the local image file fd into sink. 0/-1 with the error on ctx. */
static int copy_local(struct nb_ctx *ctx, int fd, struct sink *s)
{
    /* on the heap: a thread-local buffer would sit in every thread's
     * static TLS, 1 MiB of resident memory per thread of the process */
    enum { BUF = 1 << 20 };
    _cleanup_free_ char *buf = malloc(BUF);
    if (!buf)
        return nb_error(ctx, 500, NULL, "out of memory copying the image data");
    for (;;) {
        ssize_t n = read(fd, buf, BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return nb_error(ctx, 500, NULL, "reading the image data failed: %s", strerror(errno));
        if (n == 0)
            return 0;
        EVP_DigestUpdate(s->sha512, buf, (size_t)n);
        EVP_DigestUpdate(s->md5, buf, (size_t)n);
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(s->fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                s->failed = true;
                s->err = errno;
                return -1;
            }
            off += w;
        }
    }
}

/* GET /file into the sink; checks Content-MD5. 0/-1 with the error on ctx. */
static int download_http(struct nb_ctx *ctx, const char *image_id, struct sink *s)
{
    _cleanup_free_ char *url = image_url(ctx, image_id, "/file");
    if (!url)
        return -1;
    struct exchange x = {.method = "GET", .url = url, .sink = s};
    _cleanup_free_ char *what = nb_strdup_printf("Download of image %s", image_id);
    int rc = authed(ctx, &x, what);
    if (rc == 0 && x.status == 204)
        rc = nb_error(ctx, 404, NULL, "Image %s has no data.", image_id);
    else if (rc == 0 && x.status != 200)
        rc = fail(ctx, &x, what);
    if (rc == 0 && x.content_md5[0]) {
        char md5[33];
        hex_of(s->md5, md5, sizeof(md5));
        if (strcasecmp(md5, x.content_md5) != 0)
            rc = nb_error(ctx, 500, NULL,
                          "Image %s: the data received has MD5 %s, the image service sent "
                          "checksum %s: the download was corrupted",
                          image_id, md5, x.content_md5);
    }
    exchange_free(&x);
    return rc;
}

int nb_svc_image_download(struct nb_ctx *ctx, const char *image_id, const char *path, char hex[129])
{
    struct sink s = {.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (s.fd < 0)
        return nb_error(ctx, 500, NULL, "cannot create %s: %s", path, strerror(errno));
    s.sha512 = EVP_MD_CTX_new();
    s.md5 = EVP_MD_CTX_new();
    EVP_DigestInit_ex(s.sha512, EVP_sha512(), NULL);
    EVP_DigestInit_ex(s.md5, EVP_md5(), NULL);
    int rc;
    if (remote) {
        rc = download_http(ctx, image_id, &s);
    } else {
        json_t *info = NULL;
        int fd = nb_image_data_open(ctx, image_id, &info);
        json_decref(info);
        rc = fd < 0 ? -1 : copy_local(ctx, fd, &s);
        if (fd >= 0)
            close(fd);
    }
    if (s.failed)
        rc = nb_error(ctx, 507, NULL, "writing %s failed: %s", path, strerror(s.err));
    if (rc == 0 && fsync(s.fd) < 0)
        rc = nb_error(ctx, 507, NULL, "writing %s failed: %s", path, strerror(errno));
    close(s.fd);
    hex_of(s.sha512, hex, 129);
    EVP_MD_CTX_free(s.sha512);
    EVP_MD_CTX_free(s.md5);
    return rc;
}

static int upload_http(struct nb_ctx *ctx, const char *image_id, const char *path)
{
    _cleanup_free_ char *url = image_url(ctx, image_id, "/file");
    if (!url)
        return -1;
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f || fstat(fileno(f), &sb) < 0) {
        int e = errno;
        if (f)
            fclose(f);
        return nb_error(ctx, 500, NULL, "cannot read %s: %s", path, strerror(e));
    }
    struct exchange x = {
        .method = "PUT", .url = url, .upload = f, .upload_size = (curl_off_t)sb.st_size};
    _cleanup_free_ char *what = nb_strdup_printf("Upload of image %s", image_id);
    int rc = authed(ctx, &x, what);
    if (rc == 0 && x.status != 204 && x.status != 200)
        rc = fail(ctx, &x, what);
    exchange_free(&x);
    fclose(f);
    return rc;
}

int nb_svc_image_upload(struct nb_ctx *ctx, const char *image_id, const char *path)
{
    return remote ? upload_http(ctx, image_id, path) : nb_image_import_file(ctx, image_id, path);
}

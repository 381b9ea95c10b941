/* server.c - the metadata API (role "metadata"): Nova's nova-api-metadata
 * as it runs behind the Neutron metadata proxy, on its own listener
 * ([metadata] listen, port; default 127.0.0.1:8775), not the main router.
 *
 * A request names its instance with X-Instance-ID and X-Tenant-ID and
 * proves it with X-Instance-ID-Signature, the hex HMAC-SHA256 of the
 * instance ID under [neutron] metadata_proxy_shared_secret (what a proxy in
 * front of the guest adds; the guest never knows the secret). As Nova's
 * handler: "/" (the EC2 version list) needs nothing; a missing header is
 * 400, a wrong signature 403, an instance that does not exist, is deleted
 * or belongs to another project 404. Where Nova would accept the HMAC under
 * an empty key, nubo refuses everything (403) until a secret is set.
 *
 * GET (and HEAD) are served, and POST of the password (Nova's
 * password.py: /openstack/<2013-04-04 or later>/password, a body of at most
 * 256 bytes, 409 once one is set; its answer is an empty 200). Every
 * request is logged to nubo-metadata.log. GET/HEAD /healthcheck answers as
 * oslo.middleware's healthcheck does, without headers.
 *
 * Guests share this listener, so it has the API's guard (http_guard.h) with
 * its own limits from [metadata]: max_connections (default 512),
 * max_connections_per_ip, header_timeout, … A malformed request head is
 * answered with webob's plain-text page, as every error here. */
#include "compute/metadata/metadata.h"
#include "compute/metadata/internal.h"
#include "compute/objects/request_spec.h"

#include "common/cleanup.h"
#include "common/config.h"
#include "common/healthcheck.h"
#include "common/http_guard.h"
#include "common/json.h"
#include "common/log.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "compute/compute.h"
#include "db/db.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MD_SERVER_LOG "nubo.metadata.server"

/* The running listener and the database it reads; set by start, cleared by
 * stop. */
static struct {
    struct nb_http_guard *guard;
    struct nb_db *db;
} md;

void nb_md_sign(const char *secret, const char *id, char out[65])
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)id, strlen(id), mac,
         &len);
    for (unsigned int i = 0; i < len && i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
    out[64] = '\0';
}

bool nb_md_signature_ok(const char *secret, const char *id, const char *signature)
{
    if (!secret || !*secret || !id || !signature || strlen(signature) != 64)
        return false;
    char expected[65];
    nb_md_sign(secret, id, expected);
    bool ok = CRYPTO_memcmp(expected, signature, 64) == 0;
    OPENSSL_cleanse(expected, sizeof(expected));
    return ok;
}

/* Checks the headers and the signature (Nova's _handle_instance_id_request
 * and _validate_shared_secret). 0, or -1 after nb_error 400/403. */
static int authenticate(struct nb_ctx *ctx, const struct nb_md_request *rq)
{
    const char *secret = nb_conf_str("neutron", "metadata_proxy_shared_secret", NULL);
    if (!secret || !*secret)
        return nb_error(ctx, 403, NULL,
                        "[neutron] metadata_proxy_shared_secret is not configured: no request "
                        "can be trusted.");
    if (!rq->instance_id)
        return nb_error(ctx, 400, NULL, "X-Instance-ID header is missing from request.");
    if (!rq->signature)
        return nb_error(ctx, 400, NULL, "X-Instance-ID-Signature header is missing from request.");
    if (!rq->tenant_id)
        return nb_error(ctx, 400, NULL, "X-Tenant-ID header is missing from request.");
    if (!nb_md_signature_ok(secret, rq->instance_id, rq->signature))
        return nb_error(ctx, 403, NULL, "Invalid proxy request signature.");
    return 0;
}

/* What the documents use beyond the agent view (see internal.h), from the
 * row and the instance's system metadata. */
static int add_row_extras(struct nb_db *db, struct nb_ctx *ctx, json_t *inst, const json_t *row)
{
    static const char *const cols[] = {"reservation_id", "root_device_name"};
    for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++)
        if (nb_json_str(row, cols[i]))
            json_object_set_new(inst, cols[i], json_string(nb_json_str(row, cols[i])));
    _cleanup_json_ json_t *stored = nb_json_parse(nb_json_str(row, "request_spec"));
    if (json_is_array(json_object_get(stored, "security_groups"))) {
        struct nb_request_spec spec;
        nb_request_spec_from_json(&spec, stored);
        json_object_set(inst, "security_groups", spec.security_groups);
        nb_request_spec_free(&spec);
    }
    /* a password the guest posted, in password_0..3 as Nova stores it */
    _cleanup_json_ json_t *rows =
        nb_db_rows(db, ctx,
                   "SELECT value FROM instance_system_metadata WHERE instance_uuid = ? AND "
                   "deleted = 0 AND \"key\" LIKE 'password!_%' ESCAPE '!' ORDER BY \"key\"",
                   "s", nb_json_str(row, "uuid"));
    if (!rows)
        return -1;
    struct nb_sbuf pw = {0};
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        if (nb_json_str(r, "value"))
            nb_sbuf_str(&pw, nb_json_str(r, "value"));
    if (pw.len)
        json_object_set_new(inst, "password", json_string(pw.s));
    free(pw.s);
    return 0;
}

/* The instance the request is for, as the documents want it. NULL after
 * nb_error (404 when it does not exist for that project). New ref. */
static json_t *load_instance(struct nb_db *db, struct nb_ctx *ctx, const char *uuid,
                             const char *tenant)
{
    _cleanup_json_ json_t *row =
        nb_db_row(db, ctx, "SELECT * FROM instances WHERE uuid = ? AND deleted = 0", "s", uuid);
    if (!row) {
        if (!nb_ctx_failed(ctx))
            nb_error(ctx, 404, NULL, "Instance %s could not be found.", uuid);
        return NULL;
    }
    const char *project = nb_json_str(row, "project_id");
    if (!project || strcmp(project, tenant)) {
        nb_error(ctx, 404, NULL, "Tenant_id %s does not match tenant_id of instance %s.", tenant,
                 uuid);
        return NULL;
    }
    json_t *inst = nb_instance_agent_view(db, ctx, row);
    if (nb_ctx_failed(ctx) || add_row_extras(db, ctx, inst, row) < 0) {
        json_decref(inst);
        return NULL;
    }
    return inst;
}

/* True for "/", "//", …: the one path Nova answers without a signature. */
static bool is_root(const char *path)
{
    return !path || !*path || strspn(path, "/") == strlen(path);
}

/* True for /openstack/<version>/password with a version that has it
 * (Grizzly's 2013-04-04 and later, or "latest"). */
static bool is_password_path(const char *path)
{
    char version[32];
    int n = 0;
    if (sscanf(path, "/openstack/%31[^/]/password%n", version, &n) != 1 || path[n] != '\0')
        return false;
    return !strcmp(version, "latest") ||
           (strlen(version) == 10 && strcmp(version, "2013-04-04") >= 0);
}

/* POST /openstack/<version>/password: stores the guest's password once. */
static int post_password(struct nb_db *db, struct nb_ctx *ctx, const struct nb_md_request *rq,
                         const json_t *inst, struct nb_md_response *rs)
{
    const char *pw = nb_json_str(inst, "password");
    if (pw && *pw)
        return nb_error(ctx, 409, NULL,
                        "There was a conflict when trying to complete your request.");
    if (rq->body_len > 256)
        return nb_error(ctx, 400, NULL, "Request is too large.");
    if (nb_md_password_set(db, ctx, nb_json_str(inst, "uuid"), rq->body ? rq->body : "",
                           rq->body_len) < 0)
        return -1;
    rs->doc.data = strdup("");
    rs->doc.len = 0;
    rs->doc.content_type = "text/html; charset=UTF-8";
    return 0;
}

static int serve(struct nb_db *db, struct nb_ctx *ctx, const struct nb_md_request *rq,
                 struct nb_md_response *rs)
{
    bool post = !strcmp(rq->method, "POST") && rq->path && is_password_path(rq->path);
    if (strcmp(rq->method, "GET") && strcmp(rq->method, "HEAD") && !post)
        return nb_error(ctx, 405, NULL, "The method %s is not allowed for this resource.",
                        rq->method);
    if (is_root(rq->path))
        return nb_md_lookup(ctx, NULL, NULL, NULL, "/", &rs->doc);
    if (authenticate(ctx, rq) < 0)
        return -1;
    nb_strlcpy(rs->instance, rq->instance_id, sizeof(rs->instance));
    _cleanup_json_ json_t *inst = load_instance(db, ctx, rq->instance_id, rq->tenant_id);
    if (!inst)
        return -1;
    if (post)
        return post_password(db, ctx, rq, inst, rs);
    /* network_data.json comes from the view's network_info (netdata.c) */
    return nb_md_lookup(ctx, inst, NULL, rq->forwarded_for, rq->path, &rs->doc);
}

static const char *status_title(int status)
{
    switch (status) {
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Request Entity Too Large";
    case 414: return "Request-URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 505: return "HTTP Version Not Supported";
    default: return "Internal Server Error";
    }
}

void nb_md_serve(struct nb_db *db, struct nb_ctx *ctx, const struct nb_md_request *rq,
                 struct nb_md_response *rs)
{
    memset(rs, 0, sizeof(*rs));
    if (serve(db, ctx, rq, rs) == 0) {
        rs->status = 200;
        return;
    }
    free(rs->doc.data);
    rs->status = nb_ctx_failed(ctx) ? nb_ctx_status(ctx) : 500;
    /* webob's plain-text error page: status line, blank line, why */
    rs->doc.data = nb_strdup_printf("%d %s\n\n%s\n", rs->status, status_title(rs->status),
                                    nb_ctx_failed(ctx) ? nb_ctx_message(ctx) : "Unknown error.");
    rs->doc.len = strlen(rs->doc.data);
    rs->doc.content_type = "text/plain";
}

static void log_request(struct MHD_Connection *conn, const struct nb_ctx *ctx,
                        const struct nb_md_request *rq, const struct nb_md_response *rs, double t0)
{
    char addr[64];
    /* a refused proxy is worth a warning; a path the guest probes and
     * does not find is not */
    enum nb_log_level lvl = rs->status >= 500                        ? NB_LOG_ERROR
                            : rs->status == 400 || rs->status == 403 ? NB_LOG_WARNING
                                                                     : NB_LOG_INFO;
    bool why = rs->status >= 400 && nb_ctx_message(ctx)[0];
    nb_log(lvl, MD_LOG, ctx, rs->instance[0] ? rs->instance : NULL,
           "%s \"%s %s\" status: %d len: %zu time: %.4f%s%s",
           nb_http_guard_peer(conn, addr, sizeof(addr)), rq->method, rq->path, rs->status,
           rs->doc.len, nb_time_mono() - t0, why ? ": " : "", why ? nb_ctx_message(ctx) : "");
}

static enum MHD_Result healthcheck(struct MHD_Connection *conn, const char *method)
{
    struct nb_healthcheck hc;
    if (nb_healthcheck_answer(method, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept"),
                              &hc) < 0)
        return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(hc.len, hc.body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(hc.body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", hc.content_type);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)hc.status, r);
    MHD_destroy_response(r);
    return ret;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)toe;
    struct nb_sbuf *body = *con_cls;
    if (body)
        free(body->s);
    free(body);
    *con_cls = NULL;
    nb_http_guard_completed(conn);
}

/* The guard refused a request head: webob's plain-text page, logged. */
static char *reject(void *opaque, const struct nb_http_head *head, int status, const char *msg,
                    size_t *len)
{
    (void)opaque;
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    nb_error(&ctx, status, NULL, "%s", msg);
    _cleanup_free_ char *body =
        nb_strdup_printf("%d %s\n\n%s\n", status, status_title(status), msg);
    char *text = nb_strdup_printf("HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
                                  "Content-Length: %zu\r\nx-openstack-request-id: %s\r\n"
                                  "Connection: close\r\n\r\n%s",
                                  status, status_title(status), strlen(body), ctx.request_id, body);
    *len = text ? strlen(text) : 0;
    nb_log(NB_LOG_WARNING, MD_LOG, &ctx, NULL, "%s \"%s %s\" status: %d len: %zu: %s", head->peer,
           head->method ? head->method : "-", head->target ? head->target : "-", status,
           strlen(body), msg);
    return text;
}

/* Only a posted password (256 bytes at most) has a body worth reading. */
static uint64_t body_limit(void *opaque, const char *method, const char *target)
{
    (void)opaque;
    (void)method;
    (void)target;
    return 65536;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_size, void **con_cls)
{
    (void)cls;
    (void)version;
    if (!*con_cls) { /* the headers have arrived: the body's buffer */
        if (!(*con_cls = calloc(1, sizeof(struct nb_sbuf))))
            return MHD_NO;
        nb_http_guard_headers_in(conn);
        return MHD_YES;
    }
    struct nb_sbuf *body = *con_cls;
    if (*upload_size) { /* kept up to 4 KiB (a password is 256 bytes at most) */
        nb_http_guard_body(conn, *upload_size);
        if (body->len < 4096)
            nb_sbuf_add(body, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    nb_http_guard_answering(conn);
    if (strcmp(url, "/healthcheck") == 0)
        return healthcheck(conn, method);
    double t0 = nb_time_mono();
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    const struct nb_md_request rq = {
        .method = method,
        .path = url,
        .instance_id = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Instance-ID"),
        .tenant_id = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Tenant-ID"),
        .signature = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Instance-ID-Signature"),
        .forwarded_for = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Forwarded-For"),
        .body = body->s,
        .body_len = body->len,
    };
    struct nb_md_response rs;
    nb_md_serve(md.db, &ctx, &rq, &rs);
    log_request(conn, &ctx, &rq, &rs, t0);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(rs.doc.len, rs.doc.data, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(rs.doc.data);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", rs.doc.content_type);
    MHD_add_response_header(r, "x-openstack-request-id", ctx.request_id);
    if (rs.status == 405)
        MHD_add_response_header(r, "Allow", "GET, HEAD, POST");
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)rs.status, r);
    MHD_destroy_response(r);
    return ret;
}

int nb_metadata_start(struct nb_env *env)
{
    const char *host = nb_conf_str("metadata", "listen", "127.0.0.1");
    long port = nb_conf_int("metadata", "port", 8775);
    long workers = nb_conf_int("metadata", "workers", 4);
    if (!env->db) {
        fprintf(stderr, "nubo: the metadata role needs the database\n");
        return -1;
    }
    struct nb_http_limits lim;
    if (port < 1 || port > 65535 || workers < 1) {
        fprintf(stderr, "nubo: bad [metadata] port %ld or workers %ld\n", port, workers);
        return -1;
    }
    if (nb_http_limits_load("metadata", 512, &lim) < 0)
        return -1;
    /* [metadata] reuse_port, as [api] reuse_port unless set */
    bool reuse = nb_conf_bool("metadata", "reuse_port", nb_conf_bool("api", "reuse_port", false));
    int fd = nb_http_listen(host, (int)port, reuse);
    if (fd < 0) {
        NB_ERROR(MD_SERVER_LOG, NULL, NULL, "cannot listen on %s:%ld", host, port);
        return -1;
    }
    md.db = env->db;
    md.guard = nb_http_guard_new("metadata", &lim, reject, body_limit, NULL);
    const struct nb_http_callbacks cb = {answer, completed, NULL, NULL};
    if (!md.guard || nb_http_guard_serve(md.guard, fd, (unsigned)workers, &cb) < 0) {
        fprintf(stderr, "nubo: the metadata API cannot listen on %s:%ld\n", host, port);
        NB_ERROR(MD_SERVER_LOG, NULL, NULL, "cannot listen on %s:%ld", host, port);
        nb_http_guard_free(md.guard);
        md.guard = NULL;
        close(fd);
        return -1;
    }
    const char *secret = nb_conf_str("neutron", "metadata_proxy_shared_secret", NULL);
    if (!secret || !*secret)
        NB_WARN(MD_SERVER_LOG, NULL, NULL,
                "[neutron] metadata_proxy_shared_secret is not configured: every request but "
                "GET / will be refused");
    NB_INFO(MD_SERVER_LOG, NULL, NULL, "metadata API listening on %s:%ld (%ld workers)", host, port,
            workers);
    return 0;
}

void nb_metadata_stop(void)
{
    if (!md.guard)
        return;
    nb_http_guard_stop(md.guard);
    nb_http_guard_free(md.guard);
    md.guard = NULL;
    md.db = NULL;
}

/* request.c - the placement module's state and the HTTP plumbing every
 * handler shares (declared in request.h): admin-only policy, Content-Type
 * and JSON body checks (415/400), "JSON does not validate" messages in the
 * shape of jsonschema's, query-string collection and validation, and the
 * Cache-Control/Last-Modified headers of microversion 1.15. */
#include "placement/placement.h"

#include "common/cleanup.h"
#include "common/http.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "placement/internal.h"
#include "placement/request.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Set once by nb_placement_init before any route can run; read-only after. */
static struct nb_db *g_db;

struct nb_db *plc_db(void)
{
    return g_db;
}

void plc_set_db(struct nb_db *db)
{
    g_db = db;
}

int plc_mv(const struct nb_ctx *ctx)
{
    if (ctx->mv_major != 1)
        return 0;
    return ctx->mv_minor;
}

int plc_not_at_version(struct nb_ctx *ctx)
{
    return nb_error(ctx, 404, PLC_ERR_DEFAULT, "The resource could not be found.");
}

int plc_require_admin(struct nb_ctx *ctx, const char *rule)
{
    if (ctx->is_admin || ctx->system)
        return 0;
    return nb_error(ctx, 403, PLC_ERR_DEFAULT, "Policy does not allow %s to be performed.", rule);
}

json_t *plc_body(struct nb_ctx *ctx, struct nb_req *req)
{
    const char *ct = nb_req_header(req, "Content-Type");
    char media[128] = "None";
    if (ct && *ct) {
        size_t n = strcspn(ct, ";");
        while (n > 0 && isspace((unsigned char)ct[n - 1]))
            n--;
        if (n >= sizeof(media))
            n = sizeof(media) - 1;
        memcpy(media, ct, n);
        media[n] = '\0';
    }
    if (strcasecmp(media, "application/json") != 0) {
        nb_error(ctx, 415, PLC_ERR_DEFAULT,
                 "The media type %s is not supported, use application/json", media);
        return NULL;
    }
    if (req->json)
        return req->json;
    json_error_t jerr;
    json_t *j = json_loads(req->body ? req->body : "", JSON_DECODE_ANY, &jerr);
    if (!j) {
        nb_error(ctx, 400, PLC_ERR_DEFAULT, "Malformed JSON: %s", jerr.text);
        return NULL;
    }
    /* Valid JSON the server did not keep (a bare list or scalar): hand it
     * over to the request so its lifetime matches req->json's. */
    req->json = j;
    return j;
}

void plc_cache_headers(const struct nb_ctx *ctx, struct nb_resp *resp)
{
    if (plc_mv(ctx) < 15)
        return;
    char buf[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    nb_resp_header(resp, "Cache-Control", "no-cache");
    nb_resp_header(resp, "Last-Modified", buf);
}

void plc_location(struct nb_resp *resp, const char *path)
{
    const char *base = nb_http_base_url();
    _cleanup_free_ char *url = nb_strdup_printf("%s%s", base ? base : "", path);
    nb_resp_header(resp, "Location", url);
}

static void query_collect(void *opaque, const char *key, const char *value)
{
    json_t *q = opaque;
    json_t *arr = json_object_get(q, key);
    if (!arr) {
        arr = json_array();
        json_object_set_new(q, key, arr);
    }
    json_array_append_new(arr, json_string(value ? value : ""));
}

json_t *plc_query(const struct nb_req *req)
{
    json_t *q = json_object();
    nb_req_query_each(req, query_collect, q);
    return q;
}

const char *plc_query_last(json_t *q, const char *key)
{
    json_t *arr = json_object_get(q, key);
    size_t n = json_array_size(arr);
    if (n == 0)
        return NULL;
    return json_string_value(json_array_get(arr, n - 1));
}

int plc_query_check(struct nb_ctx *ctx, json_t *q, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach (q, key, v) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(*a, key) == 0;
        if (!ok)
            return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                            "Invalid query string parameters: Additional properties are "
                            "not allowed ('%s' was unexpected)",
                            key);
    }
    return 0;
}

int plc_schema_error(struct nb_ctx *ctx, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return nb_error(ctx, 400, PLC_ERR_DEFAULT, "JSON does not validate: %s", msg);
}

int plc_check_object(struct nb_ctx *ctx, json_t *obj, const char *const *allowed,
                     const char *const *required)
{
    if (!json_is_object(obj)) {
        _cleanup_free_ char *s = json_dumps(obj, JSON_ENCODE_ANY | JSON_COMPACT);
        return plc_schema_error(ctx, "%s is not of type 'object'", s ? s : "null");
    }
    for (const char *const *r = required; r && *r; r++)
        if (!json_object_get(obj, *r))
            return plc_schema_error(ctx, "'%s' is a required property", *r);
    if (allowed) {
        const char *key;
        json_t *v;
        json_object_foreach (obj, key, v) {
            bool ok = false;
            for (const char *const *a = allowed; *a && !ok; a++)
                ok = strcmp(*a, key) == 0;
            if (!ok)
                return plc_schema_error(
                    ctx, "Additional properties are not allowed ('%s' was unexpected)", key);
        }
    }
    return 0;
}

bool plc_json_is_int(const json_t *v, long long *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return true;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == (double)(long long)d) {
            *out = (long long)d;
            return true;
        }
    }
    return false;
}

int plc_get_int(struct nb_ctx *ctx, json_t *obj, const char *key, long long min, long long max,
                long long *out)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    long long x;
    if (!plc_json_is_int(v, &x)) {
        _cleanup_free_ char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        return plc_schema_error(ctx, "%s is not of type 'integer'", s ? s : "null");
    }
    if (x < min)
        return plc_schema_error(ctx, "%lld is less than the minimum of %lld", x, min);
    if (x > max)
        return plc_schema_error(ctx, "%lld is greater than the maximum of %lld", x, max);
    *out = x;
    return 0;
}

bool plc_valid_rc_name(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

bool plc_valid_custom_name(const char *s)
{
    return s && strncmp(s, "CUSTOM_", 7) == 0 && s[7] && plc_valid_rc_name(s + 7);
}

bool plc_uuid_normalize(const char *s, char out[37])
{
    char hex[33];
    int n = 0;
    if (!s)
        return false;
    /* Accept the forms uuidutils.is_uuid_like does: dashed or plain hex,
     * optionally in braces or with a urn:uuid: prefix. */
    if (strncasecmp(s, "urn:uuid:", 9) == 0)
        s += 9;
    size_t len = strlen(s);
    if (len >= 2 && s[0] == '{' && s[len - 1] == '}') {
        s++;
        len -= 2;
    }
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '-')
            continue;
        if (!isxdigit((unsigned char)c) || n >= 32)
            return false;
        hex[n++] = (char)tolower((unsigned char)c);
    }
    if (n != 32)
        return false;
    hex[32] = '\0';
    snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
    /* uuidutils also wants the dashed form, if dashed, to match exactly. */
    if (strchr(s, '-') && (len != 36 || strncasecmp(s, out, 36) != 0))
        return false;
    return true;
}

/* validate.c - the Compute API's request checks in Nova's words: policy
 * refusals, the JSON-schema checks of request bodies (with jsonschema's
 * messages and Python's repr of the offending value), query strings and
 * oslo's boolean words (validate.h). */
#include "common/cleanup.h"
#include "common/pyrepr.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/validate.h"
#include "compute/objects/instance.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* ---- policy ------------------------------------------------------------------ */

int nb_srv_policy(struct nb_ctx *ctx, const char *rule, bool ok)
{
    return ok ? 0 : nb_res_deny(ctx, rule);
}

bool nb_srv_is_reader_of(const struct nb_ctx *ctx, const char *project_id)
{
    if (ctx->is_admin)
        return true;
    return ctx->is_reader && project_id && strcmp(ctx->project_id, project_id) == 0;
}

bool nb_srv_is_member_of(const struct nb_ctx *ctx, const char *project_id)
{
    if (ctx->is_admin)
        return true;
    return ctx->is_member && project_id && strcmp(ctx->project_id, project_id) == 0;
}

int nb_srv_error_as(struct nb_ctx *ctx, int status, const char *msg)
{
    /* a server-side failure (the database restarting) is not the client's
     * fault: it never becomes a 4xx */
    if (status < 500 && nb_ctx_status(ctx) >= 500)
        return -1;
    /* copied first: the message is borrowed from the slot being cleared */
    _cleanup_free_ char *keep = strdup(msg ? msg : nb_ctx_message(ctx));
    nb_ctx_clear_error(ctx); /* handled: the lookup's error becomes this one */
    return nb_error(ctx, status, NULL, "%s", keep ? keep : "");
}

/* ---- query strings ------------------------------------------------------------------ */

static void collect_query(void *opaque, const char *key, const char *value)
{
    json_t *q = opaque;
    json_t *list = json_object_get(q, key);
    if (!list) {
        list = json_array();
        json_object_set_new(q, key, list);
    }
    json_t *v = json_string(value ? value : "");
    json_array_append_new(list, v ? v : json_string(""));
}

json_t *nb_srv_query_all(struct nb_req *req)
{
    json_t *q = json_object();
    nb_req_query_each(req, collect_query, q);
    return q;
}

const char *nb_srv_query_last(json_t *q, const char *key)
{
    json_t *list = json_object_get(q, key);
    size_t n = json_array_size(list);
    return n ? json_string_value(json_array_get(list, n - 1)) : NULL;
}

int nb_srv_bool_from_string(const char *s, bool strict)
{
    int b = nb_bool_from_string(s);
    return b < 0 && !strict ? 0 : b;
}

int nb_srv_query_nonneg_int(struct nb_ctx *ctx, const char *name, const char *value, long long *out)
{
    const char *p = value;
    if (!p || !*p)
        return nb_error(ctx, 400, NULL,
                        "Invalid input for query parameters %s. Value: %s. '%s' is too short", name,
                        p ? p : "", p ? p : "");
    for (; *p; p++)
        if (*p < '0' || *p > '9')
            return nb_error(ctx, 400, NULL,
                            "Invalid input for query parameters %s. Value: %s. '%s' does not "
                            "match '^[0-9]*$'",
                            name, value, value);
    errno = 0;
    long long v = strtoll(value, NULL, 10);
    if (errno)
        return nb_error(ctx, 400, NULL, "%s must be an integer", name);
    *out = v;
    return 0;
}

/* ---- input validation as Nova's JSON schemas ---------------------------------- */

/* Records Nova's schema error for field: "<repr> <why>". Returns -1. */
int nb_srv_bad(struct nb_ctx *ctx, const char *field, const json_t *value, const char *why)
{
    char *r = nb_pyrepr(value);
    char *msg = nb_strdup_printf("%s %s", r, why);
    nb_compute_bad_field(ctx, field, value, msg);
    free(r);
    free(msg);
    return -1;
}

long nb_srv_utf8_next(const unsigned char **p)
{
    const unsigned char *s = *p;
    long c;
    int n;
    if (s[0] < 0x80) {
        c = s[0];
        n = 1;
    } else if ((s[0] & 0xe0) == 0xc0) {
        c = s[0] & 0x1f;
        n = 2;
    } else if ((s[0] & 0xf0) == 0xe0) {
        c = s[0] & 0x0f;
        n = 3;
    } else if ((s[0] & 0xf8) == 0xf0) {
        c = s[0] & 0x07;
        n = 4;
    } else {
        *p = s + 1;
        return -1;
    }
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            *p = s + i;
            return -1;
        }
        c = (c << 6) | (s[i] & 0x3f);
    }
    *p = s + n;
    return c;
}

static bool is_printable(long cp);

/* Nova's printable characters pattern (description): every code point
 * printable, whitespace anywhere. */
static bool printable_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        long c = nb_srv_utf8_next(&p);
        if (c < 0 || !is_printable(c))
            return false;
    }
    return true;
}

static size_t utf8_len(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xc0) != 0x80)
            n++;
    return n;
}

int nb_srv_check_string(struct nb_ctx *ctx, const char *field, const json_t *v, size_t min,
                        size_t max, bool nullable)
{
    if (nullable && json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return nb_srv_bad(ctx, field, v,
                          nullable ? "is not of type 'string', 'null'" : "is not of type 'string'");
    size_t n = utf8_len(json_string_value(v));
    if (n < min)
        return nb_srv_bad(ctx, field, v, "is too short");
    if (n > max)
        return nb_srv_bad(ctx, field, v, "is too long");
    return 0;
}

int nb_srv_check_name(struct nb_ctx *ctx, const char *field, const json_t *v)
{
    if (nb_srv_check_string(ctx, field, v, 1, 255, false) < 0)
        return -1;
    if (!nb_res_name_ok(json_string_value(v)))
        return nb_error(ctx, 400, NULL,
                        "An invalid 'name' value was provided. The name must be: printable "
                        "characters. Can not start or end with whitespace.");
    return 0;
}

int nb_srv_check_description(struct nb_ctx *ctx, const char *field, const json_t *v)
{
    if (nb_srv_check_string(ctx, field, v, 0, 255, true) < 0)
        return -1;
    if (json_is_string(v) && !printable_ok(json_string_value(v)))
        return nb_srv_bad(ctx, field, v, "does not match the printable characters pattern");
    return 0;
}

bool nb_srv_json_truthy(const json_t *v)
{
    if (json_is_boolean(v))
        return json_is_true(v);
    if (json_is_string(v))
        return nb_srv_bool_from_string(json_string_value(v), false) == 1;
    return false;
}

int nb_srv_check_uuid(struct nb_ctx *ctx, const char *field, const json_t *v)
{
    if (!json_is_string(v))
        return nb_srv_bad(ctx, field, v, "is not of type 'string'");
    if (!nb_is_uuid(json_string_value(v)))
        return nb_srv_bad(ctx, field, v, "is not a 'uuid'");
    return 0;
}

/* positive_integer / non_negative_integer: an integer or a digit string,
 * >= min. Sets *out. */
int nb_srv_check_int(struct nb_ctx *ctx, const char *field, const json_t *v, long long min,
                     long long *out)
{
    long long n;
    if (json_is_integer(v)) {
        n = json_integer_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!*s)
            return nb_srv_bad(ctx, field, v, "is too short");
        for (const char *p = s; *p; p++)
            if (*p < '0' || *p > '9')
                return nb_srv_bad(ctx, field, v, "does not match '^[0-9]*$'");
        n = strtoll(s, NULL, 10);
    } else {
        return nb_srv_bad(ctx, field, v, "is not of type 'integer', 'string'");
    }
    if (n < min) {
        char why[64];
        snprintf(why, sizeof(why), "is less than the minimum of %lld", min);
        return nb_srv_bad(ctx, field, v, why);
    }
    if (out)
        *out = n;
    return 0;
}

/* Nova's parameter_types.metadata: keys ^[a-zA-Z0-9-_:. ]{1,255}$, string
 * values of at most 255 characters. */
int nb_srv_check_metadata(struct nb_ctx *ctx, const char *field, const json_t *v)
{
    if (!json_is_object(v))
        return nb_srv_bad(ctx, field, v, "is not of type 'object'");
    const char *k;
    json_t *val;
    json_object_foreach ((json_t *)v, k, val) {
        size_t n = strlen(k);
        bool ok = n >= 1 && n <= 255;
        for (const char *p = k; *p && ok; p++)
            ok = isalnum((unsigned char)*p) || strchr("-_:. ", *p);
        if (!ok)
            return nb_error(ctx, 400, NULL,
                            "Invalid input for field/attribute %s. Value: %s. Additional "
                            "properties are not allowed ('%s' was unexpected)",
                            field, "{...}", k);
        if (!json_is_string(val))
            return nb_srv_bad(ctx, k, val, "is not of type 'string'");
        if (utf8_len(json_string_value(val)) > 255)
            return nb_srv_bad(ctx, k, val, "is too long");
    }
    return 0;
}

/* The body's one object under key ({"server": {...}}), or NULL after 400. */
json_t *nb_srv_body_object(struct nb_ctx *ctx, struct nb_req *req, const char *key,
                           const char *const *top_allowed)
{
    json_t *body = nb_req_json_object(ctx, req);
    if (!body)
        return NULL;
    json_t *obj = json_object_get(body, key);
    if (!obj) {
        nb_error(ctx, 400, NULL, "'%s' is a required property", key);
        return NULL;
    }
    if (top_allowed && nb_res_only_keys(ctx, NULL, body, top_allowed) < 0)
        return NULL;
    if (!json_is_object(obj)) {
        nb_srv_bad(ctx, key, obj, "is not of type 'object'");
        return NULL;
    }
    return obj;
}

static bool ip_ok(const char *s, int family)
{
    unsigned char buf[16];
    return s && inet_pton(family, s, buf) == 1;
}

int nb_srv_check_ip(struct nb_ctx *ctx, const char *field, const json_t *v, int family)
{
    if (!json_is_string(v))
        return nb_srv_bad(ctx, field, v, "is not of type 'string'");
    if (family && !ip_ok(json_string_value(v), family))
        return nb_srv_bad(ctx, field, v, family == AF_INET ? "is not a 'ipv4'" : "is not a 'ipv6'");
    if (!family && !ip_ok(json_string_value(v), AF_INET) && !ip_ok(json_string_value(v), AF_INET6))
        return nb_srv_bad(ctx, field, v, "is not valid under any of the given schemas");
    /* Nova stores addresses in canonical form ("::babe:dc0c:1602") */
    unsigned char bin[sizeof(struct in6_addr)];
    char canon[INET6_ADDRSTRLEN];
    int fam = family ? family : (strchr(json_string_value(v), ':') ? AF_INET6 : AF_INET);
    if (inet_pton(fam, json_string_value(v), bin) == 1 && inet_ntop(fam, bin, canon, sizeof(canon)))
        json_string_set((json_t *)v, canon);
    return 0;
}

int nb_srv_check_access_ips(struct nb_ctx *ctx, const json_t *server)
{
    json_t *v;
    if ((v = json_object_get(server, "accessIPv4")) &&
        nb_srv_check_ip(ctx, "accessIPv4", v, AF_INET) < 0)
        return -1;
    if ((v = json_object_get(server, "accessIPv6")) &&
        nb_srv_check_ip(ctx, "accessIPv6", v, AF_INET6) < 0)
        return -1;
    return 0;
}

int nb_srv_check_disk_config(struct nb_ctx *ctx, const json_t *server)
{
    json_t *v;
    if ((v = json_object_get(server, "OS-DCF:diskConfig"))) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "AUTO") && strcmp(s, "MANUAL")))
            return nb_srv_bad(ctx, "OS-DCF:diskConfig", v, "is not one of ['AUTO', 'MANUAL']");
    }
    return 0;
}

/* Hostname at 2.90: 2-63 of [a-zA-Z0-9-], not starting/ending with '-'. */
int nb_srv_check_hostname(struct nb_ctx *ctx, const json_t *v)
{
    if (nb_srv_check_string(ctx, "hostname", v, 2, 63, false) < 0)
        return -1;
    const char *s = json_string_value(v);
    size_t n = strlen(s);
    bool ok = isalnum((unsigned char)s[0]) && isalnum((unsigned char)s[n - 1]);
    for (const char *p = s; *p && ok; p++)
        ok = isalnum((unsigned char)*p) || *p == '-';
    if (!ok)
        return nb_srv_bad(ctx, "hostname", v,
                          "does not match '^[a-zA-Z0-9]+[a-zA-Z0-9-]*[a-zA-Z0-9]+$'");
    return 0;
}

struct only_ctx {
    const char *const *allowed;
    char bad[512];
    int nbad;
};

static void only_cb(void *opaque, const char *key, const char *value)
{
    (void)value;
    struct only_ctx *o = opaque;
    for (const char *const *a = o->allowed; *a; a++)
        if (strcmp(*a, key) == 0)
            return;
    if (strstr(o->bad, key) && o->nbad)
        return;
    size_t n = strlen(o->bad);
    snprintf(o->bad + n, sizeof(o->bad) - n, "%s'%s'", o->nbad ? ", " : "", key);
    o->nbad++;
}

int nb_res_query_only(struct nb_ctx *ctx, struct nb_req *req, const char *const *allowed)
{
    struct only_ctx o = {.allowed = allowed};
    nb_req_query_each(req, only_cb, &o);
    if (!o.nbad)
        return 0;
    return nb_error(ctx, 400, NULL, "Additional properties are not allowed (%s %s unexpected)",
                    o.bad, o.nbad == 1 ? "was" : "were");
}

/* --- policy -------------------------------------------------------------------- */

int nb_res_deny(struct nb_ctx *ctx, const char *rule)
{
    return nb_error(ctx, 403, NULL, "Policy doesn't allow %s to be performed.", rule);
}

int nb_res_admin(struct nb_ctx *ctx, const char *rule)
{
    return ctx->is_admin ? 0 : nb_res_deny(ctx, rule);
}

char *nb_res_pystr(const json_t *v)
{
    if (v && json_is_string(v))
        return strdup(json_string_value(v));
    return nb_pyrepr(v);
}

int nb_res_bad_field(struct nb_ctx *ctx, const char *field, const json_t *value, const char *why)
{
    if (!field)
        return nb_error(ctx, 400, NULL, "%s", why);
    _cleanup_free_ char *v = nb_res_pystr(value);
    return nb_error(ctx, 400, NULL, "Invalid input for field/attribute %s. Value: %s. %s", field, v,
                    why);
}

int nb_compute_bad_field(struct nb_ctx *ctx, const char *field, const json_t *value,
                         const char *why)
{
    return nb_res_bad_field(ctx, field, value, why);
}

/* --- JSON body checks ------------------------------------------------------------------- */

int nb_res_only_keys(struct nb_ctx *ctx, const char *field, const json_t *obj,
                     const char *const *allowed)
{
    struct nb_sbuf bad = {0};
    int nbad = 0;
    const char *k;
    json_t *item;
    nb_sbuf_str(&bad, "");
    json_object_foreach ((json_t *)obj, k, item) {
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(*a, k) == 0;
        if (ok)
            continue;
        if (nbad++)
            nb_sbuf_str(&bad, ", ");
        json_t *ks = json_string(k);
        char *r = nb_pyrepr(ks);
        nb_sbuf_str(&bad, r);
        free(r);
        json_decref(ks);
    }
    if (!nbad) {
        free(bad.s);
        return 0;
    }
    _cleanup_free_ char *why =
        nb_strdup_printf("Additional properties are not allowed (%s %s unexpected)", bad.s,
                         nbad == 1 ? "was" : "were");
    free(bad.s);
    return nb_res_bad_field(ctx, field, obj, why);
}

json_t *nb_res_required(struct nb_ctx *ctx, const char *field, const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (v)
        return v;
    _cleanup_free_ char *why = nb_strdup_printf("'%s' is a required property", key);
    nb_res_bad_field(ctx, field, obj, why);
    return NULL;
}

json_t *nb_res_body_object(struct nb_ctx *ctx, struct nb_req *req, const char *wrapper,
                           const char *const *allowed)
{
    json_t *body = req->json;
    if (!body || !json_is_object(body)) {
        _cleanup_free_ char *r = nb_pyrepr(body);
        if (!body)
            nb_error(ctx, 400, NULL, "The request body is invalid.");
        else
            nb_error(ctx, 400, NULL, "%s is not of type 'object'", r);
        return NULL;
    }
    const char *top[] = {wrapper, NULL};
    json_t *w = nb_res_required(ctx, NULL, body, wrapper);
    if (!w || nb_res_only_keys(ctx, NULL, body, top) < 0)
        return NULL;
    if (!json_is_object(w)) {
        _cleanup_free_ char *r = nb_pyrepr(w);
        _cleanup_free_ char *why = nb_strdup_printf("%s is not of type 'object'", r);
        nb_res_bad_field(ctx, wrapper, w, why);
        return NULL;
    }
    if (allowed && nb_res_only_keys(ctx, wrapper, w, allowed) < 0)
        return NULL;
    return w;
}

static int type_error(struct nb_ctx *ctx, const char *field, const json_t *v, const char *types)
{
    _cleanup_free_ char *r = nb_pyrepr(v);
    _cleanup_free_ char *why = nb_strdup_printf("%s is not of type %s", r, types);
    return nb_res_bad_field(ctx, field, v, why);
}

/* Unicode's horizontal space separators (category Zs). */
static bool is_zs(long cp)
{
    return cp == 0x20 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* Nova's _is_printable over its range (code points below 0xFFFF): not a
 * control/format/surrogate/private character and not a line or paragraph
 * separator. Unassigned code points are not told apart. */
static bool is_printable(long cp)
{
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp >= 0xFFFF)
        return false;
    if (cp == 0xAD || (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E) ||
        (cp >= 0x2060 && cp <= 0x206F) || cp == 0xFEFF || (cp >= 0xFFF9 && cp <= 0xFFFB))
        return false; /* Cf */
    if (cp == 0x2028 || cp == 0x2029)
        return false; /* Zl, Zp */
    if ((cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0xE000 && cp <= 0xF8FF))
        return false; /* Cs, Co */
    return true;
}

bool nb_res_name_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    long first = -2, last = -2;
    while (*p) {
        long cp = nb_srv_utf8_next(&p);
        if (cp < 0 || !is_printable(cp))
            return false;
        if (first == -2)
            first = cp;
        last = cp;
    }
    if (first == -2)
        return true; /* the empty string matches the regex; minLength refuses it */
    return !is_zs(first) && !is_zs(last);
}

bool nb_res_name_ws_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    bool nonblank = false;
    while (*p) {
        long cp = nb_srv_utf8_next(&p);
        if (cp < 0 || !is_printable(cp))
            return false;
        nonblank |= !is_zs(cp);
    }
    return nonblank;
}

int nb_res_check_int(struct nb_ctx *ctx, const char *field, const json_t *v, long long min,
                     long long max, long long *out)
{
    long long n;
    if (json_is_integer(v)) {
        n = json_integer_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        for (const char *p = s; *p; p++)
            if (!isdigit((unsigned char)*p)) {
                _cleanup_free_ char *r = nb_pyrepr(v);
                _cleanup_free_ char *why = nb_strdup_printf("%s does not match '^[0-9]+$'", r);
                return nb_res_bad_field(ctx, field, v, why);
            }
        if (!*s) {
            _cleanup_free_ char *why = strdup("'' does not match '^[0-9]+$'");
            return nb_res_bad_field(ctx, field, v, why);
        }
        n = strtoll(s, NULL, 10);
    } else {
        return type_error(ctx, field, v, "'integer', 'string'");
    }
    if (n < min || n > max) {
        _cleanup_free_ char *r = nb_pyrepr(v);
        _cleanup_free_ char *why =
            n < min ? nb_strdup_printf("%s is less than the minimum of %lld", r, min)
                    : nb_strdup_printf("%s is greater than the maximum of %lld", r, max);
        return nb_res_bad_field(ctx, field, v, why);
    }
    *out = n;
    return 0;
}

static const char *const bool_true[] = {"True", "TRUE", "true", "1",   "ON", "On",
                                        "on",   "YES",  "Yes",  "yes", NULL};
static const char *const bool_false[] = {"False", "FALSE", "false", "0",  "OFF", "Off",
                                         "off",   "NO",    "No",    "no", NULL};

int nb_res_check_bool(struct nb_ctx *ctx, const char *field, const json_t *v)
{
    if (json_is_boolean(v))
        return json_is_true(v) ? 1 : 0;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        for (int i = 0; bool_true[i]; i++)
            if (strcmp(s, bool_true[i]) == 0)
                return 1;
        for (int i = 0; bool_false[i]; i++)
            if (strcmp(s, bool_false[i]) == 0)
                return 0;
        _cleanup_free_ char *r = nb_pyrepr(v);
        _cleanup_free_ char *why = nb_strdup_printf(
            "%s is not one of [True, 'True', 'TRUE', 'true', '1', 'ON', 'On', 'on', 'YES', "
            "'Yes', 'yes', False, 'False', 'FALSE', 'false', '0', 'OFF', 'Off', 'off', 'NO', "
            "'No', 'no']",
            r);
        nb_res_bad_field(ctx, field, v, why);
        return -1;
    }
    type_error(ctx, field, v, "'boolean', 'string'");
    return -1;
}

bool nb_res_is_none_string(const char *s)
{
    return s && strcasecmp(s, "none") == 0;
}

/* ---- request values ---------------------------------------------------------- */

/* Strips leading and trailing whitespace (Nova's normalize_name). */
char *nb_srv_normalize_name(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    return strndup(s, n);
}

char *nb_srv_attrs_from_body(const json_t *body, struct nb_instance_attrs *a)
{
    json_t *v = json_object_get(body, "name");
    char *name = v ? nb_srv_normalize_name(json_string_value(v)) : NULL;
    json_t *desc = json_object_get(body, "description");
    json_t *hostname = json_object_get(body, "hostname");
    json_t *ip4 = json_object_get(body, "accessIPv4"), *ip6 = json_object_get(body, "accessIPv6");
    json_t *dc = json_object_get(body, "OS-DCF:diskConfig");
    *a = (struct nb_instance_attrs){
        .set_display_name = name != NULL,
        .display_name = name,
        .set_display_description = desc != NULL,
        .display_description = json_string_value(desc),
        .set_hostname = hostname != NULL,
        .hostname = json_string_value(hostname),
        .set_access_ip_v4 = ip4 != NULL,
        .access_ip_v4 = json_string_value(ip4),
        .set_access_ip_v6 = ip6 != NULL,
        .access_ip_v6 = json_string_value(ip6),
        .set_auto_disk_config = dc != NULL,
        .auto_disk_config = dc && !strcmp(json_string_value(dc), "AUTO"),
    };
    return name;
}

bool nb_srv_in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, list[i]))
            return true;
    return false;
}

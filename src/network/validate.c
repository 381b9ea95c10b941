/* validate.c - Neutron's request-body checks: neutron_lib's attribute
 * validators and converters, and the attribute-table walk of
 * neutron/api/v2/base.py prepare_request_body.
 *
 * A resource describes its attributes once (struct nb_net_attr: type,
 * whether POST/PUT may set it, whether it is required); nb_net_check_attrs
 * then rejects unknown and read-only attributes, requires the required
 * ones, converts booleans and integers in place (so handlers read JSON
 * true/false and integers), and validates each value, answering with
 * Neutron's words: "Invalid input for cidr. Reason: '10.0.0.0/33' is not a
 * valid IP subnet." (HTTPBadRequest), converter failures as InvalidInput. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "db/db.h"
#include "network/network_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* str() of a JSON value as Python prints it in a "%s" message. */
static char *py_str(const json_t *v)
{
    if (json_is_string(v))
        return strdup(json_string_value(v));
    return nb_pyrepr(v);
}

const char *nb_net_validate_mac(const char *s, char *buf)
{
    int n = 0;
    bool ok = s && strlen(s) == 17;
    for (int i = 0; ok && i < 17; i++) {
        if (i % 3 == 2)
            ok = s[i] == ':' || s[i] == '-';
        else
            ok = isxdigit((unsigned char)s[i]) && ++n;
    }
    /* neutron_lib also refuses the all-zero and broadcast addresses */
    if (ok && (!strcmp(s, "00:00:00:00:00:00") || !strcasecmp(s, "ff:ff:ff:ff:ff:ff")))
        ok = false;
    if (ok)
        return NULL;
    snprintf(buf, 256, "'%.200s' is not a valid MAC address", s ? s : "None");
    return buf;
}

const char *nb_net_validate_ip(const char *s, char *buf)
{
    struct nb_ip ip;
    if (s && nb_ip_parse(s, &ip) == 0)
        return NULL;
    snprintf(buf, 256, "'%.200s' is not a valid IP address", s ? s : "None");
    return buf;
}

const char *nb_net_validate_cidr(const char *s, char *buf)
{
    struct nb_ip net;
    int prefix;
    if (!s || nb_cidr_parse(s, &net, &prefix, false) < 0) {
        snprintf(buf, 256, "'%.200s' is not a valid IP subnet", s ? s : "None");
        return buf;
    }
    struct nb_ip exact;
    int p2;
    if (net.version == 4 && nb_cidr_parse(s, &exact, &p2, true) < 0) {
        char a[64];
        snprintf(buf, 256, "'%.120s' isn't a recognized IP subnet cidr, '%s/%d' is recommended", s,
                 nb_ip_format(&net, a), prefix);
        return buf;
    }
    return NULL;
}

const char *nb_net_validate_uuid(const char *s, char *buf)
{
    if (s && strlen(s) == 36 && nb_is_uuid(s))
        return NULL;
    snprintf(buf, 256, "'%.200s' is not a valid UUID", s ? s : "None");
    return buf;
}

const char *nb_net_validate_string(const json_t *v, size_t max, char *buf)
{
    if (!json_is_string(v)) {
        _cleanup_free_ char *t = py_str(v);
        snprintf(buf, 256, "'%.200s' is not a valid string", t);
        return buf;
    }
    if (max && json_string_length(v) > max) {
        snprintf(buf, 256, "'%.150s' exceeds maximum length of %zu", json_string_value(v), max);
        return buf;
    }
    return NULL;
}

int nb_net_parse_bool(const json_t *v, bool *out)
{
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return 0;
    }
    if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
        *out = json_integer_value(v) == 1;
        return 0;
    }
    int b = nb_bool_from_string(json_string_value(v));
    if (b < 0)
        return -1;
    *out = b == 1;
    return 0;
}

/* Converts body[name] in place (booleans, integers). 0/-1 after nb_error. */
static int convert(struct nb_ctx *ctx, json_t *body, const struct nb_net_attr *a, json_t *v)
{
    if (a->type == NB_A_BOOL) {
        bool b;
        if (nb_net_parse_bool(v, &b) < 0) {
            _cleanup_free_ char *t = py_str(v);
            return nb_error(ctx, 400, "InvalidInput",
                            "Invalid input for operation: '%s' cannot be converted to boolean.", t);
        }
        json_object_set_new(body, a->name, json_boolean(b));
    } else if (a->type == NB_A_INT || a->type == NB_A_IPVER) {
        if (json_is_string(v)) {
            const char *s = json_string_value(v);
            char *end;
            long long n = strtoll(s, &end, 10);
            if (*s && !*end)
                json_object_set_new(body, a->name, json_integer(n));
        }
        if (!json_is_integer(json_object_get(body, a->name))) {
            _cleanup_free_ char *t = py_str(v);
            return nb_error(ctx, 400, "InvalidInput",
                            "Invalid input for operation: '%s' is not an integer.", t);
        }
    }
    return 0;
}

/* The validator's reason for a bad value, or NULL. */
static const char *validate_one(const struct nb_net_attr *a, const json_t *v, char *buf)
{
    if (json_is_null(v) && a->nullable)
        return NULL;
    switch (a->type) {
    case NB_A_STR: return nb_net_validate_string(v, a->max_len, buf);
    case NB_A_UUID:
        return json_is_string(v) ? nb_net_validate_uuid(json_string_value(v), buf)
                                 : nb_net_validate_uuid(NULL, buf);
    case NB_A_MAC: return nb_net_validate_mac(json_is_string(v) ? json_string_value(v) : NULL, buf);
    case NB_A_IP: return nb_net_validate_ip(json_is_string(v) ? json_string_value(v) : NULL, buf);
    case NB_A_CIDR:
        return nb_net_validate_cidr(json_is_string(v) ? json_string_value(v) : NULL, buf);
    case NB_A_IPVER:
        if (json_integer_value(v) == 4 || json_integer_value(v) == 6)
            return NULL;
        snprintf(buf, 256, "%lld is not in [4, 6]", json_integer_value(v));
        return buf;
    case NB_A_LIST:
        if (json_is_array(v))
            return NULL;
        {
            _cleanup_free_ char *t = py_str(v);
            snprintf(buf, 256, "'%.200s' is not a list", t);
        }
        return buf;
    case NB_A_DICT:
        if (json_is_object(v))
            return NULL;
        {
            _cleanup_free_ char *t = py_str(v);
            snprintf(buf, 256, "'%.200s' is not a dictionary", t);
        }
        return buf;
    case NB_A_INT:
        if (a->max_len && (json_integer_value(v) < 0))
            return snprintf(buf, 256, "'%lld' should be non-negative", json_integer_value(v)), buf;
        return NULL;
    default: return NULL;
    }
}

static const struct nb_net_attr *find_attr(const struct nb_net_attr *attrs, const char *name)
{
    for (const struct nb_net_attr *a = attrs; a->name; a++)
        if (!strcmp(a->name, name))
            return a;
    return NULL;
}

/* Unknown keys, as neutron_lib's verify_attributes ("a, b" joined). */
static int check_unknown(struct nb_ctx *ctx, const json_t *body, const struct nb_net_attr *attrs)
{
    char list[512] = "";
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)body, k, v) {
        if (find_attr(attrs, k) || !strcmp(k, "project_id") || !strcmp(k, "tenant_id"))
            continue;
        size_t l = strlen(list);
        snprintf(list + l, sizeof(list) - l, "%s%s", l ? ", " : "", k);
    }
    if (list[0])
        return nb_error(ctx, 400, "HTTPBadRequest", "Unrecognized attribute(s) '%s'", list);
    return 0;
}

int nb_net_check_attrs(struct nb_ctx *ctx, json_t *body, const struct nb_net_attr *attrs,
                       bool create)
{
    if (check_unknown(ctx, body, attrs) < 0)
        return -1;
    for (const struct nb_net_attr *a = attrs; a->name; a++) {
        json_t *v = json_object_get(body, a->name);
        if (create && !a->allow_post && v)
            return nb_error(ctx, 400, "HTTPBadRequest", "Attribute '%s' not allowed in POST",
                            a->name);
        if (create && a->required && !v)
            return nb_error(ctx, 400, "HTTPBadRequest",
                            "Failed to parse request. Required attribute '%s' not specified",
                            a->name);
        if (!create && v && !a->allow_put)
            return nb_error(ctx, 400, "HTTPBadRequest", "Cannot update read-only attribute %s",
                            a->name);
    }
    for (const struct nb_net_attr *a = attrs; a->name; a++) {
        json_t *v = json_object_get(body, a->name);
        if (!v || (json_is_null(v) && a->nullable))
            continue;
        if (convert(ctx, body, a, v) < 0)
            return -1;
        v = json_object_get(body, a->name);
        char buf[256];
        const char *why = validate_one(a, v, buf);
        if (why)
            return nb_error(ctx, 400, "HTTPBadRequest", "Invalid input for %s. Reason: %s.",
                            a->name, why);
    }
    return 0;
}

json_t *nb_net_create_in_tx(struct nb_ctx *ctx, json_t *body,
                            json_t *(*create)(struct nb_ctx *ctx, json_t *body))
{
    if (nb_db_begin(nb_net_env->db, ctx) < 0)
        return NULL;
    json_t *v = create(ctx, body);
    if (!v) {
        nb_db_rollback(nb_net_env->db);
        return NULL;
    }
    if (nb_db_commit(nb_net_env->db, ctx) < 0) {
        json_decref(v);
        return NULL;
    }
    return v;
}

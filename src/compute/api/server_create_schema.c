/* server_create_schema.c - the checks of a POST /servers body, as Nova's
 * servers create schema at each microversion words them: networks, block
 * device mappings, scheduler hints, personality, user data and the rest
 * (server_create.h). */
#include "common/util.h"
#include "compute/api/server_create.h"
#include "compute/api/validate.h"

#include <ctype.h>
#include <string.h>

/* ---- create: request checks --------------------------------------------------------- */

/* base64 as oslo's decode_as_bytes accepts it (characters outside the
 * alphabet are skipped, the padding must be right). */
static bool base64_ok(const char *s)
{
    size_t n = 0, pad = 0;
    for (const char *p = s; *p; p++) {
        if (isalnum((unsigned char)*p) || *p == '+' || *p == '/') {
            if (pad) /* data after padding: Python stops at the padding */
                break;
            n++;
        } else if (*p == '=') {
            pad++;
        }
    }
    switch (n % 4) {
    case 0: return true;
    case 2: return pad >= 2;
    case 3: return pad >= 1;
    default: return false;
    }
}

static int check_base64(struct nb_ctx *ctx, const char *field, const json_t *v, size_t max)
{
    if (!json_is_string(v))
        return nb_srv_bad(ctx, field, v, "is not of type 'string'");
    if (max && json_string_length(v) > max)
        return nb_srv_bad(ctx, field, v, "is too long");
    if (!base64_ok(json_string_value(v)))
        return nb_srv_bad(ctx, field, v, "is not a 'base64'");
    return 0;
}

static int check_tag(struct nb_ctx *ctx, const json_t *v)
{
    if (nb_srv_check_string(ctx, "tags", v, 1, 60, false) < 0)
        return -1;
    const char *s = json_string_value(v);
    if (strchr(s, '/') || strchr(s, ','))
        return nb_srv_bad(ctx, "tags", v, "does not match '^[^,/]*$'");
    return 0;
}

static int check_string_array(struct nb_ctx *ctx, const char *field, const json_t *v,
                              int (*item)(struct nb_ctx *, const json_t *), size_t max_items)
{
    if (!json_is_array(v))
        return nb_srv_bad(ctx, field, v, "is not of type 'array'");
    if (max_items && json_array_size(v) > max_items)
        return nb_srv_bad(ctx, field, v, "is too long");
    size_t i;
    json_t *x;
    json_array_foreach ((json_t *)v, i, x)
        if (item(ctx, x) < 0)
            return -1;
    return 0;
}

static int check_cert_id(struct nb_ctx *ctx, const json_t *v)
{
    return nb_srv_check_string(ctx, "trusted_image_certificates", v, 1, 255, false);
}

static int validate_networks(struct nb_ctx *ctx, const json_t *nets)
{
    bool v237 = nb_ctx_mv_ge(ctx, 2, 37);
    if (v237 && json_is_string(nets)) {
        const char *s = json_string_value(nets);
        if (strcmp(s, "none") && strcmp(s, "auto"))
            return nb_srv_bad(ctx, "networks", nets, "is not valid under any of the given schemas");
        return 0;
    }
    if (!json_is_array(nets))
        return nb_srv_bad(ctx, "networks", nets,
                          v237 ? "is not valid under any of the given schemas"
                               : "is not of type 'array'");
    bool tag = (ctx->mv_minor >= 32 && ctx->mv_minor <= 36) || nb_ctx_mv_ge(ctx, 2, 42);
    const char *allowed[] = {"fixed_ip", "port", "uuid", tag ? "tag" : NULL, NULL};
    size_t i;
    json_t *n;
    json_array_foreach ((json_t *)nets, i, n) {
        if (!json_is_object(n))
            return nb_srv_bad(ctx, "networks", n, "is not of type 'object'");
        if (nb_res_only_keys(ctx, "networks", n, allowed) < 0)
            return -1;
        json_t *v;
        if ((v = json_object_get(n, "fixed_ip")) && nb_srv_check_ip(ctx, "fixed_ip", v, 0) < 0)
            return -1;
        if ((v = json_object_get(n, "port")) && !json_is_null(v) &&
            nb_srv_check_uuid(ctx, "port", v) < 0)
            return -1;
        if ((v = json_object_get(n, "uuid"))) {
            if (v237 ? nb_srv_check_uuid(ctx, "uuid", v) < 0 : !json_is_string(v))
                return v237 ? -1 : nb_srv_bad(ctx, "uuid", v, "is not of type 'string'");
        }
        if ((v = json_object_get(n, "tag")) && check_tag(ctx, v) < 0)
            return -1;
    }
    return 0;
}

/* The keys a mapping may have (v2: block_device_mapping_v2). 0/-1. */
static int check_bdm_keys(struct nb_ctx *ctx, const json_t *b, bool v2)
{
    bool tag = v2 && (ctx->mv_minor == 32 || nb_ctx_mv_ge(ctx, 2, 42));
    const char *allowed[20] = {"virtual_name", "volume_id",      "snapshot_id",
                               "volume_size",  "device_name",    "delete_on_termination",
                               "no_device",    "connection_info"};
    int n = 8;
    if (v2) {
        static const char *const more[] = {"source_type",      "uuid",         "image_id",
                                           "destination_type", "guest_format", "device_type",
                                           "disk_bus",         "boot_index"};
        for (size_t i = 0; i < 8; i++)
            allowed[n++] = more[i];
        if (tag)
            allowed[n++] = "tag";
        if (nb_ctx_mv_ge(ctx, 2, 67))
            allowed[n++] = "volume_type";
    }
    allowed[n] = NULL;
    if (nb_res_only_keys(ctx, v2 ? "block_device_mapping_v2" : "block_device_mapping", b, allowed) <
        0)
        return -1;
    return 0;
}

/* IDs, size, delete_on_termination, device name and the free-text keys. */
static int check_bdm_values(struct nb_ctx *ctx, const json_t *b)
{
    json_t *v;
    if ((v = json_object_get(b, "volume_id")) && nb_srv_check_uuid(ctx, "volume_id", v) < 0)
        return -1;
    if ((v = json_object_get(b, "snapshot_id")) && nb_srv_check_uuid(ctx, "snapshot_id", v) < 0)
        return -1;
    if ((v = json_object_get(b, "image_id")) && nb_srv_check_uuid(ctx, "image_id", v) < 0)
        return -1;
    if ((v = json_object_get(b, "volume_size")) &&
        nb_srv_check_int(ctx, "volume_size", v, 1, NULL) < 0)
        return -1;
    if ((v = json_object_get(b, "delete_on_termination")) &&
        nb_res_check_bool(ctx, "delete_on_termination", v) < 0)
        return -1;
    if ((v = json_object_get(b, "device_name"))) {
        if (nb_srv_check_string(ctx, "device_name", v, 1, 255, false) < 0)
            return -1;
        for (const char *p = json_string_value(v); *p; p++)
            if (!isalnum((unsigned char)*p) && !strchr("._-/", *p))
                return nb_srv_bad(ctx, "device_name", v, "does not match '^[a-zA-Z0-9._-r/]*$'");
    }
    static const char *const strs[] = {"virtual_name", "guest_format", "device_type", "disk_bus"};
    for (size_t i = 0; i < 4; i++)
        if ((v = json_object_get(b, strs[i])) &&
            nb_srv_check_string(ctx, strs[i], v, 0, 255, false) < 0)
            return -1;
    return 0;
}

/* source_type, destination_type, uuid and boot_index. */
static int check_bdm_source(struct nb_ctx *ctx, const json_t *b)
{
    json_t *v;
    if ((v = json_object_get(b, "source_type"))) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "volume") && strcmp(s, "image") && strcmp(s, "snapshot") &&
                   strcmp(s, "blank")))
            return nb_srv_bad(ctx, "source_type", v,
                              "is not one of ['volume', 'image', 'snapshot', 'blank']");
    }
    if ((v = json_object_get(b, "destination_type"))) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "local") && strcmp(s, "volume")))
            return nb_srv_bad(ctx, "destination_type", v, "is not one of ['local', 'volume']");
    }
    if ((v = json_object_get(b, "uuid"))) {
        if (nb_srv_check_string(ctx, "uuid", v, 1, 255, false) < 0)
            return -1;
        for (const char *p = json_string_value(v); *p; p++)
            if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
                return nb_srv_bad(ctx, "uuid", v, "does not match '^[a-zA-Z0-9._-]*$'");
    }
    if ((v = json_object_get(b, "boot_index")) && !json_is_null(v)) {
        if (json_is_string(v)) {
            const char *s = json_string_value(v);
            const char *p = *s == '-' ? s + 1 : s;
            bool ok = *p != '\0';
            for (; *p && ok; p++)
                ok = isdigit((unsigned char)*p);
            if (!ok)
                return nb_srv_bad(ctx, "boot_index", v, "does not match '^-?[0-9]+$'");
        } else if (!json_is_integer(v)) {
            return nb_srv_bad(ctx, "boot_index", v, "is not of type 'integer', 'string', 'null'");
        }
    }
    return 0;
}

/* tag, volume_type and connection_info. */
static int check_bdm_extra(struct nb_ctx *ctx, const json_t *b)
{
    json_t *v;
    if ((v = json_object_get(b, "tag")) && check_tag(ctx, v) < 0)
        return -1;
    if ((v = json_object_get(b, "volume_type")) &&
        nb_srv_check_string(ctx, "volume_type", v, 0, 255, true) < 0)
        return -1;
    if ((v = json_object_get(b, "connection_info")) &&
        nb_srv_check_string(ctx, "connection_info", v, 0, 16777215, false) < 0)
        return -1;
    return 0;
}

/* One mapping of a create request (Nova's block_device_mapping(_v2) item
 * schemas). 0/-1. */
static int validate_bdm(struct nb_ctx *ctx, const json_t *b, bool v2)
{
    if (!json_is_object(b))
        return nb_srv_bad(ctx, v2 ? "block_device_mapping_v2" : "block_device_mapping", b,
                          "is not of type 'object'");
    if (check_bdm_keys(ctx, b, v2) < 0 || check_bdm_values(ctx, b) < 0 ||
        check_bdm_source(ctx, b) < 0 || check_bdm_extra(ctx, b) < 0)
        return -1;
    return 0;
}

static int validate_hints(struct nb_ctx *ctx, const char *field, const json_t *h)
{
    if (!json_is_object(h))
        return nb_srv_bad(ctx, field, h, "is not of type 'object'");
    json_t *v;
    if ((v = json_object_get(h, "group")) && nb_srv_check_uuid(ctx, "group", v) < 0)
        return -1;
    static const char *const lists[] = {"different_host", "same_host"};
    for (size_t k = 0; k < 2; k++) {
        if (!(v = json_object_get(h, lists[k])))
            continue;
        if (json_is_string(v)) {
            if (nb_srv_check_uuid(ctx, lists[k], v) < 0)
                return -1;
        } else if (json_is_array(v)) {
            size_t i;
            json_t *x;
            json_array_foreach (v, i, x)
                if (nb_srv_check_uuid(ctx, lists[k], x) < 0)
                    return -1;
        } else {
            return nb_srv_bad(ctx, lists[k], v, "is not of type 'string', 'array'");
        }
    }
    if ((v = json_object_get(h, "query")) && !json_is_string(v) && !json_is_object(v))
        return nb_srv_bad(ctx, "query", v, "is not of type 'string', 'object'");
    if ((v = json_object_get(h, "target_cell")) && nb_srv_check_name(ctx, "target_cell", v) < 0)
        return -1;
    if ((v = json_object_get(h, "build_near_host_ip")) &&
        nb_srv_check_ip(ctx, "build_near_host_ip", v, 0) < 0)
        return -1;
    if ((v = json_object_get(h, "cidr"))) {
        const char *s = json_string_value(v);
        bool ok = s && s[0] == '/' && s[1];
        for (const char *p = s ? s + 1 : ""; *p && ok; p++)
            ok = isxdigit((unsigned char)*p) || *p == '.' || *p == ':';
        if (!ok)
            return nb_srv_bad(ctx, "cidr", v, "does not match '^/[0-9a-f.:]+$'");
    }
    return 0;
}

/* Nova's create schema for the negotiated microversion. */
/* The keys the server object may and must have at ctx's microversion. 0/-1. */
static int check_create_keys(struct nb_ctx *ctx, const json_t *body, const json_t *server)
{
    static const char *const top[] = {"server", "os:scheduler_hints", "OS-SCH-HNT:scheduler_hints",
                                      NULL};
    if (nb_res_only_keys(ctx, NULL, body, top) < 0)
        return -1;
    const char *allowed[40] = {"name",
                               "imageRef",
                               "flavorRef",
                               "adminPass",
                               "metadata",
                               "networks",
                               "OS-DCF:diskConfig",
                               "accessIPv4",
                               "accessIPv6",
                               "availability_zone",
                               "block_device_mapping",
                               "block_device_mapping_v2",
                               "config_drive",
                               "key_name",
                               "min_count",
                               "max_count",
                               "return_reservation_id",
                               "security_groups",
                               "user_data"};
    int n = 19;
    if (!nb_ctx_mv_ge(ctx, 2, 57))
        allowed[n++] = "personality";
    if (nb_ctx_mv_ge(ctx, 2, 19))
        allowed[n++] = "description";
    if (nb_ctx_mv_ge(ctx, 2, 52))
        allowed[n++] = "tags";
    if (nb_ctx_mv_ge(ctx, 2, 63))
        allowed[n++] = "trusted_image_certificates";
    if (nb_ctx_mv_ge(ctx, 2, 74)) {
        allowed[n++] = "host";
        allowed[n++] = "hypervisor_hostname";
    }
    if (nb_ctx_mv_ge(ctx, 2, 90))
        allowed[n++] = "hostname";
    allowed[n] = NULL;
    static const char *const required[] = {"name", "flavorRef", "networks"};
    for (size_t i = 0; i < (nb_ctx_mv_ge(ctx, 2, 37) ? 3u : 2u); i++)
        if (!json_object_get(server, required[i]))
            return nb_error(ctx, 400, NULL,
                            "Invalid input for field/attribute server. Value: {...}. '%s' is a "
                            "required property",
                            required[i]);
    if (nb_res_only_keys(ctx, "server", server, allowed) < 0)
        return -1;
    return 0;
}

/* name, imageRef, flavorRef, adminPass, metadata, networks, disk config and access IPs. 0/-1. */
static int check_create_refs(struct nb_ctx *ctx, const json_t *server)
{
    json_t *v;
    if (nb_srv_check_name(ctx, "name", json_object_get(server, "name")) < 0)
        return -1;
    if ((v = json_object_get(server, "imageRef"))) {
        if (!json_is_string(v) || (json_string_length(v) && !nb_is_uuid(json_string_value(v))))
            return nb_srv_bad(ctx, "imageRef", v, "is not valid under any of the given schemas");
    }
    v = json_object_get(server, "flavorRef");
    if (json_is_string(v) ? json_string_length(v) == 0 : !json_is_integer(v))
        return json_is_string(v)
                   ? nb_srv_bad(ctx, "flavorRef", v, "is too short")
                   : nb_srv_bad(ctx, "flavorRef", v, "is not of type 'string', 'integer'");
    if ((v = json_object_get(server, "adminPass")) && !json_is_string(v))
        return nb_srv_bad(ctx, "adminPass", v, "is not of type 'string'");
    if ((v = json_object_get(server, "metadata")) && nb_srv_check_metadata(ctx, "metadata", v) < 0)
        return -1;
    if ((v = json_object_get(server, "networks")) && validate_networks(ctx, v) < 0)
        return -1;
    if (nb_srv_check_disk_config(ctx, server) < 0)
        return -1;
    if (nb_srv_check_access_ips(ctx, server) < 0)
        return -1;
    return 0;
}

/* personality (before 2.57): a list of {path, contents}. 0/-1. */
static int check_personality(struct nb_ctx *ctx, const json_t *server)
{
    json_t *v;
    if ((v = json_object_get(server, "personality"))) {
        if (!json_is_array(v))
            return nb_srv_bad(ctx, "personality", v, "is not of type 'array'");
        static const char *const pk[] = {"path", "contents", NULL};
        size_t i;
        json_t *f;
        json_array_foreach (v, i, f) {
            if (!json_is_object(f))
                return nb_srv_bad(ctx, "personality", f, "is not of type 'object'");
            if (nb_res_only_keys(ctx, "personality", f, pk) < 0)
                return -1;
            json_t *p = json_object_get(f, "path"), *c = json_object_get(f, "contents");
            if (p && !json_is_string(p))
                return nb_srv_bad(ctx, "path", p, "is not of type 'string'");
            if (c && check_base64(ctx, "contents", c, 0) < 0)
                return -1;
        }
    }
    return 0;
}

/* availability_zone and the block_device_mapping(_v2) lists. 0/-1. */
static int check_zone_and_bdms(struct nb_ctx *ctx, const json_t *server)
{
    json_t *v;
    if ((v = json_object_get(server, "availability_zone")) &&
        nb_srv_check_name(ctx, "availability_zone", v) < 0)
        return -1;
    static const char *const bdm_keys[] = {"block_device_mapping", "block_device_mapping_v2"};
    for (size_t k = 0; k < 2; k++) {
        if (!(v = json_object_get(server, bdm_keys[k])))
            continue;
        if (!json_is_array(v))
            return nb_srv_bad(ctx, bdm_keys[k], v, "is not of type 'array'");
        size_t i;
        json_t *b;
        json_array_foreach (v, i, b)
            if (validate_bdm(ctx, b, k == 1) < 0)
                return -1;
    }
    return 0;
}

/* config_drive, key_name, min/max_count and return_reservation_id. 0/-1. */
static int check_create_flags(struct nb_ctx *ctx, const json_t *server)
{
    json_t *v;
    if ((v = json_object_get(server, "config_drive")) &&
        nb_res_check_bool(ctx, "config_drive", v) < 0)
        return -1;
    if ((v = json_object_get(server, "key_name")) && nb_srv_check_name(ctx, "key_name", v) < 0)
        return -1;
    if ((v = json_object_get(server, "min_count")) &&
        nb_srv_check_int(ctx, "min_count", v, 1, NULL) < 0)
        return -1;
    if ((v = json_object_get(server, "max_count")) &&
        nb_srv_check_int(ctx, "max_count", v, 1, NULL) < 0)
        return -1;
    if ((v = json_object_get(server, "return_reservation_id")) &&
        nb_res_check_bool(ctx, "return_reservation_id", v) < 0)
        return -1;
    return 0;
}

/* security_groups: a list of {name}. 0/-1. */
static int check_security_groups(struct nb_ctx *ctx, const json_t *server)
{
    json_t *v;
    if ((v = json_object_get(server, "security_groups"))) {
        if (!json_is_array(v))
            return nb_srv_bad(ctx, "security_groups", v, "is not of type 'array'");
        static const char *const sk[] = {"name", NULL};
        size_t i;
        json_t *g;
        json_array_foreach (v, i, g) {
            if (!json_is_object(g))
                return nb_srv_bad(ctx, "security_groups", g, "is not of type 'object'");
            if (nb_res_only_keys(ctx, "security_groups", g, sk) < 0)
                return -1;
            json_t *nm = json_object_get(g, "name");
            if (nm && nb_srv_check_name(ctx, "name", nm) < 0)
                return -1;
        }
    }
    return 0;
}

/* user_data, description, tags and trusted_image_certificates. 0/-1. */
static int check_create_texts(struct nb_ctx *ctx, const json_t *server)
{
    json_t *v;
    if ((v = json_object_get(server, "user_data")) && check_base64(ctx, "user_data", v, 65535) < 0)
        return -1;
    if ((v = json_object_get(server, "description")) &&
        nb_srv_check_description(ctx, "description", v) < 0)
        return -1;
    if ((v = json_object_get(server, "tags")) &&
        check_string_array(ctx, "tags", v, check_tag, 50) < 0)
        return -1;
    if ((v = json_object_get(server, "trusted_image_certificates")) && !json_is_null(v)) {
        if (check_string_array(ctx, "trusted_image_certificates", v, check_cert_id, 50) < 0)
            return -1;
        if (json_array_size(v) == 0)
            return nb_srv_bad(ctx, "trusted_image_certificates", v, "is too short");
        for (size_t i = 0; i < json_array_size(v); i++)
            for (size_t j = i + 1; j < json_array_size(v); j++)
                if (json_equal(json_array_get(v, i), json_array_get(v, j)))
                    return nb_srv_bad(ctx, "trusted_image_certificates", v,
                                      "has non-unique elements");
    }
    return 0;
}

/* host, hypervisor_hostname (2.74) and hostname (2.90). 0/-1. */
static int check_create_hosts(struct nb_ctx *ctx, const json_t *server)
{
    json_t *v;
    static const char *const fq[] = {"host", "hypervisor_hostname"};
    for (size_t k = 0; k < 2; k++) {
        if (!(v = json_object_get(server, fq[k])))
            continue;
        if (nb_srv_check_string(ctx, fq[k], v, 1, 255, false) < 0)
            return -1;
        for (const char *p = json_string_value(v); *p; p++)
            if (!isalnum((unsigned char)*p) && !strchr("-._", *p))
                return nb_srv_bad(ctx, fq[k], v, "does not match '^[a-zA-Z0-9-._]*$'");
    }
    if ((v = json_object_get(server, "hostname")) && nb_srv_check_hostname(ctx, v) < 0)
        return -1;
    return 0;
}

/* The scheduler hints beside the server object. 0/-1. */
static int check_create_hints(struct nb_ctx *ctx, const json_t *body)
{
    json_t *v;
    static const char *const hk[] = {"os:scheduler_hints", "OS-SCH-HNT:scheduler_hints"};
    for (size_t k = 0; k < 2; k++)
        if ((v = json_object_get(body, hk[k])) && validate_hints(ctx, hk[k], v) < 0)
            return -1;
    return 0;
}

int nb_srv_validate_create(struct nb_ctx *ctx, json_t *body, json_t *server)
{
    if (check_create_keys(ctx, body, server) < 0 || check_create_refs(ctx, server) < 0 ||
        check_personality(ctx, server) < 0 || check_zone_and_bdms(ctx, server) < 0 ||
        check_create_flags(ctx, server) < 0 || check_security_groups(ctx, server) < 0 ||
        check_create_texts(ctx, server) < 0 || check_create_hosts(ctx, server) < 0 ||
        check_create_hints(ctx, body) < 0)
        return -1;
    return 0;
}

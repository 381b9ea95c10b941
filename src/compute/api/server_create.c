/* server_create.c - POST /compute/v2.1/servers: a validated request
 * (server_create_schema.c) is resolved against flavors, images, volumes,
 * networks, zones, key pairs and quotas, stored as instance rows with their
 * mappings and request spec in one transaction, and cast to the conductor
 * (server_create.h). */
#include "bus/bus.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/block_devices.h"
#include "compute/api/instances.h"
#include "compute/api/links.h"
#include "compute/api/quotas.h"
#include "compute/api/server_create.h"
#include "compute/api/validate.h"
#include "compute/compute.h"
#include "compute/objects/instance.h"
#include "compute/objects/request_spec.h"
#include "compute/rpc/conductor_api.h"
#include "db/db.h"
#include "image/image.h"
#include "network/network.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- create: the request's meaning ------------------------------------------------------ */

/* What a validated create request resolves to. */
struct create_req {
    json_t *server;          /* borrowed from the body */
    char *name;              /* normalized */
    const char *description; /* NULL = none */
    const char *hostname;    /* requested at 2.90, or NULL */
    const char *image_ref;   /* "" when booting from volume */
    json_t *image;           /* Glance view, NULL for BFV */
    json_t *flavor;          /* flavor row + extra_specs */
    json_t *keypair;         /* or NULL */
    json_t *group;           /* server group or NULL */
    json_t *hints;           /* scheduler hints without _nova* keys */
    json_t *bdms;            /* block device mappings to store (v2 form) */
    json_t *networks;        /* "none" | "auto" | [...] | NULL */
    json_t *security_groups; /* [name] */
    char *az;                /* requested zone or NULL */
    char *forced_host, *forced_node;
    const char *req_host, *req_node; /* 2.74 host / hypervisor_hostname */
    long long min_count, max_count;
    bool bfv, config_drive, auto_disk_config;
    char *admin_pass;
};

static void create_req_free(struct create_req *c)
{
    free(c->name);
    json_decref(c->image);
    json_decref(c->flavor);
    json_decref(c->keypair);
    json_decref(c->group);
    json_decref(c->hints);
    json_decref(c->bdms);
    json_decref(c->security_groups);
    free(c->az);
    free(c->forced_host);
    free(c->forced_node);
    free(c->admin_pass);
}

/* Random bytes for passwords and IDs (aborts if the kernel has none). */
static void random_bytes(unsigned char *buf, size_t n)
{
    char hex[2 * 64 + 1];
    while (n) {
        size_t k = n > 64 ? 64 : n;
        nb_random_hex(hex, k);
        for (size_t i = 0; i < k; i++) {
            unsigned v;
            sscanf(hex + 2 * i, "%2x", &v);
            *buf++ = (unsigned char)v;
        }
        n -= k;
    }
}

/* Nova's generate_password: 12 characters, one of each symbol group. */
static void generate_password(char out[13])
{
    static const char *const groups[] = {"23456789", "ABCDEFGHJKLMNPQRSTUVWXYZ",
                                         "abcdefghijkmnopqrstuvwxyz"};
    static const char all[] = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    unsigned char r[24];
    random_bytes(r, sizeof(r));
    for (int i = 0; i < 3; i++)
        out[i] = groups[i][r[i] % strlen(groups[i])];
    for (int i = 3; i < 12; i++)
        out[i] = all[r[i] % (sizeof(all) - 1)];
    for (int i = 11; i > 0; i--) { /* shuffle */
        int j = r[12 + i % 12] % (i + 1);
        char t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
    out[12] = '\0';
}

void nb_srv_generate_password(char out[13])
{
    generate_password(out);
}

/* Nova's generate_uid('r'): "r-" + 8 of [0-9a-z]. */
static void reservation_id(char out[11])
{
    static const char chars[] = "01234567890abcdefghijklmnopqrstuvwxyz";
    unsigned char r[8];
    random_bytes(r, sizeof(r));
    out[0] = 'r';
    out[1] = '-';
    for (int i = 0; i < 8; i++)
        out[2 + i] = chars[r[i] % (sizeof(chars) - 1)];
    out[10] = '\0';
}

/* Nova's utils.sanitize_hostname: Latin-1 only, at most 63 characters,
 * " _." -> "-", only word characters, "." and "-", lower case, no leading
 * or trailing "." or "-". New string (maybe ""). */
char *nb_srv_sanitize_hostname(const char *name)
{
    long cps[64];
    int n = 0;
    const unsigned char *p = (const unsigned char *)name;
    while (*p && n < 63) {
        long c = nb_srv_utf8_next(&p);
        if (c < 0 || c > 0xff)
            continue;
        cps[n++] = c;
    }
    char *out = malloc((size_t)n * 2 + 1);
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        long c = cps[i];
        if (c == ' ' || c == '_' || c == '.')
            c = '-';
        bool word = (c < 0x80 && (isalnum((int)c) || c == '-')) ||
                    (c >= 0xc0 && c != 0xd7 && c != 0xf7) || c == 0xaa || c == 0xb2 || c == 0xb3 ||
                    c == 0xb5 || c == 0xb9 || c == 0xba || c == 0xbc || c == 0xbd || c == 0xbe;
        if (!word)
            continue;
        if (c < 0x80)
            c = tolower((int)c);
        else if (c >= 0xc0 && c <= 0xde && c != 0xd7)
            c += 0x20;
        if (c < 0x80) {
            out[o++] = (char)c;
        } else {
            out[o++] = (char)(0xc0 | (c >> 6));
            out[o++] = (char)(0x80 | (c & 0x3f));
        }
    }
    out[o] = '\0';
    size_t start = 0;
    while (out[start] == '-' || out[start] == '.')
        start++;
    while (o > start && (out[o - 1] == '-' || out[o - 1] == '.'))
        out[--o] = '\0';
    memmove(out, out + start, o - start + 1);
    return out;
}

/* Nova's parse_availability_zone: "az", "az:host", "az::node", "az:host:node". */
static int parse_az(struct nb_ctx *ctx, const char *in, struct create_req *c)
{
    if (!in || !*in) {
        const char *def = nb_conf_str("DEFAULT", "default_schedule_zone", NULL);
        c->az = def && *def ? strdup(def) : NULL;
        return 0;
    }
    int colons = 0;
    for (const char *p = in; *p; p++)
        colons += *p == ':';
    if (colons > 2)
        return nb_error(ctx, 400, NULL,
                        "Invalid input received: Unable to parse availability_zone");
    char *copy = strdup(in);
    char *first = strchr(copy, ':');
    if (first) {
        *first = '\0';
        char *rest = first + 1;
        char *second = strchr(rest, ':');
        if (second) {
            *second = '\0';
            if (*rest)
                c->forced_host = strdup(rest);
            if (second[1])
                c->forced_node = strdup(second + 1);
        } else if (*rest) {
            c->forced_host = strdup(rest);
        }
    }
    c->az = *copy ? strdup(copy) : NULL;
    free(copy);
    if (!c->az) {
        const char *def = nb_conf_str("DEFAULT", "default_schedule_zone", NULL);
        c->az = def && *def ? strdup(def) : NULL;
    }
    return 0;
}

/* Turns the request's block device mappings into the rows to store
 * (Nova's BlockDeviceDict.from_api and _check_and_transform_bdm, without
 * the volume checks that need the volume service). */
/* A legacy (v1) mapping in the v2 form create stores. New ref. */
static json_t *legacy_bdm_row(const json_t *b)
{
    const char *vol = json_string_value(json_object_get(b, "volume_id"));
    const char *snap = json_string_value(json_object_get(b, "snapshot_id"));
    const char *dev = json_string_value(json_object_get(b, "device_name"));
    bool root = dev && (!strcmp(dev, "vda") || !strcmp(dev, "/dev/vda") || !strcmp(dev, "sda") ||
                        !strcmp(dev, "/dev/sda"));
    json_t *row = json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:O?, s:b, s:b}", "source_type",
                            snap ? "snapshot" : "volume", "destination_type", "volume", "volume_id",
                            vol, "snapshot_id", snap, "device_name", dev, "volume_size",
                            json_object_get(b, "volume_size"), "delete_on_termination",
                            nb_srv_json_truthy(json_object_get(b, "delete_on_termination")),
                            "no_device", json_object_get(b, "no_device") != NULL);
    if (root)
        json_object_set_new(row, "boot_index", json_integer(0));
    return row;
}

/* Why Nova refuses a v2 mapping (its from_api checks), or NULL. */
static const char *v2_bdm_refusal(const json_t *b, bool image_given)
{
    const char *src = json_string_value(json_object_get(b, "source_type"));
    const char *dst = json_string_value(json_object_get(b, "destination_type"));
    const char *dev_uuid = json_string_value(json_object_get(b, "uuid"));
    const char *vtype = json_string_value(json_object_get(b, "volume_type"));
    const char *why = NULL;
    if (src && !strcmp(src, "blank") && dev_uuid)
        why = "Invalid device UUID.";
    else if ((!src || strcmp(src, "blank")) && !dev_uuid)
        why = "Missing device UUID.";
    if (!why && src && !strcmp(src, "image") && dst && !strcmp(dst, "local")) {
        json_t *bi = json_object_get(b, "boot_index");
        long long idx = json_is_integer(bi)  ? json_integer_value(bi)
                        : json_is_string(bi) ? strtoll(json_string_value(bi), NULL, 10)
                                             : -1;
        if (!(image_given && idx == 0))
            why = "Mapping image to local is not supported.";
    }
    if (!why && dst && !strcmp(dst, "local") && vtype)
        why = "Specifying a volume_type with destination_type=local is not supported.";
    if (!why && src && !strcmp(src, "volume") && vtype)
        why = "Specifying volume type to existing volume is not supported.";
    return why;
}

/* A v2 mapping as create stores it (<source>_id from uuid, integer
 * boot_index, boolean delete_on_termination). New ref, or NULL after 400. */
static json_t *v2_bdm_row(struct nb_ctx *ctx, const json_t *b, bool image_given)
{
    json_t *row = json_deep_copy(b);
    if (!json_object_get(b, "no_device")) {
        const char *why = v2_bdm_refusal(b, image_given);
        if (why) {
            json_decref(row);
            nb_error(ctx, 400, NULL, "Block Device Mapping is Invalid: %s", why);
            return NULL;
        }
        const char *src = json_string_value(json_object_get(b, "source_type"));
        const char *dev_uuid = json_string_value(json_object_get(b, "uuid"));
        if (src && dev_uuid && strcmp(src, "blank")) {
            char key[32];
            snprintf(key, sizeof(key), "%s_id", src);
            json_object_set_new(row, key, json_string(dev_uuid));
        }
    }
    json_object_del(row, "uuid");
    json_t *bi = json_object_get(row, "boot_index");
    if (json_is_string(bi))
        json_object_set_new(row, "boot_index",
                            json_integer(strtoll(json_string_value(bi), NULL, 10)));
    json_object_set_new(
        row, "delete_on_termination",
        json_boolean(nb_srv_json_truthy(json_object_get(b, "delete_on_termination"))));
    return row;
}

static int resolve_bdms(struct nb_ctx *ctx, struct create_req *c)
{
    json_t *legacy = json_object_get(c->server, "block_device_mapping");
    json_t *v2 = json_object_get(c->server, "block_device_mapping_v2");
    const char *image_ref = json_string_value(json_object_get(c->server, "imageRef"));
    bool image_given = json_object_get(c->server, "imageRef") != NULL;
    c->bdms = json_array();
    if (json_array_size(legacy) && json_array_size(v2))
        return nb_error(ctx, 400, NULL,
                        "Using different block_device_mapping syntaxes is not allowed in the same "
                        "request.");
    size_t i;
    json_t *b;
    json_array_foreach (legacy, i, b)
        json_array_append_new(c->bdms, legacy_bdm_row(b));
    json_array_foreach (v2, i, b) {
        json_t *row = v2_bdm_row(ctx, b, image_given);
        if (!row)
            return -1;
        json_array_append_new(c->bdms, row);
    }
    /* the root disk: a volume with boot index 0 makes a volume-backed server */
    json_array_foreach (c->bdms, i, b) {
        json_t *bi = json_object_get(b, "boot_index");
        const char *dst = json_string_value(json_object_get(b, "destination_type"));
        if (json_is_integer(bi) && json_integer_value(bi) == 0 && dst && !strcmp(dst, "volume"))
            c->bfv = true;
    }
    if (!image_ref || !*image_ref) {
        if (!json_array_size(c->bdms))
            return nb_error(ctx, 400, NULL, "Missing imageRef attribute");
        c->image_ref = "";
    } else {
        c->image_ref = image_ref;
    }
    return 0;
}

/* Nova's _check_requested_secgroups: every group but "default" must be
 * found by name or id in the project (400 with the lookup's message). The
 * names stay names: the conductor's port allocation resolves them. 0/-1. */
static int check_secgroups(struct nb_ctx *ctx, const struct create_req *c)
{
    size_t i;
    json_t *v;
    json_array_foreach (c->security_groups, i, v) {
        char id[NB_UUID_LEN];
        const char *nm = json_string_value(v);
        if (strcmp(nm, "default") && nb_network_sg_find(ctx, nm, id) < 0)
            return nb_ctx_status(ctx) == 404 ? nb_srv_error_as(ctx, 400, NULL) : -1;
    }
    return 0;
}

/* Networks before 2.37 (Nova's _get_requested_networks), then the
 * Networking service's checks (Nova's validate_networks). */
static int resolve_networks(struct nb_ctx *ctx, struct create_req *c)
{
    json_t *nets = json_object_get(c->server, "networks");
    c->networks = nets;
    if (!json_is_array(nets))
        return nb_network_validate_request(ctx, nets);
    json_t *ports = json_array();
    size_t i;
    json_t *n;
    int rc = 0;
    json_array_foreach (nets, i, n) {
        const char *port = json_string_value(json_object_get(n, "port"));
        const char *fixed = json_string_value(json_object_get(n, "fixed_ip"));
        if (port) {
            size_t k;
            json_t *p;
            json_array_foreach (ports, k, p)
                if (!strcmp(json_string_value(p), port)) {
                    rc = nb_error(ctx, 400, NULL,
                                  "Port ID '%s' was specified twice: you cannot attach a port "
                                  "multiple times.",
                                  port);
                    goto out;
                }
            if (fixed) {
                rc = nb_error(ctx, 400, NULL,
                              "Specified Fixed IP '%s' cannot be used with port '%s': the two "
                              "cannot be specified together.",
                              fixed, port);
                goto out;
            }
            json_array_append_new(ports, json_string(port));
            continue;
        }
        json_t *uuid = json_object_get(n, "uuid");
        if (!uuid) {
            rc = nb_error(ctx, 400, NULL, "Bad network format: missing 'uuid'");
            goto out;
        }
        if (!nb_is_uuid(json_string_value(uuid))) {
            rc = nb_error(ctx, 400, NULL,
                          "Bad networks format: network uuid is not in proper format (%s)",
                          json_string_value(uuid));
            goto out;
        }
    }
    rc = nb_network_validate_request(ctx, nets);
out:
    json_decref(ports);
    return rc;
}

/* Splits a Glance v2 view into its standard fields and its properties. */
static json_t *image_for_spec(const json_t *img)
{
    json_t *out = json_object(), *props = json_object();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)img, k, v) {
        if (nb_image_is_core_attr(k))
            json_object_set(out, k, v);
        else
            json_object_set(props, k, v);
    }
    json_object_set_new(out, "properties", props);
    return out;
}

static const char *image_prop(const json_t *img, const char *key)
{
    return img ? json_string_value(json_object_get(img, key)) : NULL;
}

/* Flavor/image compatibility (Nova's _validate_flavor_image_nostatus). */
static int check_flavor_image(struct nb_ctx *ctx, struct create_req *c)
{
    if (!c->image)
        return 0;
    const char *icd = image_prop(c->image, "img_config_drive");
    if (icd && strcmp(icd, "optional") && strcmp(icd, "mandatory"))
        return nb_error(ctx, 400, NULL, "Image's config drive option '%s' is invalid", icd);
    long long mem = nb_json_int(c->flavor, "memory_mb", 0);
    if (mem < nb_json_int(c->image, "min_ram", 0))
        return nb_error(ctx, 400, NULL, "Flavor's memory is too small for requested image.");
    if (c->bfv)
        return 0;
    long long gib = 1024LL * 1024 * 1024;
    long long dest = nb_json_int(c->flavor, "root_gb", 0) * gib;
    long long size = nb_json_int(c->image, "size", 0);
    long long min_disk = nb_json_int(c->image, "min_disk", 0) * gib;
    if (dest) {
        if (size > dest)
            return nb_error(ctx, 400, NULL,
                            "Flavor's disk is too small for requested image. Flavor disk is %lld "
                            "bytes, image is %lld bytes.",
                            dest, size);
        if (min_disk > dest)
            return nb_error(ctx, 400, NULL,
                            "Flavor's disk is smaller than the minimum size specified in image "
                            "metadata. Flavor disk is %lld bytes, minimum size is %lld bytes.",
                            dest, min_disk);
    } else if (!ctx->is_admin) {
        /* os_compute_api:servers:create:zero_disk_flavor is admin-only */
        return nb_error(ctx, 403, NULL,
                        "Only volume-backed servers are allowed for flavors with zero disk.");
    }
    return 0;
}

/* Personality files against the injected_* quotas. */
static int check_personality(struct nb_ctx *ctx, const json_t *files, const long long lim[])
{
    size_t n = json_array_size(files);
    if (!n)
        return 0;
    if (lim[NB_Q_INJECTED_FILES] >= 0 && (long long)n > lim[NB_Q_INJECTED_FILES])
        return nb_error(ctx, 403, NULL, "Personality file limit exceeded");
    size_t i;
    json_t *f;
    size_t max_path = 0, max_content = 0;
    json_array_foreach ((json_t *)files, i, f) {
        const char *p = nb_json_str(f, "path"), *cnt = nb_json_str(f, "contents");
        if (p && strlen(p) > max_path)
            max_path = strlen(p);
        if (cnt && strlen(cnt) > max_content)
            max_content = strlen(cnt);
    }
    if (lim[NB_Q_INJECTED_FILE_PATH_BYTES] >= 0 &&
        (long long)max_path > lim[NB_Q_INJECTED_FILE_PATH_BYTES])
        return nb_error(ctx, 403, NULL, "Personality file path exceeds maximum %lld",
                        lim[NB_Q_INJECTED_FILE_PATH_BYTES]);
    if (lim[NB_Q_INJECTED_FILE_CONTENT_BYTES] >= 0 &&
        (long long)max_content > lim[NB_Q_INJECTED_FILE_CONTENT_BYTES])
        return nb_error(ctx, 403, NULL, "Personality file content exceeds maximum %lld",
                        lim[NB_Q_INJECTED_FILE_CONTENT_BYTES]);
    return 0;
}

/* A volume-backed snapshot image (property block_device_mapping) brings
 * its mappings: they are merged with the request's (Nova's
 * _check_and_transform_bdm) and a volume root makes the server
 * volume-backed. */
static int merge_image_bdms(struct nb_ctx *ctx, struct create_req *c)
{
    json_t *image_bdms = nb_srv_image_bdms(ctx, c->image);
    if (!image_bdms)
        return -1;
    if (json_array_size(image_bdms)) {
        json_t *merged = nb_srv_merge_bdms(image_bdms, c->bdms);
        json_decref(c->bdms);
        c->bdms = merged;
        size_t i;
        json_t *b;
        json_array_foreach (c->bdms, i, b) {
            const char *dst = nb_json_str(b, "destination_type");
            if (nb_srv_bdm_is_root(b) && dst && !strcmp(dst, "volume"))
                c->bfv = true;
        }
    }
    json_decref(image_bdms);
    return 0;
}

/* The create policy, names, hints, counts and security groups. 0/-1. */
static int resolve_basics(struct nb_ctx *ctx, json_t *body, struct create_req *c)
{
    json_t *s = c->server;
    json_t *v;
    if (nb_srv_policy(ctx, "os_compute_api:servers:create",
                      nb_srv_is_member_of(ctx, ctx->project_id)) < 0)
        return -1;
    c->name = nb_srv_normalize_name(json_string_value(json_object_get(s, "name")));
    c->description = c->name;
    if (nb_ctx_mv_ge(ctx, 2, 19))
        c->description = json_string_value(json_object_get(s, "description"));
    if (nb_ctx_mv_ge(ctx, 2, 90))
        c->hostname = json_string_value(json_object_get(s, "hostname"));
    json_t *hints = json_object_get(body, "os:scheduler_hints");
    if (!hints)
        hints = json_object_get(body, "OS-SCH-HNT:scheduler_hints");
    c->hints = json_object();
    const char *k;
    json_object_foreach (hints, k, v)
        if (strncmp(k, "_nova", 5))
            json_object_set(c->hints, k, v);

    c->min_count = 1;
    if ((v = json_object_get(s, "min_count")))
        nb_srv_check_int(ctx, "min_count", v, 1, &c->min_count);
    c->max_count = c->min_count;
    if ((v = json_object_get(s, "max_count")))
        nb_srv_check_int(ctx, "max_count", v, 1, &c->max_count);
    if (c->min_count > c->max_count)
        return nb_error(ctx, 400, NULL, "min_count must be <= max_count");

    c->security_groups = json_array();
    size_t i;
    json_array_foreach (json_object_get(s, "security_groups"), i, v) {
        const char *nm = nb_json_str(v, "name");
        if (nm)
            nb_json_set_add(c->security_groups, nm);
    }
    if (!json_array_size(c->security_groups))
        json_array_append_new(c->security_groups, json_string("default"));

    return 0;
}

/* The requested zone, forced host/node (admins) and 2.74 host. 0/-1. */
static int resolve_destination(struct nb_ctx *ctx, struct create_req *c)
{
    json_t *s = c->server;
    if (parse_az(ctx, json_string_value(json_object_get(s, "availability_zone")), c) < 0)
        return -1;
    if ((c->forced_host || c->forced_node) &&
        nb_srv_policy(ctx, "os_compute_api:servers:create:forced_host", ctx->is_admin) < 0)
        return -1;
    if (c->forced_host && c->az) {
        char *haz = nb_host_availability_zone(ctx, c->forced_host);
        if (!haz || strcmp(haz, c->az)) {
            free(c->az);
            c->az = NULL;
        }
        free(haz);
    }
    if (nb_ctx_mv_ge(ctx, 2, 74)) {
        c->req_host = json_string_value(json_object_get(s, "host"));
        c->req_node = json_string_value(json_object_get(s, "hypervisor_hostname"));
        if (c->req_host || c->req_node) {
            if (nb_srv_policy(ctx, "compute:servers:create:requested_destination", ctx->is_admin) <
                0)
                return -1;
            if (c->forced_host || c->forced_node)
                return nb_error(ctx, 400, NULL,
                                "One mechanism with host and/or hypervisor_hostname and another "
                                "mechanism with zone:host:node are mutually exclusive.");
        }
    }
    return 0;
}

/* flavorRef (an id or a link) to the flavor. 0/-1. */
static int resolve_flavor(struct nb_ctx *ctx, struct create_req *c)
{
    json_t *s = c->server;
    /* the flavor: id or link */
    json_t *fref = json_object_get(s, "flavorRef");
    char fid[256];
    if (json_is_integer(fref)) {
        snprintf(fid, sizeof(fid), "%lld", (long long)json_integer_value(fref));
    } else {
        const char *f = json_string_value(fref);
        const char *q = strchr(f, '?');
        size_t len = q ? (size_t)(q - f) : strlen(f);
        const char *slash = memrchr(f, '/', len);
        const char *start = slash ? slash + 1 : f;
        snprintf(fid, sizeof(fid), "%.*s", (int)(len - (size_t)(start - f)), start);
    }
    c->flavor = nb_flavor_get(ctx, fid);
    if (!c->flavor)
        return nb_srv_error_as(ctx, 400, NULL);
    if (nb_json_int(c->flavor, "disabled", 0))
        return nb_error(ctx, 400, NULL, "Flavor %s could not be found.", fid);

    return 0;
}

/* One hostname for one server; the zone and the requested host exist. 0/-1. */
static int check_destination(struct nb_ctx *ctx, struct create_req *c)
{
    if (c->hostname && c->max_count > 1)
        return nb_error(ctx, 400, NULL,
                        "Unable to allocate a single hostname to multiple instances");
    if (c->az && !c->forced_host && !nb_availability_zone_exists(ctx, c->az))
        return nb_error(ctx, 400, NULL, "The requested availability zone is not available");
    if ((c->req_host || c->req_node)) {
        long long found = nb_db_int(nb_srv_db(), ctx, 0,
                                    "SELECT COUNT(*) FROM compute_nodes WHERE deleted = 0 AND "
                                    "(? IS NULL OR host = ?) AND (? IS NULL OR "
                                    "hypervisor_hostname = ?)",
                                    "ssss", c->req_host, c->req_host, c->req_node, c->req_node);
        if (found < 0)
            return -1;
        if (!found)
            return nb_error(ctx, 400, NULL, "Compute host %s could not be found.",
                            c->req_host ? c->req_host : c->req_node);
    }

    return 0;
}

/* The image (active), disk config, config drive, key pair, and the flavor against the image. 0/-1.
 */
static int resolve_image(struct nb_ctx *ctx, struct create_req *c)
{
    json_t *s = c->server;
    /* the image */
    json_t *certs = json_object_get(s, "trusted_image_certificates");
    if (*c->image_ref) {
        c->image = nb_image_lookup(ctx, c->image_ref);
        if (!c->image)
            return nb_ctx_status(ctx) == 400 || nb_ctx_status(ctx) == 404
                       ? nb_srv_error_as(ctx, 400, "Can not find requested image")
                       : -1;
        const char *st = nb_json_str(c->image, "status");
        if (!st || strcmp(st, "active"))
            return nb_error(ctx, 400, NULL, "Image %s is not active.", c->image_ref);
        if (merge_image_bdms(ctx, c) < 0)
            return -1;
    } else if (json_array_size(certs)) {
        return nb_error(ctx, 400, NULL,
                        "Image certificate validation is not supported when booting from volume");
    }
    const char *dc = json_string_value(json_object_get(s, "OS-DCF:diskConfig"));
    const char *img_adc = image_prop(c->image, "auto_disk_config");
    if (dc && !strcmp(dc, "AUTO") && img_adc && !strcmp(img_adc, "disabled"))
        return nb_error(ctx, 400, NULL, "Requested image %s has automatic disk resize disabled.",
                        c->image_ref);
    c->auto_disk_config =
        dc ? !strcmp(dc, "AUTO") : (img_adc && nb_srv_bool_from_string(img_adc, false) == 1);
    c->config_drive = nb_srv_json_truthy(json_object_get(s, "config_drive"));
    const char *key_name = json_string_value(json_object_get(s, "key_name"));
    if (key_name) {
        c->keypair = nb_keypair_get(ctx, ctx->user_id, key_name);
        if (!c->keypair)
            return nb_ctx_status(ctx) == 404
                       ? nb_srv_error_as(ctx, 400, "Invalid key_name provided.")
                       : -1;
    }
    if (check_flavor_image(ctx, c) < 0)
        return -1;

    return 0;
}

/* Metadata items and personality files against the quotas. 0/-1. */
static int check_create_limits(struct nb_ctx *ctx, struct create_req *c)
{
    json_t *s = c->server;
    long long lim[NB_Q_COUNT];
    if (nb_quota_limits(ctx, ctx->project_id, ctx->user_id, lim) < 0)
        return -1;
    json_t *md = json_object_get(s, "metadata");
    if (lim[NB_Q_METADATA_ITEMS] >= 0 && (long long)json_object_size(md) > lim[NB_Q_METADATA_ITEMS])
        return nb_error(ctx, 403, NULL, "Maximum number of metadata items exceeds %lld",
                        lim[NB_Q_METADATA_ITEMS]);
    if (check_personality(ctx, json_object_get(s, "personality"), lim) < 0)
        return -1;

    return 0;
}

/* The server group hint and the admin password. 0/-1. */
static int resolve_group_and_password(struct nb_ctx *ctx, struct create_req *c)
{
    json_t *s = c->server;
    const char *group = json_string_value(json_object_get(c->hints, "group"));
    if (group) {
        c->group = nb_server_group_get(ctx, group);
        if (!c->group) {
            if (nb_ctx_status(ctx) != 404 && nb_ctx_status(ctx) != 400)
                return -1;
            char msg[128];
            snprintf(msg, sizeof(msg), "Instance group %s could not be found.", group);
            return nb_srv_error_as(ctx, 400, msg);
        }
    }
    const char *pass = json_string_value(json_object_get(s, "adminPass"));
    if (pass) {
        c->admin_pass = strdup(pass);
    } else {
        c->admin_pass = malloc(13);
        generate_password(c->admin_pass);
    }
    return 0;
}

/* Resolves everything a validated request names into c, in Nova's order
 * of checks; the first refusal wins. 0/-1. */
static int resolve_create(struct nb_ctx *ctx, json_t *body, struct create_req *c)
{
    if (resolve_basics(ctx, body, c) < 0 || resolve_destination(ctx, c) < 0 ||
        resolve_bdms(ctx, c) < 0 || check_secgroups(ctx, c) < 0 || resolve_networks(ctx, c) < 0 ||
        resolve_flavor(ctx, c) < 0 || check_destination(ctx, c) < 0 || resolve_image(ctx, c) < 0 ||
        check_create_limits(ctx, c) < 0 || resolve_group_and_password(ctx, c) < 0)
        return -1;
    return 0;
}

/* ---- create: the records ------------------------------------------------------------------ */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* A new reference to v, or NULL. */
static json_t *ref_or_null(json_t *v)
{
    return v ? json_incref(v) : NULL;
}

/* The scheduling request stored with each instance (instances.request_spec,
 * compute/objects/request_spec.h), read by the conductor and the
 * scheduler. New ref. */
static json_t *build_request_spec(struct nb_ctx *ctx, const struct create_req *c, const char *uuid,
                                  int index, int num)
{
    struct nb_request_spec rs = {
        .instance_uuid = strdup(uuid),
        .project_id = strdup(ctx->project_id),
        .user_id = strdup(ctx->user_id),
        .flavor = ref_or_null(c->flavor),
        .image = c->image ? image_for_spec(c->image) : NULL,
        .availability_zone = dup_or_null(c->az),
        .force_host = dup_or_null(c->forced_host),
        .force_node = dup_or_null(c->forced_node),
        .requested_host = dup_or_null(c->req_host),
        .requested_node = dup_or_null(c->req_node),
        .scheduler_hints = ref_or_null(c->hints),
        .group = c->group ? json_pack("{s:O?, s:O?, s:O?, s:O?}", "uuid",
                                      json_object_get(c->group, "uuid"), "policy",
                                      json_object_get(c->group, "policy"), "rules",
                                      json_object_get(c->group, "rules"), "members",
                                      json_object_get(c->group, "members"))
                          : NULL,
        .num_instances = num,
        .launch_index = index,
        .is_bfv = c->bfv,
        .security_groups = ref_or_null(c->security_groups),
        .requested_networks = c->networks ? json_incref(c->networks) : json_string("auto"),
        .injected_files = ref_or_null(json_object_get(c->server, "personality")),
    };
    json_t *spec = nb_request_spec_to_json(&rs);
    nb_request_spec_free(&rs);
    return spec;
}

static int insert_bdm(struct nb_ctx *ctx, const char *instance_uuid, const json_t *b,
                      const char *now)
{
    char buuid[NB_UUID_LEN];
    nb_uuid(buuid);
    json_t *bi = json_object_get(b, "boot_index");
    json_t *vs = json_object_get(b, "volume_size");
    long long size = json_is_integer(vs)  ? json_integer_value(vs)
                     : json_is_string(vs) ? strtoll(json_string_value(vs), NULL, 10)
                                          : -1;
    return nb_db_exec(nb_srv_db(), ctx,
                      "INSERT INTO block_device_mapping (uuid, instance_uuid, source_type, "
                      "destination_type, guest_format, device_type, disk_bus, device_name, "
                      "boot_index, volume_id, image_id, snapshot_id, volume_size, volume_type, "
                      "delete_on_termination, no_device, tag, created_at, updated_at) VALUES "
                      "(?, ?, ?, ?, ?, ?, ?, ?, CASE WHEN ? THEN ? END, ?, ?, ?, "
                      "CASE WHEN ? >= 0 THEN ? END, ?, ?, ?, ?, ?, ?)",
                      "ssssssssbisssiisbbsss", buuid, instance_uuid, nb_json_str(b, "source_type"),
                      nb_json_str(b, "destination_type"), nb_json_str(b, "guest_format"),
                      nb_json_str(b, "device_type"), nb_json_str(b, "disk_bus"),
                      nb_json_str(b, "device_name"), json_is_integer(bi),
                      (long long)(json_is_integer(bi) ? json_integer_value(bi) : 0),
                      nb_json_str(b, "volume_id"), nb_json_str(b, "image_id"),
                      nb_json_str(b, "snapshot_id"), size, size, nb_json_str(b, "volume_type"),
                      json_is_true(json_object_get(b, "delete_on_termination")),
                      json_object_get(b, "no_device") != NULL, nb_json_str(b, "tag"), now, now) < 0
               ? -1
               : 0;
}

/* The mappings of one instance: the request's, plus the image root disk
 * and the flavor's ephemeral and swap disks Nova adds. */
static json_t *instance_bdms(const struct create_req *c)
{
    json_t *all = json_deep_copy(c->bdms);
    bool root = false, eph = false, swap = false;
    size_t i;
    json_t *b;
    json_array_foreach (all, i, b) {
        json_t *bi = json_object_get(b, "boot_index");
        const char *src = nb_json_str(b, "source_type");
        const char *dst = nb_json_str(b, "destination_type");
        const char *gf = nb_json_str(b, "guest_format");
        if (json_is_integer(bi) && json_integer_value(bi) == 0)
            root = true;
        if (src && !strcmp(src, "blank") && dst && !strcmp(dst, "local")) {
            if (gf && !strcmp(gf, "swap"))
                swap = true;
            else
                eph = true;
        }
    }
    if (!root && *c->image_ref)
        json_array_insert_new(all, 0,
                              json_pack("{s:s, s:s, s:s, s:s, s:i, s:b}", "source_type", "image",
                                        "destination_type", "local", "device_type", "disk",
                                        "image_id", c->image_ref, "boot_index", 0,
                                        "delete_on_termination", 1));
    long long eph_gb = nb_json_int(c->flavor, "ephemeral_gb", 0);
    long long swap_mb = nb_json_int(c->flavor, "swap", 0);
    if (eph_gb > 0 && !eph)
        json_array_append_new(all, json_pack("{s:s, s:s, s:s, s:i, s:I, s:b}", "source_type",
                                             "blank", "destination_type", "local", "device_type",
                                             "disk", "boot_index", -1, "volume_size",
                                             (json_int_t)eph_gb, "delete_on_termination", 1));
    if (swap_mb > 0 && !swap)
        json_array_append_new(all,
                              json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:b}", "source_type",
                                        "blank", "destination_type", "local", "device_type", "disk",
                                        "guest_format", "swap", "boot_index", -1, "volume_size",
                                        (json_int_t)swap_mb, "delete_on_termination", 1));
    return all;
}

static int insert_instance(struct nb_ctx *ctx, const struct create_req *c, const char *uuid,
                           int index, int num, const char *resv, const char *now)
{
    struct nb_db *db = nb_srv_db();
    json_t *s = c->server;
    char *name = num > 1 ? nb_strdup_printf("%s-%d", c->name, index + 1) : strdup(c->name);
    char *hostname;
    if (c->hostname) {
        hostname = strdup(c->hostname);
    } else {
        char *h = nb_srv_sanitize_hostname(c->name);
        hostname = !*h       ? nb_strdup_printf("Server-%s", uuid)
                   : num > 1 ? nb_strdup_printf("%s-%d", h, index + 1)
                             : strdup(h);
        free(h);
    }
    const char *kernel = image_prop(c->image, "kernel_id");
    const char *ramdisk = image_prop(c->image, "ramdisk_id");
    if (kernel && !strcmp(kernel, "nokernel"))
        kernel = ramdisk = NULL;
    json_t *certs = json_object_get(s, "trusted_image_certificates");
    json_t *spec = build_request_spec(ctx, c, uuid, index, num);
    struct nb_instance_new in = {
        .uuid = uuid,
        .project_id = ctx->project_id,
        .user_id = ctx->user_id,
        .display_name = name,
        .display_description = c->description,
        .hostname = hostname,
        .availability_zone = c->az,
        .instance_type_id = nb_json_int(c->flavor, "id", 0),
        .flavor = c->flavor,
        .image_ref = c->image_ref,
        .key_name = c->keypair ? nb_json_str(c->keypair, "name") : NULL,
        .key_data = c->keypair ? nb_json_str(c->keypair, "public_key") : NULL,
        .user_data = json_string_value(json_object_get(s, "user_data")),
        .config_drive = c->config_drive ? "True" : "",
        .reservation_id = resv,
        .launch_index = index,
        .access_ip_v4 = json_string_value(json_object_get(s, "accessIPv4")),
        .access_ip_v6 = json_string_value(json_object_get(s, "accessIPv6")),
        .root_device_name = image_prop(c->image, "root_device_name"),
        .request_spec = spec,
        .created_at = now,
        .vcpus = nb_json_int(c->flavor, "vcpus", 0),
        .memory_mb = nb_json_int(c->flavor, "memory_mb", 0),
        .root_gb = nb_json_int(c->flavor, "root_gb", 0),
        .ephemeral_gb = nb_json_int(c->flavor, "ephemeral_gb", 0),
        .kernel_id = kernel ? kernel : "",
        .ramdisk_id = ramdisk ? ramdisk : "",
        .auto_disk_config = c->auto_disk_config,
        .trusted_certs = json_is_array(certs) ? certs : NULL,
    };
    int rc = nb_instance_create(db, ctx, &in);
    free(name);
    free(hostname);
    json_decref(spec);
    if (rc < 0)
        return -1;
    const char *k;
    json_t *v;
    json_object_foreach (json_object_get(s, "metadata"), k, v) {
        if (nb_db_exec(
                db, ctx,
                "INSERT INTO instance_metadata (instance_uuid, \"key\", value) VALUES (?, ?, ?)",
                "sss", uuid, k, json_string_value(v)) < 0)
            return -1;
    }
    size_t i;
    json_array_foreach (json_object_get(s, "tags"), i, v) {
        if (nb_db_insert_ignore(db, ctx, "INTO tags (resource_id, tag) VALUES (?, ?)", "ss", uuid,
                                json_string_value(v)) < 0)
            return -1;
    }
    json_t *bdms = instance_bdms(c);
    json_array_foreach (bdms, i, v) {
        if (insert_bdm(ctx, uuid, v, now) < 0) {
            json_decref(bdms);
            return -1;
        }
    }
    json_decref(bdms);
    if (c->group && nb_server_group_add_member(ctx, nb_json_str(c->group, "uuid"), uuid) < 0)
        return -1;
    return nb_action_start(db, ctx, uuid, "create");
}

/* Quota, then the rows, in one transaction. Fills uuids; returns 0/-1. */
static int store_instances(struct nb_ctx *ctx, const struct create_req *c, const char *resv,
                           json_t *uuids)
{
    struct nb_db *db = nb_srv_db();
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    int num = nb_quota_check_instances(
        ctx, ctx->project_id, ctx->user_id, nb_json_int(c->flavor, "vcpus", 0),
        nb_json_int(c->flavor, "memory_mb", 0), (int)c->min_count, (int)c->max_count);
    if (num < 0)
        goto fail;
    /* the group's member quota is checked as each member is added */
    for (int i = 0; i < num; i++) {
        char uuid[NB_UUID_LEN];
        nb_uuid(uuid);
        if (insert_instance(ctx, c, uuid, i, num, resv, now) < 0)
            goto fail;
        json_array_append_new(uuids, json_string(uuid));
    }
    return nb_db_commit(db, ctx);
fail:
    nb_db_rollback(db);
    return -1;
}

int nb_srv_h_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = nb_req_json_object(ctx, req);
    if (!body)
        return -1;
    json_t *server = json_object_get(body, "server");
    if (!server)
        return nb_error(ctx, 400, NULL, "'server' is a required property");
    if (!json_is_object(server))
        return nb_srv_bad(ctx, "server", server, "is not of type 'object'");
    if (nb_srv_validate_create(ctx, body, server) < 0)
        return -1;
    struct create_req c;
    memset(&c, 0, sizeof(c));
    c.server = server;
    json_t *uuids = json_array();
    int rc = -1;
    char resv[11];
    reservation_id(resv);
    if (resolve_create(ctx, body, &c) < 0 ||
        nb_srv_check_bdms(ctx, c.bdms, c.image_ref, c.max_count) < 0 ||
        nb_srv_reserve_volumes(ctx, c.bdms) < 0)
        goto out;
    if (store_instances(ctx, &c, resv, uuids) < 0) {
        nb_srv_unreserve_volumes(ctx, c.bdms);
        goto out;
    }
    NB_INFO("nubo.compute.api", ctx, json_string_value(json_array_get(uuids, 0)),
            "Accepted create of %zu instance(s) %s (reservation %s)", json_array_size(uuids),
            c.name, resv);
    if (nb_conductor_build_instances(ctx, uuids, c.admin_pass) < 0)
        NB_ERROR("nubo.compute.api", ctx, NULL,
                 "no conductor listening: instances stay in BUILD until one is started");
    if (nb_srv_json_truthy(json_object_get(server, "return_reservation_id"))) {
        rc = nb_resp_json(resp, 202, json_pack("{s:s}", "reservation_id", resv));
        goto out;
    }
    const char *uuid = json_string_value(json_array_get(uuids, 0));
    json_t *sgs = json_object_get(server, "security_groups");
    json_t *view =
        json_pack("{s:s, s:o, s:s, s:o}", "id", uuid, "links", nb_res_links("servers", uuid),
                  "OS-DCF:diskConfig", c.auto_disk_config ? "AUTO" : "MANUAL", "security_groups",
                  sgs ? json_incref(sgs) : json_pack("[{s:s}]", "name", "default"));
    if (nb_conf_bool("api", "enable_instance_password", true))
        json_object_set_new(view, "adminPass", json_string(c.admin_pass));
    const char *self = nb_json_str(json_array_get(json_object_get(view, "links"), 0), "href");
    nb_resp_header(resp, "Location", self);
    rc = nb_resp_json(resp, 202, json_pack("{s:o}", "server", view));
out:
    create_req_free(&c);
    json_decref(uuids);
    return rc;
}

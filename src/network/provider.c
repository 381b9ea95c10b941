/* provider.c - ML2's type drivers and network segments: the provider
 * attributes of a network (provider:network_type, provider:physical_network,
 * provider:segmentation_id), admin-only to set and to see as Neutron's
 * policy has them, and the segment a tenant network gets from [ml2]
 * tenant_network_types (default vxlan):
 *   vxlan  [ml2_type_vxlan] vni_ranges (1:1000), the lowest free VNI;
 *   vlan   [ml2_type_vlan] network_vlan_ranges ("physnet:min:max,...",
 *          a bare "physnet" allows provider networks only);
 *   flat   [ml2_type_flat] flat_networks ("*" any), one network per
 *          physical network; never a tenant type;
 *   local  no segmentation (and what a network made before 073 reads as).
 * The MTU a segment allows is [DEFAULT] global_physnet_mtu (1500), minus
 * 50 for vxlan (Neutron's IPv4 overhead); a larger requested mtu is 400.
 * Messages are neutron's type drivers'. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "network/ml2_int.h"
#include "network/network_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG "nubo.network.ml2"
#define MAX_RANGES 32

/* --- pure parts ---------------------------------------------------------- */

static int parse_range(const char *s, long long lo, long long hi, struct nb_id_range *r)
{
    char *end;
    long long a = strtoll(s, &end, 10);
    if (end == s || *end != ':')
        return -1;
    const char *b_s = end + 1;
    long long b = strtoll(b_s, &end, 10);
    if (end == b_s || (*end && *end != ','))
        return -1;
    if (a < lo || b > hi || a > b)
        return -1;
    r->min = a;
    r->max = b;
    return 0;
}

int nb_ml2_parse_ranges(const char *text, long long lo, long long hi, struct nb_id_range *r,
                        int max)
{
    int n = 0;
    const char *p = text ? text : "";
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        if (n == max || parse_range(p, lo, hi, &r[n]) < 0)
            return -1;
        n++;
        while (*p && *p != ',')
            p++;
    }
    return n;
}

long long nb_ml2_first_free(const struct nb_id_range *r, int nr, const long long *used, int n)
{
    for (int i = 0; i < nr; i++) {
        long long cand = r[i].min;
        for (int j = 0; j < n && cand <= r[i].max; j++)
            if (used[j] == cand)
                cand++;
            else if (used[j] > cand)
                break;
        if (cand <= r[i].max)
            return cand;
    }
    return -1;
}

int nb_ml2_type_mtu(const char *type, int physnet_mtu)
{
    if (!strcmp(type, "vxlan"))
        return physnet_mtu - NB_VXLAN_OVERHEAD;
    if (!strcmp(type, "flat") || !strcmp(type, "vlan") || !strcmp(type, "local"))
        return physnet_mtu;
    return 0;
}

bool nb_ml2_in_list(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; p && *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        if ((e - p == 1 && *p == '*') || ((size_t)(e - p) == len && !strncmp(p, name, len)))
            return true;
        p = e;
    }
    return false;
}

/* --- configuration --------------------------------------------------------- */

int nb_ml2_physnet_mtu(void)
{
    return (int)nb_conf_int("DEFAULT", "global_physnet_mtu",
                            nb_conf_int("network", "global_physnet_mtu", 1500));
}

static int invalid(struct nb_ctx *ctx, const char *msg)
{
    return nb_error(ctx, 400, "InvalidInput", "Invalid input for operation: %s.", msg);
}

/* The VLAN ranges of physnet from network_vlan_ranges: the count (0 for a
 * bare physnet entry), -1 when physnet is not listed, -2 on bad text. */
static int vlan_ranges(const char *physnet, struct nb_id_range *r, int max)
{
    const char *cfg = nb_conf_str("ml2_type_vlan", "network_vlan_ranges", "");
    int n = -1;
    _cleanup_free_ char *copy = strdup(cfg);
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        char *colon = strchr(tok, ':');
        size_t len = colon ? (size_t)(colon - tok) : strlen(tok);
        if (len != strlen(physnet) || strncmp(tok, physnet, len))
            continue;
        if (n < 0)
            n = 0;
        if (colon) {
            if (n == max || parse_range(colon + 1, 1, 4094, &r[n]) < 0)
                return -2;
            n++;
        }
    }
    return n;
}

/* --- segments --------------------------------------------------------------- */

static int insert_segment(struct nb_ctx *ctx, const char *network_id, const char *type,
                          const char *physnet, long long seg_id)
{
    char id[NB_UUID_LEN];
    nb_uuid(id);
    if (seg_id >= 0)
        return nb_db_exec(nb_net_env->db, ctx,
                          "INSERT INTO networksegments (id, network_id, network_type, "
                          "physical_network, segmentation_id) VALUES (?, ?, ?, ?, ?)",
                          "ssssi", id, network_id, type, physnet, seg_id) < 0
                   ? -1
                   : 0;
    return nb_db_exec(nb_net_env->db, ctx,
                      "INSERT INTO networksegments (id, network_id, network_type, "
                      "physical_network) VALUES (?, ?, ?, ?)",
                      "ssss", id, network_id, type, physnet) < 0
               ? -1
               : 0;
}

/* The ids in use by type (and physnet for vlan), ascending, into *out
 * (malloc'd). The count, or -1. */
static int used_ids(struct nb_ctx *ctx, const char *type, const char *physnet, long long **out)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx,
                   "SELECT segmentation_id AS s FROM networksegments WHERE network_type = ? AND "
                   "segmentation_id IS NOT NULL AND (? IS NULL OR physical_network = ?) ORDER BY "
                   "segmentation_id",
                   "sss", type, physnet, physnet);
    if (!rows)
        return -1;
    size_t n = json_array_size(rows);
    *out = calloc(n + 1, sizeof(**out));
    for (size_t i = 0; i < n; i++)
        (*out)[i] = nb_json_int(json_array_get(rows, i), "s", 0);
    return (int)n;
}

static bool id_used(const long long *used, int n, long long id)
{
    for (int i = 0; i < n; i++)
        if (used[i] == id)
            return true;
    return false;
}

/* A vxlan segment: seg_id < 0 allocates the lowest free VNI. */
static int reserve_vxlan(struct nb_ctx *ctx, const char *net, const char *physnet, long long seg_id,
                         bool provider)
{
    if (physnet)
        return invalid(ctx, "provider:physical_network specified for vxlan network");
    struct nb_id_range r[MAX_RANGES];
    int nr = nb_ml2_parse_ranges(nb_conf_str("ml2_type_vxlan", "vni_ranges", "1:1000"), 1,
                                 (1 << 24) - 1, r, MAX_RANGES);
    if (nr < 0)
        return nb_error(ctx, 500, NULL, "Invalid [ml2_type_vxlan] vni_ranges.");
    _cleanup_free_ long long *used = NULL;
    int n = used_ids(ctx, "vxlan", NULL, &used);
    if (n < 0)
        return -1;
    if (seg_id >= 0) {
        if (seg_id < 1 || seg_id > (1 << 24) - 1)
            return invalid(ctx, "segmentation_id out of range (1 through 16777215)");
        if (id_used(used, n, seg_id))
            return nb_error(ctx, 409, "TunnelIdInUse",
                            "Unable to create the network. The tunnel ID %lld is in use.", seg_id);
    } else if ((seg_id = nb_ml2_first_free(r, nr, used, n)) < 0) {
        if (provider)
            return nb_error(ctx, 503, "NoNetworkAvailable",
                            "Unable to create the network. No tenant network is available for "
                            "allocation.");
        return 1; /* this type is exhausted: the next tenant type may have room */
    }
    return insert_segment(ctx, net, "vxlan", NULL, seg_id);
}

static int reserve_flat(struct nb_ctx *ctx, const char *net, const char *physnet, bool has_id)
{
    const char *allowed = nb_conf_str("ml2_type_flat", "flat_networks", "*");
    if (!physnet)
        return invalid(ctx, "physical_network required for flat provider network");
    if (!*allowed)
        return invalid(ctx, "Flat provider networks are disabled");
    if (!nb_ml2_in_list(allowed, physnet)) {
        char msg[384];
        snprintf(msg, sizeof(msg), "physical_network '%s' unknown for flat provider network",
                 physnet);
        return invalid(ctx, msg);
    }
    if (has_id)
        return invalid(ctx, "segmentation_id prohibited for flat provider network");
    if (nb_db_int(nb_net_env->db, ctx, 0,
                  "SELECT COUNT(*) FROM networksegments WHERE network_type = 'flat' AND "
                  "physical_network = ?",
                  "s", physnet) > 0)
        return nb_error(ctx, 409, "FlatNetworkInUse",
                        "Unable to create the flat network. Physical network %s is in use.",
                        physnet);
    return insert_segment(ctx, net, "flat", physnet, -1);
}

/* A vlan segment on physnet (NULL: the first configured physnet with a
 * free id, for a tenant network). */
static int reserve_vlan(struct nb_ctx *ctx, const char *net, const char *physnet, long long seg_id,
                        bool provider)
{
    struct nb_id_range r[MAX_RANGES];
    char msg[384];
    if (!physnet && provider) {
        if (seg_id >= 0)
            return invalid(ctx, "segmentation_id requires physical_network for VLAN provider "
                                "network");
        return invalid(ctx, "physical_network required for VLAN provider network");
    }
    if (!physnet) { /* tenant: walk the configured physnets in order */
        _cleanup_free_ char *copy = strdup(nb_conf_str("ml2_type_vlan", "network_vlan_ranges", ""));
        char *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            char *colon = strchr(tok, ':');
            if (!colon)
                continue;
            *colon = 0;
            while (*tok == ' ')
                tok++;
            int rc = reserve_vlan(ctx, net, tok, -1, false);
            if (rc <= 0)
                return rc;
        }
        return 1;
    }
    int nr = vlan_ranges(physnet, r, MAX_RANGES);
    if (nr == -1) {
        snprintf(msg, sizeof(msg), "physical_network '%s' unknown for VLAN provider network",
                 physnet);
        return invalid(ctx, msg);
    }
    if (nr < 0)
        return nb_error(ctx, 500, NULL, "Invalid [ml2_type_vlan] network_vlan_ranges.");
    _cleanup_free_ long long *used = NULL;
    int n = used_ids(ctx, "vlan", physnet, &used);
    if (n < 0)
        return -1;
    if (seg_id >= 0) {
        if (seg_id < 1 || seg_id > 4094)
            return invalid(ctx, "segmentation_id out of range (1 through 4094)");
        if (id_used(used, n, seg_id))
            return nb_error(ctx, 409, "VlanIdInUse",
                            "Unable to create the network. The VLAN %lld on physical network %s "
                            "is in use.",
                            seg_id, physnet);
    } else if ((seg_id = nb_ml2_first_free(r, nr, used, n)) < 0) {
        if (provider)
            return nb_error(ctx, 503, "NoNetworkAvailable",
                            "Unable to create the network. No tenant network is available for "
                            "allocation.");
        return 1;
    }
    return insert_segment(ctx, net, "vlan", physnet, seg_id);
}

/* A provider segment of type (checked). 0/-1. */
static int reserve_provider(struct nb_ctx *ctx, const char *net, const char *type,
                            const char *physnet, const json_t *seg)
{
    long long seg_id = json_is_integer(seg) ? json_integer_value(seg) : -1;
    int rc;
    if (!strcmp(type, "vxlan"))
        rc = reserve_vxlan(ctx, net, physnet, seg_id, true);
    else if (!strcmp(type, "flat"))
        rc = reserve_flat(ctx, net, physnet, seg != NULL);
    else if (!strcmp(type, "vlan"))
        rc = reserve_vlan(ctx, net, physnet, seg_id, true);
    else if (!strcmp(type, "local")) {
        if (physnet || seg)
            return invalid(ctx, physnet ? "provider:physical_network specified for local network"
                                        : "segmentation_id prohibited for local provider network");
        rc = insert_segment(ctx, net, "local", NULL, -1);
    } else {
        char msg[384];
        snprintf(msg, sizeof(msg), "network_type value '%s' not supported", type);
        return invalid(ctx, msg);
    }
    return rc < 0 ? -1 : 0;
}

/* A tenant segment from [ml2] tenant_network_types, first type with room. */
static int reserve_tenant(struct nb_ctx *ctx, const char *net, const char **type)
{
    _cleanup_free_ char *types = strdup(nb_conf_str("ml2", "tenant_network_types", "vxlan"));
    char *save = NULL;
    for (char *t = strtok_r(types, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        int rc = !strcmp(t, "vxlan")   ? reserve_vxlan(ctx, net, NULL, -1, false)
                 : !strcmp(t, "vlan")  ? reserve_vlan(ctx, net, NULL, -1, false)
                 : !strcmp(t, "local") ? insert_segment(ctx, net, "local", NULL, -1)
                                       : 1;
        if (rc <= 0) {
            *type = !strcmp(t, "vxlan") ? "vxlan" : !strcmp(t, "vlan") ? "vlan" : "local";
            return rc;
        }
    }
    return nb_error(ctx, 503, "NoNetworkAvailable",
                    "Unable to create the network. No tenant network is available for "
                    "allocation.");
}

int nb_ml2_segment_reserve(struct nb_ctx *ctx, const char *network_id, const json_t *body,
                           int *max_mtu)
{
    static const char *const attrs[] = {"provider:network_type", "provider:physical_network",
                                        "provider:segmentation_id"};
    bool any = false;
    for (int i = 0; i < 3; i++) {
        json_t *v = json_object_get(body, attrs[i]);
        if (!v || json_is_null(v))
            continue;
        any = true;
        if (!ctx->is_admin)
            return nb_error(ctx, 403, "PolicyNotAuthorized",
                            "(rule:create_network and rule:create_network:%s) is disallowed by "
                            "policy",
                            attrs[i]);
    }
    const char *type = NULL;
    if (!any) {
        if (reserve_tenant(ctx, network_id, &type) < 0)
            return -1;
    } else {
        type = nb_json_str(body, "provider:network_type");
        if (!type)
            return invalid(ctx, "network_type required");
        const char *physnet = nb_json_str(body, "provider:physical_network");
        json_t *seg = json_object_get(body, "provider:segmentation_id");
        if (json_is_null(seg))
            seg = NULL;
        if (reserve_provider(ctx, network_id, type, physnet && *physnet ? physnet : NULL, seg) < 0)
            return -1;
    }
    *max_mtu = nb_ml2_type_mtu(type, nb_ml2_physnet_mtu());
    return 0;
}

void nb_ml2_strip(json_t *body)
{
    json_object_del(body, "provider:network_type");
    json_object_del(body, "provider:physical_network");
    json_object_del(body, "provider:segmentation_id");
}

json_t *nb_ml2_segment(struct nb_ctx *ctx, const char *network_id)
{
    return nb_db_row(nb_net_env->db, ctx,
                     "SELECT network_type, physical_network, segmentation_id FROM "
                     "networksegments WHERE network_id = ? ORDER BY segment_index, rowid",
                     "s", network_id);
}

void nb_ml2_view(struct nb_ctx *ctx, json_t *view, const char *network_id)
{
    if (!ctx->is_admin)
        return;
    _cleanup_json_ json_t *seg = nb_ml2_segment(ctx, network_id);
    if (!seg)
        return;
    json_object_set(view, "provider:network_type", json_object_get(seg, "network_type"));
    json_object_set(view, "provider:physical_network", json_object_get(seg, "physical_network"));
    json_object_set(view, "provider:segmentation_id", json_object_get(seg, "segmentation_id"));
}

void nb_ml2_extensions(void)
{
    nb_net_extension("provider", "Provider Network",
                     "Expose mapping of virtual networks to "
                     "physical networks");
}

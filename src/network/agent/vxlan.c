/* vxlan.c - VXLAN devices between the hosts of a network (vxlan.h): the
 * part of the L2 phase that connects one host's bridge of a vxlan network
 * to the same bridge on every other host with a port on it. Names and
 * commands are the Linux bridge agent's (vxlan-<vni> enslaved to
 * brq<net[:11]>), with head-end replication instead of a multicast group:
 * learning is off and the all-zero forwarding entries flood broadcast,
 * unknown unicast and multicast to every peer. */
#include "network/agent/vxlan.h"
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_VX "nubo.network.agent.vxlan"
#define CMD_MS 5000

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The peers of net as a sorted array without duplicates, empties or self. */
static json_t *peers_of(const json_t *net, const char *self)
{
    json_t *in = json_object_get(net, "vxlan_peers");
    size_t n = json_array_size(in), i, k = 0;
    const char **v = calloc(n ? n : 1, sizeof(*v));
    json_t *p;
    json_array_foreach (in, i, p) {
        const char *s = json_string_value(p);
        if (s && *s && (!self || strcmp(s, self)))
            v[k++] = s;
    }
    qsort(v, k, sizeof(*v), cmp_str);
    json_t *out = json_array();
    for (i = 0; i < k; i++)
        if (!i || strcmp(v[i], v[i - 1]))
            json_array_append_new(out, json_string(v[i]));
    free(v);
    return out;
}

json_t *na_vxlan_plan(const json_t *state)
{
    json_t *plan = json_array();
    const char *local = nb_json_str(state, "local_ip");
    size_t i;
    json_t *net;
    json_array_foreach (json_object_get(state, "networks"), i, net) {
        const char *type = nb_json_str(net, "network_type");
        json_t *seg = json_object_get(net, "segmentation_id");
        const char *bridge = nb_json_str(net, "bridge");
        if (!type || strcmp(type, "vxlan") || !json_is_integer(seg) || !bridge)
            continue;
        json_int_t vni = json_integer_value(seg);
        if (vni < 1 || vni > 16777215)
            continue;
        json_t *peers = peers_of(net, local);
        if (!json_array_size(peers)) {
            json_decref(peers);
            continue;
        }
        char dev[32];
        snprintf(dev, sizeof(dev), "vxlan-%lld", (long long)vni);
        json_array_append_new(plan,
                              json_pack("{s:s, s:I, s:s?, s:s, s:I, s:s?, s:o}", "dev", dev, "vni",
                                        vni, "network_id", nb_json_str(net, "id"), "bridge", bridge,
                                        "mtu", (json_int_t)nb_json_int(net, "mtu", 1450),
                                        "local_ip", local, "peers", peers));
    }
    return plan;
}

json_t *na_vxlan_fdb_peers(const char *fdb_text)
{
    json_t *out = json_array();
    const char *line = fdb_text;
    while (line && *line) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[512];
        if (len < sizeof(buf)) {
            memcpy(buf, line, len);
            buf[len] = '\0';
            const char *dst = strstr(buf, " dst ");
            if (!strncmp(buf, NA_VXLAN_ZERO_MAC " ", strlen(NA_VXLAN_ZERO_MAC) + 1) && dst) {
                dst += 5;
                size_t n = strcspn(dst, " \t");
                char ip[64];
                if (n && n < sizeof(ip)) {
                    memcpy(ip, dst, n);
                    ip[n] = '\0';
                    nb_json_set_add(out, ip);
                }
            }
        }
        line = end ? end + 1 : NULL;
    }
    return out;
}

bool na_vxlan_link_matches(const json_t *link, const json_t *want)
{
    json_t *info = json_object_get(link, "linkinfo");
    const char *kind = nb_json_str(info, "info_kind");
    json_t *data = json_object_get(info, "info_data");
    if (!kind || strcmp(kind, "vxlan") || !json_is_object(data))
        return false;
    const char *local = nb_json_str(data, "local"), *wl = nb_json_str(want, "local_ip");
    if (nb_json_int(data, "id", -1) != nb_json_int(want, "vni", -2))
        return false;
    if (!local || !wl || strcmp(local, wl))
        return false;
    if (nb_json_int(data, "port", 0) != NA_VXLAN_PORT)
        return false;
    return !json_is_true(json_object_get(data, "learning"));
}

static bool in_array(const json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v)
        if (json_is_string(v) && !strcmp(json_string_value(v), s))
            return true;
    return false;
}

/* The device as `ip -d -j link show` sees it, or NULL when absent. */
static json_t *link_show(struct nb_ctx *ctx, const char *dev)
{
    const char *argv[] = {"ip", "-d", "-j", "link", "show", "dev", dev, NULL};
    _cleanup_free_ char *out = NULL;
    if (na_run(ctx, NULL, argv, NULL, CMD_MS, &out) != 0)
        return NULL;
    _cleanup_json_ json_t *arr = nb_json_parse(out);
    json_t *first = json_array_get(arr, 0);
    return first ? json_incref(first) : NULL;
}

static int link_del(struct na *a, struct nb_ctx *ctx, const char *dev)
{
    const char *argv[] = {"ip", "link", "del", "dev", dev, NULL};
    _cleanup_json_ json_t *have = link_show(ctx, dev);
    if (have && na_must(ctx, NULL, argv, NULL) < 0)
        return -1;
    NB_INFO(LOG_VX, ctx, NULL, "%s removed", dev);
    return na_disown(a, "link", dev);
}

/* The device exists with want's parameters, MTU, on its bridge, up. */
static int ensure_link(struct na *a, struct nb_ctx *ctx, const json_t *want)
{
    const char *dev = nb_json_str(want, "dev"), *bridge = nb_json_str(want, "bridge");
    const char *local = nb_json_str(want, "local_ip");
    char vni[24], mtu[24], port[16];
    snprintf(vni, sizeof(vni), "%lld", nb_json_int(want, "vni", 0));
    snprintf(mtu, sizeof(mtu), "%lld", nb_json_int(want, "mtu", 1450));
    snprintf(port, sizeof(port), "%d", NA_VXLAN_PORT);
    if (!local)
        return nb_error(ctx, 500, NULL, "%s: the host state has no local_ip", dev);
    _cleanup_json_ json_t *have = link_show(ctx, dev);
    _cleanup_json_ json_t *owned = na_owned(a, "link");
    if (have && !in_array(owned, dev))
        return nb_error(ctx, 409, NULL,
                        "%s exists and is not this agent's (another agent on this machine uses "
                        "VNI %s)",
                        dev, vni);
    if (have && !na_vxlan_link_matches(have, want)) {
        NB_INFO(LOG_VX, ctx, NULL, "%s differs from the network's (VNI %s, local %s): recreated",
                dev, vni, local);
        if (link_del(a, ctx, dev) < 0)
            return -1;
        json_decref(have);
        have = NULL;
    }
    if (!have) {
        const char *add[] = {"ip", "link",  "add", dev,       "type", "vxlan",      "id",
                             vni,  "local", local, "dstport", port,   "nolearning", NULL};
        if (na_own(a, "link", dev) < 0 || na_must(ctx, NULL, add, NULL) < 0)
            return -1;
        NB_INFO(LOG_VX, ctx, NULL, "%s created (VNI %s, local %s, dstport %s) for bridge %s", dev,
                vni, local, port, bridge);
    }
    const char *set[] = {"ip", "link", "set", "dev", dev, "mtu", mtu, "master", bridge, "up", NULL};
    return na_must(ctx, NULL, set, NULL);
}

/* The all-zero entries of dev flood to exactly want's peers. */
static int sync_fdb(struct nb_ctx *ctx, const json_t *want)
{
    const char *dev = nb_json_str(want, "dev");
    const char *show[] = {"bridge", "fdb", "show", "dev", dev, NULL};
    _cleanup_free_ char *out = NULL;
    if (na_run(ctx, NULL, show, NULL, CMD_MS, &out) != 0)
        return nb_error(ctx, 500, NULL, "bridge fdb show dev %s: %s", dev, out ? out : "");
    _cleanup_json_ json_t *have = na_vxlan_fdb_peers(out);
    json_t *peers = json_object_get(want, "peers");
    int rc = 0;
    size_t i;
    json_t *p;
    json_array_foreach (peers, i, p) {
        const char *ip = json_string_value(p);
        if (in_array(have, ip))
            continue;
        const char *add[] = {"bridge", "fdb", "append", NA_VXLAN_ZERO_MAC, "dev", dev,
                             "dst",    ip,    NULL};
        if (na_must(ctx, NULL, add, NULL) < 0)
            rc = -1;
        else
            NB_INFO(LOG_VX, ctx, NULL, "%s floods to peer %s", dev, ip);
    }
    json_array_foreach (have, i, p) {
        const char *ip = json_string_value(p);
        if (in_array(peers, ip))
            continue;
        const char *del[] = {"bridge", "fdb", "del", NA_VXLAN_ZERO_MAC, "dev", dev,
                             "dst",    ip,    NULL};
        if (na_must(ctx, NULL, del, NULL) < 0)
            rc = -1;
        else
            NB_INFO(LOG_VX, ctx, NULL, "%s no longer floods to departed peer %s", dev, ip);
    }
    return rc;
}

static bool planned(const json_t *plan, const char *dev)
{
    size_t i;
    json_t *w;
    json_array_foreach (plan, i, w)
        if (!strcmp(nb_json_str(w, "dev"), dev))
            return true;
    return false;
}

int na_vxlan_sync(struct na *a, struct nb_ctx *ctx, const json_t *state)
{
    _cleanup_json_ json_t *plan = na_vxlan_plan(state);
    int rc = 0;
    char first[1024] = "";
    size_t i;
    json_t *w;
    json_array_foreach (plan, i, w) {
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        if (ensure_link(a, &sub, w) < 0 || sync_fdb(&sub, w) < 0) {
            NB_WARN(LOG_VX, ctx, NULL, "%s of network %s: %s", nb_json_str(w, "dev"),
                    nb_json_str(w, "network_id") ? nb_json_str(w, "network_id") : "?",
                    nb_ctx_message(&sub));
            if (!*first)
                nb_strlcpy(first, nb_ctx_message(&sub), sizeof(first));
            rc = -1;
        }
    }
    /* the devices of networks gone from the host (or without peers now) */
    _cleanup_json_ json_t *owned = na_owned(a, "link");
    json_array_foreach (owned, i, w) {
        const char *dev = json_string_value(w);
        if (!dev || strncmp(dev, "vxlan-", 6) || planned(plan, dev))
            continue;
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        if (link_del(a, &sub, dev) < 0) {
            NB_WARN(LOG_VX, ctx, NULL, "%s: %s", dev, nb_ctx_message(&sub));
            if (!*first)
                nb_strlcpy(first, nb_ctx_message(&sub), sizeof(first));
            rc = -1;
        }
    }
    if (rc < 0)
        nb_error(ctx, 500, NULL, "%s", first);
    return rc;
}

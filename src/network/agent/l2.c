/* l2.c - layer 2 (internal.h: na_l2_sync, na_l2_devices; netagent.h:
 * nb_vif_plug), as Neutron's Linux bridge agent wires a host: one bridge
 * brq<network id[:11]> per network of the state (STP off, forward delay
 * 0, IPv6 off, no address, the network's MTU), the guests' taps
 * tap<port id[:11]> on it (libvirt puts them there; a tap found off its
 * bridge, e.g. after the bridge was deleted by hand, is put back), and
 * the bridges this agent made removed when their network leaves the state.
 * A bridge that still holds a guest's tap is kept (the guest is going
 * away; the next resync removes it). */
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "network/agent/netdev.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#define LOG_L2 "nubo.network.agent.l2"

/* A device name the kernel accepts and that is safe in a sysfs path. */
static bool ifname_ok(const char *dev)
{
    if (!dev || !*dev || strlen(dev) >= IFNAMSIZ)
        return false;
    for (const char *p = dev; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
            return false;
    return strcmp(dev, ".") && strcmp(dev, "..");
}

static bool sysfs_read(const char *dev, const char *attr, char *buf, size_t n)
{
    if (!ifname_ok(dev))
        return false;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "/sys/class/net/%s/%s", dev, attr);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    return ok;
}

bool na_dev_exists(const char *dev)
{
    char path[PATH_MAX];
    if (!ifname_ok(dev))
        return false;
    snprintf(path, sizeof(path), "/sys/class/net/%s", dev);
    return access(path, F_OK) == 0;
}

int na_dev_master(const char *dev, char *master, size_t n)
{
    master[0] = '\0';
    if (!na_dev_exists(dev))
        return -1;
    char path[PATH_MAX], target[PATH_MAX];
    snprintf(path, sizeof(path), "/sys/class/net/%s/master", dev);
    ssize_t len = readlink(path, target, sizeof(target) - 1);
    if (len > 0) {
        target[len] = '\0';
        const char *slash = strrchr(target, '/');
        nb_strlcpy(master, slash ? slash + 1 : target, n);
    }
    return 0;
}

int na_dev_mtu(const char *dev)
{
    char buf[32];
    return sysfs_read(dev, "mtu", buf, sizeof(buf)) ? atoi(buf) : -1;
}

bool na_dev_up(const char *dev)
{
    char buf[32];
    return sysfs_read(dev, "flags", buf, sizeof(buf)) && (strtoul(buf, NULL, 16) & IFF_UP);
}

bool na_dev_is_tap(const char *dev)
{
    char buf[32];
    return sysfs_read(dev, "tun_flags", buf, sizeof(buf));
}

/* Turns IPv6 off on dev (its own sysctl, not a global one). */
static void ipv6_off(struct nb_ctx *ctx, const char *dev)
{
    char path[PATH_MAX], buf[8] = "";
    snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", dev);
    FILE *f = fopen(path, "r");
    if (!f)
        return; /* no IPv6 in this kernel */
    bool on = fgets(buf, sizeof(buf), f) && buf[0] == '0';
    fclose(f);
    if (!on)
        return;
    f = fopen(path, "w");
    if (!f || fputs("1\n", f) < 0 || fclose(f) != 0)
        NB_WARN(LOG_L2, ctx, NULL, "cannot turn IPv6 off on %s: %s", dev, strerror(errno));
    else
        NB_DEBUG(LOG_L2, ctx, NULL, "IPv6 off on %s", dev);
}

int na_bridge_ensure(struct na *a, struct nb_ctx *ctx, const char *bridge, int mtu)
{
    if (!ifname_ok(bridge))
        return nb_error(ctx, 500, NULL, "bad bridge name %s", bridge ? bridge : "(null)");
    if (!na_dev_exists(bridge)) {
        const char *add[] = {"ip",        "link", "add",           bridge, "type", "bridge",
                             "stp_state", "0",    "forward_delay", "0",    NULL};
        char *out = NULL;
        int rc = na_run(ctx, NULL, add, NULL, 10000, &out);
        /* another thread (nb_vif_plug, the agent) may have made it */
        if (rc != 0 && !na_dev_exists(bridge)) {
            nb_error(ctx, 500, NULL, "ip link add %s type bridge: %s", bridge, out);
            free(out);
            return -1;
        }
        free(out);
        NB_INFO(LOG_L2, ctx, NULL, "Created bridge %s", bridge);
    }
    if (a && na_own(a, "bridge", bridge) < 0)
        return nb_error(ctx, 500, NULL, "cannot record bridge %s", bridge);
    ipv6_off(ctx, bridge);
    if (mtu > 0 && na_dev_mtu(bridge) != mtu) {
        char m[16];
        snprintf(m, sizeof(m), "%d", mtu);
        const char *set[] = {"ip", "link", "set", bridge, "mtu", m, NULL};
        if (na_must(ctx, NULL, set, NULL) < 0)
            return -1;
    }
    if (!na_dev_up(bridge)) {
        const char *up[] = {"ip", "link", "set", bridge, "up", NULL};
        if (na_must(ctx, NULL, up, NULL) < 0)
            return -1;
    }
    return 0;
}

int na_dev_enslave(struct nb_ctx *ctx, const char *dev, const char *bridge)
{
    char master[IFNAMSIZ + 1];
    if (na_dev_master(dev, master, sizeof(master)) < 0)
        return nb_error(ctx, 500, NULL, "device %s does not exist", dev);
    if (strcmp(master, bridge)) {
        const char *set[] = {"ip", "link", "set", dev, "master", bridge, NULL};
        if (na_must(ctx, NULL, set, NULL) < 0)
            return -1;
        NB_INFO(LOG_L2, ctx, NULL, "Put %s on bridge %s", dev, bridge);
    }
    if (!na_dev_up(dev)) {
        const char *up[] = {"ip", "link", "set", dev, "up", NULL};
        if (na_must(ctx, NULL, up, NULL) < 0)
            return -1;
    }
    return 0;
}

const json_t *na_state_network(const json_t *state, const char *id)
{
    size_t i;
    json_t *n;
    json_array_foreach (json_object_get(state, "networks"), i, n)
        if (id && nb_json_str(n, "id") && !strcmp(nb_json_str(n, "id"), id))
            return n;
    return NULL;
}

/* Whether bridge holds a guest's tap (a tun device). */
static bool holds_guest(const char *bridge)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "/sys/class/net/%s/brif", bridge);
    DIR *d = opendir(path);
    if (!d)
        return false;
    bool guest = false;
    struct dirent *e;
    while (!guest && (e = readdir(d)))
        guest = e->d_name[0] != '.' && na_dev_is_tap(e->d_name);
    closedir(d);
    return guest;
}

/* Removes the bridges this agent made whose network is no longer in the
 * state. Failures are logged (retried at the next resync). */
static void remove_stale(struct na *a, struct nb_ctx *ctx, const json_t *wanted)
{
    json_t *owned = na_owned(a, "bridge");
    size_t i;
    json_t *v;
    json_array_foreach (owned, i, v) {
        const char *br = json_string_value(v);
        if (json_object_get(wanted, br))
            continue;
        if (!na_dev_exists(br)) {
            na_disown(a, "bridge", br);
            continue;
        }
        if (holds_guest(br)) {
            NB_INFO(LOG_L2, ctx, NULL,
                    "Bridge %s left the state but still holds a guest's "
                    "tap; kept for now",
                    br);
            continue;
        }
        const char *del[] = {"ip", "link", "del", br, NULL};
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        if (na_must(&sub, NULL, del, NULL) == 0) {
            na_disown(a, "bridge", br);
            NB_INFO(LOG_L2, ctx, NULL, "Removed bridge %s", br);
        }
    }
    json_decref(owned);
}

int na_l2_sync(struct na *a, struct nb_ctx *ctx, const json_t *state)
{
    json_t *wanted = json_object();
    int rc = 0;
    size_t i;
    json_t *n, *p;
    json_array_foreach (json_object_get(state, "networks"), i, n) {
        const char *br = nb_json_str(n, "bridge");
        if (!br)
            continue;
        json_object_set_new(wanted, br, json_true());
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        if (na_bridge_ensure(a, &sub, br, (int)nb_json_int(n, "mtu", 0)) < 0) {
            rc = nb_ctx_forward_error(ctx, &sub);
            /* the network's guests cannot be wired */
            size_t k;
            json_array_foreach (json_object_get(state, "ports"), k, p)
                if (!strcmp(nb_json_str(p, "network_id") ? nb_json_str(p, "network_id") : "",
                            nb_json_str(n, "id") ? nb_json_str(n, "id") : "-"))
                    na_port_failed(a, nb_json_str(p, "id"), nb_ctx_message(&sub));
        }
    }
    if (na_vxlan_sync) {
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        if (na_vxlan_sync(a, &sub, state) < 0)
            rc = nb_ctx_forward_error(ctx, &sub);
    }
    /* guests' taps found off their bridge (the bridge was re-made) */
    json_array_foreach (json_object_get(state, "ports"), i, p) {
        const json_t *net = na_state_network(state, nb_json_str(p, "network_id"));
        const char *tap = nb_json_str(p, "tap"), *br = net ? nb_json_str(net, "bridge") : NULL;
        if (!tap || !br || !na_dev_is_tap(tap) || !na_dev_exists(br))
            continue;
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        if (na_dev_enslave(&sub, tap, br) < 0) {
            na_port_failed(a, nb_json_str(p, "id"), nb_ctx_message(&sub));
            nb_ctx_forward_error(ctx, &sub);
            rc = -1;
        }
    }
    remove_stale(a, ctx, wanted);
    json_decref(wanted);
    return rc;
}

/* Whether the leg tap of a DHCP port or a router is wired: on its bridge. */
static bool leg_up(const char *tap, const char *bridge)
{
    char master[IFNAMSIZ + 1];
    return tap && bridge && na_dev_master(tap, master, sizeof(master)) == 0 &&
           !strcmp(master, bridge) && na_dev_up(tap);
}

static void add_leg(json_t *up, json_t *down, const char *port, const char *tap, const char *bridge)
{
    if (port)
        json_array_append_new(leg_up(tap, bridge) ? up : down, json_string(port));
}

int na_l2_devices(struct na *a, struct nb_ctx *ctx, const json_t *state, json_t **up, json_t **down)
{
    (void)a;
    (void)ctx;
    *up = json_array();
    *down = json_array();
    size_t i, k;
    json_t *p, *n, *r, *leg;
    json_array_foreach (json_object_get(state, "ports"), i, p) {
        const json_t *net = na_state_network(state, nb_json_str(p, "network_id"));
        add_leg(*up, *down, nb_json_str(p, "id"), nb_json_str(p, "tap"),
                net ? nb_json_str(net, "bridge") : NULL);
    }
    json_array_foreach (json_object_get(state, "networks"), i, n) {
        const json_t *d = json_object_get(n, "dhcp");
        if (json_is_object(d))
            add_leg(*up, *down, nb_json_str(d, "port_id"), nb_json_str(d, "tap"),
                    nb_json_str(n, "bridge"));
    }
    json_array_foreach (json_object_get(state, "routers"), i, r) {
        const json_t *gw = json_object_get(r, "gateway");
        if (json_is_object(gw))
            add_leg(*up, *down, nb_json_str(gw, "port_id"), nb_json_str(gw, "tap"),
                    nb_json_str(gw, "bridge"));
        json_array_foreach (json_object_get(r, "interfaces"), k, leg)
            add_leg(*up, *down, nb_json_str(leg, "port_id"), nb_json_str(leg, "tap"),
                    nb_json_str(leg, "bridge"));
    }
    return 0;
}

int nb_vif_plug(struct nb_ctx *ctx, const json_t *vif)
{
    const char *type = nb_json_str(vif, "type");
    if (!type || strcmp(type, "bridge"))
        return 0;
    const json_t *net = json_object_get(vif, "network");
    const char *br = nb_json_str(net, "bridge");
    if (!br)
        return nb_error(ctx, 500, NULL, "VIF %s has no bridge", nb_json_str(vif, "id"));
    int mtu = (int)nb_json_int(json_object_get(net, "meta"), "mtu", 0);
    if (na_bridge_ensure(NULL, ctx, br, mtu) < 0)
        return -1;
    NB_DEBUG(LOG_L2, ctx, NULL, "Plugged VIF %s: bridge %s (mtu %d)", nb_json_str(vif, "id"), br,
             mtu);
    return 0;
}

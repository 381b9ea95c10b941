/* l3.c - the L3 agent's phase (na_l3_sync, internal.h): every router of
 * the host state gets its namespace qrouter-<id> with forwarding on (the
 * namespace's own sysctls), per interface a veth pair tap<port[:11]> (on
 * the network's bridge) / qr-<port[:11]> (in the namespace, with the
 * port's MAC and addresses), the gateway leg qg-<port[:11]> on the
 * external network's bridge with the default route via the external
 * subnet's gateway, the router's extra routes, its NAT table (SNAT,
 * floating IPs: l3_rules.c) replaced in one `nft -f` when it changes, and
 * its router advertisements on IPv6 subnets (radvd.c).
 * A router that leaves the state has its devices and namespace removed.
 * The floating IPs' statuses go back to the control side
 * (update_floatingip_statuses) when they differ from the state's.
 *
 * With [l3] external_gateway_on_host (default true, as devstack's br-ex
 * holds the public subnet's gateway), the external network's bridge also
 * gets the external subnet's gateway address in the agent's own
 * namespace, so the host reaches the floating IPs.
 *
 * Ownership kinds (internal.h): "router_netns" (namespace names),
 * "router_link" (the taps in the agent's namespace), "router_host_addr"
 * ("<bridge> <ip>/<len>"). Only what they record is ever removed. */
#include "bus/bus.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "network/agent/internal.h"
#include "network/agent/l3.h"

#include <net/if.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define L3_LOG "nubo.network.agent.l3"
#define K_NETNS "router_netns"
#define K_LINK "router_link"
#define K_ADDR "router_host_addr"
#define MAX_ARGS 24

/* The rule set last applied per namespace (this process), so that an
 * unchanged router costs no nft run. */
static pthread_mutex_t applied_mu = PTHREAD_MUTEX_INITIALIZER;
static json_t *applied; /* {namespace: ruleset text} */

/* --- commands -------------------------------------------------------------- */

static int vrun(struct nb_ctx *ctx, bool must, const char *ns, char **out, va_list ap)
{
    const char *argv[MAX_ARGS + 1];
    int n = 0;
    const char *s;
    while ((s = va_arg(ap, const char *)) && n < MAX_ARGS)
        argv[n++] = s;
    argv[n] = NULL;
    if (must)
        return na_must(ctx, ns, argv, NULL);
    return na_run(ctx, ns, argv, NULL, 10000, out);
}

/* Runs a command (NULL-terminated words) in ns; a failure is recorded on
 * ctx. 0/-1. */
static int run(struct nb_ctx *ctx, const char *ns, ...)
{
    va_list ap;
    va_start(ap, ns);
    int rc = vrun(ctx, true, ns, NULL, ap);
    va_end(ap);
    return rc;
}

/* Runs a command whose failure is expected at times; its exit status. */
static int try_run(struct nb_ctx *ctx, const char *ns, ...)
{
    va_list ap;
    va_start(ap, ns);
    char *out = NULL;
    int rc = vrun(ctx, false, ns, &out, ap);
    va_end(ap);
    free(out);
    return rc;
}

/* The JSON a command prints (`ip -j ...`), or NULL. New ref. */
static json_t *run_json(struct nb_ctx *ctx, const char *ns, ...)
{
    va_list ap;
    va_start(ap, ns);
    char *out = NULL;
    int rc = vrun(ctx, false, ns, &out, ap);
    va_end(ap);
    json_t *j = rc == 0 && out ? json_loads(out, JSON_DECODE_ANY, NULL) : NULL;
    free(out);
    return j;
}

static bool ns_exists(const char *ns)
{
    char path[160];
    snprintf(path, sizeof(path), "/run/netns/%s", ns);
    return access(path, F_OK) == 0;
}

static bool link_here(const char *name)
{
    return name && if_nametoindex(name) != 0;
}

/* --- the namespace ------------------------------------------------------------ */

static int ensure_ns(struct na *a, struct nb_ctx *ctx, const char *ns)
{
    if (!ns_exists(ns)) {
        if (na_own(a, K_NETNS, ns) < 0 || run(ctx, NULL, "ip", "netns", "add", ns, NULL) < 0)
            return -1;
        pthread_mutex_lock(&applied_mu);
        if (applied)
            json_object_del(applied, ns);
        pthread_mutex_unlock(&applied_mu);
        NB_INFO(L3_LOG, ctx, NULL, "created namespace %s", ns);
    }
    /* the namespace's own sysctls, not the host's */
    return run(ctx, ns, "ip", "link", "set", "lo", "up", NULL) < 0 ||
                   run(ctx, ns, "sysctl", "-qw", "net.ipv4.ip_forward=1", NULL) < 0
               ? -1
               : (try_run(ctx, ns, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1", NULL), 0);
}

/* --- legs ------------------------------------------------------------------- */

static const json_t *network_of(const json_t *state, const char *net_id)
{
    size_t i;
    json_t *n;
    json_array_foreach (json_object_get(state, "networks"), i, n)
        if (net_id && nb_json_str(n, "id") && !strcmp(nb_json_str(n, "id"), net_id))
            return n;
    return NULL;
}

static bool in_list(const json_t *list, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach (list, i, v)
        if (!strcmp(json_string_value(v), s))
            return true;
    return false;
}

/* A floating address leaving qg-: its NAT'ed flows go too, as Neutron's
 * agent deletes their conntrack entries (best effort). */
static void forget_flows(struct nb_ctx *ctx, const char *ns, const char *cidr)
{
    char ip[64];
    snprintf(ip, sizeof(ip), "%s", cidr);
    char *slash = strchr(ip, '/');
    if (!slash || strcmp(slash, "/32"))
        return;
    *slash = 0;
    try_run(ctx, ns, "conntrack", "-D", "-d", ip, NULL);
    try_run(ctx, ns, "conntrack", "-D", "-q", ip, NULL);
}

/* Makes dev hold exactly want ("ip/len"), link-local addresses aside. */
static int sync_addresses(struct nb_ctx *ctx, const char *ns, const char *dev, const json_t *want)
{
    _cleanup_json_ json_t *cur = run_json(ctx, ns, "ip", "-j", "addr", "show", "dev", dev, NULL);
    json_t *have = json_array();
    size_t i, k;
    json_t *l, *ai;
    json_array_foreach (cur, i, l)
        json_array_foreach (json_object_get(l, "addr_info"), k, ai) {
            const char *scope = nb_json_str(ai, "scope");
            if (!nb_json_str(ai, "local") || (scope && !strcmp(scope, "link")))
                continue;
            char key[80];
            snprintf(key, sizeof(key), "%s/%lld", nb_json_str(ai, "local"),
                     nb_json_int(ai, "prefixlen", 0));
            json_array_append_new(have, json_string(key));
        }
    int rc = 0;
    json_array_foreach (have, i, l)
        if (!in_list(want, json_string_value(l))) {
            rc |= run(ctx, ns, "ip", "addr", "del", json_string_value(l), "dev", dev, NULL);
            if (!strncmp(dev, "qg-", 3))
                forget_flows(ctx, ns, json_string_value(l));
        }
    json_array_foreach (want, i, l)
        if (!in_list(have, json_string_value(l))) {
            bool v6 = strchr(json_string_value(l), ':') != NULL;
            rc |= v6 ? run(ctx, ns, "ip", "addr", "add", json_string_value(l), "dev", dev, "nodad",
                           NULL)
                     : run(ctx, ns, "ip", "addr", "add", json_string_value(l), "dev", dev, NULL);
        }
    json_decref(have);
    return rc ? -1 : 0;
}

/* One interface or the gateway: the veth pair, its bridge, MAC, MTU,
 * state and addresses. */
static int sync_leg(struct na *a, struct nb_ctx *ctx, const json_t *state, const char *ns,
                    const json_t *leg, const json_t *router, bool up)
{
    const char *tap = nb_json_str(leg, "tap"), *dev = nb_json_str(leg, "dev");
    /* the network's bridge as the L2 phase made it, else the leg's */
    const json_t *net = network_of(state, nb_json_str(leg, "network_id"));
    const char *bridge =
        nb_json_str(net, "bridge") ? nb_json_str(net, "bridge") : nb_json_str(leg, "bridge");
    const char *mac = nb_json_str(leg, "mac");
    if (!tap || !dev || !bridge || !mac)
        return nb_error(ctx, 500, NULL, "router port %s: incomplete state",
                        nb_json_str(leg, "port_id"));
    if (!link_here(bridge))
        return nb_error(ctx, 500, NULL, "router port %s: bridge %s of network %s is missing",
                        nb_json_str(leg, "port_id"), bridge, nb_json_str(leg, "network_id"));
    if (!link_here(tap)) {
        try_run(ctx, ns, "ip", "link", "del", dev, NULL); /* a half left by a crash */
        if (na_own(a, K_LINK, tap) < 0 || run(ctx, NULL, "ip", "link", "add", tap, "type", "veth",
                                              "peer", "name", dev, "netns", ns, NULL) < 0)
            return -1;
        NB_INFO(L3_LOG, ctx, NULL, "%s: %s on %s <-> %s", ns, tap, bridge, dev);
    }
    char mtu[24];
    long long m = nb_json_int(net, "mtu", 0);
    snprintf(mtu, sizeof(mtu), "%lld", m > 0 ? m : 1500);
    if (run(ctx, NULL, "ip", "link", "set", tap, "master", bridge, "mtu", mtu, "up", NULL) < 0 ||
        run(ctx, ns, "ip", "link", "set", dev, "address", mac, "mtu", mtu, up ? "up" : "down",
            NULL) < 0)
        return -1;
    _cleanup_json_ json_t *want = na_l3_leg_addresses(leg, router);
    return sync_addresses(ctx, ns, dev, want);
}

/* Removes the namespace's qr-/qg- devices that are not in want (their
 * taps go with them). */
static void drop_stale_devices(struct na *a, struct nb_ctx *ctx, const char *ns, const json_t *want)
{
    _cleanup_json_ json_t *links = run_json(ctx, ns, "ip", "-j", "link", "show", NULL);
    size_t i;
    json_t *l;
    json_array_foreach (links, i, l) {
        const char *name = nb_json_str(l, "ifname");
        if (!name || (strncmp(name, "qr-", 3) && strncmp(name, "qg-", 3)) || in_list(want, name))
            continue;
        char tap[32];
        snprintf(tap, sizeof(tap), "tap%s", name + 3);
        if (run(ctx, ns, "ip", "link", "del", name, NULL) == 0) {
            na_disown(a, K_LINK, tap);
            NB_INFO(L3_LOG, ctx, NULL, "%s: removed %s", ns, name);
        }
    }
}

/* --- routes and NAT ---------------------------------------------------------------- */

static int sync_routes(struct nb_ctx *ctx, const char *ns, const json_t *router)
{
    json_t *gw = json_object_get(router, "gateway");
    const char *via = nb_json_str(gw, "gateway_ip"), *qg = nb_json_str(gw, "dev");
    int rc = 0;
    if (via && qg && na_l3_ip_ok(via, true))
        rc |= run(ctx, ns, "ip", "route", "replace", "default", "via", via, "dev", qg, NULL);
    else
        try_run(ctx, ns, "ip", "route", "del", "default", NULL);
    json_t *want = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get(router, "routes"), i, r) {
        const char *dst = nb_json_str(r, "destination"), *hop = nb_json_str(r, "nexthop");
        if (!dst || !hop)
            continue;
        json_array_append_new(want, json_string(dst));
        rc |= run(ctx, ns, "ip", "route", "replace", dst, "via", hop, "proto", "static", NULL);
    }
    for (int v6 = 0; v6 < 2; v6++) {
        _cleanup_json_ json_t *cur = run_json(ctx, ns, "ip", v6 ? "-6" : "-4", "-j", "route",
                                              "show", "proto", "static", NULL);
        json_array_foreach (cur, i, r) {
            const char *dst = nb_json_str(r, "dst");
            if (dst && !in_list(want, dst))
                try_run(ctx, ns, "ip", "route", "del", dst, "proto", "static", NULL);
        }
    }
    json_decref(want);
    return rc ? -1 : 0;
}

static int sync_nat(struct nb_ctx *ctx, const char *ns, const json_t *router)
{
    _cleanup_free_ char *text = na_l3_ruleset(router);
    pthread_mutex_lock(&applied_mu);
    if (!applied)
        applied = json_object();
    const char *last = json_string_value(json_object_get(applied, ns));
    bool same = last && !strcmp(last, text);
    pthread_mutex_unlock(&applied_mu);
    if (same)
        return 0;
    static const char *const argv[] = {"nft", "-f", "-", NULL};
    if (na_must(ctx, ns, argv, text) < 0)
        return -1;
    pthread_mutex_lock(&applied_mu);
    json_object_set_new(applied, ns, json_string(text));
    pthread_mutex_unlock(&applied_mu);
    NB_INFO(L3_LOG, ctx, NULL, "%s: NAT rules applied (%zu floating IP(s))", ns,
            json_array_size(json_object_get(router, "floating_ips")));
    return 0;
}

/* --- one router ------------------------------------------------------------------ */

static int sync_router(struct na *a, struct nb_ctx *ctx, const json_t *state, const json_t *router)
{
    const char *ns = nb_json_str(router, "namespace");
    if (!ns || strncmp(ns, "qrouter-", 8))
        return nb_error(ctx, 500, NULL, "router %s: no namespace", nb_json_str(router, "id"));
    if (ensure_ns(a, ctx, ns) < 0)
        return -1;
    json_t *up_v = json_object_get(router, "admin_state_up");
    bool up = !up_v || json_is_true(up_v);
    _cleanup_json_ json_t *legs = na_l3_legs(router);
    json_t *devs = json_array();
    int rc = 0;
    size_t i;
    json_t *leg;
    json_array_foreach (legs, i, leg) {
        json_array_append_new(devs, json_string(nb_json_str(leg, "dev")));
        bool gw = json_is_true(json_object_get(leg, "gateway"));
        rc |= sync_leg(a, ctx, state, ns, leg, gw ? router : NULL, up);
    }
    drop_stale_devices(a, ctx, ns, devs);
    json_decref(devs);
    rc |= sync_routes(ctx, ns, router);
    rc |= sync_nat(ctx, ns, router);
    rc |= na_radvd_sync(a, ctx, router, ns);
    return rc ? -1 : 0;
}

static void remove_router(struct na *a, struct nb_ctx *ctx, const char *ns)
{
    na_radvd_remove(a, ctx, ns + strlen("qrouter-"));
    if (ns_exists(ns)) {
        _cleanup_json_ json_t *none = json_array();
        drop_stale_devices(a, ctx, ns, none);
        if (run(ctx, NULL, "ip", "netns", "del", ns, NULL) < 0)
            return;
    }
    na_disown(a, K_NETNS, ns);
    pthread_mutex_lock(&applied_mu);
    if (applied)
        json_object_del(applied, ns);
    pthread_mutex_unlock(&applied_mu);
    NB_INFO(L3_LOG, ctx, NULL, "removed namespace %s", ns);
}

/* --- the outside: the external subnet's gateway on the host ------------------------ */

static void sync_host_addresses(struct na *a, struct nb_ctx *ctx, const json_t *state)
{
    json_t *want = json_array();
    bool on = nb_conf_bool("l3", "external_gateway_on_host", true);
    size_t i, k;
    json_t *r, *f;
    json_array_foreach (on ? json_object_get(state, "routers") : NULL, i, r) {
        json_t *gw = json_object_get(r, "gateway");
        const char *via = nb_json_str(gw, "gateway_ip"), *br = nb_json_str(gw, "bridge");
        json_array_foreach (json_object_get(gw, "fixed_ips"), k, f) {
            const char *ip = nb_json_str(f, "ip_address");
            if (!via || !br || !na_l3_ip_ok(via, true) || !na_l3_ip_ok(ip, true))
                continue;
            char key[96];
            snprintf(key, sizeof(key), "%s %s/%lld", br, via, nb_json_int(f, "prefixlen", 32));
            if (!in_list(want, key))
                json_array_append_new(want, json_string(key));
        }
    }
    json_array_foreach (want, i, r) {
        char br[32], addr[64];
        if (sscanf(json_string_value(r), "%31s %63s", br, addr) != 2 || !link_here(br))
            continue;
        if (na_own(a, K_ADDR, json_string_value(r)) == 0)
            run(ctx, NULL, "ip", "addr", "replace", addr, "dev", br, NULL);
    }
    _cleanup_json_ json_t *owned = na_owned(a, K_ADDR);
    json_array_foreach (owned, i, r) {
        char br[32], addr[64];
        if (in_list(want, json_string_value(r)))
            continue;
        if (sscanf(json_string_value(r), "%31s %63s", br, addr) == 2 && link_here(br))
            try_run(ctx, NULL, "ip", "addr", "del", addr, "dev", br, NULL);
        na_disown(a, K_ADDR, json_string_value(r));
    }
    json_decref(want);
}

/* --- statuses -------------------------------------------------------------------- */

/* Tells the control side the statuses of router's floating IPs that differ
 * from the state's: ACTIVE when the router is in place, ERROR when not. */
static void report_statuses(struct nb_ctx *ctx, const json_t *router, bool ok)
{
    json_t *statuses = json_object();
    json_t *up_v = json_object_get(router, "admin_state_up");
    bool up = !up_v || json_is_true(up_v);
    _cleanup_json_ json_t *valid = na_l3_valid_fips(router);
    size_t i;
    json_t *f;
    json_array_foreach (json_object_get(router, "floating_ips"), i, f) {
        bool configured = false;
        size_t k;
        json_t *v;
        json_array_foreach (valid, k, v)
            configured |= v == f;
        const char *want = !ok || !configured ? "ERROR" : up ? "ACTIVE" : "DOWN";
        const char *cur = nb_json_str(f, "status");
        if (nb_json_str(f, "id") && (!cur || strcmp(cur, want)))
            json_object_set_new(statuses, nb_json_str(f, "id"), json_string(want));
    }
    if (!json_object_size(statuses)) {
        json_decref(statuses);
        return;
    }
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    json_t *args =
        json_pack("{s:s, s:o}", "router_id", nb_json_str(router, "id"), "statuses", statuses);
    _cleanup_json_ json_t *reply =
        nb_bus_call(&sub, "q-plugin", "update_floatingip_statuses", args, 10000);
    if (!reply)
        NB_WARN(L3_LOG, ctx, NULL, "router %s: could not report floating IP statuses: %s",
                nb_json_str(router, "id"), nb_ctx_message(&sub));
}

/* --- the phase ---------------------------------------------------------------------- */

int na_l3_sync(struct na *a, struct nb_ctx *ctx, const json_t *state)
{
    json_t *routers = json_object_get(state, "routers");
    json_t *want = json_array();
    char first[512] = "";
    size_t i;
    json_t *r;
    json_array_foreach (routers, i, r) {
        const char *ns = nb_json_str(r, "namespace");
        if (ns)
            json_array_append_new(want, json_string(ns));
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        bool ok = sync_router(a, &sub, state, r) == 0;
        if (!ok) {
            NB_WARN(L3_LOG, ctx, NULL, "router %s: %s", nb_json_str(r, "id"), nb_ctx_message(&sub));
            if (!*first)
                snprintf(first, sizeof(first), "router %s: %s", nb_json_str(r, "id"),
                         nb_ctx_message(&sub));
        }
        report_statuses(ctx, r, ok);
    }
    _cleanup_json_ json_t *owned = na_owned(a, K_NETNS);
    json_array_foreach (owned, i, r)
        if (!in_list(want, json_string_value(r))) {
            struct nb_ctx sub;
            nb_ctx_child(&sub, ctx);
            remove_router(a, &sub, json_string_value(r));
        }
    json_decref(want);
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    sync_host_addresses(a, &sub, state);
    if (*first)
        return nb_error(ctx, 500, NULL, "%s", first);
    return 0;
}

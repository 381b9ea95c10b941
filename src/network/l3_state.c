/* l3_state.c - what the L3 agents are told and tell (netagent.h): the
 * "routers" part of a host's state, built from routers, routerports, their
 * ports and the floating IPs, and the agents' floating IP statuses
 * (update_floatingip_statuses on q-plugin).
 *
 * Scheduling: Neutron binds each router to one L3 agent (the chance
 * scheduler). Here a router goes to one of the hosts with a live L3 agent
 * picked by a hash of its id, so every host computes the same answer from
 * the same list without a binding table; one host: all routers. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "db/db.h"
#include "network/floatingips.h"
#include "network/network_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OWNER_INTF "network:router_interface"

static unsigned long hash_of(const char *s)
{
    unsigned long h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

static bool hosted_here(const char *router_id, const char *host, const json_t *l3_hosts)
{
    size_t n = json_array_size(l3_hosts);
    if (!n)
        return true;
    /* the hosts in a stable order, whatever order the caller has */
    const char *sorted[256];
    size_t m = 0;
    for (size_t i = 0; i < n && m < 256; i++) {
        const char *h = json_string_value(json_array_get(l3_hosts, i));
        if (!h)
            continue;
        size_t k = m++;
        while (k > 0 && strcmp(sorted[k - 1], h) > 0) {
            sorted[k] = sorted[k - 1];
            k--;
        }
        sorted[k] = h;
    }
    return m == 0 || !strcmp(sorted[hash_of(router_id) % m], host);
}

/* A port's fixed IPs with their prefix lengths; *gateway_ip (when given)
 * receives the gateway of the subnet of its first IPv4 address. */
static json_t *leg_ips(struct nb_ctx *ctx, const char *port_id, char *gateway_ip)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx,
                   "SELECT a.subnet_id, a.ip_address, s.cidr, s.ip_version, s.gateway_ip, "
                   "s.ipv6_ra_mode, s.dns_nameservers FROM ipallocations a JOIN subnets s ON "
                   "s.id = a.subnet_id WHERE a.port_id = ? ORDER BY s.ip_version, a.ip_address",
                   "s", port_id);
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *cidr = nb_json_str(r, "cidr"), *slash = cidr ? strchr(cidr, '/') : NULL;
        /* the subnet's cidr, RA mode and DNS servers: what radvd advertises */
        const char *ra = nb_json_str(r, "ipv6_ra_mode");
        json_t *dns = nb_json_parse(nb_json_str(r, "dns_nameservers"));
        if (!json_is_array(dns)) {
            json_decref(dns);
            dns = json_array();
        }
        json_array_append_new(out, json_pack("{s:s, s:s, s:i, s:s, s:o, s:o}", "subnet_id",
                                             nb_json_str(r, "subnet_id"), "ip_address",
                                             nb_json_str(r, "ip_address"), "prefixlen",
                                             slash ? atoi(slash + 1) : 32, "cidr", cidr ? cidr : "",
                                             "ipv6_ra_mode", ra ? json_string(ra) : json_null(),
                                             "dns_nameservers", dns));
        const char *gw = nb_json_str(r, "gateway_ip");
        if (gateway_ip && !*gateway_ip && gw && nb_json_int(r, "ip_version", 4) == 4)
            snprintf(gateway_ip, 64, "%s", gw);
    }
    return out;
}

/* One leg of the state (an interface, or the gateway with gateway_ip). */
static json_t *leg(struct nb_ctx *ctx, const json_t *port, const char *prefix, bool gateway)
{
    const char *id = nb_json_str(port, "id"), *net = nb_json_str(port, "network_id");
    char bridge[32], tap[32], dev[32], gw_ip[64] = "";
    snprintf(bridge, sizeof(bridge), "brq%.11s", net);
    snprintf(tap, sizeof(tap), "tap%.11s", id);
    snprintf(dev, sizeof(dev), "%s%.11s", prefix, id);
    long long mtu =
        nb_db_int(nb_net_env->db, ctx, 0, "SELECT mtu FROM networks WHERE id = ?", "s", net);
    json_t *l =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:o}", "port_id", id, "network_id", net,
                  "mac", nb_json_str(port, "mac_address"), "bridge", bridge, "tap", tap, "dev", dev,
                  "mtu", mtu, "fixed_ips", leg_ips(ctx, id, gateway ? gw_ip : NULL));
    if (gateway)
        json_object_set_new(l, "gateway_ip", *gw_ip ? json_string(gw_ip) : json_null());
    return l;
}

static json_t *router_state(struct nb_ctx *ctx, const json_t *row)
{
    const char *id = nb_json_str(row, "id");
    char ns[64];
    snprintf(ns, sizeof(ns), "qrouter-%s", id);
    _cleanup_json_ json_t *ports = nb_db_rows(
        nb_net_env->db, ctx,
        "SELECT p.*, rp.port_type FROM routerports rp JOIN ports p ON p.id = rp.port_id WHERE "
        "rp.router_id = ? ORDER BY rp.rowid",
        "s", id);
    _cleanup_json_ json_t *routes = nb_db_rows(
        nb_net_env->db, ctx,
        "SELECT destination, nexthop FROM routerroutes WHERE router_id = ? ORDER BY rowid", "s",
        id);
    json_t *fips = nb_net_fip_of_router(ctx, id), *pfs = nb_net_pf_of_router(ctx, id);
    if (!ports || !routes || !fips || !pfs) {
        json_decref(fips);
        json_decref(pfs);
        return NULL;
    }
    json_t *gw = json_null(), *intf = json_array();
    size_t i;
    json_t *p;
    json_array_foreach (ports, i, p) {
        if (!strcmp(nb_json_str(p, "port_type"), OWNER_INTF))
            json_array_append_new(intf, leg(ctx, p, "qr-", false));
        else if (json_is_null(gw))
            gw = leg(ctx, p, "qg-", true);
    }
    return json_pack("{s:s, s:s, s:s, s:b, s:b, s:s, s:o, s:o, s:O, s:o, s:o}", "id", id, "name",
                     nb_json_str(row, "name"), "project_id", nb_json_str(row, "project_id"),
                     "admin_state_up", (int)nb_json_int(row, "admin_state_up", 1), "enable_snat",
                     (int)nb_json_int(row, "enable_snat", 1), "namespace", ns, "gateway", gw,
                     "interfaces", intf, "routes", routes, "floating_ips", fips, "port_forwardings",
                     pfs);
}

json_t *nb_net_l3_host_routers(struct nb_ctx *ctx, const char *host, const json_t *l3_hosts)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx, "SELECT * FROM routers ORDER BY rowid", "");
    if (!rows)
        return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        if (!hosted_here(nb_json_str(r, "id"), host, l3_hosts))
            continue;
        json_t *s = router_state(ctx, r);
        if (!s) {
            json_decref(out);
            return NULL;
        }
        json_array_append_new(out, s);
    }
    return out;
}

json_t *nb_net_rpc_update_floatingip_statuses(void *opaque, struct nb_ctx *ctx, const char *method,
                                              json_t *args)
{
    (void)opaque;
    (void)method;
    int n = nb_net_fip_update_statuses(ctx, nb_json_str(args, "router_id"),
                                       json_object_get(args, "statuses"));
    if (n < 0)
        return json_pack("{s:s}", "error", nb_ctx_message(ctx));
    return json_pack("{s:i}", "updated", n);
}

/* host_state.c - the desired state of one host's data plane, as
 * get_host_state answers it to the host's agent (network/agent/netagent.h
 * gives the shape; every key here is one the contract names): the compute
 * ports bound to the host, the networks they, the host's DHCP service and
 * its routers' legs sit on, the security groups of those ports (and their
 * remote groups) with their members, and the routers its L3 agent hosts.
 * Also served read-only to operators at GET /networking/v2.0/hosts/{host}/
 * state (admin). Names are Neutron's (brq<net[:11]>, tap<port[:11]>,
 * qdhcp-<net>, ns-/qr-/qg-<port[:11]>, qrouter-<id>). */
#include "common/cleanup.h"
#include "common/http.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "network/ml2_int.h"
#include "network/network_int.h"

#include <stdio.h>
#include <string.h>

#define DB nb_net_env->db

static json_t *dev_name(const char *prefix, const char *id)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%s%.11s", prefix, id);
    return json_string(buf);
}

static json_t *nullable(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *parsed(const json_t *row, const char *col, json_t *def)
{
    json_t *v = nb_json_parse(nb_json_str(row, col));
    if (!v)
        return def;
    json_decref(def);
    return v;
}

static int prefixlen(const char *cidr)
{
    const char *slash = cidr ? strchr(cidr, '/') : NULL;
    return slash ? atoi(slash + 1) : 32;
}

/* A port's fixed IPs [{subnet_id, ip_address, prefixlen (, ip_version)}]. */
static json_t *fixed_ips(struct nb_ctx *ctx, const char *port_id, bool version)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(DB, ctx,
                   "SELECT a.subnet_id, a.ip_address, s.cidr, s.ip_version FROM ipallocations a "
                   "JOIN subnets s ON s.id = a.subnet_id WHERE a.port_id = ? ORDER BY "
                   "s.ip_version, s.created_at, a.ip_address",
                   "s", port_id);
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_t *e =
            json_pack("{s:s, s:s, s:i}", "subnet_id", nb_json_str(r, "subnet_id"), "ip_address",
                      nb_json_str(r, "ip_address"), "prefixlen", prefixlen(nb_json_str(r, "cidr")));
        if (version)
            json_object_set_new(e, "ip_version", json_integer(nb_json_int(r, "ip_version", 4)));
        json_array_append_new(out, e);
    }
    return out;
}

static json_t *strings_of(struct nb_ctx *ctx, const char *sql, const char *arg, const char *col)
{
    _cleanup_json_ json_t *rows = nb_db_rows(DB, ctx, sql, "s", arg);
    return rows ? nb_json_strings(rows, col) : json_array();
}

/* allowed_address_pairs with the port's MAC where a pair has none. */
static json_t *pairs_of(const json_t *row)
{
    json_t *pairs = parsed(row, "allowed_address_pairs", json_array());
    size_t i;
    json_t *p;
    json_array_foreach (pairs, i, p)
        if (!json_object_get(p, "mac_address"))
            json_object_set_new(p, "mac_address", json_string(nb_json_str(row, "mac_address")));
    return pairs;
}

/* --- ports ----------------------------------------------------------------- */

static json_t *port_entry(struct nb_ctx *ctx, const json_t *row)
{
    const char *id = nb_json_str(row, "id");
    return json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:b, s:b, s:o, s:o, s:o}", "id", id, "network_id",
        nb_json_str(row, "network_id"), "project_id", nb_json_str(row, "project_id"), "device_id",
        nb_json_str(row, "device_id"), "mac", nb_json_str(row, "mac_address"), "status",
        nb_json_str(row, "status"), "tap", dev_name("tap", id), "admin_state_up",
        (int)nb_json_int(row, "admin_state_up", 1), "port_security_enabled",
        (int)nb_json_int(row, "port_security_enabled", 1), "fixed_ips", fixed_ips(ctx, id, true),
        "security_groups",
        strings_of(ctx,
                   "SELECT security_group_id FROM securitygroupportbindings WHERE port_id = ? "
                   "ORDER BY rowid",
                   id, "security_group_id"),
        "allowed_address_pairs", pairs_of(row));
}

/* The compute ports bound to host or live-migrating to it; their networks
 * and groups into the sets. */
static json_t *ports_of(struct nb_ctx *ctx, const char *host, json_t *nets, json_t *groups)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT * FROM ports WHERE (binding_host_id = ? OR %s(binding_profile, "
             "'$.migrating_to') = ?) AND device_owner LIKE 'compute:%%' ORDER BY created_at, rowid",
             nb_db_json_value(DB));
    _cleanup_json_ json_t *rows = nb_db_rows(DB, ctx, sql, "ss", host, host);
    if (!rows)
        return NULL;
    json_t *out = json_array();
    size_t i, j;
    json_t *r, *g;
    json_array_foreach (rows, i, r) {
        json_t *e = port_entry(ctx, r);
        /* a live migration moves it: listed on both hosts */
        _cleanup_json_ json_t *profile = parsed(r, "binding_profile", json_object());
        const char *to = nb_json_str(profile, "migrating_to");
        if (to && *to)
            json_object_set_new(e, "migrating_to", json_string(to));
        nb_json_set_add(nets, nb_json_str(r, "network_id"));
        json_array_foreach (json_object_get(e, "security_groups"), j, g)
            nb_json_set_add(groups, json_string_value(g));
        json_array_append_new(out, e);
    }
    return out;
}

/* --- security groups ------------------------------------------------------------ */

static json_t *rule_entry(const json_t *r)
{
    json_t *min = json_object_get(r, "port_range_min"), *max = json_object_get(r, "port_range_max");
    return json_pack("{s:s, s:s, s:s, s:o, s:O, s:O, s:o, s:o}", "id", nb_json_str(r, "id"),
                     "direction", nb_json_str(r, "direction"), "ethertype",
                     nb_json_str(r, "ethertype"), "protocol", nullable(nb_json_str(r, "protocol")),
                     "port_range_min", min ? min : json_null(), "port_range_max",
                     max ? max : json_null(), "remote_ip_prefix",
                     nullable(nb_json_str(r, "remote_ip_prefix")), "remote_group_id",
                     nullable(nb_json_str(r, "remote_group_id")));
}

/* Fixed IPs and address-pair IPs of every port in the group. */
static json_t *members_of(struct nb_ctx *ctx, const char *group)
{
    json_t *out = json_array();
    _cleanup_json_ json_t *ips = nb_db_rows(
        DB, ctx,
        "SELECT DISTINCT a.ip_address FROM ipallocations a JOIN securitygroupportbindings b ON "
        "b.port_id = a.port_id WHERE b.security_group_id = ? ORDER BY a.ip_address",
        "s", group);
    _cleanup_json_ json_t *ports = nb_db_rows(
        DB, ctx,
        "SELECT p.allowed_address_pairs, p.mac_address FROM ports p JOIN "
        "securitygroupportbindings b ON b.port_id = p.id WHERE b.security_group_id = ? AND "
        "p.allowed_address_pairs != '[]'",
        "s", group);
    size_t i, j;
    json_t *r, *p;
    json_array_foreach (ips, i, r)
        nb_json_set_add(out, nb_json_str(r, "ip_address"));
    json_array_foreach (ports, i, r) {
        _cleanup_json_ json_t *pairs = pairs_of(r);
        json_array_foreach (pairs, j, p)
            if (nb_json_str(p, "ip_address"))
                nb_json_set_add(out, nb_json_str(p, "ip_address"));
    }
    return out;
}

/* The groups of the set (grown with their remote groups). */
static json_t *groups_of(struct nb_ctx *ctx, json_t *groups)
{
    json_t *out = json_array();
    for (size_t i = 0; i < json_array_size(groups); i++) {
        const char *id = json_string_value(json_array_get(groups, i));
        _cleanup_json_ json_t *sg =
            nb_db_row(DB, ctx, "SELECT id, stateful FROM securitygroups WHERE id = ?", "s", id);
        if (!sg)
            continue;
        _cleanup_json_ json_t *rules = nb_db_rows(
            DB, ctx,
            "SELECT * FROM securitygrouprules WHERE security_group_id = ? ORDER BY created_at, "
            "rowid",
            "s", id);
        json_t *list = json_array();
        size_t j;
        json_t *r;
        json_array_foreach (rules, j, r) {
            json_array_append_new(list, rule_entry(r));
            if (nb_json_str(r, "remote_group_id"))
                nb_json_set_add(groups, nb_json_str(r, "remote_group_id"));
        }
        json_array_append_new(out, json_pack("{s:s, s:b, s:o, s:o}", "id", id, "stateful",
                                             (int)nb_json_int(sg, "stateful", 1), "rules", list,
                                             "members", members_of(ctx, id)));
    }
    return out;
}

/* --- routers --------------------------------------------------------------- */

/* A router leg: {port_id, network_id, mac, bridge, tap, dev, fixed_ips}. */
static json_t *leg_entry(struct nb_ctx *ctx, const json_t *port, const char *prefix)
{
    const char *id = nb_json_str(port, "id"), *net = nb_json_str(port, "network_id");
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "port_id", id, "network_id", net, "mac",
                     nb_json_str(port, "mac_address"), "bridge", dev_name("brq", net), "tap",
                     dev_name("tap", id), "dev", dev_name(prefix, id), "fixed_ips",
                     fixed_ips(ctx, id, false));
}

static json_t *gateway_of(struct nb_ctx *ctx, const json_t *router, json_t *nets)
{
    const char *gw = nb_json_str(router, "gw_port_id");
    _cleanup_json_ json_t *port =
        gw ? nb_db_row(DB, ctx, "SELECT * FROM ports WHERE id = ?", "s", gw) : NULL;
    if (!port)
        return json_null();
    json_t *e = leg_entry(ctx, port, "qg-");
    nb_json_set_add(nets, nb_json_str(port, "network_id"));
    json_t *first = json_array_get(json_object_get(e, "fixed_ips"), 0);
    _cleanup_json_ json_t *sub =
        first ? nb_db_row(DB, ctx, "SELECT gateway_ip FROM subnets WHERE id = ?", "s",
                          nb_json_str(first, "subnet_id"))
              : NULL;
    json_object_set_new(e, "gateway_ip", nullable(sub ? nb_json_str(sub, "gateway_ip") : NULL));
    return e;
}

static json_t *router_entry(struct nb_ctx *ctx, const json_t *r, json_t *nets)
{
    const char *id = nb_json_str(r, "id");
    _cleanup_json_ json_t *legs = nb_db_rows(
        DB, ctx,
        "SELECT * FROM ports WHERE device_id = ? AND device_owner = 'network:router_interface' "
        "ORDER BY created_at, rowid",
        "s", id);
    _cleanup_json_ json_t *routes = nb_db_rows(
        DB, ctx, "SELECT destination, nexthop FROM routerroutes WHERE router_id = ? ORDER BY rowid",
        "s", id);
    json_t *intfs = json_array();
    size_t i;
    json_t *p;
    json_array_foreach (legs, i, p) {
        json_array_append_new(intfs, leg_entry(ctx, p, "qr-"));
        nb_json_set_add(nets, nb_json_str(p, "network_id"));
    }
    char ns[64];
    snprintf(ns, sizeof(ns), "qrouter-%s", id);
    return json_pack("{s:s, s:s, s:s, s:b, s:b, s:s, s:o, s:o, s:O, s:[]}", "id", id, "name",
                     nb_json_str(r, "name"), "project_id", nb_json_str(r, "project_id"),
                     "admin_state_up", (int)nb_json_int(r, "admin_state_up", 1), "enable_snat",
                     (int)nb_json_int(r, "enable_snat", 1), "namespace", ns, "gateway",
                     gateway_of(ctx, r, nets), "interfaces", intfs, "routes",
                     routes ? routes : json_array(), "floating_ips");
}

/* The L3 files' builder of a router's state (with its floating IPs), when
 * linked in: given no host list it answers every router; the ones bound to
 * host's L3 agent are kept. */
json_t *nb_net_l3_host_routers(struct nb_ctx *ctx, const char *host, const json_t *l3_hosts)
    __attribute__((weak));

static json_t *l3_routers_of(struct nb_ctx *ctx, const char *host, json_t *nets)
{
    _cleanup_json_ json_t *all = nb_net_l3_host_routers(ctx, host, NULL);
    _cleanup_json_ json_t *mine = strings_of(ctx,
                                             "SELECT b.router_id FROM routerl3agentbindings b "
                                             "JOIN agents a ON a.id = b.l3_agent_id WHERE "
                                             "a.host = ?",
                                             host, "router_id");
    json_t *out = json_array();
    size_t i, j;
    json_t *r, *m, *l;
    json_array_foreach (all, i, r) {
        bool here = false;
        json_array_foreach (mine, j, m)
            here |= !strcmp(json_string_value(m), nb_json_str(r, "id"));
        if (!here)
            continue;
        json_array_append(out, r);
        json_t *gw = json_object_get(r, "gateway");
        if (json_is_object(gw))
            nb_json_set_add(nets, nb_json_str(gw, "network_id"));
        json_array_foreach (json_object_get(r, "interfaces"), j, l)
            nb_json_set_add(nets, nb_json_str(l, "network_id"));
    }
    return out;
}

static json_t *routers_of(struct nb_ctx *ctx, const char *host, json_t *nets)
{
    if (nb_net_l3_host_routers)
        return l3_routers_of(ctx, host, nets);
    _cleanup_json_ json_t *rows = nb_db_rows(
        DB, ctx,
        "SELECT r.* FROM routers r JOIN routerl3agentbindings b ON b.router_id = r.id JOIN "
        "agents a ON a.id = b.l3_agent_id WHERE a.host = ? ORDER BY r.created_at, r.rowid",
        "s", host);
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(out, router_entry(ctx, r, nets));
    return out;
}

/* --- networks ----------------------------------------------------------------- */

static json_t *subnet_entry(const json_t *s)
{
    return json_pack("{s:s, s:s, s:I, s:o, s:b, s:o, s:o, s:o, s:o}", "id", nb_json_str(s, "id"),
                     "cidr", nb_json_str(s, "cidr"), "ip_version", nb_json_int(s, "ip_version", 4),
                     "gateway_ip", nullable(nb_json_str(s, "gateway_ip")), "enable_dhcp",
                     (int)nb_json_int(s, "enable_dhcp", 1), "dns_nameservers",
                     parsed(s, "dns_nameservers", json_array()), "host_routes",
                     parsed(s, "host_routes", json_array()), "ipv6_ra_mode",
                     nullable(nb_json_str(s, "ipv6_ra_mode")), "ipv6_address_mode",
                     nullable(nb_json_str(s, "ipv6_address_mode")));
}

/* The DHCP port of net bound to host, or NULL. */
static json_t *dhcp_port(struct nb_ctx *ctx, const char *net, const char *host)
{
    return nb_db_row(DB, ctx,
                     "SELECT * FROM ports WHERE network_id = ? AND device_owner = 'network:dhcp' "
                     "AND binding_host_id = ? ORDER BY created_at, rowid",
                     "ss", net, host);
}

/* Neutron's dnsmasq host name without DNS integration: host-<ip, - for
 * . and :>. */
static json_t *host_name(const char *ip)
{
    char buf[80];
    snprintf(buf, sizeof(buf), "host-%s", ip);
    for (char *p = buf; *p; p++)
        if (*p == '.' || *p == ':')
            *p = '-';
    return json_string(buf);
}

static json_t *dhcp_hosts(struct nb_ctx *ctx, const char *net, const char *dhcp_port_id)
{
    _cleanup_json_ json_t *rows = nb_db_rows(
        DB, ctx,
        "SELECT p.id, p.mac_address, p.device_id, p.project_id, a.subnet_id, a.ip_address FROM "
        "ports p JOIN ipallocations "
        "a ON a.port_id = p.id WHERE p.network_id = ? AND p.id != ? ORDER BY p.created_at, "
        "p.rowid, a.ip_address",
        "ss", net, dhcp_port_id);
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(
            out,
            json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:s}", "port_id", nb_json_str(r, "id"), "mac",
                      nb_json_str(r, "mac_address"), "subnet_id", nb_json_str(r, "subnet_id"),
                      "ip_address", nb_json_str(r, "ip_address"), "hostname",
                      host_name(nb_json_str(r, "ip_address")), "device_id",
                      nb_json_str(r, "device_id"), "project_id", nb_json_str(r, "project_id")));
    return out;
}

/* The tunnel addresses of the other hosts with a port on net (bound there,
 * or migrating there). */
static json_t *vxlan_peers(struct nb_ctx *ctx, const char *net, const char *host)
{
    char sql[384];
    snprintf(sql, sizeof(sql),
             "SELECT a.configurations FROM agents a WHERE a.agent_type = ? AND a.host != ? AND "
             "a.host IN (SELECT binding_host_id FROM ports WHERE network_id = ? UNION SELECT "
             "%s(binding_profile, '$.migrating_to') FROM ports WHERE network_id = ?) ORDER BY "
             "a.host",
             nb_db_json_value(DB));
    _cleanup_json_ json_t *rows =
        nb_db_rows(DB, ctx, sql, "ssss", NB_AGENT_LINUXBRIDGE, host, net, net);
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        _cleanup_json_ json_t *conf = parsed(r, "configurations", json_object());
        const char *ip = nb_json_str(conf, "local_ip");
        if (ip && *ip)
            nb_json_set_add(out, ip);
    }
    return out;
}

static json_t *network_entry(struct nb_ctx *ctx, const json_t *n, const char *host)
{
    const char *id = nb_json_str(n, "id");
    _cleanup_json_ json_t *seg = nb_ml2_segment(ctx, id);
    _cleanup_json_ json_t *subs = nb_net_subnet_rows(ctx, id);
    _cleanup_json_ json_t *dport = dhcp_port(ctx, id, host);
    json_t *subnets = json_array();
    size_t i;
    json_t *s;
    json_array_foreach (subs, i, s)
        json_array_append_new(subnets, subnet_entry(s));
    json_t *dhcp = json_null(), *hosts = json_array();
    if (dport) {
        const char *pid = nb_json_str(dport, "id");
        char ns[64];
        snprintf(ns, sizeof(ns), "qdhcp-%s", id);
        dhcp = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o}", "port_id", pid, "mac",
                         nb_json_str(dport, "mac_address"), "namespace", ns, "tap",
                         dev_name("tap", pid), "dev", dev_name("ns-", pid), "fixed_ips",
                         fixed_ips(ctx, pid, false));
        json_decref(hosts);
        hosts = dhcp_hosts(ctx, id, pid);
    }
    json_t *segid = seg ? json_object_get(seg, "segmentation_id") : NULL;
    return json_pack("{s:s, s:s, s:s, s:b, s:I, s:s, s:O, s:o, s:b, s:b, s:o, s:o, s:o, s:o, s:o}",
                     "id", id, "name", nb_json_str(n, "name"), "project_id",
                     nb_json_str(n, "project_id"), "admin_state_up",
                     (int)nb_json_int(n, "admin_state_up", 1), "mtu", nb_json_int(n, "mtu", 1500),
                     "network_type", seg ? nb_json_str(seg, "network_type") : "local",
                     "segmentation_id", segid ? segid : json_null(), "physical_network",
                     nullable(seg ? nb_json_str(seg, "physical_network") : NULL), "external",
                     (int)nb_json_int(n, "router_external", 0), "port_security_enabled",
                     (int)nb_json_int(n, "port_security_enabled", 1), "bridge", dev_name("brq", id),
                     "vxlan_peers", vxlan_peers(ctx, id, host), "subnets", subnets, "dhcp", dhcp,
                     "dhcp_hosts", hosts);
}

static json_t *networks_of(struct nb_ctx *ctx, const char *host, json_t *nets)
{
    _cleanup_json_ json_t *served =
        strings_of(ctx,
                   "SELECT b.network_id FROM networkdhcpagentbindings b JOIN agents a ON a.id = "
                   "b.dhcp_agent_id WHERE a.host = ? ORDER BY b.network_id",
                   host, "network_id");
    size_t i;
    json_t *n;
    json_array_foreach (served, i, n)
        nb_json_set_add(nets, json_string_value(n));
    json_t *out = json_array();
    json_array_foreach (nets, i, n) {
        _cleanup_json_ json_t *row =
            nb_db_row(DB, ctx, "SELECT * FROM networks WHERE id = ?", "s", json_string_value(n));
        if (row)
            json_array_append_new(out, network_entry(ctx, row, host));
    }
    return out;
}

json_t *nb_host_state(struct nb_ctx *ctx, const char *host)
{
    if (!host || !*host) {
        nb_error(ctx, 400, "InvalidInput", "Invalid input for operation: host required.");
        return NULL;
    }
    _cleanup_json_ json_t *nets = json_array(), *groups = json_array();
    json_t *ports = ports_of(ctx, host, nets, groups);
    if (!ports)
        return NULL;
    json_t *routers = routers_of(ctx, host, nets);
    json_t *networks = networks_of(ctx, host, nets);
    json_t *sgs = groups_of(ctx, groups);
    _cleanup_json_ json_t *lb =
        nb_db_row(DB, ctx, "SELECT configurations FROM agents WHERE agent_type = ? AND host = ?",
                  "ss", NB_AGENT_LINUXBRIDGE, host);
    _cleanup_json_ json_t *conf = lb ? parsed(lb, "configurations", json_object()) : NULL;
    const char *local_ip = conf ? nb_json_str(conf, "local_ip") : NULL;
    if (nb_ctx_failed(ctx)) {
        json_decref(ports), json_decref(routers), json_decref(networks), json_decref(sgs);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:o, s:o, s:o, s:o}", "host", host, "local_ip",
                     local_ip ? local_ip : "", "networks", networks, "ports", ports,
                     "security_groups", sgs, "routers", routers);
}

int nb_host_state_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *state = nb_host_state(ctx, nb_req_param(req, "host"));
    return state ? nb_resp_json(resp, 200, state) : -1;
}

/* ports.c - /v2.0/ports: create (single and bulk), list, show, update,
 * delete, with fixed IPs, MAC addresses, bindings, port security, allowed
 * address pairs, extra DHCP options and security groups.
 *
 * IP allocation follows Neutron's IPAM: without fixed_ips a port gets one
 * address per IP version from the network's subnets (the first subnet of
 * that version with a free address in its pools, in creation order); each
 * fixed_ips entry names a subnet, an address, or both. Everything a create
 * or update writes happens in one transaction, which serializes allocators
 * (the database mutex), and ipallocations' primary key (ip_address,
 * subnet_id) refuses a second holder of an address in any case. MACs are
 * fa:16:3e:xx:xx:xx (Neutron's base_mac) and unique.
 *
 * IPv6 subnets with automatic addresses (SLAAC, DHCPv6-stateless: Neutron's
 * is_auto_address_subnet) allocate nothing from their pools: every port of
 * the network but a router's interfaces gets the EUI-64 address of its MAC
 * on each of them, whether fixed_ips names the subnet or not, and it
 * follows the MAC when that changes; an explicit ip_address there is
 * refused (AllocationOnAutoAddressSubnet) but for router interfaces, which
 * take the subnet's gateway (ipam_backend_mixin._test_fixed_ips_for_port,
 * ipam_pluggable_backend._get_auto_address_ips).
 *
 * Policy is Neutron's default: a port is visible to its project, to its
 * network's owner and to admins; any project may make ports on a shared
 * network, but only the network's owner (or an admin) may choose their
 * addresses or MAC; binding:host_id and binding:profile are admin-only, and
 * binding:host_id/profile/vif_type/vif_details are shown to admins only. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "db/db.h"
#include "network/ml2_int.h"
#include "network/network_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const struct nb_net_attr port_attrs[] = {
    {"name", NB_A_STR, true, true, false, false, 255},
    {"description", NB_A_STR, true, true, false, false, 255},
    {"network_id", NB_A_UUID, true, false, true, false, 0},
    {"admin_state_up", NB_A_BOOL, true, true, false, false, 0},
    {"mac_address", NB_A_MAC, true, true, false, false, 0},
    {"fixed_ips", NB_A_LIST, true, true, false, false, 0},
    {"device_id", NB_A_STR, true, true, false, false, 255},
    {"device_owner", NB_A_STR, true, true, false, false, 255},
    {"binding:host_id", NB_A_STR, true, true, false, false, 255},
    {"binding:vnic_type", NB_A_STR, true, true, false, false, 0},
    {"binding:profile", NB_A_DICT, true, true, false, true, 0},
    {"security_groups", NB_A_LIST, true, true, false, true, 0},
    {"port_security_enabled", NB_A_BOOL, true, true, false, false, 0},
    {"allowed_address_pairs", NB_A_LIST, true, true, false, true, 0},
    {"extra_dhcp_opts", NB_A_LIST, true, true, false, true, 0},
    {NULL},
};

static const char *const vnic_types[] = {
    "normal",           "direct",    "macvtap", "baremetal",          "direct-physical",
    "virtio-forwarder", "smart-nic", "vdpa",    "accelerator-direct", "accelerator-direct-physical",
    "remote-managed",   NULL};

/* --- views ------------------------------------------------------------------- */

static json_t *fixed_ips_of(struct nb_ctx *ctx, const char *port_id)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx,
                   "SELECT a.subnet_id, a.ip_address FROM ipallocations a JOIN subnets s ON "
                   "s.id = a.subnet_id WHERE a.port_id = ? ORDER BY s.ip_version, s.created_at, "
                   "a.ip_address",
                   "s", port_id);
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(out, json_pack("{s:s, s:s}", "subnet_id", nb_json_str(r, "subnet_id"),
                                             "ip_address", nb_json_str(r, "ip_address")));
    return out;
}

static json_t *groups_of(struct nb_ctx *ctx, const char *port_id)
{
    _cleanup_json_ json_t *rows = nb_db_rows(
        nb_net_env->db, ctx,
        "SELECT security_group_id FROM securitygroupportbindings WHERE port_id = ? ORDER BY rowid",
        "s", port_id);
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(out, json_string(nb_json_str(r, "security_group_id")));
    return out;
}

static json_t *parsed(const json_t *row, const char *col, json_t *def)
{
    json_t *v = nb_json_parse(nb_json_str(row, col));
    if (!v)
        return def;
    json_decref(def);
    return v;
}

/* allowed_address_pairs as shown: each pair with its mac_address. */
static json_t *pairs_view(const json_t *row)
{
    json_t *pairs = parsed(row, "allowed_address_pairs", json_array());
    size_t i;
    json_t *p;
    json_array_foreach (pairs, i, p)
        if (!json_object_get(p, "mac_address"))
            json_object_set_new(p, "mac_address", json_string(nb_json_str(row, "mac_address")));
    return pairs;
}

static json_t *vif_details(const json_t *row)
{
    if (!strcmp(nb_json_str(row, "binding_vif_type"), "ovs"))
        return json_pack("{s:b, s:s, s:b, s:s, s:s}", "port_filter", 1, "connectivity", "l2",
                         "ovs_hybrid_plug", 0, "datapath_type", "system", "bridge_name", "br-int");
    if (!strcmp(nb_json_str(row, "binding_vif_type"), "bridge"))
        return json_pack("{s:b, s:s}", "port_filter", 1, "connectivity", "l2");
    return json_object();
}

json_t *nb_net_port_view(struct nb_ctx *ctx, const json_t *row)
{
    const char *id = nb_json_str(row, "id");
    json_t *v = json_pack(
        "{s:s, s:s, s:s, s:s, s:b, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:b, s:s}", "id", id, "name",
        nb_json_str(row, "name"), "network_id", nb_json_str(row, "network_id"), "mac_address",
        nb_json_str(row, "mac_address"), "admin_state_up",
        (int)nb_json_int(row, "admin_state_up", 1), "status", nb_json_str(row, "status"),
        "device_id", nb_json_str(row, "device_id"), "device_owner",
        nb_json_str(row, "device_owner"), "fixed_ips", fixed_ips_of(ctx, id),
        "allowed_address_pairs", pairs_view(row), "extra_dhcp_opts",
        parsed(row, "extra_dhcp_opts", json_array()), "security_groups", groups_of(ctx, id),
        "port_security_enabled", (int)nb_json_int(row, "port_security_enabled", 1),
        "binding:vnic_type", nb_json_str(row, "binding_vnic_type"));
    nb_net_std_attrs(v, row);
    if (ctx->is_admin) {
        json_object_set_new(v, "binding:host_id", json_string(nb_json_str(row, "binding_host_id")));
        json_object_set_new(v, "binding:profile", parsed(row, "binding_profile", json_object()));
        json_object_set_new(v, "binding:vif_type",
                            json_string(nb_json_str(row, "binding_vif_type")));
        json_object_set_new(v, "binding:vif_details", vif_details(row));
    }
    return v;
}

/* --- access ----------------------------------------------------------------- */

static const char *select_sql = "SELECT p.*, n.project_id AS net_project FROM ports p JOIN "
                                "networks n ON n.id = p.network_id";

static bool visible(const struct nb_ctx *ctx, const json_t *row)
{
    const char *p = nb_json_str(row, "project_id"), *np = nb_json_str(row, "net_project");
    return ctx->is_admin || (p && !strcmp(p, ctx->project_id)) ||
           (np && !strcmp(np, ctx->project_id));
}

static json_t *get(struct nb_ctx *ctx, const char *id)
{
    _cleanup_free_ char *sql = nb_strdup_printf("%s WHERE p.id = ?", select_sql);
    json_t *row = nb_db_row(nb_net_env->db, ctx, sql, "s", id);
    if (row && visible(ctx, row))
        return row;
    json_decref(row);
    if (!nb_ctx_failed(ctx))
        nb_error(ctx, 404, "PortNotFound", "Port %s could not be found.", id);
    return NULL;
}

static int policy_error(struct nb_ctx *ctx, const char *action, const char *attr)
{
    return nb_error(ctx, 403, "PolicyNotAuthorized",
                    "(rule:%s_port and rule:%s_port:%s) is disallowed by policy", action, action,
                    attr);
}

/* Attribute policy: binding:* admin only; addresses and MAC need the
 * network's owner; network:* owners need the network's owner. */
static int check_policy(struct nb_ctx *ctx, const json_t *body, const json_t *net,
                        const char *action)
{
    if (ctx->is_admin)
        return 0;
    if (json_object_get(body, "binding:host_id"))
        return policy_error(ctx, action, "binding:host_id");
    if (json_object_get(body, "binding:profile"))
        return policy_error(ctx, action, "binding:profile");
    if (nb_net_network_owned(ctx, net))
        return 0;
    if (json_object_get(body, "mac_address"))
        return policy_error(ctx, action, "mac_address");
    json_t *ips = json_object_get(body, "fixed_ips");
    size_t i;
    json_t *f;
    json_array_foreach (ips, i, f)
        if (json_object_get(f, "ip_address"))
            return policy_error(ctx, action, "fixed_ips:ip_address");
    const char *owner = nb_json_str(body, "device_owner");
    if (owner && nb_startswith(owner, "network:"))
        return policy_error(ctx, action, "device_owner");
    return 0;
}

/* --- value checks ------------------------------------------------------------ */

static int check_vnic(struct nb_ctx *ctx, const json_t *body)
{
    const char *t = nb_json_str(body, "binding:vnic_type");
    if (!t)
        return 0;
    for (int i = 0; vnic_types[i]; i++)
        if (!strcmp(vnic_types[i], t))
            return 0;
    return nb_error(ctx, 400, "HTTPBadRequest",
                    "Invalid input for binding:vnic_type. Reason: '%s' is not in ['normal', "
                    "'direct', 'macvtap', 'baremetal', 'direct-physical', 'virtio-forwarder', "
                    "'smart-nic', 'vdpa', 'accelerator-direct', 'accelerator-direct-physical', "
                    "'remote-managed'].",
                    t);
}

static int check_pairs(struct nb_ctx *ctx, const json_t *pairs)
{
    size_t i;
    json_t *p;
    json_array_foreach (pairs, i, p) {
        char buf[256];
        const char *ip = nb_json_str(p, "ip_address"), *mac = nb_json_str(p, "mac_address");
        if (!json_is_object(p) || !ip)
            return nb_error(ctx, 400, "AllowedAddressPairsMissingIP",
                            "AllowedAddressPair must contain ip_address");
        struct nb_ip a;
        int pre;
        if (strchr(ip, '/') ? nb_cidr_parse(ip, &a, &pre, false) < 0 : nb_ip_parse(ip, &a) < 0)
            return nb_error(ctx, 400, "HTTPBadRequest",
                            "Invalid input for allowed_address_pairs. Reason: '%s' is not a valid "
                            "IP address.",
                            ip);
        if (mac && nb_net_validate_mac(mac, buf))
            return nb_error(ctx, 400, "HTTPBadRequest",
                            "Invalid input for allowed_address_pairs. Reason: %s.", buf);
    }
    return 0;
}

/* extra_dhcp_opts normalized: each {opt_name, opt_value, ip_version}. */
static json_t *dhcp_opts(struct nb_ctx *ctx, const json_t *opts)
{
    json_t *out = json_array();
    size_t i;
    json_t *o;
    json_array_foreach (opts, i, o) {
        const char *name = nb_json_str(o, "opt_name");
        json_t *val = json_object_get(o, "opt_value");
        if (!json_is_object(o) || !name || !val) {
            _cleanup_free_ char *t = nb_pyrepr(o);
            json_decref(out);
            nb_error(
                ctx, 400, "HTTPBadRequest",
                "Invalid input for extra_dhcp_opts. Reason: Invalid data format for extra-dhcp-"
                "opt: %s.",
                t);
            return NULL;
        }
        json_array_append_new(out, json_pack("{s:s, s:O, s:I}", "opt_name", name, "opt_value", val,
                                             "ip_version", nb_json_int(o, "ip_version", 4)));
    }
    return out;
}

/* --- MAC and IP allocation ---------------------------------------------------- */

/* A free fa:16:3e MAC into mac[18] (inside the transaction). 0/-1. */
static int new_mac(struct nb_ctx *ctx, char *mac)
{
    for (int tries = 0; tries < 16; tries++) {
        char hex[7];
        nb_random_hex(hex, 3);
        snprintf(mac, 18, "fa:16:3e:%.2s:%.2s:%.2s", hex, hex + 2, hex + 4);
        long long used = nb_db_int(nb_net_env->db, ctx, -1,
                                   "SELECT COUNT(*) FROM ports WHERE mac_address = ?", "s", mac);
        if (used < 0)
            return -1;
        if (used == 0)
            return 0;
    }
    return nb_error(ctx, 409, "MacAddressGenerationFailure",
                    "Unable to generate unique mac on network.");
}

static json_t *used_ips(struct nb_ctx *ctx, const char *subnet_id)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx, "SELECT ip_address FROM ipallocations WHERE subnet_id = ?",
                   "s", subnet_id);
    return nb_json_strings(rows, "ip_address");
}

static int insert_ip(struct nb_ctx *ctx, const char *port_id, const json_t *subnet, const char *ip)
{
    long long taken = nb_db_int(nb_net_env->db, ctx, -1,
                                "SELECT COUNT(*) FROM ipallocations WHERE subnet_id = ? AND "
                                "ip_address = ?",
                                "ss", nb_json_str(subnet, "id"), ip);
    if (taken < 0)
        return -1;
    if (taken > 0)
        return nb_error(ctx, 409, "IpAddressAlreadyAllocated",
                        "IP address %s already allocated in subnet %s", ip,
                        nb_json_str(subnet, "id"));
    return nb_db_exec(nb_net_env->db, ctx,
                      "INSERT INTO ipallocations (port_id, ip_address, subnet_id, network_id) "
                      "VALUES (?, ?, ?, ?)",
                      "ssss", port_id, ip, nb_json_str(subnet, "id"),
                      nb_json_str(subnet, "network_id")) < 0
               ? -1
               : 0;
}

/* Allocates the first free pool address of subnet; 1 when it is full. */
static int allocate_any(struct nb_ctx *ctx, const char *port_id, const json_t *subnet)
{
    _cleanup_json_ json_t *used = used_ips(ctx, nb_json_str(subnet, "id"));
    _cleanup_json_ json_t *pools = nb_json_parse(nb_json_str(subnet, "allocation_pools"));
    char ip[64];
    if (!used)
        return -1;
    if (nb_ipam_first_free(pools, used, ip) < 0)
        return 1;
    return insert_ip(ctx, port_id, subnet, ip);
}

static const json_t *find_subnet(const json_t *subnets, const char *id)
{
    size_t i;
    json_t *s;
    json_array_foreach (subnets, i, s)
        if (!strcmp(nb_json_str(s, "id"), id))
            return s;
    return NULL;
}

/* The subnet of the network whose cidr holds ip, or NULL. */
static const json_t *subnet_for_ip(const json_t *subnets, const char *ip)
{
    struct nb_ip a, net;
    int prefix;
    if (nb_ip_parse(ip, &a) < 0)
        return NULL;
    size_t i;
    json_t *s;
    json_array_foreach (subnets, i, s)
        if (nb_cidr_parse(nb_json_str(s, "cidr"), &net, &prefix, false) == 0 &&
            nb_ip_in_cidr(&a, &net, prefix))
            return s;
    return NULL;
}

/* What an allocation is for: the port's MAC (for EUI-64 addresses),
 * whether it is a router interface, and on update the addresses it held
 * ({subnet_id, ip_address} list, or NULL). */
struct alloc {
    const char *mac;
    bool router;
    const json_t *keep;
};

static bool is_auto(const json_t *subnet)
{
    return nb_json_int(subnet, "ip_version", 4) == 6 &&
           nb_ipam_auto_address(nb_json_str(subnet, "ipv6_ra_mode"),
                                nb_json_str(subnet, "ipv6_address_mode"));
}

/* ROUTER_INTERFACE_OWNERS_SNAT: ports that take addresses on automatic
 * subnets explicitly and get no EUI-64 one. */
static bool router_owner(const char *owner)
{
    static const char *const owners[] = {
        "network:router_interface", "network:ha_router_replicated_interface",
        "network:router_interface_distributed", "network:router_centralized_snat", NULL};
    for (int i = 0; owner && owners[i]; i++)
        if (!strcmp(owner, owners[i]))
            return true;
    return false;
}

static bool in_keep(const json_t *keep, const json_t *subnet, const char *ip)
{
    struct nb_ip a, b;
    size_t i;
    json_t *k;
    if (nb_ip_parse(ip, &a) < 0)
        return false;
    json_array_foreach (keep, i, k)
        if (!strcmp(nb_json_str(k, "subnet_id"), nb_json_str(subnet, "id")) &&
            nb_ip_parse(nb_json_str(k, "ip_address"), &b) == 0 && nb_ip_cmp(&a, &b) == 0)
            return true;
    return false;
}

/* One fixed_ips entry: {subnet_id?, ip_address?}. 0/-1. */
static int allocate_entry(struct nb_ctx *ctx, const char *port_id, const json_t *subnets,
                          const char *net_id, const json_t *f, const struct alloc *al)
{
    const char *sid = nb_json_str(f, "subnet_id"), *ip = nb_json_str(f, "ip_address");
    char buf[256];
    if (!json_is_object(f) || (!sid && !ip))
        return nb_error(ctx, 400, "InvalidInput",
                        "Invalid input for operation: IP allocation "
                        "requires subnet_id or ip_address.");
    if (ip && nb_net_validate_ip(ip, buf))
        return nb_error(ctx, 400, "HTTPBadRequest", "Invalid input for fixed_ips. Reason: %s.",
                        buf);
    const json_t *subnet = sid ? find_subnet(subnets, sid) : subnet_for_ip(subnets, ip);
    if (sid && !subnet) {
        if (nb_net_validate_uuid(sid, buf))
            return nb_error(ctx, 400, "HTTPBadRequest", "Invalid input for fixed_ips. Reason: %s.",
                            buf);
        long long exists = nb_db_int(nb_net_env->db, ctx, 0,
                                     "SELECT COUNT(*) FROM subnets WHERE id = ?", "s", sid);
        if (!exists)
            return nb_error(ctx, 404, "SubnetNotFound", "Subnet %s could not be found.", sid);
        return nb_error(ctx, 400, "InvalidInput",
                        "Invalid input for operation: Failed to create port on network %s, "
                        "because fixed_ips included invalid subnet %s.",
                        net_id, sid);
    }
    if (!subnet)
        return nb_error(ctx, 400, "InvalidIpForNetwork",
                        "IP address %s is not a valid IP for any of the subnets on the specified "
                        "network.",
                        ip);
    if (!al->router && is_auto(subnet)) {
        /* the address is the EUI-64 one (allocate_eui64); an address the
         * port holds there may be named again on update */
        if (!ip || in_keep(al->keep, subnet, ip))
            return 0;
        return nb_error(ctx, 400, "AllocationOnAutoAddressSubnet",
                        "IPv6 address %s cannot be directly assigned to a port on subnet %s as "
                        "the subnet is configured for automatic addresses",
                        ip, nb_json_str(subnet, "id"));
    }
    if (!ip) {
        int rc = allocate_any(ctx, port_id, subnet);
        if (rc > 0)
            return nb_error(ctx, 409, "IpAddressGenerationFailure",
                            "No more IP addresses available for subnet %s.", sid);
        return rc;
    }
    struct nb_ip a, net;
    int prefix;
    nb_ip_parse(ip, &a);
    nb_cidr_parse(nb_json_str(subnet, "cidr"), &net, &prefix, false);
    if (!nb_ip_in_cidr(&a, &net, prefix))
        return nb_error(ctx, 400, "InvalidIpForSubnet",
                        "IP address %s is not a valid IP for the specified subnet.", ip);
    char canon[64];
    return insert_ip(ctx, port_id, subnet, nb_ip_format(&a, canon));
}

/* Without fixed_ips: one address per IP version, from the first subnet of
 * that version with room (automatic IPv6 subnets aside). 0/-1. */
static int allocate_auto(struct nb_ctx *ctx, const char *port_id, const json_t *subnets,
                         const char *net_id)
{
    for (int version = 4; version <= 6; version += 2) {
        bool any = false, done = false;
        size_t i;
        json_t *s;
        json_array_foreach (subnets, i, s) {
            if (done || nb_json_int(s, "ip_version", 4) != version || is_auto(s))
                continue;
            any = true;
            int rc = allocate_any(ctx, port_id, s);
            if (rc < 0)
                return -1;
            done = rc == 0;
        }
        if (any && !done)
            return nb_error(ctx, 409, "IpAddressGenerationFailure",
                            "No more IP addresses available on network %s.", net_id);
    }
    return 0;
}

/* The EUI-64 address of the port's MAC on each automatic subnet of the
 * network where it has none yet (not for router interfaces). 0/-1. */
static int allocate_eui64(struct nb_ctx *ctx, const char *port_id, const json_t *subnets,
                          const struct alloc *al)
{
    size_t i;
    json_t *s;
    json_array_foreach (subnets, i, s) {
        if (al->router || !is_auto(s))
            continue;
        long long has = nb_db_int(nb_net_env->db, ctx, -1,
                                  "SELECT COUNT(*) FROM ipallocations WHERE port_id = ? AND "
                                  "subnet_id = ?",
                                  "ss", port_id, nb_json_str(s, "id"));
        char ip[64];
        if (has < 0)
            return -1;
        if (has > 0)
            continue;
        if (nb_ipam_eui64(nb_json_str(s, "cidr"), al->mac, ip) < 0)
            return nb_error(ctx, 400, "InvalidInput",
                            "Invalid input for operation: cannot make an EUI-64 address of MAC %s "
                            "in %s.",
                            al->mac, nb_json_str(s, "cidr"));
        if (insert_ip(ctx, port_id, s, ip) < 0)
            return -1;
    }
    return 0;
}

static int allocate_ips(struct nb_ctx *ctx, const char *port_id, const char *net_id,
                        const json_t *fixed_ips, const struct alloc *al)
{
    _cleanup_json_ json_t *subnets = nb_net_subnet_rows(ctx, net_id);
    if (!subnets)
        return -1;
    if (!fixed_ips) {
        if (allocate_auto(ctx, port_id, subnets, net_id) < 0)
            return -1;
    } else {
        size_t i;
        json_t *f;
        json_array_foreach (fixed_ips, i, f)
            if (allocate_entry(ctx, port_id, subnets, net_id, f, al) < 0)
                return -1;
    }
    return allocate_eui64(ctx, port_id, subnets, al);
}

int nb_net_ports_add_eui64(struct nb_ctx *ctx, const json_t *subnet)
{
    _cleanup_json_ json_t *ports = nb_db_rows(
        nb_net_env->db, ctx, "SELECT id, mac_address, device_owner FROM ports WHERE network_id = ?",
        "s", nb_json_str(subnet, "network_id"));
    _cleanup_json_ json_t *subnets = json_pack("[O]", subnet);
    if (!ports)
        return -1;
    size_t i;
    json_t *p;
    json_array_foreach (ports, i, p) {
        struct alloc al = {nb_json_str(p, "mac_address"),
                           router_owner(nb_json_str(p, "device_owner")), NULL};
        if (allocate_eui64(ctx, nb_json_str(p, "id"), subnets, &al) < 0)
            return -1;
    }
    return 0;
}

/* --- security groups ------------------------------------------------------------ */

/* Writes the port's groups. requested NULL: none on create (the default
 * group, when the security-group hook exists, was put into the body by
 * prepare_groups before the transaction), unchanged on update. A list is
 * checked by the hook; without the hook only an empty list is possible. */
static int bind_groups(struct nb_ctx *ctx, const char *port_id, const char *project,
                       const json_t *requested, bool port_security, bool create)
{
    _cleanup_json_ json_t *groups = NULL;
    if (!create && !requested)
        return 0;
    if (!requested)
        groups = json_array();
    else if (nb_net_hooks.port_security_groups)
        groups = nb_net_hooks.port_security_groups(ctx, project, requested);
    else if (json_array_size(requested))
        return nb_error(ctx, 404, "SecurityGroupNotFound", "Security group %s does not exist",
                        json_string_value(json_array_get(requested, 0)));
    else
        groups = json_array();
    if (!groups)
        return -1;
    if (!port_security && json_array_size(groups))
        return nb_error(ctx, 409, "PortSecurityAndIPRequiredForSecurityGroups",
                        "Port security must be enabled and port must have an IP address in order "
                        "to use security groups.");
    if (nb_db_exec(nb_net_env->db, ctx, "DELETE FROM securitygroupportbindings WHERE port_id = ?",
                   "s", port_id) < 0)
        return -1;
    size_t i;
    json_t *g;
    json_array_foreach (groups, i, g)
        if (nb_db_insert_ignore(nb_net_env->db, ctx,
                                "INTO securitygroupportbindings "
                                "(port_id, security_group_id) VALUES (?, ?)",
                                "ss", port_id, json_string_value(g)) < 0)
            return -1;
    return 0;
}

/* Before a create's transaction: a port given no security_groups gets its
 * project's default group (which the hook may have to create, in its own
 * transaction), unless port security is off (asked, or inherited from a
 * network without it, as Neutron's portsecurity extension) or it is a
 * network:* port. */
static int prepare_groups(struct nb_ctx *ctx, json_t *body)
{
    const char *owner = nb_json_str(body, "device_owner");
    json_t *ps = json_object_get(body, "port_security_enabled");
    if (!nb_net_hooks.port_security_groups || json_object_get(body, "security_groups") ||
        (ps && !json_is_true(ps)) || (owner && nb_startswith(owner, "network:")))
        return 0;
    const char *net = nb_json_str(body, "network_id");
    if (!ps && net &&
        nb_db_int(nb_net_env->db, ctx, 1, "SELECT port_security_enabled FROM networks WHERE id = ?",
                  "s", net) == 0)
        return nb_ctx_failed(ctx) ? -1 : 0;
    char project[NB_ID_LEN];
    if (nb_net_owner(ctx, body, project) < 0)
        return -1;
    json_t *groups = nb_net_hooks.port_security_groups(ctx, project, NULL);
    if (!groups)
        return -1;
    json_object_set_new(body, "security_groups", groups);
    return 0;
}

/* --- create ---------------------------------------------------------------------- */

static bool flag(const json_t *body, const char *key, bool def)
{
    json_t *v = json_object_get(body, key);
    return v ? json_is_true(v) : def;
}

static const char *str_or(const json_t *body, const char *key, const char *def)
{
    const char *s = nb_json_str(body, key);
    return s ? s : def;
}

/* Inserts the ports row of a checked body. 0/-1. */
static int insert_port(struct nb_ctx *ctx, const char *id, const char *project, const json_t *net,
                       const json_t *body, const char *mac, json_t *opts, bool port_security)
{
    char now[32];
    const char *host = str_or(body, "binding:host_id", "");
    const char *vif_type = nb_bind_vif_type(ctx, host);
    json_t *pairs = json_object_get(body, "allowed_address_pairs"),
           *profile = json_object_get(body, "binding:profile");
    _cleanup_json_ json_t *no_pairs = json_array(), *no_profile = json_object();
    return nb_db_exec(
               nb_net_env->db, ctx,
               "INSERT INTO ports (id, project_id, network_id, name, description, mac_address, "
               "admin_state_up, status, device_id, device_owner, binding_host_id, "
               "binding_vnic_type, binding_vif_type, binding_profile, port_security_enabled, "
               "allowed_address_pairs, extra_dhcp_opts, created_at, updated_at) VALUES (?, ?, ?, "
               "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
               "ssssssbssssssjbjjss", id, project, nb_json_str(net, "id"), str_or(body, "name", ""),
               str_or(body, "description", ""), mac, flag(body, "admin_state_up", true),
               nb_bind_status(vif_type), str_or(body, "device_id", ""),
               str_or(body, "device_owner", ""), host, str_or(body, "binding:vnic_type", "normal"),
               vif_type, json_is_object(profile) ? profile : no_profile, port_security,
               json_is_array(pairs) ? pairs : no_pairs, opts, nb_net_now(now), now) < 0
               ? -1
               : 0;
}

/* Checks and writes one port (inside the caller's transaction). */
static json_t *create_one(struct nb_ctx *ctx, json_t *body)
{
    char project[NB_ID_LEN], id[NB_UUID_LEN], mac[18];
    if (nb_net_owner(ctx, body, project) < 0 || nb_net_quota_check(ctx, project, "port") < 0)
        return NULL;
    _cleanup_json_ json_t *net = nb_net_network_get(ctx, nb_json_str(body, "network_id"));
    if (!net || check_policy(ctx, body, net, "create") < 0 || check_vnic(ctx, body) < 0 ||
        check_pairs(ctx, json_object_get(body, "allowed_address_pairs")) < 0)
        return NULL;
    bool port_security =
        flag(body, "port_security_enabled", nb_json_int(net, "port_security_enabled", 1));
    if (!port_security && json_array_size(json_object_get(body, "allowed_address_pairs"))) {
        nb_error(ctx, 409, "AddressPairAndPortSecurityRequired",
                 "Port Security must be enabled in order to have allowed address pairs on a "
                 "port.");
        return NULL;
    }
    _cleanup_json_ json_t *opts = dhcp_opts(ctx, json_object_get(body, "extra_dhcp_opts"));
    if (!opts)
        return NULL;
    const char *want_mac = nb_json_str(body, "mac_address");
    if (want_mac) {
        nb_strlcpy(mac, want_mac, sizeof(mac));
        for (char *p = mac; *p; p++)
            *p = *p == '-' ? ':' : (char)tolower((unsigned char)*p);
        if (nb_db_int(nb_net_env->db, ctx, 0, "SELECT COUNT(*) FROM ports WHERE mac_address = ?",
                      "s", mac) > 0) {
            nb_error(ctx, 409, "MacAddressInUse",
                     "Unable to complete operation for network %s. The mac address %s is in use.",
                     nb_json_str(net, "id"), mac);
            return NULL;
        }
    } else if (new_mac(ctx, mac) < 0) {
        return NULL;
    }
    nb_uuid(id);
    json_t *fixed = json_object_get(body, "fixed_ips");
    struct alloc al = {mac, router_owner(nb_json_str(body, "device_owner")), NULL};
    if (insert_port(ctx, id, project, net, body, mac, opts, port_security) < 0 ||
        allocate_ips(ctx, id, nb_json_str(net, "id"), fixed, &al) < 0 ||
        bind_groups(ctx, id, project, json_object_get(body, "security_groups"), port_security,
                    true) < 0)
        return NULL;
    _cleanup_json_ json_t *row = get(ctx, id);
    if (!row)
        return NULL;
    NB_INFO("nubo.network.ports", ctx, NULL, "created port %s (%s) on network %s", id, mac,
            nb_json_str(net, "id"));
    return nb_net_port_view(ctx, row);
}

json_t *nb_net_port_create(struct nb_ctx *ctx, json_t *body)
{
    if (nb_net_check_attrs(ctx, body, port_attrs, true) < 0 || prepare_groups(ctx, body) < 0)
        return NULL;
    return nb_net_create_in_tx(ctx, body, create_one);
}

int nb_net_port_set_device(struct nb_ctx *ctx, const char *port_id, const char *device_id,
                           const char *device_owner)
{
    char now[32];
    int n = nb_db_exec(nb_net_env->db, ctx,
                       "UPDATE ports SET device_id = ?, device_owner = ?, updated_at = ?, "
                       "revision_number = revision_number + 1 WHERE id = ?",
                       "ssss", device_id ? device_id : "", device_owner ? device_owner : "",
                       nb_net_now(now), port_id);
    if (n == 0)
        return nb_error(ctx, 404, "PortNotFound", "Port %s could not be found.", port_id);
    return n < 0 ? -1 : 0;
}

static int create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *bulk = json_is_object(req->json) ? json_object_get(req->json, "ports") : NULL;
    if (bulk && (!json_is_array(bulk) || !json_array_size(bulk)))
        return nb_error(ctx, 400, "HTTPBadRequest", "Resources required");
    json_t *one = bulk ? NULL : nb_net_body(ctx, req, "port");
    if (!bulk && !one)
        return -1;
    size_t n = bulk ? json_array_size(bulk) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *b = bulk ? json_array_get(bulk, i) : one;
        if (!json_is_object(b))
            return nb_error(ctx, 400, "HTTPBadRequest", "Object 'port' contains invalid data");
        if (nb_net_check_attrs(ctx, b, port_attrs, true) < 0 || prepare_groups(ctx, b) < 0)
            return -1;
    }
    _cleanup_json_ json_t *items = bulk ? json_incref(bulk) : json_pack("[O]", one);
    return nb_net_create_respond(ctx, req, resp, "port", "ports", items, bulk != NULL, create_one);
}

/* --- list, show ------------------------------------------------------------------- */

static int list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    /* the cheap, common filters narrow the query; the rest are applied on the views */
    const char *dev = nb_req_query(req, "device_id"), *net = nb_req_query(req, "network_id");
    _cleanup_free_ char *sql = nb_strdup_printf(
        "%s WHERE (? IS NULL OR p.device_id = ?) AND (? IS NULL OR p.network_id = ?) ORDER BY "
        "p.created_at, p.rowid",
        select_sql);
    _cleanup_json_ json_t *rows = nb_db_rows(nb_net_env->db, ctx, sql, "ssss", dev, dev, net, net);
    if (!rows)
        return -1;
    json_t *views = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        if (visible(ctx, r))
            json_array_append_new(views, nb_net_port_view(ctx, r));
    return nb_net_list_respond(ctx, req, resp, "ports", views);
}

static int show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *row = get(ctx, nb_req_param(req, "port_id"));
    return row ? nb_net_show_respond(req, resp, 200, "port", nb_net_port_view(ctx, row)) : -1;
}

/* --- update ------------------------------------------------------------------------- */

/* Replaces the port's fixed IPs (fixed NULL: keeps them but the EUI-64
 * ones, made anew of mac): entries naming an address the port holds keep
 * it; the others are allocated anew; automatic subnets get the EUI-64
 * address of mac whatever the entries say. 0/-1. */
static int replace_ips(struct nb_ctx *ctx, const json_t *row, const json_t *fixed, const char *mac,
                       const char *owner)
{
    const char *id = nb_json_str(row, "id");
    _cleanup_json_ json_t *held = fixed ? NULL : fixed_ips_of(ctx, id);
    if (!fixed)
        fixed = held; /* a MAC change: all kept, the EUI-64 ones follow the MAC */
    _cleanup_json_ json_t *old = fixed_ips_of(ctx, id);
    if (nb_db_exec(nb_net_env->db, ctx, "DELETE FROM ipallocations WHERE port_id = ?", "s", id) < 0)
        return -1;
    /* subnet-only entries for a subnet the port already had keep its address */
    _cleanup_json_ json_t *want = json_array();
    size_t i, j;
    json_t *f, *o;
    json_array_foreach (fixed, i, f) {
        json_t *e = json_deep_copy(f);
        if (json_is_object(e) && !nb_json_str(e, "ip_address") && nb_json_str(e, "subnet_id"))
            json_array_foreach (old, j, o)
                if (!strcmp(nb_json_str(o, "subnet_id"), nb_json_str(e, "subnet_id"))) {
                    json_object_set(e, "ip_address", json_object_get(o, "ip_address"));
                    break;
                }
        json_array_append_new(want, e);
    }
    struct alloc al = {mac, router_owner(owner), old};
    return allocate_ips(ctx, id, nb_json_str(row, "network_id"), want, &al);
}

static const char *column_of(const char *attr)
{
    if (!strcmp(attr, "binding:host_id"))
        return "binding_host_id";
    if (!strcmp(attr, "binding:vnic_type"))
        return "binding_vnic_type";
    if (!strcmp(attr, "binding:profile"))
        return "binding_profile";
    return attr;
}

/* Writes the plain columns of an update. 0/-1. */
static int update_columns(struct nb_ctx *ctx, const char *id, json_t *body)
{
    const char *key;
    json_t *v;
    json_object_foreach (body, key, v) {
        if (!strcmp(key, "project_id") || !strcmp(key, "tenant_id") || !strcmp(key, "fixed_ips") ||
            !strcmp(key, "security_groups") || !strcmp(key, "extra_dhcp_opts"))
            continue;
        _cleanup_free_ char *sql =
            nb_strdup_printf("UPDATE ports SET %s = ? WHERE id = ?", column_of(key));
        int rc;
        if (json_is_boolean(v))
            rc = nb_db_exec(nb_net_env->db, ctx, sql, "bs", json_is_true(v), id);
        else if (json_is_array(v) || json_is_object(v))
            rc = nb_db_exec(nb_net_env->db, ctx, sql, "js", v, id);
        else if (json_is_null(v)) {
            _cleanup_json_ json_t *empty =
                !strcmp(key, "binding:profile") ? json_object() : json_array();
            rc = nb_db_exec(nb_net_env->db, ctx, sql, "js", empty, id);
        } else
            rc = nb_db_exec(nb_net_env->db, ctx, sql, "ss", json_string_value(v), id);
        if (rc < 0)
            return -1;
    }
    if (json_object_get(body, "binding:host_id")) {
        const char *vif_type = nb_bind_vif_type(ctx, str_or(body, "binding:host_id", ""));
        if (nb_db_exec(nb_net_env->db, ctx,
                       "UPDATE ports SET binding_vif_type = ?, status = ? WHERE id = ?", "sss",
                       vif_type, nb_bind_status(vif_type), id) < 0)
            return -1;
    }
    return 0;
}

static int apply_update(struct nb_ctx *ctx, const json_t *row, json_t *body)
{
    const char *id = nb_json_str(row, "id");
    char now[32];
    bool port_security =
        flag(body, "port_security_enabled", nb_json_int(row, "port_security_enabled", 1));
    if (json_object_get(body, "extra_dhcp_opts")) {
        _cleanup_json_ json_t *opts = dhcp_opts(ctx, json_object_get(body, "extra_dhcp_opts"));
        if (!opts ||
            nb_db_exec(nb_net_env->db, ctx, "UPDATE ports SET extra_dhcp_opts = ? WHERE id = ?",
                       "js", opts, id) < 0)
            return -1;
    }
    if (update_columns(ctx, id, body) < 0)
        return -1;
    const char *mac = nb_json_str(body, "mac_address") ? nb_json_str(body, "mac_address")
                                                       : nb_json_str(row, "mac_address");
    const char *owner = nb_json_str(body, "device_owner") ? nb_json_str(body, "device_owner")
                                                          : nb_json_str(row, "device_owner");
    bool new_mac = strcasecmp(mac, nb_json_str(row, "mac_address")) != 0;
    if ((json_object_get(body, "fixed_ips") || new_mac) &&
        replace_ips(ctx, row, json_object_get(body, "fixed_ips"), mac, owner) < 0)
        return -1;
    json_t *sg = json_object_get(body, "security_groups");
    if (sg && json_is_null(sg))
        sg = NULL;
    if (bind_groups(ctx, id, nb_json_str(row, "project_id"), sg, port_security, false) < 0)
        return -1;
    if (!port_security && !sg &&
        nb_db_int(nb_net_env->db, ctx, 0,
                  "SELECT COUNT(*) FROM securitygroupportbindings WHERE port_id = ?", "s", id) > 0)
        return nb_error(ctx, 409, "PortSecurityPortHasSecurityGroup",
                        "Port has security group associated. Cannot disable port security or ip "
                        "address until security group is removed");
    return nb_db_exec(nb_net_env->db, ctx,
                      "UPDATE ports SET updated_at = ?, revision_number = revision_number + 1 "
                      "WHERE id = ?",
                      "ss", nb_net_now(now), id) < 0
               ? -1
               : 0;
}

static int update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "port_id");
    json_t *body = nb_net_body(ctx, req, "port");
    if (!body || nb_net_check_attrs(ctx, body, port_attrs, false) < 0 ||
        check_vnic(ctx, body) < 0 ||
        check_pairs(ctx, json_object_get(body, "allowed_address_pairs")) < 0)
        return -1;
    _cleanup_json_ json_t *row = get(ctx, id);
    if (!row)
        return -1;
    /* the network's owner sees (and may delete) other projects' ports on it,
     * only the port's project changes them (update_port) */
    if (!ctx->is_admin && strcmp(nb_json_str(row, "project_id"), ctx->project_id) != 0)
        return nb_net_deny(ctx, "update_port");
    _cleanup_json_ json_t *net =
        nb_db_row(nb_net_env->db, ctx, "SELECT * FROM networks WHERE id = ?", "s",
                  nb_json_str(row, "network_id"));
    if (!net || check_policy(ctx, body, net, "update") < 0)
        return -1;
    const char *mac = nb_json_str(body, "mac_address");
    if (mac && *nb_json_str(row, "binding_host_id"))
        return nb_error(ctx, 409, "PortBound",
                        "Unable to complete operation on port %s, port is already bound, port "
                        "type: ovs, old_mac %s, new_mac %s.",
                        id, nb_json_str(row, "mac_address"), mac);
    if (nb_db_begin(nb_net_env->db, ctx) < 0)
        return -1;
    if (apply_update(ctx, row, body) < 0) {
        nb_db_rollback(nb_net_env->db);
        return -1;
    }
    if (nb_db_commit(nb_net_env->db, ctx) < 0)
        return -1;
    json_decref(row);
    row = get(ctx, id);
    return row ? nb_net_show_respond(req, resp, 200, "port", nb_net_port_view(ctx, row)) : -1;
}

int nb_net_port_set_groups(struct nb_ctx *ctx, const char *id, const json_t *groups)
{
    _cleanup_json_ json_t *row = get(ctx, id);
    if (!row)
        return -1;
    _cleanup_json_ json_t *body = json_pack("{s:O}", "security_groups", (json_t *)groups);
    if (nb_db_begin(nb_net_env->db, ctx) < 0)
        return -1;
    if (apply_update(ctx, row, body) < 0) {
        nb_db_rollback(nb_net_env->db);
        return -1;
    }
    return nb_db_commit(nb_net_env->db, ctx);
}

/* --- delete ------------------------------------------------------------------------- */

int nb_net_port_delete(struct nb_ctx *ctx, const char *id)
{
    _cleanup_json_ json_t *row = get(ctx, id);
    if (!row)
        return -1;
    const char *p = nb_json_str(row, "project_id"), *np = nb_json_str(row, "net_project");
    if (!ctx->is_admin && strcmp(p, ctx->project_id) && strcmp(np, ctx->project_id))
        return nb_error(ctx, 404, "PortNotFound", "Port %s could not be found.", id);
    /* allocations and group bindings go by ON DELETE CASCADE */
    if (nb_db_exec(nb_net_env->db, ctx, "DELETE FROM ports WHERE id = ?", "s", id) < 0)
        return -1;
    NB_INFO("nubo.network.ports", ctx, NULL, "deleted port %s", id);
    return 0;
}

static int delete (struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "port_id");
    if (nb_net_hooks.port_delete_check) {
        _cleanup_json_ json_t *row = get(ctx, id);
        if (!row || nb_net_hooks.port_delete_check(ctx, row) < 0)
            return -1;
    }
    if (nb_net_port_delete(ctx, id) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

int nb_net_ports_init(void)
{
    nb_http_route("POST", "/networking/v2.0/ports", create, 0);
    nb_http_route("GET", "/networking/v2.0/ports", list, 0);
    nb_http_route("GET", "/networking/v2.0/ports/{port_id}", show, 0);
    nb_http_route("PUT", "/networking/v2.0/ports/{port_id}", update, 0);
    nb_http_route("DELETE", "/networking/v2.0/ports/{port_id}", delete, 0);
    return 0;
}

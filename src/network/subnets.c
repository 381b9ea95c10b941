/* subnets.c - /v2.0/subnets: create (single and bulk), list, show, update,
 * delete.
 *
 * A subnet's checks are Neutron's (db_base_plugin_v2 _validate_subnet and
 * ipam_backend_mixin): the cidr and gateway match ip_version, a v4 gateway
 * is neither the network nor the broadcast address, the cidr does not
 * overlap another subnet of the network, allocation pools lie inside the
 * cidr, do not overlap and do not hold the gateway, DNS servers and host
 * routes are well formed. The gateway defaults to the cidr's first host and
 * the pools to the rest (ipam.c). A subnet is visible to its project, to
 * every project when its network is shared, and to admins; a subnet
 * holding a port's IP cannot be deleted (409 SubnetInUse). */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "db/db.h"
#include "network/network_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct nb_net_attr subnet_attrs[] = {
    {"name", NB_A_STR, true, true, false, false, 255},
    {"description", NB_A_STR, true, true, false, false, 255},
    {"network_id", NB_A_UUID, true, false, true, false, 0},
    {"ip_version", NB_A_IPVER, true, false, true, false, 0},
    {"cidr", NB_A_CIDR, true, false, false, false, 0},
    {"prefixlen", NB_A_INT, true, false, false, false, 1},
    {"gateway_ip", NB_A_IP, true, true, false, true, 0},
    {"allocation_pools", NB_A_LIST, true, true, false, false, 0},
    {"dns_nameservers", NB_A_LIST, true, true, false, false, 0},
    {"host_routes", NB_A_LIST, true, true, false, false, 0},
    {"enable_dhcp", NB_A_BOOL, true, true, false, false, 0},
    {"ipv6_ra_mode", NB_A_STR, true, false, false, true, 0},
    {"ipv6_address_mode", NB_A_STR, true, false, false, true, 0},
    {"subnetpool_id", NB_A_UUID, true, false, false, true, 0},
    {"use_default_subnetpool", NB_A_BOOL, true, false, false, false, 0},
    {NULL},
};

static json_t *view(const json_t *row)
{
    json_t *pools = nb_json_parse(nb_json_str(row, "allocation_pools"));
    json_t *dns = nb_json_parse(nb_json_str(row, "dns_nameservers"));
    json_t *routes = nb_json_parse(nb_json_str(row, "host_routes"));
    const char *gw = nb_json_str(row, "gateway_ip"), *ra = nb_json_str(row, "ipv6_ra_mode"),
               *am = nb_json_str(row, "ipv6_address_mode"),
               *pool = nb_json_str(row, "subnetpool_id");
    json_t *v = json_pack(
        "{s:s, s:s, s:s, s:I, s:s, s:o, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:[], s:b}", "id",
        nb_json_str(row, "id"), "name", nb_json_str(row, "name"), "network_id",
        nb_json_str(row, "network_id"), "ip_version", nb_json_int(row, "ip_version", 4), "cidr",
        nb_json_str(row, "cidr"), "gateway_ip", gw ? json_string(gw) : json_null(), "enable_dhcp",
        (int)nb_json_int(row, "enable_dhcp", 1), "ipv6_ra_mode", ra ? json_string(ra) : json_null(),
        "ipv6_address_mode", am ? json_string(am) : json_null(), "subnetpool_id",
        pool ? json_string(pool) : json_null(), "allocation_pools", pools ? pools : json_array(),
        "dns_nameservers", dns ? dns : json_array(), "host_routes", routes ? routes : json_array(),
        "service_types", "dns_publish_fixed_ip", 0);
    nb_net_std_attrs(v, row);
    return v;
}

/* Visible subnets: own, on a shared network, or admin. */
static bool visible(const struct nb_ctx *ctx, const json_t *row)
{
    const char *p = nb_json_str(row, "project_id");
    return ctx->is_admin || (p && !strcmp(p, ctx->project_id)) || nb_json_int(row, "net_shared", 0);
}

static const char *select_sql = "SELECT s.*, n.shared AS net_shared FROM subnets s JOIN networks n "
                                "ON n.id = s.network_id";

static json_t *get(struct nb_ctx *ctx, const char *id)
{
    _cleanup_free_ char *sql = nb_strdup_printf("%s WHERE s.id = ?", select_sql);
    json_t *row = nb_db_row(nb_net_env->db, ctx, sql, "s", id);
    if (row && visible(ctx, row))
        return row;
    json_decref(row);
    if (!nb_ctx_failed(ctx))
        nb_error(ctx, 404, "SubnetNotFound", "Subnet %s could not be found.", id);
    return NULL;
}

/* "%(name)s '%(addr)s' does not match the ip_version '%(ip_version)s'". */
static int check_version(struct nb_ctx *ctx, const char *name, const char *addr, int version)
{
    struct nb_ip ip;
    int prefix;
    int rc = strchr(addr, '/') ? nb_cidr_parse(addr, &ip, &prefix, false) : nb_ip_parse(addr, &ip);
    if (rc == 0 && ip.version == version)
        return 0;
    return nb_error(ctx, 400, "InvalidInput",
                    "Invalid input for operation: %s '%s' does not match the ip_version '%d'.",
                    name, addr, version);
}

static int check_dns(struct nb_ctx *ctx, const json_t *dns, int version)
{
    size_t i, j;
    json_t *d;
    json_array_foreach (dns, i, d) {
        char buf[256];
        const char *s = json_string_value(d);
        if (!s || nb_net_validate_ip(s, buf)) {
            _cleanup_free_ char *t = nb_pyrepr(d);
            return nb_error(ctx, 400, "HTTPBadRequest",
                            "Invalid input for dns_nameservers. Reason: %s is not a valid "
                            "nameserver.",
                            t);
        }
        for (j = 0; j < i; j++)
            if (!strcmp(json_string_value(json_array_get(dns, j)), s))
                return nb_error(ctx, 400, "HTTPBadRequest",
                                "Invalid input for dns_nameservers. Reason: Duplicate "
                                "nameserver '%s'.",
                                s);
        if (check_version(ctx, "dns_nameserver", s, version) < 0)
            return -1;
    }
    if (json_array_size(dns) > 5)
        return nb_error(ctx, 400, "DNSNameServersExhausted",
                        "Unable to complete operation for subnet. The number of DNS nameservers "
                        "exceeds the limit 5.");
    return 0;
}

static int check_routes(struct nb_ctx *ctx, const json_t *routes, int version)
{
    size_t i;
    json_t *r;
    json_array_foreach (routes, i, r) {
        char b1[256], b2[256];
        const char *d = nb_json_str(r, "destination"), *h = nb_json_str(r, "nexthop");
        if (!json_is_object(r) || json_object_size(r) != 2 || !d || !h ||
            nb_net_validate_cidr(d, b1) || nb_net_validate_ip(h, b2)) {
            _cleanup_free_ char *t = nb_pyrepr(r);
            return nb_error(ctx, 400, "HTTPBadRequest",
                            "Invalid input for host_routes. Reason: Invalid data format for "
                            "hostroute: '%s'.",
                            t);
        }
        if (check_version(ctx, "destination", d, version) < 0 ||
            check_version(ctx, "nexthop", h, version) < 0)
            return -1;
    }
    return 0;
}

/* Gateway checks: family, and not the v4 network/broadcast address. */
static int check_gateway(struct nb_ctx *ctx, const char *gw, const char *cidr, int version)
{
    if (!gw)
        return 0;
    if (check_version(ctx, "gateway_ip", gw, version) < 0)
        return -1;
    struct nb_ip ip, net, first, last;
    int prefix;
    nb_ip_parse(gw, &ip);
    nb_cidr_parse(cidr, &net, &prefix, false);
    nb_cidr_bounds(&net, prefix, &first, &last);
    if (version == 4 && prefix < 31 && (nb_ip_cmp(&ip, &first) == 0 || nb_ip_cmp(&ip, &last) == 0))
        return nb_error(ctx, 400, "InvalidInput",
                        "Invalid input for operation: Gateway is not valid on subnet.");
    return 0;
}

static int bad_mode(struct nb_ctx *ctx, const char *attr, const char *mode)
{
    return nb_error(ctx, 400, "HTTPBadRequest",
                    "Invalid input for %s. Reason: '%s' is not in ['dhcpv6-stateful', "
                    "'dhcpv6-stateless', 'slaac'].",
                    attr, mode);
}

/* The IPv6 modes as Neutron checks them at create (_validate_subnet,
 * _validate_ipv6_attributes): known values, IPv6 only, with DHCP on, the
 * same value when both are set, a /64 when addresses are EUI-64. */
static int check_modes(struct nb_ctx *ctx, const json_t *body, const char *cidr, int version)
{
    const char *ra = nb_json_str(body, "ipv6_ra_mode"),
               *am = nb_json_str(body, "ipv6_address_mode");
    const char *known[] = {"dhcpv6-stateful", "dhcpv6-stateless", "slaac"};
    const char *attrs[] = {"ipv6_ra_mode", "ipv6_address_mode"}, *vals[] = {ra, am};
    for (int i = 0; i < 2; i++) {
        bool ok = !vals[i];
        for (int k = 0; k < 3 && !ok; k++)
            ok = !strcmp(vals[i], known[k]);
        if (!ok)
            return bad_mode(ctx, attrs[i], vals[i]);
        if (vals[i] && version == 4)
            return nb_error(ctx, 400, "InvalidInput",
                            "Invalid input for operation: %s is not valid when ip_version is 4.",
                            attrs[i]);
    }
    if (!ra && !am)
        return 0;
    json_t *dhcp = json_object_get(body, "enable_dhcp");
    if (dhcp && !json_is_true(dhcp))
        return nb_error(ctx, 400, "InvalidInput",
                        "Invalid input for operation: ipv6_ra_mode or ipv6_address_mode cannot be "
                        "set when enable_dhcp is set to False.");
    if (ra && am && strcmp(ra, am))
        return nb_error(ctx, 400, "InvalidInput",
                        "Invalid input for operation: ipv6_ra_mode set to '%s' with "
                        "ipv6_address_mode set to '%s' is not valid. If both attributes are set, "
                        "they must be the same value.",
                        ra, am);
    const char *slash = strchr(cidr, '/');
    if (nb_ipam_auto_address(ra, am) && (!slash || atoi(slash + 1) != 64))
        return nb_error(ctx, 400, "InvalidInput",
                        "Invalid input for operation: Invalid CIDR %s for IPv6 address mode. "
                        "OpenStack uses the EUI-64 address format, which requires the prefix to "
                        "be /64.",
                        cidr);
    return 0;
}

/* 400 when cidr overlaps a subnet of the network. */
static int check_overlap(struct nb_ctx *ctx, const char *network_id, const char *cidr)
{
    _cleanup_json_ json_t *rows = nb_net_subnet_rows(ctx, network_id);
    if (!rows)
        return -1;
    struct nb_ip a, b;
    int pa, pb;
    nb_cidr_parse(cidr, &a, &pa, false);
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        if (nb_cidr_parse(nb_json_str(r, "cidr"), &b, &pb, false) < 0 || a.version != b.version)
            continue;
        int p = pa < pb ? pa : pb;
        if (nb_ip_in_cidr(&a, &b, pb) || nb_ip_in_cidr(&b, &a, pa) || (p == 0))
            return nb_error(ctx, 400, "InvalidInput",
                            "Invalid input for operation: Requested subnet with cidr: %s for "
                            "network: %s overlaps with another subnet.",
                            cidr, network_id);
    }
    return 0;
}

/* The network a subnet is created on, which ctx must own (or be admin). */
static json_t *owned_network(struct nb_ctx *ctx, const char *id)
{
    json_t *net = nb_net_network_get(ctx, id);
    if (net && !nb_net_network_owned(ctx, net)) {
        bool shared = nb_json_int(net, "shared", 0);
        json_decref(net);
        if (!shared)
            nb_error(ctx, 404, "HTTPNotFound", "The resource could not be found.");
        else
            nb_net_deny(ctx, "create_subnet");
        return NULL;
    }
    return net;
}

/* Canonical cidr text (v6 compressed) into out[80]. */
static void canonical_cidr(const char *cidr, char *out)
{
    struct nb_ip net;
    int prefix;
    char a[64];
    nb_cidr_parse(cidr, &net, &prefix, false);
    snprintf(out, 80, "%s/%d", nb_ip_format(&net, a), prefix);
}

static json_t *create_one(struct nb_ctx *ctx, json_t *body)
{
    char project[NB_ID_LEN], id[NB_UUID_LEN], now[32], cidr[80], gwbuf[64];
    const char *net_id = nb_json_str(body, "network_id");
    if (nb_net_owner(ctx, body, project) < 0 || nb_net_quota_check(ctx, project, "subnet") < 0)
        return NULL;
    _cleanup_json_ json_t *net = owned_network(ctx, net_id);
    if (!net)
        return NULL;
    /* from a pool: the pool picks the cidr, or checks the one given */
    if (nb_net_hooks.subnet_from_pool &&
        (json_object_get(body, "subnetpool_id") ||
         json_is_true(json_object_get(body, "use_default_subnetpool"))) &&
        nb_net_hooks.subnet_from_pool(ctx, project, body) < 0)
        return NULL;
    if (!nb_json_str(body, "cidr")) {
        nb_error(ctx, 400, "BadRequest",
                 "Bad subnets request: a subnetpool must be specified in the absence of a cidr.");
        return NULL;
    }
    int version = (int)nb_json_int(body, "ip_version", 4);
    if (check_version(ctx, "cidr", nb_json_str(body, "cidr"), version) < 0)
        return NULL;
    canonical_cidr(nb_json_str(body, "cidr"), cidr);
    json_t *gwv = json_object_get(body, "gateway_ip");
    const char *gw = NULL;
    if (!gwv) {
        struct nb_ip net_ip;
        int prefix;
        nb_cidr_parse(cidr, &net_ip, &prefix, false);
        nb_ip_add(&net_ip, 1);
        gw = nb_ip_format(&net_ip, gwbuf);
    } else if (json_is_string(gwv)) {
        gw = json_string_value(gwv);
    }
    json_t *pools_in = json_object_get(body, "allocation_pools");
    _cleanup_json_ json_t *pools =
        pools_in ? json_incref(pools_in) : nb_ipam_default_pools(cidr, gw);
    json_t *dns = json_object_get(body, "dns_nameservers"),
           *routes = json_object_get(body, "host_routes");
    if (check_modes(ctx, body, cidr, version) < 0 || check_gateway(ctx, gw, cidr, version) < 0 ||
        check_overlap(ctx, net_id, cidr) < 0 || nb_ipam_check_pools(ctx, cidr, gw, pools) < 0 ||
        check_dns(ctx, dns, version) < 0 || check_routes(ctx, routes, version) < 0)
        return NULL;
    const char *name = nb_json_str(body, "name"), *desc = nb_json_str(body, "description");
    json_t *dhcp = json_object_get(body, "enable_dhcp");
    _cleanup_json_ json_t *none = json_array();
    nb_uuid(id);
    nb_net_now(now);
    if (nb_db_exec(nb_net_env->db, ctx,
                   "INSERT INTO subnets (id, project_id, network_id, name, description, "
                   "ip_version, cidr, gateway_ip, enable_dhcp, ipv6_ra_mode, ipv6_address_mode, "
                   "subnetpool_id, allocation_pools, dns_nameservers, host_routes, created_at, "
                   "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   "sssssissbsssjjjss", id, project, net_id, name ? name : "", desc ? desc : "",
                   (long long)version, cidr, gw, dhcp ? json_is_true(dhcp) : true,
                   nb_json_str(body, "ipv6_ra_mode"), nb_json_str(body, "ipv6_address_mode"),
                   nb_json_str(body, "subnetpool_id"), pools, dns ? dns : none,
                   routes ? routes : none, now, now) < 0)
        return NULL;
    NB_INFO("nubo.network.subnets", ctx, NULL, "created subnet %s %s on network %s", id, cidr,
            net_id);
    _cleanup_json_ json_t *row = get(ctx, id);
    /* the network's ports get their EUI-64 address on it at once
     * (add_auto_addrs_on_network_ports) */
    if (row &&
        nb_ipam_auto_address(nb_json_str(row, "ipv6_ra_mode"),
                             nb_json_str(row, "ipv6_address_mode")) &&
        nb_net_ports_add_eui64(ctx, row) < 0)
        return NULL;
    return row ? view(row) : NULL;
}

json_t *nb_net_subnet_create(struct nb_ctx *ctx, json_t *body)
{
    if (nb_net_check_attrs(ctx, body, subnet_attrs, true) < 0)
        return NULL;
    return nb_net_create_in_tx(ctx, body, create_one);
}

static int create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *bulk = json_is_object(req->json) ? json_object_get(req->json, "subnets") : NULL;
    if (bulk && (!json_is_array(bulk) || !json_array_size(bulk)))
        return nb_error(ctx, 400, "HTTPBadRequest", "Resources required");
    json_t *one = bulk ? NULL : nb_net_body(ctx, req, "subnet");
    if (!bulk && !one)
        return -1;
    size_t n = bulk ? json_array_size(bulk) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *b = bulk ? json_array_get(bulk, i) : one;
        if (!json_is_object(b))
            return nb_error(ctx, 400, "HTTPBadRequest", "Object 'subnet' contains invalid data");
        if (nb_net_check_attrs(ctx, b, subnet_attrs, true) < 0)
            return -1;
    }
    _cleanup_json_ json_t *items = bulk ? json_incref(bulk) : json_pack("[O]", one);
    return nb_net_create_respond(ctx, req, resp, "subnet", "subnets", items, bulk != NULL,
                                 create_one);
}

static int list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_free_ char *sql = nb_strdup_printf("%s ORDER BY s.created_at, s.rowid", select_sql);
    _cleanup_json_ json_t *rows = nb_db_rows(nb_net_env->db, ctx, sql, "");
    if (!rows)
        return -1;
    json_t *views = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        if (visible(ctx, r))
            json_array_append_new(views, view(r));
    return nb_net_list_respond(ctx, req, resp, "subnets", views);
}

static int show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *row = get(ctx, nb_req_param(req, "subnet_id"));
    return row ? nb_net_show_respond(req, resp, 200, "subnet", view(row)) : -1;
}

static bool owned(const struct nb_ctx *ctx, const json_t *row)
{
    const char *p = nb_json_str(row, "project_id");
    return ctx->is_admin || (p && !strcmp(p, ctx->project_id));
}

/* Checks an update's new values against the subnet row. 0/-1. */
static int check_update(struct nb_ctx *ctx, const json_t *row, json_t *body)
{
    int version = (int)nb_json_int(row, "ip_version", 4);
    const char *cidr = nb_json_str(row, "cidr");
    json_t *gwv = json_object_get(body, "gateway_ip");
    const char *gw = gwv ? json_string_value(gwv) : nb_json_str(row, "gateway_ip");
    _cleanup_json_ json_t *old_pools = nb_json_parse(nb_json_str(row, "allocation_pools"));
    json_t *pools = json_object_get(body, "allocation_pools");
    if (check_gateway(ctx, gwv ? gw : NULL, cidr, version) < 0 ||
        check_dns(ctx, json_object_get(body, "dns_nameservers"), version) < 0 ||
        check_routes(ctx, json_object_get(body, "host_routes"), version) < 0)
        return -1;
    if (pools || gwv)
        return nb_ipam_check_pools(ctx, cidr, gw, pools ? pools : old_pools);
    return 0;
}

static int update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "subnet_id");
    json_t *body = nb_net_body(ctx, req, "subnet");
    if (!body || nb_net_check_attrs(ctx, body, subnet_attrs, false) < 0)
        return -1;
    _cleanup_json_ json_t *row = get(ctx, id);
    if (!row)
        return -1;
    if (!owned(ctx, row))
        return nb_net_deny(ctx, "update_subnet");
    if (check_update(ctx, row, body) < 0 || nb_db_begin(nb_net_env->db, ctx) < 0)
        return -1;
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach (body, key, v) {
        if (!strcmp(key, "project_id") || !strcmp(key, "tenant_id"))
            continue;
        _cleanup_free_ char *sql = nb_strdup_printf("UPDATE subnets SET %s = ? WHERE id = ?", key);
        if (json_is_boolean(v))
            rc = nb_db_exec(nb_net_env->db, ctx, sql, "bs", json_is_true(v), id);
        else if (json_is_array(v))
            rc = nb_db_exec(nb_net_env->db, ctx, sql, "js", v, id);
        else
            rc = nb_db_exec(nb_net_env->db, ctx, sql, "ss", json_string_value(v), id);
        if (rc < 0)
            break;
    }
    char now[32];
    if (rc >= 0)
        rc = nb_db_exec(nb_net_env->db, ctx,
                        "UPDATE subnets SET updated_at = ?, revision_number = revision_number + 1 "
                        "WHERE id = ?",
                        "ss", nb_net_now(now), id);
    if (rc < 0) {
        nb_db_rollback(nb_net_env->db);
        return -1;
    }
    if (nb_db_commit(nb_net_env->db, ctx) < 0)
        return -1;
    json_decref(row);
    row = get(ctx, id);
    return row ? nb_net_show_respond(req, resp, 200, "subnet", view(row)) : -1;
}

static int delete (struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "subnet_id");
    _cleanup_json_ json_t *row = get(ctx, id);
    if (!row)
        return -1;
    if (!owned(ctx, row))
        return nb_net_deny(ctx, "delete_subnet");
    if (nb_db_begin(nb_net_env->db, ctx) < 0)
        return -1;
    /* the EUI-64 addresses of an automatic subnet go with it; only router
     * interfaces hold it (_subnet_check_ip_allocations_internal_router_ports) */
    bool auto_addr = nb_ipam_auto_address(nb_json_str(row, "ipv6_ra_mode"),
                                          nb_json_str(row, "ipv6_address_mode"));
    long long used = nb_db_int(nb_net_env->db, ctx, -1,
                               "SELECT COUNT(*) FROM ipallocations a JOIN ports p ON p.id = "
                               "a.port_id WHERE a.subnet_id = ? AND p.device_owner NOT IN "
                               "('network:dhcp', 'network:distributed') AND (? = 0 OR "
                               "p.device_owner IN ('network:router_interface', "
                               "'network:ha_router_replicated_interface', "
                               "'network:router_interface_distributed'))",
                               "si", id, (long long)auto_addr);
    int rc = used < 0 ? -1 : 0;
    if (used > 0)
        rc = nb_error(ctx, 409, "SubnetInUse",
                      "Unable to complete operation on subnet %s: One or more ports have an IP "
                      "allocation from this subnet.",
                      id);
    if (rc == 0 && nb_db_exec(nb_net_env->db, ctx, "DELETE FROM subnets WHERE id = ?", "s", id) < 0)
        rc = -1;
    if (rc < 0) {
        nb_db_rollback(nb_net_env->db);
        return -1;
    }
    if (nb_db_commit(nb_net_env->db, ctx) < 0)
        return -1;
    NB_INFO("nubo.network.subnets", ctx, NULL, "deleted subnet %s", id);
    return nb_resp_empty(resp, 204);
}

int nb_net_subnets_init(void)
{
    nb_http_route("POST", "/networking/v2.0/subnets", create, 0);
    nb_http_route("GET", "/networking/v2.0/subnets", list, 0);
    nb_http_route("GET", "/networking/v2.0/subnets/{subnet_id}", show, 0);
    nb_http_route("PUT", "/networking/v2.0/subnets/{subnet_id}", update, 0);
    nb_http_route("DELETE", "/networking/v2.0/subnets/{subnet_id}", delete, 0);
    return 0;
}

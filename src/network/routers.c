/* routers.c - /networking/v2.0/routers (Neutron's router, extraroute and
 * ext-gw-mode extensions: neutron/db/l3_db.py, l3_gwmode_db.py,
 * extraroute_db.py).
 *
 * A router is a row in routers plus its ports, each a real port of the
 * network service listed in routerports: an interface (device_owner
 * network:router_interface) holds the gateway address of one subnet of a
 * tenant network; the external gateway (network:router_gateway, project "")
 * holds an address on a router:external network. Adding an interface by
 * subnet makes that port; by port adopts a free port of the caller. Removing
 * an interface deletes its port (as Neutron does, also a port the caller
 * made). A router with interfaces cannot be deleted (409 RouterInUse), and
 * its ports cannot be deleted through the port API (409, the
 * port_delete_check hook).
 *
 * Each change of ports and routerports happens in one transaction;
 * nb_net_port_create (ports.c) joins it. Static routes (extraroute) must
 * have a nexthop on a subnet of one of the router's ports, other than the
 * router's own addresses. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "db/db.h"
#include "network/floatingips.h"
#include "network/network_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RT_LOG "nubo.network.routers"
#define OWNER_INTF "network:router_interface"
#define OWNER_GW "network:router_gateway"
#define MAX_ROUTES 30 /* Neutron's [DEFAULT] max_routes */

static json_t *col(const json_t *row, const char *key)
{
    json_t *v = json_object_get(row, key);
    return v ? json_incref(v) : json_null();
}

/* The agents fetch their state again after a router change. */
static void notify(struct nb_ctx *ctx, const char *why)
{
    if (nb_net_notify_agents)
        nb_net_notify_agents(ctx, why);
}

static int bad_router(struct nb_ctx *ctx, const char *msg)
{
    return nb_error(ctx, 400, "BadRequest", "Bad router request: %s.", msg);
}

/* --- reading ---------------------------------------------------------------- */

/* The router id visible to ctx (its project's, or any for admins), or NULL
 * after 404 RouterNotFound. New reference. */
static json_t *router_load(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_db_row(nb_net_env->db, ctx, "SELECT * FROM routers WHERE id = ?", "s", id);
    if (!row && nb_ctx_failed(ctx))
        return NULL;
    const char *p = row ? nb_json_str(row, "project_id") : NULL;
    if (!row || !(ctx->is_admin || ctx->system || !strcmp(p, ctx->project_id))) {
        json_decref(row);
        nb_error(ctx, 404, "RouterNotFound", "Router %s could not be found", id);
        return NULL;
    }
    return row;
}

/* The subnet id as ctx may see it (own, on a shared or external network, or
 * admin), or NULL after 404 SubnetNotFound. New reference. */
static json_t *subnet_load(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_db_row(nb_net_env->db, ctx,
                            "SELECT s.*, n.shared AS net_shared, n.router_external AS net_external "
                            "FROM subnets s JOIN networks n ON n.id = s.network_id WHERE s.id = ?",
                            "s", id);
    if (!row && nb_ctx_failed(ctx))
        return NULL;
    const char *p = row ? nb_json_str(row, "project_id") : NULL;
    if (!row || !(ctx->is_admin || ctx->system || !strcmp(p, ctx->project_id) ||
                  nb_json_int(row, "net_shared", 0) || nb_json_int(row, "net_external", 0))) {
        json_decref(row);
        nb_error(ctx, 404, "SubnetNotFound", "Subnet %s could not be found.", id);
        return NULL;
    }
    return row;
}

/* The router's ports with their addresses: one row per (port, fixed IP)
 * {port_id, port_type, network_id, device_owner, ip_address, subnet_id,
 * cidr} (address columns null for a port without one). New ref or NULL. */
static json_t *router_port_ips(struct nb_ctx *ctx, const char *router_id)
{
    return nb_db_rows(nb_net_env->db, ctx,
                      "SELECT rp.port_id, rp.port_type, p.network_id, p.device_owner, "
                      "a.ip_address, a.subnet_id, s.cidr FROM routerports rp "
                      "JOIN ports p ON p.id = rp.port_id "
                      "LEFT JOIN ipallocations a ON a.port_id = p.id "
                      "LEFT JOIN subnets s ON s.id = a.subnet_id "
                      "WHERE rp.router_id = ? ORDER BY rp.rowid, s.ip_version, a.ip_address",
                      "s", router_id);
}

static json_t *gateway_info(struct nb_ctx *ctx, const json_t *row)
{
    const char *net = nb_json_str(row, "gw_network_id");
    if (!net)
        return json_null();
    json_t *ips = json_array();
    const char *port = nb_json_str(row, "gw_port_id");
    _cleanup_json_ json_t *rows =
        port ? nb_db_rows(nb_net_env->db, ctx,
                          "SELECT subnet_id, ip_address FROM ipallocations WHERE port_id = ? "
                          "ORDER BY ip_address",
                          "s", port)
             : NULL;
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(ips, json_pack("{s:s, s:s}", "subnet_id", nb_json_str(r, "subnet_id"),
                                             "ip_address", nb_json_str(r, "ip_address")));
    return json_pack("{s:s, s:b, s:o}", "network_id", net, "enable_snat",
                     (int)nb_json_int(row, "enable_snat", 1), "external_fixed_ips", ips);
}

static json_t *routes_of(struct nb_ctx *ctx, const char *id)
{
    _cleanup_json_ json_t *rows = nb_db_rows(
        nb_net_env->db, ctx,
        "SELECT destination, nexthop FROM routerroutes WHERE router_id = ? ORDER BY rowid", "s",
        id);
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(out,
                              json_pack("{s:s, s:s}", "destination", nb_json_str(r, "destination"),
                                        "nexthop", nb_json_str(r, "nexthop")));
    return out;
}

static json_t *router_view(struct nb_ctx *ctx, const json_t *row)
{
    json_t *v = json_object();
    json_object_set_new(v, "id", col(row, "id"));
    json_object_set_new(v, "name", col(row, "name"));
    json_object_set_new(v, "status", col(row, "status"));
    json_object_set_new(v, "admin_state_up", json_boolean(nb_json_int(row, "admin_state_up", 1)));
    json_object_set_new(v, "external_gateway_info", gateway_info(ctx, row));
    json_object_set_new(v, "routes", routes_of(ctx, nb_json_str(row, "id")));
    nb_net_std_attrs(v, row);
    return v;
}

static int respond_router(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, int status,
                          const char *id)
{
    _cleanup_json_ json_t *row = router_load(ctx, id);
    if (!row)
        return -1;
    return nb_net_show_respond(req, resp, status, "router", router_view(ctx, row));
}

/* --- checks -------------------------------------------------------------------- */

/* True when the CIDRs a and b overlap (one contains the other). */
static bool cidrs_overlap(const char *a, const char *b)
{
    struct nb_ip na, nb;
    int la, lb;
    if (nb_cidr_parse(a, &na, &la, false) < 0 || nb_cidr_parse(b, &nb, &lb, false) < 0 ||
        na.version != nb.version)
        return false;
    return la <= lb ? nb_ip_in_cidr(&nb, &na, la) : nb_ip_in_cidr(&na, &nb, lb);
}

/* _check_for_dup_router_subnets: the new subnet may be neither one the
 * router already has a port on, nor overlap one (for the gateway port: any
 * subnet of the external network). 0/-1. */
static int check_dup_subnets(struct nb_ctx *ctx, const char *router_id, const json_t *subnet)
{
    _cleanup_json_ json_t *ports = router_port_ips(ctx, router_id);
    if (!ports)
        return -1;
    const char *sid = nb_json_str(subnet, "id"), *cidr = nb_json_str(subnet, "cidr");
    size_t i;
    json_t *p;
    json_array_foreach (ports, i, p) {
        const char *psub = nb_json_str(p, "subnet_id");
        if (psub && !strcmp(psub, sid)) {
            char msg[160];
            snprintf(msg, sizeof(msg), "Router already has a port on subnet %s", sid);
            return bad_router(ctx, msg);
        }
        _cleanup_json_ json_t *others =
            !strcmp(nb_json_str(p, "port_type"), OWNER_GW)
                ? nb_net_subnet_rows(ctx, nb_json_str(p, "network_id"))
                : json_pack("[{s:s?, s:s?}]", "id", psub, "cidr", nb_json_str(p, "cidr"));
        size_t k;
        json_t *o;
        json_array_foreach (others, k, o) {
            const char *ocidr = nb_json_str(o, "cidr");
            if (ocidr && cidrs_overlap(cidr, ocidr)) {
                char msg[400];
                snprintf(msg, sizeof(msg),
                         "Cidr %s of subnet %s overlaps with cidr %s of subnet %s", cidr, sid,
                         ocidr, nb_json_str(o, "id"));
                return bad_router(ctx, msg);
            }
        }
    }
    return 0;
}

/* type:hostroutes: a list of {"destination": CIDR, "nexthop": IP} without
 * duplicates. 0/-1. */
static int check_routes_shape(struct nb_ctx *ctx, const json_t *routes)
{
    if (!json_is_array(routes))
        return nb_error(ctx, 400, "HTTPBadRequest",
                        "Invalid input for routes. Reason: Invalid data format for hostroute: "
                        "'%s'.",
                        "routes must be a list");
    size_t i;
    json_t *r;
    json_array_foreach (routes, i, r) {
        char buf[256];
        _cleanup_free_ char *repr = nb_pyrepr(r);
        if (!json_is_object(r) || json_object_size(r) != 2 || !nb_json_str(r, "destination") ||
            !nb_json_str(r, "nexthop"))
            return nb_error(ctx, 400, "HTTPBadRequest",
                            "Invalid input for routes. Reason: Validation of dictionary's keys "
                            "failed. Expected keys: {'destination', 'nexthop'} Provided keys: "
                            "%s.",
                            repr);
        const char *why = nb_net_validate_cidr(nb_json_str(r, "destination"), buf);
        if (!why)
            why = nb_net_validate_ip(nb_json_str(r, "nexthop"), buf);
        if (why)
            return nb_error(ctx, 400, "HTTPBadRequest", "Invalid input for routes. Reason: %s.",
                            why);
        for (size_t k = 0; k < i; k++)
            if (json_equal(json_array_get(routes, k), r))
                return nb_error(ctx, 400, "HTTPBadRequest",
                                "Invalid input for routes. Reason: Duplicate hostroute '%s'.",
                                repr);
    }
    if (json_array_size(routes) > MAX_ROUTES)
        return nb_error(ctx, 400, "RoutesExhausted",
                        "Unable to complete operation for the router. The number of routes "
                        "exceeds the maximum %d.",
                        MAX_ROUTES);
    return 0;
}

/* _validate_routes_nexthop: each nexthop on a subnet of the router's ports
 * and not one of the router's addresses. 0/-1. */
static int check_routes_nexthop(struct nb_ctx *ctx, const char *router_id, const json_t *routes)
{
    _cleanup_json_ json_t *ports = router_port_ips(ctx, router_id);
    if (!ports)
        return -1;
    size_t i;
    json_t *r;
    json_array_foreach (routes, i, r) {
        struct nb_ip hop;
        nb_ip_parse(nb_json_str(r, "nexthop"), &hop);
        char canon[64];
        nb_ip_format(&hop, canon);
        bool connected = false, used = false;
        size_t k;
        json_t *p;
        json_array_foreach (ports, k, p) {
            struct nb_ip net, own;
            int len;
            const char *cidr = nb_json_str(p, "cidr"), *ip = nb_json_str(p, "ip_address");
            if (cidr && nb_cidr_parse(cidr, &net, &len, false) == 0 && net.version == hop.version &&
                nb_ip_in_cidr(&hop, &net, len))
                connected = true;
            if (ip && nb_ip_parse(ip, &own) == 0 && nb_ip_cmp(&own, &hop) == 0)
                used = true;
        }
        if (!connected || used) {
            _cleanup_free_ char *repr = nb_pyrepr(routes);
            return nb_error(ctx, 400, "InvalidRoutes",
                            "Invalid input for operation: Invalid format for routes: %s, %s.", repr,
                            !connected ? "the nexthop is not connected with router"
                                       : "the nexthop is used by router");
        }
    }
    return 0;
}

/* 409 RouterInterfaceInUseByRoute when a route's nexthop lies in cidr. */
static int check_not_used_by_route(struct nb_ctx *ctx, const char *router_id, const char *subnet_id,
                                   const char *cidr)
{
    _cleanup_json_ json_t *routes = routes_of(ctx, router_id);
    struct nb_ip net;
    int len;
    if (nb_cidr_parse(cidr, &net, &len, false) < 0)
        return 0;
    size_t i;
    json_t *r;
    json_array_foreach (routes, i, r) {
        struct nb_ip hop;
        if (nb_ip_parse(nb_json_str(r, "nexthop"), &hop) == 0 && hop.version == net.version &&
            nb_ip_in_cidr(&hop, &net, len))
            return nb_error(ctx, 409, "RouterInterfaceInUseByRoute",
                            "Router interface for subnet %s on router %s cannot be deleted, as "
                            "it is required by one or more routes.",
                            subnet_id, router_id);
    }
    return 0;
}

/* --- the external gateway --------------------------------------------------------- */

/* external_gateway_info of a create/update: {} or null unsets; else
 * network_id (a visible router:external network: 404 NetworkNotFound, 400
 * not external), enable_snat (admins), external_fixed_ips (admins).
 * *net_id is NULL to unset. 0/-1. */
static int read_gateway(struct nb_ctx *ctx, const json_t *info, const char **net_id)
{
    *net_id = NULL;
    if (!info || json_is_null(info) || (json_is_object(info) && !json_object_size(info)))
        return 0;
    _cleanup_free_ char *repr = nb_pyrepr(info);
    if (!json_is_object(info))
        return nb_error(ctx, 400, "HTTPBadRequest",
                        "Invalid input for external_gateway_info. Reason: '%s' is not a "
                        "dictionary.",
                        repr);
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)info, key, v) {
        if (strcmp(key, "network_id") && strcmp(key, "enable_snat") &&
            strcmp(key, "external_fixed_ips"))
            return nb_error(ctx, 400, "HTTPBadRequest",
                            "Invalid input for external_gateway_info. Reason: Validation of "
                            "dictionary's keys failed. Expected keys: {'network_id'} Provided "
                            "keys: %s.",
                            repr);
    }
    char buf[256];
    const char *id = nb_json_str(info, "network_id");
    const char *why = nb_net_validate_uuid(id, buf);
    if (why)
        return nb_error(ctx, 400, "HTTPBadRequest",
                        "Invalid input for external_gateway_info. Reason: %s.", why);
    bool snat;
    json_t *snat_v = json_object_get(info, "enable_snat");
    if (snat_v && nb_net_parse_bool(snat_v, &snat) < 0)
        return nb_error(ctx, 400, "HTTPBadRequest",
                        "Invalid input for external_gateway_info. Reason: '%s' is not a valid "
                        "boolean value.",
                        repr);
    static const char *const admin_keys[] = {"enable_snat", "external_fixed_ips"};
    for (int i = 0; i < 2; i++)
        if (json_object_get(info, admin_keys[i]) && !ctx->is_admin && !ctx->system)
            return nb_error(ctx, 403, "PolicyNotAuthorized",
                            "(rule:create_router and rule:create_router:external_gateway_info:%s)"
                            " is disallowed by policy",
                            admin_keys[i]);
    _cleanup_json_ json_t *net = nb_net_network_get(ctx, id);
    if (!net)
        return -1;
    if (!nb_json_int(net, "router_external", 0)) {
        char msg[128];
        snprintf(msg, sizeof(msg), "Network %s is not an external network", id);
        return bad_router(ctx, msg);
    }
    *net_id = id;
    return 0;
}

/* Removes the router's gateway: its port and routerports row and the
 * router's gateway columns (inside a transaction). 0/-1. */
static int drop_gateway(struct nb_ctx *ctx, const json_t *router)
{
    const char *port = nb_json_str(router, "gw_port_id");
    const char *id = nb_json_str(router, "id");
    if (port && (nb_db_exec(nb_net_env->db, ctx, "DELETE FROM routerports WHERE port_id = ?", "s",
                            port) < 0 ||
                 nb_db_exec(nb_net_env->db, ctx, "DELETE FROM ports WHERE id = ?", "s", port) < 0))
        return -1;
    return nb_db_exec(nb_net_env->db, ctx,
                      "UPDATE routers SET gw_network_id = NULL, gw_port_id = NULL, "
                      "enable_snat = 1 WHERE id = ?",
                      "s", id) < 0
               ? -1
               : 0;
}

static bool snat_of(const json_t *info)
{
    bool on = true;
    json_t *snat = json_object_get(info, "enable_snat");
    if (snat)
        nb_net_parse_bool(snat, &on);
    return on;
}

/* Records port_id as the router's gateway on net_id. */
static int record_gateway(struct nb_ctx *ctx, const char *router_id, const char *net_id,
                          const char *port_id, bool snat)
{
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (nb_db_int(db, ctx, 0, "SELECT COUNT(*) FROM routers WHERE id = ?", "s", router_id) != 1)
        nb_error(ctx, 404, "RouterNotFound", "Router %s could not be found", router_id);
    if (nb_ctx_failed(ctx) ||
        nb_db_exec(db, ctx,
                   "INSERT INTO routerports (router_id, port_id, port_type) VALUES (?, ?, ?)",
                   "sss", router_id, port_id, OWNER_GW) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE routers SET gw_network_id = ?, gw_port_id = ?, enable_snat = ? "
                   "WHERE id = ?",
                   "ssbs", net_id, port_id, snat, router_id) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    return nb_db_commit(db, ctx);
}

/* Makes the gateway port on net_id and records it (outside any
 * transaction: the port is made in its own). The port belongs to no
 * project, as in Neutron; it is removed again when recording fails. 0/-1. */
static int make_gateway(struct nb_ctx *ctx, const char *router_id, const char *net_id,
                        const json_t *info)
{
    struct nb_ctx sys;
    nb_ctx_init_system(&sys, ctx->request_id);
    _cleanup_json_ json_t *body =
        json_pack("{s:s, s:s, s:s, s:s, s:b, s:s, s:[]}", "network_id", net_id, "device_id",
                  router_id, "device_owner", OWNER_GW, "tenant_id", "", "admin_state_up", 1, "name",
                  "", "security_groups");
    json_t *fixed = json_object_get(info, "external_fixed_ips");
    if (fixed)
        json_object_set(body, "fixed_ips", fixed);
    _cleanup_json_ json_t *port = nb_net_port_create(&sys, body);
    if (!port)
        return nb_error(ctx, nb_ctx_status(&sys), nb_ctx_error_name(&sys), "%s",
                        nb_ctx_message(&sys));
    const char *port_id = nb_json_str(port, "id");
    if (record_gateway(ctx, router_id, net_id, port_id, snat_of(info)) < 0) {
        nb_net_port_delete(&sys, port_id);
        return -1;
    }
    NB_INFO(RT_LOG, ctx, NULL, "router %s: gateway port %s on external network %s", router_id,
            port_id, net_id);
    return 0;
}

/* _update_router_gw_info (outside any transaction): the same network only
 * changes enable_snat; another replaces the port; none removes it. */
static int set_gateway(struct nb_ctx *ctx, const json_t *router, const json_t *info,
                       const char *net_id)
{
    struct nb_db *db = nb_net_env->db;
    const char *cur = nb_json_str(router, "gw_network_id");
    const char *id = nb_json_str(router, "id");
    if (net_id && cur && !strcmp(cur, net_id) && !json_object_get(info, "external_fixed_ips"))
        return nb_db_exec(db, ctx, "UPDATE routers SET enable_snat = ? WHERE id = ?", "bs",
                          snat_of(info), id) < 0
                   ? -1
                   : 0;
    if (cur) {
        if (nb_net_fip_check_gateway(ctx, id, cur) < 0)
            return -1;
        if (nb_db_begin(db, ctx) < 0)
            return -1;
        if (drop_gateway(ctx, router) < 0) {
            nb_db_rollback(db);
            return -1;
        }
        if (nb_db_commit(db, ctx) < 0)
            return -1;
    }
    return net_id ? make_gateway(ctx, id, net_id, info) : 0;
}

/* --- create, list, show, update, delete ------------------------------------------- */

static const struct nb_net_attr router_attrs[] = {
    {"name", NB_A_STR, true, true, false, false, 255},
    {"description", NB_A_STR, true, true, false, false, 255},
    {"admin_state_up", NB_A_BOOL, true, true, false, false, 0},
    {"external_gateway_info", NB_A_ANY, true, true, false, true, 0},
    {"routes", NB_A_ANY, false, true, false, true, 0},
    {NULL, 0, false, false, false, false, 0},
};

static int insert_router(struct nb_ctx *ctx, const char *id, const char *project,
                         const json_t *body)
{
    char now[32];
    nb_net_now(now);
    const char *name = nb_json_str(body, "name"), *desc = nb_json_str(body, "description");
    json_t *up = json_object_get(body, "admin_state_up");
    return nb_db_exec(nb_net_env->db, ctx,
                      "INSERT INTO routers (id, project_id, name, description, admin_state_up, "
                      "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                      "ssssbss", id, project, name ? name : "", desc ? desc : "",
                      !up || json_is_true(up), now, now);
}

static int router_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = nb_net_body(ctx, req, "router");
    char project[NB_ID_LEN];
    const char *gw_net;
    json_t *info = body ? json_object_get(body, "external_gateway_info") : NULL;
    if (!body || nb_net_check_attrs(ctx, body, router_attrs, true) < 0 ||
        nb_net_owner(ctx, body, project) < 0 || nb_net_quota_check(ctx, project, "router") < 0 ||
        read_gateway(ctx, info, &gw_net) < 0)
        return -1;
    char id[NB_UUID_LEN];
    nb_uuid(id);
    if (insert_router(ctx, id, project, body) < 0)
        return -1;
    if (gw_net && make_gateway(ctx, id, gw_net, info) < 0) {
        struct nb_ctx sys;
        nb_ctx_init_system(&sys, ctx->request_id);
        nb_db_exec(nb_net_env->db, &sys, "DELETE FROM routers WHERE id = ?", "s", id);
        return -1;
    }
    NB_INFO(RT_LOG, ctx, NULL, "created router %s", id);
    notify(ctx, "router created");
    return respond_router(ctx, req, resp, 201, id);
}

static int router_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    bool all = ctx->is_admin || ctx->system;
    _cleanup_json_ json_t *rows =
        all ? nb_db_rows(nb_net_env->db, ctx, "SELECT * FROM routers ORDER BY rowid", "")
            : nb_db_rows(nb_net_env->db, ctx,
                         "SELECT * FROM routers WHERE project_id = ? ORDER BY rowid", "s",
                         ctx->project_id);
    if (!rows)
        return -1;
    json_t *views = json_array();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row)
        json_array_append_new(views, router_view(ctx, row));
    return nb_net_list_respond(ctx, req, resp, "routers", views);
}

static int router_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return respond_router(ctx, req, resp, 200, nb_req_param(req, "router_id"));
}

/* Replaces the router's routes (extraroute; null means none). 0/-1. */
static int set_routes(struct nb_ctx *ctx, const char *id, const json_t *routes)
{
    if (nb_db_exec(nb_net_env->db, ctx, "DELETE FROM routerroutes WHERE router_id = ?", "s", id) <
        0)
        return -1;
    size_t i;
    json_t *r;
    json_array_foreach (routes, i, r) {
        struct nb_ip hop;
        char canon[64];
        nb_ip_parse(nb_json_str(r, "nexthop"), &hop);
        if (nb_db_exec(nb_net_env->db, ctx,
                       "INSERT INTO routerroutes (router_id, destination, nexthop) "
                       "VALUES (?, ?, ?)",
                       "sss", id, nb_json_str(r, "destination"), nb_ip_format(&hop, canon)) < 0)
            return -1;
    }
    return 0;
}

static int update_fields(struct nb_ctx *ctx, const char *id, const json_t *body)
{
    char now[32];
    nb_net_now(now);
    json_t *up = json_object_get(body, "admin_state_up");
    long long upv = up ? json_is_true(up) : -1;
    return nb_db_exec(nb_net_env->db, ctx,
                      "UPDATE routers SET name = COALESCE(?, name), "
                      "description = COALESCE(?, description), "
                      "admin_state_up = CASE WHEN ? < 0 THEN admin_state_up ELSE ? END, "
                      "updated_at = ?, revision_number = revision_number + 1 WHERE id = ?",
                      "ssiiss", nb_json_str(body, "name"), nb_json_str(body, "description"), upv,
                      upv, now, id) < 0
               ? -1
               : 0;
}

static int router_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "router_id");
    json_t *body = nb_net_body(ctx, req, "router");
    if (!body || nb_net_check_attrs(ctx, body, router_attrs, false) < 0)
        return -1;
    _cleanup_json_ json_t *routes = NULL;
    json_t *rv = json_object_get(body, "routes");
    if (rv)
        routes = json_is_null(rv) ? json_array() : json_incref(rv);
    json_t *info = json_object_get(body, "external_gateway_info");
    const char *gw_net = NULL;
    if ((routes && check_routes_shape(ctx, routes) < 0) ||
        (info && read_gateway(ctx, info, &gw_net) < 0))
        return -1;
    _cleanup_json_ json_t *row = router_load(ctx, id);
    if (!row || (info && set_gateway(ctx, row, info, gw_net) < 0))
        return -1;
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if ((routes &&
         (check_routes_nexthop(ctx, id, routes) < 0 || set_routes(ctx, id, routes) < 0)) ||
        update_fields(ctx, id, body) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    notify(ctx, "router updated");
    return respond_router(ctx, req, resp, 200, id);
}

static int router_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "router_id");
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    _cleanup_json_ json_t *row = router_load(ctx, id);
    _cleanup_json_ json_t *intf =
        row ? nb_db_rows(db, ctx,
                         "SELECT port_id FROM routerports WHERE router_id = ? AND port_type = ? "
                         "ORDER BY rowid",
                         "ss", id, OWNER_INTF)
            : NULL;
    if (intf && json_array_size(intf)) {
        char list[1024] = "";
        size_t i;
        json_t *p;
        json_array_foreach (intf, i, p) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof(list) - l, "%s%s", l ? ", " : "", nb_json_str(p, "port_id"));
        }
        nb_error(ctx, 409, "RouterInUse", "Router %s has ports still attached: %s", id, list);
    }
    if (!nb_ctx_failed(ctx) && row && nb_json_str(row, "gw_network_id"))
        nb_net_fip_check_gateway(ctx, id, nb_json_str(row, "gw_network_id"));
    if (nb_ctx_failed(ctx) || drop_gateway(ctx, row) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM routers WHERE id = ?", "s", id) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(RT_LOG, ctx, NULL, "deleted router %s", id);
    notify(ctx, "router deleted");
    return nb_resp_empty(resp, 204);
}

/* --- interfaces -------------------------------------------------------------------- */

/* _validate_interface_info: port_id and/or subnet_id, each a UUID; both
 * only for removal. 0/-1. */
static int read_interface(struct nb_ctx *ctx, struct nb_req *req, bool removal,
                          const char **port_id, const char **subnet_id)
{
    json_t *body = nb_req_json_object(ctx, req);
    if (!body)
        return -1;
    json_t *pv = json_object_get(body, "port_id"), *sv = json_object_get(body, "subnet_id");
    if (!pv && !sv)
        return bad_router(ctx, "Either subnet_id or port_id must be specified");
    json_t *vals[2] = {pv, sv};
    for (int i = 0; i < 2; i++) {
        char buf[256];
        const char *why = vals[i] ? nb_net_validate_uuid(json_string_value(vals[i]), buf) : NULL;
        if (why)
            return bad_router(ctx, why);
    }
    if (!removal && pv && sv)
        return bad_router(ctx, "Cannot specify both subnet-id and port-id");
    *port_id = json_string_value(pv);
    *subnet_id = json_string_value(sv);
    return 0;
}

static int interface_respond(struct nb_resp *resp, const json_t *router, const char *port_id,
                             const char *network_id, json_t *subnet_ids)
{
    const char *p = nb_json_str(router, "project_id");
    json_t *last = json_array_get(subnet_ids, json_array_size(subnet_ids) - 1);
    json_t *v =
        json_pack("{s:s, s:s, s:s, s:s, s:s?, s:O, s:o}", "id", nb_json_str(router, "id"),
                  "tenant_id", p, "project_id", p, "port_id", port_id, "network_id", network_id,
                  "subnet_id", last ? last : json_null(), "subnet_ids", subnet_ids);
    return nb_resp_json(resp, 200, v);
}

/* Adds an interface on subnet_id: a new port holding the subnet's gateway
 * address (made in its own transaction). Writes the port's view to *port. */
static int add_by_subnet(struct nb_ctx *ctx, const json_t *router, const char *subnet_id,
                         json_t **port)
{
    _cleanup_json_ json_t *subnet = subnet_load(ctx, subnet_id);
    if (!subnet)
        return -1;
    const char *gw = nb_json_str(subnet, "gateway_ip");
    if (!gw)
        return bad_router(ctx, "Subnet for router interface must have a gateway IP");
    if (!ctx->is_admin && strcmp(nb_json_str(subnet, "project_id"), ctx->project_id)) {
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "Cannot add interface to router because subnet %s is not owned by project "
                 "making the request",
                 subnet_id);
        return bad_router(ctx, msg);
    }
    if (check_dup_subnets(ctx, nb_json_str(router, "id"), subnet) < 0)
        return -1;
    _cleanup_json_ json_t *body = json_pack(
        "{s:s, s:s, s:[{s:s, s:s}], s:b, s:s, s:s, s:s, s:[]}", "tenant_id",
        nb_json_str(router, "project_id"), "network_id", nb_json_str(subnet, "network_id"),
        "fixed_ips", "ip_address", gw, "subnet_id", subnet_id, "admin_state_up", 1, "device_id",
        nb_json_str(router, "id"), "device_owner", OWNER_INTF, "name", "", "security_groups");
    *port = nb_net_port_create(ctx, body);
    return *port ? 0 : -1;
}

/* _check_router_port + _validate_router_port_info for a port the caller
 * passes: unattached, with a fixed IP, its subnets new to the router, at
 * most one IPv4 subnet. Then it becomes the router's (inside a
 * transaction). */
static int add_by_port(struct nb_ctx *ctx, const json_t *router, const char *port_id, json_t **port)
{
    _cleanup_json_ json_t *row =
        nb_db_row(nb_net_env->db, ctx,
                  "SELECT p.*, n.project_id AS net_project FROM ports p JOIN networks n ON "
                  "n.id = p.network_id WHERE p.id = ?",
                  "s", port_id);
    const char *pp = row ? nb_json_str(row, "project_id") : NULL;
    if (!row || !(ctx->is_admin || !strcmp(pp, ctx->project_id)))
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, "PortNotFound", "Port %s could not be found.", port_id);
    if (*nb_json_str(row, "device_id"))
        return nb_error(ctx, 409, "PortInUse",
                        "Unable to complete operation on port %s for network %s. Port already "
                        "has an attached device %s.",
                        port_id, nb_json_str(row, "network_id"), nb_json_str(row, "device_id"));
    _cleanup_json_ json_t *subnets = nb_db_rows(
        nb_net_env->db, ctx,
        "SELECT s.* FROM ipallocations a JOIN subnets s ON s.id = a.subnet_id WHERE a.port_id = ?",
        "s", port_id);
    if (!subnets)
        return -1;
    if (!json_array_size(subnets))
        return bad_router(ctx, "Router port must have at least one fixed IP");
    int v4 = 0;
    size_t i;
    json_t *s;
    json_array_foreach (subnets, i, s) {
        if (check_dup_subnets(ctx, nb_json_str(router, "id"), s) < 0)
            return -1;
        v4 += nb_json_int(s, "ip_version", 4) == 4;
    }
    if (v4 > 1)
        return bad_router(ctx, "Cannot have multiple IPv4 subnets on router port");
    if (nb_net_port_set_device(ctx, port_id, nb_json_str(router, "id"), OWNER_INTF) < 0)
        return -1;
    json_decref(row);
    row = nb_db_row(nb_net_env->db, ctx, "SELECT * FROM ports WHERE id = ?", "s", port_id);
    *port = row ? nb_net_port_view(ctx, row) : NULL;
    return *port ? 0 : -1;
}

static json_t *subnet_ids_of(const json_t *port)
{
    json_t *ids = json_array();
    size_t i;
    json_t *f;
    json_array_foreach (json_object_get(port, "fixed_ips"), i, f)
        json_array_append_new(ids, json_string(nb_json_str(f, "subnet_id")));
    return ids;
}

/* Records port_id as an interface of router_id (inside a transaction). */
static int record_interface(struct nb_ctx *ctx, const char *router_id, const char *port_id)
{
    struct nb_db *db = nb_net_env->db;
    if (nb_db_int(db, ctx, 0, "SELECT COUNT(*) FROM routers WHERE id = ?", "s", router_id) != 1)
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 404, "RouterNotFound",
                                             "Router %s could not be found", router_id);
    return nb_db_exec(db, ctx,
                      "INSERT INTO routerports (router_id, port_id, port_type) VALUES (?, ?, ?)",
                      "sss", router_id, port_id, OWNER_INTF) < 0
               ? -1
               : 0;
}

/* add_router_interface by port: the port's checks, its new owner and the
 * routerports row in one transaction. */
static json_t *attach_port(struct nb_ctx *ctx, const json_t *router, const char *port_id)
{
    struct nb_db *db = nb_net_env->db;
    json_t *port = NULL;
    if (nb_db_begin(db, ctx) < 0)
        return NULL;
    if (add_by_port(ctx, router, port_id, &port) < 0 ||
        record_interface(ctx, nb_json_str(router, "id"), port_id) < 0) {
        nb_db_rollback(db);
        json_decref(port);
        return NULL;
    }
    if (nb_db_commit(db, ctx) < 0) {
        json_decref(port);
        return NULL;
    }
    return port;
}

/* add_router_interface by subnet: the port is made in its own transaction
 * (ports.c), then recorded; it is deleted again if recording fails. */
static json_t *attach_subnet(struct nb_ctx *ctx, const json_t *router, const char *subnet_id)
{
    json_t *port = NULL;
    if (add_by_subnet(ctx, router, subnet_id, &port) < 0)
        return NULL;
    struct nb_db *db = nb_net_env->db;
    const char *port_id = nb_json_str(port, "id");
    int rc = nb_db_begin(db, ctx);
    if (rc == 0 && record_interface(ctx, nb_json_str(router, "id"), port_id) < 0) {
        nb_db_rollback(db);
        rc = -1;
    } else if (rc == 0) {
        rc = nb_db_commit(db, ctx);
    }
    if (rc < 0) {
        struct nb_ctx sys;
        nb_ctx_init_system(&sys, ctx->request_id);
        nb_net_port_delete(&sys, port_id);
        json_decref(port);
        return NULL;
    }
    return port;
}

static int add_interface(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "router_id"), *port_id, *subnet_id;
    if (read_interface(ctx, req, false, &port_id, &subnet_id) < 0)
        return -1;
    _cleanup_json_ json_t *router = router_load(ctx, id);
    if (!router)
        return -1;
    _cleanup_json_ json_t *port =
        port_id ? attach_port(ctx, router, port_id) : attach_subnet(ctx, router, subnet_id);
    if (!port)
        return -1;
    NB_INFO(RT_LOG, ctx, NULL, "router %s: added interface port %s", id, nb_json_str(port, "id"));
    notify(ctx, "router interface added");
    return interface_respond(resp, router, nb_json_str(port, "id"), nb_json_str(port, "network_id"),
                             subnet_ids_of(port));
}

/* The router's interface port to remove: by port_id (404
 * RouterInterfaceNotFound; subnet_id, when also given, must be on it) or by
 * the subnet it has an address on (404 RouterInterfaceNotFoundForSubnet).
 * Fills port_out (port id) and a new list of its subnets {id, cidr}. */
static int find_interface(struct nb_ctx *ctx, const char *router_id, const char *port_id,
                          const char *subnet_id, char *port_out, json_t **subnets)
{
    _cleanup_json_ json_t *ports = router_port_ips(ctx, router_id);
    if (!ports)
        return -1;
    const char *found = NULL;
    size_t i;
    json_t *p;
    json_array_foreach (ports, i, p) {
        if (strcmp(nb_json_str(p, "port_type"), OWNER_INTF))
            continue;
        const char *pid = nb_json_str(p, "port_id"), *sid = nb_json_str(p, "subnet_id");
        if (port_id ? !strcmp(pid, port_id) : (sid && !strcmp(sid, subnet_id)))
            found = pid;
    }
    if (!found && port_id)
        return nb_error(ctx, 404, "RouterInterfaceNotFound",
                        "Router %s does not have an interface with id %s", router_id, port_id);
    if (!found)
        return nb_error(ctx, 404, "RouterInterfaceNotFoundForSubnet",
                        "Router %s has no interface on subnet %s", router_id, subnet_id);
    nb_strlcpy(port_out, found, NB_UUID_LEN);
    *subnets = json_array();
    bool match = !subnet_id;
    json_array_foreach (ports, i, p) {
        const char *sid = nb_json_str(p, "subnet_id");
        if (strcmp(nb_json_str(p, "port_id"), found) || !sid)
            continue;
        match = match || !strcmp(sid, subnet_id);
        json_array_append_new(*subnets,
                              json_pack("{s:s, s:s}", "id", sid, "cidr", nb_json_str(p, "cidr")));
    }
    if (!match) {
        json_decref(*subnets);
        *subnets = NULL;
        return nb_error(ctx, 400, "SubnetMismatchForPort",
                        "Subnet on port %s does not match the requested subnet %s.", found,
                        subnet_id);
    }
    return 0;
}

static int remove_interface(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "router_id"), *port_id, *subnet_id;
    if (read_interface(ctx, req, true, &port_id, &subnet_id) < 0)
        return -1;
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    _cleanup_json_ json_t *router = router_load(ctx, id);
    _cleanup_json_ json_t *subnet = NULL, *subnets = NULL, *port = NULL;
    char found[NB_UUID_LEN];
    if (router && !port_id)
        subnet = subnet_load(ctx, subnet_id);
    if (!router || (!port_id && !subnet) ||
        find_interface(ctx, id, port_id, subnet_id, found, &subnets) < 0)
        goto fail;
    size_t i;
    json_t *s;
    json_array_foreach (subnets, i, s)
        if (check_not_used_by_route(ctx, id, nb_json_str(s, "id"), nb_json_str(s, "cidr")) < 0 ||
            nb_net_fip_check_interface(ctx, id, nb_json_str(s, "id"), nb_json_str(s, "cidr")) < 0)
            goto fail;
    port = nb_db_row(db, ctx, "SELECT network_id FROM ports WHERE id = ?", "s", found);
    if (!port || nb_db_exec(db, ctx, "DELETE FROM routerports WHERE port_id = ?", "s", found) < 0 ||
        nb_db_exec(db, ctx, "DELETE FROM ports WHERE id = ?", "s", found) < 0)
        goto fail;
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(RT_LOG, ctx, NULL, "router %s: removed interface port %s", id, found);
    notify(ctx, "router interface removed");
    json_t *ids = json_array();
    json_array_foreach (subnets, i, s)
        json_array_append_new(ids, json_string(nb_json_str(s, "id")));
    return interface_respond(resp, router, found, nb_json_str(port, "network_id"), ids);
fail:
    nb_db_rollback(db);
    return -1;
}

/* nb_net_hooks.port_delete_check: a router's port goes with its interface
 * or gateway, not through DELETE /ports (Neutron's prevent_l3_port_deletion). */
static int port_delete_check(struct nb_ctx *ctx, const json_t *port)
{
    const char *id = nb_json_str(port, "id");
    _cleanup_json_ json_t *rp = nb_db_row(
        nb_net_env->db, ctx, "SELECT port_type FROM routerports WHERE port_id = ?", "s", id);
    if (!rp)
        return nb_ctx_failed(ctx) ? -1 : 0;
    return nb_error(ctx, 409, "ServicePortInUse",
                    "Port %s cannot be deleted directly via the port API: has device owner %s.", id,
                    nb_json_str(rp, "port_type"));
}

int nb_net_routers_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/networking/v2.0/routers", router_list, 0);
    nb_http_route("POST", "/networking/v2.0/routers", router_create, 0);
    nb_http_route("GET", "/networking/v2.0/routers/{router_id}", router_show, 0);
    nb_http_route("PUT", "/networking/v2.0/routers/{router_id}", router_update, 0);
    nb_http_route("DELETE", "/networking/v2.0/routers/{router_id}", router_delete, 0);
    nb_http_route("PUT", "/networking/v2.0/routers/{router_id}/add_router_interface", add_interface,
                  0);
    nb_http_route("PUT", "/networking/v2.0/routers/{router_id}/remove_router_interface",
                  remove_interface, 0);
    nb_net_extension("router", "Neutron L3 Router",
                     "Router abstraction for basic L3 forwarding between L2 Neutron networks and "
                     "access to external networks via a NAT gateway.");
    nb_net_extension("extraroute", "Neutron Extra Route",
                     "Extra routes configuration for L3 router");
    nb_net_extension("ext-gw-mode", "Neutron L3 Configurable external gateway mode",
                     "Extension of the router abstraction for specifying whether SNAT should "
                     "occur on the external gateway");
    nb_net_hooks.port_delete_check = port_delete_check;
    return nb_net_floatingips_init();
}

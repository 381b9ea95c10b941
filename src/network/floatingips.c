/* floatingips.c - /networking/v2.0/floatingips (Neutron's floating IPs, the
 * "router" extension's second resource, and "fip-port-details"):
 * neutron/db/l3_db.py's _create_floatingip, _update_fip_assoc,
 * get_router_for_floatingip, _delete_floatingip.
 *
 * A floating IP is a row in floatingips plus its own port on the external
 * network (device_owner network:floatingip, project "", device_id the
 * floating IP's id) that holds the address. Associating it with a port
 * (port_id, and fixed_ip_address when the port has several IPv4
 * addresses) finds the router that has an interface on the port's subnet
 * and a gateway on the floating network (router_id); none: 404
 * ExternalGatewayForFloatingIPNotFound. The status is DOWN until the L3
 * agent hosting the router reports it ACTIVE (update_floatingip_statuses).
 *
 * Every write happens in one transaction (the port's creation joins it as
 * a savepoint). After a change the instance whose port gained or lost the
 * address has its network info refreshed (Nova's network-changed event)
 * and the agents are told. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "network/floatingips.h"
#include "network/network.h"
#include "network/network_int.h"

#include <stdio.h>
#include <string.h>

#define FIP_LOG "nubo.network.floatingips"
#define OWNER_FIP "network:floatingip"
#define OWNER_GW "network:router_gateway"
#define OWNER_DHCP "network:dhcp"

static const struct nb_net_attr fip_attrs[] = {
    {"floating_network_id", NB_A_UUID, true, false, true, false, 0},
    {"floating_ip_address", NB_A_IP, true, false, false, true, 0},
    {"subnet_id", NB_A_UUID, true, false, false, true, 0},
    {"port_id", NB_A_UUID, true, true, false, true, 0},
    {"fixed_ip_address", NB_A_IP, true, true, false, true, 0},
    {"description", NB_A_STR, true, true, false, false, 255},
    {NULL, 0, false, false, false, false, 0},
};

static int bad_fip(struct nb_ctx *ctx, const char *fmt, const char *a, const char *b)
{
    char msg[512];
    snprintf(msg, sizeof(msg), fmt, a, b);
    return nb_error(ctx, 400, "BadRequest", "Bad floatingip request: %s.", msg);
}

static json_t *col(const json_t *row, const char *key)
{
    json_t *v = json_object_get(row, key);
    return v ? json_incref(v) : json_null();
}

/* --- views ------------------------------------------------------------------ */

/* fip-port-details: a few attributes of the associated port, or null. */
static json_t *port_details(struct nb_ctx *ctx, const char *port_id)
{
    if (!port_id)
        return json_null();
    _cleanup_json_ json_t *p =
        nb_db_row(nb_net_env->db, ctx, "SELECT * FROM ports WHERE id = ?", "s", port_id);
    if (!p)
        return json_null();
    return json_pack("{s:s, s:s, s:s, s:b, s:s, s:s, s:s}", "name", nb_json_str(p, "name"),
                     "network_id", nb_json_str(p, "network_id"), "mac_address",
                     nb_json_str(p, "mac_address"), "admin_state_up",
                     (int)nb_json_int(p, "admin_state_up", 1), "status", nb_json_str(p, "status"),
                     "device_id", nb_json_str(p, "device_id"), "device_owner",
                     nb_json_str(p, "device_owner"));
}

static json_t *fip_view(struct nb_ctx *ctx, const json_t *row)
{
    json_t *v = json_object();
    json_object_set_new(v, "id", col(row, "id"));
    json_object_set_new(v, "floating_ip_address", col(row, "floating_ip_address"));
    json_object_set_new(v, "floating_network_id", col(row, "floating_network_id"));
    json_object_set_new(v, "router_id", col(row, "router_id"));
    json_object_set_new(v, "port_id", col(row, "fixed_port_id"));
    json_object_set_new(v, "fixed_ip_address", col(row, "fixed_ip_address"));
    json_object_set_new(v, "status", col(row, "status"));
    json_object_set_new(v, "port_details", port_details(ctx, nb_json_str(row, "fixed_port_id")));
    nb_net_std_attrs(v, row);
    return v;
}

/* The floating IP id visible to ctx (its project's, or any for admins),
 * or NULL after 404 FloatingIPNotFound. New reference. */
static json_t *fip_load(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_db_row(nb_net_env->db, ctx, "SELECT * FROM floatingips WHERE id = ?", "s", id);
    if (!row && nb_ctx_failed(ctx))
        return NULL;
    if (!row || !(ctx->is_admin || ctx->system ||
                  !strcmp(nb_json_str(row, "project_id"), ctx->project_id))) {
        json_decref(row);
        nb_error(ctx, 404, "FloatingIPNotFound", "Floating IP %s could not be found", id);
        return NULL;
    }
    return row;
}

/* --- association -------------------------------------------------------------- */

/* get_router_for_floatingip: among the routers with an interface on
 * subnet_id and a gateway on ext_net, the one whose interface holds the
 * subnet's gateway address, else the first. Writes out[NB_UUID_LEN]. */
static int router_for(struct nb_ctx *ctx, const json_t *port, const char *subnet_id,
                      const char *ext_net, char *out)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx,
                   "SELECT DISTINCT rp.router_id, a.ip_address, s.gateway_ip FROM routerports rp "
                   "JOIN ports p ON p.id = rp.port_id JOIN ipallocations a ON a.port_id = p.id "
                   "JOIN subnets s ON s.id = a.subnet_id "
                   "JOIN ports gw ON gw.device_id = rp.router_id AND gw.device_owner = ? "
                   "WHERE p.network_id = ? AND rp.port_type = 'network:router_interface' AND "
                   "a.subnet_id = ? AND gw.network_id = ? ORDER BY rp.rowid",
                   "ssss", OWNER_GW, nb_json_str(port, "network_id"), subnet_id, ext_net);
    if (!rows)
        return -1;
    const char *first = NULL;
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *gw = nb_json_str(r, "gateway_ip"), *ip = nb_json_str(r, "ip_address");
        if (gw && ip && !strcmp(gw, ip)) {
            first = nb_json_str(r, "router_id");
            break;
        }
        if (!first)
            first = nb_json_str(r, "router_id");
    }
    if (!first)
        return nb_error(ctx, 404, "ExternalGatewayForFloatingIPNotFound",
                        "External network %s is not reachable from subnet %s.  Therefore, "
                        "cannot associate Port %s with a Floating IP.",
                        ext_net, subnet_id, nb_json_str(port, "id"));
    nb_strlcpy(out, first, NB_UUID_LEN);
    return 0;
}

static bool is_v4(const char *ip)
{
    struct nb_ip a;
    return nb_ip_parse(ip, &a) == 0 && a.version == 4;
}

/* _internal_fip_assoc_data: the internal port (visible to ctx), the fixed
 * IPv4 address to use (fixed, or the port's only one) and its subnet. */
static int internal_data(struct nb_ctx *ctx, const char *project, const char *port_id,
                         const char *fixed, json_t **port_out, char *ip_out, char *subnet_out)
{
    _cleanup_json_ json_t *port =
        nb_db_row(nb_net_env->db, ctx,
                  "SELECT p.*, n.project_id AS net_project FROM ports p JOIN networks n ON "
                  "n.id = p.network_id WHERE p.id = ?",
                  "s", port_id);
    const char *pp = port ? nb_json_str(port, "project_id") : NULL;
    if (!port || !(ctx->is_admin || ctx->system || !strcmp(pp, ctx->project_id) ||
                   !strcmp(nb_json_str(port, "net_project"), ctx->project_id)))
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, "PortNotFound", "Port %s could not be found.", port_id);
    if (strcmp(pp, project) && !ctx->is_admin && !ctx->system)
        return bad_fip(ctx,
                       "Cannot process floating IP association with Port %s, since that port "
                       "is owned by a different tenant",
                       port_id, NULL);
    if (!strcmp(nb_json_str(port, "device_owner"), OWNER_DHCP))
        return bad_fip(ctx, "Port %s is unable to be assigned a floating IP", port_id, NULL);
    _cleanup_json_ json_t *ips =
        nb_db_rows(nb_net_env->db, ctx,
                   "SELECT ip_address, subnet_id FROM ipallocations WHERE port_id = ? ORDER BY "
                   "rowid",
                   "s", port_id);
    if (!ips)
        return -1;
    const json_t *pick = NULL;
    size_t i, v4 = 0;
    json_t *a;
    if (fixed && !is_v4(fixed))
        return bad_fip(ctx,
                       "Cannot process floating IP association with %s, since that is not an "
                       "IPv4 address",
                       fixed, NULL);
    json_array_foreach (ips, i, a) {
        const char *ip = nb_json_str(a, "ip_address");
        if (fixed ? !strcmp(ip, fixed) : is_v4(ip)) {
            v4++;
            if (!pick)
                pick = a;
        }
    }
    if (fixed && !pick)
        return bad_fip(ctx, "Port %s does not have fixed ip %s", port_id, fixed);
    if (!pick)
        return bad_fip(ctx, "Cannot add floating IP to port %s that has no fixed IPv4 addresses",
                       port_id, NULL);
    if (v4 > 1)
        return bad_fip(ctx,
                       "Port %s has multiple fixed IPv4 addresses.  Must provide a specific IPv4 "
                       "address when assigning a floating IP",
                       port_id, NULL);
    nb_strlcpy(ip_out, nb_json_str(pick, "ip_address"), 64);
    nb_strlcpy(subnet_out, nb_json_str(pick, "subnet_id"), NB_UUID_LEN);
    *port_out = json_incref(port);
    return 0;
}

int nb_net_fip_router_for_address(struct nb_ctx *ctx, const json_t *fip, const char *port_id,
                                  const char *ip, char *router)
{
    _cleanup_json_ json_t *port = NULL;
    char fixed[64], subnet[NB_UUID_LEN];
    if (internal_data(ctx, nb_json_str(fip, "project_id"), port_id, ip, &port, fixed, subnet) < 0)
        return -1;
    return router_for(ctx, port, subnet, nb_json_str(fip, "floating_network_id"), router);
}

/* The association a body asks for (_check_and_get_fip_assoc), written into
 * row's fixed_port_id/fixed_ip_address/router_id (null when none). row has
 * id, project_id, floating_network_id, floating_ip_address and the current
 * association. port_id absent from body: the current port is kept. */
static int resolve_assoc(struct nb_ctx *ctx, const json_t *body, json_t *row)
{
    json_t *pv = json_object_get(body, "port_id");
    const char *fixed = nb_json_str(body, "fixed_ip_address");
    if (fixed && (!pv || json_is_null(pv)))
        return bad_fip(ctx, "fixed_ip_address cannot be specified without a port_id", NULL, NULL);
    const char *port_id = pv ? json_string_value(pv) : nb_json_str(row, "fixed_port_id");
    if (pv && port_id && nb_net_pf_check_fip_assoc(ctx, nb_json_str(row, "id")) < 0)
        return -1;
    if (!port_id) {
        json_object_set_new(row, "fixed_port_id", json_null());
        json_object_set_new(row, "fixed_ip_address", json_null());
        json_object_set_new(row, "router_id", json_null());
        return 0;
    }
    if (!pv)
        fixed = nb_json_str(row, "fixed_ip_address");
    _cleanup_json_ json_t *port = NULL;
    char ip[64], subnet[NB_UUID_LEN], router[NB_UUID_LEN];
    const char *net = nb_json_str(row, "floating_network_id");
    if (internal_data(ctx, nb_json_str(row, "project_id"), port_id, fixed, &port, ip, subnet) < 0 ||
        router_for(ctx, port, subnet, net, router) < 0)
        return -1;
    const char *cur = nb_json_str(row, "fixed_port_id");
    if (!cur || strcmp(cur, port_id)) {
        _cleanup_json_ json_t *other = nb_db_row(
            nb_net_env->db, ctx,
            "SELECT id FROM floatingips WHERE fixed_port_id = ? AND floating_network_id = ? AND "
            "fixed_ip_address = ? AND id != ?",
            "ssss", port_id, net, ip, nb_json_str(row, "id"));
        if (other)
            return nb_error(ctx, 409, "FloatingIPPortAlreadyAssociated",
                            "Cannot associate floating IP %s (%s) with port %s using fixed IP "
                            "%s, as that fixed IP already has a floating IP on external network "
                            "%s.",
                            nb_json_str(row, "floating_ip_address"), nb_json_str(row, "id"),
                            port_id, ip, net);
        if (nb_ctx_failed(ctx))
            return -1;
    }
    json_object_set_new(row, "fixed_port_id", json_string(port_id));
    json_object_set_new(row, "fixed_ip_address", json_string(ip));
    json_object_set_new(row, "router_id", json_string(router));
    return 0;
}

/* --- after a change ------------------------------------------------------------- */

/* The instance owning port_id (device_owner compute:*) has its network info
 * refreshed, as Nova does on Neutron's network-changed event. */
static void refresh_instance(struct nb_ctx *ctx, const char *port_id)
{
    if (!port_id || !nb_compute_network_changed)
        return;
    _cleanup_json_ json_t *p =
        nb_db_row(nb_net_env->db, ctx, "SELECT device_id, device_owner FROM ports WHERE id = ?",
                  "s", port_id);
    if (!p || strncmp(nb_json_str(p, "device_owner"), "compute:", 8))
        return;
    struct nb_ctx sys;
    nb_ctx_init_system(&sys, ctx->request_id);
    if (nb_compute_network_changed(nb_net_env->db, &sys, nb_json_str(p, "device_id")) < 0)
        NB_WARN(FIP_LOG, ctx, nb_json_str(p, "device_id"),
                "could not refresh the instance's network info: %s", nb_ctx_message(&sys));
}

static void changed(struct nb_ctx *ctx, const char *old_port, const char *new_port, const char *why)
{
    if (old_port && (!new_port || strcmp(old_port, new_port)))
        refresh_instance(ctx, old_port);
    refresh_instance(ctx, new_port);
    if (nb_net_notify_agents)
        nb_net_notify_agents(ctx, why);
}

static int write_assoc(struct nb_ctx *ctx, const json_t *row, const char *desc)
{
    char now[32];
    return nb_db_exec(nb_net_env->db, ctx,
                      "UPDATE floatingips SET fixed_port_id = ?, fixed_ip_address = ?, "
                      "last_known_router_id = router_id, router_id = ?, "
                      "status = CASE WHEN COALESCE(fixed_port_id, '') = COALESCE(?, '') THEN "
                      "status ELSE 'DOWN' END, description = COALESCE(?, description), "
                      "updated_at = ?, revision_number = revision_number + 1 WHERE id = ?",
                      "sssssss", nb_json_str(row, "fixed_port_id"),
                      nb_json_str(row, "fixed_ip_address"), nb_json_str(row, "router_id"),
                      nb_json_str(row, "fixed_port_id"), desc, nb_net_now(now),
                      nb_json_str(row, "id")) < 0
               ? -1
               : 0;
}

/* --- create --------------------------------------------------------------------- */

/* The floating IP's port on the external network (inside the transaction). */
static json_t *make_port(struct nb_ctx *ctx, const json_t *body, const char *net_id)
{
    struct nb_ctx sys;
    nb_ctx_init_system(&sys, ctx->request_id);
    _cleanup_json_ json_t *pb =
        json_pack("{s:s, s:s, s:s, s:s, s:b, s:s, s:[]}", "network_id", net_id, "device_id",
                  "PENDING", "device_owner", OWNER_FIP, "tenant_id", "", "admin_state_up", 1,
                  "name", "", "security_groups");
    const char *sub = nb_json_str(body, "subnet_id"),
               *addr = nb_json_str(body, "floating_ip_address");
    if (sub || addr)
        json_object_set_new(pb, "fixed_ips",
                            json_pack("[{s:s?, s:s?}]", "subnet_id", sub, "ip_address", addr));
    json_t *port = nb_net_port_create(&sys, pb);
    if (!port) {
        nb_error(ctx, nb_ctx_status(&sys), nb_ctx_error_name(&sys), "%s", nb_ctx_message(&sys));
        return NULL;
    }
    return port;
}

/* The first IPv4 address of a port view, or NULL. */
static const char *first_v4(const json_t *port)
{
    size_t i;
    json_t *f;
    json_array_foreach (json_object_get(port, "fixed_ips"), i, f)
        if (is_v4(nb_json_str(f, "ip_address")))
            return nb_json_str(f, "ip_address");
    return NULL;
}

static int check_net(struct nb_ctx *ctx, const char *net_id)
{
    _cleanup_json_ json_t *net = nb_net_network_get(ctx, net_id);
    if (!net)
        return -1;
    if (!nb_json_int(net, "router_external", 0))
        return bad_fip(ctx, "Network %s is not a valid external network", net_id, NULL);
    if (nb_db_int(nb_net_env->db, ctx, 0,
                  "SELECT COUNT(*) FROM subnets WHERE network_id = ? AND ip_version = 4", "s",
                  net_id) < 1)
        return nb_ctx_failed(ctx)
                   ? -1
                   : bad_fip(ctx, "Network %s does not contain any IPv4 subnet", net_id, NULL);
    return 0;
}

static json_t *create_one(struct nb_ctx *ctx, json_t *body)
{
    char project[NB_ID_LEN], id[NB_UUID_LEN], now[32];
    const char *net_id = nb_json_str(body, "floating_network_id");
    if (nb_net_owner(ctx, body, project) < 0 || check_net(ctx, net_id) < 0 ||
        nb_net_quota_check(ctx, project, "floatingip") < 0)
        return NULL;
    nb_uuid(id);
    _cleanup_json_ json_t *port = make_port(ctx, body, net_id);
    if (!port)
        return NULL;
    const char *addr = first_v4(port), *port_id = nb_json_str(port, "id");
    if (!addr) {
        nb_error(ctx, 400, "ExternalIpAddressExhausted",
                 "Unable to find any IP address on external network %s.", net_id);
        return NULL;
    }
    _cleanup_json_ json_t *row = json_pack(
        "{s:s, s:s, s:s, s:s, s:n, s:n}", "id", id, "project_id", project, "floating_network_id",
        net_id, "floating_ip_address", addr, "fixed_port_id", "fixed_ip_address");
    const char *desc = nb_json_str(body, "description");
    if (resolve_assoc(ctx, body, row) < 0 ||
        nb_db_exec(nb_net_env->db, ctx,
                   "INSERT INTO floatingips (id, project_id, floating_ip_address, "
                   "floating_network_id, floating_port_id, fixed_port_id, fixed_ip_address, "
                   "router_id, status, description, created_at, updated_at) VALUES (?, ?, ?, ?, "
                   "?, ?, ?, ?, 'DOWN', ?, ?, ?)",
                   "sssssssssss", id, project, addr, net_id, port_id,
                   nb_json_str(row, "fixed_port_id"), nb_json_str(row, "fixed_ip_address"),
                   nb_json_str(row, "router_id"), desc ? desc : "", nb_net_now(now), now) < 0 ||
        nb_net_port_set_device(ctx, port_id, id, OWNER_FIP) < 0)
        return NULL;
    json_decref(row);
    row = fip_load(ctx, id);
    if (!row)
        return NULL;
    NB_INFO(FIP_LOG, ctx, NULL, "created floating IP %s (%s) on network %s%s%s", id, addr, net_id,
            nb_json_str(row, "fixed_port_id") ? ", associated with port " : "",
            nb_json_str(row, "fixed_port_id") ? nb_json_str(row, "fixed_port_id") : "");
    return fip_view(ctx, row);
}

json_t *nb_network_fip_create(struct nb_ctx *ctx, json_t *body)
{
    if (nb_net_check_attrs(ctx, body, fip_attrs, true) < 0)
        return NULL;
    json_t *v = nb_net_create_in_tx(ctx, body, create_one);
    if (!v)
        return NULL;
    changed(ctx, NULL, nb_json_str(body, "port_id"), "floating IP created");
    return v;
}

static int fip_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = nb_net_body(ctx, req, "floatingip");
    json_t *v = body ? nb_network_fip_create(ctx, body) : NULL;
    return v ? nb_net_show_respond(req, resp, 201, "floatingip", v) : -1;
}

/* --- list, show ------------------------------------------------------------------- */

/* Neutron's tag filters: tags (all of), tags-any, not-tags, not-tags-any,
 * each a comma-separated list. */
static bool tags_match(struct nb_req *req, const json_t *view)
{
    static const char *const keys[] = {"tags", "tags-any", "not-tags", "not-tags-any"};
    const json_t *tags = json_object_get(view, "tags");
    for (int k = 0; k < 4; k++) {
        const char *q = nb_req_query(req, keys[k]);
        if (!q)
            continue;
        _cleanup_free_ char *copy = strdup(q);
        size_t want = 0, have = 0;
        for (char *save = NULL, *t = strtok_r(copy, ",", &save); t;
             t = strtok_r(NULL, ",", &save)) {
            want++;
            size_t i;
            json_t *tv;
            json_array_foreach (tags, i, tv)
                if (!strcmp(json_string_value(tv), t)) {
                    have++;
                    break;
                }
        }
        bool all = have == want, any = have > 0;
        if ((k == 0 && !all) || (k == 1 && !any) || (k == 2 && all && want) || (k == 3 && any))
            return false;
    }
    return true;
}

json_t *nb_network_fip_list(struct nb_ctx *ctx, const char *project_id)
{
    if (!project_id && !(ctx->is_admin || ctx->system))
        project_id = ctx->project_id;
    _cleanup_json_ json_t *rows =
        !project_id
            ? nb_db_rows(nb_net_env->db, ctx, "SELECT * FROM floatingips ORDER BY rowid", "")
            : nb_db_rows(nb_net_env->db, ctx,
                         "SELECT * FROM floatingips WHERE project_id = ? ORDER BY rowid", "s",
                         project_id);
    if (!rows)
        return NULL;
    json_t *views = json_array();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row)
        json_array_append_new(views, fip_view(ctx, row));
    return views;
}

static int fip_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *all = nb_network_fip_list(ctx, NULL);
    if (!all)
        return -1;
    json_t *views = json_array();
    size_t i;
    json_t *v;
    json_array_foreach (all, i, v)
        if (tags_match(req, v))
            json_array_append(views, v);
    return nb_net_list_respond(ctx, req, resp, "floatingips", views);
}

json_t *nb_network_fip_show(struct nb_ctx *ctx, const char *id)
{
    _cleanup_json_ json_t *row = fip_load(ctx, id);
    return row ? fip_view(ctx, row) : NULL;
}

static int fip_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *v = nb_network_fip_show(ctx, nb_req_param(req, "floatingip_id"));
    return v ? nb_net_show_respond(req, resp, 200, "floatingip", v) : -1;
}

json_t *nb_network_fip_pools(struct nb_ctx *ctx)
{
    return nb_db_rows(nb_net_env->db, ctx,
                      "SELECT id, name FROM networks WHERE router_external = 1 ORDER BY rowid", "");
}

/* --- update, delete ----------------------------------------------------------------- */

json_t *nb_network_fip_update(struct nb_ctx *ctx, const char *id, json_t *body)
{
    if (nb_net_check_attrs(ctx, body, fip_attrs, false) < 0)
        return NULL;
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return NULL;
    _cleanup_json_ json_t *row = fip_load(ctx, id);
    _cleanup_free_ char *old_port =
        row && nb_json_str(row, "fixed_port_id") ? strdup(nb_json_str(row, "fixed_port_id")) : NULL;
    if (!row || resolve_assoc(ctx, body, row) < 0 ||
        write_assoc(ctx, row, nb_json_str(body, "description")) < 0) {
        nb_db_rollback(db);
        return NULL;
    }
    if (nb_db_commit(db, ctx) < 0)
        return NULL;
    const char *new_port = nb_json_str(row, "fixed_port_id");
    if ((old_port != NULL) != (new_port != NULL) ||
        (old_port && new_port && strcmp(old_port, new_port)))
        NB_INFO(FIP_LOG, ctx, NULL, "floating IP %s (%s) %s port %s", id,
                nb_json_str(row, "floating_ip_address"),
                new_port ? "associated with" : "disassociated from",
                new_port ? new_port : old_port);
    changed(ctx, old_port, new_port, "floating IP updated");
    return nb_network_fip_show(ctx, id);
}

static int fip_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *body = nb_net_body(ctx, req, "floatingip");
    json_t *v = body ? nb_network_fip_update(ctx, nb_req_param(req, "floatingip_id"), body) : NULL;
    return v ? nb_net_show_respond(req, resp, 200, "floatingip", v) : -1;
}

int nb_network_fip_delete(struct nb_ctx *ctx, const char *id)
{
    _cleanup_json_ json_t *row = fip_load(ctx, id);
    if (!row)
        return -1;
    /* the row goes with its port (ON DELETE CASCADE), as in Neutron */
    if (nb_db_exec(nb_net_env->db, ctx, "DELETE FROM ports WHERE id = ?", "s",
                   nb_json_str(row, "floating_port_id")) < 0)
        return -1;
    NB_INFO(FIP_LOG, ctx, NULL, "deleted floating IP %s (%s)", id,
            nb_json_str(row, "floating_ip_address"));
    changed(ctx, nb_json_str(row, "fixed_port_id"), NULL, "floating IP deleted");
    return 0;
}

static int fip_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_network_fip_delete(ctx, nb_req_param(req, "floatingip_id")) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

/* --- what routers.c, instance.c and the agents' RPC ask ------------------------------ */

int nb_net_fip_check_interface(struct nb_ctx *ctx, const char *router_id, const char *subnet_id,
                               const char *cidr)
{
    struct nb_ip net;
    int len;
    if (nb_cidr_parse(cidr, &net, &len, false) < 0)
        return 0;
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx,
                   "SELECT f.fixed_ip_address FROM floatingips f JOIN ipallocations a ON "
                   "a.port_id = f.fixed_port_id AND a.subnet_id = ? WHERE f.router_id = ?",
                   "ss", subnet_id, router_id);
    if (!rows)
        return -1;
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        struct nb_ip ip;
        if (nb_ip_parse(nb_json_str(r, "fixed_ip_address"), &ip) == 0 &&
            ip.version == net.version && nb_ip_in_cidr(&ip, &net, len))
            return nb_error(ctx, 409, "RouterInterfaceInUseByFloatingIP",
                            "Router interface for subnet %s on router %s cannot be deleted, as "
                            "it is required by one or more floating IPs.",
                            subnet_id, router_id);
    }
    return 0;
}

int nb_net_fip_check_gateway(struct nb_ctx *ctx, const char *router_id, const char *net_id)
{
    long long n = nb_db_int(nb_net_env->db, ctx, 0,
                            "SELECT COUNT(*) FROM floatingips WHERE router_id = ?", "s", router_id);
    if (n < 0)
        return -1;
    if (n > 0)
        return nb_error(ctx, 409, "RouterExternalGatewayInUseByFloatingIp",
                        "Gateway cannot be updated for router %s, since a gateway to external "
                        "network %s is required by one or more floating IPs.",
                        router_id, net_id);
    return 0;
}

json_t *nb_net_fip_addresses(struct nb_ctx *ctx, const char *port_id, const char *fixed_ip)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx,
                   "SELECT floating_ip_address FROM floatingips WHERE fixed_port_id = ? AND "
                   "fixed_ip_address = ? ORDER BY rowid",
                   "ss", port_id, fixed_ip);
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(out, json_string(nb_json_str(r, "floating_ip_address")));
    return out;
}

json_t *nb_net_fip_of_router(struct nb_ctx *ctx, const char *router_id)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx,
                   "SELECT id, floating_ip_address, fixed_ip_address, fixed_port_id, status FROM "
                   "floatingips WHERE router_id = ? AND fixed_port_id IS NOT NULL ORDER BY rowid",
                   "s", router_id);
    if (!rows)
        return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(
            out, json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", nb_json_str(r, "id"),
                           "floating_ip_address", nb_json_str(r, "floating_ip_address"),
                           "fixed_ip_address", nb_json_str(r, "fixed_ip_address"), "port_id",
                           nb_json_str(r, "fixed_port_id"), "status", nb_json_str(r, "status")));
    return out;
}

static bool status_ok(const char *s)
{
    return s && (!strcmp(s, "ACTIVE") || !strcmp(s, "DOWN") || !strcmp(s, "ERROR"));
}

int nb_net_fip_update_statuses(struct nb_ctx *ctx, const char *router_id, const json_t *statuses)
{
    if (!json_is_object(statuses))
        return nb_error(ctx, 400, NULL, "statuses must be an object");
    const char *id;
    json_t *v;
    int changed_n = 0;
    json_object_foreach ((json_t *)statuses, id, v) {
        const char *s = json_string_value(v);
        if (!status_ok(s))
            continue;
        /* a floating IP moved to another router meanwhile keeps its status */
        int n = nb_db_exec(nb_net_env->db, ctx,
                           "UPDATE floatingips SET status = ? WHERE id = ? AND status != ? AND "
                           "(? IS NULL OR router_id = ? OR (router_id IS NULL AND ? = 'DOWN'))",
                           "ssssss", s, id, s, router_id, router_id, s);
        if (n < 0)
            return -1;
        changed_n += n;
    }
    if (changed_n)
        NB_INFO(FIP_LOG, ctx, NULL, "router %s: %d floating IP status(es) changed",
                router_id ? router_id : "-", changed_n);
    return changed_n;
}

/* nb_net_hooks.port_delete_check, chained before the router's: the
 * floating IP's own port goes with the floating IP. */
static int (*next_delete_check)(struct nb_ctx *ctx, const json_t *port);

static int port_delete_check(struct nb_ctx *ctx, const json_t *port)
{
    const char *owner = nb_json_str(port, "device_owner");
    if (owner && !strcmp(owner, OWNER_FIP)) {
        long long n =
            nb_db_int(nb_net_env->db, ctx, 0, "SELECT COUNT(*) FROM floatingips WHERE id = ?", "s",
                      nb_json_str(port, "device_id"));
        if (n < 0)
            return -1;
        if (n > 0)
            return nb_error(ctx, 409, "ServicePortInUse",
                            "Port %s cannot be deleted directly via the port API: has device "
                            "owner %s.",
                            nb_json_str(port, "id"), OWNER_FIP);
    }
    return next_delete_check ? next_delete_check(ctx, port) : 0;
}

int nb_net_floatingips_init(void)
{
    nb_http_route("GET", "/networking/v2.0/floatingips", fip_list, 0);
    nb_http_route("POST", "/networking/v2.0/floatingips", fip_create, 0);
    nb_http_route("GET", "/networking/v2.0/floatingips/{floatingip_id}", fip_show, 0);
    nb_http_route("PUT", "/networking/v2.0/floatingips/{floatingip_id}", fip_update, 0);
    nb_http_route("DELETE", "/networking/v2.0/floatingips/{floatingip_id}", fip_delete, 0);
    nb_net_extension("fip-port-details", "Floating IP Port Details Extension",
                     "Add port_details attribute to Floating IP resource");
    next_delete_check = nb_net_hooks.port_delete_check;
    nb_net_hooks.port_delete_check = port_delete_check;
    return nb_net_port_forwardings_init();
}

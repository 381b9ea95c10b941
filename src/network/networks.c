/* networks.c - /v2.0/networks: create (single and bulk), list, show,
 * update, delete, with the external-net, net-mtu, port-security and
 * availability-zone attributes.
 *
 * Visibility is Neutron's default policy: a project sees its own networks,
 * shared ones and external (router:external) ones; an admin sees all. Only
 * admins set shared or router:external. Deleting a network deletes its
 * subnets (and the DHCP ports Neutron would auto-delete), but any other port
 * left on it makes the delete 409 NetworkInUse. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "network/ml2_int.h"
#include "network/network_int.h"

#include <stdio.h>
#include <string.h>

static const struct nb_net_attr network_attrs[] = {
    {"name", NB_A_STR, true, true, false, false, 255},
    {"description", NB_A_STR, true, true, false, false, 255},
    {"admin_state_up", NB_A_BOOL, true, true, false, false, 0},
    {"shared", NB_A_BOOL, true, true, false, false, 0},
    {"router:external", NB_A_BOOL, true, true, false, false, 0},
    {"mtu", NB_A_INT, true, true, false, false, 1},
    {"port_security_enabled", NB_A_BOOL, true, true, false, false, 0},
    {"availability_zone_hints", NB_A_LIST, true, false, false, false, 0},
    {"is_default", NB_A_BOOL, true, true, false, false, 0},
    {"provider:network_type", NB_A_STR, true, false, false, true, 255},
    {"provider:physical_network", NB_A_STR, true, false, false, true, 64},
    {"provider:segmentation_id", NB_A_INT, true, false, false, true, 0},
    {NULL},
};

bool nb_net_network_owned(const struct nb_ctx *ctx, const json_t *row)
{
    const char *p = nb_json_str(row, "project_id");
    return ctx->is_admin || (p && !strcmp(p, ctx->project_id));
}

bool nb_net_network_visible(const struct nb_ctx *ctx, const json_t *row)
{
    return nb_net_network_owned(ctx, row) || nb_json_int(row, "shared", 0) ||
           nb_json_int(row, "router_external", 0);
}

json_t *nb_net_network_get(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_db_row(nb_net_env->db, ctx, "SELECT * FROM networks WHERE id = ?", "s", id);
    if (row && nb_net_network_visible(ctx, row))
        return row;
    json_decref(row);
    if (!nb_ctx_failed(ctx))
        nb_error(ctx, 404, "NetworkNotFound", "Network %s could not be found.", id);
    return NULL;
}

json_t *nb_net_subnet_rows(struct nb_ctx *ctx, const char *network_id)
{
    return nb_db_rows(nb_net_env->db, ctx,
                      "SELECT * FROM subnets WHERE network_id = ? ORDER BY created_at, rowid", "s",
                      network_id);
}

static json_t *view(struct nb_ctx *ctx, const json_t *row)
{
    const char *id = nb_json_str(row, "id");
    json_t *subnets = json_array();
    _cleanup_json_ json_t *srows = nb_net_subnet_rows(ctx, id);
    size_t i;
    json_t *s;
    json_array_foreach (srows, i, s)
        json_array_append_new(subnets, json_string(nb_json_str(s, "id")));
    json_t *hints = nb_json_parse(nb_json_str(row, "availability_zone_hints"));
    json_t *v = json_pack(
        "{s:s, s:s, s:b, s:I, s:s, s:o, s:b, s:o, s:[s], s:n, s:n, s:b, s:b}", "id", id, "name",
        nb_json_str(row, "name"), "admin_state_up", (int)nb_json_int(row, "admin_state_up", 1),
        "mtu", nb_json_int(row, "mtu", 1500), "status", nb_json_str(row, "status"), "subnets",
        subnets, "shared", (int)nb_json_int(row, "shared", 0), "availability_zone_hints",
        hints ? hints : json_array(), "availability_zones",
        nb_conf_str("network", "default_availability_zone", "nova"), "ipv4_address_scope",
        "ipv6_address_scope", "router:external", (int)nb_json_int(row, "router_external", 0),
        "port_security_enabled", (int)nb_json_int(row, "port_security_enabled", 1));
    nb_net_std_attrs(v, row);
    if (nb_json_int(row, "router_external", 0))
        json_object_set_new(v, "is_default", json_boolean(nb_json_int(row, "is_default", 0)));
    nb_ml2_view(ctx, v, id);
    return v;
}

json_t *nb_net_network_view_of(struct nb_ctx *ctx, const char *id)
{
    _cleanup_json_ json_t *row =
        nb_db_row(nb_net_env->db, ctx, "SELECT * FROM networks WHERE id = ?", "s", id);
    return row ? view(ctx, row) : NULL;
}

/* 403 unless ctx is admin, for the admin-only attributes. */
static int admin_only(struct nb_ctx *ctx, const json_t *body, const char *action)
{
    static const char *const attrs[] = {"shared", "router:external", "is_default"};
    for (size_t i = 0; i < 3; i++)
        if (json_object_get(body, attrs[i]) && !ctx->is_admin)
            return nb_error(ctx, 403, "PolicyNotAuthorized",
                            "(rule:%s_network and rule:%s_network:%s) is disallowed by policy",
                            action, action, attrs[i]);
    return 0;
}

static bool flag(const json_t *body, const char *key, bool def)
{
    json_t *v = json_object_get(body, key);
    return v ? json_is_true(v) : def;
}

/* Neutron's check of a requested mtu against what the segment allows. */
static int check_mtu(struct nb_ctx *ctx, long long mtu, int max_mtu)
{
    if (mtu && max_mtu && mtu > max_mtu)
        return nb_error(ctx, 400, "InvalidInput",
                        "Invalid input for operation: Requested MTU is too big, maximum is %d.",
                        max_mtu);
    return 0;
}

/* The networks row of a checked body (mtu: the requested one, else set
 * once the segment says what it allows). 0/-1. */
static int insert_row(struct nb_ctx *ctx, const char *id, const char *project, const json_t *body,
                      const char *now)
{
    const char *name = nb_json_str(body, "name"), *desc = nb_json_str(body, "description");
    long long mtu = nb_json_int(body, "mtu", nb_ml2_physnet_mtu());
    json_t *hints = json_object_get(body, "availability_zone_hints");
    _cleanup_json_ json_t *no_hints = json_array();
    if (nb_db_exec(nb_net_env->db, ctx,
                   "INSERT INTO networks (id, project_id, name, description, admin_state_up, "
                   "shared, router_external, is_default, mtu, port_security_enabled, "
                   "availability_zone_hints, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, "
                   "?, ?, ?, ?, ?, ?, ?)",
                   "ssssbbbbibjss", id, project, name ? name : "", desc ? desc : "",
                   flag(body, "admin_state_up", true), flag(body, "shared", false),
                   flag(body, "router:external", false), flag(body, "is_default", false), mtu,
                   flag(body, "port_security_enabled", true), hints ? hints : no_hints, now,
                   now) < 0)
        return -1;
    return 0;
}

/* Creates one network from body (already checked). View or NULL. */
static json_t *create_one(struct nb_ctx *ctx, json_t *body)
{
    char project[NB_ID_LEN], id[NB_UUID_LEN], now[32];
    if (nb_net_owner(ctx, body, project) < 0 || admin_only(ctx, body, "create") < 0 ||
        nb_net_quota_check(ctx, project, "network") < 0)
        return NULL;
    int max_mtu = 0;
    nb_uuid(id);
    nb_net_now(now);
    const char *name = nb_json_str(body, "name");
    long long mtu = nb_json_int(body, "mtu", 0);
    if (insert_row(ctx, id, project, body, now) < 0 ||
        nb_ml2_segment_reserve(ctx, id, body, &max_mtu) < 0 || check_mtu(ctx, mtu, max_mtu) < 0)
        return NULL;
    if (!mtu && nb_db_exec(nb_net_env->db, ctx, "UPDATE networks SET mtu = ? WHERE id = ?", "is",
                           (long long)max_mtu, id) < 0)
        return NULL;
    _cleanup_json_ json_t *row =
        nb_db_row(nb_net_env->db, ctx, "SELECT * FROM networks WHERE id = ?", "s", id);
    NB_INFO("nubo.network.networks", ctx, NULL, "created network %s (%s)", id, name ? name : "");
    return row ? view(ctx, row) : NULL;
}

json_t *nb_net_network_create(struct nb_ctx *ctx, json_t *body)
{
    if (nb_net_check_attrs(ctx, body, network_attrs, true) < 0)
        return NULL;
    return nb_net_create_in_tx(ctx, body, create_one);
}

/* Bulk or single create: {"networks": [...]} or {"network": {...}}; all or
 * nothing, in one transaction. */
static int create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *bulk = json_is_object(req->json) ? json_object_get(req->json, "networks") : NULL;
    if (bulk && (!json_is_array(bulk) || !json_array_size(bulk)))
        return nb_error(ctx, 400, "HTTPBadRequest", "Resources required");
    json_t *one = bulk ? NULL : nb_net_body(ctx, req, "network");
    if (!bulk && !one)
        return -1;
    size_t n = bulk ? json_array_size(bulk) : 1;
    _cleanup_json_ json_t *items = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *b = bulk ? json_array_get(bulk, i) : one;
        if (bulk && json_object_get(b, "network"))
            b = json_object_get(b, "network");
        if (!json_is_object(b) || nb_net_check_attrs(ctx, b, network_attrs, true) < 0)
            return json_is_object(b) ? -1
                                     : nb_error(ctx, 400, "HTTPBadRequest",
                                                "Object 'network' contains invalid data");
        json_array_append(items, b);
    }
    return nb_net_create_respond(ctx, req, resp, "network", "networks", items, bulk != NULL,
                                 create_one);
}

static int list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx, "SELECT * FROM networks ORDER BY created_at, rowid", "");
    if (!rows)
        return -1;
    json_t *views = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        if (nb_net_network_visible(ctx, r))
            json_array_append_new(views, view(ctx, r));
    return nb_net_list_respond(ctx, req, resp, "networks", views);
}

static int show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *row = nb_net_network_get(ctx, nb_req_param(req, "network_id"));
    if (!row)
        return -1;
    return nb_net_show_respond(req, resp, 200, "network", view(ctx, row));
}

/* The SQL column an updatable attribute is stored in. */
static const char *column_of(const char *attr)
{
    return !strcmp(attr, "router:external") ? "router_external" : attr;
}

static int update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "network_id");
    json_t *body = nb_net_body(ctx, req, "network");
    if (!body || nb_net_check_attrs(ctx, body, network_attrs, false) < 0 ||
        admin_only(ctx, body, "update") < 0)
        return -1;
    _cleanup_json_ json_t *row = nb_net_network_get(ctx, id);
    if (!row)
        return -1;
    if (!nb_net_network_owned(ctx, row))
        return nb_net_deny(ctx, "update_network");
    if (json_object_get(body, "mtu")) {
        _cleanup_json_ json_t *seg = nb_ml2_segment(ctx, id);
        int max =
            nb_ml2_type_mtu(seg ? nb_json_str(seg, "network_type") : "local", nb_ml2_physnet_mtu());
        if (check_mtu(ctx, nb_json_int(body, "mtu", 0), max) < 0)
            return -1;
    }
    char now[32];
    nb_net_now(now);
    if (nb_db_begin(nb_net_env->db, ctx) < 0)
        return -1;
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach (body, key, v) {
        if (!strcmp(key, "project_id") || !strcmp(key, "tenant_id"))
            continue;
        _cleanup_free_ char *sql =
            nb_strdup_printf("UPDATE networks SET %s = ? WHERE id = ?", column_of(key));
        if (json_is_boolean(v))
            rc = nb_db_exec(nb_net_env->db, ctx, sql, "bs", json_is_true(v), id);
        else if (json_is_integer(v))
            rc = nb_db_exec(nb_net_env->db, ctx, sql, "is", json_integer_value(v), id);
        else
            rc = nb_db_exec(nb_net_env->db, ctx, sql, "ss", json_string_value(v), id);
        if (rc < 0)
            break;
    }
    if (rc >= 0)
        rc = nb_db_exec(nb_net_env->db, ctx,
                        "UPDATE networks SET updated_at = ?, revision_number = revision_number + "
                        "1 WHERE id = ?",
                        "ss", now, id);
    if (rc < 0) {
        nb_db_rollback(nb_net_env->db);
        return -1;
    }
    if (nb_db_commit(nb_net_env->db, ctx) < 0)
        return -1;
    json_decref(row);
    row = nb_db_row(nb_net_env->db, ctx, "SELECT * FROM networks WHERE id = ?", "s", id);
    return row ? nb_net_show_respond(req, resp, 200, "network", view(ctx, row)) : -1;
}

/* Owners whose ports go away with their network (neutron_lib's
 * AUTO_DELETE_PORT_OWNERS). */
static const char *const auto_delete_owners = "'network:dhcp', 'network:distributed'";

static int delete (struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "network_id");
    _cleanup_json_ json_t *row = nb_net_network_get(ctx, id);
    if (!row)
        return -1;
    if (!nb_net_network_owned(ctx, row))
        return nb_net_deny(ctx, "delete_network");
    if (nb_db_begin(nb_net_env->db, ctx) < 0)
        return -1;
    _cleanup_free_ char *sql = nb_strdup_printf(
        "SELECT COUNT(*) FROM ports WHERE network_id = ? AND device_owner NOT IN (%s)",
        auto_delete_owners);
    long long in_use = nb_db_int(nb_net_env->db, ctx, -1, sql, "s", id);
    int rc = in_use < 0 ? -1 : 0;
    if (in_use > 0)
        rc = nb_error(ctx, 409, "NetworkInUse",
                      "Unable to complete operation on network %s. There are one or more ports "
                      "still in use on the network.",
                      id);
    /* subnets, ports and their IP allocations go by ON DELETE CASCADE */
    if (rc == 0 &&
        nb_db_exec(nb_net_env->db, ctx, "DELETE FROM networks WHERE id = ?", "s", id) < 0)
        rc = -1;
    if (rc < 0) {
        nb_db_rollback(nb_net_env->db);
        return -1;
    }
    if (nb_db_commit(nb_net_env->db, ctx) < 0)
        return -1;
    NB_INFO("nubo.network.networks", ctx, NULL, "deleted network %s", id);
    return nb_resp_empty(resp, 204);
}

int nb_net_networks_init(void)
{
    nb_http_route("POST", "/networking/v2.0/networks", create, 0);
    nb_http_route("GET", "/networking/v2.0/networks", list, 0);
    nb_http_route("GET", "/networking/v2.0/networks/{network_id}", show, 0);
    nb_http_route("PUT", "/networking/v2.0/networks/{network_id}", update, 0);
    nb_http_route("DELETE", "/networking/v2.0/networks/{network_id}", delete, 0);
    return 0;
}

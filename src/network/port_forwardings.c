/* port_forwardings.c - /v2.0/floatingips/{id}/port_forwardings (Neutron's
 * floating-ip-port-forwarding and fip-pf-description extensions:
 * neutron/services/portforwarding/pf_plugin.py, single ports).
 *
 * A port forwarding sends a protocol and external port of a floating IP
 * that is associated with no port to an internal address and port of a
 * port behind the router that joins its subnet to the floating network;
 * the floating IP's router_id is that router while it has forwardings. A
 * floating IP with forwardings cannot be associated (409
 * FipInUseByPortForwarding), nor can a port that has a floating IP be the
 * internal port (409 PortHasBindingFloatingIP). */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "network/floatingips.h"
#include "network/network_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PF_LOG "nubo.network.port_forwardings"

static const struct nb_net_attr pf_attrs[] = {
    {"external_port", NB_A_ANY, true, true, true, false, 0},
    {"internal_port", NB_A_ANY, true, true, true, false, 0},
    {"internal_ip_address", NB_A_IP, true, true, true, false, 0},
    {"protocol", NB_A_STR, true, true, true, false, 0},
    {"internal_port_id", NB_A_UUID, true, true, true, false, 0},
    {"description", NB_A_STR, true, true, false, false, 255},
    {NULL, 0, false, false, false, false, 0},
};

static const char *const protocols[] = {"tcp", "udp", "udplite", "sctp", "dccp", NULL};

static int bad_pf(struct nb_ctx *ctx, const char *msg)
{
    return nb_error(ctx, 400, "BadRequest", "Bad port_forwarding request: %s.", msg);
}

/* convert_to_int + type:range [1, 65535] of external_port/internal_port. */
static int read_port(struct nb_ctx *ctx, const json_t *body, const char *key, long long *out)
{
    json_t *v = json_object_get(body, key);
    if (!v)
        return 0;
    char *end = NULL;
    long long n = json_is_integer(v)  ? json_integer_value(v)
                  : json_is_string(v) ? strtoll(json_string_value(v), &end, 10)
                                      : 0;
    if ((!json_is_integer(v) && !json_is_string(v)) ||
        (end && (*end || end == json_string_value(v)))) {
        _cleanup_free_ char *t = json_is_string(v) ? strdup(json_string_value(v)) : nb_json_dump(v);
        return nb_error(ctx, 400, "InvalidInput",
                        "Invalid input for operation: '%s' is not an integer.", t);
    }
    if (n < 1 || n > 65535)
        return nb_error(ctx, 400, "HTTPBadRequest",
                        "Invalid input for %s. Reason: '%lld' is too %s - must be %s '%s'.", key, n,
                        n < 1 ? "small" : "large", n < 1 ? "at least" : "no larger than",
                        n < 1 ? "1" : "65535");
    *out = n;
    return 0;
}

static int check_protocol(struct nb_ctx *ctx, const json_t *body)
{
    const char *p = nb_json_str(body, "protocol");
    if (!p)
        return 0;
    for (int i = 0; protocols[i]; i++)
        if (!strcmp(protocols[i], p))
            return 0;
    return nb_error(ctx, 400, "HTTPBadRequest",
                    "Invalid input for protocol. Reason: %s is not in valid_values.", p);
}

/* --- views ------------------------------------------------------------------- */

static json_t *pf_view(const json_t *row)
{
    const char *sock = nb_json_str(row, "socket"), *colon = sock ? strrchr(sock, ':') : NULL;
    _cleanup_free_ char *ip = colon ? strndup(sock, (size_t)(colon - sock)) : strdup("");
    return json_pack("{s:s, s:I, s:I, s:s, s:s, s:s, s:s}", "id", nb_json_str(row, "id"),
                     "external_port", (json_int_t)nb_json_int(row, "external_port", 0),
                     "internal_port", (json_int_t)(colon ? atoll(colon + 1) : 0),
                     "internal_ip_address", ip, "protocol", nb_json_str(row, "protocol"),
                     "internal_port_id", nb_json_str(row, "internal_neutron_port_id"),
                     "description", nb_json_str(row, "description"));
}

/* The floating IP (visible to ctx) of the request. New ref or NULL. */
static json_t *fip_of(struct nb_ctx *ctx, struct nb_req *req)
{
    const char *id = nb_req_param(req, "floatingip_id");
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

static json_t *pf_load(struct nb_ctx *ctx, const char *fip_id, const char *id)
{
    json_t *row = nb_db_row(nb_net_env->db, ctx,
                            "SELECT * FROM portforwardings WHERE id = ? AND floatingip_id = ?",
                            "ss", id, fip_id);
    if (!row && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, "PortForwardingNotFound", "Port Forwarding %s could not be found.", id);
    return row;
}

/* --- checks ------------------------------------------------------------------ */

/* The router for the internal port's address (as the floating IP's
 * association finds it) into router[NB_UUID_LEN]. */
static int router_for_pf(struct nb_ctx *ctx, const json_t *fip, const char *port_id, const char *ip,
                         char *router)
{
    _cleanup_json_ json_t *has = nb_db_row(nb_net_env->db, ctx,
                                           "SELECT id, floating_ip_address FROM floatingips WHERE "
                                           "fixed_port_id = ?",
                                           "s", port_id);
    if (has)
        return nb_error(ctx, 409, "PortHasBindingFloatingIP",
                        "Cannot create port forwarding to floating IP %s (%s) with port %s using "
                        "fixed IP %s, as that port already has a binding floating IP.",
                        nb_json_str(has, "floating_ip_address"), nb_json_str(has, "id"), port_id,
                        ip);
    if (nb_ctx_failed(ctx))
        return -1;
    if (nb_json_str(fip, "fixed_port_id"))
        return nb_error(ctx, 409, "FloatingIPPortAlreadyAssociated",
                        "Cannot associate floating IP %s (%s) with port %s using fixed IP %s, as "
                        "that fixed IP already has a floating IP on external network %s.",
                        nb_json_str(fip, "floating_ip_address"), nb_json_str(fip, "id"), port_id,
                        ip, nb_json_str(fip, "floating_network_id"));
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    if (nb_net_fip_router_for_address(&sub, fip, port_id, ip, router) == 0)
        return 0;
    if (strcmp(nb_ctx_error_name(&sub), "ExternalGatewayForFloatingIPNotFound"))
        return nb_ctx_forward_error(ctx, &sub);
    return bad_pf(ctx, nb_ctx_message(&sub));
}

/* --- handlers ---------------------------------------------------------------- */

static int write_pf(struct nb_ctx *ctx, const json_t *fip, const char *id, const json_t *body,
                    bool create)
{
    long long ext = 0, in = 0;
    if (read_port(ctx, body, "external_port", &ext) < 0 ||
        read_port(ctx, body, "internal_port", &in) < 0 || check_protocol(ctx, body) < 0)
        return -1;
    const char *port_id = nb_json_str(body, "internal_port_id"),
               *ip = nb_json_str(body, "internal_ip_address");
    char router[NB_UUID_LEN], sock[96], now[32];
    if (router_for_pf(ctx, fip, port_id, ip, router) < 0)
        return -1;
    const char *fr = nb_json_str(fip, "router_id");
    if (fr && strcmp(fr, router))
        return bad_pf(ctx, "The Floating IP had been set on another router");
    snprintf(sock, sizeof(sock), "%s:%lld", ip, in);
    const char *desc = nb_json_str(body, "description");
    int rc = create ? nb_db_exec(nb_net_env->db, ctx,
                                 "INSERT INTO portforwardings (id, floatingip_id, external_port, "
                                 "internal_neutron_port_id, protocol, socket, description, "
                                 "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                 "ssissssss", id, nb_json_str(fip, "id"), ext, port_id,
                                 nb_json_str(body, "protocol"), sock, desc ? desc : "",
                                 nb_net_now(now), now)
                    : nb_db_exec(nb_net_env->db, ctx,
                                 "UPDATE portforwardings SET external_port = ?, "
                                 "internal_neutron_port_id = ?, protocol = ?, socket = ?, "
                                 "description = ?, updated_at = ?, revision_number = "
                                 "revision_number + 1 WHERE id = ?",
                                 "issssss", ext, port_id, nb_json_str(body, "protocol"), sock,
                                 desc ? desc : "", nb_net_now(now), id);
    if (rc < 0) {
        if (nb_ctx_status(ctx) == 409) {
            nb_ctx_clear_error(ctx);
            return bad_pf(ctx, "A duplicate port forwarding entry with same attributes already "
                               "exists");
        }
        return -1;
    }
    return nb_db_exec(nb_net_env->db, ctx,
                      "UPDATE floatingips SET router_id = ?, fixed_port_id = NULL WHERE id = ?",
                      "ss", router, nb_json_str(fip, "id")) < 0
               ? -1
               : 0;
}

/* The body of a PUT over the current forwarding: the full set to check. */
static json_t *merged(const json_t *row, const json_t *body)
{
    json_t *m = pf_view(row);
    json_object_update(m, (json_t *)body);
    return m;
}

static int pf_respond(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, int status,
                      const char *fip_id, const char *id)
{
    _cleanup_json_ json_t *row = pf_load(ctx, fip_id, id);
    return row ? nb_net_show_respond(req, resp, status, "port_forwarding", pf_view(row)) : -1;
}

static int pf_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    /* the parent first: another project's floating IP is 404 whatever the body */
    _cleanup_json_ json_t *parent = fip_of(ctx, req);
    json_t *body = parent ? nb_net_body(ctx, req, "port_forwarding") : NULL;
    if (!body || nb_net_check_attrs(ctx, body, pf_attrs, true) < 0)
        return -1;
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    _cleanup_json_ json_t *fip = fip_of(ctx, req);
    char id[NB_UUID_LEN];
    nb_uuid(id);
    if (!fip || write_pf(ctx, fip, id, body, true) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    NB_INFO(PF_LOG, ctx, NULL, "floating IP %s: port forwarding %s (%s to %s)",
            nb_json_str(fip, "id"), id, nb_json_str(body, "protocol"),
            nb_json_str(body, "internal_ip_address"));
    if (nb_net_notify_agents)
        nb_net_notify_agents(ctx, "port forwarding created");
    return pf_respond(ctx, req, resp, 201, nb_json_str(fip, "id"), id);
}

static int pf_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *fip = fip_of(ctx, req);
    _cleanup_json_ json_t *rows =
        fip ? nb_db_rows(nb_net_env->db, ctx,
                         "SELECT * FROM portforwardings WHERE floatingip_id = ? ORDER BY rowid",
                         "s", nb_json_str(fip, "id"))
            : NULL;
    if (!rows)
        return -1;
    json_t *views = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        json_array_append_new(views, pf_view(r));
    return nb_net_list_respond(ctx, req, resp, "port_forwardings", views);
}

static int pf_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *fip = fip_of(ctx, req);
    return fip ? pf_respond(ctx, req, resp, 200, nb_json_str(fip, "id"),
                            nb_req_param(req, "port_forwarding_id"))
               : -1;
}

static int pf_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "port_forwarding_id");
    _cleanup_json_ json_t *parent = fip_of(ctx, req);
    json_t *body = parent ? nb_net_body(ctx, req, "port_forwarding") : NULL;
    if (!body || nb_net_check_attrs(ctx, body, pf_attrs, false) < 0)
        return -1;
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    _cleanup_json_ json_t *fip = fip_of(ctx, req);
    _cleanup_json_ json_t *row = fip ? pf_load(ctx, nb_json_str(fip, "id"), id) : NULL;
    _cleanup_json_ json_t *all = row ? merged(row, body) : NULL;
    if (!all || write_pf(ctx, fip, id, all, false) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    if (nb_net_notify_agents)
        nb_net_notify_agents(ctx, "port forwarding updated");
    return pf_respond(ctx, req, resp, 200, nb_json_str(fip, "id"), id);
}

static int pf_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "port_forwarding_id");
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    _cleanup_json_ json_t *fip = fip_of(ctx, req);
    _cleanup_json_ json_t *row = fip ? pf_load(ctx, nb_json_str(fip, "id"), id) : NULL;
    /* the last forwarding gone, the floating IP is free of its router */
    if (!row || nb_db_exec(db, ctx, "DELETE FROM portforwardings WHERE id = ?", "s", id) < 0 ||
        nb_db_exec(db, ctx,
                   "UPDATE floatingips SET router_id = NULL WHERE id = ? AND fixed_port_id IS "
                   "NULL AND NOT EXISTS (SELECT 1 FROM portforwardings WHERE floatingip_id = ?)",
                   "ss", nb_json_str(fip, "id"), nb_json_str(fip, "id")) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    if (nb_net_notify_agents)
        nb_net_notify_agents(ctx, "port forwarding deleted");
    return nb_resp_empty(resp, 204);
}

json_t *nb_net_pf_of_router(struct nb_ctx *ctx, const char *router_id)
{
    _cleanup_json_ json_t *rows = nb_db_rows(
        nb_net_env->db, ctx,
        "SELECT p.*, f.floating_ip_address FROM portforwardings p JOIN floatingips f ON f.id = "
        "p.floatingip_id WHERE f.router_id = ? ORDER BY p.rowid",
        "s", router_id);
    if (!rows)
        return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_t *v = pf_view(r);
        json_object_set_new(v, "floating_ip_address",
                            json_string(nb_json_str(r, "floating_ip_address")));
        json_object_del(v, "description");
        json_object_del(v, "internal_port_id");
        json_array_append_new(out, v);
    }
    return out;
}

int nb_net_pf_check_fip_assoc(struct nb_ctx *ctx, const char *fip_id)
{
    long long n =
        nb_db_int(nb_net_env->db, ctx, 0,
                  "SELECT COUNT(*) FROM portforwardings WHERE floatingip_id = ?", "s", fip_id);
    if (n < 0)
        return -1;
    return n ? nb_error(ctx, 409, "FipInUseByPortForwarding",
                        "Floating IP %s in use by Port Forwarding resources.", fip_id)
             : 0;
}

int nb_net_port_forwardings_init(void)
{
    const char *base = "/networking/v2.0/floatingips/{floatingip_id}/port_forwardings";
    const char *one =
        "/networking/v2.0/floatingips/{floatingip_id}/port_forwardings/{port_forwarding_id}";
    nb_http_route("GET", base, pf_list, 0);
    nb_http_route("POST", base, pf_create, 0);
    nb_http_route("GET", one, pf_show, 0);
    nb_http_route("PUT", one, pf_update, 0);
    nb_http_route("DELETE", one, pf_delete, 0);
    nb_net_extension("floating-ip-port-forwarding", "Floating IP Port Forwarding",
                     "Allow port forwarding from floating IP port to an internal port");
    nb_net_extension("fip-pf-description", "Floating IP Port Forwarding new attribute description",
                     "Add a description field to Port Forwarding rules");
    return 0;
}

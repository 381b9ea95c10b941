/* instance.c - what compute asks of the network service (network.h), the
 * way Nova's nova/network/neutron.py asks Neutron: check a server create's
 * requested networks, allocate or bind one port per network when the build
 * reaches its networking step, describe the instance's ports as Nova's
 * network_info model, release them on delete, and name the instances that
 * own ports (for the conductor's recovery of leaked ones).
 *
 * Checks run with the caller's rights (its project's networks, shared ones,
 * or any for an admin); ports are then made with an admin copy of the
 * context that keeps the project, as Nova binds ports with an admin client.
 * A port the user passed is bound (device_id, device_owner, host) and kept
 * on delete (preserve_on_delete); a port nubo made is deleted. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "network/floatingips.h"
#include "network/network.h"
#include "network/ml2_int.h"
#include "network/network_int.h"

#include <stdio.h>
#include <string.h>

#define LOG "nubo.network.instance"

/* Networks ctx may boot on, as Nova's _get_available_networks: the
 * project's own (external ones too) and the shared ones. */
static json_t *usable_networks(struct nb_ctx *ctx)
{
    return nb_db_rows(nb_net_env->db, ctx,
                      "SELECT * FROM networks WHERE project_id = ? OR shared = 1 "
                      "ORDER BY created_at, rowid",
                      "s", ctx->project_id);
}

static bool is_list(const json_t *requested)
{
    return json_is_array(requested);
}

/* The one network "auto"/NULL means: *out NULL when none; 409 when many. */
static int auto_network(struct nb_ctx *ctx, json_t **out)
{
    _cleanup_json_ json_t *nets = usable_networks(ctx);
    *out = NULL;
    if (!nets)
        return -1;
    if (json_array_size(nets) > 1)
        return nb_error(ctx, 409, "NetworkAmbiguous",
                        "Multiple possible networks found, use a Network ID to be more specific.");
    if (json_array_size(nets) == 1)
        *out = json_incref(json_array_get(nets, 0));
    return 0;
}

static int check_network(struct nb_ctx *ctx, const char *id)
{
    _cleanup_json_ json_t *row =
        nb_db_row(nb_net_env->db, ctx, "SELECT * FROM networks WHERE id = ?", "s", id);
    const char *p = row ? nb_json_str(row, "project_id") : NULL;
    if (!row || (!ctx->is_admin && strcmp(p, ctx->project_id) && !nb_json_int(row, "shared", 0)))
        return nb_error(ctx, 400, "NetworkNotFound", "Network %s could not be found.", id);
    long long n = nb_db_int(nb_net_env->db, ctx, 0,
                            "SELECT COUNT(*) FROM subnets WHERE network_id = ?", "s", id);
    if (n == 0)
        return nb_error(ctx, 400, "NetworkRequiresSubnet",
                        "Network %s requires a subnet in order to boot instances on.", id);
    return 0;
}

static int check_port(struct nb_ctx *ctx, const char *id)
{
    _cleanup_json_ json_t *row =
        nb_db_row(nb_net_env->db, ctx, "SELECT * FROM ports WHERE id = ?", "s", id);
    if (!row || (!ctx->is_admin && strcmp(nb_json_str(row, "project_id"), ctx->project_id)))
        return nb_error(ctx, 404, "PortNotFound", "Port id %s could not be found.", id);
    if (*nb_json_str(row, "device_id"))
        return nb_error(ctx, 409, "PortInUse", "Port %s is still in use.", id);
    return 0;
}

int nb_network_validate_request(struct nb_ctx *ctx, const json_t *requested)
{
    if (json_is_string(requested) && !strcmp(json_string_value(requested), "none"))
        return 0;
    if (!is_list(requested)) {
        _cleanup_json_ json_t *net = NULL;
        return auto_network(ctx, &net);
    }
    size_t i;
    json_t *r;
    json_array_foreach (requested, i, r) {
        const char *net = nb_json_str(r, "uuid"), *port = nb_json_str(r, "port"),
                   *ip = nb_json_str(r, "fixed_ip");
        struct nb_ip a;
        if (port && check_port(ctx, port) < 0)
            return -1;
        if (!port && net && check_network(ctx, net) < 0)
            return -1;
        if (ip && nb_ip_parse(ip, &a) < 0)
            return nb_error(ctx, 400, "FixedIpInvalid", "Invalid fixed IP address (%s)", ip);
    }
    return 0;
}

/* --- network_info ----------------------------------------------------------- */

static json_t *ip_entry(const char *address, const char *type, int version)
{
    return json_pack("{s:s, s:s, s:i, s:{}}", "address", address, "type", type, "version", version,
                     "meta");
}

/* The floating addresses of port_id's fixed address ip, as Nova's model
 * lists them under the fixed IP ("type": "floating"). */
static json_t *floating_of(struct nb_ctx *ctx, const char *port_id, const char *ip, int version)
{
    _cleanup_json_ json_t *addrs = nb_net_fip_addresses(ctx, port_id, ip);
    json_t *out = json_array();
    size_t i;
    json_t *a;
    json_array_foreach (addrs, i, a)
        json_array_append_new(out, ip_entry(json_string_value(a), "floating", version));
    return out;
}

/* Nova's Subnet model for one subnet row and the port's addresses in it. */
static json_t *subnet_model(struct nb_ctx *ctx, const char *port_id, const json_t *subnet,
                            const json_t *fixed_ips)
{
    int version = (int)nb_json_int(subnet, "ip_version", 4);
    const char *gw = nb_json_str(subnet, "gateway_ip");
    json_t *gateway =
        json_pack("{s:o, s:s, s:i, s:{}}", "address", gw ? json_string(gw) : json_null(), "type",
                  "gateway", "version", version, "meta");
    json_t *dns = json_array(), *ips = json_array(), *routes = json_array();
    _cleanup_json_ json_t *dns_in = nb_json_parse(nb_json_str(subnet, "dns_nameservers"));
    _cleanup_json_ json_t *routes_in = nb_json_parse(nb_json_str(subnet, "host_routes"));
    size_t i;
    json_t *d;
    json_array_foreach (dns_in, i, d)
        json_array_append_new(dns, ip_entry(json_string_value(d), "dns", version));
    json_array_foreach (routes_in, i, d)
        json_array_append_new(
            routes, json_pack("{s:s, s:o, s:{}}", "cidr", nb_json_str(d, "destination"), "gateway",
                              ip_entry(nb_json_str(d, "nexthop"), "gateway", version), "meta"));
    json_array_foreach (fixed_ips, i, d)
        if (!strcmp(nb_json_str(d, "subnet_id"), nb_json_str(subnet, "id"))) {
            json_t *e = ip_entry(nb_json_str(d, "ip_address"), "fixed", version);
            json_object_set_new(e, "floating_ips",
                                floating_of(ctx, port_id, nb_json_str(d, "ip_address"), version));
            json_array_append_new(ips, e);
        }
    return json_pack("{s:s, s:i, s:o, s:o, s:o, s:o, s:{s:b}}", "cidr", nb_json_str(subnet, "cidr"),
                     "version", version, "gateway", gateway, "dns", dns, "ips", ips, "routes",
                     routes, "meta", "dhcp_server", (int)nb_json_int(subnet, "enable_dhcp", 1));
}

/* Nova's VIF model of one port view. New ref or NULL. */
static json_t *vif_model(struct nb_ctx *ctx, const json_t *port, bool preserve)
{
    const char *id = nb_json_str(port, "id"), *net_id = nb_json_str(port, "network_id");
    _cleanup_json_ json_t *net =
        nb_db_row(nb_net_env->db, ctx, "SELECT * FROM networks WHERE id = ?", "s", net_id);
    _cleanup_json_ json_t *subnets = nb_net_subnet_rows(ctx, net_id);
    if (!net || !subnets)
        return NULL;
    json_t *fixed = json_object_get(port, "fixed_ips"), *models = json_array();
    size_t i;
    json_t *s, *f;
    json_array_foreach (subnets, i, s) {
        bool has = false;
        size_t j;
        json_array_foreach (fixed, j, f)
            has |= !strcmp(nb_json_str(f, "subnet_id"), nb_json_str(s, "id"));
        if (has)
            json_array_append_new(models, subnet_model(ctx, id, s, fixed));
    }
    char devname[16], bridge[16];
    snprintf(devname, sizeof(devname), "tap%.11s", id);
    if (!strcmp(nb_json_str(port, "binding:vif_type") ? nb_json_str(port, "binding:vif_type") : "",
                "bridge")) { /* linuxbridge: the agent's brq bridge */
        snprintf(bridge, sizeof(bridge), "brq%.11s", net_id);
        return json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:b, s:{s:s, s:s, s:s, s:o, s:{s:s, "
                         "s:I}}, s:{s:b}}",
                         "id", id, "address", nb_json_str(port, "mac_address"), "type", "bridge",
                         "devname", devname, "vnic_type", "normal", "active",
                         !strcmp(nb_json_str(port, "status"), "ACTIVE"), "preserve_on_delete",
                         preserve, "network", "id", net_id, "label", nb_json_str(net, "name"),
                         "bridge", bridge, "subnets", models, "meta", "tenant_id",
                         nb_json_str(net, "project_id"), "mtu", nb_json_int(net, "mtu", 1500),
                         "details", "port_filter", 1);
    }
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:b, s:{s:s, s:s, s:s, s:o, s:{s:s, s:I}}, "
                     "s:{s:b, s:b}}",
                     "id", id, "address", nb_json_str(port, "mac_address"), "type", "ovs",
                     "devname", devname, "vnic_type", "normal", "active", 1, "preserve_on_delete",
                     preserve, "network", "id", net_id, "label", nb_json_str(net, "name"), "bridge",
                     "br-int", "subnets", models, "meta", "tenant_id",
                     nb_json_str(net, "project_id"), "mtu", nb_json_int(net, "mtu", 1500),
                     "details", "port_filter", 1, "ovs_hybrid_plug", 0);
}

json_t *nb_network_info_for_instance(struct nb_ctx *ctx, const char *instance_uuid)
{
    _cleanup_json_ json_t *rows = nb_db_rows(nb_net_env->db, ctx,
                                             "SELECT * FROM ports WHERE device_id = ? ORDER BY "
                                             "created_at, rowid",
                                             "s", instance_uuid);
    if (!rows)
        return NULL;
    struct nb_ctx admin; /* reads the port views with admin rights */
    nb_ctx_child(&admin, ctx);
    admin.is_admin = true;
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        _cleanup_json_ json_t *view = nb_net_port_view(&admin, r);
        json_t *vif = vif_model(ctx, view, nb_json_int(r, "preserve_on_delete", 0));
        if (!vif) {
            json_decref(out);
            if (!nb_ctx_failed(ctx))
                nb_error(ctx, 500, NULL, "Cannot describe port %s of instance %s.",
                         nb_json_str(r, "id"), instance_uuid);
            return NULL;
        }
        json_array_append_new(out, vif);
    }
    return out;
}

json_t *nb_network_interface_attachments(struct nb_ctx *ctx, const char *instance_uuid)
{
    _cleanup_json_ json_t *rows = nb_db_rows(nb_net_env->db, ctx,
                                             "SELECT * FROM ports WHERE device_id = ? ORDER BY "
                                             "created_at, rowid",
                                             "s", instance_uuid);
    if (!rows)
        return NULL;
    struct nb_ctx admin;
    nb_ctx_child(&admin, ctx);
    admin.is_admin = true;
    json_t *out = json_array();
    size_t i, k;
    json_t *r, *f;
    json_array_foreach (rows, i, r) {
        _cleanup_json_ json_t *view = nb_net_port_view(&admin, r);
        json_t *ips = json_array();
        json_array_foreach (json_object_get(view, "fixed_ips"), k, f)
            json_array_append_new(ips, json_pack("{s:s?, s:s?}", "subnet_id",
                                                 nb_json_str(f, "subnet_id"), "ip_address",
                                                 nb_json_str(f, "ip_address")));
        json_array_append_new(out, json_pack("{s:s?, s:o, s:s?, s:s?, s:s?}", "port_state",
                                             nb_json_str(view, "status"), "fixed_ips", ips,
                                             "port_id", nb_json_str(r, "id"), "net_id",
                                             nb_json_str(r, "network_id"), "mac_addr",
                                             nb_json_str(r, "mac_address")));
    }
    return out;
}

/* --- allocate / deallocate --------------------------------------------------- */

/* An admin child of ctx acting for ctx's project (its own error slot: the
 * caller forwards it with nb_ctx_forward_error). */
static void elevate(const struct nb_ctx *ctx, struct nb_ctx *admin)
{
    nb_ctx_child(admin, ctx);
    admin->is_admin = true;
}

/* Binds the user's port to the instance. */
static int bind_port(struct nb_ctx *ctx, const char *port_id, const char *instance_uuid,
                     const char *owner, const char *host)
{
    char now[32];
    const char *vif_type = nb_bind_vif_type(ctx, host);
    int n = nb_db_exec(nb_net_env->db, ctx,
                       "UPDATE ports SET device_id = ?, device_owner = ?, binding_host_id = ?, "
                       "binding_vif_type = ?, status = ?, preserve_on_delete = 1, "
                       "updated_at = ?, revision_number = revision_number + 1 WHERE id = ? AND "
                       "device_id = ''",
                       "sssssss", instance_uuid, owner, host ? host : "", vif_type,
                       nb_bind_status(vif_type), nb_net_now(now), port_id);
    if (n == 0)
        return nb_error(ctx, 409, "PortInUse", "Port %s is still in use.", port_id);
    return n < 0 ? -1 : 0;
}

/* Makes a port on net_id for the instance; its id into made. */
static int make_port(struct nb_ctx *ctx, const char *net_id, const char *ip,
                     const char *instance_uuid, const char *owner, const char *host,
                     const json_t *groups, json_t *made)
{
    struct nb_ctx admin;
    elevate(ctx, &admin);
    json_t *body = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "network_id", net_id, "device_id",
                             instance_uuid, "device_owner", owner, "binding:host_id",
                             host ? host : "", "tenant_id", ctx->project_id, "name", "");
    if (ip)
        json_object_set_new(body, "fixed_ips", json_pack("[{s:s}]", "ip_address", ip));
    if (groups)
        json_object_set(body, "security_groups", (json_t *)groups);
    json_t *view = nb_net_port_create(&admin, body);
    json_decref(body);
    if (!view)
        return nb_ctx_forward_error(ctx, &admin);
    json_array_append_new(made, json_string(nb_json_str(view, "id")));
    json_decref(view);
    return 0;
}

/* Removes the ports made so far (after a failure). */
static void undo(struct nb_ctx *ctx, const json_t *made)
{
    struct nb_ctx admin;
    nb_ctx_init_system(&admin, ctx->request_id);
    size_t i;
    json_t *id;
    json_array_foreach (made, i, id)
        if (json_is_string(id))
            nb_net_port_delete(&admin, json_string_value(id));
}

static int allocate_all(struct nb_ctx *ctx, const char *instance_uuid, const char *host,
                        const char *owner, const json_t *requested, const json_t *groups,
                        json_t *made)
{
    if (json_is_string(requested) && !strcmp(json_string_value(requested), "none"))
        return 0;
    if (!is_list(requested)) {
        _cleanup_json_ json_t *net = NULL;
        if (auto_network(ctx, &net) < 0)
            return -1;
        return net ? make_port(ctx, nb_json_str(net, "id"), NULL, instance_uuid, owner, host,
                               groups, made)
                   : 0;
    }
    size_t i;
    json_t *r;
    json_array_foreach (requested, i, r) {
        const char *net = nb_json_str(r, "uuid"), *port = nb_json_str(r, "port");
        int rc;
        if (port) {
            if ((rc = check_port(ctx, port)) == 0 &&
                (rc = bind_port(ctx, port, instance_uuid, owner, host)) == 0)
                json_array_append_new(made, json_pack("{s:s}", "bound", port));
        } else {
            rc = check_network(ctx, net);
            if (rc == 0)
                rc = make_port(ctx, net, nb_json_str(r, "fixed_ip"), instance_uuid, owner, host,
                               groups, made);
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* Unbinds a port the user passed (kept, as Nova's preserve_on_delete). */
static int unbind_port(struct nb_ctx *ctx, const char *port_id)
{
    char now[32];
    return nb_db_exec(nb_net_env->db, ctx,
                      "UPDATE ports SET device_id = '', device_owner = '', binding_host_id = '', "
                      "binding_vif_type = 'unbound', status = 'DOWN', preserve_on_delete = 0, "
                      "updated_at = ?, revision_number = revision_number + 1 WHERE id = ?",
                      "ss", nb_net_now(now), port_id) < 0
               ? -1
               : 0;
}

/* Takes back what allocate_all did: binds undone, ports made deleted. */
static void release(struct nb_ctx *ctx, const json_t *made)
{
    size_t i;
    json_t *m;
    json_array_foreach (made, i, m)
        if (json_is_object(m))
            unbind_port(ctx, nb_json_str(m, "bound"));
    undo(ctx, made);
}

/* Nova's PortBindingFailed for the first of the instance's ports whose
 * host's agent is dead (vif_type binding_failed). 0/-1. */
static int binding_failed(struct nb_ctx *ctx, const char *instance_uuid)
{
    _cleanup_json_ json_t *row =
        nb_db_row(nb_net_env->db, ctx,
                  "SELECT id FROM ports WHERE device_id = ? AND binding_vif_type = "
                  "'binding_failed' ORDER BY created_at, rowid",
                  "s", instance_uuid);
    if (!row)
        return nb_ctx_failed(ctx) ? -1 : 0;
    return nb_error(ctx, 400, "PortBindingFailed",
                    "Binding failed for port %s, please check neutron logs for more information.",
                    nb_json_str(row, "id"));
}

/* The ids of the security groups the server asked for by name (or id), in
 * the server's project, as Nova's _process_security_groups: "default" is
 * the project's default group, an unknown one is 400. NULL in *ids when
 * none was named, or only "default" (Nova's _clean_security_groups: the
 * port then gets the default group from the network service, which gives
 * none on a network without port security). 0/-1. */
static int resolve_groups(struct nb_ctx *ctx, const json_t *names, json_t **ids)
{
    *ids = NULL;
    const char *only =
        json_array_size(names) == 1 ? json_string_value(json_array_get(names, 0)) : NULL;
    if (!json_array_size(names) || (only && !strcmp(only, "default")))
        return 0;
    json_t *out = json_array();
    size_t i;
    json_t *n;
    json_array_foreach (names, i, n) {
        const char *name = json_string_value(n);
        _cleanup_json_ json_t *row =
            name ? nb_db_row(nb_net_env->db, ctx,
                             "SELECT id FROM securitygroups WHERE project_id = ? AND (id = ? OR "
                             "name = ?) ORDER BY id = ? DESC",
                             "ssss", ctx->project_id, name, name, name)
                 : NULL;
        if (row) {
            json_array_append_new(out, json_string(nb_json_str(row, "id")));
            continue;
        }
        json_t *def = NULL;
        if (!nb_ctx_failed(ctx) && name && !strcmp(name, "default") &&
            nb_net_hooks.port_security_groups)
            def = nb_net_hooks.port_security_groups(ctx, ctx->project_id, NULL);
        if (!def) {
            json_decref(out);
            return nb_ctx_failed(ctx) ? -1
                                      : nb_error(ctx, 400, "SecurityGroupNotFound",
                                                 "Security group %s not found.", name ? name : "");
        }
        json_array_extend(out, def);
        json_decref(def);
    }
    *ids = out;
    return 0;
}

int nb_network_allocate_for_instance(struct nb_ctx *ctx, const char *instance_uuid,
                                     const char *host, const char *az, const json_t *requested,
                                     json_t **network_info)
{
    return nb_network_allocate_for_instance_sg(ctx, instance_uuid, host, az, requested, NULL,
                                               network_info);
}

int nb_network_allocate_for_instance_sg(struct nb_ctx *ctx, const char *instance_uuid,
                                        const char *host, const char *az, const json_t *requested,
                                        const json_t *security_groups, json_t **network_info)
{
    *network_info = NULL;
    _cleanup_free_ char *owner = nb_strdup_printf("compute:%s", az && *az ? az : "nova");
    _cleanup_json_ json_t *made = json_array();
    _cleanup_json_ json_t *groups = NULL;
    if (resolve_groups(ctx, security_groups, &groups) < 0 ||
        allocate_all(ctx, instance_uuid, host, owner, requested, groups, made) < 0) {
        release(ctx, made);
        NB_WARN(LOG, ctx, instance_uuid, "port allocation failed: %s", nb_ctx_message(ctx));
        return -1;
    }
    if (binding_failed(ctx, instance_uuid) < 0) {
        release(ctx, made);
        NB_WARN(LOG, ctx, instance_uuid, "%s", nb_ctx_message(ctx));
        nb_net_notify(ctx, "port binding failed");
        return -1;
    }
    *network_info = nb_network_info_for_instance(ctx, instance_uuid);
    if (!*network_info) {
        if (!nb_ctx_failed(ctx))
            nb_error(ctx, 500, NULL, "Cannot describe the ports of instance %s.", instance_uuid);
        release(ctx, made);
        return -1;
    }
    NB_INFO(LOG, ctx, instance_uuid, "allocated %zu port(s) on host %s",
            json_array_size(*network_info), host ? host : "");
    nb_net_notify(ctx, "ports allocated");
    return 0;
}

int nb_network_deallocate_for_instance(struct nb_ctx *ctx, const char *instance_uuid)
{
    _cleanup_json_ json_t *rows = nb_db_rows(
        nb_net_env->db, ctx, "SELECT id, preserve_on_delete FROM ports WHERE device_id = ?", "s",
        instance_uuid);
    if (!rows)
        return -1;
    struct nb_ctx admin;
    nb_ctx_init_system(&admin, ctx->request_id);
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *id = nb_json_str(r, "id");
        int rc = nb_json_int(r, "preserve_on_delete", 0) ? unbind_port(ctx, id)
                                                         : nb_net_port_delete(&admin, id);
        if (rc < 0 && nb_ctx_status(&admin) != 404)
            return nb_ctx_forward_error(ctx, &admin);
        nb_ctx_clear_error(&admin); /* a 404: that port is gone already */
    }
    if (json_array_size(rows)) {
        NB_INFO(LOG, ctx, instance_uuid, "released %zu port(s)", json_array_size(rows));
        nb_net_notify(ctx, "ports released");
    }
    return 0;
}

json_t *nb_network_port_devices(struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx,
                   "SELECT DISTINCT device_id FROM ports WHERE device_owner LIKE 'compute:%' AND "
                   "device_id IS NOT NULL ORDER BY device_id",
                   "");
    return nb_json_strings(rows, "device_id");
}

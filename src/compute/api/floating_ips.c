/* floating_ips.c - Nova's floating-IP proxy in front of the Networking
 * service (nova/api/openstack/compute/floating_ips.py and
 * floating_ip_pools.py over nova/network/neutron.py): /os-floating-ips
 * (list, show, allocate, release) and /os-floating-ip-pools, which Nova
 * removed at 2.36 (a bare 404 from then on), and the addFloatingIp /
 * removeFloatingIp server actions, removed at 2.44.
 *
 * Floating IPs live in the network module (nb_network_fip_*); this file
 * turns Nova's requests into Neutron's and Neutron's views into Nova's: a
 * floating IP is {"id", "ip", "pool" (its network's name, or id), "fixed_ip",
 * "instance_id" (the associated port's device_id, or null)}. A pool is an
 * external network; allocating without one uses [neutron]
 * default_floating_pool ("nova"). Policy: os_compute_api:os-floating-ips:*,
 * PROJECT_READER_OR_ADMIN for list and show, PROJECT_MEMBER_OR_ADMIN
 * otherwise; os_compute_api:os-floating-ip-pools is anyone's. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/proxy.h"
#include "compute/api/server_actions.h"
#include "compute/api/server_addresses.h"
#include "compute/api/validate.h"
#include "network/network.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#define FIP_RULE "os_compute_api:os-floating-ips:"
/* The actions' last microversion (2.43). */
#define ACTION_MAX_MINOR 43

static int policy(struct nb_ctx *ctx, const char *what, bool read, const char *project)
{
    return nb_proxy_policy(ctx, FIP_RULE, what, read, project);
}

/* --- views ------------------------------------------------------------------ */

/* The pool name of network net_id among pools ([{"id", "name"}]): its
 * name, or its id when it has none. Borrowed. */
static const char *pool_name(const json_t *pools, const char *net_id)
{
    size_t i;
    json_t *p;
    json_array_foreach (pools, i, p)
        if (net_id && !strcmp(nb_json_str(p, "id"), net_id)) {
            const char *n = nb_json_str(p, "name");
            return n && *n ? n : net_id;
        }
    return net_id;
}

/* _translate_floating_ip_view's inner object. New reference. */
static json_t *fip_view(const json_t *fip, const json_t *pools)
{
    const json_t *pd = json_object_get(fip, "port_details");
    const char *device = json_is_object(pd) ? nb_json_str(pd, "device_id") : NULL;
    return json_pack("{s:s?, s:s?, s:s?, s:s?, s:s?}", "id", nb_json_str(fip, "id"), "ip",
                     nb_json_str(fip, "floating_ip_address"), "pool",
                     pool_name(pools, nb_json_str(fip, "floating_network_id")), "fixed_ip",
                     nb_json_str(fip, "fixed_ip_address"), "instance_id", device);
}

static int respond_one(struct nb_ctx *ctx, struct nb_resp *resp, int status, const json_t *fip)
{
    _cleanup_json_ json_t *pools = nb_network_fip_pools(ctx);
    if (!pools)
        return -1;
    return nb_resp_json(resp, status, json_pack("{s:o}", "floating_ip", fip_view(fip, pools)));
}

/* _get_floating_ip_by_address: the one floating IP of that address ctx
 * sees. New reference, or NULL after 404 FloatingIpNotFoundForAddress /
 * 409 FloatingIpMultipleFoundForAddress. */
static json_t *fip_by_address(struct nb_ctx *ctx, const char *address)
{
    _cleanup_json_ json_t *all = nb_network_fip_list(ctx, NULL);
    if (!all)
        return NULL;
    json_t *found = NULL;
    size_t i, n = 0;
    json_t *f;
    json_array_foreach (all, i, f)
        if (address && *address && !strcmp(nb_json_str(f, "floating_ip_address"), address)) {
            found = f;
            n++;
        }
    if (!n) {
        nb_error(ctx, 404, NULL, "Floating IP not found for address %s.", address ? address : "");
        return NULL;
    }
    if (n > 1) {
        nb_error(ctx, 409, NULL, "Multiple floating IPs are found for address %s.", address);
        return NULL;
    }
    return json_incref(found);
}

/* --- /os-floating-ips, /os-floating-ip-pools ---------------------------------- */

static int do_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)req;
    if (nb_proxy_check_version(ctx, NB_PROXY_MAX_MINOR) < 0 ||
        policy(ctx, "list", true, ctx->project_id) < 0)
        return -1;
    _cleanup_json_ json_t *fips = nb_network_fip_list(ctx, ctx->project_id);
    _cleanup_json_ json_t *pools = fips ? nb_network_fip_pools(ctx) : NULL;
    if (!pools)
        return -1;
    json_t *list = json_array();
    size_t i;
    json_t *f;
    json_array_foreach (fips, i, f)
        json_array_append_new(list, fip_view(f, pools));
    return nb_resp_json(resp, 200, json_pack("{s:o}", "floating_ips", list));
}

/* get_floating_ip: Nova's 404 for any failure to find it. */
static json_t *path_fip(struct nb_ctx *ctx, struct nb_req *req)
{
    const char *id = nb_req_param(req, "floating_ip_id");
    json_t *fip = nb_network_fip_show(ctx, id);
    if (!fip && nb_ctx_status(ctx) == 404) {
        nb_ctx_clear_error(ctx);
        nb_error(ctx, 404, NULL, "Floating IP not found for ID %s", id);
    }
    return fip;
}

static int do_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_proxy_check_version(ctx, NB_PROXY_MAX_MINOR) < 0 ||
        policy(ctx, "show", true, ctx->project_id) < 0)
        return -1;
    _cleanup_json_ json_t *fip = path_fip(ctx, req);
    return fip ? respond_one(ctx, resp, 200, fip) : -1;
}

/* _get_floating_ip_pool_id_by_name_or_id into id[NB_UUID_LEN]. 0/-1. */
static int pool_id(struct nb_ctx *ctx, const char *name_or_id, char *id)
{
    _cleanup_json_ json_t *pools = nb_network_fip_pools(ctx);
    if (!pools)
        return -1;
    bool by_id = nb_is_uuid(name_or_id);
    size_t i, n = 0;
    json_t *p;
    json_array_foreach (pools, i, p) {
        const char *v = nb_json_str(p, by_id ? "id" : "name");
        if (v && !strcmp(v, name_or_id)) {
            nb_strlcpy(id, nb_json_str(p, "id"), NB_UUID_LEN);
            n++;
        }
    }
    if (!n)
        return nb_error(ctx, 404, NULL, "Floating IP pool not found.");
    if (n > 1)
        return nb_error(ctx, 500, NULL, "Multiple floating IP pools matches found for name '%s'",
                        name_or_id);
    return 0;
}

static int do_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_proxy_check_version(ctx, NB_PROXY_MAX_MINOR) < 0 ||
        policy(ctx, "create", false, ctx->project_id) < 0)
        return -1;
    json_t *body = req->json, *pv = json_is_object(body) ? json_object_get(body, "pool") : NULL;
    const char *given = json_is_string(pv) && *json_string_value(pv) ? json_string_value(pv) : NULL;
    const char *pool = given ? given : nb_conf_str("neutron", "default_floating_pool", "nova");
    char id[NB_UUID_LEN];
    /* a pool that is no string names no network */
    bool truthy = json_is_true(pv) || (json_is_integer(pv) && json_integer_value(pv)) ||
                  (json_is_real(pv) && json_real_value(pv) != 0) ||
                  (json_is_array(pv) && json_array_size(pv)) ||
                  (json_is_object(pv) && json_object_size(pv));
    if (truthy)
        return nb_error(ctx, 404, NULL, "Floating IP pool not found.");
    if (pool_id(ctx, pool, id) < 0)
        return -1;
    _cleanup_json_ json_t *nbody = json_pack("{s:s}", "floating_network_id", id);
    _cleanup_json_ json_t *fip = nb_network_fip_create(ctx, nbody);
    if (fip)
        return respond_one(ctx, resp, 200, fip);
    const char *name = nb_ctx_error_name(ctx);
    if (!strcmp(name, "ExternalIpAddressExhausted") ||
        !strcmp(name, "IpAddressGenerationFailure")) {
        nb_ctx_clear_error(ctx);
        return given ? nb_error(ctx, 404, NULL, "No more floating IPs in pool %s.", given)
                     : nb_error(ctx, 404, NULL, "No more floating IPs available.");
    }
    if (!strcmp(name, "OverQuota")) {
        nb_ctx_clear_error(ctx);
        return given ? nb_error(ctx, 403, NULL, "IP allocation over quota in pool %s.", given)
                     : nb_error(ctx, 403, NULL, "IP allocation over quota.");
    }
    return -1;
}

static int do_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_proxy_check_version(ctx, NB_PROXY_MAX_MINOR) < 0 ||
        policy(ctx, "delete", false, ctx->project_id) < 0)
        return -1;
    _cleanup_json_ json_t *fip = path_fip(ctx, req);
    if (!fip)
        return -1;
    /* get_instance_by_floating_ip_addr: the address must be the only one */
    _cleanup_json_ json_t *same = fip_by_address(ctx, nb_json_str(fip, "floating_ip_address"));
    if (!same || nb_network_fip_delete(ctx, nb_json_str(same, "id")) < 0)
        return -1;
    return nb_resp_empty(resp, 202);
}

static int do_pools(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)req;
    if (nb_proxy_check_version(ctx, NB_PROXY_MAX_MINOR) < 0 ||
        nb_srv_policy(ctx, "os_compute_api:os-floating-ip-pools", true) < 0)
        return -1;
    _cleanup_json_ json_t *pools = nb_network_fip_pools(ctx);
    if (!pools)
        return -1;
    json_t *list = json_array();
    size_t i;
    json_t *p;
    json_array_foreach (pools, i, p)
        json_array_append_new(list,
                              json_pack("{s:s}", "name", pool_name(pools, nb_json_str(p, "id"))));
    return nb_resp_json(resp, 200, json_pack("{s:o}", "floating_ip_pools", list));
}

/* --- addFloatingIp / removeFloatingIp ------------------------------------------ */

static int check_action(struct nb_ctx *ctx, const char *action, const json_t *args, bool add)
{
    if (nb_proxy_check_version(ctx, ACTION_MAX_MINOR) < 0)
        return -1;
    if (!json_is_object(args))
        return nb_srv_bad(ctx, action, args, "is not of type 'object'");
    static const char *const add_keys[] = {"address", "fixed_address", NULL};
    static const char *const remove_keys[] = {"address", NULL};
    char field[64], ffield[64];
    snprintf(field, sizeof(field), "%s/address", action);
    snprintf(ffield, sizeof(ffield), "%s/fixed_address", action);
    json_t *address = nb_res_required(ctx, action, args, "address");
    json_t *fixed = json_object_get(args, "fixed_address");
    if (!address || nb_res_only_keys(ctx, action, args, add ? add_keys : remove_keys) < 0 ||
        nb_srv_check_ip(ctx, field, address, 0) < 0 ||
        (fixed && nb_srv_check_ip(ctx, ffield, fixed, 0) < 0))
        return -1;
    return 0;
}

int nb_srv_check_add_floating_ip(struct nb_ctx *ctx, json_t *args)
{
    return check_action(ctx, "addFloatingIp", args, true);
}

int nb_srv_check_remove_floating_ip(struct nb_ctx *ctx, json_t *args)
{
    return check_action(ctx, "removeFloatingIp", args, false);
}

/* The fixed addresses of a network_info list, in VIF order: a new array. */
json_t *nb_srv_fixed_ips(const json_t *network_info)
{
    json_t *out = json_array();
    size_t i, j, k;
    json_t *vif, *sn, *ip;
    json_array_foreach (network_info, i, vif)
        json_array_foreach (json_object_get(json_object_get(vif, "network"), "subnets"), j, sn)
            json_array_foreach (json_object_get(sn, "ips"), k, ip) {
                const char *t = nb_json_str(ip, "type");
                if (nb_json_str(ip, "address") && (!t || !strcmp(t, "fixed")))
                    json_array_append(out, json_object_get(ip, "address"));
            }
    return out;
}

/* The fixed address to associate with (borrowed from fixed_ips or args),
 * as _add_floating_ip picks it, or NULL after 400. */
static const char *pick_fixed(struct nb_ctx *ctx, const json_t *fixed_ips, const json_t *args,
                              const char *address, const char *uuid)
{
    const char *want = nb_json_str(args, "fixed_address");
    size_t i;
    json_t *f;
    if (want) {
        json_array_foreach (fixed_ips, i, f)
            if (!strcmp(json_string_value(f), want))
                return want;
        nb_error(ctx, 400, NULL, "Specified fixed address not assigned to instance");
        return NULL;
    }
    unsigned char bin[4];
    json_array_foreach (fixed_ips, i, f)
        if (inet_pton(AF_INET, json_string_value(f), bin) == 1)
            return json_string_value(f);
    nb_error(ctx, 400, NULL,
             "Unable to associate floating IP %s to any fixed IPs for instance %s. Instance has "
             "no fixed IPv4 addresses to associate.",
             address, uuid);
    return NULL;
}

/* _get_port_id_by_fixed_address into port[NB_UUID_LEN]. 0, or 1 when no
 * port of the instance has it; -1 after nb_error. */
static int port_of(struct nb_ctx *ctx, const char *uuid, const char *fixed, char *port)
{
    _cleanup_json_ json_t *ifs = nb_network_interface_attachments(ctx, uuid);
    if (!ifs)
        return -1;
    size_t i, j;
    json_t *a, *ip;
    json_array_foreach (ifs, i, a)
        json_array_foreach (json_object_get(a, "fixed_ips"), j, ip)
            if (!strcmp(nb_json_str(ip, "ip_address"), fixed)) {
                nb_strlcpy(port, nb_json_str(a, "port_id"), NB_UUID_LEN);
                return 0;
            }
    return 1;
}

static int add_floating_ip(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    const char *uuid = nb_json_str(inst, "uuid");
    if (policy(ctx, "add", false, nb_json_str(inst, "project_id")) < 0)
        return -1;
    const char *address = nb_json_str(args, "address");
    _cleanup_json_ json_t *nwinfo = nb_srv_network_info(ctx, uuid);
    if (!nwinfo)
        return -1;
    if (!json_array_size(nwinfo))
        return nb_error(ctx, 400, NULL, "Instance network is not ready yet");
    _cleanup_json_ json_t *fixed_ips = nb_srv_fixed_ips(nwinfo);
    if (!json_array_size(fixed_ips))
        return nb_error(ctx, 400, NULL, "No fixed IPs associated to instance");
    const char *fixed = pick_fixed(ctx, fixed_ips, args, address, uuid);
    if (!fixed)
        return -1;
    char port[NB_UUID_LEN];
    int rc = port_of(ctx, uuid, fixed, port);
    if (rc < 0)
        return -1;
    if (rc > 0)
        return nb_error(ctx, 400, NULL,
                        "Unable to associate floating IP %s to fixed IP %s for instance %s. "
                        "Error: Fixed IP not found for address %s.",
                        address, fixed, uuid, fixed);
    _cleanup_json_ json_t *fip = fip_by_address(ctx, address);
    if (!fip) {
        if (nb_ctx_status(ctx) != 404)
            return -1;
        nb_ctx_clear_error(ctx);
        return nb_error(ctx, 404, NULL, "floating IP not found");
    }
    _cleanup_json_ json_t *nbody =
        json_pack("{s:s, s:s}", "port_id", port, "fixed_ip_address", fixed);
    _cleanup_json_ json_t *u = nb_network_fip_update(ctx, nb_json_str(fip, "id"), nbody);
    if (u)
        return 0;
    int st = nb_ctx_status(ctx);
    if (st == 409 || st == 403 || st >= 500)
        return st == 409 ? nb_srv_error_as(ctx, 400, NULL) : -1;
    _cleanup_free_ char *why = strdup(nb_ctx_message(ctx));
    nb_ctx_clear_error(ctx);
    return nb_error(ctx, 400, NULL,
                    "Unable to associate floating IP %s to fixed IP %s for instance %s. Error: %s",
                    address, fixed, uuid, why ? why : "");
}

static int remove_floating_ip(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    const char *uuid = nb_json_str(inst, "uuid");
    const char *address = nb_json_str(args, "address");
    _cleanup_json_ json_t *fip = fip_by_address(ctx, address);
    if (!fip)
        return -1;
    const char *port = nb_json_str(fip, "port_id");
    const json_t *pd = json_object_get(fip, "port_details");
    const char *device = port && json_is_object(pd) ? nb_json_str(pd, "device_id") : NULL;
    _cleanup_json_ json_t *owner = NULL;
    if (device && *device && !(owner = nb_srv_instance_get(ctx, device, false)))
        return -1;
    /* Nova's target is {} when no instance has it: only an admin passes */
    bool ok = owner ? nb_srv_is_member_of(ctx, nb_json_str(owner, "project_id")) : ctx->is_admin;
    if (nb_srv_policy(ctx, FIP_RULE "remove", ok) < 0)
        return -1;
    if (!owner || strcmp(nb_json_str(owner, "uuid"), uuid))
        return nb_error(ctx, 409, NULL, "Floating IP %s is not associated with instance %s.",
                        address, uuid);
    _cleanup_json_ json_t *nbody = json_pack("{s:n}", "port_id");
    _cleanup_json_ json_t *u = nb_network_fip_update(ctx, nb_json_str(fip, "id"), nbody);
    return u ? 0 : -1;
}

int nb_srv_add_floating_ip(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    return nb_proxy_nova_err(ctx, add_floating_ip(ctx, inst, args));
}

int nb_srv_remove_floating_ip(struct nb_ctx *ctx, json_t *inst, json_t *args)
{
    return nb_proxy_nova_err(ctx, remove_floating_ip(ctx, inst, args));
}

NB_PROXY_ROUTE(list)
NB_PROXY_ROUTE(show)
NB_PROXY_ROUTE(create)
NB_PROXY_ROUTE(delete)
NB_PROXY_ROUTE(pools)

int nb_compute_floating_ips_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/os-floating-ips", h_list, 0);
    nb_http_route("POST", "/compute/v2.1/os-floating-ips", h_create, 0);
    nb_http_route("GET", "/compute/v2.1/os-floating-ips/{floating_ip_id}", h_show, 0);
    nb_http_route("DELETE", "/compute/v2.1/os-floating-ips/{floating_ip_id}", h_delete, 0);
    nb_http_route("GET", "/compute/v2.1/os-floating-ip-pools", h_pools, 0);
    return 0;
}

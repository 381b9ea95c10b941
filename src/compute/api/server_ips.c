/* server_ips.c - the addresses of a server: GET /servers/{id}/ips and
 * /servers/{id}/ips/{network_label}, as Nova's ips.py.
 *
 * The addresses are the ones the server view shows (server_views.c builds
 * them from the instance's network info), so the server is rendered with
 * the view and its "addresses" taken: one place decides what a server's
 * addresses are. Nova's ips view shows only "version" and "addr" of each
 * address (no OS-EXT-IPS:type or OS-EXT-IPS-MAC:mac_addr, which only the
 * server view adds). Lookup and policy are the servers API's: another
 * project's server is 404, the rules are os_compute_api:ips:index|show
 * (PROJECT_READER_OR_ADMIN). */
#include "common/cleanup.h"
#include "common/json.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/jsonbuf.h"
#include "compute/api/server_views.h"
#include "compute/api/validate.h"

#include <stdlib.h>
#include <string.h>

/* The addresses object of inst as the server view renders it, or NULL
 * after an error. New ref. */
static json_t *view_addresses(struct nb_ctx *ctx, json_t *inst)
{
    struct nb_srv_view_opts o;
    nb_srv_view_opts_show(ctx, &o);
    _cleanup_json_ json_t *rows = json_pack("[O]", inst);
    struct nb_srv_buf b;
    nb_srv_buf_init(&b);
    int rc = nb_srv_view_write(ctx, rows, &o, &b);
    _cleanup_json_ json_t *view = rc == 0 ? json_loadb(b.s, b.len, 0, NULL) : NULL;
    nb_srv_buf_free(&b);
    if (rc < 0)
        return NULL;
    json_t *addrs = json_object_get(view, "addresses");
    if (!json_is_object(addrs)) {
        nb_error(ctx, 500, NULL, "The view of server %s has no addresses.",
                 nb_json_str(inst, "uuid"));
        return NULL;
    }
    return json_incref(addrs);
}

/* Nova's addresses ViewBuilder.basic without extend_address: the list of
 * one network label reduced to {"version", "addr"}. New array. */
static json_t *basic_list(const json_t *ips)
{
    json_t *out = json_array();
    size_t i;
    json_t *ip;
    json_array_foreach (ips, i, ip) {
        json_t *version = json_object_get(ip, "version");
        json_t *addr = json_object_get(ip, "addr");
        json_array_append_new(out,
                              json_pack("{s:O, s:O}", "version", version ? version : json_null(),
                                        "addr", addr ? addr : json_null()));
    }
    return out;
}

/* The instance of the request with rule checked, and its view addresses
 * in *addrs. NULL after 404/403. */
static json_t *get_addresses(struct nb_ctx *ctx, struct nb_req *req, const char *rule,
                             json_t **addrs)
{
    json_t *inst = nb_srv_instance_get(ctx, nb_req_param(req, "server_id"), false);
    if (!inst)
        return NULL;
    if (nb_srv_policy(ctx, rule, nb_srv_is_reader_of(ctx, nb_json_str(inst, "project_id"))) < 0 ||
        !(*addrs = view_addresses(ctx, inst))) {
        json_decref(inst);
        return NULL;
    }
    return inst;
}

/* GET /servers/{server_id}/ips: {"addresses": {label: [{version, addr}]}}. */
static int h_ips_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *addrs = NULL;
    _cleanup_json_ json_t *inst = get_addresses(ctx, req, "os_compute_api:ips:index", &addrs);
    if (!inst)
        return -1;
    json_t *out = json_object();
    const char *label;
    json_t *ips;
    json_object_foreach (addrs, label, ips) {
        json_object_set_new(out, label, basic_list(ips));
    }
    json_decref(addrs);
    return nb_resp_json(resp, 200, json_pack("{s:o}", "addresses", out));
}

/* GET /servers/{server_id}/ips/{network_label}: {label: [...]}, 404 when
 * the server has no address on that network. */
static int h_ips_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *addrs = NULL;
    _cleanup_json_ json_t *inst = get_addresses(ctx, req, "os_compute_api:ips:show", &addrs);
    if (!inst)
        return -1;
    const char *label = nb_req_param(req, "network_label");
    json_t *ips = json_object_get(addrs, label);
    if (!ips) {
        json_decref(addrs);
        return nb_error(ctx, 404, "itemNotFound", "Instance is not a member of specified network");
    }
    json_t *body = json_object();
    json_object_set_new(body, label, basic_list(ips));
    json_decref(addrs);
    return nb_resp_json(resp, 200, body);
}

int nb_compute_server_ips_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/ips", h_ips_index, 0);
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/ips/{network_label}", h_ips_show, 0);
    return 0;
}

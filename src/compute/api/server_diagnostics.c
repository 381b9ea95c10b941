/* server_diagnostics.c - GET /servers/{id}/diagnostics, as Nova's
 * server_diagnostics.py: the figures the virt driver of the server's host
 * gives (compute.<host> get_diagnostics, a call), before 2.48 the driver's
 * free-form dict, from 2.48 the standard shape. Policy
 * os_compute_api:os-server-diagnostics (admin); 409 when the server has no
 * host or its guest is not running, 501 when the driver has no
 * diagnostics. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/resources.h"
#include "compute/api/server_actions.h"
#include "compute/api/validate.h"
#include "compute/rpc/compute_api.h"

static int h_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *inst = nb_srv_instance_get(ctx, nb_req_param(req, "server_id"), false);
    if (!inst || nb_res_admin(ctx, "os_compute_api:os-server-diagnostics") < 0 ||
        nb_srv_check_host(ctx, inst) < 0)
        return -1;
    const char *uuid = nb_json_str(inst, "uuid"), *host = nb_json_str(inst, "host");
    struct nb_ctx sub; /* same identity and request ID, own error slot */
    nb_ctx_child(&sub, ctx);
    int timeout_ms = (int)nb_conf_int("DEFAULT", "rpc_response_timeout", 60) * 1000;
    _cleanup_json_ json_t *r =
        nb_compute_get_diagnostics(&sub, host, uuid, nb_ctx_mv_ge(ctx, 2, 48), timeout_ms);
    json_t *d = json_object_get(r, "diagnostics");
    if (json_is_object(d))
        return nb_resp_json(resp, 200, json_incref(d));
    if (!r) {
        NB_ERROR("nubo.compute.api", ctx, uuid, "compute service of %s did not answer: %s", host,
                 nb_ctx_message(&sub));
        return nb_error(ctx, 503, NULL,
                        "The compute service of the instance's host is not available.");
    }
    int code = (int)nb_json_int(r, "code", 404);
    if (code == 409)
        return nb_srv_invalid_state(ctx, "get_diagnostics", uuid, "power state",
                                    nb_json_str(r, "state"));
    if (code == 501)
        return nb_error(ctx, 501, NULL, "The requested functionality is not supported.");
    return nb_error(ctx, 404, NULL, "Instance %s could not be found.", uuid);
}

int nb_compute_server_diagnostics_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/diagnostics", h_show, 0);
    return 0;
}

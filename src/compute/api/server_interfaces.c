/* server_interfaces.c - GET /servers/{id}/os-interface[/{port_id}], as
 * Nova's attach_interfaces.py index and show: the server's ports read from
 * the network tables ({"interfaceAttachments": [...]} / {"interfaceAttachment":
 * {...}}; a port that is not the server's is 404). Attaching and detaching
 * (POST, DELETE) are not offered. Policy: os_compute_api:os-attach-interfaces:
 * list|show (PROJECT_READER_OR_ADMIN); another project's server is 404. */
#include "common/cleanup.h"
#include "common/json.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/validate.h"
#include "network/network.h"

#include <string.h>

/* The interfaces of the request's server, rule checked. NULL after an error. */
static json_t *interfaces(struct nb_ctx *ctx, struct nb_req *req, const char *rule)
{
    _cleanup_json_ json_t *inst = nb_srv_instance_get(ctx, nb_req_param(req, "server_id"), false);
    if (!inst ||
        nb_srv_policy(ctx, rule, nb_srv_is_reader_of(ctx, nb_json_str(inst, "project_id"))) < 0)
        return NULL;
    return nb_network_interface_attachments(ctx, nb_json_str(inst, "uuid"));
}

static int h_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *l = interfaces(ctx, req, "os_compute_api:os-attach-interfaces:list");
    if (!l)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "interfaceAttachments", l));
}

static int h_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *l = interfaces(ctx, req, "os_compute_api:os-attach-interfaces:show");
    if (!l)
        return -1;
    const char *port = nb_req_param(req, "port_id");
    size_t i;
    json_t *a;
    json_array_foreach (l, i, a)
        if (!strcmp(nb_json_str(a, "port_id"), port))
            return nb_resp_json(resp, 200, json_pack("{s:O}", "interfaceAttachment", a));
    return nb_error(ctx, 404, "itemNotFound", "Instance %s is not attached to port %s.",
                    nb_req_param(req, "server_id"), port);
}

int nb_compute_server_interfaces_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/os-interface", h_list, 0);
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/os-interface/{port_id}", h_show, 0);
    return 0;
}

/* server_password.c - GET/DELETE /servers/{id}/os-server-password, as
 * Nova's server_password.py: the password the guest posted to the metadata
 * service ({"password": "..."}, "" when none), and its clearing (204).
 * Policy os_compute_api:os-server-password:show|clear; another project's
 * server is 404. */
#include "common/cleanup.h"
#include "common/json.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/validate.h"
#include "compute/metadata/metadata.h"

#include <stdlib.h>

static json_t *server(struct nb_ctx *ctx, struct nb_req *req, const char *rule)
{
    json_t *inst = nb_srv_instance_get(ctx, nb_req_param(req, "server_id"), false);
    if (inst &&
        nb_srv_policy(ctx, rule, nb_srv_is_reader_of(ctx, nb_json_str(inst, "project_id"))) < 0) {
        json_decref(inst);
        return NULL;
    }
    return inst;
}

static int h_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *inst = server(ctx, req, "os_compute_api:os-server-password:show");
    if (!inst)
        return -1;
    char *pw = nb_md_password_get(nb_srv_db(), ctx, nb_json_str(inst, "uuid"));
    if (!pw)
        return -1;
    json_t *body = json_pack("{s:s}", "password", pw);
    free(pw);
    return nb_resp_json(resp, 200, body);
}

static int h_clear(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    _cleanup_json_ json_t *inst = server(ctx, req, "os_compute_api:os-server-password:clear");
    if (!inst || nb_md_password_set(nb_srv_db(), ctx, nb_json_str(inst, "uuid"), "", 0) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

int nb_compute_server_password_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/os-server-password", h_show, 0);
    nb_http_route("DELETE", "/compute/v2.1/servers/{server_id}/os-server-password", h_clear, 0);
    return 0;
}

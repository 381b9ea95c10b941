/* quotas.c - Neutron's quotas API, read side (the "quotas" and
 * "quota_details" extensions): GET /v2.0/quotas/{project_id}, .../default
 * and .../details, so that `openstack quota show` (which asks compute,
 * volume and network) works. The limits are Neutron's [quotas] options
 * (quota_network, quota_subnet, quota_port, quota_router,
 * quota_security_group, quota_security_group_rule, quota_floatingip,
 * quota_subnetpool) with Neutron's defaults; "used" is counted from the
 * project's rows. Per-project overrides (PUT) and enforcement at create are
 * not implemented: PUT and DELETE answer 501 with a message saying so. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/http.h"
#include "common/json.h"
#include "db/db.h"
#include "network/network_int.h"

#include <string.h>

struct quota_res {
    const char *name;   /* Neutron's resource name */
    const char *option; /* [quotas] option */
    long long dflt;     /* Neutron's default */
    const char *table;  /* rows counted for "used"; NULL: none kept */
};

static const struct quota_res resources[] = {
    {"network", "quota_network", 100, "networks"},
    {"subnet", "quota_subnet", 100, "subnets"},
    {"port", "quota_port", 500, "ports"},
    {"router", "quota_router", 10, "routers"},
    {"floatingip", "quota_floatingip", 50, NULL},
    {"security_group", "quota_security_group", 10, "securitygroups"},
    {"security_group_rule", "quota_security_group_rule", 100, "securitygrouprules"},
    {"subnetpool", "quota_subnetpool", -1, "subnetpools"},
};
#define NRES (sizeof(resources) / sizeof(resources[0]))

static long long used(struct nb_ctx *ctx, const struct quota_res *r, const char *project)
{
    if (!r->table)
        return 0;
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) AS n FROM %s WHERE project_id = ?", r->table);
    _cleanup_json_ json_t *rows = nb_db_rows(nb_net_env->db, ctx, sql, "s", project);
    return rows ? nb_json_int(json_array_get(rows, 0), "n", 0) : 0;
}

/* Members may read their own project's quotas; admins any. */
static const char *project_of(struct nb_ctx *ctx, struct nb_req *req)
{
    const char *p = nb_req_param(req, "project_id");
    if (!ctx->is_admin && strcmp(p, ctx->project_id) != 0) {
        nb_error(ctx, 403, "HTTPForbidden",
                 "Non-admin is not authorized to access quotas for another project");
        return NULL;
    }
    return p;
}

static int respond(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, bool details)
{
    const char *project = project_of(ctx, req);
    if (!project)
        return -1;
    json_t *q = json_object();
    for (size_t i = 0; i < NRES; i++) {
        long long limit = nb_conf_int("quotas", resources[i].option, resources[i].dflt);
        if (details)
            json_object_set_new(q, resources[i].name,
                                json_pack("{s:I, s:I, s:i}", "limit", (json_int_t)limit, "used",
                                          (json_int_t)used(ctx, &resources[i], project), "reserved",
                                          0));
        else
            json_object_set_new(q, resources[i].name, json_integer(limit));
    }
    if (nb_ctx_failed(ctx)) {
        json_decref(q);
        return -1;
    }
    return nb_net_show_respond(req, resp, 200, "quota", q);
}

static int quota_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return respond(ctx, req, resp, false);
}

static int quota_details(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return respond(ctx, req, resp, true);
}

static int quota_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (!ctx->is_admin)
        return nb_error(ctx, 403, "HTTPForbidden", "rule:get_quota is disallowed by policy");
    /* only projects with non-default quotas are listed: none can be set */
    return nb_net_list_respond(ctx, req, resp, "quotas", json_array());
}

static int quota_write(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)req;
    (void)resp;
    return nb_error(ctx, 501, "HTTPNotImplemented",
                    "Per-project network quotas cannot be changed in this cloud: the limits are "
                    "the [quotas] options of its configuration.");
}

int nb_net_quotas_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/networking/v2.0/quotas", quota_list, 0);
    nb_http_route("GET", "/networking/v2.0/quotas/{project_id}", quota_show, 0);
    nb_http_route("GET", "/networking/v2.0/quotas/{project_id}/default", quota_show, 0);
    nb_http_route("GET", "/networking/v2.0/quotas/{project_id}/details", quota_details, 0);
    nb_http_route("PUT", "/networking/v2.0/quotas/{project_id}", quota_write, 0);
    nb_http_route("DELETE", "/networking/v2.0/quotas/{project_id}", quota_write, 0);
    nb_net_extension("quotas", "Quota management support",
                     "Expose functions for quotas management");
    nb_net_extension("quota_details", "Quota details management support",
                     "Expose functions for quotas usage statistics per project");
    return 0;
}

/* quotas.c - Neutron's quotas API, read side (the "quotas" and
 * "quota_details" extensions): GET /v2.0/quotas/{project_id}, .../default
 * and .../details, so that `openstack quota show` (which asks compute,
 * volume and network) works. The limits are Neutron's [quotas] options
 * (quota_network, quota_subnet, quota_port, quota_router,
 * quota_security_group, quota_security_group_rule, quota_floatingip,
 * quota_subnetpool) with Neutron's defaults; "used" is counted from the
 * project's rows. PUT sets per-project limits (table quotas, admins only),
 * DELETE returns a project to the defaults, and nb_net_quota_check refuses a
 * create beyond the limit with Neutron's 409 OverQuota. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/http.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "network/network_int.h"

#include <stdlib.h>
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
    {"floatingip", "quota_floatingip", 50, "floatingips"},
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

static const struct quota_res *find_res(const char *name)
{
    for (size_t i = 0; i < NRES; i++)
        if (!strcmp(resources[i].name, name))
            return &resources[i];
    return NULL;
}

/* The project's limit of r: its row in quotas, else the [quotas] option. */
static long long limit_of(struct nb_ctx *ctx, const struct quota_res *r, const char *project)
{
    _cleanup_json_ json_t *row =
        nb_db_row(nb_net_env->db, ctx,
                  "SELECT \"limit\" AS l FROM neutron_quotas WHERE project_id = ? AND resource = ?",
                  "ss", project, r->name);
    if (row)
        return nb_json_int(row, "l", -1);
    return nb_conf_int("quotas", r->option, r->dflt);
}

int nb_net_quota_check(struct nb_ctx *ctx, const char *project, const char *resource)
{
    const struct quota_res *r = find_res(resource);
    if (!r || !project || !*project || ctx->system)
        return 0;
    long long limit = limit_of(ctx, r, project);
    if (nb_ctx_failed(ctx))
        return -1;
    if (limit < 0)
        return 0;
    long long n = used(ctx, r, project);
    if (nb_ctx_failed(ctx))
        return -1;
    if (n + 1 > limit)
        return nb_error(ctx, 409, "OverQuota", "Quota exceeded for resources: ['%s'].", resource);
    return 0;
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

enum { LIMITS, DETAILS, DEFAULTS };

static int respond(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, int mode)
{
    const char *project = project_of(ctx, req);
    if (!project)
        return -1;
    json_t *q = json_object();
    for (size_t i = 0; i < NRES; i++) {
        long long limit = mode == DEFAULTS
                              ? nb_conf_int("quotas", resources[i].option, resources[i].dflt)
                              : limit_of(ctx, &resources[i], project);
        if (mode == DETAILS)
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
    return respond(ctx, req, resp, LIMITS);
}

static int quota_default(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return respond(ctx, req, resp, DEFAULTS);
}

static int quota_details(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return respond(ctx, req, resp, DETAILS);
}

static int quota_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (!ctx->is_admin)
        return nb_error(ctx, 403, "HTTPForbidden", "rule:get_quota is disallowed by policy");
    /* the projects with a non-default limit, each with all its limits */
    _cleanup_json_ json_t *rows =
        nb_db_rows(nb_net_env->db, ctx,
                   "SELECT DISTINCT project_id FROM neutron_quotas ORDER BY project_id", "");
    if (!rows)
        return -1;
    json_t *views = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *p = nb_json_str(r, "project_id");
        json_t *q = json_pack("{s:s, s:s}", "project_id", p, "tenant_id", p);
        for (size_t k = 0; k < NRES; k++)
            json_object_set_new(q, resources[k].name,
                                json_integer(limit_of(ctx, &resources[k], p)));
        json_array_append_new(views, q);
    }
    return nb_net_list_respond(ctx, req, resp, "quotas", views);
}

/* One limit of a PUT body: Neutron's convert_to_int and type:range
 * [-1, 2^31-1]. 0 with *out, -1 after 400. */
static int read_limit(struct nb_ctx *ctx, const char *name, const json_t *v, long long *out)
{
    _cleanup_free_ char *text = json_is_string(v) ? strdup(json_string_value(v)) : nb_json_dump(v);
    char *end = NULL;
    long long n = 0;
    if (json_is_integer(v))
        n = json_integer_value(v);
    else if (json_is_string(v) && *text)
        n = strtoll(text, &end, 10);
    if (!json_is_integer(v) && (!json_is_string(v) || !*text || *end))
        return nb_error(ctx, 400, "InvalidInput",
                        "Invalid input for operation: '%s' is not an integer.", text);
    if (n < -1)
        return nb_error(ctx, 400, "HTTPBadRequest",
                        "Invalid input for %s. Reason: '%lld' is too small - must be at least "
                        "'-1'.",
                        name, n);
    if (n > 2147483647LL)
        return nb_error(ctx, 400, "HTTPBadRequest",
                        "Invalid input for %s. Reason: '%lld' is too large - must be no larger "
                        "than '2147483647'.",
                        name, n);
    *out = n;
    return 0;
}

/* Checks the whole body before anything is written; check_limit: each new
 * limit must not be below the project's usage. */
static int check_body(struct nb_ctx *ctx, const json_t *q, const char *project, bool check_limit)
{
    const char *key;
    json_t *v;
    json_object_foreach ((json_t *)q, key, v) {
        if (!strcmp(key, "force") || !strcmp(key, "check_limit"))
            continue;
        const struct quota_res *r = find_res(key);
        long long n;
        if (!r)
            return nb_error(ctx, 400, "HTTPBadRequest", "Unrecognized attribute(s) '%s'", key);
        if (read_limit(ctx, key, v, &n) < 0)
            return -1;
        long long u = check_limit ? used(ctx, r, project) : 0;
        if (check_limit && n >= 0 && u > n)
            return nb_error(ctx, 400, "HTTPBadRequest",
                            "Quota limit %lld for %s must be greater than or equal to already "
                            "used %lld",
                            n, key, u);
    }
    return 0;
}

static int quota_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (!ctx->is_admin)
        return nb_error(ctx, 403, "PolicyNotAuthorized",
                        "rule:update_quota is disallowed by policy");
    const char *project = nb_req_param(req, "project_id");
    json_t *q = nb_net_body(ctx, req, "quota");
    bool check_limit = false;
    json_t *cl = q ? json_object_get(q, "check_limit") : NULL;
    if (!q ||
        (cl && nb_net_parse_bool(cl, &check_limit) < 0 &&
         nb_error(ctx, 400, "HTTPBadRequest", "Invalid input for check_limit.") < 0) ||
        check_body(ctx, q, project, check_limit) < 0)
        return -1;
    struct nb_db *db = nb_net_env->db;
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    const char *key;
    json_t *v;
    json_object_foreach (q, key, v) {
        long long n;
        char id[NB_UUID_LEN];
        if (!find_res(key) || read_limit(ctx, key, v, &n) < 0)
            continue;
        nb_uuid(id);
        char sql[256];
        nb_db_upsert(db, sql, sizeof(sql),
                     "INSERT INTO neutron_quotas (id, project_id, resource, \"limit\") VALUES "
                     "(?, ?, ?, ?)",
                     "project_id, resource", "\"limit\"", NULL);
        if (nb_db_exec(db, ctx, sql, "sssi", id, project, key, n) < 0) {
            nb_db_rollback(db);
            return -1;
        }
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    return respond(ctx, req, resp, LIMITS);
}

static int quota_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (!ctx->is_admin)
        return nb_error(ctx, 403, "PolicyNotAuthorized",
                        "rule:delete_quota is disallowed by policy");
    if (nb_db_exec(nb_net_env->db, ctx, "DELETE FROM neutron_quotas WHERE project_id = ?", "s",
                   nb_req_param(req, "project_id")) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

int nb_net_quotas_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/networking/v2.0/quotas", quota_list, 0);
    nb_http_route("GET", "/networking/v2.0/quotas/{project_id}", quota_show, 0);
    nb_http_route("GET", "/networking/v2.0/quotas/{project_id}/default", quota_default, 0);
    nb_http_route("GET", "/networking/v2.0/quotas/{project_id}/details", quota_details, 0);
    nb_http_route("PUT", "/networking/v2.0/quotas/{project_id}", quota_update, 0);
    nb_http_route("DELETE", "/networking/v2.0/quotas/{project_id}", quota_delete, 0);
    nb_net_extension("quotas", "Quota management support",
                     "Expose functions for quotas management");
    nb_net_extension("quota_details", "Quota details management support",
                     "Expose functions for quotas usage statistics per project");
    return 0;
}

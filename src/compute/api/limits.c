/* limits.c - GET /compute/v2.1/limits: the project's absolute limits and
 * usage in Nova's names (views/limits.py), filtered per microversion as
 * Nova's LimitsController does; rate limits are always an empty list. */
#include "common/json.h"
#include "compute/api/api.h"
#include "compute/api/quotas.h"
#include "compute/api/validate.h"

#include <string.h>

/* Nova's limit names of each quota resource. */
static const struct {
    int res;
    const char *name;
} limit_names[] = {
    {NB_Q_RAM, "maxTotalRAMSize"},
    {NB_Q_INSTANCES, "maxTotalInstances"},
    {NB_Q_CORES, "maxTotalCores"},
    {NB_Q_KEY_PAIRS, "maxTotalKeypairs"},
    {NB_Q_FLOATING_IPS, "maxTotalFloatingIps"},
    {NB_Q_METADATA_ITEMS, "maxServerMeta"},
    {NB_Q_METADATA_ITEMS, "maxImageMeta"},
    {NB_Q_INJECTED_FILES, "maxPersonality"},
    {NB_Q_INJECTED_FILE_CONTENT_BYTES, "maxPersonalitySize"},
    {NB_Q_SECURITY_GROUPS, "maxSecurityGroups"},
    {NB_Q_SECURITY_GROUP_RULES, "maxSecurityGroupRules"},
    {NB_Q_SERVER_GROUPS, "maxServerGroups"},
    {NB_Q_SERVER_GROUP_MEMBERS, "maxServerGroupMembers"},
};

static const struct {
    int res;
    const char *name;
} used_names[] = {
    {NB_Q_RAM, "totalRAMUsed"},
    {NB_Q_CORES, "totalCoresUsed"},
    {NB_Q_INSTANCES, "totalInstancesUsed"},
    {NB_Q_FLOATING_IPS, "totalFloatingIpsUsed"},
    {NB_Q_SECURITY_GROUPS, "totalSecurityGroupsUsed"},
    {NB_Q_SERVER_GROUPS, "totalServerGroupsUsed"},
};

/* Nova's FILTERED_LIMITS_2_36 / _2_57 by microversion. */
static bool filtered(const struct nb_ctx *ctx, int res)
{
    if (nb_ctx_mv_ge(ctx, 2, 36) && (res == NB_Q_FLOATING_IPS || res == NB_Q_SECURITY_GROUPS ||
                                     res == NB_Q_SECURITY_GROUP_RULES))
        return true;
    if (nb_ctx_mv_ge(ctx, 2, 57) &&
        (res == NB_Q_INJECTED_FILES || res == NB_Q_INJECTED_FILE_CONTENT_BYTES))
        return true;
    return false;
}

static int h_limits(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *q = nb_srv_query_all(req);
    const char *k;
    json_t *v;
    int bad = 0;
    json_object_foreach (q, k, v)
        if (strcmp(k, "tenant_id") && nb_ctx_mv_ge(ctx, 2, 75))
            bad = nb_error(ctx, 400, NULL,
                           "Additional properties are not allowed ('%s' was unexpected)", k);
    json_decref(q);
    if (bad < 0)
        return -1;
    const char *project = ctx->project_id;
    const char *tenant = nb_req_query(req, "tenant_id");
    if (tenant) {
        if (nb_srv_policy(ctx, "os_compute_api:limits:other_project", ctx->is_admin) < 0)
            return -1;
        project = tenant;
    }
    long long lim[NB_Q_COUNT], used[NB_Q_COUNT];
    if (nb_quota_limits(ctx, project, NULL, lim) < 0 ||
        nb_quota_usages(ctx, project, NULL, used) < 0)
        return -1;
    json_t *abs = json_object();
    for (size_t i = 0; i < sizeof(limit_names) / sizeof(limit_names[0]); i++) {
        int r = limit_names[i].res;
        if (filtered(ctx, r))
            continue;
        if (!strcmp(limit_names[i].name, "maxImageMeta") && nb_ctx_mv_ge(ctx, 2, 39))
            continue;
        json_object_set_new(abs, limit_names[i].name, json_integer(lim[r]));
    }
    for (size_t i = 0; i < sizeof(used_names) / sizeof(used_names[0]); i++) {
        int r = used_names[i].res;
        if (!filtered(ctx, r))
            json_object_set_new(abs, used_names[i].name, json_integer(used[r]));
    }
    return nb_resp_json(resp, 200, json_pack("{s:{s:[], s:o}}", "limits", "rate", "absolute", abs));
}

int nb_compute_limits_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/limits", h_limits, 0);
    return 0;
}

/* quotas.c - Nova's quota engine (DbQuotaDriver with counted usage) and
 * /os-quota-sets.
 *
 * Limits come from table quotas (per project, or per user in a project),
 * else from [quota] options, else Nova's defaults. Usage of instances,
 * cores and ram is counted from live instance rows, server groups from
 * instance_groups; the resources Nova only checks at the API (metadata
 * items, injected files) have no usage. The create check
 * (nb_quota_check_instances) runs inside the caller's transaction, so the
 * count and the insert it allows are atomic. */
#include "common/config.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/quotas.h"
#include "compute/api/validate.h"
#include "db/db.h"
#include "identity/identity.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    const char *option; /* [quota] option, NULL: unlimited (-1) */
    long long def;
} resources[NB_Q_COUNT] = {
    [NB_Q_INSTANCES] = {"instances", "instances", 10},
    [NB_Q_CORES] = {"cores", "cores", 20},
    [NB_Q_RAM] = {"ram", "ram", 50 * 1024},
    [NB_Q_METADATA_ITEMS] = {"metadata_items", "metadata_items", 128},
    [NB_Q_INJECTED_FILES] = {"injected_files", "injected_files", 5},
    [NB_Q_INJECTED_FILE_CONTENT_BYTES] = {"injected_file_content_bytes",
                                          "injected_file_content_bytes", 10 * 1024},
    [NB_Q_INJECTED_FILE_PATH_BYTES] = {"injected_file_path_bytes", "injected_file_path_length",
                                       255},
    [NB_Q_KEY_PAIRS] = {"key_pairs", "key_pairs", 100},
    [NB_Q_SERVER_GROUPS] = {"server_groups", "server_groups", 10},
    [NB_Q_SERVER_GROUP_MEMBERS] = {"server_group_members", "server_group_members", 10},
    [NB_Q_FIXED_IPS] = {"fixed_ips", NULL, -1},
    [NB_Q_FLOATING_IPS] = {"floating_ips", NULL, -1},
    [NB_Q_SECURITY_GROUPS] = {"security_groups", NULL, -1},
    [NB_Q_SECURITY_GROUP_RULES] = {"security_group_rules", NULL, -1},
};

const char *nb_quota_name(enum nb_quota_res r)
{
    return resources[r].name;
}

int nb_quota_index(const char *name)
{
    for (int i = 0; i < NB_Q_COUNT; i++)
        if (!strcmp(resources[i].name, name))
            return i;
    return -1;
}

long long nb_quota_default(enum nb_quota_res r)
{
    if (!resources[r].option)
        return -1;
    return nb_conf_int("quota", resources[r].option, (long)resources[r].def);
}

int nb_quota_class_limits(struct nb_ctx *ctx, const char *class_name, long long limits[NB_Q_COUNT])
{
    for (int i = 0; i < NB_Q_COUNT; i++)
        limits[i] = nb_quota_default(i);
    json_t *rows = nb_db_rows(nb_srv_db(), ctx,
                              "SELECT resource, hard_limit FROM quota_classes WHERE "
                              "class_name = ?",
                              "s", class_name);
    if (!rows)
        return -1;
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        int k = nb_quota_index(nb_json_str(r, "resource"));
        if (k >= 0)
            limits[k] = nb_json_int(r, "hard_limit", limits[k]);
    }
    json_decref(rows);
    return 0;
}

int nb_quota_limits(struct nb_ctx *ctx, const char *project_id, const char *user_id,
                    long long limits[NB_Q_COUNT])
{
    if (nb_quota_class_limits(ctx, "default", limits) < 0)
        return -1;
    json_t *rows = nb_db_rows(nb_srv_db(), ctx,
                              "SELECT resource, hard_limit, user_id FROM quotas WHERE "
                              "project_id = ? AND (user_id IS NULL OR user_id = ?) "
                              "ORDER BY user_id IS NOT NULL",
                              "ss", project_id, user_id);
    if (!rows)
        return -1;
    size_t i;
    json_t *r;
    /* project rows first, then the user's own (which win) */
    json_array_foreach (rows, i, r) {
        int k = nb_quota_index(nb_json_str(r, "resource"));
        if (k >= 0)
            limits[k] = nb_json_int(r, "hard_limit", limits[k]);
    }
    json_decref(rows);
    return 0;
}

bool nb_quota_user_has_limits(struct nb_ctx *ctx, const char *project_id, const char *user_id)
{
    return user_id && nb_db_int(nb_srv_db(), ctx, 0,
                                "SELECT COUNT(*) FROM quotas WHERE project_id = ? AND user_id = ? "
                                "AND resource IN ('instances', 'cores', 'ram')",
                                "ss", project_id, user_id) > 0;
}

int nb_quota_usages(struct nb_ctx *ctx, const char *project_id, const char *user_id,
                    long long in_use[NB_Q_COUNT])
{
    memset(in_use, 0, sizeof(long long) * NB_Q_COUNT);
    json_t *row = nb_db_row(nb_srv_db(), ctx,
                            "SELECT COUNT(*) AS n, COALESCE(SUM(vcpus), 0) AS c, "
                            "COALESCE(SUM(memory_mb), 0) AS r FROM instances WHERE "
                            "project_id = ? AND deleted = 0 AND (? IS NULL OR user_id = ?)",
                            "sss", project_id, user_id, user_id);
    if (!row)
        return -1;
    in_use[NB_Q_INSTANCES] = nb_json_int(row, "n", 0);
    in_use[NB_Q_CORES] = nb_json_int(row, "c", 0);
    in_use[NB_Q_RAM] = nb_json_int(row, "r", 0);
    json_decref(row);
    long long groups = nb_db_int(nb_srv_db(), ctx, 0,
                                 "SELECT COUNT(*) FROM instance_groups WHERE project_id = ? AND "
                                 "deleted = 0 AND (? IS NULL OR user_id = ?)",
                                 "sss", project_id, user_id, user_id);
    if (groups < 0)
        return -1;
    in_use[NB_Q_SERVER_GROUPS] = groups;
    return 0;
}

/* Nova's get_headroom for instances, cores and ram; unlimited resources
 * get the headroom the instances allow (as Nova), or "plenty". */
static void headroom(const long long lim[3], const long long used[3], const long long delta[3],
                     long long room[3])
{
    for (int i = 0; i < 3; i++)
        room[i] = lim[i] < 0 ? LLONG_MAX / 4 : lim[i] - used[i];
    for (int i = NB_Q_CORES; i <= NB_Q_RAM; i++) {
        if (lim[i] != -1)
            continue;
        if (delta[i] && delta[NB_Q_INSTANCES])
            room[i] = room[NB_Q_INSTANCES] >= LLONG_MAX / 8
                          ? LLONG_MAX / 4
                          : room[NB_Q_INSTANCES] * delta[i] / delta[NB_Q_INSTANCES];
        else
            room[i] = room[NB_Q_INSTANCES];
    }
}

int nb_quota_instances_allowed(const long long limits[3], const long long used[3], long long vcpus,
                               long long ram, int min_count, int max_count, char *msg,
                               size_t msglen)
{
    long long delta[3] = {max_count, (long long)max_count * vcpus, (long long)max_count * ram};
    /* resources over their limit, in Nova's (sorted) order */
    static const int order[3] = {NB_Q_CORES, NB_Q_INSTANCES, NB_Q_RAM};
    bool over[3] = {false, false, false};
    bool any = false;
    for (int k = 0; k < 3; k++) {
        int i = order[k];
        if (limits[i] >= 0 && used[i] + delta[i] > limits[i])
            over[i] = any = true;
    }
    if (!any)
        return max_count;
    long long room[3];
    headroom(limits, used, delta, room);
    long long allowed = room[NB_Q_INSTANCES];
    if (vcpus)
        allowed = allowed < room[NB_Q_CORES] / vcpus ? allowed : room[NB_Q_CORES] / vcpus;
    if (ram)
        allowed = allowed < room[NB_Q_RAM] / ram ? allowed : room[NB_Q_RAM] / ram;
    if (allowed >= min_count && allowed < max_count)
        return nb_quota_instances_allowed(limits, used, vcpus, ram, min_count, (int)allowed, msg,
                                          msglen);
    /* "Quota exceeded for cores, ram: Requested 4, 2048, but already used
     * 18, 50000 of 20, 51200 cores, ram" */
    char names[64] = "", reqs[128] = "", useds[128] = "", alloweds[128] = "";
    for (int k = 0; k < 3; k++) {
        int i = order[k];
        if (!over[i])
            continue;
        const char *sep = names[0] ? ", " : "";
        char req[48];
        if (i == NB_Q_INSTANCES && min_count != max_count)
            snprintf(req, sizeof(req), "%d-%d", min_count, max_count);
        else
            snprintf(req, sizeof(req), "%lld", delta[i]);
        snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", sep,
                 nb_quota_name(i));
        snprintf(reqs + strlen(reqs), sizeof(reqs) - strlen(reqs), "%s%s", sep, req);
        snprintf(useds + strlen(useds), sizeof(useds) - strlen(useds), "%s%lld", sep,
                 limits[i] - room[i]);
        snprintf(alloweds + strlen(alloweds), sizeof(alloweds) - strlen(alloweds), "%s%lld", sep,
                 limits[i]);
    }
    snprintf(msg, msglen, "Quota exceeded for %s: Requested %s, but already used %s of %s %s",
             names, reqs, useds, alloweds, names);
    return -1;
}

int nb_quota_check_instances(struct nb_ctx *ctx, const char *project_id, const char *user_id,
                             long long vcpus, long long ram, int min_count, int max_count)
{
    long long lim[NB_Q_COUNT], used[NB_Q_COUNT];
    char msg[512];
    if (nb_quota_limits(ctx, project_id, NULL, lim) < 0 ||
        nb_quota_usages(ctx, project_id, NULL, used) < 0)
        return -1;
    int n =
        nb_quota_instances_allowed(lim, used, vcpus, ram, min_count, max_count, msg, sizeof(msg));
    if (n < 0)
        return nb_error(ctx, 403, NULL, "%s", msg);
    if (nb_quota_user_has_limits(ctx, project_id, user_id)) {
        if (nb_quota_limits(ctx, project_id, user_id, lim) < 0 ||
            nb_quota_usages(ctx, project_id, user_id, used) < 0)
            return -1;
        n = nb_quota_instances_allowed(lim, used, vcpus, ram, min_count, n, msg, sizeof(msg));
        if (n < 0)
            return nb_error(ctx, 403, NULL, "%s", msg);
    }
    return n;
}

/* ---- /os-quota-sets ------------------------------------------------------------------------ */

/* Is resource r shown at ctx's microversion (Nova's FILTERED_QUOTAS_*)? */
static bool shown(const struct nb_ctx *ctx, int r)
{
    if (nb_ctx_mv_ge(ctx, 2, 36) && (r == NB_Q_FIXED_IPS || r == NB_Q_FLOATING_IPS ||
                                     r == NB_Q_SECURITY_GROUPS || r == NB_Q_SECURITY_GROUP_RULES))
        return false;
    if (nb_ctx_mv_ge(ctx, 2, 57) &&
        (r == NB_Q_INJECTED_FILES || r == NB_Q_INJECTED_FILE_CONTENT_BYTES ||
         r == NB_Q_INJECTED_FILE_PATH_BYTES))
        return false;
    return true;
}

/* Only user_id is a known query parameter; others are refused from 2.75. */
static int check_query(struct nb_ctx *ctx, struct nb_req *req, const char **user_id)
{
    json_t *q = nb_srv_query_all(req);
    const char *k;
    json_t *v;
    int rc = 0;
    json_object_foreach (q, k, v) {
        if (strcmp(k, "user_id") && nb_ctx_mv_ge(ctx, 2, 75)) {
            rc = nb_error(ctx, 400, NULL,
                          "Additional properties are not allowed ('%s' was unexpected)", k);
            break;
        }
    }
    json_decref(q);
    /* the first value, as urlparse.parse_qs(...)[0] */
    *user_id = nb_req_query(req, "user_id");
    if (*user_id && !**user_id)
        *user_id = NULL;
    return rc;
}

/* identity.verify_project_id: the project must exist. */
static int verify_project(struct nb_ctx *ctx, const char *project_id)
{
    int n = nb_identity_project_exists(nb_srv_db(), ctx, project_id);
    if (n < 0)
        return -1;
    if (n == 0)
        return nb_error(ctx, 400, NULL, "Project ID %s is not a valid project.", project_id);
    return 0;
}

static json_t *quota_set(struct nb_ctx *ctx, const char *id, const long long lim[],
                         const long long *in_use)
{
    json_t *qs = json_object();
    if (id)
        json_object_set_new(qs, "id", json_string(id));
    for (int i = 0; i < NB_Q_COUNT; i++) {
        if (!shown(ctx, i))
            continue;
        json_object_set_new(qs, nb_quota_name(i),
                            in_use ? json_pack("{s:I, s:I, s:i}", "limit", (json_int_t)lim[i],
                                               "in_use", (json_int_t)in_use[i], "reserved", 0)
                                   : json_integer(lim[i]));
    }
    return json_pack("{s:o}", "quota_set", qs);
}

static int show_quotas(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, bool detail)
{
    const char *id = nb_req_param(req, "project_id");
    const char *user_id;
    if (check_query(ctx, req, &user_id) < 0)
        return -1;
    if (nb_srv_policy(ctx,
                      detail ? "os_compute_api:os-quota-sets:detail"
                             : "os_compute_api:os-quota-sets:show",
                      nb_srv_is_reader_of(ctx, id)) < 0 ||
        verify_project(ctx, id) < 0)
        return -1;
    long long lim[NB_Q_COUNT], used[NB_Q_COUNT];
    if (nb_quota_limits(ctx, id, user_id, lim) < 0)
        return -1;
    if (detail) {
        if (nb_quota_usages(ctx, id, user_id, used) < 0)
            return -1;
        /* per-user resources Nova reports as not in use at this level */
        used[NB_Q_KEY_PAIRS] = used[NB_Q_SERVER_GROUP_MEMBERS] = 0;
    }
    return nb_resp_json(resp, 200, quota_set(ctx, id, lim, detail ? used : NULL));
}

static int h_quota_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return show_quotas(ctx, req, resp, false);
}

static int h_quota_detail(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return show_quotas(ctx, req, resp, true);
}

static int h_quota_defaults(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "project_id");
    if (verify_project(ctx, id) < 0)
        return -1;
    long long lim[NB_Q_COUNT];
    if (nb_quota_class_limits(ctx, "default", lim) < 0)
        return -1;
    return nb_resp_json(resp, 200, quota_set(ctx, id, lim, NULL));
}

int nb_quota_value(struct nb_ctx *ctx, const char *key, json_t *v, long long *out)
{
    long long n;
    if (json_is_integer(v)) {
        n = json_integer_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        const char *p = *s == '-' ? s + 1 : s;
        bool ok = *p != '\0';
        for (; *p && ok; p++)
            ok = *p >= '0' && *p <= '9';
        if (!ok)
            return nb_srv_bad(ctx, key, v, "does not match '^-?[0-9]+$'");
        n = strtoll(s, NULL, 10);
    } else {
        return nb_srv_bad(ctx, key, v, "is not of type 'integer', 'string'");
    }
    if (n < -1)
        return nb_srv_bad(ctx, key, v, "is less than the minimum of -1");
    if (n > 0x7FFFFFFF)
        return nb_srv_bad(ctx, key, v, "is greater than the maximum of 2147483647");
    *out = n;
    return 0;
}

/* Reads the update body quota_set: only the keys the schema allows at
 * ctx's microversion, "force" a boolean, each limit checked by
 * nb_quota_value; vals[k]/set[k] get the limits given (an empty string sets
 * none). 0, or -1 after the 400. */
static int quota_update_values(struct nb_ctx *ctx, json_t *qs, long long *vals, bool *set)
{
    /* the keys the schema allows at this microversion */
    const char *allowed[NB_Q_COUNT + 3];
    int n = 0;
    for (int i = 0; i < NB_Q_COUNT; i++)
        if (shown(ctx, i))
            allowed[n++] = nb_quota_name(i);
    allowed[n++] = "force";
    if (!nb_ctx_mv_ge(ctx, 2, 36))
        allowed[n++] = "networks";
    allowed[n] = NULL;
    if (nb_res_only_keys(ctx, "quota_set", qs, allowed) < 0)
        return -1;
    const char *key;
    json_t *v;
    json_object_foreach (qs, key, v) {
        if (!strcmp(key, "force")) {
            if (nb_res_check_bool(ctx, "force", v) < 0)
                return -1;
            continue;
        }
        long long x = 0;
        if (nb_quota_value(ctx, key, v, &x) < 0)
            return -1;
        int k = nb_quota_index(key);
        if (k >= 0 && !(json_is_string(v) && json_string_length(v) == 0)) {
            vals[k] = x;
            set[k] = true;
        }
    }
    return 0;
}

/* Reads the usage of the project (or user) and, unless forced, checks
 * that no limit being set is below it (Nova's get_settable_quotas). 0, or
 * -1 after the 400 or a database error. */
static int check_settable(struct nb_ctx *ctx, const char *id, const char *user_id,
                          const long long *vals, const bool *set, bool force)
{
    long long used[NB_Q_COUNT];
    if (nb_quota_usages(ctx, id, user_id, used) < 0)
        return -1;
    for (int i = 0; i < NB_Q_COUNT && !force; i++) {
        if (!set[i])
            continue;
        /* the minimum is what is in use (Nova's get_settable_quotas) */
        long long min = i == NB_Q_KEY_PAIRS || i == NB_Q_SERVER_GROUP_MEMBERS ? 0 : used[i];
        if (vals[i] != -1 && vals[i] < min)
            return nb_error(ctx, 400, NULL,
                            "Quota limit %lld for %s must be greater than or equal to already "
                            "used and reserved %lld.",
                            vals[i], nb_quota_name(i), min);
    }
    return 0;
}

/* Writes the limits being set (update, else insert) inside the caller's
 * transaction. 0, or -1 on a database error. */
static int store_limits(struct nb_db *db, struct nb_ctx *ctx, const char *id, const char *user_id,
                        const long long *vals, const bool *set)
{
    for (int i = 0; i < NB_Q_COUNT; i++) {
        if (!set[i])
            continue;
        int changed = nb_db_exec(db, ctx,
                                 "UPDATE quotas SET hard_limit = ? WHERE project_id = ? AND "
                                 "resource = ? AND (user_id = ? OR (user_id IS NULL AND ? IS "
                                 "NULL))",
                                 "issss", vals[i], id, nb_quota_name(i), user_id, user_id);
        if (changed < 0 ||
            (changed == 0 && nb_db_exec(db, ctx,
                                        "INSERT INTO quotas (project_id, user_id, resource, "
                                        "hard_limit) VALUES (?, ?, ?, ?)",
                                        "sssi", id, user_id, nb_quota_name(i), vals[i]) < 0))
            return -1;
    }
    return 0;
}

/* PUT /os-quota-sets/{project_id}[?user_id=]: validate, check against
 * usage unless forced, store, answer the resulting limits. */
static int h_quota_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    static const char *const top[] = {"quota_set", NULL};
    json_t *qs = nb_srv_body_object(ctx, req, "quota_set", top);
    if (!qs)
        return -1;
    long long vals[NB_Q_COUNT];
    bool set[NB_Q_COUNT] = {false};
    if (quota_update_values(ctx, qs, vals, set) < 0)
        return -1;
    const char *id = nb_req_param(req, "project_id");
    const char *user_id;
    if (check_query(ctx, req, &user_id) < 0 ||
        nb_srv_policy(ctx, "os_compute_api:os-quota-sets:update", ctx->is_admin) < 0 ||
        verify_project(ctx, id) < 0)
        return -1;
    if (json_object_get(qs, "networks"))
        return nb_error(ctx, 400, NULL, "The networks quota has been removed");
    bool force = nb_srv_json_truthy(json_object_get(qs, "force"));
    struct nb_db *db = nb_srv_db();
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    if (check_settable(ctx, id, user_id, vals, set, force) < 0 ||
        store_limits(db, ctx, id, user_id, vals, set) < 0) {
        nb_db_rollback(db);
        return -1;
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    long long lim[NB_Q_COUNT];
    if (nb_quota_limits(ctx, id, user_id, lim) < 0)
        return -1;
    return nb_resp_json(resp, 200, quota_set(ctx, NULL, lim, NULL));
}

static int h_quota_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "project_id");
    const char *user_id;
    if (check_query(ctx, req, &user_id) < 0 ||
        nb_srv_policy(ctx, "os_compute_api:os-quota-sets:delete", ctx->is_admin) < 0)
        return -1;
    int rc = user_id
                 ? nb_db_exec(nb_srv_db(), ctx,
                              "DELETE FROM quotas WHERE project_id = ? AND user_id = ?", "ss", id,
                              user_id)
                 : nb_db_exec(nb_srv_db(), ctx, "DELETE FROM quotas WHERE project_id = ?", "s", id);
    if (rc < 0)
        return -1;
    return nb_resp_empty(resp, 202);
}

int nb_compute_quotas_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/os-quota-sets/{project_id}", h_quota_show, 0);
    nb_http_route("PUT", "/compute/v2.1/os-quota-sets/{project_id}", h_quota_update, 0);
    nb_http_route("DELETE", "/compute/v2.1/os-quota-sets/{project_id}", h_quota_delete, 0);
    nb_http_route("GET", "/compute/v2.1/os-quota-sets/{project_id}/defaults", h_quota_defaults, 0);
    nb_http_route("GET", "/compute/v2.1/os-quota-sets/{project_id}/detail", h_quota_detail, 0);
    return 0;
}

/* server_groups.c - /os-server-groups, as Nova's server_groups.py.
 *
 * A server group holds one policy (affinity, anti-affinity and, from 2.15,
 * their soft variants) and, for anti-affinity from 2.64, the rule
 * max_server_per_host. Before 2.64 the API speaks of "policies" (a list of
 * one) and an always-empty "metadata". Groups belong to a project: other
 * projects do not see them (404), admins see all. Members are instances;
 * views list only those not deleted. Quotas: server_groups per project and
 * server_group_members per user and group ([quota], default 10 each, or a
 * quotas row). Groups are deleted for good, as in Nova's API database. */
#include "compute/api/api.h"
#include "compute/api/links.h"
#include "compute/api/resources.h"
#include "compute/api/validate.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct nb_env *env;

/* A project (or user) quota: a quotas row, else [quota] <resource>. */
static long long quota_of(struct nb_ctx *ctx, const char *resource, long long def)
{
    long long q = nb_db_int(env->db, ctx, -2,
                            "SELECT hard_limit FROM quotas WHERE resource = ? AND project_id = ? "
                            "AND (user_id = ? OR user_id IS NULL) ORDER BY user_id IS NULL LIMIT 1",
                            "sss", resource, ctx->project_id, ctx->user_id);
    return q == -2 ? nb_conf_int("quota", resource, def) : q;
}

/* The group row by uuid as ctx may see it (own project unless admin), or
 * NULL (not found, or db error recorded). */
static json_t *find_group(struct nb_ctx *ctx, const char *uuid)
{
    if (ctx->is_admin)
        return nb_db_row(env->db, ctx, "SELECT * FROM instance_groups WHERE uuid = ?", "s", uuid);
    return nb_db_row(env->db, ctx,
                     "SELECT * FROM instance_groups WHERE uuid = ? AND project_id = ?", "ss", uuid,
                     ctx->project_id);
}

/* Uuids of the group's members whose instance is not deleted. New ref. */
static json_t *live_members(struct nb_ctx *ctx, long long gid)
{
    _cleanup_json_ json_t *rows = nb_db_rows(
        env->db, ctx,
        "SELECT m.instance_uuid AS uuid FROM instance_group_member m WHERE m.group_id = ? AND "
        "NOT EXISTS (SELECT 1 FROM instances i WHERE i.uuid = m.instance_uuid AND "
        "i.deleted != 0) ORDER BY m.rowid",
        "i", gid);
    if (!rows)
        return NULL;
    json_t *list = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_array_append_new(list, json_string(nb_json_str(r, "uuid")));
    }
    return list;
}

/* The rules object as Nova's InstanceGroup.rules (max_server_per_host as
 * an integer). New ref. */
static json_t *group_rules(const json_t *row)
{
    _cleanup_json_ json_t *raw = nb_json_parse(nb_json_str(row, "rules"));
    json_t *rules = json_object();
    json_t *m = raw ? json_object_get(raw, "max_server_per_host") : NULL;
    if (m) {
        long long n = json_is_string(m) ? strtoll(json_string_value(m), NULL, 10)
                                        : (long long)json_number_value(m);
        json_object_set_new(rules, "max_server_per_host", json_integer(n));
    }
    return rules;
}

static json_t *group_view(struct nb_ctx *ctx, const json_t *row)
{
    json_t *members = live_members(ctx, nb_json_int(row, "id", 0));
    if (!members)
        return NULL;
    json_t *g = json_pack("{s:s, s:o, s:o}", "id", nb_json_str(row, "uuid"), "name",
                          nb_res_row_copy(row, "name"), "members", members);
    if (nb_ctx_mv_ge(ctx, 2, 64)) {
        json_object_set_new(g, "policy", nb_res_row_copy(row, "policy"));
        json_object_set_new(g, "rules", group_rules(row));
    } else {
        json_object_set_new(g, "policies", json_pack("[s]", nb_json_str(row, "policy")));
        json_object_set_new(g, "metadata", json_object());
    }
    if (nb_ctx_mv_ge(ctx, 2, 13)) {
        json_object_set_new(g, "project_id", nb_res_row_copy(row, "project_id"));
        json_object_set_new(g, "user_id", nb_res_row_copy(row, "user_id"));
    }
    return g;
}

json_t *nb_server_group_get(struct nb_ctx *ctx, const char *group_uuid)
{
    _cleanup_json_ json_t *row = find_group(ctx, group_uuid);
    if (!row) {
        /* Booting into an unknown group is a 400 in Nova's servers API. */
        if (!nb_ctx_failed(ctx))
            nb_error(ctx, 400, NULL, "Instance group %s could not be found.", group_uuid);
        return NULL;
    }
    json_t *members = live_members(ctx, nb_json_int(row, "id", 0));
    if (!members)
        return NULL;
    return json_pack("{s:s, s:s, s:o, s:o}", "uuid", nb_json_str(row, "uuid"), "policy",
                     nb_json_str(row, "policy"), "rules", group_rules(row), "members", members);
}

int nb_server_group_add_member(struct nb_ctx *ctx, const char *group_uuid,
                               const char *instance_uuid)
{
    long long gid = nb_db_int(env->db, ctx, 0, "SELECT id FROM instance_groups WHERE uuid = ?", "s",
                              group_uuid);
    if (gid <= 0)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 400, NULL, "Instance group %s could not be found.", group_uuid);
    long long quota = quota_of(ctx, "server_group_members", 10);
    long long used = nb_db_int(env->db, ctx, 0,
                               "SELECT COUNT(*) FROM instance_group_member m JOIN instances i ON "
                               "i.uuid = m.instance_uuid AND i.deleted = 0 WHERE m.group_id = ? "
                               "AND i.user_id = ?",
                               "is", gid, ctx->user_id);
    if (nb_ctx_failed(ctx))
        return -1;
    if (quota >= 0 && used + 1 > quota)
        return nb_error(ctx, 403, NULL, "Quota exceeded, too many servers in group");
    return nb_db_insert_ignore(env->db, ctx,
                               "INTO instance_group_member (group_id, instance_uuid) "
                               "VALUES (?, ?)",
                               "is", gid, instance_uuid) < 0
               ? -1
               : 0;
}

/* --- handlers -------------------------------------------------------------------- */

static int check_nonneg_query(struct nb_ctx *ctx, struct nb_req *req, const char *name,
                              long long *out)
{
    const char *v = nb_req_query(req, name);
    *out = -1;
    if (!v)
        return 0;
    if (!*v)
        return nb_error(ctx, 400, NULL,
                        "Invalid input for query parameters %s. Value: . '' is too short", name);
    for (const char *p = v; *p; p++)
        if (*p < '0' || *p > '9')
            return nb_error(ctx, 400, NULL,
                            "Invalid input for query parameters %s. Value: %s. '%s' does not "
                            "match '^[0-9]*$'",
                            name, v, v);
    *out = strtoll(v, NULL, 10);
    return 0;
}

static int sg_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    static const char *const allowed[] = {"all_projects", "limit", "offset", NULL};
    if (nb_ctx_mv_ge(ctx, 2, 75) && nb_res_query_only(ctx, req, allowed) < 0)
        return -1;
    long long limit, offset;
    if (check_nonneg_query(ctx, req, "limit", &limit) < 0 ||
        check_nonneg_query(ctx, req, "offset", &offset) < 0)
        return -1;
    if (!ctx->is_admin && !ctx->is_reader)
        return nb_res_deny(ctx, "os_compute_api:os-server-groups:index");
    long long max = nb_res_max_limit();
    if (limit <= 0 || limit > max)
        limit = max;
    if (offset < 0)
        offset = 0;
    bool all = nb_req_query(req, "all_projects") && ctx->is_admin;
    _cleanup_json_ json_t *rows =
        nb_db_rows(env->db, ctx,
                   "SELECT * FROM instance_groups WHERE (? OR project_id = ?) ORDER BY id "
                   "LIMIT ? OFFSET ?",
                   "bsii", all, ctx->project_id, limit, offset);
    if (!rows)
        return -1;
    json_t *list = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_t *g = group_view(ctx, r);
        if (!g) {
            json_decref(list);
            return -1;
        }
        json_array_append_new(list, g);
    }
    return nb_resp_json(resp, 200, json_pack("{s:o}", "server_groups", list));
}

static int sg_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "group_id");
    _cleanup_json_ json_t *row = find_group(ctx, id);
    if (!row)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NULL, "Instance group %s could not be found.", id);
    if (!ctx->is_admin && !ctx->is_reader)
        return nb_res_deny(ctx, "os_compute_api:os-server-groups:show");
    json_t *g = group_view(ctx, row);
    return g ? nb_resp_json(resp, 200, json_pack("{s:o}", "server_group", g)) : -1;
}

static int sg_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "group_id");
    _cleanup_json_ json_t *row = find_group(ctx, id);
    if (!row)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NULL, "Instance group %s could not be found.", id);
    if (!ctx->is_admin && !ctx->is_member)
        return nb_res_deny(ctx, "os_compute_api:os-server-groups:delete");
    long long gid = nb_json_int(row, "id", 0);
    if (nb_db_begin(env->db, ctx) < 0)
        return -1;
    if (nb_db_exec(env->db, ctx, "DELETE FROM instance_group_member WHERE group_id = ?", "i", gid) <
            0 ||
        nb_db_exec(env->db, ctx, "DELETE FROM instance_groups WHERE id = ?", "i", gid) < 0) {
        nb_db_rollback(env->db);
        return -1;
    }
    if (nb_db_commit(env->db, ctx) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

static bool valid_policy(const char *p, bool soft)
{
    return strcmp(p, "anti-affinity") == 0 || strcmp(p, "affinity") == 0 ||
           (soft && (strcmp(p, "soft-anti-affinity") == 0 || strcmp(p, "soft-affinity") == 0));
}

static const char *policy_enum(bool soft)
{
    return soft ? "['anti-affinity', 'affinity', 'soft-anti-affinity', 'soft-affinity']"
                : "['anti-affinity', 'affinity']";
}

/* The pre-2.64 "policies": a list of exactly one known policy. */
static int check_policies(struct nb_ctx *ctx, const json_t *v, bool soft)
{
    _cleanup_free_ char *r = nb_pyrepr(v);
    if (!json_is_array(v)) {
        _cleanup_free_ char *why = nb_strdup_printf("%s is not of type 'array'", r);
        return nb_res_bad_field(ctx, "policies", v, why);
    }
    json_t *first = json_array_get(v, 0);
    if (first) {
        _cleanup_free_ char *fr = nb_pyrepr(first);
        if (!json_is_string(first)) {
            _cleanup_free_ char *why = nb_strdup_printf("%s is not of type 'string'", fr);
            return nb_res_bad_field(ctx, "0", first, why);
        }
        if (!valid_policy(json_string_value(first), soft)) {
            _cleanup_free_ char *why =
                nb_strdup_printf("%s is not one of %s", fr, policy_enum(soft));
            return nb_res_bad_field(ctx, "0", first, why);
        }
    }
    size_t n = json_array_size(v);
    if (n == 2 && json_equal(json_array_get(v, 0), json_array_get(v, 1))) {
        _cleanup_free_ char *why = nb_strdup_printf("%s has non-unique elements", r);
        return nb_res_bad_field(ctx, "policies", v, why);
    }
    if (n != 1) {
        _cleanup_free_ char *why = nb_strdup_printf("%s is too %s", r, n < 1 ? "short" : "long");
        return nb_res_bad_field(ctx, "policies", v, why);
    }
    return 0;
}

/* The 2.64 "rules": only max_server_per_host, a positive integer. */
static int check_rules(struct nb_ctx *ctx, const json_t *v, long long *max)
{
    static const char *const keys[] = {"max_server_per_host", NULL};
    *max = 0;
    if (!json_is_object(v)) {
        _cleanup_free_ char *r = nb_pyrepr(v);
        _cleanup_free_ char *why = nb_strdup_printf("%s is not of type 'object'", r);
        return nb_res_bad_field(ctx, "rules", v, why);
    }
    json_t *m = json_object_get(v, "max_server_per_host");
    if (m) {
        if (json_is_string(m) && !*json_string_value(m)) {
            return nb_res_bad_field(ctx, "max_server_per_host", m, "'' is too short");
        }
        if (nb_res_check_int(ctx, "max_server_per_host", m, 1, 0x7FFFFFFFFFFFLL, max) < 0)
            return -1;
    }
    return nb_res_only_keys(ctx, "rules", v, keys);
}

static int sg_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    bool v264 = nb_ctx_mv_ge(ctx, 2, 64), soft = nb_ctx_mv_ge(ctx, 2, 15);
    static const char *const k_old[] = {"name", "policies", NULL};
    static const char *const k_new[] = {"name", "policy", "rules", NULL};
    json_t *g = nb_res_body_object(ctx, req, "server_group", NULL);
    if (!g)
        return -1;
    json_t *name = json_object_get(g, "name"), *v;
    const char *policy = NULL;
    long long max_per_host = 0;
    bool has_rules = false;
    if (name && nb_srv_check_name(ctx, "name", name) < 0)
        return -1;
    if (!v264 && (v = json_object_get(g, "policies"))) {
        if (check_policies(ctx, v, soft) < 0)
            return -1;
        policy = json_string_value(json_array_get(v, 0));
    }
    if (v264 && (v = json_object_get(g, "policy"))) {
        _cleanup_free_ char *r = nb_pyrepr(v);
        if (!json_is_string(v)) {
            _cleanup_free_ char *why = nb_strdup_printf("%s is not of type 'string'", r);
            return nb_res_bad_field(ctx, "policy", v, why);
        }
        if (!valid_policy(json_string_value(v), true)) {
            _cleanup_free_ char *why =
                nb_strdup_printf("%s is not one of %s", r, policy_enum(true));
            return nb_res_bad_field(ctx, "policy", v, why);
        }
        policy = json_string_value(v);
    }
    if (v264 && (v = json_object_get(g, "rules"))) {
        if (check_rules(ctx, v, &max_per_host) < 0)
            return -1;
        has_rules = json_object_size(v) > 0;
    }
    if (!nb_res_required(ctx, "server_group", g, "name") ||
        !nb_res_required(ctx, "server_group", g, v264 ? "policy" : "policies") ||
        nb_res_only_keys(ctx, "server_group", g, v264 ? k_new : k_old) < 0)
        return -1;
    if (!ctx->is_admin && !ctx->is_member)
        return nb_res_deny(ctx, "os_compute_api:os-server-groups:create");

    long long quota = quota_of(ctx, "server_groups", 10);
    long long used =
        nb_db_int(env->db, ctx, 0, "SELECT COUNT(*) FROM instance_groups WHERE project_id = ?", "s",
                  ctx->project_id);
    if (nb_ctx_failed(ctx))
        return -1;
    if (quota >= 0 && used + 1 > quota)
        return nb_error(ctx, 403, NULL, "Quota exceeded, too many server groups.");
    if (v264 && strcmp(policy, "anti-affinity") != 0 && has_rules)
        return nb_error(ctx, 400, NULL, "Only anti-affinity policy supports rules.");

    _cleanup_json_ json_t *rules = json_object();
    if (max_per_host)
        json_object_set_new(rules, "max_server_per_host", json_integer(max_per_host));
    char uuid[NB_UUID_LEN], now[32];
    nb_uuid(uuid);
    if (nb_db_exec(env->db, ctx,
                   "INSERT INTO instance_groups (uuid, name, user_id, project_id, policy, rules, "
                   "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                   "sssssjs", uuid, json_string_value(name), ctx->user_id, ctx->project_id, policy,
                   rules, nb_now_iso_us(now)) < 0)
        return -1;
    _cleanup_json_ json_t *row =
        nb_db_row(env->db, ctx, "SELECT * FROM instance_groups WHERE uuid = ?", "s", uuid);
    if (!row)
        return -1;
    json_t *view = group_view(ctx, row);
    return view ? nb_resp_json(resp, 200, json_pack("{s:o}", "server_group", view)) : -1;
}

int nb_compute_server_groups_init(struct nb_env *e)
{
    env = e;
    nb_http_route("GET", "/compute/v2.1/os-server-groups", sg_index, 0);
    nb_http_route("POST", "/compute/v2.1/os-server-groups", sg_create, 0);
    nb_http_route("GET", "/compute/v2.1/os-server-groups/{group_id}", sg_show, 0);
    nb_http_route("DELETE", "/compute/v2.1/os-server-groups/{group_id}", sg_delete, 0);
    return 0;
}

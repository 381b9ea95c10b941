/* quota_classes.c - /os-quota-class-sets/{id}, as Nova's quota_classes.py
 * with the DB quota driver: the limits of a quota class (table
 * quota_classes, else the [quota] defaults) and their update. Class
 * "default" holds what every project gets where it has no limit of its
 * own (GET /os-quota-sets/{project}/defaults). Policies
 * os_compute_api:os-quota-class-sets:show|update (admin). Keys shown:
 * before 2.50 not server_groups/server_group_members; from 2.50 not
 * fixed_ips, floating_ips, security_groups, security_group_rules; from
 * 2.57 not the injected_file* ones either. */
#include "common/cleanup.h"
#include "common/json.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/quotas.h"
#include "compute/api/validate.h"
#include "db/db.h"

#include <string.h>

/* Is resource r in the answer (and the update schema, for updatable) at
 * ctx's microversion? Before 2.50 the schema takes server_groups and
 * server_group_members though the answer leaves them out. */
static bool class_shown(const struct nb_ctx *ctx, int r, bool updatable)
{
    bool v250 = nb_ctx_mv_ge(ctx, 2, 50);
    if (!v250 && !updatable && (r == NB_Q_SERVER_GROUPS || r == NB_Q_SERVER_GROUP_MEMBERS))
        return false;
    if (v250 && (r == NB_Q_FIXED_IPS || r == NB_Q_FLOATING_IPS || r == NB_Q_SECURITY_GROUPS ||
                 r == NB_Q_SECURITY_GROUP_RULES))
        return false;
    if (nb_ctx_mv_ge(ctx, 2, 57) &&
        (r == NB_Q_INJECTED_FILES || r == NB_Q_INJECTED_FILE_CONTENT_BYTES ||
         r == NB_Q_INJECTED_FILE_PATH_BYTES))
        return false;
    return true;
}

/* The class's limits as Nova's _format_quota_set ("id" only on show). */
static int answer(struct nb_ctx *ctx, struct nb_resp *resp, const char *name, bool with_id)
{
    long long lim[NB_Q_COUNT];
    if (nb_quota_class_limits(ctx, name, lim) < 0)
        return -1;
    json_t *qs = json_object();
    if (with_id)
        json_object_set_new(qs, "id", json_string(name));
    for (int i = 0; i < NB_Q_COUNT; i++)
        if (class_shown(ctx, i, false))
            json_object_set_new(qs, nb_quota_name(i), json_integer(lim[i]));
    return nb_resp_json(resp, 200, json_pack("{s:o}", "quota_class_set", qs));
}

static int h_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_res_admin(ctx, "os_compute_api:os-quota-class-sets:show") < 0)
        return -1;
    return answer(ctx, resp, nb_req_param(req, "id"), true);
}

/* Writes one limit of the class (update, else insert) inside the caller's
 * transaction (Nova's update_class, else create_class). 0/-1. */
static int store(struct nb_db *db, struct nb_ctx *ctx, const char *name, int r, long long v)
{
    int changed = nb_db_exec(db, ctx,
                             "UPDATE quota_classes SET hard_limit = ? WHERE class_name = ? AND "
                             "resource = ?",
                             "iss", v, name, nb_quota_name(r));
    if (changed == 0)
        changed = nb_db_exec(db, ctx,
                             "INSERT INTO quota_classes (class_name, resource, hard_limit) "
                             "VALUES (?, ?, ?)",
                             "ssi", name, nb_quota_name(r), v);
    return changed < 0 ? -1 : 0;
}

/* PUT: the body checked against the schema of ctx's microversion, each
 * limit given stored, the class's limits answered. */
static int h_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    static const char *const top[] = {"quota_class_set", NULL};
    json_t *qs = nb_srv_body_object(ctx, req, "quota_class_set", top);
    if (!qs)
        return -1;
    const char *allowed[NB_Q_COUNT + 2];
    int n = 0;
    for (int i = 0; i < NB_Q_COUNT; i++)
        if (class_shown(ctx, i, true))
            allowed[n++] = nb_quota_name(i);
    if (!nb_ctx_mv_ge(ctx, 2, 50))
        allowed[n++] = "networks";
    allowed[n] = NULL;
    if (nb_res_only_keys(ctx, "quota_class_set", qs, allowed) < 0)
        return -1;
    long long vals[NB_Q_COUNT];
    bool set[NB_Q_COUNT] = {false};
    const char *key;
    json_t *v;
    json_object_foreach (qs, key, v) {
        long long x;
        if (nb_quota_value(ctx, key, v, &x) < 0)
            return -1;
        int k = nb_quota_index(key); /* "networks": no such resource any more */
        if (k >= 0) {
            vals[k] = x;
            set[k] = true;
        }
    }
    const char *name = nb_req_param(req, "id");
    if (nb_res_admin(ctx, "os_compute_api:os-quota-class-sets:update") < 0)
        return -1;
    if (strlen(name) > 255)
        return nb_error(ctx, 400, NULL, "quota_class_name has more than 255 characters.");
    struct nb_db *db = nb_srv_db();
    if (nb_db_begin(db, ctx) < 0)
        return -1;
    for (int i = 0; i < NB_Q_COUNT; i++) {
        if (set[i] && store(db, ctx, name, i, vals[i]) < 0) {
            nb_db_rollback(db);
            return -1;
        }
    }
    if (nb_db_commit(db, ctx) < 0)
        return -1;
    return answer(ctx, resp, name, false);
}

int nb_compute_quota_classes_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/os-quota-class-sets/{id}", h_show, 0);
    nb_http_route("PUT", "/compute/v2.1/os-quota-class-sets/{id}", h_update, 0);
    return 0;
}

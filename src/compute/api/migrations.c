/* migrations.c - the migrations of the Compute API, as Nova's
 * migrations.py and server_migrations.py:
 *   GET    /os-migrations                             every move (admin)
 *   GET    /servers/{id}/migrations[/{mid}]           in-progress live
 *                                                     migrations (2.23)
 *   DELETE /servers/{id}/migrations/{mid}             abort (2.24)
 *   POST   /servers/{id}/migrations/{mid}/action      force_complete (2.22)
 *
 * The views carry exactly Nova's keys per microversion: migration_type and
 * the links of in-progress live migrations from 2.23, uuid and paging
 * (limit, marker, changes-since, newest first) from 2.59, changes-before
 * from 2.66, user_id and project_id (fields and filters) from 2.80. Hidden
 * migrations never show. Abort and force-complete check what Nova's
 * compute API checks, record the instance action and cast to the
 * conductor, which does the work. Rows come from compute/objects/migration. */
#include "common/json.h"
#include "common/log.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/links.h"
#include "compute/api/server_actions.h"
#include "compute/api/server_views.h"
#include "compute/api/validate.h"
#include "compute/compute.h"
#include "compute/objects/migration.h"
#include "compute/objects/states.h"
#include "compute/rpc/conductor_api.h"
#include "db/db.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *str_or_null(const json_t *row, const char *key)
{
    const char *s = nb_json_str(row, key);
    return s ? json_string(s) : json_null();
}

static json_t *int_or_null(const json_t *row, const char *key)
{
    json_t *v = json_object_get(row, key);
    return json_is_integer(v) ? json_integer(json_integer_value(v)) : json_null();
}

static void put_user_project(json_t *v, const json_t *m)
{
    json_object_set_new(v, "user_id", str_or_null(m, "user_id"));
    json_object_set_new(v, "project_id", str_or_null(m, "project_id"));
}

/* One row of GET /os-migrations (Nova's MigrationsController._output). */
static json_t *index_view(struct nb_ctx *ctx, const json_t *m)
{
    json_t *v = json_object();
    static const char *const strs[] = {"source_compute", "dest_compute", "source_node",
                                       "dest_node",      "dest_host",    "instance_uuid",
                                       "status"};
    json_object_set_new(v, "id", json_integer(nb_json_int(m, "id", 0)));
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        json_object_set_new(v, strs[i], str_or_null(m, strs[i]));
    json_object_set_new(v, "old_instance_type_id", int_or_null(m, "old_instance_type_id"));
    json_object_set_new(v, "new_instance_type_id", int_or_null(m, "new_instance_type_id"));
    json_object_set_new(v, "created_at", nb_srv_json_dbtime(nb_json_str(m, "created_at")));
    json_object_set_new(v, "updated_at", nb_srv_json_dbtime(nb_json_str(m, "updated_at")));
    if (nb_ctx_mv_ge(ctx, 2, 23)) {
        const char *type = nb_json_str(m, "migration_type");
        json_object_set_new(v, "migration_type", str_or_null(m, "migration_type"));
        if (type && !strcmp(type, NB_MIGRATION_LIVE) &&
            nb_migration_in_progress(nb_json_str(m, "status"))) {
            char *coll = nb_strdup_printf("servers/%s/migrations", nb_json_str(m, "instance_uuid"));
            char id[32];
            snprintf(id, sizeof(id), "%lld", nb_json_int(m, "id", 0));
            json_object_set_new(v, "links", nb_res_links(coll, id));
            free(coll);
        }
    }
    if (nb_ctx_mv_ge(ctx, 2, 59))
        json_object_set_new(v, "uuid", str_or_null(m, "uuid"));
    if (nb_ctx_mv_ge(ctx, 2, 80))
        put_user_project(v, m);
    return v;
}

/* One migration of /servers/{id}/migrations (server_migrations.output). */
static json_t *server_view(struct nb_ctx *ctx, const json_t *m)
{
    json_t *v = json_object();
    static const char *const strs[] = {"dest_compute",   "dest_host",   "dest_node",
                                       "source_compute", "source_node", "status"};
    static const char *const bytes[][2] = {
        {"disk_processed_bytes", "disk_processed"},
        {"disk_remaining_bytes", "disk_remaining"},
        {"disk_total_bytes", "disk_total"},
        {"memory_processed_bytes", "memory_processed"},
        {"memory_remaining_bytes", "memory_remaining"},
        {"memory_total_bytes", "memory_total"},
    };
    json_object_set_new(v, "id", json_integer(nb_json_int(m, "id", 0)));
    json_object_set_new(v, "server_uuid", str_or_null(m, "instance_uuid"));
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        json_object_set_new(v, strs[i], str_or_null(m, strs[i]));
    for (size_t i = 0; i < sizeof(bytes) / sizeof(bytes[0]); i++)
        json_object_set_new(v, bytes[i][0], int_or_null(m, bytes[i][1]));
    json_object_set_new(v, "created_at", nb_srv_json_dbtime(nb_json_str(m, "created_at")));
    json_object_set_new(v, "updated_at", nb_srv_json_dbtime(nb_json_str(m, "updated_at")));
    if (nb_ctx_mv_ge(ctx, 2, 59))
        json_object_set_new(v, "uuid", str_or_null(m, "uuid"));
    if (nb_ctx_mv_ge(ctx, 2, 80))
        put_user_project(v, m);
    return v;
}

/* ---- GET /os-migrations -------------------------------------------------- */

/* A query parameter given more than once where the 2.59+ schema allows one
 * value (single_param): 400 worded as Nova's query validator. */
static int single_param(struct nb_ctx *ctx, json_t *q, const char *key)
{
    json_t *vals = json_object_get(q, key);
    if (json_array_size(vals) <= 1)
        return 0;
    char *r = nb_pyrepr(vals);
    nb_error(ctx, 400, NULL, "Invalid input for query parameters %s. Value: %s. %s is too long",
             key, r, r);
    free(r);
    return -1;
}

/* The 2.59+ query schema (additionalProperties false): the known keys, the
 * single-valued ones once, date-times that parse. 0/-1. */
static int check_paged_query(struct nb_ctx *ctx, struct nb_req *req, json_t *q)
{
    static const char *const v259[] = {
        "hidden",         "host",  "instance_uuid", "source_compute", "status",
        "migration_type", "limit", "marker",        "changes-since",  NULL};
    static const char *const v266[] = {
        "hidden", "host",   "instance_uuid", "source_compute", "status", "migration_type",
        "limit",  "marker", "changes-since", "changes-before", NULL};
    static const char *const v280[] = {
        "hidden", "host",   "instance_uuid", "source_compute", "status",  "migration_type",
        "limit",  "marker", "changes-since", "changes-before", "user_id", "project_id",
        NULL};
    const char *const *allowed = nb_ctx_mv_ge(ctx, 2, 80)   ? v280
                                 : nb_ctx_mv_ge(ctx, 2, 66) ? v266
                                                            : v259;
    if (nb_res_query_only(ctx, req, allowed) < 0)
        return -1;
    static const char *const single[] = {"limit",          "marker",  "changes-since",
                                         "changes-before", "user_id", "project_id"};
    for (size_t i = 0; i < sizeof(single) / sizeof(single[0]); i++)
        if (single_param(ctx, q, single[i]) < 0)
            return -1;
    static const char *const times[] = {"changes-since", "changes-before"};
    for (size_t i = 0; i < 2; i++) {
        const char *s = nb_srv_query_last(q, times[i]);
        if (s && nb_time_parse(s) < 0)
            return nb_error(ctx, 400, NULL,
                            "Invalid input for query parameters %s. Value: %s. '%s' is not a "
                            "'date-time'",
                            times[i], s, s);
    }
    return 0;
}

/* A query time as stored ("YYYY-MM-DDTHH:MM:SS.ffffff", UTC) into buf[40]. */
static const char *stored_time(const char *s, char *buf)
{
    if (!s)
        return NULL;
    double t = nb_time_parse(s);
    double whole = floor(t);
    nb_time_iso(whole, buf);
    int us = (int)lround((t - whole) * 1e6);
    if (us < 0 || us > 999999)
        us = 999999;
    snprintf(buf + 19, 40 - 19, ".%06d", us % 1000000);
    return buf;
}

/* The filters of q at the request's microversion into f (strings borrowed
 * from q; times into the buffers). 0, or -1 after a 400. */
static int index_filter(struct nb_ctx *ctx, struct nb_req *req, json_t *q,
                        struct nb_migration_filter *f, char since[40], char before[40])
{
    bool paged = nb_ctx_mv_ge(ctx, 2, 59);
    /* before 2.59 Nova passes every query key to its database filter, which
     * knows these (changes-since/-before are dropped) */
    f->host = nb_srv_query_last(q, "host");
    f->source_compute = nb_srv_query_last(q, "source_compute");
    f->status = nb_srv_query_last(q, "status");
    f->instance_uuid = nb_srv_query_last(q, "instance_uuid");
    f->migration_type = nb_srv_query_last(q, "migration_type");
    f->user_id = nb_srv_query_last(q, "user_id");
    f->project_id = nb_srv_query_last(q, "project_id");
    const char *hidden = nb_srv_query_last(q, "hidden");
    f->hidden = hidden ? nb_srv_bool_from_string(hidden, false) : -1;
    f->paged = paged;
    f->limit = -1;
    if (!paged)
        return 0;
    f->changes_since = stored_time(nb_srv_query_last(q, "changes-since"), since);
    if (nb_ctx_mv_ge(ctx, 2, 66))
        f->changes_before = stored_time(nb_srv_query_last(q, "changes-before"), before);
    if (f->changes_since && f->changes_before && strcmp(f->changes_before, f->changes_since) < 0)
        return nb_error(ctx, 400, NULL,
                        "The value of changes-since must be less than or equal to "
                        "changes-before.");
    return nb_res_limit_marker(ctx, req, &f->limit, &f->marker);
}

static int h_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_res_admin(ctx, "os_compute_api:os-migrations:index") < 0)
        return -1;
    json_t *q = nb_srv_query_all(req), *rows = NULL;
    int rc = -1;
    struct nb_migration_filter f = {0};
    char since[40], before[40];
    if ((nb_ctx_mv_ge(ctx, 2, 59) && check_paged_query(ctx, req, q) < 0) ||
        index_filter(ctx, req, q, &f, since, before) < 0)
        goto out;
    if (f.limit == 0)
        rows = json_array(); /* Nova answers a limit of 0 with nothing */
    else if (!(rows = nb_migration_list(nb_srv_db(), ctx, &f)))
        goto out;
    json_t *list = json_array();
    size_t i;
    json_t *m;
    json_array_foreach (rows, i, m)
        json_array_append_new(list, index_view(ctx, m));
    json_t *body = json_pack("{s:o}", "migrations", list);
    if (f.paged && json_array_size(rows))
        nb_res_next_link(body, "migrations_links", req, "os-migrations", json_array_size(rows),
                         nb_json_str(json_array_get(rows, json_array_size(rows) - 1), "uuid"));
    rc = nb_resp_json(resp, 200, body);
out:
    json_decref(q);
    json_decref(rows);
    return rc;
}

/* ---- /servers/{id}/migrations -------------------------------------------- */

/* The server of the request, below min_minor a missing route (404), then
 * the admin rule: Nova looks the instance up before its policy check. */
static json_t *get_server(struct nb_ctx *ctx, struct nb_req *req, int min_minor, const char *rule)
{
    if (!nb_ctx_mv_ge(ctx, 2, min_minor)) {
        nb_error(ctx, 404, NULL, "The resource could not be found.");
        return NULL;
    }
    json_t *inst = nb_srv_instance_get(ctx, nb_req_param(req, "server_id"), false);
    if (inst && nb_res_admin(ctx, rule) < 0) {
        json_decref(inst);
        return NULL;
    }
    return inst;
}

/* The {migration_id} of the path as the integer id into *id; false when it
 * is not one (no migration can have it). */
static bool path_migration_id(struct nb_req *req, long long *id)
{
    const char *s = nb_req_param(req, "migration_id");
    char *end;
    errno = 0;
    *id = s && *s ? strtoll(s, &end, 10) : 0;
    return s && *s && !*end && !errno;
}

/* The migration {migration_id} of inst, or NULL after Nova's 404
 * "Migration <id> not found for instance <uuid>". */
static json_t *get_migration(struct nb_ctx *ctx, struct nb_req *req, const json_t *inst)
{
    long long id;
    const char *uuid = nb_json_str(inst, "uuid");
    if (!path_migration_id(req, &id)) {
        nb_error(ctx, 404, NULL, "Migration %s not found for instance %s",
                 nb_req_param(req, "migration_id"), uuid);
        return NULL;
    }
    return nb_migration_get_by_id_and_instance(nb_srv_db(), ctx, id, uuid);
}

static int h_server_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *inst = get_server(ctx, req, 23, "os_compute_api:servers:migrations:index");
    if (!inst)
        return -1;
    json_t *rows = nb_migration_list_in_progress(nb_srv_db(), ctx, nb_json_str(inst, "uuid"),
                                                 NB_MIGRATION_LIVE);
    json_decref(inst);
    if (!rows)
        return -1;
    json_t *list = json_array();
    size_t i;
    json_t *m;
    json_array_foreach (rows, i, m)
        json_array_append_new(list, server_view(ctx, m));
    json_decref(rows);
    return nb_resp_json(resp, 200, json_pack("{s:o}", "migrations", list));
}

static int h_server_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *inst = get_server(ctx, req, 23, "os_compute_api:servers:migrations:show");
    if (!inst)
        return -1;
    const char *mid = nb_req_param(req, "migration_id"), *uuid = nb_req_param(req, "server_id");
    json_t *m = get_migration(ctx, req, inst);
    int rc = -1;
    if (!m) {
        if (nb_ctx_status(ctx) == 404) {
            char *msg = nb_strdup_printf(
                "In-progress live migration %s is not found for server %s.", mid, uuid);
            nb_srv_error_as(ctx, 404, msg);
            free(msg);
        }
        goto out;
    }
    const char *type = nb_json_str(m, "migration_type");
    if (!type || strcmp(type, NB_MIGRATION_LIVE))
        nb_error(ctx, 404, NULL, "Migration %s for server %s is not live-migration.", mid, uuid);
    else if (!nb_migration_in_progress(nb_json_str(m, "status")))
        nb_error(ctx, 404, NULL, "Live migration %s for server %s is not in progress.", mid, uuid);
    else
        rc = nb_resp_json(resp, 200, json_pack("{s:o}", "migration", server_view(ctx, m)));
out:
    json_decref(inst);
    json_decref(m);
    return rc;
}

/* Records instance action `action` on inst and casts op (abort or force
 * complete) of migration m to the conductor: 202, or 503 when no conductor
 * listens. */
static int start_and_cast(struct nb_ctx *ctx, struct nb_resp *resp, const json_t *inst,
                          const json_t *m, const char *action, bool abort)
{
    const char *uuid = nb_json_str(inst, "uuid"), *muuid = nb_json_str(m, "uuid");
    if (nb_action_start(nb_srv_db(), ctx, uuid, action) < 0)
        return -1;
    int rc = abort ? nb_conductor_live_migration_abort(ctx, uuid, muuid)
                   : nb_conductor_live_migration_force_complete(ctx, uuid, muuid);
    if (rc < 0) { /* nothing else recorded: refused, the migration goes on as it was */
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        nb_action_finish(nb_srv_db(), &sub, uuid, "The compute conductor is not available.");
        NB_ERROR("nubo.compute.api", ctx, uuid, "no conductor listening for %s", action);
        return nb_error(ctx, 503, NULL, "The compute conductor is not available.");
    }
    return nb_resp_empty(resp, 202);
}

/* 400 InvalidMigrationState unless m's status is in allowed. 0/-1. */
static int check_migration_status(struct nb_ctx *ctx, const json_t *m, const char *uuid,
                                  const char *const *allowed, const char *method)
{
    const char *st = nb_json_str(m, "status");
    if (nb_srv_in_set(st, allowed) && st)
        return 0;
    return nb_error(ctx, 400, NULL,
                    "Migration %lld state of instance %s is %s. Cannot %s while the migration is "
                    "in this state.",
                    nb_json_int(m, "id", 0), uuid, st ? st : "None", method);
}

/* DELETE /servers/{id}/migrations/{mid}: Nova's live_migrate_abort. */
static int h_abort(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *inst = get_server(ctx, req, 24, "os_compute_api:servers:migrations:delete");
    if (!inst)
        return -1;
    static const char *const task[] = {NB_TASK_MIGRATING, NULL};
    static const char *const running[] = {NB_MIGRATION_RUNNING, NULL};
    static const char *const queued[] = {NB_MIGRATION_RUNNING, NB_MIGRATION_QUEUED,
                                         NB_MIGRATION_PREPARING, NULL};
    const struct nb_srv_state_rule rule = {NULL, task, false};
    json_t *m = NULL;
    int rc = -1;
    if (nb_srv_check_lock(ctx, inst) < 0 ||
        nb_srv_check_state(ctx, inst, "abort live migration", &rule) < 0 ||
        !(m = get_migration(ctx, req, inst)) ||
        check_migration_status(ctx, m, nb_json_str(inst, "uuid"),
                               nb_ctx_mv_ge(ctx, 2, 65) ? queued : running,
                               "abort live migration") < 0)
        goto out;
    rc = start_and_cast(ctx, resp, inst, m, "live_migration_cancel", true);
out:
    json_decref(inst);
    json_decref(m);
    return rc;
}

/* The body {"force_complete": null} (schemas/server_migrations.py), with
 * the action dispatch's 400 for another action. 0/-1. */
static int check_force_complete_body(struct nb_ctx *ctx, struct nb_req *req)
{
    json_t *body = nb_req_json_object(ctx, req);
    if (!body)
        return -1;
    int rc = 0;
    json_t *v = json_object_get(body, "force_complete");
    void *it = json_object_iter(body);
    if (!v)
        rc = nb_error(ctx, 400, NULL, "There is no such action: %s",
                      it ? json_object_iter_key(it) : "None");
    else if (json_object_size(body) > 1 || !json_is_null(v)) {
        static const char *const only[] = {"force_complete", NULL};
        rc = json_object_size(body) > 1
                 ? nb_res_only_keys(ctx, NULL, body, only)
                 : nb_srv_bad(ctx, "force_complete", v, "is not of type 'null'");
    }
    return rc; /* body is the request's (borrowed) */
}

/* POST /servers/{id}/migrations/{mid}/action {"force_complete": null}:
 * Nova's live_migrate_force_complete. */
static int h_action(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (!nb_ctx_mv_ge(ctx, 2, 22))
        return nb_error(ctx, 404, NULL, "The resource could not be found.");
    if (check_force_complete_body(ctx, req) < 0)
        return -1;
    json_t *inst = get_server(ctx, req, 22, "os_compute_api:servers:migrations:force_complete");
    if (!inst)
        return -1;
    static const char *const vm[] = {NB_VM_ACTIVE, NULL};
    static const char *const task[] = {NB_TASK_MIGRATING, NULL};
    static const char *const running[] = {NB_MIGRATION_RUNNING, NULL};
    const struct nb_srv_state_rule rule = {vm, task, false};
    json_t *m = NULL;
    int rc = -1;
    if (nb_srv_check_lock(ctx, inst) < 0 ||
        nb_srv_check_state(ctx, inst, "force_complete", &rule) < 0)
        goto out;
    /* here Nova answers an unknown migration with 400 */
    if (!(m = get_migration(ctx, req, inst))) {
        if (nb_ctx_status(ctx) == 404)
            nb_srv_error_as(ctx, 400, NULL);
        goto out;
    }
    if (check_migration_status(ctx, m, nb_json_str(inst, "uuid"), running, "force complete") < 0)
        goto out;
    rc = start_and_cast(ctx, resp, inst, m, "live_migration_force_complete", false);
out:
    json_decref(inst);
    json_decref(m);
    return rc;
}

int nb_compute_migrations_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/os-migrations", h_index, 0);
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/migrations", h_server_index, 0);
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/migrations/{migration_id}",
                  h_server_show, 0);
    nb_http_route("DELETE", "/compute/v2.1/servers/{server_id}/migrations/{migration_id}", h_abort,
                  0);
    nb_http_route("POST", "/compute/v2.1/servers/{server_id}/migrations/{migration_id}/action",
                  h_action, 0);
    return 0;
}

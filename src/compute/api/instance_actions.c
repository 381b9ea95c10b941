/* instance_actions.c - /compute/v2.1/servers/{id}/os-instance-actions[/{req}]
 * as Nova's instance_actions.py: the actions recorded for a server, newest
 * first (paged by request ID from 2.58), and one action with its events.
 *
 * What an event shows depends on the caller and the microversion: admins
 * see events (with traceback) at every version, others from 2.51 and
 * without traceback; hostId from 2.62 for everyone and host for admins;
 * details from 2.84 for admins. Deleted servers' actions are visible from
 * 2.21. */
#include "common/config.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/links.h"
#include "compute/api/server_views.h"
#include "compute/api/validate.h"
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *get_server(struct nb_ctx *ctx, struct nb_req *req, const char *rule)
{
    json_t *inst =
        nb_srv_instance_get(ctx, nb_req_param(req, "server_id"), nb_ctx_mv_ge(ctx, 2, 21));
    if (!inst)
        return NULL;
    if (nb_srv_policy(ctx, rule, nb_srv_is_reader_of(ctx, nb_json_str(inst, "project_id"))) < 0) {
        json_decref(inst);
        return NULL;
    }
    return inst;
}

static json_t *str_or_null(const json_t *row, const char *key)
{
    const char *s = nb_json_str(row, key);
    return s ? json_string(s) : json_null();
}

static json_t *action_view(struct nb_ctx *ctx, const json_t *a)
{
    json_t *v = json_object();
    json_object_set_new(v, "action", str_or_null(a, "action"));
    json_object_set_new(v, "instance_uuid", str_or_null(a, "instance_uuid"));
    json_object_set_new(v, "request_id", str_or_null(a, "request_id"));
    json_object_set_new(v, "user_id", str_or_null(a, "user_id"));
    json_object_set_new(v, "project_id", str_or_null(a, "project_id"));
    json_object_set_new(v, "start_time", nb_srv_json_dbtime(nb_json_str(a, "start_time")));
    json_object_set_new(v, "message", str_or_null(a, "message"));
    if (nb_ctx_mv_ge(ctx, 2, 58)) {
        const char *upd = nb_json_str(a, "updated_at");
        json_object_set_new(v, "updated_at",
                            nb_srv_json_dbtime(upd ? upd : nb_json_str(a, "start_time")));
    }
    return v;
}

/* The 2.58+ query: limit, marker, changes-since, changes-before (2.66). */
static int check_list_query(struct nb_ctx *ctx, json_t *q)
{
    const char *k;
    json_t *vals;
    json_object_foreach (q, k, vals) {
        bool known = !strcmp(k, "limit") || !strcmp(k, "marker") || !strcmp(k, "changes-since") ||
                     (!strcmp(k, "changes-before") && nb_ctx_mv_ge(ctx, 2, 66));
        if (!known)
            return nb_error(ctx, 400, NULL,
                            "Additional properties are not allowed ('%s' was unexpected)", k);
        if (json_array_size(vals) > 1)
            return nb_error(ctx, 400, NULL,
                            "Invalid input for query parameters %s. Value: multiple. It is too "
                            "long",
                            k);
        const char *s = json_string_value(json_array_get(vals, 0));
        if (!strncmp(k, "changes-", 8) && nb_time_parse(s) < 0)
            return nb_error(ctx, 400, NULL,
                            "Invalid input for query parameters %s. Value: %s. '%s' is not a "
                            "'date-time'",
                            k, s, s);
    }
    return 0;
}

/* The bounds of a paged (2.58+) list from q: changes-since and
 * changes-before (borrowed; NULL when absent or not paged) in order, and
 * the limit (at most [api] max_limit). 0, or -1 after the 400. */
static int list_bounds(struct nb_ctx *ctx, json_t *q, bool paged, const char **since,
                       const char **before, long long *limit)
{
    *since = paged ? nb_srv_query_last(q, "changes-since") : NULL;
    *before = paged ? nb_srv_query_last(q, "changes-before") : NULL;
    if (*since && *before && nb_time_parse(*before) < nb_time_parse(*since))
        return nb_error(ctx, 400, NULL,
                        "The value of changes-since must be less than or equal to "
                        "changes-before.");
    *limit = nb_conf_int("api", "max_limit", 1000);
    const char *lim = paged ? nb_srv_query_last(q, "limit") : NULL;
    if (lim) {
        long long v;
        if (nb_srv_query_nonneg_int(ctx, "limit", lim, &v) < 0)
            return -1;
        if (v < *limit)
            *limit = v;
    }
    return 0;
}

/* The actions of instance uuid changed within [since, before] (either may
 * be NULL), newest first. New ref, or NULL on a database error. */
static json_t *action_rows(struct nb_ctx *ctx, const char *uuid, const char *since,
                           const char *before)
{
    char since_buf[32] = "", before_buf[40] = "";
    if (since) {
        nb_time_iso(nb_time_parse(since), since_buf);
        since_buf[19] = '\0';
    }
    if (before) {
        nb_time_iso(nb_time_parse(before), before_buf);
        snprintf(before_buf + 19, sizeof(before_buf) - 19, ".999999");
    }
    return nb_db_rows(nb_srv_db(), ctx,
                      "SELECT * FROM instance_actions WHERE instance_uuid = ? AND deleted = 0 AND "
                      "(? IS NULL OR COALESCE(updated_at, start_time) >= ?) AND "
                      "(? IS NULL OR COALESCE(updated_at, start_time) <= ?) "
                      "ORDER BY created_at DESC, id DESC",
                      "sssss", uuid, since ? since_buf : NULL, since_buf,
                      before ? before_buf : NULL, before_buf);
}

/* The index in rows after the action with request ID marker (0 without a
 * marker) into *start. 0, or -1 after the 400 for an unknown marker. */
static int marker_start(struct nb_ctx *ctx, json_t *rows, const char *marker, size_t *start)
{
    *start = 0;
    if (!marker)
        return 0;
    size_t i;
    json_t *r;
    bool found = false;
    json_array_foreach (rows, i, r) {
        if (!found && !strcmp(nb_json_str(r, "request_id"), marker)) {
            found = true;
            *start = i + 1;
        }
    }
    if (!found)
        return nb_error(ctx, 400, NULL, "Marker %s could not be found.", marker);
    return 0;
}

/* {"instanceActions": […]} from rows[start…], at most limit when paged,
 * with the next link when the page is full. New ref. */
static json_t *actions_page(struct nb_ctx *ctx, struct nb_req *req, json_t *rows, size_t start,
                            bool paged, long long limit, const char *uuid)
{
    json_t *list = json_array();
    const char *last = NULL;
    for (size_t i = start; i < json_array_size(rows) && (!paged || (long long)(i - start) < limit);
         i++) {
        json_t *r = json_array_get(rows, i);
        json_array_append_new(list, action_view(ctx, r));
        last = nb_json_str(r, "request_id");
    }
    json_t *body = json_pack("{s:o}", "instanceActions", list);
    if (paged && limit && (long long)json_array_size(list) == limit && last) {
        char *coll = nb_strdup_printf("servers/%s/os-instance-actions", uuid);
        json_object_set_new(body, "links", nb_res_next_links(req, coll, last));
        free(coll);
    }
    return body;
}

/* GET /servers/{id}/os-instance-actions, paged and filtered from 2.58. */
static int h_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    bool paged = nb_ctx_mv_ge(ctx, 2, 58);
    json_t *q = nb_srv_query_all(req);
    json_t *inst = NULL, *rows = NULL;
    int rc = -1;
    if (paged && check_list_query(ctx, q) < 0)
        goto out;
    if (!(inst = get_server(ctx, req, "os_compute_api:os-instance-actions:list")))
        goto out;
    const char *uuid = nb_json_str(inst, "uuid");
    const char *since = NULL, *before = NULL;
    long long limit = 0;
    if (list_bounds(ctx, q, paged, &since, &before, &limit) < 0)
        goto out;
    if (!(rows = action_rows(ctx, uuid, since, before)))
        goto out;
    size_t start = 0;
    if (marker_start(ctx, rows, paged ? nb_srv_query_last(q, "marker") : NULL, &start) < 0)
        goto out;
    rc = nb_resp_json(resp, 200, actions_page(ctx, req, rows, start, paged, limit, uuid));
out:
    json_decref(q);
    json_decref(inst);
    json_decref(rows);
    return rc;
}

static json_t *event_view(struct nb_ctx *ctx, const json_t *e, const char *project_id)
{
    json_t *v = json_object();
    json_object_set_new(v, "event", str_or_null(e, "event"));
    json_object_set_new(v, "start_time", nb_srv_json_dbtime(nb_json_str(e, "start_time")));
    json_object_set_new(v, "finish_time", nb_srv_json_dbtime(nb_json_str(e, "finish_time")));
    json_object_set_new(v, "result", str_or_null(e, "result"));
    if (ctx->is_admin)
        json_object_set_new(v, "traceback", str_or_null(e, "traceback"));
    if (nb_ctx_mv_ge(ctx, 2, 62)) {
        if (ctx->is_admin)
            json_object_set_new(v, "host", str_or_null(e, "host"));
        char hostid[57];
        nb_srv_host_id(project_id, nb_json_str(e, "host"), hostid);
        json_object_set_new(v, "hostId", json_string(hostid));
    }
    if (nb_ctx_mv_ge(ctx, 2, 84) && ctx->is_admin)
        json_object_set_new(v, "details", str_or_null(e, "details"));
    return v;
}

static int h_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *inst = get_server(ctx, req, "os_compute_api:os-instance-actions:show");
    if (!inst)
        return -1;
    const char *rid = nb_req_param(req, "request_id");
    json_t *action = NULL, *events = NULL;
    int rc = -1;
    action = nb_db_row(nb_srv_db(), ctx,
                       "SELECT * FROM instance_actions WHERE instance_uuid = ? AND request_id = ? "
                       "AND deleted = 0 ORDER BY id DESC",
                       "ss", nb_json_str(inst, "uuid"), rid);
    if (!action) {
        if (!nb_ctx_failed(ctx))
            nb_error(ctx, 404, NULL, "Action %s not found", rid);
        goto out;
    }
    json_t *view = action_view(ctx, action);
    /* events: admins always (os-instance-actions:events), others from 2.51 */
    if (ctx->is_admin || nb_ctx_mv_ge(ctx, 2, 51)) {
        events = nb_db_rows(nb_srv_db(), ctx,
                            "SELECT * FROM instance_actions_events WHERE action_id = ? AND "
                            "deleted = 0 ORDER BY created_at DESC, id DESC",
                            "i", nb_json_int(action, "id", 0));
        if (!events) {
            json_decref(view);
            goto out;
        }
        const char *project = nb_json_str(action, "project_id");
        if (!project)
            project = nb_json_str(inst, "project_id");
        json_t *list = json_array();
        size_t i;
        json_t *e;
        json_array_foreach (events, i, e)
            json_array_append_new(list, event_view(ctx, e, project));
        json_object_set_new(view, "events", list);
    }
    rc = nb_resp_json(resp, 200, json_pack("{s:o}", "instanceAction", view));
out:
    json_decref(inst);
    json_decref(action);
    json_decref(events);
    return rc;
}

int nb_compute_instance_actions_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/os-instance-actions", h_list, 0);
    nb_http_route("GET", "/compute/v2.1/servers/{server_id}/os-instance-actions/{request_id}",
                  h_show, 0);
    return 0;
}

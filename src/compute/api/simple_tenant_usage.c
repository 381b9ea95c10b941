/* simple_tenant_usage.c - the usage reports of the Compute API, as Nova's
 * simple_tenant_usage.py (Horizon's overview page, `openstack usage`):
 *   GET /os-simple-tenant-usage               every project (admin)
 *   GET /os-simple-tenant-usage/{tenant_id}   one project (its readers, admin)
 *
 * A report covers [start, end) (query "start" and "end" in Nova's three
 * date-time formats, now when absent; end is cut to now). It lists the
 * instances, deleted ones included, launched before the end and not
 * terminated by the start, in (project_id, uuid) order, at most [api]
 * max_limit of them; from 2.40 "limit" and "marker" page through them and a
 * full page carries a "next" link; from 2.75 unknown query keys are 400.
 * Each instance is charged the hours of its lifetime inside the period
 * (usage_period.c) times its flavor's vcpus, memory_mb and root+ephemeral
 * disk; the project totals sum them. The list shows each instance only
 * with detailed=1; the one-project report always does. */
#include "common/json.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/links.h"
#include "compute/api/usage_period.h"
#include "compute/api/validate.h"
#include "db/db.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RULE_LIST "os_compute_api:os-simple-tenant-usage:list"
#define RULE_SHOW "os_compute_api:os-simple-tenant-usage:show"

/* What a report asks for, from the query string. */
struct usage_query {
    int64_t start, stop;
    bool detailed;
    long long limit;
    const char *marker; /* borrowed from the request */
};

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The first non-empty value of key in q (urllib's parse_qs drops empty
 * ones; Nova reads the first). Borrowed, or NULL. */
static const char *first_value(json_t *q, const char *key)
{
    size_t i;
    json_t *v;
    json_array_foreach (json_object_get(q, key), i, v)
        if (json_string_length(v))
            return json_string_value(v);
    return NULL;
}

/* The query schemas: from 2.75 only the known keys; from 2.40 every limit
 * a non-negative integer. 0/-1. */
static int check_query(struct nb_ctx *ctx, struct nb_req *req, json_t *q, bool index)
{
    static const char *const index_keys[] = {"start", "end", "detailed", "limit", "marker", NULL};
    static const char *const show_keys[] = {"start", "end", "limit", "marker", NULL};
    if (nb_ctx_mv_ge(ctx, 2, 75) && nb_res_query_only(ctx, req, index ? index_keys : show_keys) < 0)
        return -1;
    if (!nb_ctx_mv_ge(ctx, 2, 40))
        return 0;
    size_t i;
    json_t *v;
    long long n;
    json_array_foreach (json_object_get(q, "limit"), i, v)
        if (nb_srv_query_nonneg_int(ctx, "limit", json_string_value(v), &n) < 0)
            return -1;
    return 0;
}

/* One end of the period: its query value parsed, or now. 0, or -1 after
 * Nova's 400. */
static int period_time(struct nb_ctx *ctx, const char *s, int64_t *out)
{
    if (!s) {
        *out = now_us();
        return 0;
    }
    if (nb_usage_parse_period_time(s, out) < 0)
        return nb_error(ctx, 400, NULL, "Invalid datetime string: Datetime is in invalid format");
    return 0;
}

/* Nova's _get_datetime_range, the cut to now and the paging parameters
 * into u. 0, or -1 after a 400. */
static int parse_query(struct nb_ctx *ctx, struct nb_req *req, json_t *q, struct usage_query *u)
{
    const char *start = first_value(q, "start"), *end = first_value(q, "end");
    if (period_time(ctx, start, &u->start) < 0 || period_time(ctx, end, &u->stop) < 0)
        return -1;
    /* Nova reads its clock for each and once more for the cut, each time
     * later: an end left out is never before a start left out, and the
     * cut never moves it */
    if (!start && !end && u->stop <= u->start)
        u->stop = u->start + 1;
    if (u->start >= u->stop)
        return nb_error(ctx, 400, NULL,
                        "Invalid start time. The start time cannot occur after the end time.");
    const char *detailed = first_value(q, "detailed");
    u->detailed = detailed && !strcmp(detailed, "1");
    int64_t now = now_us();
    if (end && u->stop > now)
        u->stop = now;
    u->limit = nb_res_max_limit();
    u->marker = NULL;
    if (nb_ctx_mv_ge(ctx, 2, 40))
        return nb_res_limit_marker(ctx, req, &u->limit, &u->marker);
    return 0;
}

/* The instances of the report (all projects when project is NULL), in
 * Nova's page order. New array, or NULL after an error (400 for a marker
 * that names no instance). */
static json_t *window_instances(struct nb_ctx *ctx, const struct usage_query *u,
                                const char *project)
{
    struct nb_db *db = nb_srv_db();
    json_t *m = NULL;
    if (u->marker) {
        m = nb_db_row(db, ctx, "SELECT project_id, uuid FROM instances WHERE uuid = ?", "s",
                      u->marker);
        if (!m) {
            if (!nb_ctx_status(ctx))
                nb_error(ctx, 400, NULL, "Marker %s could not be found.", u->marker);
            return NULL;
        }
    }
    char begin[32], end[32];
    nb_usage_format_time(u->start, begin);
    nb_usage_format_time(u->stop, end);
    const char *mp = m ? nb_json_str(m, "project_id") : NULL, *mu = nb_json_str(m, "uuid");
    json_t *rows = nb_db_rows(
        db, ctx,
        "SELECT uuid, display_name, project_id, vm_state, launched_at, terminated_at, flavor "
        "FROM instances WHERE (terminated_at IS NULL OR terminated_at > ?) AND launched_at < ? "
        "AND (? IS NULL OR project_id = ?) "
        "AND (? IS NULL OR project_id > ? OR (project_id = ? AND uuid > ?)) "
        "ORDER BY project_id, uuid LIMIT ?",
        "ssssssssi", begin, end, project, project, mu, mp, mp, mu, u->limit);
    json_decref(m);
    return rows;
}

/* A time column as microseconds, NB_USAGE_NONE when NULL or unreadable. */
static int64_t row_time(const json_t *row, const char *key)
{
    int64_t t;
    const char *s = nb_json_str(row, key);
    if (s && nb_usage_strptime(s, "%Y-%m-%dT%H:%M:%S.%f", &t) == 0)
        return t;
    if (s && nb_usage_strptime(s, "%Y-%m-%dT%H:%M:%S", &t) == 0)
        return t;
    return NB_USAGE_NONE;
}

static json_t *time_json(int64_t t)
{
    char buf[32];
    return t == NB_USAGE_NONE ? json_null() : json_string(nb_usage_format_time(t, buf));
}

/* One server_usages entry (Nova's info dict, in its key order); *hours and
 * the flavor's sizes into sizes[3] (local_gb, vcpus, memory_mb) for the
 * totals. New ref. */
static json_t *server_usage(const json_t *row, const struct usage_query *u, int64_t now,
                            double *hours, long long sizes[3])
{
    int64_t launched = row_time(row, "launched_at"), ended = row_time(row, "terminated_at");
    json_t *fl = nb_json_parse(nb_json_str(row, "flavor"));
    *hours = nb_usage_hours(launched, ended, u->start, u->stop);
    sizes[0] = nb_json_int(fl, "root_gb", 0) + nb_json_int(fl, "ephemeral_gb", 0);
    sizes[1] = nb_json_int(fl, "vcpus", 0);
    sizes[2] = nb_json_int(fl, "memory_mb", 0);
    const char *name = nb_json_str(fl, "name"), *dname = nb_json_str(row, "display_name");
    const char *state = ended != NB_USAGE_NONE ? "terminated" : nb_json_str(row, "vm_state");
    /* int(timedelta.total_seconds()): towards zero (the window's SQL only
     * lists launched instances; an unreadable launched_at counts nothing) */
    long long uptime = launched == NB_USAGE_NONE
                           ? 0
                           : ((ended != NB_USAGE_NONE ? ended : now) - launched) / 1000000;
    json_t *v = json_object();
    json_object_set_new(v, "hours", json_real(*hours));
    json_object_set_new(v, "flavor", json_string(name ? name : ""));
    json_object_set_new(v, "instance_id", json_string(nb_json_str(row, "uuid")));
    json_object_set_new(v, "name", dname ? json_string(dname) : json_null());
    json_object_set_new(v, "tenant_id", json_string(nb_json_str(row, "project_id")));
    json_object_set_new(v, "memory_mb", json_integer(sizes[2]));
    json_object_set_new(v, "local_gb", json_integer(sizes[0]));
    json_object_set_new(v, "vcpus", json_integer(sizes[1]));
    json_object_set_new(v, "started_at", time_json(launched));
    json_object_set_new(v, "ended_at", time_json(ended));
    json_object_set_new(v, "state", state ? json_string(state) : json_null());
    json_object_set_new(v, "uptime", json_integer(uptime));
    json_decref(fl);
    return v;
}

/* A new project summary (Nova's key order; the totals start at 0 and
 * become numbers with fractions as soon as one instance adds its hours). */
static json_t *new_summary(const char *project, const struct usage_query *u, bool detailed)
{
    json_t *s = json_object();
    json_object_set_new(s, "tenant_id", json_string(project));
    if (detailed)
        json_object_set_new(s, "server_usages", json_array());
    static const char *const totals[] = {"total_local_gb_usage", "total_vcpus_usage",
                                         "total_memory_mb_usage", "total_hours"};
    for (size_t i = 0; i < 4; i++)
        json_object_set_new(s, totals[i], json_real(0));
    json_object_set_new(s, "start", time_json(u->start));
    json_object_set_new(s, "stop", time_json(u->stop));
    return s;
}

static void add_total(json_t *s, const char *key, double v)
{
    json_object_set_new(s, key, json_real(json_real_value(json_object_get(s, key)) + v));
}

/* Nova's _tenant_usages_for_period over rows: the summaries, one per
 * project in row order (new array), and every server usage into *all (new
 * array, for the paging links). */
static json_t *summaries(json_t *rows, const struct usage_query *u, bool detailed, json_t **all)
{
    json_t *list = json_array(), *by_project = json_object();
    int64_t now = now_us();
    *all = json_array();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        double hours;
        long long sz[3];
        json_t *info = server_usage(row, u, now, &hours, sz);
        const char *project = nb_json_str(row, "project_id");
        json_t *s = json_object_get(by_project, project ? project : "");
        if (!s) {
            s = new_summary(project, u, detailed);
            json_object_set_new(by_project, project ? project : "", s);
            json_array_append(list, s);
        }
        add_total(s, "total_local_gb_usage", (double)sz[0] * hours);
        add_total(s, "total_vcpus_usage", (double)sz[1] * hours);
        add_total(s, "total_memory_mb_usage", (double)sz[2] * hours);
        add_total(s, "total_hours", hours);
        if (detailed)
            json_array_append(json_object_get(s, "server_usages"), info);
        json_array_append_new(*all, info);
    }
    json_decref(by_project);
    return list;
}

/* The "next" link of a 2.40+ page into body[key]. */
static void page_links(struct nb_ctx *ctx, struct nb_req *req, json_t *body, const char *key,
                       const char *collection, json_t *all)
{
    size_t n = json_array_size(all);
    if (!nb_ctx_mv_ge(ctx, 2, 40) || !n)
        return;
    nb_res_next_link(body, key, req, collection, n,
                     nb_json_str(json_array_get(all, n - 1), "instance_id"));
}

/* The report for project (NULL: all): the summaries and the server usages
 * (*all), or NULL after an error. */
static json_t *report(struct nb_ctx *ctx, struct nb_req *req, json_t *q, const char *project,
                      bool index, json_t **all)
{
    struct usage_query u;
    if (parse_query(ctx, req, q, &u) < 0)
        return NULL;
    json_t *rows = window_instances(ctx, &u, project);
    if (!rows)
        return NULL;
    json_t *list = summaries(rows, &u, index ? u.detailed : true, all);
    json_decref(rows);
    return list;
}

static int h_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    json_t *q = nb_srv_query_all(req), *all = NULL, *list;
    int rc = -1;
    if (check_query(ctx, req, q, true) < 0 || nb_res_admin(ctx, RULE_LIST) < 0 ||
        !(list = report(ctx, req, q, NULL, true, &all)))
        goto out;
    json_t *body = json_pack("{s:o}", "tenant_usages", list);
    page_links(ctx, req, body, "tenant_usages_links", "os-simple-tenant-usage", all);
    rc = nb_resp_json(resp, 200, body);
out:
    json_decref(q);
    json_decref(all);
    return rc;
}

static int h_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *tenant = nb_req_param(req, "tenant_id");
    json_t *q = nb_srv_query_all(req), *all = NULL, *list;
    int rc = -1;
    if (check_query(ctx, req, q, false) < 0 ||
        nb_srv_policy(ctx, RULE_SHOW, nb_srv_is_reader_of(ctx, tenant)) < 0 ||
        !(list = report(ctx, req, q, tenant, false, &all)))
        goto out;
    json_t *usage = json_array_size(list) ? json_incref(json_array_get(list, 0)) : json_object();
    json_decref(list);
    json_t *body = json_pack("{s:o}", "tenant_usage", usage);
    char *coll = nb_strdup_printf("os-simple-tenant-usage/%s", tenant);
    page_links(ctx, req, body, "tenant_usage_links", coll, all);
    free(coll);
    rc = nb_resp_json(resp, 200, body);
out:
    json_decref(q);
    json_decref(all);
    return rc;
}

int nb_compute_simple_tenant_usage_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/os-simple-tenant-usage", h_index, 0);
    nb_http_route("GET", "/compute/v2.1/os-simple-tenant-usage/{tenant_id}", h_show, 0);
    return 0;
}

/* instance_usage_audit_log.c - the instance usage audit log of the Compute
 * API, as Nova's instance_usage_audit_log.py (admin only):
 *   GET /os-instance_usage_audit_log                      the last period
 *   GET /os-instance_usage_audit_log/{before_timestamp}   the last period
 *                                                         ended before it
 *
 * Nova's compute hosts write a task log per audit period when [DEFAULT]
 * instance_usage_audit is on, for the notifications billing systems
 * consume. nubo sends no usage notifications, so no host has run the task:
 * the answer is Nova's for that case, the period of [DEFAULT]
 * instance_usage_audit_period ("month", "day@18", …; usage_period.c), every
 * nova-compute service (disabled ones too) in hosts_not_run and an empty
 * log. */
#include "common/config.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/api/api.h"
#include "compute/api/instances.h"
#include "compute/api/usage_period.h"
#include "compute/api/validate.h"
#include "db/db.h"

#include <stdlib.h>
#include <time.h>

/* Nova's _get_audit_task_logs for the period last completed before
 * `before`. New ref, or NULL after an error. */
static json_t *audit_log(struct nb_ctx *ctx, int64_t before)
{
    int64_t begin, end;
    const char *unit = nb_conf_str("DEFAULT", "instance_usage_audit_period", "month");
    if (nb_usage_audit_period(unit, before, &begin, &end) < 0) {
        nb_error(ctx, 500, NULL, "Invalid [DEFAULT] instance_usage_audit_period: %s", unit);
        return NULL;
    }
    json_t *rows = nb_db_rows(nb_srv_db(), ctx,
                              "SELECT DISTINCT host FROM services WHERE \"binary\" = "
                              "'nova-compute' AND deleted = 0 ORDER BY host",
                              "");
    if (!rows)
        return NULL;
    json_t *hosts = nb_json_strings(rows, "host");
    json_decref(rows);
    size_t n = json_array_size(hosts);
    char b[32], e[32];
    /* no task logs: no host done or running, all of them not run */
    char *status = n ? nb_strdup_printf("0 of %zu hosts done. 0 errors.", n)
                     : nb_strdup_printf("ALL hosts done. 0 errors.");
    json_t *log =
        json_pack("{s:s, s:s, s:I, s:i, s:i, s:I, s:o, s:i, s:i, s:s, s:{}}", "period_beginning",
                  nb_usage_format_pystr(begin, b), "period_ending", nb_usage_format_pystr(end, e),
                  "num_hosts", (json_int_t)n, "num_hosts_done", 0, "num_hosts_running", 0,
                  "num_hosts_not_run", (json_int_t)n, "hosts_not_run", hosts, "total_instances", 0,
                  "total_errors", 0, "overall_status", status, "log");
    free(status);
    return log;
}

static int h_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)req;
    if (nb_res_admin(ctx, "os_compute_api:os-instance-usage-audit-log:list") < 0)
        return -1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    json_t *log = audit_log(ctx, (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
    if (!log)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "instance_usage_audit_logs", log));
}

static int h_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_res_admin(ctx, "os_compute_api:os-instance-usage-audit-log:show") < 0)
        return -1;
    const char *id = nb_req_param(req, "before_timestamp");
    int64_t before;
    if (nb_usage_parse_audit_time(id, &before) < 0)
        return nb_error(ctx, 400, NULL, "Invalid timestamp for date %s", id ? id : "");
    json_t *log = audit_log(ctx, before);
    if (!log)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "instance_usage_audit_log", log));
}

int nb_compute_instance_usage_audit_log_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute/v2.1/os-instance_usage_audit_log", h_index, 0);
    nb_http_route("GET", "/compute/v2.1/os-instance_usage_audit_log/{before_timestamp}", h_show, 0);
    return 0;
}

/* hosts.c - /os-hosts, as Nova's hosts.py (admin only, gone from 2.43).
 *
 * The list is every enabled service but the API ones, with its topic and
 * zone (?zone= keeps one zone's). A host's detail is its first compute
 * node's totals and use, then the sizes of the instances on it: all of them
 * ((used_max)) and per project. Nova's libvirt driver implements neither
 * set_host_enabled, host_maintenance_mode nor host_power_action: once the
 * host is known and up, update, startup, shutdown and reboot answer 501 as
 * Nova's API does with it. */
#include "compute/api/api.h"
#include "compute/api/resources.h"
#include "compute/api/validate.h"
#include "common/cleanup.h"
#include "common/json.h"
#include "common/pyrepr.h"
#include "db/db.h"

#include <stdio.h>
#include <string.h>

static struct nb_env *env;

/* 404 from 2.43 and 403 for non-admins; 0/-1. */
static int hosts_allowed(struct nb_ctx *ctx, const char *rule)
{
    if (nb_ctx_mv_ge(ctx, 2, 43))
        return nb_error(ctx, 404, NULL, "The resource could not be found.");
    return nb_res_admin(ctx, rule);
}

static int hosts_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (hosts_allowed(ctx, "os_compute_api:os-hosts:list") < 0)
        return -1;
    const char *zone = nb_req_query(req, "zone");
    _cleanup_json_ json_t *zones = nb_res_aggregate_zones(ctx);
    if (!zones)
        return -1;
    _cleanup_json_ json_t *rows = nb_db_rows(
        env->db, ctx, "SELECT * FROM services WHERE deleted = 0 AND disabled = 0 ORDER BY id", "");
    if (!rows)
        return -1;
    json_t *hosts = json_array();
    size_t i;
    json_t *s;
    json_array_foreach (rows, i, s) {
        const char *bin = nb_json_str(s, "binary"), *topic = nb_json_str(s, "topic");
        const char *z = nb_res_service_zone(zones, s);
        if (!bin || strcmp(bin, "nova-osapi_compute") == 0 || strcmp(bin, "nova-metadata") == 0)
            continue;
        if (zone && *zone && strcmp(zone, z) != 0)
            continue;
        if (!topic)
            topic = strncmp(bin, "nova-", 5) == 0 ? bin + 5 : bin;
        json_array_append_new(hosts,
                              json_pack("{s:s?, s:s, s:s}", "host_name", nb_json_str(s, "host"),
                                        "service", topic, "zone", z));
    }
    return nb_resp_json(resp, 200, json_pack("{s:o}", "hosts", hosts));
}

static json_t *resource(const char *host, const char *project, json_int_t cpu, json_int_t mem,
                        json_int_t disk)
{
    return json_pack("{s:{s:s, s:s, s:I, s:I, s:I}}", "resource", "host", host, "project", project,
                     "cpu", cpu, "memory_mb", mem, "disk_gb", disk);
}

static int hosts_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (hosts_allowed(ctx, "os_compute_api:os-hosts:show") < 0)
        return -1;
    const char *host = nb_req_param(req, "host_name");
    _cleanup_json_ json_t *cn =
        nb_db_row(env->db, ctx,
                  "SELECT * FROM compute_nodes WHERE host = ? AND deleted = 0 ORDER BY id LIMIT 1",
                  "s", host);
    if (!cn)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NULL, "Host '%s' is not mapped to any cell", host);
    _cleanup_json_ json_t *insts =
        nb_db_rows(env->db, ctx,
                   "SELECT project_id, flavor FROM instances WHERE host = ? AND deleted = 0 "
                   "ORDER BY id",
                   "s", host);
    if (!insts)
        return -1;
    json_t *out = json_array();
    json_array_append_new(out, resource(host, "(total)", nb_json_int(cn, "vcpus", 0),
                                        nb_json_int(cn, "memory_mb", 0),
                                        nb_json_int(cn, "local_gb", 0)));
    json_array_append_new(out, resource(host, "(used_now)", nb_json_int(cn, "vcpus_used", 0),
                                        nb_json_int(cn, "memory_mb_used", 0),
                                        nb_json_int(cn, "local_gb_used", 0)));
    json_t *max = resource(host, "(used_max)", 0, 0, 0);
    json_array_append_new(out, max);
    json_t *projects = json_array(); /* per-project rows, in first-seen order */
    size_t i, j;
    json_t *row, *p;
    json_array_foreach (insts, i, row) {
        _cleanup_json_ json_t *fl = nb_json_parse(nb_json_str(row, "flavor"));
        const char *proj = nb_json_str(row, "project_id");
        json_int_t sz[3] = {nb_json_int(fl, "vcpus", 0), nb_json_int(fl, "memory_mb", 0),
                            nb_json_int(fl, "root_gb", 0) + nb_json_int(fl, "ephemeral_gb", 0)};
        json_t *pr = NULL;
        json_array_foreach (projects, j, p) {
            if (strcmp(nb_json_str(json_object_get(p, "resource"), "project"), proj) == 0)
                pr = p;
        }
        if (!pr) {
            pr = resource(host, proj, 0, 0, 0);
            json_array_append_new(projects, pr);
        }
        const char *keys[3] = {"cpu", "memory_mb", "disk_gb"};
        json_t *targets[2] = {json_object_get(max, "resource"), json_object_get(pr, "resource")};
        for (int t = 0; t < 2; t++)
            for (int k = 0; k < 3; k++)
                json_object_set_new(targets[t], keys[k],
                                    json_integer(nb_json_int(targets[t], keys[k], 0) + sz[k]));
    }
    json_array_extend(out, projects);
    json_decref(projects);
    return nb_resp_json(resp, 200, json_pack("{s:o}", "host", out));
}

/* HostAPI._assert_host_exists(must_be_up=True): 404 for a host without a
 * compute service, 400 when it is down. 0/-1. */
static int host_up(struct nb_ctx *ctx, const char *host)
{
    _cleanup_json_ json_t *svc = nb_db_row(env->db, ctx,
                                           "SELECT * FROM services WHERE host = ? AND deleted = 0 "
                                           "AND \"binary\" = 'nova-compute' ORDER BY id LIMIT 1",
                                           "s", host);
    if (!svc)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NULL, "Compute host %s could not be found.", host);
    if (!nb_res_service_is_up(svc))
        return nb_error(ctx, 400, NULL, "Compute service of %s is unavailable at this time.", host);
    return 0;
}

static int check_mode(struct nb_ctx *ctx, const json_t *body, const char *key)
{
    static const char *const modes[] = {"enable",  "disable", "Enable",
                                        "Disable", "ENABLE",  "DISABLE"};
    const json_t *v = json_object_get(body, key);
    if (!v)
        return 0;
    if (!json_is_string(v)) {
        _cleanup_free_ char *r = nb_pyrepr(v);
        char msg[256];
        snprintf(msg, sizeof(msg), "%.100s is not of type 'string'", r);
        return nb_res_bad_field(ctx, key, v, msg);
    }
    if (nb_srv_in_list(json_string_value(v), modes, 6))
        return 0;
    _cleanup_free_ char *r = nb_pyrepr(v);
    char why[256];
    snprintf(why, sizeof(why),
             "%.100s is not one of ['enable', 'disable', 'Enable', 'Disable', 'ENABLE', 'DISABLE']",
             r);
    return nb_res_bad_field(ctx, key, v, why);
}

static int hosts_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)resp;
    if (hosts_allowed(ctx, "os_compute_api:os-hosts:update") < 0)
        return -1;
    static const char *const allowed[] = {"status", "maintenance_mode", NULL};
    json_t *body = req->json;
    if (!json_is_object(body)) {
        _cleanup_free_ char *r = nb_pyrepr(body);
        return body ? nb_error(ctx, 400, NULL, "%s is not of type 'object'", r)
                    : nb_error(ctx, 400, NULL, "The request body is invalid.");
    }
    if (nb_res_only_keys(ctx, NULL, body, allowed) < 0 || check_mode(ctx, body, "status") < 0 ||
        check_mode(ctx, body, "maintenance_mode") < 0)
        return -1;
    if (!json_object_get(body, "status") && !json_object_get(body, "maintenance_mode"))
        return nb_error(ctx, 400, NULL, "%s is not valid under any of the given schemas", "{}");
    if (host_up(ctx, nb_req_param(req, "host_name")) < 0)
        return -1;
    return nb_error(ctx, 501, NULL, "The requested functionality is not supported.");
}

static int power_action(struct nb_ctx *ctx, struct nb_req *req, const char *rule)
{
    if (hosts_allowed(ctx, rule) < 0 || host_up(ctx, nb_req_param(req, "host_name")) < 0)
        return -1;
    return nb_error(ctx, 501, NULL, "The requested functionality is not supported.");
}

static int hosts_startup(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)resp;
    return power_action(ctx, req, "os_compute_api:os-hosts:start");
}

static int hosts_shutdown(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)resp;
    return power_action(ctx, req, "os_compute_api:os-hosts:shutdown");
}

static int hosts_reboot(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)resp;
    return power_action(ctx, req, "os_compute_api:os-hosts:reboot");
}

int nb_compute_hosts_init(struct nb_env *e)
{
    env = e;
    nb_http_route("GET", "/compute/v2.1/os-hosts", hosts_index, 0);
    nb_http_route("GET", "/compute/v2.1/os-hosts/{host_name}", hosts_show, 0);
    nb_http_route("PUT", "/compute/v2.1/os-hosts/{host_name}", hosts_update, 0);
    nb_http_route("GET", "/compute/v2.1/os-hosts/{host_name}/startup", hosts_startup, 0);
    nb_http_route("GET", "/compute/v2.1/os-hosts/{host_name}/shutdown", hosts_shutdown, 0);
    nb_http_route("GET", "/compute/v2.1/os-hosts/{host_name}/reboot", hosts_reboot, 0);
    return 0;
}

/* hypervisors.c - /os-hypervisors, as Nova's hypervisors.py.
 *
 * Hypervisors are the compute_nodes rows (written for the compute agents by
 * the conductor), each shown with the state and status of its host's
 * nova-compute service; nodes whose service is gone are skipped, as Nova
 * does. Ids are row ids before 2.53 and uuids from 2.53. Paging (limit,
 * marker) arrives in 2.33; from 2.53 the search and servers routes become
 * the hypervisor_hostname_pattern and with_servers query parameters. 2.88
 * drops the resource fields (vcpus, memory_mb, …) and the statistics and
 * uptime routes, and adds "uptime" to the detail view.
 *
 * Uptime comes from the host's agent: a bus call "get_host_uptime" on
 * compute.<host> that answers with the output of uptime(1) as a string. An
 * agent that does not answer it is treated like a Nova driver without
 * uptime support (501 on the old route, null in the 2.88 view). */
#include "compute/api/api.h"
#include "compute/api/links.h"
#include "compute/api/resources.h"
#include "compute/api/validate.h"
#include "compute/rpc/compute_api.h"
#include "common/cleanup.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"

#include <limits.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct nb_env *env;

/* The host's nova-compute service row (NULL if none). */
static json_t *host_service(struct nb_ctx *ctx, const char *host)
{
    return nb_db_row(env->db, ctx,
                     "SELECT * FROM services WHERE host = ? AND \"binary\" = 'nova-compute' AND "
                     "deleted = 0 ORDER BY id LIMIT 1",
                     "s", host);
}

/* uptime(1) output of host from its agent, or NULL when unavailable. */
static json_t *host_uptime(struct nb_ctx *ctx, const char *host)
{
    struct nb_ctx sub;
    nb_ctx_init_system(&sub, ctx->request_id);
    json_t *r = nb_compute_get_host_uptime(&sub, host, 5000);
    if (r && json_is_string(r))
        return r;
    json_decref(r);
    return NULL;
}

/* Servers on host as [{"name", "uuid"}]: nubo names domains by uuid, so the
 * instance name is the uuid. New ref or NULL. */
static json_t *host_servers(struct nb_ctx *ctx, const char *host)
{
    _cleanup_json_ json_t *rows = nb_db_rows(
        env->db, ctx, "SELECT uuid FROM instances WHERE host = ? AND deleted = 0 ORDER BY id", "s",
        host);
    if (!rows)
        return NULL;
    json_t *list = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *u = nb_json_str(r, "uuid");
        json_array_append_new(list, json_pack("{s:s, s:s}", "name", u, "uuid", u));
    }
    return list;
}

/* Nova's _view_hypervisor. servers is stolen (may be NULL). */
static json_t *hv_view(struct nb_ctx *ctx, const json_t *cn, const json_t *svc, bool detail,
                       json_t *servers, bool with_servers)
{
    bool uuids = nb_ctx_mv_ge(ctx, 2, 53);
    json_t *v =
        json_pack("{s:o, s:s, s:s, s:s}", "id",
                  uuids ? nb_res_row_copy(cn, "uuid") : json_integer(nb_json_int(cn, "id", 0)),
                  "hypervisor_hostname", nb_json_str(cn, "hypervisor_hostname"), "state",
                  nb_res_service_is_up(svc) ? "up" : "down", "status",
                  nb_json_int(svc, "disabled", 0) ? "disabled" : "enabled");
    if (detail) {
        json_object_set_new(v, "hypervisor_type", nb_res_row_copy(cn, "hypervisor_type"));
        json_object_set_new(v, "hypervisor_version",
                            json_integer(nb_json_int(cn, "hypervisor_version", 0)));
        json_object_set_new(v, "host_ip", nb_res_row_copy(cn, "host_ip"));
        json_object_set_new(v, "service",
                            json_pack("{s:o, s:s, s:o}", "id",
                                      uuids ? nb_res_row_copy(svc, "uuid")
                                            : json_integer(nb_json_int(svc, "id", 0)),
                                      "host", nb_json_str(cn, "host"), "disabled_reason",
                                      nb_res_row_copy(svc, "disabled_reason")));
    }
    if (detail && !nb_ctx_mv_ge(ctx, 2, 88)) {
        static const char *const fields[] = {"vcpus",
                                             "memory_mb",
                                             "local_gb",
                                             "vcpus_used",
                                             "memory_mb_used",
                                             "local_gb_used",
                                             "free_ram_mb",
                                             "free_disk_gb",
                                             "current_workload",
                                             "running_vms",
                                             "disk_available_least",
                                             NULL};
        for (const char *const *f = fields; *f; f++)
            json_object_set_new(v, *f, nb_res_row_copy(cn, *f));
        const char *ci = nb_json_str(cn, "cpu_info");
        if (!nb_ctx_mv_ge(ctx, 2, 28)) {
            json_object_set_new(v, "cpu_info", json_string(ci ? ci : ""));
        } else {
            json_t *parsed = ci && *ci ? nb_json_parse(ci) : NULL;
            json_object_set_new(v, "cpu_info", parsed ? parsed : json_object());
        }
    }
    if (detail && nb_ctx_mv_ge(ctx, 2, 88)) {
        json_t *up = nb_res_service_is_up(svc) ? host_uptime(ctx, nb_json_str(cn, "host")) : NULL;
        json_object_set_new(v, "uptime", up ? up : json_null());
    }
    if (servers && json_array_size(servers) > 0)
        json_object_set_new(v, "servers", servers);
    else if (with_servers && nb_ctx_mv_ge(ctx, 2, 75))
        json_object_set_new(v, "servers", servers ? servers : json_array());
    else
        json_decref(servers);
    return v;
}

/* Builds the view list of nodes (skipping those without a service). */
static json_t *view_nodes(struct nb_ctx *ctx, json_t *nodes, bool detail, bool with_servers)
{
    json_t *list = json_array();
    size_t i;
    json_t *cn;
    json_array_foreach (nodes, i, cn) {
        const char *host = nb_json_str(cn, "host");
        _cleanup_json_ json_t *svc = host_service(ctx, host);
        if (!svc) {
            if (nb_ctx_failed(ctx)) {
                json_decref(list);
                return NULL;
            }
            continue;
        }
        json_t *servers = NULL;
        if (with_servers && !(servers = host_servers(ctx, host))) {
            json_decref(list);
            return NULL;
        }
        json_array_append_new(list, hv_view(ctx, cn, svc, detail, servers, with_servers));
    }
    return list;
}

/* Compute nodes whose hypervisor_hostname contains pattern; 404 when none. */
static json_t *nodes_matching(struct nb_ctx *ctx, const char *pattern)
{
    json_t *rows = nb_db_rows(env->db, ctx,
                              "SELECT * FROM compute_nodes WHERE deleted = 0 AND "
                              "hypervisor_hostname LIKE '%' || ? || '%' ORDER BY id",
                              "s", pattern);
    if (rows && json_array_size(rows) == 0) {
        json_decref(rows);
        nb_error(ctx, 404, NULL, "No hypervisor matching '%s' could be found.", pattern);
        return NULL;
    }
    return rows;
}

static int check_with_servers(struct nb_ctx *ctx, struct nb_req *req, bool *out)
{
    *out = false;
    const char *v = nb_req_query(req, "with_servers");
    if (!v)
        return 0;
    _cleanup_json_ json_t *s = json_string(v);
    struct nb_ctx sub;
    nb_ctx_init(&sub);
    int b = nb_res_check_bool(&sub, "with_servers", s);
    if (b < 0)
        return nb_error(ctx, 400, NULL,
                        "Invalid input for query parameters with_servers. Value: %s. '%s' is not "
                        "one of [True, 'True', 'TRUE', 'true', '1', 'ON', 'On', 'on', 'YES', "
                        "'Yes', 'yes', False, 'False', 'FALSE', 'false', '0', 'OFF', 'Off', "
                        "'off', 'NO', 'No', 'no']",
                        v, v);
    *out = b == 1;
    return 0;
}

static int list_hypervisors(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                            bool detail)
{
    static const char *const allowed[] = {"limit", "marker", "hypervisor_hostname_pattern",
                                          "with_servers", NULL};
    bool v253 = nb_ctx_mv_ge(ctx, 2, 53), paging = nb_ctx_mv_ge(ctx, 2, 33);
    if (v253 && nb_res_query_only(ctx, req, allowed) < 0)
        return -1;
    long long limit = -1;
    const char *marker = NULL;
    if (paging && nb_res_limit_marker(ctx, req, &limit, &marker) < 0)
        return -1;
    bool with_servers = false;
    const char *pattern = v253 ? nb_req_query(req, "hypervisor_hostname_pattern") : NULL;
    if (v253 && check_with_servers(ctx, req, &with_servers) < 0)
        return -1;
    if (nb_res_admin(ctx, detail ? "os_compute_api:os-hypervisors:list-detail"
                                 : "os_compute_api:os-hypervisors:list") < 0)
        return -1;
    _cleanup_json_ json_t *nodes = NULL;
    if (pattern) {
        if (nb_req_query(req, "limit") || marker)
            return nb_error(ctx, 400, NULL,
                            "Paging over hypervisors with the hypervisor_hostname_pattern query "
                            "parameter is not supported.");
        paging = false;
        if (!(nodes = nodes_matching(ctx, pattern)))
            return -1;
    } else {
        long long after = 0;
        if (marker) {
            _cleanup_json_ json_t *m =
                nb_is_uuid(marker)
                    ? nb_db_row(env->db, ctx,
                                "SELECT id FROM compute_nodes WHERE uuid = ? AND deleted = 0", "s",
                                marker)
                    : nb_db_row(env->db, ctx,
                                "SELECT id FROM compute_nodes WHERE id = ? AND deleted = 0", "i",
                                strtoll(marker, NULL, 10));
            if (!m)
                return nb_ctx_failed(ctx)
                           ? -1
                           : nb_error(ctx, 400, NULL, "marker [%s] not found", marker);
            after = nb_json_int(m, "id", 0);
        }
        nodes = nb_db_rows(env->db, ctx,
                           "SELECT * FROM compute_nodes WHERE deleted = 0 AND id > ? ORDER BY id "
                           "LIMIT ?",
                           "ii", after, limit < 0 ? LLONG_MAX : limit);
        if (!nodes)
            return -1;
    }
    json_t *list = view_nodes(ctx, nodes, detail, with_servers);
    if (!list)
        return -1;
    json_t *body = json_pack("{s:o}", "hypervisors", list);
    size_t n = json_array_size(list);
    if (paging && n) {
        json_t *last = json_object_get(json_array_get(list, n - 1), "id");
        char idbuf[64];
        if (json_is_integer(last))
            snprintf(idbuf, sizeof(idbuf), "%lld", (long long)json_integer_value(last));
        else
            nb_strlcpy(idbuf, json_string_value(last), sizeof(idbuf));
        nb_res_next_link(body, "hypervisors_links", req,
                         detail ? "os-hypervisors/detail" : "os-hypervisors", n, idbuf);
    }
    return nb_resp_json(resp, 200, body);
}

static int hv_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return list_hypervisors(ctx, req, resp, false);
}

static int hv_detail(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return list_hypervisors(ctx, req, resp, true);
}

/* Nova's _validate_id then compute_node_get: the node by uuid (2.53+) or
 * integer id. NULL after 400/404. */
static json_t *find_node(struct nb_ctx *ctx, const char *id)
{
    json_t *cn;
    if (nb_ctx_mv_ge(ctx, 2, 53)) {
        if (!nb_is_uuid(id)) {
            nb_error(ctx, 400, NULL, "Invalid uuid %s", id);
            return NULL;
        }
        cn = nb_db_row(env->db, ctx, "SELECT * FROM compute_nodes WHERE uuid = ? AND deleted = 0",
                       "s", id);
    } else {
        const char *p = id;
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '-' || *p == '+')
            p++;
        bool ok = isdigit((unsigned char)*p);
        while (isdigit((unsigned char)*p))
            p++;
        while (isspace((unsigned char)*p))
            p++;
        if (!ok || *p) {
            nb_error(ctx, 404, NULL, "Hypervisor with ID '%s' could not be found.", id);
            return NULL;
        }
        cn = nb_db_row(env->db, ctx, "SELECT * FROM compute_nodes WHERE id = ? AND deleted = 0",
                       "i", strtoll(id, NULL, 10));
    }
    if (!cn && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, NULL, "Hypervisor with ID '%s' could not be found.", id);
    return cn;
}

static int hv_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    static const char *const allowed[] = {"with_servers", NULL};
    bool with_servers = false;
    if (nb_ctx_mv_ge(ctx, 2, 53) && (nb_res_query_only(ctx, req, allowed) < 0 ||
                                     check_with_servers(ctx, req, &with_servers) < 0))
        return -1;
    if (nb_res_admin(ctx, "os_compute_api:os-hypervisors:show") < 0)
        return -1;
    const char *id = nb_req_param(req, "hypervisor_id");
    _cleanup_json_ json_t *cn = find_node(ctx, id);
    if (!cn)
        return -1;
    const char *host = nb_json_str(cn, "host");
    json_t *servers = NULL;
    if (with_servers && !(servers = host_servers(ctx, host)))
        return -1;
    _cleanup_json_ json_t *svc = host_service(ctx, host);
    if (!svc) {
        json_decref(servers);
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NULL, "Hypervisor with ID '%s' could not be found.", id);
    }
    return nb_resp_json(
        resp, 200,
        json_pack("{s:o}", "hypervisor", hv_view(ctx, cn, svc, true, servers, with_servers)));
}

static int hv_uptime(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_ctx_mv_ge(ctx, 2, 88))
        return nb_error(ctx, 404, NULL, "The resource could not be found.");
    if (nb_res_admin(ctx, "os_compute_api:os-hypervisors:uptime") < 0)
        return -1;
    const char *id = nb_req_param(req, "hypervisor_id");
    _cleanup_json_ json_t *cn = find_node(ctx, id);
    if (!cn)
        return -1;
    const char *host = nb_json_str(cn, "host");
    _cleanup_json_ json_t *svc = host_service(ctx, host);
    if (!svc)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NULL, "Hypervisor with ID '%s' could not be found.", id);
    if (!nb_res_service_is_up(svc))
        return nb_error(ctx, 400, NULL, "Compute service of %s is unavailable at this time.", host);
    json_t *up = host_uptime(ctx, host);
    if (!up)
        return nb_error(ctx, 501, NULL, "The requested functionality is not supported.");
    json_t *v = hv_view(ctx, cn, svc, false, NULL, false);
    json_object_set_new(v, "uptime", up);
    return nb_resp_json(resp, 200, json_pack("{s:o}", "hypervisor", v));
}

/* The pre-2.53 /os-hypervisors/{pattern}/search and /servers routes. */
static int search_common(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, bool servers)
{
    if (nb_ctx_mv_ge(ctx, 2, 53))
        return nb_error(ctx, 404, NULL, "The resource could not be found.");
    if (nb_res_admin(ctx, servers ? "os_compute_api:os-hypervisors:servers"
                                  : "os_compute_api:os-hypervisors:search") < 0)
        return -1;
    _cleanup_json_ json_t *nodes = nodes_matching(ctx, nb_req_param(req, "pattern"));
    if (!nodes)
        return -1;
    json_t *list = view_nodes(ctx, nodes, false, servers);
    return list ? nb_resp_json(resp, 200, json_pack("{s:o}", "hypervisors", list)) : -1;
}

static int hv_search(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return search_common(ctx, req, resp, false);
}

static int hv_servers(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    return search_common(ctx, req, resp, true);
}

static int hv_statistics(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)req;
    if (nb_ctx_mv_ge(ctx, 2, 88))
        return nb_error(ctx, 404, NULL, "The resource could not be found.");
    if (nb_res_admin(ctx, "os_compute_api:os-hypervisors:statistics") < 0)
        return -1;
    /* compute_node_statistics: nodes joined with their enabled nova-compute
     * service; a missing sum is 0. */
    _cleanup_json_ json_t *row = nb_db_row(
        env->db, ctx,
        "SELECT COUNT(*) AS count, COALESCE(SUM(vcpus), 0) AS vcpus, "
        "COALESCE(SUM(memory_mb), 0) AS memory_mb, COALESCE(SUM(local_gb), 0) AS local_gb, "
        "COALESCE(SUM(vcpus_used), 0) AS vcpus_used, "
        "COALESCE(SUM(memory_mb_used), 0) AS memory_mb_used, "
        "COALESCE(SUM(local_gb_used), 0) AS local_gb_used, "
        "COALESCE(SUM(free_ram_mb), 0) AS free_ram_mb, "
        "COALESCE(SUM(free_disk_gb), 0) AS free_disk_gb, "
        "COALESCE(SUM(current_workload), 0) AS current_workload, "
        "COALESCE(SUM(running_vms), 0) AS running_vms, "
        "COALESCE(SUM(disk_available_least), 0) AS disk_available_least "
        "FROM compute_nodes cn WHERE cn.deleted = 0 AND EXISTS (SELECT 1 FROM services s WHERE "
        "(s.host = cn.host OR s.id = cn.service_id) AND s.disabled = 0 AND "
        "s.\"binary\" = 'nova-compute' AND s.deleted = 0)",
        "");
    if (!row)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:O}", "hypervisor_statistics", row));
}

int nb_compute_hypervisors_init(struct nb_env *e)
{
    env = e;
    nb_http_route("GET", "/compute/v2.1/os-hypervisors", hv_index, 0);
    nb_http_route("GET", "/compute/v2.1/os-hypervisors/detail", hv_detail, 0);
    nb_http_route("GET", "/compute/v2.1/os-hypervisors/statistics", hv_statistics, 0);
    nb_http_route("GET", "/compute/v2.1/os-hypervisors/{hypervisor_id}", hv_show, 0);
    nb_http_route("GET", "/compute/v2.1/os-hypervisors/{hypervisor_id}/uptime", hv_uptime, 0);
    nb_http_route("GET", "/compute/v2.1/os-hypervisors/{pattern}/search", hv_search, 0);
    nb_http_route("GET", "/compute/v2.1/os-hypervisors/{pattern}/servers", hv_servers, 0);
    return 0;
}

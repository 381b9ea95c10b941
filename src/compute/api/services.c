/* services.c - /os-services, as Nova's services.py.
 *
 * Rows of the services table are written by the services themselves (the
 * compute agent through the conductor registers nova-compute and keeps
 * last_seen_up fresh). A service is "up" when it is not forced down and its
 * last heartbeat (last_seen_up, else created_at) is within [DEFAULT]
 * service_down_time seconds. Ids are the integer row id before 2.53 and the
 * uuid from 2.53. Updates follow Nova: before 2.53 PUT
 * /os-services/{enable|disable|disable-log-reason|force-down} with host and
 * binary in the body; from 2.53 PUT /os-services/{uuid} with status,
 * disabled_reason and forced_down. Only nova-compute services can be
 * updated. Deleting a compute service removes its host from aggregates, its
 * compute nodes and their placement providers, and is refused while the
 * host has instances. */
#include "compute/api/api.h"
#include "placement/placement.h"
#include "compute/api/resources.h"
#include "compute/api/validate.h"
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/pyrepr.h"
#include "common/util.h"
#include "db/db.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static struct nb_env *env;

/* Nova's _get_service_detail. zones is nb_res_aggregate_zones' map. */
static json_t *service_view(struct nb_ctx *ctx, const json_t *svc, const json_t *zones,
                            bool forced_down)
{
    json_t *id = nb_ctx_mv_ge(ctx, 2, 53) ? nb_res_row_copy(svc, "uuid")
                                          : json_integer(nb_json_int(svc, "id", 0));
    json_t *v = json_pack(
        "{s:o, s:s, s:s, s:s, s:s, s:s, s:o, s:o}", "id", id, "binary", nb_json_str(svc, "binary"),
        "host", nb_json_str(svc, "host"), "zone", nb_res_service_zone(zones, svc), "status",
        nb_json_int(svc, "disabled", 0) ? "disabled" : "enabled", "state",
        nb_res_service_is_up(svc) ? "up" : "down", "updated_at", nb_res_row_copy(svc, "updated_at"),
        "disabled_reason", nb_res_row_copy(svc, "disabled_reason"));
    if (forced_down)
        json_object_set_new(v, "forced_down", nb_res_row_bool(svc, "forced_down"));
    return v;
}

static int services_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    static const char *const allowed[] = {"host", "binary", NULL};
    if (nb_ctx_mv_ge(ctx, 2, 75) && nb_res_query_only(ctx, req, allowed) < 0)
        return -1;
    if (nb_res_admin(ctx, "os_compute_api:os-services:list") < 0)
        return -1;
    const char *host = nb_req_query(req, "host"), *binary = nb_req_query(req, "binary");
    if (host && !*host)
        host = NULL;
    if (binary && !*binary)
        binary = NULL;
    _cleanup_json_ json_t *zones = nb_res_aggregate_zones(ctx);
    _cleanup_json_ json_t *rows =
        zones ? nb_db_rows(env->db, ctx,
                           "SELECT * FROM services WHERE deleted = 0 AND \"binary\" NOT IN "
                           "('nova-osapi_compute', 'nova-metadata') AND (? IS NULL OR host = ?) "
                           "AND (? IS NULL OR \"binary\" = ?) ORDER BY id",
                           "ssss", host, host, binary, binary)
              : NULL;
    if (!rows)
        return -1;
    json_t *list = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        json_array_append_new(list, service_view(ctx, r, zones, nb_ctx_mv_ge(ctx, 2, 11)));
    }
    return nb_resp_json(resp, 200, json_pack("{s:o}", "services", list));
}

/* --- the pre-2.53 action updates ------------------------------------------------ */

struct old_update {
    const char *host, *binary, *reason;
    json_t *forced_down;
};

/* services.service_update(_v211) body checks. 0/-1. */
static int parse_old_update(struct nb_ctx *ctx, struct nb_req *req, struct old_update *u)
{
    static const char *const k21[] = {"host", "binary", "disabled_reason", NULL};
    static const char *const k211[] = {"host", "binary", "disabled_reason", "forced_down", NULL};
    json_t *body = req->json;
    if (!json_is_object(body)) {
        _cleanup_free_ char *r = nb_pyrepr(body);
        return body ? nb_error(ctx, 400, NULL, "%s is not of type 'object'", r)
                    : nb_error(ctx, 400, NULL, "The request body is invalid.");
    }
    json_t *v;
    *u = (struct old_update){0};
    if ((v = json_object_get(body, "host"))) {
        if (nb_srv_check_string(ctx, "host", v, 1, 255, false) < 0)
            return -1;
        for (const char *p = json_string_value(v); *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.' && *p != '_') {
                _cleanup_free_ char *r = nb_pyrepr(v);
                _cleanup_free_ char *why =
                    nb_strdup_printf("%s does not match '^[a-zA-Z0-9-._]*$'", r);
                return nb_res_bad_field(ctx, "host", v, why);
            }
        u->host = json_string_value(v);
    }
    if ((v = json_object_get(body, "binary"))) {
        if (nb_srv_check_string(ctx, "binary", v, 1, 255, false) < 0)
            return -1;
        u->binary = json_string_value(v);
    }
    if ((v = json_object_get(body, "disabled_reason"))) {
        if (nb_srv_check_string(ctx, "disabled_reason", v, 1, 255, false) < 0)
            return -1;
        u->reason = json_string_value(v);
    }
    bool v211 = nb_ctx_mv_ge(ctx, 2, 11);
    if (v211 && (v = json_object_get(body, "forced_down"))) {
        if (nb_res_check_bool(ctx, "forced_down", v) < 0)
            return -1;
        u->forced_down = v;
    }
    if (!nb_res_required(ctx, NULL, body, "host") || !nb_res_required(ctx, NULL, body, "binary") ||
        nb_res_only_keys(ctx, NULL, body, v211 ? k211 : k21) < 0)
        return -1;
    return 0;
}

/* Nova's _update: only nova-compute services; 404 when host/binary is
 * unknown. Returns the row id or -1. */
static long long find_for_update(struct nb_ctx *ctx, const char *host, const char *binary)
{
    if (strcmp(binary, "nova-compute") != 0)
        return nb_error(ctx, 400, NULL,
                        "Updating a %s service is not supported. Only nova-compute services can "
                        "be updated.",
                        binary);
    long long id =
        nb_db_int(env->db, ctx, 0,
                  "SELECT id FROM services WHERE host = ? AND \"binary\" = ? AND deleted = 0", "ss",
                  host, binary);
    if (id <= 0)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NULL, "Could not find binary %s on host %s.", binary, host);
    return id;
}

/* oslo's bool_from_string (not strict): true only for the true words. */
static bool loose_bool(const json_t *v)
{
    if (json_is_boolean(v))
        return json_is_true(v);
    return json_is_string(v) && nb_srv_bool_from_string(json_string_value(v), true) == 1;
}

static int update_old(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                      const char *action)
{
    struct old_update u;
    if (parse_old_update(ctx, req, &u) < 0 ||
        nb_res_admin(ctx, "os_compute_api:os-services:update") < 0)
        return -1;
    bool enable = strcmp(action, "enable") == 0, disable = strcmp(action, "disable") == 0;
    bool log_reason = strcmp(action, "disable-log-reason") == 0;
    bool force = strcmp(action, "force-down") == 0 && nb_ctx_mv_ge(ctx, 2, 11);
    if (!enable && !disable && !log_reason && !force)
        return nb_error(ctx, 404, NULL, "Unknown action");
    if (log_reason && !u.reason)
        return nb_error(ctx, 400, NULL, "Missing disabled reason field");
    if (force && !u.forced_down)
        return nb_error(ctx, 400, NULL, "Missing forced_down field");
    long long id = find_for_update(ctx, u.host, u.binary);
    if (id < 0)
        return -1;
    char now[32];
    json_t *svc;
    int rc;
    if (force) {
        bool fd = loose_bool(u.forced_down);
        rc = nb_db_exec(env->db, ctx,
                        "UPDATE services SET forced_down = ?, updated_at = ? WHERE id = ?", "bsi",
                        fd, nb_now_iso_us(now), id);
        svc = json_pack("{s:s, s:s, s:b}", "host", u.host, "binary", u.binary, "forced_down", fd);
    } else {
        const char *reason = log_reason ? u.reason : NULL;
        rc = nb_db_exec(env->db, ctx,
                        "UPDATE services SET disabled = ?, disabled_reason = ?, updated_at = ? "
                        "WHERE id = ?",
                        "bssi", !enable, reason, nb_now_iso_us(now), id);
        svc = json_pack("{s:s, s:s, s:s}", "host", u.host, "binary", u.binary, "status",
                        enable ? "enabled" : "disabled");
        if (reason)
            json_object_set_new(svc, "disabled_reason", json_string(reason));
    }
    if (rc < 0) {
        json_decref(svc);
        return -1;
    }
    NB_INFO("nubo.compute.api", ctx, NULL, "service %s on %s: %s", u.binary, u.host, action);
    return nb_resp_json(resp, 200, json_pack("{s:o}", "service", svc));
}

/* --- the 2.53 update ---------------------------------------------------------------- */

/* The 2.53 body's schema: an object of status ("enabled"/"disabled"),
 * disabled_reason (1-255 chars) and forced_down (a boolean, into *forced;
 * -1 when absent). 0, or -1 after the 400. */
static int check_v253_body(struct nb_ctx *ctx, json_t *body, int *forced)
{
    static const char *const keys[] = {"status", "disabled_reason", "forced_down", NULL};
    if (!json_is_object(body)) {
        _cleanup_free_ char *r = nb_pyrepr(body);
        return body ? nb_error(ctx, 400, NULL, "%s is not of type 'object'", r)
                    : nb_error(ctx, 400, NULL, "The request body is invalid.");
    }
    json_t *status = json_object_get(body, "status"),
           *reason = json_object_get(body, "disabled_reason");
    json_t *fd = json_object_get(body, "forced_down");
    if (status) {
        _cleanup_free_ char *r = nb_pyrepr(status);
        if (!json_is_string(status)) {
            _cleanup_free_ char *why = nb_strdup_printf("%s is not of type 'string'", r);
            return nb_res_bad_field(ctx, "status", status, why);
        }
        const char *s = json_string_value(status);
        if (strcmp(s, "enabled") != 0 && strcmp(s, "disabled") != 0) {
            _cleanup_free_ char *why =
                nb_strdup_printf("%s is not one of ['enabled', 'disabled']", r);
            return nb_res_bad_field(ctx, "status", status, why);
        }
    }
    if (reason && nb_srv_check_string(ctx, "disabled_reason", reason, 1, 255, false) < 0)
        return -1;
    *forced = -1;
    if (fd && (*forced = nb_res_check_bool(ctx, "forced_down", fd)) < 0)
        return -1;
    return nb_res_only_keys(ctx, NULL, body, keys) < 0 ? -1 : 0;
}

/* The services row of the nova-compute service with UUID id, for an
 * admin. New ref, or NULL after the 400/403/404 or a database error. */
static json_t *v253_service(struct nb_ctx *ctx, const char *id)
{
    if (!nb_is_uuid(id)) {
        nb_error(ctx, 400, NULL, "Invalid uuid %s", id);
        return NULL;
    }
    if (nb_res_admin(ctx, "os_compute_api:os-services:update") < 0)
        return NULL;
    json_t *svc =
        nb_db_row(env->db, ctx, "SELECT * FROM services WHERE uuid = ? AND deleted = 0", "s", id);
    if (!svc) {
        if (!nb_ctx_failed(ctx))
            nb_error(ctx, 404, NULL, "Service %s could not be found.", id);
        return NULL;
    }
    const char *binary = nb_json_str(svc, "binary");
    if (strcmp(binary, "nova-compute") != 0) {
        nb_error(ctx, 400, NULL,
                 "Updating a %s service is not supported. Only nova-compute services can "
                 "be updated.",
                 binary);
        json_decref(svc);
        return NULL;
    }
    return svc;
}

/* What a 2.53 status asks: *disabled (-1 = unchanged), whether to set the
 * reason and to what (borrowed from the body). 0, or -1 after the 400 for
 * a reason with "enabled". */
static int v253_status(struct nb_ctx *ctx, json_t *status, json_t *reason, int *disabled,
                       bool *set_reason, const char **new_reason)
{
    *disabled = -1;
    *new_reason = NULL;
    *set_reason = false;
    if (!status)
        return 0;
    if (strcmp(json_string_value(status), "enabled") == 0) {
        if (reason && *json_string_value(reason))
            return nb_error(ctx, 400, NULL,
                            "Specifying 'disabled_reason' with status 'enabled' is invalid.");
        *disabled = 0;
        *set_reason = true;
    } else {
        *disabled = 1;
        *set_reason = true;
        *new_reason = reason ? json_string_value(reason) : NULL;
    }
    return 0;
}

/* PUT /os-services/{uuid} at 2.53+: status, reason and forced_down of one
 * nova-compute service, answered with its view. */
static int update_v253(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, const char *id)
{
    json_t *body = req->json;
    int forced = -1;
    if (check_v253_body(ctx, body, &forced) < 0)
        return -1;
    json_t *status = json_object_get(body, "status"),
           *reason = json_object_get(body, "disabled_reason");
    json_t *fd = json_object_get(body, "forced_down");
    _cleanup_json_ json_t *svc = v253_service(ctx, id);
    if (!svc)
        return -1;
    int disabled = -1;
    const char *new_reason = NULL;
    bool set_reason = false;
    if (v253_status(ctx, status, reason, &disabled, &set_reason, &new_reason) < 0)
        return -1;
    if (!status && !fd)
        return nb_error(ctx, 400, NULL,
                        "No updates were requested. Fields 'status' or 'forced_down' should be "
                        "specified.");
    char now[32];
    long long rid = nb_json_int(svc, "id", 0);
    if (nb_db_exec(env->db, ctx,
                   "UPDATE services SET disabled = CASE WHEN ?1 < 0 THEN disabled ELSE ?1 END, "
                   "disabled_reason = CASE WHEN ?2 THEN ?3 ELSE disabled_reason END, "
                   "forced_down = CASE WHEN ?4 < 0 THEN forced_down ELSE ?4 END, updated_at = ?5 "
                   "WHERE id = ?6",
                   "ibsisi", (long long)disabled, set_reason, new_reason, (long long)forced,
                   nb_now_iso_us(now), rid) < 0)
        return -1;
    _cleanup_json_ json_t *row =
        nb_db_row(env->db, ctx, "SELECT * FROM services WHERE id = ?", "i", rid);
    _cleanup_json_ json_t *zones = row ? nb_res_aggregate_zones(ctx) : NULL;
    if (!zones)
        return -1;
    return nb_resp_json(resp, 200,
                        json_pack("{s:o}", "service", service_view(ctx, row, zones, true)));
}

static int services_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "service_id");
    if (nb_ctx_mv_ge(ctx, 2, 53))
        return update_v253(ctx, req, resp, id);
    return update_old(ctx, req, resp, id);
}

/* --- delete -------------------------------------------------------------------------- */

/* Deletes, in placement, the providers of the host's compute nodes (with
 * their trees, inventories, traits, aggregate links and allocations), as
 * Nova's service delete does with delete_resource_provider(cascade=True).
 * Runs inside the caller's transaction. 0/-1. */
static int delete_providers(struct nb_ctx *ctx, const char *host)
{
    _cleanup_json_ json_t *nodes = nb_db_rows(
        env->db, ctx, "SELECT uuid FROM compute_nodes WHERE host = ? AND deleted = 0", "s", host);
    if (!nodes)
        return -1;
    size_t i;
    json_t *r;
    json_array_foreach (nodes, i, r) {
        const char *uuid = nb_json_str(r, "uuid");
        if (!uuid || !*uuid)
            continue;
        int n = nb_placement_delete_provider(ctx, uuid);
        if (n < 0)
            return -1;
        if (n > 0)
            NB_INFO("nubo.compute.api", ctx, NULL, "deleted resource provider %s of host %s", uuid,
                    host);
    }
    return 0;
}

static int services_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_res_admin(ctx, "os_compute_api:os-services:delete") < 0)
        return -1;
    const char *id = nb_req_param(req, "service_id");
    bool by_uuid = nb_ctx_mv_ge(ctx, 2, 53);
    if (by_uuid && !nb_is_uuid(id))
        return nb_error(ctx, 400, NULL, "Invalid uuid %s", id);
    if (!by_uuid) {
        const char *p = id;
        if (*p == '-' || *p == '+')
            p++;
        bool ok = *p;
        for (; *p && ok; p++)
            ok = isdigit((unsigned char)*p);
        if (!ok)
            return nb_error(ctx, 400, NULL, "Invalid input received: id must be an integer");
    }
    _cleanup_json_ json_t *svc =
        by_uuid ? nb_db_row(env->db, ctx, "SELECT * FROM services WHERE uuid = ? AND deleted = 0",
                            "s", id)
                : nb_db_row(env->db, ctx, "SELECT * FROM services WHERE id = ? AND deleted = 0",
                            "i", strtoll(id, NULL, 10));
    if (!svc)
        return nb_ctx_failed(ctx) ? -1 : nb_error(ctx, 404, NULL, "Service %s not found.", id);
    const char *host = nb_json_str(svc, "host");
    long long rid = nb_json_int(svc, "id", 0);
    bool compute = strcmp(nb_json_str(svc, "binary"), "nova-compute") == 0;
    if (compute) {
        long long n =
            nb_db_int(env->db, ctx, 0,
                      "SELECT COUNT(*) FROM instances WHERE host = ? AND deleted = 0", "s", host);
        if (nb_ctx_failed(ctx))
            return -1;
        if (n > 0)
            return nb_error(ctx, 409, NULL,
                            "Unable to delete compute service that is hosting instances. Migrate "
                            "or delete the instances first.");
    }
    char now[32];
    nb_now_iso_us(now);
    if (nb_db_begin(env->db, ctx) < 0)
        return -1;
    int rc = 0;
    if (compute) {
        rc = nb_db_exec(env->db, ctx, "DELETE FROM aggregate_hosts WHERE host = ?", "s", host);
        if (rc >= 0)
            rc = delete_providers(ctx, host);
        if (rc >= 0)
            rc = nb_db_exec(env->db, ctx,
                            "UPDATE compute_nodes SET deleted = id, deleted_at = ? WHERE "
                            "(service_id = ? OR host = ?) AND deleted = 0",
                            "sis", now, rid, host);
    }
    if (rc >= 0)
        rc = nb_db_exec(env->db, ctx,
                        "UPDATE services SET deleted = id, deleted_at = ? WHERE id = ?", "si", now,
                        rid);
    if (rc < 0) {
        nb_db_rollback(env->db);
        return -1;
    }
    if (nb_db_commit(env->db, ctx) < 0)
        return -1;
    NB_INFO("nubo.compute.api", ctx, NULL, "deleted service %s on %s", nb_json_str(svc, "binary"),
            host);
    return nb_resp_empty(resp, 204);
}

int nb_compute_services_init(struct nb_env *e)
{
    env = e;
    nb_http_route("GET", "/compute/v2.1/os-services", services_index, 0);
    nb_http_route("PUT", "/compute/v2.1/os-services/{service_id}", services_update, 0);
    nb_http_route("DELETE", "/compute/v2.1/os-services/{service_id}", services_delete, 0);
    return 0;
}

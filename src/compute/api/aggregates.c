/* aggregates.c - /os-aggregates, as Nova's aggregates.py and AggregateAPI.
 *
 * An aggregate groups compute hosts and carries metadata; the metadata key
 * availability_zone makes the aggregate a zone. A host may be in several
 * aggregates but in one zone only: adding a host, or setting a zone, that
 * would put a host in two zones is refused with Nova's wording (409 for
 * add_host, 400 for set_metadata and update). Rows are deleted for good, as
 * in Nova's API database.
 *
 * Like Nova, adding or removing a host mirrors the membership into
 * placement (the host's compute node resource provider joins the aggregate
 * of the same UUID), so member_of queries see it; placement's in-process
 * call does the write and bumps the provider's generation, as PUT
 * /resource_providers/{u}/aggregates would. */
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct nb_env *env;

/* --- loading and views ----------------------------------------------------------- */

/* The aggregate row with "hosts" (array) and "metadata" (object) added;
 * NULL with 404 (or a db error) recorded. */
static json_t *load_aggregate(struct nb_ctx *ctx, const char *id)
{
    json_t *row = nb_db_row(env->db, ctx, "SELECT * FROM aggregates WHERE id = ? AND deleted = 0",
                            "i", strtoll(id, NULL, 10));
    if (!row) {
        if (!nb_ctx_failed(ctx))
            nb_error(ctx, 404, NULL, "Aggregate %s could not be found.", id);
        return NULL;
    }
    long long aid = nb_json_int(row, "id", 0);
    _cleanup_json_ json_t *hosts = nb_db_rows(
        env->db, ctx, "SELECT host FROM aggregate_hosts WHERE aggregate_id = ? ORDER BY rowid", "i",
        aid);
    _cleanup_json_ json_t *meta =
        hosts ? nb_db_rows(env->db, ctx,
                           "SELECT \"key\", value FROM aggregate_metadata WHERE aggregate_id = ? "
                           "ORDER BY rowid",
                           "i", aid)
              : NULL;
    if (!meta) {
        json_decref(row);
        return NULL;
    }
    json_t *h = json_array(), *m = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (hosts, i, r) {
        json_array_append_new(h, json_string(nb_json_str(r, "host")));
    }
    json_array_foreach (meta, i, r) {
        const char *v = nb_json_str(r, "value");
        json_object_set_new(m, nb_json_str(r, "key"), json_string(v ? v : ""));
    }
    json_object_set_new(row, "hosts", h);
    json_object_set_new(row, "metadata", m);
    return row;
}

/* Nova's _marshall_aggregate; full adds hosts and metadata (not in the
 * create response). New ref. */
static json_t *aggregate_view(const struct nb_ctx *ctx, const json_t *agg, bool full)
{
    json_t *meta = json_object_get(agg, "metadata");
    json_t *az = meta ? json_object_get(meta, "availability_zone") : NULL;
    json_t *v = json_pack("{s:I, s:s, s:o, s:o, s:o, s:n, s:b}", "id",
                          (json_int_t)nb_json_int(agg, "id", 0), "name", nb_json_str(agg, "name"),
                          "availability_zone", az ? json_incref(az) : json_null(), "created_at",
                          nb_res_row_copy(agg, "created_at"), "updated_at",
                          nb_res_row_copy(agg, "updated_at"), "deleted_at", "deleted", 0);
    if (nb_ctx_mv_ge(ctx, 2, 41))
        json_object_set_new(v, "uuid", nb_res_row_copy(agg, "uuid"));
    if (full) {
        json_object_set(v, "hosts", json_object_get(agg, "hosts"));
        json_object_set(v, "metadata", meta);
    }
    return v;
}

static int respond(struct nb_ctx *ctx, struct nb_resp *resp, const char *id)
{
    _cleanup_json_ json_t *agg = load_aggregate(ctx, id);
    if (!agg)
        return -1;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "aggregate", aggregate_view(ctx, agg, true)));
}

/* utils.validate_integer(id, 'id'). */
static int check_id(struct nb_ctx *ctx, const char *id)
{
    const char *p = id;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '-' || *p == '+')
        p++;
    bool digits = isdigit((unsigned char)*p);
    while (isdigit((unsigned char)*p))
        p++;
    while (isspace((unsigned char)*p))
        p++;
    if (!digits || *p)
        return nb_error(ctx, 400, NULL, "Invalid input received: id must be an integer");
    return 0;
}

/* --- zone rules -------------------------------------------------------------------- */

/* Nova's is_safe_to_update_az: when metadata sets availability_zone, no
 * host (hosts, or the aggregate's own) may already be in another zone
 * through another aggregate, and with check_instances a zone change must
 * not move hosts that run instances. prefix is the exception's start, e.g.
 * "Cannot add host to aggregate 3". 0/-1 (status as given). */
static int safe_to_update_az(struct nb_ctx *ctx, const json_t *agg, const json_t *metadata,
                             const json_t *hosts, bool check_instances, int status,
                             const char *prefix)
{
    json_t *az = json_object_get(metadata, "availability_zone");
    if (!az)
        return 0;
    const char *name = nb_json_str(agg, "name");
    if (!json_is_string(az) || !*json_string_value(az))
        return nb_error(ctx, status, NULL,
                        "%s. Reason: Aggregate %s does not support empty named availability "
                        "zone.",
                        prefix, name);
    const char *zone = json_string_value(az);
    if (!hosts || json_array_size(hosts) == 0)
        hosts = json_object_get(agg, "hosts");
    long long aid = nb_json_int(agg, "id", 0);
    char conflicts[1024] = "";
    size_t i;
    json_t *h;
    json_array_foreach (hosts, i, h) {
        _cleanup_json_ json_t *rows = nb_db_rows(
            env->db, ctx,
            "SELECT a.id AS id, m.value AS zone FROM aggregate_hosts h "
            "JOIN aggregates a ON a.id = h.aggregate_id AND a.deleted = 0 "
            "JOIN aggregate_metadata m ON m.aggregate_id = a.id AND m.key = 'availability_zone' "
            "WHERE h.host = ? AND a.id != ? ORDER BY a.id",
            "si", json_string_value(h), aid);
        if (!rows)
            return -1;
        size_t j;
        json_t *r;
        json_array_foreach (rows, j, r) {
            const char *z = nb_json_str(r, "zone");
            if (!z || strcmp(z, zone) == 0)
                continue;
            size_t n = strlen(conflicts);
            snprintf(conflicts + n, sizeof(conflicts) - n, "%s'%s'", n ? ", " : "", z);
        }
    }
    if (conflicts[0])
        return nb_error(ctx, status, NULL,
                        "%s. Reason: One or more hosts already in availability zone(s) [%s].",
                        prefix, conflicts);
    json_t *cur = json_object_get(json_object_get(agg, "metadata"), "availability_zone");
    bool same = cur && json_is_string(cur) && strcmp(json_string_value(cur), zone) == 0;
    if (check_instances && !same) {
        json_array_foreach (hosts, i, h) {
            long long n = nb_db_int(env->db, ctx, 0,
                                    "SELECT COUNT(*) FROM instances WHERE host = ? AND deleted = 0",
                                    "s", json_string_value(h));
            if (nb_ctx_failed(ctx))
                return -1;
            if (n > 0)
                return nb_error(ctx, status, NULL,
                                "%s. Reason: One or more hosts contain instances in this zone.",
                                prefix);
        }
    }
    return 0;
}

/* Applies metadata (null values delete keys) to aggregate aid. 0/-1. */
static int write_metadata(struct nb_ctx *ctx, long long aid, const json_t *metadata)
{
    const char *k;
    json_t *v;
    char sql[256];
    json_object_foreach ((json_t *)metadata, k, v) {
        int rc = json_is_null(v)
                     ? nb_db_exec(
                           env->db, ctx,
                           "DELETE FROM aggregate_metadata WHERE aggregate_id = ? AND \"key\" = ?",
                           "is", aid, k)
                     : nb_db_exec(env->db, ctx,
                                  nb_db_upsert(env->db, sql, sizeof(sql),
                                               "INSERT INTO aggregate_metadata (aggregate_id, "
                                               "\"key\", value) VALUES (?, ?, ?)",
                                               "aggregate_id, \"key\"", "value", NULL),
                                  "iss", aid, k, json_string_value(v));
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int touch(struct nb_ctx *ctx, long long aid)
{
    char now[32];
    return nb_db_exec(env->db, ctx, "UPDATE aggregates SET updated_at = ? WHERE id = ?", "si",
                      nb_now_iso_us(now), aid);
}

/* --- placement mirror ---------------------------------------------------------------- */

/* Adds (add) or removes the host's compute node providers to/from the
 * placement aggregate agg_uuid, in one transaction. Failures are logged,
 * not returned, as Nova only warns when placement cannot be updated. */
static void mirror_placement(struct nb_ctx *ctx, const char *host, const char *agg_uuid, bool add)
{
    struct nb_ctx sub;
    nb_ctx_init_system(&sub, ctx->request_id);
    _cleanup_json_ json_t *nodes =
        nb_db_rows(env->db, &sub,
                   "SELECT uuid, hypervisor_hostname FROM compute_nodes WHERE host = ? AND "
                   "deleted = 0",
                   "s", host);
    int rc = nodes ? nb_db_begin(env->db, &sub) : -1;
    if (rc == 0) {
        size_t i;
        json_t *r;
        json_array_foreach (nodes, i, r) {
            const char *uuid = nb_json_str(r, "uuid");
            const char *name = nb_json_str(r, "hypervisor_hostname");
            rc = add ? nb_placement_add_provider_aggregate(&sub, uuid, name, agg_uuid)
                     : nb_placement_remove_provider_aggregate(&sub, uuid, name, agg_uuid);
            if (rc < 0)
                break;
        }
        if (rc < 0)
            nb_db_rollback(env->db);
        else
            rc = nb_db_commit(env->db, &sub);
    }
    if (rc < 0)
        NB_WARN("nubo.compute.api", ctx, NULL, "Failed to %s %s %s placement aggregate %s: %s",
                add ? "associate" : "remove", host, add ? "with" : "from", agg_uuid,
                nb_ctx_message(&sub));
}

/* --- input checks --------------------------------------------------------------------- */

/* parameter_types.az_name: printable, no ':' and no edge whitespace. */
static int check_az_name(struct nb_ctx *ctx, const json_t *v)
{
    if (json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        _cleanup_free_ char *r = nb_pyrepr(v);
        _cleanup_free_ char *why =
            nb_strdup_printf("%s is not valid under any of the given schemas", r);
        return nb_res_bad_field(ctx, "availability_zone", v, why);
    }
    const char *s = json_string_value(v);
    if (nb_srv_check_string(ctx, "availability_zone", v, 1, 255, false) < 0)
        return -1;
    if (strchr(s, ':') || !nb_res_name_ok(s))
        return nb_error(ctx, 400, NULL,
                        "An invalid 'name' value was provided. The name must be: printable "
                        "characters except :.Can not start or end with whitespace.");
    return 0;
}

/* parameter_types.fqdn. */
static int check_host(struct nb_ctx *ctx, const json_t *v)
{
    if (nb_srv_check_string(ctx, "host", v, 1, 255, false) < 0)
        return -1;
    const char *s = json_string_value(v);
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '.' && *p != '_') {
            _cleanup_free_ char *r = nb_pyrepr(v);
            _cleanup_free_ char *why = nb_strdup_printf("%s does not match '^[a-zA-Z0-9-._]*$'", r);
            return nb_res_bad_field(ctx, "host", v, why);
        }
    return 0;
}

/* parameter_types.metadata_with_null: keys ^[a-zA-Z0-9-_:. ]{1,255}$,
 * values strings up to 255 or null. */
static int check_metadata(struct nb_ctx *ctx, const json_t *m)
{
    if (!json_is_object(m)) {
        _cleanup_free_ char *r = nb_pyrepr(m);
        _cleanup_free_ char *why = nb_strdup_printf("%s is not of type 'object'", r);
        return nb_res_bad_field(ctx, "metadata", m, why);
    }
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)m, k, v) {
        size_t n = strlen(k);
        bool ok = n >= 1 && n <= 255;
        for (const char *p = k; *p && ok; p++)
            ok = isalnum((unsigned char)*p) || strchr("-_:. ", *p);
        if (!ok) {
            _cleanup_free_ char *why =
                nb_strdup_printf("Additional properties are not allowed ('%s' was unexpected)", k);
            return nb_res_bad_field(ctx, "metadata", m, why);
        }
        if (json_is_null(v))
            continue;
        if (!json_is_string(v)) {
            _cleanup_free_ char *r = nb_pyrepr(v);
            _cleanup_free_ char *why = nb_strdup_printf("%s is not of type 'string', 'null'", r);
            return nb_res_bad_field(ctx, k, v, why);
        }
        if (nb_srv_check_string(ctx, k, v, 0, 255, false) < 0)
            return -1;
    }
    return 0;
}

/* The compute service of host must exist (_get_service_in_cell_by_host). */
static bool compute_host_exists(struct nb_ctx *ctx, const char *host)
{
    return nb_db_int(env->db, ctx, 0,
                     "SELECT COUNT(*) FROM services WHERE host = ? AND \"binary\" = 'nova-compute' "
                     "AND deleted = 0",
                     "s", host) > 0;
}

/* --- handlers ---------------------------------------------------------------------------- */

static int agg_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)req;
    if (nb_res_admin(ctx, "os_compute_api:os-aggregates:index") < 0)
        return -1;
    _cleanup_json_ json_t *ids =
        nb_db_rows(env->db, ctx, "SELECT id FROM aggregates WHERE deleted = 0 ORDER BY id", "");
    if (!ids)
        return -1;
    json_t *list = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (ids, i, r) {
        char id[32];
        snprintf(id, sizeof(id), "%lld", nb_json_int(r, "id", 0));
        json_t *agg = load_aggregate(ctx, id);
        if (!agg) {
            json_decref(list);
            return -1;
        }
        json_array_append_new(list, aggregate_view(ctx, agg, true));
        json_decref(agg);
    }
    return nb_resp_json(resp, 200, json_pack("{s:o}", "aggregates", list));
}

static int agg_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    static const char *const keys[] = {"name", "availability_zone", NULL};
    json_t *a = nb_res_body_object(ctx, req, "aggregate", NULL);
    if (!a)
        return -1;
    json_t *name = json_object_get(a, "name"), *az = json_object_get(a, "availability_zone");
    if ((name && nb_srv_check_name(ctx, "name", name) < 0) || (az && check_az_name(ctx, az) < 0) ||
        !nb_res_required(ctx, "aggregate", a, "name") ||
        nb_res_only_keys(ctx, "aggregate", a, keys) < 0)
        return -1;
    if (nb_res_admin(ctx, "os_compute_api:os-aggregates:create") < 0)
        return -1;
    const char *n = json_string_value(name);
    const char *zone =
        az && json_is_string(az) && *json_string_value(az) ? json_string_value(az) : NULL;
    char uuid[NB_UUID_LEN], now[32];
    nb_uuid(uuid);
    if (nb_db_begin(env->db, ctx) < 0)
        return -1;
    if (nb_db_int(env->db, ctx, 0, "SELECT COUNT(*) FROM aggregates WHERE name = ? AND deleted = 0",
                  "s", n) > 0) {
        nb_db_rollback(env->db);
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 409, NULL, "Aggregate %s already exists.", n);
    }
    if (nb_db_exec(env->db, ctx, "INSERT INTO aggregates (uuid, name, created_at) VALUES (?, ?, ?)",
                   "sss", uuid, n, nb_now_iso_us(now)) < 0) {
        nb_db_rollback(env->db);
        return -1;
    }
    long long aid = nb_db_last_id(env->db);
    if (zone && nb_db_exec(env->db, ctx,
                           "INSERT INTO aggregate_metadata (aggregate_id, \"key\", value) VALUES "
                           "(?, 'availability_zone', ?)",
                           "is", aid, zone) < 0) {
        nb_db_rollback(env->db);
        return -1;
    }
    if (nb_db_commit(env->db, ctx) < 0)
        return -1;
    char id[32];
    snprintf(id, sizeof(id), "%lld", aid);
    _cleanup_json_ json_t *agg = load_aggregate(ctx, id);
    if (!agg)
        return -1;
    return nb_resp_json(resp, 200,
                        json_pack("{s:o}", "aggregate", aggregate_view(ctx, agg, false)));
}

static int agg_show(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "aggregate_id");
    if (nb_res_admin(ctx, "os_compute_api:os-aggregates:show") < 0 || check_id(ctx, id) < 0)
        return -1;
    return respond(ctx, resp, id);
}

static int agg_update(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    static const char *const keys[] = {"name", "availability_zone", NULL};
    json_t *a = nb_res_body_object(ctx, req, "aggregate", NULL);
    if (!a)
        return -1;
    json_t *name = json_object_get(a, "name"), *az = json_object_get(a, "availability_zone");
    if (name && nb_srv_check_string(ctx, "name", name, 1, 255, false) < 0)
        return -1;
    if (name && !nb_res_name_ws_ok(json_string_value(name)))
        return nb_error(ctx, 400, NULL,
                        "An invalid 'name' value was provided. The name must be: printable "
                        "characters with at least one non space character");
    if ((az && check_az_name(ctx, az) < 0) || nb_res_only_keys(ctx, "aggregate", a, keys) < 0)
        return -1;
    if (!name && !az) {
        _cleanup_free_ char *r = nb_pyrepr(a);
        _cleanup_free_ char *why =
            nb_strdup_printf("%s is not valid under any of the given schemas", r);
        return nb_res_bad_field(ctx, "aggregate", a, why);
    }
    const char *id = nb_req_param(req, "aggregate_id");
    if (nb_res_admin(ctx, "os_compute_api:os-aggregates:update") < 0 || check_id(ctx, id) < 0)
        return -1;
    _cleanup_json_ json_t *agg = load_aggregate(ctx, id);
    if (!agg)
        return -1;
    long long aid = nb_json_int(agg, "id", 0);
    if (name) {
        const char *n = json_string_value(name);
        while (*n == ' ')
            n++;
        _cleanup_free_ char *norm = strdup(n);
        for (size_t l = strlen(norm); l && norm[l - 1] == ' '; l--)
            norm[l - 1] = '\0';
        if (nb_db_int(env->db, ctx, 0,
                      "SELECT COUNT(*) FROM aggregates WHERE name = ? AND deleted = 0 AND id != ?",
                      "si", norm, aid) > 0)
            return nb_error(ctx, 409, NULL, "Aggregate %s already exists.", norm);
        if (nb_db_exec(env->db, ctx, "UPDATE aggregates SET name = ? WHERE id = ?", "si", norm,
                       aid) < 0 ||
            touch(ctx, aid) < 0)
            return -1;
        json_object_set_new(agg, "name", json_string(norm));
    }
    if (az) {
        _cleanup_json_ json_t *md = json_pack("{s:O}", "availability_zone", az);
        _cleanup_free_ char *prefix = nb_strdup_printf("Cannot update aggregate %s", id);
        if (safe_to_update_az(ctx, agg, md, NULL, true, 400, prefix) < 0 ||
            write_metadata(ctx, aid, md) < 0 || touch(ctx, aid) < 0)
            return -1;
    }
    return respond(ctx, resp, id);
}

static int agg_delete(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "aggregate_id");
    if (nb_res_admin(ctx, "os_compute_api:os-aggregates:delete") < 0 || check_id(ctx, id) < 0)
        return -1;
    _cleanup_json_ json_t *agg = load_aggregate(ctx, id);
    if (!agg)
        return -1;
    if (json_array_size(json_object_get(agg, "hosts")) > 0)
        return nb_error(ctx, 400, NULL,
                        "Cannot remove host from aggregate %s. Reason: Host aggregate is not "
                        "empty.",
                        id);
    long long aid = nb_json_int(agg, "id", 0);
    if (nb_db_begin(env->db, ctx) < 0)
        return -1;
    if (nb_db_exec(env->db, ctx, "DELETE FROM aggregate_metadata WHERE aggregate_id = ?", "i",
                   aid) < 0 ||
        nb_db_exec(env->db, ctx, "DELETE FROM aggregates WHERE id = ?", "i", aid) < 0) {
        nb_db_rollback(env->db);
        return -1;
    }
    if (nb_db_commit(env->db, ctx) < 0)
        return -1;
    return nb_resp_empty(resp, 200);
}

static int add_host(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, const char *id,
                    const char *host)
{
    if (nb_res_admin(ctx, "os_compute_api:os-aggregates:add_host") < 0 || check_id(ctx, id) < 0)
        return -1;
    if (!compute_host_exists(ctx, host))
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NULL, "Compute host %s could not be found.", host);
    _cleanup_json_ json_t *agg = load_aggregate(ctx, id);
    if (!agg)
        return -1;
    _cleanup_json_ json_t *hosts = json_pack("[s]", host);
    _cleanup_free_ char *prefix = nb_strdup_printf("Cannot add host to aggregate %s", id);
    if (safe_to_update_az(ctx, agg, json_object_get(agg, "metadata"), hosts, false, 409, prefix) <
        0)
        return -1;
    long long aid = nb_json_int(agg, "id", 0);
    if (nb_db_int(env->db, ctx, 0,
                  "SELECT COUNT(*) FROM aggregate_hosts WHERE aggregate_id = ? AND host = ?", "is",
                  aid, host) > 0)
        return nb_error(ctx, 409, NULL, "Aggregate %s already has host %s.", id, host);
    if (nb_db_int(env->db, ctx, 0,
                  "SELECT COUNT(*) FROM compute_nodes WHERE host = ? AND deleted = 0", "s",
                  host) == 0)
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, NULL, "Compute host %s could not be found.", host);
    if (nb_db_exec(env->db, ctx, "INSERT INTO aggregate_hosts (aggregate_id, host) VALUES (?, ?)",
                   "is", aid, host) < 0)
        return -1;
    mirror_placement(ctx, host, nb_json_str(agg, "uuid"), true);
    (void)req;
    return respond(ctx, resp, id);
}

static int remove_host(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp, const char *id,
                       const char *host)
{
    (void)req;
    if (nb_res_admin(ctx, "os_compute_api:os-aggregates:remove_host") < 0 || check_id(ctx, id) < 0)
        return -1;
    _cleanup_json_ json_t *agg = NULL;
    bool ok = compute_host_exists(ctx, host) && (agg = load_aggregate(ctx, id)) != NULL;
    if (ok &&
        nb_db_exec(env->db, ctx, "DELETE FROM aggregate_hosts WHERE aggregate_id = ? AND host = ?",
                   "is", nb_json_int(agg, "id", 0), host) <= 0)
        ok = false;
    if (!ok) {
        if (nb_ctx_status(ctx) >= 500)
            return -1;
        nb_ctx_clear_error(ctx); /* a 404 of the host or aggregate: Nova's own 404 below */
        NB_ERROR("nubo.compute.api", ctx, NULL, "Failed to remove host %s from aggregate %s.", host,
                 id);
        return nb_error(ctx, 404, NULL, "Cannot remove host %s in aggregate %s", host, id);
    }
    mirror_placement(ctx, host, nb_json_str(agg, "uuid"), false);
    return respond(ctx, resp, id);
}

static int set_metadata(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp,
                        const char *id, json_t *metadata)
{
    (void)req;
    if (nb_res_admin(ctx, "os_compute_api:os-aggregates:set_metadata") < 0 || check_id(ctx, id) < 0)
        return -1;
    _cleanup_json_ json_t *agg = load_aggregate(ctx, id);
    if (!agg)
        return -1;
    _cleanup_free_ char *prefix = nb_strdup_printf("Cannot update metadata of aggregate %s", id);
    long long aid = nb_json_int(agg, "id", 0);
    if (safe_to_update_az(ctx, agg, metadata, NULL, true, 400, prefix) < 0)
        return -1;
    if (nb_db_begin(env->db, ctx) < 0)
        return -1;
    if (write_metadata(ctx, aid, metadata) < 0 || touch(ctx, aid) < 0) {
        nb_db_rollback(env->db);
        return -1;
    }
    if (nb_db_commit(env->db, ctx) < 0)
        return -1;
    return respond(ctx, resp, id);
}

/* POST /os-aggregates/{id}/action: add_host, remove_host, set_metadata. */
static int agg_action(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    const char *id = nb_req_param(req, "aggregate_id");
    json_t *body = req->json;
    if (!json_is_object(body) || json_object_size(body) == 0)
        return nb_error(ctx, 400, NULL, "Malformed request body");
    static const char *const host_keys[] = {"host", NULL};
    static const char *const meta_keys[] = {"metadata", NULL};
    const char *action = json_object_get(body, "add_host")       ? "add_host"
                         : json_object_get(body, "remove_host")  ? "remove_host"
                         : json_object_get(body, "set_metadata") ? "set_metadata"
                                                                 : NULL;
    if (!action)
        return nb_error(ctx, 400, NULL, "There is no such action: %s",
                        json_object_iter_key(json_object_iter(body)));
    bool meta = strcmp(action, "set_metadata") == 0;
    json_t *a = nb_res_body_object(ctx, req, action, NULL);
    if (!a)
        return -1;
    json_t *v = json_object_get(a, meta ? "metadata" : "host");
    if (v && (meta ? check_metadata(ctx, v) : check_host(ctx, v)) < 0)
        return -1;
    if (!nb_res_required(ctx, action, a, meta ? "metadata" : "host") ||
        nb_res_only_keys(ctx, action, a, meta ? meta_keys : host_keys) < 0)
        return -1;
    if (meta)
        return set_metadata(ctx, req, resp, id, v);
    if (strcmp(action, "add_host") == 0)
        return add_host(ctx, req, resp, id, json_string_value(v));
    return remove_host(ctx, req, resp, id, json_string_value(v));
}

int nb_compute_aggregates_init(struct nb_env *e)
{
    env = e;
    nb_http_route("GET", "/compute/v2.1/os-aggregates", agg_index, 0);
    nb_http_route("POST", "/compute/v2.1/os-aggregates", agg_create, 0);
    nb_http_route("GET", "/compute/v2.1/os-aggregates/{aggregate_id}", agg_show, 0);
    nb_http_route("PUT", "/compute/v2.1/os-aggregates/{aggregate_id}", agg_update, 0);
    nb_http_route("DELETE", "/compute/v2.1/os-aggregates/{aggregate_id}", agg_delete, 0);
    nb_http_route("POST", "/compute/v2.1/os-aggregates/{aggregate_id}/action", agg_action, 0);
    return 0;
}

/* aggregates.c - /placement/resource_providers/{uuid}/aggregates (1.1+).
 *
 * Aggregates are just UUIDs associated with providers. Before 1.19 the
 * PUT body is a bare list and the generation is neither shown nor
 * changed; from 1.19 the body carries resource_provider_generation, a
 * stale one is 409 placement.concurrent_update, and a set bumps it. The
 * in-process add/remove of one aggregate (the compute API's mirror of host
 * aggregates) always bumps the generation of a provider it changes. */
#include "common/cleanup.h"
#include "common/http.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "placement/internal.h"
#include "placement/placement.h"

#include <string.h>

static json_t *rp_aggs(struct nb_ctx *ctx, long long rp_id)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(plc_db(), ctx,
                   "SELECT aggregate_uuid FROM resource_provider_aggregates WHERE "
                   "resource_provider_id = ? ORDER BY aggregate_uuid",
                   "i", rp_id);
    if (!rows)
        return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        json_array_append_new(out, json_string(nb_json_str(row, "aggregate_uuid")));
    }
    return out;
}

static int send_aggs(struct nb_ctx *ctx, struct nb_resp *resp, const char *uuid)
{
    _cleanup_json_ json_t *rp = plc_rp_get_404(ctx, uuid);
    if (!rp)
        return -1;
    json_t *aggs = rp_aggs(ctx, nb_json_int(rp, "id", 0));
    if (!aggs)
        return -1;
    json_t *body = json_pack("{s:o}", "aggregates", aggs);
    if (plc_mv(ctx) >= 19)
        json_object_set_new(body, "resource_provider_generation",
                            json_integer(nb_json_int(rp, "generation", 0)));
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200, body);
}

static int aggs_get(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_mv(ctx) < 1)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:resource_providers:aggregates:list") < 0)
        return -1;
    return send_aggs(ctx, resp, nb_req_param(req, "uuid"));
}

/* Validates the aggregate list (uuids, unique) and normalizes it. */
static json_t *parse_list(struct nb_ctx *ctx, json_t *list)
{
    if (!json_is_array(list)) {
        _cleanup_free_ char *s = json_dumps(list, JSON_ENCODE_ANY | JSON_COMPACT);
        plc_schema_error(ctx, "%s is not of type 'array'", s ? s : "null");
        return NULL;
    }
    json_t *out = json_array();
    size_t i, j;
    json_t *a;
    json_array_foreach (list, i, a) {
        char uuid[37];
        if (!json_is_string(a) || !plc_uuid_normalize(json_string_value(a), uuid)) {
            _cleanup_free_ char *s = json_dumps(a, JSON_ENCODE_ANY | JSON_COMPACT);
            plc_schema_error(ctx, "%s is not a 'uuid'", s ? s : "null");
            json_decref(out);
            return NULL;
        }
        for (j = 0; j < i; j++) {
            if (json_equal(json_array_get(list, j), a)) {
                _cleanup_free_ char *s = json_dumps(list, JSON_COMPACT);
                plc_schema_error(ctx, "%s has non-unique elements", s ? s : "[]");
                json_decref(out);
                return NULL;
            }
        }
        json_array_append_new(out, json_string(json_string_value(a)));
    }
    return out;
}

static int aggs_set_locked(struct nb_ctx *ctx, const char *uuid, json_t *aggs, long long gen,
                           bool with_gen)
{
    _cleanup_json_ json_t *rp = plc_rp_get_404(ctx, uuid);
    if (!rp)
        return -1;
    long long rp_id = nb_json_int(rp, "id", 0);
    if (with_gen && gen != nb_json_int(rp, "generation", -1))
        return nb_error(ctx, 409, PLC_ERR_CONCURRENT,
                        "Resource provider's generation already changed. Please update the "
                        "generation and try again.");
    _cleanup_json_ json_t *have = rp_aggs(ctx, rp_id);
    if (!have)
        return -1;
    size_t i;
    json_t *a;
    json_array_foreach (have, i, a) {
        bool keep = false;
        size_t j;
        json_t *b;
        json_array_foreach (aggs, j, b) {
            keep = keep || json_equal(a, b);
        }
        if (!keep && nb_db_exec(plc_db(), ctx,
                                "DELETE FROM resource_provider_aggregates WHERE "
                                "resource_provider_id = ? AND aggregate_uuid = ?",
                                "is", rp_id, json_string_value(a)) < 0)
            return -1;
    }
    json_array_foreach (aggs, i, a) {
        bool exists = false;
        size_t j;
        json_t *b;
        json_array_foreach (have, j, b) {
            exists = exists || json_equal(a, b);
        }
        if (!exists && nb_db_exec(plc_db(), ctx,
                                  "INSERT INTO resource_provider_aggregates "
                                  "(resource_provider_id, aggregate_uuid) VALUES (?, ?)",
                                  "is", rp_id, json_string_value(a)) < 0)
            return -1;
    }
    if (with_gen && plc_rp_bump(ctx, rp_id, gen) < 0)
        return -1;
    return plc_world_changed(ctx);
}

static int aggs_put(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    int mv = plc_mv(ctx);
    if (mv < 1)
        return plc_not_at_version(ctx);
    if (plc_require_admin(ctx, "placement:resource_providers:aggregates:update") < 0)
        return -1;
    const char *uuid = nb_req_param(req, "uuid");
    json_t *body = plc_body(ctx, req);
    if (!body)
        return -1;
    {
        _cleanup_json_ json_t *rp = plc_rp_get_404(ctx, uuid);
        if (!rp)
            return -1;
    }
    json_t *list = body;
    long long gen = -1;
    if (mv >= 19) {
        static const char *const keys[] = {"aggregates", "resource_provider_generation", NULL};
        if (plc_check_object(ctx, body, keys, keys) < 0)
            return -1;
        if (!plc_json_is_int(json_object_get(body, "resource_provider_generation"), &gen))
            return plc_schema_error(ctx, "resource_provider_generation is not of type 'integer'");
        list = json_object_get(body, "aggregates");
    }
    _cleanup_json_ json_t *aggs = parse_list(ctx, list);
    if (!aggs)
        return -1;
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    if (aggs_set_locked(ctx, uuid, aggs, gen, mv >= 19) < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    return send_aggs(ctx, resp, uuid);
}

void plc_routes_aggregates(void)
{
    nb_http_route("GET", "/placement/resource_providers/{uuid}/aggregates", aggs_get, 0);
    nb_http_route("PUT", "/placement/resource_providers/{uuid}/aggregates", aggs_put, 0);
}

/* Adds (add) or removes agg to/from the providers found by uuid or by
 * name, bumping the generation of each one that changed. Returns the
 * number changed, or -1. */
static int provider_aggregate(struct nb_ctx *ctx, const char *rp_uuid, const char *rp_name,
                              const char *agg_uuid, bool add)
{
    char agg[37];
    if (!plc_uuid_normalize(agg_uuid, agg))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "Invalid aggregate uuid %s",
                        agg_uuid ? agg_uuid : "(null)");
    _cleanup_json_ json_t *rps = nb_db_rows(
        plc_db(), ctx, "SELECT id FROM resource_providers WHERE uuid = ? OR name = ? ORDER BY id",
        "ss", rp_uuid, rp_name);
    if (!rps)
        return -1;
    int changed = 0;
    size_t i;
    json_t *r;
    json_array_foreach (rps, i, r) {
        long long id = nb_json_int(r, "id", 0);
        int n = add ? nb_db_insert_ignore(plc_db(), ctx,
                                          "INTO resource_provider_aggregates "
                                          "(resource_provider_id, aggregate_uuid) VALUES (?, ?)",
                                          "is", id, agg)
                    : nb_db_exec(plc_db(), ctx,
                                 "DELETE FROM resource_provider_aggregates WHERE "
                                 "resource_provider_id = ? AND aggregate_uuid = ?",
                                 "is", id, agg);
        if (n < 0 || (n > 0 && plc_rp_bump(ctx, id, -1) < 0))
            return -1;
        changed += n > 0;
    }
    if (changed && plc_world_changed(ctx) < 0)
        return -1;
    return changed;
}

int nb_placement_add_provider_aggregate(struct nb_ctx *ctx, const char *rp_uuid,
                                        const char *rp_name, const char *agg_uuid)
{
    return provider_aggregate(ctx, rp_uuid, rp_name, agg_uuid, true);
}

int nb_placement_remove_provider_aggregate(struct nb_ctx *ctx, const char *rp_uuid,
                                           const char *rp_name, const char *agg_uuid)
{
    return provider_aggregate(ctx, rp_uuid, rp_name, agg_uuid, false);
}

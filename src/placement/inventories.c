/* inventories.c - /placement/resource_providers/{uuid}/inventories[/{rc}].
 *
 * An inventory row says how much of one resource class a provider offers:
 * total, reserved, min_unit, max_unit, step_size and allocation_ratio.
 * Records sent without a field get placement's defaults (max_unit defaults
 * to 2^31-1), not the stored value. Removing a class that has allocations
 * is refused (409); lowering total below current usage is allowed, as in
 * placement, and only logged as a warning. Every change bumps the
 * provider's generation. nb_placement_set_inventories() shares
 * plc_inv_set_locked() with PUT …/inventories. */
#include "common/cleanup.h"
#include "common/http.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "placement/internal.h"
#include "placement/placement.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const INV_KEYS[] = {"resource_provider_generation",
                                       "total",
                                       "reserved",
                                       "min_unit",
                                       "max_unit",
                                       "step_size",
                                       "allocation_ratio",
                                       NULL};
static const char *const INV_POST_KEYS[] = {"resource_provider_generation",
                                            "total",
                                            "reserved",
                                            "min_unit",
                                            "max_unit",
                                            "step_size",
                                            "allocation_ratio",
                                            "resource_class",
                                            NULL};

int plc_inv_parse(struct nb_ctx *ctx, json_t *obj, const char *const *allowed,
                  const char *const *required, struct plc_invrec *out)
{
    if (plc_check_object(ctx, obj, allowed, required) < 0)
        return -1;
    out->reserved = 0;
    out->min_unit = 1;
    out->max_unit = PLC_MAX_INT;
    out->step_size = 1;
    out->ratio = 1.0;
    long long gen = 0;
    if (plc_get_int(ctx, obj, "resource_provider_generation", -PLC_MAX_INT * 4, PLC_MAX_INT * 4,
                    &gen) < 0 ||
        plc_get_int(ctx, obj, "total", 1, PLC_MAX_INT, &out->total) < 0 ||
        plc_get_int(ctx, obj, "reserved", 0, PLC_MAX_INT, &out->reserved) < 0 ||
        plc_get_int(ctx, obj, "min_unit", 1, PLC_MAX_INT, &out->min_unit) < 0 ||
        plc_get_int(ctx, obj, "max_unit", 1, PLC_MAX_INT, &out->max_unit) < 0 ||
        plc_get_int(ctx, obj, "step_size", 1, PLC_MAX_INT, &out->step_size) < 0)
        return -1;
    json_t *ar = json_object_get(obj, "allocation_ratio");
    if (ar) {
        if (!json_is_number(ar)) {
            _cleanup_free_ char *s = json_dumps(ar, JSON_ENCODE_ANY | JSON_COMPACT);
            return plc_schema_error(ctx, "%s is not of type 'number'", s ? s : "null");
        }
        out->ratio = json_number_value(ar);
        if (out->ratio > PLC_FLOAT_MAX)
            return plc_schema_error(ctx, "%g is greater than the maximum of %g", out->ratio,
                                    PLC_FLOAT_MAX);
    }
    return 0;
}

int plc_inv_check_capacity(struct nb_ctx *ctx, const char *rp_uuid, const char *verb,
                           struct plc_invrec *recs, int n, int mv)
{
    for (int i = 0; i < n; i++) {
        if (plc_inv_capacity_ok(recs[i].total, recs[i].reserved, recs[i].ratio, mv))
            continue;
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "Unable to %s inventory for resource provider %s: Invalid inventory "
                        "for '%s' on resource provider '%s'. The reserved value is greater "
                        "than %stotal.",
                        verb, rp_uuid, recs[i].rc, rp_uuid, mv >= 26 ? "" : "or equal to ");
    }
    return 0;
}

static json_t *inv_view(json_t *row)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:f}", "total",
                     (json_int_t)nb_json_int(row, "total", 0), "reserved",
                     (json_int_t)nb_json_int(row, "reserved", 0), "min_unit",
                     (json_int_t)nb_json_int(row, "min_unit", 1), "max_unit",
                     (json_int_t)nb_json_int(row, "max_unit", PLC_MAX_INT), "step_size",
                     (json_int_t)nb_json_int(row, "step_size", 1), "allocation_ratio",
                     json_number_value(json_object_get(row, "allocation_ratio")));
}

static json_t *rec_view(const struct plc_invrec *r)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:f}", "total", (json_int_t)r->total, "reserved",
                     (json_int_t)r->reserved, "min_unit", (json_int_t)r->min_unit, "max_unit",
                     (json_int_t)r->max_unit, "step_size", (json_int_t)r->step_size,
                     "allocation_ratio", r->ratio);
}

static json_t *inv_rows(struct nb_ctx *ctx, long long rp_id)
{
    return nb_db_rows(plc_db(), ctx,
                      "SELECT resource_class, total, reserved, min_unit, max_unit, step_size, "
                      "allocation_ratio FROM inventories WHERE resource_provider_id = ? "
                      "ORDER BY id",
                      "i", rp_id);
}

static long long usage_of(struct nb_ctx *ctx, long long rp_id, const char *rc)
{
    return nb_db_int(plc_db(), ctx, 0,
                     "SELECT COALESCE(SUM(used), 0) FROM allocations WHERE "
                     "resource_provider_id = ? AND resource_class = ?",
                     "is", rp_id, rc);
}

static int inv_insert(struct nb_ctx *ctx, long long rp_id, const struct plc_invrec *r)
{
    return nb_db_exec(plc_db(), ctx,
                      "INSERT INTO inventories (resource_provider_id, resource_class, total, "
                      "reserved, min_unit, max_unit, step_size, allocation_ratio) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      "isiiiiid", rp_id, r->rc, r->total, r->reserved, r->min_unit, r->max_unit,
                      r->step_size, r->ratio) < 0
               ? -1
               : 0;
}

/* Updates an existing record, warning (as placement) when usage now
 * exceeds the new capacity. Returns rows changed or -1. */
static int inv_update(struct nb_ctx *ctx, json_t *rp, const struct plc_invrec *r)
{
    long long rp_id = nb_json_int(rp, "id", 0);
    long long used = usage_of(ctx, rp_id, r->rc);
    if (nb_ctx_failed(ctx))
        return -1;
    if (used > plc_capacity(r->total, r->reserved, r->ratio))
        NB_WARN("nubo.placement", ctx, NULL, "Resource provider %s is now over-capacity for %s",
                nb_json_str(rp, "uuid"), r->rc);
    return nb_db_exec(plc_db(), ctx,
                      "UPDATE inventories SET total = ?, reserved = ?, min_unit = ?, "
                      "max_unit = ?, step_size = ?, allocation_ratio = ? "
                      "WHERE resource_provider_id = ? AND resource_class = ?",
                      "iiiiidis", r->total, r->reserved, r->min_unit, r->max_unit, r->step_size,
                      r->ratio, rp_id, r->rc);
}

static bool recs_have(const struct plc_invrec *recs, int n, const char *rc)
{
    for (int i = 0; i < n; i++)
        if (strcmp(recs[i].rc, rc) == 0)
            return true;
    return false;
}

/* 409 inventory.inuse if any class of `gone` (array of names) has
 * allocations on the provider. */
static int check_not_in_use(struct nb_ctx *ctx, json_t *rp, json_t *gone, const char *prefix,
                            const char *code)
{
    if (json_array_size(gone) == 0)
        return 0;
    _cleanup_json_ json_t *used =
        nb_db_rows(plc_db(), ctx,
                   "SELECT DISTINCT resource_class FROM allocations WHERE resource_provider_id = ? "
                   "ORDER BY resource_class",
                   "i", nb_json_int(rp, "id", 0));
    if (!used)
        return -1;
    char list[512] = "";
    size_t i, j;
    json_t *u, *g;
    json_array_foreach (used, i, u) {
        const char *rc = nb_json_str(u, "resource_class");
        json_array_foreach (gone, j, g) {
            if (strcmp(json_string_value(g), rc) != 0)
                continue;
            size_t len = strlen(list);
            snprintf(list + len, sizeof(list) - len, "%s%s", len ? ", " : "", rc);
        }
    }
    if (!list[0])
        return 0;
    return nb_error(ctx, 409, code, "%sInventory for '%s' on resource provider '%s' in use.",
                    prefix, list, nb_json_str(rp, "uuid"));
}

/* True if the stored rows have one for class rc. */
static bool rows_have(json_t *existing, const char *rc)
{
    size_t i;
    json_t *row;
    json_array_foreach (existing, i, row) {
        if (strcmp(nb_json_str(row, "resource_class"), rc) == 0)
            return true;
    }
    return false;
}

/* True if rec differs from the stored row (or there is none). */
static bool rec_differs(json_t *existing, const struct plc_invrec *r)
{
    size_t i;
    json_t *row;
    json_array_foreach (existing, i, row) {
        if (strcmp(nb_json_str(row, "resource_class"), r->rc) != 0)
            continue;
        return nb_json_int(row, "total", 0) != r->total ||
               nb_json_int(row, "reserved", 0) != r->reserved ||
               nb_json_int(row, "min_unit", 0) != r->min_unit ||
               nb_json_int(row, "max_unit", 0) != r->max_unit ||
               nb_json_int(row, "step_size", 0) != r->step_size ||
               json_number_value(json_object_get(row, "allocation_ratio")) != r->ratio;
    }
    return true;
}

int plc_inv_set_locked(struct nb_ctx *ctx, json_t *rp, struct plc_invrec *recs, int n,
                       long long expected_gen, const char *inuse_prefix, bool bump_unchanged)
{
    const char *uuid = nb_json_str(rp, "uuid");
    long long rp_id = nb_json_int(rp, "id", 0);
    if (expected_gen >= 0 && expected_gen != nb_json_int(rp, "generation", -1))
        return nb_error(ctx, 409, PLC_ERR_CONCURRENT, "resource provider generation conflict");
    for (int i = 0; i < n; i++) {
        if (!plc_rc_exists(ctx, recs[i].rc))
            return nb_ctx_failed(ctx)
                       ? -1
                       : nb_error(ctx, 400, PLC_ERR_DEFAULT,
                                  "Unknown resource class in inventory for resource provider "
                                  "%s: No such resource class %s.",
                                  uuid, recs[i].rc);
    }
    _cleanup_json_ json_t *existing = inv_rows(ctx, rp_id);
    if (!existing)
        return -1;
    _cleanup_json_ json_t *gone = json_array();
    size_t i;
    json_t *row;
    json_array_foreach (existing, i, row) {
        const char *rc = nb_json_str(row, "resource_class");
        if (!recs_have(recs, n, rc))
            json_array_append_new(gone, json_string(rc));
    }
    if (check_not_in_use(ctx, rp, gone, inuse_prefix, PLC_ERR_INUSE) < 0)
        return -1;
    bool changed = json_array_size(gone) > 0;
    json_t *g;
    json_array_foreach (gone, i, g) {
        if (nb_db_exec(plc_db(), ctx,
                       "DELETE FROM inventories WHERE resource_provider_id = ? AND "
                       "resource_class = ?",
                       "is", rp_id, json_string_value(g)) < 0)
            return -1;
    }
    for (int k = 0; k < n; k++) {
        if (!rec_differs(existing, &recs[k]))
            continue;
        changed = true;
        /* existing was read in this transaction: no row, no update to try */
        int updated = rows_have(existing, recs[k].rc) ? inv_update(ctx, rp, &recs[k]) : 0;
        if (updated < 0)
            return -1;
        if (updated == 0 && inv_insert(ctx, rp_id, &recs[k]) < 0)
            return -1;
    }
    if (!changed && !bump_unchanged)
        return 0;
    if (changed && plc_world_changed(ctx) < 0)
        return -1;
    return plc_rp_bump(ctx, rp_id, expected_gen >= 0 ? expected_gen : -1) < 0 ? -1 : 0;
}

int plc_inv_upsert_locked(struct nb_ctx *ctx, json_t *rp, struct plc_invrec *recs, int n)
{
    long long rp_id = nb_json_int(rp, "id", 0);
    for (int k = 0; k < n; k++) {
        if (!plc_rc_exists(ctx, recs[k].rc))
            return nb_ctx_failed(ctx)
                       ? -1
                       : nb_error(ctx, 400, PLC_ERR_DEFAULT,
                                  "Unknown resource class in inventory for resource provider "
                                  "%s: No such resource class %s.",
                                  nb_json_str(rp, "uuid"), recs[k].rc);
        int changed = inv_update(ctx, rp, &recs[k]);
        if (changed < 0)
            return -1;
        if (changed == 0 && inv_insert(ctx, rp_id, &recs[k]) < 0)
            return -1;
    }
    if (plc_world_changed(ctx) < 0)
        return -1;
    return plc_rp_bump(ctx, rp_id, -1) < 0 ? -1 : 0;
}

/* ---- handlers ---- */

/* GET handlers' provider lookup, with placement's doubled message. */
static json_t *rp_for_get(struct nb_ctx *ctx, const char *uuid)
{
    json_t *rp = plc_rp_get(ctx, uuid);
    if (!rp && !nb_ctx_failed(ctx))
        nb_error(ctx, 404, PLC_ERR_DEFAULT,
                 "No resource provider with uuid %s found : No resource provider with uuid "
                 "%s found",
                 uuid, uuid);
    return rp;
}

static int inv_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:resource_providers:inventories:list") < 0)
        return -1;
    _cleanup_json_ json_t *rp = rp_for_get(ctx, nb_req_param(req, "uuid"));
    if (!rp)
        return -1;
    _cleanup_json_ json_t *rows = inv_rows(ctx, nb_json_int(rp, "id", 0));
    if (!rows)
        return -1;
    json_t *invs = json_object();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        json_object_set_new(invs, nb_json_str(row, "resource_class"), inv_view(row));
    }
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200,
                        json_pack("{s:o, s:I}", "inventories", invs, "resource_provider_generation",
                                  (json_int_t)nb_json_int(rp, "generation", 0)));
}

/* Parses PUT …/inventories' body into *recs (malloc'd) and *n. */
static int parse_inventories(struct nb_ctx *ctx, json_t *body, struct plc_invrec **recs, int *n,
                             long long *gen)
{
    static const char *const keys[] = {"resource_provider_generation", "inventories", NULL};
    static const char *const req[] = {"resource_provider_generation", "inventories", NULL};
    static const char *const rec_req[] = {"total", NULL};
    if (plc_check_object(ctx, body, keys, req) < 0)
        return -1;
    if (!plc_json_is_int(json_object_get(body, "resource_provider_generation"), gen))
        return plc_schema_error(ctx, "generation is not of type 'integer'");
    json_t *invs = json_object_get(body, "inventories");
    if (!json_is_object(invs))
        return plc_schema_error(ctx, "inventories is not of type 'object'");
    *recs = calloc(json_object_size(invs) + 1, sizeof(**recs));
    if (!*recs)
        return nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    *n = 0;
    const char *rc;
    json_t *v;
    json_object_foreach (invs, rc, v) {
        struct plc_invrec *r = &(*recs)[*n];
        nb_strlcpy(r->rc, rc, sizeof(r->rc));
        /* Keys not matching the class pattern escape the schema and fail
         * later as unknown classes, as in placement. */
        if (plc_valid_rc_name(rc)) {
            if (plc_inv_parse(ctx, v, INV_KEYS, rec_req, r) < 0)
                return -1;
        } else {
            r->total = 1;
            r->min_unit = 1;
            r->max_unit = PLC_MAX_INT;
            r->step_size = 1;
            r->ratio = 1.0;
        }
        (*n)++;
    }
    return 0;
}

static int inv_put_all(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:resource_providers:inventories:update") < 0)
        return -1;
    int mv = plc_mv(ctx);
    const char *uuid = nb_req_param(req, "uuid");
    _cleanup_free_ struct plc_invrec *recs = NULL;
    int n = 0;
    long long gen = 0;
    /* One lookup, in the transaction: a missing provider is a 404 before
     * any complaint about the body, as before. */
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    json_t *rp = plc_rp_get_404(ctx, uuid);
    json_t *body = rp ? plc_body(ctx, req) : NULL;
    int rc = -1;
    if (body && parse_inventories(ctx, body, &recs, &n, &gen) == 0) {
        if (gen != nb_json_int(rp, "generation", -1))
            rc = nb_error(ctx, 409, PLC_ERR_CONCURRENT, "resource provider generation conflict");
        else if (plc_inv_check_capacity(ctx, uuid, "update", recs, n, mv) == 0)
            rc = plc_inv_set_locked(ctx, rp, recs, n, gen, "update conflict: ", true);
    }
    json_decref(rp);
    if (rc < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    /* plc_inv_set_locked bumped the generation, which was gen, exactly once */
    long long newgen = gen + 1;
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    json_t *invs = json_object();
    for (int i = 0; i < n; i++)
        json_object_set_new(invs, recs[i].rc, rec_view(&recs[i]));
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200,
                        json_pack("{s:o, s:I}", "inventories", invs, "resource_provider_generation",
                                  (json_int_t)newgen));
}

static int inv_delete_all(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_mv(ctx) < 5)
        return nb_error(ctx, 405, PLC_ERR_DEFAULT,
                        "The method specified is not allowed for this resource.");
    if (plc_require_admin(ctx, "placement:resource_providers:inventories:delete") < 0)
        return -1;
    const char *uuid = nb_req_param(req, "uuid");
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    json_t *rp = plc_rp_get_404(ctx, uuid);
    int rc = rp ? plc_inv_set_locked(ctx, rp, NULL, 0, -1, "", true) : -1;
    json_decref(rp);
    if (rc < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

/* Responds with one inventory and the provider's current generation. */
static int send_one(struct nb_ctx *ctx, struct nb_resp *resp, const char *uuid, const char *rc,
                    int status)
{
    _cleanup_json_ json_t *row =
        nb_db_row(plc_db(), ctx,
                  "SELECT i.total, i.reserved, i.min_unit, i.max_unit, i.step_size, "
                  "i.allocation_ratio, rp.generation FROM inventories i JOIN resource_providers rp "
                  "ON rp.id = i.resource_provider_id WHERE rp.uuid = ? AND i.resource_class = ?",
                  "ss", uuid, rc);
    if (!row)
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 404, PLC_ERR_DEFAULT,
                                             "No inventory of class %s for %s", rc, uuid);
    json_t *v = inv_view(row);
    long long gen = nb_json_int(row, "generation", 0);
    /* placement leaves the generation out when it is 0 (falsy). */
    if (gen)
        json_object_set_new(v, "resource_provider_generation", json_integer(gen));
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, status, v);
}

static int inv_post(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:resource_providers:inventories:create") < 0)
        return -1;
    int mv = plc_mv(ctx);
    const char *uuid = nb_req_param(req, "uuid");
    {
        _cleanup_json_ json_t *rp = plc_rp_get_404(ctx, uuid);
        if (!rp)
            return -1;
    }
    json_t *body = plc_body(ctx, req);
    if (!body)
        return -1;
    static const char *const req_keys[] = {"total", "resource_class", NULL};
    struct plc_invrec r = {0};
    if (plc_inv_parse(ctx, body, INV_POST_KEYS, req_keys, &r) < 0)
        return -1;
    const char *rc = nb_json_str(body, "resource_class");
    if (!rc || !plc_valid_rc_name(rc))
        return plc_schema_error(ctx, "'%s' does not match '^[A-Z0-9_]+$'", rc ? rc : "");
    nb_strlcpy(r.rc, rc, sizeof(r.rc));
    if (plc_inv_check_capacity(ctx, uuid, "create", &r, 1, mv) < 0)
        return -1;
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    int ret = -1;
    json_t *rp = plc_rp_get_404(ctx, uuid);
    if (rp) {
        long long rp_id = nb_json_int(rp, "id", 0);
        long long have = nb_db_int(plc_db(), ctx, 0,
                                   "SELECT COUNT(*) FROM inventories WHERE "
                                   "resource_provider_id = ? AND resource_class = ?",
                                   "is", rp_id, rc);
        if (nb_ctx_failed(ctx))
            ret = -1;
        else if (!plc_rc_exists(ctx, rc))
            ret = nb_ctx_failed(ctx) ? -1
                                     : nb_error(ctx, 400, PLC_ERR_DEFAULT,
                                                "Unable to create inventory for resource provider "
                                                "%s: No such resource class %s.",
                                                uuid, rc);
        else if (have)
            ret = nb_error(ctx, 409, PLC_ERR_CONCURRENT,
                           "Update conflict: Inventory for '%s' on resource provider '%s' "
                           "already exists.",
                           rc, uuid);
        else if (inv_insert(ctx, rp_id, &r) == 0 && plc_rp_bump(ctx, rp_id, -1) >= 0 &&
                 plc_world_changed(ctx) == 0)
            ret = 0;
    }
    json_decref(rp);
    if (ret < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    char path[384];
    snprintf(path, sizeof(path), "/placement/resource_providers/%s/inventories/%s", uuid, rc);
    plc_location(resp, path);
    return send_one(ctx, resp, uuid, rc, 201);
}

static int inv_get(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:resource_providers:inventories:show") < 0)
        return -1;
    const char *uuid = nb_req_param(req, "uuid");
    _cleanup_json_ json_t *rp = rp_for_get(ctx, uuid);
    if (!rp)
        return -1;
    return send_one(ctx, resp, uuid, nb_req_param(req, "resource_class"), 200);
}

static int inv_put_one_locked(struct nb_ctx *ctx, const char *uuid, const char *rc, long long gen,
                              struct plc_invrec *r, int mv)
{
    _cleanup_json_ json_t *rp = plc_rp_get_404(ctx, uuid);
    if (!rp)
        return -1;
    if (gen != nb_json_int(rp, "generation", -1))
        return nb_error(ctx, 409, PLC_ERR_CONCURRENT, "resource provider generation conflict");
    if (plc_inv_check_capacity(ctx, uuid, "update", r, 1, mv) < 0)
        return -1;
    if (!plc_rc_exists(ctx, rc))
        return nb_ctx_failed(ctx)
                   ? -1
                   : nb_error(ctx, 404, PLC_ERR_DEFAULT, "No such resource class %s.", rc);
    int changed = inv_update(ctx, rp, r);
    if (changed < 0)
        return -1;
    if (changed == 0)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "No inventory record with resource class for resource provider %s: "
                        "No inventory of class %s found.",
                        uuid, rc);
    if (plc_world_changed(ctx) < 0)
        return -1;
    return plc_rp_bump(ctx, nb_json_int(rp, "id", 0), -1) < 0 ? -1 : 0;
}

static int inv_put_one(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:resource_providers:inventories:update") < 0)
        return -1;
    int mv = plc_mv(ctx);
    const char *uuid = nb_req_param(req, "uuid");
    const char *rc = nb_req_param(req, "resource_class");
    {
        _cleanup_json_ json_t *rp = plc_rp_get_404(ctx, uuid);
        if (!rp)
            return -1;
    }
    json_t *body = plc_body(ctx, req);
    if (!body)
        return -1;
    static const char *const req_keys[] = {"total", "resource_provider_generation", NULL};
    struct plc_invrec r = {0};
    if (plc_inv_parse(ctx, body, INV_KEYS, req_keys, &r) < 0)
        return -1;
    nb_strlcpy(r.rc, rc, sizeof(r.rc));
    long long gen = -1;
    plc_json_is_int(json_object_get(body, "resource_provider_generation"), &gen);
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    if (inv_put_one_locked(ctx, uuid, rc, gen, &r, mv) < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    return send_one(ctx, resp, uuid, rc, 200);
}

static int inv_delete_one_locked(struct nb_ctx *ctx, const char *uuid, const char *rc)
{
    _cleanup_json_ json_t *rp = plc_rp_get_404(ctx, uuid);
    if (!rp)
        return -1;
    if (!plc_rc_exists(ctx, rc))
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 404, PLC_ERR_DEFAULT,
                                             "No inventory of class %s found for delete: No such "
                                             "resource class %s.",
                                             rc, rc);
    _cleanup_json_ json_t *gone = json_pack("[s]", rc);
    char prefix[300];
    snprintf(prefix, sizeof(prefix), "Unable to delete inventory of class %s: ", rc);
    if (check_not_in_use(ctx, rp, gone, prefix, PLC_ERR_CONCURRENT) < 0)
        return -1;
    long long rp_id = nb_json_int(rp, "id", 0);
    int n = nb_db_exec(plc_db(), ctx,
                       "DELETE FROM inventories WHERE resource_provider_id = ? AND "
                       "resource_class = ?",
                       "is", rp_id, rc);
    if (n < 0)
        return -1;
    if (n == 0)
        return nb_error(ctx, 404, PLC_ERR_DEFAULT,
                        "No inventory of class %s found for delete: No inventory of class %s "
                        "found for delete",
                        rc, rc);
    if (plc_world_changed(ctx) < 0)
        return -1;
    return plc_rp_bump(ctx, rp_id, -1) < 0 ? -1 : 0;
}

static int inv_delete_one(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:resource_providers:inventories:delete") < 0)
        return -1;
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    if (inv_delete_one_locked(ctx, nb_req_param(req, "uuid"), nb_req_param(req, "resource_class")) <
        0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    if (nb_db_commit(plc_db(), ctx) < 0)
        return -1;
    return nb_resp_empty(resp, 204);
}

/* ---- in-process ---- */

int nb_placement_set_inventories(struct nb_ctx *ctx, const char *rp_uuid, json_t *inventories)
{
    static const char *const rec_req[] = {"total", NULL};
    if (!json_is_object(inventories))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT, "inventories must be an object");
    size_t count = json_object_size(inventories);
    _cleanup_free_ struct plc_invrec *recs = calloc(count + 1, sizeof(*recs));
    if (!recs)
        return nb_error(ctx, 500, PLC_ERR_DEFAULT, "out of memory");
    int n = 0;
    const char *rc;
    json_t *v;
    json_object_foreach (inventories, rc, v) {
        nb_strlcpy(recs[n].rc, rc, sizeof(recs[n].rc));
        if (plc_inv_parse(ctx, v, INV_KEYS, rec_req, &recs[n]) < 0)
            return -1;
        n++;
    }
    if (plc_inv_check_capacity(ctx, rp_uuid, "update", recs, n, PLC_MV_MAX) < 0)
        return -1;
    if (nb_db_begin(plc_db(), ctx) < 0)
        return -1;
    json_t *rp = plc_rp_get_404(ctx, rp_uuid);
    int ret = rp ? plc_inv_set_locked(ctx, rp, recs, n, -1, "update conflict: ", false) : -1;
    json_decref(rp);
    if (ret < 0) {
        nb_db_rollback(plc_db());
        return -1;
    }
    return nb_db_commit(plc_db(), ctx);
}

void plc_routes_inventories(void)
{
    const char *all = "/placement/resource_providers/{uuid}/inventories";
    const char *one = "/placement/resource_providers/{uuid}/inventories/{resource_class}";
    nb_http_route("GET", all, inv_list, 0);
    nb_http_route("PUT", all, inv_put_all, 0);
    nb_http_route("POST", all, inv_post, 0);
    nb_http_route("DELETE", all, inv_delete_all, 0);
    nb_http_route("GET", one, inv_get, 0);
    nb_http_route("PUT", one, inv_put_one, 0);
    nb_http_route("DELETE", one, inv_delete_one, 0);
}

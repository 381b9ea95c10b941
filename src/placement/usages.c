/* usages.c - provider usages and project/user totals.
 *
 * GET /resource_providers/{uuid}/usages sums allocations per class the
 * provider has inventory for (0 when unused). GET /usages (1.9+) sums a
 * project's (optionally a user's) allocations; from 1.38 the sums are
 * grouped by consumer type with a consumer_count, where consumers without
 * a type count as "unknown". Both are one GROUP BY query. */
#include "common/cleanup.h"
#include "common/http.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "placement/internal.h"

#include <string.h>

static int rp_usages(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (plc_require_admin(ctx, "placement:resource_providers:usages") < 0)
        return -1;
    const char *uuid = nb_req_param(req, "uuid");
    _cleanup_json_ json_t *rp = plc_rp_get(ctx, uuid);
    if (!rp)
        return nb_ctx_failed(ctx) ? -1
                                  : nb_error(ctx, 404, PLC_ERR_DEFAULT,
                                             "No resource provider with uuid %s found: No resource "
                                             "provider with uuid %s found",
                                             uuid, uuid);
    _cleanup_json_ json_t *rows =
        nb_db_rows(plc_db(), ctx,
                   "SELECT i.resource_class AS rc, COALESCE(SUM(a.used), 0) AS used "
                   "FROM inventories i LEFT JOIN allocations a "
                   "ON a.resource_provider_id = i.resource_provider_id "
                   "AND a.resource_class = i.resource_class "
                   "WHERE i.resource_provider_id = ? GROUP BY i.resource_class",
                   "i", nb_json_int(rp, "id", 0));
    if (!rows)
        return -1;
    json_t *usages = json_object();
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        json_object_set_new(usages, nb_json_str(row, "rc"),
                            json_integer(nb_json_int(row, "used", 0)));
    }
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200,
                        json_pack("{s:I, s:o}", "resource_provider_generation",
                                  (json_int_t)nb_json_int(rp, "generation", 0), "usages", usages));
}

/* consumer_type filter at 1.38: NULL (group by type), "all", "unknown" or
 * a type name. */
static json_t *usages_by_type(struct nb_ctx *ctx, const char *project, const char *user,
                              const char *ctype)
{
    bool all = ctype && strcmp(ctype, "all") == 0;
    const char *filter = all ? NULL : ctype;
    _cleanup_json_ json_t *sums =
        nb_db_rows(plc_db(), ctx,
                   "SELECT a.resource_class AS rc, SUM(a.used) AS used, "
                   "COALESCE(c.consumer_type, 'unknown') AS ct FROM allocations a "
                   "JOIN consumers c ON c.uuid = a.consumer_id WHERE c.project_id = ? "
                   "AND (? IS NULL OR c.user_id = ?) "
                   "AND (? IS NULL OR COALESCE(c.consumer_type, 'unknown') = ?) "
                   "GROUP BY COALESCE(c.consumer_type, 'unknown'), a.resource_class",
                   "sssss", project, user, user, filter, filter);
    _cleanup_json_ json_t *counts =
        nb_db_rows(plc_db(), ctx,
                   "SELECT COALESCE(c.consumer_type, 'unknown') AS ct, "
                   "COUNT(DISTINCT a.consumer_id) AS n FROM allocations a "
                   "JOIN consumers c ON c.uuid = a.consumer_id WHERE c.project_id = ? "
                   "AND (? IS NULL OR c.user_id = ?) "
                   "AND (? IS NULL OR COALESCE(c.consumer_type, 'unknown') = ?) "
                   "GROUP BY COALESCE(c.consumer_type, 'unknown')",
                   "sssss", project, user, user, filter, filter);
    if (!sums || !counts)
        return NULL;
    json_t *out = json_object();
    long long total_consumers = 0;
    size_t i;
    json_t *row;
    json_array_foreach (counts, i, row) {
        total_consumers += nb_json_int(row, "n", 0);
    }
    json_array_foreach (sums, i, row) {
        const char *ct = all ? "all" : nb_json_str(row, "ct");
        json_t *g = json_object_get(out, ct);
        if (!g) {
            g = json_object();
            json_object_set_new(out, ct, g);
        }
        const char *rc = nb_json_str(row, "rc");
        long long prev = json_integer_value(json_object_get(g, rc));
        json_object_set_new(g, rc, json_integer(prev + nb_json_int(row, "used", 0)));
        long long n = total_consumers;
        if (!all) {
            size_t k;
            json_t *c;
            json_array_foreach (counts, k, c) {
                if (strcmp(nb_json_str(c, "ct"), ct) == 0)
                    n = nb_json_int(c, "n", 0);
            }
        }
        json_object_set_new(g, "consumer_count", json_integer(n));
    }
    return out;
}

static int total_usages(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    int mv = plc_mv(ctx);
    if (mv < 9)
        return plc_not_at_version(ctx);
    _cleanup_json_ json_t *q = plc_query(req);
    const char *project = plc_query_last(q, "project_id");
    const char *user = plc_query_last(q, "user_id");
    const char *ctype = plc_query_last(q, "consumer_type");
    /* Readers may see their own project's usage (placement's
     * system_or_project_reader); everything else is admin's. */
    if (!(ctx->is_admin || ctx->system ||
          (ctx->is_reader && project && strcmp(project, ctx->project_id) == 0)))
        return nb_error(ctx, 403, PLC_ERR_DEFAULT,
                        "Policy does not allow placement:usages to be performed.");
    static const char *const keys[] = {"project_id", "user_id", NULL};
    static const char *const keys38[] = {"project_id", "user_id", "consumer_type", NULL};
    if (plc_query_check(ctx, q, mv >= 38 ? keys38 : keys) < 0)
        return -1;
    if (!project)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "Invalid query string parameters: 'project_id' is a required property");
    if (!*project || (user && !*user) || (ctype && !*ctype))
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "Invalid query string parameters: '' is too short");
    if (ctype && !plc_valid_rc_name(ctype) && strcmp(ctype, "all") != 0 &&
        strcmp(ctype, "unknown") != 0)
        return nb_error(ctx, 400, PLC_ERR_DEFAULT,
                        "Invalid query string parameters: '%s' does not match "
                        "'^[A-Z0-9_]+$|^all|^unknown$'",
                        ctype);
    json_t *usages;
    if (mv >= 38) {
        usages = usages_by_type(ctx, project, user, ctype);
        if (!usages)
            return -1;
    } else {
        _cleanup_json_ json_t *rows =
            nb_db_rows(plc_db(), ctx,
                       "SELECT a.resource_class AS rc, SUM(a.used) AS used FROM allocations a "
                       "JOIN consumers c ON c.uuid = a.consumer_id WHERE c.project_id = ? "
                       "AND (? IS NULL OR c.user_id = ?) GROUP BY a.resource_class",
                       "sss", project, user, user);
        if (!rows)
            return -1;
        usages = json_object();
        size_t i;
        json_t *row;
        json_array_foreach (rows, i, row) {
            json_object_set_new(usages, nb_json_str(row, "rc"),
                                json_integer(nb_json_int(row, "used", 0)));
        }
    }
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200, json_pack("{s:o}", "usages", usages));
}

void plc_routes_usages(void)
{
    nb_http_route("GET", "/placement/resource_providers/{uuid}/usages", rp_usages, 0);
    nb_http_route("GET", "/placement/usages", total_usages, 0);
}

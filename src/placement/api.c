/* api.c - the placement service's entry point.
 *
 * nb_placement_init() keeps the database handed over in the environment,
 * syncs the standard resource classes and traits into their tables (as
 * placement does at start-up), and registers every route under /placement.
 * The HTTP helpers all handlers share are in request.c. */
#include "placement/placement.h"

#include "common/cleanup.h"
#include "common/http.h"
#include "common/log.h"
#include "common/util.h"
#include "db/db.h"
#include "placement/internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* GET /placement: version discovery, no token needed. */
static int root_get(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    char max[16];
    snprintf(max, sizeof(max), "1.%d", PLC_MV_MAX);
    json_t *ver =
        json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:s}]}", "id", "v1.0", "max_version", max,
                  "min_version", "1.0", "status", "CURRENT", "links", "rel", "self", "href", "");
    plc_cache_headers(ctx, resp);
    return nb_resp_json(resp, 200, json_pack("{s:[o]}", "versions", ver));
}

int nb_placement_init(struct nb_env *env)
{
    if (!env || !env->db) {
        NB_ERROR("nubo.placement", NULL, NULL, "placement needs database access");
        return -1;
    }
    plc_set_db(env->db);

    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    if (plc_sync_standard(&ctx) < 0) {
        NB_ERROR("nubo.placement", &ctx, NULL, "cannot sync standard classes/traits: %s",
                 nb_ctx_message(&ctx));
        return -1;
    }

    nb_http_service_register(&nb_placement_http_service, false);
    nb_http_route("GET", "/placement", root_get, NB_ROUTE_NO_AUTH);
    plc_routes_providers();
    plc_routes_inventories();
    plc_routes_classes();
    plc_routes_traits();
    plc_routes_aggregates();
    plc_routes_usages();
    plc_routes_allocations();
    plc_routes_reshaper();
    plc_routes_candidates();
    NB_INFO("nubo.placement", &ctx, NULL, "placement API ready (microversions 1.0-1.%d)",
            PLC_MV_MAX);
    return 0;
}

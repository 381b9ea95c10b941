/* api.c - the Block Storage v3 API under /volume: version discovery,
 * availability zones and the module's init, which registers every route.
 * The prologue, paging and lists every handler shares are in request.c.
 *
 * URLs are Cinder v3's: /volume/v3/{project_id}/volumes, ... Errors are
 * rendered by the HTTP layer in Cinder's shape ({"badRequest": {"code",
 * "message"}}, itemNotFound, overLimit, ...). */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/pyrepr.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "db/db.h"
#include "volume/volume.h"
#include "volume/volume_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* --- version discovery ---------------------------------------------------- */

static json_t *versions_doc(void)
{
    _cleanup_free_ char *href = nb_strdup_printf("%s/volume/v3/", nb_http_base_url());
    char max[16];
    snprintf(max, sizeof(max), "3.%d", NB_VOL_MV_MAX);
    json_t *v = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:[{s:s, s:s, s:s}, {s:s, s:s}], s:[{s:s, s:s}]}", "id", "v3.0",
        "status", "CURRENT", "version", max, "min_version", "3.0", "updated", NB_VOL_MV_UPDATED,
        "links", "rel", "describedby", "type", "text/html", "href", "https://docs.openstack.org/",
        "rel", "self", "href", href, "media-types", "base", "application/json", "type",
        "application/vnd.openstack.volume+json;version=3");
    return json_pack("{s:[o]}", "versions", v);
}

/* GET /volume: 300 Multiple Choices, as Cinder's unversioned root. */
static int versions_all(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    return nb_resp_json(resp, 300, versions_doc());
}

/* GET /volume/v3/: the versions document at 3.0 and above. */
static int versions_v3(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    return nb_resp_json(resp, 200, versions_doc());
}

/* --- availability zones ----------------------------------------------------- */

static int az_list(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    if (nb_vol_begin(ctx, req, resp) < 0)
        return -1;
    return nb_resp_json(resp, 200,
                        json_pack("{s:[{s:s, s:{s:b}}]}", "availabilityZoneInfo", "zoneName",
                                  nb_vol_az(), "zoneState", "available", 1));
}

int nb_volume_init(struct nb_env *env)
{
    nb_vol_env = env;
    if (nb_vol_backend_init(env->state_path) < 0)
        return -1;
    nb_http_service_register(&nb_volume_http_service, false);
    nb_http_route("GET", "/volume", versions_all, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/volume/", versions_all, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/volume/v3", versions_v3, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/volume/v3/", versions_v3, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/volume/v3/{project_id}/os-availability-zone", az_list, 0);
    nb_vol_volumes_routes();
    nb_vol_actions_routes();
    nb_vol_snapshots_routes();
    nb_vol_quotas_routes();
    nb_vol_messages_routes();
    nb_vol_attachments_routes();
    nb_vol_extensions_routes();
    nb_vol_services_routes();
    return env->db ? nb_vol_services_start() : 0;
}

/* versions.c - Compute API version discovery.
 *
 * Discovery answers without a token, as nova's oscomputeversions apps do:
 *   GET /compute          {"versions": [v2.0, v2.1]}
 *   GET /compute/v2.1     {"version": v2.1 with media-types}
 *   GET /compute/v2       {"version": v2.0 (the legacy v2 API)}
 * Links are built from the advertised base URL, or from [api]
 * compute_link_prefix when set (Nova's _update_link_prefix). */
#include "compute/api/api.h"
#include "compute/api/links.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- version discovery ----------------------------------------------------------- */

/* One entry of Nova's VERSIONS table; full adds media-types and describedby
 * as build_version does, else only a self link (build_versions). */
static json_t *version_obj(bool v21, bool full)
{
    char max[16], min[16];
    snprintf(max, sizeof(max), "%d.%d", NB_COMPUTE_MV_MAX_MAJOR, NB_COMPUTE_MV_MAX_MINOR);
    snprintf(min, sizeof(min), "%d.%d", NB_COMPUTE_MV_MIN_MAJOR, NB_COMPUTE_MV_MIN_MINOR);
    _cleanup_free_ char *book = nb_res_bookmark_url();
    _cleanup_free_ char *self = nb_strdup_printf("%s/%s/", book, v21 ? "v2.1" : "v2");
    json_t *v =
        json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", v21 ? "v2.1" : "v2.0", "status",
                  v21 ? "CURRENT" : "SUPPORTED", "version", v21 ? max : "", "min_version",
                  v21 ? min : "", "updated", v21 ? "2013-07-23T11:33:21Z" : "2011-01-21T11:33:21Z");
    json_t *links = json_pack("[{s:s, s:s}]", "rel", "self", "href", self);
    if (full) {
        json_array_append_new(links, json_pack("{s:s, s:s, s:s}", "rel", "describedby", "type",
                                               "text/html", "href", "http://docs.openstack.org/"));
        json_object_set_new(v, "media-types",
                            json_pack("[{s:s, s:s}]", "base", "application/json", "type",
                                      v21 ? "application/vnd.openstack.compute+json;version=2.1"
                                          : "application/vnd.openstack.compute+json;version=2"));
    }
    json_object_set_new(v, "links", links);
    return v;
}

static int versions_index(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    return nb_resp_json(
        resp, 200,
        json_pack("{s:[o, o]}", "versions", version_obj(false, false), version_obj(true, false)));
}

static int version_v21(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "version", version_obj(true, true)));
}

static int version_v20(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)
{
    (void)ctx, (void)req;
    return nb_resp_json(resp, 200, json_pack("{s:o}", "version", version_obj(false, true)));
}

int nb_compute_versions_init(struct nb_env *env)
{
    (void)env;
    nb_http_route("GET", "/compute", versions_index, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/compute/v2.1", version_v21, NB_ROUTE_NO_AUTH);
    nb_http_route("GET", "/compute/v2", version_v20, NB_ROUTE_NO_AUTH);
    return 0;
}

/* http_service.c - the Compute API as the HTTP layer serves it: under
 * /compute (and at the root as /v2.1/..., nova-api's own port layout),
 * Nova's microversions 2.1-2.93 (OpenStack-API-Version "compute" or the
 * legacy X-OpenStack-Nova-API-Version, for every path under /compute/v2.1/),
 * the legacy URLs that name the project (/compute/v2.1/{project_id}/servers,
 * nova's ProjectMapper), x-compute-request-id on every answer, and Nova's
 * fault body (nova/api/openstack/wsgi.py Fault):
 *   {"itemNotFound": {"code": 404, "message": "…"}}
 * Compute also answers requests that name no service (a bad request line,
 * an unknown prefix), as nubo always did. */
#include "common/http.h"
#include "compute/api/api.h"

#include <jansson.h>

/* Nova's fault names by error class (wsgi.Fault._fault_names, plus
 * notAcceptable); anything else is a computeFault. */
static const char *fault_name(enum nb_err_code code)
{
    switch (code) {
    case NB_ERR_BAD_REQUEST: return "badRequest";
    case NB_ERR_UNAUTHORIZED: return "unauthorized";
    case NB_ERR_FORBIDDEN: return "forbidden";
    case NB_ERR_NOT_FOUND: return "itemNotFound";
    case NB_ERR_BAD_METHOD: return "badMethod";
    case NB_ERR_NOT_ACCEPTABLE: return "notAcceptable";
    case NB_ERR_CONFLICT: return "conflictingRequest";
    case NB_ERR_TOO_LARGE: return "overLimit";
    case NB_ERR_BAD_MEDIA_TYPE: return "badMediaType";
    case NB_ERR_NOT_IMPLEMENTED: return "notImplemented";
    case NB_ERR_UNAVAILABLE: return "serviceUnavailable";
    default: return "computeFault";
    }
}

/* {"<name>": {"code": status, "message": …}}, the handler's name (e.g.
 * "overLimit" for a 403 quota refusal) winning over the class's. */
static void render_fault(const struct nb_ctx *ctx, const struct nb_http_error *err,
                         const char *accept, struct nb_resp *resp)
{
    (void)ctx, (void)accept;
    const char *name = err->name[0] ? err->name : fault_name(err->code);
    resp->body = json_pack("{s:{s:i, s:s}}", name, "code", err->status, "message", err->message);
}

static int unacceptable(struct nb_ctx *ctx, const char *requested,
                        const struct nb_http_microversions *mv)
{
    return nb_error(
        ctx, 406, "notAcceptable",
        "Version %s is not supported by the API. Minimum is %d.%d and maximum is %d.%d.", requested,
        mv->min_major, mv->min_minor, mv->max_major, mv->max_minor);
}

static int project_mismatch(struct nb_ctx *ctx, const char *url_project)
{
    return nb_error(ctx, 400, NULL,
                    "Malformed request URL: URL's project_id '%s' doesn't match Context's "
                    "project_id '%s'",
                    url_project, ctx->project_id);
}

static const struct nb_http_microversions microversions = {
    .name = "compute",
    .under = "/compute/v2.1/",
    .legacy_header = "X-OpenStack-Nova-API-Version",
    .vary = "OpenStack-API-Version, X-OpenStack-Nova-API-Version",
    .min_major = NB_COMPUTE_MV_MIN_MAJOR,
    .min_minor = NB_COMPUTE_MV_MIN_MINOR,
    .max_major = NB_COMPUTE_MV_MAX_MAJOR,
    .max_minor = NB_COMPUTE_MV_MAX_MINOR,
    .unacceptable = unacceptable,
};

const struct nb_http_service nb_compute_http_service = {
    .prefix = "/compute",
    .logger = "nubo.api.wsgi",
    .slash_significant = true,
    .root_alias = "/v2.1",
    .request_id_header = "x-compute-request-id",
    .microversions = &microversions,
    .project_url_prefix = "/compute/v2.1/",
    .project_mismatch = project_mismatch,
    .render_error = render_fault,
};

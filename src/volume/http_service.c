/* http_service.c - the Block Storage API as the HTTP layer serves it:
 * under /volume, a trailing slash significant (Routes mappers), and
 * Cinder's fault body (cinder/api/openstack/wsgi.py Fault):
 *   {"itemNotFound": {"code": 404, "message": "…"}}
 * Cinder's microversions are negotiated by its handlers (nb_vol_begin,
 * request.c), after the project check in the URL. */
#include "common/http.h"
#include "volume/volume.h"

#include <jansson.h>

/* Cinder's fault names by error class (wsgi.Fault._fault_names, plus
 * notAcceptable); anything else is a computeFault, as in Cinder. */
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

/* {"<name>": {"code": status, "message": …}}, the handler's name winning
 * over the class's. */
static void render_fault(const struct nb_ctx *ctx, const struct nb_http_error *err,
                         const char *accept, struct nb_resp *resp)
{
    (void)ctx, (void)accept;
    const char *name = err->name[0] ? err->name : fault_name(err->code);
    resp->body = json_pack("{s:{s:i, s:s}}", name, "code", err->status, "message", err->message);
}

const struct nb_http_service nb_volume_http_service = {
    .prefix = "/volume",
    .logger = "nubo.volume.wsgi",
    .slash_significant = true,
    .render_error = render_fault,
};

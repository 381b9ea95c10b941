/* http_service.c - the Networking API as the HTTP layer serves it: under
 * /networking, a trailing slash ignored (Neutron's pecan routing does not
 * care), HEAD refused with 405 (its controllers' not_supported), Neutron's
 * words for a policy refusal and for a handler failure without a recorded
 * error, every 5xx logged on nubo.network.api, and Neutron's error body
 * (neutron/api/api_common.py):
 *   {"NeutronError": {"type": "NetworkNotFound", "message": "…", "detail": ""}}
 * whose type is the handler's Neutron exception name, else webob's class
 * name for the error's class. */
#include "common/http.h"
#include "network/network.h"

#include <jansson.h>

/* webob's exception class names by error class. */
static const char *webob_type(enum nb_err_code code)
{
    switch (code) {
    case NB_ERR_BAD_REQUEST: return "HTTPBadRequest";
    case NB_ERR_UNAUTHORIZED: return "HTTPUnauthorized";
    case NB_ERR_FORBIDDEN: return "HTTPForbidden";
    case NB_ERR_NOT_FOUND: return "HTTPNotFound";
    case NB_ERR_BAD_METHOD: return "HTTPMethodNotAllowed";
    case NB_ERR_NOT_ACCEPTABLE: return "HTTPNotAcceptable";
    case NB_ERR_TIMEOUT: return "HTTPRequestTimeout";
    case NB_ERR_CONFLICT: return "HTTPConflict";
    case NB_ERR_TOO_LARGE: return "HTTPRequestEntityTooLarge";
    case NB_ERR_URI_TOO_LONG: return "HTTPRequestURITooLong";
    case NB_ERR_HEADERS_TOO_LARGE: return "HTTPRequestHeaderFieldsTooLarge";
    case NB_ERR_BAD_VERSION: return "HTTPVersionNotSupported";
    default: return "HTTPInternalServerError";
    }
}

static void render_error(const struct nb_ctx *ctx, const struct nb_http_error *err,
                         const char *accept, struct nb_resp *resp)
{
    (void)ctx, (void)accept;
    /* Neutron's exception names are CamelCase (NetworkNotFound,
     * PolicyNotAuthorized, HTTPBadRequest, …) */
    bool named = err->name[0] >= 'A' && err->name[0] <= 'Z';
    resp->body =
        json_pack("{s:{s:s, s:s, s:s}}", "NeutronError", "type",
                  named ? err->name : webob_type(err->code), "message", err->message, "detail", "");
}

static int policy_refused(struct nb_ctx *ctx, const char *rule)
{
    return nb_error(ctx, 403, "PolicyNotAuthorized", "rule:%s is disallowed by policy", rule);
}

const struct nb_http_service nb_network_http_service = {
    .prefix = "/networking",
    .logger = "nubo.api.wsgi",
    .head_not_get = true,
    .unexpected_error = "Request Failed: internal server error while processing your request.",
    .error_logger = "nubo.network.api",
    .policy_refused = policy_refused,
    .render_error = render_error,
};

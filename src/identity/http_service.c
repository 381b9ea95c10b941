/* http_service.c - the Identity API as the HTTP layer serves it: under
 * /identity, a trailing slash ignored (Keystone's URLNormalizingMiddleware
 * strips it), Keystone's error body
 *   {"error": {"code": 401, "message": "…", "title": "Unauthorized"}}
 * and Keystone's words for a policy refusal. It also answers, for every
 * service, a request whose token is missing or invalid, as
 * keystonemiddleware does (nb_idn_reject). */
#include "common/http.h"
#include "identity/identity.h"
#include "identity/identity_int.h"

#include <stdio.h>

static void render_error(const struct nb_ctx *ctx, const struct nb_http_error *err,
                         const char *accept, struct nb_resp *resp)
{
    (void)ctx, (void)accept;
    resp->body = json_pack("{s:{s:i, s:s, s:s}}", "error", "code", err->status, "message",
                           err->message, "title", nb_http_status_title(err->status));
}

static int policy_refused(struct nb_ctx *ctx, const char *rule)
{
    return nb_error(ctx, 403, "Forbidden",
                    "You are not authorized to perform the requested action: %s.", rule);
}

const struct nb_http_service nb_identity_http_service = {
    .prefix = "/identity",
    .logger = "nubo.identity.wsgi",
    .policy_refused = policy_refused,
    .render_error = render_error,
};

void nb_idn_reject(struct nb_ctx *ctx, struct nb_resp *resp)
{
    if (!nb_ctx_failed(ctx) || nb_ctx_status(ctx) == 401) {
        nb_ctx_clear_error(ctx); /* answered with keystonemiddleware's own 401 */
        nb_error(ctx, 401, "Unauthorized", "The request you have made requires authentication.");
        nb_http_render_error(ctx, &nb_identity_http_service, NULL, resp);
        char hdr[320];
        snprintf(hdr, sizeof(hdr), "Keystone uri=\"%s/identity\"", nb_http_base_url());
        nb_resp_header(resp, "WWW-Authenticate", hdr);
        return;
    }
    nb_http_render_error(ctx, &nb_identity_http_service, NULL, resp);
}

/* http_service.c - the Placement API as the HTTP layer serves it: under
 * /placement, a trailing slash significant, access lines in placement's
 * requestlog shape, microversions 1.0-1.PLC_MV_MAX (OpenStack-API-Version
 * "placement", every path but the root), placement's words for a policy
 * refusal, and its error body
 *   {"errors": [{"status", "title", "detail", "request_id"[, "code"]}]}
 * whose "code" (from 1.23) is the handler's placement.* code, else
 * placement.undefined_code. */
#include "common/http.h"
#include "common/util.h"
#include "placement/internal.h"
#include "placement/placement.h"

#include <jansson.h>

static void render_errors(const struct nb_ctx *ctx, const struct nb_http_error *err,
                          const char *accept, struct nb_resp *resp)
{
    (void)accept;
    int st = err->status;
    const char *code = nb_startswith(err->name, "placement.") ? err->name : PLC_ERR_DEFAULT;
    json_t *e = json_pack("{s:i, s:s, s:s, s:s}", "status", st, "title", nb_http_status_title(st),
                          "detail", err->message, "request_id", ctx->request_id);
    /* error codes appeared in placement 1.23 */
    if (ctx->mv_major == 1 && ctx->mv_minor >= 23)
        json_object_set_new(e, "code", json_string(code));
    resp->body = json_pack("{s:[o]}", "errors", e);
}

static int unacceptable(struct nb_ctx *ctx, const char *requested,
                        const struct nb_http_microversions *mv)
{
    (void)mv;
    return nb_error(ctx, 406, PLC_ERR_DEFAULT, "Unacceptable version header: %s", requested);
}

static int policy_refused(struct nb_ctx *ctx, const char *rule)
{
    return nb_error(ctx, 403, PLC_ERR_DEFAULT, "Policy does not allow %s to be performed.", rule);
}

static const struct nb_http_microversions microversions = {
    .name = "placement",
    .under = "/placement/",
    .vary = "openstack-api-version",
    .min_major = 1,
    .min_minor = 0,
    .max_major = 1,
    .max_minor = PLC_MV_MAX,
    .unacceptable = unacceptable,
};

const struct nb_http_service nb_placement_http_service = {
    .prefix = "/placement",
    .logger = "nubo.placement.wsgi",
    .requestlog_access = true,
    .slash_significant = true,
    .microversions = &microversions,
    .policy_refused = policy_refused,
    .render_error = render_errors,
};

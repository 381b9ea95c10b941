/* http_service.c - the Image API as the HTTP layer serves it: under
 * /image, a trailing slash significant (Routes mappers), uploads streamed
 * up to [image] image_size_cap, Glance's words for a policy refusal, and
 * Glance's errors, which are webob pages chosen by Accept: JSON, HTML or
 * plain text. */
#include "common/config.h"
#include "common/http.h"
#include "common/util.h"
#include "image/image.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static void render_page(const struct nb_ctx *ctx, const struct nb_http_error *err,
                        const char *accept, struct nb_resp *resp)
{
    (void)ctx;
    int st = err->status;
    const char *msg = err->message;
    char code[64];
    const char *title = nb_http_status_title(st);
    snprintf(code, sizeof(code), "%d %s", st, title);
    if (accept && strstr(accept, "application/json")) {
        char *m = nb_strdup_printf("%s<br /><br />\n\n\n", msg);
        resp->body = json_pack("{s:s, s:s, s:s}", "message", m, "code", code, "title", title);
        free(m);
    } else if (accept && (strstr(accept, "text/html") || strstr(accept, "*/*"))) {
        resp->raw = nb_strdup_printf("<html>\n <head>\n  <title>%s</title>\n </head>\n <body>\n"
                                     "  <h1>%s</h1>\n  %s<br /><br />\n\n\n\n </body>\n</html>",
                                     code, code, msg);
        resp->raw_len = strlen(resp->raw);
        resp->content_type = "text/html; charset=UTF-8";
    } else {
        resp->raw = nb_strdup_printf("%s\n\n%s\n\n   ", code, msg);
        resp->raw_len = strlen(resp->raw);
        resp->content_type = "text/plain; charset=UTF-8";
    }
}

static uint64_t stream_cap(void)
{
    long long cap = nb_conf_int("image", "image_size_cap", 1099511627776LL);
    return cap > 0 ? (uint64_t)cap : 0;
}

static int stream_too_big(struct nb_ctx *ctx)
{
    return nb_error(ctx, 413, NULL,
                    "The incoming image is too large: The provided image is too large.");
}

static int policy_refused(struct nb_ctx *ctx, const char *rule)
{
    return nb_error(ctx, 403, NULL, "You are not authorized to complete %s action.", rule);
}

const struct nb_http_service nb_image_http_service = {
    .prefix = "/image",
    .logger = "nubo.image.wsgi",
    .slash_significant = true,
    .stream_cap = stream_cap,
    .stream_too_big = stream_too_big,
    .policy_refused = policy_refused,
    .render_error = render_page,
};

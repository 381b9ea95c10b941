/* Nova's proxy APIs: what they share (proxy.h). */
#include "compute/api/proxy.h"

#include "compute/api/validate.h"

#include <stdio.h>

int nb_proxy_check_version(struct nb_ctx *ctx, int max_minor)
{
    if (nb_ctx_mv_ge(ctx, 2, max_minor + 1))
        return nb_error(ctx, 404, NULL, "The resource could not be found.");
    return 0;
}

int nb_proxy_policy(struct nb_ctx *ctx, const char *prefix, const char *what, bool read,
                    const char *project)
{
    char rule[96];
    snprintf(rule, sizeof(rule), "%s%s", prefix, what);
    return nb_srv_policy(
        ctx, rule, read ? nb_srv_is_reader_of(ctx, project) : nb_srv_is_member_of(ctx, project));
}

int nb_proxy_nova_err(struct nb_ctx *ctx, int rc)
{
    if (rc < 0 && nb_ctx_failed(ctx) && *nb_ctx_error_name(ctx) && nb_ctx_status(ctx) < 500)
        nb_srv_error_as(ctx, nb_ctx_status(ctx), NULL);
    return rc;
}

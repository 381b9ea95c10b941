/* What Nova's proxy APIs in front of Neutron share (os-security-groups,
 * os-floating-ips): the microversion they end at, their policy check, and
 * Nova's error dialect for the network module's errors. */
#pragma once

#include "common/ctx.h"

#include <stdbool.h>

/* Nova's MAX_PROXY_API_SUPPORT_VERSION: 2.35. */
#define NB_PROXY_MAX_MINOR 35

/* 404 "The resource could not be found." from 2.(max_minor + 1). 0/-1. */
int nb_proxy_check_version(struct nb_ctx *ctx, int max_minor);

/* Policy rule prefix + what, by default a reader (read) or member of
 * project. 0/-1 (403). */
int nb_proxy_policy(struct nb_ctx *ctx, const char *prefix, const char *what, bool read,
                    const char *project);

/* Neutron's errors carry Neutron's names (SecurityGroupNotFound, …); Nova
 * answers them in its own dialect (itemNotFound, badRequest, …), so the
 * name goes and the status and message stay. rc passes through. */
int nb_proxy_nova_err(struct nb_ctx *ctx, int rc);

/* Each route's handler: its do_ function in Nova's error dialect. */
#define NB_PROXY_ROUTE(name)                                                                       \
    static int h_##name(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp)              \
    {                                                                                              \
        return nb_proxy_nova_err(ctx, do_##name(ctx, req, resp));                                  \
    }

/* ctx.c - request contexts and the one recorded error (see ctx.h). */
#include "common/ctx.h"
#include "common/json.h"
#include "common/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void nb_ctx_init(struct nb_ctx *ctx)
{
    memset(ctx, 0, sizeof(*ctx));
    char u[NB_UUID_LEN];
    nb_uuid(u);
    snprintf(ctx->request_id, sizeof(ctx->request_id), "req-%s", u);
}

void nb_ctx_init_system(struct nb_ctx *ctx, const char *request_id)
{
    nb_ctx_init(ctx);
    if (request_id && *request_id)
        nb_strlcpy(ctx->request_id, request_id, sizeof(ctx->request_id));
    ctx->system = true;
    ctx->is_admin = ctx->is_member = ctx->is_reader = true;
}

static const char *default_name(int status)
{
    switch (status) {
    case 400: return "badRequest";
    case 401: return "unauthorized";
    case 403: return "forbidden";
    case 404: return "itemNotFound";
    case 405: return "badMethod";
    case 406: return "notAcceptable";
    case 409: return "conflictingRequest";
    case 413: return "overLimit";
    case 415: return "badMediaType";
    case 501: return "notImplemented";
    case 503: return "serviceUnavailable";
    default: return "computeFault";
    }
}

int nb_error(struct nb_ctx *ctx, int status, const char *name, const char *fmt, ...)
{
    if (!ctx || ctx->err_status)
        return -1;
    ctx->err_status = status;
    nb_strlcpy(ctx->err_name, name ? name : default_name(status), sizeof(ctx->err_name));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->err_msg, sizeof(ctx->err_msg), fmt, ap);
    va_end(ap);
    return -1;
}

void nb_ctx_child(struct nb_ctx *child, const struct nb_ctx *parent)
{
    if (child != parent)
        *child = *parent;
    nb_ctx_clear_error(child);
}

void nb_ctx_clear_error(struct nb_ctx *ctx)
{
    ctx->err_status = 0;
    ctx->err_name[0] = '\0';
    ctx->err_msg[0] = '\0';
}

int nb_ctx_forward_error(struct nb_ctx *parent, const struct nb_ctx *child)
{
    if (!child->err_status)
        return nb_error(parent, 500, NULL, "An unknown error occurred.");
    return nb_error(parent, child->err_status, child->err_name, "%s", child->err_msg);
}

bool nb_ctx_failed(const struct nb_ctx *ctx)
{
    return ctx->err_status != 0;
}

int nb_ctx_status(const struct nb_ctx *ctx)
{
    return ctx->err_status;
}

const char *nb_ctx_message(const struct nb_ctx *ctx)
{
    return ctx->err_msg;
}

const char *nb_ctx_error_name(const struct nb_ctx *ctx)
{
    return ctx->err_name;
}

bool nb_ctx_mv_ge(const struct nb_ctx *ctx, int major, int minor)
{
    return ctx->mv_major > major || (ctx->mv_major == major && ctx->mv_minor >= minor);
}

json_t *nb_ctx_to_json(const struct nb_ctx *ctx)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:b, s:b, s:b, s:b}", "request_id",
                     ctx->request_id, "global_request_id", ctx->global_request_id, "user_id",
                     ctx->user_id, "user_name", ctx->user_name, "project_id", ctx->project_id,
                     "project_name", ctx->project_name, "is_admin", ctx->is_admin, "is_member",
                     ctx->is_member, "is_reader", ctx->is_reader, "system", ctx->system);
}

void nb_ctx_from_json(struct nb_ctx *ctx, json_t *j)
{
    memset(ctx, 0, sizeof(*ctx));
    nb_strlcpy(ctx->request_id, nb_json_str(j, "request_id"), sizeof(ctx->request_id));
    nb_strlcpy(ctx->global_request_id, nb_json_str(j, "global_request_id"),
               sizeof(ctx->global_request_id));
    nb_strlcpy(ctx->user_id, nb_json_str(j, "user_id"), sizeof(ctx->user_id));
    nb_strlcpy(ctx->user_name, nb_json_str(j, "user_name"), sizeof(ctx->user_name));
    nb_strlcpy(ctx->project_id, nb_json_str(j, "project_id"), sizeof(ctx->project_id));
    nb_strlcpy(ctx->project_name, nb_json_str(j, "project_name"), sizeof(ctx->project_name));
    ctx->is_admin = json_is_true(json_object_get(j, "is_admin"));
    ctx->is_member = json_is_true(json_object_get(j, "is_member"));
    ctx->is_reader = json_is_true(json_object_get(j, "is_reader"));
    ctx->system = json_is_true(json_object_get(j, "system"));
    if (!ctx->request_id[0])
        nb_ctx_init(ctx);
}

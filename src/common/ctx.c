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

enum nb_err_code nb_err_code_of(int status)
{
    switch (status) {
    case 0: return NB_ERR_NONE;
    case 400: return NB_ERR_BAD_REQUEST;
    case 401: return NB_ERR_UNAUTHORIZED;
    case 403: return NB_ERR_FORBIDDEN;
    case 404: return NB_ERR_NOT_FOUND;
    case 405: return NB_ERR_BAD_METHOD;
    case 406: return NB_ERR_NOT_ACCEPTABLE;
    case 408: return NB_ERR_TIMEOUT;
    case 409: return NB_ERR_CONFLICT;
    case 413: return NB_ERR_TOO_LARGE;
    case 414: return NB_ERR_URI_TOO_LONG;
    case 415: return NB_ERR_BAD_MEDIA_TYPE;
    case 431: return NB_ERR_HEADERS_TOO_LARGE;
    case 499: return NB_ERR_CLIENT_GONE;
    case 501: return NB_ERR_NOT_IMPLEMENTED;
    case 503: return NB_ERR_UNAVAILABLE;
    case 505: return NB_ERR_BAD_VERSION;
    default: return NB_ERR_INTERNAL;
    }
}

int nb_error(struct nb_ctx *ctx, int status, const char *name, const char *fmt, ...)
{
    if (!ctx || ctx->err_status)
        return -1;
    ctx->err_status = status;
    ctx->err_code = nb_err_code_of(status);
    nb_strlcpy(ctx->err_name, name ? name : "", sizeof(ctx->err_name));
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
    ctx->err_code = NB_ERR_NONE;
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

enum nb_err_code nb_ctx_code(const struct nb_ctx *ctx)
{
    return ctx->err_code;
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

/* http_errors.c - the reason phrases of HTTP statuses and the rendering
 * of a recorded error: the HTTP layer hands it, neutral (status, class,
 * the service's own name if any, message), to the renderer of the service
 * the request belongs to (struct nb_http_service), which writes it in its
 * OpenStack dialect. Requests under no service prefix (a bad request line,
 * an unknown prefix) get the fallback service's renderer. */
#include "common/http_int.h"
#include "common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *nb_http_status_title(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Request Entity Too Large";
    case 414: return "Request-URI Too Long";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

/* The neutral body when no service renders: {"error": {"code", "message"}}. */
static void render_plain(const struct nb_http_error *err, struct nb_resp *resp)
{
    resp->body = json_pack("{s:{s:i, s:s}}", "error", "code", err->status, "message", err->message);
}

void nb_http_render_error(const struct nb_ctx *ctx, const struct nb_http_service *svc,
                          const char *accept, struct nb_resp *resp)
{
    struct nb_http_error err = {
        .status = nb_ctx_failed(ctx) ? nb_ctx_status(ctx) : 500,
        .code = nb_ctx_failed(ctx) ? nb_ctx_code(ctx) : NB_ERR_INTERNAL,
        .name = nb_ctx_error_name(ctx),
        .message = *nb_ctx_message(ctx) ? nb_ctx_message(ctx) : "An unknown error occurred.",
    };
    json_decref(resp->body);
    resp->body = NULL;
    free(resp->raw);
    resp->raw = NULL;
    resp->status = err.status;
    if (!svc)
        svc = nb_http_fallback_service();
    if (svc)
        svc->render_error(ctx, &err, accept, resp);
    else
        render_plain(&err, resp);
}

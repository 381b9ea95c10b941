/* http_errors.c - every error the HTTP layer answers, in the shape of the
 * service the path belongs to, as each OpenStack service writes it:
 *
 *   compute, volume: {"itemNotFound": {"code": 404, "message": "…"}}
 *                    (nova/cinder api/openstack/wsgi.py Fault)
 *   identity (and every 401, as keystonemiddleware answers):
 *                    {"error": {"code": 401, "message": "…", "title": "Unauthorized"}}
 *   placement:       {"errors": [{"status", "title", "detail", "request_id"[, "code"]}]}
 *   image:           webob's page by Accept: JSON, HTML or plain text
 *   networking:      {"NeutronError": {"type": "HTTPNotFound", "message": "…", "detail": ""}}
 *
 * Requests that name no service (a bad request line, an unknown prefix)
 * get the compute shape. */
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

/* Glance's errors are webob pages: JSON, HTML or text by Accept. */
static void render_image_error(const char *accept, int st, const char *msg, struct nb_resp *resp)
{
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

/* Neutron's exception type for an error the HTTP layer itself raised
 * (webob's class names, as neutron/api/api_common.py reports them). */
static const char *neutron_type(int status)
{
    switch (status) {
    case 400: return "HTTPBadRequest";
    case 403: return "HTTPForbidden";
    case 404: return "HTTPNotFound";
    case 405: return "HTTPMethodNotAllowed";
    case 406: return "HTTPNotAcceptable";
    case 408: return "HTTPRequestTimeout";
    case 413: return "HTTPRequestEntityTooLarge";
    case 414: return "HTTPRequestURITooLong";
    case 431: return "HTTPRequestHeaderFieldsTooLarge";
    case 505: return "HTTPVersionNotSupported";
    default: return "HTTPInternalServerError";
    }
}

static json_t *placement_error(const struct nb_ctx *ctx, int st, const char *msg)
{
    const char *code =
        nb_startswith(ctx->err_name, "placement.") ? ctx->err_name : "placement.undefined_code";
    json_t *e = json_pack("{s:i, s:s, s:s, s:s}", "status", st, "title", nb_http_status_title(st),
                          "detail", msg, "request_id", ctx->request_id);
    /* error codes appeared in placement 1.23 */
    if (ctx->mv_major == 1 && ctx->mv_minor >= 23)
        json_object_set_new(e, "code", json_string(code));
    return json_pack("{s:[o]}", "errors", e);
}

void nb_http_render_error(struct nb_ctx *ctx, enum nb_service svc, const char *accept,
                          struct nb_resp *resp)
{
    int st = ctx->err_status ? ctx->err_status : 500;
    const char *msg = ctx->err_msg[0] ? ctx->err_msg : "An unknown error occurred.";
    json_decref(resp->body);
    resp->body = NULL;
    free(resp->raw);
    resp->raw = NULL;
    resp->status = st;
    switch (svc) {
    case NB_SVC_IDENTITY:
        resp->body = json_pack("{s:{s:i, s:s, s:s}}", "error", "code", st, "message", msg, "title",
                               nb_http_status_title(st));
        break;
    case NB_SVC_PLACEMENT: resp->body = placement_error(ctx, st, msg); break;
    case NB_SVC_IMAGE: render_image_error(accept, st, msg, resp); break;
    case NB_SVC_NETWORK: {
        /* a Neutron exception name recorded by the handler or the policy
         * guard (PolicyNotAuthorized, …), else webob's class name */
        bool named = ctx->err_name[0] >= 'A' && ctx->err_name[0] <= 'Z';
        resp->body =
            json_pack("{s:{s:s, s:s, s:s}}", "NeutronError", "type",
                      named ? ctx->err_name : neutron_type(st), "message", msg, "detail", "");
        break;
    }
    default:
        resp->body = json_pack("{s:{s:i, s:s}}", ctx->err_name[0] ? ctx->err_name : "computeFault",
                               "code", st, "message", msg);
    }
}

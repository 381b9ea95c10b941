/* http_int.h - what the HTTP layer's own files share (http.c, http_errors.c,
 * healthcheck.c); not for services, which use http.h. */
#ifndef NB_HTTP_INT_H
#define NB_HTTP_INT_H

#include "common/http.h"

/* The reason phrase of an HTTP status ("Not Found"). */
const char *nb_http_status_title(int status);

/* Renders the error recorded in ctx (500 if none) into resp in svc's
 * OpenStack shape (accept picks Glance's variant). Replaces resp's body. */
void nb_http_render_error(struct nb_ctx *ctx, enum nb_service svc, const char *accept,
                          struct nb_resp *resp);

/* The GET /healthcheck handler (oslo.middleware's answer). */
int nb_http_healthcheck(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp);

#endif

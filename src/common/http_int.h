/* http_int.h - what the HTTP layer's own files share (http.c, http_errors.c,
 * healthcheck.c); not for services, which use http.h. */
#ifndef NB_HTTP_INT_H
#define NB_HTTP_INT_H

#include "common/http.h"

/* The service registered as the fallback (answers requests under no
 * prefix), or NULL. */
const struct nb_http_service *nb_http_fallback_service(void);

/* The GET /healthcheck handler (oslo.middleware's answer). */
int nb_http_healthcheck(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp);

#endif

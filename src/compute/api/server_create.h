/* server_create.h - POST /servers: the create body's schema checks
 * (server_create_schema.c) and the pipeline that resolves, stores and casts
 * the request (server_create.c). Private to compute/api. */
#ifndef NB_COMPUTE_API_SERVER_CREATE_H
#define NB_COMPUTE_API_SERVER_CREATE_H

#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Checks a create body (Nova's create schema at ctx's microversion);
 * server is its "server" object. 0, or -1 after 400. */
int nb_srv_validate_create(struct nb_ctx *ctx, json_t *body, json_t *server);
/* Nova's utils.sanitize_hostname (new string, maybe ""). */
char *nb_srv_sanitize_hostname(const char *name);
/* Nova's generate_password: 12 characters into out[13]. */
void nb_srv_generate_password(char out[13]);
/* POST /compute/v2.1/servers. */
int nb_srv_h_create(struct nb_ctx *ctx, struct nb_req *req, struct nb_resp *resp);

#endif

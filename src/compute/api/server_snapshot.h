/* server_snapshot.h - the createImage server action. Defined in
 * server_snapshot.c; private to compute/api. */
#ifndef NB_COMPUTE_API_SERVER_SNAPSHOT_H
#define NB_COMPUTE_API_SERVER_SNAPSHOT_H

#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- createImage (server_snapshot.c) ------------------------------------- */

/* The createImage body (Nova's create_image schema). 0/-1. */
int nb_srv_check_create_image(struct nb_ctx *ctx, json_t *args);
/* Nova's createImage of inst: an image-backed server's snapshot is cast to
 * the conductor, a volume-backed server's is made here (volume snapshots
 * and an image carrying the mappings). Answers 202 with {"image_id"} from
 * 2.45, before that with a Location header. 0/-1. */
int nb_srv_create_image(struct nb_ctx *ctx, json_t *inst, json_t *args, struct nb_resp *resp);

#endif

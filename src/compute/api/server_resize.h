/* server_resize.h - the cold migration and resize server actions: migrate,
 * resize, confirmResize and revertResize. Defined in server_resize.c;
 * private to compute/api (server_actions.c's action table names them). */
#ifndef NB_COMPUTE_API_SERVER_RESIZE_H
#define NB_COMPUTE_API_SERVER_RESIZE_H

#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>

/* Body checks, run before the server is looked up (Nova's schemas): the
 * migrate body from 2.56 ({"host"} or null), the resize body (flavorRef,
 * OS-DCF:diskConfig). 0/-1 after a 400. */
int nb_srv_check_migrate(struct nb_ctx *ctx, json_t *args);
int nb_srv_check_resize(struct nb_ctx *ctx, json_t *args);

/* The actions on inst (the checked args): each checks policy, lock and
 * state as Nova's compute API does, records the migration, the task state
 * and the instance action in one transaction and casts the work to the
 * conductor. 0, or -1 with Nova's status and message on ctx. */
int nb_srv_migrate(struct nb_ctx *ctx, json_t *inst, json_t *args);
int nb_srv_resize(struct nb_ctx *ctx, json_t *inst, json_t *args);
/* confirmResize answers 204 itself (Nova kept it for compatibility). */
int nb_srv_confirm_resize(struct nb_ctx *ctx, json_t *inst, json_t *args, struct nb_resp *resp);
int nb_srv_revert_resize(struct nb_ctx *ctx, json_t *inst, json_t *args);

#endif

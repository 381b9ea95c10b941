/* server_moves.h - the server actions that move a server between hosts,
 * for the action table of server_actions.c: os-migrateLive
 * (server_moves.c). Each pair is the action's body check (run before the
 * server is looked up, as Nova's schema decorators) and its work. */
#ifndef NB_COMPUTE_API_SERVER_MOVES_H
#define NB_COMPUTE_API_SERVER_MOVES_H

#include "common/ctx.h"
#include "common/env.h"
#include <jansson.h>

/* The os-migrateLive body as Nova's schema of the request's microversion
 * (2.1, 2.25, 2.30, 2.68) allows it. 0, or -1 after 400. */
int nb_srv_check_live_migrate(struct nb_ctx *ctx, json_t *args);
/* Records and casts the live migration of inst (see server_moves.c). 0,
 * or -1 with the error on ctx (403, 409, 400, 503). */
int nb_srv_live_migrate(struct nb_ctx *ctx, json_t *inst, json_t *args);

/* Registers nubo's own GET
 * /compute/v2.1/servers/{server_id}/os-migration-check (the live-migration
 * dry run behind `nubo doctor migration`); called by
 * nb_compute_server_actions_init. 0. */
int nb_compute_server_moves_init(struct nb_env *env);

#endif

/* server_rebuild.h - the rebuild (server_rebuild.c) and evacuate
 * (server_evacuate.c) server actions. Private to compute/api. */
#ifndef NB_COMPUTE_API_SERVER_REBUILD_H
#define NB_COMPUTE_API_SERVER_REBUILD_H

#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>

/* The rebuild body (Nova's rebuild schemas at ctx's microversion). 0/-1. */
int nb_srv_check_rebuild(struct nb_ctx *ctx, json_t *args);
/* Nova's rebuild of inst: checked, task_state rebuilding with the new
 * image and attributes and action "rebuild" in one transaction, cast to
 * the conductor; answers 202 with the server. 0/-1. */
int nb_srv_rebuild(struct nb_ctx *ctx, json_t *inst, json_t *args, struct nb_resp *resp);

/* The evacuate body (Nova's evacuate schemas at ctx's microversion). 0/-1. */
int nb_srv_check_evacuate(struct nb_ctx *ctx, json_t *args);
/* Nova's evacuate of inst (admin; its host's compute service down): task
 * state rebuilding, action "evacuate" and the evacuation migration
 * (accepted) in one transaction, cast to the conductor; answers 200 with
 * {"adminPass"} before 2.14, else with no body. 0/-1. */
int nb_srv_evacuate(struct nb_ctx *ctx, json_t *inst, json_t *args, struct nb_resp *resp);

#endif

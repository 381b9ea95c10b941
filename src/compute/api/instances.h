/* instances.h - the instance rows as the Compute API's handlers use them:
 * the module's environment and database, lookup by UUID with Nova's
 * visibility rule, the lock and state refusals (the soft delete is
 * compute/objects' nb_instance_destroy).
 * Instance rows are the JSON objects nb_db_row() returns for
 * `SELECT * FROM instances`. Defined in instances.c; private to
 * compute/api. */
#ifndef NB_COMPUTE_API_INSTANCES_H
#define NB_COMPUTE_API_INSTANCES_H

#include "common/env.h"
#include "common/ctx.h"
#include "common/http.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct nb_db;

/* The environment given to nb_compute_servers_init. */
const struct nb_env *nb_srv_env(void);
/* Sets it (nb_compute_servers_init, once). */
void nb_srv_env_set(const struct nb_env *env);
struct nb_db *nb_srv_db(void);

/* ---- instances ----------------------------------------------------------- */

/* The instance row by UUID visible to ctx (own project, or any for admins);
 * with_deleted also finds soft-deleted rows. 404 "Instance <id> could not
 * be found." otherwise. */
json_t *nb_srv_instance_get(struct nb_ctx *ctx, const char *uuid, bool with_deleted);
/* 409 "Instance <id> is locked" when the instance is locked and ctx is not
 * an admin (Nova's check_instance_lock). 0 when not refused. */
int nb_srv_check_lock(struct nb_ctx *ctx, const json_t *inst);
/* 409 "Cannot '<action>' instance <id> while it is in <attr> <state>". -1. */
int nb_srv_invalid_state(struct nb_ctx *ctx, const char *action, const char *uuid, const char *attr,
                         const char *state);

#endif

/* server_actions.h - what every server action (server_actions.c and the
 * files with the actions of one concern: moves, rebuild, …) checks and
 * records before it casts its work to the conductor: Nova's
 * check_instance_state and check_instance_host, and the task state set
 * with the instance action in one transaction. */
#ifndef NB_COMPUTE_API_SERVER_ACTIONS_H
#define NB_COMPUTE_API_SERVER_ACTIONS_H

#include "bus/bus.h"
#include "common/ctx.h"
#include <jansson.h>
#include <stdbool.h>

/* One state rule of Nova's check_instance_state: allowed vm_states and
 * task_states (NULL lists allow any; "" in tasks stands for None). */
struct nb_srv_state_rule {
    const char *const *vm;
    const char *const *task;
    bool must_have_launched;
};

/* {"", NULL}: task state None only. */
extern const char *const nb_srv_none_only[];

/* The addSecurityGroup / removeSecurityGroup actions on inst
 * (security_groups.c): policy, the body's {"name"}, then the group added to
 * or taken off every port of the server. 0/-1 after nb_error. */
int nb_srv_add_security_group(struct nb_ctx *ctx, json_t *inst, json_t *args);
int nb_srv_remove_security_group(struct nb_ctx *ctx, json_t *inst, json_t *args);

/* The addFloatingIp / removeFloatingIp actions (floating_ips.c): their
 * body checks (a 404 from 2.44, then Nova's schema) and their work. 0/-1
 * after nb_error. */
int nb_srv_check_add_floating_ip(struct nb_ctx *ctx, json_t *args);
int nb_srv_check_remove_floating_ip(struct nb_ctx *ctx, json_t *args);
int nb_srv_add_floating_ip(struct nb_ctx *ctx, json_t *inst, json_t *args);
int nb_srv_remove_floating_ip(struct nb_ctx *ctx, json_t *inst, json_t *args);
/* The fixed addresses of a network_info list in VIF order (Nova's
 * NetworkInfo.fixed_ips()): a new array of strings. */
json_t *nb_srv_fixed_ips(const json_t *network_info);

/* Whether v (NULL read as "") is in the NULL-terminated set. */
bool nb_srv_in_set(const char *v, const char *const *set);

/* 409 with Nova's wording when inst breaks rule (action as named in the
 * message, e.g. "stop"). 0/-1. */
int nb_srv_check_state(struct nb_ctx *ctx, const json_t *inst, const char *action,
                       const struct nb_srv_state_rule *rule);

/* Nova's check_instance_host: 409 "Instance <id> is not ready". 0/-1. */
int nb_srv_check_host(struct nb_ctx *ctx, const json_t *inst);

/* Sets the task state if the instance is still as checked (expected task
 * states, "" = None), records the action action_name under the request ID,
 * and commits. -1 after 409 when the instance changed meanwhile. */
int nb_srv_begin_task(struct nb_ctx *ctx, const json_t *inst, const char *action_name,
                      const char *message_action, const char *task_state,
                      const char *const *expected_tasks, bool reset_progress);

/* The undo of a request the API committed and handed to the conductor
 * client (conductor_api.h), run if it is never sent: the task state
 * task (NULL: none) is cleared while the instance still has it, the
 * migration of the request's migration_uuid (if any) set to migration
 * while it is migration_from (NULL: any), the action finished with an
 * error and, when the client had been answered, a fault recorded. Add
 * "image_ref" (the instance's image before a rebuild) or "drop_image":
 * true (a snapshot's image) to its data when needed. */
struct nb_bus_undo nb_srv_undo(const char *task, const char *migration, const char *migration_from);

/* A request the conductor client refused (undone): logs and answers 503
 * "The compute conductor is not available." -1. */
int nb_srv_not_sent(struct nb_ctx *ctx, const char *uuid, const char *method);

#endif

/* helpers.h - the instance helpers the conductor's workflows share
 * (helpers.c). manager.c, the dispatcher, defines none of them, so the
 * workflow files depend on this header and not on the dispatcher. */
#ifndef NB_CONDUCTOR_HELPERS_H
#define NB_CONDUCTOR_HELPERS_H

#include "common/ctx.h"
#include <jansson.h>
#include <stdbool.h>

struct conductor;

/* The instance row (deleted or not), or NULL (also when the lookup failed:
 * it runs on a child context, ctx's error slot is left alone). New ref. */
json_t *cond_instance_get(struct conductor *c, struct nb_ctx *ctx, const char *uuid);

/* The instance as the agent gets it: row fields, flavor, metadata, BDMs.
 * New ref. */
json_t *cond_instance_for_agent(struct conductor *c, struct nb_ctx *ctx, json_t *row);

/* Event, fault and action helpers that log instead of failing: the record
 * of an event must never stop the work it records. Each runs on a child of
 * ctx, so its failure neither masks nor replaces an error on ctx. */
void cond_event_start(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *event,
                      const char *host);
void cond_event_finish(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *event,
                       bool ok, const char *details);
void cond_fault(struct conductor *c, struct nb_ctx *ctx, const char *uuid, int code,
                const char *message, const char *details, const char *host);
void cond_action_start(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                       const char *action);
void cond_action_finish(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                        const char *result);
/* Releases the instance's allocations (host only names it in the log),
 * redone on a conflict and while the database is unreachable (a restart, a
 * Galera failover); 0, or -1 logged: recovery releases what is left. */
int cond_release_allocations(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                             const char *host);

/* Whether a request from the API (method) finds its records as the API
 * left them: the instance row's task_state task and, when
 * migration_uuid is given, that migration in status. Else the message
 * came twice (redelivered, or resent by an API that had no confirm from
 * the broker) or after its request was undone or finished: logged, and
 * the caller drops it. */
bool cond_still_requested(struct conductor *c, struct nb_ctx *ctx, const json_t *row,
                          const char *task, const char *migration_uuid, const char *status,
                          const char *method);

/* Soft-deletes the instance (deleted = id, vm_state deleted, timestamps),
 * its metadata, faults and BDMs, drops its tags and server group
 * membership (as the API's local delete does), then releases its
 * allocations. Idempotent. 0/-1. */
int cond_local_delete(struct conductor *c, struct nb_ctx *ctx, const char *uuid);

#endif

/* compute.h - Nova's vocabulary and the records every compute part writes:
 * states, instance actions and their events, faults.
 *
 * The bus contract between the compute API, the conductor, the scheduler
 * and the agents is code: one typed client per topic in compute/rpc/
 * (conductor_api.h for "conductor", compute_api.h for "compute.<host>",
 * scheduler_api.h for "scheduler"), one documented function per message,
 * and a method table per topic on the handler side. All messages carry the
 * caller's context.
 *
 * Instance state is written only by compute/objects (instance.h): the
 * API's create and accepted actions and the conductor's workflows call its
 * conditional transition. States and the status map: objects/states.h. */
#ifndef NB_COMPUTE_H
#define NB_COMPUTE_H

#include "common/ctx.h"
#include "compute/objects/states.h"
#include <jansson.h>

struct nb_db;

/* Starts an instance action (instance_actions row) for ctx->request_id.
 * Returns 0/-1. Idempotent per (instance, request_id). */
int nb_action_start(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                    const char *action);
/* Sets finish_time (and message on error) of the request's action. */
int nb_action_finish(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                     const char *message);
/* Starts an event of the request's action (creating the action with
 * fallback_action if none exists). host may be NULL. 0/-1. */
int nb_event_start(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                   const char *event, const char *host);
/* Finishes the newest unfinished event of that name: result "Success" or
 * "Error"; traceback/details may be NULL. 0/-1. */
int nb_event_finish(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                    const char *event, const char *result, const char *traceback,
                    const char *details);
/* Records an instance fault. 0/-1. */
int nb_fault_add(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid, int code,
                 const char *message, const char *details, const char *host);
/* The instance's newest live fault recorded at or after since (an ISO
 * time; NULL: any): {"code", "message", "details", "host", "created_at"},
 * new ref, or NULL (none, or an error on ctx). */
json_t *nb_fault_latest(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                        const char *since);

/* Registers (or refreshes) the service row of a control-plane role of this
 * process — binary "nova-conductor" / "nova-scheduler" on host — and keeps
 * its heartbeat every [DEFAULT] report_interval until
 * nb_service_keepalive_stop(). 0/-1. */
int nb_service_keepalive_start(struct nb_db *db, const char *host, const char *binary,
                               const char *topic);
void nb_service_keepalive_stop(void);

/* --- for the other modules and the host tools, which never name
 * compute's tables (src/db/owners.tsv). Each runs on db, the caller's own
 * connection to the shared database: the compute API need not be
 * initialised in the caller's process. */

/* Creates a public flavor without extra specs unless one with that
 * flavorid or name exists (the default flavors `nubo aio` seeds, as
 * devstack's). 1 created, 0 one existed, -1 after a database error
 * recorded on ctx. */
int nb_flavor_seed(struct nb_db *db, struct nb_ctx *ctx, const char *flavorid, const char *name,
                   int memory_mb, int vcpus, int root_gb);
/* The live rows of Nova's services table, ordered by binary and host:
 * [{"host", "binary", "topic", "report_count", "disabled",
 * "disabled_reason", "forced_down", "last_seen_up", "version",
 * "created_at", "updated_at"}, ...] (what `nubo status` reads). New
 * reference, or NULL after a database error recorded on ctx. */
json_t *nb_service_list(struct nb_db *db, struct nb_ctx *ctx);
/* Whether the instance's live block device mapping of volume_id holds the
 * volume attachment attachment_id, i.e. the compute service still maps it
 * (Cinder's attachment_deletion_allowed asks this). 1 yes, 0 no, -1 after
 * a database error recorded on ctx. */
int nb_compute_volume_mapped(struct nb_db *db, struct nb_ctx *ctx, const char *instance_uuid,
                             const char *volume_id, const char *attachment_id);

/* The events of the instance actions request_id started, oldest first:
 * [{"action", "instance_uuid", "action_message", "event", "start_time",
 * "finish_time", "result", "host", "traceback", "details"}, ...] (what
 * `nubo trace` shows of the request's steps on every host). New reference,
 * or NULL after a database error recorded on ctx. */
json_t *nb_request_events(struct nb_db *db, struct nb_ctx *ctx, const char *request_id);

/* The instance as the compute agent, the config drive and the metadata
 * service see it: {"uuid", "name", "hostname", "project_id", "user_id",
 * "image_ref", "user_data" (base64 as stored), "key_name", "key_data",
 * "config_drive", "availability_zone", "host", "node", "launch_index",
 * "flavor": {...}, "metadata": {key: value}, "block_device_mapping": [...],
 * "network_info": [...] (instance_info_caches, nb_network_allocate_for_
 * instance's shape; [] when none)}.
 * Missing/NULL columns are left out. New ref (never NULL; a failed
 * sub-query leaves its part empty and its error on ctx). */
json_t *nb_instance_agent_view(struct nb_db *db, struct nb_ctx *ctx, const json_t *row);

#endif

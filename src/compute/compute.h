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
 * The conductor is the only writer of instance state after create; the API
 * writes the initial row and the task state of an accepted action. */
#ifndef NB_COMPUTE_H
#define NB_COMPUTE_H

#include "common/ctx.h"
#include <jansson.h>

struct nb_db;

/* vm_state */
#define NB_VM_BUILDING "building"
#define NB_VM_ACTIVE "active"
#define NB_VM_STOPPED "stopped"
#define NB_VM_PAUSED "paused"
#define NB_VM_SUSPENDED "suspended"
#define NB_VM_ERROR "error"
#define NB_VM_DELETED "deleted"
#define NB_VM_SOFT_DELETED "soft-delete"
#define NB_VM_SHELVED_OFFLOADED "shelved_offloaded"
#define NB_VM_RESIZED "resized"
#define NB_VM_RESCUED "rescued"

/* task_state */
#define NB_TASK_SCHEDULING "scheduling"
#define NB_TASK_NETWORKING "networking"
#define NB_TASK_BDM "block_device_mapping"
#define NB_TASK_SPAWNING "spawning"
#define NB_TASK_POWERING_OFF "powering-off"
#define NB_TASK_POWERING_ON "powering-on"
#define NB_TASK_REBOOTING "rebooting"
#define NB_TASK_REBOOTING_HARD "rebooting_hard"
#define NB_TASK_REBOOT_PENDING "reboot_pending"
#define NB_TASK_REBOOT_STARTED "reboot_started"
#define NB_TASK_REBOOT_PENDING_HARD "reboot_pending_hard"
#define NB_TASK_REBOOT_STARTED_HARD "reboot_started_hard"
#define NB_TASK_PAUSING "pausing"
#define NB_TASK_UNPAUSING "unpausing"
#define NB_TASK_SUSPENDING "suspending"
#define NB_TASK_RESUMING "resuming"
#define NB_TASK_DELETING "deleting"
/* createImage (Nova's task_states): the API sets image_snapshot, the
 * conductor image_pending_upload while the agent copies and uploads. */
#define NB_TASK_IMAGE_SNAPSHOT "image_snapshot"
#define NB_TASK_IMAGE_SNAPSHOT_PENDING "image_snapshot_pending"
#define NB_TASK_IMAGE_PENDING_UPLOAD "image_pending_upload"
#define NB_TASK_IMAGE_UPLOADING "image_uploading"

/* The API status for a vm_state/task_state pair, as Nova's
 * nova.api.openstack.common.status_from_state (borrowed static string). */
const char *nb_server_status(const char *vm_state, const char *task_state);

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

/* The instance as the compute agent, the config drive and the metadata
 * service see it: {"uuid", "name", "hostname", "project_id", "user_id",
 * "image_ref", "user_data" (base64 as stored), "key_name", "key_data",
 * "config_drive", "availability_zone", "host", "node", "launch_index",
 * "flavor": {...}, "metadata": {key: value}, "block_device_mapping": [...]}.
 * Missing/NULL columns are left out. New ref (never NULL; a failed
 * sub-query leaves its part empty and its error on ctx). */
json_t *nb_instance_agent_view(struct nb_db *db, struct nb_ctx *ctx, const json_t *row);

#endif

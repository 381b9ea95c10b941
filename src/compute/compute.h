/* compute.h - Nova's vocabulary and the records every compute part writes:
 * states, instance actions and their events, faults; and the bus contract
 * between the compute API, the conductor, the scheduler and the agents.
 *
 * Bus contract (all messages carry the caller's context):
 *   API -> "conductor" cast:
 *     build_instances   {"instance_uuids": [...]}       instances already in the DB
 *                                                        (building/scheduling), action
 *                                                        "create" already started.
 *     start_instance    {"uuid"}   stop_instance {"uuid"}
 *     reboot_instance   {"uuid", "reboot_type": "SOFT"|"HARD"}
 *     pause_instance    {"uuid"}   unpause_instance {"uuid"}
 *     suspend_instance  {"uuid"}   resume_instance  {"uuid"}
 *                       (API has set task_state pausing / unpausing /
 *                       suspending / resuming and started the action)
 *     delete_instance   {"uuid"}   (API has set task_state deleting)
 *   API -> "compute.<host>" call (no conductor: Nova's API asks the host):
 *     get_console_output {"uuid", "length": n|null} -> {"output": "…"} or
 *        {"error": "…", "code": 404|501}; the API answers 409 when the
 *        instance has no host and 404/501 as the agent says.
 *   conductor -> "scheduler" call:
 *     select_destinations {"instance_uuid", "spec": {...}} -> {"host", "node",
 *        "rp_uuid"} or {"error": "No valid host was found. …", "details": "…"}
 *   conductor -> "compute.<host>" cast / call: build_and_run_instance,
 *     start/stop/reboot/terminate_instance, pause/unpause/suspend/
 *     resume_instance {"instance"}, destroy_guest, guest_info (call).
 *   agent -> "conductor" cast/call: build_result, op_result {"uuid", "host",
 *     "op", "ok", "message", "power_state", "unsupported"}, compute_node_update,
 *     service_heartbeat, power_sync, …
 *   Ends of pause / unpause / suspend / resume (Nova's compute manager):
 *     vm_state paused / active / suspended / active with the guest's power
 *     state (3 / 1 / 4 / 1); events compute_<op>_instance. On failure the
 *     task state is cleared and a fault recorded; a failed suspend or resume
 *     that touched the guest sets ERROR. Power sync: a paused server whose
 *     guest shut down is stopped; a suspended server's guest is shut down
 *     by design (no action).
 * Volumes and snapshots (step 3):
 *   API -> "conductor" cast:
 *     attach_volume     {"uuid", "bdm_uuid", "volume_id"}  the API inserted the
 *                       mapping row (device_name chosen, connection_info NULL),
 *                       reserved the volume and started action "attach_volume".
 *     detach_volume     {"uuid", "bdm_uuid", "volume_id"}  the API moved the
 *                       volume to detaching and started action "detach_volume".
 *     snapshot_instance {"uuid", "image_id"}  image-backed createImage: the API
 *                       created the image record (queued), set task_state
 *                       image_snapshot and started action "createImage"; the
 *                       conductor moves it to image_pending_upload.
 *   conductor -> "compute.<host>" cast:
 *     attach_volume {"instance", "bdm"}   detach_volume {"instance", "bdm"}
 *     snapshot_instance {"instance", "image_id"}
 *   agent -> "conductor" cast: attach_result / detach_result {"uuid", "host",
 *     "bdm_uuid", "volume_id", "ok", "message"}; snapshot_result {"uuid",
 *     "host", "image_id", "ok", "message"}.
 *   Outcomes (Nova's compute manager): a failed attach destroys the mapping
 *     (deleted = id), puts the volume back to available and records a fault
 *     and the event's Error; a failed detach rolls the volume back to in-use
 *     (fault, Error); a failed snapshot deletes the image and clears the task
 *     state (fault, Error). The build's block_device_mapping step creates
 *     the volumes of source image/snapshot/blank mappings and attaches every
 *     volume (connection_info, attachment_id, device names, root_device_name)
 *     before the spawn; a failure there aborts the build (ERROR, fault "Build
 *     of instance <uuid> aborted: <why>", no reschedule). Deleting a server
 *     detaches its volumes (reserved ones are unreserved) and deletes those
 *     marked delete_on_termination.
 *   agent -> "conductor" call, before any domain start (spawn, start, hard
 *     reboot, resume, attach) when a volume's real format differs from its
 *     mapping's connection_info.data.format and [compute]
 *     reconcile_disk_format is true:
 *     reconcile_disk_format {"uuid", "bdm_uuid", "volume_id", "path",
 *       "old_format", "new_format", "host"} -> {"ok": true, "connection_info": "<new
 *       JSON text>"} | {"ok": false, "message"}; the conductor corrects the
 *       mapping and the volume's record in one transaction, logs the WARNING
 *       and records event "reconcile_disk_format" on the current action.
 *   Events: compute_attach_volume, compute_detach_volume,
 *     compute_snapshot_instance (Nova's names).
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

/* conductor_api.h - the client of topic "conductor" (Nova's
 * conductor/rpcapi.py and the compute manager's calls back to it): one
 * function per message, each packing its arguments in one place. The
 * conductor's dispatcher (conductor/manager.c) serves the same method names.
 * All messages carry the caller's context.
 *
 * Casts return 0, or -1 when no conductor listens (nothing recorded on
 * ctx: the caller says what that means for its request). The API's
 * requests (build, power actions, delete, attach, detach, snapshot, moves,
 * confirm, revert, rebuild) are committed before they are cast: when the
 * cast cannot go out now it is sent again from a thread until it arrives
 * (nb_bus_cast_later), and the request's undo (nb_bus_undo; none for build
 * and delete, which the conductor's recovery resumes) puts its records
 * back if that sender gives up; -1 then means it could not even be queued
 * (undo done): the API answers 503. The conductor's handlers check the
 * task state / migration status / mapping they expect, so a message
 * delivered twice or late changes nothing. Calls return the
 * reply (new ref), or NULL on timeout / no conductor (error on ctx).
 *
 * The conductor is the only writer of instance state after create; the
 * API writes the initial row and the task state of an accepted action
 * before it casts.
 *
 * Ends of pause / unpause / suspend / resume (Nova's compute manager):
 * vm_state paused / active / suspended / active with the guest's power
 * state (3 / 1 / 4 / 1); events compute_<op>_instance. On failure the task
 * state is cleared and a fault recorded; a failed suspend or resume that
 * touched the guest sets ERROR. Power sync: a paused server whose guest
 * shut down is stopped; a suspended server's guest is shut down by design
 * (no action).
 *
 * Volumes and snapshots (Nova's compute manager): a failed attach destroys
 * the mapping (deleted = id), puts the volume back to available and records
 * a fault and the event's Error; a failed detach rolls the volume back to
 * in-use (fault, Error); a failed snapshot deletes the image and clears the
 * task state (fault, Error). The build's block_device_mapping step creates
 * the volumes of source image/snapshot/blank mappings and attaches every
 * volume (connection_info, attachment_id, device names, root_device_name)
 * before the spawn; a failure there aborts the build (ERROR, fault "Build
 * of instance <uuid> aborted: <why>", no reschedule). Deleting a server
 * detaches its volumes (reserved ones are unreserved) and deletes those
 * marked delete_on_termination. Events: compute_attach_volume,
 * compute_detach_volume, compute_snapshot_instance (Nova's names). */
#ifndef NB_RPC_CONDUCTOR_API_H
#define NB_RPC_CONDUCTOR_API_H

#include "bus/bus.h"
#include "common/ctx.h"
#include <jansson.h>
#include <stdbool.h>

#define NB_CONDUCTOR_TOPIC "conductor"
/* The heartbeats' own topic (one worker): on "conductor" they waited
 * behind the builds queued there, and with thousands of boots queued
 * every host looked down after service_down_time. */
#define NB_CONDUCTOR_HEARTBEAT_TOPIC "conductor_heartbeat"

/* from the API */
#define NB_CONDUCTOR_BUILD_INSTANCES "build_instances"
#define NB_CONDUCTOR_START_INSTANCE "start_instance"
#define NB_CONDUCTOR_STOP_INSTANCE "stop_instance"
#define NB_CONDUCTOR_REBOOT_INSTANCE "reboot_instance"
#define NB_CONDUCTOR_PAUSE_INSTANCE "pause_instance"
#define NB_CONDUCTOR_UNPAUSE_INSTANCE "unpause_instance"
#define NB_CONDUCTOR_SUSPEND_INSTANCE "suspend_instance"
#define NB_CONDUCTOR_RESUME_INSTANCE "resume_instance"
#define NB_CONDUCTOR_DELETE_INSTANCE "delete_instance"
#define NB_CONDUCTOR_ATTACH_VOLUME "attach_volume"
#define NB_CONDUCTOR_DETACH_VOLUME "detach_volume"
#define NB_CONDUCTOR_SNAPSHOT_INSTANCE "snapshot_instance"
#define NB_CONDUCTOR_LIVE_MIGRATE_INSTANCE "live_migrate_instance"
#define NB_CONDUCTOR_MIGRATE_SERVER "migrate_server"
#define NB_CONDUCTOR_CONFIRM_RESIZE "confirm_resize"
#define NB_CONDUCTOR_REVERT_RESIZE "revert_resize"
#define NB_CONDUCTOR_REBUILD_INSTANCE "rebuild_instance"
#define NB_CONDUCTOR_LIVE_MIGRATION_ABORT "live_migration_abort"
#define NB_CONDUCTOR_LIVE_MIGRATION_FORCE_COMPLETE "live_migration_force_complete"
#define NB_CONDUCTOR_CHECK_LIVE_MIGRATION "check_live_migration"
/* from the agents */
#define NB_CONDUCTOR_BUILD_RESULT "build_result"
#define NB_CONDUCTOR_OP_RESULT "op_result"
#define NB_CONDUCTOR_REBUILD_RESULT "rebuild_result"
#define NB_CONDUCTOR_EVACUATED_INSTANCES "evacuated_instances"
#define NB_CONDUCTOR_EVACUATION_CLEANED "evacuation_cleaned"
#define NB_CONDUCTOR_ATTACH_RESULT "attach_result"
#define NB_CONDUCTOR_DETACH_RESULT "detach_result"
#define NB_CONDUCTOR_SNAPSHOT_RESULT "snapshot_result"
#define NB_CONDUCTOR_RECONCILE_DISK_FORMAT "reconcile_disk_format"
#define NB_CONDUCTOR_POWER_SYNC "power_sync"
#define NB_CONDUCTOR_SERVICE_UPDATE "service_update"
#define NB_CONDUCTOR_COMPUTE_NODE_UPDATE "compute_node_update"
#define NB_CONDUCTOR_SERVICE_HEARTBEAT "service_heartbeat"
#define NB_CONDUCTOR_INSTANCES_ON_HOST "instances_on_host"
#define NB_CONDUCTOR_LIVE_MIGRATION_STATUS "live_migration_status"
#define NB_CONDUCTOR_LIVE_MIGRATION_RESULT "live_migration_result"
/* anyone */
#define NB_CONDUCTOR_PING "ping"

/* ---- API -> conductor (casts) ---- */

/* build_instances {"instance_uuids": [...], "admin_password"}: the
 * instances (uuids borrowed) are in the DB (building/scheduling) and their
 * action "create" is started; the conductor schedules and builds each. */
int nb_conductor_build_instances(struct nb_ctx *ctx, json_t *instance_uuids,
                                 const char *admin_password);

/* start_instance / stop_instance / reboot_instance / pause_instance /
 * unpause_instance / suspend_instance / resume_instance {"uuid"} (reboot:
 * {"uuid", "reboot_type": "SOFT"|"HARD"}): op is "start", "stop",
 * "reboot", "pause", "unpause", "suspend" or "resume" (the method is
 * "<op>_instance"); reboot_type is sent when not NULL. The API has set the
 * task state (powering-on / powering-off / rebooting(_hard) / pausing /
 * unpausing / suspending / resuming) and started the action. -1 also for
 * an unknown op (logged: a programming error). */
int nb_conductor_power_action(struct nb_ctx *ctx, const char *uuid, const char *op,
                              const char *reboot_type, struct nb_bus_undo undo);

/* delete_instance {"uuid"}: the API has set task_state deleting. */
int nb_conductor_delete_instance(struct nb_ctx *ctx, const char *uuid);

/* attach_volume {"uuid", "bdm_uuid", "volume_id"}: the API inserted the
 * mapping row (device_name chosen, connection_info NULL), reserved the
 * volume and started action "attach_volume".
 * detach_volume {"uuid", "bdm_uuid", "volume_id"}: the API moved the
 * volume to detaching and started action "detach_volume". */
int nb_conductor_attach_volume(struct nb_ctx *ctx, const char *uuid, const char *bdm_uuid,
                               const char *volume_id, struct nb_bus_undo undo);
int nb_conductor_detach_volume(struct nb_ctx *ctx, const char *uuid, const char *bdm_uuid,
                               const char *volume_id, struct nb_bus_undo undo);

/* snapshot_instance {"uuid", "image_id"}: image-backed createImage; the API
 * created the image record (queued), set task_state image_snapshot and
 * started action "createImage"; the conductor moves it to
 * image_pending_upload. */
int nb_conductor_snapshot_instance(struct nb_ctx *ctx, const char *uuid, const char *image_id,
                                   struct nb_bus_undo undo);

/* ---- API -> conductor: moves (see COMPAT-NOTES, "Moving servers") ----
 * The API has checked the request and the instance's state, set the task
 * state (migrating, resize_prep, resize_reverting, rebuilding), started the
 * instance action (live-migration, migrate, resize, confirmResize,
 * revertResize, rebuild, evacuate) and, for every move, created the
 * migration record (migration_uuid: live "accepted", cold and resize
 * "pre-migrating", evacuation "accepted") in one transaction. host: the
 * destination the request named (NULL: the scheduler picks). */

struct nb_live_migrate_req {
    const char *uuid, *migration_uuid;
    const char *host;            /* NULL: scheduled */
    const char *block_migration; /* "true", "false" or "auto" */
    bool force;                  /* host forced, no scheduler (before 2.68) */
};
/* live_migrate_instance {"uuid", "migration_uuid", "host", "block_migration",
 * "force"} (cast). */
int nb_conductor_live_migrate_instance(struct nb_ctx *ctx, const struct nb_live_migrate_req *r,
                                       struct nb_bus_undo undo);

struct nb_migrate_server_req {
    const char *uuid, *migration_uuid;
    const char *host;     /* NULL: scheduled */
    const json_t *flavor; /* resize: the new flavor row (borrowed); NULL: cold migration */
    bool allow_same_host; /* [DEFAULT] allow_resize_to_same_host, read by the API */
};
/* migrate_server {"uuid", "migration_uuid", "host", "flavor", "allow_same_host"}
 * (cast): a cold migration or a resize. */
int nb_conductor_migrate_server(struct nb_ctx *ctx, const struct nb_migrate_server_req *r,
                                struct nb_bus_undo undo);

/* confirm_resize / revert_resize {"uuid", "migration_uuid"} (cast): the
 * migration is "finished" and the instance "resized". */
int nb_conductor_confirm_resize(struct nb_ctx *ctx, const char *uuid, const char *migration_uuid,
                                struct nb_bus_undo undo);
int nb_conductor_revert_resize(struct nb_ctx *ctx, const char *uuid, const char *migration_uuid,
                               struct nb_bus_undo undo);

struct nb_rebuild_req {
    const char *uuid;
    const char *image_ref;      /* the image to rebuild from (rebuild: maybe a new one) */
    const char *admin_password; /* NULL: none */
    bool preserve_ephemeral;
    /* evacuate only (migration_uuid NULL: a rebuild on the instance's host) */
    const char *migration_uuid;
    const char *host;          /* NULL: scheduled */
    bool on_shared_storage;    /* before 2.14 the caller says; else the conductor finds out */
    bool force;                /* host forced, no scheduler filters (before 2.29 with a host,
                                  force true 2.29-2.67) */
    bool shared_storage_given; /* on_shared_storage is the caller's word (before 2.14) */
};
/* rebuild_instance {"uuid", "image_ref", "admin_password",
 * "preserve_ephemeral", "migration_uuid", "host", "on_shared_storage"
 * (null unless shared_storage_given), "force"} (cast): rebuild, and
 * evacuate. */
int nb_conductor_rebuild_instance(struct nb_ctx *ctx, const struct nb_rebuild_req *r,
                                  struct nb_bus_undo undo);

/* live_migration_abort / live_migration_force_complete {"uuid",
 * "migration_uuid"} (cast): the API found the migration in progress (the
 * statuses Nova allows at the request's microversion). */
int nb_conductor_live_migration_abort(struct nb_ctx *ctx, const char *uuid,
                                      const char *migration_uuid);
int nb_conductor_live_migration_force_complete(struct nb_ctx *ctx, const char *uuid,
                                               const char *migration_uuid);

/* check_live_migration (call) {"uuid", "host", "block_migration", "force"}:
 * every precheck of a live migration of uuid against host (NULL: every
 * candidate host) and, unless forced, the scheduler's filters (a dry run:
 * nothing claimed), nothing moved (nubo doctor migration). Reply {"instance",
 * "source", "hosts": [{"host", "ok", "checks": [{"check", "ok", "warning",
 * "evidence", "message"}…]}…]} | {"error"}; NULL on timeout. */
json_t *nb_conductor_check_live_migration(struct nb_ctx *ctx, const char *uuid, const char *host,
                                          const char *block_migration, bool force, int timeout_ms);

/* ---- agent -> conductor: outcomes (casts) ---- */

/* build_result {"uuid", "host", "ok", "message"} (message on failure:
 * the driver's, the fault's; NULL is sent as null). */
int nb_conductor_build_result(struct nb_ctx *ctx, const char *uuid, const char *host, bool ok,
                              const char *message);
/* build_result with "interrupted": true: the build host's agent died
 * during the spawn and found it again at its start, with no guest left;
 * the conductor schedules the build again without counting an attempt. */
int nb_conductor_build_interrupted(struct nb_ctx *ctx, const char *uuid, const char *host,
                                   const char *message);

/* What an agent reports after a power op or terminate. */
struct nb_op_result {
    const char *uuid, *host;
    const char *op; /* "start", "stop", "reboot", "terminate", "pause", … */
    bool ok;
    const char *message; /* on failure (NULL: sent as null) */
    int power_state;     /* the guest's after the op */
    bool unsupported;    /* the driver lacks the op (Nova's NotImplementedError) */
};
/* op_result {"uuid", "host", "op", "ok", "message", "power_state",
 * "unsupported"}. */
int nb_conductor_op_result(struct nb_ctx *ctx, const struct nb_op_result *r);

/* attach_result / detach_result {"uuid", "host", "bdm_uuid", "volume_id",
 * "ok", "message"} (bdm_uuid, volume_id and message null when NULL). */
int nb_conductor_attach_result(struct nb_ctx *ctx, const char *uuid, const char *host,
                               const char *bdm_uuid, const char *volume_id, bool ok,
                               const char *message);
int nb_conductor_detach_result(struct nb_ctx *ctx, const char *uuid, const char *host,
                               const char *bdm_uuid, const char *volume_id, bool ok,
                               const char *message);

/* snapshot_result {"uuid", "host", "image_id", "ok", "message"}. */
int nb_conductor_snapshot_result(struct nb_ctx *ctx, const char *uuid, const char *host,
                                 const char *image_id, bool ok, const char *message);

/* power_sync {"uuid", "host", "power_state", "found"}: what the host's
 * hypervisor says about a guest whose instance has no task; the conductor
 * re-checks the database and acts as Nova's _sync_instance_power_state. */
int nb_conductor_power_sync(struct nb_ctx *ctx, const char *uuid, const char *host, int power_state,
                            bool found);

/* ---- agent -> conductor: a live migration run by its source host (casts) ---- */

/* What the source host's agent reports while it runs a live migration. */
struct nb_live_migration_status {
    const char *uuid, *migration_uuid, *host;
    const char *status; /* "queued", "preparing", "running", "running (post-copy)"; NULL:
                           progress only */
    bool has_progress;  /* the six byte counts below are set */
    bool as_cast;       /* a cast even with a status: one the conductor missed, sent again */
    long long memory_total, memory_processed, memory_remaining;
    long long disk_total, disk_processed, disk_remaining;
};
/* live_migration_status {"uuid", "migration_uuid", "host", "status",
 * "progress": {"memory_total", "memory_processed", "memory_remaining",
 * "disk_total", "disk_processed", "disk_remaining"} | null}: the
 * conductor writes the status (with the events of the phase it starts) and
 * the progress to the migration record. A change of status is a call (so
 * that the phases reach the conductor in order, before the result), a
 * progress report a cast (as_cast: a status sent again with a progress
 * report after its call went unanswered, e.g. while the conductor
 * restarted; statuses only move forward, so its late arrival is harmless).
 * 0, or -1 when no conductor took it. */
int nb_conductor_live_migration_status(struct nb_ctx *ctx,
                                       const struct nb_live_migration_status *s);

/* How the source host's part of a live migration ended. */
struct nb_live_migration_outcome {
    const char *uuid, *migration_uuid, *host;
    bool ok;             /* the guest runs on the destination */
    bool cancelled;      /* stopped by an abort request; the guest stays on the source */
    const char *phase;   /* on failure: "queued", "pre_live_migration" or "live_migration" */
    const char *message; /* on failure: the cause; on success: what made the migration
                            converge (post-copy, pause), else NULL (sent as null) */
    bool shared_storage; /* as the migration ran: what the cleanup may remove */
};
/* live_migration_result {"uuid", "migration_uuid", "host", "ok",
 * "cancelled", "phase", "message", "shared_storage"}: the conductor finishes the migration
 * (post_live_migration_at_destination, post_live_migration_at_source, the
 * instance on the destination, the migration's allocation removed) or
 * rolls it back (rollback_live_migration_at_destination, the destination
 * claim removed and the source allocation handed back, the instance ACTIVE
 * on the source, the migration "error" or "cancelled"). Sent until it
 * arrives (nb_bus_cast_until_sent: the conductor or the broker may be
 * restarting); blocks meanwhile. */
int nb_conductor_live_migration_result(struct nb_ctx *ctx,
                                       const struct nb_live_migration_outcome *o);

/* ---- agent -> conductor: rebuild and evacuate ---- */

/* What an agent reports after rebuild_instance (compute_api.h). */
struct nb_rebuild_result {
    const char *uuid, *host;
    const char *migration_uuid; /* the evacuation's (NULL: a rebuild) */
    bool ok;
    const char *message;    /* on failure (NULL: sent as null) */
    int power_state;        /* the guest's afterwards */
    bool on_shared_storage; /* an evacuation kept the source's disk */
};
/* rebuild_result {"uuid", "host", "migration_uuid", "ok", "message",
 * "power_state", "on_shared_storage"} (cast). */
int nb_conductor_rebuild_result(struct nb_ctx *ctx, const struct nb_rebuild_result *r);

/* evacuated_instances (call) {"host"} -> [{"uuid", "migration_uuid",
 * "deleted", "destroy_disks"}…]: the instances evacuated from host whose
 * evacuation (status accepted, pre-migrating or done) the source has not
 * cleaned up yet (Nova's _destroy_evacuated_instances at start-up);
 * destroy_disks false when the destination runs the same disk from shared
 * storage or the server is volume-backed. NULL on timeout or when the
 * reply is not an array. */
json_t *nb_conductor_evacuated_instances(struct nb_ctx *ctx, const char *host, int timeout_ms);

/* evacuation_cleaned (cast) {"uuid", "migration_uuid", "host"}: the
 * source host removed its guest of the evacuated instance; the conductor
 * drops the source allocation (held by the migration) and sets the
 * migration completed. */
int nb_conductor_evacuation_cleaned(struct nb_ctx *ctx, const char *uuid,
                                    const char *migration_uuid, const char *host);

/* ---- agent -> conductor: the disk-format check (call) ---- */

/* A volume whose file's real format differs from its mapping's
 * connection_info.data.format, found before a domain start (spawn, start,
 * hard reboot, resume, attach) with [compute] reconcile_disk_format true. */
struct nb_disk_reconcile {
    const char *uuid, *bdm_uuid, *volume_id; /* bdm_uuid, volume_id: NULL sent as null */
    const char *path, *old_format, *new_format, *host;
};
/* reconcile_disk_format {"uuid", "bdm_uuid", "volume_id", "path",
 * "old_format", "new_format", "host"} -> {"ok": true, "connection_info":
 * "<new JSON text>"} | {"ok": false, "message"}: the conductor corrects the
 * mapping and the volume's record in one transaction, logs the WARNING and
 * records event "reconcile_disk_format" on the current action. */
json_t *nb_conductor_reconcile_disk_format(struct nb_ctx *ctx, const struct nb_disk_reconcile *r,
                                           int timeout_ms);

/* ---- agent -> conductor: the host's records ---- */

/* service_update (call) {"host", "binary", "topic"} -> {"id", "uuid",
 * "disabled"} | {"error"}: registers (or refreshes) the service row. */
json_t *nb_conductor_service_update(struct nb_ctx *ctx, const char *host, const char *binary,
                                    const char *topic, int timeout_ms);

/* compute_node_update {compute node columns…} (node stolen): as a call
 * -> {"uuid", "id"} | {"error"} (registration), as a cast the periodic
 * usage report. */
json_t *nb_conductor_compute_node_update(struct nb_ctx *ctx, json_t *node, int timeout_ms);
int nb_conductor_compute_node_report(struct nb_ctx *ctx, json_t *node);

/* service_heartbeat (cast) {"binary", "hosts": [host…]} (hosts borrowed):
 * one heartbeat for each host's service. */
int nb_conductor_service_heartbeat(struct nb_ctx *ctx, const char *binary, json_t *hosts);

/* instances_on_host (call) {"host"} -> [{"uuid", "vm_state", "task_state",
 * "power_state", "flavor"}…]: the host's instances as the database has
 * them; NULL also when the reply is not an array (then nothing is
 * recorded on ctx). */
json_t *nb_conductor_instances_on_host(struct nb_ctx *ctx, const char *host, int timeout_ms);

#endif

/* compute_api.h - the client of topic "compute.<host>", the compute agent of
 * one host (Nova's compute/rpcapi.py): one function per message, each
 * packing its arguments in one place. The agent's dispatcher
 * (agent/manager.c) serves the same method names. All messages carry the
 * caller's context.
 *
 * Casts come from the conductor, which has already claimed the task state
 * and started the event; the agent answers each with a cast back to the
 * conductor (conductor_api.h: build_result, op_result, attach_result,
 * detach_result, snapshot_result). "instance" is the agent view of the
 * instance (nb_instance_agent_view) and is stolen. Casts return 0, or -1
 * when no agent listens on the host's topic (nothing recorded on ctx).
 * Calls return the reply (new ref), or NULL on timeout / no agent (error
 * on ctx).
 *
 * Before a domain starts (spawn, start, hard reboot, resume, attach) the
 * agent checks the formats of the volume files and may call the
 * conductor's reconcile_disk_format. */
#ifndef NB_RPC_COMPUTE_API_H
#define NB_RPC_COMPUTE_API_H

#include "common/ctx.h"
#include <jansson.h>
#include <stdbool.h>

/* The topic of host's agent: "compute.<host>". */
#define NB_COMPUTE_TOPIC_PREFIX "compute."

#define NB_COMPUTE_BUILD_AND_RUN_INSTANCE "build_and_run_instance"
#define NB_COMPUTE_EXTERNAL_INSTANCE_EVENT "external_instance_event"
#define NB_COMPUTE_START_INSTANCE "start_instance"
#define NB_COMPUTE_STOP_INSTANCE "stop_instance"
#define NB_COMPUTE_REBOOT_INSTANCE "reboot_instance"
#define NB_COMPUTE_PAUSE_INSTANCE "pause_instance"
#define NB_COMPUTE_UNPAUSE_INSTANCE "unpause_instance"
#define NB_COMPUTE_SUSPEND_INSTANCE "suspend_instance"
#define NB_COMPUTE_RESUME_INSTANCE "resume_instance"
#define NB_COMPUTE_TERMINATE_INSTANCE "terminate_instance"
#define NB_COMPUTE_ATTACH_VOLUME "attach_volume"
#define NB_COMPUTE_DETACH_VOLUME "detach_volume"
#define NB_COMPUTE_SNAPSHOT_INSTANCE "snapshot_instance"
#define NB_COMPUTE_DESTROY_GUEST "destroy_guest"
#define NB_COMPUTE_GET_CONSOLE_OUTPUT "get_console_output"
#define NB_COMPUTE_GET_DIAGNOSTICS "get_diagnostics"
#define NB_COMPUTE_GUEST_INFO "guest_info"
#define NB_COMPUTE_GET_HOST_UPTIME "get_host_uptime"
#define NB_COMPUTE_PING "ping"
#define NB_COMPUTE_REBUILD_INSTANCE "rebuild_instance"
#define NB_COMPUTE_CHECK_CAN_LIVE_MIGRATE_DESTINATION "check_can_live_migrate_destination"
#define NB_COMPUTE_CHECK_CAN_LIVE_MIGRATE_SOURCE "check_can_live_migrate_source"
#define NB_COMPUTE_PRE_LIVE_MIGRATION "pre_live_migration"
#define NB_COMPUTE_LIVE_MIGRATION "live_migration"
#define NB_COMPUTE_LIVE_MIGRATION_ABORT "live_migration_abort"
#define NB_COMPUTE_LIVE_MIGRATION_FORCE_COMPLETE "live_migration_force_complete"
#define NB_COMPUTE_LIVE_MIGRATION_RUNNING "live_migration_running"
#define NB_COMPUTE_POST_LIVE_MIGRATION_AT_DESTINATION "post_live_migration_at_destination"
#define NB_COMPUTE_POST_LIVE_MIGRATION_AT_SOURCE "post_live_migration_at_source"
#define NB_COMPUTE_ROLLBACK_LIVE_MIGRATION_AT_DESTINATION "rollback_live_migration_at_destination"
#define NB_COMPUTE_PREP_RESIZE "prep_resize"
#define NB_COMPUTE_RESIZE_INSTANCE "resize_instance"
#define NB_COMPUTE_FINISH_RESIZE "finish_resize"
#define NB_COMPUTE_CONFIRM_RESIZE "confirm_resize"
#define NB_COMPUTE_REVERT_RESIZE "revert_resize"
#define NB_COMPUTE_FINISH_REVERT_RESIZE "finish_revert_resize"

/* build_and_run_instance (cast) {"instance", "node"}: spawn on node (the
 * scheduler's claim); the agent answers build_result. */
int nb_compute_build_and_run_instance(struct nb_ctx *ctx, const char *host, json_t *instance,
                                      const char *node);

/* start_instance / stop_instance / reboot_instance / pause_instance /
 * unpause_instance / suspend_instance / resume_instance (cast)
 * {"instance", "reboot_type": "HARD"|"SOFT"}: op is "start", "stop",
 * "reboot", "pause", "unpause", "suspend" or "resume" (the method is
 * "<op>_instance"); hard matters for reboot only. The agent answers
 * op_result ("unsupported" when the driver lacks the op). -1 also for an
 * unknown op (logged: a programming error). */
int nb_compute_power_action(struct nb_ctx *ctx, const char *host, const char *op, json_t *instance,
                            bool hard);

/* terminate_instance (cast) {"instance"}: destroy the guest; the agent
 * answers op_result with op "terminate". */
int nb_compute_terminate_instance(struct nb_ctx *ctx, const char *host, json_t *instance);

/* attach_volume / detach_volume (cast) {"instance", "bdm"}: hot-plug or
 * unplug the mapping's volume (bdm borrowed: the mapping row with its
 * connection_info); the agent answers attach_result / detach_result (a
 * driver without the op: a 501 message). */
int nb_compute_attach_volume(struct nb_ctx *ctx, const char *host, json_t *instance, json_t *bdm);
int nb_compute_detach_volume(struct nb_ctx *ctx, const char *host, json_t *instance, json_t *bdm);

/* snapshot_instance (cast) {"instance", "image_id"}: a qcow2 copy of the
 * root disk uploaded as image_id's data; the agent answers
 * snapshot_result. */
int nb_compute_snapshot_instance(struct nb_ctx *ctx, const char *host, json_t *instance,
                                 const char *image_id);

/* external_instance_event (cast) {"events": [{"name", "server_uuid",
 * "status", "tag"?}]}: what another service told the API about the
 * host's servers (os-server-external-events); the agent logs each and
 * wakes what waits for it (network-vif-plugged: the libvirt driver's wait).
 * events is stolen. */
int nb_compute_external_instance_event(struct nb_ctx *ctx, const char *host, json_t *events);

/* destroy_guest (cast) {"uuid"}: cleanup after a lost race or an
 * interrupted build, or of a server deleted while its host was down; no
 * answer (an absent guest is not an error). When it cannot be sent now
 * (the broker down, the host's queue gone with it) it is sent again from
 * a thread until it arrives (nb_bus_cast_later, 600 s), else the guest
 * could stay behind with no server. 0 when sent or queued. */
int nb_compute_destroy_guest(struct nb_ctx *ctx, const char *host, const char *uuid);

/* get_console_output (call, API -> agent, no conductor: Nova's API asks
 * the host) {"uuid", "length": n|null}: the last length newline-separated
 * pieces of the guest's console log (length < 0: all of it, sent as
 * null). Reply {"output": "…"} or {"error": "…", "code": 404|501}; the
 * API answers 409 when the instance has no host and 404/501 as the agent
 * says. */
json_t *nb_compute_get_console_output(struct nb_ctx *ctx, const char *host, const char *uuid,
                                      long long length, int timeout_ms);

/* get_diagnostics (call, API -> agent, as Nova's get_diagnostics and
 * get_instance_diagnostics) {"uuid", "standard": bool}: the driver's
 * figures of a running guest. Reply {"diagnostics": {…}} or {"error",
 * "code": 404|409|501, "state": power state name (with 409)}. */
json_t *nb_compute_get_diagnostics(struct nb_ctx *ctx, const char *host, const char *uuid,
                                   bool standard, int timeout_ms);

/* guest_info (call) {"uuid"} -> {"found", "power_state"}: 0 with *found
 * and *power_state (NB_POWER_NOSTATE when not found) set, or -1 when the
 * agent did not answer (error on ctx). */
int nb_compute_guest_info(struct nb_ctx *ctx, const char *host, const char *uuid, int timeout_ms,
                          bool *found, int *power_state);

/* get_host_uptime (call) {} -> " 18:00:00 up 2 days, …  load average: …"
 * (a JSON string; null when the host's /proc cannot be read). */
json_t *nb_compute_get_host_uptime(struct nb_ctx *ctx, const char *host, int timeout_ms);

/* ping (call) {} -> {"ok": true, "host"}: whether host's agent answers
 * within timeout_ms (a failure is left on ctx). */
bool nb_compute_ping(struct nb_ctx *ctx, const char *host, int timeout_ms);

/* ---- live migration (Nova's compute rpcapi of the same names) ----
 * Calls answer {"ok": true, …} or {"ok": false, "message"}; a driver
 * without the live-migration ops answers ok false naming the driver. */

/* check_can_live_migrate_destination (call, to the destination)
 * {"instance", "source", "timeout_ms"}: the destination reads its own
 * migration_info, creates the shared-storage probe, asks the source
 * (check_can_live_migrate_source), compares the source's guest CPU with
 * its own, removes the probe. Reply {"ok", "dest": migration_info,
 * "source": migration_info, "cpu": {"ok", "message"}, "shared_storage":
 * bool, "probe": {"ok", "message"}, "transport": {"ok", "message"},
 * "disks": [migration_disks of the source]} (ok false with message when a
 * step could not run at all). timeout_ms bounds the transport check. */
json_t *nb_compute_check_can_live_migrate_destination(struct nb_ctx *ctx, const char *dest,
                                                      json_t *instance, const char *source,
                                                      int check_timeout_ms, int timeout_ms);
/* check_can_live_migrate_source (call, to the source) {"instance",
 * "probe", "dest_uri", "timeout_ms"} -> {"ok", "source": migration_info,
 * "probe_exists", "transport": {"ok", "message"}, "disks"}. */
json_t *nb_compute_check_can_live_migrate_source(struct nb_ctx *ctx, const char *source,
                                                 json_t *instance, const char *probe,
                                                 const char *dest_uri, int check_timeout_ms,
                                                 int timeout_ms);
/* pre_live_migration (call, to the destination) {"instance", "disks",
 * "shared_storage", "block_migration"} -> {"ok", "dest_disks"}. disks
 * borrowed. */
json_t *nb_compute_pre_live_migration(struct nb_ctx *ctx, const char *dest, json_t *instance,
                                      const json_t *disks, bool shared_storage,
                                      bool block_migration, int timeout_ms);

/* What the source needs to run a live migration. */
struct nb_live_migration_req {
    const char *migration_uuid;
    const char *dest_host, *dest_uri, *dest_addr;
    bool block_migration, shared_storage;
    const json_t *disks; /* the source's migration_disks (borrowed; NULL: none) */
};
/* live_migration (cast, to the source) {"instance", "migration_uuid",
 * "dest_host", "dest_uri", "dest_addr", "block_migration",
 * "shared_storage", "disks"}: the source waits for a slot ([DEFAULT]
 * max_concurrent_live_migrations; status "queued" meanwhile), has the
 * destination prepare (pre_live_migration, status "preparing"), moves the
 * guest (status "running", progress) and answers live_migration_result. */
int nb_compute_live_migration(struct nb_ctx *ctx, const char *source, json_t *instance,
                              const struct nb_live_migration_req *r);
/* live_migration_abort / live_migration_force_complete (cast, to the
 * source) {"migration_uuid"}: flags the running (or queued) migration; a
 * migration the host does not run is logged and ignored. */
int nb_compute_live_migration_abort(struct nb_ctx *ctx, const char *source,
                                    const char *migration_uuid);
int nb_compute_live_migration_force_complete(struct nb_ctx *ctx, const char *source,
                                             const char *migration_uuid);
/* live_migration_running (call, to the source) {"migration_uuid"} ->
 * {"running": bool, "phase"}: whether the host's agent still runs the
 * migration as its source, and in which phase ("queued", "preparing",
 * "running", "reporting": its result is being sent to the conductor).
 * What recovery asks before it ends a migration a conductor restart
 * interrupted. 1 running (phase copied into phase, n bytes), 0 not, -1 no
 * answer within timeout_ms (error on ctx). */
int nb_compute_live_migration_running(struct nb_ctx *ctx, const char *source,
                                      const char *migration_uuid, int timeout_ms, char *phase,
                                      size_t n);
/* post_live_migration_at_destination (call) {"instance"}; and
 * post_live_migration_at_source / rollback_live_migration_at_destination
 * (call) {"instance", "shared_storage"} -> {"ok"} | {"ok": false,
 * "message"}. */
json_t *nb_compute_post_live_migration_at_destination(struct nb_ctx *ctx, const char *dest,
                                                      json_t *instance, int timeout_ms);
json_t *nb_compute_post_live_migration_at_source(struct nb_ctx *ctx, const char *source,
                                                 json_t *instance, bool shared_storage,
                                                 int timeout_ms);
json_t *nb_compute_rollback_live_migration_at_destination(struct nb_ctx *ctx, const char *dest,
                                                          json_t *instance, bool shared_storage,
                                                          int timeout_ms);

/* ---- cold migration and resize (calls, conductor -> agent) ----
 * The conductor (conductor/resize.c) drives Nova's steps one host at a
 * time and writes every state itself; each step is a call answered
 * {"ok": true, …} or {"ok": false, "message", "guest_lost"} ("guest_lost":
 * the guest could not be brought back on that host). "instance" is the
 * agent view as the step needs it: prep_resize and resize_instance get it
 * as it is on the source, finish_resize with the new flavor on the
 * destination, finish_revert_resize with the old flavor on the source. */
struct nb_resize_step {
    const char *host;           /* whose agent runs the step */
    json_t *instance;           /* stolen */
    const char *migration_uuid; /* logged */
    bool same_host;             /* source and destination are one host */
    const json_t *flavor;       /* prep_resize, resize_instance: the new flavor (borrowed) */
    const char *dest_host;      /* resize_instance: where the disks go */
    const json_t *dest;         /* resize_instance: prep_resize's "dest" (borrowed) */
    bool power_on;              /* finish_resize, finish_revert_resize: start the guest */
};

/* prep_resize {"instance", "migration_uuid", "same_host", "flavor"} on the
 * destination: room made for the instance (its directory, its image in the
 * cache) -> {"ok", "dest": {what the source needs to send the disks}}.
 * resize_instance {"instance", "migration_uuid", "same_host", "flavor",
 * "dest_host", "dest"} on the source: the guest powered off and its local disks sent to
 * the destination -> {"ok"}.
 * finish_resize {"instance", "migration_uuid", "same_host", "power_on"} on
 * the destination: the guest defined with the new flavor (and started) ->
 * {"ok", "power_state"}.
 * confirm_resize {"instance", "migration_uuid", "same_host"} on the source:
 * the old guest and its files removed -> {"ok"}.
 * revert_resize {"instance", "migration_uuid", "same_host"} on the
 * destination: the new guest and its files removed -> {"ok"}.
 * finish_revert_resize {"instance", "migration_uuid", "same_host",
 * "power_on"} on the source: the old guest back with the old flavor (and
 * started) -> {"ok", "power_state"}.
 * NULL on timeout or when the agent does not answer (error on ctx). */
json_t *nb_compute_prep_resize(struct nb_ctx *ctx, const struct nb_resize_step *s, int timeout_ms);
json_t *nb_compute_resize_instance(struct nb_ctx *ctx, const struct nb_resize_step *s,
                                   int timeout_ms);
json_t *nb_compute_finish_resize(struct nb_ctx *ctx, const struct nb_resize_step *s,
                                 int timeout_ms);
json_t *nb_compute_confirm_resize(struct nb_ctx *ctx, const struct nb_resize_step *s,
                                  int timeout_ms);
json_t *nb_compute_revert_resize(struct nb_ctx *ctx, const struct nb_resize_step *s,
                                 int timeout_ms);
json_t *nb_compute_finish_revert_resize(struct nb_ctx *ctx, const struct nb_resize_step *s,
                                        int timeout_ms);

/* rebuild_instance (cast) {"instance", "migration_uuid", "on_shared_storage",
 * "preserve_ephemeral"}: the guest made anew from instance["image_ref"]
 * keeping its identity (Nova's rebuild_instance); with migration_uuid an
 * evacuation onto this host, keeping the disk when the instance is found
 * on this host's storage (on_shared_storage null: the driver decides, as
 * Nova's instance_on_disk; true/false: the caller's word before 2.14,
 * checked against it). instance also carries "vm_state": a stopped server's
 * guest is stopped again afterwards. The agent answers rebuild_result. */
struct nb_compute_rebuild {
    const char *migration_uuid; /* NULL: a rebuild on this host */
    int on_shared_storage;      /* -1 unknown, 0 no, 1 yes */
    bool preserve_ephemeral;
};
int nb_compute_rebuild_instance(struct nb_ctx *ctx, const char *host, json_t *instance,
                                const struct nb_compute_rebuild *r);

#endif

/* internal.h - what the conductor's files share: the role's state, the
 * instance helpers every workflow uses (helpers.h) and what each workflow
 * file provides to the others and to the dispatcher (manager.c).
 *
 * Concurrency rule: every state transition is one conditional UPDATE
 * ("… WHERE task_state = <expected> AND deleted = 0": nb_instance_transition,
 * compute/objects/instance.h) committed before the next step is announced. A workflow whose UPDATE
 * changes no row has lost a race (typically to a delete) and cleans up only what it created itself:
 * its allocation, its guest. */
#ifndef NB_CONDUCTOR_INTERNAL_H
#define NB_CONDUCTOR_INTERNAL_H

#include "common/ctx.h"
#include "common/env.h"
#include "compute/conductor/helpers.h"
#include <jansson.h>
#include <stdbool.h>

struct nb_request_spec;

#define LOG_COND "nubo.conductor.manager"

/* Nova's event names. */
#define EV_SCHEDULE "conductor_schedule_and_build_instances"
#define EV_BUILD "compute__do_build_and_run_instance"
#define EV_NETWORKING "compute_networking"
#define EV_BDM "compute_block_device_mapping"
#define EV_SPAWN "compute_spawn"
#define EV_START "compute_start_instance"
#define EV_STOP "compute_stop_instance"
#define EV_REBOOT "compute_reboot_instance"
#define EV_TERMINATE "compute_terminate_instance"
#define EV_PAUSE "compute_pause_instance"
#define EV_UNPAUSE "compute_unpause_instance"
#define EV_SUSPEND "compute_suspend_instance"
#define EV_RESUME "compute_resume_instance"
#define EV_ATTACH "compute_attach_volume"
#define EV_DETACH "compute_detach_volume"
#define EV_SNAPSHOT "compute_snapshot_instance"
#define EV_RECONCILE "reconcile_disk_format"
#define EV_REBUILD "compute_rebuild_instance"
#define EV_COND_REBUILD "rebuild_server" /* Nova's conductor EventReporter */

struct conductor {
    struct nb_env *env;
    struct nb_db *db;
    int max_attempts;               /* [scheduler] max_attempts */
    int call_timeout_ms;            /* bus calls to the scheduler and agents */
    long long last_id_at_start;     /* highest instances.id when the conductor
                                     * started: recovery leaves newer rows to the
                                     * workers handling their requests */
    long long last_bdm_id_at_start; /* block_device_mapping.id likewise */
    struct cond_leases *leases;     /* leases.c; NULL when off (SQLite) */
};

/* Which instances a recovery pass (recovery.c) handles, by instances.id
 * and by the control plane that last moved them (nubo_conductor, written
 * on MariaDB only: leases.c). */
struct cond_scope {
    long long max_id; /* instances.id at most this */
    const char *only; /* non-NULL: only those this (dead) control plane moved */
    json_t *skip;     /* {holder: true}: not those of these live control planes */
};

/* recovery.c: one pass over the work s selects that a killed nubo (or a
 * dead control plane) left half-done (the steps: recovery.c's header). */
void cond_recover(struct conductor *c, const struct cond_scope *s);
/* A context for recovering instance uuid's action: the request ID, user and
 * project of its latest instance action named action. */
void cond_ctx_for_action(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                         const char *action);
/* Whether s selects an instance row (its "nubo_conductor"), or the
 * instance uuid (read when s names control planes at all). */
bool cond_scope_row(const struct cond_scope *s, const json_t *row);
bool cond_scope_instance(struct conductor *c, const struct cond_scope *s, const char *uuid);

/* leases.c: the control planes sharing a MariaDB (docs/architecture.md,
 * "Several control planes"). Start: this conductor's liveness lease
 * conductor@<host>:<pid> taken (0/-1), its renewal thread started, and
 * this process's instance transitions recorded under it. Off (0, nothing
 * done) on SQLite, where there is only ever one control plane. */
int cond_leases_start(struct conductor *c);
/* Stops the renewal thread and gives the leases up (the liveness lease
 * left expired, so another control plane takes over what is unfinished). */
void cond_leases_stop(struct conductor *c);
/* At stop: the builds waiting to be scheduled again after a bus outage
 * (build.c) give up; the next start's recovery schedules them. */
void cond_builds_later_stop(void);
/* Whether this conductor runs the periodic work that must run once
 * (audit, resize auto-confirm): it holds conductor.periodic, or leases
 * are off. */
bool cond_runs_periodic(struct conductor *c);
/* The start-up pass's scope: dead control planes' leases taken over (their
 * work included), live ones' work skipped. Fills s (s->skip a new ref);
 * cond_leases_startup_done gives the taken leases up after the pass. */
void cond_leases_startup_scope(struct conductor *c, struct cond_scope *s);
void cond_leases_startup_done(struct conductor *c, struct cond_scope *s);
/* Before a message's handler runs: the instances it names (args "uuid",
 * "instance_uuid", "instance_uuids") recorded as this control plane's work
 * (a message whose handler dies with its process is not delivered again:
 * bus/amqp.c). Nothing when leases are off. */
void cond_leases_own(struct conductor *c, const json_t *args);

/* build.c */
void cond_build_instance(struct conductor *c, struct nb_ctx *ctx, const char *uuid);
void cond_build_result(struct conductor *c, struct nb_ctx *ctx, json_t *args);
/* The build attempt on host is over: back to scheduling without a host
 * (request spec rspec stored; NULL keeps the stored one) if the instance
 * is still in task on host. 1 moved, 0 lost the race, -1 error. */
int cond_build_unscheduled(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                           const char *task, const char *host, const json_t *rspec);
/* The guest is running on host: the build ends ACTIVE (task None, power
 * RUNNING, launched now) if the instance is still in task on host. The
 * transition's result: 1 moved, 0 lost the race, -1 error. */
int cond_build_spawned(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *task,
                       const char *host);

/* actions.c */
void cond_power_action(struct conductor *c, struct nb_ctx *ctx, const char *method, json_t *args);
void cond_delete_instance(struct conductor *c, struct nb_ctx *ctx, const char *uuid);
void cond_op_result(struct conductor *c, struct nb_ctx *ctx, json_t *args);
void cond_power_sync(struct conductor *c, struct nb_ctx *ctx, json_t *args);

/* hosts.c: the agents' records */
json_t *cond_service_update(struct conductor *c, struct nb_ctx *ctx, json_t *args);
json_t *cond_compute_node_update(struct conductor *c, struct nb_ctx *ctx, json_t *args);
void cond_service_heartbeat(struct conductor *c, struct nb_ctx *ctx, json_t *args);
json_t *cond_instances_on_host(struct conductor *c, struct nb_ctx *ctx, json_t *args);

/* volumes.c: block device mappings of volumes (Nova's _prep_block_device,
 * attach_volume, detach_volume, _cleanup_volumes) */
/* The build's block_device_mapping step on host: creates the volumes the
 * mappings ask for (image, snapshot, blank), attaches every volume mapping
 * (connection_info, attachment), names devices and sets root_device_name.
 * 0, or -1 with the reason in msg after undoing what it attached. */
int cond_prep_block_devices(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                            const char *host, char *msg, size_t n);
/* Detaches every volume of the instance's live mappings (reserved ones are
 * unreserved) and deletes those marked delete_on_termination. Failures are
 * logged, never returned: a delete must go on. */
void cond_cleanup_volumes(struct conductor *c, struct nb_ctx *ctx, const char *uuid);
void cond_attach_volume(struct conductor *c, struct nb_ctx *ctx, json_t *args);
/* Recovery (recovery.c): the volume mappings of instances s selects (at
 * most max_bdm_id, no task state) left without connection_info by an
 * attach acknowledged but interrupted before it began (the API killed
 * before its cast went out, or the conductor before its first step): the
 * attach fails as attach_failed does, so the volume, reserved or
 * attaching, is available again. One begun (connection_info written) is
 * left to the agent's result and logged. */
void cond_recover_attaches(struct conductor *c, const struct cond_scope *s, struct nb_ctx *ctx,
                           long long max_bdm_id);
void cond_attach_result(struct conductor *c, struct nb_ctx *ctx, json_t *args);
void cond_detach_volume(struct conductor *c, struct nb_ctx *ctx, json_t *args);
void cond_detach_result(struct conductor *c, struct nb_ctx *ctx, json_t *args);
/* reconcile_disk_format (call): see conductor_api.h. Reply, new ref. */
json_t *cond_reconcile_disk_format(struct conductor *c, struct nb_ctx *ctx, json_t *args);

/* volume_moves.c: the volumes follow a server between hosts */
/* Every volume mapping of the instance pointed at an attachment record for
 * host (kept when there is one, else created with host's connector) with
 * fresh connection_info; the old records stay. 0, or -1 with the reason
 * on ctx. Idempotent. */
int cond_volumes_attach_to(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                           const char *host);
/* Every live attachment record of the instance's volumes other than the
 * one its mapping holds is deleted (the host the server left). 0/-1. */
int cond_volumes_release_others(struct conductor *c, struct nb_ctx *ctx, const char *uuid);
/* Both: the volumes moved to host. 0/-1. */
int cond_volumes_move(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *host);

/* networking.c: ports of the Networking service (Nova's allocate_for_instance,
 * deallocate_for_instance and instance_info_caches) */
/* The build's networking step on host: releases what an earlier attempt
 * left, then allocates the ports the request spec's requested_networks ask
 * for (on behalf of the instance's project; device_owner "compute:<az>").
 * 0 with *network_info (new ref, Nova's network_info model), or -1 with
 * Nova's BuildAbortException reason in why and the service's message in
 * details (both n bytes); ports made before the failure are gone again. */
int cond_allocate_networks(struct conductor *c, struct nb_ctx *ctx, const json_t *row,
                           const char *host, const char *az, const struct nb_request_spec *rspec,
                           json_t **network_info, char *why, char *details, size_t n);
/* Writes (inserts or replaces) the instance's instance_info_caches row, in
 * the caller's transaction if any. 0/-1 (error in ctx). */
int cond_info_cache_write(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                          const json_t *network_info);
/* Releases the instance's ports (deleted; those the user passed unbound and
 * kept) and empties its cache. Idempotent; failures are logged, never
 * returned: a delete or a failed build must go on. */
void cond_deallocate_networks(struct conductor *c, struct nb_ctx *ctx, const char *uuid);
/* Start-up recovery: releases the ports still bound to instances that are
 * deleted or failed without a host. */
void cond_release_leaked_ports(struct conductor *c, const struct cond_scope *s, struct nb_ctx *ctx);

/* snapshot.c: createImage of an image-backed server */
void cond_snapshot_instance(struct conductor *c, struct nb_ctx *ctx, json_t *args);
void cond_snapshot_result(struct conductor *c, struct nb_ctx *ctx, json_t *args);

/* resize.c: cold migration and resize (migrate_server), confirm_resize,
 * revert_resize */
void cond_migrate_server(struct conductor *c, struct nb_ctx *ctx, json_t *args);
void cond_confirm_resize(struct conductor *c, struct nb_ctx *ctx, json_t *args);
void cond_revert_resize(struct conductor *c, struct nb_ctx *ctx, json_t *args);
/* Before a delete terminates the guest on the instance's host: each open
 * cold migration or resize of the instance (row) wound up as Nova's
 * _confirm_resize_on_deleting does: the guest's files on the move's other
 * host removed, the migration's allocation deleted, its status confirmed
 * (finished) or error (in flight). Best-effort, logged. */
void cond_resize_on_delete(struct conductor *c, struct nb_ctx *ctx, const json_t *row);
/* Start-up recovery of a cold migration or resize the restart interrupted
 * (migration mig in pre-migrating, migrating, post-migrating, confirming
 * or reverting; ctx carries the request ID of its action): before the
 * switch it is rolled back to the source (the guest put back as it was),
 * after it finished when guest_on_dest (the destination's agent says the
 * guest runs there), else rolled back; confirm and revert are run again. */
void cond_resize_recover(struct conductor *c, struct nb_ctx *ctx, const json_t *mig,
                         bool guest_on_dest);
/* Starts the thread of [DEFAULT] resize_confirm_window (nothing when 0,
 * the default): resizes finished that many seconds ago are confirmed. */
void cond_resize_confirm_start(struct conductor *c);

/* rebuild.c: rebuild and evacuate (the flow: rebuild.c's header) */
void cond_rebuild_instance(struct conductor *c, struct nb_ctx *ctx, json_t *args);
void cond_rebuild_result(struct conductor *c, struct nb_ctx *ctx, json_t *args);
/* Event compute_rebuild_instance on host, the task states to
 * rebuild_spawning and the cast to host's agent (migration_uuid: an
 * evacuation's; on_shared_storage -1, 0, 1 as nb_compute_rebuild). 0, or
 * -1 after ending the rebuild (cond_rebuild_failed). */
int cond_rebuild_on_host(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                         const char *host, const char *migration_uuid, int on_shared_storage,
                         bool preserve_ephemeral);
/* Ends a failed rebuild or evacuation: ERROR with a fault (message,
 * details), event (if not NULL) and action in Error; an evacuation's
 * claims rolled back with its migration in migration_status. */
void cond_rebuild_failed(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                         const char *migration_uuid, const char *host, const char *event,
                         const char *migration_status, const char *message, const char *details);

/* Start-up recovery: rebuilds and evacuations a restart interrupted end
 * in ERROR with a fault (an evacuation's claims rolled back, its migration
 * failed), as Nova's _init_instance does with rebuild task states. */
void cond_recover_rebuilds(struct conductor *c, const struct cond_scope *s, struct nb_ctx *ctx);

/* evacuate.c: the destination, the claims, the volumes, the source's
 * clean-up */
/* Schedules and claims the destination of row's evacuation (args: the
 * rebuild_instance message), re-attaches the volumes and rebuilds there. */
void cond_evacuate(struct conductor *c, struct nb_ctx *ctx, const json_t *row, const json_t *args);
/* The destination claim dropped and the source allocation handed back to
 * the instance; the migration set to status. Best-effort. */
void cond_evacuate_rollback(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                            const char *migration_uuid, const char *status);
/* The migration's dest_node (malloc'd) or NULL. */
char *cond_evacuation_dest_node(struct conductor *c, struct nb_ctx *ctx,
                                const char *migration_uuid);
/* The evacuation to host went well: the ports bound to host, the
 * migration done, its storage recorded for the source's clean-up.
 * Best-effort. */
void cond_evacuate_done(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *host,
                        const char *migration_uuid, bool on_shared_storage);
/* evacuated_instances (call) and evacuation_cleaned (cast): see
 * conductor_api.h. */
json_t *cond_evacuated_instances(struct conductor *c, struct nb_ctx *ctx, json_t *args);
void cond_evacuation_cleaned(struct conductor *c, struct nb_ctx *ctx, json_t *args);

/* recovery.c */
void cond_recover_start(struct conductor *c);

/* audit_periodic.c: the cloud audit every [conductor] audit_interval s
 * (default 600, 0: never), findings logged as WARNINGs. */
void cond_audit_start(struct conductor *c);
int cond_audit_once(struct conductor *c);
/* Closes the events a crash left open on the instance's actions (result
 * Error, "Interrupted: …"). Best-effort. */
void cond_close_open_events(struct conductor *c, struct nb_ctx *ctx, const char *uuid);
/* Whether host's agent says the instance's guest runs there (waits up to
 * 15 s for an agent that is starting). */
bool cond_guest_running_on(const char *host, const char *uuid);

#endif

/* rebuild.c - rebuild and evacuate, as Nova's conductor rebuild_instance
 * and the compute manager's rebuild_instance. The API has set task_state
 * rebuilding (with the new image_ref, for a rebuild), started action
 * "rebuild" or "evacuate" and, for an evacuation, created the migration
 * (accepted). Here: event rebuild_server; for an evacuation the
 * destination is chosen and claimed and the volumes re-attached for it
 * (evacuate.c); then event compute_rebuild_instance on the host that
 * rebuilds, the task states rebuild_block_device_mapping and
 * rebuild_spawning, and the cast to that host's agent, which destroys the
 * guest (and its root disk unless an evacuation finds it on shared
 * storage) and spawns it again with the same ports and volumes. Its
 * rebuild_result ends it: task None, vm_state active (stopped when it was,
 * as Nova brings the guest back to its original state), launched now; an
 * evacuation also moves host and node to the destination and ends the
 * migration "done", the source's allocation still held by the migration
 * until the source comes back and cleans up (evacuate.c). A failure sets
 * ERROR with a fault (Nova's _error_out_instance_on_exception); for an
 * evacuation the migration goes "failed" (compute side) or "error" (no
 * destination), the destination claim is dropped and the source
 * allocation handed back to the instance. A rebuild or evacuation a
 * restart interrupted ends the same way at the start-up recovery, as
 * Nova's _init_instance sets ERROR for the rebuild task states. */
#include "common/cleanup.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "compute/conductor/internal.h"
#include "compute/objects/instance.h"
#include "compute/objects/migration.h"
#include "compute/rpc/compute_api.h"
#include "db/db.h"

#include <stdio.h>
#include <string.h>

/* Ends a rebuild or evacuation that failed on host (NULL: before any
 * host): instance ERROR with a fault, task None, events and action in
 * Error; an evacuation's claims rolled back. */
void cond_rebuild_failed(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                         const char *migration_uuid, const char *host, const char *event,
                         const char *migration_status, const char *message, const char *details)
{
    if (migration_uuid)
        cond_evacuate_rollback(c, ctx, uuid, migration_uuid, migration_status);
    int n = (int)nb_instance_transition(
        c->db, ctx, uuid,
        &(struct nb_instance_change){
            .expect_task = {NB_TASK_REBUILDING, NB_TASK_REBUILD_BDM, NB_TASK_REBUILD_SPAWNING},
            .vm_state = NB_VM_ERROR,
            .task_state = NB_NONE,
        },
        NULL);
    nb_ctx_clear_error(ctx); /* a failed update counts as a lost race */
    if (n == 1)
        cond_fault(c, ctx, uuid, 500, message, details ? details : message, host);
    if (event)
        cond_event_finish(c, ctx, uuid, event, false, details ? details : message);
    cond_action_finish(c, ctx, uuid, "Error");
    NB_ERROR(LOG_COND, ctx, uuid, "%s failed%s%s: %s", migration_uuid ? "Evacuation" : "Rebuild",
             host ? " on " : "", host ? host : "", message);
}

/* One step of the task state (rebuilding -> rebuild_block_device_mapping
 * -> rebuild_spawning). 1 moved, 0 lost the race (or failed). */
static int step(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *from,
                const char *to)
{
    int n = (int)nb_instance_transition(c->db, ctx, uuid,
                                        &(struct nb_instance_change){
                                            .expect_task = {from},
                                            .task_state = to,
                                        },
                                        NULL);
    nb_ctx_clear_error(ctx); /* the caller ends the rebuild as a lost race */
    return n;
}

int cond_rebuild_on_host(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                         const char *host, const char *migration_uuid, int on_shared_storage,
                         bool preserve_ephemeral)
{
    cond_event_start(c, ctx, uuid, EV_REBUILD, host);
    if (step(c, ctx, uuid, NB_TASK_REBUILDING, NB_TASK_REBUILD_BDM) != 1 ||
        step(c, ctx, uuid, NB_TASK_REBUILD_BDM, NB_TASK_REBUILD_SPAWNING) != 1) {
        cond_rebuild_failed(c, ctx, uuid, migration_uuid, host, EV_REBUILD, "failed",
                            "Instance disappeared during rebuild", NULL);
        return -1;
    }
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
    if (!row) {
        cond_rebuild_failed(c, ctx, uuid, migration_uuid, host, EV_REBUILD, "failed",
                            "Instance disappeared during rebuild", NULL);
        return -1;
    }
    json_t *inst = cond_instance_for_agent(c, ctx, row);
    /* the agent brings the guest back to this state (stopped stays stopped) */
    json_object_set_new(inst, "vm_state", json_string(nb_json_str(row, "vm_state")));
    const struct nb_compute_rebuild r = {migration_uuid, on_shared_storage, preserve_ephemeral};
    if (nb_compute_rebuild_instance(ctx, host, inst, &r) < 0) {
        char msg[512];
        snprintf(msg, sizeof(msg), "The compute service of host %s is not reachable.", host);
        cond_rebuild_failed(c, ctx, uuid, migration_uuid, host, EV_REBUILD, "failed", msg, NULL);
        return -1;
    }
    return 0;
}

void cond_rebuild_instance(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *mig = nb_json_str(args, "migration_uuid");
    _cleanup_json_ json_t *row = uuid ? cond_instance_get(c, ctx, uuid) : NULL;
    if (!row || nb_json_int(row, "deleted", 0) != 0) {
        NB_INFO(LOG_COND, ctx, uuid, "Not rebuilding: the instance is gone");
        return;
    }
    if (!cond_still_requested(c, ctx, row, NB_TASK_REBUILDING, mig, NB_MIGRATION_ACCEPTED,
                              "rebuild_instance"))
        return;
    cond_action_start(c, ctx, uuid, mig ? "evacuate" : "rebuild");
    cond_event_start(c, ctx, uuid, EV_COND_REBUILD, NULL);
    if (mig) {
        cond_evacuate(c, ctx, row, args);
        return;
    }
    const char *host = nb_json_str(row, "host");
    if (!host || !*host) {
        cond_rebuild_failed(c, ctx, uuid, NULL, NULL, EV_COND_REBUILD, NULL,
                            "The instance has no host to rebuild it on.", NULL);
        return;
    }
    cond_event_finish(c, ctx, uuid, EV_COND_REBUILD, true, NULL);
    NB_INFO(LOG_COND, ctx, uuid, "Rebuilding instance on %s with image %s", host,
            nb_json_str(row, "image_ref") ? nb_json_str(row, "image_ref") : "(volume)");
    cond_rebuild_on_host(c, ctx, uuid, host, NULL, -1,
                         json_is_true(json_object_get(args, "preserve_ephemeral")));
}

/* The end of a good rebuild on host: task None, vm_state active (stopped
 * when the guest is off, as it was before), the guest's power state,
 * launched now; an evacuation also moves host and node. 1/0/-1. */
static int finish(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *host,
                  const char *node, bool evacuation, int power_state)
{
    bool off = power_state == NB_POWER_SHUTDOWN;
    return (int)nb_instance_transition(c->db, ctx, uuid,
                                       &(struct nb_instance_change){
                                           .expect_task = {NB_TASK_REBUILD_SPAWNING},
                                           .expect_host = evacuation ? NULL : host,
                                           .vm_state = off ? NB_VM_STOPPED : NB_VM_ACTIVE,
                                           .task_state = NB_NONE,
                                           .host = evacuation ? host : NULL,
                                           .node = evacuation ? node : NULL,
                                           .set_power_state = true,
                                           .power_state = power_state,
                                           .launched = true,
                                       },
                                       NULL);
}

void cond_rebuild_result(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(args, "uuid");
    const char *host = nb_json_str(args, "host");
    const char *mig = nb_json_str(args, "migration_uuid");
    if (!uuid || !host)
        return;
    if (!json_is_true(json_object_get(args, "ok"))) {
        const char *m = nb_json_str(args, "message");
        cond_rebuild_failed(c, ctx, uuid, mig, host, EV_REBUILD, "failed",
                            m ? m : "The rebuild failed.", NULL);
        return;
    }
    _cleanup_free_ char *node = mig ? cond_evacuation_dest_node(c, ctx, mig) : NULL;
    int power = (int)nb_json_int(args, "power_state", NB_POWER_RUNNING);
    int n = finish(c, ctx, uuid, host, node ? node : host, mig != NULL, power);
    nb_ctx_clear_error(ctx); /* a failed update is handled as a lost race */
    if (n != 1) {
        cond_event_finish(c, ctx, uuid, EV_REBUILD, false, "Instance disappeared during rebuild");
        cond_action_finish(c, ctx, uuid, "Error");
        NB_INFO(LOG_COND, ctx, uuid, "Rebuild ended while the instance changed state meanwhile");
        return;
    }
    if (mig)
        cond_evacuate_done(c, ctx, uuid, host, mig,
                           json_is_true(json_object_get(args, "on_shared_storage")));
    cond_event_finish(c, ctx, uuid, EV_REBUILD, true, NULL);
    cond_action_finish(c, ctx, uuid, NULL);
    NB_INFO(LOG_COND, ctx, uuid, "%s on %s complete", mig ? "Evacuation" : "Rebuild", host);
}

/* The evacuation migration of instance uuid still under way (accepted or
 * pre-migrating), malloc'd, or NULL. */
static char *open_evacuation(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *m = nb_db_row(c->db, &sub,
                                         "SELECT uuid FROM migrations WHERE instance_uuid = ? AND "
                                         "migration_type = 'evacuation' AND deleted = 0 AND "
                                         "status IN ('accepted', 'pre-migrating') ORDER BY id "
                                         "DESC LIMIT 1",
                                         "s", uuid);
    const char *mu = nb_json_str(m, "uuid");
    return mu ? strdup(mu) : NULL;
}

/* A system context carrying the request ID, user and project of the
 * instance's newest rebuild or evacuate action. */
static void action_ctx(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    struct nb_ctx tmp;
    nb_ctx_init_system(&tmp, NULL);
    _cleanup_json_ json_t *row = nb_db_row(c->db, &tmp,
                                           "SELECT request_id, user_id, project_id FROM "
                                           "instance_actions WHERE instance_uuid = ? AND action "
                                           "IN ('rebuild', 'evacuate') ORDER BY id DESC LIMIT 1",
                                           "s", uuid);
    nb_ctx_init_system(ctx, nb_json_str(row, "request_id"));
    if (nb_json_str(row, "user_id"))
        nb_strlcpy(ctx->user_id, nb_json_str(row, "user_id"), sizeof(ctx->user_id));
    if (nb_json_str(row, "project_id"))
        nb_strlcpy(ctx->project_id, nb_json_str(row, "project_id"), sizeof(ctx->project_id));
}

void cond_recover_rebuilds(struct conductor *c, const struct cond_scope *s, struct nb_ctx *ctx)
{
    char now[32];
    nb_now_iso_us(now);
    _cleanup_json_ json_t *rows =
        nb_db_rows(c->db, ctx,
                   "SELECT uuid, host, task_state, nubo_conductor FROM instances WHERE deleted = 0 "
                   "AND task_state IN (?, ?, ?) AND "
                   "updated_at < ? ORDER BY id",
                   "ssss", NB_TASK_REBUILDING, NB_TASK_REBUILD_BDM, NB_TASK_REBUILD_SPAWNING, now);
    nb_ctx_clear_error(ctx); /* a failed query: nothing to do this time */
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *uuid = nb_json_str(r, "uuid");
        const char *task = nb_json_str(r, "task_state");
        if (!cond_scope_row(s, r))
            continue;
        _cleanup_free_ char *mig = open_evacuation(c, ctx, uuid);
        struct nb_ctx actx; /* recorded under the request that started it */
        action_ctx(c, &actx, uuid);
        /* Nova's _init_instance: a rebuild the restart interrupted ends in
         * ERROR, its open event in Error */
        cond_rebuild_failed(c, &actx, uuid, mig, nb_json_str(r, "host"),
                            strcmp(task, NB_TASK_REBUILDING) ? EV_REBUILD : EV_COND_REBUILD,
                            "failed",
                            mig ? "Evacuation interrupted: nubo stopped during the rebuild on "
                                  "the destination."
                                : "Rebuild interrupted: nubo stopped during the rebuild.",
                            "Rebuild the server again (or evacuate it again).");
    }
}

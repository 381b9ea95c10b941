/* resize.c - cold migration and resize (Nova's conductor MigrationTask and
 * the compute manager's prep_resize, resize_instance, finish_resize,
 * confirm_resize, revert_resize and finish_revert_resize), driven from the
 * conductor one host at a time with calls to the agents
 * (compute_api.h), every state written here:
 *
 *   resize_prep: instance allocation -> migration (placement), scheduler
 *     (source ignored unless same host allowed; requested host), the new
 *     flavor claimed for the instance on the destination
 *   prep_resize on the destination                    compute_prep_resize
 *   resize_migrating / migration migrating: resize_instance on the source
 *     (power off, local disks to the destination)      compute_resize_instance
 *   resize_migrated / post-migrating, then the switch: host, node, flavor
 *     new, old_flavor/new_flavor kept, resize_finish: finish_resize on the
 *     destination (guest defined, started unless it was stopped)
 *                                                      compute_finish_resize
 *   vm_state resized (VERIFY_RESIZE), migration finished.
 *
 * confirm: the source's guest and files removed, the migration's
 * allocation deleted, migration confirmed, vm_state active (stopped when
 * the guest is off) (compute_confirm_resize). revert: the destination's
 * guest removed (compute_revert_resize), instance back on the source with
 * its old flavor, allocation moved back (the destination claim goes with
 * it), the old guest started again unless it was off
 * (compute_finish_revert_resize), migration reverted.
 *
 * A failure at any step leaves the instance where its guest is, ACTIVE (or
 * as it was: stopped), never in a task: before the switch on the source,
 * after it back on the source with the old flavor as a revert does; ERROR
 * only when the guest could not be brought back. The migration goes to
 * error, the allocations to what they were, and the fault and the failed
 * event name the phase and the agent's (driver's) cause. The conductor's
 * own event is conductor_migrate_server. With [DEFAULT]
 * resize_confirm_window (seconds, 0 = off as Nova's default) a thread
 * confirms the resizes left unconfirmed that long. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "compute/conductor/internal.h"
#include "compute/objects/instance.h"
#include "compute/objects/migration.h"
#include "compute/objects/request_spec.h"
#include "compute/rpc/compute_api.h"
#include "compute/rpc/scheduler_api.h"
#include "db/db.h"
#include "network/network.h"
#include "placement/placement.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EV_MIGRATE_SERVER "conductor_migrate_server"
#define EV_PREP_RESIZE "compute_prep_resize"
#define EV_RESIZE_INSTANCE "compute_resize_instance"
#define EV_FINISH_RESIZE "compute_finish_resize"
#define EV_CONFIRM_RESIZE "compute_confirm_resize"
#define EV_REVERT_RESIZE "compute_revert_resize"
#define EV_FINISH_REVERT_RESIZE "compute_finish_revert_resize"

/* One move as the workflow carries it. */
struct move {
    struct conductor *c;
    struct nb_ctx *ctx;
    const char *uuid, *mig;
    const char *kind;  /* "cold migrate" or "resize", for messages */
    const char *title; /* "Cold migration" or "Resize", a fault's first word */
    char source[256], source_node[256], dest[256], dest_node[256];
    bool same_host;
    bool power_on;      /* the guest ran before the move */
    json_t *old_flavor; /* the instance's flavor before the move */
    json_t *new_flavor; /* the flavor it moves to (the same for a cold migration) */
    char vm_before[32]; /* vm_state before the move: active or stopped */
};

static void move_free(struct move *m)
{
    json_decref(m->old_flavor);
    json_decref(m->new_flavor);
}

static json_t *parse_flavor(const json_t *row, const char *column)
{
    json_t *f = nb_json_parse(nb_json_str(row, column));
    if (json_is_object(f))
        return f;
    json_decref(f);
    return json_object();
}

/* Timeout of resize_instance (it copies disks): [DEFAULT] long_rpc_timeout,
 * 1800 s as Nova's. */
static int long_timeout_ms(void)
{
    return (int)nb_conf_int("DEFAULT", "long_rpc_timeout", 1800) * 1000;
}

/* Calls step fn on s->host. 0 with *reply (new ref, may be NULL) when the
 * agent answered ok; -1 with the cause in msg (the agent's message, or that
 * it did not answer) and *lost set when the agent says the guest could not
 * be brought back. s->instance is consumed. */
static int run_step(struct move *m,
                    json_t *(*fn)(struct nb_ctx *, const struct nb_resize_step *, int),
                    struct nb_resize_step *s, int timeout_ms, json_t **reply, char *msg, size_t n,
                    bool *lost)
{
    struct nb_ctx sub; /* the step's failure is this workflow's to handle */
    nb_ctx_child(&sub, m->ctx);
    s->migration_uuid = m->mig;
    s->same_host = m->same_host;
    json_t *r = fn(&sub, s, timeout_ms);
    *lost = false;
    if (reply)
        *reply = NULL;
    if (!r) {
        snprintf(msg, n, "The compute service of host %s did not answer: %s", s->host,
                 nb_ctx_message(&sub));
        return -1;
    }
    if (!json_is_true(json_object_get(r, "ok"))) {
        snprintf(msg, n, "%s",
                 nb_json_str(r, "message") ? nb_json_str(r, "message") : "The step failed.");
        *lost = json_is_true(json_object_get(r, "guest_lost"));
        json_decref(r);
        return -1;
    }
    if (reply)
        *reply = r;
    else
        json_decref(r);
    return 0;
}

/* The instance as the agent sees it now (new ref), or NULL. */
static json_t *agent_view(struct move *m)
{
    _cleanup_json_ json_t *row = cond_instance_get(m->c, m->ctx, m->uuid);
    return row ? cond_instance_for_agent(m->c, m->ctx, row) : NULL;
}

/* Sets the migration's status (best-effort: logged). */
static void migration_status(struct move *m, const char *status)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, m->ctx);
    if (nb_migration_set_status(m->c->db, &sub, m->mig, status, NULL) < 0)
        NB_ERROR(LOG_COND, m->ctx, m->uuid, "could not set migration %s to %s: %s", m->mig, status,
                 nb_ctx_message(&sub));
}

/* Hands the migration's allocation (the source's) back to the instance,
 * replacing whatever the instance holds (the destination claim). */
static void allocations_back(struct move *m)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, m->ctx);
    if (nb_placement_move_allocations(&sub, m->mig, m->uuid) < 0)
        NB_ERROR(LOG_COND, m->ctx, m->uuid,
                 "could not move the allocation of migration %s back to the instance: %s", m->mig,
                 nb_ctx_message(&sub));
}

/* Ends the move in failure: migration error, fault naming the phase (the
 * event) and cause, the event (unless ended already) and the action Error,
 * and the final states (vm_state vm, NULL: left; task cleared while in one
 * of tasks). */
static void move_failed_ev(struct move *m, const char *event, bool end_event, const char *host,
                           const char *cause, const char *vm, const char *const *tasks)
{
    migration_status(m, NB_MIGRATION_ERROR);
    struct nb_instance_change ch = {.vm_state = vm, .task_state = NB_NONE};
    for (int i = 0; tasks && tasks[i] && i < NB_EXPECT_MAX; i++)
        ch.expect_task[i] = tasks[i];
    struct nb_ctx sub; /* the end state is best-effort once the move failed */
    nb_ctx_child(&sub, m->ctx);
    if (nb_instance_transition(m->c->db, &sub, m->uuid, &ch, NULL) < 0)
        NB_ERROR(LOG_COND, m->ctx, m->uuid, "could not end the failed %s: %s", m->kind,
                 nb_ctx_message(&sub));
    _cleanup_free_ char *message =
        nb_strdup_printf("%s of instance %s failed in %s on %s: %s", m->title, m->uuid, event,
                         host && *host ? host : "?", cause);
    cond_fault(m->c, m->ctx, m->uuid, 500, message, cause, host);
    if (end_event)
        cond_event_finish(m->c, m->ctx, m->uuid, event, false, cause);
    cond_action_finish(m->c, m->ctx, m->uuid, "Error");
    NB_ERROR(LOG_COND, m->ctx, m->uuid, "%s (migration %s set to error)", message, m->mig);
}

static void move_failed(struct move *m, const char *event, const char *host, const char *cause,
                        const char *vm, const char *const *tasks)
{
    move_failed_ev(m, event, true, host, cause, vm, tasks);
}

static const char *const before_switch[] = {NB_TASK_RESIZE_PREP, NB_TASK_RESIZE_MIGRATING,
                                            NB_TASK_RESIZE_MIGRATED, NULL};

/* A failure before the switch: the instance stays on the source with its
 * flavor (ERROR only if lost), the allocation is handed back. */
static void fail_before_switch(struct move *m, const char *event, const char *host,
                               const char *cause, bool lost)
{
    allocations_back(m);
    move_failed(m, event, host, cause, lost ? NB_VM_ERROR : NULL, before_switch);
}

/* Moves the instance between the move's tasks (and applies ch's other
 * changes) in one transaction with the migration's status (NULL: kept).
 * 1 moved, 0 lost (deleted meanwhile), -1 error (logged). */
static int step_to(struct move *m, const char *from, struct nb_instance_change *ch,
                   const char *mig_status)
{
    ch->expect_task[0] = from;
    if (nb_db_begin(m->c->db, m->ctx) < 0)
        goto fail;
    int n = (int)nb_instance_transition(m->c->db, m->ctx, m->uuid, ch, NULL);
    if (n == 1 && mig_status &&
        nb_migration_set_status(m->c->db, m->ctx, m->mig, mig_status, NULL) < 0)
        n = -1;
    if (n < 0) {
        nb_db_rollback(m->c->db);
        goto fail;
    }
    if (nb_db_commit(m->c->db, m->ctx) < 0)
        goto fail;
    return n;
fail:
    NB_ERROR(LOG_COND, m->ctx, m->uuid, "database error during the %s: %s", m->kind,
             nb_ctx_message(m->ctx));
    nb_ctx_clear_error(m->ctx);
    return -1;
}

/* The request spec for the move's scheduling: the stored one with the new
 * flavor, the source ignored (unless same_host), the requested host, and
 * no retry state. */
static void move_spec(struct move *m, const json_t *row, const char *host, bool same_ok,
                      struct nb_request_spec *spec)
{
    _cleanup_json_ json_t *j = nb_json_parse(nb_json_str(row, "request_spec"));
    nb_request_spec_from_json(spec, j);
    json_decref(spec->flavor);
    spec->flavor = json_deep_copy(m->new_flavor);
    json_decref(spec->ignore_hosts);
    spec->ignore_hosts = json_array();
    if (!same_ok)
        json_array_append_new(spec->ignore_hosts, json_string(m->source));
    free(spec->requested_host);
    spec->requested_host = host ? strdup(host) : NULL;
    free(spec->requested_node);
    spec->requested_node = NULL;
    free(spec->force_host);
    spec->force_host = NULL;
    free(spec->force_node);
    spec->force_node = NULL;
    json_array_clear(spec->retry_hosts);
    json_array_clear(spec->retry_failures);
    json_array_clear(spec->unreachable_hosts);
    spec->num_attempts = 0;
    if (!spec->project_id)
        spec->project_id = strdup(nb_json_str(row, "project_id"));
    if (!spec->user_id)
        spec->user_id = strdup(nb_json_str(row, "user_id"));
}

/* Allocation to the migration, then a destination claimed for the new
 * flavor. 0 with m->dest set; -1 after the move failed (handled). */
static int select_destination(struct move *m, const json_t *row, const char *host, bool same_ok)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, m->ctx);
    if (nb_placement_move_allocations(&sub, m->uuid, m->mig) < 0) {
        _cleanup_free_ char *why =
            nb_strdup_printf("Cannot hand the allocation of the instance to migration %s: %s",
                             m->mig, nb_ctx_message(&sub));
        move_failed(m, EV_MIGRATE_SERVER, m->c->env->my_host, why, NULL, before_switch);
        return -1;
    }
    struct nb_request_spec spec;
    move_spec(m, row, host, same_ok, &spec);
    _cleanup_json_ json_t *sel =
        nb_scheduler_select_destinations(&sub, m->uuid, &spec, m->c->call_timeout_ms);
    nb_request_spec_free(&spec);
    const char *err = sel ? nb_json_str(sel, "error") : "The scheduler gave no answer.";
    if (err || !nb_json_str(sel, "host")) {
        _cleanup_free_ char *why = nb_strdup_printf(
            "No valid host was found. No valid host found for %s\n%s\n%s", m->kind, err ? err : "",
            sel ? (nb_json_str(sel, "details") ? nb_json_str(sel, "details") : "")
                : nb_ctx_message(&sub));
        NB_WARN(LOG_COND, m->ctx, m->uuid, "No valid host found for %s", m->kind);
        fail_before_switch(m, EV_MIGRATE_SERVER, m->c->env->my_host, why, false);
        return -1;
    }
    nb_strlcpy(m->dest, nb_json_str(sel, "host"), sizeof(m->dest));
    nb_strlcpy(m->dest_node, nb_json_str(sel, "node") ? nb_json_str(sel, "node") : m->dest,
               sizeof(m->dest_node));
    m->same_host = !strcmp(m->dest, m->source);
    if (nb_migration_update(m->c->db, &sub, m->mig,
                            &(struct nb_migration_change){.dest_compute = m->dest,
                                                          .dest_node = m->dest_node,
                                                          .dest_host = m->dest}) < 0)
        NB_WARN(LOG_COND, m->ctx, m->uuid, "could not record the destination of migration %s: %s",
                m->mig, nb_ctx_message(&sub));
    cond_event_finish(m->c, m->ctx, m->uuid, EV_MIGRATE_SERVER, true, NULL);
    NB_INFO(LOG_COND, m->ctx, m->uuid, "%s to host %s (node %s)%s, migration %s", m->kind, m->dest,
            m->dest_node, m->same_host ? " (same host)" : "", m->mig);
    return 0;
}

/* prep_resize on the destination and resize_instance on the source; 0 with
 * the instance in resize_migrated (migration post-migrating), -1 after the
 * move failed (handled). */
static int move_disks(struct move *m)
{
    char msg[2048];
    bool lost;
    _cleanup_json_ json_t *prep = NULL;
    cond_event_start(m->c, m->ctx, m->uuid, EV_PREP_RESIZE, m->dest);
    struct nb_resize_step s = {.host = m->dest, .instance = agent_view(m), .flavor = m->new_flavor};
    if (run_step(m, nb_compute_prep_resize, &s, m->c->call_timeout_ms, &prep, msg, sizeof(msg),
                 &lost) < 0) {
        fail_before_switch(m, EV_PREP_RESIZE, m->dest, msg, false);
        return -1;
    }
    cond_event_finish(m->c, m->ctx, m->uuid, EV_PREP_RESIZE, true, NULL);
    int n = step_to(m, NB_TASK_RESIZE_PREP,
                    &(struct nb_instance_change){.task_state = NB_TASK_RESIZE_MIGRATING},
                    NB_MIGRATION_MIGRATING);
    if (n <= 0)
        return -1; /* deleted meanwhile: the delete releases what it holds */
    cond_event_start(m->c, m->ctx, m->uuid, EV_RESIZE_INSTANCE, m->source);
    struct nb_resize_step r = {.host = m->source,
                               .instance = agent_view(m),
                               .flavor = m->new_flavor,
                               .dest_host = m->dest,
                               .dest = json_object_get(prep, "dest")};
    if (run_step(m, nb_compute_resize_instance, &r, long_timeout_ms(), NULL, msg, sizeof(msg),
                 &lost) < 0) {
        if (!m->same_host) { /* what prep_resize made on the destination */
            struct nb_resize_step d = {.host = m->dest, .instance = agent_view(m)};
            char dmsg[1024];
            bool dl;
            if (run_step(m, nb_compute_revert_resize, &d, m->c->call_timeout_ms, NULL, dmsg,
                         sizeof(dmsg), &dl) < 0)
                NB_WARN(LOG_COND, m->ctx, m->uuid, "cleanup on %s after the failed %s: %s", m->dest,
                        m->kind, dmsg);
        }
        fail_before_switch(m, EV_RESIZE_INSTANCE, m->source, msg, lost);
        return -1;
    }
    cond_event_finish(m->c, m->ctx, m->uuid, EV_RESIZE_INSTANCE, true, NULL);
    n = step_to(m, NB_TASK_RESIZE_MIGRATING,
                &(struct nb_instance_change){.task_state = NB_TASK_RESIZE_MIGRATED},
                NB_MIGRATION_POST_MIGRATING);
    return n == 1 ? 0 : -1;
}

/* The instance's ports bound to host, as Nova's migrate_instance_finish
 * (best-effort: logged). */
static void bind_ports(struct move *m, const char *host)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, m->ctx);
    if (nb_network_bind_instance_host(&sub, m->uuid, host) < 0)
        NB_WARN(LOG_COND, m->ctx, m->uuid, "could not bind the instance's ports to %s: %s", host,
                nb_ctx_message(&sub));
}

/* The volumes moved to host (volume_moves.c): 0, or -1 with the cause in
 * msg. */
static int move_volumes(struct move *m, const char *host, char *msg, size_t n)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, m->ctx);
    if (cond_volumes_move(m->c, &sub, m->uuid, host) == 0)
        return 0;
    snprintf(msg, n, "Volumes could not be attached for host %s: %s", host, nb_ctx_message(&sub));
    NB_ERROR(LOG_COND, m->ctx, m->uuid, "%s", msg);
    return -1;
}

/* The instance back on the source with its old flavor (task kept): the
 * revert's and a failed finish's way back. 1/0/-1 as step_to. */
static int switch_back(struct move *m, const char *task)
{
    struct nb_instance_change ch = {.host = m->source,
                                    .node = m->source_node,
                                    .flavor = m->old_flavor,
                                    .clear_move_flavors = true};
    int n = step_to(m, task, &ch, NULL);
    if (n == 1 && !m->same_host)
        bind_ports(m, m->source);
    char msg[1400];
    if (n == 1)
        move_volumes(m, m->source, msg, sizeof(msg)); /* logged; the source's are kept */
    return n;
}

/* The old guest back on the source (finish_revert_resize), then the end
 * state: ok → vm_state as before, else ERROR. Returns 0/-1. */
static int restart_source(struct move *m, char *msg, size_t n, int *power)
{
    bool lost;
    _cleanup_json_ json_t *r = NULL;
    cond_event_start(m->c, m->ctx, m->uuid, EV_FINISH_REVERT_RESIZE, m->source);
    struct nb_resize_step s = {
        .host = m->source, .instance = agent_view(m), .power_on = m->power_on};
    int rc =
        run_step(m, nb_compute_finish_revert_resize, &s, m->c->call_timeout_ms, &r, msg, n, &lost);
    *power = (int)nb_json_int(r, "power_state", m->power_on ? NB_POWER_RUNNING : NB_POWER_SHUTDOWN);
    cond_event_finish(m->c, m->ctx, m->uuid, EV_FINISH_REVERT_RESIZE, rc == 0,
                      rc == 0 ? NULL : msg);
    return rc;
}

/* finish_resize failed on the destination: as a revert, the destination's
 * guest goes, the instance goes back to the source with its old flavor and
 * its allocation, the old guest starts again (ERROR if it cannot). */
static void fail_after_switch(struct move *m, const char *cause)
{
    char msg[2048];
    bool lost;
    struct nb_resize_step d = {.host = m->dest, .instance = agent_view(m)};
    if (run_step(m, nb_compute_revert_resize, &d, m->c->call_timeout_ms, NULL, msg, sizeof(msg),
                 &lost) < 0)
        NB_WARN(LOG_COND, m->ctx, m->uuid, "cleanup on %s after the failed finish_resize: %s",
                m->dest, msg);
    if (switch_back(m, NB_TASK_RESIZE_FINISH) <= 0)
        return;
    allocations_back(m);
    int power;
    static const char *const tasks[] = {NB_TASK_RESIZE_FINISH, NULL};
    if (restart_source(m, msg, sizeof(msg), &power) < 0) {
        _cleanup_free_ char *both = nb_strdup_printf(
            "%s; the guest could not be restarted on %s either: %s", cause, m->source, msg);
        move_failed(m, EV_FINISH_RESIZE, m->dest, both, NB_VM_ERROR, tasks);
        return;
    }
    struct nb_ctx sub;
    nb_ctx_child(&sub, m->ctx);
    nb_instance_transition(m->c->db, &sub, m->uuid,
                           &(struct nb_instance_change){.expect_task = {NB_TASK_RESIZE_FINISH},
                                                        .set_power_state = true,
                                                        .power_state = power},
                           NULL);
    move_failed(m, EV_FINISH_RESIZE, m->dest, cause, NULL, tasks);
}

/* The switch to the destination and finish_resize there; the instance ends
 * resized (VERIFY_RESIZE) with its migration finished. */
static void finish_move(struct move *m)
{
    struct nb_instance_change ch = {.task_state = NB_TASK_RESIZE_FINISH,
                                    .host = m->dest,
                                    .node = m->dest_node,
                                    .flavor = m->new_flavor,
                                    .old_flavor = m->old_flavor,
                                    .new_flavor = m->new_flavor};
    if (step_to(m, NB_TASK_RESIZE_MIGRATED, &ch, NULL) <= 0)
        return;
    if (!m->same_host)
        bind_ports(m, m->dest);
    cond_event_start(m->c, m->ctx, m->uuid, EV_FINISH_RESIZE, m->dest);
    char msg[2048];
    bool lost;
    _cleanup_json_ json_t *r = NULL;
    /* Nova's _update_volume_attachments: the volumes attached for the
     * destination before the guest starts there (finish_resize checks
     * their files with the new connection_info) */
    if (move_volumes(m, m->dest, msg, sizeof(msg)) < 0) {
        fail_after_switch(m, msg);
        return;
    }
    struct nb_resize_step s = {.host = m->dest, .instance = agent_view(m), .power_on = m->power_on};
    if (run_step(m, nb_compute_finish_resize, &s, m->c->call_timeout_ms, &r, msg, sizeof(msg),
                 &lost) < 0) {
        fail_after_switch(m, msg);
        return;
    }
    int power =
        (int)nb_json_int(r, "power_state", m->power_on ? NB_POWER_RUNNING : NB_POWER_SHUTDOWN);
    int n = step_to(m, NB_TASK_RESIZE_FINISH,
                    &(struct nb_instance_change){.vm_state = NB_VM_RESIZED,
                                                 .task_state = NB_NONE,
                                                 .set_power_state = true,
                                                 .power_state = power},
                    NB_MIGRATION_FINISHED);
    if (n != 1)
        return;
    cond_event_finish(m->c, m->ctx, m->uuid, EV_FINISH_RESIZE, true, NULL);
    cond_action_finish(m->c, m->ctx, m->uuid, NULL);
    NB_INFO(LOG_COND, m->ctx, m->uuid,
            "%s to %s finished (migration %s): the server is VERIFY_RESIZE until confirmed or "
            "reverted",
            m->kind, m->dest, m->mig);
}

/* Fills m from the instance row and the migration; false when they are no
 * longer what the message expects (logged). */
static bool move_load(struct move *m, const json_t *row, const json_t *mig, const char *task,
                      const char *status)
{
    const char *t = nb_json_str(row, "task_state");
    const char *st = nb_json_str(mig, "status");
    if (nb_json_int(row, "deleted", 0) || strcmp(t ? t : "", task) || !st || strcmp(st, status)) {
        NB_WARN(LOG_COND, m->ctx, m->uuid,
                "Not moving: the instance (task_state %s) or migration %s (status %s) changed",
                t ? t : "None", m->mig, st ? st : "?");
        return false;
    }
    const char *src = nb_json_str(mig, "source_compute");
    const char *srcn = nb_json_str(mig, "source_node");
    nb_strlcpy(m->source, src ? src : "", sizeof(m->source));
    nb_strlcpy(m->source_node, srcn ? srcn : m->source, sizeof(m->source_node));
    const char *dst = nb_json_str(mig, "dest_compute");
    const char *dstn = nb_json_str(mig, "dest_node");
    nb_strlcpy(m->dest, dst ? dst : "", sizeof(m->dest));
    nb_strlcpy(m->dest_node, dstn ? dstn : m->dest, sizeof(m->dest_node));
    m->same_host = m->dest[0] && !strcmp(m->dest, m->source);
    m->kind = !strcmp(nb_json_str(mig, "migration_type") ? nb_json_str(mig, "migration_type") : "",
                      NB_MIGRATION_RESIZE)
                  ? "resize"
                  : "cold migrate";
    m->title = !strcmp(m->kind, "resize") ? "Resize" : "Cold migration";
    const char *vm = nb_json_str(row, "vm_state");
    nb_strlcpy(m->vm_before, vm ? vm : NB_VM_ACTIVE, sizeof(m->vm_before));
    m->power_on = nb_json_int(row, "power_state", NB_POWER_NOSTATE) == NB_POWER_RUNNING;
    return true;
}

void cond_migrate_server(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    struct move m = {.c = c,
                     .ctx = ctx,
                     .uuid = nb_json_str(args, "uuid"),
                     .mig = nb_json_str(args, "migration_uuid")};
    if (!m.uuid || !m.mig)
        return;
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, m.uuid);
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *mig = nb_migration_get(c->db, &sub, m.mig);
    if (!row || !mig || !move_load(&m, row, mig, NB_TASK_RESIZE_PREP, NB_MIGRATION_PRE_MIGRATING))
        return;
    m.power_on = strcmp(m.vm_before, NB_VM_STOPPED) != 0;
    m.old_flavor = parse_flavor(row, "flavor");
    json_t *fl = json_object_get(args, "flavor");
    m.new_flavor = json_is_object(fl) ? json_deep_copy(fl) : json_deep_copy(m.old_flavor);
    cond_event_start(c, ctx, m.uuid, EV_MIGRATE_SERVER, c->env->my_host);
    const char *host = nb_json_str(args, "host");
    if (select_destination(&m, row, host && *host ? host : NULL,
                           json_is_true(json_object_get(args, "allow_same_host"))) == 0 &&
        move_disks(&m) == 0)
        finish_move(&m);
    move_free(&m);
}

/* Loads the resized instance and its migration for confirm / revert. */
static bool resized_load(struct move *m, json_t **row, json_t **mig, const char *task,
                         const char *status)
{
    *row = cond_instance_get(m->c, m->ctx, m->uuid);
    struct nb_ctx sub;
    nb_ctx_child(&sub, m->ctx);
    *mig = nb_migration_get(m->c->db, &sub, m->mig);
    if (!*row || !*mig || !move_load(m, *row, *mig, task, status))
        return false;
    m->old_flavor = parse_flavor(*row, "old_flavor");
    m->new_flavor = parse_flavor(*row, "flavor");
    if (!json_object_size(m->old_flavor)) { /* a revert interrupted after its switch back */
        json_decref(m->old_flavor);
        m->old_flavor = json_deep_copy(m->new_flavor);
    }
    return true;
}

void cond_confirm_resize(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    struct move m = {.c = c,
                     .ctx = ctx,
                     .uuid = nb_json_str(args, "uuid"),
                     .mig = nb_json_str(args, "migration_uuid")};
    _cleanup_json_ json_t *row = NULL, *mig = NULL;
    if (!m.uuid || !m.mig || !resized_load(&m, &row, &mig, "", "confirming")) {
        move_free(&m);
        return;
    }
    cond_event_start(c, ctx, m.uuid, EV_CONFIRM_RESIZE, m.source);
    char msg[2048];
    bool lost;
    struct nb_resize_step s = {.host = m.source, .instance = agent_view(&m)};
    int rc = run_step(&m, nb_compute_confirm_resize, &s, c->call_timeout_ms, NULL, msg, sizeof(msg),
                      &lost);
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    if (nb_placement_delete_allocations(&sub, m.mig) < 0)
        NB_ERROR(LOG_COND, ctx, m.uuid, "could not delete the allocation of migration %s: %s",
                 m.mig, nb_ctx_message(&sub));
    const char *vm = m.power_on ? NB_VM_ACTIVE : NB_VM_STOPPED;
    struct nb_instance_change ch = {.expect_vm = {NB_VM_RESIZED},
                                    .expect_task = {NB_NONE},
                                    .vm_state = vm,
                                    .clear_move_flavors = true};
    if (rc < 0) {
        _cleanup_free_ char *why =
            nb_strdup_printf("%s (the old guest may be left on %s; the instance stays on %s)", msg,
                             m.source, m.dest);
        nb_instance_transition(c->db, &sub, m.uuid, &ch, NULL);
        move_failed(&m, EV_CONFIRM_RESIZE, m.source, why, NULL, NULL);
    } else if (step_to(&m, NB_NONE, &ch, NB_MIGRATION_CONFIRMED) == 1) {
        cond_event_finish(c, ctx, m.uuid, EV_CONFIRM_RESIZE, true, NULL);
        cond_action_finish(c, ctx, m.uuid, NULL);
        NB_INFO(LOG_COND, ctx, m.uuid, "Resize confirmed: migration %s, old guest on %s removed",
                m.mig, m.source);
    }
    move_free(&m);
}

void cond_revert_resize(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    struct move m = {.c = c,
                     .ctx = ctx,
                     .uuid = nb_json_str(args, "uuid"),
                     .mig = nb_json_str(args, "migration_uuid")};
    _cleanup_json_ json_t *row = NULL, *mig = NULL;
    if (!m.uuid || !m.mig || !resized_load(&m, &row, &mig, NB_TASK_RESIZE_REVERTING, "reverting")) {
        move_free(&m);
        return;
    }
    static const char *const tasks[] = {NB_TASK_RESIZE_REVERTING, NULL};
    cond_event_start(c, ctx, m.uuid, EV_REVERT_RESIZE, m.dest);
    char msg[2048];
    bool lost;
    struct nb_resize_step d = {.host = m.dest, .instance = agent_view(&m)};
    if (run_step(&m, nb_compute_revert_resize, &d, c->call_timeout_ms, NULL, msg, sizeof(msg),
                 &lost) < 0) {
        /* the new guest is still there: the instance stays on the destination */
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        nb_placement_delete_allocations(&sub, m.mig);
        _cleanup_free_ char *why =
            nb_strdup_printf("%s (the instance stays on %s with its new flavor)", msg, m.dest);
        nb_instance_transition(
            c->db, &sub, m.uuid,
            &(struct nb_instance_change){.expect_task = {NB_TASK_RESIZE_REVERTING},
                                         .vm_state = m.power_on ? NB_VM_ACTIVE : NB_VM_STOPPED,
                                         .clear_move_flavors = true},
            NULL);
        move_failed(&m, EV_REVERT_RESIZE, m.dest, why, NULL, tasks);
        move_free(&m);
        return;
    }
    cond_event_finish(c, ctx, m.uuid, EV_REVERT_RESIZE, true, NULL);
    if (switch_back(&m, NB_TASK_RESIZE_REVERTING) != 1) {
        move_free(&m);
        return;
    }
    allocations_back(&m);
    int power;
    if (restart_source(&m, msg, sizeof(msg), &power) < 0) {
        move_failed_ev(&m, EV_FINISH_REVERT_RESIZE, false, m.source, msg, NB_VM_ERROR, tasks);
        move_free(&m);
        return;
    }
    if (step_to(&m, NB_TASK_RESIZE_REVERTING,
                &(struct nb_instance_change){.vm_state = m.power_on ? NB_VM_ACTIVE : NB_VM_STOPPED,
                                             .task_state = NB_NONE,
                                             .set_power_state = true,
                                             .power_state = power},
                NB_MIGRATION_REVERTED) == 1) {
        cond_action_finish(c, ctx, m.uuid, NULL);
        NB_INFO(LOG_COND, ctx, m.uuid, "Resize reverted: migration %s, the instance is back on %s",
                m.mig, m.source);
    }
    move_free(&m);
}

/* One move of the instance being deleted, wound up: the guest the move
 * left on the host the delete does not reach removed, the migration's
 * allocation deleted, its status final. */
static void wind_up(struct conductor *c, struct nb_ctx *ctx, const json_t *row, const json_t *mig)
{
    struct move m = {
        .c = c, .ctx = ctx, .uuid = nb_json_str(row, "uuid"), .mig = nb_json_str(mig, "uuid")};
    const char *st = nb_json_str(mig, "status");
    const char *src = nb_json_str(mig, "source_compute");
    const char *dst = nb_json_str(mig, "dest_compute");
    const char *host = nb_json_str(row, "host");
    nb_strlcpy(m.source, src ? src : "", sizeof(m.source));
    nb_strlcpy(m.dest, dst ? dst : "", sizeof(m.dest));
    m.same_host = m.dest[0] && !strcmp(m.dest, m.source);
    /* the delete terminates the guest on the instance's host; the other
     * side of the move is cleaned here (Nova's _confirm_resize_on_deleting) */
    bool on_dest = host && m.dest[0] && !strcmp(host, m.dest);
    const char *other = on_dest ? m.source : m.dest;
    if (other[0] && (!m.same_host || on_dest)) {
        char msg[1024];
        bool lost;
        struct nb_resize_step s = {.host = other, .instance = agent_view(&m)};
        int rc = run_step(&m, on_dest ? nb_compute_confirm_resize : nb_compute_revert_resize, &s,
                          c->call_timeout_ms, NULL, msg, sizeof(msg), &lost);
        if (rc < 0)
            NB_WARN(LOG_COND, ctx, m.uuid, "Deleting: the guest's files of migration %s on %s: %s",
                    m.mig, other, msg);
    }
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    if (nb_placement_delete_allocations(&sub, m.mig) < 0)
        NB_ERROR(LOG_COND, ctx, m.uuid, "could not delete the allocation of migration %s: %s",
                 m.mig, nb_ctx_message(&sub));
    bool done = !strcmp(st, NB_MIGRATION_FINISHED) || !strcmp(st, "confirming");
    migration_status(&m, done ? NB_MIGRATION_CONFIRMED : NB_MIGRATION_ERROR);
    NB_INFO(LOG_COND, ctx, m.uuid, "Migration %s (%s) wound up for the delete of the instance",
            m.mig, st);
}

void cond_resize_on_delete(struct conductor *c, struct nb_ctx *ctx, const json_t *row)
{
    static const char *const open_statuses[] = {
        NB_MIGRATION_PRE_MIGRATING, NB_MIGRATION_MIGRATING, NB_MIGRATION_POST_MIGRATING,
        NB_MIGRATION_FINISHED,      "confirming",           "reverting"};
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *migs =
        nb_migration_list_by_instance(c->db, &sub, nb_json_str(row, "uuid"));
    size_t i;
    json_t *mig;
    json_array_foreach (migs, i, mig) {
        const char *type = nb_json_str(mig, "migration_type");
        const char *st = nb_json_str(mig, "status");
        bool cold =
            type && (!strcmp(type, NB_MIGRATION_COLD) || !strcmp(type, NB_MIGRATION_RESIZE));
        for (size_t k = 0; cold && st && k < sizeof(open_statuses) / sizeof(open_statuses[0]); k++)
            if (!strcmp(st, open_statuses[k]))
                wind_up(c, ctx, row, mig);
    }
}

/* After a restart: a move interrupted after the switch (resize_finish)
 * is finished when its guest runs on the destination, else rolled back
 * to the source. */
static void recover_after_switch(struct move *m, bool guest_on_dest)
{
    if (!guest_on_dest) {
        fail_after_switch(m, "interrupted by a restart of nubo; the guest did not run on the "
                             "destination");
        return;
    }
    char msg[1400];
    move_volumes(m, m->dest, msg, sizeof(msg)); /* logged: the guest runs there */
    if (step_to(m, NB_TASK_RESIZE_FINISH,
                &(struct nb_instance_change){.vm_state = NB_VM_RESIZED,
                                             .task_state = NB_NONE,
                                             .set_power_state = true,
                                             .power_state = NB_POWER_RUNNING},
                NB_MIGRATION_FINISHED) == 1) {
        cond_action_finish(m->c, m->ctx, m->uuid, NULL);
        NB_WARN(LOG_COND, m->ctx, m->uuid,
                "%s %s interrupted by a restart: the guest runs on %s, finished (VERIFY_RESIZE)",
                m->title, m->mig, m->dest);
    }
}

/* After a restart: a move interrupted before the switch goes back to the
 * source: what the destination got is removed and, once resize_instance
 * may have run, the source's guest is put back as it was. */
static void recover_before_switch(struct move *m, const char *status)
{
    char msg[2048];
    bool lost = false;
    if (m->dest[0] && !m->same_host) {
        struct nb_resize_step d = {.host = m->dest, .instance = agent_view(m)};
        if (run_step(m, nb_compute_revert_resize, &d, m->c->call_timeout_ms, NULL, msg, sizeof(msg),
                     &lost) < 0)
            NB_WARN(LOG_COND, m->ctx, m->uuid, "cleanup on %s after the restart: %s", m->dest, msg);
    }
    char cause[2600] = "interrupted by a restart of nubo";
    if (strcmp(status, NB_MIGRATION_PRE_MIGRATING)) {
        struct nb_resize_step s = {
            .host = m->source, .instance = agent_view(m), .power_on = m->power_on};
        if (run_step(m, nb_compute_finish_revert_resize, &s, m->c->call_timeout_ms, NULL, msg,
                     sizeof(msg), &lost) < 0) {
            lost = true;
            snprintf(cause, sizeof(cause),
                     "interrupted by a restart of nubo; the guest could not be restarted on %s: %s",
                     m->source, msg);
        }
    }
    allocations_back(m);
    move_failed_ev(
        m, strcmp(status, NB_MIGRATION_PRE_MIGRATING) ? EV_RESIZE_INSTANCE : EV_MIGRATE_SERVER,
        false, m->source, cause, lost ? NB_VM_ERROR : NULL, before_switch);
}

void cond_resize_recover(struct conductor *c, struct nb_ctx *ctx, const json_t *mig,
                         bool guest_on_dest)
{
    struct move m = {.c = c,
                     .ctx = ctx,
                     .uuid = nb_json_str(mig, "instance_uuid"),
                     .mig = nb_json_str(mig, "uuid")};
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, m.uuid);
    const char *status = nb_json_str(mig, "status");
    const char *task = row ? nb_json_str(row, "task_state") : NULL;
    if (!row || nb_json_int(row, "deleted", 0)) {
        if (row)
            wind_up(c, ctx, row, mig);
        return;
    }
    if (!move_load(&m, row, mig, task ? task : "", status))
        return;
    _cleanup_json_ json_t *args = json_pack("{s:s, s:s}", "uuid", m.uuid, "migration_uuid", m.mig);
    if (!strcmp(status, "confirming")) {
        cond_confirm_resize(c, ctx, args);
        return;
    }
    if (!strcmp(status, "reverting")) {
        cond_revert_resize(c, ctx, args);
        return;
    }
    bool after = task && !strcmp(task, NB_TASK_RESIZE_FINISH);
    m.power_on = strcmp(m.vm_before, NB_VM_STOPPED) != 0;
    m.old_flavor = parse_flavor(row, after ? "old_flavor" : "flavor");
    m.new_flavor = parse_flavor(row, after ? "new_flavor" : "flavor");
    NB_WARN(LOG_COND, ctx, m.uuid, "%s %s (%s, task_state %s) interrupted by a restart", m.title,
            m.mig, status, task ? task : "None");
    if (after)
        recover_after_switch(&m, guest_on_dest);
    else
        recover_before_switch(&m, status);
    move_free(&m);
}

/* Nova's _poll_unconfirmed_resizes: the resizes finished longer than
 * [DEFAULT] resize_confirm_window seconds ago are confirmed, each as its
 * own confirmResize action (the migration moved from finished to
 * confirming first, so of two conductors one confirms). */
static void confirm_unconfirmed(struct conductor *c, int window)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    _cleanup_json_ json_t *rows =
        nb_db_rows(c->db, &ctx,
                   "SELECT uuid, instance_uuid, updated_at FROM migrations WHERE deleted = 0 AND "
                   "status = 'finished' AND migration_type IN ('migration', 'resize')",
                   "");
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        double at = nb_time_parse(nb_json_str(r, "updated_at"));
        if (at < 0 || nb_time_now() - at < window)
            continue;
        const char *uuid = nb_json_str(r, "instance_uuid"), *mig = nb_json_str(r, "uuid");
        struct nb_ctx actx; /* a request of its own, as Nova's periodic task */
        nb_ctx_init_system(&actx, NULL);
        _cleanup_json_ json_t *row = cond_instance_get(c, &actx, uuid);
        const char *vm = row ? nb_json_str(row, "vm_state") : NULL;
        if (!row || !vm || strcmp(vm, NB_VM_RESIZED) || nb_json_str(row, "task_state"))
            continue;
        if (nb_migration_set_status(c->db, &actx, mig, "confirming", NB_MIGRATION_FINISHED) != 1) {
            nb_ctx_clear_error(&actx);
            continue;
        }
        nb_strlcpy(actx.project_id, nb_json_str(row, "project_id"), sizeof(actx.project_id));
        nb_strlcpy(actx.user_id, nb_json_str(row, "user_id"), sizeof(actx.user_id));
        cond_action_start(c, &actx, uuid, "confirmResize");
        NB_INFO(LOG_COND, &actx, uuid,
                "Automatically confirming migration %s: finished %.0f seconds ago "
                "(resize_confirm_window %d)",
                mig, nb_time_now() - at, window);
        _cleanup_json_ json_t *args = json_pack("{s:s, s:s}", "uuid", uuid, "migration_uuid", mig);
        cond_confirm_resize(c, &actx, args);
    }
}

static void *confirm_main(void *arg)
{
    struct conductor *c = arg;
    for (;;) {
        int window = (int)nb_conf_int("DEFAULT", "resize_confirm_window", 0);
        if (window <= 0)
            return NULL;
        sleep((unsigned)(window < 60 ? (window + 1) / 2 : 30));
        if (cond_runs_periodic(c)) /* once per cloud (leases.c) */
            confirm_unconfirmed(c, window);
    }
}

void cond_resize_confirm_start(struct conductor *c)
{
    if (nb_conf_int("DEFAULT", "resize_confirm_window", 0) <= 0)
        return;
    pthread_t t;
    if (pthread_create(&t, NULL, confirm_main, c) == 0)
        pthread_detach(t);
    else
        NB_ERROR(LOG_COND, NULL, NULL, "cannot start the resize_confirm_window thread");
}

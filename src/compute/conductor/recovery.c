/* recovery.c - puts back in order what a killed nubo left half-done, so
 * that no server stays in BUILD (or in a task state) forever and no
 * allocation outlives its instance.
 *
 * Runs once, in a thread started with the conductor, over the instances
 * that existed before the start (newer ones belong to live requests):
 *  1. allocations of deleted instances, of ERROR instances without a host
 *     and of builds not yet scheduled are released, and so are the ports
 *     of deleted instances and of ERROR instances without a host (a build
 *     interrupted past scheduling releases its ports when it starts over);
 *  2. once the scheduler answers and the compute agents of the hosts it
 *     would choose (nova-compute services up by their last heartbeat)
 *     answer a ping, or [conductor] wait_for_computes_timeout seconds
 *     (default [DEFAULT] service_down_time) have passed: builds waiting to
 *     be scheduled are scheduled again, under the request ID of their
 *     create action. Hosts still silent then are named in a WARNING; a
 *     build that lands on one is rescheduled without counting an attempt
 *     (build.c), and fails with NoValidHost naming them only when no other
 *     host is left;
 *  3. builds past scheduling: the host's agent is asked about the guest; a
 *     running guest means only the report was lost (ACTIVE), no guest means
 *     the build starts over from scheduling (the interrupted attempt is not
 *     counted); an agent that does not answer within that wait (15 s for a
 *     host not up by its heartbeat) means ERROR with a fault (Nova's
 *     behaviour on restart);
 *  4. deletes and power actions left in a task state are run again;
 *     snapshots (image_* task states) are not: their task state is cleared;
 *  5. live migrations in progress (live_migrate_run.c): the source's agent
 *     is asked first; one it still runs (only the conductor restarted) is
 *     left to finish, its own result ends it. Else one still in its
 *     prechecks is refused as interrupted; one past them is finished when
 *     the destination's agent says the guest runs there, else (after an
 *     abort sent to the source, in case its agent still runs the job)
 *     rolled back, so no server stays in task migrating;
 *  6. cold migrations and resizes in progress (resize.c): rolled back to
 *     the source, or finished when interrupted after the switch with the
 *     guest running on the destination; confirm and revert run again.
 *     Moves whose hosts' agents do not answer are left for a later start;
 *  7. volume attaches acknowledged but never begun (volumes.c): the
 *     mapping without connection_info is destroyed and its volume,
 *     reserved or attaching, made available again; the action fails.
 * Events the crash left open are closed with result Error. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "compute/conductor/internal.h"
#include "compute/conductor/live_migrate.h"
#include "compute/objects/migration.h"
#include "compute/objects/instance.h"
#include "compute/objects/request_spec.h"
#include "compute/rpc/compute_api.h"
#include "compute/rpc/scheduler_api.h"
#include "db/db.h"
#include "placement/placement.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool wait_for(const char *host, double max_s);
static bool agent_up(json_t *waited, const char *host);
static bool ping(const char *host, int timeout_ms);

#define INTERRUPTED "Interrupted: nubo stopped before this event finished."

void cond_close_open_events(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    char now[32];
    nb_now_iso_us(now);
    struct nb_ctx sub; /* best-effort, like the event helpers */
    nb_ctx_child(&sub, ctx);
    nb_db_exec(c->db, &sub,
               "UPDATE instance_actions_events SET finish_time = ?, result = 'Error', details = ? "
               "WHERE finish_time IS NULL AND action_id IN (SELECT id FROM instance_actions "
               "WHERE instance_uuid = ?)",
               "sss", now, INTERRUPTED, uuid);
}

/* A context carrying the request ID of the instance's newest action (so
 * resumed work is recorded under it), else a fresh one. */
void cond_ctx_for_action(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                         const char *action)
{
    struct nb_ctx tmp;
    nb_ctx_init_system(&tmp, NULL);
    _cleanup_json_ json_t *row =
        action ? nb_db_row(c->db, &tmp,
                           "SELECT request_id, user_id, project_id FROM instance_actions WHERE "
                           "instance_uuid = ? AND action = ? ORDER BY id DESC LIMIT 1",
                           "ss", uuid, action)
               : NULL;
    nb_ctx_init_system(ctx, row ? nb_json_str(row, "request_id") : NULL);
    if (row && nb_json_str(row, "user_id"))
        nb_strlcpy(ctx->user_id, nb_json_str(row, "user_id"), sizeof(ctx->user_id));
    if (row && nb_json_str(row, "project_id"))
        nb_strlcpy(ctx->project_id, nb_json_str(row, "project_id"), sizeof(ctx->project_id));
}

/* A build past scheduling whose host's agent cannot be asked: ERROR with a
 * fault, as Nova's compute does with BUILDING instances on restart. Its
 * host keeps the allocation until the server is deleted. */
static void fail_interrupted_build(struct conductor *c, struct nb_ctx *actx, const char *uuid,
                                   const char *host, const char *task)
{
    int n = (int)nb_instance_transition(c->db, actx, uuid,
                                        &(struct nb_instance_change){.expect_task = {task},
                                                                     .vm_state = NB_VM_ERROR,
                                                                     .task_state = NB_NONE},
                                        NULL);
    nb_ctx_clear_error(actx); /* a failed update is left alone like a lost race */
    if (n != 1)
        return;
    cond_close_open_events(c, actx, uuid);
    char msg[512];
    snprintf(msg, sizeof(msg),
             "Build of instance %s aborted: nubo stopped while the instance was in task "
             "state %s on host %s, and that host's compute service does not answer.",
             uuid, task, host ? host : "(none)");
    cond_fault(c, actx, uuid, 500, msg,
               "The build was interrupted by a restart; delete the server and create it "
               "again. Its allocation stays on the host until then.",
               host);
    cond_action_finish(c, actx, uuid, "Error");
    NB_WARN(LOG_COND, actx, uuid, "%s Instance set to ERROR.", msg);
}

/* The guest had been spawned; only the report was lost: ACTIVE. */
static void finish_spawned_build(struct conductor *c, struct nb_ctx *actx, const char *uuid,
                                 const char *host, const char *task)
{
    int n = cond_build_spawned(c, actx, uuid, task, host);
    nb_ctx_clear_error(actx); /* a failed update is left alone like a lost race */
    if (n != 1)
        return;
    cond_event_finish(c, actx, uuid, EV_SPAWN, true, NULL);
    cond_event_finish(c, actx, uuid, EV_BUILD, true, NULL);
    cond_close_open_events(c, actx, uuid);
    cond_action_finish(c, actx, uuid, NULL);
    NB_INFO(LOG_COND, actx, uuid,
            "The guest was running on %s when nubo restarted: build completed, instance ACTIVE",
            host);
}

/* No guest (or not a running one): clean the host, start over from
 * scheduling. The attempt the restart interrupted is given back: it did
 * not fail on that host. */
static void reschedule_interrupted_build(struct conductor *c, struct nb_ctx *actx, const char *uuid,
                                         const char *host, const char *task)
{
    nb_compute_destroy_guest(actx, host, uuid);
    _cleanup_json_ json_t *row = cond_instance_get(c, actx, uuid);
    _cleanup_json_ json_t *stored = nb_json_parse(row ? nb_json_str(row, "request_spec") : NULL);
    _cleanup_json_ json_t *rspec = NULL;
    if (json_is_object(stored)) {
        struct nb_request_spec spec;
        nb_request_spec_from_json(&spec, stored);
        if (spec.num_attempts > 0)
            spec.num_attempts--;
        rspec = nb_request_spec_to_json(&spec);
        nb_request_spec_free(&spec);
    }
    int n = cond_build_unscheduled(c, actx, uuid, task, host, rspec);
    nb_ctx_clear_error(actx); /* a failed update is left alone like a lost race */
    if (n != 1)
        return;
    cond_close_open_events(c, actx, uuid);
    cond_release_allocations(c, actx, uuid, host);
    NB_INFO(LOG_COND, actx, uuid,
            "Build on %s was interrupted in task state %s by a restart: scheduling again", host,
            task);
    cond_build_instance(c, actx, uuid);
}

/* Builds that were past scheduling when nubo died: the host's agent says
 * whether the guest runs (then ACTIVE) or not (then scheduled again); if
 * the agent does not answer, ERROR. */
static void resume_interrupted_builds(struct conductor *c, const struct cond_scope *s,
                                      struct nb_ctx *ctx, json_t *waited)
{
    _cleanup_json_ json_t *rows = nb_instance_list_in_state(
        c->db, ctx,
        &(struct nb_instance_filter){.vm = {NB_VM_BUILDING},
                                     .task = {NB_TASK_NETWORKING, NB_TASK_BDM, NB_TASK_SPAWNING},
                                     .max_id = s->max_id});
    nb_ctx_clear_error(ctx); /* a failed query: nothing to do this time */
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *uuid = nb_json_str(r, "uuid"), *host = nb_json_str(r, "host");
        const char *task = nb_json_str(r, "task_state");
        if (!uuid || !task || !cond_scope_row(s, r))
            continue;
        struct nb_ctx actx;
        cond_ctx_for_action(c, &actx, uuid, "create");
        if (!host || !agent_up(waited, host)) {
            fail_interrupted_build(c, &actx, uuid, host, task);
            continue;
        }
        bool found = false;
        int power = NB_POWER_NOSTATE;
        int answered = nb_compute_guest_info(&actx, host, uuid, 10000, &found, &power);
        nb_ctx_clear_error(&actx); /* handled: no answer fails the build */
        if (answered < 0)
            fail_interrupted_build(c, &actx, uuid, host, task);
        else if (found && power == NB_POWER_RUNNING)
            finish_spawned_build(c, &actx, uuid, host, task);
        else
            reschedule_interrupted_build(c, &actx, uuid, host, task);
    }
}

/* Releases allocations whose instance is gone or never got a host. */
static void release_leaked_allocations(struct conductor *c, const struct cond_scope *s,
                                       struct nb_ctx *ctx)
{
    /* placement names its consumers, and of those (one query for them all)
     * the instances that are gone or never got a host are released */
    _cleanup_json_ json_t *consumers = nb_placement_list_consumers(ctx);
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT DISTINCT uuid, nubo_conductor FROM instances WHERE uuid IN (SELECT value FROM "
             "%s) AND (deleted != 0 OR (vm_state = ? AND host IS NULL) OR (vm_state = ? AND "
             "task_state = "
             "? AND host IS NULL AND id <= ?))",
             nb_db_json_each(c->db));
    _cleanup_json_ json_t *rows = !consumers
                                      ? NULL
                                      : nb_db_rows(c->db, ctx, sql, "jsssi", consumers, NB_VM_ERROR,
                                                   NB_VM_BUILDING, NB_TASK_SCHEDULING, s->max_id);
    nb_ctx_clear_error(ctx); /* a failed query: nothing to do this time */
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *uuid = nb_json_str(r, "uuid");
        if (!cond_scope_row(s, r))
            continue;
        struct nb_ctx sub; /* one release failing does not stop the others */
        nb_ctx_child(&sub, ctx);
        if (nb_placement_delete_allocations(&sub, uuid) == 0)
            NB_WARN(LOG_COND, ctx, uuid,
                    "Released the allocations of an instance that is deleted, unscheduled or "
                    "failed without a host (left by an interrupted run)");
    }
}

/* Whether host's agent answers, asked once per recovery (waits up to 15 s
 * for agents that start after the conductor). */
static bool agent_up(json_t *waited, const char *host)
{
    json_t *known = json_object_get(waited, host);
    if (known)
        return json_is_true(known);
    bool up = wait_for(host, 15);
    json_object_set_new(waited, host, json_boolean(up));
    return up;
}

/* Whether host's agent (host NULL: the scheduler) answers one ping within
 * timeout_ms. */
static bool ping(const char *host, int timeout_ms)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    return host ? nb_compute_ping(&ctx, host, timeout_ms) : nb_scheduler_ping(&ctx, timeout_ms);
}

/* Waits until host's agent (host NULL: the scheduler) answers a ping, up
 * to max_s seconds. */
static bool wait_for(const char *host, double max_s)
{
    double deadline = nb_time_mono() + max_s;
    do {
        if (ping(host, 2000))
            return true;
        usleep(250 * 1000);
    } while (nb_time_mono() < deadline);
    return false;
}

/* Hosts whose nova-compute service the scheduler counts as up (heard from
 * within service_down_time, not forced down): those it may choose. New
 * ref, [host, …]. */
static json_t *hosts_up_by_heartbeat(struct conductor *c, struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(c->db, ctx,
                   "SELECT host, last_seen_up, created_at FROM services WHERE \"binary\" = "
                   "'nova-compute' AND deleted = 0 AND disabled = 0 AND forced_down = 0 "
                   "ORDER BY host",
                   "");
    nb_ctx_clear_error(ctx); /* a failed query: nothing to do this time */
    double down_time = (double)nb_conf_int("DEFAULT", "service_down_time", 60);
    json_t *hosts = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *seen = nb_json_str(r, "last_seen_up");
        double t = nb_time_parse(seen ? seen : nb_json_str(r, "created_at"));
        if (nb_json_str(r, "host") && t > 0 && nb_time_now() - t <= down_time)
            json_array_append_new(hosts, json_string(nb_json_str(r, "host")));
    }
    return hosts;
}

/* Before builds are scheduled again: waits, up to [conductor]
 * wait_for_computes_timeout s (default service_down_time), for the agents
 * of the hosts the scheduler would choose, which start after the conductor
 * (later still when they run in processes of their own). Records in waited
 * whether each answered. */
static void wait_for_computes(struct conductor *c, struct nb_ctx *ctx, json_t *waited)
{
    _cleanup_json_ json_t *hosts = hosts_up_by_heartbeat(c, ctx);
    if (!json_array_size(hosts))
        return;
    long long max_s = nb_conf_int("conductor", "wait_for_computes_timeout",
                                  nb_conf_int("DEFAULT", "service_down_time", 60));
    double start = nb_time_mono(), deadline = start + (double)(max_s > 0 ? max_s : 0);
    size_t missing;
    for (;;) {
        missing = 0;
        size_t i;
        json_t *h;
        json_array_foreach (hosts, i, h) {
            const char *host = json_string_value(h);
            if (json_is_true(json_object_get(waited, host)))
                continue;
            bool up = ping(host, 2000);
            json_object_set_new(waited, host, json_boolean(up));
            missing += !up;
        }
        if (!missing || nb_time_mono() >= deadline)
            break;
        usleep(250 * 1000);
    }
    if (!missing) {
        NB_INFO(LOG_COND, ctx, NULL,
                "The compute services of %zu host(s) answer (after %.1f s): resuming builds",
                json_array_size(hosts), nb_time_mono() - start);
        return;
    }
    _cleanup_free_ char *names = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&names, &len);
    const char *host;
    json_t *up;
    json_object_foreach (waited, host, up) {
        if (!json_is_true(up))
            fprintf(f, "%s%s", ftell(f) ? ", " : "", host);
    }
    fclose(f);
    NB_WARN(LOG_COND, ctx, NULL,
            "The compute services of host(s) %s did not answer within %lld s "
            "([conductor] wait_for_computes_timeout): resuming builds anyway; a build "
            "scheduled there is moved to another host without counting an attempt",
            names, max_s);
}

/* Whether any build of before the start is to be scheduled again or was
 * past scheduling (then its host's agent is asked). */
static bool has_builds_to_resume(struct conductor *c, const struct cond_scope *s,
                                 struct nb_ctx *ctx)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *rows = nb_instance_list_in_state(
        c->db, &sub, &(struct nb_instance_filter){.vm = {NB_VM_BUILDING}, .max_id = s->max_id});
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r)
        if (cond_scope_row(s, r))
            return true;
    return false;
}

static void resume_builds(struct conductor *c, const struct cond_scope *s, struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *rows = nb_instance_list_in_state(
        c->db, ctx,
        &(struct nb_instance_filter){
            .vm = {NB_VM_BUILDING}, .task = {NB_NONE, NB_TASK_SCHEDULING}, .max_id = s->max_id});
    nb_ctx_clear_error(ctx); /* a failed query: nothing to do this time */
    for (size_t k = json_array_size(rows); k-- > 0;)
        if (!cond_scope_row(s, json_array_get(rows, k)))
            json_array_remove(rows, k);
    if (json_array_size(rows) && !wait_for(NULL, 30))
        NB_ERROR(LOG_COND, ctx, NULL, "the scheduler does not answer; scheduling anyway");
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *uuid = nb_json_str(r, "uuid");
        struct nb_ctx actx;
        cond_ctx_for_action(c, &actx, uuid, "create");
        cond_close_open_events(c, &actx, uuid);
        nb_instance_transition(c->db, &actx, uuid,
                               &(struct nb_instance_change){
                                   .expect_vm = {NB_VM_BUILDING},
                                   .expect_task = {NB_NONE, NB_TASK_SCHEDULING},
                                   .task_state = NB_TASK_SCHEDULING,
                                   .host = NB_NONE,
                                   .node = NB_NONE,
                               },
                               NULL);
        nb_ctx_clear_error(&actx); /* a failed update: scheduled from where it is */
        NB_INFO(LOG_COND, &actx, uuid, "Resuming the build interrupted by a restart");
        cond_build_instance(c, &actx, uuid);
    }
}

/* Deletes and power actions left in a task state: run them again. */
static void resume_actions(struct conductor *c, const struct cond_scope *s, struct nb_ctx *ctx,
                           json_t *waited)
{
    _cleanup_json_ json_t *rows = nb_instance_list_in_state(
        c->db, ctx,
        &(struct nb_instance_filter){
            .task = {NB_TASK_DELETING, NB_TASK_POWERING_ON, NB_TASK_POWERING_OFF, NB_TASK_REBOOTING,
                     NB_TASK_REBOOTING_HARD, NB_TASK_REBOOT_PENDING, NB_TASK_REBOOT_PENDING_HARD,
                     NB_TASK_REBOOT_STARTED, NB_TASK_REBOOT_STARTED_HARD, NB_TASK_PAUSING,
                     NB_TASK_UNPAUSING, NB_TASK_SUSPENDING, NB_TASK_RESUMING},
            .max_id = s->max_id});
    nb_ctx_clear_error(ctx); /* a failed query: nothing to do this time */
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *uuid = nb_json_str(r, "uuid"), *host = nb_json_str(r, "host");
        const char *task = nb_json_str(r, "task_state");
        if (!uuid || !task || !cond_scope_row(s, r))
            continue;
        if (host)
            agent_up(waited, host); /* else the delete/action falls back to local handling */
        static const char *const by_task[][2] = {
            {"deleting", "delete"}, {"powering-on", "start"}, {"powering-off", "stop"},
            {"pausing", "pause"},   {"unpausing", "unpause"}, {"suspending", "suspend"},
            {"resuming", "resume"},
        };
        const char *action = "reboot";
        for (size_t k = 0; k < sizeof(by_task) / sizeof(by_task[0]); k++)
            if (!strcmp(task, by_task[k][0]))
                action = by_task[k][1];
        struct nb_ctx actx;
        cond_ctx_for_action(c, &actx, uuid, action);
        cond_close_open_events(c, &actx, uuid);
        NB_INFO(LOG_COND, &actx, uuid, "Resuming %s (task_state %s) interrupted by a restart",
                action, task);
        json_t *args = json_pack("{s:s, s:s}", "uuid", uuid, "reboot_type",
                                 strstr(task, "hard") ? "HARD" : "SOFT");
        if (!strcmp(action, "delete")) {
            cond_delete_instance(c, &actx, uuid);
        } else {
            char method[32];
            snprintf(method, sizeof(method), "%s_instance", action);
            cond_power_action(c, &actx, method, args);
        }
        json_decref(args);
    }
}

/* A createImage interrupted by the restart: Nova's _init_instance clears
 * the image_* task state (the snapshot is not retried). */
static void clear_interrupted_snapshots(struct conductor *c, const struct cond_scope *s,
                                        struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *rows = nb_instance_list_in_state(
        c->db, ctx,
        &(struct nb_instance_filter){
            .task = {NB_TASK_IMAGE_SNAPSHOT, NB_TASK_IMAGE_SNAPSHOT_PENDING,
                     NB_TASK_IMAGE_PENDING_UPLOAD, NB_TASK_IMAGE_UPLOADING},
            .max_id = s->max_id});
    nb_ctx_clear_error(ctx); /* a failed query: nothing to do this time */
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *uuid = nb_json_str(r, "uuid");
        if (!cond_scope_row(s, r))
            continue;
        struct nb_ctx actx;
        cond_ctx_for_action(c, &actx, uuid, "createImage");
        cond_close_open_events(c, &actx, uuid);
        nb_instance_transition(c->db, &actx, uuid,
                               &(struct nb_instance_change){
                                   .expect_task = {nb_json_str(r, "task_state")},
                                   .task_state = NB_NONE,
                               },
                               NULL);
        nb_ctx_clear_error(&actx); /* a failed update: the next restart tries again */
        NB_INFO(LOG_COND, &actx, uuid,
                "Snapshot (task_state %s) interrupted by a restart; "
                "task state cleared",
                nb_json_str(r, "task_state"));
    }
}

/* Step 5: live migrations a restart interrupted. */
static void recover_live_migrations(struct conductor *c, const struct cond_scope *s,
                                    struct nb_ctx *ctx)
{
    _cleanup_json_ json_t *rows =
        nb_db_rows(c->db, ctx,
                   "SELECT uuid, instance_uuid, status FROM migrations WHERE deleted = 0 AND "
                   "migration_type = 'live-migration' AND status IN ('accepted', 'queued', "
                   "'preparing', 'running', 'running (post-copy)', 'post-migrating') ORDER BY id",
                   "");
    nb_ctx_clear_error(ctx); /* a failed query: nothing to do this time */
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *uuid = nb_json_str(r, "instance_uuid");
        if (!cond_scope_instance(c, s, uuid))
            continue;
        struct nb_ctx actx;
        cond_ctx_for_action(c, &actx, uuid, "live-migration");
        cond_lm_recover(c, &actx, nb_json_str(r, "uuid"), "by a restart of nubo");
    }
}

/* Step 6: cold migrations and resizes a restart interrupted. */
static void recover_resizes(struct conductor *c, const struct cond_scope *s, struct nb_ctx *ctx,
                            json_t *waited)
{
    _cleanup_json_ json_t *rows = nb_db_rows(
        c->db, ctx,
        "SELECT * FROM migrations WHERE deleted = 0 AND migration_type IN ('migration', "
        "'resize') AND status IN ('pre-migrating', 'migrating', 'post-migrating', 'confirming', "
        "'reverting') ORDER BY id",
        "");
    nb_ctx_clear_error(ctx); /* a failed query: nothing to do this time */
    size_t i;
    json_t *mig;
    json_array_foreach (rows, i, mig) {
        const char *uuid = nb_json_str(mig, "instance_uuid");
        const char *st = nb_json_str(mig, "status");
        const char *src = nb_json_str(mig, "source_compute");
        const char *dst = nb_json_str(mig, "dest_compute");
        if (!cond_scope_instance(c, s, uuid))
            continue;
        if ((src && !agent_up(waited, src)) || (dst && !agent_up(waited, dst))) {
            NB_WARN(LOG_COND, ctx, uuid,
                    "Migration %s (%s) interrupted by a restart: the agent of %s does not answer; "
                    "left for a later start",
                    nb_json_str(mig, "uuid"), st, src && !agent_up(waited, src) ? src : dst);
            continue;
        }
        const char *action = !strcmp(st, "confirming")  ? "confirmResize"
                             : !strcmp(st, "reverting") ? "revertResize"
                             : !strcmp(nb_json_str(mig, "migration_type"), "resize") ? "resize"
                                                                                     : "migrate";
        struct nb_ctx actx;
        cond_ctx_for_action(c, &actx, uuid, action);
        cond_close_open_events(c, &actx, uuid);
        cond_resize_recover(c, &actx, mig, dst && cond_guest_running_on(dst, uuid));
    }
}

bool cond_scope_row(const struct cond_scope *s, const json_t *row)
{
    const char *owner = row ? nb_json_str(row, "nubo_conductor") : NULL;
    if (s->only)
        return owner && !strcmp(owner, s->only);
    return !(owner && s->skip && json_object_get(s->skip, owner));
}

bool cond_scope_instance(struct conductor *c, const struct cond_scope *s, const char *uuid)
{
    if (!s->only && !s->skip)
        return true;
    struct nb_ctx tmp;
    nb_ctx_init_system(&tmp, NULL);
    _cleanup_json_ json_t *row =
        nb_db_row(c->db, &tmp, "SELECT nubo_conductor FROM instances WHERE uuid = ?", "s", uuid);
    nb_ctx_clear_error(&tmp); /* unknown: handled as without an owner */
    return cond_scope_row(s, row);
}

void cond_recover(struct conductor *c, const struct cond_scope *s)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    release_leaked_allocations(c, s, &ctx);
    cond_release_leaked_ports(c, s, &ctx);
    json_t *waited = json_object(); /* {host: agent answers?} */
    if (has_builds_to_resume(c, s, &ctx))
        wait_for_computes(c, &ctx, waited);
    resume_builds(c, s, &ctx);
    resume_interrupted_builds(c, s, &ctx, waited);
    resume_actions(c, s, &ctx, waited);
    clear_interrupted_snapshots(c, s, &ctx);
    recover_live_migrations(c, s, &ctx);
    recover_resizes(c, s, &ctx, waited);
    cond_recover_rebuilds(c, s, &ctx);
    cond_recover_attaches(c, s, &ctx, c->last_bdm_id_at_start);
    json_decref(waited);
    if (s->only)
        NB_INFO(LOG_COND, &ctx, NULL, "recovery of the work of control plane %s done", s->only);
    else
        NB_INFO(LOG_COND, &ctx, NULL, "start-up recovery done");
}

static void *recovery_main(void *arg)
{
    struct conductor *c = arg;
    struct cond_scope s;
    cond_leases_startup_scope(c, &s);
    cond_recover(c, &s);
    cond_leases_startup_done(c, &s);
    return NULL;
}

void cond_recover_start(struct conductor *c)
{
    if (nb_thread_detached(recovery_main, c) != 0)
        NB_ERROR(LOG_COND, NULL, NULL, "cannot start the recovery thread");
}

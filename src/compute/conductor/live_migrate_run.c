/* live_migrate_run.c - a live migration once the source host runs it: the
 * statuses and progress it reports (with the events of each phase), its
 * end (the post steps on both hosts and the instance on the destination,
 * or the rollback), and abort / force-complete forwarded to the source.
 *
 * Statuses only move forward: each update is guarded by the status it
 * leaves (nb_migration_update's expected_status), so a report that arrives
 * late changes nothing; the phase events are recorded only by the update
 * that moved the status.
 *
 * A migration ends once: its end (the result handler, or recovery after a
 * restart) runs for one migration at a time in this process (end_begin),
 * re-reading the record first, and a finish claims the record by moving it
 * to post-migrating from a status in progress, so a second finish (another
 * control plane's) finds it taken. */
#include "common/metrics.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/compute.h"
#include "compute/conductor/internal.h"
#include "compute/conductor/live_migrate.h"
#include "compute/objects/instance.h"
#include "compute/objects/migration.h"
#include "compute/rpc/compute_api.h"
#include "db/db.h"
#include "network/network.h"
#include "placement/placement.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *str(const json_t *o, const char *k)
{
    const char *s = nb_json_str(o, k);
    return s ? s : "";
}

/* Moves migration uuid to status if it is in one of from (NULL-ended).
 * True when it moved. */
static bool advance(struct conductor *c, struct nb_ctx *ctx, const char *uuid, const char *status,
                    const char *const *from)
{
    for (; *from; from++) {
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        struct nb_migration_change ch = {.status = status, .expected_status = *from};
        int n = nb_migration_update(c->db, &sub, uuid, &ch);
        if (n > 0)
            return true;
        if (n < 0)
            NB_ERROR(LOG_LM, ctx, NULL, "could not set migration %s to %s: %s", uuid, status,
                     nb_ctx_message(&sub));
    }
    return false;
}

static const char *const in_progress[] = {NB_MIGRATION_ACCEPTED,  NB_MIGRATION_QUEUED,
                                          NB_MIGRATION_PREPARING, NB_MIGRATION_RUNNING,
                                          "running (post-copy)",  NULL};

/* The migrations whose end runs in this process (one end at a time per
 * migration: the result and a recovery may arrive together). */
#define MAX_ENDING 128
static pthread_mutex_t ending_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ending_cond = PTHREAD_COND_INITIALIZER;
static char ending[MAX_ENDING][NB_UUID_LEN];

/* Waits until no other thread of this process ends migration m, then
 * marks it as ended by this one (until end_done). */
static void end_begin(const char *m)
{
    if (!*m)
        return;
    pthread_mutex_lock(&ending_lock);
    for (;;) {
        int busy = -1, free_slot = -1;
        for (int i = 0; i < MAX_ENDING && busy < 0; i++) {
            if (!strcmp(ending[i], m))
                busy = i;
            else if (!ending[i][0] && free_slot < 0)
                free_slot = i;
        }
        if (busy < 0 && free_slot >= 0) {
            nb_strlcpy(ending[free_slot], m, sizeof(ending[free_slot]));
            break;
        }
        pthread_cond_wait(&ending_cond, &ending_lock);
    }
    pthread_mutex_unlock(&ending_lock);
}

static void end_done(const char *m)
{
    if (!*m)
        return;
    pthread_mutex_lock(&ending_lock);
    for (int i = 0; i < MAX_ENDING; i++)
        if (!strcmp(ending[i], m))
            ending[i][0] = '\0';
    pthread_cond_broadcast(&ending_cond);
    pthread_mutex_unlock(&ending_lock);
}

static bool status_in(const char *status, const char *const *set)
{
    for (; status && *set; set++)
        if (!strcmp(status, *set))
            return true;
    return false;
}

/* The instance's progress while it migrates, as Nova's libvirt driver
 * writes it: the share of the data (memory and disks) already sent. */
static void set_progress(struct conductor *c, struct nb_ctx *ctx, const char *uuid,
                         const struct nb_migration_change *p)
{
    long long total = p->memory_total + p->disk_total;
    long long remaining = p->memory_remaining + p->disk_remaining;
    if (!uuid || total <= 0)
        return;
    if (remaining > total)
        remaining = total;
    struct nb_instance_change ch = {
        .expect_task = {NB_TASK_MIGRATING},
        .set_progress = true,
        .progress = (int)(100 - remaining * 100 / total),
    };
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    if (nb_instance_transition(c->db, &sub, uuid, &ch, NULL) == NB_TRANSITION_ERROR)
        NB_ERROR(LOG_LM, ctx, uuid, "could not record the migration's progress: %s",
                 nb_ctx_message(&sub));
}

json_t *cond_live_migration_status(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *mig = str(args, "migration_uuid"), *uuid = nb_json_str(args, "uuid");
    const char *status = nb_json_str(args, "status");
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *row = nb_migration_get(c->db, &sub, mig);
    if (!row)
        return json_pack("{s:b}", "ok", 0);
    static const char *const to_queued[] = {NB_MIGRATION_ACCEPTED, NULL};
    static const char *const to_preparing[] = {NB_MIGRATION_ACCEPTED, NB_MIGRATION_QUEUED, NULL};
    static const char *const to_running[] = {NB_MIGRATION_PREPARING, NULL};
    static const char *const to_post_copy[] = {NB_MIGRATION_RUNNING, NULL};
    if (status && !strcmp(status, NB_MIGRATION_QUEUED)) {
        advance(c, ctx, mig, status, to_queued);
    } else if (status && !strcmp(status, NB_MIGRATION_PREPARING)) {
        if (advance(c, ctx, mig, status, to_preparing))
            cond_event_start(c, ctx, uuid, EV_LM_PRE, nb_json_str(row, "dest_compute"));
    } else if (status && !strcmp(status, NB_MIGRATION_RUNNING)) {
        if (advance(c, ctx, mig, status, to_running)) {
            cond_event_finish(c, ctx, uuid, EV_LM_PRE, true, NULL);
            cond_event_start(c, ctx, uuid, EV_LM_RUN, nb_json_str(row, "source_compute"));
        }
    } else if (status) {
        advance(c, ctx, mig, status, to_post_copy);
    }
    json_t *p = json_object_get(args, "progress");
    if (json_is_object(p)) {
        struct nb_migration_change ch = {
            .set_memory = true,
            .memory_total = nb_json_int(p, "memory_total", 0),
            .memory_processed = nb_json_int(p, "memory_processed", 0),
            .memory_remaining = nb_json_int(p, "memory_remaining", 0),
            .set_disk = true,
            .disk_total = nb_json_int(p, "disk_total", 0),
            .disk_processed = nb_json_int(p, "disk_processed", 0),
            .disk_remaining = nb_json_int(p, "disk_remaining", 0),
        };
        static const char *const running[] = {NB_MIGRATION_RUNNING, "running (post-copy)", NULL};
        for (const char *const *s = running; *s; s++) {
            ch.expected_status = *s;
            struct nb_ctx pctx;
            nb_ctx_child(&pctx, ctx);
            if (nb_migration_update(c->db, &pctx, mig, &ch) != 0)
                break;
        }
        set_progress(c, ctx, uuid, &ch);
    }
    return json_pack("{s:b}", "ok", 1);
}

/* The instance as the agents get it, or NULL (logged). */
static json_t *agent_view(struct conductor *c, struct nb_ctx *ctx, const char *uuid)
{
    _cleanup_json_ json_t *row = cond_instance_get(c, ctx, uuid);
    if (!row) {
        NB_ERROR(LOG_LM, ctx, uuid, "live migration of a missing instance");
        return NULL;
    }
    return cond_instance_for_agent(c, ctx, row);
}

/* A call to an agent: NULL when it answered ok, else the cause in msg. */
static bool step_ok(json_t *reply, const struct nb_ctx *sub, const char *host, char *msg, size_t n)
{
    if (!reply)
        snprintf(msg, n, "The compute service of host %s did not answer: %s", host,
                 nb_ctx_message(sub));
    else if (!json_is_true(json_object_get(reply, "ok")))
        snprintf(msg, n, "%s", str(reply, "message"));
    json_decref(reply);
    return msg[0] == '\0';
}

/* Switches the instance to the destination, clearing its task. */
static void switch_host(struct conductor *c, struct nb_ctx *ctx, const json_t *mig)
{
    const char *uuid = str(mig, "instance_uuid");
    struct nb_instance_change ch = {
        .expect_task = {NB_TASK_MIGRATING},
        .expect_host = nb_json_str(mig, "source_compute"),
        .host = nb_json_str(mig, "dest_compute"),
        .node = nb_json_str(mig, "dest_node") ? nb_json_str(mig, "dest_node")
                                              : nb_json_str(mig, "dest_compute"),
        .task_state = NB_NONE,
        .reset_progress = true,
    };
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    if (nb_instance_transition(c->db, &sub, uuid, &ch, NULL) != NB_TRANSITION_MOVED)
        NB_ERROR(LOG_LM, ctx, uuid, "could not move the instance record to %s: %s",
                 str(mig, "dest_compute"),
                 nb_ctx_failed(&sub) ? nb_ctx_message(&sub)
                                     : "not in task migrating on the source");
}

void cond_lm_finish(struct conductor *c, struct nb_ctx *ctx, const json_t *mig, bool shared,
                    const char *note)
{
    const char *uuid = str(mig, "instance_uuid"), *m = str(mig, "uuid");
    const char *dest = str(mig, "dest_compute"), *source = str(mig, "source_compute");
    /* the claim: from a status in progress to post-migrating (a record
     * already post-migrating is the recovery of an interrupted finish) */
    if (strcmp(str(mig, "status"), NB_MIGRATION_POST_MIGRATING) &&
        !advance(c, ctx, m, NB_MIGRATION_POST_MIGRATING, in_progress)) {
        NB_WARN(LOG_LM, ctx, uuid, "live migration %s is no longer in progress: not finished again",
                m);
        return;
    }
    struct nb_ctx sub;
    cond_event_finish(c, ctx, uuid, EV_LM_RUN, true, note);
    int tmo = c->call_timeout_ms;
    char msg[1400] = "", srcmsg[1400] = "";
    cond_event_start(c, ctx, uuid, EV_LM_POST_DEST, dest);
    json_t *inst = agent_view(c, ctx, uuid);
    nb_ctx_child(&sub, ctx);
    bool ok = inst && step_ok(nb_compute_post_live_migration_at_destination(&sub, dest,
                                                                            json_incref(inst), tmo),
                              &sub, dest, msg, sizeof(msg));
    cond_event_finish(c, ctx, uuid, EV_LM_POST_DEST, ok, ok ? NULL : msg);
    /* Nova's migrate_instance_finish: the ports bound to the destination,
     * no longer migrating (the guest runs there whatever the post step
     * said); the source's agent then lets their wiring go */
    nb_ctx_child(&sub, ctx);
    if (nb_network_bind_instance_host(&sub, uuid, dest) < 0)
        NB_ERROR(LOG_LM, ctx, uuid, "could not bind the instance's ports to %s: %s", dest,
                 nb_ctx_message(&sub));
    nb_ctx_child(&sub, ctx);
    if (inst && !step_ok(nb_compute_post_live_migration_at_source(&sub, source, json_incref(inst),
                                                                  shared, tmo),
                         &sub, source, srcmsg, sizeof(srcmsg)))
        NB_WARN(LOG_LM, ctx, uuid, "cleanup of the source %s after the live migration failed: %s",
                source, srcmsg);
    json_decref(inst);
    /* the guest runs on the destination whatever the post steps said */
    switch_host(c, ctx, mig);
    /* Nova's _post_live_migration: the source's volume attachments go */
    nb_ctx_child(&sub, ctx);
    if (cond_volumes_release_others(c, &sub, uuid) < 0)
        NB_ERROR(LOG_LM, ctx, uuid, "could not delete the volume attachments of %s: %s", source,
                 nb_ctx_message(&sub));
    nb_ctx_child(&sub, ctx);
    if (nb_placement_delete_allocations(&sub, m) < 0)
        NB_ERROR(LOG_LM, ctx, uuid, "could not delete the allocation of migration %s: %s", m,
                 nb_ctx_message(&sub));
    nb_ctx_child(&sub, ctx);
    nb_migration_set_status(c->db, &sub, m, ok ? NB_MIGRATION_COMPLETED : NB_MIGRATION_ERROR, NULL);
    if (ok) {
        NB_INFO(LOG_LM, ctx, uuid, "Migrating instance to %s finished successfully.", dest);
        cond_action_finish(c, ctx, uuid, NULL);
        return;
    }
    char fault[1800];
    snprintf(fault, sizeof(fault),
             "Live migration of instance %s to host %s failed in post_live_migration_at_"
             "destination: %s",
             uuid, dest, msg);
    NB_ERROR(LOG_LM, ctx, uuid, "%s (the guest runs on %s: the instance stays there)", fault, dest);
    cond_fault(c, ctx, uuid, 500, fault,
               "phase post_live_migration_at_destination; the guest runs "
               "on the destination, where the instance now is",
               dest);
    cond_action_finish(c, ctx, uuid, "Error");
}

void cond_lm_rollback(struct conductor *c, struct nb_ctx *ctx, const json_t *mig, const char *phase,
                      const char *message, bool cancelled, bool shared)
{
    const char *uuid = str(mig, "instance_uuid"), *m = str(mig, "uuid");
    const char *dest = str(mig, "dest_compute"), *source = str(mig, "source_compute");
    const char *ev = !strcmp(phase, "pre_live_migration") ? EV_LM_PRE
                     : !strcmp(phase, "live_migration")   ? EV_LM_RUN
                                                          : NULL;
    if (ev)
        cond_event_finish(c, ctx, uuid, ev, false, message);
    if (strcmp(phase, "queued") && strcmp(phase, "prechecks") && *dest) {
        char msg[1400] = "";
        cond_event_start(c, ctx, uuid, EV_LM_ROLLBACK_DEST, dest);
        json_t *inst = agent_view(c, ctx, uuid);
        struct nb_ctx sub;
        nb_ctx_child(&sub, ctx);
        bool ok = inst && step_ok(nb_compute_rollback_live_migration_at_destination(
                                      &sub, dest, inst, shared, c->call_timeout_ms),
                                  &sub, dest, msg, sizeof(msg));
        cond_event_finish(c, ctx, uuid, EV_LM_ROLLBACK_DEST, ok, ok ? NULL : msg);
    }
    struct nb_ctx sub;
    /* Nova's _rollback_volume_bdms: the mappings back to the source's
     * attachments, the destination's deleted */
    nb_ctx_child(&sub, ctx);
    if (cond_volumes_move(c, &sub, uuid, source) < 0)
        NB_ERROR(LOG_LM, ctx, uuid, "could not attach the volumes back for %s: %s", source,
                 nb_ctx_message(&sub));
    cond_lm_allocations_back(c, ctx, uuid, m);
    /* the ports stay bound to the source, no longer migrating */
    nb_ctx_child(&sub, ctx);
    if (nb_network_set_migrating_to(&sub, uuid, NULL) < 0)
        NB_ERROR(LOG_LM, ctx, uuid, "could not clear migrating_to of the instance's ports: %s",
                 nb_ctx_message(&sub));
    struct nb_instance_change ch = {.expect_task = {NB_TASK_MIGRATING},
                                    .expect_host = source,
                                    .task_state = NB_NONE,
                                    .reset_progress = true};
    nb_ctx_child(&sub, ctx);
    if (nb_instance_transition(c->db, &sub, uuid, &ch, NULL) != NB_TRANSITION_MOVED)
        NB_WARN(LOG_LM, ctx, uuid, "the instance was no longer in task migrating on %s", source);
    nb_ctx_child(&sub, ctx);
    nb_migration_set_status(c->db, &sub, m, cancelled ? NB_MIGRATION_CANCELLED : NB_MIGRATION_ERROR,
                            NULL);
    if (cancelled) {
        NB_INFO(LOG_LM, ctx, uuid, "Live migration %s to %s cancelled (%s): %s", m, dest, phase,
                message);
        cond_action_finish(c, ctx, uuid, NULL);
        return;
    }
    char fault[1800], details[600];
    snprintf(fault, sizeof(fault), "Live migration of instance %s to host %s failed in %s: %s",
             uuid, *dest ? dest : "?", phase, message);
    snprintf(details, sizeof(details),
             "phase %s, source %s, destination %s; rolled back: the instance stays on %s", phase,
             source, *dest ? dest : "?", source);
    NB_ERROR(LOG_LM, ctx, uuid, "%s; rolled back, the instance stays on %s", fault, source);
    cond_fault(c, ctx, uuid, 500, fault, details, source);
    cond_action_finish(c, ctx, uuid, "Error");
}

void cond_live_migration_result(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    const char *m = str(args, "migration_uuid");
    end_begin(m);
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *mig = nb_migration_get(c->db, &sub, m);
    const char *status = nb_json_str(mig, "status");
    if (!status_in(status, in_progress)) {
        NB_WARN(LOG_LM, ctx, nb_json_str(args, "uuid"),
                "result of live migration %s ignored: the migration is %s", m,
                status ? status : "gone");
        end_done(m);
        return;
    }
    bool shared = json_is_true(json_object_get(args, "shared_storage"));
    bool ok = json_is_true(json_object_get(args, "ok"));
    bool cancelled = json_is_true(json_object_get(args, "cancelled"));
    nb_metrics_add(NB_M_LIVE_MIGRATIONS, 1,
                   (const char *const[]){ok          ? "completed"
                                         : cancelled ? "cancelled"
                                                     : "error"});
    if (ok)
        cond_lm_finish(c, ctx, mig, shared, nb_json_str(args, "message"));
    else
        cond_lm_rollback(c, ctx, mig,
                         nb_json_str(args, "phase") ? str(args, "phase") : "live_migration",
                         nb_json_str(args, "message") ? str(args, "message") : "unknown error",
                         cancelled, shared);
    end_done(m);
}

/* Forwards abort / force-complete of a migration in progress to its
 * source. */
static void forward(struct conductor *c, struct nb_ctx *ctx, json_t *args, bool abort)
{
    const char *m = str(args, "migration_uuid");
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *mig = nb_migration_get(c->db, &sub, m);
    const char *source = nb_json_str(mig, "source_compute");
    const char *what = abort ? "abort" : "force-complete";
    if (!source) {
        NB_WARN(LOG_LM, ctx, nb_json_str(args, "uuid"), "%s of unknown live migration %s", what, m);
        return;
    }
    int rc = abort ? nb_compute_live_migration_abort(ctx, source, m)
                   : nb_compute_live_migration_force_complete(ctx, source, m);
    if (rc < 0)
        NB_ERROR(LOG_LM, ctx, nb_json_str(args, "uuid"),
                 "%s of live migration %s: the compute service of host %s is not reachable", what,
                 m, source);
    else
        NB_INFO(LOG_LM, ctx, nb_json_str(args, "uuid"), "%s of live migration %s sent to %s", what,
                m, source);
}

void cond_live_migration_abort(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    forward(c, ctx, args, true);
}

void cond_live_migration_force_complete(struct conductor *c, struct nb_ctx *ctx, json_t *args)
{
    forward(c, ctx, args, false);
}

/* ---- after a restart ---- */

/* Serialises the recoveries of this conductor (start-up and an agent's
 * re-registration may both find the same migration). */
static pthread_mutex_t recover_lock = PTHREAD_MUTEX_INITIALIZER;

bool cond_guest_running_on(const char *host, const char *uuid)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    for (int i = 0; host && *host && i < 30; i++) {
        nb_ctx_clear_error(&ctx);
        bool found = false;
        int power = NB_POWER_NOSTATE;
        if (nb_compute_guest_info(&ctx, host, uuid, 2000, &found, &power) == 0)
            return found && power == NB_POWER_RUNNING;
        usleep(500 * 1000);
    }
    return false;
}

/* How long recovery waits for the source's agent to say whether it still
 * runs a migration (it may be starting, as in an all-in-one). */
#define SOURCE_ASK_S 10.0

/* Whether source's agent still runs migration m: 1 (phase in phase), 0
 * not, -1 no answer within SOURCE_ASK_S. */
static int source_runs(const char *source, const char *m, char *phase, size_t n)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    double deadline = nb_time_mono() + SOURCE_ASK_S;
    while (source && *source) {
        nb_ctx_clear_error(&ctx);
        int r = nb_compute_live_migration_running(&ctx, source, m, 2000, phase, n);
        if (r >= 0 || nb_time_mono() >= deadline)
            return r;
        usleep(500 * 1000);
    }
    return -1;
}

enum cond_lm_recovery cond_lm_recovery_step(const char *status, int source_runs)
{
    if (status && !strcmp(status, NB_MIGRATION_POST_MIGRATING))
        return COND_LM_BY_DEST; /* its result was taken: only the guest tells */
    if (!status_in(status, in_progress))
        return COND_LM_NONE;
    if (source_runs == 1)
        return COND_LM_LEAVE;
    if (!strcmp(status, NB_MIGRATION_ACCEPTED))
        return COND_LM_REFUSE;
    return COND_LM_BY_DEST;
}

void cond_lm_recover(struct conductor *c, struct nb_ctx *ctx, const char *migration_uuid,
                     const char *why)
{
    pthread_mutex_lock(&recover_lock);
    end_begin(migration_uuid);
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    _cleanup_json_ json_t *mig = nb_migration_get(c->db, &sub, migration_uuid);
    const char *status = nb_json_str(mig, "status");
    const char *uuid = str(mig, "instance_uuid"), *dest = nb_json_str(mig, "dest_compute");
    const char *source = nb_json_str(mig, "source_compute");
    char phase[32] = "";
    int runs = -1;
    enum cond_lm_recovery step = cond_lm_recovery_step(status, -1);
    if (step != COND_LM_NONE && strcmp(status, NB_MIGRATION_POST_MIGRATING))
        step = cond_lm_recovery_step(
            status, runs = source_runs(source, migration_uuid, phase, sizeof(phase)));
    if (step == COND_LM_NONE || step == COND_LM_LEAVE) {
        if (step == COND_LM_LEAVE) /* its own result ends it */
            NB_WARN(LOG_LM, ctx, uuid,
                    "Live migration %s (%s) interrupted (%s): still running on source %s "
                    "(phase %s), left to finish",
                    migration_uuid, status, why, source, phase);
        end_done(migration_uuid);
        pthread_mutex_unlock(&recover_lock);
        return; /* ended meanwhile, handled by another recovery, or still running */
    }
    if (runs < 0 && strcmp(status, NB_MIGRATION_POST_MIGRATING))
        NB_WARN(LOG_LM, ctx, uuid,
                "Live migration %s (%s) interrupted (%s): the compute service of its source %s "
                "did not say within %.0f s whether it still runs it",
                migration_uuid, status, why, source ? source : "?", SOURCE_ASK_S);
    cond_close_open_events(c, ctx, uuid);
    char msg[600];
    if (step == COND_LM_REFUSE) {
        NB_WARN(LOG_LM, ctx, uuid, "Live migration %s interrupted in its prechecks (%s): refused",
                migration_uuid, why);
        snprintf(msg, sizeof(msg), "interrupted (%s) before the prechecks ended", why);
        cond_lm_rollback(c, ctx, mig, "prechecks", msg, false, true);
    } else if (cond_guest_running_on(dest, uuid)) {
        NB_WARN(LOG_LM, ctx, uuid,
                "Live migration %s (%s) interrupted (%s): the guest runs on %s, finishing it",
                migration_uuid, status, why, dest);
        cond_lm_finish(c, ctx, mig, true, NULL);
    } else {
        if (source) /* in case its agent still runs the job */
            nb_compute_live_migration_abort(ctx, source, migration_uuid);
        NB_WARN(LOG_LM, ctx, uuid,
                "Live migration %s (%s) interrupted (%s): the guest does not run on %s, rolling "
                "back",
                migration_uuid, status, why, dest ? dest : "its destination");
        snprintf(msg, sizeof(msg), "interrupted (%s); the guest was not running on the destination",
                 why);
        cond_lm_rollback(c, ctx, mig, "live_migration", msg, false, true);
    }
    end_done(migration_uuid);
    pthread_mutex_unlock(&recover_lock);
}

struct restarted {
    struct conductor *c;
    char host[256];
};

static void *source_restarted_main(void *arg)
{
    struct restarted *r = arg;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    _cleanup_json_ json_t *rows =
        nb_db_rows(r->c->db, &ctx,
                   "SELECT uuid, instance_uuid FROM migrations WHERE deleted = 0 AND "
                   "migration_type = "
                   "'live-migration' AND source_compute = ? AND status IN ('queued', "
                   "'preparing', 'running', 'running (post-copy)') ORDER BY id",
                   "s", r->host);
    nb_ctx_clear_error(&ctx);
    size_t i;
    json_t *row;
    json_array_foreach (rows, i, row) {
        /* recorded under the request of the migration's action */
        _cleanup_json_ json_t *act = nb_db_row(
            r->c->db, &ctx,
            "SELECT request_id, user_id, project_id FROM instance_actions WHERE instance_uuid = ? "
            "AND action = "
            "'live-migration' ORDER BY id DESC LIMIT 1",
            "s", nb_json_str(row, "instance_uuid"));
        nb_ctx_clear_error(&ctx);
        struct nb_ctx actx;
        nb_ctx_init_system(&actx, nb_json_str(act, "request_id"));
        if (nb_json_str(act, "user_id"))
            nb_strlcpy(actx.user_id, nb_json_str(act, "user_id"), sizeof(actx.user_id));
        if (nb_json_str(act, "project_id"))
            nb_strlcpy(actx.project_id, nb_json_str(act, "project_id"), sizeof(actx.project_id));
        cond_lm_recover(r->c, &actx, nb_json_str(row, "uuid"),
                        "the compute service of its source host restarted");
    }
    free(r);
    return NULL;
}

void cond_lm_source_restarted(struct conductor *c, const char *host)
{
    struct restarted *r = calloc(1, sizeof(*r));
    r->c = c;
    nb_strlcpy(r->host, host, sizeof(r->host));
    if (nb_thread_detached(source_restarted_main, r) != 0) {
        NB_ERROR(LOG_LM, NULL, NULL, "cannot start the live-migration recovery for %s", host);
        free(r);
    }
}

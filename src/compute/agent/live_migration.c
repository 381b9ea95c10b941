/* live_migration.c - the compute agent's part of a live migration (Nova's
 * compute manager: check_can_live_migrate_destination/_source,
 * pre_live_migration, live_migration, post_live_migration_at_destination,
 * _post_live_migration's source cleanup, rollback_live_migration_at_
 * destination, live_migration_abort, live_migration_force_complete).
 *
 * The checks are calls from the conductor to the destination, which asks
 * the source in turn (as Nova's destination does), so one round trip
 * gathers every fact about the pair of hosts. The move itself is a cast to
 * the source, run in a thread of its own (Nova's live-migration executor):
 * it waits for one of [DEFAULT] max_concurrent_live_migrations slots of its
 * host (default 1, 0 = unlimited; status "queued" while it waits), has the
 * destination prepare (status "preparing"), runs the driver's live_migrate
 * with progress reports (status "running"), and reports the outcome; the
 * conductor does the rest. Running migrations are kept in a registry so
 * that abort and force-complete reach them from the bus's threads, and so
 * that a conductor that restarted can ask whether one still runs
 * (live_migration_running) instead of ending it. A run leaves the registry
 * only once its result is with the broker: the result is sent until it
 * arrives (a conductor, or the broker, may be restarting), and a status
 * or progress report that could not be sent only costs the report.
 *
 * The agent writes no state: everything goes back to the conductor. */
#include "bus/bus.h"
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"
#include "compute/agent/internal.h"
#include "compute/rpc/compute_api.h"
#include "compute/rpc/conductor_api.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One live migration this process runs as the source. */
struct lm_run {
    struct agent *a;
    struct nb_ctx ctx; /* the conductor's request (its ID names the action) */
    char migration_uuid[NB_UUID_LEN];
    char uuid[NB_UUID_LEN];
    char dest_host[256];
    char *dest_uri, *dest_addr;
    json_t *instance, *disks, *dest_disks;
    bool shared_storage;
    bool started;       /* holds one of its host's slots */
    const char *phase;  /* "queued", "preparing", "running", "reporting" (lm_lock) */
    const char *unsent; /* the last status the conductor did not take, sent again */
    double last_report;
    struct nb_live_migration m;
    struct lm_run *next;
};

static pthread_mutex_t lm_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lm_cond = PTHREAD_COND_INITIALIZER;
static struct lm_run *runs;
static bool lm_stopping; /* nb_agent_lm_drain: no new runs */

static json_t *failed(const char *fmt, const char *arg)
{
    char msg[1200];
    snprintf(msg, sizeof(msg), fmt, arg);
    return json_pack("{s:b, s:s}", "ok", 0, "message", msg);
}

static json_t *failed_ctx(const struct nb_ctx *dctx)
{
    return json_pack("{s:b, s:s}", "ok", 0, "message", nb_ctx_message(dctx));
}

/* NULL when the driver has the live-migration ops, else the refusal. */
static json_t *unsupported(struct agent *a)
{
    const struct nb_virt_ops *o = a->drv->ops;
    if (o->migration_info && o->check_cpu && o->storage_probe_create && o->storage_probe_exists &&
        o->storage_probe_remove && o->check_migration_target && o->migration_disks &&
        o->pre_live_migration && o->live_migrate && o->post_live_migration_dest &&
        o->post_live_migration_source && o->rollback_live_migration_dest)
        return NULL;
    return failed("The %s virt driver does not support live migration.", o->name);
}

/* {"ok", "message"} of a step's outcome on dctx. */
static json_t *verdict(int rc, const struct nb_ctx *dctx)
{
    return rc == 0 ? json_pack("{s:b, s:n}", "ok", 1, "message")
                   : json_pack("{s:b, s:s}", "ok", 0, "message", nb_ctx_message(dctx));
}

/* check_can_live_migrate_source (source side): its migration_info, whether
 * the destination's probe is visible here, whether the destination's
 * hypervisor answers at its URI, and the instance's disks. */
json_t *nb_lm_check_source(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    struct agent *a = opaque;
    json_t *no = unsupported(a);
    if (no)
        return no;
    json_t *inst = json_object_get(args, "instance");
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    _cleanup_json_ json_t *info = a->drv->ops->migration_info(a->drv, &dctx, a->host);
    if (!info)
        return failed_ctx(&dctx);
    bool exists = false;
    struct nb_ctx pctx;
    nb_ctx_child(&pctx, ctx);
    int prc = a->drv->ops->storage_probe_exists(a->drv, &pctx, a->host, nb_json_str(args, "probe"),
                                                &exists);
    struct nb_ctx tctx;
    nb_ctx_child(&tctx, ctx);
    const char *uri = nb_json_str(args, "dest_uri");
    double t0 = nb_time_mono();
    int trc = a->drv->ops->check_migration_target(a->drv, &tctx, a->host, uri,
                                                  (int)nb_json_int(args, "timeout_ms", 5000));
    json_t *transport = verdict(trc, &tctx);
    json_object_set_new(transport, "ms", json_integer((json_int_t)((nb_time_mono() - t0) * 1000)));
    struct nb_ctx kctx;
    nb_ctx_child(&kctx, ctx);
    json_t *disks = a->drv->ops->migration_disks(a->drv, &kctx, a->host, inst);
    NB_INFO(LOG_AGENT, ctx, nb_json_str(inst, "uuid"),
            "live-migration source checks on %s: probe %s, %s %s", a->host,
            prc < 0  ? "unreadable"
            : exists ? "seen (shared storage)"
                     : "not seen",
            uri ? uri : "", trc == 0 ? "reachable" : "unreachable");
    return json_pack("{s:b, s:O, s:b, s:o, s:o, s:o, s:o}", "ok", 1, "source", info, "probe_exists",
                     exists, "probe", verdict(prc, &pctx), "transport", transport, "disks",
                     disks ? disks : json_array(), "disks_error",
                     disks ? json_null() : json_string(nb_ctx_message(&kctx)));
}

/* The destination's part once the probe exists: ask the source, compare
 * the CPUs. The reply, new ref. */
static json_t *check_with_source(struct agent *a, struct nb_ctx *ctx, json_t *args, json_t *info,
                                 const char *probe)
{
    json_t *inst = json_object_get(args, "instance");
    const char *source = nb_json_str(args, "source");
    int tmo = (int)nb_json_int(args, "timeout_ms", 5000);
    struct nb_ctx sctx;
    nb_ctx_child(&sctx, ctx);
    _cleanup_json_ json_t *src = nb_compute_check_can_live_migrate_source(
        &sctx, source, json_incref(inst), probe, nb_json_str(info, "uri"), tmo, tmo + 20000);
    if (!src)
        return failed("The compute service of the source host did not answer: %s",
                      nb_ctx_message(&sctx));
    if (!json_is_true(json_object_get(src, "ok")))
        return json_incref(src);
    struct nb_ctx cctx;
    nb_ctx_child(&cctx, ctx);
    json_t *guest_cpu = json_object_get(json_object_get(src, "source"), "guest_cpu");
    int crc = a->drv->ops->check_cpu(a->drv, &cctx, a->host, guest_cpu);
    return json_pack("{s:b, s:O, s:O, s:o, s:O, s:O, s:O, s:O, s:O}", "ok", 1, "dest", info,
                     "source", json_object_get(src, "source"), "cpu", verdict(crc, &cctx),
                     "shared_storage", json_object_get(src, "probe_exists"), "probe",
                     json_object_get(src, "probe"), "transport", json_object_get(src, "transport"),
                     "disks", json_object_get(src, "disks"), "disks_error",
                     json_object_get(src, "disks_error"));
}

/* check_can_live_migrate_destination (destination side), see
 * compute_api.h. */
json_t *nb_lm_check_destination(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    struct agent *a = opaque;
    json_t *no = unsupported(a);
    if (no)
        return no;
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    _cleanup_json_ json_t *info = a->drv->ops->migration_info(a->drv, &dctx, a->host);
    if (!info)
        return failed_ctx(&dctx);
    char probe[64] = "";
    struct nb_ctx pctx;
    nb_ctx_child(&pctx, ctx);
    int prc = a->drv->ops->storage_probe_create(a->drv, &pctx, a->host, probe);
    json_t *reply = check_with_source(a, ctx, args, info, prc == 0 ? probe : NULL);
    if (prc == 0) {
        struct nb_ctx rctx;
        nb_ctx_child(&rctx, ctx);
        if (a->drv->ops->storage_probe_remove(a->drv, &rctx, a->host, probe) < 0)
            NB_WARN(LOG_AGENT, ctx, nb_json_str(json_object_get(args, "instance"), "uuid"),
                    "could not remove the shared-storage probe %s: %s", probe,
                    nb_ctx_message(&rctx));
    } else if (json_is_true(json_object_get(reply, "ok"))) {
        json_object_set_new(reply, "probe", verdict(prc, &pctx));
    }
    return reply;
}

/* pre_live_migration (destination side): the volume files checked (and a
 * format mismatch reconciled) as before any domain start, then the
 * driver's preparation. */
json_t *nb_lm_pre(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    struct agent *a = opaque;
    json_t *no = unsupported(a);
    if (no)
        return no;
    json_t *inst = json_object_get(args, "instance");
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    /* the volumes' files as this host sees them, before the guest runs here
     * (the disk-format check every domain start makes) */
    if (nb_agent_verify_disks(a, &dctx, inst, NULL) < 0) {
        NB_ERROR(LOG_AGENT, ctx, nb_json_str(inst, "uuid"), "pre_live_migration failed on %s: %s",
                 a->host, nb_ctx_message(&dctx));
        return failed_ctx(&dctx);
    }
    json_t *dest_disks = a->drv->ops->pre_live_migration(
        a->drv, &dctx, a->host, inst, json_object_get(args, "disks"),
        json_is_true(json_object_get(args, "shared_storage")),
        json_is_true(json_object_get(args, "block_migration")));
    if (!dest_disks) {
        NB_ERROR(LOG_AGENT, ctx, nb_json_str(inst, "uuid"), "pre_live_migration failed on %s: %s",
                 a->host, nb_ctx_message(&dctx));
        return failed_ctx(&dctx);
    }
    __atomic_store_n(&a->dirty, true, __ATOMIC_RELAXED);
    return json_pack("{s:b, s:o}", "ok", 1, "dest_disks", dest_disks);
}

/* post_live_migration_at_destination / post_live_migration_at_source /
 * rollback_live_migration_at_destination. */
static json_t *finish_step(struct agent *a, struct nb_ctx *ctx, json_t *args, const char *step)
{
    json_t *no = unsupported(a);
    if (no)
        return no;
    json_t *inst = json_object_get(args, "instance");
    bool shared = json_is_true(json_object_get(args, "shared_storage"));
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    const struct nb_virt_ops *o = a->drv->ops;
    int rc;
    if (!strcmp(step, "post_live_migration_at_destination"))
        rc = o->post_live_migration_dest(a->drv, &dctx, a->host, inst);
    else if (!strcmp(step, "post_live_migration_at_source"))
        rc = o->post_live_migration_source(a->drv, &dctx, a->host, inst, shared);
    else
        rc = o->rollback_live_migration_dest(a->drv, &dctx, a->host, inst, shared);
    __atomic_store_n(&a->dirty, true, __ATOMIC_RELAXED);
    if (rc < 0)
        NB_ERROR(LOG_AGENT, ctx, nb_json_str(inst, "uuid"), "%s failed on %s: %s", step, a->host,
                 nb_ctx_message(&dctx));
    else
        NB_INFO(LOG_AGENT, ctx, nb_json_str(inst, "uuid"), "%s done on %s", step, a->host);
    return verdict(rc, &dctx);
}

json_t *nb_lm_post_dest(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    return finish_step(opaque, ctx, args, "post_live_migration_at_destination");
}

json_t *nb_lm_post_source(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    return finish_step(opaque, ctx, args, "post_live_migration_at_source");
}

json_t *nb_lm_rollback_dest(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    return finish_step(opaque, ctx, args, "rollback_live_migration_at_destination");
}

/* ---- the move (source side) ---- */

/* A status (NULL: progress only) for the conductor. A status it did not
 * take (no conductor: restarting) is not lost: it goes again, as a cast,
 * with the next progress report. The run goes on either way. */
static void report_status(struct lm_run *r, const char *status,
                          const struct nb_migration_progress *p)
{
    bool again = !status && r->unsent;
    struct nb_live_migration_status s = {.uuid = r->uuid,
                                         .migration_uuid = r->migration_uuid,
                                         .host = r->a->host,
                                         .status = again ? r->unsent : status,
                                         .as_cast = again};
    if (p) {
        s.has_progress = true;
        s.memory_total = p->memory_total;
        s.memory_processed = p->memory_processed;
        s.memory_remaining = p->memory_remaining;
        s.disk_total = p->disk_total;
        s.disk_processed = p->disk_processed;
        s.disk_remaining = p->disk_remaining;
    }
    if (nb_conductor_live_migration_status(&r->ctx, &s) < 0) {
        NB_WARN(LOG_AGENT, &r->ctx, r->uuid,
                "could not report live migration %s (%s): no conductor; the migration goes on",
                r->migration_uuid, s.status ? s.status : "progress");
        if (status)
            r->unsent = status;
    } else if (status || again) {
        if (again)
            NB_INFO(LOG_AGENT, &r->ctx, r->uuid, "status %s of live migration %s sent again",
                    r->unsent, r->migration_uuid);
        r->unsent = NULL;
    }
}

/* The driver's progress callback (the migrating thread): at most two
 * reports a second, and every switch to post-copy. */
static void on_progress(void *opaque, const struct nb_migration_progress *p)
{
    struct lm_run *r = opaque;
    double now = nb_time_mono();
    if (!p->post_copy && now - r->last_report < 0.5 && p->memory_remaining > 0)
        return;
    r->last_report = now;
    report_status(r, p->post_copy ? "running (post-copy)" : NULL, p);
}

static void set_phase(struct lm_run *r, const char *phase)
{
    pthread_mutex_lock(&lm_lock);
    r->phase = phase;
    pthread_mutex_unlock(&lm_lock);
}

/* How many migrations of a's host hold a slot (lm_lock held). */
static int active_on(struct agent *a)
{
    int n = 0;
    for (struct lm_run *r = runs; r; r = r->next)
        if (r->a == a && r->started)
            n++;
    return n;
}

/* Waits for a slot (status "queued" while waiting). false when aborted
 * meanwhile. */
static bool take_slot(struct lm_run *r)
{
    long max = nb_conf_int("DEFAULT", "max_concurrent_live_migrations", 1);
    bool reported = false;
    pthread_mutex_lock(&lm_lock);
    while (max > 0 && active_on(r->a) >= max && !atomic_load(&r->m.abort_requested)) {
        if (!reported) {
            reported = true;
            pthread_mutex_unlock(&lm_lock);
            NB_INFO(LOG_AGENT, &r->ctx, r->uuid,
                    "Live migration %s queued: %ld of %ld slots of host %s in use",
                    r->migration_uuid, max, max, r->a->host);
            report_status(r, "queued", NULL);
            pthread_mutex_lock(&lm_lock);
            continue;
        }
        pthread_cond_wait(&lm_cond, &lm_lock);
    }
    bool go = !atomic_load(&r->m.abort_requested);
    r->started = go;
    pthread_mutex_unlock(&lm_lock);
    return go;
}

static void unregister(struct lm_run *r)
{
    pthread_mutex_lock(&lm_lock);
    for (struct lm_run **p = &runs; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            nb_metrics_add(NB_M_LIVE_MIGRATIONS_ACTIVE, -1, NULL);
            break;
        }
    pthread_cond_broadcast(&lm_cond);
    pthread_mutex_unlock(&lm_lock);
    json_decref(r->instance);
    json_decref(r->disks);
    json_decref(r->dest_disks);
    free(r->dest_uri);
    free(r->dest_addr);
    free(r);
}

/* pre_live_migration on the destination; 0, or -1 with the cause in msg. */
static int prepare_dest(struct lm_run *r, char *msg, size_t n)
{
    set_phase(r, "preparing");
    report_status(r, "preparing", NULL);
    struct nb_ctx cctx;
    nb_ctx_child(&cctx, &r->ctx);
    int tmo = (int)nb_conf_int("DEFAULT", "rpc_response_timeout", 60) * 1000;
    _cleanup_json_ json_t *rep =
        nb_compute_pre_live_migration(&cctx, r->dest_host, json_incref(r->instance), r->disks,
                                      r->shared_storage, r->m.block_migration, tmo);
    if (!rep) {
        snprintf(msg, n, "The compute service of host %s did not answer pre_live_migration: %s",
                 r->dest_host, nb_ctx_message(&cctx));
        return -1;
    }
    if (!json_is_true(json_object_get(rep, "ok"))) {
        snprintf(msg, n, "%s", nb_json_str(rep, "message") ? nb_json_str(rep, "message") : "?");
        return -1;
    }
    r->dest_disks = json_incref(json_object_get(rep, "dest_disks"));
    r->m.dest_disks = r->dest_disks;
    return 0;
}

static void *lm_main(void *arg)
{
    struct lm_run *r = arg;
    char msg[1200] = "";
    struct nb_live_migration_outcome out = {.uuid = r->uuid,
                                            .migration_uuid = r->migration_uuid,
                                            .host = r->a->host,
                                            .shared_storage = r->shared_storage};
    if (!take_slot(r)) {
        out.cancelled = true;
        out.phase = "queued";
        out.message = "Live migration aborted by request while queued";
    } else if (prepare_dest(r, msg, sizeof(msg)) < 0) {
        out.phase = "pre_live_migration";
        out.message = msg;
    } else if (atomic_load(&r->m.abort_requested)) {
        out.cancelled = true;
        out.phase = "pre_live_migration";
        out.message = "Live migration aborted by request before the guest moved";
    } else {
        set_phase(r, "running");
        report_status(r, "running", NULL);
        struct nb_ctx dctx;
        nb_ctx_child(&dctx, &r->ctx);
        double t0 = nb_time_mono();
        int rc = r->a->drv->ops->live_migrate(r->a->drv, &dctx, r->a->host, r->instance, &r->m);
        if (rc == 0) {
            out.ok = true;
            out.message = r->m.note[0] ? r->m.note : NULL;
            NB_INFO(LOG_AGENT, &r->ctx, r->uuid,
                    "Migrating instance to %s finished successfully (%.2f s).", r->dest_host,
                    nb_time_mono() - t0);
        } else {
            out.cancelled = r->m.cancelled;
            out.phase = "live_migration";
            snprintf(msg, sizeof(msg), "%s", nb_ctx_message(&dctx));
            out.message = msg;
            NB_ERROR(LOG_AGENT, &r->ctx, r->uuid, "Live migration to %s %s: %s", r->dest_host,
                     out.cancelled ? "cancelled" : "failed", msg);
        }
    }
    __atomic_store_n(&r->a->dirty, true, __ATOMIC_RELAXED);
    /* still registered while the result is on its way: a conductor asking
     * meanwhile learns that the run's own result will end the migration */
    set_phase(r, "reporting");
    if (nb_conductor_live_migration_result(&r->ctx, &out) < 0)
        NB_ERROR(LOG_AGENT, &r->ctx, r->uuid,
                 "could not report the end of live migration %s: no conductor", r->migration_uuid);
    unregister(r);
    return NULL;
}

/* live_migration (cast, source side): registers the run and starts its
 * thread. */
json_t *nb_lm_start(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    struct agent *a = opaque;
    json_t *inst = json_object_get(args, "instance");
    const char *uuid = nb_json_str(inst, "uuid");
    const char *mig = nb_json_str(args, "migration_uuid");
    const char *dest = nb_json_str(args, "dest_host");
    if (!uuid || !mig || !dest)
        return NULL;
    struct lm_run *r = calloc(1, sizeof(*r));
    r->a = a;
    r->ctx = *ctx;
    nb_ctx_clear_error(&r->ctx);
    nb_strlcpy(r->migration_uuid, mig, sizeof(r->migration_uuid));
    nb_strlcpy(r->uuid, uuid, sizeof(r->uuid));
    nb_strlcpy(r->dest_host, dest, sizeof(r->dest_host));
    r->dest_uri = nb_json_str(args, "dest_uri") ? strdup(nb_json_str(args, "dest_uri")) : NULL;
    r->dest_addr = nb_json_str(args, "dest_addr") ? strdup(nb_json_str(args, "dest_addr")) : NULL;
    r->instance = json_incref(inst);
    r->disks = json_incref(json_object_get(args, "disks"));
    r->shared_storage = json_is_true(json_object_get(args, "shared_storage"));
    r->m.dest_host = r->dest_host;
    r->m.dest_uri = r->dest_uri;
    r->m.dest_addr = r->dest_addr;
    r->m.block_migration = json_is_true(json_object_get(args, "block_migration"));
    r->m.progress = on_progress;
    r->m.opaque = r;
    r->phase = "queued";
    pthread_mutex_lock(&lm_lock);
    bool stopping = lm_stopping;
    if (!stopping) {
        r->next = runs;
        runs = r;
        nb_metrics_add(NB_M_LIVE_MIGRATIONS_ACTIVE, 1, NULL);
    }
    pthread_mutex_unlock(&lm_lock);
    if (stopping) {
        struct nb_live_migration_outcome out = {
            .uuid = uuid,
            .migration_uuid = mig,
            .host = a->host,
            .phase = "queued",
            .message = "The compute service of the source host is stopping."};
        nb_conductor_live_migration_result(ctx, &out);
        json_decref(r->instance);
        json_decref(r->disks);
        free(r->dest_uri);
        free(r->dest_addr);
        free(r);
        return NULL;
    }
    if (nb_thread_detached(lm_main, r) != 0) {
        NB_ERROR(LOG_AGENT, ctx, uuid, "cannot start the live migration thread");
        struct nb_live_migration_outcome out = {.uuid = uuid,
                                                .migration_uuid = mig,
                                                .host = a->host,
                                                .phase = "queued",
                                                .message = "The compute agent could not start "
                                                           "the live migration thread."};
        nb_conductor_live_migration_result(ctx, &out);
        unregister(r);
    }
    return NULL;
}

/* Sets flag (abort or force-complete) of the run of migration_uuid. */
static void flag_run(struct agent *a, struct nb_ctx *ctx, json_t *args, bool abort)
{
    const char *mig = nb_json_str(args, "migration_uuid");
    bool found = false;
    pthread_mutex_lock(&lm_lock);
    for (struct lm_run *r = runs; r; r = r->next) {
        if (r->a != a || !mig || strcmp(r->migration_uuid, mig))
            continue;
        found = true;
        atomic_store(abort ? &r->m.abort_requested : &r->m.force_complete_requested, 1);
    }
    pthread_cond_broadcast(&lm_cond);
    pthread_mutex_unlock(&lm_lock);
    if (found)
        NB_INFO(LOG_AGENT, ctx, NULL, "%s of live migration %s requested on %s",
                abort ? "Abort" : "Force-complete", mig, a->host);
    else
        NB_WARN(LOG_AGENT, ctx, NULL, "%s of live migration %s: host %s runs no such migration",
                abort ? "Abort" : "Force-complete", mig ? mig : "(none)", a->host);
}

json_t *nb_lm_abort(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    flag_run(opaque, ctx, args, true);
    return NULL;
}

json_t *nb_lm_force_complete(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    flag_run(opaque, ctx, args, false);
    return NULL;
}

/* live_migration_running (call, source side): whether this host still
 * runs the migration, and its phase. */
json_t *nb_lm_running(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)method;
    struct agent *a = opaque;
    const char *mig = nb_json_str(args, "migration_uuid");
    const char *phase = NULL;
    pthread_mutex_lock(&lm_lock);
    for (struct lm_run *r = runs; r && mig && !phase; r = r->next)
        if (r->a == a && !strcmp(r->migration_uuid, mig))
            phase = r->phase;
    json_t *reply = phase ? json_pack("{s:b, s:s}", "running", 1, "phase", phase)
                          : json_pack("{s:b, s:n}", "running", 0, "phase");
    pthread_mutex_unlock(&lm_lock);
    NB_INFO(LOG_AGENT, ctx, NULL, "Live migration %s %s on %s%s%s", mig ? mig : "(none)",
            phase ? "still runs" : "does not run", a->host, phase ? ", phase " : "",
            phase ? phase : "");
    return reply;
}

void nb_agent_lm_open(void)
{
    pthread_mutex_lock(&lm_lock);
    lm_stopping = false;
    pthread_mutex_unlock(&lm_lock);
}

void nb_agent_lm_drain(void)
{
    pthread_mutex_lock(&lm_lock);
    lm_stopping = true;
    int n = 0;
    for (struct lm_run *r = runs; r; r = r->next, n++)
        atomic_store(&r->m.abort_requested, 1);
    if (n)
        NB_WARN(LOG_AGENT, NULL, NULL,
                "Stopping: aborting %d live migration(s) in progress; their guests stay on "
                "this host",
                n);
    pthread_cond_broadcast(&lm_cond);
    /* a run ends when the hypervisor has cancelled its job and the
     * conductor has the outcome; a wedged one is not waited for forever */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    while (runs)
        if (pthread_cond_timedwait(&lm_cond, &lm_lock, &until) != 0) {
            NB_ERROR(LOG_AGENT, NULL, NULL,
                     "Stopping with live migration %s still running after 60 s",
                     runs->migration_uuid);
            break;
        }
    pthread_mutex_unlock(&lm_lock);
}

/* migrate_run.c - the live migration itself: libvirt's peer-to-peer
 * migration of a running guest, watched while it runs, as Nova's
 * _live_migration_operation and _live_migration_monitor.
 *
 * Flags as Nova: LIVE | PEER2PEER | PERSIST_DEST | UNDEFINE_SOURCE, with
 * NON_SHARED_INC for block migration (only the disks pre_live_migration
 * prepared: VIR_MIGRATE_PARAM_MIGRATE_DISKS), TLS with
 * live_migration_with_native_tls, POSTCOPY when
 * live_migration_permit_post_copy, else AUTO_CONVERGE when
 * live_migration_permit_auto_converge (a QEMU that refuses post-copy, for
 * want of userfaultfd, gets the migration without it, with a warning that
 * names the likely cause: vm.unprivileged_userfaultfd and QEMU's user; the
 * driver does not ask again). UNSAFE only when the storage probe
 * found the instances path shared: libvirt trusts only the shared file
 * systems it knows, and nubo's own test is what Nova relies on. The
 * migration data goes to tcp://<destination's migration address>.
 *
 * libvirt's call blocks until the guest runs on the destination or the
 * migration failed; it runs in a thread of its own while the calling
 * thread polls the job stats twice a second: progress to the agent, the
 * downtime steps (live_migration_downtime / _steps / _delay, scaled by the
 * guest's size, as Nova), the completion timeout
 * (live_migration_completion_timeout per GiB of RAM and copied disk, as
 * Nova: at least 2 GiB each) and its action (abort: the migration fails,
 * the error naming the timeout; or force_complete: post-copy when
 * permitted, else pause), and the agent's abort and force-complete
 * requests. What made a migration converge is told in m->note. */
#include "common/cleanup.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/virt/libvirt/lv.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* What the migrating thread shares with the monitor. */
struct run {
    virDomainPtr dom;
    const char *dest_uri;
    virTypedParameterPtr params;
    int nparams;
    unsigned int flags;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    int rc;
    char err[1024]; /* libvirt's error, read in the migrating thread */
};

static void *migrate_main(void *arg)
{
    struct run *r = arg;
    int rc = virDomainMigrateToURI3(r->dom, r->dest_uri, r->params, (unsigned)r->nparams, r->flags);
    pthread_mutex_lock(&r->lock);
    r->rc = rc;
    if (rc < 0)
        nb_strlcpy(r->err, virGetLastErrorMessage() ? virGetLastErrorMessage() : "unknown error",
                   sizeof(r->err));
    r->done = true;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

/* Waits up to ms for the migrating thread; true when it finished. */
static bool wait_done(struct run *r, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->lock);
    while (!r->done && pthread_cond_timedwait(&r->cond, &r->lock, &ts) == 0)
        ;
    bool d = r->done;
    pthread_mutex_unlock(&r->lock);
    return d;
}

void lv_downtime_steps(double data_gb, struct lv_downtime *d)
{
    long long downtime = nb_conf_int("libvirt", "live_migration_downtime", 500);
    long long steps = nb_conf_int("libvirt", "live_migration_downtime_steps", 10);
    long long delay = nb_conf_int("libvirt", "live_migration_downtime_delay", 75);
    if (downtime < 100)
        downtime = 100; /* Nova's minimum */
    if (steps < 3)
        steps = 3;
    if (steps > 63)
        steps = 63;
    if (delay < 3)
        delay = 3;
    long long dl = (long long)((double)delay * data_gb);
    double base = (double)downtime / (double)steps;
    double offset = ((double)downtime - base) / (double)steps;
    d->n = (int)steps + 1;
    for (int i = 0; i < d->n; i++) {
        d->at_s[i] = dl * i;
        d->ms[i] = (long long)(base + offset * i);
    }
}

double lv_migration_data_gb(struct nb_ctx *ctx, const char *uuid, long long memory_mb,
                            const json_t *disks, bool block)
{
    double gb = (double)memory_mb / 1024.0;
    if (gb < 2)
        gb = 2;
    size_t i;
    json_t *d;
    json_array_foreach (disks, i, d) {
        if (!block || !json_is_true(json_object_get(d, "local")) ||
            json_is_true(json_object_get(d, "readonly")))
            continue;
        const char *path = nb_json_str(d, "path");
        struct stat st;
        if (!path || stat(path, &st) < 0) {
            NB_WARN(LV_LOG, ctx, uuid, "Unable to stat %s: %s", path ? path : "?", strerror(errno));
            continue;
        }
        double dg = (double)st.st_size / (1024.0 * 1024 * 1024);
        gb += dg < 2 ? 2 : dg;
    }
    return gb;
}

long long lv_completion_timeout_s(double data_gb)
{
    long long per_gb = nb_conf_int("libvirt", "live_migration_completion_timeout", 800);
    return per_gb > 0 ? (long long)((double)per_gb * data_gb) : 0;
}

bool lv_timeout_due(long long timeout_s, double elapsed, bool post_copy)
{
    return timeout_s > 0 && !post_copy && elapsed > (double)timeout_s;
}

int lv_read_unprivileged_userfaultfd(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int v = -1;
    if (fscanf(f, "%d", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

void lv_post_copy_cause(char *buf, size_t n, int unprivileged_userfaultfd, long long qemu_uid)
{
    char who[160];
    if (qemu_uid > 0)
        snprintf(who, sizeof(who), "QEMU does not run as root (uid %lld)", qemu_uid);
    else if (qemu_uid == 0)
        snprintf(who, sizeof(who),
                 "QEMU runs as root but without CAP_SYS_PTRACE (libvirt clears its capabilities "
                 "unless qemu.conf clear_emulator_capabilities = 0)");
    else
        snprintf(who, sizeof(who), "QEMU lacks CAP_SYS_PTRACE (as any QEMU not run as root)");
    if (unprivileged_userfaultfd == 0)
        snprintf(buf, n, "vm.unprivileged_userfaultfd = 0 and %s", who);
    else if (unprivileged_userfaultfd > 0)
        snprintf(buf, n,
                 "unknown: vm.unprivileged_userfaultfd = %d on this host (the destination's may "
                 "be 0, or its kernel lack userfaultfd)",
                 unprivileged_userfaultfd);
    else
        snprintf(buf, n,
                 "no vm.unprivileged_userfaultfd on this host: a kernel without userfaultfd "
                 "(CONFIG_USERFAULTFD)?");
}

/* The uid the domain's QEMU runs as, from its DAC security label
 * ("+64055:+64055"); -1 when it has none. The source's QEMU: the
 * destination's runs as the same user where the hosts are set up alike. */
static long long qemu_uid(virDomainPtr dom)
{
    virSecurityLabelPtr labels = NULL;
    int n = virDomainGetSecurityLabelList(dom, &labels);
    long long uid = -1, u, g;
    for (int i = 0; i < n && uid < 0; i++)
        if (sscanf(labels[i].label, "%lld:%lld", &u, &g) == 2 && u >= 0)
            uid = u;
    free(labels);
    return uid;
}

int lv_timeout_action(void)
{
    const char *a = nb_conf_str("libvirt", "live_migration_timeout_action", "abort");
    return !strcmp(a, "abort")            ? LV_TIMEOUT_ABORT
           : !strcmp(a, "force_complete") ? LV_TIMEOUT_FORCE_COMPLETE
                                          : -1;
}

static unsigned long long param_ull(virTypedParameterPtr p, int n, const char *name)
{
    unsigned long long v = 0;
    virTypedParamsGetULLong(p, n, name, &v);
    return v;
}

/* The job's state into *p; the job type (VIR_DOMAIN_JOB_*), -1 when the
 * stats cannot be read. */
static int job_stats(virDomainPtr dom, struct nb_migration_progress *p)
{
    int type = 0, n = 0;
    virTypedParameterPtr params = NULL;
    if (virDomainGetJobStats(dom, &type, &params, &n, 0) < 0)
        return -1;
    p->memory_total = (long long)param_ull(params, n, VIR_DOMAIN_JOB_MEMORY_TOTAL);
    p->memory_processed = (long long)param_ull(params, n, VIR_DOMAIN_JOB_MEMORY_PROCESSED);
    p->memory_remaining = (long long)param_ull(params, n, VIR_DOMAIN_JOB_MEMORY_REMAINING);
    p->disk_total = (long long)param_ull(params, n, VIR_DOMAIN_JOB_DISK_TOTAL);
    p->disk_processed = (long long)param_ull(params, n, VIR_DOMAIN_JOB_DISK_PROCESSED);
    p->disk_remaining = (long long)param_ull(params, n, VIR_DOMAIN_JOB_DISK_REMAINING);
    virTypedParamsFree(params, n);
    return type;
}

/* The monitor's state across polls. */
struct watch {
    struct lv *lv;
    struct nb_ctx *ctx;
    const char *uuid;
    struct nb_live_migration *m;
    bool post_copy_ok;    /* POSTCOPY flag set */
    bool post_copy;       /* switched */
    bool paused;          /* force-complete without post-copy paused the guest */
    bool aborted;         /* abort requested by the agent */
    bool timeout_fired;   /* completion timeout reached, its action taken */
    bool timeout_aborted; /* ... and that action was the abort */
    int timeout_action;   /* LV_TIMEOUT_* */
    long long downtime;   /* current max downtime, -1 none set */
    struct lv_downtime steps;
    long long timeout_s; /* live_migration_completion_timeout for this guest, 0 off */
    double t0, gb;
};

/* Appends to m->note ("; " after what is there). */
static void note_add(struct nb_live_migration *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note_add(struct nb_live_migration *m, const char *fmt, ...)
{
    size_t len = strlen(m->note);
    if (len && len + 2 < sizeof(m->note)) {
        memcpy(m->note + len, "; ", 3);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->note + len, sizeof(m->note) - len, fmt, ap);
    va_end(ap);
}

/* Post-copy when permitted, else pause the guest (Nova's
 * live_migration_force_complete); what was done goes into m->note for
 * the instance action event. */
static void force_complete(struct watch *w, virDomainPtr dom, double elapsed, const char *why)
{
    if (w->post_copy || w->paused)
        return;
    if (w->post_copy_ok && virDomainMigrateStartPostCopy(dom, 0) == 0) {
        w->post_copy = true;
        NB_INFO(LV_LOG, w->ctx, w->uuid, "Switching to post-copy migration mode (%s)", why);
        note_add(w->m, "switched to post-copy after %.0f s (%s)", elapsed, why);
        return;
    }
    if (w->post_copy_ok)
        NB_WARN(LV_LOG, w->ctx, w->uuid, "Failed to switch to post-copy live migration: %s",
                virGetLastErrorMessage());
    if (virDomainSuspend(dom) == 0) {
        w->paused = true;
        NB_INFO(LV_LOG, w->ctx, w->uuid, "Pausing the instance to complete its live migration (%s)",
                why);
        note_add(w->m, "the guest was paused after %.0f s to complete the migration (%s)", elapsed,
                 why);
    } else {
        NB_WARN(LV_LOG, w->ctx, w->uuid, "Failed to pause instance during live-migration %s",
                virGetLastErrorMessage());
    }
}

/* live_migration_completion_timeout reached: its action, once (Nova
 * repeats it every poll; a second abort or pause changes nothing). */
static void on_timeout(struct watch *w, virDomainPtr dom, double elapsed)
{
    w->timeout_fired = true;
    NB_WARN(LV_LOG, w->ctx, w->uuid, "Live migration not completed after %lld sec", w->timeout_s);
    if (w->timeout_action == LV_TIMEOUT_FORCE_COMPLETE) {
        char why[160];
        snprintf(why, sizeof(why),
                 "live_migration_completion_timeout of %lld s reached, "
                 "live_migration_timeout_action = force_complete",
                 w->timeout_s);
        force_complete(w, dom, elapsed, why);
        return;
    }
    if (w->aborted)
        return;
    w->timeout_aborted = true;
    NB_INFO(LV_LOG, w->ctx, w->uuid,
            "Aborting the live migration (live_migration_timeout_action = abort)");
    if (virDomainAbortJob(dom) < 0)
        NB_WARN(LV_LOG, w->ctx, w->uuid, "Failed to abort migration %s", virGetLastErrorMessage());
}

/* One poll of a running migration. */
static void watch_poll(struct watch *w, virDomainPtr dom, int n)
{
    struct nb_migration_progress p = {0};
    int type = job_stats(dom, &p);
    if (type != VIR_DOMAIN_JOB_UNBOUNDED)
        return; /* not started yet, or finishing */
    double elapsed = nb_time_mono() - w->t0;
    if (atomic_load(&w->m->abort_requested) && !w->aborted && !w->timeout_aborted) {
        w->aborted = true;
        NB_INFO(LV_LOG, w->ctx, w->uuid, "Aborting the live migration (requested)");
        if (virDomainAbortJob(dom) < 0)
            NB_WARN(LV_LOG, w->ctx, w->uuid, "Failed to abort migration %s",
                    virGetLastErrorMessage());
    }
    if (atomic_exchange(&w->m->force_complete_requested, 0))
        force_complete(w, dom, elapsed, "force complete requested");
    if (!w->timeout_fired && lv_timeout_due(w->timeout_s, elapsed, w->post_copy))
        on_timeout(w, dom, elapsed);
    long long want = -1, at = 0;
    for (int i = 0; i < w->steps.n; i++)
        if (elapsed >= (double)w->steps.at_s[i]) {
            want = w->steps.ms[i];
            at = w->steps.at_s[i];
        }
    if (want >= 0 && want != w->downtime) {
        if (virDomainMigrateSetMaxDowntime(dom, (unsigned long long)want, 0) == 0)
            NB_DEBUG(LV_LOG, w->ctx, w->uuid,
                     "Increasing downtime to %lld ms after %lld sec elapsed time", want, at);
        else
            NB_WARN(LV_LOG, w->ctx, w->uuid, "Unable to increase max downtime to %lld ms: %s", want,
                    virGetLastErrorMessage());
        w->downtime = want;
    }
    p.post_copy = w->post_copy;
    if (w->m->progress)
        w->m->progress(w->m->opaque, &p);
    if (n % 10 == 0)
        NB_DEBUG(LV_LOG, w->ctx, w->uuid,
                 "Migration running for %.0f secs, memory %lld%% remaining (bytes processed=%lld, "
                 "remaining=%lld, total=%lld); disk (bytes processed=%lld, remaining=%lld, "
                 "total=%lld).",
                 elapsed, p.memory_total ? p.memory_remaining * 100 / p.memory_total : 100,
                 p.memory_processed, p.memory_remaining, p.memory_total, p.disk_processed,
                 p.disk_remaining, p.disk_total);
}

/* The migration parameters: URI for the data, bandwidth, disks. */
static int build_params(const struct nb_live_migration *m, const json_t *migrate_disks,
                        virTypedParameterPtr *params, int *n)
{
    int max = 0;
    char uri[300];
    const char *addr = m->dest_addr;
    bool v6 = addr && strchr(addr, ':');
    if (addr && *addr) {
        snprintf(uri, sizeof(uri), "tcp://%s%s%s", v6 ? "[" : "", addr, v6 ? "]" : "");
        if (virTypedParamsAddString(params, n, &max, VIR_MIGRATE_PARAM_URI, uri) < 0)
            return -1;
    }
    long long bw = nb_conf_int("libvirt", "live_migration_bandwidth", 0);
    if (bw > 0 && virTypedParamsAddULLong(params, n, &max, VIR_MIGRATE_PARAM_BANDWIDTH,
                                          (unsigned long long)bw) < 0)
        return -1;
    size_t i;
    json_t *t;
    json_array_foreach (migrate_disks, i, t)
        if (virTypedParamsAddString(params, n, &max, VIR_MIGRATE_PARAM_MIGRATE_DISKS,
                                    json_string_value(t)) < 0)
            return -1;
    return 0;
}

static unsigned int migration_flags(struct lv *lv, const struct nb_live_migration *m, bool shared,
                                    bool *post_copy)
{
    unsigned int f = VIR_MIGRATE_LIVE | VIR_MIGRATE_PEER2PEER | VIR_MIGRATE_PERSIST_DEST |
                     VIR_MIGRATE_UNDEFINE_SOURCE;
    if (m->block_migration)
        f |= VIR_MIGRATE_NON_SHARED_INC;
    if (shared)
        f |= VIR_MIGRATE_UNSAFE;
    if (nb_conf_bool("libvirt", "live_migration_with_native_tls", false))
        f |= VIR_MIGRATE_TLS;
    *post_copy = nb_conf_bool("libvirt", "live_migration_permit_post_copy", false) &&
                 !__atomic_load_n(&lv->no_post_copy, __ATOMIC_RELAXED);
    if (*post_copy)
        f |= VIR_MIGRATE_POSTCOPY;
    else if (nb_conf_bool("libvirt", "live_migration_permit_auto_converge", false))
        f |= VIR_MIGRATE_AUTO_CONVERGE;
    return f;
}

/* QEMU's own figures for the finished migration, from the destination
 * (kept there for `virsh domjobinfo --completed`). */
static void log_completed(struct lv *lv, struct nb_ctx *ctx, const char *uuid,
                          const struct nb_live_migration *m, double wall)
{
    virConnectPtr dst = virConnectOpen(m->dest_uri);
    virDomainPtr dom = dst ? virDomainLookupByUUIDString(dst, uuid) : NULL;
    int type = 0, n = 0;
    virTypedParameterPtr p = NULL;
    char qemu[200] = "QEMU: no figures kept by the destination";
    if (dom && virDomainGetJobStats(dom, &type, &p, &n,
                                    VIR_DOMAIN_JOB_STATS_COMPLETED |
                                        VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED) == 0) {
        /* none after a post-copy migration (libvirt 9.0): job type NONE */
        if (type == VIR_DOMAIN_JOB_COMPLETED)
            snprintf(qemu, sizeof(qemu),
                     "QEMU: %llu ms elapsed, downtime %llu ms, %llu bytes of memory sent",
                     param_ull(p, n, VIR_DOMAIN_JOB_TIME_ELAPSED),
                     param_ull(p, n, VIR_DOMAIN_JOB_DOWNTIME),
                     param_ull(p, n, VIR_DOMAIN_JOB_MEMORY_PROCESSED));
        virTypedParamsFree(p, n);
    }
    if (dom)
        virDomainFree(dom);
    if (dst)
        virConnectClose(dst);
    NB_INFO(LV_LOG, ctx, uuid,
            "Migration operation has completed: instance %s now runs on %s (%.2f s; %s) from "
            "host %s",
            uuid, m->dest_host ? m->dest_host : m->dest_uri, wall, qemu, lv->host);
}

/* Resumes a guest the force-complete paused when the migration failed. */
static void unpause(struct watch *w, virDomainPtr dom)
{
    if (w->paused && lv_dom_state(dom) == VIR_DOMAIN_PAUSED && virDomainResume(dom) < 0)
        NB_WARN(LV_LOG, w->ctx, w->uuid,
                "Failed to resume paused instance before live-migration rollback %s",
                virGetLastErrorMessage());
}

/* Runs the migration in its thread and polls it until it ends (r->rc,
 * r->err). 0, or -1 when the thread cannot start. */
static int run_watched(struct run *r, struct watch *w, virDomainPtr dom)
{
    pthread_t th;
    if (pthread_create(&th, NULL, migrate_main, r) != 0)
        return nb_error(w->ctx, 500, NULL, "cannot start the migration thread");
    for (int n = 0; !wait_done(r, 500); n++)
        watch_poll(w, dom, n);
    pthread_join(th, NULL);
    return 0;
}

/* The end of a migration that ran: 0 when the guest runs on the
 * destination; else the guest, resumed if force-complete paused it, stays
 * on the source and the error says why: cancelled (m->cancelled, 409) for
 * an abort request, failed (500) for anything else, the completion
 * timeout's abort named with its figures. */
static int migration_result(struct lv *lv, struct watch *w, struct run *r, virDomainPtr dom)
{
    struct nb_live_migration *m = w->m;
    const char *dest = m->dest_host ? m->dest_host : "?";
    if (r->rc == 0) {
        log_completed(lv, w->ctx, w->uuid, m, nb_time_mono() - w->t0);
        return 0;
    }
    unpause(w, dom);
    if (w->aborted) {
        m->cancelled = true;
        NB_WARN(LV_LOG, w->ctx, w->uuid, "Migration operation was cancelled");
        return nb_error(w->ctx, 409, NULL, "Live migration of instance %s to %s was cancelled: %s",
                        w->uuid, m->dest_host ? m->dest_host : m->dest_uri, r->err);
    }
    NB_ERROR(LV_LOG, w->ctx, w->uuid, "Migration operation has aborted");
    if (w->timeout_aborted)
        return nb_error(w->ctx, 500, NULL,
                        "Live migration of instance %s to %s (%s) not completed after %lld sec "
                        "([libvirt] live_migration_completion_timeout = %lld s per GiB, %.1f GiB "
                        "to copy), aborted as live_migration_timeout_action = abort: %s",
                        w->uuid, dest, m->dest_uri, w->timeout_s,
                        (long long)nb_conf_int("libvirt", "live_migration_completion_timeout", 800),
                        w->gb, r->err);
    return nb_error(w->ctx, 500, NULL, "Live migration of instance %s to %s (%s) failed: %s",
                    w->uuid, dest, m->dest_uri, r->err);
}

int lv_live_migrate(struct lv *lv, struct nb_ctx *ctx, json_t *inst, struct nb_live_migration *m)
{
    const char *uuid = nb_json_str(inst, "uuid");
    m->cancelled = false;
    if (!m->dest_uri || !*m->dest_uri)
        return nb_error(ctx, 400, NULL, "live_migrate: no destination URI");
    virDomainPtr dom = lv_lookup(lv, ctx, uuid, true);
    if (!dom)
        return -1;
    const json_t *dd = m->dest_disks;
    bool shared = json_is_true(json_object_get(dd, "shared_storage"));
    struct watch w = {.lv = lv, .ctx = ctx, .uuid = uuid, .m = m, .downtime = -1};
    struct run r = {.dom = dom, .dest_uri = m->dest_uri};
    r.flags = migration_flags(lv, m, shared, &w.post_copy_ok);
    if (build_params(m, m->block_migration ? json_object_get(dd, "migrate_disks") : NULL, &r.params,
                     &r.nparams) < 0) {
        virDomainFree(dom);
        return nb_error(ctx, 500, NULL, "cannot build the migration parameters");
    }
    _cleanup_json_ json_t *disks = lv_migration_disks(lv, ctx, inst);
    nb_ctx_clear_error(ctx);
    w.gb = lv_migration_data_gb(ctx, uuid,
                                nb_json_int(json_object_get(inst, "flavor"), "memory_mb", 512),
                                disks, m->block_migration);
    lv_downtime_steps(w.gb, &w.steps);
    w.timeout_s = lv_completion_timeout_s(w.gb);
    w.timeout_action = lv_timeout_action();
    m->note[0] = '\0';
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.cond, NULL);
    NB_INFO(LV_LOG, ctx, uuid,
            "Starting live migration to %s (%s, data to %s, flags 0x%x%s%s; %.1f GiB to copy, "
            "completion timeout %lld s, then %s)",
            m->dest_host ? m->dest_host : "?", m->dest_uri, m->dest_addr ? m->dest_addr : "-",
            r.flags, m->block_migration ? ", block migration" : "",
            shared ? ", shared storage" : "", w.gb, w.timeout_s,
            w.timeout_action == LV_TIMEOUT_FORCE_COMPLETE ? "force_complete" : "abort");
    w.t0 = nb_time_mono();
    int rc = run_watched(&r, &w, dom);
    if (rc == 0 && r.rc < 0 && w.post_copy_ok && !w.aborted && !w.timeout_aborted &&
        strstr(r.err, "Postcopy is not supported")) {
        /* the destination's QEMU cannot do post-copy (no userfaultfd
         * for its user; QEMU checks on the incoming side only): nothing
         * was sent yet, so the move goes on without it. The evidence is
         * this host's: the sysctl and the source QEMU's user */
        char cause[256];
        lv_post_copy_cause(
            cause, sizeof(cause),
            lv_read_unprivileged_userfaultfd("/proc/sys/vm/unprivileged_userfaultfd"),
            qemu_uid(dom));
        const char *dest = m->dest_host ? m->dest_host : m->dest_uri;
        NB_WARN(LV_LOG, ctx, uuid,
                "[libvirt] live_migration_permit_post_copy: QEMU on %s cannot use post-copy (%s); "
                "likely cause: %s, so the kernel denies QEMU userfaultfd (its log on %s says "
                "\"userfaultfd not available\"; `sysctl vm.unprivileged_userfaultfd=1` on the "
                "hosts allows it); migrating without post-copy, now and from now on "
                "(force-complete pauses the guest)",
                dest, r.err, cause, dest);
        note_add(m, "post-copy refused by QEMU on %s (likely cause: %s)", dest, cause);
        r.flags &= ~(unsigned)VIR_MIGRATE_POSTCOPY;
        if (nb_conf_bool("libvirt", "live_migration_permit_auto_converge", false))
            r.flags |= VIR_MIGRATE_AUTO_CONVERGE;
        w.post_copy_ok = false;
        __atomic_store_n(&lv->no_post_copy, true, __ATOMIC_RELAXED);
        r.done = false;
        r.err[0] = '\0';
        rc = run_watched(&r, &w, dom);
    }
    if (rc == 0)
        rc = migration_result(lv, &w, &r, dom);
    pthread_cond_destroy(&r.cond);
    pthread_mutex_destroy(&r.lock);
    virTypedParamsFree(r.params, r.nparams);
    virDomainFree(dom);
    return rc;
}

/* leases.c - several control planes on one MariaDB (issue 13): the leases
 * (db/lease.h) that tell them apart.
 *
 *   conductor@<host>:<pid>  each conductor's liveness, renewed every third
 *                           of [conductor] lease_time (default 30 s); the
 *                           instances it moves carry the name
 *                           (instances.nubo_conductor)
 *   conductor.periodic      the one conductor that runs the periodic work
 *                           that must run once (the cloud audit, resize
 *                           auto-confirm) and takes over dead control planes
 *
 * A control plane is dead when its liveness lease has expired, or at once
 * when the lease names this host and a pid that no longer runs (a restart
 * after kill -9). Its lease is then taken over (one statement, so one
 * taker), its unfinished work recovered as start-up recovery recovers a
 * restarted nubo's (recovery.c, scoped to the instances it last moved),
 * and the lease deleted. Start-up recovery skips the work of the live
 * ones. On SQLite none of this runs: one process owns the file. */
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/conductor/internal.h"
#include "compute/objects/instance.h"
#include "db/db.h"
#include "db/lease.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOG_LEASE "nubo.conductor.leases"
#define PERIODIC "conductor.periodic"
#define LIVENESS "conductor@"

struct cond_leases {
    struct conductor *c;
    char me[300];
    double ttl;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;
    bool periodic;         /* holds conductor.periodic */
    json_t *taken;         /* {name: true}: dead control planes being taken over (renewed) */
    json_t *startup_taken; /* [name]: those the start-up pass took */
    double pruned_at;      /* nb_time_mono of the last prune of commit markers */
};

/* Whether liveness lease name's holder is certainly gone: it names this
 * host and a pid that does not run. */
static bool pid_gone(const struct cond_leases *l, const char *name)
{
    const char *at = name + strlen(LIVENESS), *colon = strrchr(at, ':');
    const char *host = l->c->env->my_host;
    if (!colon || !host || strlen(host) != (size_t)(colon - at) || strncmp(at, host, strlen(host)))
        return false;
    char *end;
    long pid = strtol(colon + 1, &end, 10);
    if (*end || pid <= 1 || (pid_t)pid == getpid())
        return false;
    return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

static bool is_liveness(const char *name)
{
    return name && !strncmp(name, LIVENESS, strlen(LIVENESS));
}

/* Takes over row's lease (another control plane's liveness lease) when its
 * holder is dead. 1 taken, 0 not dead or taken by someone else. */
static int take_if_dead(struct cond_leases *l, struct nb_ctx *ctx, const json_t *row)
{
    const char *name = nb_json_str(row, "name"), *holder = nb_json_str(row, "holder");
    if (!is_liveness(name) || !holder || !strcmp(name, l->me) || !strcmp(holder, l->me))
        return 0;
    bool gone = !strcmp(name, holder) && pid_gone(l, name);
    if (!gone && json_number_value(json_object_get(row, "remaining")) >= 0)
        return 0;
    if (nb_lease_take_over(l->c->db, ctx, name, holder, l->me, l->ttl, gone) != 1) {
        nb_ctx_clear_error(ctx); /* someone else took it, or the next round tries */
        return 0;
    }
    NB_WARN(LOG_LEASE, ctx, NULL, "Control plane %s is gone (%s): taking over its unfinished work",
            name, gone ? "no such process on this host" : "its lease expired");
    pthread_mutex_lock(&l->lock);
    json_object_set_new(l->taken, name, json_true());
    pthread_mutex_unlock(&l->lock);
    return 1;
}

/* Gives up a taken-over lease once its work is recovered. */
static void taken_done(struct cond_leases *l, const char *name)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    pthread_mutex_lock(&l->lock);
    json_object_del(l->taken, name);
    pthread_mutex_unlock(&l->lock);
    nb_lease_release(l->c->db, &ctx, name, l->me, false);
    nb_ctx_clear_error(&ctx); /* left: a later start takes it again */
    NB_INFO(LOG_LEASE, &ctx, NULL, "Took over the unfinished work of control plane %s", name);
}

struct takeover {
    struct cond_leases *l;
    char name[300];
};

static void *takeover_main(void *arg)
{
    struct takeover *t = arg;
    struct cond_scope s = {.max_id = LLONG_MAX, .only = t->name};
    cond_recover(t->l->c, &s);
    taken_done(t->l, t->name);
    free(t);
    return NULL;
}

/* The periodic holder's round: every other control plane found dead is
 * taken over, its recovery in a thread of its own (it may wait for agents;
 * this thread must keep the leases renewed). */
static void take_over_dead(struct cond_leases *l, struct nb_ctx *ctx)
{
    json_t *rows = nb_lease_list(l->c->db, ctx);
    nb_ctx_clear_error(ctx); /* the next round tries again */
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        if (take_if_dead(l, ctx, r) != 1)
            continue;
        struct takeover *t = calloc(1, sizeof(*t));
        t->l = l;
        snprintf(t->name, sizeof(t->name), "%s", nb_json_str(r, "name"));
        if (nb_thread_detached(takeover_main, t) != 0) {
            NB_ERROR(LOG_LEASE, ctx, NULL, "cannot start the take-over of %s", t->name);
            free(t);
        }
    }
    json_decref(rows);
}

/* As the periodic lease's holder, every [database] commit_marker_max_age
 * / 4 (default 3600 s, at least NB_MARIA_MARKER_MIN_AGE_S): the commit
 * markers of pool connection slots not written for that long, which are
 * those of processes gone (db/mariadb.h), are deleted; one control plane
 * does it for all. */
static void prune_commit_markers(struct cond_leases *l, struct nb_ctx *ctx)
{
    int max_age = (int)nb_conf_int("database", "commit_marker_max_age", 3600);
    double now = nb_time_mono();
    if (l->pruned_at && now - l->pruned_at < max_age / 4.0)
        return;
    l->pruned_at = now;
    int n = nb_db_prune_commit_markers(l->c->db, ctx, max_age);
    if (n > 0)
        NB_INFO(LOG_LEASE, ctx, NULL,
                "Deleted %d commit markers not written for %d s (connections of processes gone)", n,
                max_age);
    nb_ctx_clear_error(ctx); /* logged by the database layer; tried again next time */
}

/* One round: renews this conductor's lease and those it is taking over,
 * tries for conductor.periodic, and as its holder looks for the dead. */
static void round_once(struct cond_leases *l)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    struct nb_db *db = l->c->db;
    int mine = nb_lease_acquire(db, &ctx, l->me, l->me, l->ttl);
    if (mine == 0)
        NB_ERROR(LOG_LEASE, &ctx, NULL,
                 "Lease %s is held by another control plane (this one was taken for dead)", l->me);
    nb_ctx_clear_error(&ctx); /* logged by the database layer; the next round tries */
    pthread_mutex_lock(&l->lock);
    json_t *taken = json_deep_copy(l->taken);
    pthread_mutex_unlock(&l->lock);
    const char *name;
    json_t *v;
    json_object_foreach (taken, name, v) {
        nb_lease_take_over(db, &ctx, name, l->me, l->me, l->ttl, true);
        nb_ctx_clear_error(&ctx);
    }
    json_decref(taken);
    int p = nb_lease_acquire(db, &ctx, PERIODIC, l->me, l->ttl);
    nb_ctx_clear_error(&ctx);
    if (p >= 0 && (p == 1) != l->periodic) {
        NB_INFO(LOG_LEASE, &ctx, NULL, "%s lease %s: this control plane %s the periodic work",
                p == 1 ? "Took" : "Lost", PERIODIC, p == 1 ? "now runs" : "no longer runs");
        __atomic_store_n(&l->periodic, p == 1, __ATOMIC_RELAXED);
    }
    if (l->periodic) {
        take_over_dead(l, &ctx);
        prune_commit_markers(l, &ctx);
    }
}

static void *lease_main(void *arg)
{
    struct cond_leases *l = arg;
    pthread_mutex_lock(&l->lock);
    while (!l->stop) {
        pthread_mutex_unlock(&l->lock);
        round_once(l);
        double step = l->ttl / 3 < 0.5 ? 0.5 : l->ttl / 3;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long ns = ts.tv_nsec + (long long)(step * 1e9);
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        pthread_mutex_lock(&l->lock);
        while (!l->stop && pthread_cond_timedwait(&l->wake, &l->lock, &ts) == 0)
            ;
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

int cond_leases_start(struct conductor *c)
{
    if (!nb_db_is_mariadb(c->db))
        return 0;
    struct cond_leases *l = calloc(1, sizeof(*l));
    l->c = c;
    snprintf(l->me, sizeof(l->me), "%s%s:%d", LIVENESS, c->env->my_host ? c->env->my_host : "",
             (int)getpid());
    l->ttl = (double)nb_conf_int("conductor", "lease_time", 30);
    if (l->ttl < 1)
        l->ttl = 1;
    l->taken = json_object();
    l->startup_taken = json_array();
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->wake, NULL);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    if (nb_lease_acquire(c->db, &ctx, l->me, l->me, l->ttl) < 0) {
        NB_ERROR(LOG_LEASE, &ctx, NULL, "cannot take the liveness lease %s", l->me);
        json_decref(l->taken);
        json_decref(l->startup_taken);
        free(l);
        return -1;
    }
    l->periodic = nb_lease_acquire(c->db, &ctx, PERIODIC, l->me, l->ttl) == 1;
    nb_ctx_clear_error(&ctx);
    nb_instance_set_worker(l->me);
    c->leases = l;
    if (pthread_create(&l->thread, NULL, lease_main, l) != 0) {
        NB_ERROR(LOG_LEASE, &ctx, NULL, "cannot start the lease thread");
        c->leases = NULL;
        nb_instance_set_worker(NULL);
        return -1;
    }
    NB_INFO(LOG_LEASE, &ctx, NULL, "Control plane %s: liveness lease taken (lease_time %.0f s)%s",
            l->me, l->ttl, l->periodic ? "; it runs the periodic work (" PERIODIC ")" : "");
    return 0;
}

void cond_leases_stop(struct conductor *c)
{
    struct cond_leases *l = c->leases;
    if (!l)
        return;
    pthread_mutex_lock(&l->lock);
    l->stop = true;
    pthread_cond_signal(&l->wake);
    pthread_mutex_unlock(&l->lock);
    pthread_join(l->thread, NULL);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    nb_lease_release(c->db, &ctx, PERIODIC, l->me, false);
    nb_lease_release(c->db, &ctx, l->me, l->me, true);
    nb_ctx_clear_error(&ctx); /* they expire anyway */
    __atomic_store_n(&l->periodic, false, __ATOMIC_RELAXED);
    NB_INFO(LOG_LEASE, &ctx, NULL, "Control plane %s: leases given up", l->me);
}

bool cond_runs_periodic(struct conductor *c)
{
    return !c->leases || __atomic_load_n(&c->leases->periodic, __ATOMIC_RELAXED);
}

void cond_leases_startup_scope(struct conductor *c, struct cond_scope *s)
{
    *s = (struct cond_scope){.max_id = c->last_id_at_start};
    struct cond_leases *l = c->leases;
    if (!l)
        return;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    s->skip = json_object();
    json_object_set_new(s->skip, l->me, json_true()); /* what this process moved is live */
    json_t *rows = nb_lease_list(c->db, &ctx);
    nb_ctx_clear_error(&ctx); /* then only this process's own work is skipped */
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *name = nb_json_str(r, "name");
        if (!is_liveness(name) || !strcmp(name, l->me))
            continue;
        if (take_if_dead(l, &ctx, r) == 1)
            json_array_append_new(l->startup_taken, json_string(name));
        else
            json_object_set_new(s->skip, name, json_true());
    }
    json_decref(rows);
    if (json_object_size(s->skip) > 1)
        NB_INFO(LOG_LEASE, &ctx, NULL,
                "Start-up recovery leaves the work of %zu live control plane(s) alone",
                json_object_size(s->skip) - 1);
}

void cond_leases_startup_done(struct conductor *c, struct cond_scope *s)
{
    json_decref(s->skip);
    s->skip = NULL;
    struct cond_leases *l = c->leases;
    if (!l)
        return;
    size_t i;
    json_t *n;
    json_array_foreach (l->startup_taken, i, n)
        taken_done(l, json_string_value(n));
    json_array_clear(l->startup_taken);
}

void cond_leases_own(struct conductor *c, const json_t *args)
{
    if (!c->leases)
        return;
    struct nb_ctx ctx; /* best-effort: the handler runs anyway */
    nb_ctx_init_system(&ctx, NULL);
    static const char *const keys[] = {"uuid", "instance_uuid"};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
        if (nb_json_str(args, keys[k]))
            nb_instance_record_worker(c->db, &ctx, nb_json_str(args, keys[k]));
    size_t i;
    json_t *u;
    json_array_foreach (json_object_get(args, "instance_uuids"), i, u)
        if (json_is_string(u))
            nb_instance_record_worker(c->db, &ctx, json_string_value(u));
    nb_ctx_clear_error(&ctx);
}

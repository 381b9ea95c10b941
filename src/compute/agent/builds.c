/* builds.c - the compute agent's builds, as Nova's build_and_run_instance:
 * the cast returns at once and the build runs on a thread of its own, at
 * most [DEFAULT] max_concurrent_builds (10, Nova's default; 0: no limit)
 * at a time per host; the others wait for a slot. A build holds its
 * worker for the whole spawn (overlay, define, start, and the
 * network-vif-plugged wait, up to vif_plugging_timeout), so on the bus
 * workers builds went [compute] agent_workers at a time and kept every
 * other message of the host (a stop, a console request) waiting behind
 * them.
 *
 * Order is kept: the worker returns only once the build's thread holds
 * the instance's lock, so a delete cast right after the build is handled
 * after it, as it was when the worker ran the build itself. The thread
 * waits for its slot holding that lock, as Nova's does (operations on
 * the instance wait for the build; the locks are per instance, so no
 * other instance's operation waits); a running build takes no other
 * instance's lock, so this cannot deadlock. At stop the agent waits for
 * the build threads (nb_agent_builds_drain); a build cast after that runs
 * on the worker, as before.
 *
 * The journal: on the AMQP bus (an agent in a process of its own) each
 * build taken is a file <state_path>/compute-builds/<host>/<uuid> (the
 * instance and the request ID) from when the agent takes it until
 * its result was sent; the bus acks the cast only once it is written
 * (amqp.c), so a kill before that has it redelivered. An agent killed mid-spawn leaves the file; at
 * its next start nb_agent_builds_recover reports each such build: ACTIVE when the guest runs, else
 * (what the spawn left destroyed) interrupted, and the conductor schedules it again. In the
 * all-in-one the conductor's start-up recovery does this (recovery.c). */
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/agent/internal.h"
#include "bus/bus.h"
#include "compute/rpc/compute_api.h"
#include "compute/rpc/conductor_api.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t builds_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t builds_cond = PTHREAD_COND_INITIALIZER;
static int build_threads; /* alive, all agents of the process */
static bool draining;
/* {uuid: true}: builds the journal had at this run's start (a
 * redelivered cast of one of them is not run again: the bus acks on
 * receipt, so this is a guard, not the expected path) */
static json_t *recovered;

/* The journal's directory of a's host into out; false when the agent
 * keeps none (the in-process bus). */
static bool journal_dir(const struct agent *a, char *out, size_t n)
{
    if (!strcmp(nb_bus_transport(), "inproc"))
        return false;
    snprintf(out, n, "%s/compute-builds/%s", nb_conf_str("DEFAULT", "state_path", "/var/lib/nubo"),
             a->host);
    return true;
}

static void journal_add(struct agent *a, struct nb_ctx *ctx, json_t *args)
{
    char dir[PATH_MAX], path[PATH_MAX + 64];
    const char *uuid = nb_json_str(json_object_get(args, "instance"), "uuid");
    if (!uuid || strchr(uuid, '/') || !journal_dir(a, dir, sizeof(dir)))
        return;
    snprintf(path, sizeof(path), "%s/%s", dir, uuid);
    json_t *rec = json_pack("{s:O, s:s}", "instance", json_object_get(args, "instance"),
                            "request_id", ctx->request_id);
    if (nb_mkdir_p(dir) < 0 || json_dump_file(rec, path, JSON_COMPACT) < 0)
        NB_WARN(LOG_AGENT, ctx, uuid, "cannot write the build journal %s", path);
    json_decref(rec);
}

static void journal_remove(struct agent *a, const char *uuid)
{
    char dir[PATH_MAX], path[PATH_MAX + 64];
    if (!uuid || !journal_dir(a, dir, sizeof(dir)))
        return;
    snprintf(path, sizeof(path), "%s/%s", dir, uuid);
    unlink(path);
}

static bool journal_has(struct agent *a, const char *uuid)
{
    char dir[PATH_MAX], path[PATH_MAX + 64];
    if (strchr(uuid, '/') || !journal_dir(a, dir, sizeof(dir)))
        return false;
    snprintf(path, sizeof(path), "%s/%s", dir, uuid);
    return access(path, F_OK) == 0;
}

static bool guest_exists(struct agent *a, struct nb_ctx *ctx, const char *uuid)
{
    struct nb_ctx sub;
    nb_ctx_child(&sub, ctx);
    struct nb_guest_info gi;
    return a->drv->ops->get_info(a->drv, &sub, a->host, uuid, &gi) == 0;
}

/* Waits for one of the host's build slots (builds_lock not held). */
static void take_slot(struct agent *a, struct nb_ctx *ctx, const char *uuid)
{
    long max = nb_conf_int("DEFAULT", "max_concurrent_builds", 10);
    pthread_mutex_lock(&builds_lock);
    if (max > 0 && a->builds_running >= max) {
        NB_INFO(LOG_AGENT, ctx, uuid,
                "Build waits for a slot: %ld of %ld concurrent builds of host %s in use "
                "([DEFAULT] max_concurrent_builds)",
                max, max, a->host);
        while (a->builds_running >= max)
            pthread_cond_wait(&builds_cond, &builds_lock);
    }
    a->builds_running++;
    pthread_mutex_unlock(&builds_lock);
}

static void give_slot(struct agent *a)
{
    pthread_mutex_lock(&builds_lock);
    a->builds_running--;
    pthread_cond_broadcast(&builds_cond);
    pthread_mutex_unlock(&builds_lock);
}

/* The build itself, on the thread that holds the instance's lock lk
 * (given back here). */
static void build_locked(struct agent *a, struct nb_ctx *ctx, json_t *args, struct agent_ilock *lk)
{
    json_t *inst = json_object_get(args, "instance");
    const char *uuid = nb_json_str(inst, "uuid");
    struct nb_ctx dctx;
    nb_ctx_child(&dctx, ctx);
    take_slot(a, ctx, uuid);
    double t0 = nb_time_mono();
    NB_INFO(LOG_AGENT, ctx, uuid, "Starting instance build on host %s", a->host);
    /* The scheduler's placement claim for this node is what the host took
     * the build on; Nova's resource tracker logs this from
     * nova.compute.claims before the spawn, and runbooks look for it. */
    const char *node = nb_json_str(args, "node");
    NB_INFO("nubo.compute.claims", ctx, uuid, "Claim successful on node %s",
            node && *node ? node : a->node);
    int rc = nb_agent_verify_disks(a, &dctx, inst, NULL);
    if (rc == 0)
        rc = a->drv->ops->spawn(a->drv, &dctx, a->host, inst);
    double spawned = nb_time_mono();
    if (rc == 0) {
        NB_INFO(LOG_AGENT, ctx, uuid, "Took %.2f seconds to spawn the instance on the hypervisor.",
                spawned - t0);
    } else {
        NB_ERROR(LOG_AGENT, ctx, uuid, "Instance failed to spawn on %s: %s", a->host,
                 nb_ctx_message(&dctx));
        /* leave nothing behind for the reschedule */
        struct nb_ctx cctx;
        nb_ctx_child(&cctx, ctx);
        a->drv->ops->destroy(a->drv, &cctx, a->host, inst);
    }
    give_slot(a);
    nb_agent_unlock(a, lk);
    __atomic_store_n(&a->dirty, true, __ATOMIC_RELAXED);
    if (rc == 0)
        NB_INFO(LOG_AGENT, ctx, uuid, "Took %.2f seconds to build instance.", nb_time_mono() - t0);
    if (nb_conductor_build_result(ctx, uuid, a->host, rc == 0,
                                  rc == 0 ? NULL : nb_ctx_message(&dctx)) == 0)
        journal_remove(a, uuid); /* else the next start reports it */
}

struct build {
    struct agent *a;
    struct nb_ctx ctx;
    json_t *args;
    bool locked; /* the thread holds the instance's lock: the worker may return */
};

static void *build_main(void *arg)
{
    struct build *b = arg;
    struct agent *a = b->a;
    struct nb_ctx ctx = b->ctx;
    json_t *args = b->args;
    struct agent_ilock *lk =
        nb_agent_lock(a, nb_json_str(json_object_get(args, "instance"), "uuid"));
    pthread_mutex_lock(&builds_lock);
    b->locked = true; /* b belongs to the worker's stack: not used after this */
    pthread_cond_broadcast(&builds_cond);
    pthread_mutex_unlock(&builds_lock);
    build_locked(a, &ctx, args, lk);
    json_decref(args);
    pthread_mutex_lock(&builds_lock);
    build_threads--;
    pthread_cond_broadcast(&builds_cond);
    pthread_mutex_unlock(&builds_lock);
    return NULL;
}

void nb_agent_build_and_run(struct agent *a, struct nb_ctx *ctx, json_t *args)
{
    const char *uuid = nb_json_str(json_object_get(args, "instance"), "uuid");
    if (!uuid)
        return;
    if (json_is_true(json_object_get(args, "redelivered"))) {
        pthread_mutex_lock(&builds_lock);
        bool taken = json_object_get(recovered, uuid) != NULL;
        pthread_mutex_unlock(&builds_lock);
        if (taken) {
            NB_WARN(LOG_AGENT, ctx, uuid,
                    "Dropping the redelivered build: the previous run of this compute service "
                    "had taken it (reported from its journal)");
            return;
        }
        /* acked after its journal entry (amqp.c): a connection lost just
         * before that ack has it back while this run builds it, or has
         * built it */
        if (journal_has(a, uuid) || guest_exists(a, ctx, uuid)) {
            NB_WARN(LOG_AGENT, ctx, uuid,
                    "Dropping the redelivered build: this run of the compute service has taken "
                    "it already");
            return;
        }
        NB_INFO(LOG_AGENT, ctx, uuid,
                "Build redelivered: the previous run of this compute service received it but "
                "never started it");
    }
    journal_add(a, ctx, args); /* before the worker returns */
    struct build b = {.a = a, .ctx = *ctx, .args = json_incref(args)};
    pthread_mutex_lock(&builds_lock);
    bool threaded = !draining;
    if (threaded)
        build_threads++;
    pthread_mutex_unlock(&builds_lock);
    if (threaded && nb_thread_detached(build_main, &b) != 0) {
        NB_WARN(LOG_AGENT, ctx, uuid, "cannot start a build thread: the build runs on the worker");
        pthread_mutex_lock(&builds_lock);
        build_threads--;
        pthread_mutex_unlock(&builds_lock);
        threaded = false;
    }
    if (!threaded) {
        build_locked(a, ctx, args, nb_agent_lock(a, uuid));
        json_decref(b.args);
        return;
    }
    pthread_mutex_lock(&builds_lock);
    while (!b.locked)
        pthread_cond_wait(&builds_cond, &builds_lock);
    pthread_mutex_unlock(&builds_lock);
}

void nb_agent_builds_open(void)
{
    pthread_mutex_lock(&builds_lock);
    draining = false;
    pthread_mutex_unlock(&builds_lock);
}

void nb_agent_builds_drain(void)
{
    pthread_mutex_lock(&builds_lock);
    draining = true;
    if (build_threads > 0)
        NB_INFO(LOG_AGENT, NULL, NULL, "Waiting for %d build(s) in progress before stopping",
                build_threads);
    while (build_threads > 0)
        pthread_cond_wait(&builds_cond, &builds_lock);
    pthread_mutex_unlock(&builds_lock);
}

/* One build of the journal a previous run left: reported, then removed. */
static void recover_one(struct agent *a, const char *dir, const char *uuid)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s", dir, uuid);
    json_t *rec = json_load_file(path, 0, NULL);
    json_t *inst = json_object_get(rec, "instance");
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, nb_json_str(rec, "request_id"));
    int rc = 0;
    if (!json_is_object(inst)) {
        NB_WARN(LOG_AGENT, &ctx, uuid, "unreadable build journal %s: removed", path);
    } else if (nb_agent_guest_power_state(a, &ctx, uuid) == NB_POWER_RUNNING) {
        NB_WARN(LOG_AGENT, &ctx, uuid,
                "The build was interrupted by a stop of the compute service on %s after the "
                "guest started: reporting it built",
                a->host);
        rc = nb_conductor_build_result(&ctx, uuid, a->host, true, NULL);
    } else {
        struct nb_ctx dctx;
        nb_ctx_child(&dctx, &ctx);
        a->drv->ops->destroy(a->drv, &dctx, a->host, inst); /* what the spawn left */
        char msg[600];
        snprintf(msg, sizeof(msg),
                 "The build was interrupted: the compute service on host %s stopped during the "
                 "spawn (killed or crashed) and found no running guest when it started again.",
                 a->host);
        NB_WARN(LOG_AGENT, &ctx, uuid, "%s", msg);
        rc = nb_conductor_build_interrupted(&ctx, uuid, a->host, msg);
    }
    if (rc == 0)
        unlink(path);
    json_decref(rec);
}

struct recovery {
    struct agent *a;
    char dir[PATH_MAX];
    json_t *uuids;
};

static void *recover_main(void *arg)
{
    struct recovery *r = arg;
    size_t i;
    json_t *u;
    json_array_foreach (r->uuids, i, u)
        recover_one(r->a, r->dir, json_string_value(u));
    json_decref(r->uuids);
    free(r);
    return NULL;
}

void nb_agent_builds_recover(struct agent *a)
{
    struct recovery *r = calloc(1, sizeof(*r));
    if (!r || !journal_dir(a, r->dir, sizeof(r->dir))) {
        free(r);
        return;
    }
    r->a = a;
    r->uuids = json_array();
    nb_bus_redelivery_to_handler(NB_COMPUTE_BUILD_AND_RUN_INSTANCE);
    DIR *d = opendir(r->dir);
    pthread_mutex_lock(&builds_lock);
    if (!recovered)
        recovered = json_object();
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') {
            json_array_append_new(r->uuids, json_string(e->d_name));
            json_object_set_new(recovered, e->d_name, json_true());
        }
    pthread_mutex_unlock(&builds_lock);
    if (d)
        closedir(d);
    size_t n = json_array_size(r->uuids);
    if (n)
        NB_INFO(LOG_AGENT, NULL, NULL,
                "%zu build(s) taken by the previous run of the compute service on %s were not "
                "reported: reporting them",
                n, a->host);
    if (n == 0 || nb_thread_detached(recover_main, r) != 0) {
        json_decref(r->uuids);
        free(r);
    }
}

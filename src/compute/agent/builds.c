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
 * on the worker, as before. */
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"
#include "compute/agent/internal.h"
#include "compute/rpc/conductor_api.h"

#include <stdlib.h>

static pthread_mutex_t builds_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t builds_cond = PTHREAD_COND_INITIALIZER;
static int build_threads; /* alive, all agents of the process */
static bool draining;

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
    nb_conductor_build_result(ctx, uuid, a->host, rc == 0, rc == 0 ? NULL : nb_ctx_message(&dctx));
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
    struct build b = {.a = a, .ctx = *ctx, .args = json_incref(args)};
    pthread_mutex_lock(&builds_lock);
    bool threaded = !draining;
    if (threaded)
        build_threads++;
    pthread_mutex_unlock(&builds_lock);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (threaded && pthread_create(&t, &attr, build_main, &b) != 0) {
        NB_WARN(LOG_AGENT, ctx, uuid, "cannot start a build thread: the build runs on the worker");
        pthread_mutex_lock(&builds_lock);
        build_threads--;
        pthread_mutex_unlock(&builds_lock);
        threaded = false;
    }
    pthread_attr_destroy(&attr);
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

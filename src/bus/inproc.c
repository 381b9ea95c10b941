/* inproc.c - the in-process bus backend (see bus.h, backend.h), used by
 * the all-in-one ([bus] transport = inproc, the default).
 *
 * Each topic has a FIFO of messages and at most nthreads handlers running
 * at once. A topic of nb_bus_listen has nthreads workers of its own that
 * pop and run its handler. A topic of nb_bus_listen_shared has none: the
 * workers of one pool shared by all such topics ([bus] shared_workers,
 * default 16, started at the first such topic) take the topics with a
 * message waiting in turn, one message per turn, so a topic with a long
 * queue does not hold back the others; with nthreads 1 a topic's messages
 * are handled one at a time in order, as on a worker of its own. A call
 * waits on a per-call condition variable for the reply (or the timeout).
 * Messages carry a copy of the caller's context, restored for the
 * handler, so the request ID follows the work.
 *
 * The topics are found by name in a hash table that doubles as it fills
 * (10,000 fake hosts are 10,000 topics), under a read-write lock. */
#include "bus/backend.h"
#include "common/config.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_WORKERS 16
#define MAX_SHARED_WORKERS 256

struct reply {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    bool abandoned; /* caller timed out; the worker frees */
    json_t *value;
};

struct msg {
    struct msg *next;
    char method[64];
    json_t *ctx;
    json_t *args;
    struct reply *reply; /* NULL for casts */
};

struct topic {
    struct topic *next_hash; /* the table's bucket */
    struct topic *next_all;  /* every topic, for the shutdown */
    uint32_t hash;
    nb_bus_handler_fn fn;
    void *opaque;
    bool shared;           /* run by the pool: lock is pool.lock, no threads */
    pthread_mutex_t *lock; /* guards head, tail, stopping, running, ready */
    pthread_mutex_t own_lock;
    pthread_cond_t cond; /* own workers only */
    struct msg *head, *tail;
    bool stopping;
    int nthreads; /* handlers at most at once */
    int running;  /* shared: handlers running now */
    bool ready;   /* shared: in the pool's ready list */
    struct topic *next_ready;
    int nworkers; /* own workers started */
    pthread_t threads[MAX_WORKERS];
    char name[];
};

static struct {
    struct topic **buckets;
    size_t nbuckets, count;
    struct topic *all;
    pthread_rwlock_t lock;
} reg = {.lock = PTHREAD_RWLOCK_INITIALIZER};

/* The shared workers and the topics that have a message for them. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct topic *ready_head, *ready_tail;
    bool stopping;
    int nworkers;
    pthread_t *workers;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static int inproc_init(void)
{
    return 0;
}

/* FNV-1a */
static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* Under reg.lock. */
static struct topic *lookup(const char *name, uint32_t h)
{
    if (!reg.nbuckets)
        return NULL;
    for (struct topic *t = reg.buckets[h & (reg.nbuckets - 1)]; t; t = t->next_hash)
        if (t->hash == h && !strcmp(t->name, name))
            return t;
    return NULL;
}

static struct topic *find_topic(const char *name)
{
    uint32_t h = hash_name(name);
    pthread_rwlock_rdlock(&reg.lock);
    struct topic *t = lookup(name, h);
    pthread_rwlock_unlock(&reg.lock);
    return t;
}

/* Doubles the table (under the write lock) when it holds as many topics
 * as buckets. 0, or -1 out of memory. */
static int grow(void)
{
    if (reg.count < reg.nbuckets)
        return 0;
    size_t n = reg.nbuckets ? reg.nbuckets * 2 : 64;
    struct topic **b = calloc(n, sizeof(*b));
    if (!b)
        return -1;
    for (size_t i = 0; i < reg.nbuckets; i++)
        for (struct topic *t = reg.buckets[i], *next; t; t = next) {
            next = t->next_hash;
            t->next_hash = b[t->hash & (n - 1)];
            b[t->hash & (n - 1)] = t;
        }
    free(reg.buckets);
    reg.buckets = b;
    reg.nbuckets = n;
    return 0;
}

/* Adds t unless its name is taken. 0/-1. */
static int add_topic(struct topic *t)
{
    pthread_rwlock_wrlock(&reg.lock);
    int rc = -1;
    if (!lookup(t->name, t->hash) && grow() == 0) {
        size_t i = t->hash & (reg.nbuckets - 1);
        t->next_hash = reg.buckets[i];
        reg.buckets[i] = t;
        t->next_all = reg.all;
        reg.all = t;
        reg.count++;
        rc = 0;
    }
    pthread_rwlock_unlock(&reg.lock);
    return rc;
}

static void finish_reply(struct reply *r, json_t *value)
{
    pthread_mutex_lock(&r->lock);
    if (r->abandoned) {
        pthread_mutex_unlock(&r->lock);
        json_decref(value);
        pthread_mutex_destroy(&r->lock);
        pthread_cond_destroy(&r->cond);
        free(r);
        return;
    }
    r->value = value;
    r->done = true;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

/* Runs t's handler on m and frees m. */
static void run(struct topic *t, struct msg *m)
{
    struct nb_ctx ctx;
    nb_ctx_from_json(&ctx, m->ctx);
    json_t *out = t->fn(t->opaque, &ctx, m->method, m->args);
    if (m->reply)
        finish_reply(m->reply, out ? out : json_null());
    else
        json_decref(out);
    json_decref(m->ctx);
    json_decref(m->args);
    free(m);
}

/* Under t's lock. */
static struct msg *pop(struct topic *t)
{
    struct msg *m = t->head;
    t->head = m->next;
    if (!t->head)
        t->tail = NULL;
    return m;
}

static void *worker(void *arg)
{
    struct topic *t = arg;
    for (;;) {
        pthread_mutex_lock(t->lock);
        while (!t->head && !t->stopping)
            pthread_cond_wait(&t->cond, t->lock);
        if (!t->head) { /* stopping and drained */
            pthread_mutex_unlock(t->lock);
            return NULL;
        }
        struct msg *m = pop(t);
        pthread_mutex_unlock(t->lock);
        run(t, m);
    }
}

/* Under pool.lock: queues t for the pool if it has a message and room
 * for one more handler. */
static void make_ready(struct topic *t)
{
    if (t->ready || !t->head || t->running >= t->nthreads)
        return;
    t->ready = true;
    t->next_ready = NULL;
    if (pool.ready_tail)
        pool.ready_tail->next_ready = t;
    else
        pool.ready_head = t;
    pool.ready_tail = t;
    pthread_cond_signal(&pool.cond);
}

/* A shared worker: one message of the first ready topic, which goes to
 * the back of the list if it has more. At shutdown it leaves once no
 * topic is ready; a topic held back by its nthreads is made ready again
 * by the worker that finishes its handler, which then goes on. */
static void *pool_worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (!pool.ready_head && !pool.stopping)
            pthread_cond_wait(&pool.cond, &pool.lock);
        struct topic *t = pool.ready_head;
        if (!t)
            break;
        pool.ready_head = t->next_ready;
        if (!pool.ready_head)
            pool.ready_tail = NULL;
        t->ready = false;
        struct msg *m = pop(t);
        t->running++;
        make_ready(t);
        pthread_mutex_unlock(&pool.lock);
        run(t, m);
        pthread_mutex_lock(&pool.lock);
        t->running--;
        make_ready(t);
    }
    pthread_mutex_unlock(&pool.lock);
    return NULL;
}

/* Starts the shared workers once. Under pool.lock. 0/-1. */
static int pool_start(void)
{
    if (pool.nworkers)
        return 0;
    long n = nb_conf_int("bus", "shared_workers", 16);
    if (n < 1 || n > MAX_SHARED_WORKERS) {
        NB_ERROR("nubo.bus", NULL, NULL,
                 "Invalid value for option [bus] shared_workers: %ld (expected 1 to %d)", n,
                 MAX_SHARED_WORKERS);
        return -1;
    }
    pool.workers = calloc((size_t)n, sizeof(*pool.workers));
    for (long i = 0; pool.workers && i < n; i++)
        if (pthread_create(&pool.workers[pool.nworkers], NULL, pool_worker, NULL) == 0)
            pool.nworkers++;
    return pool.nworkers ? 0 : -1;
}

static struct topic *new_topic(const char *name, nb_bus_handler_fn fn, void *opaque, int nthreads,
                               bool shared)
{
    size_t len = strlen(name);
    struct topic *t = calloc(1, sizeof(*t) + len + 1);
    if (!t)
        return NULL;
    memcpy(t->name, name, len + 1);
    t->hash = hash_name(name);
    t->fn = fn;
    t->opaque = opaque;
    t->nthreads = nthreads;
    t->shared = shared;
    if (shared) {
        t->lock = &pool.lock;
    } else {
        pthread_mutex_init(&t->own_lock, NULL);
        pthread_cond_init(&t->cond, NULL);
        t->lock = &t->own_lock;
    }
    return t;
}

static int inproc_listen(const char *topic, nb_bus_handler_fn fn, void *opaque, int nthreads)
{
    if (nthreads < 1 || nthreads > MAX_WORKERS)
        return -1;
    struct topic *t = new_topic(topic, fn, opaque, nthreads, false);
    if (!t || add_topic(t) < 0) {
        free(t);
        return -1;
    }
    /* From here the topic is in the table for good (senders may hold it). */
    pthread_mutex_lock(t->lock);
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&t->threads[t->nworkers], NULL, worker, t) == 0)
            t->nworkers++;
    pthread_mutex_unlock(t->lock);
    return t->nworkers ? 0 : -1;
}

static int inproc_listen_shared(const char *topic, nb_bus_handler_fn fn, void *opaque, int nthreads)
{
    if (nthreads < 1 || nthreads > MAX_WORKERS)
        return -1;
    pthread_mutex_lock(&pool.lock);
    int rc = pool.stopping ? -1 : pool_start();
    pthread_mutex_unlock(&pool.lock);
    if (rc < 0)
        return -1;
    struct topic *t = new_topic(topic, fn, opaque, nthreads, true);
    if (!t || add_topic(t) < 0) {
        free(t);
        return -1;
    }
    return 0;
}

static int enqueue(const struct nb_ctx *ctx, const char *topic, const char *method, json_t *args,
                   struct reply *reply)
{
    struct topic *t = find_topic(topic);
    if (!t) {
        NB_ERROR("nubo.bus", ctx, NULL, "no listener for topic %s (method %s)", topic, method);
        json_decref(args);
        return -1;
    }
    struct msg *m = calloc(1, sizeof(*m));
    nb_strlcpy(m->method, method, sizeof(m->method));
    m->ctx = nb_ctx_to_json(ctx);
    m->args = args ? args : json_object();
    m->reply = reply;
    pthread_mutex_lock(t->lock);
    if (t->stopping) {
        pthread_mutex_unlock(t->lock);
        json_decref(m->ctx);
        json_decref(m->args);
        free(m);
        return -1;
    }
    if (t->tail)
        t->tail->next = m;
    else
        t->head = m;
    t->tail = m;
    if (t->shared)
        make_ready(t);
    else
        pthread_cond_signal(&t->cond);
    pthread_mutex_unlock(t->lock);
    return 0;
}

static int inproc_cast(const struct nb_ctx *ctx, const char *topic, const char *method,
                       json_t *args, bool listener_known)
{
    (void)listener_known; /* a listener of this process, or none */
    return enqueue(ctx, topic, method, args, NULL);
}

static json_t *inproc_call(struct nb_ctx *ctx, const char *topic, const char *method, json_t *args,
                           int timeout_ms)
{
    struct reply *r = calloc(1, sizeof(*r));
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    if (enqueue(ctx, topic, method, args, r) < 0) {
        pthread_mutex_destroy(&r->lock);
        pthread_cond_destroy(&r->cond);
        free(r);
        nb_error(ctx, 503, NULL, "Service for topic %s is not available.", topic);
        return NULL;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->lock);
    int rc = 0;
    while (!r->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&r->cond, &r->lock, &deadline);
    if (!r->done) {
        r->abandoned = true; /* the worker frees r when it finishes */
        pthread_mutex_unlock(&r->lock);
        NB_ERROR("nubo.bus", ctx, NULL, "timed out after %d ms waiting for %s.%s", timeout_ms,
                 topic, method);
        nb_error(ctx, 504, NULL, "Timed out waiting for a reply to %s on topic %s.", method, topic);
        return NULL;
    }
    json_t *v = r->value;
    pthread_mutex_unlock(&r->lock);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    free(r);
    return v;
}

static void inproc_shutdown(void)
{
    pthread_rwlock_rdlock(&reg.lock);
    struct topic *all = reg.all;
    pthread_rwlock_unlock(&reg.lock);
    for (struct topic *t = all; t; t = t->next_all) {
        pthread_mutex_lock(t->lock);
        t->stopping = true;
        if (!t->shared)
            pthread_cond_broadcast(&t->cond);
        pthread_mutex_unlock(t->lock);
    }
    pthread_mutex_lock(&pool.lock);
    pool.stopping = true;
    pthread_cond_broadcast(&pool.cond);
    int n = pool.nworkers;
    pthread_mutex_unlock(&pool.lock);
    for (struct topic *t = all; t; t = t->next_all) {
        for (int k = 0; k < t->nworkers; k++)
            pthread_join(t->threads[k], NULL);
        t->nworkers = 0; /* a second shutdown joins nothing */
    }
    for (int k = 0; k < n; k++)
        pthread_join(pool.workers[k], NULL);
    pthread_mutex_lock(&pool.lock);
    pool.nworkers = 0;
    pthread_mutex_unlock(&pool.lock);
}

const struct nb_bus_backend nb_bus_inproc_backend = {
    .name = "inproc",
    .init = inproc_init,
    .shutdown = inproc_shutdown,
    .listen = inproc_listen,
    .listen_shared = inproc_listen_shared,
    .cast = inproc_cast,
    .call = inproc_call,
};

/* inproc.c - the in-process bus backend (see bus.h, backend.h), used by
 * the all-in-one ([bus] transport = inproc, the default).
 *
 * Each topic has a FIFO of messages and nthreads workers that pop and run
 * the topic's handler. A call waits on a per-call condition variable for
 * the reply (or the timeout). Messages carry a copy of the caller's
 * context, restored for the handler, so the request ID follows the work. */
#include "bus/backend.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_TOPICS 8192
#define MAX_WORKERS 16

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
    char name[128];
    nb_bus_handler_fn fn;
    void *opaque;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct msg *head, *tail;
    bool stopping;
    int nthreads;
    pthread_t threads[MAX_WORKERS];
};

static struct topic *topics[MAX_TOPICS];
static int ntopics;
static pthread_rwlock_t topics_lock = PTHREAD_RWLOCK_INITIALIZER;

static int inproc_init(void)
{
    return 0;
}

static struct topic *find_topic(const char *name)
{
    pthread_rwlock_rdlock(&topics_lock);
    struct topic *t = NULL;
    for (int i = 0; i < ntopics; i++)
        if (strcmp(topics[i]->name, name) == 0)
            t = topics[i];
    pthread_rwlock_unlock(&topics_lock);
    return t;
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

static void *worker(void *arg)
{
    struct topic *t = arg;
    for (;;) {
        pthread_mutex_lock(&t->lock);
        while (!t->head && !t->stopping)
            pthread_cond_wait(&t->cond, &t->lock);
        struct msg *m = t->head;
        if (!m) { /* stopping and drained */
            pthread_mutex_unlock(&t->lock);
            return NULL;
        }
        t->head = m->next;
        if (!t->head)
            t->tail = NULL;
        pthread_mutex_unlock(&t->lock);

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
}

static int inproc_listen(const char *topic, nb_bus_handler_fn fn, void *opaque, int nthreads)
{
    if (find_topic(topic) || nthreads < 1 || nthreads > MAX_WORKERS)
        return -1;
    struct topic *t = calloc(1, sizeof(*t));
    nb_strlcpy(t->name, topic, sizeof(t->name));
    t->fn = fn;
    t->opaque = opaque;
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cond, NULL);
    pthread_rwlock_wrlock(&topics_lock);
    if (ntopics == MAX_TOPICS) {
        pthread_rwlock_unlock(&topics_lock);
        free(t);
        return -1;
    }
    topics[ntopics++] = t;
    pthread_rwlock_unlock(&topics_lock);
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&t->threads[t->nthreads], NULL, worker, t) == 0)
            t->nthreads++;
    return t->nthreads ? 0 : -1;
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
    pthread_mutex_lock(&t->lock);
    if (t->stopping) {
        pthread_mutex_unlock(&t->lock);
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
    pthread_cond_signal(&t->cond);
    pthread_mutex_unlock(&t->lock);
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
    pthread_rwlock_wrlock(&topics_lock);
    for (int i = 0; i < ntopics; i++) {
        struct topic *t = topics[i];
        pthread_mutex_lock(&t->lock);
        t->stopping = true;
        pthread_cond_broadcast(&t->cond);
        pthread_mutex_unlock(&t->lock);
    }
    int n = ntopics;
    pthread_rwlock_unlock(&topics_lock);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < topics[i]->nthreads; k++)
            pthread_join(topics[i]->threads[k], NULL);
}

const struct nb_bus_backend nb_bus_inproc_backend = {
    .name = "inproc",
    .init = inproc_init,
    .shutdown = inproc_shutdown,
    .listen = inproc_listen,
    .cast = inproc_cast,
    .call = inproc_call,
};

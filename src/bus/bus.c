/* bus.c - picks the bus backend from configuration and routes the nb_bus_*
 * calls to it (see backend.h).
 *
 *   [bus]
 *   transport = inproc | amqp          (default inproc)
 *   transport_url = rabbit://user:pass@host:port/vhost   (amqp only; falls
 *                   back to [DEFAULT] transport_url, oslo.messaging's place)
 *
 * Until nb_bus_init() runs, the in-process backend answers, so code (and
 * tests) that never call nb_bus_init() keep working as before. The choice is
 * made at start-up only, before any role runs. */
#include "bus/backend.h"
#include "common/config.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct nb_bus_backend *backend = &nb_bus_inproc_backend;
static atomic_bool stopping;
static atomic_int senders; /* nb_bus_cast_later threads still running */

int nb_bus_init(void)
{
    const char *name = nb_conf_str("bus", "transport", "inproc");
    if (!strcmp(name, "inproc"))
        backend = &nb_bus_inproc_backend;
    else if (!strcmp(name, "amqp") || !strcmp(name, "rabbit"))
        backend = &nb_bus_amqp_backend;
    else {
        NB_ERROR("nubo.bus", NULL, NULL,
                 "Invalid value for option [bus] transport: %s (expected inproc or amqp)", name);
        return -1;
    }
    return backend->init();
}

void nb_bus_shutdown(void)
{
    atomic_store(&stopping, true);
    /* the senders see stopping within 0.1 s and give up */
    for (int i = 0; i < 50 && atomic_load(&senders) > 0; i++)
        usleep(100 * 1000);
    backend->shutdown();
}

int nb_bus_listen(const char *topic, nb_bus_handler_fn fn, void *opaque, int nthreads)
{
    return backend->listen(topic, fn, opaque, nthreads);
}

int nb_bus_listen_shared(const char *topic, nb_bus_handler_fn fn, void *opaque, int nthreads)
{
    if (!backend->listen_shared)
        return backend->listen(topic, fn, opaque, nthreads);
    return backend->listen_shared(topic, fn, opaque, nthreads);
}

/* A topic's first segment ("compute" of "compute.host1"): host names would
 * multiply the series by the size of the cloud. */
static void topic_kind(const char *topic, char *out, size_t n)
{
    snprintf(out, n, "%s", topic ? topic : "");
    out[strcspn(out, ".")] = '\0';
}

static int cast(const struct nb_ctx *ctx, const char *topic, const char *method, json_t *args,
                bool listener_known)
{
    int rc = backend->cast(ctx, topic, method, args, listener_known);
    char kind[64];
    topic_kind(topic, kind, sizeof(kind));
    nb_metrics_add(NB_M_BUS_CASTS, 1,
                   (const char *const[]){kind, method, rc == 0 ? "ok" : "error"});
    return rc;
}

int nb_bus_cast(const struct nb_ctx *ctx, const char *topic, const char *method, json_t *args)
{
    return cast(ctx, topic, method, args, false);
}

int nb_bus_cast_to_listener(const struct nb_ctx *ctx, const char *topic, const char *method,
                            json_t *args)
{
    return cast(ctx, topic, method, args, true);
}

/* Sleeps s seconds unless the bus stops first; false if it stopped. */
static bool sleep_unless_stopping(int s)
{
    for (int i = 0; i < s * 10; i++) {
        if (atomic_load(&stopping))
            return false;
        usleep(100 * 1000);
    }
    return !atomic_load(&stopping);
}

int nb_bus_cast_until_sent(const struct nb_ctx *ctx, const char *topic, const char *method,
                           json_t *args, int max_s)
{
    if (backend == &nb_bus_inproc_backend)
        return nb_bus_cast(ctx, topic, method, args);
    double t0 = nb_time_mono();
    int delay = 1;
    for (int attempt = 1;; attempt++) {
        if (nb_bus_cast(ctx, topic, method, json_incref(args)) == 0) {
            if (attempt > 1)
                NB_INFO("nubo.bus", ctx, NULL, "%s sent to topic %s after %d attempts (%.0f s)",
                        method, topic, attempt, nb_time_mono() - t0);
            json_decref(args);
            return 0;
        }
        if (nb_time_mono() - t0 + delay > max_s) {
            NB_ERROR("nubo.bus", ctx, NULL, "gave up sending %s to topic %s after %.0f s", method,
                     topic, nb_time_mono() - t0);
            break;
        }
        if (attempt == 1)
            NB_WARN("nubo.bus", ctx, NULL,
                    "%s to topic %s not sent: trying again for up to %d s (a result must reach "
                    "its caller)",
                    method, topic, max_s);
        if (!sleep_unless_stopping(delay))
            break;
        delay = delay * 2 > 10 ? 10 : delay * 2;
    }
    json_decref(args);
    return -1;
}

static _Atomic double recovered_at;

void nb_bus_note_recovered(void)
{
    atomic_store(&recovered_at, nb_time_mono());
}

double nb_bus_recovered_at(void)
{
    return atomic_load(&recovered_at);
}

static char redelivered_methods[8][64];
static atomic_int n_redelivered_methods;

void nb_bus_redelivery_to_handler(const char *method)
{
    int n = atomic_load(&n_redelivered_methods);
    for (int i = 0; i < n; i++)
        if (!strcmp(redelivered_methods[i], method))
            return;
    if (n < 8) {
        snprintf(redelivered_methods[n], sizeof(redelivered_methods[n]), "%s", method);
        atomic_store(&n_redelivered_methods, n + 1);
    }
}

bool nb_bus_wants_redelivery(const char *method)
{
    int n = atomic_load(&n_redelivered_methods);
    for (int i = 0; i < n && method; i++)
        if (!strcmp(redelivered_methods[i], method))
            return true;
    return false;
}

struct later {
    struct nb_ctx ctx;
    char topic[256], method[128];
    json_t *args;
    int max_s;
    struct nb_bus_undo undo;
};

static void *later_main(void *arg)
{
    struct later *l = arg;
    if (nb_bus_cast_until_sent(&l->ctx, l->topic, l->method, json_incref(l->args), l->max_s) < 0 &&
        l->undo.fn) {
        NB_ERROR("nubo.bus", &l->ctx, NULL, "%s was acknowledged but never sent: undoing it",
                 l->method);
        struct nb_ctx sub;
        nb_ctx_child(&sub, &l->ctx);
        l->undo.fn(&sub, l->args, l->undo.data, true);
    }
    json_decref(l->args);
    json_decref(l->undo.data);
    free(l);
    atomic_fetch_sub(&senders, 1);
    return NULL;
}

/* nb_bus_cast_later could not take the request: undone now; steals args. */
static void refused(const struct nb_ctx *ctx, json_t *args, struct nb_bus_undo undo)
{
    if (undo.fn) {
        struct nb_ctx sub;
        if (ctx)
            nb_ctx_child(&sub, ctx);
        else
            nb_ctx_init_system(&sub, NULL);
        undo.fn(&sub, args, undo.data, false);
    }
    json_decref(args);
    json_decref(undo.data);
}

int nb_bus_cast_later(const struct nb_ctx *ctx, const char *topic, const char *method, json_t *args,
                      int max_s, struct nb_bus_undo undo)
{
    struct later *l = backend == &nb_bus_inproc_backend ? NULL : calloc(1, sizeof(*l));
    if (!l) {
        refused(ctx, args, undo);
        return -1;
    }
    if (ctx)
        l->ctx = *ctx;
    else
        nb_ctx_init_system(&l->ctx, NULL);
    snprintf(l->topic, sizeof(l->topic), "%s", topic);
    snprintf(l->method, sizeof(l->method), "%s", method);
    l->args = args;
    l->max_s = max_s;
    l->undo = undo;
    atomic_fetch_add(&senders, 1);
    int rc = nb_thread_detached(later_main, l);
    if (rc != 0) {
        atomic_fetch_sub(&senders, 1);
        NB_ERROR("nubo.bus", ctx, NULL, "cannot start a sender of %s to topic %s", method, topic);
        refused(ctx, l->args, l->undo);
        free(l);
        return -1;
    }
    return 0;
}

json_t *nb_bus_call(struct nb_ctx *ctx, const char *topic, const char *method, json_t *args,
                    int timeout_ms)
{
    double t0 = nb_time_mono();
    json_t *r = backend->call(ctx, topic, method, args, timeout_ms);
    char kind[64];
    topic_kind(topic, kind, sizeof(kind));
    const char *outcome = r ? "ok" : ctx && nb_ctx_status(ctx) == 504 ? "timeout" : "error";
    nb_metrics_observe(NB_M_BUS_CALL_SECONDS, nb_time_mono() - t0,
                       (const char *const[]){kind, method, outcome});
    return r;
}

const char *nb_bus_transport(void)
{
    return backend->name;
}

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

#include <stdio.h>
#include <string.h>

static const struct nb_bus_backend *backend = &nb_bus_inproc_backend;

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
    backend->shutdown();
}

int nb_bus_listen(const char *topic, nb_bus_handler_fn fn, void *opaque, int nthreads)
{
    return backend->listen(topic, fn, opaque, nthreads);
}

/* A topic's first segment ("compute" of "compute.host1"): host names would
 * multiply the series by the size of the cloud. */
static void topic_kind(const char *topic, char *out, size_t n)
{
    snprintf(out, n, "%s", topic ? topic : "");
    out[strcspn(out, ".")] = '\0';
}

int nb_bus_cast(const struct nb_ctx *ctx, const char *topic, const char *method, json_t *args)
{
    int rc = backend->cast(ctx, topic, method, args);
    char kind[64];
    topic_kind(topic, kind, sizeof(kind));
    nb_metrics_add(NB_M_BUS_CASTS, 1,
                   (const char *const[]){kind, method, rc == 0 ? "ok" : "error"});
    return rc;
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

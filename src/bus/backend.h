/* backend.h - the bus driver vtable behind bus.h.
 *
 * bus.c picks one backend at nb_bus_init() from `[bus] transport` and routes
 * every nb_bus_* call to it: "inproc" (inproc.c, queues and threads in this
 * process; the all-in-one default) or "amqp" (amqp.c, AMQP 0-9-1 on RabbitMQ,
 * shaped like oslo.messaging's rabbit driver). Each entry point has the
 * contract of the nb_bus_* function of the same name in bus.h. */
#ifndef NB_BUS_BACKEND_H
#define NB_BUS_BACKEND_H

#include "bus/bus.h"

struct nb_bus_backend {
    const char *name;
    int (*init)(void);
    void (*shutdown)(void);
    int (*listen)(const char *topic, nb_bus_handler_fn fn, void *opaque, int nthreads);
    /* NULL: nb_bus_listen_shared is listen (amqp). */
    int (*listen_shared)(const char *topic, nb_bus_handler_fn fn, void *opaque, int nthreads);
    /* listener_known: nb_bus_cast_to_listener's cast */
    int (*cast)(const struct nb_ctx *ctx, const char *topic, const char *method, json_t *args,
                bool listener_known);
    json_t *(*call)(struct nb_ctx *ctx, const char *topic, const char *method, json_t *args,
                    int timeout_ms);
};

extern const struct nb_bus_backend nb_bus_inproc_backend;
extern const struct nb_bus_backend nb_bus_amqp_backend;

#endif

/* bus.h - RPC between roles: cast (one-way) and call (request/reply) on
 * topics, like oslo.messaging. Topics: "conductor", "scheduler",
 * "compute.<host>". `[bus] transport` picks the backend at nb_bus_init():
 * "inproc" (inproc.c, a queue and worker threads per topic in this process;
 * the all-in-one default) or "amqp" (amqp.c, RabbitMQ at `[bus]
 * transport_url`, so roles can run in separate processes and hosts). Callers
 * do not change with the backend.
 *
 * Messages are JSON objects. The caller's context travels with the message
 * (request ID, user, project) and is restored for the handler, so one request
 * ID follows a boot from API to compute. */
#ifndef NB_BUS_H
#define NB_BUS_H

#include "common/ctx.h"
#include <jansson.h>

/* A topic handler. Returns a new reference to the reply (NULL = json null)
 * for calls; for casts the reply is dropped. */
typedef json_t *(*nb_bus_handler_fn)(void *opaque, struct nb_ctx *ctx, const char *method,
                                     json_t *args);

/* Starts the bus with the configured backend. 0, or -1 (logged) on a bad
 * [bus] option or, for amqp, an unreachable broker. */
int nb_bus_init(void);
/* Stops all workers: inproc drains its queues; amqp finishes in-flight
 * handlers, leaves queued messages in the broker and closes connections. */
void nb_bus_shutdown(void);
/* Name of the backend in use ("inproc" or "amqp"). */
const char *nb_bus_transport(void);

/* Registers the handler of topic with nthreads workers. 0/-1. */
int nb_bus_listen(const char *topic, nb_bus_handler_fn fn, void *opaque, int nthreads);

/* One-way message; steals args. 0, or -1 if the topic has no listener. */
int nb_bus_cast(const struct nb_ctx *ctx, const char *topic, const char *method, json_t *args);
/* Request/reply; steals args. Returns the reply (new ref; json null if the
 * handler returned NULL) or NULL on timeout / no listener (error on ctx). */
json_t *nb_bus_call(struct nb_ctx *ctx, const char *topic, const char *method, json_t *args,
                    int timeout_ms);

#endif

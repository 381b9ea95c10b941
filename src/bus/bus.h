/* bus.h - RPC between roles: cast (one-way) and call (request/reply) on
 * topics, like oslo.messaging. Topics: "conductor", "scheduler",
 * "compute.<host>". `[bus] transport` picks the backend at nb_bus_init():
 * "inproc" (inproc.c, a queue per topic in this process and worker threads
 * of the topic's own or of a shared pool; the all-in-one default) or "amqp"
 * (amqp.c, RabbitMQ at `[bus] transport_url`, so roles can run in separate
 * processes and hosts). Callers do not change with the backend.
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
/* The same, for one of many topics of this process (a compute host of
 * thousands of fake ones): on the in-process bus the topic has no thread
 * of its own; the workers of one pool shared by these topics ([bus]
 * shared_workers, default 16) run its handler, at most nthreads at once,
 * its messages taken in order (one at a time with nthreads 1), the topics
 * in turn. A handler that blocks holds a worker of the pool, so these
 * handlers must not wait on a call to another such topic. On the AMQP bus
 * the same as nb_bus_listen. 0/-1. */
int nb_bus_listen_shared(const char *topic, nb_bus_handler_fn fn, void *opaque, int nthreads);

/* One-way message; steals args. 0, or -1 if the topic has no listener. */
int nb_bus_cast(const struct nb_ctx *ctx, const char *topic, const char *method, json_t *args);
/* nb_bus_cast to a topic whose listener the caller knows of from
 * elsewhere (a compute host in the database: the scheduler chose it, or
 * an instance is on it). On the AMQP bus a topic without a queue (the
 * broker restarted and lost it, and its listener has not declared it
 * again yet) gets its queue declared by the sender, and the message waits
 * there for the listener, even when this process never saw that queue
 * (a control plane started after the restart); nb_bus_cast fails then. */
int nb_bus_cast_to_listener(const struct nb_ctx *ctx, const char *topic, const char *method,
                            json_t *args);
/* A cast that must arrive (a compute host's result of a build, an
 * operation, an attach or a snapshot): on the AMQP bus, when it cannot be
 * sent (broker down, restarting, its queue not declared again yet) it is
 * sent again with back-off (1 s doubling to 10 s) for up to max_s seconds,
 * or until the bus stops. Blocks the calling thread meanwhile; steals
 * args. 0, or -1 (logged) when it gave up. */
int nb_bus_cast_until_sent(const struct nb_ctx *ctx, const char *topic, const char *method,
                           json_t *args, int max_s);
/* What to undo when a request acknowledged to its client cannot be sent
 * after all: fn gets the request's args and data (borrowed; data may be
 * NULL) and a context of its own. late: the sender gave up (its time ran
 * out, or the bus stopped first) after the client was answered, in the
 * sender's thread, while the database is still open; else the request
 * is being refused (nb_bus_cast_later returns -1), in the caller's
 * thread. A NULL fn undoes nothing. */
typedef void (*nb_bus_undo_fn)(struct nb_ctx *ctx, json_t *args, json_t *data, bool late);
struct nb_bus_undo {
    nb_bus_undo_fn fn;
    json_t *data; /* stolen */
};
/* nb_bus_cast_until_sent in a thread of its own, for a request already
 * recorded (a create answered 202 while the broker is down): returns at
 * once; when the sender gives up it runs undo (late). nb_bus_shutdown
 * waits for these senders, which give up when the bus stops. Steals args
 * and undo.data. 0, or -1 after undo ran (not late) when no thread could
 * be started (logged) or the bus is the in-process one, on which a cast
 * fails only when this process has no listener for the topic, which
 * waiting does not change: the caller refuses the request. */
int nb_bus_cast_later(const struct nb_ctx *ctx, const char *topic, const char *method, json_t *args,
                      int max_s, struct nb_bus_undo undo);
/* Listeners ack a message on receipt, so one the broker redelivers was
 * pushed to a consumer that never got to it, and is handled. For method,
 * its handler also sees args "redelivered": true (the compute agent checks
 * its build journal). Call before listening. */
void nb_bus_redelivery_to_handler(const char *method);
bool nb_bus_wants_redelivery(const char *method);
/* The backends note each connection they reopen after losing it; the
 * monotonic time (nb_time_mono) of the last one, or 0 if none. Heartbeats
 * sent during an outage were lost: "down" by heartbeat means little until
 * [DEFAULT] service_down_time after it. */
void nb_bus_note_recovered(void);
double nb_bus_recovered_at(void);
/* Request/reply; steals args. Returns the reply (new ref; json null if the
 * handler returned NULL) or NULL on timeout / no listener (error on ctx). */
json_t *nb_bus_call(struct nb_ctx *ctx, const char *topic, const char *method, json_t *args,
                    int timeout_ms);

/* The handler side of a topic as a method table (dispatch.c), as Nova's
 * managers expose their RPC methods: each entry names a method, says
 * whether callers cast or call it, and gives its function (an
 * nb_bus_handler_fn; a cast's function returns NULL). */
enum nb_bus_kind { NB_BUS_CAST, NB_BUS_CALL };
struct nb_bus_method {
    const char *name;
    enum nb_bus_kind kind;
    nb_bus_handler_fn fn;
};
/* What a topic serves: its role's name for the log ("conductor",
 * "compute"), the logger, and the methods (ended by an entry whose name is
 * NULL). */
struct nb_bus_service {
    const char *role;
    const char *logger;
    const struct nb_bus_method *methods;
};
/* Runs method of svc on args for opaque (the topic's state). A cast's
 * reply is NULL whatever its function returned; a call's is what its
 * function returned (new ref). An unknown method is logged (ERROR, naming
 * the role and the method) and answered {"error": "unknown method"}. */
json_t *nb_bus_dispatch(const struct nb_bus_service *svc, void *opaque, struct nb_ctx *ctx,
                        const char *method, json_t *args);

#endif

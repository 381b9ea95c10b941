/* amqp.c - the AMQP 0-9-1 bus backend on RabbitMQ (see bus.h, backend.h),
 * shaped like oslo.messaging's rabbit driver so `rabbitmqctl list_queues`
 * and `list_exchanges` read as they do under OpenStack:
 *
 *   - one topic exchange, [DEFAULT] control_exchange (default "nova");
 *   - one queue per topic, named by the topic ("conductor", "scheduler",
 *     "compute.<host>"), bound with the topic as routing key, neither durable
 *     nor auto-delete (oslo's defaults): queued work survives a listener
 *     restart;
 *   - calls carry reply_to = amq.rabbitmq.reply-to (RabbitMQ's direct
 *     reply-to) and a correlation id, and expire after the call timeout, as
 *     oslo sets a TTL on calls.
 *
 * Message body (application/json): {"method", "args", "context"} where
 * context is nb_ctx_to_json() plus "roles"; replies are {"result": value} or,
 * for a message the listener cannot read, {"failure": {"code", "message"}}.
 *
 * Connections (librabbitmq-c's are not thread-safe):
 *   - each listener thread owns one connection (basic.qos prefetch 1, acks
 *     on receipt, before its handler, as oslo's RPC server; see below for
 *     the exception);
 *   - callers (cast and call) borrow a connection from a small guarded pool
 *     ([DEFAULT] rpc_conn_pool_size, default 30, as oslo) for one publish and
 *     its wait, so any thread may call and shutdown can close them all. Pool
 *     connections publish with mandatory + publisher confirms: a cast or call
 *     to a topic no listener ever declared is returned by the broker, and
 *     fails with -1 / 503 like the in-process bus; once the queue exists,
 *     messages wait in it for a listener, as under oslo. A queue the broker
 *     lost (restarted; queues are not durable) is declared again by a
 *     sender that had seen it, or told that its listener exists
 *     (nb_bus_cast_to_listener: a compute host's), so casts sent before its
 *     listener reconnects wait for it instead of failing.
 *
 * Delivery is at most once, as oslo's: the ack goes before the handler, so a
 * consumer that dies mid-handler has its message gone rather than run twice,
 * and a message the broker redelivers was never acked, hence never handled:
 * it is handled (a message the broker had pushed to a connection that was
 * already dead, e.g. a host cut off the network, comes back redelivered once
 * the broker notices; dropping it would lose builds and deletes). The
 * exception: a method whose handler takes redeliveries (the agent's
 * build_and_run_instance, nb_bus_redelivery_to_handler) is acked after its
 * handler returns, which is once the build is in the agent's journal: an
 * agent killed between receipt and journal has the build redelivered to
 * its next run instead of losing it, and one killed after the journal
 * entry finds it there and drops the redelivery. A lost broker connection is
 * logged (ERROR, URL without password) and reopened with oslo's back-off (rabbit_retry_interval
 * 1 s, + rabbit_retry_backoff 2 s, at most rabbit_interval_max 30 s);
 * nothing crashes or blocks forever: every wait has a deadline.
 *
 * Options: [bus] transport_url (else [DEFAULT] transport_url), [DEFAULT]
 * control_exchange, rpc_conn_pool_size, rpc_response_timeout (casts' confirm
 * wait); [oslo_messaging_rabbit] rabbit_retry_interval (1) and
 * heartbeat_timeout_threshold (default 0 here, not oslo's 60: there is no
 * heartbeat thread, so a handler longer than two heartbeats would get its
 * connection dropped; TCP keepalive notices a dead broker instead). */
#include "bus/amqp_link.h"
#include "bus/backend.h"
#include "bus/transport_url.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOG_AMQP "nubo.bus.amqp"
#define MAX_WORKERS 16
#define REPLY_TO "amq.rabbitmq.reply-to"
#define POLL_MS 200

struct listener {
    struct listener *next;
    char topic[256];
    nb_bus_handler_fn fn;
    void *opaque;
    int nthreads;
    struct worker {
        struct listener *owner;
        struct nb_amqp_link link;
        pthread_t thread;
    } workers[MAX_WORKERS];
};

struct plink {
    struct plink *next;
    struct nb_amqp_link link;
};

static struct nb_bus_url url;
static char exchange[128];
static atomic_bool stopping;
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static struct listener *listeners; /* under state_lock */
/* Listeners stopped by shutdown. Kept, not freed, as inproc keeps its
 * topics: their opaque state belongs to roles that live until exit. */
static struct listener *retired;
static struct plink *idle;       /* under state_lock */
static int pool_total, pool_max; /* under state_lock */

/* ---- logging ------------------------------------------------------------------------------- */

/* Logs why l could not reach the broker (oslo's wording, then what was
 * being done and the URL without password). retry_s > 0: will retry. */
static void log_unreachable(const struct nb_amqp_link *l, int retry_s, const char *doing)
{
    char retry[64] = "";
    if (retry_s > 0)
        snprintf(retry, sizeof(retry), " Trying again in %d seconds.", retry_s);
    NB_ERROR(
        LOG_AMQP, NULL, NULL, "AMQP server on %s:%d is unreachable: %s.%s (%s, transport_url %s)",
        url.hosts[l->host].host, url.hosts[l->host].port, l->reason, retry, doing, url.redacted);
}

/* ---- messages ------------------------------------------------------------------------------ */

/* The context as it travels: nb_ctx_to_json() plus oslo's roles list. */
static json_t *context_json(const struct nb_ctx *ctx)
{
    json_t *c = nb_ctx_to_json(ctx);
    json_t *roles = json_array();
    if (ctx->is_admin)
        json_array_append_new(roles, json_string("admin"));
    if (ctx->is_member)
        json_array_append_new(roles, json_string("member"));
    if (ctx->is_reader)
        json_array_append_new(roles, json_string("reader"));
    json_object_set_new(c, "roles", roles);
    return c;
}

/* Publishes body (a JSON object, borrowed) on l's channel 1. 0/-1. */
static int publish(struct nb_amqp_link *l, const char *exch, const char *rkey, json_t *body,
                   amqp_basic_properties_t *props, bool mandatory)
{
    char *text = json_dumps(body, JSON_COMPACT);
    if (!text) {
        snprintf(l->reason, sizeof(l->reason), "cannot encode message");
        return -1;
    }
    props->_flags |= AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
    props->content_type = amqp_cstring_bytes("application/json");
    props->delivery_mode = 1; /* transient, as oslo without amqp_durable_queues */
    int rc = amqp_basic_publish(l->st, 1, amqp_cstring_bytes(exch), amqp_cstring_bytes(rkey),
                                mandatory, 0, props, amqp_cstring_bytes(text));
    free(text);
    if (rc != AMQP_STATUS_OK) {
        snprintf(l->reason, sizeof(l->reason), "basic.publish: %s", amqp_error_string2(rc));
        return -1;
    }
    return 0;
}

static bool bytes_eq(amqp_bytes_t b, const char *s)
{
    return b.len == strlen(s) && memcmp(b.bytes, s, b.len) == 0;
}

/* ---- topics whose queue existed ------------------------------------------------------------ */

/* The topics this process saw a queue for (its own listeners' and those its
 * casts reached). A cast returned for one of them means the broker lost the
 * queue (a restart: queues are not durable), not that no listener exists:
 * the queue is declared again from the sending side and the message waits
 * in it for the listener, which is reconnecting with its back-off. */
#define MAX_KNOWN_TOPICS 256
static char known_topics[MAX_KNOWN_TOPICS][128];
static int nknown;
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;

static bool topic_known(const char *topic, bool add)
{
    pthread_mutex_lock(&known_lock);
    bool found = false;
    for (int i = 0; i < nknown && !found; i++)
        found = !strcmp(known_topics[i], topic);
    if (!found && add && nknown < MAX_KNOWN_TOPICS && strlen(topic) < sizeof(known_topics[0]))
        snprintf(known_topics[nknown++], sizeof(known_topics[0]), "%s", topic);
    pthread_mutex_unlock(&known_lock);
    return found;
}

/* The exchange, the topic's queue (as its listener declares it) and its
 * binding. 0/-1 (reason set). */
static int declare_topic_queue(struct nb_amqp_link *l, const char *topic)
{
    amqp_bytes_t q = amqp_cstring_bytes(topic);
    amqp_exchange_declare(l->st, 1, amqp_cstring_bytes(exchange), amqp_cstring_bytes("topic"), 0, 0,
                          0, 0, amqp_empty_table);
    if (!nb_amqp_link_ok(l, "exchange.declare"))
        return -1;
    amqp_queue_declare(l->st, 1, q, 0, 0, 0, 0, amqp_empty_table);
    if (!nb_amqp_link_ok(l, "queue.declare"))
        return -1;
    amqp_queue_bind(l->st, 1, q, amqp_cstring_bytes(exchange), q, amqp_empty_table);
    return nb_amqp_link_ok(l, "queue.bind") ? 0 : -1;
}

/* ---- listeners ----------------------------------------------------------------------------- */

/* Declares the exchange, the topic's queue and binding, and starts
 * consuming with prefetch 1. 0/-1 (reason set, link closed). */
static int listener_setup(struct nb_amqp_link *l, const char *topic)
{
    amqp_bytes_t q = amqp_cstring_bytes(topic);
    if (declare_topic_queue(l, topic) < 0)
        return -1;
    topic_known(topic, true);
    amqp_basic_qos(l->st, 1, 0, 1, 0);
    if (!nb_amqp_link_ok(l, "basic.qos"))
        return -1;
    amqp_basic_consume(l->st, 1, q, amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    return nb_amqp_link_ok(l, "basic.consume") ? 0 : -1;
}

/* Acks one delivery. 0, or -1 with l->reason set. */
static int ack(struct nb_amqp_link *l, amqp_envelope_t *env)
{
    if (amqp_basic_ack(l->st, 1, env->delivery_tag, 0) == AMQP_STATUS_OK)
        return 0;
    snprintf(l->reason, sizeof(l->reason), "basic.ack failed");
    return -1;
}

/* Acks (see below) and runs the handler for one delivered request; returns
 * the reply body (new ref), or NULL when the message was not handled;
 * *broken when an ack failed (l->reason set). */
static json_t *dispatch(struct listener *ls, struct nb_amqp_link *l, amqp_envelope_t *env,
                        bool *broken)
{
    json_error_t je;
    json_t *body = json_loadb(env->message.body.bytes, env->message.body.len, 0, &je);
    const char *method = nb_json_str(body, "method");
    if (!method) {
        if (ack(l, env) < 0)
            *broken = true;
        NB_ERROR(LOG_AMQP, NULL, NULL, "Dropping malformed message on topic %s: %s", ls->topic,
                 body ? "no method" : je.text);
        json_decref(body);
        return json_pack("{s:{s:i, s:s}}", "failure", "code", 400, "message",
                         "malformed bus message");
    }
    struct nb_ctx ctx;
    nb_ctx_from_json(&ctx, json_object_get(body, "context"));
    bool to_handler = env->redelivered && nb_bus_wants_redelivery(method);
    if (env->redelivered)
        NB_INFO(LOG_AMQP, &ctx, NULL,
                "Handling redelivered %s on topic %s (pushed to a consumer that never acked it)",
                method, ls->topic);
    json_t *args = json_object_get(body, "args");
    json_t *own = json_is_object(args) ? json_incref(args) : json_object();
    if (to_handler)
        json_object_set_new(own, "redelivered", json_true());
    /* a method whose handler takes redeliveries journals what it took
     * before it returns: acked after it, so that a consumer killed before
     * its journal entry has the message redelivered, not lost */
    bool ack_after = nb_bus_wants_redelivery(method);
    if (!ack_after && ack(l, env) < 0) {
        *broken = true;
        json_decref(own);
        json_decref(body);
        return NULL;
    }
    json_t *out = ls->fn(ls->opaque, &ctx, method, own);
    json_decref(own);
    json_decref(body);
    if (ack_after && ack(l, env) < 0 && (*broken = true))
        NB_WARN(LOG_AMQP, &ctx, NULL,
                "%s on topic %s handled but not acked (%s): the broker gives it again, its "
                "handler finds it taken",
                method, ls->topic, l->reason);
    return json_pack("{s:o}", "result", out ? out : json_null());
}

/* Handles one delivery: ack, dispatch, reply if asked. 0/-1 (link broken:
 * the message is not handled, the broker gives it to another consumer). */
static int serve(struct listener *ls, struct nb_amqp_link *l, amqp_envelope_t *env)
{
    bool broken = false;
    json_t *reply = dispatch(ls, l, env, &broken);
    if (broken) {
        json_decref(reply);
        return -1;
    }
    amqp_basic_properties_t *in = &env->message.properties;
    int rc = 0;
    if (reply && (in->_flags & AMQP_BASIC_REPLY_TO_FLAG)) {
        amqp_basic_properties_t p = {0};
        char rkey[256];
        snprintf(rkey, sizeof(rkey), "%.*s", (int)in->reply_to.len, (char *)in->reply_to.bytes);
        if (in->_flags & AMQP_BASIC_CORRELATION_ID_FLAG) {
            p._flags |= AMQP_BASIC_CORRELATION_ID_FLAG;
            p.correlation_id = in->correlation_id;
        }
        rc = publish(l, "", rkey, reply, &p, false);
    }
    json_decref(reply);
    return rc;
}

/* Sleeps s seconds in short steps; false if the bus is stopping. */
static bool backoff_sleep(int s)
{
    for (int i = 0; i < s * 1000 / POLL_MS; i++) {
        if (atomic_load(&stopping))
            return false;
        usleep(POLL_MS * 1000);
    }
    return !atomic_load(&stopping);
}

static int heartbeat_s(void)
{
    return (int)nb_conf_int("oslo_messaging_rabbit", "heartbeat_timeout_threshold", 0);
}

/* Reopens a listener link with oslo's back-off until it works or the bus
 * stops. 0/-1 (stopping). */
static int listener_reconnect(struct worker *w)
{
    int delay = (int)nb_conf_int("oslo_messaging_rabbit", "rabbit_retry_interval", 1);
    int step = (int)nb_conf_int("oslo_messaging_rabbit", "rabbit_retry_backoff", 2);
    int most = (int)nb_conf_int("oslo_messaging_rabbit", "rabbit_interval_max", 30);
    char doing[300];
    snprintf(doing, sizeof(doing), "listener of topic %s", w->owner->topic);
    for (;;) {
        log_unreachable(&w->link, delay, doing);
        if (!backoff_sleep(delay))
            return -1;
        if (nb_amqp_link_open(&w->link, &url, heartbeat_s()) == 0 &&
            listener_setup(&w->link, w->owner->topic) == 0) {
            NB_INFO(LOG_AMQP, NULL, NULL,
                    "Reconnected to AMQP server on %s:%d via [amqp] client with port %d.",
                    url.hosts[w->link.host].host, url.hosts[w->link.host].port, w->link.local_port);
            nb_bus_note_recovered();
            return 0;
        }
        delay = delay + step > most ? most : delay + step;
    }
}

/* Reads the non-delivery frame that interrupted a consume; -1 if it closes
 * the channel or connection (reason set). */
static int listener_other_frame(struct nb_amqp_link *l)
{
    amqp_frame_t f;
    if (amqp_simple_wait_frame(l->st, &f) != AMQP_STATUS_OK) {
        snprintf(l->reason, sizeof(l->reason), "connection lost");
        return -1;
    }
    if (f.frame_type == AMQP_FRAME_METHOD && f.payload.method.id == AMQP_BASIC_CANCEL_METHOD) {
        snprintf(l->reason, sizeof(l->reason),
                 "the broker cancelled the consumer (queue deleted?)");
        return -1;
    }
    if (f.frame_type == AMQP_FRAME_METHOD &&
        (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
         f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD)) {
        amqp_rpc_reply_t r = {.reply_type = AMQP_RESPONSE_SERVER_EXCEPTION,
                              .reply = f.payload.method};
        nb_amqp_link_fail(l, "closed by the broker", r);
        return -1;
    }
    return 0;
}

static void *listener_main(void *arg)
{
    struct worker *w = arg;
    struct nb_amqp_link *l = &w->link;
    while (!atomic_load(&stopping)) {
        if (!l->st && listener_reconnect(w) < 0)
            break;
        struct timeval tv = {.tv_usec = POLL_MS * 1000};
        amqp_envelope_t env;
        amqp_maybe_release_buffers(l->st);
        amqp_rpc_reply_t r = amqp_consume_message(l->st, &env, &tv, 0);
        int rc = 0;
        if (r.reply_type == AMQP_RESPONSE_NORMAL) {
            rc = serve(w->owner, l, &env); /* finishes even when stopping: drains in-flight */
            amqp_destroy_envelope(&env);
        } else if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
                   r.library_error == AMQP_STATUS_TIMEOUT)
            continue;
        else if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
                 r.library_error == AMQP_STATUS_UNEXPECTED_STATE)
            rc = listener_other_frame(l);
        else {
            nb_amqp_link_fail(l, "consume", r);
            rc = -1;
        }
        if (rc < 0) {
            NB_ERROR(LOG_AMQP, NULL, NULL, "Lost the AMQP connection of topic %s listener: %s",
                     w->owner->topic, l->reason);
            nb_amqp_link_close(l);
        }
    }
    nb_amqp_link_close(l);
    return NULL;
}

static struct listener *find_listener(const char *topic)
{
    for (struct listener *ls = listeners; ls; ls = ls->next)
        if (!strcmp(ls->topic, topic))
            return ls;
    return NULL;
}

static int amqp_listen(const char *topic, nb_bus_handler_fn fn, void *opaque, int nthreads)
{
    if (nthreads < 1 || nthreads > MAX_WORKERS || strlen(topic) >= 256)
        return -1;
    pthread_mutex_lock(&state_lock);
    bool dup = find_listener(topic) != NULL;
    pthread_mutex_unlock(&state_lock);
    if (dup)
        return -1;
    struct listener *ls = calloc(1, sizeof(*ls));
    nb_strlcpy(ls->topic, topic, sizeof(ls->topic));
    ls->fn = fn;
    ls->opaque = opaque;
    /* All consumers are registered before listen returns, so a cast right
     * after it is routed; an unreachable broker is reported here. */
    for (int i = 0; i < nthreads; i++) {
        struct worker *w = &ls->workers[i];
        w->owner = ls;
        if (nb_amqp_link_open(&w->link, &url, heartbeat_s()) < 0 ||
            listener_setup(&w->link, topic) < 0) {
            char doing[300];
            snprintf(doing, sizeof(doing), "cannot listen on topic %s", topic);
            log_unreachable(&w->link, 0, doing);
            for (int k = 0; k <= i; k++)
                nb_amqp_link_close(&ls->workers[k].link);
            free(ls);
            return -1;
        }
    }
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&ls->workers[i].thread, NULL, listener_main, &ls->workers[i]) != 0) {
            for (int k = i; k < nthreads; k++)
                nb_amqp_link_close(&ls->workers[k].link);
            break;
        }
        ls->nthreads++;
    }
    pthread_mutex_lock(&state_lock);
    ls->next = listeners;
    listeners = ls;
    pthread_mutex_unlock(&state_lock);
    NB_INFO(LOG_AMQP, NULL, NULL, "Listening on topic %s (exchange %s, %d consumers) at %s", topic,
            exchange, ls->nthreads, url.redacted);
    return ls->nthreads ? 0 : -1;
}

/* ---- the caller pool ----------------------------------------------------------------------- */

/* Opens a pool link: confirms on, exchange declared, consuming direct
 * reply-to. 0/-1 (reason set). */
static int plink_open(struct nb_amqp_link *l)
{
    if (nb_amqp_link_open(l, &url, 0) < 0 || nb_amqp_link_confirm_select(l) < 0)
        return -1;
    amqp_exchange_declare(l->st, 1, amqp_cstring_bytes(exchange), amqp_cstring_bytes("topic"), 0, 0,
                          0, 0, amqp_empty_table);
    if (!nb_amqp_link_ok(l, "exchange.declare"))
        return -1;
    amqp_basic_consume(l->st, 1, amqp_cstring_bytes(REPLY_TO), amqp_empty_bytes, 0, 1, 0,
                       amqp_empty_table);
    return nb_amqp_link_ok(l, "basic.consume " REPLY_TO) ? 0 : -1;
}

/* Takes a pool link (opened lazily by the caller), waiting up to timeout_ms
 * while all pool_max are busy (a handler's nested call cannot wait forever
 * on links held by callers waiting for it). NULL when the bus is stopping or
 * the wait timed out. */
static struct plink *pool_get(int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&state_lock);
    struct plink *p = NULL;
    while (!atomic_load(&stopping)) {
        if (idle) {
            p = idle;
            idle = p->next;
            break;
        }
        if (pool_total < pool_max) {
            p = calloc(1, sizeof(*p));
            pool_total++;
            break;
        }
        if (pthread_cond_timedwait(&pool_cond, &state_lock, &until) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&state_lock);
    if (!p)
        NB_ERROR(LOG_AMQP, NULL, NULL, "No AMQP connection free in the pool of %d (%s)", pool_max,
                 atomic_load(&stopping) ? "the bus is stopping" : "all busy");
    return p;
}

static void pool_put(struct plink *p)
{
    pthread_mutex_lock(&state_lock);
    if (atomic_load(&stopping)) {
        pool_total--;
        pthread_mutex_unlock(&state_lock);
        nb_amqp_link_close(&p->link);
        free(p);
        pthread_cond_broadcast(&pool_cond);
        return;
    }
    p->next = idle;
    idle = p;
    pthread_cond_signal(&pool_cond);
    pthread_mutex_unlock(&state_lock);
}

/* What a publish is waiting for. */
struct waiter {
    uint64_t tag;   /* publisher-confirm tag */
    const char *id; /* message_id (= correlation_id for calls) */
    bool want_reply;
    bool acked, nacked, returned;
    json_t *reply; /* the reply body, new ref */
};

static bool waiter_done(const struct waiter *w)
{
    if (w->nacked || w->returned)
        return true;
    return w->acked && (!w->want_reply || w->reply);
}

/* Takes a delivery on the reply-to consumer: ours if the correlation id
 * matches; a late reply to an earlier, timed-out call is dropped. */
static void take_reply(struct waiter *w, amqp_envelope_t *env)
{
    amqp_basic_properties_t *p = &env->message.properties;
    if (!w->want_reply || !(p->_flags & AMQP_BASIC_CORRELATION_ID_FLAG) ||
        !bytes_eq(p->correlation_id, w->id))
        return;
    json_error_t je;
    w->reply = json_loadb(env->message.body.bytes, env->message.body.len, 0, &je);
    if (!w->reply)
        w->reply =
            json_pack("{s:{s:i, s:s}}", "failure", "code", 500, "message", "unreadable reply");
}

/* Handles a confirm, a return or a close frame. 0, or -1 (reason set). */
static int take_frame(struct nb_amqp_link *l, struct waiter *w)
{
    amqp_frame_t f;
    if (amqp_simple_wait_frame(l->st, &f) != AMQP_STATUS_OK) {
        snprintf(l->reason, sizeof(l->reason), "connection lost");
        return -1;
    }
    if (f.frame_type != AMQP_FRAME_METHOD)
        return 0;
    switch (f.payload.method.id) {
    case AMQP_BASIC_ACK_METHOD: {
        amqp_basic_ack_t *a = f.payload.method.decoded;
        if (a->delivery_tag == w->tag || (a->multiple && a->delivery_tag >= w->tag))
            w->acked = true;
        return 0;
    }
    case AMQP_BASIC_NACK_METHOD: {
        amqp_basic_nack_t *n = f.payload.method.decoded;
        if (n->delivery_tag == w->tag || (n->multiple && n->delivery_tag >= w->tag))
            w->nacked = true;
        return 0;
    }
    case AMQP_BASIC_RETURN_METHOD: {
        amqp_message_t m;
        amqp_rpc_reply_t r = amqp_read_message(l->st, f.channel, &m, 0);
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            nb_amqp_link_fail(l, "basic.return", r);
            return -1;
        }
        if ((m.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG) &&
            bytes_eq(m.properties.message_id, w->id))
            w->returned = true;
        amqp_destroy_message(&m);
        return 0;
    }
    case AMQP_CHANNEL_CLOSE_METHOD:
    case AMQP_CONNECTION_CLOSE_METHOD: {
        amqp_rpc_reply_t r = {.reply_type = AMQP_RESPONSE_SERVER_EXCEPTION,
                              .reply = f.payload.method};
        nb_amqp_link_fail(l, "closed by the broker", r);
        return -1;
    }
    default: return 0;
    }
}

/* Reads frames until w is done or the deadline (nb_time_mono seconds).
 * 0 done, 1 timed out, -1 connection broken (reason set). */
static int pump(struct nb_amqp_link *l, struct waiter *w, double deadline)
{
    while (!waiter_done(w)) {
        double left = deadline - nb_time_mono();
        if (left <= 0)
            return 1;
        struct timeval tv = {.tv_sec = (time_t)left,
                             .tv_usec = (suseconds_t)((left - (double)(time_t)left) * 1e6)};
        amqp_envelope_t env;
        amqp_maybe_release_buffers(l->st);
        amqp_rpc_reply_t r = amqp_consume_message(l->st, &env, &tv, 0);
        if (r.reply_type == AMQP_RESPONSE_NORMAL) {
            take_reply(w, &env);
            amqp_destroy_envelope(&env);
        } else if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
                   r.library_error == AMQP_STATUS_TIMEOUT)
            return 1;
        else if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
                 r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
            if (take_frame(l, w) < 0)
                return -1;
        } else {
            nb_amqp_link_fail(l, "consume", r);
            return -1;
        }
    }
    return 0;
}

/* Publishes one request on a pool link and waits as w asks. A link that
 * breaks before the broker confirmed the message is reopened and the publish
 * retried once. 0 done, 1 timed out, -1 broker unreachable (logged). */
static int send_request(struct plink *p, const char *topic, json_t *body, struct waiter *w,
                        int timeout_ms)
{
    struct nb_amqp_link *l = &p->link;
    double deadline = nb_time_mono() + timeout_ms / 1000.0;
    char ttl[24];
    snprintf(ttl, sizeof(ttl), "%d", timeout_ms);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!l->st && plink_open(l) < 0)
            break;
        amqp_basic_properties_t props = {0};
        props._flags = AMQP_BASIC_MESSAGE_ID_FLAG;
        props.message_id = amqp_cstring_bytes(w->id);
        if (w->want_reply) {
            props._flags |= AMQP_BASIC_REPLY_TO_FLAG | AMQP_BASIC_CORRELATION_ID_FLAG |
                            AMQP_BASIC_EXPIRATION_FLAG;
            props.reply_to = amqp_cstring_bytes(REPLY_TO);
            props.correlation_id = amqp_cstring_bytes(w->id);
            props.expiration = amqp_cstring_bytes(ttl);
        }
        w->tag = l->next_tag;
        int rc = publish(l, exchange, topic, body, &props, true);
        if (rc == 0) {
            l->next_tag++;
            rc = pump(l, w, deadline);
            if (rc >= 0)
                return rc;
        }
        nb_amqp_link_close(l);
        if (w->acked) /* the broker has it: do not send it twice */
            break;
    }
    char doing[300];
    snprintf(doing, sizeof(doing), "%s to topic %s", w->want_reply ? "call" : "cast", topic);
    log_unreachable(l, 0, doing);
    return -1;
}

/* Builds the request body; steals args. */
static json_t *request_body(const struct nb_ctx *ctx, const char *method, json_t *args)
{
    return json_pack("{s:s, s:o, s:o}", "method", method, "args", args ? args : json_object(),
                     "context", context_json(ctx));
}

/* After send_request (rc): a message returned for a topic whose queue this
 * process had seen, or whose listener the caller knows of (known), is sent
 * again once its queue is declared again (the broker lost it), to wait
 * there for the reconnecting listener. Returns the final rc; a topic a
 * message reached is remembered. */
static int resend_if_queue_lost(const struct nb_ctx *ctx, struct plink *p, const char *topic,
                                const char *method, json_t *body, struct waiter *w, int timeout_ms,
                                int rc, bool known)
{
    if (rc == 0 && w->returned && (known || topic_known(topic, false)) && p->link.st &&
        declare_topic_queue(&p->link, topic) == 0) {
        NB_WARN("nubo.bus", ctx, NULL,
                "the queue of topic %s was gone (broker restarted?): declared it again; "
                "%s waits in it for its listener",
                topic, method);
        json_decref(w->reply);
        *w = (struct waiter){.id = w->id, .want_reply = w->want_reply};
        rc = send_request(p, topic, body, w, timeout_ms);
    }
    if (rc == 0 && !w->returned)
        topic_known(topic, true);
    return rc;
}

static int amqp_cast(const struct nb_ctx *ctx, const char *topic, const char *method, json_t *args,
                     bool listener_known)
{
    json_t *body = request_body(ctx, method, args);
    int timeout_ms = (int)nb_conf_int("DEFAULT", "rpc_response_timeout", 60) * 1000;
    struct plink *p = pool_get(timeout_ms);
    if (!p) {
        json_decref(body);
        return -1;
    }
    char id[NB_UUID_LEN];
    nb_uuid(id);
    struct waiter w = {.id = id};
    int rc = send_request(p, topic, body, &w, timeout_ms);
    rc = resend_if_queue_lost(ctx, p, topic, method, body, &w, timeout_ms, rc, listener_known);
    pool_put(p);
    json_decref(body);
    if (rc == 0 && w.returned) {
        NB_ERROR("nubo.bus", ctx, NULL, "no listener for topic %s (method %s)", topic, method);
        return -1;
    }
    if (rc != 0 || w.nacked) {
        NB_ERROR("nubo.bus", ctx, NULL, "cast of %s to topic %s failed: %s", method, topic,
                 rc > 0   ? "no confirm from the broker in time"
                 : rc < 0 ? "the message bus is unreachable"
                          : "the broker refused it");
        return -1;
    }
    return 0;
}

/* Turns a reply body into the call's result (new ref) or NULL + error. */
static json_t *call_result(struct nb_ctx *ctx, json_t *reply, const char *topic)
{
    json_t *failure = json_object_get(reply, "failure");
    if (failure) {
        nb_error(ctx, (int)nb_json_int(failure, "code", 500), NULL, "%s (topic %s)",
                 nb_json_str(failure, "message") ? nb_json_str(failure, "message") : "failed",
                 topic);
        return NULL;
    }
    json_t *r = json_object_get(reply, "result");
    return json_incref(r ? r : json_null());
}

static json_t *amqp_call(struct nb_ctx *ctx, const char *topic, const char *method, json_t *args,
                         int timeout_ms)
{
    json_t *body = request_body(ctx, method, args);
    if (timeout_ms < 1)
        timeout_ms = 1;
    struct plink *p = pool_get(timeout_ms);
    if (!p) {
        json_decref(body);
        nb_error(ctx, 503, NULL, "Service for topic %s is not available.", topic);
        return NULL;
    }
    char id[NB_UUID_LEN];
    nb_uuid(id);
    struct waiter w = {.id = id, .want_reply = true};
    int rc = send_request(p, topic, body, &w, timeout_ms);
    rc = resend_if_queue_lost(ctx, p, topic, method, body, &w, timeout_ms, rc, false);
    pool_put(p);
    json_decref(body);
    json_t *out = NULL;
    if (rc == 0 && w.reply)
        out = call_result(ctx, w.reply, topic);
    else if (rc == 1) {
        NB_ERROR("nubo.bus", ctx, NULL, "timed out after %d ms waiting for %s.%s", timeout_ms,
                 topic, method);
        nb_error(ctx, 504, NULL, "Timed out waiting for a reply to %s on topic %s.", method, topic);
    } else {
        if (rc == 0)
            NB_ERROR("nubo.bus", ctx, NULL, "no listener for topic %s (method %s)", topic, method);
        nb_error(ctx, 503, NULL, "Service for topic %s is not available.", topic);
    }
    json_decref(w.reply);
    return out;
}

/* ---- start and stop ------------------------------------------------------------------------ */

static int amqp_init(void)
{
    const char *u = nb_conf_str("bus", "transport_url", NULL);
    if (!u)
        u = nb_conf_str("DEFAULT", "transport_url", "rabbit://guest:guest@127.0.0.1:5672/");
    char err[256];
    struct nb_bus_url parsed;
    if (nb_bus_url_parse(u, &parsed, err, sizeof(err)) < 0) {
        NB_ERROR(LOG_AMQP, NULL, NULL, "Invalid [bus] transport_url: %s", err);
        return -1;
    }
    pthread_mutex_lock(&state_lock);
    url = parsed;
    nb_strlcpy(exchange, nb_conf_str("DEFAULT", "control_exchange", "nova"), sizeof(exchange));
    pool_max = (int)nb_conf_int("DEFAULT", "rpc_conn_pool_size", 30);
    if (pool_max < 1)
        pool_max = 1;
    atomic_store(&stopping, false);
    pthread_mutex_unlock(&state_lock);
    /* Fail fast on a wrong URL, vhost or password; the link stays pooled. */
    struct plink *p = pool_get(1000);
    if (!p)
        return -1;
    int rc = plink_open(&p->link);
    if (rc < 0) {
        log_unreachable(&p->link, 0, "cannot start the bus");
    } else
        NB_INFO(LOG_AMQP, NULL, NULL,
                "Connected to AMQP server on %s:%d via [amqp] client with port %d.",
                url.hosts[p->link.host].host, url.hosts[p->link.host].port, p->link.local_port);
    pool_put(p);
    return rc;
}

static void amqp_shutdown(void)
{
    atomic_store(&stopping, true);
    pthread_mutex_lock(&state_lock);
    struct listener *ls = listeners;
    listeners = NULL;
    struct plink *p = idle;
    idle = NULL;
    pthread_cond_broadcast(&pool_cond);
    pthread_mutex_unlock(&state_lock);
    while (ls) { /* each worker finishes its in-flight message, then closes */
        struct listener *next = ls->next;
        for (int i = 0; i < ls->nthreads; i++)
            pthread_join(ls->workers[i].thread, NULL);
        pthread_mutex_lock(&state_lock);
        ls->next = retired;
        retired = ls;
        pthread_mutex_unlock(&state_lock);
        ls = next;
    }
    while (p) {
        struct plink *next = p->next;
        nb_amqp_link_close(&p->link);
        free(p);
        p = next;
        pthread_mutex_lock(&state_lock);
        pool_total--;
        pthread_mutex_unlock(&state_lock);
    }
}

const struct nb_bus_backend nb_bus_amqp_backend = {
    .name = "amqp",
    .init = amqp_init,
    .shutdown = amqp_shutdown,
    .listen = amqp_listen,
    .cast = amqp_cast,
    .call = amqp_call,
};

/* test_bus.c - unit tests of the bus: transport URL parsing, and the AMQP
 * backend against the real RabbitMQ that scripts/rabbitmq-up.sh starts
 * (tests/run.sh runs it before the unit tests). The tests use their own
 * vhost, nubo-test-bus (created through rabbitmqctl when missing), and topic
 * names with the test's pid, and delete their queues at the end.
 *
 *   cast delivered with its context, call/reply, no listener, call timeout
 *   (and the late reply dropped), a listener in another process (fork +
 *   exec of this binary), concurrent callers from several threads, handler
 *   error replies and a malformed message, a broker that drops every
 *   connection (reconnect), and unreachable URLs / vhosts; and the method
 *   tables of bus.h (nb_bus_dispatch), directly and on the in-process bus.
 *
 * `test_bus --bench N [URL]` prints the round-trip latency of N sequential
 * calls over AMQP and in-process (bench/bench_bus.sh runs it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "bus/amqp_link.h"
#include "bus/bus.h"
#include "bus/transport_url.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "common/util.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define VHOST "nubo-test-bus"

static char broker_url[512];
static char topics[16][128];
static int ntopics;
static char self_exe[1024];

/* A topic name unique to this run, remembered for deletion. */
static const char *topic(const char *name)
{
    assert_true(ntopics < 16);
    snprintf(topics[ntopics], sizeof(topics[0]), "test-bus-%d-%s", (int)getpid(), name);
    return topics[ntopics++];
}

static const char *base_url(void)
{
    const char *u = getenv("NUBO_TEST_RABBIT_URL");
    return u ? u : "rabbit://guest:guest@127.0.0.1:5672/";
}

/* ---- URL parsing (no broker) --------------------------------------------------------------- */

static void test_url_parse(void **state)
{
    (void)state;
    struct nb_bus_url u;
    char err[256];
    assert_int_equal(nb_bus_url_parse("rabbit://nova:s%40cret@ctl:5673/nova", &u, err, 256), 0);
    assert_int_equal(u.nhosts, 1);
    assert_string_equal(u.hosts[0].user, "nova");
    assert_string_equal(u.hosts[0].pass, "s@cret");
    assert_string_equal(u.hosts[0].host, "ctl");
    assert_int_equal(u.hosts[0].port, 5673);
    assert_string_equal(u.vhost, "nova");
    assert_null(strstr(u.redacted, "cret"));
    assert_string_equal(u.redacted, "rabbit://nova:***@ctl:5673/nova");

    assert_int_equal(nb_bus_url_parse("rabbit://h1,u:p@h2:1234/", &u, err, 256), 0);
    assert_int_equal(u.nhosts, 2);
    assert_string_equal(u.hosts[0].user, "guest");
    assert_int_equal(u.hosts[0].port, 5672);
    assert_string_equal(u.hosts[1].host, "h2");
    assert_string_equal(u.vhost, "/");
    assert_int_equal(nb_bus_url_parse("amqp://h/%2F", &u, err, 256), 0);
    assert_string_equal(u.vhost, "/");

    assert_int_equal(nb_bus_url_parse("kafka://h/", &u, err, 256), -1);
    assert_non_null(strstr(err, "scheme"));
    assert_int_equal(nb_bus_url_parse("rabbit://h:99999/", &u, err, 256), -1);
    assert_non_null(strstr(err, "port"));
    assert_int_equal(nb_bus_url_parse("rabbit:///", &u, err, 256), -1);
    assert_int_equal(nb_bus_url_parse("rabbit://h/%zz", &u, err, 256), -1);
    assert_int_equal(nb_bus_url_parse("rabbit://h/?ssl=1", &u, err, 256), -1);
}

/* ---- method tables (no broker) ------------------------------------------------------------- */

static json_t *m_note(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)ctx;
    json_array_append_new(opaque, json_pack("{s:s, s:O?}", "method", method, "args", args));
    return json_pack("{s:b}", "dropped", 1); /* a cast's reply: dropped by the dispatcher */
}

static json_t *m_echo(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)opaque, (void)ctx, (void)method;
    return json_pack("{s:O?}", "echo", args);
}

static const struct nb_bus_method test_methods[] = {
    {"note", NB_BUS_CAST, m_note},
    {"echo", NB_BUS_CALL, m_echo},
    {NULL, 0, NULL},
};
static const struct nb_bus_service test_service = {"test", "nubo.test.bus", test_methods};

/* One lookup per message: a cast runs its function and answers NULL, a
 * call answers its function's reply, an unknown method is an error reply
 * and runs nothing. */
static void test_dispatch_table(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *notes = json_array();
    json_t *args = json_pack("{s:i}", "n", 1);
    assert_null(nb_bus_dispatch(&test_service, notes, &ctx, "note", args));
    assert_int_equal(json_array_size(notes), 1);
    assert_string_equal(nb_json_str(json_array_get(notes, 0), "method"), "note");
    json_t *r = nb_bus_dispatch(&test_service, notes, &ctx, "echo", args);
    assert_int_equal(nb_json_int(json_object_get(r, "echo"), "n", 0), 1);
    json_decref(r);
    r = nb_bus_dispatch(&test_service, notes, &ctx, "ech", args);
    assert_string_equal(nb_json_str(r, "error"), "unknown method");
    json_decref(r);
    assert_int_equal(json_array_size(notes), 1);
    json_decref(args);
    json_decref(notes);
}

/* The table as a topic's handler on the in-process bus. */
static json_t *table_handler(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    return nb_bus_dispatch(&test_service, opaque, ctx, method, args);
}

static void test_dispatch_inproc(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    assert_int_equal(nb_bus_listen("test-dispatch", table_handler, NULL, 1), 0);
    json_t *r = nb_bus_call(&ctx, "test-dispatch", "echo", json_pack("{s:s}", "x", "y"), 5000);
    assert_string_equal(nb_json_str(json_object_get(r, "echo"), "x"), "y");
    json_decref(r);
    r = nb_bus_call(&ctx, "test-dispatch", "nope", json_object(), 5000);
    assert_string_equal(nb_json_str(r, "error"), "unknown method");
    json_decref(r);
    nb_bus_shutdown();
}

/* ---- broker helpers ------------------------------------------------------------------------ */

/* Opens a raw link to the test vhost (url: transport URL). 0/-1. */
static int raw_link(struct nb_amqp_link *l, const char *u)
{
    struct nb_bus_url parsed;
    char err[256];
    memset(l, 0, sizeof(*l));
    if (nb_bus_url_parse(u, &parsed, err, sizeof(err)) < 0)
        return -1;
    return nb_amqp_link_open(l, &parsed, 0);
}

/* Makes sure the test vhost exists (rabbitmqctl only when it does not). */
static int ensure_vhost(void)
{
    struct nb_amqp_link l;
    if (raw_link(&l, broker_url) == 0) {
        nb_amqp_link_close(&l);
        return 0;
    }
    if (!strstr(l.reason, "NOT_ALLOWED")) {
        fprintf(stderr,
                "test_bus: RabbitMQ does not answer at %s (%s); start it with "
                "scripts/rabbitmq-up.sh\n",
                base_url(), l.reason);
        return -1;
    }
    if (system("rabbitmqctl -q add_vhost " VHOST " >/dev/null 2>&1; "
               "rabbitmqctl -q set_permissions -p " VHOST " guest '.*' '.*' '.*'") != 0)
        return -1;
    if (raw_link(&l, broker_url) < 0)
        return -1;
    nb_amqp_link_close(&l);
    return 0;
}

static int setup_amqp(void **state)
{
    (void)state;
    nb_conf_reset();
    nb_conf_set("bus", "transport", "amqp");
    nb_conf_set("bus", "transport_url", broker_url);
    return nb_bus_init();
}

static int teardown_amqp(void **state)
{
    (void)state;
    nb_bus_shutdown();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    struct nb_amqp_link l;
    if (raw_link(&l, broker_url) < 0)
        return 0;
    for (int i = 0; i < ntopics && l.st; i++) {
        amqp_queue_delete(l.st, 1, amqp_cstring_bytes(topics[i]), 0, 0);
        nb_amqp_link_ok(&l, "queue.delete");
    }
    nb_amqp_link_close(&l);
    return 0;
}

/* ---- handlers ------------------------------------------------------------------------------ */

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *seen; /* what the handlers received, in order */

static json_t *record_handler(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)opaque;
    json_t *rec = json_pack(
        "{s:s, s:O, s:s, s:s, s:s, s:s, s:s, s:b, s:b, s:I}", "method", method, "args", args,
        "request_id", ctx->request_id, "global_request_id", ctx->global_request_id, "user_id",
        ctx->user_id, "project_id", ctx->project_id, "project_name", ctx->project_name, "is_admin",
        ctx->is_admin, "system", ctx->system, "thread", (json_int_t)(uintptr_t)pthread_self());
    pthread_mutex_lock(&seen_lock);
    json_array_append_new(seen, rec);
    pthread_mutex_unlock(&seen_lock);
    if (!strcmp(method, "sleep"))
        usleep((useconds_t)nb_json_int(args, "ms", 0) * 1000);
    if (!strcmp(method, "null"))
        return NULL;
    if (!strcmp(method, "nested")) { /* a call from inside a handler */
        json_t *r = nb_bus_call(ctx, nb_json_str(args, "topic"), "echo", NULL, 500);
        json_t *out = json_pack("{s:b, s:i}", "nested_ok", r != NULL, "status", ctx->err_status);
        json_decref(r);
        return out;
    }
    if (!strcmp(method, "fail")) {
        nb_error(ctx, 409, NULL, "Instance %s is locked.", nb_json_str(args, "uuid"));
        return json_pack("{s:s}", "error", ctx->err_msg);
    }
    return json_pack("{s:s, s:O}", "request_id", ctx->request_id, "args", args);
}

/* Waits until the handlers saw n messages; the count reached. */
static size_t wait_seen(size_t n, int timeout_ms)
{
    size_t got = 0;
    for (int i = 0; i < timeout_ms / 10; i++) {
        pthread_mutex_lock(&seen_lock);
        got = json_array_size(seen);
        pthread_mutex_unlock(&seen_lock);
        if (got >= n)
            break;
        usleep(10000);
    }
    return got;
}

static void reset_seen(void)
{
    pthread_mutex_lock(&seen_lock);
    json_decref(seen);
    seen = json_array();
    pthread_mutex_unlock(&seen_lock);
}

static void user_ctx(struct nb_ctx *ctx)
{
    nb_ctx_init(ctx);
    nb_strlcpy(ctx->global_request_id, "req-11111111-2222-3333-4444-555555555555",
               sizeof(ctx->global_request_id));
    nb_strlcpy(ctx->user_id, "u-1", sizeof(ctx->user_id));
    nb_strlcpy(ctx->project_id, "p-1", sizeof(ctx->project_id));
    nb_strlcpy(ctx->project_name, "demo", sizeof(ctx->project_name));
    ctx->is_admin = true;
}

/* ---- AMQP tests ---------------------------------------------------------------------------- */

static void test_cast_with_context(void **state)
{
    (void)state;
    reset_seen();
    const char *t = topic("cast");
    assert_string_equal(nb_bus_transport(), "amqp");
    assert_int_equal(nb_bus_listen(t, record_handler, NULL, 2), 0);
    assert_int_equal(nb_bus_listen(t, record_handler, NULL, 1), -1); /* one per process */
    struct nb_ctx ctx;
    user_ctx(&ctx);
    for (int i = 0; i < 20; i++)
        assert_int_equal(nb_bus_cast(&ctx, t, "build", json_pack("{s:i}", "n", i)), 0);
    assert_int_equal(wait_seen(20, 10000), 20);
    long long sum = 0;
    for (size_t i = 0; i < 20; i++) {
        json_t *rec = json_array_get(seen, i);
        assert_string_equal(nb_json_str(rec, "method"), "build");
        assert_string_equal(nb_json_str(rec, "request_id"), ctx.request_id);
        assert_string_equal(nb_json_str(rec, "global_request_id"), ctx.global_request_id);
        assert_string_equal(nb_json_str(rec, "user_id"), "u-1");
        assert_string_equal(nb_json_str(rec, "project_id"), "p-1");
        assert_string_equal(nb_json_str(rec, "project_name"), "demo");
        assert_true(json_is_true(json_object_get(rec, "is_admin")));
        sum += nb_json_int(json_object_get(rec, "args"), "n", -100);
    }
    assert_int_equal(sum, 19 * 20 / 2);
}

static void test_call_reply(void **state)
{
    (void)state;
    reset_seen();
    const char *t = topic("call");
    assert_int_equal(nb_bus_listen(t, record_handler, NULL, 2), 0);
    struct nb_ctx ctx;
    user_ctx(&ctx);
    json_t *r = nb_bus_call(&ctx, t, "echo", json_pack("{s:s, s:i}", "x", "é\"{}", "y", 7), 5000);
    assert_non_null(r);
    assert_string_equal(nb_json_str(r, "request_id"), ctx.request_id);
    assert_string_equal(nb_json_str(json_object_get(r, "args"), "x"), "é\"{}");
    assert_int_equal(nb_json_int(json_object_get(r, "args"), "y", 0), 7);
    json_decref(r);
    r = nb_bus_call(&ctx, t, "null", NULL, 5000);
    assert_true(json_is_null(r));
    json_decref(r);
    assert_int_equal(ctx.err_status, 0);

    /* 1 MiB of console output crosses several AMQP frames (frame_max 128 KiB). */
    char *big = malloc(1 << 20);
    memset(big, 'x', (1 << 20) - 1);
    big[(1 << 20) - 1] = '\0';
    r = nb_bus_call(&ctx, t, "echo", json_pack("{s:s}", "output", big), 10000);
    assert_non_null(r);
    assert_string_equal(nb_json_str(json_object_get(r, "args"), "output"), big);
    json_decref(r);
    free(big);
}

static int setup_small_pool(void **state)
{
    nb_conf_reset();
    nb_conf_set("DEFAULT", "rpc_conn_pool_size", "1");
    nb_conf_set("bus", "transport", "amqp");
    nb_conf_set("bus", "transport_url", broker_url);
    (void)state;
    return nb_bus_init();
}

/* One pooled connection, held by a caller whose handler calls again: the
 * nested call gives up after its timeout instead of waiting forever. */
static void test_pool_exhausted(void **state)
{
    (void)state;
    const char *t = topic("pool"), *other = topic("pool-other");
    assert_int_equal(nb_bus_listen(t, record_handler, NULL, 1), 0);
    assert_int_equal(nb_bus_listen(other, record_handler, NULL, 1), 0);
    struct nb_ctx ctx;
    user_ctx(&ctx);
    json_t *r = nb_bus_call(&ctx, t, "nested", json_pack("{s:s}", "topic", other), 5000);
    assert_non_null(r);
    assert_false(json_is_true(json_object_get(r, "nested_ok")));
    assert_int_equal(nb_json_int(r, "status", 0), 503);
    json_decref(r);
    r = nb_bus_call(&ctx, other, "echo", NULL, 5000); /* the link is back in the pool */
    assert_non_null(r);
    json_decref(r);
}

static void test_no_listener(void **state)
{
    (void)state;
    const char *t = topic("nobody");
    struct nb_ctx ctx;
    user_ctx(&ctx);
    assert_int_equal(nb_bus_cast(&ctx, t, "x", NULL), -1);
    assert_null(nb_bus_call(&ctx, t, "x", NULL, 2000));
    assert_int_equal(ctx.err_status, 503);
    assert_non_null(strstr(ctx.err_msg, t));
}

static void test_call_timeout(void **state)
{
    (void)state;
    reset_seen();
    const char *t = topic("slow");
    assert_int_equal(nb_bus_listen(t, record_handler, NULL, 1), 0);
    struct nb_ctx ctx;
    user_ctx(&ctx);
    double t0 = nb_time_mono();
    assert_null(nb_bus_call(&ctx, t, "sleep", json_pack("{s:i}", "ms", 1500), 300));
    double took = nb_time_mono() - t0;
    assert_int_equal(ctx.err_status, 504);
    assert_non_null(strstr(ctx.err_msg, "Timed out"));
    assert_true(took >= 0.29 && took < 1.2);
    /* The late reply to the first call must not be taken for this one's. */
    struct nb_ctx ctx2;
    user_ctx(&ctx2);
    json_t *r = nb_bus_call(&ctx2, t, "echo", json_pack("{s:i}", "second", 1), 10000);
    assert_non_null(r);
    assert_int_equal(nb_json_int(json_object_get(r, "args"), "second", 0), 1);
    assert_string_equal(nb_json_str(r, "request_id"), ctx2.request_id);
    json_decref(r);
}

struct caller {
    const char *topic;
    int id, ok;
};

static void *caller_main(void *arg)
{
    struct caller *c = arg;
    for (int i = 0; i < 40; i++) {
        struct nb_ctx ctx;
        nb_ctx_init(&ctx);
        json_t *r =
            nb_bus_call(&ctx, c->topic, "echo", json_pack("{s:i, s:i}", "c", c->id, "i", i), 10000);
        json_t *a = json_object_get(r, "args");
        if (nb_json_int(a, "c", -1) == c->id && nb_json_int(a, "i", -1) == i &&
            !strcmp(nb_json_str(r, "request_id") ? nb_json_str(r, "request_id") : "",
                    ctx.request_id))
            c->ok++;
        json_decref(r);
    }
    return NULL;
}

static void test_concurrent_callers(void **state)
{
    (void)state;
    reset_seen();
    const char *t = topic("busy");
    assert_int_equal(nb_bus_listen(t, record_handler, NULL, 4), 0);
    pthread_t th[8];
    struct caller cs[8];
    for (int i = 0; i < 8; i++) {
        cs[i] = (struct caller){.topic = t, .id = i};
        assert_int_equal(pthread_create(&th[i], NULL, caller_main, &cs[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(cs[i].ok, 40);
    }
    /* prefetch 1: the work went to more than one consumer thread */
    json_t *threads = json_object();
    size_t i;
    json_t *rec;
    json_array_foreach (seen, i, rec) {
        char k[32];
        snprintf(k, sizeof(k), "%lld", nb_json_int(rec, "thread", 0));
        json_object_set_new(threads, k, json_true());
    }
    assert_true(json_object_size(threads) > 1);
    json_decref(threads);
}

static void test_handler_error_reply(void **state)
{
    (void)state;
    reset_seen();
    const char *t = topic("errors");
    assert_int_equal(nb_bus_listen(t, record_handler, NULL, 1), 0);
    struct nb_ctx ctx;
    user_ctx(&ctx);
    json_t *r = nb_bus_call(&ctx, t, "fail", json_pack("{s:s}", "uuid", "abc"), 5000);
    assert_non_null(r);
    assert_string_equal(nb_json_str(r, "error"), "Instance abc is locked.");
    assert_int_equal(ctx.err_status, 0); /* the handler's error stays on its own context */
    json_decref(r);

    /* A malformed message is dropped with an error; the listener carries on. */
    struct nb_amqp_link l;
    assert_int_equal(raw_link(&l, broker_url), 0);
    amqp_basic_properties_t p = {0};
    assert_int_equal(amqp_basic_publish(l.st, 1, amqp_cstring_bytes("nova"), amqp_cstring_bytes(t),
                                        0, 0, &p, amqp_cstring_bytes("{not json")),
                     0);
    nb_amqp_link_close(&l);
    r = nb_bus_call(&ctx, t, "echo", json_pack("{s:i}", "after", 1), 5000);
    assert_non_null(r);
    assert_int_equal(nb_json_int(json_object_get(r, "args"), "after", 0), 1);
    json_decref(r);
}

static void test_reconnect(void **state)
{
    (void)state;
    reset_seen();
    const char *t = topic("reconnect");
    assert_int_equal(nb_bus_listen(t, record_handler, NULL, 2), 0);
    struct nb_ctx ctx;
    user_ctx(&ctx);
    json_t *r = nb_bus_call(&ctx, t, "echo", NULL, 5000);
    assert_non_null(r);
    json_decref(r);
    assert_int_equal(system("rabbitmqctl -q close_all_connections --vhost " VHOST
                            " 'nubo test_bus: reconnect' >/dev/null 2>&1"),
                     0);
    /* Listeners come back after oslo's 1 s back-off; the caller's pooled
     * connection is stale and is reopened on the next publish. */
    r = NULL;
    for (int i = 0; i < 100 && !r; i++) {
        struct nb_ctx c2;
        user_ctx(&c2);
        r = nb_bus_call(&c2, t, "echo", json_pack("{s:i}", "try", i), 2000);
        if (!r)
            usleep(100000);
    }
    assert_non_null(r);
    json_decref(r);
    assert_int_equal(nb_bus_cast(&ctx, t, "echo", NULL), 0);
}

/* A message the broker pushed to a consumer that never acked it (its
 * connection dead: a host cut off the network) comes back redelivered and
 * is handled, not dropped: the listener acks on receipt, so redelivered
 * means never handled. */
static void test_redelivered_is_handled(void **state)
{
    (void)state;
    reset_seen();
    const char *t = topic("redeliver");
    struct nb_amqp_link raw;
    assert_int_equal(raw_link(&raw, broker_url), 0);
    amqp_bytes_t q = amqp_cstring_bytes(t);
    amqp_exchange_declare(raw.st, 1, amqp_cstring_bytes("nova"), amqp_cstring_bytes("topic"), 0, 0,
                          0, 0, amqp_empty_table);
    assert_true(nb_amqp_link_ok(&raw, "exchange.declare"));
    amqp_queue_declare(raw.st, 1, q, 0, 0, 0, 0, amqp_empty_table);
    assert_true(nb_amqp_link_ok(&raw, "queue.declare"));
    amqp_queue_bind(raw.st, 1, q, amqp_cstring_bytes("nova"), q, amqp_empty_table);
    assert_true(nb_amqp_link_ok(&raw, "queue.bind"));
    amqp_basic_consume(raw.st, 1, q, amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    assert_true(nb_amqp_link_ok(&raw, "basic.consume"));
    struct nb_ctx ctx;
    user_ctx(&ctx);
    assert_int_equal(nb_bus_cast(&ctx, t, "build", json_pack("{s:i}", "n", 7)), 0);
    amqp_envelope_t env;
    struct timeval tv = {.tv_sec = 5};
    amqp_rpc_reply_t r = amqp_consume_message(raw.st, &env, &tv, 0);
    assert_int_equal(r.reply_type, AMQP_RESPONSE_NORMAL);
    amqp_destroy_envelope(&env);
    nb_amqp_link_close(&raw); /* never acked: the broker requeues it, redelivered */
    assert_int_equal(nb_bus_listen(t, record_handler, NULL, 1), 0);
    assert_int_equal(wait_seen(1, 10000), 1);
    json_t *rec = json_array_get(seen, 0);
    assert_string_equal(nb_json_str(rec, "method"), "build");
    assert_int_equal(nb_json_int(json_object_get(rec, "args"), "n", 0), 7);
}

/* ---- another process ----------------------------------------------------------------------- */

static json_t *child_handler(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)opaque;
    if (!strcmp(method, "whoami"))
        return json_pack("{s:i, s:s, s:s}", "pid", (int)getpid(), "request_id", ctx->request_id,
                         "user_id", ctx->user_id);
    if (!strcmp(method, "call_back")) /* a call from this process to the parent's topic */
        return nb_bus_call(ctx, nb_json_str(args, "topic"), "echo",
                           json_pack("{s:i}", "from", (int)getpid()), 5000);
    return NULL;
}

/* `test_bus --child URL TOPIC`: listens on TOPIC until SIGTERM. */
static int child_main(const char *u, const char *t)
{
    nb_conf_set("bus", "transport", "amqp");
    nb_conf_set("bus", "transport_url", u);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (nb_bus_init() < 0 || nb_bus_listen(t, child_handler, NULL, 2) < 0)
        return 1;
    int sig;
    sigwait(&set, &sig);
    nb_bus_shutdown();
    return 0;
}

static void test_two_processes(void **state)
{
    (void)state;
    const char *t = topic("compute.child"), *back = topic("parent");
    assert_int_equal(nb_bus_listen(back, record_handler, NULL, 1), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl(self_exe, self_exe, "--child", broker_url, t, (char *)NULL);
        _exit(127);
    }
    struct nb_ctx ctx;
    user_ctx(&ctx);
    json_t *r = NULL;
    for (int i = 0; i < 100 && !r; i++) { /* until the child's queue exists */
        nb_ctx_clear_error(&ctx);
        r = nb_bus_call(&ctx, t, "whoami", NULL, 2000);
        if (!r)
            usleep(100000);
    }
    assert_non_null(r);
    assert_int_equal(nb_json_int(r, "pid", 0), pid);
    assert_string_equal(nb_json_str(r, "request_id"), ctx.request_id);
    assert_string_equal(nb_json_str(r, "user_id"), "u-1");
    json_decref(r);
    r = nb_bus_call(&ctx, t, "call_back", json_pack("{s:s}", "topic", back), 10000);
    assert_non_null(r);
    assert_int_equal(nb_json_int(json_object_get(r, "args"), "from", 0), pid);
    assert_string_equal(nb_json_str(r, "request_id"), ctx.request_id);
    json_decref(r);
    kill(pid, SIGTERM);
    int status = -1;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The queue outlives its listener, as under oslo: casts wait in it. */
    assert_int_equal(nb_bus_cast(&ctx, t, "whoami", NULL), 0);
}

/* ---- unreachable brokers ------------------------------------------------------------------- */

/* Reads the bus log written under dir into a new string. */
static char *read_log(const char *dir)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/nubo-bus.log", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return strdup("");
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_unreachable(void **state)
{
    (void)state;
    char dir[] = "/tmp/nubo-test-bus-XXXXXX";
    assert_non_null(mkdtemp(dir));
    nb_log_open(dir, false, false);
    nb_conf_reset();
    nb_conf_set("bus", "transport", "amqp");

    /* Nothing listens on port 1: refused at once, named without password. */
    nb_conf_set("bus", "transport_url", "rabbit://nova:s3cret@127.0.0.1:1/");
    double t0 = nb_time_mono();
    assert_int_equal(nb_bus_init(), -1);
    assert_int_equal(nb_bus_listen("test-bus-unreachable", record_handler, NULL, 1), -1);
    struct nb_ctx ctx;
    user_ctx(&ctx);
    assert_null(nb_bus_call(&ctx, "test-bus-unreachable", "x", NULL, 1000));
    assert_int_equal(ctx.err_status, 503);
    assert_int_equal(nb_bus_cast(&ctx, "test-bus-unreachable", "x", NULL), -1);
    assert_true(nb_time_mono() - t0 < 5);
    nb_bus_shutdown();

    /* A vhost that does not exist: the broker's own words. */
    nb_conf_set("bus", "transport_url", "rabbit://guest:guest@127.0.0.1:5672/nubo-no-such-vhost");
    assert_int_equal(nb_bus_init(), -1);
    assert_int_equal(nb_bus_listen("test-bus-elsewhere", record_handler, NULL, 1), -1);
    nb_bus_shutdown();

    /* A bad URL and a bad transport name. */
    nb_conf_set("bus", "transport_url", "kafka://h/");
    assert_int_equal(nb_bus_init(), -1);
    nb_conf_set("bus", "transport", "zmq");
    assert_int_equal(nb_bus_init(), -1);

    nb_log_close();
    nb_log_open(NULL, false, false);
    char *log = read_log(dir);
    assert_non_null(strstr(log, "ERROR nubo.bus.amqp"));
    assert_non_null(strstr(log, "AMQP server on 127.0.0.1:1 is unreachable: connect: Connection "
                                "refused. (cannot start the bus, transport_url "
                                "rabbit://nova:***@127.0.0.1:1/)"));
    assert_non_null(strstr(log, "cannot listen on topic test-bus-unreachable"));
    assert_non_null(strstr(log, "call to topic test-bus-unreachable"));
    assert_non_null(strstr(log, "vhost nubo-no-such-vhost not found"));
    assert_non_null(strstr(log, "cannot listen on topic test-bus-elsewhere"));
    assert_non_null(strstr(log, "Invalid [bus] transport_url: unsupported transport URL scheme"));
    assert_non_null(strstr(log, "Invalid value for option [bus] transport: zmq"));
    assert_null(strstr(log, "s3cret"));
    free(log);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- bench --------------------------------------------------------------------------------- */

static double bench_calls(const char *transport, const char *t, int n)
{
    nb_conf_reset();
    nb_conf_set("bus", "transport", transport);
    nb_conf_set("bus", "transport_url", broker_url);
    if (nb_bus_init() < 0 || nb_bus_listen(t, record_handler, NULL, 1) < 0)
        return -1;
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    json_t *warm = nb_bus_call(&ctx, t, "null", NULL, 5000);
    json_decref(warm);
    double t0 = nb_time_mono();
    for (int i = 0; i < n; i++) {
        json_t *r = nb_bus_call(&ctx, t, "null", json_pack("{s:i}", "i", i), 5000);
        if (!r)
            return -1;
        json_decref(r);
    }
    double took = nb_time_mono() - t0;
    nb_bus_shutdown();
    return took;
}

static int bench_main(int n)
{
    seen = json_array();
    const char *t = topic("bench");
    double amqp = bench_calls("amqp", t, n);
    json_decref(seen);
    seen = json_array();
    double inproc = bench_calls("inproc", "bench", n);
    group_teardown(NULL);
    if (amqp < 0 || inproc < 0) {
        fprintf(stderr, "bench_bus: calls failed (is RabbitMQ up? scripts/rabbitmq-up.sh)\n");
        return 1;
    }
    struct nb_bus_url u;
    char err[256];
    nb_bus_url_parse(broker_url, &u, err, sizeof(err));
    printf("bus round trip, %d sequential calls (1 listener thread):\n", n);
    printf("  amqp    %8.1f us/call  (%.0f calls/s)  %s\n", amqp / n * 1e6, n / amqp, u.redacted);
    printf("  inproc  %8.1f us/call  (%.0f calls/s)\n", inproc / n * 1e6, n / inproc);
    printf("  ratio   amqp/inproc = %.1f\n", amqp / inproc);
    return 0;
}

int main(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
    if (n > 0)
        self_exe[n] = '\0';
    if (argc == 4 && !strcmp(argv[1], "--child"))
        return child_main(argv[2], argv[3]);
    snprintf(broker_url, sizeof(broker_url), "%s", base_url());
    /* the tests' own vhost on the same broker */
    char *slash = strchr(broker_url + strlen("rabbit://"), '/');
    if (slash)
        snprintf(slash, sizeof(broker_url) - (size_t)(slash - broker_url), "/%s", VHOST);
    if (argc >= 3 && !strcmp(argv[1], "--bench")) {
        if (argc >= 4)
            snprintf(broker_url, sizeof(broker_url), "%s", argv[3]);
        else if (ensure_vhost() < 0)
            return 1;
        return bench_main(atoi(argv[2]));
    }
    const struct CMUnitTest no_broker[] = {
        cmocka_unit_test(test_url_parse),
        cmocka_unit_test(test_dispatch_table),
        cmocka_unit_test(test_dispatch_inproc),
    };
    if (cmocka_run_group_tests_name("bus_url", no_broker, NULL, NULL) != 0)
        return 1;
    if (ensure_vhost() < 0)
        return 1;
    seen = json_array();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cast_with_context, setup_amqp, teardown_amqp),
        cmocka_unit_test_setup_teardown(test_call_reply, setup_amqp, teardown_amqp),
        cmocka_unit_test_setup_teardown(test_no_listener, setup_amqp, teardown_amqp),
        cmocka_unit_test_setup_teardown(test_call_timeout, setup_amqp, teardown_amqp),
        cmocka_unit_test_setup_teardown(test_concurrent_callers, setup_amqp, teardown_amqp),
        cmocka_unit_test_setup_teardown(test_handler_error_reply, setup_amqp, teardown_amqp),
        cmocka_unit_test_setup_teardown(test_pool_exhausted, setup_small_pool, teardown_amqp),
        cmocka_unit_test_setup_teardown(test_two_processes, setup_amqp, teardown_amqp),
        cmocka_unit_test_setup_teardown(test_reconnect, setup_amqp, teardown_amqp),
        cmocka_unit_test_setup_teardown(test_redelivered_is_handled, setup_amqp, teardown_amqp),
        cmocka_unit_test(test_unreachable),
    };
    int rc = cmocka_run_group_tests_name("bus_amqp", tests, NULL, group_teardown);
    json_decref(seen);
    return rc;
}

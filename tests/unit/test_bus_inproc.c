/* test_bus_inproc.c - unit tests of the in-process bus (inproc.c), no
 * broker: a registry of 20,000 topics (each message reaches its own
 * topic's handler; topics of their own threads registered after them
 * still answer; a name is taken once), and the shared pool of
 * nb_bus_listen_shared (two workers here): one topic's messages in order
 * and one at a time with nthreads 1, at most nthreads at once, a topic
 * answering while others have long queues, and the shutdown draining
 * the queues. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "bus/bus.h"
#include "common/config.h"
#include "common/json.h"
#include "common/util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NTOPICS 20000

static atomic_int hits[NTOPICS];

/* opaque: the topic's index. A cast counts, a call answers the index. */
static json_t *index_handler(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    int i = (int)(intptr_t)opaque;
    atomic_fetch_add(&hits[i], 1);
    if (!strcmp(method, "whoami"))
        return json_pack("{s:i, s:s}", "index", i, "arg", nb_json_str(args, "name"));
    return NULL;
}

static void test_many_topics(void **state)
{
    (void)state;
    char name[64];
    for (int i = 0; i < NTOPICS; i++) {
        snprintf(name, sizeof(name), "compute.fake-%d", i);
        assert_int_equal(nb_bus_listen_shared(name, index_handler, (void *)(intptr_t)i, 1), 0);
    }
    /* topics with workers of their own, after them, in the same table */
    assert_int_equal(nb_bus_listen("own-a", index_handler, (void *)(intptr_t)0, 1), 0);
    assert_int_equal(nb_bus_listen("own-b", index_handler, (void *)(intptr_t)1, 2), 0);
    assert_int_equal(nb_bus_listen_shared("compute.fake-7", index_handler, NULL, 1), -1);
    assert_int_equal(nb_bus_listen("compute.fake-7", index_handler, NULL, 1), -1);
    assert_int_equal(nb_bus_listen_shared("own-a", index_handler, NULL, 1), -1);

    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    for (int i = 0; i < NTOPICS; i++) {
        snprintf(name, sizeof(name), "compute.fake-%d", i);
        assert_int_equal(nb_bus_cast(&ctx, name, "count", json_object()), 0);
    }
    for (int i = 0; i < NTOPICS; i += 97) {
        snprintf(name, sizeof(name), "compute.fake-%d", i);
        json_t *r = nb_bus_call(&ctx, name, "whoami", json_pack("{s:s}", "name", name), 5000);
        assert_non_null(r);
        assert_int_equal(nb_json_int(r, "index", -1), i);
        assert_string_equal(nb_json_str(r, "arg"), name);
        json_decref(r);
    }
    json_t *r = nb_bus_call(&ctx, "own-b", "whoami", json_pack("{s:s}", "name", "b"), 5000);
    assert_int_equal(nb_json_int(r, "index", -1), 1);
    json_decref(r);
    int total = 0;
    for (int w = 0; w < 500 && total < NTOPICS + NTOPICS / 97 + 2; w++) {
        usleep(w ? 10 * 1000 : 0);
        total = 0;
        for (int i = 0; i < NTOPICS; i++)
            total += atomic_load(&hits[i]);
    }
    for (int i = 0; i < NTOPICS; i++)
        assert_int_equal(atomic_load(&hits[i]), 1 + (i % 97 == 0) + (i == 1));
    assert_null(nb_bus_call(&ctx, "compute.fake-20000", "whoami", json_object(), 1000));
    assert_int_equal(nb_ctx_status(&ctx), 503);
}

/* ---- the shared pool ---------------------------------------------------------------------- */

struct probe {
    atomic_int running, max_running, done;
    int order[1000];
    atomic_int norder;
    int sleep_us;
};

static json_t *probe_handler(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    struct probe *p = opaque;
    int now = atomic_fetch_add(&p->running, 1) + 1;
    for (int m = atomic_load(&p->max_running); now > m;)
        if (atomic_compare_exchange_weak(&p->max_running, &m, now))
            break;
    if (p->sleep_us)
        usleep((useconds_t)p->sleep_us);
    int k = atomic_fetch_add(&p->norder, 1);
    if (k < 1000)
        p->order[k] = (int)nb_json_int(args, "seq", -1);
    atomic_fetch_sub(&p->running, 1);
    atomic_fetch_add(&p->done, 1);
    return json_true();
}

static void wait_done(struct probe *p, int n)
{
    for (int i = 0; i < 1000 && atomic_load(&p->done) < n; i++)
        usleep(10 * 1000);
    assert_int_equal(atomic_load(&p->done), n);
}

static void test_shared_in_order(void **state)
{
    (void)state;
    static struct probe p = {.sleep_us = 50};
    assert_int_equal(nb_bus_listen_shared("ordered", probe_handler, &p, 1), 0);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(nb_bus_cast(&ctx, "ordered", "m", json_pack("{s:i}", "seq", i)), 0);
    wait_done(&p, 1000);
    assert_int_equal(atomic_load(&p.max_running), 1);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(p.order[i], i);
}

static void test_shared_nthreads(void **state)
{
    (void)state;
    static struct probe p = {.sleep_us = 20 * 1000};
    assert_int_equal(nb_bus_listen_shared("pair", probe_handler, &p, 2), 0);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    for (int i = 0; i < 8; i++)
        assert_int_equal(nb_bus_cast(&ctx, "pair", "m", json_pack("{s:i}", "seq", i)), 0);
    wait_done(&p, 8);
    assert_int_equal(atomic_load(&p.max_running), 2); /* the pool has 2 workers */
}

/* Four topics with 100 messages of 2 ms each queued (0.8 s of work for
 * the two workers): a call to a fifth topic is answered in turn, not
 * after them. */
static void test_shared_turns(void **state)
{
    (void)state;
    static struct probe busy[4], quick;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    char name[32];
    for (int k = 0; k < 4; k++) {
        busy[k].sleep_us = 2000;
        snprintf(name, sizeof(name), "busy-%d", k);
        assert_int_equal(nb_bus_listen_shared(name, probe_handler, &busy[k], 1), 0);
    }
    assert_int_equal(nb_bus_listen_shared("quick", probe_handler, &quick, 1), 0);
    for (int i = 0; i < 100; i++)
        for (int k = 0; k < 4; k++) {
            snprintf(name, sizeof(name), "busy-%d", k);
            assert_int_equal(nb_bus_cast(&ctx, name, "m", json_pack("{s:i}", "seq", i)), 0);
        }
    double t0 = nb_time_mono();
    json_t *r = nb_bus_call(&ctx, "quick", "m", json_object(), 5000);
    double waited = nb_time_mono() - t0;
    assert_true(json_is_true(r));
    json_decref(r);
    assert_true(waited < 0.3);
    int left = 0;
    for (int k = 0; k < 4; k++)
        left += 100 - atomic_load(&busy[k].done);
    assert_true(left > 100); /* most of the queued work was still to do */
    for (int k = 0; k < 4; k++)
        wait_done(&busy[k], 100);
}

/* The shutdown runs what is queued, then refuses. */
static void test_shutdown_drains(void **state)
{
    (void)state;
    static struct probe p = {.sleep_us = 1000};
    assert_int_equal(nb_bus_listen_shared("drain", probe_handler, &p, 1), 0);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    for (int i = 0; i < 50; i++)
        assert_int_equal(nb_bus_cast(&ctx, "drain", "m", json_pack("{s:i}", "seq", i)), 0);
    nb_bus_shutdown();
    assert_int_equal(atomic_load(&p.done), 50);
    assert_int_equal(nb_bus_cast(&ctx, "drain", "m", json_object()), -1);
    assert_int_equal(nb_bus_listen_shared("late", probe_handler, &p, 1), -1);
    nb_bus_shutdown(); /* again: nothing left to join */
}

int main(void)
{
    nb_conf_set("bus", "shared_workers", "2");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_topics),     cmocka_unit_test(test_shared_in_order),
        cmocka_unit_test(test_shared_nthreads), cmocka_unit_test(test_shared_turns),
        cmocka_unit_test(test_shutdown_drains),
    };
    return cmocka_run_group_tests_name("bus_inproc", tests, NULL, NULL);
}

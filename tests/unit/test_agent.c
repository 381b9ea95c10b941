/* test_agent.c - the compute agent's bus handler on the fake driver: pause,
 * unpause, suspend and resume end in op_result casts with the guest's
 * power state (and "unsupported" for a driver without the op), and
 * get_console_output cuts the log as Nova's _tail_log does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bus/bus.h"
#include "common/config.h"
#include "common/json.h"
#include "common/util.h"
#include "compute/agent/internal.h"
#include "compute/virt/driver.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UUID "dddddddd-0000-0000-0000-000000000004"

static char dir[] = "/tmp/nubo-agent-test-XXXXXX";
static struct agent agent;

/* op_result casts the agent sends to "conductor" */
static pthread_mutex_t results_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *results;

static json_t *conductor(void *opaque, struct nb_ctx *ctx, const char *method, json_t *args)
{
    (void)opaque;
    (void)ctx;
    if (!strcmp(method, "op_result")) {
        pthread_mutex_lock(&results_lock);
        json_array_append(results, args);
        pthread_mutex_unlock(&results_lock);
    }
    return NULL;
}

/* Waits for the n-th op_result (1-based); borrowed, or NULL after 5 s. */
static json_t *result(size_t n)
{
    for (int i = 0; i < 500; i++) {
        pthread_mutex_lock(&results_lock);
        json_t *r = json_array_get(results, n - 1);
        pthread_mutex_unlock(&results_lock);
        if (r)
            return r;
        usleep(10000);
    }
    return NULL;
}

static int setup(void **state)
{
    (void)state;
    nb_conf_reset();
    assert_non_null(mkdtemp(dir));
    nb_conf_set("DEFAULT", "state_path", dir);
    nb_conf_set("fake", "hosts", "h1");
    results = json_array();
    assert_int_equal(nb_bus_init(), 0);
    assert_int_equal(nb_bus_listen("conductor", conductor, NULL, 1), 0);
    agent.drv = nb_virt_fake_open();
    nb_strlcpy(agent.host, "h1", sizeof(agent.host));
    for (int i = 0; i < AGENT_LOCKS; i++)
        pthread_mutex_init(&agent.locks[i], NULL);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *inst =
        json_pack("{s:s, s:s, s:{s:s, s:i, s:i, s:i}}", "uuid", UUID, "image_ref", "img-1",
                  "flavor", "name", "m1.tiny", "vcpus", 1, "memory_mb", 512, "root_gb", 1);
    int rc = agent.drv->ops->spawn(agent.drv, &ctx, "h1", inst);
    json_decref(inst);
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    nb_bus_shutdown();
    agent.drv->ops->close(agent.drv);
    for (int i = 0; i < AGENT_LOCKS; i++)
        pthread_mutex_destroy(&agent.locks[i]);
    json_decref(results);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void call_op(const char *method)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *args = json_pack("{s:{s:s}}", "instance", "uuid", UUID);
    json_t *r = nb_agent_handle(&agent, &ctx, method, args);
    assert_null(r);
    json_decref(args);
}

static void assert_result(size_t n, const char *op, bool ok, int power)
{
    json_t *r = result(n);
    assert_non_null(r);
    assert_string_equal(nb_json_str(r, "op"), op);
    assert_string_equal(nb_json_str(r, "uuid"), UUID);
    assert_string_equal(nb_json_str(r, "host"), "h1");
    assert_int_equal(json_is_true(json_object_get(r, "ok")), ok);
    assert_int_equal(nb_json_int(r, "power_state", -1), power);
    assert_false(json_is_true(json_object_get(r, "unsupported")));
}

static void test_pause_suspend_cycle(void **state)
{
    (void)state;
    call_op("pause_instance");
    assert_result(1, "pause", true, NB_POWER_PAUSED);
    call_op("unpause_instance");
    assert_result(2, "unpause", true, NB_POWER_RUNNING);
    call_op("suspend_instance");
    assert_result(3, "suspend", true, NB_POWER_SHUTDOWN);
    /* a suspended guest cannot be paused: the driver's reason comes back */
    call_op("pause_instance");
    assert_result(4, "pause", false, NB_POWER_SHUTDOWN);
    assert_non_null(strstr(nb_json_str(result(4), "message"), "domain is not running"));
    call_op("resume_instance");
    assert_result(5, "resume", true, NB_POWER_RUNNING);
}

static void test_driver_without_the_op(void **state)
{
    (void)state;
    struct nb_virt_ops ops = *agent.drv->ops;
    ops.suspend = NULL;
    const struct nb_virt_ops *saved = agent.drv->ops;
    agent.drv->ops = &ops;
    size_t before = json_array_size(results);
    call_op("suspend_instance");
    json_t *r = result(before + 1);
    agent.drv->ops = saved;
    assert_non_null(r);
    assert_false(json_is_true(json_object_get(r, "ok")));
    assert_true(json_is_true(json_object_get(r, "unsupported")));
    assert_non_null(strstr(nb_json_str(r, "message"), "does not support suspend"));
    assert_int_equal(nb_json_int(r, "power_state", -1), NB_POWER_RUNNING);
}

/* get_console_output with a length (json null when len is NULL). New ref. */
static json_t *console(const char *uuid, json_t *len)
{
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *args = json_pack("{s:s, s:o}", "uuid", uuid, "length", len ? len : json_null());
    json_t *r = nb_agent_handle(&agent, &ctx, "get_console_output", args);
    json_decref(args);
    return r;
}

/* Number of pieces of s split at '\n', as Python's str.split('\n'). */
static size_t pieces(const char *s)
{
    size_t n = 1;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_console_tail(void **state)
{
    (void)state;
    json_t *all = console(UUID, NULL);
    const char *text = nb_json_str(all, "output");
    assert_non_null(text);
    /* the boot lines and every state change since */
    assert_non_null(strstr(text, "flavor m1.tiny: 1 vCPU, 512 MB RAM, 1 GB root disk"));
    assert_non_null(strstr(text, "boot source: img-1"));
    assert_non_null(strstr(text, "paused: vCPUs stopped"));
    assert_non_null(strstr(text, "resumed from the saved memory state"));
    size_t total = pieces(text);
    assert_true(total > 8);
    assert_int_equal(text[strlen(text) - 1], '\n');

    json_t *neg = console(UUID, json_integer(-1));
    assert_string_equal(nb_json_str(neg, "output"), text);
    json_decref(neg);

    json_t *zero = console(UUID, json_integer(0));
    assert_string_equal(nb_json_str(zero, "output"), "");
    json_decref(zero);

    /* length 3: the last three pieces, the final newline's empty one
     * included, so two lines (what Tempest checks) */
    json_t *three = console(UUID, json_integer(3));
    const char *t3 = nb_json_str(three, "output");
    assert_int_equal(pieces(t3), 3);
    assert_string_equal(t3, text + strlen(text) - strlen(t3));
    assert_non_null(strstr(t3, "resumed from the saved memory state"));
    json_decref(three);

    json_t *one = console(UUID, json_integer(1));
    assert_string_equal(nb_json_str(one, "output"), "");
    json_decref(one);

    json_t *more = console(UUID, json_integer(100000));
    assert_string_equal(nb_json_str(more, "output"), text);
    json_decref(more);
    json_decref(all);

    json_t *missing = console("eeeeeeee-0000-0000-0000-000000000005", NULL);
    assert_null(json_object_get(missing, "output"));
    assert_int_equal(nb_json_int(missing, "code", 0), 404);
    json_decref(missing);

    struct nb_virt_ops ops = *agent.drv->ops;
    ops.console_log = NULL;
    const struct nb_virt_ops *saved = agent.drv->ops;
    agent.drv->ops = &ops;
    json_t *none = console(UUID, NULL);
    agent.drv->ops = saved;
    assert_int_equal(nb_json_int(none, "code", 0), 501);
    json_decref(none);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pause_suspend_cycle),
        cmocka_unit_test(test_driver_without_the_op),
        cmocka_unit_test(test_console_tail),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

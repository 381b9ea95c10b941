/* test_netagent.c - unit tests of the network agent's core on this host:
 * commands (na_run: output, stdin, exit status, time limit, a network
 * namespace), the ownership record across a reload, and layer 2 on
 * hand-written states (a bridge made with the network's MTU and IPv6 off,
 * a tap put back on it, devices up/down, the bridge removed when its
 * network leaves the state, a bridge not recorded as ours left alone).
 * Everything made here is named nt-agent-ish (brqntagent*, ntagtap*,
 * ntagns*) and removed at the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/ctx.h"
#include "common/json.h"
#include "common/proc.h"
#include "common/util.h"
#include "network/agent/agent_int.h"
#include "network/agent/netdev.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[] = "/tmp/nubo-test-netagent-XXXXXX";

#define BR1 "brqntagent01"
#define BR2 "brqntagent02"
#define TAP1 "ntagtap1"
#define NS1 "ntagns1"

static void sh(const char *cmd)
{
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

static void quiet(const char *cmd)
{
    char buf[600];
    snprintf(buf, sizeof(buf), "%s >/dev/null 2>&1", cmd);
    (void)!system(buf);
}

static void cleanup_host(void)
{
    quiet("ip link del " BR1);
    quiet("ip link del " BR2);
    quiet("ip link del " TAP1);
    quiet("ip netns del " NS1);
}

static int setup(void **st)
{
    (void)st;
    if (!mkdtemp(dir))
        return -1;
    cleanup_host();
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    cleanup_host();
    nb_rm_rf(dir);
    return 0;
}

static void test_run(void **st)
{
    (void)st;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    char *out = NULL;
    const char *echo[] = {"sh", "-c", "echo hello; echo err >&2; exit 3", NULL};
    assert_int_equal(na_run(&ctx, NULL, echo, NULL, 5000, &out), 3);
    assert_string_equal(out, "hello\nerr");
    free(out);

    const char *cat[] = {"cat", NULL};
    assert_int_equal(na_run(&ctx, NULL, cat, "fed through stdin\n", 5000, &out), 0);
    assert_string_equal(out, "fed through stdin");
    free(out);

    /* a big stdin does not deadlock against a big output */
    size_t big = 300000;
    char *text = malloc(big + 1);
    memset(text, 'x', big);
    text[big] = '\0';
    assert_int_equal(na_run(&ctx, NULL, cat, text, 10000, &out), 0);
    assert_int_equal(strlen(out), big);
    free(out);
    free(text);

    double t0 = nb_time_mono();
    const char *sleep[] = {"sleep", "5", NULL};
    assert_int_equal(na_run(&ctx, NULL, sleep, NULL, 300, &out), 128 + 9);
    assert_true(nb_time_mono() - t0 < 2);
    assert_non_null(strstr(out, "killed after 300 ms"));
    free(out);

    /* a daemon that keeps the output open does not hold the wait */
    t0 = nb_time_mono();
    const char *daemon[] = {"sh", "-c", "sleep 3 & echo started", NULL};
    assert_int_equal(na_run(&ctx, NULL, daemon, NULL, 5000, &out), 0);
    assert_true(nb_time_mono() - t0 < 1.5);
    assert_string_equal(out, "started");
    free(out);

    const char *none[] = {"nubo-no-such-tool", NULL};
    assert_int_equal(na_run(&ctx, NULL, none, NULL, 1000, &out), -1);
    assert_string_equal(out, "command not found");
    free(out);

    assert_int_equal(na_must(&ctx, NULL, echo, NULL), -1);
    assert_int_equal(nb_ctx_status(&ctx), 500);
    assert_non_null(
        strstr(nb_ctx_message(&ctx), "sh -c 'echo hello; echo err >&2; exit 3': hello"));
}

static void test_run_netns(void **st)
{
    (void)st;
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    sh("ip netns add " NS1);
    char *out = NULL;
    const char *links[] = {"ip", "-o", "link", "show", NULL};
    assert_int_equal(na_run(&ctx, NS1, links, NULL, 5000, &out), 0);
    /* only the namespace's loopback */
    assert_non_null(strstr(out, "1: lo:"));
    assert_null(strstr(out, "eth0"));
    free(out);
    assert_int_equal(na_run(&ctx, "ntagns-missing", links, NULL, 5000, &out), -1);
    assert_string_equal(out, "network namespace not found");
    free(out);
    sh("ip netns del " NS1);
}

static void test_ownership(void **st)
{
    (void)st;
    char sd[200];
    snprintf(sd, sizeof(sd), "%s/own", dir);
    struct na *a = na_new("host-own", sd);
    assert_non_null(a);
    assert_int_equal(strlen(na_tag(a)), 8);
    char tag[9];
    nb_strlcpy(tag, na_tag(a), sizeof(tag));
    assert_int_equal(na_own(a, "bridge", "brqa"), 0);
    assert_int_equal(na_own(a, "bridge", "brqa"), 0);
    assert_int_equal(na_own(a, "bridge", "brqb"), 0);
    assert_int_equal(na_own(a, "netns", "qdhcp-x"), 0);
    assert_int_equal(na_disown(a, "bridge", "brqa"), 0);
    assert_int_equal(na_disown(a, "bridge", "never"), 0);
    na_free(a);

    a = na_new("host-own", sd);
    assert_string_equal(na_tag(a), tag); /* the same agent after a restart */
    json_t *b = na_owned(a, "bridge"), *n = na_owned(a, "netns"), *x = na_owned(a, "link");
    char *s = json_dumps(b, JSON_COMPACT);
    assert_string_equal(s, "[\"brqb\"]");
    free(s);
    assert_int_equal(json_array_size(n), 1);
    assert_int_equal(json_array_size(x), 0);
    json_decref(b);
    json_decref(n);
    json_decref(x);
    na_free(a);
}

static json_t *state_with(const char *bridges_json)
{
    char text[2048];
    snprintf(text, sizeof(text),
             "{\"host\": \"h1\", \"networks\": %s, \"ports\": [{\"id\": "
             "\"11111111-aaaa-4000-8000-000000000001\", \"network_id\": \"net1\", \"tap\": "
             "\"" TAP1 "\", \"status\": \"DOWN\"}], \"routers\": [], \"security_groups\": []}",
             bridges_json);
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    return j;
}

static void test_l2(void **st)
{
    (void)st;
    char sd[200];
    snprintf(sd, sizeof(sd), "%s/l2", dir);
    struct na *a = na_new("h1", sd);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    /* a bridge that is not ours, with a name like ours */
    sh("ip link add " BR2 " type bridge");

    json_t *s1 = state_with("[{\"id\": \"net1\", \"bridge\": \"" BR1 "\", \"mtu\": 1450}]");
    assert_int_equal(na_l2_sync(a, &ctx, s1), 0);
    assert_true(na_dev_exists(BR1));
    assert_int_equal(na_dev_mtu(BR1), 1450);
    assert_true(na_dev_up(BR1));
    char *v6 = nb_read_file("/proc/sys/net/ipv6/conf/" BR1 "/disable_ipv6", NULL);
    if (v6) /* a kernel with IPv6 */
        assert_int_equal(v6[0], '1');
    free(v6);
    char *stp = nb_read_file("/sys/class/net/" BR1 "/bridge/stp_state", NULL);
    assert_int_equal(stp[0], '0');
    free(stp);

    /* the guest's tap: down until it exists on its bridge */
    json_t *up, *down;
    assert_int_equal(na_l2_devices(a, &ctx, s1, &up, &down), 0);
    assert_int_equal(json_array_size(up), 0);
    assert_int_equal(json_array_size(down), 1);
    json_decref(up);
    json_decref(down);
    sh("ip tuntap add " TAP1 " mode tap");
    assert_int_equal(na_l2_sync(a, &ctx, s1), 0); /* put on its bridge, up */
    char master[32];
    assert_int_equal(na_dev_master(TAP1, master, sizeof(master)), 0);
    assert_string_equal(master, BR1);
    assert_int_equal(na_l2_devices(a, &ctx, s1, &up, &down), 0);
    assert_int_equal(json_array_size(up), 1);
    assert_string_equal(json_string_value(json_array_get(up, 0)),
                        "11111111-aaaa-4000-8000-000000000001");
    json_decref(up);
    json_decref(down);

    /* idempotent, and an MTU change follows */
    json_t *s2 = state_with("[{\"id\": \"net1\", \"bridge\": \"" BR1 "\", \"mtu\": 1400}]");
    assert_int_equal(na_l2_sync(a, &ctx, s2), 0);
    assert_int_equal(na_dev_mtu(BR1), 1400);

    /* the network leaves: kept while a guest's tap is on it, then removed;
     * the bridge that is not ours stays */
    json_t *s3 = state_with("[]");
    assert_int_equal(na_l2_sync(a, &ctx, s3), 0);
    assert_true(na_dev_exists(BR1));
    sh("ip link del " TAP1);
    assert_int_equal(na_l2_sync(a, &ctx, s3), 0);
    assert_false(na_dev_exists(BR1));
    assert_true(na_dev_exists(BR2));
    json_t *owned = na_owned(a, "bridge");
    assert_int_equal(json_array_size(owned), 0);
    json_decref(owned);
    assert_false(nb_ctx_failed(&ctx));

    /* nb_vif_plug: makes the bridge of a "bridge" VIF, ignores others */
    json_t *vif = json_pack("{s:s, s:s, s:{s:s, s:{s:i}}}", "id", "p1", "type", "bridge", "network",
                            "bridge", BR1, "meta", "mtu", 1480);
    assert_int_equal(nb_vif_plug(&ctx, vif), 0);
    assert_int_equal(na_dev_mtu(BR1), 1480);
    json_object_set_new(vif, "type", json_string("ovs"));
    json_object_set_new(json_object_get(vif, "network"), "bridge", json_string("brqntagent03"));
    assert_int_equal(nb_vif_plug(&ctx, vif), 0);
    assert_false(na_dev_exists("brqntagent03"));
    json_decref(vif);
    json_decref(s1);
    json_decref(s2);
    json_decref(s3);
    na_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run),
        cmocka_unit_test(test_run_netns),
        cmocka_unit_test(test_ownership),
        cmocka_unit_test(test_l2),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

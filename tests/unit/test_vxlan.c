/* test_vxlan.c - the pure part of the agent's VXLAN devices (network/agent/
 * vxlan.c): which devices a host state asks for, the peers read back from
 * `bridge fdb show`, and when an existing device must be recreated. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/json.h"
#include "network/agent/vxlan.h"

#include <stdlib.h>
#include <string.h>

static json_t *state(void)
{
    return nb_json_pack_text(
        "{\"host\": \"host1\", \"local_ip\": \"198.51.100.1\", \"networks\": ["
        "{\"id\": \"aaaaaaaa-1111\", \"mtu\": 1450, \"network_type\": \"vxlan\","
        " \"segmentation_id\": 1017, \"bridge\": \"brqaaaaaaaa-11\","
        " \"vxlan_peers\": [\"198.51.100.3\", \"198.51.100.2\", \"198.51.100.1\","
        " \"198.51.100.2\", \"\"]},"
        "{\"id\": \"bbbbbbbb-2222\", \"mtu\": 1450, \"network_type\": \"vxlan\","
        " \"segmentation_id\": 1018, \"bridge\": \"brqbbbbbbbb-22\", \"vxlan_peers\": []},"
        "{\"id\": \"cccccccc-3333\", \"mtu\": 1500, \"network_type\": \"flat\","
        " \"segmentation_id\": null, \"bridge\": \"brqcccccccc-33\","
        " \"vxlan_peers\": [\"198.51.100.2\"]},"
        "{\"id\": \"dddddddd-4444\", \"mtu\": 1400, \"network_type\": \"vxlan\","
        " \"segmentation_id\": 7, \"bridge\": \"brqdddddddd-44\","
        " \"vxlan_peers\": [\"198.51.100.9\"]},"
        "{\"id\": \"eeeeeeee-5555\", \"network_type\": \"vxlan\", \"segmentation_id\": null,"
        " \"bridge\": \"brqeeeeeeee-55\", \"vxlan_peers\": [\"198.51.100.9\"]}]}");
}

/* A vxlan network with peers gets one device named after its VNI, on its
 * bridge, with its MTU; its peers sorted, deduplicated, without the host's
 * own address. No peers, not vxlan, or no VNI: no device. */
static void test_plan(void **st)
{
    (void)st;
    json_t *s = state();
    json_t *plan = na_vxlan_plan(s);
    assert_int_equal(json_array_size(plan), 2);
    json_t *a = json_array_get(plan, 0), *d = json_array_get(plan, 1);
    assert_string_equal(nb_json_str(a, "dev"), "vxlan-1017");
    assert_int_equal(nb_json_int(a, "vni", 0), 1017);
    assert_string_equal(nb_json_str(a, "bridge"), "brqaaaaaaaa-11");
    assert_string_equal(nb_json_str(a, "network_id"), "aaaaaaaa-1111");
    assert_string_equal(nb_json_str(a, "local_ip"), "198.51.100.1");
    assert_int_equal(nb_json_int(a, "mtu", 0), 1450);
    char *peers = nb_json_dump(json_object_get(a, "peers"));
    assert_string_equal(peers, "[\"198.51.100.2\",\"198.51.100.3\"]");
    free(peers);
    assert_string_equal(nb_json_str(d, "dev"), "vxlan-7");
    assert_int_equal(nb_json_int(d, "mtu", 0), 1400);
    json_decref(plan);
    /* a VNI out of range is not a device */
    json_object_set_new(json_array_get(json_object_get(s, "networks"), 3), "segmentation_id",
                        json_integer(16777216));
    plan = na_vxlan_plan(s);
    assert_int_equal(json_array_size(plan), 1);
    json_decref(plan);
    /* nothing at all: an empty plan, not NULL */
    json_t *empty = json_object();
    plan = na_vxlan_plan(empty);
    assert_non_null(plan);
    assert_int_equal(json_array_size(plan), 0);
    json_decref(plan);
    json_decref(empty);
    json_decref(s);
}

/* The peers are the dst of the all-zero entries; learned MACs and other
 * entries are not peers; a repeated dst counts once. */
static void test_fdb_peers(void **st)
{
    (void)st;
    const char *text = "00:00:00:00:00:00 dst 198.51.100.2 self permanent\n"
                       "fa:16:3e:11:22:33 dst 198.51.100.2 self\n"
                       "00:00:00:00:00:00 dst 198.51.100.3 self permanent\n"
                       "33:33:00:00:00:01 self permanent\n"
                       "00:00:00:00:00:00 dst 198.51.100.2 self permanent";
    json_t *p = na_vxlan_fdb_peers(text);
    char *d = nb_json_dump(p);
    assert_string_equal(d, "[\"198.51.100.2\",\"198.51.100.3\"]");
    free(d);
    json_decref(p);
    p = na_vxlan_fdb_peers("");
    assert_int_equal(json_array_size(p), 0);
    json_decref(p);
    p = na_vxlan_fdb_peers(NULL);
    assert_int_equal(json_array_size(p), 0);
    json_decref(p);
}

/* An existing device is kept only with the wanted VNI, local address,
 * port 4789 and learning off (as `ip -d -j link show` prints it). */
static void test_link_matches(void **st)
{
    (void)st;
    json_t *want = nb_json_pack_text("{\"dev\": \"vxlan-7\", \"vni\": 7, \"local_ip\": "
                                     "\"203.0.113.81\"}");
    json_t *link = nb_json_pack_text(
        "{\"ifname\": \"vxlan-7\", \"mtu\": 1500, \"linkinfo\": {\"info_kind\": \"vxlan\","
        " \"info_data\": {\"id\": 7, \"local\": \"203.0.113.81\", \"port\": 4789,"
        " \"learning\": false, \"ttl\": 0}}}");
    assert_true(na_vxlan_link_matches(link, want));
    json_t *data = json_object_get(json_object_get(link, "linkinfo"), "info_data");
    json_object_set_new(data, "learning", json_true());
    assert_false(na_vxlan_link_matches(link, want));
    json_object_set_new(data, "learning", json_false());
    json_object_set_new(data, "port", json_integer(8472));
    assert_false(na_vxlan_link_matches(link, want));
    json_object_set_new(data, "port", json_integer(4789));
    json_object_set_new(data, "local", json_string("203.0.113.82"));
    assert_false(na_vxlan_link_matches(link, want));
    json_object_set_new(data, "local", json_string("203.0.113.81"));
    json_object_set_new(data, "id", json_integer(8));
    assert_false(na_vxlan_link_matches(link, want));
    json_object_set_new(data, "id", json_integer(7));
    assert_true(na_vxlan_link_matches(link, want));
    json_object_set_new(json_object_get(link, "linkinfo"), "info_kind", json_string("bridge"));
    assert_false(na_vxlan_link_matches(link, want));
    json_decref(link);
    json_decref(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_fdb_peers),
        cmocka_unit_test(test_link_matches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

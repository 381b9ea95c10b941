/* test_netctl.c - unit tests of the data plane's control side: the ML2
 * type drivers' pure parts (range lists, lowest free id, MTU by type), the
 * scheduler's choice, and, on a real database with the in-process bus, the
 * q-plugin RPC as an agent uses it: report_state makes the agent alive, the
 * host's DHCP port is scheduled, a compute port on that host is bound
 * "bridge" and DOWN, get_host_state answers the contract's shape,
 * update_device_list moves statuses, and a dead agent makes the binding
 * fail with Nova's message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "bus/bus.h"
#include "common/config.h"
#include "common/ctx.h"
#include "common/env.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "network/ml2_int.h"
#include "network/network.h"
#include "network/network_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/nubo-test-netctl-XXXXXX";
static struct nb_env env;

static void admin_ctx(struct nb_ctx *ctx)
{
    nb_ctx_init_system(ctx, NULL);
    nb_strlcpy(ctx->project_id, "proj-admin", sizeof(ctx->project_id));
}

/* --- pure parts ----------------------------------------------------------- */

static void test_ranges(void **state)
{
    (void)state;
    struct nb_id_range r[4];
    assert_int_equal(nb_ml2_parse_ranges("1:1000", 1, 16777215, r, 4), 1);
    assert_int_equal(r[0].min, 1);
    assert_int_equal(r[0].max, 1000);
    assert_int_equal(nb_ml2_parse_ranges("5:6, 10:20", 1, 4094, r, 4), 2);
    assert_int_equal(r[1].min, 10);
    assert_int_equal(nb_ml2_parse_ranges("", 1, 10, r, 4), 0);
    assert_int_equal(nb_ml2_parse_ranges("3:2", 1, 10, r, 4), -1);
    assert_int_equal(nb_ml2_parse_ranges("0:5", 1, 10, r, 4), -1);
    assert_int_equal(nb_ml2_parse_ranges("1-5", 1, 10, r, 4), -1);
    assert_int_equal(nb_ml2_parse_ranges("1:5x", 1, 10, r, 4), -1);

    long long used[] = {1, 2, 4, 5, 6};
    nb_ml2_parse_ranges("1:6,10:11", 1, 100, r, 4);
    assert_int_equal(nb_ml2_first_free(r, 2, used, 5), 3);
    long long used2[] = {1, 2, 3, 4, 5, 6, 10};
    assert_int_equal(nb_ml2_first_free(r, 2, used2, 7), 11);
    long long used3[] = {1, 2, 3, 4, 5, 6, 10, 11};
    assert_int_equal(nb_ml2_first_free(r, 2, used3, 8), -1);
    assert_int_equal(nb_ml2_first_free(r, 2, NULL, 0), 1);
}

static void test_mtu_and_lists(void **state)
{
    (void)state;
    assert_int_equal(nb_ml2_type_mtu("vxlan", 1500), 1450);
    assert_int_equal(nb_ml2_type_mtu("vxlan", 9000), 8950);
    assert_int_equal(nb_ml2_type_mtu("flat", 1500), 1500);
    assert_int_equal(nb_ml2_type_mtu("vlan", 1400), 1400);
    assert_int_equal(nb_ml2_type_mtu("gre", 1500), 0);
    assert_true(nb_ml2_in_list("*", "anything"));
    assert_true(nb_ml2_in_list("public, physnet2", "physnet2"));
    assert_false(nb_ml2_in_list("public,physnet2", "physnet"));
    assert_false(nb_ml2_in_list("", "public"));
}

static void test_sched_pick(void **state)
{
    (void)state;
    json_t *c = json_pack("[{s:s, s:s, s:i}, {s:s, s:s, s:i}, {s:s, s:s, s:i}]", "id", "a", "host",
                          "hz", "load", 1, "id", "b", "host", "hb", "load", 2, "id", "c", "host",
                          "ha", "load", 1);
    assert_string_equal(nb_json_str(nb_sched_pick(c, NULL), "id"), "c"); /* tie: host name */
    assert_string_equal(nb_json_str(nb_sched_pick(c, "b"), "id"), "b");  /* kept */
    assert_string_equal(nb_json_str(nb_sched_pick(c, "gone"), "id"), "c");
    json_t *none = json_array();
    assert_null(nb_sched_pick(none, "a"));
    json_decref(none);
    json_decref(c);
}

/* --- segments on the database ------------------------------------------------- */

static json_t *make_net(struct nb_ctx *ctx, json_t *body)
{
    json_t *v = nb_net_network_create(ctx, body);
    json_decref(body);
    return v;
}

static long long seg_id(const json_t *net)
{
    return json_integer_value(json_object_get(net, "provider:segmentation_id"));
}

static void test_segments(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    nb_conf_set("ml2_type_vxlan", "vni_ranges", "100:102");
    json_t *a = make_net(&ctx, json_pack("{s:s}", "name", "a"));
    json_t *b = make_net(&ctx, json_pack("{s:s}", "name", "b"));
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(nb_json_str(a, "provider:network_type"), "vxlan");
    assert_int_equal(seg_id(a), 100);
    assert_int_equal(seg_id(b), 101);
    assert_int_equal(nb_json_int(a, "mtu", 0), 1450);
    assert_true(json_is_null(json_object_get(a, "provider:physical_network")));

    /* the lowest free VNI is taken again once its network is gone */
    nb_db_exec(env.db, &ctx, "DELETE FROM networks WHERE id = ?", "s", nb_json_str(a, "id"));
    json_t *c = make_net(&ctx, json_pack("{s:s}", "name", "c"));
    assert_int_equal(seg_id(c), 100);
    json_t *d = make_net(&ctx, json_pack("{s:s}", "name", "d"));
    assert_int_equal(seg_id(d), 102);
    json_t *e = make_net(&ctx, json_pack("{s:s}", "name", "e"));
    assert_null(e);
    assert_int_equal(nb_ctx_status(&ctx), 503);
    assert_string_equal(nb_ctx_error_name(&ctx), "NoNetworkAvailable");
    nb_ctx_clear_error(&ctx);
    nb_conf_set("ml2_type_vxlan", "vni_ranges", "1:1000");

    /* a requested mtu above what vxlan allows */
    assert_null(make_net(&ctx, json_pack("{s:s, s:i}", "name", "big", "mtu", 1500)));
    assert_int_equal(nb_ctx_status(&ctx), 400);
    assert_non_null(strstr(nb_ctx_message(&ctx), "Requested MTU is too big, maximum is 1450"));
    nb_ctx_clear_error(&ctx);

    /* flat, one network per physical network, full MTU */
    json_t *f = make_net(&ctx, json_pack("{s:s, s:s, s:s}", "name", "f", "provider:network_type",
                                         "flat", "provider:physical_network", "physnet-t"));
    assert_non_null(f);
    assert_int_equal(nb_json_int(f, "mtu", 0), 1500);
    assert_null(make_net(&ctx, json_pack("{s:s, s:s, s:s}", "name", "f2", "provider:network_type",
                                         "flat", "provider:physical_network", "physnet-t")));
    assert_int_equal(nb_ctx_status(&ctx), 409);
    nb_ctx_clear_error(&ctx);

    /* a chosen VNI in use; an unknown type */
    assert_null(make_net(&ctx, json_pack("{s:s, s:s, s:i}", "name", "x", "provider:network_type",
                                         "vxlan", "provider:segmentation_id", 101)));
    assert_string_equal(nb_ctx_error_name(&ctx), "TunnelIdInUse");
    nb_ctx_clear_error(&ctx);
    assert_null(
        make_net(&ctx, json_pack("{s:s, s:s}", "name", "x", "provider:network_type", "gre")));
    assert_string_equal(nb_ctx_message(&ctx),
                        "Invalid input for operation: network_type value 'gre' not supported.");
    nb_ctx_clear_error(&ctx);

    /* a member may not set provider attributes and does not see them */
    struct nb_ctx user;
    nb_ctx_init(&user);
    nb_strlcpy(user.project_id, "proj-user", sizeof(user.project_id));
    user.is_member = user.is_reader = true;
    assert_null(
        make_net(&user, json_pack("{s:s, s:s}", "name", "u", "provider:network_type", "vxlan")));
    assert_int_equal(nb_ctx_status(&user), 403);
    nb_ctx_clear_error(&user);
    json_t *u = make_net(&user, json_pack("{s:s}", "name", "u"));
    assert_non_null(u);
    assert_null(json_object_get(u, "provider:network_type"));
    json_decref(u);
    json_decref(a), json_decref(b), json_decref(c), json_decref(d), json_decref(f);
}

static void test_vlan_segments(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    nb_conf_set("ml2_type_vlan", "network_vlan_ranges", "physnet-bare,physnet-v:10:11");
    nb_conf_set("ml2", "tenant_network_types", "vlan");
    json_t *a = make_net(&ctx, json_pack("{s:s}", "name", "va"));
    json_t *b = make_net(&ctx, json_pack("{s:s, s:s, s:s}", "name", "vb", "provider:network_type",
                                         "vlan", "provider:physical_network", "physnet-v"));
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(nb_json_str(a, "provider:network_type"), "vlan");
    assert_string_equal(nb_json_str(a, "provider:physical_network"), "physnet-v");
    assert_int_equal(seg_id(a), 10);
    assert_int_equal(seg_id(b), 11);
    assert_int_equal(nb_json_int(a, "mtu", 0), 1500);
    assert_null(make_net(&ctx, json_pack("{s:s}", "name", "vc")));
    assert_string_equal(nb_ctx_error_name(&ctx), "NoNetworkAvailable");
    nb_ctx_clear_error(&ctx);
    /* a provider VLAN on a bare physical network; one in use; out of range */
    json_t *c =
        make_net(&ctx, json_pack("{s:s, s:s, s:s, s:i}", "name", "vd", "provider:network_type",
                                 "vlan", "provider:physical_network", "physnet-bare",
                                 "provider:segmentation_id", 42));
    assert_non_null(c);
    assert_int_equal(seg_id(c), 42);
    assert_null(
        make_net(&ctx, json_pack("{s:s, s:s, s:s, s:i}", "name", "ve", "provider:network_type",
                                 "vlan", "provider:physical_network", "physnet-bare",
                                 "provider:segmentation_id", 42)));
    assert_string_equal(nb_ctx_error_name(&ctx), "VlanIdInUse");
    nb_ctx_clear_error(&ctx);
    assert_null(
        make_net(&ctx, json_pack("{s:s, s:s, s:s, s:i}", "name", "vf", "provider:network_type",
                                 "vlan", "provider:physical_network", "physnet-bare",
                                 "provider:segmentation_id", 4095)));
    assert_int_equal(nb_ctx_status(&ctx), 400);
    nb_ctx_clear_error(&ctx);
    nb_conf_set("ml2", "tenant_network_types", "vxlan");
    json_decref(a), json_decref(b), json_decref(c);
}

/* --- the agents' RPC ----------------------------------------------------------- */

static void report_on(const char *host, const char *type, const char *binary, bool start)
{
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    json_t *agent =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:b, s:{s:s, s:[s]}}", "host", host, "binary", binary,
                  "agent_type", type, "topic", "N/A", "availability_zone", "nova", "start_flag",
                  start, "configurations", "local_ip", "192.0.2.11", "tunnel_types", "vxlan");
    assert_int_equal(
        nb_bus_cast(&ctx, "q-plugin", "report_state", json_pack("{s:o}", "agent", agent)), 0);
}

static void report(const char *type, const char *binary, bool start)
{
    report_on("h1", type, binary, start);
}

static json_t *call(const char *method, json_t *args)
{
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    json_t *r = nb_bus_call(&ctx, "q-plugin", method, args, 10000);
    assert_non_null(r);
    return r;
}

static void wait_agents_on(const char *host, int n)
{
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    for (int i = 0; i < 200; i++) {
        if (nb_db_int(env.db, &ctx, 0, "SELECT COUNT(*) FROM agents WHERE host = ?", "s", host) ==
            n)
            return;
        usleep(20000);
    }
    fail_msg("the agents did not report");
}

static void wait_agents(int n)
{
    wait_agents_on("h1", n);
}

static json_t *port_row(const char *id)
{
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    return nb_db_row(env.db, &ctx, "SELECT * FROM ports WHERE id = ?", "s", id);
}

static void test_agent_rpc(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    report(NB_AGENT_LINUXBRIDGE, "neutron-linuxbridge-agent", true);
    report(NB_AGENT_DHCP, "neutron-dhcp-agent", true);
    wait_agents(2);
    json_t *lb = nb_agent_alive(&ctx, NB_AGENT_LINUXBRIDGE, "h1");
    assert_non_null(lb);
    json_decref(lb);

    json_t *net = make_net(&ctx, json_pack("{s:s, s:b}", "name", "rpcnet", "shared", 1));
    const char *net_id = nb_json_str(net, "id");
    json_t *sbody =
        json_pack("{s:s, s:s, s:i}", "network_id", net_id, "cidr", "10.9.0.0/24", "ip_version", 4);
    json_t *sub = nb_net_subnet_create(&ctx, sbody);
    json_decref(sbody);
    assert_non_null(sub);
    nb_net_notify(&ctx, "test"); /* schedules, then casts to h1 (nobody listens) */

    /* the DHCP port: on h1, bound bridge, first free address */
    json_t *dp = nb_db_row(env.db, &ctx,
                           "SELECT * FROM ports WHERE network_id = ? AND device_owner = "
                           "'network:dhcp'",
                           "s", net_id);
    assert_non_null(dp);
    assert_string_equal(nb_json_str(dp, "binding_host_id"), "h1");
    assert_string_equal(nb_json_str(dp, "binding_vif_type"), "bridge");
    assert_string_equal(nb_json_str(dp, "status"), "DOWN");
    assert_true(nb_startswith(nb_json_str(dp, "device_id"), "dhcp"));
    char tail[64];
    snprintf(tail, sizeof(tail), "-%s", net_id);
    assert_non_null(strstr(nb_json_str(dp, "device_id"), tail));

    /* a compute port on h1: linuxbridge binding, DOWN, a bridge VIF */
    json_t *req = json_pack("[{s:s}]", "uuid", net_id), *nw = NULL;
    assert_int_equal(nb_network_allocate_for_instance(&ctx, "inst-rpc-1", "h1", "nova", req, &nw),
                     0);
    json_t *vif = json_array_get(nw, 0);
    assert_string_equal(nb_json_str(vif, "type"), "bridge");
    char brq[32];
    snprintf(brq, sizeof(brq), "brq%.11s", net_id);
    assert_string_equal(nb_json_str(json_object_get(vif, "network"), "bridge"), brq);
    const char *port_id = nb_json_str(vif, "id");
    json_t *row = port_row(port_id);
    assert_string_equal(nb_json_str(row, "status"), "DOWN");
    json_decref(row);

    /* the host's state */
    json_t *st = call("get_host_state", json_pack("{s:s}", "host", "h1"));
    assert_string_equal(nb_json_str(st, "local_ip"), "192.0.2.11");
    json_t *ports = json_object_get(st, "ports"), *nets = json_object_get(st, "networks");
    assert_int_equal(json_array_size(ports), 1);
    assert_string_equal(nb_json_str(json_array_get(ports, 0), "id"), port_id);
    assert_int_equal(json_array_size(nets), 1);
    json_t *n0 = json_array_get(nets, 0);
    assert_string_equal(nb_json_str(n0, "network_type"), "vxlan");
    assert_string_equal(nb_json_str(n0, "bridge"), brq);
    json_t *dhcp = json_object_get(n0, "dhcp");
    assert_true(json_is_object(dhcp));
    assert_string_equal(nb_json_str(dhcp, "port_id"), nb_json_str(dp, "id"));
    json_t *dh = json_object_get(n0, "dhcp_hosts");
    assert_int_equal(json_array_size(dh), 1);
    assert_string_equal(nb_json_str(json_array_get(dh, 0), "port_id"), port_id);
    assert_string_equal(nb_json_str(json_array_get(dh, 0), "device_id"), "inst-rpc-1");
    assert_string_equal(nb_json_str(json_array_get(dh, 0), "hostname"), "host-10-9-0-3");
    assert_true(json_is_array(json_object_get(st, "security_groups")));
    assert_true(json_is_array(json_object_get(st, "routers")));
    json_decref(st);

    /* statuses */
    json_t *r =
        call("update_device_list", json_pack("{s:s, s:[s], s:[], s:[]}", "host", "h1", "devices_up",
                                             port_id, "devices_down", "devices_failed"));
    assert_int_equal(json_array_size(json_object_get(r, "devices_up")), 1);
    json_decref(r);
    row = port_row(port_id);
    assert_string_equal(nb_json_str(row, "status"), "ACTIVE");
    json_decref(row);
    r = call("update_device_list", json_pack("{s:s, s:[], s:[], s:[{s:s, s:s}]}", "host", "h1",
                                             "devices_up", "devices_down", "devices_failed",
                                             "port_id", port_id, "reason", "tap missing"));
    json_decref(r);
    row = port_row(port_id);
    assert_string_equal(nb_json_str(row, "status"), "ERROR");
    assert_string_equal(nb_json_str(row, "status_reason"), "tap missing");
    json_decref(row);
    /* another host may not change it */
    r = call("update_device_list", json_pack("{s:s, s:[s], s:[], s:[]}", "host", "h2", "devices_up",
                                             port_id, "devices_down", "devices_failed"));
    assert_int_equal(json_array_size(json_object_get(r, "devices_up")), 0);
    json_decref(r);

    /* the agent dies: binding fails as Nova says */
    nb_db_exec(env.db, &ctx, "UPDATE agents SET heartbeat_timestamp = '2000-01-01 00:00:00'", "");
    json_decref(nw);
    nw = NULL;
    assert_int_equal(nb_network_allocate_for_instance(&ctx, "inst-rpc-2", "h1", "nova", req, &nw),
                     -1);
    assert_non_null(strstr(nb_ctx_message(&ctx), "Binding failed for port "));
    assert_non_null(
        strstr(nb_ctx_message(&ctx), "please check neutron logs for more information."));
    nb_ctx_clear_error(&ctx);
    json_decref(req);
    json_decref(dp);
    json_decref(sub);
    json_decref(net);
}

/* h1's agents are dead (test_agent_rpc left them so): a DHCP agent that
 * reports from h2 takes the networks over, their DHCP ports move to h2. */
static void test_dhcp_failover(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    report_on("h2", NB_AGENT_DHCP, "neutron-dhcp-agent", true);
    wait_agents_on("h2", 1);
    json_t *r = NULL;
    for (int i = 0; i < 200; i++) { /* the report's scheduling runs in a bus worker */
        json_decref(r);
        r = nb_db_row(env.db, &ctx,
                      "SELECT a.host FROM networkdhcpagentbindings b JOIN agents a ON a.id = "
                      "b.dhcp_agent_id JOIN networks n ON n.id = b.network_id WHERE n.name = "
                      "'rpcnet'",
                      "");
        if (r && !strcmp(nb_json_str(r, "host"), "h2"))
            break;
        usleep(20000);
    }
    assert_non_null(r);
    assert_string_equal(nb_json_str(r, "host"), "h2");
    json_decref(r);
    r = NULL;
    for (int i = 0; i < 200; i++) { /* the port moves after the binding, in the same worker */
        json_decref(r);
        r = nb_db_row(env.db, &ctx,
                      "SELECT p.binding_host_id, COUNT(*) AS n FROM ports p JOIN networks n ON "
                      "n.id = p.network_id WHERE n.name = 'rpcnet' AND p.device_owner = "
                      "'network:dhcp'",
                      "");
        if (r && nb_json_str(r, "binding_host_id") &&
            !strcmp(nb_json_str(r, "binding_host_id"), "h2"))
            break;
        usleep(20000);
    }
    assert_non_null(r);
    assert_string_equal(nb_json_str(r, "binding_host_id"), "h2");
    assert_int_equal(nb_json_int(r, "n", 0), 1);
    json_decref(r);
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    char path[512];
    snprintf(path, sizeof(path), "%s/nubo.sqlite", dir);
    env.db = nb_db_open(path);
    if (!env.db || nb_db_sync(env.db) < 0)
        return -1;
    env.state_path = dir;
    env.region = "RegionTest";
    env.my_host = "test";
    nb_conf_set("bus", "transport", "inproc");
    if (nb_bus_init() < 0 || nb_network_init(&env) < 0)
        return -1;
    return nb_network_rpc_start(&env);
}

static int teardown(void **state)
{
    (void)state;
    nb_bus_shutdown();
    nb_db_close(env.db);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ranges),        cmocka_unit_test(test_mtu_and_lists),
        cmocka_unit_test(test_sched_pick),    cmocka_unit_test(test_segments),
        cmocka_unit_test(test_vlan_segments), cmocka_unit_test(test_agent_rpc),
        cmocka_unit_test(test_dhcp_failover),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* test_l3_state.c - the control side of the L3 agents (network/l3_state.c,
 * floatingips.c), on a real database: the "routers" of a host's state
 * (legs with their devices, bridges, prefix lengths and the external
 * subnet's gateway, routes, associated floating IPs), the choice of one
 * L3 host per router, and the floating IP statuses an agent reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/ctx.h"
#include "common/env.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "network/floatingips.h"
#include "network/network.h"
#include "network/network_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[] = "/tmp/nubo-test-l3-XXXXXX";
static struct nb_env env;

static void admin_ctx(struct nb_ctx *ctx)
{
    nb_ctx_init_system(ctx, NULL);
    nb_strlcpy(ctx->project_id, "p1", sizeof(ctx->project_id));
}

static char *make(json_t *(*fn)(struct nb_ctx *, json_t *), json_t *body)
{
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    json_t *v = fn(&ctx, body);
    if (!v)
        fprintf(stderr, "create: %s\n", nb_ctx_message(&ctx));
    assert_non_null(v);
    char *id = strdup(nb_json_str(v, "id"));
    json_decref(v);
    json_decref(body);
    return id;
}

static void sql(const char *q, const char *types, const char *a, const char *b, const char *c)
{
    struct nb_ctx ctx;
    admin_ctx(&ctx);
    int n = types[1] ? (types[2] ? nb_db_exec(env.db, &ctx, q, types, a, b, c)
                                 : nb_db_exec(env.db, &ctx, q, types, a, b))
                     : nb_db_exec(env.db, &ctx, q, types, a);
    assert_true(n >= 0);
}

/* A router with an interface on 10.60.0.0/24 and a gateway on an external
 * 203.0.113.48/28, a floating IP associated with a port of the inside,
 * another not associated. */
static void test_router_state(void **st)
{
    (void)st;
    char *ext =
        make(nb_net_network_create, json_pack("{s:s, s:b}", "name", "ext", "router:external", 1));
    char *ext_sub = make(nb_net_subnet_create, json_pack("{s:s, s:s, s:i, s:s}", "network_id", ext,
                                                         "cidr", "203.0.113.48/28", "ip_version", 4,
                                                         "gateway_ip", "203.0.113.49"));
    char *in = make(nb_net_network_create, json_pack("{s:s}", "name", "in"));
    char *in_sub = make(nb_net_subnet_create, json_pack("{s:s, s:s, s:i}", "network_id", in, "cidr",
                                                        "10.60.0.0/24", "ip_version", 4));
    char *gw = make(nb_net_port_create,
                    json_pack("{s:s, s:s, s:s, s:s, s:[]}", "network_id", ext, "device_id", "r1",
                              "device_owner", "network:router_gateway", "tenant_id", "",
                              "security_groups"));
    char *intf =
        make(nb_net_port_create,
             json_pack("{s:s, s:[{s:s, s:s}], s:s, s:s, s:[]}", "network_id", in, "fixed_ips",
                       "subnet_id", in_sub, "ip_address", "10.60.0.1", "device_id", "r1",
                       "device_owner", "network:router_interface", "security_groups"));
    char *vm = make(nb_net_port_create,
                    json_pack("{s:s, s:[{s:s, s:s}], s:s, s:[]}", "network_id", in, "fixed_ips",
                              "subnet_id", in_sub, "ip_address", "10.60.0.7", "device_owner",
                              "compute:nova", "security_groups"));
    char *fport = make(nb_net_port_create,
                       json_pack("{s:s, s:[{s:s}], s:s, s:s, s:[]}", "network_id", ext, "fixed_ips",
                                 "ip_address", "203.0.113.55", "device_owner", "network:floatingip",
                                 "tenant_id", "", "security_groups"));
    sql("INSERT INTO routers (id, project_id, name, gw_network_id, gw_port_id, enable_snat) "
        "VALUES ('r1', 'p1', 'r', ?, ?, 0)",
        "ss", ext, gw, NULL);
    sql("INSERT INTO routerports (router_id, port_id, port_type) VALUES ('r1', ?, "
        "'network:router_gateway')",
        "s", gw, NULL, NULL);
    sql("INSERT INTO routerports (router_id, port_id, port_type) VALUES ('r1', ?, "
        "'network:router_interface')",
        "s", intf, NULL, NULL);
    sql("INSERT INTO routerroutes (router_id, destination, nexthop) VALUES (?, ?, ?)", "sss", "r1",
        "10.61.0.0/24", "10.60.0.9");
    sql("INSERT INTO floatingips (id, project_id, floating_ip_address, floating_network_id, "
        "floating_port_id, fixed_port_id, fixed_ip_address, router_id) VALUES ('f1', 'p1', "
        "'203.0.113.55', ?, ?, ?, '10.60.0.7', 'r1')",
        "sss", ext, fport, vm);

    struct nb_ctx ctx;
    admin_ctx(&ctx);
    json_t *routers = nb_net_l3_host_routers(&ctx, "h1", NULL);
    assert_non_null(routers);
    assert_int_equal(json_array_size(routers), 1);
    json_t *r = json_array_get(routers, 0);
    assert_string_equal(nb_json_str(r, "namespace"), "qrouter-r1");
    assert_true(json_is_false(json_object_get(r, "enable_snat")));
    json_t *g = json_object_get(r, "gateway");
    char want[40];
    snprintf(want, sizeof(want), "qg-%.11s", gw);
    assert_string_equal(nb_json_str(g, "dev"), want);
    snprintf(want, sizeof(want), "brq%.11s", ext);
    assert_string_equal(nb_json_str(g, "bridge"), want);
    assert_string_equal(nb_json_str(g, "gateway_ip"), "203.0.113.49");
    json_t *gip = json_array_get(json_object_get(g, "fixed_ips"), 0);
    assert_string_equal(nb_json_str(gip, "subnet_id"), ext_sub);
    assert_int_equal(nb_json_int(gip, "prefixlen", 0), 28);
    json_t *i0 = json_array_get(json_object_get(r, "interfaces"), 0);
    snprintf(want, sizeof(want), "qr-%.11s", intf);
    assert_string_equal(nb_json_str(i0, "dev"), want);
    snprintf(want, sizeof(want), "tap%.11s", intf);
    assert_string_equal(nb_json_str(i0, "tap"), want);
    assert_int_equal(
        nb_json_int(json_array_get(json_object_get(i0, "fixed_ips"), 0), "prefixlen", 0), 24);
    json_t *route = json_array_get(json_object_get(r, "routes"), 0);
    assert_string_equal(nb_json_str(route, "nexthop"), "10.60.0.9");
    json_t *fips = json_object_get(r, "floating_ips");
    assert_int_equal(json_array_size(fips), 1);
    json_t *f = json_array_get(fips, 0);
    assert_string_equal(nb_json_str(f, "floating_ip_address"), "203.0.113.55");
    assert_string_equal(nb_json_str(f, "fixed_ip_address"), "10.60.0.7");
    assert_string_equal(nb_json_str(f, "port_id"), vm);
    assert_string_equal(nb_json_str(f, "status"), "DOWN");
    json_decref(routers);

    /* one of two L3 hosts has it, the same one whatever the list's order */
    json_t *hosts = json_pack("[s, s]", "h1", "h2"), *rev = json_pack("[s, s]", "h2", "h1");
    json_t *a1 = nb_net_l3_host_routers(&ctx, "h1", hosts),
           *a2 = nb_net_l3_host_routers(&ctx, "h2", hosts),
           *b1 = nb_net_l3_host_routers(&ctx, "h1", rev);
    assert_int_equal(json_array_size(a1) + json_array_size(a2), 1);
    assert_int_equal(json_array_size(a1), json_array_size(b1));
    json_decref(a1);
    json_decref(a2);
    json_decref(b1);
    json_decref(hosts);
    json_decref(rev);

    /* the agent's report: ACTIVE; a bad status or another router's is ignored */
    json_t *args = json_pack("{s:s, s:{s:s, s:s}}", "router_id", "r1", "statuses", "f1", "ACTIVE",
                             "f9", "BOGUS");
    json_t *reply =
        nb_net_rpc_update_floatingip_statuses(NULL, &ctx, "update_floatingip_statuses", args);
    assert_int_equal(nb_json_int(reply, "updated", -1), 1);
    json_decref(reply);
    json_decref(args);
    args = json_pack("{s:s, s:{s:s}}", "router_id", "r2", "statuses", "f1", "ERROR");
    reply = nb_net_rpc_update_floatingip_statuses(NULL, &ctx, "update_floatingip_statuses", args);
    assert_int_equal(nb_json_int(reply, "updated", -1), 0);
    json_decref(reply);
    json_decref(args);
    assert_int_equal(
        nb_db_int(env.db, &ctx, 0, "SELECT COUNT(*) FROM floatingips WHERE status = 'ACTIVE'", ""),
        1);
    /* the associated port goes: the floating IP is disassociated and DOWN */
    assert_int_equal(nb_net_port_delete(&ctx, vm), 0);
    json_t *row = nb_db_row(env.db, &ctx, "SELECT * FROM floatingips WHERE id = 'f1'", "");
    assert_true(json_is_null(json_object_get(row, "fixed_port_id")));
    assert_true(json_is_null(json_object_get(row, "router_id")));
    assert_string_equal(nb_json_str(row, "last_known_router_id"), "r1");
    assert_string_equal(nb_json_str(row, "status"), "DOWN");
    json_decref(row);
    /* and the floating IP's port going takes the floating IP with it */
    assert_int_equal(nb_net_port_delete(&ctx, fport), 0);
    assert_int_equal(nb_db_int(env.db, &ctx, -1, "SELECT COUNT(*) FROM floatingips", ""), 0);
    free(ext);
    free(ext_sub);
    free(in);
    free(in_sub);
    free(gw);
    free(intf);
    free(vm);
    free(fport);
}

/* nb_net_quota_check: the [quotas] default, a project's own limit, -1. */
static void test_quota_check(void **st)
{
    (void)st;
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    nb_strlcpy(ctx.project_id, "pq", sizeof(ctx.project_id));
    assert_int_equal(nb_net_quota_check(&ctx, "pq", "router"), 0);
    sql("INSERT INTO neutron_quotas (id, project_id, resource, \"limit\") VALUES ('q1', ?, "
        "'router', 0)",
        "s", "pq", NULL, NULL);
    assert_int_equal(nb_net_quota_check(&ctx, "pq", "router"), -1);
    assert_int_equal(nb_ctx_status(&ctx), 409);
    assert_string_equal(nb_ctx_message(&ctx), "Quota exceeded for resources: ['router'].");
    nb_ctx_clear_error(&ctx);
    /* service ports (project "") are never limited */
    assert_int_equal(nb_net_quota_check(&ctx, "", "port"), 0);
    sql("UPDATE neutron_quotas SET \"limit\" = -1 WHERE project_id = ?", "s", "pq", NULL, NULL);
    assert_int_equal(nb_net_quota_check(&ctx, "pq", "router"), 0);
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
    return nb_network_init(&env);
}

static int teardown(void **state)
{
    (void)state;
    nb_db_close(env.db);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_router_state),
        cmocka_unit_test(test_quota_check),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

/* test_network.c - unit tests of the networking service: the IPAM address
 * math (parsing, default pools, pool checks, first free address, v4 and v6),
 * Neutron's validators and their messages, and, on a real database, port
 * IP allocation (pools, fixed IPs, exhaustion, concurrent allocators never
 * sharing an address) and the compute contract (allocate, network_info,
 * deallocate). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/ctx.h"
#include "common/env.h"
#include "common/json.h"
#include "common/util.h"
#include "db/db.h"
#include "network/network.h"
#include "network/network_int.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[] = "/tmp/nubo-test-network-XXXXXX";
static struct nb_env env;

static void admin_ctx(struct nb_ctx *ctx, const char *project)
{
    nb_ctx_init_system(ctx, NULL);
    nb_strlcpy(ctx->project_id, project, sizeof(ctx->project_id));
}

static void user_ctx(struct nb_ctx *ctx, const char *project)
{
    nb_ctx_init(ctx);
    nb_strlcpy(ctx->project_id, project, sizeof(ctx->project_id));
    ctx->is_member = ctx->is_reader = true;
}

/* --- address math ------------------------------------------------------------ */

static void test_ip_parse_format(void **state)
{
    (void)state;
    struct nb_ip ip;
    char out[64];
    assert_int_equal(nb_ip_parse("10.0.0.1", &ip), 0);
    assert_int_equal(ip.version, 4);
    assert_string_equal(nb_ip_format(&ip, out), "10.0.0.1");
    assert_int_equal(nb_ip_parse("2001:0db8:0:0::0001", &ip), 0);
    assert_int_equal(ip.version, 6);
    assert_string_equal(nb_ip_format(&ip, out), "2001:db8::1");
    assert_int_equal(nb_ip_parse("10.0.0.256", &ip), -1);
    assert_int_equal(nb_ip_parse("10.0.0", &ip), -1);
    assert_int_equal(nb_ip_parse("", &ip), -1);

    /* carry and borrow across bytes */
    nb_ip_parse("10.0.0.255", &ip);
    nb_ip_add(&ip, 1);
    assert_string_equal(nb_ip_format(&ip, out), "10.0.1.0");
    nb_ip_add(&ip, -2);
    assert_string_equal(nb_ip_format(&ip, out), "10.0.0.254");
    nb_ip_parse("::ffff:ffff", &ip);
    nb_ip_add(&ip, 1);
    assert_string_equal(nb_ip_format(&ip, out), "::1:0:0");
}

static void test_cidr(void **state)
{
    (void)state;
    struct nb_ip net, first, last, ip;
    int prefix;
    char a[64];
    assert_int_equal(nb_cidr_parse("10.1.2.0/24", &net, &prefix, true), 0);
    assert_int_equal(prefix, 24);
    assert_int_equal(nb_cidr_parse("10.1.2.3/24", &net, &prefix, true), -1);
    assert_int_equal(nb_cidr_parse("10.1.2.3/24", &net, &prefix, false), 0);
    assert_string_equal(nb_ip_format(&net, a), "10.1.2.0");
    assert_int_equal(nb_cidr_parse("10.1.2.0/33", &net, &prefix, false), -1);
    assert_int_equal(nb_cidr_parse("10.1.2.0", &net, &prefix, false), -1);
    assert_int_equal(nb_cidr_parse("10.1.2.0/x", &net, &prefix, false), -1);
    nb_cidr_parse("10.1.2.0/28", &net, &prefix, false);
    nb_cidr_bounds(&net, prefix, &first, &last);
    assert_string_equal(nb_ip_format(&last, a), "10.1.2.15");
    nb_ip_parse("10.1.2.15", &ip);
    assert_true(nb_ip_in_cidr(&ip, &net, prefix));
    nb_ip_parse("10.1.2.16", &ip);
    assert_false(nb_ip_in_cidr(&ip, &net, prefix));
    assert_int_equal(nb_cidr_parse("2001:db8::/64", &net, &prefix, true), 0);
    nb_cidr_bounds(&net, prefix, &first, &last);
    assert_string_equal(nb_ip_format(&last, a), "2001:db8::ffff:ffff:ffff:ffff");
}

static void assert_pools(const char *cidr, const char *gw, const char *expected)
{
    json_t *p = nb_ipam_default_pools(cidr, gw);
    assert_non_null(p);
    char *s = nb_json_dump(p);
    assert_string_equal(s, expected);
    free(s);
    json_decref(p);
}

/* neutron/ipam/utils.py generate_pools */
static void test_default_pools(void **state)
{
    (void)state;
    assert_pools("10.0.0.0/24", "10.0.0.1", "[{\"start\":\"10.0.0.2\",\"end\":\"10.0.0.254\"}]");
    assert_pools("10.0.0.0/24", NULL, "[{\"start\":\"10.0.0.1\",\"end\":\"10.0.0.254\"}]");
    assert_pools("10.0.0.0/24", "10.0.0.254", "[{\"start\":\"10.0.0.1\",\"end\":\"10.0.0.253\"}]");
    assert_pools("10.0.0.0/24", "10.0.0.100",
                 "[{\"start\":\"10.0.0.1\",\"end\":\"10.0.0.99\"},"
                 "{\"start\":\"10.0.0.101\",\"end\":\"10.0.0.254\"}]");
    /* a gateway outside the cidr takes nothing */
    assert_pools("10.0.0.0/24", "192.168.0.1", "[{\"start\":\"10.0.0.1\",\"end\":\"10.0.0.254\"}]");
    assert_pools("10.0.0.0/31", NULL, "[]");
    assert_pools("10.0.0.7/32", NULL, "[{\"start\":\"10.0.0.7\",\"end\":\"10.0.0.7\"}]");
    /* v6: only the subnet-router anycast address (and the gateway) is left out */
    assert_pools("2001:db8::/64", "2001:db8::1",
                 "[{\"start\":\"2001:db8::2\",\"end\":\"2001:db8::ffff:ffff:ffff:ffff\"}]");
    assert_null(nb_ipam_default_pools("10.0.0.0/40", NULL));
}

static json_t *pools(const char *text)
{
    json_t *p = nb_json_parse(text);
    assert_non_null(p);
    return p;
}

static void expect_pool_error(const char *cidr, const char *gw, const char *text, int status,
                              const char *type, const char *msg)
{
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    json_t *p = pools(text);
    assert_int_equal(nb_ipam_check_pools(&ctx, cidr, gw, p), -1);
    assert_int_equal(ctx.err_status, status);
    assert_string_equal(ctx.err_name, type);
    assert_string_equal(ctx.err_msg, msg);
    json_decref(p);
}

static void test_check_pools(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    json_t *ok = pools("[{\"start\":\"10.0.0.10\",\"end\":\"10.0.0.20\"},"
                       "{\"start\":\"10.0.0.30\",\"end\":\"10.0.0.254\"}]");
    assert_int_equal(nb_ipam_check_pools(&ctx, "10.0.0.0/24", "10.0.0.1", ok), 0);
    json_decref(ok);
    expect_pool_error("10.0.0.0/24", "10.0.0.1",
                      "[{\"start\":\"10.0.0.2\",\"end\":\"10.0.0.255\"}]", 400,
                      "OutOfBoundsAllocationPool",
                      "The allocation pool 10.0.0.2-10.0.0.255 spans beyond the subnet cidr "
                      "10.0.0.0/24.");
    expect_pool_error("10.0.0.0/24", "10.0.0.1", "[{\"start\":\"10.0.0.0\",\"end\":\"10.0.0.5\"}]",
                      400, "OutOfBoundsAllocationPool",
                      "The allocation pool 10.0.0.0-10.0.0.5 spans beyond the subnet cidr "
                      "10.0.0.0/24.");
    expect_pool_error("10.0.0.0/24", "10.0.0.1",
                      "[{\"start\":\"10.0.0.2\",\"end\":\"10.0.0.50\"},"
                      "{\"start\":\"10.0.0.40\",\"end\":\"10.0.0.60\"}]",
                      409, "OverlappingAllocationPools",
                      "Found overlapping allocation pools: 10.0.0.2-10.0.0.50 "
                      "10.0.0.40-10.0.0.60 for subnet 10.0.0.0/24.");
    expect_pool_error("10.0.0.0/24", "10.0.0.5", "[{\"start\":\"10.0.0.2\",\"end\":\"10.0.0.50\"}]",
                      409, "GatewayConflictWithAllocationPools",
                      "Gateway ip 10.0.0.5 conflicts with allocation pool 10.0.0.2-10.0.0.50.");
    expect_pool_error("10.0.0.0/24", NULL, "[{\"start\":\"10.0.0.9\",\"end\":\"10.0.0.3\"}]", 400,
                      "InvalidAllocationPool",
                      "The allocation pool {'start': '10.0.0.9', 'end': '10.0.0.3'} is not "
                      "valid.");
    expect_pool_error("10.0.0.0/24", NULL, "[{\"start\":\"2001:db8::2\",\"end\":\"2001:db8::3\"}]",
                      400, "InvalidAllocationPool",
                      "The allocation pool {'start': '2001:db8::2', 'end': '2001:db8::3'} is not "
                      "valid.");
}

static void test_first_free(void **state)
{
    (void)state;
    json_t *p = pools("[{\"start\":\"10.0.0.2\",\"end\":\"10.0.0.3\"},"
                      "{\"start\":\"10.0.0.9\",\"end\":\"10.0.0.9\"}]");
    json_t *used = json_array();
    char ip[64];
    const char *expected[] = {"10.0.0.2", "10.0.0.3", "10.0.0.9"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(nb_ipam_first_free(p, used, ip), 0);
        assert_string_equal(ip, expected[i]);
        json_array_append_new(used, json_string(ip));
    }
    /* exhausted */
    assert_int_equal(nb_ipam_first_free(p, used, ip), -1);
    /* a freed address is found again */
    json_array_remove(used, 1);
    assert_int_equal(nb_ipam_first_free(p, used, ip), 0);
    assert_string_equal(ip, "10.0.0.3");
    assert_true(nb_ipam_in_pools(p, "10.0.0.9"));
    assert_false(nb_ipam_in_pools(p, "10.0.0.5"));
    json_decref(used);
    json_decref(p);
}

/* --- validators -------------------------------------------------------------------- */

static void test_validators(void **state)
{
    (void)state;
    char buf[256];
    assert_null(nb_net_validate_mac("fa:16:3e:00:11:22", buf));
    assert_string_equal(nb_net_validate_mac("fa:16:3e:00:11", buf),
                        "'fa:16:3e:00:11' is not a valid MAC address");
    assert_non_null(nb_net_validate_mac("00:00:00:00:00:00", buf));
    assert_null(nb_net_validate_ip("2001:db8::1", buf));
    assert_string_equal(nb_net_validate_ip("1.2.3", buf), "'1.2.3' is not a valid IP address");
    assert_null(nb_net_validate_cidr("10.0.0.0/24", buf));
    assert_string_equal(nb_net_validate_cidr("10.0.0.1/24", buf),
                        "'10.0.0.1/24' isn't a recognized IP subnet cidr, '10.0.0.0/24' is "
                        "recommended");
    assert_string_equal(nb_net_validate_cidr("10.0.0.0/33", buf),
                        "'10.0.0.0/33' is not a valid IP subnet");
    assert_null(nb_net_validate_uuid("0b4c6a5e-2c64-4a5e-9a7e-6f0a8c1d2e3f", buf));
    assert_string_equal(nb_net_validate_uuid("abc", buf), "'abc' is not a valid UUID");
    json_t *v = json_integer(3);
    assert_string_equal(nb_net_validate_string(v, 255, buf), "'3' is not a valid string");
    json_decref(v);

    bool b;
    const char *yes[] = {"true", "True", "1", "yes", "on"}, *no[] = {"false", "False", "0", "no"};
    for (size_t i = 0; i < 5; i++) {
        json_t *s = json_string(yes[i]);
        assert_int_equal(nb_net_parse_bool(s, &b), 0);
        assert_true(b);
        json_decref(s);
    }
    for (size_t i = 0; i < 4; i++) {
        json_t *s = json_string(no[i]);
        assert_int_equal(nb_net_parse_bool(s, &b), 0);
        assert_false(b);
        json_decref(s);
    }
    json_t *s = json_string("maybe");
    assert_int_equal(nb_net_parse_bool(s, &b), -1);
    json_decref(s);
}

static void test_check_attrs(void **state)
{
    (void)state;
    static const struct nb_net_attr attrs[] = {
        {"name", NB_A_STR, true, true, false, false, 255},
        {"network_id", NB_A_UUID, true, false, true, false, 0},
        {"enabled", NB_A_BOOL, true, true, false, false, 0},
        {"cidr", NB_A_CIDR, true, false, false, false, 0},
        {NULL},
    };
    struct nb_ctx ctx;
    nb_ctx_init(&ctx);
    json_t *b = nb_json_parse("{\"network_id\":\"0b4c6a5e-2c64-4a5e-9a7e-6f0a8c1d2e3f\","
                              "\"enabled\":\"True\"}");
    assert_int_equal(nb_net_check_attrs(&ctx, b, attrs, true), 0);
    assert_true(json_is_true(json_object_get(b, "enabled"))); /* converted in place */
    json_decref(b);

    struct {
        const char *body, *msg;
        bool create;
    } cases[] = {
        {"{\"name\":\"x\"}",
         "Failed to parse request. Required attribute 'network_id' not specified", true},
        {"{\"network_id\":\"0b4c6a5e-2c64-4a5e-9a7e-6f0a8c1d2e3f\",\"bogus\":1}",
         "Unrecognized attribute(s) 'bogus'", true},
        {"{\"network_id\":\"x\"}", "Invalid input for network_id. Reason: 'x' is not a valid UUID.",
         true},
        {"{\"network_id\":\"0b4c6a5e-2c64-4a5e-9a7e-6f0a8c1d2e3f\",\"cidr\":\"10.0.0.0/99\"}",
         "Invalid input for cidr. Reason: '10.0.0.0/99' is not a valid IP subnet.", true},
        {"{\"cidr\":\"10.0.0.0/24\"}", "Cannot update read-only attribute cidr", false},
        {"{\"enabled\":\"perhaps\"}",
         "Invalid input for operation: 'perhaps' cannot be converted to boolean.", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        nb_ctx_init(&ctx);
        b = nb_json_parse(cases[i].body);
        assert_int_equal(nb_net_check_attrs(&ctx, b, attrs, cases[i].create), -1);
        assert_int_equal(ctx.err_status, 400);
        assert_string_equal(ctx.err_msg, cases[i].msg);
        json_decref(b);
    }
}

/* --- on a database ------------------------------------------------------------------ */

static const char *P1 = "p1p1p1p1p1p1p1p1p1p1p1p1p1p1p1p1";
/* projects of the compute-contract test, which must see no other network */
static const char *P3 = "p3p3p3p3p3p3p3p3p3p3p3p3p3p3p3p3",
                  *P4 = "p4p4p4p4p4p4p4p4p4p4p4p4p4p4p4p4",
                  *P5 = "p5p5p5p5p5p5p5p5p5p5p5p5p5p5p5p5",
                  *P6 = "p6p6p6p6p6p6p6p6p6p6p6p6p6p6p6p6";

/* A network with one subnet of cidr (pools: text or NULL). Writes ids. */
static void make_net(const char *project, bool shared, const char *cidr, const char *pools_text,
                     char *net_id, char *subnet_id)
{
    struct nb_ctx ctx;
    admin_ctx(&ctx, project);
    json_t *nb = json_pack("{s:s, s:b}", "name", "net", "shared", shared);
    json_t *net = nb_net_network_create(&ctx, nb);
    assert_non_null(net);
    nb_strlcpy(net_id, nb_json_str(net, "id"), NB_UUID_LEN);
    json_t *sb = json_pack("{s:s, s:s, s:i}", "network_id", net_id, "cidr", cidr, "ip_version",
                           strchr(cidr, ':') ? 6 : 4);
    if (pools_text)
        json_object_set_new(sb, "allocation_pools", nb_json_parse(pools_text));
    json_t *sub = nb_net_subnet_create(&ctx, sb);
    assert_non_null(sub);
    nb_strlcpy(subnet_id, nb_json_str(sub, "id"), NB_UUID_LEN);
    json_decref(nb);
    json_decref(net);
    json_decref(sb);
    json_decref(sub);
}

static json_t *port(struct nb_ctx *ctx, const char *net_id, const char *fixed_json)
{
    json_t *b = json_pack("{s:s}", "network_id", net_id);
    if (fixed_json)
        json_object_set_new(b, "fixed_ips", nb_json_parse(fixed_json));
    json_t *v = nb_net_port_create(ctx, b);
    json_decref(b);
    return v;
}

static const char *ip_of(const json_t *port_view)
{
    return nb_json_str(json_array_get(json_object_get(port_view, "fixed_ips"), 0), "ip_address");
}

static void test_allocation_and_exhaustion(void **state)
{
    (void)state;
    char net[NB_UUID_LEN], sub[NB_UUID_LEN];
    make_net(P1, false, "192.168.10.0/29", NULL, net, sub); /* pool .2-.6 */
    struct nb_ctx ctx;
    admin_ctx(&ctx, P1);
    const char *expected[] = {"192.168.10.2", "192.168.10.3", "192.168.10.4", "192.168.10.5",
                              "192.168.10.6"};
    json_t *first = NULL;
    for (int i = 0; i < 5; i++) {
        json_t *p = port(&ctx, net, NULL);
        assert_non_null(p);
        assert_string_equal(ip_of(p), expected[i]);
        assert_true(nb_startswith(nb_json_str(p, "mac_address"), "fa:16:3e:"));
        if (i == 0)
            first = p;
        else
            json_decref(p);
    }
    assert_null(port(&ctx, net, NULL));
    assert_int_equal(ctx.err_status, 409);
    assert_string_equal(ctx.err_name, "IpAddressGenerationFailure");
    char msg[200];
    snprintf(msg, sizeof(msg), "No more IP addresses available on network %s.", net);
    assert_string_equal(ctx.err_msg, msg);

    /* deleting a port frees its address for the next one */
    admin_ctx(&ctx, P1);
    assert_int_equal(nb_net_port_delete(&ctx, nb_json_str(first, "id")), 0);
    json_t *again = port(&ctx, net, NULL);
    assert_non_null(again);
    assert_string_equal(ip_of(again), "192.168.10.2");
    json_decref(again);
    json_decref(first);

    /* a fixed IP outside the pools is allowed; a taken one is 409 */
    char fixed[160];
    snprintf(fixed, sizeof(fixed), "[{\"subnet_id\":\"%s\",\"ip_address\":\"192.168.10.1\"}]", sub);
    /* .1 is the gateway here: Neutron lets the network's owner take it */
    json_t *p = port(&ctx, net, fixed);
    assert_non_null(p);
    json_decref(p);
    assert_null(port(&ctx, net, "[{\"ip_address\":\"192.168.10.3\"}]"));
    assert_int_equal(ctx.err_status, 409);
    snprintf(msg, sizeof(msg), "IP address 192.168.10.3 already allocated in subnet %s", sub);
    assert_string_equal(ctx.err_msg, msg);
    admin_ctx(&ctx, P1);
    assert_null(port(&ctx, net, "[{\"ip_address\":\"10.9.9.9\"}]"));
    assert_int_equal(ctx.err_status, 400);
    assert_string_equal(ctx.err_name, "InvalidIpForNetwork");
}

static void test_v6_subnet_and_port(void **state)
{
    (void)state;
    char net[NB_UUID_LEN], sub[NB_UUID_LEN];
    make_net(P1, false, "2001:db8:1::/64", NULL, net, sub);
    struct nb_ctx ctx;
    admin_ctx(&ctx, P1);
    json_t *p = port(&ctx, net, NULL);
    assert_non_null(p);
    assert_string_equal(ip_of(p), "2001:db8:1::2"); /* ::1 is the gateway */
    json_decref(p);
}

/* neutron_lib's get_ipv6_addr_by_EUI64: (prefix.first + eui64) ^ 1<<57 */
static void test_eui64(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(nb_ipam_eui64("2001:db8::/64", "00:16:3e:33:44:55", out), 0);
    assert_string_equal(out, "2001:db8::216:3eff:fe33:4455");
    assert_int_equal(nb_ipam_eui64("fd00:170:1::/64", "fa:16:3e:0a:0b:0c", out), 0);
    assert_string_equal(out, "fd00:170:1:0:f816:3eff:fe0a:b0c");
    assert_int_equal(nb_ipam_eui64("fd00:170:1::/64", "FA-16-3E-0A-0B-0C", out), 0);
    assert_string_equal(out, "fd00:170:1:0:f816:3eff:fe0a:b0c");
    /* a locally administered MAC loses the bit, a universal one gains it */
    assert_int_equal(nb_ipam_eui64("2001:db8:1:2::/64", "02:00:00:00:00:01", out), 0);
    assert_string_equal(out, "2001:db8:1:2:0:ff:fe00:1");
    assert_int_equal(nb_ipam_eui64("10.0.0.0/24", "00:16:3e:33:44:55", out), -1);
    assert_int_equal(nb_ipam_eui64("2001:db8::/64", "00:16:3e:33:44", out), -1);
    assert_int_equal(nb_ipam_eui64("2001:db8::/64", "00:16:3e:33:44:55:66", out), -1);
    assert_int_equal(nb_ipam_eui64("2001:db8::/64", NULL, out), -1);
    assert_true(nb_ipam_auto_address("slaac", NULL));
    assert_true(nb_ipam_auto_address(NULL, "dhcpv6-stateless"));
    assert_false(nb_ipam_auto_address("dhcpv6-stateful", "dhcpv6-stateful"));
    assert_false(nb_ipam_auto_address(NULL, NULL));
}

static json_t *v6_subnet(struct nb_ctx *ctx, const char *net, const char *cidr, const char *mode)
{
    json_t *b = json_pack("{s:s, s:s, s:i, s:s, s:s}", "network_id", net, "cidr", cidr,
                          "ip_version", 6, "ipv6_ra_mode", mode, "ipv6_address_mode", mode);
    json_t *v = nb_net_subnet_create(ctx, b);
    json_decref(b);
    return v;
}

/* The fixed IP a port view has on subnet, or NULL. */
static const char *ip_on(const json_t *port_view, const char *subnet)
{
    size_t i;
    json_t *f;
    json_array_foreach (json_object_get(port_view, "fixed_ips"), i, f)
        if (!strcmp(nb_json_str(f, "subnet_id"), subnet))
            return nb_json_str(f, "ip_address");
    return NULL;
}

/* SLAAC and DHCPv6-stateless subnets: EUI-64 addresses, no pool, no
 * explicit address but a router interface's; the subnet checks. */
static void test_auto_address_subnets(void **state)
{
    (void)state;
    char net[NB_UUID_LEN], v4[NB_UUID_LEN], eui[64];
    make_net(P1, false, "192.168.40.0/24", NULL, net, v4);
    struct nb_ctx ctx;
    admin_ctx(&ctx, P1);
    json_t *before = port(&ctx, net, NULL); /* made before the SLAAC subnet */
    assert_non_null(before);
    json_t *slaac = v6_subnet(&ctx, net, "fd00:170:9::/64", "slaac");
    assert_non_null(slaac);
    const char *sid = nb_json_str(slaac, "id");
    json_t *stateless = v6_subnet(&ctx, net, "fd00:170:a::/64", "dhcpv6-stateless");
    assert_non_null(stateless);
    const char *lid = nb_json_str(stateless, "id");

    /* a port made earlier got its address when the subnet came */
    json_t *again = nb_db_row(env.db, &ctx,
                              "SELECT ip_address FROM ipallocations WHERE port_id = ? AND "
                              "subnet_id = ?",
                              "ss", nb_json_str(before, "id"), sid);
    assert_non_null(again);
    nb_ipam_eui64("fd00:170:9::/64", nb_json_str(before, "mac_address"), eui);
    assert_string_equal(nb_json_str(again, "ip_address"), eui);
    json_decref(again);

    /* no fixed_ips: the v4 address and the EUI-64 one on each auto subnet */
    json_t *p = port(&ctx, net, NULL);
    assert_non_null(p);
    assert_int_equal(json_array_size(json_object_get(p, "fixed_ips")), 3);
    nb_ipam_eui64("fd00:170:9::/64", nb_json_str(p, "mac_address"), eui);
    assert_string_equal(ip_on(p, sid), eui);
    nb_ipam_eui64("fd00:170:a::/64", nb_json_str(p, "mac_address"), eui);
    assert_string_equal(ip_on(p, lid), eui);
    json_decref(p);

    /* fixed_ips naming only the v4 subnet, or the auto one by id: same */
    char fixed[200];
    snprintf(fixed, sizeof(fixed), "[{\"subnet_id\":\"%s\"}]", v4);
    p = port(&ctx, net, fixed);
    assert_non_null(p);
    assert_non_null(ip_on(p, sid));
    assert_non_null(ip_on(p, lid));
    json_decref(p);
    snprintf(fixed, sizeof(fixed), "[{\"subnet_id\":\"%s\"}]", sid);
    p = port(&ctx, net, fixed);
    assert_non_null(p);
    assert_null(ip_on(p, v4));
    nb_ipam_eui64("fd00:170:9::/64", nb_json_str(p, "mac_address"), eui);
    assert_string_equal(ip_on(p, sid), eui);
    json_decref(p);

    /* an explicit address there is refused */
    snprintf(fixed, sizeof(fixed), "[{\"subnet_id\":\"%s\",\"ip_address\":\"fd00:170:9::99\"}]",
             sid);
    assert_null(port(&ctx, net, fixed));
    assert_int_equal(ctx.err_status, 400);
    assert_string_equal(ctx.err_name, "AllocationOnAutoAddressSubnet");
    char msg[300];
    snprintf(msg, sizeof(msg),
             "IPv6 address fd00:170:9::99 cannot be directly assigned to a port on subnet %s as "
             "the subnet is configured for automatic addresses",
             sid);
    assert_string_equal(ctx.err_msg, msg);
    admin_ctx(&ctx, P1);
    assert_null(port(&ctx, net, "[{\"ip_address\":\"fd00:170:a::5\"}]"));
    assert_string_equal(ctx.err_name, "AllocationOnAutoAddressSubnet");

    /* a router interface takes the gateway, and no EUI-64 address */
    admin_ctx(&ctx, P1);
    json_t *b = json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "network_id", net, "device_owner",
                          "network:router_interface", "fixed_ips", "subnet_id", sid, "ip_address",
                          "fd00:170:9::1");
    p = nb_net_port_create(&ctx, b);
    json_decref(b);
    assert_non_null(p);
    assert_int_equal(json_array_size(json_object_get(p, "fixed_ips")), 1);
    assert_string_equal(ip_on(p, sid), "fd00:170:9::1");
    json_decref(p);

    /* the subnet's modes as Neutron checks them */
    struct {
        const char *cidr, *ra, *am;
        int version;
        const char *msg;
    } bad[] = {
        {"fd00:170:b::/80", "slaac", "slaac", 6,
         "Invalid input for operation: Invalid CIDR fd00:170:b::/80 for IPv6 address mode. "
         "OpenStack uses the EUI-64 address format, which requires the prefix to be /64."},
        {"fd00:170:b::/64", "slaac", "dhcpv6-stateful", 6,
         "Invalid input for operation: ipv6_ra_mode set to 'slaac' with ipv6_address_mode set to "
         "'dhcpv6-stateful' is not valid. If both attributes are set, they must be the same "
         "value."},
        {"fd00:170:b::/64", "sometimes", NULL, 6,
         "Invalid input for ipv6_ra_mode. Reason: 'sometimes' is not in ['dhcpv6-stateful', "
         "'dhcpv6-stateless', 'slaac']."},
        {"192.168.41.0/24", NULL, "slaac", 4,
         "Invalid input for operation: ipv6_address_mode is not valid when ip_version is 4."},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        admin_ctx(&ctx, P1);
        b = json_pack("{s:s, s:s, s:i}", "network_id", net, "cidr", bad[i].cidr, "ip_version",
                      bad[i].version);
        if (bad[i].ra)
            json_object_set_new(b, "ipv6_ra_mode", json_string(bad[i].ra));
        if (bad[i].am)
            json_object_set_new(b, "ipv6_address_mode", json_string(bad[i].am));
        assert_null(nb_net_subnet_create(&ctx, b));
        assert_int_equal(ctx.err_status, 400);
        assert_string_equal(ctx.err_msg, bad[i].msg);
        json_decref(b);
    }
    /* a stateful subnet allocates from its pool as before */
    admin_ctx(&ctx, P1);
    json_t *sf = v6_subnet(&ctx, net, "fd00:170:c::/64", "dhcpv6-stateful");
    assert_non_null(sf);
    p = port(&ctx, net, NULL);
    assert_non_null(p);
    assert_string_equal(ip_on(p, nb_json_str(sf, "id")), "fd00:170:c::2");
    json_decref(p);
    json_decref(sf);
    json_decref(before);
    json_decref(slaac);
    json_decref(stateless);
}

struct worker {
    const char *net;
    int made;
};

static void *alloc_worker(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < 10; i++) {
        struct nb_ctx ctx;
        admin_ctx(&ctx, P1);
        json_t *p = port(&ctx, w->net, NULL);
        if (p)
            w->made++;
        json_decref(p);
    }
    return NULL;
}

/* Eight threads allocating at once: every port made has its own address,
 * and the ports made are exactly the addresses in the pool. */
static void test_concurrent_allocation(void **state)
{
    (void)state;
    char net[NB_UUID_LEN], sub[NB_UUID_LEN];
    make_net(P1, false, "172.16.0.0/26", NULL, net, sub); /* 61 addresses */
    pthread_t t[8];
    struct worker w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (struct worker){net, 0};
        pthread_create(&t[i], NULL, alloc_worker, &w[i]);
    }
    int made = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        made += w[i].made;
    }
    assert_int_equal(made, 61);
    struct nb_ctx ctx;
    admin_ctx(&ctx, P1);
    assert_int_equal(nb_db_int(env.db, &ctx, -1,
                               "SELECT COUNT(DISTINCT ip_address) FROM ipallocations WHERE "
                               "subnet_id = ?",
                               "s", sub),
                     61);
    assert_int_equal(
        nb_db_int(env.db, &ctx, -1, "SELECT COUNT(*) FROM ports WHERE network_id = ?", "s", net),
        61);
}

static void test_instance_contract(void **state)
{
    (void)state;
    char net[NB_UUID_LEN], sub[NB_UUID_LEN], other[NB_UUID_LEN], osub[NB_UUID_LEN];
    make_net(P3, true, "10.20.0.0/24", NULL, net, sub);
    make_net(P4, false, "10.30.0.0/24", NULL, other, osub);
    struct nb_ctx ctx;
    user_ctx(&ctx, P3);
    /* P3 sees its shared network only: "auto" is unambiguous */
    assert_int_equal(nb_network_validate_request(&ctx, NULL), 0);
    json_t *req = json_pack("[{s:s}]", "uuid", other);
    assert_int_equal(nb_network_validate_request(&ctx, req), -1);
    assert_int_equal(ctx.err_status, 400);
    char msg[128];
    snprintf(msg, sizeof(msg), "Network %s could not be found.", other);
    assert_string_equal(ctx.err_msg, msg);
    json_decref(req);

    /* P4 sees its own and P3's shared network: "auto" is ambiguous */
    user_ctx(&ctx, P4);
    assert_int_equal(nb_network_validate_request(&ctx, NULL), -1);
    assert_int_equal(ctx.err_status, 409);
    assert_string_equal(ctx.err_msg,
                        "Multiple possible networks found, use a Network ID to be more specific.");

    user_ctx(&ctx, P4);
    req = json_pack("[{s:s, s:s}]", "uuid", net, "fixed_ip", "10.20.0.77");
    json_t *nw = NULL;
    const char *inst = "11111111-2222-3333-4444-555555555555";
    if (nb_network_allocate_for_instance(&ctx, inst, "host-a", "nova", req, &nw) < 0)
        fail_msg("allocate: %d %s", ctx.err_status, ctx.err_msg);
    assert_int_equal(json_array_size(nw), 1);
    json_t *vif = json_array_get(nw, 0);
    json_t *ips = json_object_get(
        json_array_get(json_object_get(json_object_get(vif, "network"), "subnets"), 0), "ips");
    assert_string_equal(nb_json_str(json_array_get(ips, 0), "address"), "10.20.0.77");
    assert_string_equal(nb_json_str(json_object_get(vif, "network"), "label"), "net");
    assert_true(nb_startswith(nb_json_str(vif, "devname"), "tap"));
    json_t *row = nb_db_row(env.db, &ctx, "SELECT * FROM ports WHERE device_id = ?", "s", inst);
    assert_string_equal(nb_json_str(row, "device_owner"), "compute:nova");
    assert_string_equal(nb_json_str(row, "binding_host_id"), "host-a");
    assert_string_equal(nb_json_str(row, "status"), "ACTIVE");
    assert_string_equal(nb_json_str(row, "project_id"), P4);
    json_decref(row);
    json_decref(nw);
    /* the instance is named among those that own ports (once) */
    json_t *devices = nb_network_port_devices(&ctx);
    assert_non_null(devices);
    assert_int_equal(json_array_size(devices), 1);
    assert_string_equal(json_string_value(json_array_get(devices, 0)), inst);
    json_decref(devices);

    /* the same fixed IP for a second instance fails and leaves no port */
    const char *inst2 = "11111111-2222-3333-4444-666666666666";
    assert_int_equal(nb_network_allocate_for_instance(&ctx, inst2, "host-a", "nova", req, &nw), -1);
    assert_int_equal(ctx.err_status, 409);
    assert_int_equal(
        nb_db_int(env.db, NULL, -1, "SELECT COUNT(*) FROM ports WHERE device_id = ?", "s", inst2),
        0);
    json_decref(req);

    /* network_info is rebuilt from the ports; deallocate removes them */
    user_ctx(&ctx, P4);
    nw = nb_network_info_for_instance(&ctx, inst);
    assert_int_equal(json_array_size(nw), 1);
    json_decref(nw);
    assert_int_equal(nb_network_deallocate_for_instance(&ctx, inst), 0);
    assert_int_equal(nb_network_deallocate_for_instance(&ctx, inst), 0); /* idempotent */
    nw = nb_network_info_for_instance(&ctx, inst);
    assert_int_equal(json_array_size(nw), 0);
    json_decref(nw);
    devices = nb_network_port_devices(&ctx);
    assert_int_equal(json_array_size(devices), 0);
    json_decref(devices);
}

/* The compute proxy's view of groups: find by name or id (404 unknown, 409
 * two of a name), add to and remove from an instance's ports, and the
 * names the server view shows. */
static void test_instance_security_groups(void **state)
{
    (void)state;
    char net[NB_UUID_LEN], sub[NB_UUID_LEN], id[NB_UUID_LEN];
    make_net(P5, false, "10.50.0.0/24", NULL, net, sub);
    struct nb_ctx ctx;
    user_ctx(&ctx, P5);
    json_t *body = json_pack("{s:s, s:s}", "name", "web", "description", "d");
    json_t *web = nb_network_sg_create(&ctx, body);
    json_decref(body);
    assert_non_null(web);
    const char *web_id = nb_json_str(web, "id");
    assert_int_equal(nb_network_sg_find(&ctx, "web", id), 0);
    assert_string_equal(id, web_id);
    assert_int_equal(nb_network_sg_find(&ctx, web_id, id), 0);
    assert_int_equal(nb_network_sg_find(&ctx, "nope", id), -1);
    assert_int_equal(ctx.err_status, 404);
    assert_string_equal(ctx.err_msg, "Unable to find security_group with name or id 'nope'");
    user_ctx(&ctx, P5);
    body = json_pack("{s:s, s:s}", "name", "web", "description", "again");
    json_decref(nb_network_sg_create(&ctx, body));
    json_decref(body);
    assert_int_equal(nb_network_sg_find(&ctx, "web", id), -1);
    assert_int_equal(ctx.err_status, 409);

    const char *inst = "22222222-2222-3333-4444-555555555555";
    user_ctx(&ctx, P5);
    assert_int_equal(nb_network_instance_sg_change(&ctx, inst, web_id, true), -1);
    assert_int_equal(ctx.err_status, 404); /* no port yet */
    user_ctx(&ctx, P5);
    json_t *req = json_pack("[{s:s}]", "uuid", net), *nw = NULL;
    assert_int_equal(nb_network_allocate_for_instance(&ctx, inst, "host-a", "nova", req, &nw), 0);
    json_decref(req);
    json_decref(nw);
    assert_int_equal(nb_network_instance_sg_change(&ctx, inst, web_id, true), 0);
    json_t *groups = nb_network_instance_security_groups(&ctx, inst);
    assert_int_equal(json_array_size(groups), 2); /* default, web */
    assert_string_equal(nb_json_str(json_array_get(groups, 1), "id"), web_id);
    json_decref(groups);
    json_t *uuids = json_pack("[s]", inst);
    json_t *names = nb_network_instances_sg_names(&ctx, uuids);
    json_t *want = json_pack("[{s:s}, {s:s}]", "name", "default", "name", "web");
    assert_true(json_equal(json_object_get(names, inst), want));
    json_decref(want);
    json_decref(names);
    assert_int_equal(nb_network_instance_sg_change(&ctx, inst, web_id, false), 0);
    assert_int_equal(nb_network_instance_sg_change(&ctx, inst, web_id, false), 1);
    assert_int_equal(nb_network_sg_delete(&ctx, web_id), 0);
    names = nb_network_instances_sg_names(&ctx, uuids);
    assert_int_equal(json_array_size(json_object_get(names, inst)), 1);
    json_decref(names);
    json_decref(uuids);
    json_decref(web);
    assert_int_equal(nb_network_deallocate_for_instance(&ctx, inst), 0);
}

/* The compute proxy's view of floating IPs: the pools (external
 * networks), allocate, list by project, show, release. Runs last: an
 * external network is every project's to see. */
static void test_floating_ips_for_compute(void **state)
{
    (void)state;
    struct nb_ctx ctx;
    admin_ctx(&ctx, P1);
    json_t *nb = json_pack("{s:s, s:b}", "name", "public", "router:external", 1);
    json_t *net = nb_net_network_create(&ctx, nb);
    json_decref(nb);
    assert_non_null(net);
    const char *net_id = nb_json_str(net, "id");
    json_t *sb = json_pack("{s:s, s:s, s:i}", "network_id", net_id, "cidr", "198.51.100.0/29",
                           "ip_version", 4);
    json_decref(nb_net_subnet_create(&ctx, sb));
    json_decref(sb);

    user_ctx(&ctx, P6);
    json_t *pools = nb_network_fip_pools(&ctx);
    assert_int_equal(json_array_size(pools), 1);
    assert_string_equal(nb_json_str(json_array_get(pools, 0), "name"), "public");
    assert_string_equal(nb_json_str(json_array_get(pools, 0), "id"), net_id);
    json_decref(pools);
    json_t *body = json_pack("{s:s}", "floating_network_id", net_id);
    json_t *fip = nb_network_fip_create(&ctx, body);
    json_decref(body);
    assert_non_null(fip);
    const char *id = nb_json_str(fip, "id");
    assert_string_equal(nb_json_str(fip, "project_id"), P6);
    assert_true(json_is_null(json_object_get(fip, "port_details")));
    json_t *list = nb_network_fip_list(&ctx, P6);
    assert_int_equal(json_array_size(list), 1);
    assert_string_equal(nb_json_str(json_array_get(list, 0), "id"), id);
    json_decref(list);
    json_t *shown = nb_network_fip_show(&ctx, id);
    assert_true(json_equal(shown, fip));
    json_decref(shown);

    struct nb_ctx other;
    user_ctx(&other, P5);
    list = nb_network_fip_list(&other, NULL);
    assert_int_equal(json_array_size(list), 0);
    json_decref(list);
    assert_null(nb_network_fip_show(&other, id));
    assert_int_equal(other.err_status, 404);
    user_ctx(&other, P5);
    assert_int_equal(nb_network_fip_delete(&other, id), -1);

    assert_int_equal(nb_network_fip_delete(&ctx, id), 0);
    assert_null(nb_network_fip_show(&ctx, id));
    assert_int_equal(ctx.err_status, 404);
    json_decref(fip);
    json_decref(net);
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
        cmocka_unit_test(test_ip_parse_format),
        cmocka_unit_test(test_cidr),
        cmocka_unit_test(test_default_pools),
        cmocka_unit_test(test_check_pools),
        cmocka_unit_test(test_first_free),
        cmocka_unit_test(test_validators),
        cmocka_unit_test(test_check_attrs),
        cmocka_unit_test(test_allocation_and_exhaustion),
        cmocka_unit_test(test_v6_subnet_and_port),
        cmocka_unit_test(test_concurrent_allocation),
        cmocka_unit_test(test_instance_contract),
        cmocka_unit_test(test_eui64),
        cmocka_unit_test(test_auto_address_subnets),
        cmocka_unit_test(test_instance_security_groups),
        cmocka_unit_test(test_floating_ips_for_compute),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

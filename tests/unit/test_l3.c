/* test_l3.c - the pure part of the L3 agent (network/agent/l3_rules.c): a
 * router of the host state -> its NAT rule set (floating IPs, SNAT,
 * hairpin), the addresses of its legs, its legs, its radvd.conf. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/json.h"
#include "network/agent/l3.h"

#include <stdlib.h>
#include <string.h>

static json_t *router(const char *snat, const char *fips)
{
    return nb_json_pack_text(
        "{\"id\": \"r1\", \"namespace\": \"qrouter-r1\", \"enable_snat\": %s,"
        " \"gateway\": {\"port_id\": \"g1\", \"dev\": \"qg-aaaaaaaa-aa\", \"bridge\": \"brqx\","
        "  \"tap\": \"tapaaaaaaaa-aa\", \"mac\": \"fa:16:3e:00:00:01\", \"gateway_ip\": "
        "\"203.0.113.49\","
        "  \"fixed_ips\": [{\"subnet_id\": \"s6\", \"ip_address\": \"2001:db8::5\", \"prefixlen\": "
        "64},"
        "   {\"subnet_id\": \"sx\", \"ip_address\": \"203.0.113.50\", \"prefixlen\": 28}]},"
        " \"interfaces\": [{\"port_id\": \"i1\", \"dev\": \"qr-bbbbbbbb-bb\", \"fixed_ips\":"
        "  [{\"subnet_id\": \"sa\", \"ip_address\": \"10.0.0.1\", \"prefixlen\": 24}]}],"
        " \"floating_ips\": %s}",
        snat, fips);
}

static const char *fips2 =
    "[{\"id\": \"0000aaaa-0000-0000-0000-000000000001\", \"floating_ip_address\": "
    "\"203.0.113.52\", \"fixed_ip_address\": \"10.0.0.5\", \"port_id\": \"p1\", \"status\": "
    "\"DOWN\"},"
    " {\"id\": \"bad\", \"floating_ip_address\": \"203.0.113.53\", \"fixed_ip_address\": "
    "\"10.0.0.6; flush ruleset\"}]";

/* The rule set replaces the table atomically; each valid floating IP is a
 * DNAT in prerouting and output and an SNAT back, before the router's own
 * SNAT out of qg- and the hairpin SNAT; east-west traffic is accepted
 * untranslated first. An entry with a bad address is left out. */
static void test_ruleset_snat_and_fips(void **st)
{
    (void)st;
    json_t *r = router("true", fips2);
    char *t = na_l3_ruleset(r);
    assert_non_null(t);
    assert_non_null(strstr(t, "table ip neutron_l3_agent\ndelete table ip neutron_l3_agent\n"));
    const char *pre =
        strstr(t, "chain prerouting {\n\t\ttype nat hook prerouting priority dstnat;");
    const char *out = strstr(t, "chain output {\n\t\ttype nat hook output priority -100;");
    const char *post = strstr(t, "chain postrouting {");
    assert_non_null(pre);
    assert_non_null(out);
    assert_non_null(post);
    const char *dnat = "ip daddr 203.0.113.52 dnat to 10.0.0.5 comment \"floatingip "
                       "0000aaaa-0000-0000-0000-000000000001\"";
    assert_true(strstr(pre, dnat) && strstr(pre, dnat) < out);
    assert_true(strstr(out, dnat) && strstr(out, dnat) < post);
    const char *accept = strstr(post, "oifname != \"qg-aaaaaaaa-aa\" ct status & dnat == 0 accept");
    const char *back = strstr(post, "ip saddr 10.0.0.5 snat to 203.0.113.52");
    const char *snat = strstr(post, "oifname \"qg-aaaaaaaa-aa\" snat to 203.0.113.50");
    const char *hair = strstr(post, "iifname != \"qg-aaaaaaaa-aa\" ct status dnat snat to "
                                    "203.0.113.50");
    assert_true(accept && back && snat && hair);
    assert_true(accept < back && back < snat && snat < hair);
    assert_null(strstr(t, "203.0.113.53"));
    assert_null(strstr(t, "flush"));
    free(t);
    json_decref(r);
}

/* A port forwarding: its address on qg-, a DNAT of its protocol and port
 * only; one with a bad protocol or port is left out. */
static void test_port_forwardings(void **st)
{
    (void)st;
    json_t *r = router("true", "[]");
    json_object_set_new(
        r, "port_forwardings",
        nb_json_pack_text(
            "[{\"id\": \"0000bbbb-0000-0000-0000-000000000002\", \"floating_ip_address\": "
            "\"203.0.113.54\", \"protocol\": \"tcp\", \"external_port\": 2222,"
            " \"internal_ip_address\": \"10.0.0.5\", \"internal_port\": 22},"
            " {\"floating_ip_address\": \"203.0.113.56\", \"protocol\": \"tcp; drop\","
            " \"external_port\": 1, \"internal_ip_address\": \"10.0.0.5\", \"internal_port\": 1},"
            " {\"floating_ip_address\": \"203.0.113.57\", \"protocol\": \"udp\","
            " \"external_port\": 70000, \"internal_ip_address\": \"10.0.0.5\","
            " \"internal_port\": 1}]"));
    char *t = na_l3_ruleset(r);
    const char *pre = strstr(t, "chain prerouting"), *out = strstr(t, "chain output");
    const char *rule = "ip daddr 203.0.113.54 tcp dport 2222 dnat to 10.0.0.5:22 comment "
                       "\"port_forwarding 0000bbbb-0000-0000-0000-000000000002\"";
    assert_true(strstr(pre, rule) && strstr(pre, rule) < out);
    assert_non_null(strstr(out, rule));
    assert_null(strstr(t, "203.0.113.56"));
    assert_null(strstr(t, "203.0.113.57"));
    json_t *a = na_l3_leg_addresses(json_object_get(r, "gateway"), r);
    assert_int_equal(json_array_size(a), 3);
    assert_string_equal(json_string_value(json_array_get(a, 2)), "203.0.113.54/32");
    json_decref(a);
    free(t);
    json_decref(r);
}

/* enable_snat false: only the floating IPs are translated. */
static void test_ruleset_no_snat(void **st)
{
    (void)st;
    json_t *r = router("false", fips2);
    char *t = na_l3_ruleset(r);
    assert_non_null(strstr(t, "ip saddr 10.0.0.5 snat to 203.0.113.52"));
    assert_null(strstr(t, "snat to 203.0.113.50"));
    free(t);
    json_decref(r);
}

/* No gateway: the table is there, empty of rules. */
static void test_ruleset_no_gateway(void **st)
{
    (void)st;
    json_t *r = router("true", fips2);
    json_object_set_new(r, "gateway", json_null());
    char *t = na_l3_ruleset(r);
    assert_null(strstr(t, "dnat to"));
    assert_null(strstr(t, "snat to"));
    assert_non_null(strstr(t, "chain postrouting {"));
    free(t);
    json_decref(r);
}

/* The gateway leg holds its fixed IPs and the floating IPs as /32; the
 * first IPv4 gateway address is the SNAT address; legs: interfaces then
 * the gateway. */
static void test_addresses_and_legs(void **st)
{
    (void)st;
    json_t *r = router("true", fips2);
    json_t *fips = na_l3_valid_fips(r);
    assert_int_equal(json_array_size(fips), 1);
    json_t *a = na_l3_leg_addresses(json_object_get(r, "gateway"), r);
    assert_int_equal(json_array_size(a), 3);
    assert_string_equal(json_string_value(json_array_get(a, 0)), "2001:db8::5/64");
    assert_string_equal(json_string_value(json_array_get(a, 1)), "203.0.113.50/28");
    assert_string_equal(json_string_value(json_array_get(a, 2)), "203.0.113.52/32");
    assert_string_equal(na_l3_gateway_v4(r), "203.0.113.50");
    json_t *legs = na_l3_legs(r);
    assert_int_equal(json_array_size(legs), 2);
    assert_string_equal(nb_json_str(json_array_get(legs, 0), "dev"), "qr-bbbbbbbb-bb");
    assert_true(json_is_false(json_object_get(json_array_get(legs, 0), "gateway")));
    assert_true(json_is_true(json_object_get(json_array_get(legs, 1), "gateway")));
    json_decref(legs);
    json_decref(a);
    json_decref(fips);
    json_decref(r);
}

/* radvd.conf as Neutron's ra.py renders it: one block per interface with
 * an RA subnet (the gateway leg and subnets without ipv6_ra_mode get
 * none), flags by mode, autonomous prefixes for SLAAC/stateless, MTU and
 * the SLAAC subnets' DNS servers; nothing at all when no leg needs RAs. */
static void test_radvd_conf(void **st)
{
    (void)st;
    json_t *r = nb_json_pack_text(
        "{\"id\": \"r1\", \"gateway\": {\"dev\": \"qg-aaaaaaaa-aa\", \"fixed_ips\": "
        "[{\"ip_address\": \"2001:db8::5\", \"prefixlen\": 64, \"cidr\": \"2001:db8::/64\", "
        "\"ipv6_ra_mode\": \"slaac\"}]},"
        " \"interfaces\": ["
        "  {\"dev\": \"qr-bbbbbbbb-bb\", \"mtu\": 1450, \"fixed_ips\": ["
        "   {\"ip_address\": \"10.0.0.1\", \"prefixlen\": 24, \"cidr\": \"10.0.0.0/24\", "
        "\"ipv6_ra_mode\": null},"
        "   {\"ip_address\": \"fd00:170:1::1\", \"prefixlen\": 64, \"cidr\": \"fd00:170:1::/64\","
        "    \"ipv6_ra_mode\": \"slaac\", \"dns_nameservers\": [\"fd00:170::53\", \"bad;\"]},"
        "   {\"ip_address\": \"fd00:170:2::1\", \"prefixlen\": 64, \"cidr\": \"fd00:170:2::/64\","
        "    \"ipv6_ra_mode\": \"dhcpv6-stateful\"}]},"
        "  {\"dev\": \"qr-cccccccc-cc\", \"mtu\": 1000, \"fixed_ips\": ["
        "   {\"ip_address\": \"fd00:170:3::1\", \"prefixlen\": 64, \"cidr\": \"fd00:170:3::/64\","
        "    \"ipv6_ra_mode\": \"dhcpv6-stateless\"}]},"
        "  {\"dev\": \"qr-dddddddd-dd\", \"fixed_ips\": ["
        "   {\"ip_address\": \"fd00:170:4::1\", \"prefixlen\": 64, \"cidr\": \"fd00:170:4::/64\","
        "    \"ipv6_ra_mode\": null},"
        "   {\"ip_address\": \"fd00:170:5::1\", \"prefixlen\": 64, \"cidr\": \"fd00:170:5::/64;\","
        "    \"ipv6_ra_mode\": \"slaac\"}]}]}");
    char *conf = na_l3_radvd_conf(r, 30, 100);
    assert_non_null(conf);
    assert_string_equal(conf, "interface qr-bbbbbbbb-bb\n"
                              "{\n"
                              "   AdvSendAdvert on;\n"
                              "   MinRtrAdvInterval 30;\n"
                              "   MaxRtrAdvInterval 100;\n"
                              "   AdvLinkMTU 1450;\n"
                              "   AdvManagedFlag on;\n"
                              "   RDNSS fd00:170::53 {};\n"
                              "   prefix fd00:170:1::/64\n"
                              "   {\n"
                              "        AdvOnLink on;\n"
                              "        AdvAutonomous on;\n"
                              "   };\n"
                              "   prefix fd00:170:2::/64\n"
                              "   {\n"
                              "        AdvOnLink on;\n"
                              "        AdvAutonomous off;\n"
                              "   };\n"
                              "   route fe80::a9fe:a9fe/128 {\n"
                              "   };\n"
                              "};\n"
                              "interface qr-cccccccc-cc\n"
                              "{\n"
                              "   AdvSendAdvert on;\n"
                              "   MinRtrAdvInterval 30;\n"
                              "   MaxRtrAdvInterval 100;\n"
                              "   AdvOtherConfigFlag on;\n"
                              "   prefix fd00:170:3::/64\n"
                              "   {\n"
                              "        AdvOnLink on;\n"
                              "        AdvAutonomous on;\n"
                              "   };\n"
                              "   route fe80::a9fe:a9fe/128 {\n"
                              "   };\n"
                              "};\n");
    free(conf);
    json_decref(r);
    r = nb_json_pack_text("{\"id\": \"r2\", \"interfaces\": [{\"dev\": \"qr-eeeeeeee-ee\", "
                          "\"fixed_ips\": [{\"ip_address\": \"10.1.0.1\", \"prefixlen\": 24, "
                          "\"cidr\": \"10.1.0.0/24\"}]}]}");
    assert_null(na_l3_radvd_conf(r, 30, 100));
    json_decref(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ruleset_snat_and_fips), cmocka_unit_test(test_ruleset_no_snat),
        cmocka_unit_test(test_port_forwardings),      cmocka_unit_test(test_ruleset_no_gateway),
        cmocka_unit_test(test_addresses_and_legs),    cmocka_unit_test(test_radvd_conf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

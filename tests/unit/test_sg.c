/* test_sg.c - the security-group renderer of the network agent
 * (network/agent/sg_render.c): what the nft script of a host state holds
 * (anti-spoofing of each port, marks, per-port chains, Neutron's fixed
 * rules, the groups' rules as Neutron encodes them, remote groups as sets,
 * port security off), that the kernel's nft accepts it (`nft -c`, when nft
 * runs here as root), and the conntrack entries a change cuts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "common/json.h"
#include "network/agent/sg.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NET_A "aaaaaaaa-0000-4000-8000-000000000001"
#define NET_B "bbbbbbbb-0000-4000-8000-000000000002"
#define SG_WEB "5e000000-0000-4000-8000-0000000000a1"
#define SG_DB "5e000000-0000-4000-8000-0000000000b2"

static json_t *rule(const char *id, const char *dir, const char *eth, const char *proto,
                    json_t *pmin, json_t *pmax, const char *prefix, const char *rgid)
{
    return json_pack("{s:s,s:s,s:s,s:s?,s:o,s:o,s:s?,s:s?}", "id", id, "direction", dir,
                     "ethertype", eth, "protocol", proto, "port_range_min",
                     pmin ? pmin : json_null(), "port_range_max", pmax ? pmax : json_null(),
                     "remote_ip_prefix", prefix, "remote_group_id", rgid);
}

/* Two networks, three ports: p1 and p2 in "web" on net A (p1 with an
 * allowed address pair and an IPv6 address), p3 in "db" on net B, and an
 * unsecured port p4 on net A. */
static json_t *sample_state(void)
{
    json_t *web_rules = json_pack(
        "[o,o,o,o,o,o,o,o]", rule("r-in-web", "ingress", "IPv4", NULL, NULL, NULL, NULL, SG_WEB),
        rule("r-out4", "egress", "IPv4", NULL, NULL, NULL, NULL, NULL),
        rule("r-out6", "egress", "IPv6", NULL, NULL, NULL, NULL, NULL),
        rule("r-ssh", "ingress", "IPv4", "tcp", json_integer(22), json_integer(22),
             "203.0.113.64/28", NULL),
        rule("r-range", "ingress", "IPv4", "6", json_integer(8000), json_integer(8080), NULL, NULL),
        rule("r-ping", "ingress", "IPv4", "icmp", json_integer(8), json_integer(0), NULL, NULL),
        rule("r-ping6", "ingress", "IPv6", "ipv6-icmp", json_integer(128), NULL, "::/0", NULL),
        rule("r-gre", "ingress", "IPv4", "47", NULL, NULL, "10.1.0.5/16", NULL));
    json_t *db_rules = json_pack(
        "[o,o]",
        rule("r-db", "ingress", "IPv4", "tcp", json_integer(5432), json_integer(5432), NULL,
             SG_WEB),
        rule("r-db6", "ingress", "IPv6", "udp", json_integer(53), json_integer(53), NULL, SG_WEB));
    return json_pack(
        "{s:s,s:[{s:s,s:s},{s:s,s:s}],s:[o,o,o,o],s:[{s:s,s:b,s:o,s:[s,s,s,s]},"
        "{s:s,s:b,s:o,s:[s]}]}",
        "host", "h1", "networks", "id", NET_A, "bridge", "brqaaaaaaaa-00", "id", NET_B, "bridge",
        "brqbbbbbbbb-00", "ports",
        json_pack("{s:s,s:s,s:s,s:s,s:b,s:[{s:s},{s:s}],s:[s],s:[{s:s,s:s}]}", "id",
                  "11111111-aaaa-4000-8000-000000000001", "network_id", NET_A, "tap",
                  "tap11111111-aa", "mac", "FA:16:3E:00:00:01", "port_security_enabled", 1,
                  "fixed_ips", "ip_address", "10.70.0.11", "ip_address", "2001:db8::11",
                  "security_groups", SG_WEB, "allowed_address_pairs", "ip_address",
                  "10.70.0.128/25", "mac_address", "fa:16:3e:00:00:99"),
        json_pack("{s:s,s:s,s:s,s:s,s:[{s:s}],s:[s],s:[]}", "id",
                  "22222222-aaaa-4000-8000-000000000002", "network_id", NET_A, "tap",
                  "tap22222222-aa", "mac", "fa:16:3e:00:00:02", "fixed_ips", "ip_address",
                  "10.70.0.12", "security_groups", SG_WEB, "allowed_address_pairs"),
        json_pack("{s:s,s:s,s:s,s:s,s:[{s:s}],s:[s],s:[]}", "id",
                  "33333333-bbbb-4000-8000-000000000003", "network_id", NET_B, "tap",
                  "tap33333333-bb", "mac", "fa:16:3e:00:00:03", "fixed_ips", "ip_address",
                  "10.71.0.13", "security_groups", SG_DB, "allowed_address_pairs"),
        json_pack("{s:s,s:s,s:s,s:s,s:b,s:[{s:s}],s:[],s:[]}", "id",
                  "44444444-aaaa-4000-8000-000000000004", "network_id", NET_A, "tap",
                  "tap44444444-aa", "mac", "fa:16:3e:00:00:04", "port_security_enabled", 0,
                  "fixed_ips", "ip_address", "10.70.0.14", "security_groups",
                  "allowed_address_pairs"),
        "security_groups", "id", SG_WEB, "stateful", 1, "rules", web_rules, "members", "10.70.0.11",
        "10.70.0.12", "10.70.0.128/25", "2001:db8::11", "id", SG_DB, "stateful", 1, "rules",
        db_rules, "members", "10.71.0.13");
}

static bool has(const char *script, const char *needle)
{
    if (!strstr(script, needle)) {
        print_error("missing: %s\n", needle);
        return false;
    }
    return true;
}

/* Runs `nft -c -f` on script: 0 ok, 1 rejected (output printed), -1 no nft
 * usable here (not root, no nft). */
static int nft_check(const char *script)
{
    if (geteuid() != 0 || access("/usr/sbin/nft", X_OK) != 0)
        return -1;
    char path[] = "/tmp/nubo-test-sg-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, script, strlen(script)), (ssize_t)strlen(script));
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "/usr/sbin/nft -c -f %s 2>&1", path);
    FILE *p = popen(cmd, "r");
    char line[512];
    while (p && fgets(line, sizeof(line), p))
        print_error("nft: %s", line);
    int st = p ? pclose(p) : -1;
    unlink(path);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static void test_render_sample(void **state)
{
    (void)state;
    json_t *st = sample_state();
    struct na_sg_plan plan;
    const char *err;
    assert_int_equal(na_sg_render(st, "0a1b2c3d", &plan, &err), 0);
    const char *s = plan.script;
    assert_false(plan.empty);
    /* tables replaced whole */
    assert_true(
        has(s, "table bridge nubo_port_0a1b2c3d\ndelete table bridge nubo_port_0a1b2c3d\n"));
    assert_true(has(s, "table inet nubo_sg_0a1b2c3d\ndelete table inet nubo_sg_0a1b2c3d\n"));
    /* port security off: p4 nowhere */
    assert_null(strstr(s, "tap44444444-aa"));
    assert_int_equal(json_array_size(plan.ports), 3);
    /* marks: ports sorted by tap, index 1.. */
    assert_true(has(s, "\"tap11111111-aa\" : jump to_tap11111111-aa"));
    assert_true(has(s, "chain to_tap22222222-aa {\n    meta mark set 0x00000002\n"));
    assert_true(has(s, "meta mark set meta mark and 0x0000ffff or 0x00030000"));
    assert_true(has(s, "0x00010000 : jump egress_tap11111111-aa"));
    assert_true(has(s, "0x00000003 : jump ingress_tap33333333-bb"));
    /* anti-spoofing of p1: its MAC and the pair's, its IPs paired with MACs,
     * the link-local of each MAC */
    assert_true(has(s, "ether saddr != { fa:16:3e:00:00:01, fa:16:3e:00:00:99 } counter drop"));
    assert_true(has(s, "arp saddr ip != 0.0.0.0 arp saddr ip != { 10.70.0.11, 10.70.0.128/25 }"));
    assert_true(has(s, "ip saddr . ether saddr != { 10.70.0.11 . fa:16:3e:00:00:01, "
                       "10.70.0.128/25 . fa:16:3e:00:00:99 }"));
    assert_true(has(s, "2001:db8::11 . fa:16:3e:00:00:01, fe80::f816:3eff:fe00:1 . "
                       "fa:16:3e:00:00:01, fe80::f816:3eff:fe00:99 . fa:16:3e:00:00:99"));
    assert_true(has(s, "udp sport 67 udp dport 68 counter drop comment \"dhcp server\""));
    assert_true(has(s, "icmpv6 type nd-router-advert counter drop"));
    assert_true(has(s, "ip saddr 0.0.0.0 ip daddr 255.255.255.255 udp sport 68 udp dport 67 "
                       "accept"));
    /* scoped to this agent's bridges, zones per bridge */
    assert_true(has(s, "elements = { \"brqaaaaaaaa-00\", \"brqbbbbbbbb-00\" }"));
    assert_true(has(s, "iifname != @bridges accept"));
    char zone[64];
    snprintf(zone, sizeof(zone), "\"brqaaaaaaaa-00\" : %d", na_sg_zone("0a1b2c3d", NET_A));
    assert_true(has(s, zone));
    /* fixed rules */
    assert_true(has(s, "ip daddr 10.70.0.11 udp sport 67 udp dport 68 accept"));
    assert_true(has(s, "ip daddr 255.255.255.255 udp sport 67 udp dport 68 accept"));
    /* one MAC: the source is checked by address alone, one address as a value */
    assert_true(has(s, "ether saddr != fa:16:3e:00:00:02 counter drop"));
    assert_true(has(s, "ip saddr != 10.70.0.12 counter drop comment \"ip spoof\""));
    assert_true(has(s, "ip6 saddr != fe80::f816:3eff:fe00:2 counter drop"));
    assert_true(has(s, "ct state established,related accept\n    ct state invalid counter drop"));
    assert_true(has(s, "ct state established,related return"));
    /* group rules as Neutron encodes them */
    assert_true(has(s, "ip saddr @rg_5e000000_0000_4000_8000_0000000000a1_v4 accept comment "
                       "\"rule r-in-web\""));
    assert_true(has(s, "meta nfproto ipv4 meta mark set meta mark or 0x80000000 return comment "
                       "\"rule r-out4\""));
    /* each group's rules once, in its chains, jumped to by its ports */
    assert_true(has(s, "chain sg_in_5e000000_0000_4000_8000_0000000000a1 {\n"));
    assert_true(has(s, "chain sg_out_5e000000_0000_4000_8000_0000000000b2 {\n  }"));
    assert_true(has(s, "    jump sg_out_5e000000_0000_4000_8000_0000000000a1\n"
                       "    meta mark and 0x80000000 == 0x80000000 return\n"
                       "    counter drop comment \"no rule allows it\""));
    assert_int_equal(strstr(strstr(s, "rule r-ssh") + 1, "rule r-ssh"), NULL);
    assert_true(has(s, "ip saddr 203.0.113.64/28 tcp dport 22 accept"));
    assert_true(has(s, "meta nfproto ipv4 tcp dport 8000-8080 accept"));
    assert_true(has(s, "meta nfproto ipv4 icmp type 8 icmp code 0 accept"));
    assert_true(has(s, "meta nfproto ipv6 icmpv6 type 128 accept"));
    assert_true(has(s, "ip saddr 10.1.0.0/16 meta l4proto 47 accept"));
    assert_true(has(s, "tcp dport 5432 accept comment \"rule r-db\""));
    assert_true(has(s, "ip6 saddr @rg_5e000000_0000_4000_8000_0000000000a1_v6 udp dport 53"));
    assert_true(has(s, "elements = { 10.70.0.11, 10.70.0.12, 10.70.0.128/25 }"));
    /* default drop in both directions */
    assert_true(has(s, "counter drop comment \"no rule allows it\"\n  }\n  chain egress_"));
    if (getenv("NUBO_SG_DUMP"))
        fputs(s, stderr);
    int rc = nft_check(s);
    if (rc >= 0)
        assert_int_equal(rc, 0);
    na_sg_plan_free(&plan);
    json_decref(st);
}

static void test_render_no_ports(void **state)
{
    (void)state;
    json_t *st = json_pack("{s:[],s:[],s:[]}", "networks", "ports", "security_groups");
    struct na_sg_plan plan;
    const char *err;
    assert_int_equal(na_sg_render(st, "0a1b2c3d", &plan, &err), 0);
    assert_true(plan.empty);
    assert_string_equal(plan.script,
                        "table bridge nubo_port_0a1b2c3d\ndelete table bridge nubo_port_0a1b2c3d\n"
                        "table inet nubo_sg_0a1b2c3d\ndelete table inet nubo_sg_0a1b2c3d\n");
    int rc = nft_check(plan.script);
    if (rc >= 0)
        assert_int_equal(rc, 0);
    na_sg_plan_free(&plan);
    json_decref(st);
}

/* No egress rule: nothing but the fixed rules goes out; an empty remote
 * group makes no rule; a stateless group has no conntrack shortcut. */
static void test_render_egress_and_stateless(void **state)
{
    (void)state;
    json_t *st = sample_state();
    json_t *web = json_array_get(json_object_get(st, "security_groups"), 0);
    json_t *rules = json_object_get(web, "rules");
    json_array_remove(rules, 2);
    json_array_remove(rules, 1);
    json_object_set_new(web, "stateful", json_false());
    json_t *db = json_array_get(json_object_get(st, "security_groups"), 1);
    json_array_clear(json_object_get(web, "members"));
    (void)db;
    struct na_sg_plan plan;
    const char *err;
    assert_int_equal(na_sg_render(st, "0a1b2c3d", &plan, &err), 0);
    const char *s = plan.script;
    assert_null(strstr(s, "rule r-out4"));
    assert_null(strstr(s, "rule r-in-web"));
    assert_null(strstr(s, "rule r-db\""));
    const char *e = strstr(s, "chain egress_tap11111111-aa {");
    assert_non_null(e);
    assert_true(has(e, "dhcpv6 client\"\n    jump sg_out_5e000000_0000_4000_8000_0000000000a1\n"));
    const char *out = strstr(s, "chain sg_out_5e000000_0000_4000_8000_0000000000a1 {\n  }");
    assert_non_null(out);
    const char *i3 = strstr(s, "chain ingress_tap33333333-bb {");
    assert_true(has(i3, "{\n    ct state established,related accept"));
    int rc = nft_check(s);
    if (rc >= 0)
        assert_int_equal(rc, 0);
    na_sg_plan_free(&plan);
    json_decref(st);
}

/* Pairs of the port's own MAC (none given, or the same one in capitals)
 * keep the one-MAC form: the source by address alone, the pairs' addresses
 * beside the fixed IP in the IP and ARP checks; an IPv6 pair only in the
 * IPv6 check. */
static void test_render_pairs_of_the_port_mac(void **state)
{
    (void)state;
    json_t *st = sample_state();
    json_t *p2 = json_array_get(json_object_get(st, "ports"), 1);
    json_object_set_new(p2, "allowed_address_pairs",
                        json_pack("[{s:s},{s:s,s:s},{s:s}]", "ip_address", "10.70.0.200",
                                  "ip_address", "10.70.0.64/26", "mac_address", "FA:16:3E:00:00:02",
                                  "ip_address", "2001:db8::200"));
    struct na_sg_plan plan;
    const char *err;
    assert_int_equal(na_sg_render(st, "0a1b2c3d", &plan, &err), 0);
    const char *s = strstr(plan.script, "chain from_tap22222222-aa {");
    assert_non_null(s);
    char *end = strstr(s, "\n  }\n");
    assert_non_null(end);
    char *chain = strndup(s, (size_t)(end - s));
    assert_true(has(chain, "ether saddr != fa:16:3e:00:00:02 counter drop"));
    assert_true(has(chain, "arp saddr ip != { 10.70.0.12, 10.70.0.200, 10.70.0.64/26 } counter"));
    assert_true(has(chain, "ip saddr != { 10.70.0.12, 10.70.0.200, 10.70.0.64/26 } counter drop "
                           "comment \"ip spoof\""));
    assert_true(has(chain, "ip6 saddr != { 2001:db8::200, fe80::f816:3eff:fe00:2 } counter drop"));
    assert_null(strstr(chain, "ether saddr != {"));
    free(chain);
    int rc = nft_check(plan.script);
    if (rc >= 0)
        assert_int_equal(rc, 0);
    na_sg_plan_free(&plan);
    /* the pairs gone: only the fixed IP again */
    json_object_set_new(p2, "allowed_address_pairs", json_array());
    assert_int_equal(na_sg_render(st, "0a1b2c3d", &plan, &err), 0);
    assert_true(has(plan.script, "ip saddr != 10.70.0.12 counter drop comment \"ip spoof\""));
    assert_null(strstr(plan.script, "10.70.0.200"));
    na_sg_plan_free(&plan);
    json_decref(st);
}

static void test_render_rejects_bad_names(void **state)
{
    (void)state;
    json_t *st = sample_state();
    json_t *p = json_array_get(json_object_get(st, "ports"), 0);
    json_object_set_new(p, "tap", json_string("tap\"; flush ruleset"));
    struct na_sg_plan plan;
    const char *err;
    assert_int_equal(na_sg_render(st, "0a1b2c3d", &plan, &err), -1);
    assert_non_null(err);
    assert_null(plan.script);
    json_decref(st);
}

static bool has_cut(const json_t *cuts, const char *text)
{
    size_t i;
    json_t *c;
    json_array_foreach (cuts, i, c) {
        char line[512] = "";
        size_t j;
        json_t *a;
        json_array_foreach (c, j, a) {
            strcat(line, j ? " " : "");
            strcat(line, json_string_value(a));
        }
        if (!strcmp(line, text))
            return true;
    }
    print_error("no cut: %s\n", text);
    return false;
}

static void test_conntrack_cuts(void **state)
{
    (void)state;
    json_t *st = sample_state();
    struct na_sg_plan before, after;
    const char *err;
    assert_int_equal(na_sg_render(st, "0a1b2c3d", &before, &err), 0);
    /* same state: nothing to cut */
    json_t *none = na_sg_conntrack_cuts(before.flows, before.flows);
    assert_int_equal(json_array_size(none), 0);
    json_decref(none);
    /* remove the ping rule and member 10.70.0.12 from web */
    json_t *web = json_array_get(json_object_get(st, "security_groups"), 0);
    json_array_remove(json_object_get(web, "rules"), 5);
    json_array_remove(json_object_get(web, "members"), 1);
    assert_int_equal(na_sg_render(st, "0a1b2c3d", &after, &err), 0);
    json_t *cuts = na_sg_conntrack_cuts(before.flows, after.flows);
    char z[16], line[256];
    snprintf(z, sizeof(z), "%d", na_sg_zone("0a1b2c3d", NET_A));
    snprintf(line, sizeof(line), "conntrack -D -p icmp -f ipv4 -d 10.70.0.11 -w %s", z);
    assert_true(has_cut(cuts, line));
    snprintf(line, sizeof(line), "conntrack -D -f ipv4 -d 10.70.0.11 -w %s -s 10.70.0.12", z);
    assert_true(has_cut(cuts, line));
    snprintf(line, sizeof(line), "conntrack -D -f ipv4 -s 10.70.0.11 -w %s -d 10.70.0.12", z);
    assert_true(has_cut(cuts, line));
    /* p3 (group db names web as remote) loses the member too */
    snprintf(z, sizeof(z), "%d", na_sg_zone("0a1b2c3d", NET_B));
    snprintf(line, sizeof(line), "conntrack -D -f ipv4 -d 10.71.0.13 -w %s -s 10.70.0.12", z);
    assert_true(has_cut(cuts, line));
    /* not the IPv6 address for an IPv4 rule */
    snprintf(z, sizeof(z), "%d", na_sg_zone("0a1b2c3d", NET_A));
    snprintf(line, sizeof(line), "conntrack -D -p icmp -f ipv4 -d 2001:db8::11 -w %s", z);
    char *all = json_dumps(cuts, 0);
    assert_null(strstr(all, "-d 2001:db8::11"));
    free(all);
    json_decref(cuts);
    na_sg_plan_free(&before);
    na_sg_plan_free(&after);
    json_decref(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_sample),
        cmocka_unit_test(test_render_no_ports),
        cmocka_unit_test(test_render_egress_and_stateless),
        cmocka_unit_test(test_render_pairs_of_the_port_mac),
        cmocka_unit_test(test_render_rejects_bad_names),
        cmocka_unit_test(test_conntrack_cuts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_dad.c - the network agent's duplicate-address probes (network/agent/
 * dad.c): the RFC 5227 probe frame byte by byte, which received ARP frames
 * are conflicts (a reply, an announcement, another host's probe; never the
 * port's own MAC, the bridge's own probe, another address or a non-ARP
 * frame), the reason text, the plan of probes a state asks for, and (as
 * root) the real thing on a bridge of this test: a "rogue" namespace with
 * a veth on it holding an address fails a port with that address and
 * another MAC, not a port with the rogue's MAC, not an ACTIVE port, not a
 * free address; the failure sticks without a new probe until the tap is a
 * new one. Everything made here is named ac* (acbr1, actap1, acrogue1,
 * acrv1) and removed at the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/config.h"
#include "common/ctx.h"
#include "common/json.h"
#include "common/proc.h"
#include "common/util.h"
#include "network/agent/agent_int.h"
#include "network/agent/dad.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const uint8_t BRMAC[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
static const uint8_t PORTMAC[6] = {0xfa, 0x16, 0x3e, 0x11, 0x22, 0x33};
static const uint8_t ROGUE[6] = {0x02, 0xac, 0x00, 0x00, 0x00, 0x05};

static struct in_addr ip4(const char *s)
{
    struct in_addr a;
    assert_int_equal(inet_pton(AF_INET, s, &a), 1);
    return a;
}

/* An ARP frame (Ethernet, optionally 802.1Q-tagged) into buf; its length. */
static size_t arp_frame(uint8_t *buf, bool vlan, uint16_t op, const uint8_t sha[6], const char *spa,
                        const char *tpa)
{
    memset(buf, 0, 64);
    size_t o = 12;
    memcpy(buf, BRMAC, 6);
    memcpy(buf + 6, sha, 6);
    if (vlan) {
        buf[12] = 0x81, buf[13] = 0x00, buf[14] = 0x00, buf[15] = 0x07;
        o = 16;
    }
    buf[o] = 0x08, buf[o + 1] = 0x06;
    uint8_t *a = buf + o + 2;
    a[1] = 1, a[2] = 0x08, a[4] = 6, a[5] = 4, a[7] = (uint8_t)op;
    memcpy(a + 8, sha, 6);
    struct in_addr s = ip4(spa), t = ip4(tpa);
    memcpy(a + 14, &s.s_addr, 4);
    memcpy(a + 24, &t.s_addr, 4);
    return o + 2 + 28;
}

/* The probe: broadcast, from the bridge's MAC, ARP request over Ethernet
 * for IPv4, sender IP 0.0.0.0, target MAC zero, target IP the address,
 * padded to 60 bytes. */
static void test_probe_frame(void **st)
{
    (void)st;
    uint8_t f[NA_DAD_FRAME_LEN];
    memset(f, 0xee, sizeof(f));
    assert_int_equal(na_dad_probe_frame(f, BRMAC, ip4("10.180.0.5")), 60);
    static const uint8_t want[42] = {
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06,
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 10,   180,  0,    5};
    assert_memory_equal(f, want, sizeof(want));
    for (size_t i = 42; i < sizeof(f); i++)
        assert_int_equal(f[i], 0);
}

static void test_classify(void **st)
{
    (void)st;
    const uint8_t own[2][6] = {{0xfa, 0x16, 0x3e, 0x11, 0x22, 0x33},
                               {0x02, 0x00, 0x00, 0x00, 0x00, 0x01}};
    struct in_addr x = ip4("10.180.0.5");
    uint8_t f[64], mac[6];
    /* the rogue's reply to our probe: in use, its MAC */
    size_t n = arp_frame(f, false, 2, ROGUE, "10.180.0.5", "0.0.0.0");
    memset(mac, 0, 6);
    assert_int_equal(na_dad_classify(f, n, x, own, 2, mac), NA_DAD_REPLY);
    assert_memory_equal(mac, ROGUE, 6);
    /* the same tagged */
    n = arp_frame(f, true, 2, ROGUE, "10.180.0.5", "0.0.0.0");
    assert_int_equal(na_dad_classify(f, n, x, own, 2, mac), NA_DAD_REPLY);
    /* a gratuitous ARP, or any request, from the address */
    n = arp_frame(f, false, 1, ROGUE, "10.180.0.5", "10.180.0.5");
    assert_int_equal(na_dad_classify(f, n, x, own, 2, mac), NA_DAD_REQUEST);
    /* another host probing the same address */
    n = arp_frame(f, false, 1, ROGUE, "0.0.0.0", "10.180.0.5");
    assert_int_equal(na_dad_classify(f, n, x, own, 2, mac), NA_DAD_PROBE);
    /* the port's own guest answers for its address: not a conflict */
    n = arp_frame(f, false, 2, PORTMAC, "10.180.0.5", "0.0.0.0");
    assert_int_equal(na_dad_classify(f, n, x, own, 2, mac), NA_DAD_NONE);
    n = arp_frame(f, false, 1, PORTMAC, "0.0.0.0", "10.180.0.5");
    assert_int_equal(na_dad_classify(f, n, x, own, 2, mac), NA_DAD_NONE);
    /* our own probe seen back */
    uint8_t p[NA_DAD_FRAME_LEN];
    na_dad_probe_frame(p, BRMAC, x);
    assert_int_equal(na_dad_classify(p, sizeof(p), x, own, 2, mac), NA_DAD_NONE);
    /* another address, or asking for ours from another address */
    n = arp_frame(f, false, 2, ROGUE, "10.180.0.6", "0.0.0.0");
    assert_int_equal(na_dad_classify(f, n, x, own, 2, mac), NA_DAD_NONE);
    n = arp_frame(f, false, 1, ROGUE, "10.180.0.6", "10.180.0.5");
    assert_int_equal(na_dad_classify(f, n, x, own, 2, mac), NA_DAD_NONE);
    /* truncated, not ARP, not Ethernet/IPv4 */
    n = arp_frame(f, false, 2, ROGUE, "10.180.0.5", "0.0.0.0");
    assert_int_equal(na_dad_classify(f, n - 1, x, own, 2, mac), NA_DAD_NONE);
    f[12] = 0x08, f[13] = 0x00;
    assert_int_equal(na_dad_classify(f, n, x, own, 2, mac), NA_DAD_NONE);
    n = arp_frame(f, false, 2, ROGUE, "10.180.0.5", "0.0.0.0");
    f[14 + 5] = 16;
    assert_int_equal(na_dad_classify(f, n, x, own, 2, mac), NA_DAD_NONE);
    /* a reply with an unknown opcode */
    n = arp_frame(f, false, 9, ROGUE, "10.180.0.5", "0.0.0.0");
    assert_int_equal(na_dad_classify(f, n, x, own, 2, mac), NA_DAD_NONE);
    /* no own MAC at all: the port's reply is a conflict */
    n = arp_frame(f, false, 2, PORTMAC, "10.180.0.5", "0.0.0.0");
    assert_int_equal(na_dad_classify(f, n, x, NULL, 0, mac), NA_DAD_REPLY);
}

static void test_mac_and_reason(void **st)
{
    (void)st;
    uint8_t m[6];
    assert_int_equal(na_dad_mac_parse("FA:16:3e:11:22:33", m), 0);
    assert_memory_equal(m, PORTMAC, 6);
    assert_int_equal(na_dad_mac_parse("fa:16:3e:11:22", m), -1);
    assert_int_equal(na_dad_mac_parse("fa:16:3e:11:22:33:44", m), -1);
    assert_int_equal(na_dad_mac_parse("fa:16:3e:11:22:3", m), -1);
    assert_int_equal(na_dad_mac_parse(NULL, m), -1);
    char r[300];
    na_dad_reason(r, sizeof(r), "10.180.0.5", "net-1", ROGUE, NA_DAD_REPLY);
    assert_string_equal(r, "IP address 10.180.0.5 is already in use on network net-1 by MAC "
                           "02:ac:00:00:00:05 (ARP reply to a duplicate-address probe)");
    na_dad_reason(r, sizeof(r), "10.180.0.5", "net-1", ROGUE, NA_DAD_PROBE);
    assert_non_null(strstr(r, "(another host's duplicate-address probe for it)"));
    na_dad_reason(r, sizeof(r), "10.180.0.5", "net-1", ROGUE, NA_DAD_REQUEST);
    assert_non_null(strstr(r, "(ARP request sent from that address)"));
}

static json_t *state(const char *bridge)
{
    json_t *s = nb_json_pack_text(
        "{\"networks\": [{\"id\": \"acnet-1\", \"bridge\": \"BR\"},"
        "                {\"id\": \"acnet-2\"}],"
        " \"ports\": ["
        "  {\"id\": \"p1\", \"network_id\": \"acnet-1\", \"mac\": \"fa:16:3e:11:22:33\","
        "   \"tap\": \"actap1\", \"fixed_ips\": [{\"ip_address\": \"10.180.9.5\"},"
        "   {\"ip_address\": \"fd00:ac::5\"}, {\"ip_address\": \"10.180.8.5\"}]},"
        "  {\"id\": \"p2\", \"network_id\": \"acnet-1\", \"mac\": \"fa:16:3e:11:22:34\","
        "   \"tap\": \"actap1\", \"fixed_ips\": [{\"ip_address\": \"10.180.9.6\"}]},"
        "  {\"id\": \"p3\", \"network_id\": \"acnet-2\", \"mac\": \"fa:16:3e:11:22:35\","
        "   \"tap\": \"actap1\", \"fixed_ips\": [{\"ip_address\": \"10.180.9.7\"}]},"
        "  {\"id\": \"p4\", \"network_id\": \"acnet-1\", \"tap\": \"actap1\","
        "   \"fixed_ips\": [{\"ip_address\": \"10.180.9.8\"}]},"
        "  {\"id\": \"p5\", \"network_id\": \"acnet-1\", \"mac\": \"ROGUE\","
        "   \"tap\": \"actap1\", \"fixed_ips\": [{\"ip_address\": \"10.180.9.5\"}]},"
        "  {\"id\": \"p6\", \"network_id\": \"acnet-1\", \"mac\": \"fa:16:3e:11:22:36\","
        "   \"tap\": \"actap1\", \"fixed_ips\": [{\"ip_address\": \"10.180.9.5\"}]}]}");
    json_object_set_new(json_array_get(json_object_get(s, "networks"), 0), "bridge",
                        json_string(bridge));
    return s;
}

/* One row per IPv4 address of the ports asked for; none for a network
 * without a bridge (not wired here) or a port without a MAC. */
static void test_plan(void **st)
{
    (void)st;
    json_t *s = state("acbr1");
    json_t *want = json_pack("{s:b, s:b, s:b, s:b}", "p1", 1, "p2", 1, "p3", 1, "p4", 1);
    json_t *plan = na_dad_plan(s, want);
    assert_int_equal(json_array_size(plan), 3);
    const char *ips[] = {"10.180.9.5", "10.180.8.5", "10.180.9.6"};
    for (size_t i = 0; i < 3; i++) {
        json_t *r = json_array_get(plan, i);
        assert_string_equal(nb_json_str(r, "ip"), ips[i]);
        assert_string_equal(nb_json_str(r, "bridge"), "acbr1");
        assert_string_equal(nb_json_str(r, "network_id"), "acnet-1");
        assert_string_equal(nb_json_str(r, "port_id"), i < 2 ? "p1" : "p2");
    }
    json_decref(plan);
    json_decref(want);
    json_decref(s);
}

static void quiet(const char *cmd)
{
    char buf[600];
    snprintf(buf, sizeof(buf), "%s >/dev/null 2>&1", cmd);
    (void)!system(buf);
}

static void sh(const char *cmd)
{
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

static void cleanup_host(void)
{
    quiet("ip netns del acrogue1");
    quiet("ip link del acrv1");
    quiet("ip link del actap1");
    quiet("ip link del acbr1");
}

static char dir[] = "/tmp/nubo-test-dad-XXXXXX";

static json_t *ids(const char *a, const char *b)
{
    json_t *up = json_array();
    json_array_append_new(up, json_string(a));
    if (b)
        json_array_append_new(up, json_string(b));
    return up;
}

/* The probes on a real bridge: the rogue namespace holds 10.180.9.5. */
static void test_probe_on_bridge(void **st)
{
    (void)st;
    if (geteuid() != 0)
        skip(); /* namespaces and bridges need root */
    cleanup_host();
    sh("ip link add acbr1 type bridge stp_state 0 forward_delay 0 && ip link set acbr1 up");
    sh("ip tuntap add actap1 mode tap && ip link set actap1 master acbr1 up");
    sh("ip netns add acrogue1 && ip link add acrv1 type veth peer name eth0 netns acrogue1");
    sh("ip -n acrogue1 link set eth0 address 02:ac:00:00:00:05 up && "
       "ip -n acrogue1 addr add 10.180.9.5/24 dev eth0 && ip link set acrv1 master acbr1 up");
    assert_non_null(mkdtemp(dir));
    struct na *a = na_new("ac-host", dir);
    assert_non_null(a);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *s = state("acbr1");
    json_object_set_new(json_array_get(json_object_get(s, "ports"), 4), "mac",
                        json_string("02:ac:00:00:00:05"));
    nb_conf_set("agent", "duplicate_address_probe_timeout", "0.3");

    /* p1 (10.180.9.5, another MAC) and p2 (10.180.9.6, free), one batch:
     * one timeout */
    json_t *up = ids("p1", "p2");
    double t0 = nb_time_mono();
    na_dad_check(a, &ctx, s, up);
    double took = nb_time_mono() - t0;
    assert_true(took >= 0.3 && took < 1.0);
    const char *why = nb_json_str(a->failed, "p1");
    assert_non_null(why);
    assert_string_equal(why, "IP address 10.180.9.5 is already in use on network acnet-1 by MAC "
                             "02:ac:00:00:00:05 (ARP reply to a duplicate-address probe)");
    assert_null(json_object_get(a->failed, "p2"));
    json_decref(up);

    /* the next scan: p1 still failed, nothing probed again */
    json_object_clear(a->failed);
    up = ids("p1", "p2");
    t0 = nb_time_mono();
    na_dad_check(a, &ctx, s, up);
    assert_true(nb_time_mono() - t0 < 0.2);
    assert_non_null(json_object_get(a->failed, "p1"));
    assert_null(json_object_get(a->failed, "p2"));
    /* and while the tap is gone (not up) */
    json_object_clear(a->failed);
    json_array_clear(up);
    na_dad_check(a, &ctx, s, up);
    assert_non_null(json_object_get(a->failed, "p1"));
    json_decref(up);

    /* p5 has the rogue's MAC: it is the same port answering, not a
     * conflict; p6 is ACTIVE already: logged, not failed */
    json_object_clear(a->failed);
    json_object_set_new(a->reported, "p6", json_true());
    up = ids("p5", "p6");
    na_dad_check(a, &ctx, s, up);
    assert_null(json_object_get(a->failed, "p5"));
    assert_null(json_object_get(a->failed, "p6"));
    assert_non_null(json_object_get(a->failed, "p1"));
    json_decref(up);

    /* the rogue leaves and p1's tap is a new one (the next boot): probed
     * again, no longer failed */
    sh("ip netns del acrogue1");
    sh("ip link del actap1 && ip tuntap add actap1 mode tap && ip link set actap1 master acbr1 up");
    json_object_clear(a->failed);
    up = ids("p1", NULL);
    t0 = nb_time_mono();
    na_dad_check(a, &ctx, s, up);
    assert_true(nb_time_mono() - t0 >= 0.3);
    assert_null(json_object_get(a->failed, "p1"));
    json_decref(up);

    /* a port that leaves the state is forgotten */
    json_array_remove(json_object_get(s, "ports"), 0);
    up = json_array();
    na_dad_check(a, &ctx, s, up);
    assert_null(json_object_get(a->probed, "p1"));
    json_decref(up);

    /* off: nothing probed */
    nb_conf_set("agent", "duplicate_address_probe", "false");
    up = ids("p2", NULL);
    json_object_del(a->probed, "p2");
    na_dad_check(a, &ctx, s, up);
    assert_null(json_object_get(a->probed, "p2"));
    nb_conf_set("agent", "duplicate_address_probe", "true");
    json_decref(up);

    json_decref(s);
    na_free(a);
    nb_rm_rf(dir);
    cleanup_host();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_frame),     cmocka_unit_test(test_classify),
        cmocka_unit_test(test_mac_and_reason),  cmocka_unit_test(test_plan),
        cmocka_unit_test(test_probe_on_bridge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

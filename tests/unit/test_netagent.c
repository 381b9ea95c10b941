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
#include "network/agent/dhcp.h"
#include "network/agent/netdev.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/nubo-test-netagent-XXXXXX";

#define BR1 "brqntagent01"
#define BR2 "brqntagent02"
#define TAP1 "ntagtap1"
#define NS1 "ntagns1"
#define NET1 "ntagnet-0000-4000-8000-000000000001"
#define QDHCP1 "qdhcp-" NET1
#define DTAP1 "tapntagdhcp1"
#define CLNS "ntagcl1"

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
    quiet("ip netns del " CLNS);
    quiet("ip link del ntagcl1r");
    quiet("ip link del " DTAP1);
    char kill_ours[300]; /* the dnsmasq this test started, by its pid file */
    snprintf(kill_ours, sizeof(kill_ours), "for f in %s/*/dhcp/*/pid; do kill $(cat $f); done",
             dir);
    quiet(kill_ours);
    quiet("ip netns del " QDHCP1);
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
    if (geteuid() != 0)
        skip(); /* namespaces and bridges need root */
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
    if (geteuid() != 0)
        skip(); /* namespaces and bridges need root */
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

static const struct na_dhcp_conf dconf = {
    .domain = "openstacklocal",
    .lease_seconds = 86400,
    .force_metadata = false,
    .isolated_metadata = true,
};

/* A network with a v4 subnet (gateway, DNS, a host route), a second v4
 * subnet, and v6 subnets in the three address modes. */
static json_t *dhcp_net(void)
{
    json_t *j = json_loads(
        "{\"id\": \"" NET1 "\", \"mtu\": 1450, \"bridge\": \"" BR1 "\","
        " \"subnets\": ["
        "  {\"id\": \"s4\", \"cidr\": \"203.0.113.16/28\", \"ip_version\": 4, \"gateway_ip\": "
        "\"203.0.113.17\", \"enable_dhcp\": true, \"dns_nameservers\": [\"198.51.100.53\"], "
        "\"host_routes\": [{\"destination\": \"198.51.100.0/24\", \"nexthop\": \"203.0.113.20\"}],"
        " \"ipv6_ra_mode\": null, \"ipv6_address_mode\": null},"
        "  {\"id\": \"s4b\", \"cidr\": \"10.99.0.0/24\", \"ip_version\": 4, \"gateway_ip\": null, "
        "\"enable_dhcp\": false, \"dns_nameservers\": [], \"host_routes\": []},"
        "  {\"id\": \"s6a\", \"cidr\": \"fd00:1::/64\", \"ip_version\": 6, \"gateway_ip\": "
        "\"fd00:1::1\", \"enable_dhcp\": true, \"dns_nameservers\": [], \"host_routes\": [], "
        "\"ipv6_ra_mode\": \"dhcpv6-stateful\", \"ipv6_address_mode\": \"dhcpv6-stateful\"},"
        "  {\"id\": \"s6b\", \"cidr\": \"fd00:2::/64\", \"ip_version\": 6, \"gateway_ip\": "
        "\"fd00:2::1\", \"enable_dhcp\": true, \"dns_nameservers\": [\"fd00::53\"], "
        "\"host_routes\": [], \"ipv6_ra_mode\": \"dhcpv6-stateless\", \"ipv6_address_mode\": "
        "\"dhcpv6-stateless\"},"
        "  {\"id\": \"s6c\", \"cidr\": \"fd00:3::/64\", \"ip_version\": 6, \"gateway_ip\": "
        "\"fd00:3::1\", \"enable_dhcp\": true, \"dns_nameservers\": [], \"host_routes\": [], "
        "\"ipv6_ra_mode\": \"slaac\", \"ipv6_address_mode\": \"slaac\"}],"
        " \"dhcp\": {\"port_id\": \"dhcpport\", \"mac\": \"fa:16:3e:00:10:02\", \"namespace\": "
        "\"" QDHCP1 "\", \"tap\": \"" DTAP1 "\", \"dev\": \"ns-ntagdhcp1\", \"fixed_ips\": ["
        "  {\"subnet_id\": \"s4\", \"ip_address\": \"203.0.113.18\", \"prefixlen\": 28},"
        "  {\"subnet_id\": \"s6a\", \"ip_address\": \"fd00:1::2\", \"prefixlen\": 64}]},"
        " \"dhcp_hosts\": ["
        "  {\"port_id\": \"p1\", \"mac\": \"fa:16:3e:00:10:21\", \"subnet_id\": \"s4\", "
        "\"ip_address\": \"203.0.113.21\", \"hostname\": \"host-203-0-113-21\"},"
        "  {\"port_id\": \"p1\", \"mac\": \"fa:16:3e:00:10:21\", \"subnet_id\": \"s6a\", "
        "\"ip_address\": \"fd00:1::21\", \"hostname\": \"host-fd00-1--21\"},"
        "  {\"port_id\": \"p1\", \"mac\": \"fa:16:3e:00:10:21\", \"subnet_id\": \"s6b\", "
        "\"ip_address\": \"fd00:2::21\", \"hostname\": \"host-fd00-2--21\"},"
        "  {\"port_id\": \"p2\", \"mac\": \"fa:16:3e:00:10:22\", \"subnet_id\": \"s4\", "
        "\"ip_address\": \"203.0.113.22\"},"
        "  {\"port_id\": \"p3\", \"mac\": \"fa:16:3e:00:10:23\", \"subnet_id\": \"s4b\", "
        "\"ip_address\": \"10.99.0.5\"}]}",
        0, NULL);
    assert_non_null(j);
    return j;
}

static void test_dhcp_render(void **st)
{
    (void)st;
    json_t *net = dhcp_net();
    char *h = na_dhcp_hostsfile(net, &dconf);
    assert_string_equal(h, "fa:16:3e:00:10:21,host-203-0-113-21.openstacklocal,203.0.113.21\n"
                           "fa:16:3e:00:10:21,tag:dhcpv6,host-fd00-1--21.openstacklocal,"
                           "[fd00:1::21]\n"
                           "fa:16:3e:00:10:22,host-203-0-113-22.openstacklocal,203.0.113.22\n");
    free(h);
    char *ah = na_dhcp_addn_hosts(net, &dconf);
    assert_non_null(strstr(ah, "203.0.113.21\thost-203-0-113-21.openstacklocal "
                               "host-203-0-113-21\n"));
    assert_non_null(strstr(ah, "10.99.0.5\thost-10-99-0-5.openstacklocal host-10-99-0-5\n"));
    free(ah);

    /* isolated (no router): the metadata route via the DHCP port, then the
     * default route, in 121 and 249 */
    char *o = na_dhcp_optsfile(net, NULL, &dconf);
    assert_string_equal(
        o, "tag:subnet-s4,option:dns-server,198.51.100.53\n"
           "tag:subnet-s4,option:classless-static-route,10.99.0.0/24,0.0.0.0,198.51.100.0/24,"
           "203.0.113.20,169.254.169.254/32,203.0.113.18,0.0.0.0/0,203.0.113.17\n"
           "tag:subnet-s4,249,10.99.0.0/24,0.0.0.0,198.51.100.0/24,203.0.113.20,169.254.169.254/"
           "32,203.0.113.18,0.0.0.0/0,203.0.113.17\n"
           "tag:subnet-s4,option:router,203.0.113.17\n"
           "tag:subnet-s6a,option6:domain-search,openstacklocal\n"
           "tag:subnet-s6b,option6:dns-server,[fd00::53]\n"
           "tag:subnet-s6b,option6:domain-search,openstacklocal\n");
    free(o);
    assert_true(na_dhcp_serves_metadata(net, NULL, &dconf));

    /* a router holds the gateway: the metadata route goes to it */
    json_t *routers = json_loads("[{\"interfaces\": [{\"fixed_ips\": [{\"subnet_id\": \"s4\", "
                                 "\"ip_address\": \"203.0.113.17\"}]}]}]",
                                 0, NULL);
    o = na_dhcp_optsfile(net, routers, &dconf);
    assert_non_null(strstr(o, "169.254.169.254/32,203.0.113.17,0.0.0.0/0,203.0.113.17\n"));
    free(o);
    assert_false(na_dhcp_serves_metadata(net, routers, &dconf));
    struct na_dhcp_conf forced = dconf;
    forced.force_metadata = true;
    assert_true(na_dhcp_serves_metadata(net, routers, &forced));
    json_decref(routers);

    /* no gateway, no routes: no 121, an empty router option */
    json_t *s4 = json_array_get(json_object_get(net, "subnets"), 0);
    json_object_set_new(s4, "gateway_ip", json_null());
    json_object_set_new(s4, "host_routes", json_array());
    json_array_remove(json_object_get(net, "subnets"), 1);
    struct na_dhcp_conf nomd = dconf;
    nomd.isolated_metadata = false;
    o = na_dhcp_optsfile(net, NULL, &nomd);
    assert_non_null(strstr(o, "tag:subnet-s4,option:router\n"));
    assert_null(strstr(o, "classless"));
    free(o);

    json_t *argv = na_dhcp_argv(net, "/d", &dconf);
    char *line = json_dumps(argv, JSON_COMPACT);
    assert_non_null(strstr(line, "\"--pid-file=/d/pid\",\"--dhcp-hostsfile=/d/host\","
                                 "\"--addn-hosts=/d/addn_hosts\",\"--dhcp-optsfile=/d/opts\","
                                 "\"--dhcp-leasefile=/d/leases\""));
    assert_non_null(strstr(line, "\"--dhcp-range=set:subnet-s4,203.0.113.16,static,"
                                 "255.255.255.240,86400s\""));
    assert_non_null(strstr(line, "\"--dhcp-range=set:subnet-s6a,fd00:1::,static,64,86400s\""));
    assert_non_null(strstr(line, "\"--dhcp-range=set:subnet-s6b,fd00:2::,static,64,86400s\""));
    assert_null(strstr(line, "subnet-s6c"));
    assert_non_null(strstr(line, "\"--dhcp-option-force=option:mtu,1450\""));
    assert_non_null(strstr(line, "\"--domain=openstacklocal\""));
    assert_non_null(strstr(line, "\"--dhcp-lease-max=16777216\""));
    free(line);
    json_decref(argv);
    json_decref(net);
}

/* Stale leases: an IPv4 lease goes when its (MAC, address) has no hosts
 * line; an IPv6 lease (no MAC in it) when its address has none or its
 * address moved to another MAC; the server's duid line, live leases and
 * lines that are not leases stay. */
static void test_dhcp_prune_leases(void **st)
{
    (void)st;
    const char *old_hosts = "fa:16:3e:00:10:21,host-203-0-113-21.openstacklocal,203.0.113.21\n"
                            "fa:16:3e:00:10:21,tag:dhcpv6,host-fd00-1--21.openstacklocal,"
                            "[fd00:1::21]\n"
                            "fa:16:3e:00:10:22,host-203-0-113-22.openstacklocal,203.0.113.22\n"
                            "fa:16:3e:00:10:22,tag:dhcpv6,host-fd00-1--22.openstacklocal,"
                            "[fd00:1::22]\n"
                            "fa:16:3e:00:10:23,tag:dhcpv6,host-fd00-1--23.openstacklocal,"
                            "[fd00:1::23]\n";
    /* port 22 deleted, its v4 address given to a new MAC (24); port 23's
     * v6 address moved to port 25; port 21 keeps its v4 address */
    const char *hosts = "fa:16:3e:00:10:21,host-203-0-113-21.openstacklocal,203.0.113.21\n"
                        "FA:16:3E:00:10:21,tag:dhcpv6,host-fd00-1--21.openstacklocal,"
                        "[fd00:1:0::21]\n"
                        "fa:16:3e:00:10:24,host-203-0-113-22.openstacklocal,203.0.113.22\n"
                        "fa:16:3e:00:10:25,tag:dhcpv6,host-fd00-1--23.openstacklocal,"
                        "[fd00:1::23]\n";
    const char *leases =
        "1764979200 fa:16:3e:00:10:21 203.0.113.21 host-203-0-113-21 01:fa:16:3e:00:10:21\n"
        "1764979200 fa:16:3e:00:10:22 203.0.113.22 host-203-0-113-22 *\n"
        "1764979200 fa:16:3e:00:10:21 203.0.113.99 * *\n"
        "duid 00:01:00:01:2e:9a:6b:1c:fa:16:3e:00:10:02\n"
        "1764979200 1041 fd00:1::21 host-fd00-1--21 00:03:00:01:fa:16:3e:00:10:21\n"
        "1764979200 1042 fd00:1::22 * 00:04:aa:bb\n"
        "1764979200 T1043 fd00:1::23 * 00:02:00:00:ab:11:01\n"
        "1764979200 1044 fd00:1::77 * *\n"
        "garbage\n";
    int dropped = -1;
    char *keep = na_dhcp_prune_leases(leases, old_hosts, hosts, &dropped);
    assert_int_equal(dropped, 5);
    assert_string_equal(
        keep, "1764979200 fa:16:3e:00:10:21 203.0.113.21 host-203-0-113-21 01:fa:16:3e:00:10:21\n"
              "duid 00:01:00:01:2e:9a:6b:1c:fa:16:3e:00:10:02\n"
              "1764979200 1041 fd00:1::21 host-fd00-1--21 00:03:00:01:fa:16:3e:00:10:21\n"
              "garbage\n");
    free(keep);
    /* without the previous hosts file a moved v6 address cannot be told:
     * its lease stays */
    keep = na_dhcp_prune_leases(leases, NULL, hosts, &dropped);
    assert_int_equal(dropped, 4);
    assert_non_null(strstr(keep, " fd00:1::23 "));
    free(keep);
    /* nothing stale: the same text */
    keep = na_dhcp_prune_leases("duid 00:01\n1 1041 fd00:1::21 * *\n", hosts, hosts, &dropped);
    assert_int_equal(dropped, 0);
    assert_string_equal(keep, "duid 00:01\n1 1041 fd00:1::21 * *\n");
    free(keep);
    keep = na_dhcp_prune_leases("", NULL, "", &dropped);
    assert_string_equal(keep, "");
    assert_int_equal(dropped, 0);
    free(keep);
}

/* The DHCP phase on this host: a client in a namespace of its own on the
 * bridge gets its address, router, MTU and routes from the agent's
 * dnsmasq; a killed dnsmasq comes back; the network leaving removes it
 * all. */
static void test_dhcp_host(void **st)
{
    (void)st;
    if (geteuid() != 0)
        skip(); /* namespaces and bridges need root */
    char sd[200];
    snprintf(sd, sizeof(sd), "%s/dhcp", dir);
    struct na *a = na_new("h1", sd);
    struct nb_ctx ctx;
    nb_ctx_init_system(&ctx, NULL);
    json_t *net = dhcp_net();
    json_t *state = json_pack("{s:[O], s:[], s:[]}", "networks", net, "ports", "routers");
    assert_int_equal(na_l2_sync(a, &ctx, state), 0);
    int rc = na_dhcp_sync(a, &ctx, state);
    if (rc < 0)
        fail_msg("dhcp sync: %s", nb_ctx_message(&ctx));
    char pidpath[300];
    snprintf(pidpath, sizeof(pidpath), "%s/dhcp/" NET1 "/pid", sd);
    char *pid1 = nb_read_file(pidpath, NULL);
    assert_non_null(pid1);
    /* idempotent: the same dnsmasq */
    assert_int_equal(na_dhcp_sync(a, &ctx, state), 0);
    char *pid2 = nb_read_file(pidpath, NULL);
    assert_string_equal(pid1, pid2);
    free(pid2);

    sh("ip netns add " CLNS);
    sh("ip link add ntagcl1r type veth peer name eth0 netns " CLNS);
    sh("ip link set ntagcl1r master " BR1 " up");
    sh("ip -n " CLNS " link set eth0 address fa:16:3e:00:10:21 up");
    sh("ip -n " CLNS " link set lo up");
    char script[300];
    snprintf(script, sizeof(script), "%s/udhcpc.sh", dir);
    FILE *f = fopen(script, "w");
    fprintf(f, "#!/bin/sh\n[ \"$1\" = bound ] && echo \"LEASE ip=$ip mask=$mask router=$router "
               "mtu=$mtu domain=$domain routes=$staticroutes\"\nexit 0\n");
    fclose(f);
    chmod(script, 0755);
    char cmd[800], out[2000] = "";
    snprintf(cmd, sizeof(cmd),
             "ip netns exec " CLNS " busybox udhcpc -i eth0 -n -q -t 5 -T 1 -A 1 -O mtu -O "
             "staticroutes -O domain -s %s 2>/dev/null",
             script);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    pclose(p);
    if (!strstr(out, "LEASE ip=203.0.113.21 mask=28"))
        print_message("client saw: %s\n", out);
    assert_non_null(strstr(
        out, "LEASE ip=203.0.113.21 mask=28 router=203.0.113.17 mtu=1450 "
             "domain=openstacklocal routes=10.99.0.0/24 0.0.0.0 198.51.100.0/24 203.0.113.20 "
             "169.254.169.254/32 203.0.113.18 0.0.0.0/0 203.0.113.17"));
    /* the metadata address is on the namespace's leg */
    sh("ip -n " QDHCP1 " -o addr show dev ns-ntagdhcp1 | grep -q 169.254.169.254/32");

    /* a dead dnsmasq is started again */
    snprintf(cmd, sizeof(cmd), "kill -9 $(cat %s); sleep 0.2", pidpath);
    sh(cmd);
    assert_int_equal(na_dhcp_sync(a, &ctx, state), 0);
    pid2 = nb_read_file(pidpath, NULL);
    assert_string_not_equal(pid1, pid2);
    free(pid1);
    free(pid2);

    /* the namespace deleted by hand (its dnsmasq lives on in it): made
     * again, with a dnsmasq of its own (the DHCP below proves it) */
    sh("ip netns del " QDHCP1);
    pid1 = nb_read_file(pidpath, NULL);
    assert_int_equal(na_dhcp_sync(a, &ctx, state), 0);
    pid2 = nb_read_file(pidpath, NULL);
    assert_string_not_equal(pid1, pid2);
    free(pid1);
    free(pid2);

    /* a port added: hosts file rewritten, dnsmasq reloaded (same pid) */
    json_array_append_new(json_object_get(net, "dhcp_hosts"),
                          json_pack("{s:s, s:s, s:s, s:s}", "port_id", "p9", "mac",
                                    "fa:16:3e:00:10:29", "subnet_id", "s4", "ip_address",
                                    "203.0.113.29"));
    pid1 = nb_read_file(pidpath, NULL);
    assert_int_equal(na_dhcp_sync(a, &ctx, state), 0);
    pid2 = nb_read_file(pidpath, NULL);
    assert_string_equal(pid1, pid2);
    free(pid1);
    free(pid2);
    sh("ip -n " CLNS " link set eth0 address fa:16:3e:00:10:29");
    snprintf(cmd, sizeof(cmd),
             "ip netns exec " CLNS " busybox udhcpc -i eth0 -n -q -t 5 -T 1 -A 1 -s %s "
             "2>/dev/null | grep -q 'LEASE ip=203.0.113.29 '",
             script);
    sh(cmd);

    /* the port deleted and its address given to a new port (another MAC):
     * dnsmasq forgets the old lease and offers the address to the new MAC */
    json_t *hosts = json_object_get(net, "dhcp_hosts");
    json_array_remove(hosts, json_array_size(hosts) - 1);
    json_array_append_new(hosts, json_pack("{s:s, s:s, s:s, s:s}", "port_id", "p10", "mac",
                                           "fa:16:3e:00:10:30", "subnet_id", "s4", "ip_address",
                                           "203.0.113.29"));
    assert_int_equal(na_dhcp_sync(a, &ctx, state), 0);
    sh("ip -n " CLNS " link set eth0 address fa:16:3e:00:10:30");
    sh(cmd);

    /* a DHCPv6-stateful port whose lease (keyed by IAID and DUID; no
     * DHCPv6 client here, so written as dnsmasq writes it) outlives the
     * port: dnsmasq restarted without it */
    json_array_append_new(hosts, json_pack("{s:s, s:s, s:s, s:s}", "port_id", "p11", "mac",
                                           "fa:16:3e:00:10:31", "subnet_id", "s6a", "ip_address",
                                           "fd00:1::31"));
    assert_int_equal(na_dhcp_sync(a, &ctx, state), 0);
    char lpath[300];
    snprintf(lpath, sizeof(lpath), "%s/dhcp/" NET1 "/leases", sd);
    char *lt = nb_read_file(lpath, NULL);
    assert_non_null(lt);
    FILE *lf = fopen(lpath, "a");
    fprintf(lf, "%s4102444800 1041 fd00:1::31 * 00:03:00:01:fa:16:3e:00:10:31\n",
            strstr(lt, "duid ") ? "" : "duid 00:01:00:01:2e:9a:6b:1c:fa:16:3e:00:10:02\n");
    fclose(lf);
    free(lt);
    pid1 = nb_read_file(pidpath, NULL);
    json_array_remove(hosts, json_array_size(hosts) - 1);
    assert_int_equal(na_dhcp_sync(a, &ctx, state), 0);
    pid2 = nb_read_file(pidpath, NULL);
    assert_string_not_equal(pid1, pid2);
    free(pid1);
    free(pid2);
    lt = nb_read_file(lpath, NULL);
    assert_null(strstr(lt, "fd00:1::31"));
    free(lt);

    /* the network leaves: dnsmasq, veth, namespace gone; the bridge too
     * (l2) */
    json_t *empty = json_pack("{s:[], s:[], s:[]}", "networks", "ports", "routers");
    assert_int_equal(na_dhcp_sync(a, &ctx, empty), 0);
    assert_int_equal(na_l2_sync(a, &ctx, empty), 0);
    assert_false(na_dev_exists(DTAP1));
    assert_int_not_equal(system("ip netns list | grep -q " QDHCP1), 0);
    snprintf(cmd, sizeof(cmd), "pgrep -f '[-]-pid-file=%s/dhcp/' >/dev/null", sd);
    assert_int_not_equal(system(cmd), 0);
    json_t *owned = na_owned(a, "netns");
    assert_int_equal(json_array_size(owned), 0);
    json_decref(owned);
    sh("ip netns del " CLNS);
    json_decref(empty);
    json_decref(state);
    json_decref(net);
    na_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run),         cmocka_unit_test(test_run_netns),
        cmocka_unit_test(test_ownership),   cmocka_unit_test(test_l2),
        cmocka_unit_test(test_dhcp_render), cmocka_unit_test(test_dhcp_prune_leases),
        cmocka_unit_test(test_dhcp_host),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

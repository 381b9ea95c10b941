"""Security groups enforced per port with nftables (network/agent/sg.c,
sg_render.c).

Part one (TestKernel): the agent's renderer and load on a bench of network
namespaces wired to a real bridge (sg_netns.py): ports a and b in a group
with Neutron's default rules, c and d in a group with egress only, x an
unfiltered device on the bridge (as a DHCP port or a router leg is). Each
change is a new state rendered and loaded as the agent does, then probed
with real packets. Checks: the default group (same group in, all out), a
port in another group blocked, an ICMP rule letting pings in within a
second of the load and its removal blocking again, a TCP port range, a
remote CIDR, a remote group (and a member's removal), a removed rule
cutting an established connection (conntrack), port security off, a
spoofed source IP or MAC dropped, IPv6."""
import time

import pytest

import sg_netns
from sg_netns import Bench, Port, default_rules, rule

_why = sg_netns.missing()
WEB = "5e000000-0000-4000-8000-0000000000a1"
OTHER = "5e000000-0000-4000-8000-0000000000b2"


@pytest.fixture(scope="module")
def bench():
    if _why:
        pytest.skip(_why)
    b = Bench()
    b.up([Port("a", 1, [WEB]), Port("b", 2, [WEB]), Port("c", 3, [OTHER]),
          Port("d", 4, [OTHER]), Port("x", 5, [], filtered=False)])
    b.serve("a")
    b.serve("d")
    yield b
    b.down()


@pytest.fixture
def sgs(bench):
    """Each test starts from the two groups with their base rules."""
    bench.group(WEB, default_rules(WEB))
    bench.group(OTHER, [rule("egress", "IPv4", rid="o-out4"), rule("egress", "IPv6",
                                                                  rid="o-out6")])
    for p in bench.ports.values():
        p.port_security = True
        p.pairs = []
    bench.ports["c"].groups = [OTHER]
    bench.apply()
    return bench


class TestKernel:
    def test_default_group_same_group_in_all_out(self, sgs):
        assert sgs.ping("a", "b") and sgs.ping("b", "a")
        assert sgs.tcp("b", "a", 8000)
        assert sgs.ping("a", "x"), "egress to anywhere"
        assert not sgs.ping("x", "a"), "ingress from outside the group"
        assert not sgs.tcp("x", "a", 8000)

    def test_other_group_blocked_both_ways(self, sgs):
        assert not sgs.ping("c", "a")
        assert not sgs.tcp("c", "a", 22)
        assert not sgs.ping("a", "c"), "c's group has no ingress rule"

    def test_icmp_rule_in_force_at_once_and_removal_blocks(self, sgs):
        assert not sgs.ping("c", "a")
        sgs.groups[WEB]["rules"].append(rule("ingress", "IPv4", "icmp", rid="icmp"))
        load = sgs.apply()
        took = sgs.until(lambda: sgs.ping("c", "a", wait=1), True, timeout=2)
        print("ICMP rule: loaded in %.0f ms, first ping through %.0f ms later"
              % (load * 1000, (took or 0) * 1000))
        assert took is not None and load + took < 1.0
        assert not sgs.tcp("c", "a", 22), "only ICMP was allowed"
        sgs.groups[WEB]["rules"].pop()
        sgs.apply()
        assert not sgs.ping("c", "a")

    def test_icmp_type_and_code(self, sgs):
        # echo request only (type 8, code 0): the ping goes through
        sgs.groups[WEB]["rules"].append(rule("ingress", "IPv4", "icmp", 8, 0, rid="echo"))
        sgs.apply()
        assert sgs.ping("x", "a")
        sgs.groups[WEB]["rules"][-1] = rule("ingress", "IPv4", "icmp", 13, None, rid="ts")
        sgs.apply()
        assert not sgs.ping("x", "a"), "a timestamp rule does not allow echo"

    def test_tcp_port_range(self, sgs):
        sgs.groups[WEB]["rules"].append(rule("ingress", "IPv4", "tcp", 8002, 8005))
        sgs.apply()
        assert sgs.tcp("x", "a", 8002) and sgs.tcp("x", "a", 8005)
        assert not sgs.tcp("x", "a", 8001) and not sgs.tcp("x", "a", 8006)
        assert not sgs.ping("x", "a")

    def test_protocol_number(self, sgs):
        sgs.groups[WEB]["rules"].append(rule("ingress", "IPv4", "6", 8007, 8007))
        sgs.apply()
        assert sgs.tcp("x", "a", 8007) and not sgs.tcp("x", "a", 8008)

    def test_remote_cidr(self, sgs):
        x, c = sgs.ports["x"], sgs.ports["c"]
        sgs.groups[WEB]["rules"].append(rule("ingress", "IPv4", "tcp", 22, 22,
                                             prefix=x.ip + "/32"))
        sgs.apply()
        assert sgs.tcp("x", "a", 22)
        assert not sgs.tcp("c", "a", 22), "%s is outside %s/32" % (c.ip, x.ip)

    def test_remote_group_and_member_removal(self, sgs):
        sgs.groups[WEB]["rules"].append(rule("ingress", "IPv4", "tcp", 8008, 8008,
                                             group=OTHER, rid="from-other"))
        sgs.apply()
        assert sgs.tcp("c", "a", 8008), "c is a member of the remote group"
        assert not sgs.tcp("x", "a", 8008)
        held = sgs.held("c", "a", 8008)
        assert held.stdout.readline().strip() == "OK"
        # c leaves the group: its established connection is cut too
        sgs.ports["c"].groups = []
        sgs.apply()
        held.stdin.write("send\n")
        held.stdin.flush()
        assert held.stdout.readline().startswith("FAIL")
        assert not sgs.tcp("c", "a", 8008)

    def test_rule_removal_cuts_established_connection(self, sgs):
        sgs.groups[WEB]["rules"].append(rule("ingress", "IPv4", "tcp", 8003, 8003, rid="t"))
        sgs.groups[WEB]["rules"].append(rule("ingress", "IPv4", "udp", 53, 53, rid="u"))
        sgs.apply()
        held = sgs.held("x", "a", 8003)
        assert held.stdout.readline().strip() == "OK"
        # another rule goes: the TCP flow stays
        sgs.groups[WEB]["rules"].pop()
        sgs.apply()
        held.stdin.write("send\n")
        held.stdin.flush()
        assert held.stdout.readline().strip() == "OK"
        # its own rule goes: cut (Neutron deletes the conntrack entries)
        sgs.groups[WEB]["rules"].pop()
        sgs.apply()
        held.stdin.write("send\n")
        held.stdin.flush()
        assert held.stdout.readline().startswith("FAIL")

    def test_port_security_off(self, sgs):
        assert not sgs.ping("x", "d")
        d = sgs.ports["d"]
        d.port_security = False
        d.groups = []
        sgs.apply()
        assert sgs.ping("x", "d") and sgs.tcp("x", "d", 8000)
        # no anti-spoofing either: d may send from another address
        assert sgs.ping("d", "x")
        d.port_security = True
        d.groups = [OTHER]
        sgs.apply()
        assert not sgs.ping("x", "d")

    def test_spoofed_source_ip_dropped(self, sgs):
        b = sgs.ports["b"]
        before = sgs.counter("ip spoof")
        sgs_ns = ["ip", "-n", b.ns]
        sg_netns.sh(*sgs_ns, "addr", "add", "203.0.113.77/28", "dev", "eth0")
        try:
            assert sgs.ping("b", "a")
            assert not sgs.ping("b", "a", source="203.0.113.77")
            assert sgs.counter("ip spoof") > before
            # allowed as an address pair, the same source passes
            b.pairs = [{"ip_address": "203.0.113.77", "mac_address": b.mac}]
            sgs.apply()
            assert sgs.ping("b", "a", source="203.0.113.77")
        finally:
            sg_netns.sh(*sgs_ns, "addr", "del", "203.0.113.77/28", "dev", "eth0")

    def test_spoofed_mac_dropped(self, sgs):
        b = sgs.ports["b"]
        assert sgs.ping("b", "a")
        before = sgs.counter("mac spoof")
        sg_netns.sh("ip", "-n", b.ns, "link", "set", "eth0", "address", "fa:16:3e:64:00:99")
        try:
            assert not sgs.ping("b", "a")
            assert sgs.counter("mac spoof") > before
        finally:
            sg_netns.sh("ip", "-n", b.ns, "link", "set", "eth0", "address", b.mac)

    def test_ipv6(self, sgs):
        assert sgs.ping("a", "b", v6=True), "same group, IPv6 (neighbour discovery allowed)"
        assert sgs.tcp("b", "a", 8000, v6=True)
        assert not sgs.ping("x", "a", v6=True)
        sgs.groups[WEB]["rules"].append(rule("ingress", "IPv6", "ipv6-icmp", rid="icmp6"))
        sgs.apply()
        assert sgs.ping("x", "a", v6=True)
        assert not sgs.ping("x", "a"), "an IPv6 rule does not open IPv4"

    def test_no_egress_rule_nothing_out(self, sgs):
        sgs.groups[WEB]["rules"] = [r for r in default_rules(WEB) if r["direction"] == "ingress"]
        sgs.apply()
        assert not sgs.ping("a", "x")
        assert not sgs.ping("a", "b"), "b's ingress allows it, a's egress does not"

    def test_tables_scoped_to_this_agent(self, sgs):
        out = sg_netns.sh("nft", "list", "table", "inet", "nubo_sg_" + sg_netns.TAG).stdout
        assert '"%s"' % sg_netns.BRIDGE in out
        assert "iifname != @bridges accept" in out

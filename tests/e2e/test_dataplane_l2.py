"""Layer 2 and DHCP with real guests: a libvirt all-in-one (TCG) whose host
runs the network agent, driven with the openstack CLI as an operator does.

Two guests on one network (MTU 1400, 203.0.113.16/29) get their fixed IP,
gateway and MTU by DHCP from the agent's dnsmasq in qdhcp-<net> and ping
each other (a user data script in each guest pings the other and prints
the result on its console). Their ports are bound to the host as Linux
bridge ports (binding:vif_type bridge), ACTIVE once their taps are on the
brq bridge, DOWN after `openstack server stop`, ACTIVE again after start;
the four agents are alive in `openstack network agent list`. Another
network's bridge is a separate layer 2: a namespace of this test on it does
not reach the guests, and does once moved to their bridge; with a port's
MAC it gets that port's address by DHCP (a new port reaches dnsmasq's hosts
file). The agent converges within its resync interval after its dnsmasq is
killed or its namespace deleted by hand. A "rogue" namespace on a network's
bridge holding a port's address fails that port (the agent's ARP probe) and
the boot on it, with the address and the rogue's MAC in the fault; without
the rogue the address boots. A restarted agent probes the wired ports again
and a running guest answering for its own address is no conflict. Deleting
the servers and networks
leaves no namespace, bridge or dnsmasq of the agent behind."""
import os
import subprocess
import time

import pytest

import dataplane as dp
from conftest import NUBO_BIN, unique
from test_libvirt import api, virsh, wait_status

_why = dp.dataplane_unavailable()
if _why and os.environ.get("NUBO_REQUIRE_LIBVIRT"):
    raise RuntimeError("data-plane tests required but: " + _why)
pytestmark = pytest.mark.skipif(bool(_why), reason=_why or "")

NET1, GW1, MTU1 = "203.0.113.16/29", "203.0.113.17", 1400
NET2, GW2 = "203.0.113.24/29", "203.0.113.25"
IP_A1, IP_A2, IP_PROBE = "203.0.113.20", "203.0.113.21", "203.0.113.22"
PROBE_NS, PROBE_DEV = "ntagentpr", "ntagentpr0"  # this test's own, on the guests' bridges


@pytest.fixture(scope="module")
def lab():
    c = dp.start_dataplane_cloud("dp-l2")
    try:
        n1, s1 = dp.make_network(c, unique("nt-agent-a"), NET1, GW1, mtu=MTU1)
        n2, s2 = dp.make_network(c, unique("nt-agent-b"), NET2, GW2)
        p1 = dp.make_port(c, n1, s1, IP_A1)
        p2 = dp.make_port(c, n1, s1, IP_A2)
        # the project's default group lets in only its own members: let the
        # test's probe namespace ping them, as an operator would
        c.cli("security", "group", "rule", "create", "--ingress", "--protocol", "icmp",
              p1["security_group_ids"][0] if "security_group_ids" in p1
              else p1["security_groups"][0], "-f", "json")
        a1 = dp.boot(c, unique("nt-agent-a1"), p1["id"], dp.ping_script(IP_A2))
        a2 = dp.boot(c, unique("nt-agent-a2"), p2["id"], dp.ping_script(IP_A1))
        c.lab = dict(n1=n1, s1=s1, n2=n2, s2=s2, p1=p1, p2=p2, a1=a1["id"], a2=a2["id"])
        for sid in (a1["id"], a2["id"]):
            assert wait_status(c, sid)["status"] == "ACTIVE"
        yield c
    finally:
        dp.sh("ip", "netns", "del", PROBE_NS, check=False)
        if dp.link_exists(PROBE_DEV):
            dp.sh("ip", "link", "del", PROBE_DEV, check=False)
        dp.stop_dataplane_cloud(c)


def bridge(net):
    return "brq" + net["id"][:11]


def tap(port):
    return "tap" + port["id"][:11]


def test_guests_get_their_address_by_dhcp_and_ping_each_other(lab):
    c, L = lab, lab.lab
    t0 = time.time()
    for sid, ip, peer in ((L["a1"], IP_A1, IP_A2), (L["a2"], IP_A2, IP_A1)):
        m = dp.wait_console_line(c, sid, r"DHCP-LEASE ip=(\S+) mask=(\d+) router=(\S+) mtu=(\d+)")
        assert m.groups() == (ip, "29", GW1, str(MTU1)), m.group(0)
        m = dp.wait_console_line(c, sid, r"NET-UP addr=(\S+) mtu=(\d+) routes=([^\n]*)")
        assert m.group(1) == ip + "/29" and m.group(2) == str(MTU1), m.group(0)
        # option 121 carries the default route and the metadata route
        assert "default via %s" % GW1 in m.group(3), m.group(0)
        assert "169.254.169.254 via" in m.group(3), m.group(0)
        m = dp.wait_console_line(c, sid, r"PEER-PING %s (OK|FAILED)" % peer.replace(".", r"\."),
                                 timeout=300)
        assert m.group(1) == "OK", dp.console(c, sid)[-2000:]
    print("two guests: boot to both peers pinged %.1f s" % (time.time() - t0))
    # the lease came from the agent's dnsmasq in qdhcp-<net>
    ns = "qdhcp-" + L["n1"]["id"]
    assert dp.netns_exists(ns)
    assert dp.dnsmasq_pid(c.state_dir, L["n1"]["id"])
    leases = open(os.path.join(dp.agent_dirs(c.state_dir)[0], "dhcp", L["n1"]["id"],
                               "leases")).read()
    assert L["p1"]["mac_address"] in leases and IP_A1 in leases, leases


def test_ports_are_bridge_ports_active_then_down_when_stopped(lab):
    c, L = lab, lab.lab
    br = bridge(L["n1"])
    for p in (L["p1"], L["p2"]):
        port = dp.wait_port_status(c, p["id"], "ACTIVE")
        assert port["binding:vif_type"] == "bridge", port
        assert port["binding:host_id"] == c.host, port
        assert dp.master_of(tap(p)) == br
    assert open("/sys/class/net/%s/mtu" % br).read().strip() == str(MTU1)
    assert open("/sys/class/net/%s/bridge/stp_state" % br).read().strip() == "0"
    xml = virsh("dumpxml", L["a1"]).stdout
    assert "<source bridge='%s'/>" % br in xml and "<target dev='%s'/>" % tap(L["p1"]) in xml, xml
    # stop: the tap goes, the port goes DOWN; start: ACTIVE again
    c.cli("server", "stop", L["a1"])
    assert wait_status(c, L["a1"], statuses=("SHUTOFF", "ERROR"), timeout=90)["status"] == "SHUTOFF"
    dp.wait_port_status(c, L["p1"]["id"], "DOWN", timeout=15)
    assert not dp.link_exists(tap(L["p1"]))
    assert dp.port_show(c, L["p2"]["id"])["status"] == "ACTIVE"
    c.cli("server", "start", L["a1"])
    assert wait_status(c, L["a1"], timeout=90)["status"] == "ACTIVE"
    # Nova's network-vif-plugged wait: ACTIVE only once the tap is wired
    assert dp.port_show(c, L["p1"]["id"])["status"] == "ACTIVE"
    assert dp.master_of(tap(L["p1"])) == br


def test_agents_are_alive(lab):
    c = lab
    rows = [r for r in c.cli("network", "agent", "list", "-f", "json") if r["Host"] == c.host]
    kinds = {r["Agent Type"]: r for r in rows}
    assert set(kinds) == {"Linux bridge agent", "DHCP agent", "L3 agent", "Metadata agent"}, rows
    for r in rows:
        assert r["Alive"] in (True, ":-)"), r
        assert r["State"] in (True, "UP"), r
    assert kinds["DHCP agent"]["Binary"] == "neutron-dhcp-agent"


def probe_dhcp(c, mac):
    """DHCP from the probe namespace with mac: the lease line, or ''."""
    script = os.path.join(c.state_dir, "probe-udhcpc.sh")
    with open(script, "w") as f:
        f.write('#!/bin/sh\n[ "$1" = bound ] && echo "LEASE ip=$ip mask=$mask router=$router '
                'mtu=$mtu"\nexit 0\n')
    os.chmod(script, 0o755)
    dp.sh("ip", "-n", PROBE_NS, "addr", "flush", "dev", "eth0")
    dp.sh("ip", "-n", PROBE_NS, "link", "set", "eth0", "address", mac)
    p = dp.in_netns(PROBE_NS, "busybox", "udhcpc", "-i", "eth0", "-n", "-q", "-t", "6", "-T",
                    "1", "-A", "1", "-O", "mtu", "-s", script, check=False)
    return "\n".join(l for l in p.stdout.splitlines() if l.startswith("LEASE"))


def test_other_network_is_another_layer_2_and_a_new_port_gets_dhcp(lab):
    c, L = lab, lab.lab
    b1, b2 = bridge(L["n1"]), bridge(L["n2"])
    # the other network is on the host too (its DHCP is served here)
    dp.wait_for("bridge " + b2, lambda: dp.link_exists(b2))
    dp.sh("ip", "netns", "add", PROBE_NS)
    dp.sh("ip", "link", "add", PROBE_DEV, "type", "veth", "peer", "name", "eth0", "netns",
          PROBE_NS)
    dp.sh("ip", "-n", PROBE_NS, "link", "set", "eth0", "up")
    dp.sh("ip", "-n", PROBE_NS, "addr", "add", IP_PROBE + "/29", "dev", "eth0")
    dp.sh("ip", "link", "set", PROBE_DEV, "master", b2, "up")
    # an address of the guests' subnet, on the other network's bridge:
    # nothing answers (no shared layer 2)
    p = dp.in_netns(PROBE_NS, "busybox", "ping", "-c", "3", "-i", "0.3", "-W", "1", IP_A1, check=False)
    assert p.returncode != 0 and " 0 packets received" in p.stdout, p.stdout
    # the same namespace on the guests' bridge reaches them
    dp.sh("ip", "link", "set", PROBE_DEV, "master", b1)
    p = dp.in_netns(PROBE_NS, "busybox", "ping", "-c", "3", "-i", "0.3", "-W", "2", IP_A2, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    # a new port on the network: its MAC gets its address, the network's MTU
    port = dp.make_port(c, L["n1"], L["s1"], IP_PROBE)
    L["probe"] = port
    lease = dp.wait_for("a lease for the new port",
                        lambda: probe_dhcp(c, port["mac_address"]), timeout=30, step=0.5)
    assert lease == "LEASE ip=%s mask=29 router=%s mtu=%d" % (IP_PROBE, GW1, MTU1), lease
    # a MAC dnsmasq does not know gets nothing (static ranges only)
    assert probe_dhcp(c, "fa:16:3e:ee:ee:ee") == ""


def test_agent_converges_after_dnsmasq_killed_or_namespace_deleted(lab):
    c, L = lab, lab.lab
    nid = L["n1"]["id"]
    ns = "qdhcp-" + nid
    pid = dp.dnsmasq_pid(c.state_dir, nid)
    assert pid
    os.kill(pid, 9)
    t0 = time.time()
    new = dp.wait_for("a new dnsmasq", lambda: (lambda p: p if p and p != pid else None)(
        dp.dnsmasq_pid(c.state_dir, nid)), timeout=dp.RESYNC + 5)
    print("dnsmasq back after %.1f s" % (time.time() - t0))
    assert new != pid
    dp.sh("ip", "netns", "del", ns)
    t0 = time.time()
    dp.wait_for("namespace " + ns, lambda: dp.netns_exists(ns), timeout=dp.RESYNC + 5)

    def served():
        p = dp.sh("ip", "-n", ns, "-o", "addr", "show", check=False)
        return ("169.254.169.254/32" in p.stdout and dp.dnsmasq_pid(c.state_dir, nid)
                and probe_dhcp(c, L["probe"]["mac_address"]))

    lease = dp.wait_for("DHCP served again in " + ns, served, timeout=dp.RESYNC + 15, step=0.5)
    print("namespace and DHCP back after %.1f s" % (time.time() - t0))
    assert "ip=" + IP_PROBE in lease, lease
    # the DHCP port is on the bridge again
    dhcp_ports = c.cli("port", "list", "--network", nid, "--device-owner", "network:dhcp",
                       "-f", "json")
    assert len(dhcp_ports) == 1
    assert dp.master_of("tap" + dhcp_ports[0]["ID"][:11]) == bridge(L["n1"])


NET_AC, GW_AC, IP_AC = "10.180.0.0/24", "10.180.0.1", "10.180.0.5"
ROGUE_NS, ROGUE_DEV, ROGUE_MAC = "acrogue", "acrogue0", "02:ac:00:00:00:05"


def instance_events(c, sid):
    st, body = api(c, "GET", "/servers/%s/os-instance-actions" % sid)
    assert st == 200, body
    out = []
    for a in body["instanceActions"]:
        st, one = api(c, "GET", "/servers/%s/os-instance-actions/%s" % (sid, a["request_id"]))
        assert st == 200, one
        out += one["instanceAction"].get("events", [])
    return out


def test_address_in_use_fails_the_port_and_the_boot(lab):
    """A host already answering for a port's address (a "rogue" namespace on
    the network's bridge) is caught by the agent's ARP probe before the
    guest uses it: the port ERROR with the address, the rogue's MAC and the
    network; the boot fails with "Virtual Interface creation failed" in the
    fault and the spawn event; the doctor prints the cause. Once the rogue
    is gone the same address boots ACTIVE on a fresh port."""
    c = lab
    t_start = time.time()
    net, sub = dp.make_network(c, unique("ac-dad"), NET_AC, GW_AC)
    br = bridge(net)
    servers, ports = [], []
    try:
        dp.wait_for("bridge " + br, lambda: dp.link_exists(br))
        dp.sh("ip", "netns", "add", ROGUE_NS)
        dp.sh("ip", "link", "add", ROGUE_DEV, "type", "veth", "peer", "name", "eth0", "netns",
              ROGUE_NS)
        dp.sh("ip", "-n", ROGUE_NS, "link", "set", "eth0", "address", ROGUE_MAC, "up")
        dp.sh("ip", "-n", ROGUE_NS, "addr", "add", IP_AC + "/24", "dev", "eth0")
        dp.sh("ip", "link", "set", ROGUE_DEV, "master", br, "up")
        port = dp.make_port(c, net, sub, IP_AC)
        ports.append(port["id"])
        s = dp.boot(c, unique("ac-dad-1"), port["id"])
        servers.append(s["id"])
        s = wait_status(c, s["id"], timeout=90)
        reason = ("IP address %s is already in use on network %s by MAC %s (ARP reply to a "
                  "duplicate-address probe)" % (IP_AC, net["id"], ROGUE_MAC))
        vif = "Virtual Interface creation failed: port %s is ERROR: %s" % (port["id"], reason)
        assert s["status"] == "ERROR", s
        fault = s.get("fault") or {}
        assert vif in fault.get("message", "") + fault.get("details", ""), fault
        evs = instance_events(c, s["id"])
        assert any(vif in (e.get("traceback") or "") and e["result"] == "Error" for e in evs), evs
        # the agent reported the port failed with the cause (the failed
        # build then unbinds it: DOWN, the reason kept)
        row = c.sql("SELECT status_reason FROM ports WHERE id = '%s'" % port["id"])[0]
        assert row["status_reason"] == reason, row
        logs = "".join(open(os.path.join(c.state_dir, "log", f)).read()
                       for f in os.listdir(os.path.join(c.state_dir, "log")))
        assert "port %s on host %s failed: %s" % (port["id"], c.host, reason) in logs
        p = subprocess.run([NUBO_BIN, "doctor", "server", s["id"], "--config",
                            os.path.join(c.state_dir, "nubo.conf")],
                           capture_output=True, text=True, timeout=120)
        assert "AddressSanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
        assert p.returncode == 1 and reason in p.stdout, p.stdout + p.stderr
        print("\n".join(l for l in p.stdout.splitlines() if reason in l))
        # the rogue leaves: the address boots on a fresh port
        dp.sh("ip", "netns", "del", ROGUE_NS)
        c.cli("server", "delete", "--wait", servers.pop())
        c.cli("port", "delete", ports.pop())
        port = dp.make_port(c, net, sub, IP_AC)
        ports.append(port["id"])
        t0 = time.time()
        s = dp.boot(c, unique("ac-dad-2"), port["id"])
        servers.append(s["id"])
        s = wait_status(c, s["id"], timeout=90)
        assert s["status"] == "ACTIVE", s
        print("boot to ACTIVE with the probe: %.1f s" % (time.time() - t0))
        assert dp.port_show(c, port["id"])["status"] == "ACTIVE"
    finally:
        dp.sh("ip", "netns", "del", ROGUE_NS, check=False)
        if dp.link_exists(ROGUE_DEV):
            dp.sh("ip", "link", "del", ROGUE_DEV, check=False)
        for sid in servers:
            c.cli("server", "delete", "--wait", sid, check=False)
        for pid in ports:
            c.cli("port", "delete", pid, check=False)
        c.cli("network", "delete", net["id"], check=False)
    print("address-conflict test: %.1f s" % (time.time() - t_start))


def logs_since(c, marks):
    """What each log file of the cloud got since marks (name -> size)."""
    d, out = os.path.join(c.state_dir, "log"), ""
    for f in os.listdir(d):
        with open(os.path.join(d, f), "rb") as fh:
            fh.seek(marks.get(f, 0))
            out += fh.read().decode(errors="replace")
    return out


def test_restarted_agent_probes_again_and_the_guests_own_answer_is_no_conflict(lab):
    """After a restart the agent probes the ports it finds wired again. A
    port the control side knows as DOWN (here by hand) whose running guest
    answers the probe for its own address with its own MAC is no conflict:
    the port goes ACTIVE; no port of the running guests is failed."""
    c, L = lab, lab.lab
    d = os.path.join(c.state_dir, "log")
    marks = {f: os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)}
    assert c.stop(timeout=60) == 0
    c.sql("UPDATE ports SET status = 'DOWN' WHERE id = '%s'" % L["p2"]["id"])
    c.start(timeout=60)
    t0 = time.time()
    dp.wait_port_status(c, L["p2"]["id"], "ACTIVE", timeout=30)
    print("port ACTIVE again %.1f s after the restart" % (time.time() - t0))
    assert dp.port_show(c, L["p1"]["id"])["status"] == "ACTIVE"
    new = logs_since(c, marks)
    assert "Network agent for host %s started" % c.host in new, new[-3000:]
    assert "already in use" not in new, new[-3000:]


def test_deleting_everything_leaves_nothing_of_the_agent(lab):
    c, L = lab, lab.lab
    dp.sh("ip", "netns", "del", PROBE_NS, check=False)
    for sid in (L["a1"], L["a2"]):
        c.cli("server", "delete", "--wait", sid)
    for p in (L["p1"], L["p2"], L["probe"]):
        c.cli("port", "delete", p["id"], check=False)
    for n in (L["n1"], L["n2"]):
        c.cli("network", "delete", n["id"])

    def gone():
        for n in (L["n1"], L["n2"]):
            if (dp.netns_exists("qdhcp-" + n["id"]) or dp.link_exists(bridge(n))
                    or dp.dnsmasq_pid(c.state_dir, n["id"])):
                return False
        return True

    dp.wait_for("the agent's namespaces, bridges and dnsmasq gone", gone, timeout=dp.RESYNC + 10)
    rec = dp.owned(c.state_dir)
    for n in (L["n1"], L["n2"]):
        assert "qdhcp-" + n["id"] not in rec.get("netns", []), rec
        assert bridge(n) not in rec.get("bridge", []), rec

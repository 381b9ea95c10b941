"""The control side with a real agent: an all-in-one whose host runs the
network agent ([network_agent] enabled = true; the fake driver, so no
guest is booted), driven as an operator does. The agent reports its four
Neutron agents (`openstack network agent list`, alive), gets the networks
DHCP-scheduled to it, builds their brq bridges, and a port bound to the host
goes ACTIVE when a tap named after it is up on its bridge and DOWN when the
tap goes (a tap made by hand here plays the guest's), and the DHCP port is
ACTIVE once the agent wired its qdhcp namespace. Everything made on the
host is removed again through the API (networks deleted: the agent removes
its bridges)."""
import json
import os
import subprocess
import time

import pytest

from conftest import Cloud, free_port, unique

AGENTS = {"Linux bridge agent": "neutron-linuxbridge-agent", "DHCP agent": "neutron-dhcp-agent",
          "L3 agent": "neutron-l3-agent", "Metadata agent": "neutron-metadata-agent"}

HOST = "nt-netctl-a"  # the one host (the fake driver's), its agent this process's

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the agent needs root (ip link)")


def ip(*args, check=True):
    return subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=20,
                          check=check)


def link_exists(dev):
    return os.path.exists("/sys/class/net/%s" % dev)


def master_of(dev):
    path = "/sys/class/net/%s/master" % dev
    return os.path.basename(os.readlink(path)) if os.path.islink(path) else None


def wait(what, fn, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    c = Cloud(tmp_path_factory.mktemp("netagents"), free_port(),
              ("--set", "network_agent.enabled=true",
               "--set", "fake.hosts=" + HOST,
               "--set", "agent.report_interval=2"))
    c.start()
    yield c
    # the seeded network's bridge and namespace go with it; then nothing of
    # this cloud is left
    tok = c.token()
    st, _, out = c.request("GET", "/networking/v2.0/networks", token=tok)
    bridges = ["brq" + n["id"][:11] for n in out["networks"]]
    spaces = ["qdhcp-" + n["id"] for n in out["networks"]]
    for n in out["networks"]:
        c.request("DELETE", "/networking/v2.0/networks/" + n["id"], token=tok)
    try:
        wait("the agent to remove its bridges and namespaces",
             lambda: not any(link_exists(b) for b in bridges) and
             not any(s in ip("netns", "list").stdout for s in spaces), timeout=30)
    finally:
        assert c.stop() == 0, c.tail()


_tok = {}


def api(cloud, method, path, body=None, expect=None):
    if "t" not in _tok:
        _tok["t"] = cloud.token()
    code, _, out = cloud.request(method, "/networking/v2.0/" + path, body, token=_tok["t"])
    if expect is not None:
        assert code == expect, (code, out)
    return code, out


def agents_by_type(cloud):
    rows = api(cloud, "GET", "agents", expect=200)[1]["agents"]
    return {a["agent_type"]: a for a in rows}


def test_agents_report(cloud):
    got = wait("four agents alive",
               lambda: (lambda a: a if len(a) == 4 and all(x["alive"] for x in a.values())
                        else None)(agents_by_type(cloud)))
    assert {t: a["binary"] for t, a in got.items()} == AGENTS
    assert {a["host"] for a in got.values()} == {HOST}
    lb = got["Linux bridge agent"]
    assert lb["configurations"].get("tunnel_types") == ["vxlan"], lb
    assert lb["configurations"].get("local_ip"), lb
    rows = cloud.cli("network", "agent", "list", "--agent-type", "dhcp", "-f", "json")
    assert [r["Binary"] for r in rows] == ["neutron-dhcp-agent"]
    assert rows[0]["Alive"] in (True, ":-)"), rows


def test_port_goes_active_and_down(cloud):
    host = wait("the agents", lambda: agents_by_type(cloud).get("Linux bridge agent"))["host"]
    dhcp = agents_by_type(cloud)["DHCP agent"]
    net = api(cloud, "POST", "networks", {"network": {"name": unique("ag")}},
              expect=201)[1]["network"]
    nid = net["id"]
    api(cloud, "POST", "subnets", {"subnet": {"network_id": nid, "cidr": "203.0.113.0/28",
                                              "ip_version": 4}}, expect=201)
    # DHCP: scheduled to this host's agent, its port bound there
    out = api(cloud, "GET", "networks/%s/dhcp-agents" % nid, expect=200)[1]
    assert [a["id"] for a in out["agents"]] == [dhcp["id"]]
    [dp] = api(cloud, "GET", "ports?device_owner=network:dhcp&network_id=" + nid,
               expect=200)[1]["ports"]
    assert dp["binding:host_id"] == host and dp["binding:vif_type"] == "bridge"
    assert dp["fixed_ips"][0]["ip_address"] == "203.0.113.2"
    # the agent wires its leg (qdhcp-<net> namespace): the DHCP port is ACTIVE
    wait("DHCP port ACTIVE", lambda: api(cloud, "GET", "ports/" + dp["id"])[1]["port"]["status"]
         == "ACTIVE")
    assert "qdhcp-" + nid in ip("netns", "list").stdout

    port = api(cloud, "POST", "ports", {"port": {
        "network_id": nid, "binding:host_id": host, "device_owner": "compute:nova",
        "device_id": "nt-netctl-dev"}}, expect=201)[1]["port"]
    pid = port["id"]
    assert port["binding:vif_type"] == "bridge" and port["status"] == "DOWN"
    bridge, tap = "brq" + nid[:11], "tap" + pid[:11]
    wait("the agent's bridge " + bridge, lambda: link_exists(bridge))
    st = api(cloud, "GET", "hosts/%s/state" % host, expect=200)[1]
    assert pid in [p["id"] for p in st["ports"]]

    # the "guest's" tap appears on the bridge (as libvirt puts it): the port
    # is ACTIVE within the agent's device scan (every second)
    ip("tuntap", "add", "dev", tap, "mode", "tap")
    try:
        ip("link", "set", tap, "master", bridge, "up")
        t0 = time.time()
        wait("port ACTIVE", lambda: api(cloud, "GET", "ports/" + pid)[1]["port"]["status"]
             == "ACTIVE")
        active_s = time.time() - t0
        assert active_s < 5, active_s
        assert master_of(tap) == bridge
    finally:
        ip("link", "del", tap, check=False)
    wait("port DOWN", lambda: api(cloud, "GET", "ports/" + pid)[1]["port"]["status"] == "DOWN")
    print("tap up -> port ACTIVE in %.2f s" % active_s)

    api(cloud, "DELETE", "ports/" + pid, expect=204)
    api(cloud, "DELETE", "networks/" + nid, expect=204)
    wait("the bridge removed", lambda: not link_exists(bridge))
    wait("the namespace removed", lambda: "qdhcp-" + nid not in ip("netns", "list").stdout)


def test_agent_admin_down_moves_nothing_alone(cloud):
    """The only DHCP agent taken out of service: no other agent to move
    to, so the networks keep it (Neutron's scheduler neither), and back."""
    dhcp = agents_by_type(cloud)["DHCP agent"]
    private = api(cloud, "GET", "networks?name=private", expect=200)[1]["networks"][0]
    api(cloud, "PUT", "agents/" + dhcp["id"], {"agent": {"admin_state_up": False}}, expect=200)
    out = api(cloud, "GET", "networks/%s/dhcp-agents" % private["id"], expect=200)[1]
    assert [a["id"] for a in out["agents"]] == [dhcp["id"]]
    api(cloud, "PUT", "agents/" + dhcp["id"], {"agent": {"admin_state_up": True}}, expect=200)


def test_router_hosted_by_l3_agent(cloud):
    l3 = agents_by_type(cloud)["L3 agent"]
    router = api(cloud, "POST", "routers", {"router": {"name": unique("r")}},
                 expect=201)[1]["router"]
    rid = router["id"]
    out = api(cloud, "GET", "routers/%s/l3-agents" % rid, expect=200)[1]
    assert [a["id"] for a in out["agents"]] == [l3["id"]]
    out = api(cloud, "GET", "agents/%s/l3-routers" % l3["id"], expect=200)[1]
    assert rid in [r["id"] for r in out["routers"]]
    st = api(cloud, "GET", "hosts/%s/state" % HOST, expect=200)[1]
    [r] = [r for r in st["routers"] if r["id"] == rid]
    assert r["namespace"] == "qrouter-" + rid and r["gateway"] is None
    assert r["interfaces"] == [] and r["floating_ips"] == []
    api(cloud, "DELETE", "routers/" + rid, expect=204)
    st = api(cloud, "GET", "hosts/%s/state" % HOST, expect=200)[1]
    assert rid not in [r["id"] for r in st["routers"]]

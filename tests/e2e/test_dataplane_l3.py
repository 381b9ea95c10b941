"""Routers and floating IPs on real packets: an all-in-one whose host runs
the network agent (its L2, DHCP and L3 phases), driven as an operator does
(`openstack router …`, `openstack floating ip …`). The "guests" are network
namespaces of this test (nt-l3-*) whose veth is named after their port
(tap<port[:11]>), as the guest's tap is, so the agent wires them as it
wires a guest; "the internet" is a namespace of this test on the public
network's bridge. Checked: the qrouter-<id> namespace and its qr-/qg-
devices, guests on two networks reaching each other through the router,
a floating IP reachable from the host (the public subnet's gateway is on
the bridge in the host's namespace, [l3] external_gateway_on_host) and
from the outside with its status ACTIVE, gone again when disassociated,
SNAT of a guest without one to the router's gateway address, a port
forwarding, and nothing of the router left once it is deleted."""
import json
import os
import socket
import subprocess
import time

import pytest

from conftest import Cloud, free_port, unique
from netagent_cleanup import remove_agent_leftovers

HOST = "nt-l3-a"  # the fake driver's one host; its agent runs in the cloud's process
# half of the l3 tests' public range (test_dataplane_l3_guest.py has the
# other): .49 is its gateway, on the host; the outside's address is held by
# a port of its own, so no floating IP takes it
PUBLIC_CIDR = "203.0.113.48/29"
OUTSIDE = "203.0.113.54"
NETS = {"a": "10.92.1.0/24", "b": "10.92.2.0/24"}

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the agent needs root (ip netns)")


def sh(*args, check=True, ns=None, timeout=20):
    argv = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=check)


def link_exists(dev):
    return os.path.exists("/sys/class/net/%s" % dev)


def netns_exists(name):
    return os.path.exists("/run/netns/%s" % name)


def wait(what, fn, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


def ping(addr, ns=None, count=1):
    p = sh("busybox", "ping", "-c", str(count), "-W", "1", addr, ns=ns, check=False)
    return p.returncode == 0


UDP_SERVER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.settimeout(float(sys.argv[2]))
try:
    d, a = s.recvfrom(100); print(a[0])
except socket.timeout:
    print("nothing")
"""


def udp_source_seen(server_ns, port, client_ns, dst):
    """The source address a UDP datagram from client_ns to dst:port has when
    it reaches server_ns."""
    srv = subprocess.Popen(["ip", "netns", "exec", server_ns, "/usr/bin/python3", "-c",
                            UDP_SERVER, str(port), "5"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    for _ in range(5):
        sh("/usr/bin/python3", "-c", "import socket; socket.socket(socket.AF_INET, "
           "socket.SOCK_DGRAM).sendto(b'x', (%r, %d))" % (dst, port), ns=client_ns)
        time.sleep(0.1)
    out, _ = srv.communicate(timeout=10)
    return out.strip()


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    c = Cloud(tmp_path_factory.mktemp("l3dp"), free_port(),
              ("--set", "network_agent.enabled=true", "--set", "fake.hosts=" + HOST,
               "--set", "agent.report_interval=2",
               "--set", "network.seed_public_cidr=" + PUBLIC_CIDR))
    c.start()
    yield c
    try:
        teardown_everything(c)
    finally:
        rc = c.stop()
        remove_agent_leftovers(c.state_dir)  # whatever the agent had not removed yet
        assert rc == 0, c.tail()


def owned(cloud):
    path = os.path.join(cloud.state_dir, "network-agent", HOST, "owned.json")
    try:
        with open(path) as f:
            return {k: v for k, v in json.load(f).items() if v}
    except (OSError, ValueError):
        return {}


def teardown_everything(cloud):
    """Deletes what the test made through the API, so that the agent removes
    its namespaces, bridges and processes before the cloud stops (a stopped
    agent leaves the data plane as it is)."""
    for f in api(cloud, "GET", "floatingips")[1]["floatingips"]:
        api(cloud, "DELETE", "floatingips/" + f["id"])
    for r in api(cloud, "GET", "routers")[1]["routers"]:
        for p in api(cloud, "GET", "ports?device_owner=network:router_interface&device_id="
                     + r["id"])[1]["ports"]:
            api(cloud, "PUT", "routers/%s/remove_router_interface" % r["id"],
                {"port_id": p["id"]})
        api(cloud, "DELETE", "routers/" + r["id"])
    for owner in ("compute:nova", ""):
        for p in api(cloud, "GET", "ports?device_owner=" + owner)[1]["ports"]:
            api(cloud, "DELETE", "ports/" + p["id"])
    for n in api(cloud, "GET", "networks")[1]["networks"]:
        api(cloud, "DELETE", "networks/" + n["id"])
    wait("the agent to remove what it made", lambda: not owned(cloud), timeout=30)


_tok = {}


def api(cloud, method, path, body=None, expect=None):
    if "t" not in _tok:
        _tok["t"] = cloud.token()
    code, _, out = cloud.request(method, "/networking/v2.0/" + path, body, token=_tok["t"])
    if expect is not None:
        assert code == expect, (code, out)
    return code, out


def make_guest(cloud, name, net_id, subnet_cidr):
    """A port bound to the host and a namespace playing its guest: a veth
    named after the port, its MAC and address, the router as gateway."""
    port = api(cloud, "POST", "ports", {"port": {
        "network_id": net_id, "binding:host_id": HOST, "device_owner": "compute:nova",
        "device_id": unique("nt-l3-dev")}}, expect=201)[1]["port"]
    ns, tap = "nt-l3-" + name, "tap" + port["id"][:11]
    sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", tap, "type", "veth", "peer", "name", "eth0", "netns", ns)
    # libvirt puts a guest's tap on its network's bridge, which the agent
    # makes once the port is bound to its host
    bridge = "brq" + net_id[:11]
    wait("the bridge " + bridge, lambda: link_exists(bridge))
    sh("ip", "link", "set", tap, "master", bridge, "up")
    addr = port["fixed_ips"][0]["ip_address"]
    sh("ip", "link", "set", "eth0", "address", port["mac_address"], "up", ns=ns)
    sh("ip", "link", "set", "lo", "up", ns=ns)
    sh("ip", "addr", "add", "%s/%s" % (addr, subnet_cidr.split("/")[1]), "dev", "eth0", ns=ns)
    gw = subnet_cidr.rsplit(".", 1)[0] + ".1"
    sh("ip", "route", "add", "default", "via", gw, ns=ns)
    return {"port": port, "ns": ns, "tap": tap, "ip": addr}


@pytest.fixture(scope="module")
def world(cloud):
    wait("the L3 agent alive", lambda: [a for a in api(cloud, "GET", "agents")[1]["agents"]
                                        if a["agent_type"] == "L3 agent" and a["alive"]])
    w = {"guests": {}, "nets": {}, "subs": {}}
    public = cloud.cli("network", "show", "public", "-f", "json")
    w["public"] = public
    w["bridge_pub"] = "brq" + public["id"][:11]
    # the SG phase, when linked in, lets pings and UDP in
    sg = [g for g in cloud.cli("security", "group", "list", "-f", "json")
          if g["Name"] == "default"][0]
    for proto in ("icmp", "udp", "tcp"):
        cloud.cli("security", "group", "rule", "create", "--protocol", proto, sg["ID"])
    for k, cidr in NETS.items():
        net = cloud.cli("network", "create", unique("l3dp-" + k), "-f", "json")
        sub = cloud.cli("subnet", "create", "--network", net["id"], "--subnet-range", cidr,
                        "--no-dhcp", unique("l3dp-sub"), "-f", "json")
        w["nets"][k], w["subs"][k] = net, sub
    router = cloud.cli("router", "create", unique("l3dp-r"), "-f", "json")
    w["router"] = router
    cloud.cli("router", "set", "--external-gateway", "public", router["id"])
    for k in NETS:
        cloud.cli("router", "add", "subnet", router["id"], w["subs"][k]["id"])
    for k in NETS:
        w["guests"][k] = make_guest(cloud, k, w["nets"][k]["id"], NETS[k])
    # the internet: a namespace on the public network's bridge
    wait("the public bridge", lambda: link_exists(w["bridge_pub"]))
    api(cloud, "POST", "ports", {"port": {"network_id": public["id"], "name": "nt-l3-outside",
                                          "fixed_ips": [{"ip_address": OUTSIDE}]}}, expect=201)
    sh("ip", "netns", "add", "nt-l3-out")
    sh("ip", "link", "add", "nt-l3-out0", "type", "veth", "peer", "name", "eth0", "netns",
       "nt-l3-out")
    sh("ip", "link", "set", "nt-l3-out0", "master", w["bridge_pub"], "up")
    sh("ip", "link", "set", "eth0", "up", ns="nt-l3-out")
    sh("ip", "addr", "add", OUTSIDE + "/" + PUBLIC_CIDR.split("/")[1], "dev", "eth0",
       ns="nt-l3-out")
    yield w
    for g in w["guests"].values():
        sh("ip", "netns", "del", g["ns"], check=False)
        sh("ip", "link", "del", g["tap"], check=False)
    sh("ip", "netns", "del", "nt-l3-out", check=False)
    sh("ip", "link", "del", "nt-l3-out0", check=False)


def router_ports(cloud, rid):
    return api(cloud, "GET", "ports?device_id=" + rid)[1]["ports"]


def test_router_namespace_and_east_west(cloud, world):
    rid, ns = world["router"]["id"], "qrouter-" + world["router"]["id"]
    t0 = time.time()
    wait("the router's namespace", lambda: netns_exists(ns))
    legs = router_ports(cloud, rid)
    assert len(legs) == 3
    want = {("qg-" if p["device_owner"] == "network:router_gateway" else "qr-") + p["id"][:11]:
            p for p in legs}

    def devices():
        out = json.loads(sh("ip", "-j", "addr", "show", ns=ns).stdout)
        return {l["ifname"]: l for l in out}
    def wired(d, p):
        addrs = {a["local"] for a in d["addr_info"] if a["family"] == "inet"}
        return d["address"] == p["mac_address"] and "UP" in d["flags"] and \
            {f["ip_address"] for f in p["fixed_ips"]} <= addrs
    wait("the router's devices with their MACs and addresses",
         lambda: (lambda devs: all(n in devs and wired(devs[n], p) for n, p in want.items()))(
             devices()))
    for name, p in want.items():
        # its peer is on the network's bridge
        tap = "tap" + p["id"][:11]
        master = os.path.basename(os.readlink("/sys/class/net/%s/master" % tap))
        assert master == "brq" + p["network_id"][:11]
    assert sh("sysctl", "-n", "net.ipv4.ip_forward", ns=ns).stdout.strip() == "1"
    routes = sh("ip", "route", "show", "default", ns=ns).stdout
    assert "via 203.0.113.49 dev qg-" in routes
    # the legs go ACTIVE
    wait("router ports ACTIVE", lambda: all(p["status"] == "ACTIVE"
                                            for p in router_ports(cloud, rid)))
    print("router wired in %.2f s" % (time.time() - t0))
    a, b = world["guests"]["a"], world["guests"]["b"]
    assert wait("a reaches b through the router", lambda: ping(b["ip"], ns=a["ns"]))
    assert ping(a["ip"], ns=b["ns"])
    # east-west traffic keeps its addresses
    assert udp_source_seen(b["ns"], 9101, a["ns"], b["ip"]) == a["ip"]


def test_snat_to_the_outside(cloud, world):
    a = world["guests"]["a"]
    router = cloud.cli("router", "show", world["router"]["id"], "-f", "json")
    gw_ip = router["external_gateway_info"]["external_fixed_ips"][0]["ip_address"]
    wait("a reaches the outside", lambda: ping(OUTSIDE, ns=a["ns"]))
    assert udp_source_seen("nt-l3-out", 9102, a["ns"], OUTSIDE) == gw_ip


def test_floating_ip(cloud, world):
    a = world["guests"]["a"]
    fip = cloud.cli("floating", "ip", "create", "public", "-f", "json")
    addr = fip["floating_ip_address"]
    assert not ping(addr)
    t0 = time.time()
    cloud.cli("floating", "ip", "set", "--port", a["port"]["id"], fip["id"])
    assert wait("the floating IP answers the host", lambda: ping(addr))
    reach_s = time.time() - t0
    wait("the floating IP ACTIVE", lambda: cloud.cli("floating", "ip", "show", fip["id"],
                                                     "-f", "json")["status"] == "ACTIVE")
    # from the outside, the guest sees the outside's address; the guest's
    # own traffic leaves with the floating address
    assert ping(addr, ns="nt-l3-out")
    assert udp_source_seen(a["ns"], 9103, "nt-l3-out", addr) == OUTSIDE
    assert udp_source_seen("nt-l3-out", 9104, a["ns"], OUTSIDE) == addr
    # the other guest reaches it at its floating address too (hairpin)
    assert ping(addr, ns=world["guests"]["b"]["ns"])
    ns = "qrouter-" + world["router"]["id"]
    rules = sh("nft", "list", "table", "ip", "neutron_l3_agent", ns=ns).stdout
    assert "ip daddr %s dnat to %s" % (addr, a["ip"]) in rules
    print("floating IP associated -> reachable in %.2f s" % reach_s)
    # disassociated: gone
    cloud.cli("floating", "ip", "unset", "--port", fip["id"])
    wait("the floating IP gone", lambda: not ping(addr))
    rules = sh("nft", "list", "table", "ip", "neutron_l3_agent", ns=ns).stdout
    assert addr not in rules
    cloud.cli("floating", "ip", "delete", fip["id"])


def test_port_forwarding(cloud, world):
    b = world["guests"]["b"]
    fip = cloud.cli("floating", "ip", "create", "public", "-f", "json")
    addr = fip["floating_ip_address"]
    cloud.cli("floating", "ip", "port", "forwarding", "create", "--internal-ip-address", b["ip"],
              "--port", b["port"]["id"], "--internal-protocol-port", "9105",
              "--external-protocol-port", "2205", "--protocol", "udp", fip["id"])
    ns = "qrouter-" + world["router"]["id"]
    wait("the forwarding in place", lambda: "dport 2205" in sh(
        "nft", "list", "table", "ip", "neutron_l3_agent", ns=ns).stdout)
    srv = subprocess.Popen(["ip", "netns", "exec", b["ns"], "/usr/bin/python3", "-c",
                            UDP_SERVER, "9105", "5"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    for _ in range(5):
        sh("/usr/bin/python3", "-c", "import socket; socket.socket(socket.AF_INET, "
           "socket.SOCK_DGRAM).sendto(b'x', (%r, 2205))" % addr, ns="nt-l3-out")
        time.sleep(0.1)
    out, _ = srv.communicate(timeout=10)
    assert out.strip() == OUTSIDE
    cloud.cli("floating", "ip", "delete", fip["id"])


def test_router_deleted_leaves_nothing(cloud, world):
    rid = world["router"]["id"]
    ns = "qrouter-" + rid
    taps = ["tap" + p["id"][:11] for p in router_ports(cloud, rid)]
    assert all(link_exists(t) for t in taps)
    for k in NETS:
        cloud.cli("router", "remove", "subnet", rid, world["subs"][k]["id"])
    cloud.cli("router", "delete", rid)
    wait("the router's namespace removed", lambda: not netns_exists(ns))
    wait("the router's taps removed", lambda: not any(link_exists(t) for t in taps))
    # the public subnet's gateway leaves the host's bridge with the last router on it
    # (the bridge itself goes when no leg of this host needs the network)
    wait("the host's gateway address removed", lambda: "203.0.113.49/29" not in sh(
        "ip", "addr", "show", "dev", world["bridge_pub"], check=False).stdout)
    assert not any(k.startswith("router_") for k in owned(cloud)), owned(cloud)
    assert not ping(world["guests"]["b"]["ip"], ns=world["guests"]["a"]["ns"])

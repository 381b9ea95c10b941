"""A floating IP and SNAT for a real guest: a libvirt (TCG) all-in-one whose
host runs the network agent, the test guest (tests/images) booted on a
tenant network behind a router to "public", as an operator does it:
`openstack floating ip create public`, `openstack server add floating ip`
makes the guest answer at the floating address from the host,
`openstack server remove floating ip` takes it away; the guest's user data
pings "the internet" (a namespace of this test on the public bridge), which
sees the router's gateway address. One guest; everything is deleted through
the API before the cloud stops, so the agent removes what it made."""
import json
import os
import re
import subprocess
import time

import pytest

from conftest import unique
from dataplane import dataplane_unavailable, start_dataplane_cloud, stop_dataplane_cloud
from test_libvirt import console

# the other half of the l3 tests' public range (test_dataplane_l3.py has
# 203.0.113.48/29): .57 is its gateway, on the host
PUBLIC_CIDR = "203.0.113.56/29"
OUTSIDE = "203.0.113.62"
NET_CIDR = "10.93.1.0/24"

_why = dataplane_unavailable()
pytestmark = pytest.mark.skipif(bool(_why), reason=_why or "")


def sh(*args, ns=None, check=True, timeout=20):
    argv = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=check)


def ping(addr):
    return sh("busybox", "ping", "-c", "1", "-W", "1", addr, check=False).returncode == 0


def wait(what, fn, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.3)
    raise AssertionError("timed out waiting for " + what)


# the outside: the source of the first ICMP echo request it sees
ICMP_WATCH = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(float(sys.argv[1]))
try:
    while True:
        d, a = s.recvfrom(2048)
        if d[(d[0] & 15) * 4] == 8:
            print(a[0], flush=True)
            break
except socket.timeout:
    print("nothing")
"""

USER_DATA = """#!/bin/sh
n=0
while [ $n -lt 180 ]; do
  if ping -c 1 -W 1 %s >/dev/null 2>&1; then echo "PING-OUT ok"; exit 0; fi
  n=$((n+1))
done
echo "PING-OUT failed"
""" % OUTSIDE


def neutron(c, method, path, body=None):
    if not getattr(c, "_tok", None):
        c._tok = c.token()
    return c.request(method, "/networking/v2.0/" + path, body, token=c._tok)


@pytest.fixture(scope="module")
def lv(tmp_path_factory):
    c = start_dataplane_cloud("l3g", "--set", "network.seed_public_cidr=" + PUBLIC_CIDR)
    try:
        yield c
    finally:
        try:
            delete_everything(c)
        finally:
            assert stop_dataplane_cloud(c) == 0, c.tail()


def delete_everything(c):
    for s in c.cli("server", "list", "-f", "json"):
        c.cli("server", "delete", "--wait", s["ID"], check=False)
    for f in neutron(c, "GET", "floatingips")[2]["floatingips"]:
        neutron(c, "DELETE", "floatingips/" + f["id"])
    for r in neutron(c, "GET", "routers")[2]["routers"]:
        for p in neutron(c, "GET", "ports?device_owner=network:router_interface&device_id="
                         + r["id"])[2]["ports"]:
            neutron(c, "PUT", "routers/%s/remove_router_interface" % r["id"],
                    {"port_id": p["id"]})
        neutron(c, "DELETE", "routers/" + r["id"])
    for p in neutron(c, "GET", "ports?device_owner=")[2]["ports"]:
        neutron(c, "DELETE", "ports/" + p["id"])
    for n in neutron(c, "GET", "networks")[2]["networks"]:
        neutron(c, "DELETE", "networks/" + n["id"])
    for _ in range(100):  # the agent removes its namespaces and bridges
        ns = sh("ip", "netns", "list").stdout
        if not re.search(r"qrouter-|qdhcp-", ns) or not any(
                d for d in os.listdir(os.path.join(c.state_dir, "network-agent"))
                if owned_any(c, d)):
            break
        time.sleep(0.3)
    sh("ip", "netns", "del", "nt-l3g-out", check=False)
    sh("ip", "link", "del", "nt-l3g-out0", check=False)


def owned_any(c, host):
    try:
        with open(os.path.join(c.state_dir, "network-agent", host, "owned.json")) as f:
            return any(json.load(f).values())
    except (OSError, ValueError):
        return False


def test_guest_floating_ip_and_snat(lv):
    c = lv
    public = c.cli("network", "show", "public", "-f", "json")
    outside_port = neutron(c, "POST", "ports", {"port": {
        "network_id": public["id"], "name": "nt-l3g-outside",
        "fixed_ips": [{"ip_address": OUTSIDE}]}})
    assert outside_port[0] == 201, outside_port
    # the default group lets pings in (the SG phase, when linked in)
    sg = [g for g in c.cli("security", "group", "list", "-f", "json")
          if g["Name"] == "default"][0]
    c.cli("security", "group", "rule", "create", "--protocol", "icmp", sg["ID"])
    net = c.cli("network", "create", unique("l3g"), "-f", "json")
    sub = c.cli("subnet", "create", "--network", net["id"], "--subnet-range", NET_CIDR,
                unique("l3g-sub"), "-f", "json")
    router = c.cli("router", "create", unique("l3g-r"), "-f", "json")
    c.cli("router", "set", "--external-gateway", "public", router["id"])
    c.cli("router", "add", "subnet", router["id"], sub["id"])
    gw_ip = c.cli("router", "show", router["id"], "-f", "json")[
        "external_gateway_info"]["external_fixed_ips"][0]["ip_address"]
    # the internet, on the public bridge, watching for the guest's pings
    bridge = "brq" + public["id"][:11]
    wait("the public bridge", lambda: os.path.exists("/sys/class/net/" + bridge))
    sh("ip", "netns", "add", "nt-l3g-out")
    sh("ip", "link", "add", "nt-l3g-out0", "type", "veth", "peer", "name", "eth0", "netns",
       "nt-l3g-out")
    sh("ip", "link", "set", "nt-l3g-out0", "master", bridge, "up")
    sh("ip", "link", "set", "eth0", "up", ns="nt-l3g-out")
    sh("ip", "addr", "add", OUTSIDE + "/29", "dev", "eth0", ns="nt-l3g-out")
    watch = subprocess.Popen(["ip", "netns", "exec", "nt-l3g-out", "/usr/bin/python3", "-c",
                              ICMP_WATCH, "240"], stdout=subprocess.PIPE, text=True)
    ud = os.path.join(c.state_dir, "user-data.sh")
    with open(ud, "w") as f:
        f.write(USER_DATA)
    t0 = time.time()
    srv = c.cli("server", "create", "--flavor", "m1.tiny", "--image", c.image_id, "--network",
                net["id"], "--user-data", ud, "--wait", unique("l3g-vm"), "-f", "json")
    # (minutes under the sanitizers on a loaded machine, seconds otherwise)
    wait("the guest's lease", lambda: "NET-UP" in console(c, srv["id"]), timeout=180)
    # SNAT: the outside sees the router's gateway address
    out, _ = watch.communicate(timeout=250)
    assert out.strip() == gw_ip, (out, console(c, srv["id"])[-1500:])
    text = wait("the guest's user data", lambda: (lambda t: t if "PING-OUT" in t else None)(
        console(c, srv["id"])), timeout=120)
    assert "PING-OUT ok" in text, text[-1500:]
    print("\n".join(l for l in text.splitlines() if re.match(r"(NET|DHCP|METADATA|USER|PING)", l)))
    # a floating IP makes it reachable from the host
    fip = c.cli("floating", "ip", "create", "public", "-f", "json")
    addr = fip["floating_ip_address"]
    assert not ping(addr)
    c.cli("server", "add", "floating", "ip", srv["id"], addr)
    t1 = time.time()
    wait("the guest answering at " + addr, lambda: ping(addr), timeout=30)
    print("boot -> SNAT'ed ping seen %.1f s; floating IP reachable %.2f s after association"
          % (t1 - t0, time.time() - t1))
    shown = c.cli("server", "show", srv["id"], "-f", "json")
    assert addr in json.dumps(shown["addresses"])
    wait("the floating IP ACTIVE", lambda: c.cli("floating", "ip", "show", fip["id"], "-f",
                                                 "json")["status"] == "ACTIVE", timeout=20)
    c.cli("server", "remove", "floating", "ip", srv["id"], addr)
    wait("the floating address gone", lambda: not ping(addr), timeout=20)

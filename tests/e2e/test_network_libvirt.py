"""Port binding and status with a real guest: a libvirt all-in-one (TCG)
whose host runs the network agent (the default with the libvirt driver).
One server on the seeded network: its port is bound by the Linux bridge
mechanism (binding:vif_type bridge, on the server's host), its domain has a
bridge <interface> with the port's tap on brq<net[:11]>, and the port goes
ACTIVE when the agent finds the tap wired, DOWN while the guest is off,
and is gone with the server. The cloud's bridges and namespaces go with
its networks at the end."""
import os
import time

import pytest

from conftest import unique
from test_libvirt import QCOW2, api, libvirt_ready, start_libvirt_cloud, stop_cloud, virsh, \
    wait_status

_why = libvirt_ready()
pytestmark = pytest.mark.skipif(bool(_why), reason=_why or "")


def wait(what, fn, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError("timed out waiting for " + what)


def net(c, method, path, body=None, expect=None):
    if not getattr(c, "_token", None):
        c._token = c.token()
    code, _, out = c.request(method, "/networking/v2.0/" + path, body, token=c._token)
    if expect is not None:
        assert code == expect, (code, out)
    return out


@pytest.fixture(scope="module")
def lvnet():
    c = start_libvirt_cloud("nt-netctl")
    img = c.cli("image", "create", "--file", QCOW2, "--disk-format", "qcow2",
                "--container-format", "bare", "--public", "guest", "-f", "json")
    c.image_id = img["id"]
    yield c
    try:
        nets = net(c, "GET", "networks")["networks"]
        for s in c.sql("SELECT uuid FROM instances WHERE deleted = 0"):
            api(c, "DELETE", "/servers/" + s["uuid"])
        wait("the servers gone", lambda: not c.sql(
            "SELECT uuid FROM instances WHERE deleted = 0"), timeout=60)
        for n in nets:
            net(c, "DELETE", "networks/" + n["id"])
        wait("the agent's bridges and namespaces removed", lambda: not any(
            os.path.exists("/sys/class/net/brq" + n["id"][:11]) or
            os.path.exists("/run/netns/qdhcp-" + n["id"]) for n in nets))
    finally:
        assert stop_cloud(c) == 0, c.tail()


def port_of(c, sid):
    ports = net(c, "GET", "ports?device_id=" + sid, expect=200)["ports"]
    assert len(ports) == 1, ports
    return ports[0]


def test_guest_port_bound_and_active(lvnet):
    c = lvnet
    agents = wait("the host's four agents alive", lambda: (lambda a: a if len(a) == 4 and all(
        x["alive"] for x in a) else None)(net(c, "GET", "agents", expect=200)["agents"]))
    host = agents[0]["host"]
    private = net(c, "GET", "networks?name=private", expect=200)["networks"][0]
    bridge = "brq" + private["id"][:11]

    s = c.cli("server", "create", "--flavor", "m1.tiny", "--image", c.image_id,
              "--network", private["id"], unique("nt-netctl"), "-f", "json")
    sid = s["id"]
    t0 = time.time()
    s = wait_status(c, sid)
    assert s["status"] == "ACTIVE", s
    assert s["OS-EXT-SRV-ATTR:host"] == host
    p = port_of(c, sid)
    assert p["binding:vif_type"] == "bridge" and p["binding:host_id"] == host
    assert p["binding:vif_details"] == {"port_filter": True, "connectivity": "l2"}
    tap = "tap" + p["id"][:11]
    xml = virsh("dumpxml", sid).stdout
    assert "<interface type='bridge'>" in xml, xml
    assert "<source bridge='%s'/>" % bridge in xml and "<target dev='%s'/>" % tap in xml, xml
    assert p["mac_address"] in xml
    wait("the port ACTIVE", lambda: port_of(c, sid)["status"] == "ACTIVE")
    print("server ACTIVE -> port ACTIVE: %.2f s" % (time.time() - t0))
    assert os.path.basename(os.readlink("/sys/class/net/%s/master" % tap)) == bridge
    # the DHCP port of the network is on this host and wired too
    [dp] = net(c, "GET", "ports?device_owner=network:dhcp&network_id=" + private["id"],
               expect=200)["ports"]
    assert dp["binding:host_id"] == host
    wait("the DHCP port ACTIVE", lambda: net(c, "GET", "ports/" + dp["id"])["port"]["status"]
         == "ACTIVE")

    # the guest off: no tap, the port DOWN; on again: ACTIVE
    c.cli("server", "stop", sid, parse=False)
    wait_status(c, sid, statuses=("SHUTOFF",))
    wait("the port DOWN", lambda: port_of(c, sid)["status"] == "DOWN")
    c.cli("server", "start", sid, parse=False)
    wait_status(c, sid, statuses=("ACTIVE",))
    wait("the port ACTIVE again", lambda: port_of(c, sid)["status"] == "ACTIVE")

    # deleted with the server, and its tap with the domain
    c.cli("server", "delete", "--wait", sid, parse=False)
    assert net(c, "GET", "ports?device_id=" + sid, expect=200)["ports"] == []
    wait("the tap gone", lambda: not os.path.exists("/sys/class/net/" + tap))

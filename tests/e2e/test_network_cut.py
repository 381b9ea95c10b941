"""The network between a compute host and the control plane cut for two
minutes, then restored (issue 13, "Faults the cloud must survive").

A network namespace of the module's own is joined to the root namespace by
a veth pair (a /30 out of 198.18.0.0/15 chosen per run). The control plane
(`nubo serve`: api, conductor, scheduler, placement, metadata) runs in the
root namespace, listening on the root side's address, over a RabbitMQ vhost
and user of its own on the system broker (the guest user is loopback-only).
One fake-driver `nubo compute` agent (cut-a) runs inside the namespace, one
(cut-b) in the root namespace; spawns take 1.5 s so that boots are in
flight. The namespace's end of the link is set down for NUBO_NETCUT_S
seconds (120 by default) with boots and a delete in flight, and more asked
for during the cut; then it is set up again. Afterwards every server is
ACTIVE, or ERROR with a fault, none is left in a task state, allocations
match the servers, no name is doubled, no acknowledged request is lost,
cut-a is up again by itself, the guest deleted while it was away is
destroyed on it, and the cloud boots on it again. Everything (namespace,
veth, vhost, user) is removed afterwards."""
import os
import shutil
import subprocess
import time
import uuid

import pytest

from conftest import NUBO_BIN, Cloud, free_port, unique
from test_multiprocess import Proc, wait_for
from test_split_roles import lookup, rest, settled

RABBITMQCTL = "/usr/sbin/rabbitmqctl"
ROLES = "DEFAULT.roles=api,conductor,scheduler,placement,metadata"
REPORT_INTERVAL, DOWN_TIME = 1, 6


def unavailable():
    if os.geteuid() != 0:
        return "needs root (a network namespace)"
    if not os.path.exists(RABBITMQCTL):
        return "rabbitmqctl is not installed"
    return None


_why = unavailable()
pytestmark = pytest.mark.skipif(bool(_why), reason=_why or "")


def sh(*args, check=True):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=60)
    if check and p.returncode != 0:
        raise AssertionError("%s: %s%s" % (" ".join(map(str, args)), p.stdout, p.stderr))
    return p


class Link:
    """A namespace and a veth pair: root side .1, namespace side .2 of a /30
    in 198.18.0.0/15 picked from the pid (a free one)."""

    def __init__(self):
        tag = "%x" % os.getpid()
        self.ns, self.root_if, self.ns_if = "nubo-cut-" + tag, "ncr" + tag, "ncn" + tag
        used = sh("ip", "-4", "-o", "addr").stdout
        for i in range(16384):
            n = (os.getpid() + i) % 16384 * 4
            net = "198.%d.%d." % (18 + n // 65536, n // 256 % 256)
            if net + "%d/" % (n % 256 + 1) not in used:
                break
        self.root_ip, self.ns_ip = net + str(n % 256 + 1), net + str(n % 256 + 2)

    def up(self):
        sh("ip", "netns", "add", self.ns)
        sh("ip", "link", "add", self.root_if, "type", "veth", "peer", "name", self.ns_if)
        sh("ip", "link", "set", self.ns_if, "netns", self.ns)
        sh("ip", "addr", "add", self.root_ip + "/30", "dev", self.root_if)
        sh("ip", "link", "set", self.root_if, "up")
        for cmd in (("addr", "add", self.ns_ip + "/30", "dev", self.ns_if),
                    ("link", "set", self.ns_if, "up"), ("link", "set", "lo", "up")):
            sh("ip", "netns", "exec", self.ns, "ip", *cmd)
        return self

    def cut(self):
        """The namespace's end down: the root side keeps its address (and
        the control plane stays reachable from the root namespace), nothing
        crosses the link."""
        sh("ip", "netns", "exec", self.ns, "ip", "link", "set", self.ns_if, "down")

    def restore(self):
        sh("ip", "netns", "exec", self.ns, "ip", "link", "set", self.ns_if, "up")

    def down(self):
        sh("ip", "link", "del", self.root_if, check=False)
        sh("ip", "netns", "del", self.ns, check=False)


class Lab:
    def __init__(self, base):
        self.base = str(base)
        self.link = Link()
        self.vhost = "nubo-e2e-cut-%s" % uuid.uuid4().hex[:8]
        self.password = uuid.uuid4().hex
        self.serve, self.computes = None, {}

    def start(self):
        self.link.up()
        for args in (["add_user", self.vhost, self.password], ["add_vhost", self.vhost],
                     ["set_permissions", "-p", self.vhost, self.vhost, ".*", ".*", ".*"]):
            sh(RABBITMQCTL, "-q", *args)
        url = "rabbit://%s:%s@%s:5672/%s" % (self.vhost, self.password, self.link.root_ip,
                                             self.vhost)
        self.cloud = Cloud(self.base, free_port(), listen=self.link.root_ip, extra_args=(
            "--set", "bus.transport=amqp", "--set", "bus.transport_url=" + url,
            "--set", ROLES, "--set", "DEFAULT.report_interval=%d" % REPORT_INTERVAL,
            "--set", "DEFAULT.service_down_time=%d" % DOWN_TIME,
            "--set", "fake.spawn_delay_ms=1500"))
        self.cloud.start(timeout=60)
        assert self.cloud.stop() == 0, self.cloud.tail()
        self.conf = os.path.join(self.base, "nubo.conf")
        self.serve = Proc("serve", ["serve", "--config", self.conf, "--set", ROLES],
                          self.base).start().wait_ready(60)
        self.compute("cut-a", netns=self.link.ns)
        self.compute("cut-b")
        return self

    def compute(self, host, netns=None):
        logdir = os.path.join(self.base, "log-%s" % host)
        p = Proc("compute-%s" % host, ["compute", "--config", self.conf,
                                       "--set", "DEFAULT.host=%s" % host,
                                       "--set", "fake.hosts=%s" % host,
                                       "--set", "DEFAULT.log_dir=%s" % logdir], self.base)
        if netns:  # the same Proc, started through ip netns exec
            p.start = lambda: _start_in(p, netns)
        p.logdir = logdir
        self.computes[host] = p
        return p.start().wait_ready(60)

    def compute_log(self, host):
        with open(os.path.join(self.computes[host].logdir, "nubo-compute.log")) as f:
            return f.read()

    def stop(self):
        rcs = [p.stop() for p in self.computes.values()]
        if self.serve:
            rcs.append(self.serve.stop())
        return rcs

    def cleanup(self):
        for p in list(self.computes.values()) + [self.serve]:
            if p and p.p and p.p.poll() is None:
                p.p.kill()
                p.p.wait()
        self.link.down()
        sh(RABBITMQCTL, "-q", "delete_vhost", self.vhost, check=False)
        sh(RABBITMQCTL, "-q", "delete_user", self.vhost, check=False)
        if not os.environ.get("NUBO_E2E_KEEP"):
            shutil.rmtree(self.base, ignore_errors=True)


def _start_in(p, netns):
    p.out = open(p.out_path, "ab")
    p.out_at = p.out.tell()  # as Proc.start: wait_ready reads what this start wrote
    p.p = subprocess.Popen(["ip", "netns", "exec", netns, NUBO_BIN] + p.args, stdout=p.out,
                           stderr=subprocess.STDOUT)
    return p


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = Lab(tmp_path_factory.mktemp("netcut"))
    try:
        lab.start()
        lab.cloud.cli("quota", "set", "--instances", "60", "--cores", "60", "--ram", "200000",
                      "admin")
        yield lab
        rcs = lab.stop()
        assert all(rc == 0 for rc in rcs), (rcs, lab.serve.tail(),
                                            [p.tail() for p in lab.computes.values()])
    finally:
        lab.cleanup()


def boot(c, name, host=None):
    """POST /servers (admin's nova:HOST zone when host is given); the id."""
    body = {"name": name, "flavorRef": c._flavor, "imageRef": c._img, "networks": "none"}
    if host:
        body["availability_zone"] = "nova:%s" % host
    st, _, data = c.request("POST", "/compute/v2.1/servers", {"server": body}, token=c._token,
                            headers={"OpenStack-API-Version": "compute 2.37"})
    assert st == 202, (st, data)
    return data["server"]["id"]


def states(c):
    return {s["host"]: s["state"] for s in
            rest(c, "GET", "/compute/v2.1/os-services?binary=nova-compute")["services"]}


def allocations(c, sid):
    return rest(c, "GET", "/placement/allocations/%s" % sid)["allocations"]


def gone(c, sid):
    return c.request("GET", "/compute/v2.1/servers/%s" % sid, token=c._token)[0] == 404


def test_link_of_a_compute_host_cut_for_two_minutes(lab):
    c = lab.cloud
    c._img, c._flavor, _ = lookup(c)
    cut_s = float(os.environ.get("NUBO_NETCUT_S", "120"))
    wait_for("both agents up", lambda: states(c) == {"cut-a": "up", "cut-b": "up"}, 60)
    # ACTIVE servers on both hosts; two on cut-a are deleted around the cut
    base = {h: [boot(c, unique("nc-" + h), h) for _ in range(3)] for h in ("cut-a", "cut-b")}
    for h, sids in base.items():
        for sid in sids:
            v = settled(c, sid)
            assert v["status"] == "ACTIVE" and v["OS-EXT-SRV-ATTR:host"] == h, v
    del_before, del_during = base["cut-a"][0], base["cut-a"][1]
    # boots in flight on both hosts and a delete on cut-a, then the cut
    inflight = [boot(c, unique("nc-fly"), h) for h in ("cut-a", "cut-b") for _ in range(3)]
    rest(c, "DELETE", "/compute/v2.1/servers/%s" % del_before, ok=(204,))
    time.sleep(0.5)
    lab.link.cut()
    cut_at = time.time()
    # builds sent to cut-a before its heartbeat has gone stale: not lost
    early = [boot(c, unique("nc-early"), "cut-a") for _ in range(2)]
    wait_for("cut-a down", lambda: states(c).get("cut-a") == "down", 60, 0.5)
    down_after = time.time() - cut_at
    svc = {s["Host"]: s["State"] for s in c.cli("compute", "service", "list", "--service",
                                               "nova-compute", "-f", "json")}
    assert svc == {"cut-a": "down", "cut-b": "up"}, svc
    # boots during the cut land on cut-b
    during = [boot(c, unique("nc-cut")) for _ in range(4)]
    for sid in during:
        v = settled(c, sid, timeout=90)
        assert v["status"] == "ACTIVE" and v["OS-EXT-SRV-ATTR:host"] == "cut-b", v
    # a delete of a server on the down host: deleted locally at once
    rest(c, "DELETE", "/compute/v2.1/servers/%s" % del_during, ok=(204,))
    wait_for("the server on the down host deleted", lambda: gone(c, del_during), 30)
    assert allocations(c, del_during) == {}
    # cut-a's other servers stay ACTIVE in the API
    v = rest(c, "GET", "/compute/v2.1/servers/%s" % base["cut-a"][2])["server"]
    assert v["status"] == "ACTIVE" and not v["OS-EXT-STS:task_state"], v
    time.sleep(max(0, cut_s - (time.time() - cut_at)))
    lab.link.restore()
    restored_at = time.time()
    print("link cut %.0f s; cut-a down after %.1f s" % (restored_at - cut_at, down_after))
    wait_for("cut-a up again", lambda: states(c).get("cut-a") == "up", 150, 0.5)
    up_after = time.time() - restored_at
    print("cut-a up %.1f s after the restore" % up_after)

    views = [settled(c, sid, timeout=150) for sid in inflight + early]
    for v in views:
        if v["status"] == "ERROR":
            assert v.get("fault", {}).get("message"), v
        else:
            assert allocations(c, v["id"]), v
    print("in flight and early: %d ACTIVE, %d ERROR (%s)" % (
        sum(v["status"] == "ACTIVE" for v in views), sum(v["status"] == "ERROR" for v in views),
        sorted({v.get("fault", {}).get("message", "")[:80] for v in views
                if v["status"] == "ERROR"})))
    wait_for("the deleted servers gone", lambda: gone(c, del_before) and gone(c, del_during), 120)
    for sid in (del_before, del_during):
        assert allocations(c, sid) == {}, sid
    # no server in a task state, no duplicate name, allocations match
    servers = rest(c, "GET", "/compute/v2.1/servers/detail?all_tenants=1")["servers"]
    names = [s["name"] for s in servers]
    assert len(names) == len(set(names)), names
    for s in servers:
        assert s["status"] in ("ACTIVE", "ERROR") and not s["OS-EXT-STS:task_state"], s
        if s["status"] == "ACTIVE":
            assert list(allocations(c, s["id"])), s
    # the agent, back, destroyed the guest deleted while it was away
    # (the one deleted before the cut was terminated by it as usual)
    wait_for("cut-a destroyed the guest deleted while it was away", lambda: [
        l for l in lab.compute_log("cut-a").splitlines()
        if del_during in l and "Guest of a deleted instance destroyed on cut-a" in l], 60)
    assert [l for l in lab.compute_log("cut-a").splitlines()
            if del_before in l and "Instance destroyed successfully" in l]
    # and the cloud boots on cut-a again
    sid = boot(c, unique("nc-after"), "cut-a")
    v = settled(c, sid, timeout=60)
    assert v["status"] == "ACTIVE" and v["OS-EXT-SRV-ATTR:host"] == "cut-a", v

"""Several control planes at once (issue 13): two `nubo serve` processes,
cp1 and cp2, each with api, conductor, scheduler, placement and metadata,
on one MariaDB and one RabbitMQ vhost, and one `nubo compute` serving two
fake hosts (spawns take SPAWN_MS, so builds are in flight when it
matters). Only with NUBO_TEST_DB=mariadb (SQLite is one process's file).

What is checked (docs/architecture.md, "Several control planes"): a token
issued by one API is accepted by the other; each conductor holds its
liveness lease and exactly one holds conductor.periodic; boots spread over
both APIs at once all end ACTIVE, each once, with its allocation on its
host; cp2 killed -9 in the middle of boots: after its lease expires
(lease_time LEASE s) cp1 takes the periodic lease and its unfinished work,
and every server ends ACTIVE or ERROR with a fault, none in a task state;
a control plane started while the other has builds in flight leaves them
alone; SIGTERM gives the leases up."""
import os
import signal
import threading
import time

import pytest

from conftest import TEST_DB, free_port, unique
from test_multiprocess import Proc, Split, new_vhost, wait_for

pytestmark = pytest.mark.skipif(TEST_DB != "mariadb",
                                reason="several control planes need NUBO_TEST_DB=mariadb")

ROLES = "api,conductor,scheduler,placement,metadata"
MV = {"X-OpenStack-Nova-API-Version": "2.37"}
LEASE = 3
SPAWN_MS = 1500
HOSTS = ("fake-p1", "fake-p2")


@pytest.fixture(scope="module")
def vhost():
    if TEST_DB != "mariadb":
        pytest.skip("NUBO_TEST_DB=mariadb")
    yield from new_vhost()


class Planes(Split):
    """The cloud made by `nubo aio` (Split.create), then the control planes
    and the compute process. cp1 serves the API at the address the catalog
    names (the agents reach placement there); cp2 on a port of its own."""

    def __init__(self, state_dir, url):
        super().__init__(state_dir, url, (
            "--set", "conductor.lease_time=%d" % LEASE,
            "--set", "conductor.wait_for_computes_timeout=5",
            # a call whose handler died with cp2 is not delivered again (bus/amqp.c)
            "--set", "DEFAULT.rpc_response_timeout=10",
            "--set", "quota.instances=200", "--set", "quota.cores=400",
            "--set", "quota.ram=409600"))
        self.planes = {}
        self.ports = {"cp1": self.cloud.port}
        self.plane_extra = ()  # more --set for every plane

    def plane(self, name, wait=True):
        port = self.ports.setdefault(name, free_port())
        logdir = os.path.join(self.cloud.state_dir, "log-%s" % name)
        p = Proc(name, ["serve", "--config", self.conf, "--set", "DEFAULT.roles=%s" % ROLES,
                        "--set", "DEFAULT.host=%s" % name, "--set", "DEFAULT.log_dir=%s" % logdir,
                        "--set", "api.port=%d" % port, "--set", "metadata.port=%d" % (port + 1)] + list(self.plane_extra),
                 self.cloud.state_dir).start()
        p.logdir, p.port = logdir, port
        self.planes[name] = p
        return p.wait_ready(60) if wait else p

    def log(self, name, role="conductor"):
        with open(os.path.join(self.planes[name].logdir, "nubo-%s.log" % role)) as f:
            return f.read()

    def holder(self, name):
        return "conductor@%s:%d" % (name, self.planes[name].p.pid)

    def leases(self):
        rows = self.cloud.sql("SELECT name, holder, expires_at - UNIX_TIMESTAMP(NOW(6)) AS "
                              "remaining FROM nubo_leases")
        return {r["name"]: dict(r, remaining=float(r["remaining"])) for r in rows}

    def stop(self):
        rcs = [p.stop() for p in self.computes.values()]
        rcs += [p.stop() for p in self.planes.values()]
        return rcs


def start_compute(s, spawn_ms=SPAWN_MS):
    """One `nubo compute` for both fake HOSTS (spawns of spawn_ms), logging
    in log-compute."""
    logdir = os.path.join(s.cloud.state_dir, "log-compute")
    p = Proc("compute", ["compute", "--config", s.conf, "--set", "DEFAULT.host=%s" % HOSTS[0],
                         "--set", "fake.hosts=%s" % ",".join(HOSTS),
                         "--set", "fake.spawn_delay_ms=%d" % spawn_ms,
                         "--set", "DEFAULT.log_dir=%s" % logdir], s.cloud.state_dir)
    p.logdir = logdir
    s.computes["compute"] = p.start().wait_ready(30)


@pytest.fixture(scope="module")
def planes(tmp_path_factory, vhost):
    s = Planes(tmp_path_factory.mktemp("planes"), vhost).create()
    s.plane("cp2")  # first: it takes conductor.periodic, and then dies
    s.plane("cp1")
    start_compute(s)
    s.token = s.cloud.token()
    wait_for("both fake hosts up", lambda: len([
        h for h in call(s, "cp1", "GET", "/compute/v2.1/os-services?binary=nova-compute")[
            "services"] if h["state"] == "up"]) == 2, 30)
    img = call(s, "cp1", "GET", "/image/v2/images?name=cirros")["images"][0]["id"]
    flavor = [f for f in call(s, "cp1", "GET", "/compute/v2.1/flavors/detail")["flavors"]
              if f["name"] == "m1.tiny"][0]
    s.boot_ref = {"flavorRef": flavor["id"], "imageRef": img, "networks": "none"}
    s.flavor = flavor
    yield s
    rcs = s.stop()
    assert all(rc in (0, -signal.SIGKILL) for rc in rcs), (rcs, [p.tail() for p in s.planes.values()])


def call(s, plane, method, path, body=None, ok=(200,), token=None):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", s.ports[plane], timeout=60)
    h = dict(MV, **{"Content-Type": "application/json",
                    "X-Auth-Token": token or s.token})
    import json
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
    r = conn.getresponse()
    text = r.read().decode(errors="replace")
    conn.close()
    assert r.status in ok, (plane, method, path, r.status, text)
    return json.loads(text) if text else None


def boot_many(s, prefix, n, planes=("cp1", "cp2")):
    """n boots at once, spread over planes; {server id: name}."""
    out, errs = {}, []

    def one(i):
        name = "%s-%02d" % (prefix, i)
        try:
            sid = call(s, planes[i % len(planes)], "POST", "/compute/v2.1/servers",
                       {"server": dict(s.boot_ref, name=name)}, ok=(202,))["server"]["id"]
            out[sid] = name
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(e)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errs, errs
    return out


def views(s, sids, plane="cp1"):
    return {sid: call(s, plane, "GET", "/compute/v2.1/servers/%s" % sid)["server"] for sid in sids}


def settle(s, sids, timeout):
    """Every server ACTIVE or ERROR without a task state; their views."""
    def done():
        v = views(s, sids)
        return all(x["status"] in ("ACTIVE", "ERROR") and not x["OS-EXT-STS:task_state"]
                   for x in v.values()) and v
    return wait_for("servers settled", done, timeout, 0.5)


def check_allocations(s, v):
    """An ACTIVE server has exactly its flavor allocated, on its host's
    provider; no server has two."""
    rps = {r["name"]: r["uuid"] for r in call(s, "cp1", "GET", "/placement/resource_providers")[
        "resource_providers"]}
    for sid, x in v.items():
        allocs = call(s, "cp1", "GET", "/placement/allocations/%s" % sid)["allocations"]
        assert len(allocs) <= 1, (sid, allocs)
        if x["status"] == "ACTIVE":
            host = x["OS-EXT-SRV-ATTR:host"]
            assert list(allocs) == [rps[host]], (sid, host, allocs)
            res = allocs[rps[host]]["resources"]
            assert res["VCPU"] == s.flavor["vcpus"] and res["MEMORY_MB"] == s.flavor["ram"], res


def gone(s, sid):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", s.ports["cp1"], timeout=60)
    conn.request("GET", "/compute/v2.1/servers/%s" % sid, headers={"X-Auth-Token": s.token})
    st = conn.getresponse().status
    conn.close()
    return st == 404


def delete_all(s, sids):
    for sid in sids:
        call(s, "cp1", "DELETE", "/compute/v2.1/servers/%s" % sid, ok=(204, 404))
    wait_for("servers gone", lambda: all(gone(s, sid) for sid in sids), 30, 0.5)
    for sid in sids:  # no allocation outlives its server
        assert call(s, "cp1", "GET", "/placement/allocations/%s" % sid)["allocations"] == {}, sid


def test_a_token_of_one_is_valid_at_the_other_and_each_holds_its_lease(planes):
    s = planes
    st = call(s, "cp2", "GET", "/compute/v2.1/servers")  # issued by cp1's identity
    assert st == {"servers": []}
    t2 = call(s, "cp2", "POST", "/identity/v3/auth/tokens", {"auth": {"identity": {
        "methods": ["password"], "password": {"user": {"name": "admin", "domain": {
            "name": "Default"}, "password": s.cloud.admin_password}}}, "scope": {"project": {
                "name": "admin", "domain": {"name": "Default"}}}}}, ok=(201,))
    assert t2["token"]["user"]["name"] == "admin"
    leases = s.leases()
    for name in ("cp1", "cp2"):
        assert leases[s.holder(name)]["holder"] == s.holder(name), leases
        assert leases[s.holder(name)]["remaining"] > 0
    # exactly one runs the periodic work: cp2, started first
    assert leases["conductor.periodic"]["holder"] == s.holder("cp2"), leases
    assert "it runs the periodic work" in s.log("cp2")
    assert "it runs the periodic work" not in s.log("cp1")
    svc = {x["host"]: x["state"] for x in call(s, "cp1", "GET", "/compute/v2.1/os-services")[
        "services"] if x["binary"] == "nova-conductor"}
    assert svc["cp1"] == svc["cp2"] == "up", svc  # (and the creating aio's, until it is down)


def test_boots_over_both_apis_all_end_active_exactly_once(planes):
    s = planes
    prefix = unique("cpb")
    sids = boot_many(s, prefix, 16)
    v = settle(s, sids, 60)
    assert all(x["status"] == "ACTIVE" for x in v.values()), [
        x.get("fault") for x in v.values() if x["status"] != "ACTIVE"]
    listed = call(s, "cp2", "GET", "/compute/v2.1/servers/detail?name=%s" % prefix)["servers"]
    assert sorted(x["name"] for x in listed) == sorted(sids.values())  # each once
    assert {x["OS-EXT-SRV-ATTR:host"] for x in v.values()} <= set(HOSTS)
    check_allocations(s, v)
    # both conductors worked on them (the bus spreads the builds)
    owners = {r["nubo_conductor"] for r in s.cloud.sql(
        "SELECT nubo_conductor FROM instances WHERE display_name LIKE '%s-%%'" % prefix)}
    assert owners <= {s.holder("cp1"), s.holder("cp2")}, owners
    delete_all(s, sids)


def test_kill9_of_a_control_plane_mid_boots_the_other_takes_over(planes):
    s = planes
    prefix = unique("cpk")
    dead = s.holder("cp2")
    wait_for("cp2 holds the periodic lease", lambda: s.leases().get(
        "conductor.periodic", {}).get("holder") == dead, 3 * LEASE + 5, 0.3)
    sids = boot_many(s, prefix, 12)
    wait_for("builds of cp2 in flight", lambda: s.cloud.sql(
        "SELECT COUNT(*) AS n FROM instances WHERE display_name LIKE '%s-%%' AND task_state IS "
        "NOT NULL AND nubo_conductor = '%s'" % (prefix, dead))[0]["n"] >= 2, 20, 0.05)
    t0 = time.time()
    s.planes["cp2"].stop(signal.SIGKILL)
    v = settle(s, sids, 60)
    took = time.time() - t0
    for x in v.values():
        assert x["status"] == "ACTIVE" or x.get("fault", {}).get("message"), x
    wait_for("cp1 takes cp2 for dead", lambda: "Control plane %s is gone (its lease expired)"
             % dead in s.log("cp1"), 3 * LEASE + 5, 0.3)
    wait_for("take-over done", lambda: "Took over the unfinished work of control plane %s" % dead
             in s.log("cp1"), 30)
    leases = s.leases()
    assert leases["conductor.periodic"]["holder"] == s.holder("cp1"), leases
    assert dead not in leases, leases
    listed = call(s, "cp1", "GET", "/compute/v2.1/servers/detail?name=%s" % prefix)["servers"]
    assert sorted(x["name"] for x in listed) == sorted(sids.values())
    check_allocations(s, v)
    print("kill -9 of cp2: %d servers settled %.1f s later (%d ACTIVE)" % (
        len(v), took, sum(x["status"] == "ACTIVE" for x in v.values())))
    delete_all(s, sids)


def test_a_control_plane_started_meanwhile_leaves_the_others_builds_alone(planes):
    s = planes
    prefix = unique("cps")
    assert s.planes["cp2"].p.poll() is not None  # killed by the test before
    sids = boot_many(s, prefix, 6, planes=("cp1",))
    wait_for("builds spawning", lambda: s.cloud.sql(
        "SELECT COUNT(*) AS n FROM instances WHERE display_name LIKE '%s-%%' AND task_state = "
        "'spawning'" % prefix)[0]["n"] >= 3, 20, 0.1)
    s.plane("cp2")
    v = settle(s, sids, 60)
    assert all(x["status"] == "ACTIVE" for x in v.values()), [x.get("fault") for x in v.values()]
    log = wait_for("cp2's start-up recovery", lambda: "start-up recovery done" in s.log("cp2")
                   and s.log("cp2"), 30)
    assert "leaves the work of 1 live control plane(s) alone" in log
    for sid in sids:
        assert not [l for l in log.splitlines() if sid in l and "interrupted" in l], sid
    check_allocations(s, v)
    delete_all(s, sids)


def test_sigterm_gives_the_leases_up(planes):
    s = planes
    if s.planes["cp2"].p.poll() is not None:  # (when run alone)
        s.plane("cp2")
    me = s.holder("cp2")
    assert me in s.leases()
    assert s.planes["cp2"].stop() == 0
    wait_for("cp2's lease released and cleared", lambda: me not in s.leases(), 3 * LEASE + 5,
             0.3)
    assert "Control plane %s: leases given up" % me in s.log("cp2", "conductor")

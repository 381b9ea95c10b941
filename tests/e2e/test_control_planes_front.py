"""Several control planes behind one address (issue 13): the two `nubo
serve` of test_control_planes.py (one MariaDB, one RabbitMQ vhost, one
`nubo compute` with two fake hosts), now reached as an operator deploys
them, through one front.

- HAProxy (Debian's, `haproxy -f cfg -db`) in HTTP mode on the address the
  catalog names (`[api] public_url` of both planes; clouds.yaml and the
  agents' service user point there too), the two APIs as its backends,
  health-checked on /healthcheck, `retries` and `option redispatch`. Under
  it: 50 boots and some deletes, and cp2 (the periodic lease's holder)
  killed -9 halfway. A boot answered 202 is acknowledged; one that failed
  at the front (502/503, a reset) is not, but may have committed before
  the kill, so every server listed afterwards is accounted for: ACTIVE, or
  ERROR with a fault, never in a task state; each name once; allocations
  and fake guests match the ACTIVE servers exactly; acknowledged deletes
  gone. The openstack CLI and openstacksdk once through the front.
- `[api] reuse_port = true` (SO_REUSEPORT): both planes on one port, the
  kernel spreading connections over both; after cp2's kill -9 every new
  connection is answered by cp1, and a boot there ends ACTIVE (the agents'
  placement calls reach the survivor).

Only with NUBO_TEST_DB=mariadb."""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from conftest import TEST_DB, unique
from test_control_planes import HOSTS, LEASE, MV, Planes, call, start_compute
from test_multiprocess import new_vhost, wait_for

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
pytestmark = [
    pytest.mark.skipif(TEST_DB != "mariadb",
                       reason="several control planes need NUBO_TEST_DB=mariadb"),
    pytest.mark.skipif(not os.access(HAPROXY, os.X_OK), reason="haproxy is not installed"),
]
SPAWN_MS = 2000
BOOTS, DELETES, WORKERS = 50, 8, 10


@pytest.fixture
def vhost():
    """One per cloud (each test has its own): two clouds on one vhost would
    take each other's messages."""
    if TEST_DB != "mariadb":
        pytest.skip("NUBO_TEST_DB=mariadb")
    yield from new_vhost()


HAPROXY_CFG = """\
global
    log stdout format raw local0 info
    maxconn 4096

defaults
    mode http
    log global
    option httplog
    timeout connect 1s
    timeout client 90s
    timeout server 90s
    timeout queue 10s
    # a connection refused by a dead plane is tried again, on the other
    retries 3
    option redispatch 1

frontend api
    bind 127.0.0.1:{front}
    default_backend planes

backend planes
    balance roundrobin
    option httpchk
    http-check send meth GET uri /healthcheck
    http-check expect status 200
    default-server check inter 500ms fall 2 rise 2
{servers}
"""


class Front:
    """HAProxy in front of the planes' API ports, its log in a file."""

    def __init__(self, state_dir, port, backends):
        self.port = port
        self.cfg = os.path.join(state_dir, "haproxy.cfg")
        with open(self.cfg, "w") as f:
            f.write(HAPROXY_CFG.format(front=port, servers="\n".join(
                "    server %s 127.0.0.1:%d" % nb for nb in sorted(backends.items()))))
        check = subprocess.run([HAPROXY, "-c", "-f", self.cfg], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        self.log_path = os.path.join(state_dir, "haproxy.out")
        self.out = open(self.log_path, "ab")
        self.p = subprocess.Popen([HAPROXY, "-f", self.cfg, "-db"], stdout=self.out,
                                  stderr=subprocess.STDOUT)

    def answers(self):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            conn.request("GET", "/healthcheck")
            ok = conn.getresponse().status == 200
            conn.close()
            return ok
        except OSError:
            return False

    def statuses(self):
        """Counts of the HTTP statuses HAProxy answered (its httplog lines)."""
        out = {}
        with open(self.log_path) as f:
            for m in re.finditer(r" planes/\S+ \S+ (\d{3}) ", f.read()):
                out[m.group(1)] = out.get(m.group(1), 0) + 1
        return out

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            self.p.wait(10)
        self.out.close()


class FrontPlanes(Planes):
    """Planes whose catalog (and clouds.yaml, and the agents' service user)
    names the front's port: `nubo aio` created the cloud on it, each plane
    gets a port of its own and [api] public_url = the front."""

    def __init__(self, state_dir, url):
        super().__init__(state_dir, url)
        self.front_url = self.cloud.url
        self.ports = {"front": self.cloud.port}
        self.plane_extra = ("--set", "api.public_url=%s" % self.front_url)


def prepare(s, via):
    s.token = s.cloud.token()
    wait_for("both fake hosts up", lambda: len([
        h for h in call(s, via, "GET", "/compute/v2.1/os-services?binary=nova-compute")[
            "services"] if h["state"] == "up"]) == 2, 30)
    img = call(s, via, "GET", "/image/v2/images?name=cirros")["images"][0]["id"]
    s.flavor = [f for f in call(s, via, "GET", "/compute/v2.1/flavors/detail")["flavors"]
                if f["name"] == "m1.tiny"][0]
    s.boot_ref = {"flavorRef": s.flavor["id"], "imageRef": img, "networks": "none"}


@pytest.fixture
def front(tmp_path_factory, vhost):
    s = FrontPlanes(tmp_path_factory.mktemp("front"), vhost).create()
    s.plane("cp2")  # first: it takes conductor.periodic, and then dies
    s.plane("cp1")
    s.front = Front(s.cloud.state_dir, s.ports["front"], {n: s.ports[n] for n in ("cp1", "cp2")})
    try:
        wait_for("the front answers", s.front.answers, 20)
        start_compute(s, SPAWN_MS)
        prepare(s, "front")
        yield s
    finally:
        rcs = s.stop()
        s.front.stop()
    assert all(rc in (0, -signal.SIGKILL) for rc in rcs), (rcs, [p.tail() for p in s.planes.values()])


class SharedPortPlanes(Planes):
    """Both planes on the cloud's own port (and its metadata port), with
    [api] reuse_port = true."""

    def __init__(self, state_dir, url):
        super().__init__(state_dir, url)
        self.ports["cp2"] = self.ports["cp1"]
        self.plane_extra = ("--set", "api.reuse_port=true")


@pytest.fixture
def shared_port(tmp_path_factory, vhost):
    s = SharedPortPlanes(tmp_path_factory.mktemp("reuseport"), vhost).create()
    try:
        s.plane("cp2")
        s.plane("cp1")
        start_compute(s, SPAWN_MS)
        prepare(s, "cp1")
        yield s
    finally:
        rcs = s.stop()
    assert all(rc in (0, -signal.SIGKILL) for rc in rcs), (rcs, [p.tail() for p in s.planes.values()])


# ---- requests that may fail -------------------------------------------------


def attempt(s, method, path, body=None):
    """One request through the front on a new connection: (status, body),
    or (the exception's name, None) when the connection failed."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", s.ports["front"], timeout=90)
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers=dict(MV, **{"Content-Type": "application/json",
                                         "X-Auth-Token": s.token}))
        r = conn.getresponse()
        text = r.read().decode(errors="replace")
        conn.close()
        try:
            return r.status, json.loads(text) if text else None
        except ValueError:
            return r.status, text
    except (OSError, http.client.HTTPException) as e:
        return type(e).__name__, None


def listed(s, prefix):
    return {x["id"]: x for x in call(s, "front", "GET",
                                     "/compute/v2.1/servers/detail?name=%s" % prefix)["servers"]}


def settled_all(s, prefix, timeout):
    def done():
        v = listed(s, prefix)
        return all(x["status"] in ("ACTIVE", "ERROR") and not x["OS-EXT-STS:task_state"]
                   for x in v.values()) and v
    return wait_for("every server of %s settled" % prefix, done, timeout, 0.5)


def consumers(s):
    """{consumer uuid: {provider name: resources}} over every provider."""
    out = {}
    for rp in call(s, "front", "GET", "/placement/resource_providers")["resource_providers"]:
        allocs = call(s, "front", "GET", "/placement/resource_providers/%s/allocations"
                      % rp["uuid"])["allocations"]
        for c, a in allocs.items():
            out.setdefault(c, {})[rp["name"]] = a["resources"]
    return out


def fake_guests(s):
    """{server id: [hosts whose fake driver holds a guest for it]}."""
    out = {}
    for h in HOSTS:
        path = os.path.join(s.cloud.state_dir, "fake", "%s.json" % h)
        if os.path.exists(path):
            with open(path) as f:
                for sid in json.load(f):
                    out.setdefault(sid, []).append(h)
    return out


def check_consistent(s, servers):
    """servers: every server of the cloud. The ACTIVE ones, and they alone,
    have one allocation (their flavor, on their host) and one fake guest
    (on their host)."""
    active = {sid: x["OS-EXT-SRV-ATTR:host"] for sid, x in servers.items()
              if x["status"] == "ACTIVE"}
    allocs = consumers(s)
    assert set(allocs) == set(active), ({c: a for c, a in allocs.items() if c not in active},
                                        [sid for sid in active if sid not in allocs])
    for sid, host in active.items():
        assert list(allocs[sid]) == [host], (sid, host, allocs[sid])
        res = allocs[sid][host]
        assert res["VCPU"] == s.flavor["vcpus"] and res["MEMORY_MB"] == s.flavor["ram"], res
    guests = fake_guests(s)
    assert {sid: hs for sid, hs in guests.items() if hs != [active.get(sid)]} == {}, active


# ---- through HAProxy ----------------------------------------------------------


def storm(s, prefix, doomed, kill):
    """BOOTS boots from WORKERS threads and deletes of doomed, all through
    the front; kill(boots so far) is called from here once they are under way.
    Returns ({name: (status, server id or None)}, {sid: status})."""
    names = ["%s-%02d" % (prefix, i) for i in range(BOOTS)]
    boots, deletes = {}, {}
    lock = threading.Lock()

    def booter(mine):
        for name in mine:
            st, body = attempt(s, "POST", "/compute/v2.1/servers",
                               {"server": dict(s.boot_ref, name=name)})
            sid = body["server"]["id"] if st == 202 else None
            with lock:
                boots[name] = (st, sid)

    def deleter():
        for sid in doomed:
            st, _ = attempt(s, "DELETE", "/compute/v2.1/servers/%s" % sid)
            deletes[sid] = st
            time.sleep(0.4)
    threads = [threading.Thread(target=booter, args=(names[i::WORKERS],)) for i in range(WORKERS)]
    threads.append(threading.Thread(target=deleter))
    for t in threads:
        t.start()
    kill(boots)
    for t in threads:
        t.join()
    return boots, deletes


def test_50_boots_through_haproxy_with_a_control_plane_killed(front):
    s = front
    prefix = unique("fr")
    t0 = time.time()
    pre = []
    for i in range(DELETES):
        pre.append(call(s, "front", "POST", "/compute/v2.1/servers", {"server": dict(
            s.boot_ref, name="%s-del-%d" % (prefix, i))}, ok=(202,))["server"]["id"])
    v = settled_all(s, prefix + "-del", 60)
    assert all(x["status"] == "ACTIVE" for x in v.values()), v
    dead = s.holder("cp2")
    wait_for("cp2 holds the periodic lease", lambda: s.leases().get(
        "conductor.periodic", {}).get("holder") == dead, 3 * LEASE + 5, 0.3)
    killed = {}

    def kill(boots):
        # halfway: half the boots answered, cp2 (its API and conductor) in the middle of several
        wait_for("half the boots answered", lambda: len(boots) >= BOOTS // 2, 60, 0.02)
        wait_for("cp2's builds in flight", lambda: s.cloud.sql(
            "SELECT COUNT(*) AS n FROM instances WHERE display_name LIKE '%s-%%' AND "
            "display_name NOT LIKE '%s-del-%%' AND task_state IS NOT NULL AND "
            "nubo_conductor = '%s'" % (prefix, prefix, dead))[0]["n"] >= 4, 60, 0.05)
        s.planes["cp2"].stop(signal.SIGKILL)
        killed["at"] = time.time()
    t_storm = time.time()
    boots, deletes = storm(s, prefix, pre, kill)
    t_acked = time.time()
    acked = {sid: name for name, (st, sid) in boots.items() if st == 202}
    failed = {name: st for name, (st, _) in boots.items() if st != 202}
    # every failure is the front's or the connection's: never a 4xx, never a 500
    assert all(st in (502, 503, 504) or isinstance(st, str) for st in failed.values()), failed
    assert len(acked) >= BOOTS // 2, failed
    assert all(st in (204, 404, 502, 503, 504) or isinstance(st, str)
               for st in deletes.values()), deletes
    wait_for("take-over of cp2 done", lambda: "Took over the unfinished work of control plane "
             "%s" % dead in s.log("cp1"), 3 * LEASE + 30, 0.3)
    servers = settled_all(s, prefix, 120)
    t_settled = time.time()
    # each request once (names are unique); every acknowledged boot there
    names = [x["name"] for x in servers.values()]
    assert len(names) == len(set(names)), sorted(names)
    assert set(acked) <= set(servers), [n for sid, n in acked.items() if sid not in servers]
    for x in servers.values():
        assert x["status"] == "ACTIVE" or x.get("fault", {}).get("message"), x
    # a boot that failed at the front may have committed: accounted for above
    late = [x["name"] for x in servers.values() if x["name"] in failed]
    # acknowledged deletes are gone (an unacknowledged one may be too)
    for sid, st in deletes.items():
        if st == 204:
            assert sid not in servers, servers.get(sid)
            assert attempt(s, "GET", "/compute/v2.1/servers/%s" % sid)[0] == 404, sid
    check_consistent(s, listed(s, "."))  # every server of the cloud
    assert s.leases()["conductor.periodic"]["holder"] == s.holder("cp1")
    # the operator's view, through the front the catalog names
    cli = s.cloud.cli("server", "list", "--name", prefix, "-f", "json", "--limit", "-1")
    assert sorted(x["ID"] for x in cli) == sorted(servers)
    catalog = json.dumps(s.cloud.cli("catalog", "list", "-f", "json"))
    assert s.front_url in catalog and not [p for p in ("cp1", "cp2") if ":%d/" % s.ports[p]
                                           in catalog], catalog
    sdk = s.cloud.sdk()  # openstacksdk follows the catalog too
    assert sorted(x.id for x in sdk.compute.servers(name=prefix)) == sorted(servers)
    svc = s.cloud.cli("compute", "service", "list", "--service", "nova-conductor", "-f", "json")
    assert {x["Host"]: x["State"] for x in svc}["cp1"] == "up", svc
    status = lambda k: sum(1 for x in servers.values() if x["status"] == k)  # noqa: E731
    print("front: %d boots (%d acknowledged, %d failed at the front: %s; %d of those committed), "
          "%d deletes (%s); cp2 killed %.1f s into the storm; acknowledged in %.1f s, settled "
          "%.1f s after the kill: %d ACTIVE, %d ERROR %s; HAProxy statuses %s; %.1f s in all" % (
              BOOTS, len(acked), len(failed), sorted(set(map(str, failed.values()))), len(late),
              len(deletes), sorted(map(str, deletes.values())), killed["at"] - t_storm,
              t_acked - t_storm, t_settled - killed["at"], status("ACTIVE"), status("ERROR"),
              sorted({x["fault"]["message"] for x in servers.values() if x["status"] == "ERROR"}),
              s.front.statuses(), time.time() - t0))
    for sid in servers:
        call(s, "front", "DELETE", "/compute/v2.1/servers/%s" % sid, ok=(204, 404))
    wait_for("servers gone", lambda: not listed(s, prefix), 60, 0.5)
    assert consumers(s) == {} and fake_guests(s) == {}


# ---- SO_REUSEPORT -----------------------------------------------------------


def answered_by(s, tag, n):
    """n requests on n new connections to the shared port, each with its own
    marker; {plane name: how many of them its API log shows}."""
    for i in range(n):
        call(s, "cp1", "GET", "/compute/v2.1/servers?name=%s-%d" % (tag, i))
    out = {}
    for name in ("cp1", "cp2"):
        log = s.log(name, "api")
        out[name] = len(set(re.findall(r"name=%s-(\d+)" % re.escape(tag), log)))
    return out


def test_two_planes_on_one_port_with_reuse_port_and_one_killed(shared_port):
    s = shared_port
    t0 = time.time()
    tag = unique("rp")
    spread = answered_by(s, tag + "a", 40)
    assert sum(spread.values()) == 40 and min(spread.values()) > 0, spread
    s.planes["cp2"].stop(signal.SIGKILL)
    after = answered_by(s, tag + "b", 40)
    assert after == {"cp1": 40, "cp2": 0}, after
    # the agents' placement calls reach the survivor: a boot there ends ACTIVE
    sid = call(s, "cp1", "POST", "/compute/v2.1/servers", {"server": dict(
        s.boot_ref, name=unique("rp"))}, ok=(202,))["server"]["id"]
    x = wait_for("boot on the survivor", lambda: (lambda v: v["status"] in ("ACTIVE", "ERROR")
                                                   and v)(call(s, "cp1", "GET",
                                                               "/compute/v2.1/servers/%s" % sid)[
                                                                   "server"]), 60, 0.3)
    assert x["status"] == "ACTIVE", x.get("fault")
    call(s, "cp1", "DELETE", "/compute/v2.1/servers/%s" % sid, ok=(204,))
    print("reuse_port: 40 connections spread %s; after kill -9 of cp2, 40 of 40 at cp1; "
          "%.1f s" % (spread, time.time() - t0))

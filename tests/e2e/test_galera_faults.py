"""One Galera node killed (-9) and brought back under a running cloud
(NUBO_TEST_DB=galera only; skipped otherwise).

The cluster is tests/db/galera.sh's: three mariadbd on one machine and an
HAProxy in front, node 1 active and nodes 2 and 3 `backup`, as OpenStack
deployments reach Galera; nubo's [database] connection is the front's
address. Started here unless it already runs (tests/run.sh starts it and
tears it down; a cluster this module started it tears down itself).

Under load (25 boots in flight and 5 deletes in flight each time, 50 boots
in all) first node 3 is killed, a node nubo is not connected to (a membership
change: writes pause until the cluster declares it gone), then node 1, the
one behind the front: nubo's connections are cut, the front moves to node 2,
and when node 1 is Synced again it moves back (the backup's sessions cut
once more). Each node is started again while the builds are still running.
Then: every server ACTIVE or ERROR with a fault, none in a task state; every
202 create exists once, every 204 delete is gone; placement's allocations are
exactly the ACTIVE servers' (none leaked, none missing); the cluster has
three Synced nodes with the same rows in nubo's tables."""
import concurrent.futures
import http.client
import json
import os
import subprocess
import time

import pytest

from conftest import MARIADB_PASSWORD, MARIADB_USER, ROOT, TEST_DB, Cloud, free_port

pytestmark = pytest.mark.skipif(TEST_DB != "galera", reason="NUBO_TEST_DB=galera only")

GALERA_SH = os.path.join(ROOT, "tests", "db", "galera.sh")
HDR = {"OpenStack-API-Version": "compute 2.37", "Content-Type": "application/json"}
DB = "nubo_galera"
SPAWN_MS = 2000
T0 = time.time()


def sh(*args, timeout=180):
    p = subprocess.run(["bash", GALERA_SH] + list(args), capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, "galera.sh %s: %s%s" % (" ".join(args), p.stdout, p.stderr)
    return p.stdout.strip()


def synced():
    lines = sh("status").splitlines()
    return len(lines) == 3 and all("size=3 state=Synced" in x for x in lines)


@pytest.fixture(scope="module")
def cluster():
    was_up = synced()
    sh("start")
    yield sh
    if not was_up:
        sh("teardown")


@pytest.fixture(scope="module")
def gcloud(cluster, tmp_path_factory):
    url = cluster("createdb", DB, MARIADB_USER, MARIADB_PASSWORD)
    c = Cloud(tmp_path_factory.mktemp("galera"), free_port(),
              ("--set", "quota.instances=200", "--set", "quota.cores=400",
               "--set", "quota.ram=409600", "--set", "fake.spawn_delay_ms=%d" % SPAWN_MS,
               "--set", "database.connection=" + url))
    c.start(timeout=60)
    c.tok = c.token()
    image = c.cli("image", "show", "cirros", "-f", "value", "-c", "id").strip()
    c.boot_ref = {"flavorRef": "1", "imageRef": image, "networks": "none"}
    yield c
    rc = c.stop()
    assert rc == 0, "nubo exited with %s on SIGTERM: %s" % (rc, c.tail())


def call(c, method, path, body=None, timeout=60):
    """(status, parsed body); (error text, None) when no answer came."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=timeout)
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers=dict(HDR, **{"X-Auth-Token": c.tok}))
        r = conn.getresponse()
        text = r.read().decode(errors="replace")
        conn.close()
    except OSError as e:
        return str(e), None
    try:
        return r.status, json.loads(text) if text else None
    except ValueError:
        return r.status, text


def ok(c, method, path, body=None):
    st, b = call(c, method, path, body)
    assert st == 200, (method, path, st, b)
    return b


def servers(c):
    return ok(c, "GET", "/compute/v2.1/servers/detail?name=gl-")["servers"]


def settle(c, timeout=90):
    """The servers once none is building or in a task state."""
    deadline = time.time() + timeout
    while True:
        v = servers(c)
        busy = [(x["name"], x["status"], x["OS-EXT-STS:task_state"]) for x in v
                if x["status"] not in ("ACTIVE", "ERROR") or x["OS-EXT-STS:task_state"]]
        if not busy:
            return v
        assert time.time() < deadline, "stuck: %s" % busy
        time.sleep(0.5)


def boot(c, names):
    """Boots at once; {name: (status, server id or None)}."""
    out = {}

    def one(name):
        st, b = call(c, "POST", "/compute/v2.1/servers", {"server": dict(c.boot_ref, name=name)})
        out[name] = (st, b["server"]["id"] if st == 202 else None)
    with concurrent.futures.ThreadPoolExecutor(len(names)) as ex:
        list(ex.map(one, names))
    return out


def under_load(c, node, tag, victims):
    """25 boots and the deletes of victims in flight; node killed 0.3 s in
    and started again 2 s later, while builds are still spawning."""
    creates, deletes = {}, {}

    def deleter(sid):
        deletes[sid] = call(c, "DELETE", "/compute/v2.1/servers/%s" % sid)[0]
    names = ["gl-%s-%02d" % (tag, i) for i in range(25)]
    with concurrent.futures.ThreadPoolExecutor(2 + len(victims)) as ex:
        fb = ex.submit(lambda: creates.update(boot(c, names)))
        fd = [ex.submit(deleter, sid) for sid in victims]
        time.sleep(0.3)
        t = time.time()
        sh("kill", str(node))
        time.sleep(2)
        sh("restart", str(node))
        print("node %d killed and Synced again in %.1f s" % (node, time.time() - t))
        fb.result()
        for f in fd:
            f.result()
    return creates, deletes


def checksums(node):
    """nubo's tables' rows on one node, as CHECKSUM TABLE, after the node
    applied everything it received (wsrep_sync_wait)."""
    tables = "instances, instance_faults, allocations, consumers, resource_providers, " \
             "inventories, block_device_mapping, instance_actions"
    out = sh("client", str(node), "-N", "-B", "-e",
             "SET SESSION wsrep_sync_wait = 1; USE %s; CHECKSUM TABLE %s" % (DB, tables))
    return sorted(out.splitlines())


def test_galera_node_killed_and_brought_back_under_load(cluster, gcloud):
    c = gcloud
    t0 = time.time()
    before = boot(c, ["gl-pre-%02d" % i for i in range(10)])
    assert all(st == 202 for st, _ in before.values()), before
    pre = [sid for _, sid in before.values()]
    settle(c, 60)
    # (a) a backup node: a membership change under the writes; (b) the node
    # behind the front: connections cut, the front moves away and back
    ca, da = under_load(c, 3, "a", pre[:5])
    cb, db = under_load(c, 1, "b", pre[5:])
    creates, deletes = dict(ca, **cb), dict(da, **db)
    final = settle(c)

    by_id = {x["id"]: x for x in final}
    names = [x["name"] for x in final]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, "duplicate servers: %s" % dup
    for name, (st, sid) in creates.items():
        assert st in (202, 500, 503), (name, st)
        if st == 202:
            assert sid in by_id, "acknowledged create lost: %s %s" % (name, sid)
    for sid, st in deletes.items():
        assert st in (204, 500, 503), (sid, st)
        if st == 204:
            assert sid not in by_id, "acknowledged delete not done: %s" % sid
            assert ok(c, "GET", "/placement/allocations/%s" % sid)["allocations"] == {}, sid
    for x in final:
        if x["status"] == "ERROR":
            assert (x.get("fault") or {}).get("message"), "ERROR without a fault: %s" % x["name"]

    # placement: exactly the ACTIVE servers hold allocations, each on its host
    rps = {r["uuid"]: r["name"] for r in ok(c, "GET", "/placement/resource_providers")[
        "resource_providers"]}
    held = {}
    for rp in rps:
        for consumer in ok(c, "GET", "/placement/resource_providers/%s/allocations" % rp)[
                "allocations"]:
            held.setdefault(consumer, []).append(rps[rp])
    active = {x["id"]: x["OS-EXT-SRV-ATTR:host"] for x in final if x["status"] == "ACTIVE"}
    leaked = {k: v for k, v in held.items() if k not in active}
    missing = {k: h for k, h in active.items() if held.get(k) != [h]}
    assert not leaked, "allocations without an ACTIVE server: %s" % leaked
    assert not missing, "ACTIVE servers without their one allocation: %s" % missing

    # the killed nodes are back, Synced, with the same rows
    assert synced(), sh("status")
    deadline = time.time() + 15
    while True:
        sums = [checksums(n) for n in (1, 2, 3)]
        if sums[0] == sums[1] == sums[2]:
            break
        assert time.time() < deadline, "nodes differ: %s" % sums
        time.sleep(1)
    assert c.proc.poll() is None, "nubo died: " + c.tail()

    refused = sum(st != 202 for st, _ in creates.values())
    print("galera faults: %d boots (%d refused), %d deletes (%d refused); servers %d ACTIVE, "
          "%d ERROR; test %.1f s, module %.1f s" % (
              len(creates), refused, len(deletes), sum(st != 204 for st in deletes.values()),
              len(active), sum(x["status"] == "ERROR" for x in final), time.time() - t0,
              time.time() - T0))

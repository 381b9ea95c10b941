"""MariaDB faults under a running all-in-one (NUBO_TEST_DB=mariadb only; skipped
otherwise): the database server restarts under it. Requests during the outage
get an error status (500/503) at once, not a hang; afterwards the pool reopens
its connections and the cloud works again (token, server list, a boot to
ACTIVE); boots in flight during the restart (and refused during it) end ACTIVE or
ERROR with a fault, none stuck in a task state.

The module runs its own throwaway MariaDB server (tests/db/mariadb.sh with
NUBO_MARIA_DIR=<the suite's>-faults and a free port), so that stopping it
leaves the server of the modules running beside it alone."""
import concurrent.futures
import http.client
import json
import os
import subprocess
import threading
import time

import pytest

from conftest import MARIADB_PASSWORD, MARIADB_SH, MARIADB_USER, TEST_DB, Cloud, free_port
from consistency import check_consistent, settle

pytestmark = pytest.mark.skipif(TEST_DB != "mariadb", reason="NUBO_TEST_DB=mariadb only")

HDR = {"OpenStack-API-Version": "compute 2.37"}


@pytest.fixture(scope="module")
def maria():
    env = dict(os.environ,
               NUBO_MARIA_DIR=os.environ.get("NUBO_MARIA_DIR", "/var/tmp/nubo-maria") + "-faults",
               NUBO_MARIA_PORT=str(free_port()))

    def sh(*args):
        p = subprocess.run(["bash", MARIADB_SH] + list(args), env=env, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, "mariadb.sh %s: %s" % (" ".join(args), p.stderr)
        return p.stdout.strip()
    sh("start")
    yield sh
    sh("teardown")


@pytest.fixture(scope="module")
def mcloud(maria, tmp_path_factory):
    url = maria("createdb", "nubo_faults", MARIADB_USER, MARIADB_PASSWORD)
    c = Cloud(tmp_path_factory.mktemp("faults"), free_port(),
              ("--set", "quota.instances=200", "--set", "quota.cores=400",
               "--set", "quota.ram=409600",
               # spawns take time: boots are still spawning when the database goes
               "--set", "fake.spawn_delay_ms=1500"))
    # Cloud() chose a database on the suite's server: this one's instead
    c.extra_args = [("database.connection=" + url) if a.startswith("database.connection=") else a
                    for a in c.extra_args]
    c.mariadb = None  # Cloud.sql() would read the other server: not used here
    c.start()
    yield c
    rc = c.stop()
    assert rc == 0, "nubo exited with %s on SIGTERM: %s" % (rc, c.tail())


def request(c, method, path, body=None, token=None, timeout=30):
    """(status, parsed body, seconds taken); a hang fails the test at timeout."""
    t0 = time.time()
    conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=timeout)
    h = dict(HDR, **{"Content-Type": "application/json"})
    if token:
        h["X-Auth-Token"] = token
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
    r = conn.getresponse()
    text = r.read().decode(errors="replace")
    conn.close()
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = text
    return r.status, parsed, time.time() - t0


def password_token(c):
    return {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": "admin", "domain": {"id": "default"}, "password": c.admin_password}}},
        "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}}


def works(c):
    """The cloud after the restart: a token, the server list, a boot to ACTIVE."""
    tok = c.token()
    assert tok
    c.cli("server", "list", "-f", "json")
    s = c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait",
              "after-%d" % time.time_ns(), "-f", "json")
    assert s["status"] == "ACTIVE"


def test_restart_under_cloud(maria, mcloud):
    c = mcloud
    tok = c.token()
    s = c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait",
              "before", "-f", "json")
    assert s["status"] == "ACTIVE"
    maria("stop")
    try:
        for method, path, body, token in (
                ("GET", "/compute/v2.1/servers", None, tok),
                ("GET", "/compute/v2.1/servers/%s" % s["id"], None, tok),
                ("POST", "/identity/v3/auth/tokens", password_token(c), None)):
            st, _, took = request(c, method, path, body, token)
            assert st in (500, 503), "%s %s during the outage: %s" % (method, path, st)
            assert took < 15, "%s %s took %.1f s during the outage" % (method, path, took)
        assert c.proc.poll() is None, "nubo died with the database: " + c.tail()
    finally:
        maria("start")
    works(c)
    # the server booted before is still there
    assert c.cli("server", "show", s["id"], "-f", "json")["status"] == "ACTIVE"


def test_restart_during_boots(maria, mcloud):
    """MariaDB stops with 50 boots in flight and 5 deletes in flight, four
    clients go on booting through the outage and after it: boots in every
    stage of their way (API, conductor, scheduler, compute) when the
    database goes. Then every accepted boot is ACTIVE or ERROR with a fault,
    every accepted delete done, none stuck, allocations exactly the live
    servers' (tests/e2e/consistency.py)."""
    c = mcloud
    tok = c.token()
    image = c.cli("image", "show", "cirros", "-f", "value", "-c", "id").strip()
    accepted, deleted, statuses = [], [], []
    lock = threading.Lock()

    def boot(name):
        try:
            st, body, _ = request(c, "POST", "/compute/v2.1/servers", {"server": {
                "name": name, "flavorRef": "1", "imageRef": image, "networks": "none"}},
                tok, timeout=60)
        except OSError as e:
            st, body = str(e), None
        with lock:
            statuses.append(st)
            if st == 202:
                accepted.append(body["server"]["id"])
        return st

    doomed = [c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros",
                    "--wait", "inflight-doomed-%d" % k, "-f", "json")["id"]
              for k in range(5)]
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        first = list(ex.map(boot, ["inflight-load-%d" % k for k in range(50)]))
    assert first.count(202) == 50, first
    for sid in doomed:
        if request(c, "DELETE", "/compute/v2.1/servers/%s" % sid, None, tok)[0] == 204:
            deleted.append(sid)
    stop = threading.Event()

    def booter(k):
        i = 0
        while not stop.is_set():
            boot("inflight-%d-%d" % (k, i))
            i += 1
            time.sleep(0.1)
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        futs = [ex.submit(booter, k) for k in range(4)]
        maria("stop")
        time.sleep(1)
        maria("start")
        time.sleep(1)
        stop.set()
        for f in futs:
            f.result()
    assert set(statuses) <= {202, 500, 503}, statuses
    assert 500 in statuses or 503 in statuses, statuses
    assert c.proc.poll() is None, "nubo died with the database: " + c.tail()
    settle(c, tok, "inflight-", timeout=120)
    servers, _ = check_consistent(c, tok, accepted, deleted, prefix="inflight-")
    print("boots: %d accepted, %d refused; deletes %d of 5 accepted; servers: %d ACTIVE, "
          "%d ERROR" % (len(accepted), len(statuses) - len(accepted), len(deleted),
                        sum(x["status"] == "ACTIVE" for x in servers),
                        sum(x["status"] == "ERROR" for x in servers)))
    works(c)

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
    """Four clients boot one server after another while MariaDB stops and
    starts: boots in every stage of their way (API, conductor, scheduler,
    compute) when the database goes."""
    c = mcloud
    tok = c.token()
    image = c.cli("image", "show", "cirros", "-f", "value", "-c", "id").strip()
    stop = threading.Event()
    statuses = []

    def booter(k):
        i = 0
        while not stop.is_set():
            try:
                st = request(c, "POST", "/compute/v2.1/servers", {"server": {
                    "name": "inflight-%d-%d" % (k, i), "flavorRef": "1", "imageRef": image,
                    "networks": "none"}}, tok, timeout=60)[0]
            except OSError as e:
                st = str(e)
            statuses.append(st)
            i += 1
            time.sleep(0.1)
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        futs = [ex.submit(booter, k) for k in range(4)]
        time.sleep(1)
        maria("stop")
        time.sleep(1)
        maria("start")
        time.sleep(1)
        stop.set()
        for f in futs:
            f.result()
    assert set(statuses) <= {202, 500, 503}, statuses
    assert 202 in statuses and (500 in statuses or 503 in statuses), statuses
    assert c.proc.poll() is None, "nubo died with the database: " + c.tail()
    # every server the API took ends ACTIVE or ERROR (with its fault), none in a task state
    deadline = time.time() + 120
    while True:
        st, body, _ = request(c, "GET", "/compute/v2.1/servers/detail?name=inflight-", None, tok)
        assert st == 200
        servers = body["servers"]
        busy = [x for x in servers if x["status"] not in ("ACTIVE", "ERROR")
                or x["OS-EXT-STS:task_state"] is not None]
        if not busy:
            break
        assert time.time() < deadline, "stuck after the restart: %s" % [
            (x["name"], x["status"], x["OS-EXT-STS:task_state"]) for x in busy]
        time.sleep(0.5)
    assert len(servers) >= statuses.count(202)
    print("boots: %d accepted, %d refused; servers: %d ACTIVE, %d ERROR" % (
        statuses.count(202), len(statuses) - statuses.count(202),
        sum(x["status"] == "ACTIVE" for x in servers),
        sum(x["status"] == "ERROR" for x in servers)))
    for x in servers:
        if x["status"] == "ERROR":
            assert x.get("fault", {}).get("message"), "ERROR without a fault: %s" % x["name"]
    works(c)

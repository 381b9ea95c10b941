"""Compute agents in processes of their own, and the agent's HTTP clients.

A compute agent never opens the database: it asks the conductor over the
bus and talks HTTP to placement and the image service with the service
user's token ([service_user] in nubo.conf, made by `nubo aio`), as
nova-compute does. An all-in-one calls those services directly, unless
[compute] use_service_apis = http forces the HTTP path: the first tests run
it that way (fake driver: placement reports and snapshot uploads; a lost
token is renewed after the 401).

The split tests run `nubo serve` (the control plane) and two `nubo compute`
processes (fake hosts hostA and hostB, each with its own log directory) on
one RabbitMQ vhost of their own (scripts/rabbitmq-up.sh; the vhost is made
with rabbitmqctl and deleted afterwards, so parallel runs never mix), and
check with the openstack CLI what an operator sees: both nova-compute
services up, hypervisors, providers with inventory, servers on both hosts
through their life cycle, one request ID in the API's and the compute's
logs, and what happens when a compute process is killed -9 and restarted."""
import configparser
import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid

import pytest
from netagent_cleanup import remove_agent_leftovers

from conftest import NUBO_BIN, ROOT, Cloud, free_port, unique

RABBITMQCTL = "/usr/sbin/rabbitmqctl"
REPORT_INTERVAL = 1
DOWN_TIME = 6


def read_conf(state_dir):
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(os.path.join(state_dir, "nubo.conf"))
    return cp


# ---- the HTTP path inside an all-in-one -----------------------------------


def boot(c, name, host=None):
    """A server without network (the fake hosts plug no ports), ACTIVE or
    ERROR; on host when given (admin's `nova:HOST` zone)."""
    args = ["--os-compute-api-version", "2.37", "server", "create", "--flavor", "m1.tiny",
            "--image", "cirros", "--nic", "none", "--wait", name, "-f", "json"]
    if host:
        args += ["--availability-zone", "nova:%s" % host]
    return c.cli(*args)


@pytest.fixture(scope="module")
def httpcloud(tmp_path_factory):
    c = Cloud(tmp_path_factory.mktemp("svc-http"), free_port(),
              ("--set", "compute.use_service_apis=http"))
    c.start()
    yield c
    assert c.stop() == 0, c.tail()


def wait_for(what, fn, timeout=30, interval=0.2):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("%s not reached after %ss (last: %r)" % (what, timeout, last))


def test_aio_writes_a_service_user_that_is_admin_on_project_service(httpcloud):
    c = httpcloud
    path = os.path.join(c.state_dir, "nubo.conf")
    assert os.stat(path).st_mode & 0o777 == 0o600
    su = read_conf(c.state_dir)["service_user"]
    assert su["auth_url"] == "%s/identity/v3" % c.url
    assert su["username"] == "nova" and su["project_name"] == "service"
    assert su["user_domain_name"] == "Default" and su["project_domain_name"] == "Default"
    assert re.fullmatch(r"[0-9a-f]{32}", su["password"])
    roles = c.cli("role", "assignment", "list", "--user", "nova", "--project", "service",
                  "--names", "-f", "json")
    assert [r["Role"] for r in roles] == ["admin"], roles


def test_agent_reports_to_placement_over_http(httpcloud):
    c = httpcloud
    log = wait_for("registration", lambda: "Inventory of provider fake-3" in c.log("compute")
                   and c.log("compute"))
    assert "placement and image service reached over HTTP" in log
    assert "Service user nova authenticated at %s/identity/v3/auth/tokens" % c.url in log
    rps = {r["name"]: r for r in c.cli("resource", "provider", "list", "-f", "json")}
    assert set(rps) == {"fake-1", "fake-2", "fake-3"}
    inv = {r["resource_class"]: r for r in
           c.cli("resource", "provider", "inventory", "list", rps["fake-2"]["uuid"], "-f", "json")}
    assert inv["VCPU"]["total"] == 16 and inv["VCPU"]["allocation_ratio"] == 4.0
    assert inv["MEMORY_MB"]["reserved"] == 512 and inv["DISK_GB"]["total"] == 500
    traits = c.cli("resource", "provider", "trait", "list", rps["fake-2"]["uuid"], "-f", "json")
    assert "COMPUTE_NODE" in [t["name"] for t in traits]
    # the calls came over HTTP as the nova user (placement's access log)
    nova = c.cli("user", "show", "nova", "-f", "json")["id"]
    put = [l for l in c.log("placement").splitlines()
           if '"PUT /placement/resource_providers/%s/inventories" status: 200' % rps["fake-2"]["uuid"]
           in l]
    assert put and nova in put[0], put


def test_boot_and_snapshot_upload_over_http_renewing_a_lost_token(httpcloud):
    c = httpcloud
    s = boot(c, unique("svc"))
    assert s["status"] == "ACTIVE"
    img = c.cli("server", "image", "create", "--name", unique("snap"), "--wait", s["id"],
                "-f", "json")
    shown = c.cli("image", "show", img["id"], "-f", "json")
    assert shown["status"] == "active" and shown["disk_format"] == "qcow2"
    assert shown["size"] > 0
    assert re.search(r'"PUT /image/v2/images/%s/file HTTP/1.1" status: 204' % img["id"], c.log("image"))
    # every token gone (as after a keystone restart with new keys): the next
    # upload is refused with 401, the agent authenticates again and retries
    c.sql("DELETE FROM token")
    img2 = c.cli("server", "image", "create", "--name", unique("snap"), "--wait", s["id"],
                 "-f", "json")
    assert c.cli("image", "show", img2["id"], "-f", "json")["status"] == "active"
    log = c.log("compute")
    assert "Upload of image %s: token refused (401), authenticating again" % img2["id"] in log
    assert log.count("Service user nova authenticated") >= 2
    c.cli("server", "delete", "--wait", s["id"])
    c.cli("image", "delete", img["id"], img2["id"])


# ---- control plane and compute agents in separate processes ----------------


def rabbitmq_ready():
    p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "rabbitmq-up.sh")],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return "RabbitMQ is not available: " + p.stderr[-500:]
    return None


def rabbitmqctl(*args):
    subprocess.run([RABBITMQCTL] + list(args), check=True, capture_output=True, timeout=60)


def new_vhost():
    """A RabbitMQ vhost of its own (its transport_url), deleted afterwards:
    each cloud needs one, as two conductors on one `conductor` queue would
    take each other's messages."""
    why = rabbitmq_ready()
    if why:
        pytest.skip(why)
    name = "nubo-e2e-%s" % uuid.uuid4().hex[:8]
    rabbitmqctl("add_vhost", name)
    rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
    yield "rabbit://guest:guest@127.0.0.1:5672/%s" % name
    subprocess.run([RABBITMQCTL, "delete_vhost", name], capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def vhost():
    yield from new_vhost()


@pytest.fixture(scope="module")
def lv_vhost():
    yield from new_vhost()


class Proc:
    """A nubo process (`serve` or `compute`) with its output in a file."""

    def __init__(self, name, args, out_dir):
        self.name, self.args = name, args
        self.out_path = os.path.join(out_dir, "%s.out" % name)
        self.p = None

    def start(self):
        self.out = open(self.out_path, "ab")
        self.out_at = self.out.tell()  # a restart's wait_ready reads what it wrote only
        self.p = subprocess.Popen([NUBO_BIN] + self.args, stdout=self.out,
                                  stderr=subprocess.STDOUT)
        return self

    def wait_ready(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.p.poll() is not None:
                raise AssertionError("%s exited with %s: %s" % (self.name, self.p.returncode,
                                                                self.tail()))
            with open(self.out_path, "rb") as f:
                f.seek(self.out_at)
                if b"nubo: ready" in f.read():
                    return self
            time.sleep(0.1)
        raise AssertionError("%s not ready after %ss: %s" % (self.name, timeout, self.tail()))

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.p and self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                raise AssertionError("%s did not stop within %ss" % (self.name, timeout))
        return self.p.returncode if self.p else None

    def tail(self, n=4000):
        try:
            with open(self.out_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""


def fake_compute(conf, base, host):
    """A `nubo compute` process (not started) for the fake host `host`,
    logging in base/log-<host>; .log() reads its log."""
    logdir = os.path.join(base, "log-%s" % host)
    p = Proc("compute-%s" % host, ["compute", "--config", conf, "--set", "DEFAULT.host=%s" % host,
                                   "--set", "fake.hosts=%s" % host,
                                   "--set", "DEFAULT.log_dir=%s" % logdir], base)
    p.logdir = logdir

    def log():
        with open(os.path.join(logdir, "nubo-compute.log")) as f:
            return f.read()
    p.log = log
    return p


class Split:
    """DIR/nubo.conf made by `nubo aio`, then `nubo serve` and one `nubo
    compute` per fake host."""

    def __init__(self, state_dir, url, extra=()):
        self.cloud = Cloud(state_dir, free_port(), (
            "--set", "bus.transport=amqp", "--set", "bus.transport_url=%s" % url,
            "--set", "DEFAULT.report_interval=%d" % REPORT_INTERVAL,
            "--set", "DEFAULT.service_down_time=%d" % DOWN_TIME,
            "--set", "DEFAULT.roles=api,conductor,scheduler,placement,metadata") + tuple(extra))
        self.conf = os.path.join(str(state_dir), "nubo.conf")
        self.serve = None
        self.computes = {}

    def create(self):
        """Creates the cloud once (schema, identities, flavors, image) with
        `nubo aio`, then stops it: what remains is its configuration."""
        self.cloud.start(timeout=60)
        assert self.cloud.stop() == 0, self.cloud.tail()
        return self

    def start_serve(self):
        self.serve = Proc("serve", ["serve", "--config", self.conf, "--set",
                                    "DEFAULT.roles=api,conductor,scheduler,placement,metadata"],
                          self.cloud.state_dir).start().wait_ready(60)
        return self

    def compute(self, host):
        p = self.computes[host] = fake_compute(self.conf, self.cloud.state_dir, host)
        return p.start().wait_ready(30)

    def compute_log(self, host):
        return self.computes[host].log()

    def stop(self):
        rcs = [p.stop() for p in self.computes.values()]
        if self.serve:
            rcs.append(self.serve.stop())
        return rcs


@pytest.fixture(scope="module")
def split(tmp_path_factory, vhost):
    s = Split(tmp_path_factory.mktemp("split"), vhost).create().start_serve()
    s.compute("hostA")
    s.compute("hostB")
    yield s
    assert all(rc == 0 for rc in s.stop()), [p.tail() for p in s.computes.values()]


def api(c, path):
    """GET on the compute API with a cached admin token: polling through
    the CLI costs seconds per call on a busy machine."""
    if not getattr(c, "_token", None):
        c._token = c.token()
    st, _, data = c.request("GET", "/compute/v2.1" + path, token=c._token)
    assert st == 200, (st, data)
    return data


def services(c):
    return {s["Host"]: s for s in c.cli("compute", "service", "list", "--service",
                                          "nova-compute", "-f", "json")}


def wait_state(c, host, state, timeout):
    """Waits for nova-compute on host to be up/down (polled over REST), then
    checks it as the operator reads it."""
    wait_for("nova-compute on %s %s" % (host, state),
             lambda: [s for s in api(c, "/os-services?binary=nova-compute")["services"]
                      if s["host"] == host and s["state"] == state], timeout)
    assert services(c)[host]["State"] == state


def wait_status(c, sid, status, timeout=30):
    return wait_for("server %s %s" % (sid, status),
                    lambda: (lambda v: v["status"] == status and not v["OS-EXT-STS:task_state"]
                             and v)(api(c, "/servers/%s" % sid)["server"]), timeout)




def test_nubo_compute_refuses_the_in_process_bus(tmp_path):
    conf = tmp_path / "nubo.conf"
    conf.write_text("[DEFAULT]\nstate_path = %s\n" % tmp_path)
    p = subprocess.run([NUBO_BIN, "compute", "--config", str(conf)], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 2
    assert "[bus] transport = amqp" in p.stderr


def test_compute_processes_register_without_a_database(split):
    c = split.cloud
    for host in ("hostA", "hostB"):
        wait_state(c, host, "up", 30)
        out = split.computes[host].tail()
        assert "nubo: ready (roles compute, host %s)" % host in out
        log = split.compute_log(host)
        assert "Compute host %s registered" % host in log
        assert "Service user nova authenticated" in log
        # no database in a compute process, no HTTP server
        assert not os.path.exists(os.path.join(split.computes[host].logdir, "nubo-db.log"))
        assert not os.path.exists(os.path.join(split.computes[host].logdir, "nubo-api.log"))
    hv = {h["Hypervisor Hostname"]: h for h in c.cli("hypervisor", "list", "-f", "json")}
    assert {"hostA", "hostB"} <= set(hv), hv
    rps = {r["name"]: r["uuid"] for r in c.cli("resource", "provider", "list", "-f", "json")}
    assert {"hostA", "hostB"} <= set(rps)
    for host in ("hostA", "hostB"):
        inv = {r["resource_class"] for r in c.cli("resource", "provider", "inventory", "list",
                                                  rps[host], "-f", "json")}
        assert inv == {"VCPU", "MEMORY_MB", "DISK_GB"}


def test_servers_on_both_hosts_live_and_one_request_id_spans_the_logs(split):
    c = split.cloud
    for host in ("hostA", "hostB"):
        wait_state(c, host, "up", 30)
        s = boot(c, unique("mp-%s" % host), host)
        assert s["status"] == "ACTIVE" and s["OS-EXT-SRV-ATTR:host"] == host, s
        events = c.cli("server", "event", "list", s["id"], "-f", "json")
        req = [e for e in events if e["Action"] == "create"][0]["Request ID"]
        with open(os.path.join(c.state_dir, "log", "nubo-api.log")) as f:
            assert req in f.read()
        assert re.search(r"%s.*\[instance: %s\] Took [0-9.]+ seconds to build instance"
                         % (req, s["id"]), split.compute_log(host))
        c.cli("server", "stop", s["id"])
        wait_status(c, s["id"], "SHUTOFF")
        c.cli("server", "start", s["id"])
        wait_status(c, s["id"], "ACTIVE")
        c.cli("server", "delete", "--wait", s["id"])
        assert "Instance destroyed successfully." in split.compute_log(host)


def test_live_migration_between_compute_processes(split):
    """A live migration between two `nubo compute` processes over AMQP: the
    destination's prechecks ask the source, the source runs the move and
    reports to the conductor, the fake guest moves through the hosts' state
    files."""
    c = split.cloud
    for host in ("hostA", "hostB"):
        wait_state(c, host, "up", 30)
    s = boot(c, unique("mp-lm"), "hostA")
    c.cli("--os-compute-api-version", "2.80", "server", "migrate", "--live-migration", "--host",
          "hostB", "--wait", s["id"])
    v = wait_status(c, s["id"], "ACTIVE")
    assert v["OS-EXT-SRV-ATTR:host"] == "hostB", v
    assert "post_live_migration_at_destination done on hostB" in split.compute_log("hostB")
    assert "Migrating instance to hostB finished successfully" in split.compute_log("hostA")
    c.cli("server", "delete", "--wait", s["id"])
    assert "Instance destroyed successfully." in split.compute_log("hostB")


def slow_source(split, ms):
    """hostA's `nubo compute` started again with fake live migrations of ms
    milliseconds (the caller restarts the usual one afterwards)."""
    split.computes["hostA"].stop()
    return Proc("compute-hostA-slow", ["compute", "--config", split.conf,
                                       "--set", "DEFAULT.host=hostA", "--set", "fake.hosts=hostA",
                                       "--set", "fake.live_migration_ms=%d" % ms,
                                       "--set", "DEFAULT.log_dir=%s" %
                                       split.computes["hostA"].logdir],
                split.cloud.state_dir).start()


def migrating_to_b(c, slow, prefix):
    """A server booted on hostA (slow's) whose live migration to hostB is
    running; returns it and a reader of its migration row."""
    slow.wait_ready(30)
    wait_state(c, "hostA", "up", 30)
    s = boot(c, unique(prefix), "hostA")
    api(c, "/servers/%s" % s["id"])  # logs in
    st, _, body = c.request("POST", "/compute/v2.1/servers/%s/action" % s["id"],
                            token=c._token, headers={"OpenStack-API-Version": "compute 2.80"},
                            body={"os-migrateLive": {"host": "hostB", "block_migration": "auto"}})
    assert st == 202, body

    def migration():
        rows = c.sql("SELECT uuid, status FROM migrations WHERE instance_uuid = '%s'" % s["id"])
        return rows[0] if rows else {}
    wait_for("migration running", lambda: migration().get("status") == "running", 30)
    return s, migration


def test_source_agent_restarted_mid_live_migration_is_rolled_back(split):
    """The source's `nubo compute` killed -9 while it runs a (slow) live
    migration: when it registers again, the conductor finds the migration,
    sees no guest on the destination and rolls it back."""
    c = split.cloud
    slow = slow_source(split, 20000)
    try:  # whatever happens, hostA ends as the other tests expect it
        s, migration = migrating_to_b(c, slow, "mp-lm-kill")
    finally:
        slow.stop(signal.SIGKILL)
        split.compute("hostA")  # registers again: the conductor recovers the migration
    wait_for("migration error", lambda: migration().get("status") == "error", 60)
    v = wait_status(c, s["id"], "ACTIVE")
    assert v["OS-EXT-SRV-ATTR:host"] == "hostA", v
    f = c.sql("SELECT message FROM instance_faults WHERE instance_uuid = '%s'" % s["id"])
    assert "the compute service of its source host restarted" in f[-1]["message"], f
    c.cli("server", "delete", "--wait", s["id"])


def test_serve_restarted_mid_live_migration_leaves_it_to_finish(split):
    """`nubo serve` killed -9 while the source's `nubo compute` runs a
    (slow) live migration, then started again: recovery asks the source,
    which still runs it, and leaves it; the agent's result, sent until the
    conductor is back, completes it on the destination."""
    c = split.cloud
    slow = slow_source(split, 6000)
    try:  # whatever happens, hostA ends as the other tests expect it
        s, migration = migrating_to_b(c, slow, "mp-lm-serve")
        size = os.path.getsize(split.serve.out_path)
        split.serve.stop(signal.SIGKILL)
        split.serve.start()

        def ready():
            with open(split.serve.out_path, "rb") as f:
                f.seek(size)
                return b"nubo: ready" in f.read()
        wait_for("serve ready again", ready, 60, 0.1)
        wait_for("migration completed", lambda: migration().get("status") == "completed", 60)
        v = wait_status(c, s["id"], "ACTIVE")
        assert v["OS-EXT-SRV-ATTR:host"] == "hostB" and not v["OS-EXT-STS:task_state"], v
        with open(os.path.join(c.state_dir, "log", "nubo-conductor.log")) as f:
            log = f.read()
        m = migration()["uuid"]
        assert "Live migration %s (running) interrupted (by a restart of nubo): still running " \
               "on source hostA (phase running), left to finish" % m in log
        alog = split.compute_log("hostA")
        assert "Live migration %s still runs on hostA, phase running" % m in alog
        assert "Abort of live migration %s" % m not in alog
    finally:
        slow.stop()
        split.compute("hostA")
    c.cli("server", "delete", "--wait", s["id"])


def test_destination_agent_killed_mid_live_migration(split):
    """The destination's `nubo compute` killed -9 while the source runs a
    (slow) live migration to it, and started again: the server ends ACTIVE
    on exactly one host with its allocation there alone, the migration ends
    (completed or error, never in progress), and no guest is left on the
    other host."""
    c = split.cloud
    slow = slow_source(split, 6000)
    try:
        s, migration = migrating_to_b(c, slow, "mp-lm-dest")
        split.computes["hostB"].stop(signal.SIGKILL)
        time.sleep(2)
        split.compute("hostB")
        wait_for("migration ended", lambda: migration().get("status") in (
            "completed", "error", "failed", "cancelled"), 90)
        v = wait_for("task cleared", lambda: (lambda v: not v["OS-EXT-STS:task_state"] and v)(
            api(c, "/servers/%s" % s["id"])["server"]), 60)
        host = v["OS-EXT-SRV-ATTR:host"]
        assert v["status"] == "ACTIVE" and host in ("hostA", "hostB"), v
        other = "hostB" if host == "hostA" else "hostA"
        with open(os.path.join(c.state_dir, "fake", "%s.json" % host)) as f:
            assert s["id"] in json.load(f)
        wait_for("no guest left on %s" % other, lambda: s["id"] not in json.load(
            open(os.path.join(c.state_dir, "fake", "%s.json" % other))), 60)
        allocs = c.sql("SELECT DISTINCT rp.name AS rp FROM allocations a JOIN resource_providers"
                       " rp ON rp.id = a.resource_provider_id WHERE a.consumer_id = '%s'"
                       % s["id"])
        assert [r["rp"] for r in allocs] == [host], allocs
        m = migration()
        assert not c.sql("SELECT id FROM allocations WHERE consumer_id = '%s'" % m["uuid"])
        print("destination killed mid-migration: migration %s, server on %s"
              % (m["status"], host))
    finally:
        slow.stop()
        split.compute("hostA")
    c.cli("server", "delete", "--wait", s["id"])


def test_killed_compute_goes_down_boots_go_elsewhere_and_restart_syncs(split):
    c = split.cloud
    wait_state(c, "hostB", "up", 30)
    victim = boot(c, unique("mp-victim"), "hostB")
    assert victim["status"] == "ACTIVE"
    split.computes["hostB"].stop(signal.SIGKILL)
    t0 = time.time()
    wait_state(c, "hostB", "down", DOWN_TIME + 10 * REPORT_INTERVAL + 10)
    print("hostB down %.1f s after kill -9" % (time.time() - t0))
    assert services(c)["hostA"]["State"] == "up"
    others = [boot(c, unique("mp-after")) for _ in range(2)]
    assert [s["OS-EXT-SRV-ATTR:host"] for s in others] == ["hostA", "hostA"], others
    # while hostB is away its guest shuts down (the fake hypervisor's state)
    state = os.path.join(c.state_dir, "fake", "hostB.json")
    with open(state) as f:
        guests = json.load(f)
    guests[victim["id"]]["power_state"] = 4
    with open(state, "w") as f:
        json.dump(guests, f)
    split.compute("hostB")
    wait_state(c, "hostB", "up", 30)
    wait_status(c, victim["id"], "SHUTOFF")
    s = c.cli("server", "show", victim["id"], "-f", "json")
    assert s["status"] == "SHUTOFF" and s["OS-EXT-STS:power_state"] in ("Shutdown", 4), s
    for sv in others + [victim]:
        c.cli("server", "delete", "--wait", sv["id"])


# ---- many fake hosts in one `nubo compute` ------------------------------------


@pytest.fixture(scope="module")
def many_vhost():
    yield from new_vhost()


def test_one_compute_process_serves_many_fake_hosts(tmp_path_factory, many_vhost):
    """`nubo compute --fake-hosts 20`: 20 nova-compute services up, each with
    its hypervisor and provider, their heartbeats sent as one batch, and
    servers built on them (about 40 s on the ASan build)."""
    s = Split(tmp_path_factory.mktemp("many"), many_vhost).create().start_serve()
    try:
        logdir = os.path.join(s.cloud.state_dir, "log-many")
        p = Proc("compute-many", ["compute", "--config", s.conf, "--fake-hosts", "20",
                                  "--set", "fake.host_prefix=many-",
                                  "--set", "DEFAULT.log_dir=%s" % logdir], s.cloud.state_dir)
        s.computes["many"] = p
        p.start().wait_ready(60)
        c = s.cloud
        hosts = ["many-%d" % i for i in range(1, 21)]
        wait_for("20 nova-compute services up", lambda: sorted(
            x["host"] for x in api(c, "/os-services?binary=nova-compute")["services"]
            if x["state"] == "up") == sorted(hosts), 60)
        hyp = api(c, "/os-hypervisors")["hypervisors"]
        assert sorted(h["hypervisor_hostname"] for h in hyp) == sorted(hosts), hyp
        st, _, body = c.request("GET", "/placement/resource_providers", token=c._token,
                                headers={"OpenStack-API-Version": "placement 1.14"})
        assert st == 200 and sorted(r["name"] for r in body["resource_providers"]) == \
            sorted(hosts), body
        servers = [boot(c, unique("many")) for _ in range(3)]
        assert all(x["status"] == "ACTIVE" and x["OS-EXT-SRV-ATTR:host"] in hosts
                   for x in servers), servers
        # still up after more than service_down_time: the batch of heartbeats goes on
        time.sleep(DOWN_TIME + 1)
        ups = [x for x in api(c, "/os-services?binary=nova-compute")["services"]
               if x["state"] == "up"]
        assert len(ups) == 20, ups
        for x in servers:
            c.cli("server", "delete", "--wait", x["id"])
    finally:
        assert all(rc == 0 for rc in s.stop())


# ---- a real guest on a libvirt compute process of its own ------------------


@pytest.fixture(scope="module")
def lvsplit(lv_vhost):
    import test_libvirt as lv
    why = lv.libvirt_ready()
    if why:
        pytest.skip(why)
    d = lv.make_state_dir("mp-lv")
    s = Split(d, lv_vhost, ("--driver", "libvirt", "--set", "libvirt.virt_type=qemu",
                         "--set", "image_cache.remove_unused_original_minimum_age_seconds=0"))
    s.create().start_serve()
    s.compute("lvhost")
    yield s
    for row in s.cloud.sql("SELECT uuid FROM instances WHERE deleted = 0"):
        lv.virsh("destroy", row["uuid"], check=False)
        lv.virsh("undefine", row["uuid"], "--managed-save", check=False)
    rcs = s.stop()
    remove_agent_leftovers(d)  # the host agent's qdhcp namespace and dnsmasq
    if not os.environ.get("NUBO_E2E_KEEP"):
        shutil.rmtree(d, ignore_errors=True)
    assert all(rc == 0 for rc in rcs), rcs


def console(c, sid):
    st, _, data = c.request("POST", "/compute/v2.1/servers/%s/action" % sid,
                            {"os-getConsoleOutput": {}}, token=c._token)
    assert st == 200, (st, data)
    return data["output"]


def test_libvirt_compute_process_fetches_the_image_over_http_and_boots_it(lvsplit):
    import test_libvirt as lv
    s, c = lvsplit, lvsplit.cloud
    wait_state(c, "lvhost", "up", 60)
    img = c.cli("image", "create", "--file", lv.QCOW2, "--disk-format", "qcow2",
                "--container-format", "bare", "--public", unique("guest"), "-f", "json")
    t0 = time.time()
    args = ["--os-compute-api-version", "2.37", "server", "create", "--flavor", "m1.tiny",
            "--image", img["id"], "--nic", "none", unique("mp-lv"), "-f", "json"]
    sid = c.cli(*args)["id"]
    srv = wait_status(c, sid, "ACTIVE", timeout=180)
    assert srv["OS-EXT-SRV-ATTR:host"] == "lvhost"
    wait_for("guest boot", lambda: "GUEST-BOOTED" in console(c, sid), timeout=240, interval=1)
    print("libvirt boot through a separate compute process: %.1f s" % (time.time() - t0))
    assert "running" in lv.virsh("domstate", sid).stdout
    # the base image came from the image API, as the nova user, verified
    log = s.compute_log("lvhost")
    assert re.search(r"Image %s fetched into the cache as \S+ \(qcow2, \d+ bytes, sha512 "
                     r"verified\)" % img["id"], log), log[-3000:]
    nova = c.cli("user", "show", "nova", "-f", "json")["id"]
    with open(os.path.join(c.state_dir, "log", "nubo-image.log")) as f:
        got = [l for l in f if '"GET /image/v2/images/%s/file HTTP/1.1" status: 200' % img["id"] in l]
    assert got and nova in got[0], got
    # a snapshot goes back to the image API the same way
    snap = c.cli("server", "image", "create", "--name", unique("mp-snap"), "--wait", sid,
                 "-f", "json")
    shown = c.cli("image", "show", snap["id"], "-f", "json")
    assert shown["status"] == "active" and shown["disk_format"] == "qcow2"
    c.cli("server", "delete", "--wait", sid)
    assert lv.virsh("domstate", sid, check=False).returncode != 0
    c.cli("image", "delete", snap["id"], img["id"])

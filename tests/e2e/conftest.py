"""End-to-end fixtures: start a real `nubo aio` and drive it with the real
`openstack` CLI (Debian's python3-openstackclient) and openstacksdk.

NUBO_BIN selects the binary (default: build/nubo); the sanitizer run sets it
to the ASan/UBSan build and NUBO_ASAN_LOG to collect reports.

NUBO_TEST_DB=mariadb runs every all-in-one on MariaDB instead of SQLite: each
Cloud gets a fresh database on the test server (`bash tests/db/mariadb.sh
start` first; `createdb` per Cloud) through --set database.connection=, and
Cloud.sql() goes through the mariadb client. Tests that run the sqlite3 CLI
on db_path themselves do not follow."""
import atexit
import json
import os
import pty
import signal
import socket
import subprocess
import time
import uuid

import pytest

import osc_runner

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NUBO_BIN = os.environ.get("NUBO_BIN", os.path.join(ROOT, "build", "nubo"))
OPENSTACK = "/usr/bin/openstack"
ADMIN_PASSWORD = "e2e-admin-secret"
TEST_DB = os.environ.get("NUBO_TEST_DB", "sqlite")
MARIADB_SH = os.path.join(ROOT, "tests", "db", "mariadb.sh")
MARIADB_USER, MARIADB_PASSWORD = "nubo_e2e", "nubo-e2e"


def fresh_mariadb():
    """A new database on the MariaDB test server; (name, URL)."""
    name = "nubo_e2e_" + uuid.uuid4().hex[:12]
    p = subprocess.run(["bash", MARIADB_SH, "createdb", name, MARIADB_USER, MARIADB_PASSWORD],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("NUBO_TEST_DB=mariadb: createdb failed (is the server started with "
                           "`bash tests/db/mariadb.sh start`?): " + p.stderr)
    return name, p.stdout.strip()


def free_port():
    """A free port whose successor is free too: `nubo aio` puts the metadata
    API on port + 1."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
            return port
        except (OSError, OverflowError):
            continue


def run_openstack(argv, env, timeout):
    """Runs `openstack ARGV` with stdin a terminal, as for an operator (OSC
    uploads a non-tty stdin as image data). By default through this worker's
    warm runner (osc_runner.py: the same shell.main, forked per command);
    NUBO_E2E_CLI=exec runs /usr/bin/openstack itself for every command."""
    global _runner
    if os.environ.get("NUBO_E2E_CLI") == "exec":
        master, slave = pty.openpty()
        try:
            p = subprocess.run([OPENSTACK] + argv, env=env, capture_output=True, text=True,
                               timeout=timeout, stdin=slave)
        finally:
            os.close(master)
            os.close(slave)
        return p
    if _runner is None:
        _runner = osc_runner.Runner()
        atexit.register(_runner.close)
    rc, out, err = _runner.run(argv, env, timeout)
    return subprocess.CompletedProcess([OPENSTACK] + argv, rc, out, err)


_runner = None


class CliError(Exception):
    def __init__(self, args, rc, out, err):
        super().__init__("openstack %s -> rc=%d\n%s\n%s" % (" ".join(args), rc, out, err))
        self.rc, self.stdout, self.stderr = rc, out, err


class Cloud:
    """A running all-in-one and helpers to talk to it as an operator would."""

    def __init__(self, state_dir, port, extra_args=(), listen=None):
        """listen: an address other than 127.0.0.1 for the API (`--listen`),
        for agents in other network namespaces."""
        self.state_dir = str(state_dir)
        self.port = port
        self.addr = listen or "127.0.0.1"
        self.url = "http://%s:%d" % (self.addr, port)
        self.extra_args = (["--listen", listen] if listen else []) + list(extra_args)
        # the admin password goes in the environment, as the operator is
        # told to (`--admin-password` is visible in ps)
        self.admin_password = ADMIN_PASSWORD
        self.proc = None
        self.mariadb = None
        if TEST_DB == "mariadb":
            self.mariadb, url = fresh_mariadb()
            self.extra_args += ["--set", "database.connection=" + url]

    # -- process control -------------------------------------------------
    def start(self, timeout=30):
        os.makedirs(self.state_dir, exist_ok=True)
        out_path = os.path.join(self.state_dir, "aio.out")
        self.out = open(out_path, "ab")
        start_at = self.out.tell()
        env = dict(os.environ)
        env.pop("NUBO_ADMIN_PASSWORD", None)
        if self.admin_password:
            env["NUBO_ADMIN_PASSWORD"] = self.admin_password
        self.proc = subprocess.Popen(
            [NUBO_BIN, "aio", "--state-dir", self.state_dir, "--port", str(self.port)]
            + self.extra_args, stdout=self.out, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("nubo aio exited with %s: %s" % (self.proc.returncode, self.tail()))
            # "nubo: ready" comes once every role started (the local compute
            # agents registered): the port alone answers before that, and a
            # boot then would find no host in placement
            with open(out_path, "rb") as f:
                f.seek(start_at)
                if b"nubo: ready" in f.read():
                    return self
            time.sleep(0.05)
        raise RuntimeError("nubo aio did not start: " + self.tail())

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("nubo did not stop within %ss of signal %s" % (timeout, sig))
        return self.proc.returncode if self.proc else None

    def tail(self, n=4000):
        try:
            with open(os.path.join(self.state_dir, "aio.out"), "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def log(self, role):
        with open(os.path.join(self.state_dir, "log", "nubo-%s.log" % role)) as f:
            return f.read()

    @property
    def db_path(self):
        return os.path.join(self.state_dir, "nubo.sqlite")

    def sql(self, query):
        if self.mariadb:
            return self.mariadb_sql(query)
        out = subprocess.run(["sqlite3", "-json", self.db_path, query], check=True,
                             capture_output=True, text=True).stdout
        return json.loads(out) if out.strip() else []

    def mariadb_sql(self, query):
        """Cloud.sql on MariaDB: rows as dicts (integers as int, NULL as None),
        in the session mode nubo uses (double-quoted identifiers)."""
        out = subprocess.run(
            ["bash", MARIADB_SH, "client", "--batch", "--raw", self.mariadb,
             "-e", "SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES,PIPES_AS_CONCAT'); "
             + query], check=True, capture_output=True, text=True).stdout
        lines = out.split("\n")
        if not lines[0]:
            return []
        cols = lines[0].split("\t")

        def value(v):
            if v == "NULL":
                return None
            try:
                return int(v)
            except ValueError:
                return v
        return [dict(zip(cols, map(value, line.split("\t")))) for line in lines[1:] if line]

    # -- clients -----------------------------------------------------------
    def env(self):
        e = dict(os.environ)
        e["OS_CLIENT_CONFIG_FILE"] = os.path.join(self.state_dir, "clouds.yaml")
        e["PATH"] = "/usr/bin:/bin:/usr/sbin:/sbin"
        for k in list(e):
            if k.startswith("OS_") and k != "OS_CLIENT_CONFIG_FILE":
                del e[k]
        return e

    def cli(self, *args, cloud="nubo", check=True, parse=True, timeout=120):
        """Runs `openstack --os-cloud CLOUD ARGS`; with -f json parses the output."""
        argv = ["--os-cloud", cloud] + [str(a) for a in args]
        p = run_openstack(argv, self.env(), timeout)
        if check and p.returncode != 0:
            raise CliError(args, p.returncode, p.stdout, p.stderr)
        if not check:
            return p
        if parse and "json" in args:
            return json.loads(p.stdout) if p.stdout.strip() else None
        return p.stdout

    def sdk(self, cloud="nubo"):
        import openstack
        os.environ["OS_CLIENT_CONFIG_FILE"] = os.path.join(self.state_dir, "clouds.yaml")
        return openstack.connect(cloud=cloud)

    def token(self, cloud="nubo"):
        return self.cli("token", "issue", "-f", "json", cloud=cloud)["id"]

    def request(self, method, path, body=None, token=None, headers=None, raw=None):
        """Plain HTTP request; returns (status, headers, parsed body or text)."""
        import http.client
        conn = http.client.HTTPConnection(self.addr, self.port, timeout=60)
        h = {"Content-Type": "application/json"}
        if token:
            h["X-Auth-Token"] = token
        h.update(headers or {})
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        text = r.read().decode(errors="replace")
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        conn.close()
        return r.status, dict(r.getheaders()), parsed

    def wait_server(self, server_id, statuses=("ACTIVE", "ERROR"), timeout=60, cloud="nubo"):
        deadline = time.time() + timeout
        while time.time() < deadline:
            s = self.cli("server", "show", server_id, "-f", "json", cloud=cloud)
            if s["status"] in statuses:
                return s
            time.sleep(0.2)
        raise AssertionError("server %s not in %s after %ss" % (server_id, statuses, timeout))


def unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def running_cloud(tmp_path_factory, name, extra_args=()):
    """A module's (or the session's) own all-in-one, for `yield from` in its
    fixture: started, and at the end stopped by SIGTERM, which must exit 0."""
    c = Cloud(tmp_path_factory.mktemp(name), free_port(), extra_args)
    c.start()
    yield c
    rc = c.stop()
    assert rc == 0, "nubo exited with %s on SIGTERM: %s" % (rc, c.tail())


@pytest.fixture(scope="session")
def cloud(tmp_path_factory):
    # the shared cloud boots many servers in the admin project, each with a
    # port on the seeded network: a /22 instead of devstack's /26
    for c in running_cloud(tmp_path_factory, "aio", ("--set", "network.seed_private_cidr=10.0.0.0/22")):
        c.cli("quota", "set", "--instances", "500", "--cores", "1000", "--ram", "1000000", "admin")
        yield c


@pytest.fixture
def fresh_cloud(tmp_path):
    """A private all-in-one for tests that change global state or restart it."""
    clouds = []

    def make(*extra_args, quota=True):
        if quota:  # room for the boots a test makes in the admin project
            extra_args = ("--set", "quota.instances=200", "--set", "quota.cores=400",
                          "--set", "quota.ram=409600") + extra_args
        c = Cloud(tmp_path / ("aio%d" % len(clouds)), free_port(), extra_args)
        clouds.append(c)
        return c.start()
    yield make
    for c in clouds:
        c.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """One module runs on one worker (--dist loadgroup spreads unmarked tests
    one by one): a module's fixtures -- its cloud, its guests, namespaces and
    addresses with fixed names -- are then made once, not once per worker,
    and two copies of them never meet on the machine. A module that already
    names its group (xdist_group("hosts")) keeps it."""
    for item in items:
        if not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))

"""`nubo status`: every role and agent of a cloud, one grep-able line each,
exit 0 all up / 1 something down / 3 cannot tell.

One split cloud (fake driver, its own RabbitMQ vhost, as in
test_multiprocess): `nubo serve` and two `nubo compute` processes. A
compute killed -9 is down at once (its process record is no longer
locked), without waiting for service_down_time; a stopped control plane is
down too."""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import NUBO_BIN
from test_multiprocess import Split, new_vhost


@pytest.fixture(scope="module")
def vhost():
    yield from new_vhost()


def status(conf):
    p = subprocess.run([NUBO_BIN, "status", "--config", conf], capture_output=True, text=True,
                       timeout=60)
    lines = {}
    for l in p.stdout.splitlines():
        binary = l.split()[0]
        fields = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', l))
        lines[(binary, fields.get("host"))] = fields
    return p.returncode, lines, p


def wait_status(conf, want_rc, timeout=30):
    deadline = time.time() + timeout
    while True:
        rc, lines, p = status(conf)
        if rc == want_rc or time.time() > deadline:
            return rc, lines, p
        time.sleep(0.3)


def test_status_lists_roles_and_agents_and_sees_a_killed_compute(tmp_path, vhost):
    s = Split(tmp_path / "st", vhost).create().start_serve()
    try:
        a, b = s.compute("hostA"), s.compute("hostB")
        rc, lines, p = wait_status(s.conf, 0)
        assert rc == 0, p.stdout + p.stderr
        serve_pid = str(s.serve.p.pid)
        for binary in ("nova-api", "placement-api", "nova-metadata-api", "nova-conductor",
                       "nova-scheduler"):
            line = [v for (k, h), v in lines.items() if k == binary]
            assert len(line) == 1, (binary, p.stdout)
            assert line[0]["state"] == "up" and line[0]["pid"] == serve_pid, line
            assert line[0]["command"] == "serve" and line[0]["version"] == "0.1.0"
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", line[0]["since"]), line
        for host, proc in (("hostA", a), ("hostB", b)):
            c = lines[("nova-compute", host)]
            assert c["state"] == "up" and c["status"] == "enabled", c
            assert c["pid"] == str(proc.p.pid) and c["command"] == "compute", c
            assert c["last_heartbeat"] != "-" and c["service_version"] == "66"

        # a second agent for hostA on this state path is refused
        dup = subprocess.run([NUBO_BIN, "compute", "--config", s.conf, "--set",
                              "DEFAULT.host=hostA", "--set", "fake.hosts=hostA", "--set",
                              "DEFAULT.log_dir=%s" % (tmp_path / "dup-log")],
                             capture_output=True, text=True, timeout=60)
        assert dup.returncode == 1, dup.stdout + dup.stderr
        assert "a running nubo process (pid %d, compute since" % a.p.pid in dup.stderr
        assert "already runs some of these roles (compute)" in dup.stderr
        assert status(s.conf)[1][("nova-compute", "hostA")]["pid"] == str(a.p.pid)

        # kill -9 one agent: down at once, the rest up, exit status 1
        b.stop(signal.SIGKILL)
        rc, lines, p = status(s.conf)
        assert rc == 1, p.stdout
        down = lines[("nova-compute", "hostB")]
        assert down["state"] == "down", down
        assert "process %d is gone, killed or crashed" % b.p.pid in down["detail"], down
        assert lines[("nova-compute", "hostA")]["state"] == "up"
        assert [l for l in p.stdout.splitlines() if "state=down" in l] == \
            [l for l in p.stdout.splitlines() if l.startswith("nova-compute") and "host=hostB" in l]

        # a stopped control plane: the API does not answer, its roles are down
        assert s.serve.stop() == 0
        rc, lines, p = status(s.conf)
        assert rc == 1
        api = [v for (k, h), v in lines.items() if k == "nova-api"][0]
        assert api["state"] == "down" and "stopped at" in api["detail"], api
        cond = [v for (k, h), v in lines.items() if k == "nova-conductor"][0]
        assert cond["state"] == "down" and "stopped at" in cond["detail"], cond
    finally:
        s.stop()


def test_status_cannot_tell_without_a_database(tmp_path):
    conf = tmp_path / "nubo.conf"
    conf.write_text("[DEFAULT]\nstate_path = %s\nroles = conductor,scheduler\n" % tmp_path)
    rc, lines, p = status(str(conf))
    assert rc == 3, p.stdout + p.stderr
    assert "cannot read the database %s/nubo.sqlite" % tmp_path in p.stderr
    assert not os.path.exists(tmp_path / "nubo.sqlite")

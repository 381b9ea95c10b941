"""`nubo doctor cloud` (and `nubo doctor` alone) against an all-in-one with
the FAKE driver: each inconsistency made behind nubo's back with the
sqlite3 CLI, then named by its check with its evidence, and a clean cloud
reporting no PROBLEM. Exit status 0 clean, 1 problems; --json for
monitoring. The libvirt domain check runs against the system libvirt with a
defined, never started domain (no guest), skipped without libvirt."""
import glob
import json
import os
import subprocess
import time
import uuid

import pytest

from conftest import NUBO_BIN, Cloud, free_port, running_cloud
from test_doctor import CORRUPT, Api, conf, image_server, sqlite3, volume_server


@pytest.fixture(scope="module")
def dc(tmp_path_factory):
    yield from running_cloud(tmp_path_factory, "doctor-cloud")


@pytest.fixture(scope="module")
def api(dc):
    return Api(dc)


def cloud(c, *args):
    p = subprocess.run([NUBO_BIN, "doctor"] + list(args) + ["--config", conf(c)],
                       capture_output=True, text=True, timeout=120)
    assert "AddressSanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    return p


def findings(c, check):
    p = cloud(c, "cloud", "--json")
    doc = json.loads(p.stdout)
    return p.returncode, [f for f in doc["findings"] if f["check"] == check]


def problems(c, check):
    rc, fs = findings(c, check)
    return rc, [f for f in fs if f["verdict"] == "PROBLEM"]


def allocations(c, consumer):
    return {r["resource_class"]: r["used"] for r in c.sql(
        "SELECT resource_class, used FROM allocations WHERE consumer_id = '%s'" % consumer)}


def fix_of(out, check, subject):
    """The fix id of the [FIX] line of check on subject."""
    for ln in out.splitlines():
        if ln.startswith("[FIX] %s %s:" % (check, subject)) and " done; fix " in ln:
            return ln.split(" done; fix ")[1].split()[0]
    raise AssertionError("no [FIX] %s %s in %s" % (check, subject, out))


def test_clean_cloud(dc, api):
    image_server(dc, api)
    p = cloud(dc)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[PROBLEM]" not in p.stdout, p.stdout
    for check in ("orphan allocation", "missing allocation", "stuck migration", "stuck task",
                  "service down", "port binding", "disk format"):
        assert "[OK] %s:" % check in p.stdout, p.stdout
    assert "[SKIP] clock skew:" in p.stdout
    assert "[SKIP] libvirt domain: [compute] driver is fake" in p.stdout
    assert p.stdout.rstrip().endswith("summary: cloud: 0 problem(s), 0 warning(s)")
    doc = json.loads(cloud(dc, "cloud", "--json").stdout)
    assert doc["problems"] == 0


def test_missing_allocation(dc, api):
    s = image_server(dc, api)
    sqlite3(dc, "DELETE FROM allocations WHERE consumer_id = '%s'" % s["id"])
    rc, fs = problems(dc, "missing allocation")
    assert rc == 1
    mine = [f for f in fs if f["subject"] == s["id"]]
    assert len(mine) == 1, fs
    assert "VCPU=1" in mine[0]["evidence"] and "MEMORY_MB=" in mine[0]["evidence"], mine
    assert mine[0]["fix"]["action"] == "heal" and mine[0]["fix"]["resources"]["VCPU"] == 1
    # --fix heals it through placement's claim, kept in doctor_cloud_fixes
    p = cloud(dc, "cloud", "--fix")
    assert p.returncode == 2, p.stdout + p.stderr
    fix_id = fix_of(p.stdout, "missing allocation", s["id"])
    held = allocations(dc, s["id"])
    assert held["VCPU"] == 1 and held["MEMORY_MB"] == mine[0]["fix"]["resources"]["MEMORY_MB"]
    assert cloud(dc).returncode == 0
    # rollback takes the healed allocation away again
    p = cloud(dc, "rollback", fix_id)
    assert p.returncode == 0 and "undone" in p.stdout, p.stdout + p.stderr
    assert allocations(dc, s["id"]) == {}
    assert dc.sql("SELECT outcome FROM doctor_cloud_fixes WHERE id = %s" % fix_id)[0][
        "outcome"] == "rolled_back"
    p = cloud(dc, "rollback", fix_id)
    assert p.returncode == 1 and "rolled_back, not applied" in p.stderr
    assert cloud(dc, "cloud", "--fix").returncode == 2
    api.call("DELETE", "/compute/v2.1/servers/%s" % s["id"], want=204)


def test_orphan_allocation(dc, api):
    s = image_server(dc, api)
    rp = dc.sql("SELECT resource_provider_id AS rp FROM allocations WHERE consumer_id = '%s'"
                % s["id"])[0]["rp"]
    ghost = str(uuid.uuid4())
    sqlite3(dc, "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class, "
                "used) VALUES (%d, '%s', 'VCPU', 2)" % (rp, ghost))
    try:
        rc, fs = problems(dc, "orphan allocation")
        assert rc == 1
        mine = [f for f in fs if f["subject"] == ghost]
        assert len(mine) == 1 and "VCPU=2" in mine[0]["evidence"], fs
        assert "no live server or migration" in mine[0]["evidence"]
        p = cloud(dc, "cloud", "--fix")
        assert p.returncode == 2, p.stdout + p.stderr
        fix_id = fix_of(p.stdout, "orphan allocation", ghost)
        assert allocations(dc, ghost) == {}
        # the rollback claims it back (placement's claim, so a consumer again)
        assert cloud(dc, "rollback", fix_id).returncode == 0
        assert allocations(dc, ghost) == {"VCPU": 2}
    finally:
        sqlite3(dc, "DELETE FROM allocations WHERE consumer_id = '%s'" % ghost)


def test_stuck_migration_and_task(dc, api):
    s = image_server(dc, api)
    mig = str(uuid.uuid4())
    sqlite3(dc, "INSERT INTO migrations (uuid, instance_uuid, status, migration_type, "
                "source_compute, created_at, updated_at) VALUES ('%s', '%s', 'running', "
                "'live-migration', 'h1', '2020-01-01T00:00:00.000000', "
                "'2020-01-01T00:00:00.000000')" % (mig, s["id"]))
    sqlite3(dc, "UPDATE instances SET task_state = 'migrating', updated_at = "
                "'2020-01-01T00:00:00.000000' WHERE uuid = '%s'" % s["id"])
    try:
        rc, fs = problems(dc, "stuck migration")
        assert rc == 1
        mine = [f for f in fs if f["subject"] == mig]
        assert len(mine) == 1 and "has been running for" in mine[0]["evidence"], fs
        assert mine[0]["fix"] == {"action": "migration_error", "migration": mig,
                                  "status": "running"}
        _, ts = problems(dc, "stuck task")
        assert [f for f in ts if f["subject"] == s["id"] and "migrating" in f["evidence"]], ts
        p = cloud(dc, "cloud", "--fix")
        assert p.returncode == 1, p.stdout  # the stuck task has no safe repair
        fix_id = fix_of(p.stdout, "stuck migration", mig)
        assert dc.sql("SELECT status FROM migrations WHERE uuid = '%s'" % mig)[0][
            "status"] == "error"
        assert cloud(dc, "rollback", fix_id).returncode == 0
        assert dc.sql("SELECT status FROM migrations WHERE uuid = '%s'" % mig)[0][
            "status"] == "running"
    finally:
        sqlite3(dc, "UPDATE migrations SET status = 'error' WHERE uuid = '%s'" % mig)
        sqlite3(dc, "UPDATE instances SET task_state = NULL WHERE uuid = '%s'" % s["id"])


def test_service_down_and_port_binding(dc, api):
    s = image_server(dc, api)
    port = dc.sql("SELECT id FROM ports WHERE device_id = '%s'" % s["id"])[0]["id"]
    sqlite3(dc, "UPDATE ports SET binding_host_id = 'gone-host' WHERE id = '%s'" % port)
    sqlite3(dc, "INSERT INTO services (uuid, host, binary, topic, last_seen_up, created_at) "
                "VALUES ('%s', 'old-host', 'nova-compute', 'compute', "
                "'2020-01-01T00:00:00.000000', '2020-01-01T00:00:00.000000')" % uuid.uuid4())
    try:
        rc, fs = problems(dc, "port binding")
        assert rc == 1
        assert [f for f in fs if f["subject"] == port and "gone-host" in f["evidence"]], fs
        _, ss = problems(dc, "service down")
        assert [f for f in ss if f["subject"] == "nova-compute@old-host"], ss
    finally:
        sqlite3(dc, "DELETE FROM services WHERE host = 'old-host'")
    api.call("DELETE", "/compute/v2.1/servers/%s" % s["id"], want=204)


def test_no_argument_is_cloud(dc):
    p = cloud(dc)
    assert "summary: cloud:" in p.stdout, p.stdout + p.stderr


def test_conductor_audit_logs_findings(tmp_path):
    """[conductor] audit_interval: the same checks in the conductor, each
    finding a WARNING with its evidence."""
    c = Cloud(tmp_path / "audit", free_port(), ["--set", "conductor.audit_interval=1"])
    c.start()
    try:
        ghost = str(uuid.uuid4())
        deadline = time.time() + 15  # the fake hosts register their providers
        while not c.sql("SELECT id FROM resource_providers") and time.time() < deadline:
            time.sleep(0.1)
        rp = c.sql("SELECT id FROM resource_providers ORDER BY id LIMIT 1")[0]["id"]
        sqlite3(c, "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class, "
                   "used) VALUES (%d, '%s', 'MEMORY_MB', 64)" % (rp, ghost))
        deadline = time.time() + 15
        logged = []
        while time.time() < deadline and not logged:
            time.sleep(0.5)
            logged = [ln for ln in all_logs(c).splitlines()
                      if "WARNING" in ln and "Cloud audit: [PROBLEM] orphan allocation " + ghost
                      in ln]
        assert logged and "MEMORY_MB=64" in logged[0], all_logs(c)[-3000:]
        # the same finding as a gauge on /metrics
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=30)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        assert 'nubo_reconciler_findings{check="orphan allocation",verdict="PROBLEM"} 1\n' \
            in text, text
        assert 'nubo_reconciler_findings{check="stuck migration",verdict="PROBLEM"} 0\n' in text
    finally:
        assert c.stop() == 0, c.tail()


def all_logs(c):
    text = ""
    for path in glob.glob(os.path.join(c.state_dir, "log", "*.log")):
        with open(path, errors="replace") as f:
            text += f.read()
    return text


def test_libvirt_domains(dc, api, tmp_path):
    """With [compute] driver = libvirt on the server's host: an ACTIVE server
    without its domain, and a domain named by a UUID without a server (a
    defined, never started domain: no guest needed)."""
    if subprocess.run(["virsh", "-c", "qemu:///system", "version"],
                      capture_output=True).returncode != 0:
        pytest.skip("no libvirt here")
    s = image_server(dc, api)
    host = s["OS-EXT-SRV-ATTR:host"]
    ghost = str(uuid.uuid4())
    xml = tmp_path / "dom.xml"
    xml.write_text("<domain type='qemu'><name>%s</name><uuid>%s</uuid><memory>65536</memory>"
                   "<os><type arch='x86_64'>hvm</type></os></domain>" % (ghost, ghost))
    subprocess.run(["virsh", "-c", "qemu:///system", "define", str(xml)], check=True,
                   capture_output=True)
    try:
        p = cloud(dc, "cloud", "--json", "--set", "compute.driver=libvirt",
                  "--set", "DEFAULT.host=%s" % host)
        fs = [f for f in json.loads(p.stdout)["findings"] if f["check"] == "libvirt domain"]
        assert p.returncode == 1
        assert [f for f in fs if f["subject"] == s["id"] and "has no domain" in f["evidence"]], fs
        assert [f for f in fs if f["subject"] == ghost
                and "belongs to no live server" in f["evidence"]], fs
    finally:
        subprocess.run(["virsh", "-c", "qemu:///system", "undefine", ghost], capture_output=True)
    api.call("DELETE", "/compute/v2.1/servers/%s" % s["id"], want=204)


def test_disk_format(dc, api):
    """A mapping that says qcow2 for a raw file, through doctor server's check."""
    s, vid = volume_server(dc, api)
    sqlite3(dc, CORRUPT.format(fmt="qcow2", vm=s["id"]))
    try:
        rc, fs = problems(dc, "disk format")
        assert rc == 1
        mine = [f for f in fs if f["subject"] == s["id"]]
        assert len(mine) == 1, fs
        assert "connection_info.data.format=qcow2" in mine[0]["evidence"]
        assert "is raw" in mine[0]["evidence"] and vid in mine[0]["evidence"]
    finally:
        sqlite3(dc, CORRUPT.format(fmt="raw", vm=s["id"]))
    assert not [f for f in problems(dc, "disk format")[1] if f["subject"] == s["id"]]

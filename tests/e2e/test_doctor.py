"""`nubo doctor server` against a running all-in-one with the FAKE driver:
what needs no real guest. Exit statuses (0 healthy, 1 problem not fixed,
2 fixed, 3 cannot diagnose, 64 usage), the runbook's disk-format mismatch
made with the runbook's own JSON_SET through the `sqlite3` CLI and named with
both formats, and --fix: the mapping corrected, the old connection_info kept
in doctor_fixes, an ERROR server reset and hard-rebooted through the API, and
the rollback when the API cannot take the reboot; the metadata path through
the port's security groups (what the database says, so no guest is needed).
The real-guest runbook is in test_bfv.py; the data-plane checks of a real
guest's port are in test_dataplane_metadata.py."""
import glob
import json
import os
import re
import subprocess
import time
import uuid

import pytest

import conftest
from conftest import ADMIN_PASSWORD, NUBO_BIN, free_port, running_cloud, unique

CORRUPT = ("UPDATE block_device_mapping SET connection_info = JSON_SET(connection_info, "
           "'$.data.format', '{fmt}') WHERE instance_uuid = '{vm}' AND deleted = 0;")
SELECT_FORMAT = ("SELECT JSON_EXTRACT(connection_info, '$.data.format') AS f FROM "
                 "block_device_mapping WHERE instance_uuid = '{vm}' AND deleted = 0;")


@pytest.fixture(scope="module")
def dc(tmp_path_factory):
    yield from running_cloud(tmp_path_factory, "doctor")


@pytest.fixture(scope="module")
def api(dc):
    return Api(dc)


def conf(c):
    return os.path.join(c.state_dir, "nubo.conf")


def doctor(*args, timeout=180):
    p = subprocess.run([NUBO_BIN, "doctor"] + [str(a) for a in args], capture_output=True,
                       text=True, timeout=timeout)
    assert "AddressSanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    return p


def diagnose(c, server_id, *args):
    return doctor("server", server_id, "--config", conf(c), *args)


def sqlite3(c, sql):
    """The runbook's way: the sqlite3 CLI on the state dir's database, or with
    NUBO_TEST_DB=mariadb the mariadb client in its default mode (the runbook
    SQL verbatim)."""
    if c.mariadb:
        out = subprocess.run(["bash", conftest.MARIADB_SH, "client", "--batch", "-N", "--raw",
                              c.mariadb, "-e", sql], check=True, capture_output=True,
                             text=True).stdout.strip()
        # MariaDB's JSON_EXTRACT prints the JSON text ("raw" with its quotes,
        # as Nova's runbook shows on MySQL), SQLite's the bare scalar
        return json.loads(out) if len(out) > 1 and out[0] == out[-1] == '"' else out
    return subprocess.run(["sqlite3", c.db_path, sql], check=True, capture_output=True,
                          text=True).stdout.strip()


class Api:
    """The cloud's REST API as admin (the CLI takes seconds per call here)."""

    def __init__(self, c):
        self.c = c
        st, h, _ = c.request("POST", "/identity/v3/auth/tokens", {"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": "admin", "domain": {"id": "default"}, "password": ADMIN_PASSWORD}}},
            "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}})
        assert st == 201, st
        self.token = h["X-Subject-Token"]
        self.project = c.sql("SELECT id FROM project WHERE name = 'admin' AND is_domain = 0")[0]["id"]

    def call(self, method, path, body=None, want=None):
        st, _, data = self.c.request(method, path, body, token=self.token)
        if want is not None:
            assert st == want, (method, path, st, data)
        return data

    def server(self, sid):
        return self.call("GET", "/compute/v2.1/servers/%s" % sid, want=200)["server"]

    def actions(self, sid):
        data = self.call("GET", "/compute/v2.1/servers/%s/os-instance-actions" % sid, want=200)
        return [a["action"] for a in data["instanceActions"]]


def wait_row(c, sql, done, timeout=60):
    """Polls a row of the database until done(row)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        rows = c.sql(sql)
        if rows and done(rows[0]):
            return rows[0]
        time.sleep(0.1)
    raise AssertionError("%s: not done after %ss: %s" % (sql, timeout, rows))


def boot(c, api, name, extra):
    flavor = c.sql("SELECT flavorid FROM flavors WHERE name = 'm1.tiny'")[0]["flavorid"]
    body = {"server": dict({"name": name, "flavorRef": flavor}, **extra)}
    sid = api.call("POST", "/compute/v2.1/servers", body, want=202)["server"]["id"]
    row = wait_row(c, "SELECT vm_state, task_state FROM instances WHERE uuid = '%s'" % sid,
                   lambda r: r["task_state"] is None and r["vm_state"] in ("active", "error"))
    assert row["vm_state"] == "active", row
    return api.server(sid)


def image_server(c, api):
    image = c.sql("SELECT id FROM images WHERE name = 'cirros'")[0]["id"]
    return boot(c, api, unique("dr-img"), {"imageRef": image})


def volume_server(c, api):
    """A server booted from a bootable 1 GiB raw volume; returns (server, volume id)."""
    vol = "/volume/v3/%s/volumes" % api.project
    vid = api.call("POST", vol, {"volume": {"size": 1, "name": unique("dr-vol")}},
                   want=202)["volume"]["id"]
    wait_row(c, "SELECT status FROM volumes WHERE id = '%s'" % vid,
             lambda r: r["status"] == "available")
    api.call("POST", "%s/%s/action" % (vol, vid), {"os-set_bootable": {"bootable": True}},
             want=200)
    s = boot(c, api, unique("dr-bfv"), {"imageRef": "", "block_device_mapping_v2": [{
        "boot_index": 0, "uuid": vid, "source_type": "volume", "destination_type": "volume"}]})
    return s, vid


def volume_file(c, vid):
    files = glob.glob(os.path.join(c.state_dir, "mnt", "*", "volume-%s" % vid))
    assert len(files) == 1, files
    return files[0]


def lines(out, verdict):
    return [ln for ln in out.splitlines() if ln.startswith("[%s]" % verdict)]


def test_usage():
    # `nubo doctor` alone checks the cloud (test_doctor_cloud.py)
    for args in (["server"], ["volume", "x"], ["server", "a", "b"], ["rollback"],
                 ["server", "x", "--timeout", "0"], ["server", "x", "--bogus"]):
        p = doctor(*args)
        assert p.returncode == 64, (args, p.returncode, p.stdout, p.stderr)
        assert "usage: nubo doctor server" in p.stderr, p.stderr
    p = doctor("--help")
    assert p.returncode == 0
    for want in ("Exit status:", "0   no problem found", "2   a problem was found and fixed",
                 "3   the diagnosis could not run", "64  usage error", "--fix"):
        assert want in p.stdout, p.stdout


def test_cannot_diagnose(dc, tmp_path):
    missing = str(uuid.uuid4())
    p = diagnose(dc, missing)
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert "no server with id or name '%s' in the database" % missing in p.stderr
    # no config file
    p = doctor("server", missing, "--config", str(tmp_path / "nope.conf"))
    assert p.returncode == 3, p.stderr
    assert "cannot read config file" in p.stderr
    # a database that is not there is not created
    bad = tmp_path / "bad.conf"
    db = tmp_path / "absent" / "nubo.sqlite"
    bad.write_text("[database]\nconnection = sqlite://%s\n" % db)  # db is absolute
    p = doctor("server", missing, "--config", bad)
    assert p.returncode == 3, p.stderr
    assert "cannot open database %s" % db in p.stderr
    assert not db.exists()


def test_healthy_image_backed(dc, api):
    s = image_server(dc, api)
    p = diagnose(dc, s["id"])
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    assert re.search(r"^\[OK\] server: %s name=\"%s\" status=ACTIVE vm_state=active "
                     r"task_state=None power_state=1 \(RUNNING\) host=fake-\d node=fake-\d$"
                     % (s["id"], s["name"]), out, re.M), out
    assert "[OK] boot volume: none; the server is image-backed (image " in out, out
    assert "[OK] boot_index 0: exactly one mapping" in out, out
    assert "[SKIP] libvirt domain: [compute] driver is fake" in out, out
    assert "[SKIP] volumes: the server has no volume mappings" in out, out
    assert re.search(r"^\[OK\] metadata: egress to 169\.254\.169\.254:80 is allowed by rule \S+ "
                     r"of group default ", out, re.M), out
    assert not lines(out, "PROBLEM"), out
    assert "summary: server %s: 0 problem(s)" % s["id"] in out
    # by name too
    assert diagnose(dc, s["name"]).returncode == 0


def test_format_mismatch_named_with_both_formats(dc, api):
    s, vid = volume_server(dc, api)
    path = volume_file(dc, vid)
    assert sqlite3(dc, SELECT_FORMAT.format(vm=s["id"])) == "raw"
    p = diagnose(dc, s["id"])
    assert p.returncode == 0, p.stdout
    assert ("[OK] disk format: volume %s connection_info.data.format=raw, file %s is raw"
            % (vid, path)) in p.stdout, p.stdout
    assert re.search(r"^\[OK\] volume record: volume %s status=in-use attach_status=attached"
                     % vid, p.stdout, re.M), p.stdout

    sqlite3(dc, CORRUPT.format(fmt="qcow2", vm=s["id"]))
    assert sqlite3(dc, SELECT_FORMAT.format(vm=s["id"])) == "qcow2"
    p = diagnose(dc, s["id"])
    assert p.returncode == 1, p.stdout + p.stderr
    problems = lines(p.stdout, "PROBLEM")
    assert len(problems) == 1, p.stdout
    assert problems[0].startswith(
        "[PROBLEM] disk format: volume %s connection_info.data.format=qcow2, file %s is raw"
        % (vid, path)), problems
    assert "[OK] boot volume: volume %s" % vid in p.stdout
    assert "summary: server %s: 1 problem(s)" % s["id"] in p.stdout
    # diagnosing changes nothing
    assert sqlite3(dc, SELECT_FORMAT.format(vm=s["id"])) == "qcow2"
    assert sqlite3(dc, "SELECT COUNT(*) FROM doctor_fixes WHERE instance_uuid = '%s'"
                   % s["id"]) == "0"


def test_fix_corrects_and_keeps_the_old_value(dc, api):
    s, vid = volume_server(dc, api)
    old = sqlite3(dc, "SELECT connection_info FROM block_device_mapping WHERE instance_uuid = "
                      "'%s' AND deleted = 0" % s["id"])
    sqlite3(dc, CORRUPT.format(fmt="qcow2", vm=s["id"]))
    corrupted = sqlite3(dc, "SELECT connection_info FROM block_device_mapping WHERE "
                            "instance_uuid = '%s' AND deleted = 0" % s["id"])
    p = diagnose(dc, s["id"], "--fix")
    assert p.returncode == 2, p.stdout + p.stderr
    out = p.stdout
    assert "kept in doctor_fixes id" in out and corrupted in out, out
    assert "connection_info.data.format qcow2 -> raw (exactly one row changed)" in out, out
    assert "[FIX] reboot HARD: accepted by the API" in out, out
    assert "[FIX] the server is ACTIVE with power_state 1 (RUNNING)" in out, out
    after = out.split("after the fix:\n", 1)[1]
    assert not lines(after, "PROBLEM"), after
    assert sqlite3(dc, SELECT_FORMAT.format(vm=s["id"])) == "raw"
    # the old value is kept, the new one is the original
    rows = dc.sql("SELECT * FROM doctor_fixes WHERE instance_uuid = '%s'" % s["id"])
    assert len(rows) == 1, rows
    assert rows[0]["old_connection_info"] == corrupted
    # the same document (MariaDB's JSON_SET re-serialises it with spaces)
    assert json.loads(rows[0]["new_connection_info"]) == json.loads(old)
    assert rows[0]["volume_id"] == vid and rows[0]["outcome"] == "fixed"
    assert dc.sql("SELECT value FROM volume_admin_metadata WHERE volume_id = '%s' AND "
                  "\"key\" = 'format' AND deleted = 0" % vid) == [{"value": "raw"}]
    # the reboot went through the API as an instance action
    assert "reboot" in api.actions(s["id"])
    assert api.server(s["id"])["status"] == "ACTIVE"
    # healthy now; a second --fix finds nothing to do
    assert diagnose(dc, s["id"]).returncode == 0
    assert diagnose(dc, s["id"], "--fix").returncode == 0


def test_fix_resets_an_error_server(dc, api):
    s, vid = volume_server(dc, api)
    sqlite3(dc, CORRUPT.format(fmt="qcow2", vm=s["id"]))
    sqlite3(dc, "UPDATE instances SET vm_state = 'error' WHERE uuid = '%s'" % s["id"])
    p = diagnose(dc, s["id"], "--fix")
    assert p.returncode == 2, p.stdout + p.stderr
    assert re.search(r"^\[PROBLEM\] server: .* status=ERROR", p.stdout, re.M), p.stdout
    assert "[FIX] os-resetState active: accepted by the API" in p.stdout, p.stdout
    assert "[FIX] reboot HARD: accepted by the API" in p.stdout, p.stdout
    shown = api.server(s["id"])
    assert shown["status"] == "ACTIVE" and shown["OS-EXT-STS:power_state"] == 1, shown
    assert sqlite3(dc, SELECT_FORMAT.format(vm=s["id"])) == "raw"
    actions = api.actions(s["id"])
    assert "resetState" in actions and "reboot" in actions, actions


def test_fix_rolls_back_when_the_reboot_cannot_run(dc, api):
    s, vid = volume_server(dc, api)
    sqlite3(dc, CORRUPT.format(fmt="qcow2", vm=s["id"]))
    corrupted = sqlite3(dc, "SELECT connection_info FROM block_device_mapping WHERE "
                            "instance_uuid = '%s' AND deleted = 0" % s["id"])
    # an API that is not there: the fix is applied, the reboot cannot be
    # asked for, everything is put back
    p = diagnose(dc, s["id"], "--fix", "--set", "api.port=%d" % free_port())
    assert p.returncode == 1, p.stdout + p.stderr
    assert "cannot be reached" in p.stdout, p.stdout
    assert "[FIX] failed: the API did not accept the hard reboot; rolling back" in p.stdout
    assert re.search(r"^\[ROLLBACK\] disk format: bdm \S+ volume %s connection_info and admin "
                     r"metadata restored" % vid, p.stdout, re.M), p.stdout
    assert sqlite3(dc, "SELECT connection_info FROM block_device_mapping WHERE instance_uuid = "
                       "'%s' AND deleted = 0" % s["id"]) == corrupted
    rows = dc.sql("SELECT outcome, old_connection_info FROM doctor_fixes WHERE "
                  "instance_uuid = '%s'" % s["id"])
    assert rows == [{"outcome": "rolled_back", "old_connection_info": corrupted}], rows
    assert dc.sql("SELECT value FROM volume_admin_metadata WHERE volume_id = '%s' AND "
                  "\"key\" = 'format' AND deleted = 0" % vid) == [{"value": "raw"}]
    # still diagnosed as before
    assert diagnose(dc, s["id"]).returncode == 1


def test_fix_has_nothing_to_apply(dc, api):
    s = image_server(dc, api)
    sqlite3(dc, "UPDATE instances SET vm_state = 'error' WHERE uuid = '%s'" % s["id"])
    p = diagnose(dc, s["id"], "--fix")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "[FIX] nothing to apply: --fix corrects disk-format mismatches only" in p.stdout
    assert api.server(s["id"])["status"] == "ERROR"


def test_libvirt_domain_checked_on_its_own_host(dc, api):
    """The doctor asks libvirt only on the server's host: made to believe it
    is fake-N with the libvirt driver, it finds no domain for an ACTIVE
    server - the runbook's "ACTIVE in the API, no domain on the hypervisor"."""
    if subprocess.run(["virsh", "-c", "qemu:///system", "list"],
                      capture_output=True).returncode != 0:
        pytest.skip("no libvirtd (scripts/libvirt-up.sh starts it)")
    s = image_server(dc, api)
    host = s["OS-EXT-SRV-ATTR:host"]
    p = diagnose(dc, s["id"], "--set", "compute.driver=libvirt", "--set", "DEFAULT.host=other")
    assert p.returncode == 0, p.stdout + p.stderr
    assert ("[SKIP] libvirt domain: the server is on host %s and this is host other; run the "
            "doctor on %s" % (host, host)) in p.stdout, p.stdout
    p = diagnose(dc, s["id"], "--set", "compute.driver=libvirt", "--set", "DEFAULT.host=" + host)
    assert p.returncode == 1, p.stdout + p.stderr
    assert ("[PROBLEM] libvirt domain: no domain %s on host %s (qemu:///system), "
            "vm_state=active" % (s["id"], host)) in p.stdout, p.stdout


def request_id(headers):
    return {k.lower(): v for k, v in headers.items()}.get("x-openstack-request-id", "")


def test_metadata_denied_by_security_group(dc, api):
    """A group without egress rules and a server without a config drive: the
    build goes on (as Nova's) with a WARNING under its request ID, and the
    doctor's PROBLEM names the group and the rule that would let the guest
    reach 169.254.169.254:80; with a config drive it is a WARN; once the rule
    is there, OK. Needs only the database: the fake driver's ports do."""
    name = unique("sd-closed")
    sg = api.call("POST", "/networking/v2.0/security-groups", {"security_group": {"name": name}},
                  want=201)["security_group"]
    for r in sg["security_group_rules"]:
        if r["direction"] == "egress":
            api.call("DELETE", "/networking/v2.0/security-group-rules/%s" % r["id"], want=204)
    net = dc.sql("SELECT id FROM networks WHERE name = 'private'")[0]["id"]
    flavor = dc.sql("SELECT flavorid FROM flavors WHERE name = 'm1.tiny'")[0]["flavorid"]
    image = dc.sql("SELECT id FROM images WHERE name = 'cirros'")[0]["id"]

    def create(**extra):
        body = {"server": dict({"name": unique("dr-md"), "flavorRef": flavor, "imageRef": image,
                                "networks": [{"uuid": net}], "security_groups": [{"name": name}]},
                               **extra)}
        st, h, data = dc.request("POST", "/compute/v2.1/servers", body, token=api.token)
        assert st == 202, data
        sid = data["server"]["id"]
        wait_row(dc, "SELECT vm_state FROM instances WHERE uuid = '%s'" % sid,
                 lambda r: r["vm_state"] == "active")
        return sid, request_id(h)

    sid, rid = create()
    p = diagnose(dc, sid)
    assert p.returncode == 1, p.stdout + p.stderr
    assert ("[PROBLEM] metadata: no egress rule of group %s (%s) allows IPv4 TCP to "
            "169.254.169.254:80 and the server has no config drive: the guest cannot read its "
            "metadata" % (name, sg["id"])) in p.stdout, p.stdout
    assert ("`openstack security group rule create --egress --protocol tcp --dst-port 80 "
            "--remote-ip 169.254.169.254/32 %s`" % sg["id"]) in p.stdout, p.stdout
    assert rid.startswith("req-"), rid
    warned = [ln for ln in dc.log("conductor").splitlines()
              if "WARNING" in ln and rid in ln and sid in ln and "169.254.169.254:80" in ln]
    assert warned and name in warned[0], rid

    cd, _ = create(config_drive=True)
    p = diagnose(dc, cd)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[WARN] metadata: no egress rule of group %s (%s)" % (name, sg["id"]) in p.stdout
    assert "the server has a config drive" in p.stdout, p.stdout

    rule = api.call("POST", "/networking/v2.0/security-group-rules", {"security_group_rule": {
        "security_group_id": sg["id"], "direction": "egress", "ethertype": "IPv4",
        "protocol": "tcp", "port_range_min": 80, "port_range_max": 80,
        "remote_ip_prefix": "169.254.169.254/32"}}, want=201)["security_group_rule"]
    p = diagnose(dc, sid)
    assert p.returncode == 0, p.stdout + p.stderr
    assert ("[OK] metadata: egress to 169.254.169.254:80 is allowed by rule %s of group %s (%s)"
            % (rule["id"], name, sg["id"])) in p.stdout, p.stdout

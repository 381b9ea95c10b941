"""nubo trace <request-id>: a boot's timeline across the roles that handled
it (api, scheduler, placement, conductor, network, compute), the events the
database recorded per host, each role's span, and where a failed request
failed; other hosts' logs with --log HOST=PATH; clear exits for an unknown
or malformed ID."""
import json
import os
import shutil
import subprocess

from conftest import NUBO_BIN, unique


def trace(c, *args):
    return subprocess.run([NUBO_BIN, "trace", *args, "--config",
                           os.path.join(c.state_dir, "nubo.conf")],
                          capture_output=True, text=True, timeout=60)


def boot_request(c, sid):
    ev = c.cli("server", "event", "list", sid, "-f", "json")
    return [e["Request ID"] for e in ev if e["Action"] == "create"][0]


def test_trace_of_a_boot_shows_every_role_in_time_order(cloud):
    s = cloud.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait",
                  unique("tr"), "-f", "json")
    rid = boot_request(cloud, s["id"])
    p = trace(cloud, rid, "--json")
    assert p.returncode == 0, p.stderr
    t = json.loads(p.stdout)
    assert t["request_id"] == rid and t["failed"] is None
    roles = {r["role"] for r in t["roles"]}
    assert {"api", "scheduler", "placement", "conductor", "network", "compute"} <= roles, roles
    offsets = [r["offset_ms"] for r in t["records"]]
    assert offsets == sorted(offsets) and offsets[0] == 0
    msgs = [r["message"] for r in t["records"]]
    assert any('"POST /compute/v2.1/servers HTTP/1.1" status: 202' in m for m in msgs)
    assert any("Instance is ACTIVE on host" in m for m in msgs)
    host = s["OS-EXT-SRV-ATTR:host"]
    ev = [r for r in t["records"] if r["level"] == "EVENT"]
    assert any(r["logger"] == "compute__do_build_and_run_instance" and r["host"] == host
               and r["duration_ms"] >= 0 and "Success" in r["message"] for r in ev), ev
    assert t["total_ms"] >= max(offsets)
    # the text form: one line per record, the roles' spans, the verdict
    p = trace(cloud, rid[4:])  # the bare UUID works too
    assert p.returncode == 0
    assert "request %s: %d record(s)" % (rid, len(t["records"])) in p.stdout
    assert "\nroles:\n" in p.stdout
    assert p.stdout.rstrip().endswith("failed: no (no ERROR line, no event with result Error)")


def test_trace_names_where_a_failed_boot_failed(fresh_cloud, tmp_path):
    c = fresh_cloud("--fake-hosts", "1", "--set", "fake.fail_spawn_hosts=fake-1")
    s = c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait",
              unique("bad"), "-f", "json", check=False)
    sid = [x for x in c.cli("server", "list", "-f", "json")][0]["ID"]
    c.wait_server(sid, ("ERROR",))
    rid = boot_request(c, sid)
    t = json.loads(trace(c, rid, "--json").stdout)
    f = t["failed"]
    assert f is not None, t["records"][-5:]
    assert f["host"] == "fake-1" or "fake-1" in f["message"], f
    p = trace(c, rid)
    last = p.stdout.rstrip().splitlines()[-1]
    assert last.startswith("failed: at +") and "fake-1" in last, last
    # another host's logs, read from where they were copied, labelled by host
    copy = tmp_path / "host2-logs"
    shutil.copytree(os.path.join(c.state_dir, "log"), copy)
    t2 = json.loads(trace(c, rid, "--json", "--no-local-logs", "--log",
                          "host2=%s" % copy).stdout)
    logged = [r for r in t2["records"] if r["level"] != "EVENT"]
    assert logged and {r["host"] for r in logged} == {"host2"}
    assert len(t2["records"]) == len(t["records"])


def test_trace_exits_clearly_for_unknown_and_malformed_ids(cloud):
    p = trace(cloud, "req-00000000-0000-4000-8000-000000000000")
    assert p.returncode == 1 and "no event mentions req-00000000" in p.stderr
    p = trace(cloud, "not-a-request")
    assert p.returncode == 2 and "is not a request ID" in p.stderr

"""Live migration end to end on fake hosts (one all-in-one with a host per
precheck to provoke): os-migrateLive as Nova gates it, the conductor's
prechecks 1-9 with their messages on the migration status, the event
details and the fault, failures injected at each phase, abort of a slow
migration, `nubo doctor migration`, and recovery after a restart in the
middle of migrations. Plain REST for most checks; the real CLI for what
operators type (`server migrate --live-migration --wait`, `server show`,
`resource provider allocation show`)."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import Cloud, NUBO_BIN, free_port, unique
from volume_follow import assert_attached_on

HOSTS = ["fake-1", "fake-2", "fake-cpu", "fake-old", "fake-far", "fake-small", "fake-local",
         "fake-pre", "fake-post", "fake-src", "fake-slow", "fake-jumbo"]
MV = {"OpenStack-API-Version": "compute 2.80"}
MV84 = {"OpenStack-API-Version": "compute 2.84"}


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    sets = {
        "fake.hosts": ",".join(HOSTS),
        # the scheduler's order (RAM weigher): fake-cpu, fake-old, then fake-2
        "fake.memory_mb.fake-cpu": "131072",
        "fake.memory_mb.fake-old": "98304",
        "fake.memory_mb.fake-2": "65536",
        "fake.cpu_model.fake-cpu": "Westmere",
        "fake.hypervisor_version.fake-old": "900",
        "fake.fail_check_migration_target_hosts": "fake-far",
        "fake.memory_mb.fake-small": "768",
        "fake.shared_storage.fake-local": "false",
        "fake.fail_pre_live_migration_hosts": "fake-pre",
        "fake.fail_post_live_migration_hosts": "fake-post",
        "fake.fail_live_migrate_hosts": "fake-src",
        "fake.live_migration_ms.fake-slow": "5000",
        "fake.mtu.fake-jumbo": "9000",
        "compute.live_migration_precheck_timeout": "3",
        "quota.instances": "100", "quota.cores": "200", "quota.ram": "204800",
    }
    args = []
    for k, v in sets.items():
        args += ["--set", "%s=%s" % (k, v)]
    c = Cloud(tmp_path_factory.mktemp("lm"), free_port(), args)
    c.start()
    c.admin = c.token()
    st, _, body = c.request("GET", "/compute/v2.1/flavors?is_public=None", token=c.admin)
    c.flavors = {f["name"]: f["id"] for f in body["flavors"]}
    st, _, body = c.request("GET", "/image/v2/images", token=c.admin)
    c.image = [i for i in body["images"] if i["name"] == "cirros"][0]["id"]
    yield c
    rc = c.stop()
    assert rc == 0, "nubo exited with %s on SIGTERM: %s" % (rc, c.tail())


def boot(c, host, flavor="m1.tiny", networks="none", group=None):
    body = {"server": {"name": unique("lm"), "flavorRef": c.flavors.get(flavor, flavor),
                       "imageRef": c.image, "networks": networks, "host": host}}
    if group:
        body["os:scheduler_hints"] = {"group": group}
    st, _, body = c.request("POST", "/compute/v2.1/servers", token=c.admin, headers=MV, body=body)
    assert st == 202, body
    sid = body["server"]["id"]
    s = wait_server(c, sid)
    assert s["status"] == "ACTIVE" and s["OS-EXT-SRV-ATTR:host"] == host, s
    return sid


def server(c, sid):
    st, _, body = c.request("GET", "/compute/v2.1/servers/%s" % sid, token=c.admin, headers=MV)
    assert st == 200, body
    return body["server"]


def wait_server(c, sid, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = server(c, sid)
        if s["status"] in ("ACTIVE", "ERROR", "SHUTOFF") and not s["OS-EXT-STS:task_state"]:
            return s
        time.sleep(0.05)
    raise AssertionError("server %s still busy: %s" % (sid, s))


def live_migrate(c, sid, host=None, block="auto", headers=MV, **extra):
    body = {"os-migrateLive": dict({"host": host, "block_migration": block}, **extra)}
    return c.request("POST", "/compute/v2.1/servers/%s/action" % sid, token=c.admin,
                     headers=headers, body=body)


def migration(c, sid):
    rows = c.sql("SELECT * FROM migrations WHERE instance_uuid = '%s' ORDER BY id DESC" % sid)
    return rows[0] if rows else None


def wait_migration(c, sid, statuses=("completed", "error", "cancelled", "failed"), timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = migration(c, sid)
        if m and m["status"] in statuses:
            if m["status"] in ("completed", "error", "cancelled", "failed"):
                wait_server(c, sid)
            return m
        time.sleep(0.05)
    raise AssertionError("migration of %s not in %s: %s" % (sid, statuses, migration(c, sid)))


def migrate_and_wait(c, sid, host=None, block="auto"):
    st, _, body = live_migrate(c, sid, host, block)
    assert st == 202, body
    return wait_migration(c, sid)


def events(c, sid):
    """The events of the server's newest live-migration action, by name."""
    st, _, body = c.request("GET", "/compute/v2.1/servers/%s/os-instance-actions" % sid,
                            token=c.admin, headers=MV84)
    req = [a for a in body["instanceActions"] if a["action"] == "live-migration"][0]["request_id"]
    st, _, body = c.request("GET", "/compute/v2.1/servers/%s/os-instance-actions/%s" % (sid, req),
                            token=c.admin, headers=MV84)
    return {e["event"]: e for e in body["instanceAction"]["events"]}


def fault(c, sid):
    rows = c.sql("SELECT message, details FROM instance_faults WHERE instance_uuid = '%s' "
                 "ORDER BY id DESC LIMIT 1" % sid)
    return rows[0] if rows else None


def providers(c):
    st, _, body = c.request("GET", "/placement/resource_providers", token=c.admin)
    return {p["uuid"]: p["name"] for p in body["resource_providers"]}


def allocations(c, consumer):
    """{host: resources} of a consumer."""
    st, _, body = c.request("GET", "/placement/allocations/%s" % consumer, token=c.admin,
                            headers={"OpenStack-API-Version": "placement 1.28"})
    names = providers(c)
    return {names[rp]: a["resources"] for rp, a in body["allocations"].items()}


def assert_on(c, sid, host, mig=None):
    """The server is ACTIVE on host, holding allocations there only, and the
    migration holds none."""
    s = wait_server(c, sid)
    assert s["status"] == "ACTIVE" and s["OS-EXT-SRV-ATTR:host"] == host, s
    assert list(allocations(c, sid)) == [host]
    if mig:
        assert allocations(c, mig["uuid"]) == {}


def refused(c, sid, host, text, block="auto"):
    """Migrates to host, expecting a precheck refusal naming text on the
    migration, the event and the fault; the server stays where it was."""
    src = server(c, sid)["OS-EXT-SRV-ATTR:host"]
    m = migrate_and_wait(c, sid, host, block)
    assert m["status"] == "error", m
    ev = events(c, sid)
    assert ev["conductor_live_migrate_instance"]["result"] == "Error"
    assert text in ev["conductor_live_migrate_instance"]["details"], ev
    f = fault(c, sid)
    assert text in f["message"] + f["details"], f
    assert_on(c, sid, src, m)
    return m, ev, f


def test_success_moves_host_and_allocations_with_the_cli(lm):
    sid = boot(lm, "fake-1")
    lm.cli("--os-compute-api-version", "2.80", "server", "migrate", "--live-migration", "--host",
           "fake-2", "--wait", sid)
    host = lm.cli("server", "show", "-f", "value", "-c", "OS-EXT-SRV-ATTR:host", sid).strip()
    assert host == "fake-2"
    m = migration(lm, sid)
    assert (m["status"], m["source_compute"], m["dest_compute"], m["migration_type"]) == \
        ("completed", "fake-1", "fake-2", "live-migration")
    assert m["memory_total"] == 512 << 20 and m["memory_remaining"] == 0
    alloc = lm.cli("resource", "provider", "allocation", "show", sid, "-f", "json")
    assert [a["resource_provider"] for a in alloc] == [
        u for u, n in providers(lm).items() if n == "fake-2"]
    assert allocations(lm, m["uuid"]) == {}
    ev = events(lm, sid)
    for name in ("conductor_live_migrate_instance", "compute_check_can_live_migrate_destination",
                 "compute_check_can_live_migrate_source", "compute_pre_live_migration", "compute_live_migration",
                 "compute_post_live_migration_at_destination"):
        assert ev[name]["result"] == "Success", (name, ev)
    assert ev["compute_pre_live_migration"]["host"] == "fake-2"
    assert ev["compute_live_migration"]["host"] == "fake-1"


def test_ports_are_bound_to_the_destination(lm):
    sid = boot(lm, "fake-1", networks="auto")

    def bound():
        st, _, body = lm.request("GET", "/networking/v2.0/ports?device_id=%s" % sid,
                                 token=lm.admin)
        return [p["binding:host_id"] for p in body["ports"]]
    assert bound() == ["fake-1"]
    assert migrate_and_wait(lm, sid, "fake-2")["status"] == "completed"
    assert bound() == ["fake-2"]


def test_api_refusals(lm):
    sid = boot(lm, "fake-1")
    st, _, body = live_migrate(lm, sid, "nope")
    assert st == 400 and body["badRequest"]["message"] == "Compute host nope could not be found."
    # the schema per microversion: disk_over_commit before 2.25, 'auto' from 2.25
    st, _, body = live_migrate(lm, sid, "fake-2", "auto", headers={
        "OpenStack-API-Version": "compute 2.24"}, disk_over_commit=False)
    assert st == 400 and "'auto' is not one of" in body["badRequest"]["message"]
    st, _, body = live_migrate(lm, sid, "fake-2", False, disk_over_commit=False)
    assert st == 400 and "Additional properties are not allowed" in body["badRequest"]["message"]
    st, _, body = live_migrate(lm, sid, None, "auto", headers={
        "OpenStack-API-Version": "compute 2.30"}, force=True)
    assert st == 400 and body["badRequest"]["message"] == \
        "Can't force to a non-provided destination"
    st, _, body = live_migrate(lm, sid, "fake-2", "maybe")
    assert st == 400 and "'maybe' is not one of" in body["badRequest"]["message"]
    # the owner, a member, may not (policy os_compute_api:os-migrate-server:migrate_live)
    member = lm.token("nubo-demo")
    st, _, body = lm.request("POST", "/compute/v2.1/servers", token=member, headers=MV, body={
        "server": {"name": unique("lm-own"), "flavorRef": lm.flavors["m1.tiny"],
                   "imageRef": lm.image, "networks": "none"}})
    assert st == 202, body
    own = body["server"]["id"]
    assert wait_server(lm, own)["status"] == "ACTIVE"
    st, _, body = lm.request("POST", "/compute/v2.1/servers/%s/action" % own, token=member,
                             headers=MV, body={"os-migrateLive": {"host": None,
                                                                  "block_migration": "auto"}})
    assert st == 403 and "os_compute_api:os-migrate-server:migrate_live" in \
        body["forbidden"]["message"], body
    assert migration(lm, own) is None
    # 9: not ACTIVE or PAUSED (Nova's check_instance_state, in the API)
    lm.request("POST", "/compute/v2.1/servers/%s/action" % sid, token=lm.admin,
               body={"os-stop": None})
    assert wait_server(lm, sid)["status"] == "SHUTOFF"
    st, _, body = live_migrate(lm, sid, "fake-2")
    assert st == 409 and body["conflictingRequest"]["message"] == \
        "Cannot 'os-migrateLive' instance %s while it is in vm_state stopped" % sid
    assert migration(lm, sid) is None


def test_precheck_1_service_disabled(lm):
    sid = boot(lm, "fake-1")
    lm.cli("compute", "service", "set", "--disable", "--disable-reason", "maintenance",
           "fake-2", "nova-compute")
    try:
        refused(lm, sid, "fake-2", "Compute service of fake-2 is unavailable at this time. "
                "(the service is disabled: maintenance)")
    finally:
        lm.cli("compute", "service", "set", "--enable", "fake-2", "nova-compute")


def test_precheck_2_destination_is_source(lm):
    sid = boot(lm, "fake-1")
    refused(lm, sid, "fake-1", "Unable to migrate instance (%s) to current host (fake-1)." % sid)


def test_precheck_3_resources(lm):
    sid = boot(lm, "fake-1")
    m, ev, f = refused(lm, sid, "fake-small", "There is not enough capacity on the host for the "
                       "instance: MEMORY_MB: needed 512, free 256")  # 768 - 512 reserved
    assert f["message"].startswith("Migration pre-check error: Unable to move instance %s to "
                                   "host fake-small." % sid)


def test_precheck_4_cpu(lm):
    sid = boot(lm, "fake-1")
    refused(lm, sid, "fake-cpu", "Unacceptable CPU info: CPU doesn't have compatibility: the "
            "guest CPU model Haswell-noTSX-IBRS is missing on host fake-cpu (host CPU Westmere "
            "offers: Nehalem, Westmere)")


def test_precheck_5_hypervisor_too_old(lm):
    sid = boot(lm, "fake-1")
    refused(lm, sid, "fake-old", "The instance requires a newer hypervisor version than has been "
            "provided. (DestinationHypervisorTooOld: source fake-1 has fake 1000, destination "
            "fake-old has fake 900)")


def test_precheck_6_transport(lm):
    sid = boot(lm, "fake-1")
    t0 = time.time()
    refused(lm, sid, "fake-far", "Migration pre-check error: Cannot connect to "
            "fake://fake-far/system from host fake-1: host fake-far, port 16509: Connection "
            "refused")
    assert time.time() - t0 < 10
    ev = events(lm, sid)["compute_check_can_live_migrate_source"]
    assert ev["result"] == "Error" and ev["host"] == "fake-1"
    assert "transport REFUSED: Migration pre-check error: Cannot connect" in ev["details"]


def test_precheck_7_storage(lm):
    sid = boot(lm, "fake-1")
    refused(lm, sid, "fake-2", "fake-1 is not on local storage: Block migration can not be used "
            "with shared storage.", block=True)
    refused(lm, sid, "fake-local", "fake-1 is not on shared storage: Shared storage "
            "live-migration requires either shared storage or boot-from-volume with no local "
            "disks.", block=False)
    # auto: a block migration to the host without shared storage
    m = migrate_and_wait(lm, sid, "fake-local", "auto")
    assert m["status"] == "completed" and m["disk_total"] == 1 << 30
    assert_on(lm, sid, "fake-local", m)


def test_volume_backed_counts_as_shared_storage(lm):
    v = lm.cli("volume", "create", "--size", "1", unique("lm-vol"), "-f", "json")
    deadline = time.time() + 30
    while lm.cli("volume", "show", v["id"], "-f", "json")["status"] != "available":
        assert time.time() < deadline
        time.sleep(0.2)
    lm.cli("volume", "set", "--bootable", v["id"])
    st, _, body = lm.request("POST", "/compute/v2.1/servers", token=lm.admin, headers=MV, body={
        "server": {"name": unique("lm-bfv"), "flavorRef": lm.flavors["m1.tiny"],
                   "networks": "none", "host": "fake-1",
                   "block_device_mapping_v2": [{
                       "boot_index": 0, "uuid": v["id"], "source_type": "volume",
                       "destination_type": "volume", "delete_on_termination": True}]}})
    assert st == 202, body
    sid = body["server"]["id"]
    assert wait_server(lm, sid, timeout=60)["status"] == "ACTIVE"
    before = assert_attached_on(lm, lm.admin, sid, v["id"], "fake-1")
    # no shared instances path to fake-local, but no local disk either
    m = migrate_and_wait(lm, sid, "fake-local", False)
    assert m["status"] == "completed" and not m["disk_total"], m
    assert_on(lm, sid, "fake-local", m)
    # the volume followed: one attachment, for the destination, new
    # connection_info; the source's is gone
    after = assert_attached_on(lm, lm.admin, sid, v["id"], "fake-local")
    assert after["attachment_id"] != before["attachment_id"]
    # a rollback (pre_live_migration fails on fake-pre) leaves it on the source
    m = migrate_and_wait(lm, sid, "fake-pre", False)
    assert m["status"] == "error", m
    assert_on(lm, sid, "fake-local", m)
    assert assert_attached_on(lm, lm.admin, sid, v["id"], "fake-local") == after


def test_precheck_9_device_that_cannot_move(lm):
    name = unique("pci")
    f = lm.cli("flavor", "create", "--ram", "512", "--disk", "1", "--vcpus", "1", "--property",
               "pci_passthrough:alias=a1:1", name, "-f", "json")
    sid = boot(lm, "fake-1", f["id"])
    refused(lm, sid, "fake-2", "its flavor asks for PCI devices "
            "(pci_passthrough:alias=a1:1), which cannot be live-migrated.")
    # scheduled: every candidate is tried and recorded, then Nova's retry limit
    m, ev, f = refused(lm, sid, None, "Exceeded max scheduling retries 2 for instance %s during "
                       "live migration" % sid)
    details = ev["conductor_live_migrate_instance"]["details"]
    assert details.count("  instance REFUSED: Migration pre-check error") == 3, details
    assert details.startswith("Exceeded max scheduling retries 2 for instance %s during live "
                              "migration\nCandidates:\nfake-cpu: refused\n" % sid)


def test_scheduled_destination_records_every_candidate(lm):
    sid = boot(lm, "fake-1")
    m = migrate_and_wait(lm, sid)
    assert m["status"] == "completed" and m["dest_compute"] == "fake-2", m
    details = events(lm, sid)["conductor_live_migrate_instance"]["details"]
    hosts = [l.split(":")[0] for l in details.splitlines()[1:] if not l.startswith(" ")]
    assert details.startswith("Candidates:\n") and hosts == ["fake-cpu", "fake-old", "fake-2"]
    assert "fake-cpu: refused\n  cpu REFUSED: Unacceptable CPU info" in details
    assert "fake-old: refused\n  hypervisor REFUSED: The instance requires a newer hypervisor" \
        in details
    assert details.endswith("\nfake-2: passed")
    assert_on(lm, sid, "fake-2", m)


def test_named_host_passes_the_scheduler_filters_unless_forced(lm):
    st, _, g = lm.request("POST", "/compute/v2.1/os-server-groups", token=lm.admin, headers=MV,
                          body={"server_group": {"name": unique("anti"),
                                                 "policy": "anti-affinity"}})
    assert st == 200, g
    gid = g["server_group"]["id"]
    sid = boot(lm, "fake-1", group=gid)
    boot(lm, "fake-2", group=gid)
    m, ev, f = refused(lm, sid, "fake-2", "ServerGroupAntiAffinityFilter")
    assert f["message"] == "No valid host was found. There are not enough hosts available."
    # forced (2.30-2.67), the filters are not asked, as in Nova
    st, _, body = live_migrate(lm, sid, "fake-2", "auto", headers={
        "OpenStack-API-Version": "compute 2.30"}, force=True)
    assert st == 202, body
    m = wait_migration(lm, sid)
    assert m["status"] == "completed"
    assert_on(lm, sid, "fake-2", m)


@pytest.mark.parametrize("dest,source,phase,event", [
    ("fake-pre", "fake-1", "pre_live_migration", "compute_pre_live_migration"),
    ("fake-2", "fake-src", "live_migration", "compute_live_migration"),
])
def test_failure_in_a_phase_rolls_back(lm, dest, source, phase, event):
    sid = boot(lm, source)
    m = migrate_and_wait(lm, sid, dest)
    assert m["status"] == "error"
    ev = events(lm, sid)
    assert ev[event]["result"] == "Error" and "failure injected" in ev[event]["details"]
    assert ev["compute_rollback_live_migration_at_destination"]["result"] == "Success"
    f = fault(lm, sid)
    assert f["message"].startswith("Live migration of instance %s to host %s failed in %s: "
                                   % (sid, dest, phase)), f
    assert_on(lm, sid, source, m)


def test_failure_after_the_switch_leaves_it_on_the_destination(lm):
    sid = boot(lm, "fake-1")
    m = migrate_and_wait(lm, sid, "fake-post")
    assert m["status"] == "error"
    ev = events(lm, sid)
    assert ev["compute_live_migration"]["result"] == "Success"
    assert ev["compute_post_live_migration_at_destination"]["result"] == "Error"
    assert "failed in post_live_migration_at_destination" in fault(lm, sid)["message"]
    assert_on(lm, sid, "fake-post", m)


def test_mtu_mismatch_is_a_warning(lm):
    sid = boot(lm, "fake-1")
    m = migrate_and_wait(lm, sid, "fake-jumbo")
    assert m["status"] == "completed"
    details = events(lm, sid)["compute_check_can_live_migrate_destination"]["details"]
    assert "network WARNING: The MTU of the migration network differs between the hosts " \
        "(fake-1: 1500, fake-jumbo: 9000)" in details


def server_progress(lm, sid):
    st, _, body = lm.request("GET", "/compute/v2.1/servers/%s" % sid, token=lm.admin)
    assert st == 200, body
    return body["server"]["progress"]


def test_abort_of_a_slow_migration(lm):
    sid = boot(lm, "fake-slow")
    st, _, _ = live_migrate(lm, sid, "fake-2")
    assert st == 202
    m = wait_migration(lm, sid, ("running",))
    # progress reaches the record while it runs
    deadline = time.time() + 5
    while not migration(lm, sid)["memory_processed"] and time.time() < deadline:
        time.sleep(0.1)
    assert migration(lm, sid)["memory_processed"] > 0
    # and the server's progress (Nova's share of the data sent) follows it
    deadline = time.time() + 5
    while not server_progress(lm, sid) and time.time() < deadline:
        time.sleep(0.1)
    assert 0 < server_progress(lm, sid) <= 100
    st, _, body = lm.request("DELETE", "/compute/v2.1/servers/%s/migrations/%s" % (sid, m["id"]),
                             token=lm.admin, headers={"OpenStack-API-Version": "compute 2.24"})
    assert st == 202, body
    m = wait_migration(lm, sid)
    assert m["status"] == "cancelled", m
    assert events(lm, sid)["compute_live_migration"]["result"] == "Error"
    assert_on(lm, sid, "fake-slow", m)
    assert server_progress(lm, sid) == 0  # back to 0 with the task, as Nova's rollback


def test_force_complete_of_a_slow_migration(lm):
    sid = boot(lm, "fake-slow")
    t0 = time.time()
    assert live_migrate(lm, sid, "fake-2")[0] == 202
    m = wait_migration(lm, sid, ("running",))
    st, _, body = lm.request("POST", "/compute/v2.1/servers/%s/migrations/%s/action"
                             % (sid, m["id"]), token=lm.admin,
                             headers={"OpenStack-API-Version": "compute 2.22"},
                             body={"force_complete": None})
    assert st == 202, body
    m = wait_migration(lm, sid)
    assert m["status"] == "completed" and time.time() - t0 < 4.5  # the run takes 5 s
    assert_on(lm, sid, "fake-2", m)


def test_before_2_34_a_refused_precheck_is_a_400(lm):
    sid = boot(lm, "fake-1")
    st, _, body = live_migrate(lm, sid, "fake-cpu", False, headers={
        "OpenStack-API-Version": "compute 2.24"}, disk_over_commit=False)
    assert st == 400 and body["badRequest"]["message"].startswith(
        "Unacceptable CPU info: CPU doesn't have compatibility"), body
    assert migration(lm, sid) is None and server(lm, sid)["OS-EXT-STS:task_state"] is None
    st, _, body = live_migrate(lm, sid, "fake-2", False, headers={
        "OpenStack-API-Version": "compute 2.24"}, disk_over_commit=False)
    assert st == 202, body
    assert wait_migration(lm, sid)["status"] == "completed"


def doctor(c, *args):
    return subprocess.run([NUBO_BIN, "doctor", "migration", "--config",
                           os.path.join(c.state_dir, "nubo.conf")] + list(args),
                          capture_output=True, text=True, timeout=60)


def test_doctor_migration(lm):
    sid = boot(lm, "fake-1")
    p = doctor(lm, sid, "--to", "fake-cpu")
    assert p.returncode == 1, p.stderr
    assert "host fake-cpu: REFUSED: Unacceptable CPU info" in p.stdout
    assert "  [OK] service: nova-compute on fake-cpu: enabled" in p.stdout
    assert "  [PROBLEM] cpu: guest CPU from fake-1: mode custom, model Haswell-noTSX-IBRS; " \
        "fake-cpu offers: Nehalem, Westmere -> Unacceptable CPU info" in p.stdout
    p = doctor(lm, sid, "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    verdicts = {h["host"]: h for h in r["hosts"]}
    assert set(verdicts) == set(HOSTS) - {"fake-1"}
    assert verdicts["fake-2"]["ok"] and not verdicts["fake-far"]["ok"]
    assert [c["check"] for c in verdicts["fake-2"]["checks"]] == [
        "service", "destination", "resources", "cpu", "hypervisor", "transport", "storage",
        "network", "ports", "instance", "scheduler"]
    sched = verdicts["fake-2"]["checks"][-1]
    assert sched["ok"] and sched["evidence"] == "passed every filter", sched
    assert verdicts["fake-jumbo"]["ok"] and verdicts["fake-jumbo"]["warnings"] == 1
    assert "MEMORY_MB: needed 512, free 256" in verdicts["fake-small"]["message"]
    sched = verdicts["fake-small"]["checks"][-1]
    assert not sched["ok"] and sched["evidence"].startswith(
        "not among placement's allocation candidates for VCPU=1, MEMORY_MB=512"), sched
    # nothing moved, nothing claimed
    assert migration(lm, sid) is None and list(allocations(lm, sid)) == ["fake-1"]


def test_doctor_migration_names_the_filter_that_stops_a_host(lm):
    """The dry run judges each host with the scheduler's filters too: a
    host every precheck accepts but the server's anti-affinity group
    excludes is refused, naming the filter, as the move itself would be."""
    st, _, g = lm.request("POST", "/compute/v2.1/os-server-groups", token=lm.admin, headers=MV,
                          body={"server_group": {"name": unique("anti"),
                                                 "policy": "anti-affinity"}})
    assert st == 200, g
    sid = boot(lm, "fake-1", group=g["server_group"]["id"])
    boot(lm, "fake-2", group=g["server_group"]["id"])
    p = doctor(lm, sid, "--to", "fake-2")
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "  [OK] cpu: " in p.stdout, p.stdout
    assert "  [PROBLEM] scheduler: ServerGroupAntiAffinityFilter: 1 -> 0; fake-2: " in p.stdout, \
        p.stdout
    assert "host fake-2: REFUSED: No valid host was found. ServerGroupAntiAffinityFilter" \
        in p.stdout, p.stdout
    r = json.loads(doctor(lm, sid, "--json").stdout)
    ok = {h["host"] for h in r["hosts"] if h["ok"]}
    assert "fake-2" not in ok and "fake-jumbo" in ok, r


def test_restart_mid_migration_is_recovered(lm):
    """The last test of the module: it kills the cloud. A running migration
    whose guest stayed on the source is rolled back; a queued one whose guest
    is (made to be) on the destination is finished."""
    a = boot(lm, "fake-slow")
    b = boot(lm, "fake-slow")
    assert live_migrate(lm, a, "fake-2")[0] == 202
    wait_migration(lm, a, ("running",))
    assert live_migrate(lm, b, "fake-2")[0] == 202
    wait_migration(lm, b, ("queued",))  # max_concurrent_live_migrations = 1
    lm.stop(signal.SIGKILL)
    # as if the hypervisor had moved b's guest before the crash
    fake = os.path.join(lm.state_dir, "fake")
    src = json.load(open(os.path.join(fake, "fake-slow.json")))
    dst_file = os.path.join(fake, "fake-2.json")
    dst = json.load(open(dst_file)) if os.path.exists(dst_file) else {}
    dst[b] = src.pop(b)
    json.dump(src, open(os.path.join(fake, "fake-slow.json"), "w"))
    json.dump(dst, open(os.path.join(fake, "fake-2.json"), "w"))
    lm.start()
    ma = wait_migration(lm, a, ("error",), timeout=40)
    mb = wait_migration(lm, b, ("completed",), timeout=40)
    assert_on(lm, a, "fake-slow", ma)
    assert_on(lm, b, "fake-2", mb)
    # recovered at the conductor's start or at the source agent's registration
    assert "failed in live_migration: interrupted (" in fault(lm, a)["message"]

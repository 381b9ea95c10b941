"""Cold migration and resize with confirm and revert on fake hosts, as Nova
does them: the migration record and its statuses, the instance's host and
flavor, the allocations in placement at every step (the migration holds
the source's, the instance claims the destination), instance actions and
Nova's event names, a failure injected at each phase, and the API's
refusals with Nova's status and message. The operator's commands run
through the real CLI at 2.80; the rest is plain REST."""
import json
import os
import signal
import time

import pytest

from conftest import Cloud, free_port, unique
from volume_follow import assert_attached_on

MV = {"OpenStack-API-Version": "compute 2.80"}
_tokens = {}


def token(c):
    if c.url not in _tokens:
        _tokens[c.url] = c.token()
    return _tokens[c.url]


@pytest.fixture(scope="module")
def mc(tmp_path_factory):
    """Three fake hosts, allow_resize_to_same_host false (Nova's default)."""
    c = Cloud(tmp_path_factory.mktemp("resize"), free_port(),
              ("--set", "quota.cores=1000", "--set", "quota.ram=409600",
               "--set", "quota.instances=50"))
    c.start()
    yield c
    assert c.stop() == 0, c.tail()


def api(c, method, path, body=None):
    st, _, b = c.request(method, "/compute/v2.1" + path, body, token=token(c), headers=MV)
    return st, b


def action(c, sid, body):
    return api(c, "POST", "/servers/%s/action" % sid, body)


def server(c, sid):
    st, b = api(c, "GET", "/servers/%s" % sid)
    assert st == 200, b
    return b["server"]


def wait_status(c, sid, statuses, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = server(c, sid)
        if s["status"] in statuses and not s["OS-EXT-STS:task_state"]:
            return s
        time.sleep(0.1)
    raise AssertionError("server %s not in %s: %s" % (sid, statuses, server(c, sid)["status"]))


def boot(c, flavor="m1.tiny"):
    st, b = api(c, "POST", "/servers", {"server": {
        "name": unique("rs"), "flavorRef": {"m1.tiny": "1", "m1.small": "2",
                                            "m1.nano": "42"}[flavor],
        "imageRef": image_id(c), "networks": "none"}})
    assert st == 202, b
    return wait_status(c, b["server"]["id"], ("ACTIVE",))


_images = {}


def image_id(c):
    if c.url not in _images:
        st, _, b = c.request("GET", "/image/v2/images?name=cirros", token=token(c))
        _images[c.url] = b["images"][0]["id"]
    return _images[c.url]


def migrations(c, sid):
    return c.sql("SELECT * FROM migrations WHERE instance_uuid = '%s' ORDER BY id" % sid)


def rp_of(c, host):
    return c.sql("SELECT uuid FROM compute_nodes WHERE host = '%s'" % host)[0]["uuid"]


def allocations(c, consumer):
    """{host: {rc: amount}} of the consumer, as placement answers it."""
    st, _, b = c.request("GET", "/placement/allocations/%s" % consumer, token=token(c),
                         headers={"OpenStack-API-Version": "placement 1.28"})
    assert st == 200, b
    hosts = {r["uuid"]: r["host"] for r in c.sql("SELECT uuid, host FROM compute_nodes")}
    return {hosts[rp]: a["resources"] for rp, a in b["allocations"].items()}


def events(c, sid, action_name):
    """The newest action_name of the server with its events (2.84: details)."""
    h = {"OpenStack-API-Version": "compute 2.84"}
    st, _, b = c.request("GET", "/compute/v2.1/servers/%s/os-instance-actions" % sid,
                         token=token(c), headers=h)
    act = [a for a in b["instanceActions"] if a["action"] == action_name][0]
    st, _, b = c.request("GET", "/compute/v2.1/servers/%s/os-instance-actions/%s"
                         % (sid, act["request_id"]), token=token(c), headers=h)
    return b["instanceAction"]


def inject(c, host, op, n=1):
    """The fake driver's next n steps `op` on host fail (fake/fail.json)."""
    path = os.path.join(c.state_dir, "fake", "fail.json")
    with open(path, "w") as f:
        json.dump({host: {op: n}}, f)
    os.utime(path, None)


def test_cold_migrate_confirm_with_the_cli(mc):
    s = boot(mc)
    sid, src = s["id"], s["OS-EXT-SRV-ATTR:host"]
    assert allocations(mc, sid) == {src: {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1}}
    mc.cli("--os-compute-api-version", "2.80", "server", "migrate", "--wait", sid, timeout=60)
    s = wait_status(mc, sid, ("VERIFY_RESIZE",))
    dst = s["OS-EXT-SRV-ATTR:host"]
    assert dst != src
    (m,) = migrations(mc, sid)
    assert (m["migration_type"], m["status"], m["source_compute"], m["dest_compute"]) == \
        ("migration", "finished", src, dst)
    assert m["old_instance_type_id"] == m["new_instance_type_id"]
    # during the move the migration holds the source, the instance the destination
    assert allocations(mc, m["uuid"]) == {src: {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1}}
    assert allocations(mc, sid) == {dst: {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1}}
    ev = {e["event"]: e["result"] for e in events(mc, sid, "migrate")["events"]}
    assert ev == {"conductor_migrate_server": "Success", "compute_prep_resize": "Success",
                  "compute_resize_instance": "Success", "compute_finish_resize": "Success"}
    out = mc.cli("resource", "provider", "allocation", "show", sid, "-f", "json")
    assert [a["resource_provider"] for a in out] == [rp_of(mc, dst)]
    mc.cli("--os-compute-api-version", "2.80", "server", "migration", "confirm", sid)
    s = wait_status(mc, sid, ("ACTIVE",))
    assert s["OS-EXT-SRV-ATTR:host"] == dst and s["OS-EXT-STS:power_state"] == 1
    assert migrations(mc, sid)[0]["status"] == "confirmed"
    assert allocations(mc, m["uuid"]) == {}
    assert allocations(mc, sid) == {dst: {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1}}
    guests = json.load(open(os.path.join(mc.state_dir, "fake", "%s.json" % src)))
    assert sid not in guests
    ev = {e["event"]: e["result"] for e in events(mc, sid, "confirmResize")["events"]}
    assert ev == {"compute_confirm_resize": "Success"}


def test_cold_migrate_to_a_host_then_revert(mc):
    s = boot(mc)
    sid, src = s["id"], s["OS-EXT-SRV-ATTR:host"]
    other = [h for h in ("fake-1", "fake-2", "fake-3") if h != src][1]
    mc.cli("--os-compute-api-version", "2.80", "server", "migrate", "--host", other, "--wait",
           sid, timeout=60)
    assert wait_status(mc, sid, ("VERIFY_RESIZE",))["OS-EXT-SRV-ATTR:host"] == other
    mc.cli("--os-compute-api-version", "2.80", "server", "migration", "revert", sid)
    s = wait_status(mc, sid, ("ACTIVE",))
    assert s["OS-EXT-SRV-ATTR:host"] == src and s["OS-EXT-STS:power_state"] == 1
    (m,) = migrations(mc, sid)
    assert m["status"] == "reverted"
    assert allocations(mc, sid) == {src: {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1}}
    assert allocations(mc, m["uuid"]) == {}
    guests = json.load(open(os.path.join(mc.state_dir, "fake", "%s.json" % other)))
    assert sid not in guests
    ev = {e["event"]: e["result"] for e in events(mc, sid, "revertResize")["events"]}
    assert ev == {"compute_revert_resize": "Success", "compute_finish_revert_resize": "Success"}


def test_ports_follow_the_move(mc):
    st, b = api(mc, "POST", "/servers", {"server": {
        "name": unique("rsnet"), "flavorRef": "1", "imageRef": image_id(mc), "networks": "auto"}})
    assert st == 202, b
    s = wait_status(mc, b["server"]["id"], ("ACTIVE",))
    sid, src = s["id"], s["OS-EXT-SRV-ATTR:host"]

    def bound():
        st, _, b = mc.request("GET", "/networking/v2.0/ports?device_id=%s" % sid,
                              token=token(mc))
        return sorted(p["binding:host_id"] for p in b["ports"])
    assert bound() == [src]
    assert action(mc, sid, {"migrate": None})[0] == 202
    dst = wait_status(mc, sid, ("VERIFY_RESIZE",))["OS-EXT-SRV-ATTR:host"]
    assert bound() == [dst]
    assert action(mc, sid, {"revertResize": None})[0] == 202
    wait_status(mc, sid, ("ACTIVE",))
    assert bound() == [src]


def test_resize_up_confirm_and_revert_with_the_cli(mc):
    s = boot(mc)
    sid, src = s["id"], s["OS-EXT-SRV-ATTR:host"]
    mc.cli("--os-compute-api-version", "2.80", "server", "resize", "--flavor", "m1.small",
           "--wait", sid, timeout=60)
    s = wait_status(mc, sid, ("VERIFY_RESIZE",))
    dst = s["OS-EXT-SRV-ATTR:host"]
    assert dst != src and s["flavor"]["original_name"] == "m1.small"
    (m,) = migrations(mc, sid)
    assert (m["migration_type"], m["old_instance_type_id"], m["new_instance_type_id"]) == \
        ("resize", 1, 2)
    assert allocations(mc, m["uuid"]) == {src: {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1}}
    assert allocations(mc, sid) == {dst: {"DISK_GB": 20, "MEMORY_MB": 2048, "VCPU": 1}}
    mc.cli("--os-compute-api-version", "2.80", "server", "resize", "confirm", sid)
    s = wait_status(mc, sid, ("ACTIVE",))
    assert s["flavor"]["original_name"] == "m1.small"
    row = mc.sql("SELECT memory_mb, old_flavor, new_flavor FROM instances WHERE uuid='%s'" % sid)
    assert row == [{"memory_mb": 2048, "old_flavor": None, "new_flavor": None}]
    assert allocations(mc, sid) == {dst: {"DISK_GB": 20, "MEMORY_MB": 2048, "VCPU": 1}}
    # and a second resize, reverted: back to m1.small on dst
    st, b = action(mc, sid, {"resize": {"flavorRef": "3"}})
    assert st == 202, b
    s = wait_status(mc, sid, ("VERIFY_RESIZE",))
    third = s["OS-EXT-SRV-ATTR:host"]
    assert third != dst and s["flavor"]["original_name"] == "m1.medium"
    mc.cli("--os-compute-api-version", "2.80", "server", "resize", "revert", sid)
    s = wait_status(mc, sid, ("ACTIVE",))
    assert s["OS-EXT-SRV-ATTR:host"] == dst and s["flavor"]["original_name"] == "m1.small"
    assert allocations(mc, sid) == {dst: {"DISK_GB": 20, "MEMORY_MB": 2048, "VCPU": 1}}
    assert all(allocations(mc, m["uuid"]) == {} for m in migrations(mc, sid))


def test_volume_backed_resize_claims_no_disk(mc):
    vol = mc.cli("volume", "create", "--size", "1", "--bootable", unique("rsvol"), "-f", "json")
    st, b = api(mc, "POST", "/servers", {"server": {
        "name": unique("rsbfv"), "imageRef": "", "flavorRef": "1", "networks": "none",
        "block_device_mapping_v2": [{"source_type": "volume", "uuid": vol["id"],
                                     "destination_type": "volume", "boot_index": 0}]}})
    assert st == 202, b
    s = wait_status(mc, b["server"]["id"], ("ACTIVE", "ERROR"))
    assert s["status"] == "ACTIVE", s.get("fault")
    sid, src = s["id"], s["OS-EXT-SRV-ATTR:host"]
    assert allocations(mc, sid) == {src: {"MEMORY_MB": 512, "VCPU": 1}}
    first = assert_attached_on(mc, token(mc), sid, vol["id"], src)
    assert action(mc, sid, {"resize": {"flavorRef": "2"}})[0] == 202
    s = wait_status(mc, sid, ("VERIFY_RESIZE", "ACTIVE", "ERROR"))
    assert s["status"] == "VERIFY_RESIZE", s.get("fault")
    dst = s["OS-EXT-SRV-ATTR:host"]
    assert allocations(mc, sid) == {dst: {"MEMORY_MB": 2048, "VCPU": 1}}
    # the volume follows at finish_resize: one attachment, the destination's
    moved = assert_attached_on(mc, token(mc), sid, vol["id"], dst)
    assert moved["attachment_id"] != first["attachment_id"]
    assert action(mc, sid, {"confirmResize": None})[0] == 204
    assert wait_status(mc, sid, ("ACTIVE",))["flavor"]["original_name"] == "m1.small"
    assert assert_attached_on(mc, token(mc), sid, vol["id"], dst) == moved
    # a cold migration reverted: the volume goes to the third host and back
    assert action(mc, sid, {"migrate": None})[0] == 202
    third = wait_status(mc, sid, ("VERIFY_RESIZE",))["OS-EXT-SRV-ATTR:host"]
    assert third not in (dst,)
    assert_attached_on(mc, token(mc), sid, vol["id"], third)
    assert action(mc, sid, {"revertResize": None})[0] == 202
    assert wait_status(mc, sid, ("ACTIVE",))["OS-EXT-SRV-ATTR:host"] == dst
    back = assert_attached_on(mc, token(mc), sid, vol["id"], dst)
    assert back["attachment_id"] not in (moved["attachment_id"], first["attachment_id"])


def test_volume_converted_behind_nubos_back_is_recorded_at_the_move(mc):
    """The fresh connection_info of the destination says the file's real
    format: when the file was converted behind nubo's back, the move records
    it as the disk-format check does (mapping and volume, WARNING, event)."""
    import glob
    import subprocess
    vol = mc.cli("volume", "create", "--size", "1", "--bootable", unique("rsconv"), "-f", "json")
    st, b = api(mc, "POST", "/servers", {"server": {
        "name": unique("rsconv"), "imageRef": "", "flavorRef": "1", "networks": "none",
        "block_device_mapping_v2": [{"source_type": "volume", "uuid": vol["id"],
                                     "destination_type": "volume", "boot_index": 0}]}})
    assert st == 202, b
    s = wait_status(mc, b["server"]["id"], ("ACTIVE", "ERROR"))
    assert s["status"] == "ACTIVE", s.get("fault")
    sid = s["id"]
    (path,) = glob.glob(os.path.join(mc.state_dir, "mnt", "*", "volume-%s" % vol["id"]))
    subprocess.run(["qemu-img", "convert", "-O", "qcow2", path, path + ".tmp"], check=True)
    os.rename(path + ".tmp", path)
    assert action(mc, sid, {"migrate": None})[0] == 202
    dst = wait_status(mc, sid, ("VERIFY_RESIZE",))["OS-EXT-SRV-ATTR:host"]
    bdm = assert_attached_on(mc, token(mc), sid, vol["id"], dst)
    assert json.loads(bdm["connection_info"])["data"]["format"] == "qcow2"
    assert mc.sql("SELECT value FROM volume_admin_metadata WHERE volume_id = '%s' AND "
                  "key = 'format' AND deleted = 0" % vol["id"]) == [{"value": "qcow2"}]
    ev = {e["event"]: e for e in events(mc, sid, "migrate")["events"]}
    assert ev["reconcile_disk_format"]["result"] == "Success", ev
    assert "raw in the database, qcow2 on disk" in ev["reconcile_disk_format"]["details"]
    logs = "".join(open(p, errors="replace").read()
                   for p in glob.glob(os.path.join(mc.state_dir, "log", "*.log")))
    assert [l for l in logs.splitlines() if "WARNING" in l and vol["id"] in l and
            "is raw in the database but qcow2 on disk" in l]
    assert action(mc, sid, {"confirmResize": None})[0] == 204
    wait_status(mc, sid, ("ACTIVE",))


def test_stopped_server_stays_stopped(mc):
    s = boot(mc)
    sid = s["id"]
    assert action(mc, sid, {"os-stop": None})[0] == 202
    wait_status(mc, sid, ("SHUTOFF",))
    assert action(mc, sid, {"resize": {"flavorRef": "2"}})[0] == 202
    s = wait_status(mc, sid, ("VERIFY_RESIZE",))
    assert s["OS-EXT-STS:power_state"] == 4
    assert action(mc, sid, {"confirmResize": None})[0] == 204
    s = wait_status(mc, sid, ("SHUTOFF",))
    assert s["OS-EXT-STS:vm_state"] == "stopped"


@pytest.mark.parametrize("op,where,event", [
    ("prep_resize", "dest", "compute_prep_resize"),
    ("migrate_disk_and_power_off", "source", "compute_resize_instance"),
    ("finish_migration", "dest", "compute_finish_resize"),
])
def test_failure_per_phase_leaves_the_server_active_on_the_source(mc, op, where, event):
    s = boot(mc)
    sid, src = s["id"], s["OS-EXT-SRV-ATTR:host"]
    dst = [h for h in ("fake-1", "fake-2", "fake-3") if h != src][0]
    inject(mc, dst if where == "dest" else src, op)
    st, b = action(mc, sid, {"migrate": {"host": dst}})
    assert st == 202, b
    s = wait_status(mc, sid, ("ACTIVE", "ERROR"))
    assert (s["status"], s["OS-EXT-SRV-ATTR:host"], s["OS-EXT-STS:power_state"]) == \
        ("ACTIVE", src, 1)
    (m,) = migrations(mc, sid)
    assert m["status"] == "error"
    assert allocations(mc, sid) == {src: {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1}}
    assert allocations(mc, m["uuid"]) == {}
    act = events(mc, sid, "migrate")
    failed = [e for e in act["events"] if e["result"] == "Error"]
    assert [e["event"] for e in failed] == [event]
    assert "%s failure injected" % op in (failed[0]["details"] or "")
    fault = mc.sql("SELECT message FROM instance_faults WHERE instance_uuid='%s'" % sid)
    assert fault and event in fault[-1]["message"] and op in fault[-1]["message"]
    guests = json.load(open(os.path.join(mc.state_dir, "fake", "%s.json" % dst)))
    assert sid not in guests


def test_confirm_and_revert_failures(mc):
    s = boot(mc)
    sid, src = s["id"], s["OS-EXT-SRV-ATTR:host"]
    assert action(mc, sid, {"migrate": None})[0] == 202
    dst = wait_status(mc, sid, ("VERIFY_RESIZE",))["OS-EXT-SRV-ATTR:host"]
    inject(mc, src, "finish_revert_migration")
    assert action(mc, sid, {"revertResize": None})[0] == 202
    s = wait_status(mc, sid, ("ERROR",))
    assert s["OS-EXT-SRV-ATTR:host"] == src
    (m,) = migrations(mc, sid)
    assert m["status"] == "error"
    assert allocations(mc, sid) == {src: {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1}}
    ev = {e["event"]: e["result"] for e in events(mc, sid, "revertResize")["events"]}
    assert ev == {"compute_revert_resize": "Success", "compute_finish_revert_resize": "Error"}


def test_delete_while_resized_leaves_nothing(mc):
    s = boot(mc)
    sid, src = s["id"], s["OS-EXT-SRV-ATTR:host"]
    assert action(mc, sid, {"resize": {"flavorRef": "2"}})[0] == 202
    dst = wait_status(mc, sid, ("VERIFY_RESIZE",))["OS-EXT-SRV-ATTR:host"]
    (m,) = migrations(mc, sid)
    assert api(mc, "DELETE", "/servers/%s" % sid)[0] == 204
    deadline = time.time() + 30
    while api(mc, "GET", "/servers/%s" % sid)[0] != 404 and time.time() < deadline:
        time.sleep(0.1)
    assert allocations(mc, sid) == {} and allocations(mc, m["uuid"]) == {}
    assert migrations(mc, sid)[0]["status"] == "confirmed"
    for h in (src, dst):
        assert sid not in json.load(open(os.path.join(mc.state_dir, "fake", "%s.json" % h)))


def test_no_other_host_and_bad_requests(mc):
    s = boot(mc)
    sid, src = s["id"], s["OS-EXT-SRV-ATTR:host"]
    st, b = action(mc, sid, {"resize": {"flavorRef": "1"}})
    assert (st, b["badRequest"]["message"]) == (400, "When resizing, instances must change flavor!")
    st, b = action(mc, sid, {"resize": {"flavorRef": "nope"}})
    assert (st, b["badRequest"]["message"]) == (400, "Flavor nope could not be found.")
    st, b = action(mc, sid, {"resize": {}})
    assert st == 400 and "'flavorRef' is a required property" in b["badRequest"]["message"]
    st, b = action(mc, sid, {"migrate": {"host": src}})
    assert (st, b["badRequest"]["message"]) == \
        (400, "Cannot migrate to the host where the server exists.")
    st, b = action(mc, sid, {"migrate": {"host": "nowhere"}})
    assert (st, b["badRequest"]["message"]) == (400, "Compute host nowhere could not be found.")
    st, b = action(mc, sid, {"migrate": {"hots": "x"}})
    assert st == 400 and "Additional properties are not allowed" in b["badRequest"]["message"]
    st, b = action(mc, sid, {"confirmResize": None})
    assert (st, b["conflictingRequest"]["message"]) == \
        (409, "Cannot 'confirmResize' instance %s while it is in vm_state active" % sid)
    st, b = action(mc, sid, {"revertResize": None})
    assert st == 409 and "revertResize" in b["conflictingRequest"]["message"]
    st, b = action(mc, sid, {"resize": {"flavorRef": "42"}})  # m1.nano: 1 GB, 128 MB
    assert st == 202
    s = wait_status(mc, sid, ("VERIFY_RESIZE", "ACTIVE"))
    st, b = action(mc, sid, {"resize": {"flavorRef": "2"}})
    assert (st, b["conflictingRequest"]["message"]) == \
        (409, "Cannot 'resize' instance %s while it is in vm_state resized" % sid)
    assert action(mc, sid, {"revertResize": None})[0] == 202
    wait_status(mc, sid, ("ACTIVE",))


def test_resize_below_the_image_min_ram(mc, tmp_path):
    data = tmp_path / "img.raw"
    data.write_bytes(b"\0" * 4096)
    img = mc.cli("image", "create", "--file", str(data), "--disk-format", "raw", "--min-ram",
                 "256", unique("minram"), "-f", "json")
    st, b = api(mc, "POST", "/servers", {"server": {
        "name": unique("rs"), "flavorRef": "1", "imageRef": img["id"], "networks": "none"}})
    assert st == 202, b
    sid = wait_status(mc, b["server"]["id"], ("ACTIVE",))["id"]
    st, b = action(mc, sid, {"resize": {"flavorRef": "42"}})  # m1.nano: 128 MB
    assert (st, b["badRequest"]["message"]) == \
        (400, "Flavor's memory is too small for requested image.")
    assert migrations(mc, sid) == []


def test_source_service_down_is_409(mc):
    s = boot(mc)
    sid, src = s["id"], s["OS-EXT-SRV-ATTR:host"]
    mc.cli("--os-compute-api-version", "2.11", "compute", "service", "set", "--down", src,
           "nova-compute")
    try:
        for body in ({"resize": {"flavorRef": "2"}}, {"migrate": None}):
            st, b = action(mc, sid, body)
            assert (st, b["conflictingRequest"]["message"]) == \
                (409, "Service is unavailable at this time."), body
    finally:
        mc.cli("--os-compute-api-version", "2.11", "compute", "service", "set", "--up", src,
               "nova-compute")
    assert migrations(mc, sid) == []


def test_resize_disk_down_fails_in_the_move(mc):
    s = boot(mc, "m1.small")
    sid, src = s["id"], s["OS-EXT-SRV-ATTR:host"]
    assert action(mc, sid, {"resize": {"flavorRef": "1"}})[0] == 202
    s = wait_status(mc, sid, ("ACTIVE", "ERROR"))
    assert (s["status"], s["OS-EXT-SRV-ATTR:host"], s["flavor"]["original_name"]) == \
        ("ACTIVE", src, "m1.small")
    fault = mc.sql("SELECT message FROM instance_faults WHERE instance_uuid='%s'" % sid)
    assert "Resize error: Unable to resize disk down." in fault[-1]["message"]
    assert allocations(mc, sid) == {src: {"DISK_GB": 20, "MEMORY_MB": 2048, "VCPU": 1}}


def test_quota_and_no_valid_host(mc):
    s = boot(mc)
    sid, src = s["id"], s["OS-EXT-SRV-ATTR:host"]
    used = sum(r["vcpus"] for r in mc.sql(
        "SELECT vcpus FROM instances WHERE deleted = 0 AND project_id = '%s'"
        % server(mc, sid)["tenant_id"]))
    mc.cli("quota", "set", "--cores", used + 3, "admin")
    try:
        st, b = action(mc, sid, {"resize": {"flavorRef": "5"}})  # m1.xlarge: 8 vCPUs
    finally:
        mc.cli("quota", "set", "--cores", 1000, "admin")
    assert (st, b["forbidden"]["message"]) == (403, "Quota exceeded for cores: Requested 7, but "
                                               "already used %d of %d cores" % (used, used + 3))
    # every other host disabled: no valid host, the server stays where it is
    others = [h for h in ("fake-1", "fake-2", "fake-3") if h != src]
    for h in others:
        mc.cli("compute", "service", "set", "--disable", h, "nova-compute")
    try:
        assert action(mc, sid, {"migrate": None})[0] == 202
        s = wait_status(mc, sid, ("ACTIVE", "ERROR"))
        assert (s["status"], s["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", src)
        (m,) = migrations(mc, sid)
        assert m["status"] == "error"
        fault = mc.sql("SELECT message, details FROM instance_faults WHERE instance_uuid='%s'"
                       % sid)
        assert "No valid host was found. No valid host found for cold migrate" in \
            fault[-1]["details"]
        assert "Host filter ignoring hosts: %s" % src in fault[-1]["details"]
        assert allocations(mc, sid) == {src: {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1}}
        assert allocations(mc, m["uuid"]) == {}
    finally:
        for h in others:
            mc.cli("compute", "service", "set", "--enable", h, "nova-compute")


def test_restart_mid_move_rolls_back_or_finishes(fresh_cloud):
    """kill -9 while the source sends the disks: back on the source; while
    the destination finishes (its guest runs there): finished."""
    c = fresh_cloud("--set", "fake.migrate_disk_and_power_off_delay_ms=3000",
                    "--set", "fake.finish_migration_delay_ms=3000")

    def kill_when(sid, task):
        deadline = time.time() + 20
        while server(c, sid)["OS-EXT-STS:task_state"] != task and time.time() < deadline:
            time.sleep(0.05)
        assert server(c, sid)["OS-EXT-STS:task_state"] == task
        c.proc.send_signal(signal.SIGKILL)
        c.proc.wait()
        _tokens.pop(c.url, None)
        c.start()

    a, b = boot(c), boot(c)
    src_a = a["OS-EXT-SRV-ATTR:host"]
    assert action(c, a["id"], {"migrate": None})[0] == 202
    kill_when(a["id"], "resize_migrating")
    s = wait_status(c, a["id"], ("ACTIVE", "ERROR"))
    assert (s["status"], s["OS-EXT-SRV-ATTR:host"], s["OS-EXT-STS:power_state"]) == \
        ("ACTIVE", src_a, 1)
    (m,) = migrations(c, a["id"])
    assert m["status"] == "error"
    assert allocations(c, a["id"]) == {src_a: {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1}}
    assert allocations(c, m["uuid"]) == {}
    guests = json.load(open(os.path.join(c.state_dir, "fake", "%s.json" % src_a)))
    assert guests[a["id"]]["power_state"] == 1 and "resize_source" not in guests[a["id"]]
    assert action(c, b["id"], {"migrate": None})[0] == 202
    kill_when(b["id"], "resize_finish")
    s = wait_status(c, b["id"], ("VERIFY_RESIZE", "ACTIVE", "ERROR"))
    (m,) = migrations(c, b["id"])
    assert (s["status"], s["OS-EXT-SRV-ATTR:host"], m["status"]) == \
        ("VERIFY_RESIZE", m["dest_compute"], "finished")
    assert action(c, b["id"], {"confirmResize": None})[0] == 204
    s = wait_status(c, b["id"], ("ACTIVE",))
    assert allocations(c, b["id"]) == {m["dest_compute"]: {"DISK_GB": 1, "MEMORY_MB": 512,
                                                           "VCPU": 1}}
    assert allocations(c, m["uuid"]) == {}


def test_resize_confirm_window_confirms(fresh_cloud):
    c = fresh_cloud("--set", "DEFAULT.resize_confirm_window=1")
    sid = boot(c)["id"]
    assert action(c, sid, {"resize": {"flavorRef": "2"}})[0] == 202
    s = wait_status(c, sid, ("ACTIVE", "ERROR"), timeout=30)
    assert s["status"] == "ACTIVE" and s["flavor"]["original_name"] == "m1.small"
    (m,) = migrations(c, sid)
    assert m["status"] == "confirmed" and allocations(c, m["uuid"]) == {}
    ev = {e["event"]: e["result"] for e in events(c, sid, "confirmResize")["events"]}
    assert ev == {"compute_confirm_resize": "Success"}


def test_same_host_resize_when_allowed(fresh_cloud):
    c = fresh_cloud("--set", "DEFAULT.allow_resize_to_same_host=true",
                    "--set", "fake.hosts=fake-1")
    s = boot(c)
    sid = s["id"]
    assert action(c, sid, {"resize": {"flavorRef": "2"}})[0] == 202
    s = wait_status(c, sid, ("VERIFY_RESIZE",))
    assert s["OS-EXT-SRV-ATTR:host"] == "fake-1" and s["OS-EXT-STS:power_state"] == 1
    (m,) = migrations(c, sid)
    assert allocations(c, m["uuid"]) == {"fake-1": {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1}}
    assert allocations(c, sid) == {"fake-1": {"DISK_GB": 20, "MEMORY_MB": 2048, "VCPU": 1}}
    assert action(c, sid, {"revertResize": None})[0] == 202
    s = wait_status(c, sid, ("ACTIVE",))
    assert s["flavor"]["original_name"] == "m1.tiny" and s["OS-EXT-STS:power_state"] == 1
    assert allocations(c, sid) == {"fake-1": {"DISK_GB": 1, "MEMORY_MB": 512, "VCPU": 1}}
    guests = json.load(open(os.path.join(c.state_dir, "fake", "fake-1.json")))
    assert guests[sid]["power_state"] == 1 and "resize_source" not in guests[sid]
    # a cold migration never stays on its host
    assert action(c, sid, {"migrate": None})[0] == 202
    s = wait_status(c, sid, ("ACTIVE", "ERROR"))
    assert s["status"] == "ACTIVE" and migrations(c, sid)[-1]["status"] == "error"


# ---- real guests: a libvirt all-in-one resizing on its one host ----------

def _lv():
    import test_libvirt
    return test_libvirt


def _domain_memory_kib(lvt, sid):
    import re
    xml = lvt.virsh("dumpxml", sid).stdout
    return int(re.search(r"<memory unit='KiB'>(\d+)</memory>", xml).group(1))


def _disk_virtual_size(c, sid):
    info = json.loads(__import__("subprocess").run(
        ["qemu-img", "info", "-U", "--output=json",
         os.path.join(c.state_dir, "instances", sid, "disk")],
        check=True, capture_output=True, text=True).stdout)
    return info["virtual-size"]


def test_libvirt_same_host_resize_confirm_and_revert():
    lvt = _lv()
    if lvt._why:
        pytest.skip(lvt._why)
    c = lvt.start_libvirt_cloud("resize", "--set", "DEFAULT.allow_resize_to_same_host=true")
    try:
        img = c.cli("image", "create", "--file", lvt.QCOW2, "--disk-format", "qcow2",
                    "--container-format", "bare", "--public", "guest", "-f", "json")
        c.image_id = img["id"]
        sid = lvt.boot(c, unique("lv-resize"))["id"]
        lvt.wait_console(c, sid, r"HB 2 ")
        assert _domain_memory_kib(lvt, sid) == 512 * 1024
        # resize up, confirm: the guest boots again with 2048 MB and a 20 GB disk
        n = lvt.starts(c, sid)
        c.cli("--os-compute-api-version", "2.80", "server", "resize", "--flavor", "m1.small",
              "--wait", sid, timeout=300)
        s = lvt.wait_status(c, sid, ("VERIFY_RESIZE", "ERROR", "ACTIVE"))
        assert s["status"] == "VERIFY_RESIZE", s
        assert _domain_memory_kib(lvt, sid) == 2048 * 1024
        assert lvt.domstate(sid) == "running"
        lvt.wait_new_boot(c, sid, n)
        assert _disk_virtual_size(c, sid) == 20 << 30
        assert os.path.isdir(os.path.join(c.state_dir, "instances", sid + "_resize"))
        c.cli("--os-compute-api-version", "2.80", "server", "resize", "confirm", sid)
        s = lvt.wait_status(c, sid, ("ACTIVE", "ERROR"))
        assert s["status"] == "ACTIVE" and s["flavor"]["id"] == "2"
        assert not os.path.exists(os.path.join(c.state_dir, "instances", sid + "_resize"))
        assert _domain_memory_kib(lvt, sid) == 2048 * 1024
        # resize up again, revert: back to m1.small's domain and disk, running
        st, _, b = c.request("POST", "/compute/v2.1/servers/%s/action" % sid,
                             {"resize": {"flavorRef": "3"}}, token=c.token())
        assert st == 202, b
        s = lvt.wait_status(c, sid, ("VERIFY_RESIZE", "ERROR", "ACTIVE"), timeout=300)
        assert s["status"] == "VERIFY_RESIZE", s
        assert _domain_memory_kib(lvt, sid) == 4096 * 1024
        n = lvt.starts(c, sid)
        c.cli("--os-compute-api-version", "2.80", "server", "resize", "revert", sid)
        s = lvt.wait_status(c, sid, ("ACTIVE", "ERROR"), timeout=300)
        assert s["status"] == "ACTIVE" and s["flavor"]["id"] == "2"
        assert _domain_memory_kib(lvt, sid) == 2048 * 1024
        assert lvt.domstate(sid) == "running"
        lvt.wait_new_boot(c, sid, n)
        assert _disk_virtual_size(c, sid) == 20 << 30
        assert not os.path.exists(os.path.join(c.state_dir, "instances", sid + "_resize"))
        assert [m["status"] for m in migrations(c, sid)] == ["confirmed", "reverted"]
        alloc = c.cli("resource", "provider", "allocation", "show", sid, "-f", "json")
        assert [a["resources"] for a in alloc] == [{"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}]
    finally:
        assert lvt.stop_cloud(c) == 0

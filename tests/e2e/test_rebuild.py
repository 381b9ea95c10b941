"""Rebuild and evacuate, end to end, as an operator drives them.

Fake hosts (one all-in-one of this module's own, since evacuations force
hosts down): `openstack server rebuild --image I --wait` gives the server
the new image and keeps its ports and volumes; a stopped server is rebuilt
and stays stopped; bad input is refused with Nova's messages. Evacuation
after `openstack compute service set --down`: the server comes up on
another host with its volume re-attached there, the migration record says
so, placement holds the destination for the instance and the source for
the migration until the source's agent comes back (a restart), which
destroys the guest it still had and drops that allocation. A failed
evacuation (no valid host) leaves the server ERROR on its source with its
allocation. The same in split processes, with the source's agent killed
-9 rather than forced down. A real guest (libvirt, TCG): a rebuild boots
the new image again keeping the volume."""
import json
import os
import signal

import pytest

from conftest import Cloud, free_port, unique
from test_multiprocess import Split, api, new_vhost, wait_for, wait_state

MV = "2.80"


@pytest.fixture(scope="module")
def fc(tmp_path_factory):
    # every spawn on fake-3 fails (boots go elsewhere on their retry): the
    # failing evacuation's destination
    c = Cloud(tmp_path_factory.mktemp("rebuild"), free_port(),
              ("--set", "DEFAULT.report_interval=1", "--set", "DEFAULT.service_down_time=6",
               "--set", "fake.fail_spawn_hosts=fake-3"))
    c.start()
    c.cli("quota", "set", "--volumes", "50", "--gigabytes", "200", "admin")
    yield c
    assert c.stop() == 0, c.tail()


@pytest.fixture(scope="module")
def image2(fc, tmp_path_factory):
    path = tmp_path_factory.mktemp("img") / "img2.raw"
    path.write_bytes(b"\0" * 1048576)
    img = fc.cli("image", "create", "--disk-format", "raw", "--container-format", "bare",
                 "--file", str(path), unique("img2"), "-f", "json")
    return img["id"]


def token(c):
    if not getattr(c, "_token", None):
        c._token = c.token()
    return c._token


def action(c, sid, body, mv=MV):
    return c.request("POST", "/compute/v2.1/servers/%s/action" % sid, body, token=token(c),
                     headers={"OpenStack-API-Version": "compute %s" % mv})


def server(c, sid):
    return api(c, "/servers/%s" % sid)["server"]


def settled(c, sid, status, timeout=60):
    return wait_for("server %s %s" % (sid, status),
                    lambda: (lambda v: v["status"] == status and not v["OS-EXT-STS:task_state"]
                             and v)(server(c, sid)), timeout)


def boot(c, name, host=None, nic="none"):
    args = ["--os-compute-api-version", "2.37", "server", "create", "--flavor", "m1.tiny",
            "--image", "cirros", "--nic", nic, "--wait", name, "-f", "json"]
    if host:
        args += ["--availability-zone", "nova:%s" % host]
    s = c.cli(*args)
    assert s["status"] == "ACTIVE", s
    return s


def attach_volume(c, sid):
    vid = c.cli("volume", "create", "--size", "1", unique("vol"), "-f", "json")["id"]
    c.cli("server", "add", "volume", sid, vid)
    wait_for("volume in-use", lambda: c.cli("volume", "show", vid, "-f", "json")["status"]
             == "in-use")
    return vid


def events(c, sid, action_name):
    acts = api(c, "/servers/%s/os-instance-actions" % sid)["instanceActions"]
    req = [a for a in acts if a["action"] == action_name][0]["request_id"]
    st, _, body = c.request("GET", "/compute/v2.1/servers/%s/os-instance-actions/%s" % (sid, req),
                            token=token(c), headers={"OpenStack-API-Version": "compute 2.84"})
    return {e["event"]: e for e in body["instanceAction"]["events"]}


def allocations(c, consumer):
    """{provider: resources} of a consumer."""
    st, _, body = c.request("GET", "/placement/allocations/%s" % consumer, token=token(c),
                            headers={"OpenStack-API-Version": "placement 1.28"})
    assert st == 200, body
    return {rp: a["resources"] for rp, a in body["allocations"].items()}


def evacuate_cli(c, sid, *extra):
    """`openstack server evacuate --wait` at 2.80 as an operator types it.
    OSC 6.0 sends the request and then fails on novaclient's answer (it
    reads `.id` of the TupleWithMeta that Server.evacuate returns), with
    Nova as with nubo; the evacuation itself goes on."""
    p = c.cli("--os-compute-api-version", MV, "server", "evacuate", "--wait", *extra, sid,
              check=False)
    assert p.returncode == 0 or "'TupleWithMeta' object has no attribute 'id'" in p.stderr, \
        p.stderr


def provider(c, host):
    return [r for r in c.cli("resource", "provider", "list", "-f", "json")
            if r["name"] == host][0]["uuid"]


def migration(c, sid):
    rows = c.sql("SELECT uuid, status, source_compute, dest_compute, dest_node, migration_type "
                 "FROM migrations WHERE instance_uuid = '%s' ORDER BY id DESC" % sid)
    return rows[0]


# ---- rebuild -----------------------------------------------------------------------


def test_rebuild_with_a_new_image_keeps_ports_and_volumes(fc, image2):
    c = fc
    s = boot(c, unique("rb"), nic="auto")
    ports = sorted(p["ID"] for p in c.cli("port", "list", "--server", s["id"], "-f", "json"))
    assert ports
    vid = attach_volume(c, s["id"])
    c.cli("server", "rebuild", "--image", image2, "--wait", s["id"])
    v = settled(c, s["id"], "ACTIVE")
    assert v["image"]["id"] == image2
    assert c.sql("SELECT image_ref FROM instances WHERE uuid = '%s'" % s["id"])[0]["image_ref"] \
        == image2
    assert sorted(p["ID"] for p in c.cli("port", "list", "--server", s["id"], "-f", "json")) \
        == ports
    assert [a["id"] for a in v["os-extended-volumes:volumes_attached"]] == [vid]
    assert c.cli("volume", "show", vid, "-f", "json")["status"] == "in-use"
    ev = events(c, s["id"], "rebuild")
    assert ev["compute_rebuild_instance"]["result"] == "Success", ev
    assert "conductor_rebuild_instance" in ev
    out = c.cli("console", "log", "show", s["id"])
    assert "boot source: %s" % image2 in out and "volume %s at" % vid in out
    log = c.log("compute")
    assert "Rebuilding instance" in log


def test_rebuild_of_a_stopped_server_answers_the_server_and_stays_stopped(fc, image2):
    c = fc
    s = boot(c, unique("rbs"))
    c.cli("server", "stop", s["id"])
    settled(c, s["id"], "SHUTOFF")
    st, hdrs, body = action(c, s["id"], {"rebuild": {"imageRef": image2, "name": "renamed",
                                                      "metadata": {"k": "v"}}}, mv="2.1")
    assert st == 202, body
    assert body["server"]["id"] == s["id"] and len(body["server"]["adminPass"]) == 12
    assert body["server"]["name"] == "renamed" and body["server"]["metadata"] == {"k": "v"}
    assert hdrs["Location"].endswith("/servers/%s" % s["id"])
    v = settled(c, s["id"], "SHUTOFF")
    assert v["image"]["id"] == image2 and v["OS-EXT-STS:power_state"] == 4
    # 2.57: a key pair and user data, both shown in the answer
    kp = unique("kp")
    st, _, out = c.request("POST", "/compute/v2.1/os-keypairs", {"keypair": {"name": kp}},
                           token=token(c))
    assert st == 200, out
    st, _, body = action(c, s["id"], {"rebuild": {"imageRef": image2, "key_name": kp,
                                                   "user_data": "aGVsbG8="}}, mv="2.57")
    assert st == 202, body
    assert body["server"]["key_name"] == kp and body["server"]["user_data"] == "aGVsbG8="
    settled(c, s["id"], "SHUTOFF")
    row = c.sql("SELECT key_name, key_data, user_data FROM instances WHERE uuid = '%s'"
                % s["id"])[0]
    assert row["key_name"] == kp and row["key_data"].startswith("ssh-")
    assert row["user_data"] == "aGVsbG8="
    st, _, body = action(c, s["id"], {"rebuild": {"imageRef": image2, "key_name": None,
                                                   "user_data": None}}, mv="2.57")
    assert st == 202 and body["server"]["key_name"] is None, body
    assert body["server"]["user_data"] is None
    settled(c, s["id"], "SHUTOFF")


def test_rebuild_answers_match_tempests_schemas(fc, image2):
    """The 202 body of a rebuild at the microversions whose response
    Tempest's schemas change (no extra keys: they reject them)."""
    jsonschema = pytest.importorskip("jsonschema")
    pytest.importorskip("tempest.lib.api_schema.response.compute.v2_1.servers")
    import importlib
    c = fc
    s = boot(c, unique("rbsch"))
    for mv in ("2.1", "2.26", "2.54", "2.57", "2.71", "2.75", "2.79"):
        mod = importlib.import_module("tempest.lib.api_schema.response.compute.v%s.servers"
                                      % mv.replace(".", "_"))
        schema = mod.rebuild_server_with_admin_pass
        settled(c, s["id"], "ACTIVE")
        st, _, body = action(c, s["id"], {"rebuild": {"imageRef": image2}}, mv=mv)
        assert st in schema["status_code"], (mv, st, body)
        jsonschema.Draft4Validator(schema["response_body"],
                                   format_checker=jsonschema.draft4_format_checker).validate(body)
    settled(c, s["id"], "ACTIVE")
    c.cli("server", "delete", s["id"])


def test_rebuild_and_evacuate_bad_input(fc, image2):
    c = fc
    s = boot(c, unique("rbbad"), host="fake-1")
    sid = s["id"]
    c.cli("image", "set", "--property", "auto_disk_config=disabled", image2)
    cases = [
        ({"rebuild": {}}, "2.1", 400, "'imageRef' is a required property"),
        ({"rebuild": {"imageRef": "nope"}}, "2.1", 400, "imageRef"),
        ({"rebuild": {"imageRef": image2, "key_name": "k"}}, "2.1", 400,
         "Additional properties are not allowed ('key_name' was unexpected)"),
        ({"rebuild": {"imageRef": image2, "personality": []}}, "2.57", 400,
         "Additional properties are not allowed ('personality' was unexpected)"),
        ({"rebuild": {"imageRef": "6b1e1a0e-0000-4000-8000-000000000000"}}, "2.1", 400,
         "Cannot find image for rebuild"),
        ({"rebuild": {"imageRef": image2, "key_name": "missing"}}, "2.54", 400,
         "Invalid key_name provided."),
        ({"rebuild": {"imageRef": image2, "OS-DCF:diskConfig": "AUTO"}}, "2.1", 400,
         "Requested image %s has automatic disk resize disabled." % image2),
        ({"evacuate": {}}, "2.1", 400, "'onSharedStorage' is a required property"),
        ({"evacuate": {"force": True}}, "2.29", 400,
         "Can't force to a non-provided destination"),
        ({"evacuate": {"host": "nope"}}, "2.29", 404, "Compute host nope not found."),
        ({"evacuate": {"host": "fake-1"}}, "2.29", 400, "The target host can't be the same one."),
        ({"evacuate": {}}, "2.29", 400, "Compute service of fake-1 is still in use."),
        ({"evacuate": {"onSharedStorage": True, "adminPass": "x"}}, "2.1", 400,
         "admin password can't be changed on existing disk"),
    ]
    for body, mv, code, msg in cases:
        st, _, out = action(c, sid, body, mv)
        assert st == code and msg in json.dumps(out), (body, mv, st, out)
    # nothing moved
    assert server(c, sid)["OS-EXT-STS:task_state"] is None
    c.cli("server", "delete", sid)


def test_rebuild_interrupted_by_a_restart_ends_in_error(fresh_cloud):
    c = fresh_cloud("--set", "fake.spawn_delay_ms=3000")
    s = boot(c, unique("rbi"))
    st, _, out = action(c, s["id"], {"rebuild": {"imageRef": server(c, s["id"])["image"]["id"]}})
    assert st == 202, out
    wait_for("rebuild spawning", lambda: server(c, s["id"])["OS-EXT-STS:task_state"]
             == "rebuild_spawning")
    c.stop(signal.SIGKILL)
    c.start()
    c._token = None
    v = settled(c, s["id"], "ERROR")
    assert v["fault"]["message"] == "Rebuild interrupted: nubo stopped during the rebuild.", v
    assert events(c, s["id"], "rebuild")["compute_rebuild_instance"]["result"] == "Error"


# ---- evacuate (fake hosts, forced down) -------------------------------------------


def test_evacuate_forced_down_host_and_the_source_cleans_up_when_it_comes_back(fc):
    c = fc
    s = boot(c, unique("evac"), host="fake-1", nic="auto")
    port = c.cli("port", "list", "--server", s["id"], "-f", "json")[0]["ID"]
    vid = attach_volume(c, s["id"])
    src_rp, old = provider(c, "fake-1"), allocations(c, s["id"])
    assert list(old) == [src_rp]
    c.cli("--os-compute-api-version", "2.11", "compute", "service", "set", "--down",
          "fake-1", "nova-compute")
    try:
        evacuate_cli(c, s["id"], "--host", "fake-2")
        v = settled(c, s["id"], "ACTIVE")
        dest = v["OS-EXT-SRV-ATTR:host"]
        assert dest == "fake-2"
        assert c.cli("port", "show", port, "-f", "json")["binding_host_id"] == dest
        assert v["OS-EXT-SRV-ATTR:hypervisor_hostname"] == dest
        m = migration(c, s["id"])
        assert (m["migration_type"], m["status"], m["source_compute"], m["dest_compute"]) == \
            ("evacuation", "done", "fake-1", dest)
        # the instance holds the destination, the migration the source
        assert list(allocations(c, s["id"])) == [provider(c, dest)]
        assert allocations(c, m["uuid"]) == old
        att = c.cli("volume", "show", vid, "-f", "json")["attachments"]
        assert [a["host_name"] for a in att] == [dest], att
        ev = events(c, s["id"], "evacuate")
        assert ev["compute_rebuild_instance"]["result"] == "Success"
        assert ev["compute_rebuild_instance"]["host"] == dest
        log = c.log("compute")
        assert "disk not on shared storage, evacuating from image" in log
    finally:
        c.cli("--os-compute-api-version", "2.11", "compute", "service", "set", "--up",
              "fake-1", "nova-compute")
    # fake-1's guest is still there until its agent starts again
    with open(os.path.join(c.state_dir, "fake", "fake-1.json")) as f:
        assert s["id"] in json.load(f)
    assert c.stop() == 0, c.tail()
    c.start()
    c._token = None
    wait_for("source cleaned", lambda: migration(c, s["id"])["status"] == "completed")
    with open(os.path.join(c.state_dir, "fake", "fake-1.json")) as f:
        assert s["id"] not in json.load(f)
    assert allocations(c, m["uuid"]) == {}
    assert list(allocations(c, s["id"])) == [provider(c, dest)]
    assert "Destroying instance as it has been evacuated from this host but still exists in " \
        "the hypervisor" in c.log("compute")
    assert settled(c, s["id"], "ACTIVE")["OS-EXT-SRV-ATTR:host"] == dest


def test_failed_evacuation_leaves_the_server_in_error_on_its_source(fc):
    c = fc
    s = boot(c, unique("evfail"), host="fake-2")
    old = allocations(c, s["id"])
    for h in ("fake-1", "fake-2"):
        c.cli("--os-compute-api-version", "2.11", "compute", "service", "set", "--down", h,
              "nova-compute")
    try:
        # the named destination is down too: the scheduler finds no host
        st, _, out = action(c, s["id"], {"evacuate": {"host": "fake-1"}}, mv="2.29")
        assert st == 200 and out is None, out
        v = settled(c, s["id"], "ERROR")
        assert v["OS-EXT-SRV-ATTR:host"] == "fake-2"
        assert v["fault"]["message"].startswith("No valid host was found."), v["fault"]
        assert migration(c, s["id"])["status"] == "error"
        assert allocations(c, s["id"]) == old
        assert allocations(c, migration(c, s["id"])["uuid"]) == {}
    finally:
        for h in ("fake-1", "fake-2"):
            c.cli("--os-compute-api-version", "2.11", "compute", "service", "set", "--up", h,
                  "nova-compute")


def test_evacuation_failing_on_the_destination_sets_error_and_gives_the_claims_back(fc):
    c = fc
    s = boot(c, unique("evspawn"), host="fake-2")
    old = allocations(c, s["id"])
    c.cli("--os-compute-api-version", "2.11", "compute", "service", "set", "--down", "fake-2",
          "nova-compute")
    try:
        st, _, out = action(c, s["id"], {"evacuate": {"host": "fake-3", "force": True}}, mv="2.29")
        assert st == 200, out
        v = settled(c, s["id"], "ERROR")
        assert v["OS-EXT-SRV-ATTR:host"] == "fake-2"
        assert "spawn failure injected on host fake-3" in v["fault"]["message"], v["fault"]
        m = migration(c, s["id"])
        assert (m["status"], m["dest_compute"]) == ("failed", "fake-3")
        assert allocations(c, s["id"]) == old
        assert allocations(c, m["uuid"]) == {}
        ev = events(c, s["id"], "evacuate")
        assert ev["compute_rebuild_instance"]["result"] == "Error"
    finally:
        c.cli("--os-compute-api-version", "2.11", "compute", "service", "set", "--up", "fake-2",
              "nova-compute")


def test_evacuation_onto_shared_storage_keeps_the_disk(fresh_cloud):
    c = fresh_cloud("--set", "fake.shared_storage=true")
    s1, s2 = boot(c, unique("evsh"), host="fake-1"), boot(c, unique("evsh"), host="fake-1")
    c.cli("--os-compute-api-version", "2.11", "compute", "service", "set", "--down", "fake-1",
          "nova-compute")
    # before 2.14 the caller says; wrong, the destination refuses
    st, _, out = action(c, s1["id"], {"evacuate": {"onSharedStorage": "False"}}, mv="2.1")
    assert st == 200 and len(out["adminPass"]) == 12, out
    v = settled(c, s1["id"], "ERROR")
    assert v["fault"]["message"] == "Invalid state of instance files on shared storage", v
    assert migration(c, s1["id"])["status"] == "failed"
    # from 2.14 the destination finds out
    st, _, out = action(c, s2["id"], {"evacuate": {}}, mv="2.14")
    assert st == 200 and out is None, out
    assert settled(c, s2["id"], "ACTIVE")["OS-EXT-SRV-ATTR:host"] != "fake-1"
    assert "disk on shared storage, evacuating using existing disk" in c.log("compute")
    assert c.sql("SELECT value FROM instance_system_metadata WHERE instance_uuid = '%s' AND "
                 "key = 'evacuated_on_shared_storage' AND deleted = 0" % s2["id"]) \
        == [{"value": "True"}]


# ---- evacuate (split processes, agent killed) -------------------------------------


@pytest.fixture(scope="module")
def evac_vhost():
    yield from new_vhost()


@pytest.fixture(scope="module")
def split(tmp_path_factory, evac_vhost):
    s = Split(tmp_path_factory.mktemp("split-evac"), evac_vhost).create().start_serve()
    s.compute("hostA")
    s.compute("hostB")
    yield s
    assert all(rc == 0 for rc in s.stop()), [p.tail() for p in s.computes.values()]


def test_evacuate_after_the_agent_is_killed_and_cleanup_at_its_restart(split):
    c = split.cloud
    for h in ("hostA", "hostB"):
        wait_state(c, h, "up", 30)
    s = boot(c, unique("evk"), host="hostA")
    split.computes["hostA"].stop(signal.SIGKILL)
    wait_state(c, "hostA", "down", 30)
    evacuate_cli(c, s["id"])
    v = settled(c, s["id"], "ACTIVE")
    assert v["OS-EXT-SRV-ATTR:host"] == "hostB"
    m = migration(c, s["id"])
    assert (m["status"], m["dest_compute"]) == ("done", "hostB")
    assert list(allocations(c, s["id"])) == [provider(c, "hostB")]
    assert list(allocations(c, m["uuid"])) == [provider(c, "hostA")]
    split.compute("hostA")
    wait_for("source cleaned", lambda: migration(c, s["id"])["status"] == "completed")
    assert allocations(c, m["uuid"]) == {}
    assert "Destroying instance as it has been evacuated" in split.compute_log("hostA")
    assert s["id"] in split.compute_log("hostA")


# ---- a real guest (libvirt, TCG) ---------------------------------------------------


def test_libvirt_rebuild_boots_the_new_image_keeping_the_volume():
    import test_libvirt as lvt
    if lvt._why:
        pytest.skip(lvt._why)
    c = lvt.start_libvirt_cloud("rebuild")
    try:
        img1 = c.cli("image", "create", "--file", lvt.QCOW2, "--disk-format", "qcow2",
                     "--container-format", "bare", unique("g1"), "-f", "json")["id"]
        img2 = c.cli("image", "create", "--file", lvt.RAW, "--disk-format", "raw",
                     "--container-format", "bare", unique("g2"), "-f", "json")["id"]
        s = lvt.boot(c, unique("lvrb"), image=img1)
        lvt.wait_console(c, s["id"], r"HB \d+ ")
        vid = attach_volume(c, s["id"])
        before = lvt.starts(c, s["id"])
        c.cli("server", "rebuild", "--image", img2, "--wait", s["id"])
        v = lvt.wait_status(c, s["id"])
        assert v["status"] == "ACTIVE" and v["image"]["id"] == img2, v
        # the console shows the guest booted again, after its first boot
        lvt.wait_new_boot(c, s["id"], before)
        assert lvt.console(c, s["id"]).count("GUEST-BOOTED") >= 2
        disks = lvt.virsh("domblklist", s["id"]).stdout
        assert "volume-%s" % vid in disks, disks
        with open(os.path.join(c.state_dir, "instances", s["id"], "disk.info")) as f:
            info = json.load(f)
        import hashlib
        assert info["base"] == hashlib.sha1(img2.encode()).hexdigest(), info
        assert c.cli("volume", "show", vid, "-f", "json")["status"] == "in-use"
    finally:
        assert lvt.stop_cloud(c) == 0, c.tail()

"""Step 3 on fake hosts: the compute API side of volumes, driven with the real
openstack CLI (and raw HTTP where the answer's exact shape matters).

os-volume_attachments (attach, list, show, detach; Nova's refusals and
microversion fields), volumes reserved and released by server create and
delete, the five ways `openstack server create` boots from volumes, and
createImage of image-backed servers (a real qcow2 upload) and of
volume-backed servers (volume snapshots and an image carrying the
mappings)."""
import json
import subprocess
import time

import pytest

from conftest import CliError, unique

GIB = 1 << 30


# -- helpers ---------------------------------------------------------------

@pytest.fixture(scope="module", autouse=True)
def volume_quota(cloud):
    """Room in the admin project for this module's volumes and snapshots."""
    cloud.cli("quota", "set", "--volumes", "100", "--snapshots", "100", "--gigabytes", "500",
              "admin")


@pytest.fixture(scope="module")
def guest(cloud, tmp_path_factory):
    """An image with data (the seeded cirros of a fake cloud is a record
    without an upload, which no volume can be made from)."""
    return qcow2_image(cloud, tmp_path_factory.mktemp("guest"), size="16M")

def boot(cloud, *extra, cloud_name="nubo", wait=True, image="cirros"):
    args = ["server", "create", "--flavor", "m1.tiny"]
    if image:
        args += ["--image", image]
    args += list(extra) + [unique("srv"), "-f", "json"]
    if wait:
        args.insert(2, "--wait")
    return cloud.cli(*args, cloud=cloud_name)


def volume(cloud, size=1, *extra, cloud_name="nubo"):
    v = cloud.cli("volume", "create", "--size", str(size), *extra, unique("vol"), "-f", "json",
                  cloud=cloud_name)
    assert v["status"] == "available", v
    return v["id"]


def wait_volume(cloud, vid, status, timeout=60):
    deadline = time.time() + timeout
    s = None
    while time.time() < deadline:
        s = cloud.cli("volume", "show", vid, "-f", "json")["status"]
        if s == status:
            return s
        time.sleep(0.2)
    raise AssertionError("volume %s is %s, not %s after %ss" % (vid, s, status, timeout))


def wait_image(cloud, iid, status="active", timeout=60):
    deadline = time.time() + timeout
    img = None
    while time.time() < deadline:
        img = cloud.cli("image", "show", iid, "-f", "json")
        if img["status"] == status:
            return img
        time.sleep(0.3)
    raise AssertionError("image %s: %s" % (iid, img))


def compute(cloud, method, path, body=None, mv="2.1", cloud_name="nubo"):
    return cloud.request(method, "/compute/v2.1" + path, body, token=cloud.token(cloud_name),
                         headers={"OpenStack-API-Version": "compute %s" % mv})


def attached(cloud, sid):
    s = cloud.cli("server", "show", sid, "-f", "json", "-c", "volumes_attached")
    va = s["volumes_attached"]
    if isinstance(va, str):  # OSC 6 formats the list as text
        return sorted(line.split("'")[1] if "'" in line else line.split("=", 1)[1]
                      for line in va.splitlines() if "id" in line)
    return sorted(v["id"] for v in va)


def bdm_rows(cloud, sid):
    return cloud.sql("SELECT source_type, destination_type, boot_index, volume_id, snapshot_id, "
                     "image_id, volume_size, device_name, delete_on_termination FROM "
                     "block_device_mapping WHERE instance_uuid = '%s' AND deleted = 0 "
                     "ORDER BY id" % sid)


def qcow2_image(cloud, tmp_path, size="64M"):
    path = tmp_path / "base.qcow2"
    subprocess.run(["qemu-img", "create", "-f", "qcow2", str(path), size], check=True,
                   capture_output=True)
    name = unique("img")
    return cloud.cli("image", "create", "--disk-format", "qcow2", "--container-format", "bare",
                     "--file", str(path), "--property", "hw_disk_bus=virtio",
                     name, "-f", "json")["id"]


# -- attach / detach --------------------------------------------------------

def test_attach_list_detach(cloud):
    s = boot(cloud)
    vid = volume(cloud)
    cloud.cli("server", "add", "volume", s["id"], vid)
    # the mapping exists at once, with the next free device after the root
    rows = [r for r in bdm_rows(cloud, s["id"]) if r["volume_id"] == vid]
    assert rows == [{"source_type": "volume", "destination_type": "volume", "boot_index": None,
                     "volume_id": vid, "snapshot_id": None, "image_id": None,
                     "volume_size": None, "device_name": "/dev/vdb",
                     "delete_on_termination": 0}]
    listed = cloud.cli("server", "volume", "list", s["id"], "-f", "json")
    assert [(x["Volume ID"], x["Device"]) for x in listed] == [(vid, "/dev/vdb")]
    wait_volume(cloud, vid, "in-use")
    assert attached(cloud, s["id"]) == [vid]
    events = cloud.cli("server", "event", "list", s["id"], "-f", "json")
    assert "attach_volume" in [e["Action"] for e in events]

    # an in-use volume cannot be deleted: Cinder's 400
    r = cloud.cli("volume", "delete", vid, check=False)
    assert r.returncode != 0 and "Invalid volume: Volume status must be available" in r.stderr, \
        r.stderr
    # nor attached again
    st, _, body = compute(cloud, "POST", "/servers/%s/os-volume_attachments" % s["id"],
                          {"volumeAttachment": {"volumeId": vid}})
    assert st == 400 and body["badRequest"]["message"] == (
        "Invalid volume: volume %s is already attached to instances: %s" % (vid, s["id"]))

    cloud.cli("server", "remove", "volume", s["id"], vid)
    wait_volume(cloud, vid, "available")
    assert cloud.cli("server", "volume", "list", s["id"], "-f", "json") == []
    assert attached(cloud, s["id"]) == []
    cloud.cli("volume", "delete", vid)


def test_attachment_views_by_microversion(cloud):
    s = boot(cloud)
    vid = volume(cloud)
    st, _, body = compute(cloud, "POST", "/servers/%s/os-volume_attachments" % s["id"],
                          {"volumeAttachment": {"volumeId": vid, "device": "/dev/vdd",
                                                "tag": "data", "delete_on_termination": True}},
                          mv="2.79")
    assert st == 200, body
    assert body["volumeAttachment"] == {"id": vid, "serverId": s["id"], "volumeId": vid,
                                        "device": "/dev/vdd", "tag": "data",
                                        "delete_on_termination": True}
    path = "/servers/%s/os-volume_attachments/%s" % (s["id"], vid)
    st, _, body = compute(cloud, "GET", path)
    assert st == 200 and body["volumeAttachment"] == {
        "id": vid, "serverId": s["id"], "volumeId": vid, "device": "/dev/vdd"}
    st, _, body = compute(cloud, "GET", path, mv="2.89")
    a = body["volumeAttachment"]
    assert "id" not in a and a["tag"] == "data" and a["delete_on_termination"] is True
    row = cloud.sql("SELECT uuid FROM block_device_mapping WHERE volume_id = '%s' AND "
                    "deleted = 0" % vid)[0]
    assert a["bdm_uuid"] == row["uuid"]
    # volumes_attached shows delete_on_termination from 2.3
    st, _, body = compute(cloud, "GET", "/servers/%s" % s["id"], mv="2.3")
    assert {"id": vid, "delete_on_termination": True} in \
        body["server"]["os-extended-volumes:volumes_attached"]
    # 2.85: only delete_on_termination may change
    st, _, body = compute(cloud, "PUT", path, {"volumeAttachment": {
        "volumeId": vid, "delete_on_termination": False}}, mv="2.85")
    assert st == 202, body
    st, _, body = compute(cloud, "PUT", path, {"volumeAttachment": {
        "volumeId": vid, "device": "/dev/vde"}}, mv="2.85")
    assert st == 400 and body["badRequest"]["message"] == "The device property is not mutable"
    st, _, body = compute(cloud, "GET", path, mv="2.79")
    assert body["volumeAttachment"]["delete_on_termination"] is False
    # paging goes over all the mappings, as Nova's common.limited
    st, _, body = compute(cloud, "GET", "/servers/%s/os-volume_attachments?limit=1&offset=1"
                          % s["id"])
    assert st == 200 and [a["volumeId"] for a in body["volumeAttachments"]] == [vid]
    wait_volume(cloud, vid, "in-use")
    # a device in use, and one that is not a device
    v2 = volume(cloud)
    st, _, body = compute(cloud, "POST", "/servers/%s/os-volume_attachments" % s["id"],
                          {"volumeAttachment": {"volumeId": v2, "device": "/dev/vdd"}})
    assert st == 409 and body["conflictingRequest"]["message"] == \
        "The supplied device path (/dev/vdd) is in use."
    st, _, body = compute(cloud, "POST", "/servers/%s/os-volume_attachments" % s["id"],
                          {"volumeAttachment": {"volumeId": v2, "device": "vdz"}})
    assert st == 400 and "does not match" in body["badRequest"]["message"]
    assert cloud.cli("volume", "show", v2, "-f", "json")["status"] == "available"
    # detaching a volume the server does not have
    root = compute(cloud, "DELETE", "/servers/%s/os-volume_attachments/%s" % (s["id"], v2))
    assert root[0] == 404 and root[2]["itemNotFound"]["message"] == \
        "Instance %s is not attached to volume %s" % (s["id"], v2)


def test_other_projects_volume_and_server_are_not_found(cloud):
    demo = boot(cloud, cloud_name="nubo-demo")
    admin_vol = volume(cloud)
    st, _, body = compute(cloud, "POST", "/servers/%s/os-volume_attachments" % demo["id"],
                          {"volumeAttachment": {"volumeId": admin_vol}}, cloud_name="nubo-demo")
    assert st == 404 and body["itemNotFound"]["message"] == \
        "Volume %s could not be found." % admin_vol
    admin_srv = boot(cloud)
    demo_vol = volume(cloud, cloud_name="nubo-demo")
    st, _, body = compute(cloud, "POST", "/servers/%s/os-volume_attachments" % admin_srv["id"],
                          {"volumeAttachment": {"volumeId": demo_vol}}, cloud_name="nubo-demo")
    assert st == 404 and body["itemNotFound"]["message"] == \
        "Instance %s could not be found." % admin_srv["id"]
    assert cloud.cli("volume", "show", admin_vol, "-f", "json")["status"] == "available"


def test_attach_refused_in_build_and_error(cloud):
    s = boot(cloud)
    vid = volume(cloud)
    cloud.cli("server", "set", "--state", "error", s["id"])
    r = cloud.cli("server", "add", "volume", s["id"], vid, check=False)
    assert r.returncode != 0
    assert "Cannot 'attach_volume' instance %s while it is in vm_state error" % s["id"] \
        in r.stderr, r.stderr
    # a server still building (as the database says while it is scheduled)
    cloud.sql("UPDATE instances SET vm_state = 'building' WHERE uuid = '%s'" % s["id"])
    st, _, body = compute(cloud, "POST", "/servers/%s/os-volume_attachments" % s["id"],
                          {"volumeAttachment": {"volumeId": vid}})
    assert st == 409 and body["conflictingRequest"]["message"] == \
        "Cannot 'attach_volume' instance %s while it is in vm_state building" % s["id"]
    cloud.sql("UPDATE instances SET vm_state = 'active' WHERE uuid = '%s'" % s["id"])
    assert cloud.cli("volume", "show", vid, "-f", "json")["status"] == "available"
    assert [r for r in bdm_rows(cloud, s["id"]) if r["volume_id"]] == []


# -- server create with mappings ------------------------------------------------

def test_create_refusals_name_the_mapping(cloud):
    missing = "8c4bd2b6-6c57-4a52-9f2e-6c1d1f0e0b11"
    base = {"name": unique("srv"), "flavorRef": "1"}
    cases = [
        ({"block_device_mapping_v2": [{"uuid": missing, "source_type": "volume",
                                       "destination_type": "volume", "boot_index": 0}]},
         "Block Device Mapping is Invalid: failed to get volume %s." % missing),
        ({"block_device_mapping_v2": [{"uuid": missing, "source_type": "snapshot",
                                       "destination_type": "volume", "boot_index": 0}]},
         "Snapshot %s could not be found." % missing),
        ({"block_device_mapping_v2": [{"source_type": "blank", "destination_type": "volume",
                                       "boot_index": 0}]},
         "Block Device Mapping is Invalid: Blank volumes (source: 'blank', dest: 'volume') "
         "need to have non-zero size"),
    ]
    token = cloud.token()
    for extra, msg in cases:
        server = dict(base, **extra)
        st, _, body = cloud.request("POST", "/compute/v2.1/servers", {"server": server},
                                    token=token)
        assert st == 400 and body["badRequest"]["message"] == msg, (extra, body)
    # a blank (non-bootable) volume cannot be the root
    vid = volume(cloud)
    server = dict(base, block_device_mapping_v2=[{"uuid": vid, "source_type": "volume",
                                                  "destination_type": "volume",
                                                  "boot_index": 0}])
    st, _, body = cloud.request("POST", "/compute/v2.1/servers", {"server": server}, token=token)
    assert st == 400 and body["badRequest"]["message"] == "Block Device %s is not bootable." % vid
    # a second data volume that does not exist
    server = {"name": unique("srv"), "flavorRef": "1", "imageRef": cloud.cli(
        "image", "show", "cirros", "-f", "value", "-c", "id").strip(),
        "block_device_mapping_v2": [{"uuid": missing, "source_type": "volume",
                                     "destination_type": "volume"}]}
    st, _, body = cloud.request("POST", "/compute/v2.1/servers", {"server": server}, token=token)
    assert st == 400 and body["badRequest"]["message"] == \
        "Volume %s could not be found." % missing
    assert cloud.cli("volume", "show", vid, "-f", "json")["status"] == "available"


def test_data_volume_at_create_is_reserved_and_released(cloud):
    vid = volume(cloud)
    s = boot(cloud, "--block-device-mapping", "vdb=%s:volume::false" % vid)
    assert vid in attached(cloud, s["id"])
    wait_volume(cloud, vid, "in-use")
    # a volume already used by a server is refused by the next create
    token = cloud.token()
    image = cloud.cli("image", "show", "cirros", "-f", "value", "-c", "id").strip()
    st, _, body = cloud.request("POST", "/compute/v2.1/servers", {"server": {
        "name": unique("srv"), "flavorRef": "1", "imageRef": image,
        "block_device_mapping_v2": [{"uuid": vid, "source_type": "volume",
                                     "destination_type": "volume"}]}}, token=token)
    assert st == 400 and body["badRequest"]["message"].startswith("Invalid volume:"), body
    cloud.cli("server", "delete", "--wait", s["id"])
    wait_volume(cloud, vid, "available")


def test_unscheduled_server_delete_releases_its_volume(cloud):
    vid = volume(cloud)
    # a flavor no host can take: the server never gets a host
    flavor = unique("huge")
    cloud.cli("flavor", "create", "--ram", "64", "--disk", "99999", "--vcpus", "1", flavor)
    image = cloud.cli("image", "show", "cirros", "-f", "value", "-c", "id").strip()
    s = cloud.cli("server", "create", "--flavor", flavor, "--image", image,
                  "--block-device-mapping", "vdb=%s:volume::false" % vid, unique("srv"),
                  "-f", "json")
    s = cloud.wait_server(s["id"], statuses=("ERROR",))
    assert cloud.cli("volume", "show", vid, "-f", "json")["status"] in ("reserved", "available")
    cloud.cli("server", "delete", "--wait", s["id"])
    wait_volume(cloud, vid, "available")


def bootable_volume(cloud, image, size=1):
    """A volume made from an image: bootable."""
    return cloud.cli("volume", "create", "--size", str(size), "--image", image, unique("boot"),
                     "-f", "json")["id"]


def test_boot_from_existing_volume(cloud, guest):
    vid = bootable_volume(cloud, guest)
    wait_volume(cloud, vid, "available")
    s = boot(cloud, "--volume", vid, image=None)
    assert s["status"] == "ACTIVE", s
    assert attached(cloud, s["id"]) == [vid]
    assert s["image"] in ("", "N/A (booted from volume)")
    rows = bdm_rows(cloud, s["id"])
    assert rows[0]["boot_index"] == 0 and rows[0]["volume_id"] == vid
    wait_volume(cloud, vid, "in-use")
    cloud.cli("server", "delete", "--wait", s["id"])
    wait_volume(cloud, vid, "available")


def test_boot_from_new_volume_of_image(cloud, guest):
    s = boot(cloud, "--boot-from-volume", "1", image=guest)
    assert s["status"] == "ACTIVE", s
    rows = bdm_rows(cloud, s["id"])
    assert rows[0]["source_type"] == "image" and rows[0]["destination_type"] == "volume"
    assert rows[0]["volume_size"] == 1 and rows[0]["volume_id"]
    assert attached(cloud, s["id"]) == [rows[0]["volume_id"]]


def test_boot_with_block_device_image_to_volume(cloud, guest):
    # OSC 6.0 wants --image (or --volume/--snapshot) next to --block-device,
    # and with --image novaclient adds its own image root with boot index 0:
    # two roots, which Nova refuses
    r = cloud.cli("server", "create", "--flavor", "m1.tiny", "--image", guest, "--block-device",
                  "uuid=%s,source_type=image,destination_type=volume,volume_size=1,boot_index=0,"
                  "delete_on_termination=true" % guest, unique("srv"), check=False)
    assert r.returncode != 0 and "Block Device Mapping is Invalid: Boot sequence for the " \
        "instance and image/block device mapping combination is not valid." in r.stderr
    # the mapping alone, as OSC parses the --block-device string
    st, _, body = cloud.request("POST", "/compute/v2.1/servers", {"server": {
        "name": unique("srv"), "imageRef": "", "flavorRef": "1",
        "block_device_mapping_v2": [{
            "uuid": guest, "source_type": "image", "destination_type": "volume",
            "volume_size": "1", "boot_index": 0, "delete_on_termination": True}]}},
        token=cloud.token())
    assert st == 202, body
    s = cloud.wait_server(body["server"]["id"])
    assert s["status"] == "ACTIVE", s
    rows = bdm_rows(cloud, s["id"])
    assert [(r["source_type"], r["image_id"], r["volume_size"], r["boot_index"])
            for r in rows] == [("image", guest, 1, 0)]
    vid = rows[0]["volume_id"]
    assert attached(cloud, s["id"]) == [vid]
    cloud.cli("server", "delete", "--wait", s["id"])
    r = cloud.cli("volume", "show", vid, check=False)
    assert r.returncode != 0  # delete_on_termination


def test_boot_from_volume_snapshot(cloud, guest):
    vid = bootable_volume(cloud, guest)
    wait_volume(cloud, vid, "available")
    snap = cloud.cli("volume", "snapshot", "create", "--volume", vid, unique("snap"),
                     "-f", "json")["id"]
    s = boot(cloud, "--snapshot", snap, image=None)
    assert s["status"] == "ACTIVE", s
    rows = bdm_rows(cloud, s["id"])
    assert rows[0]["source_type"] == "snapshot" and rows[0]["snapshot_id"] == snap
    assert rows[0]["volume_size"] == 1  # from the snapshot
    assert attached(cloud, s["id"]) == [rows[0]["volume_id"]]


# -- createImage ---------------------------------------------------------------

def test_create_image_of_image_backed_server(cloud, tmp_path):
    img = qcow2_image(cloud, tmp_path)
    s = boot(cloud, image=img)
    name = unique("snap")
    out = cloud.cli("server", "image", "create", "--name", name, s["id"], "-f", "json")
    iid = out["id"]
    image = wait_image(cloud, iid)
    props = image["properties"]
    assert props["image_type"] == "snapshot" and props["instance_uuid"] == s["id"]
    assert props["base_image_ref"] == img and props["hw_disk_bus"] == "virtio"
    assert image["disk_format"] == "qcow2" and image["visibility"] == "private"
    assert image["size"] > 0
    path = tmp_path / "saved.qcow2"
    cloud.cli("image", "save", "--file", str(path), iid)
    info = json.loads(subprocess.run(["qemu-img", "info", "--output=json", str(path)],
                                     check=True, capture_output=True, text=True).stdout)
    assert info["format"] == "qcow2"
    events = cloud.cli("server", "event", "list", s["id"], "-f", "json")
    assert "createImage" in [e["Action"] for e in events]
    assert cloud.wait_server(s["id"])["OS-EXT-STS:task_state"] is None


def test_create_image_refused_while_busy_and_in_error(cloud):
    s = boot(cloud)
    cloud.cli("server", "set", "--state", "error", s["id"])
    st, _, body = compute(cloud, "POST", "/servers/%s/action" % s["id"],
                          {"createImage": {"name": "x"}}, mv="2.45")
    assert st == 409 and body["conflictingRequest"]["message"] == \
        "Cannot 'createImage' instance %s while it is in vm_state error" % s["id"]
    cloud.cli("server", "set", "--state", "active", s["id"])
    st, _, body = compute(cloud, "POST", "/servers/%s/action" % s["id"],
                          {"createImage": {}}, mv="2.45")
    assert st == 400 and "'name' is a required property" in body["badRequest"]["message"]


def test_create_image_of_volume_backed_server_and_boot_it(cloud, guest):
    vid = bootable_volume(cloud, guest)
    wait_volume(cloud, vid, "available")
    s = boot(cloud, "--volume", vid, image=None)
    assert s["status"] == "ACTIVE", s
    wait_volume(cloud, vid, "in-use")
    st, headers, body = compute(cloud, "POST", "/servers/%s/action" % s["id"],
                                {"createImage": {"name": unique("vbsnap"),
                                                 "metadata": {"purpose": "e2e"}}}, mv="2.1")
    assert st == 202 and body is None, body
    iid = headers["Location"].rsplit("/", 1)[1]
    image = cloud.cli("image", "show", iid, "-f", "json")
    assert image["status"] == "active" and image["size"] == 0
    props = image["properties"]
    assert props["bdm_v2"] == "True" and props["purpose"] == "e2e"
    mapping = json.loads(props["block_device_mapping"])
    assert len(mapping) == 1
    m = mapping[0]
    assert m["source_type"] == "snapshot" and m["destination_type"] == "volume"
    assert m["boot_index"] == 0 and m["volume_size"] == 1
    snap = cloud.cli("volume", "snapshot", "show", m["snapshot_id"], "-f", "json")
    assert snap["volume_id"] == vid
    events = cloud.cli("server", "event", "list", s["id"], "-f", "json")
    assert "createImage" in [e["Action"] for e in events]

    # the fifth way: --image with a volume-backed snapshot image
    s2 = boot(cloud, image=iid)
    assert s2["status"] == "ACTIVE", s2
    rows = bdm_rows(cloud, s2["id"])
    assert rows[0]["source_type"] == "snapshot" and rows[0]["snapshot_id"] == m["snapshot_id"]
    assert rows[0]["boot_index"] == 0
    assert attached(cloud, s2["id"]) == [rows[0]["volume_id"]]

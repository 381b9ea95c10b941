"""Step 3 with real guests: volumes and block device mappings under libvirt/TCG.

The five ways to boot from a volume, hot-plug attach and detach, snapshots
of image- and volume-backed servers, what a delete leaves behind, and the
runbook's "Image is not in qcow2 format" scenario (reconciled by the agent,
or diagnosed and fixed with `nubo doctor server`), all driven with the real
openstack CLI and checked as an operator would: the console's heartbeat,
virsh, `ls …/mnt/*/volume-<id>`, qemu-img and sqlite3 on the database.

The guest (tests/images) runs from an initramfs: SYSLINUX reads the kernel
and initramfs from the boot disk, so a volume made from the guest image
boots it, and the guest prints `BLOCK-DEVICES <names>` whenever /sys/block
changes, which shows a hot-plugged disk arrive and leave."""
import glob
import grp
import json
import os
import re
import stat
import subprocess
import time

import pytest
import yaml

from conftest import NUBO_BIN, unique
from test_libvirt import (QCOW2, api, console, libvirt_ready, start_libvirt_cloud, stop_cloud,
                          virsh, wait_console, wait_new_boot, wait_status, starts,
                          booted_since)

_why = libvirt_ready()
if _why and os.environ.get("NUBO_REQUIRE_LIBVIRT"):
    raise RuntimeError("libvirt tests required but: " + _why)
pytestmark = pytest.mark.skipif(bool(_why), reason=_why or "")

GIB = 1 << 30


# -- clouds --------------------------------------------------------------

def login(c, cloud="nubo"):
    """(token, project id) of a cloud of clouds.yaml, over HTTP (the CLI
    takes seconds per call; the tests poll). Cached until forget()."""
    if not getattr(c, "_logins", None):
        c._logins = {}
    cache = c._logins
    if cloud not in cache:
        with open(os.path.join(c.state_dir, "clouds.yaml")) as fh:
            auth = yaml.safe_load(fh)["clouds"][cloud]["auth"]
        st, hdrs, body = c.request("POST", "/identity/v3/auth/tokens", {"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": auth["username"], "domain": {"id": "default"},
                "password": auth["password"]}}},
            "scope": {"project": {"name": auth["project_name"], "domain": {"id": "default"}}}}})
        assert st == 201, (st, body)
        cache[cloud] = (hdrs["X-Subject-Token"], body["token"]["project"]["id"])
    if cloud == "nubo":
        c._token = cache[cloud][0]  # test_libvirt's api() uses it
    return cache[cloud]


def forget(c):
    """After a restart: log in again."""
    c._logins = None
    c._token = None
    login(c)


def start_bfv_cloud(name, *extra):
    """A libvirt cloud whose seeded `cirros` image is the test guest, with
    room in the admin project for the volumes of a module."""
    c = start_libvirt_cloud(name, "--demo-image", QCOW2, *extra)
    tok, proj = login(c)
    st, _, body = c.request("GET", "/image/v2/images?name=cirros", token=tok)
    assert st == 200 and len(body["images"]) == 1, (st, body)
    c.image_id = body["images"][0]["id"]
    c.cli("quota", "set", "--volumes", "100", "--snapshots", "100", "--gigabytes", "500",
          "--instances", "50", "--cores", "100", "--ram", "100000", "admin")
    return c


@pytest.fixture(scope="module")
def bfv():
    c = start_bfv_cloud("bfv")
    yield c
    assert stop_cloud(c) == 0, c.tail()


@pytest.fixture
def cleanup():
    """Servers a test made: deleted at its end, so idle TCG guests do not
    eat the CPU the next boots need (the cloud's teardown is the backstop)."""
    made = []
    yield made
    for c, sid in made:
        try:
            api(c, "DELETE", "/servers/%s" % sid)
        except Exception:  # the test's own failure is what matters
            pass


# -- helpers -------------------------------------------------------------

def qemu_info(path):
    return json.loads(subprocess.run(["qemu-img", "info", "-U", "--output=json", path],
                                     check=True, capture_output=True, text=True).stdout)


def share_files(c, pattern="volume-*"):
    """The volume files on the shares, found as the runbook finds them."""
    return set(glob.glob(os.path.join(c.state_dir, "mnt", "*", pattern)))


def volume_file(c, vid):
    files = sorted(share_files(c, "volume-%s" % vid))
    assert len(files) == 1, (vid, files, sorted(share_files(c)))
    return files[0]


def vapi(c, method, path, body=None, cloud="nubo", version=None):
    """Block Storage API call in the cloud's project."""
    tok, proj = login(c, cloud)
    st, _, data = c.request(method, "/volume/v3/%s%s" % (proj, path), body, token=tok,
                            headers={"OpenStack-API-Version": "volume " + version}
                            if version else None)
    return st, data


def volume(c, vid):
    st, data = vapi(c, "GET", "/volumes/%s" % vid)
    assert st == 200, (st, data)
    return data["volume"]


def wait_volume(c, vid, statuses=("available", "error"), timeout=120):
    deadline = time.time() + timeout
    v = None
    while time.time() < deadline:
        v = volume(c, vid)
        if v["status"] in statuses:
            return v
        time.sleep(0.2)
    raise AssertionError("volume %s not in %s after %ss: %s" % (vid, statuses, timeout, v))


def wait_volume_gone(c, vid, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st, data = vapi(c, "GET", "/volumes/%s" % vid)
        if st == 404:
            return
        time.sleep(0.2)
    raise AssertionError("volume %s still there after %ss: %s" % (vid, timeout, data))


def wait_snapshot(c, snap_id, timeout=120):
    deadline = time.time() + timeout
    s = None
    while time.time() < deadline:
        st, data = vapi(c, "GET", "/snapshots/%s" % snap_id)
        assert st == 200, (st, data)
        s = data["snapshot"]
        if s["status"] in ("available", "error"):
            assert s["status"] == "available", s
            return s
        time.sleep(0.2)
    raise AssertionError("snapshot %s not available after %ss: %s" % (snap_id, timeout, s))


def image_volume(c, name, size=1):
    """`openstack volume create --image cirros --size N`, waited for."""
    v = c.cli("volume", "create", "--image", "cirros", "--size", str(size), name, "-f", "json")
    v = wait_volume(c, v["id"])
    assert v["status"] == "available", v
    assert v["bootable"] == "true", v
    return v


def server(c, sid):
    st, data = api(c, "GET", "/servers/%s" % sid)
    assert st == 200, (st, data)
    return data["server"]


def attached_ids(c, sid):
    return [a["id"] for a in server(c, sid)["os-extended-volumes:volumes_attached"]]


def create(c, cleanup, name, *args, wait=True):
    """`openstack server create` with a config drive (the guest finds it at
    once instead of waiting 10 s for it), registered for cleanup."""
    s = c.cli("server", "create", "--flavor", "m1.tiny", "--config-drive", "true", *args, name,
              "-f", "json")
    cleanup.append((c, s["id"]))
    if wait:
        s = wait_status(c, s["id"], timeout=180)
        assert s["status"] == "ACTIVE", s.get("fault")
    return s


def domblklist(sid):
    """{target: source} of the domain's disks."""
    out = virsh("domblklist", sid).stdout
    return {l.split()[0]: l.split(None, 1)[1].strip() for l in out.splitlines() if l.strip()}


def bdm_rows(c, sid, live=True):
    return c.sql("SELECT * FROM block_device_mapping WHERE instance_uuid = '%s'%s ORDER BY id"
                 % (sid, " AND deleted = 0" if live else ""))


def bdm_format(c, sid):
    """The runbook's query, verbatim, through the sqlite3 CLI."""
    out = subprocess.run(["sqlite3", c.db_path,
                          "SELECT JSON_EXTRACT(connection_info, '$.data.format') FROM "
                          "block_device_mapping WHERE instance_uuid = '%s' AND deleted = 0;" % sid],
                         check=True, capture_output=True, text=True).stdout
    return out.split()


def assert_private(path):
    """A volume file is as private as Cinder's NFS driver makes it (660):
    its owner and QEMU's group, no other local user. (While a guest runs,
    libvirt has lent the file to QEMU's user; the mode stays.)"""
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o660, (path, oct(st.st_mode))
    try:
        assert st.st_gid == grp.getgrnam("libvirt-qemu").gr_gid, (path, st.st_gid)
    except KeyError:
        pass


def check_volume_backed(c, sid, vid, fmt="raw", size=1, image=None):
    """A booted volume-backed server as the runbook inspects it: the guest's
    heartbeat, the volume in-use and attached to it as vda, the domain's disk
    the volume file on the share, and that file's format and size. image:
    the image the server was asked for (Nova shows it even when its mapping
    made the root disk a volume), else none ("")."""
    wait_console(c, sid, r"HB 3 ")
    s = server(c, sid)
    if image:
        assert s["image"]["id"] == image, s["image"]
    else:
        assert s["image"] == "", s["image"]  # Nova: booted from volume
    assert vid in attached_ids(c, sid)
    shown = c.cli("server", "show", sid, "-f", "json")
    assert vid in json.dumps(shown["volumes_attached"]), shown["volumes_attached"]
    v = volume(c, vid)
    assert v["status"] == "in-use", v
    assert [(a["server_id"], a["device"]) for a in v["attachments"]] == [(sid, "/dev/vda")], v
    f = volume_file(c, vid)
    assert_private(f)
    disks = domblklist(sid)
    assert disks.get("vda") == f, (disks, f)
    i = qemu_info(f)
    assert i["format"] == fmt and i["virtual-size"] == size * GIB, i
    rows = [r for r in bdm_rows(c, sid) if r["boot_index"] == 0]
    assert len(rows) == 1 and rows[0]["volume_id"] == vid, rows
    assert rows[0]["destination_type"] == "volume"
    ci = json.loads(rows[0]["connection_info"])
    assert ci["driver_volume_type"] == "nfs" and ci["data"]["name"] == "volume-%s" % vid, ci
    assert ci["data"]["format"] == fmt, ci
    return v


def events_of(c, sid):
    """{request_id: (action, [event names])} of the server's actions."""
    st, data = api(c, "GET", "/servers/%s/os-instance-actions" % sid)
    assert st == 200, (st, data)
    out = {}
    for a in data["instanceActions"]:
        st, one = api(c, "GET", "/servers/%s/os-instance-actions/%s" % (sid, a["request_id"]))
        assert st == 200, (st, one)
        out[a["request_id"]] = (a["action"],
                                [e["event"] for e in one["instanceAction"].get("events") or []])
    return out


def newest_fault(c, sid):
    rows = c.sql("SELECT code, message, details FROM instance_faults WHERE instance_uuid = '%s' "
                 "ORDER BY id DESC LIMIT 1" % sid)
    return rows[0] if rows else None


def stop(c, sid):
    c.cli("server", "stop", sid)
    s = wait_status(c, sid, statuses=("SHUTOFF", "ERROR"), timeout=90)
    assert s["status"] == "SHUTOFF", s


def convert_to_raw_behind_nubos_back(path):
    """The runbook's storage-side change: qemu-img convert -O raw, then the
    raw file moved over the original, keeping owner and mode."""
    tmp = path + ".raw"
    subprocess.run(["qemu-img", "convert", "-O", "raw", path, tmp], check=True)
    subprocess.run(["chown", "--reference=" + path, tmp], check=True)
    subprocess.run(["chmod", "--reference=" + path, tmp], check=True)
    os.rename(tmp, path)
    assert qemu_info(path)["format"] == "raw"


# -- the five boot methods -----------------------------------------------

def test_boot_from_existing_volume_and_delete_keeps_it(bfv, cleanup):
    """`server create --volume V`; V is not deleted on termination: after the
    delete, V is available with its file, and only the mapping rows are gone."""
    c = bfv
    v = image_volume(c, unique("bfv-vol"))
    sid = create(c, cleanup, unique("bfv-volume"), "--volume", v["id"])["id"]
    check_volume_backed(c, sid, v["id"])
    rows = bdm_rows(c, sid)
    assert [r["delete_on_termination"] for r in rows if r["volume_id"] == v["id"]] == [0]
    before = share_files(c)
    c.cli("server", "delete", "--wait", sid)
    assert wait_volume(c, v["id"], timeout=60)["status"] == "available"
    assert volume(c, v["id"])["attachments"] == []
    assert share_files(c) == before
    assert any(x["ID"] == v["id"] and x["Status"] == "available"
               for x in c.cli("volume", "list", "-f", "json"))
    rows = bdm_rows(c, sid, live=False)
    assert rows and all(r["deleted"] != 0 for r in rows), rows


def test_boot_from_block_device_image_to_volume_deletes_on_termination(bfv, cleanup):
    """--block-device source_type=image,destination_type=volume,…,
    delete_on_termination=true: the volume is created from the image, and it
    and its file are gone with the server.

    OSC 6.0 cannot send this mapping alone (its --image/--volume/--snapshot
    group is required, and with --image novaclient adds a second boot_index 0
    mapping that Nova rejects), so the request is the body OSC builds from
    the --block-device string: values as parsed (volume_size a string,
    boot_index an int, delete_on_termination a bool) and imageRef ""."""
    c = bfv
    name = unique("bfv-bdm")
    st, data = api(c, "POST", "/servers", {"server": {
        "name": name, "imageRef": "", "flavorRef": "1", "config_drive": True,
        "block_device_mapping_v2": [{
            "source_type": "image", "uuid": c.image_id, "destination_type": "volume",
            "volume_size": "1", "boot_index": 0, "delete_on_termination": True}]}})
    assert st == 202, (st, data)
    sid = data["server"]["id"]
    cleanup.append((c, sid))
    s = wait_status(c, sid, timeout=180)
    assert s["status"] == "ACTIVE", s.get("fault")
    vids = attached_ids(c, sid)
    assert len(vids) == 1, vids
    vid = vids[0]
    v = check_volume_backed(c, sid, vid)
    assert v["volume_image_metadata"]["image_id"] == c.image_id, v
    rows = bdm_rows(c, sid)
    assert [(r["source_type"], r["image_id"], r["delete_on_termination"]) for r in rows] == \
        [("image", c.image_id, 1)], rows
    f = volume_file(c, vid)
    before = share_files(c)
    c.cli("server", "delete", "--wait", sid)
    wait_volume_gone(c, vid)
    assert share_files(c) == before - {f}
    assert not any(x["ID"] == vid for x in c.cli("volume", "list", "-f", "json"))
    rows = bdm_rows(c, sid, live=False)
    assert rows and all(r["deleted"] != 0 for r in rows), rows
    assert c.sql("SELECT deleted FROM volumes WHERE id = '%s'" % vid)[0]["deleted"] != 0


def test_boot_from_volume_snapshot(bfv, cleanup):
    """`server create --snapshot S`: a new volume made from the snapshot
    boots; the snapshot's volume is untouched."""
    c = bfv
    v2 = image_volume(c, unique("bfv-src"))
    snap = c.cli("volume", "snapshot", "create", "--volume", v2["id"], unique("bfv-snap"),
                 "-f", "json")
    wait_snapshot(c, snap["id"])
    sid = create(c, cleanup, unique("bfv-fromsnap"), "--snapshot", snap["id"])["id"]
    vids = attached_ids(c, sid)
    assert len(vids) == 1 and vids[0] != v2["id"], vids
    v = check_volume_backed(c, sid, vids[0])
    assert v["snapshot_id"] == snap["id"], v
    assert volume(c, v2["id"])["status"] == "available"
    rows = bdm_rows(c, sid)
    assert [(r["source_type"], r["snapshot_id"]) for r in rows] == [("snapshot", snap["id"])]
    # OSC asks for delete_on_termination false: the new volume stays
    c.cli("server", "delete", "--wait", sid)
    assert wait_volume(c, vids[0], timeout=60)["status"] == "available"
    assert os.path.exists(volume_file(c, vids[0]))


def test_boot_from_volume_option_then_its_snapshot_image_boots(bfv, cleanup):
    """`--image cirros --boot-from-volume 1`, then `server image create` of
    that volume-backed server: a volume snapshot and an image carrying a
    block_device_mapping property, from which `server create --image` boots
    a new server on a new volume."""
    c = bfv
    sid = create(c, cleanup, unique("bfv-bfv"), "--image", "cirros", "--boot-from-volume",
                 "1")["id"]
    vids = attached_ids(c, sid)
    assert len(vids) == 1, vids
    check_volume_backed(c, sid, vids[0])
    rows = bdm_rows(c, sid)
    assert [(r["source_type"], r["delete_on_termination"]) for r in rows] == [("image", 0)], rows

    img = c.cli("server", "image", "create", "--name", unique("bfv-img"), "--wait", sid,
                "-f", "json")
    img = c.cli("image", "show", img["id"], "-f", "json")
    assert img["status"] == "active", img
    props = img["properties"]
    mapping = props["block_device_mapping"]
    mapping = json.loads(mapping) if isinstance(mapping, str) else mapping
    roots = [m for m in mapping if m.get("boot_index") == 0]
    assert len(roots) == 1 and roots[0]["source_type"] == "snapshot", mapping
    snap_id = roots[0]["snapshot_id"]
    snap = wait_snapshot(c, snap_id)
    assert snap["volume_id"] == vids[0], snap

    sid2 = create(c, cleanup, unique("bfv-fromimg"), "--image", img["id"])["id"]
    vids2 = attached_ids(c, sid2)
    assert len(vids2) == 1 and vids2[0] != vids[0], vids2
    v = check_volume_backed(c, sid2, vids2[0], image=img["id"])
    assert v["snapshot_id"] == snap_id, v
    text = console(c, sid2)
    assert "GUEST-BOOTED" in text


# -- attach and detach, and the refusals around them ---------------------

def last_block_devices(text):
    lines = re.findall(r"^BLOCK-DEVICES(.*?)\r?$", text, re.M)
    return lines[-1].split() if lines else None


def wait_block_devices(c, sid, pred, timeout=60):
    deadline = time.time() + timeout
    text = ""
    while time.time() < deadline:
        text = console(c, sid)
        devs = last_block_devices(text)
        if devs is not None and pred(devs):
            return devs
        time.sleep(0.2)
    raise AssertionError("block devices of %s never matched after %ss:\n%s"
                         % (sid, timeout, "\n".join(re.findall(r"BLOCK-DEVICES.*", text))))


def test_attach_detach_running_guest(bfv, cleanup):
    c = bfv
    sid = create(c, cleanup, unique("bfv-attach"), "--image", "cirros")["id"]
    wait_console(c, sid, r"HB 3 ")
    first = wait_block_devices(c, sid, lambda d: "vda" in d)
    assert "vdb" not in first, first

    # a volume of another project: the demo user cannot attach its volume
    # to the admin's server (404, the server is not theirs)
    dv = c.cli("volume", "create", "--size", "1", unique("bfv-demo"), "-f", "json",
               cloud="nubo-demo")
    demo_token = login(c, "nubo-demo")[0]
    st, _, body = c.request("POST", "/compute/v2.1/servers/%s/os-volume_attachments" % sid,
                            {"volumeAttachment": {"volumeId": dv["id"]}}, token=demo_token)
    assert st == 404, (st, body)
    assert body["itemNotFound"]["message"] == "Instance %s could not be found." % sid, body
    assert c.sql("SELECT status FROM volumes WHERE id = '%s'" % dv["id"])[0]["status"] == \
        "available"
    p = c.cli("server", "add", "volume", sid, dv["id"], cloud="nubo-demo", check=False)
    assert p.returncode != 0
    assert bdm_rows(c, sid) and all(r["volume_id"] != dv["id"] for r in bdm_rows(c, sid))

    v = c.cli("volume", "create", "--size", "1", unique("bfv-data"), "-f", "json")
    assert wait_volume(c, v["id"])["status"] == "available"
    assert_private(volume_file(c, v["id"]))
    assert os.stat(volume_file(c, v["id"])).st_uid == 0  # the volume service's
    c.cli("server", "add", "volume", sid, v["id"])
    v = wait_volume(c, v["id"], statuses=("in-use", "available", "error"), timeout=60)
    assert v["status"] == "in-use", v
    devs = wait_block_devices(c, sid, lambda d: "vdb" in d)
    assert set(devs) == set(first) | {"vdb"}, (first, devs)
    assert [(a["server_id"], a["device"]) for a in v["attachments"]] == [(sid, "/dev/vdb")]
    assert v["id"] in attached_ids(c, sid)
    shown = c.cli("server", "show", sid, "-f", "json")
    assert v["id"] in json.dumps(shown["volumes_attached"])
    f = volume_file(c, v["id"])
    assert domblklist(sid).get("vdb") == f
    listed = c.cli("server", "volume", "list", sid, "-f", "json")
    assert [(x["Volume ID"], x["Device"]) for x in listed] == [(v["id"], "/dev/vdb")], listed

    # an in-use volume cannot be deleted: 400, nothing changes
    p = c.cli("volume", "delete", v["id"], check=False)
    assert p.returncode != 0
    st, body = vapi(c, "DELETE", "/volumes/%s" % v["id"])
    assert st == 400 and "Invalid volume" in body["badRequest"]["message"], (st, body)
    assert volume(c, v["id"])["status"] == "in-use" and os.path.exists(f)

    c.cli("server", "remove", "volume", sid, v["id"])
    v = wait_volume(c, v["id"], statuses=("available", "error", "in-use"), timeout=60)
    if v["status"] == "in-use":  # the detach is asynchronous
        v = wait_volume(c, v["id"], timeout=60)
    assert v["status"] == "available" and v["attachments"] == [], v
    devs = wait_block_devices(c, sid, lambda d: "vdb" not in d)
    assert set(devs) == set(first), (first, devs)
    assert v["id"] not in attached_ids(c, sid)
    assert "vdb" not in domblklist(sid)
    assert_private(f)  # libvirt gave it back as it found it
    rows = [r for r in bdm_rows(c, sid, live=False) if r["volume_id"] == v["id"]]
    assert rows and all(r["deleted"] != 0 for r in rows), rows
    # the guest went on: the same boot, still beating
    n = len(re.findall(r"HB \d+ ", console(c, sid)))
    wait_console(c, sid, r"HB \d+ ", count=n + 3)
    assert console(c, sid).count("GUEST-BOOTED") == 1


# -- snapshot of an image-backed server ----------------------------------

def test_image_backed_snapshot_is_qcow2_and_boots(bfv, cleanup, tmp_path):
    c = bfv
    sid = create(c, cleanup, unique("bfv-imgsnap"), "--image", "cirros")["id"]
    wait_console(c, sid, r"HB 3 ")
    name = unique("bfv-snapimg")
    img = c.cli("server", "image", "create", "--name", name, "--wait", sid, "-f", "json")
    img = c.cli("image", "show", img["id"], "-f", "json")
    assert img["status"] == "active" and img["disk_format"] == "qcow2", img
    props = img.get("properties") or {}
    assert props.get("image_type") == "snapshot" and props.get("instance_uuid") == sid, props
    out = os.path.join(str(tmp_path), "snap.qcow2")
    c.cli("image", "save", "--file", out, img["id"])
    i = qemu_info(out)
    assert i["format"] == "qcow2" and "backing-filename" not in i, i
    assert i["virtual-size"] == GIB, i  # the flavor's root disk
    assert server(c, sid)["status"] == "ACTIVE"
    sid2 = create(c, cleanup, unique("bfv-fromsnapimg"), "--image", img["id"])["id"]
    wait_console(c, sid2, r"HB 3 ")
    assert server(c, sid2)["image"]["id"] == img["id"]


# -- bad input ----------------------------------------------------------

def test_volume_over_quota_or_free_space_leaves_no_file(bfv):
    c = bfv
    c.cli("quota", "set", "--volumes", "5", "--gigabytes", "2", "demo")
    before = share_files(c, "*")
    name = unique("bfv-big")
    p = c.cli("volume", "create", "--size", "3", name, cloud="nubo-demo", check=False)
    assert p.returncode != 0
    assert re.search(r"Requested volume or snapshot exceeds allowed gigabytes quota\. Requested "
                     r"3G, quota is 2G and \d+G has been consumed\. \(HTTP 413\)", p.stderr), \
        p.stderr
    assert not c.sql("SELECT id FROM volumes WHERE display_name = '%s' AND deleted = 0" % name)
    assert share_files(c, "*") == before

    # more than the share can hold: refused, or an error volume with a user
    # message; never a (sparse) file. Sparse volumes (nfs_sparsed_volumes,
    # default true) may provision a share up to max_over_subscription_ratio
    # (default 20) times its size, as Cinder's NFS driver: ask for more.
    c.cli("quota", "set", "--gigabytes", "-1", "demo")
    share = os.path.realpath(sorted(glob.glob(os.path.join(c.state_dir, "mnt", "*")))[0])
    sv = os.statvfs(share)
    size = sv.f_blocks * sv.f_frsize * 20 // GIB + 10
    name = unique("bfv-huge")
    p = c.cli("volume", "create", "--size", str(size), name, "-f", "json", cloud="nubo-demo",
              check=False)
    if p.returncode != 0:
        assert re.search(r"\(HTTP 4\d\d\)", p.stderr), p.stderr
    else:
        vid = json.loads(p.stdout)["id"]
        v = wait_volume(c, vid)
        assert v["status"] == "error", v
        # Cinder's user message says why (GET /messages, volume 3.3+)
        st, body = vapi(c, "GET", "/messages", cloud="nubo-demo", version="3.3")
        assert st == 200, (st, body)
        assert [m for m in body["messages"] if m["resource_uuid"] == vid and m["user_message"]], \
            body
    assert share_files(c, "*") == before


def test_vanished_volume_file_fails_start_and_changes_nothing(bfv, cleanup):
    c = bfv
    v = image_volume(c, unique("bfv-gone"))
    sid = create(c, cleanup, unique("bfv-vanish"), "--volume", v["id"])["id"]
    wait_console(c, sid, r"HB 3 ")
    stop(c, sid)
    f = volume_file(c, v["id"])
    vol_row = c.sql("SELECT * FROM volumes WHERE id = '%s'" % v["id"])
    bdms = bdm_rows(c, sid)
    away = os.path.join(c.state_dir, "moved-away-%s" % v["id"])
    os.rename(f, away)
    try:
        n = starts(c, sid)
        c.cli("server", "start", sid)
        s = wait_status(c, sid, statuses=("SHUTOFF", "ERROR", "ACTIVE"), timeout=90)
        assert s["status"] == "SHUTOFF", s  # Nova: a failed start leaves it stopped
        fault = newest_fault(c, sid)
        assert fault and f in (fault["message"] or "") + (fault["details"] or ""), fault
        assert not booted_since(console(c, sid), n)  # it never started
        assert c.sql("SELECT * FROM volumes WHERE id = '%s'" % v["id"]) == vol_row
        assert bdm_rows(c, sid) == bdms
        assert not os.path.exists(f)
        actions = [a for a in c.cli("server", "event", "list", sid, "-f", "json")
                   if a["Action"] == "start"]
        assert actions, "no start action"
    finally:
        os.rename(away, f)
    # the file is back: the server starts
    c.cli("server", "start", sid)
    assert wait_status(c, sid, timeout=90)["status"] == "ACTIVE"
    wait_new_boot(c, sid, n)


# -- the runbook ---------------------------------------------------------

def doctor(c, sid, *args):
    return subprocess.run([NUBO_BIN, "doctor", "server", sid, "--config",
                           os.path.join(c.state_dir, "nubo.conf")] + list(args),
                          capture_output=True, text=True, timeout=300)


def all_logs(c):
    text = ""
    for p in glob.glob(os.path.join(c.state_dir, "log", "*.log")):
        with open(p, errors="replace") as fh:
            text += fh.read()
    return text


def test_runbook_qcow2_volume_converted_to_raw():
    """A qcow2 boot volume converted to raw on the storage behind nubo's
    back. Reconciled by the agent by default; with reconcile_disk_format =
    false the start fails as in the runbook, and `nubo doctor server --fix`
    applies the runbook's workaround."""
    c = start_bfv_cloud("bfv-runbook", "--set", "volume.volume_format=qcow2",
                        "--set", "DEFAULT.allow_resize_to_same_host=true")
    made = []
    try:
        # 1. reconciled: the start succeeds and the mapping says raw
        v = image_volume(c, unique("rb-vol"))
        sid = create(c, made, unique("rb-server"), "--volume", v["id"])["id"]
        check_volume_backed(c, sid, v["id"], fmt="qcow2")
        assert bdm_format(c, sid) == ["qcow2"]
        stop(c, sid)
        f = volume_file(c, v["id"])
        convert_to_raw_behind_nubos_back(f)
        n = starts(c, sid)
        c.cli("server", "start", sid)
        s = wait_status(c, sid, timeout=120)
        assert s["status"] == "ACTIVE", s.get("fault")
        assert s["OS-EXT-STS:power_state"] == 1
        wait_new_boot(c, sid, n)
        assert bdm_format(c, sid) == ["raw"]
        assert c.sql("SELECT value FROM volume_admin_metadata WHERE volume_id = '%s' AND "
                      "key = 'format' AND deleted = 0" % v["id"]) == [{"value": "raw"}]
        events = events_of(c, sid)
        reconciled = [(req, a) for req, (a, ev) in events.items()
                      if "reconcile_disk_format" in ev]
        assert len(reconciled) == 1 and reconciled[0][1] == "start", events
        listed = c.cli("server", "event", "list", sid, "-f", "json")
        assert (reconciled[0][0], "start") in [(x["Request ID"], x["Action"]) for x in listed]
        warn = [l for l in all_logs(c).splitlines()
                if "WARNING" in l and v["id"] in l and "qcow2" in l and "raw" in l]
        assert warn and sid in warn[0], warn
        fault = newest_fault(c, sid) or {}
        assert "Image is not in qcow2 format" not in (fault.get("message") or "")

        # 1b. seed 000's cause: the file changes format around a move. A
        # same-host resize goes through finish_resize, whose check on the
        # destination reconciles before the guest is defined there; the
        # destination's next start boots the raw file as raw.
        v3 = image_volume(c, unique("rb-vol3"))
        sid3 = create(c, made, unique("rb-server3"), "--volume", v3["id"])["id"]
        wait_console(c, sid3, r"HB 2 ")
        assert bdm_format(c, sid3) == ["qcow2"]
        stop(c, sid3)
        convert_to_raw_behind_nubos_back(volume_file(c, v3["id"]))
        c.cli("--os-compute-api-version", "2.80", "server", "resize", "--flavor", "m1.small",
              "--wait", sid3, timeout=180)
        s = wait_status(c, sid3, statuses=("VERIFY_RESIZE", "ERROR", "SHUTOFF"), timeout=120)
        assert s["status"] == "VERIFY_RESIZE", s.get("fault")
        assert bdm_format(c, sid3) == ["raw"]
        assert c.sql("SELECT value FROM volume_admin_metadata WHERE volume_id = '%s' AND "
                      "key = 'format' AND deleted = 0" % v3["id"]) == [{"value": "raw"}]
        reconciled = [a for a, ev in events_of(c, sid3).values() if "reconcile_disk_format" in ev]
        assert reconciled == ["resize"], events_of(c, sid3)
        warn = [l for l in all_logs(c).splitlines()
                if "WARNING" in l and v3["id"] in l and "qcow2" in l and "raw" in l]
        assert warn and sid3 in warn[0], warn
        c.cli("--os-compute-api-version", "2.80", "server", "resize", "confirm", sid3)
        assert wait_status(c, sid3, statuses=("SHUTOFF", "ERROR"))["status"] == "SHUTOFF"
        n = starts(c, sid3)
        c.cli("server", "start", sid3)
        s = wait_status(c, sid3, timeout=120)
        assert s["status"] == "ACTIVE" and s["flavor"]["id"] == "2", s
        wait_new_boot(c, sid3, n)
        dom = __import__("xml.etree.ElementTree").etree.ElementTree.fromstring(
            virsh("dumpxml", sid3).stdout)
        vda = [d for d in dom.iter("disk") if d.find("target").get("dev") == "vda"]
        assert [d.find("driver").get("type") for d in vda] == ["raw"]
        v = volume(c, v3["id"])
        assert [(a["server_id"], a["device"]) for a in v["attachments"]] == [(sid3, "/dev/vda")]
        api(c, "DELETE", "/servers/%s" % sid3)  # its TCG guest off the CPU for step 2

        # 2. not reconciled: the runbook's failure, then the doctor
        assert c.stop(timeout=60) == 0
        c.extra_args += ["--set", "compute.reconcile_disk_format=false"]
        c.start(timeout=60)
        forget(c)
        v2 = image_volume(c, unique("rb-vol2"))
        sid2 = create(c, made, unique("rb-server2"), "--volume", v2["id"])["id"]
        check_volume_backed(c, sid2, v2["id"], fmt="qcow2")
        stop(c, sid2)
        f2 = volume_file(c, v2["id"])
        convert_to_raw_behind_nubos_back(f2)
        c.cli("server", "start", sid2)
        s = wait_status(c, sid2, statuses=("SHUTOFF", "ERROR", "ACTIVE"), timeout=120)
        assert s["status"] in ("SHUTOFF", "ERROR"), s
        fault = newest_fault(c, sid2)
        assert fault and "Image is not in qcow2 format" in (fault["message"] or "") + \
            (fault["details"] or ""), fault
        if s["status"] == "ERROR":
            assert "Image is not in qcow2 format" in json.dumps(s["fault"]), s["fault"]
        assert bdm_format(c, sid2) == ["qcow2"]  # nothing corrected
        assert not any("reconcile_disk_format" in ev for _, ev in events_of(c, sid2).values())

        d = doctor(c, sid2)
        assert d.returncode == 1, (d.returncode, d.stdout, d.stderr)
        assert v2["id"] in d.stdout, d.stdout
        assert any("qcow2" in l and "raw" in l for l in d.stdout.splitlines()), d.stdout
        assert bdm_format(c, sid2) == ["qcow2"]  # diagnosis only

        n = starts(c, sid2)
        d = doctor(c, sid2, "--fix")
        assert d.returncode == 2, (d.returncode, d.stdout, d.stderr)
        s = wait_status(c, sid2, timeout=60)
        assert s["status"] == "ACTIVE" and s["OS-EXT-STS:power_state"] == 1, s
        wait_new_boot(c, sid2, n)
        assert bdm_format(c, sid2) == ["raw"]
        fixes = c.sql("SELECT old_connection_info, new_connection_info, outcome FROM "
                      "doctor_fixes WHERE instance_uuid = '%s'" % sid2)
        assert len(fixes) == 1 and fixes[0]["outcome"] == "fixed", fixes
        assert json.loads(fixes[0]["old_connection_info"])["data"]["format"] == "qcow2"
        assert json.loads(fixes[0]["new_connection_info"])["data"]["format"] == "raw"
        # the fixed server is healthy: the doctor finds nothing now
        d = doctor(c, sid2)
        assert d.returncode == 0, (d.returncode, d.stdout, d.stderr)
    finally:
        assert stop_cloud(c) == 0

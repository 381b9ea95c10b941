"""Block storage (Cinder v3 subset) through the real `openstack volume` CLI:
create blank / from image / from snapshot / from another volume, list, show,
set (name, properties, bootable, size), snapshots, delete, the refusals with
Cinder's messages, quotas and limits, and the files on the share an operator
inspects with `ls` and `qemu-img info`."""
import glob
import json
import os
import subprocess

from conftest import unique


def qemu_img(*args):
    return subprocess.run(["qemu-img"] + [str(a) for a in args], check=True,
                          capture_output=True, text=True).stdout


def qemu_io(fmt, cmd, path):
    return subprocess.run(["qemu-io", "-f", fmt, "-c", cmd, path], check=True,
                          capture_output=True, text=True).stdout


def volume_files(cloud, volume_id):
    """The share files of a volume, as the runbook finds them."""
    return sorted(glob.glob(os.path.join(cloud.state_dir, "mnt", "*",
                                         "volume-%s*" % volume_id)))


def info(path):
    return json.loads(qemu_img("info", "-U", "--output=json", path))


def create(cloud, *args, cloud_name="nubo"):
    return cloud.cli("volume", "create", *args, "-f", "json", cloud=cloud_name)


def test_blank_volume_lifecycle(cloud):
    name = unique("vol")
    v = create(cloud, "--size", "1", name)
    assert v["status"] == "available"
    assert v["size"] == 1 and v["bootable"] == "false"
    # the row went through creating and is in the database as Cinder's
    row = cloud.sql("SELECT status, attach_status, size, display_name, provider_location, "
                    "deleted FROM volumes WHERE id = '%s'" % v["id"])[0]
    assert row == {"status": "available", "attach_status": "detached", "size": 1,
                   "display_name": name, "provider_location": row["provider_location"],
                   "deleted": 0}
    # the file: <state>/mnt/<md5 of share>/volume-<uuid>, raw, 1 GiB
    files = volume_files(cloud, v["id"])
    assert [os.path.basename(f) for f in files] == ["volume-%s" % v["id"]]
    import hashlib
    share = row["provider_location"]
    assert os.path.basename(os.path.dirname(files[0])) == hashlib.md5(share.encode()).hexdigest()
    i = info(files[0])
    assert i["format"] == "raw" and i["virtual-size"] == 1 << 30

    listed = cloud.cli("volume", "list", "-f", "json")
    assert any(x["ID"] == v["id"] and x["Status"] == "available" for x in listed)

    new = unique("renamed")
    cloud.cli("volume", "set", "--name", new, "--property", "tier=gold", "--bootable",
              "--description", "for the runbook", v["id"])
    s = cloud.cli("volume", "show", new, "-f", "json")
    assert s["name"] == new and s["description"] == "for the runbook"
    assert s["properties"] == {"tier": "gold"}
    assert s["bootable"] == "true"
    cloud.cli("volume", "unset", "--property", "tier", new)
    assert cloud.cli("volume", "show", new, "-f", "json")["properties"] == {}
    cloud.cli("volume", "set", "--non-bootable", new)
    assert cloud.cli("volume", "show", new, "-f", "json")["bootable"] == "false"

    # extend: os-extend through qemu-img resize
    cloud.cli("volume", "set", "--size", "2", new)
    s = cloud.cli("volume", "show", new, "-f", "json")
    assert s["size"] == 2 and s["status"] == "available"
    assert info(files[0])["virtual-size"] == 2 << 30
    # (OSC refuses a shrink itself; the API's answer is Cinder's)
    proj = cloud.sql("SELECT project_id FROM volumes WHERE id = '%s'" % v["id"])[0]["project_id"]
    st, _, body = cloud.request("POST", "/volume/v3/%s/volumes/%s/action" % (proj, v["id"]),
                                {"os-extend": {"new_size": 1}}, token=cloud.token())
    assert st == 400 and body["badRequest"]["message"] == (
        "Invalid input received: New size for extend must be greater than current size. "
        "(current: 2, extended: 1).")

    cloud.cli("volume", "delete", new)
    assert volume_files(cloud, v["id"]) == []
    assert cloud.sql("SELECT status, deleted FROM volumes WHERE id = '%s'" % v["id"]) == \
        [{"status": "deleted", "deleted": 1}]
    r = cloud.cli("volume", "show", v["id"], check=False)
    assert r.returncode != 0 and "No volume with a name or ID of" in r.stderr


def test_volume_from_image(cloud, tmp_path):
    src = tmp_path / "disk.qcow2"
    qemu_img("create", "-f", "qcow2", src, "64M")
    qemu_io("qcow2", "write -P 0x5a 0 1M", str(src))
    image = unique("img")
    cloud.cli("image", "create", "--disk-format", "qcow2", "--container-format", "bare",
              "--file", src, image)
    v = create(cloud, "--image", image, "--size", "1", unique("fromimg"))
    assert v["status"] == "available"
    assert v["bootable"] == "true"
    # as in Cinder, the image's metadata is an extension of show and the
    # detail list, not of create's answer
    assert "volume_image_metadata" not in v
    shown = cloud.cli("volume", "show", v["id"], "-f", "json")
    assert shown["volume_image_metadata"]["image_name"] == image
    path = volume_files(cloud, v["id"])[0]
    assert info(path)["format"] == "raw"
    assert info(path)["virtual-size"] == 1 << 30
    # the data is the image's, converted
    out = qemu_io("raw", "read -P 0x5a 0 1M", path)
    assert "read 1048576/1048576" in out
    # an image bigger than the volume is refused as Cinder does
    big = tmp_path / "big.qcow2"
    qemu_img("create", "-f", "qcow2", big, "3G")
    image2 = unique("bigimg")
    cloud.cli("image", "create", "--disk-format", "qcow2", "--container-format", "bare",
              "--file", big, image2)
    r = cloud.cli("volume", "create", "--image", image2, "--size", "1", unique("x"), check=False)
    assert r.returncode != 0
    assert "Image virtual size is 3GB and doesn't fit in a volume of size 1GB." in r.stderr
    cloud.cli("volume", "delete", v["id"])


def test_snapshots_clones_and_delete_refusal(cloud):
    v = create(cloud, "--size", "1", unique("base"))
    base = volume_files(cloud, v["id"])[0]
    qemu_io("raw", "write -P 0x11 0 64k", base)

    snap = unique("snap")
    s = cloud.cli("volume", "snapshot", "create", "--volume", v["id"], snap, "-f", "json")
    assert s["status"] == "available" and s["size"] == 1
    # Cinder's NFS layout: the overlay volume-<vol>.<snap> is now the active file
    overlay = "volume-%s.%s" % (v["id"], s["id"])
    files = [os.path.basename(f) for f in volume_files(cloud, v["id"])]
    assert files == sorted(["volume-%s" % v["id"], overlay, "volume-%s.info" % v["id"]])
    active = os.path.join(os.path.dirname(base), overlay)
    i = info(active)
    assert i["format"] == "qcow2" and i["backing-filename"] == "volume-%s" % v["id"]
    with open(os.path.join(os.path.dirname(base), "volume-%s.info" % v["id"])) as f:
        assert json.load(f) == {"active": overlay, s["id"]: overlay}
    # the volume changes after the snapshot
    qemu_io("qcow2", "write -P 0x22 0 64k", active)

    listed = cloud.cli("volume", "snapshot", "list", "-f", "json")
    assert any(x["ID"] == s["id"] and x["Status"] == "available" for x in listed)
    assert cloud.cli("volume", "snapshot", "show", snap, "-f", "json")["volume_id"] == v["id"]

    # a volume with snapshots cannot be deleted (Cinder's message)
    r = cloud.cli("volume", "delete", v["id"], check=False)
    assert r.returncode != 0
    assert ("Invalid volume: Volume status must be available or error or error_restoring or "
            "error_extending or error_managing and must not be migrating, attached, belong to "
            "a group, have snapshots, awaiting a transfer, or be disassociated from snapshots "
            "after volume transfer. (HTTP 400)") in r.stderr
    st, _, body = cloud.request("DELETE", "/volume/v3/%s/volumes/%s" % (
        cloud.sql("SELECT project_id FROM volumes WHERE id = '%s'" % v["id"])[0]["project_id"],
        v["id"]), token=cloud.token())
    assert st == 400 and body["badRequest"]["code"] == 400
    assert body["badRequest"]["message"].startswith("Invalid volume: Volume status must be")

    # from the snapshot: the data as it was when the snapshot was taken
    fs = create(cloud, "--snapshot", snap, "--size", "2", unique("fromsnap"))
    assert fs["status"] == "available" and fs["size"] == 2 and fs["snapshot_id"] == s["id"]
    p = volume_files(cloud, fs["id"])[0]
    assert "read 65536/65536" in qemu_io("raw", "read -P 0x11 0 64k", p)
    assert info(p)["virtual-size"] == 2 << 30
    # from the volume: its current data
    fv = create(cloud, "--source", v["id"], unique("clone"))
    assert fv["source_volid"] == v["id"] and fv["size"] == 1
    p = volume_files(cloud, fv["id"])[0]
    assert "read 65536/65536" in qemu_io("raw", "read -P 0x22 0 64k", p)

    # deleting the snapshot merges the overlay back; the data stays current
    cloud.cli("volume", "snapshot", "delete", snap)
    assert [os.path.basename(f) for f in volume_files(cloud, v["id"])] == ["volume-%s" % v["id"]]
    assert "read 65536/65536" in qemu_io("raw", "read -P 0x22 0 64k", base)
    assert cloud.sql("SELECT status, deleted FROM snapshots WHERE id = '%s'" % s["id"]) == \
        [{"status": "deleted", "deleted": 1}]
    for vid in (v["id"], fs["id"], fv["id"]):
        cloud.cli("volume", "delete", vid)
        assert volume_files(cloud, vid) == []


def test_two_snapshots_delete_the_older_first(cloud):
    v = create(cloud, "--size", "1", unique("chain"))
    base = volume_files(cloud, v["id"])[0]
    d = os.path.dirname(base)
    qemu_io("raw", "write -P 0x01 0 4k", base)
    s1 = cloud.cli("volume", "snapshot", "create", "--volume", v["id"], unique("s1"), "-f", "json")
    qemu_io("qcow2", "write -P 0x02 0 4k", os.path.join(d, "volume-%s.%s" % (v["id"], s1["id"])))
    s2 = cloud.cli("volume", "snapshot", "create", "--volume", v["id"], unique("s2"), "-f", "json")
    top = os.path.join(d, "volume-%s.%s" % (v["id"], s2["id"]))
    qemu_io("qcow2", "write -P 0x03 0 4k", top)
    cloud.cli("volume", "snapshot", "delete", s1["id"])
    # s2 still holds the data of its time, and the top file re-points at the base
    assert info(top)["backing-filename"] == "volume-%s" % v["id"]
    c = create(cloud, "--snapshot", s2["id"], unique("c2"))
    assert "read 4096/4096" in qemu_io("raw", "read -P 0x02 0 4k", volume_files(cloud, c["id"])[0])
    assert "read 4096/4096" in qemu_io("qcow2", "read -P 0x03 0 4k", top)
    cloud.cli("volume", "snapshot", "delete", s2["id"])
    assert "read 4096/4096" in qemu_io("raw", "read -P 0x03 0 4k", base)
    cloud.cli("volume", "delete", v["id"], c["id"])


def test_quota_and_limits(fresh_cloud):
    c = fresh_cloud()
    c.cli("quota", "set", "--volumes", "2", "--gigabytes", "3", "--snapshots", "1", "admin")
    q = c.cli("quota", "show", "admin", "-f", "json")
    assert q["volumes"] == 2 and q["gigabytes"] == 3 and q["snapshots"] == 1
    v1 = create(c, "--size", "1", "q1")
    r = c.cli("volume", "create", "--size", "5", "q2", check=False)
    assert r.returncode != 0
    assert ("Requested volume or snapshot exceeds allowed gigabytes quota. Requested 5G, quota "
            "is 3G and 1G has been consumed. (HTTP 413)") in r.stderr
    create(c, "--size", "1", "q2")
    r = c.cli("volume", "create", "--size", "1", "q3", check=False)
    assert r.returncode != 0
    assert "Maximum number of volumes allowed (2) exceeded for quota 'volumes'. (HTTP 413)" \
        in r.stderr
    c.cli("volume", "snapshot", "create", "--volume", v1["id"], "qs1")
    r = c.cli("volume", "snapshot", "create", "--volume", v1["id"], "qs2", check=False)
    assert r.returncode != 0
    assert "Maximum number of snapshots allowed (1) exceeded (HTTP 413)" in r.stderr
    # the error body is Cinder's overLimit
    pid = c.sql("SELECT project_id FROM volumes WHERE id = '%s'" % v1["id"])[0]["project_id"]
    st, _, body = c.request("POST", "/volume/v3/%s/volumes" % pid,
                            {"volume": {"size": 1, "name": "q4"}}, token=c.token())
    assert st == 413 and body["overLimit"]["code"] == 413
    limits = c.cli("limits", "show", "--absolute", "-f", "json")
    got = {x["Name"]: x["Value"] for x in limits}
    assert got["maxTotalVolumes"] == 2 and got["totalVolumesUsed"] == 2
    assert got["maxTotalVolumeGigabytes"] == 3 and got["totalGigabytesUsed"] == 3
    assert got["maxTotalSnapshots"] == 1
    # a limit below what is in use is refused
    r = c.cli("quota", "set", "--volumes", "1", "admin", check=False)
    assert r.returncode != 0
    assert "Quota volumes limit must be equal or greater than existing resources. Current " \
        "usage is 2 and the requested limit is 1." in r.stderr


def test_versions_az_and_errors(cloud):
    st, h, body = cloud.request("GET", "/volume/")
    assert st == 300
    v = body["versions"][0]
    assert v["id"] == "v3.0" and v["min_version"] == "3.0" and v["version"] == "3.70"
    token = cloud.token()
    st, h, body = cloud.request("GET", "/volume/v3/", token=token,
                                headers={"OpenStack-API-Version": "volume 3.71"})
    assert st == 406 and "Minimum is 3.0 and maximum is 3.70" in body["notAcceptable"]["message"]
    azs = cloud.cli("availability", "zone", "list", "--volume", "-f", "json")
    assert azs == [{"Zone Name": "nova", "Zone Status": "available"}]
    proj = cloud.cli("token", "issue", "-f", "json")["project_id"]
    st, h, body = cloud.request("GET", "/volume/v3/%s/volumes/%s" % (proj, "f" * 32),
                                token=token, headers={"OpenStack-API-Version": "volume 3.60"})
    assert st == 404 and body == {"itemNotFound": {
        "code": 404, "message": "Volume %s could not be found." % ("f" * 32)}}
    assert h["OpenStack-API-Version"] == "volume 3.60"
    st, h, body = cloud.request("GET", "/volume/v3/%s/volumes" % ("0" * 32), token=token)
    assert st == 400 and body["badRequest"]["message"] == "Malformed request url"
    # paging with a next link
    ids = [create(cloud, "--size", "1", unique("page"))["id"] for _ in range(3)]
    st, h, body = cloud.request("GET", "/volume/v3/%s/volumes?limit=2&sort=created_at:asc" % proj,
                                token=token)
    assert st == 200 and len(body["volumes"]) == 2
    assert "marker=%s" % body["volumes"][1]["id"] in body["volumes_links"][0]["href"]
    for i in ids:
        cloud.cli("volume", "delete", i)


def test_catalog_lists_block_storage(cloud):
    types = {e["Type"] for e in cloud.cli("catalog", "list", "-f", "json")}
    assert {"block-storage", "volumev3"} <= types


def project_of(cloud):
    return cloud.cli("token", "issue", "-f", "json")["project_id"]


def test_free_space_refusal_and_messages(fresh_cloud, tmp_path):
    """A volume larger than the share can provision (Cinder's NFS driver with
    nfs_sparsed_volumes: free capacity x max_over_subscription_ratio 20.0) is
    accepted, ends in error with no file, and leaves Cinder's user message."""
    share = tmp_path / "share"
    c = fresh_cloud("--set", "volume.shares=%s" % share)
    c.cli("quota", "set", "--gigabytes", "-1", "admin")
    st = os.statvfs(str(share))
    total_gib = st.f_blocks * st.f_frsize / (1 << 30)
    huge = int(total_gib * 20) + 100
    v = create(c, "--size", str(huge), unique("huge"))
    assert v["status"] == "error"
    assert os.listdir(str(share)) == []
    assert c.sql("SELECT status, provider_location FROM volumes WHERE id = '%s'" % v["id"]) == \
        [{"status": "error", "provider_location": None}]
    logs = "".join(open(f).read() for f in glob.glob(os.path.join(c.state_dir, "log", "*.log")))
    assert "a volume of %d GiB was requested" % huge in logs

    msgs = c.cli("volume", "message", "list", "--os-volume-api-version", "3.3", "-f", "json")
    mine = [m for m in msgs if m["Resource UUID"] == v["id"]]
    assert len(mine) == 1, msgs
    assert mine[0]["User Message"] == (
        "schedule allocate volume:Could not find any available weighted backend.")
    assert mine[0]["Event ID"] == "VOLUME_VOLUME_001_003"
    assert mine[0]["Message Level"] == "ERROR" and mine[0]["Resource Type"] == "VOLUME"
    # the API's fields, Cinder's view
    proj = project_of(c)
    tok = c.token()
    h = {"OpenStack-API-Version": "volume 3.3"}
    st_, _, body = c.request("GET", "/volume/v3/%s/messages" % proj, token=tok, headers=h)
    assert st_ == 200
    m = [x for x in body["messages"] if x.get("resource_uuid") == v["id"]][0]
    assert set(m) == {"id", "event_id", "user_message", "message_level", "resource_type",
                      "resource_uuid", "created_at", "guaranteed_until", "request_id", "links"}
    assert m["request_id"].startswith("req-") and m["guaranteed_until"] > m["created_at"]
    st_, _, one = c.request("GET", "/volume/v3/%s/messages/%s" % (proj, m["id"]), token=tok,
                            headers=h)
    assert st_ == 200 and one["message"] == m
    # before 3.3 there is no such API
    st_, _, body = c.request("GET", "/volume/v3/%s/messages" % proj, token=tok)
    assert st_ == 404
    # a volume that fits is made on the same share
    small = create(c, "--size", "1", unique("fits"))
    assert small["status"] == "available"
    assert os.listdir(str(share)) == ["volume-%s" % small["id"]]
    c.cli("volume", "message", "delete", "--os-volume-api-version", "3.3", m["id"])
    st_, _, body = c.request("GET", "/volume/v3/%s/messages/%s" % (proj, m["id"]), token=tok,
                             headers=h)
    assert st_ == 404 and body["itemNotFound"]["message"] == \
        "Message %s could not be found." % m["id"]
    c.cli("volume", "delete", v["id"], small["id"])
    assert os.listdir(str(share)) == []


def test_attachments_api(cloud):
    """Cinder's attachments read API (3.27): empty list, then a record."""
    out = cloud.cli("volume", "attachment", "list", "--os-volume-api-version", "3.27",
                    "-f", "json")
    assert out == [] or all(a["Volume ID"] for a in out)
    before = {a["ID"] for a in out}
    v = create(cloud, "--size", "1", unique("att"))
    # the record nb_volume_attach writes (the compute side makes it)
    aid = str(__import__("uuid").uuid4())
    server = str(__import__("uuid").uuid4())
    info = json.dumps({"driver_volume_type": "nfs", "data": {"name": "volume-%s" % v["id"]}})
    cloud.sql("INSERT INTO volume_attachment (id, volume_id, instance_uuid, attached_host, "
              "mountpoint, attach_time, attach_mode, attach_status, connection_info, "
              "created_at, deleted) VALUES ('%s', '%s', '%s', 'h1', '/dev/vdb', "
              "'2026-01-02T03:04:05.000006', 'rw', 'attached', '%s', "
              "'2026-01-02T03:04:05.000006', 0)" % (aid, v["id"], server, info))
    out = cloud.cli("volume", "attachment", "list", "--os-volume-api-version", "3.27",
                    "-f", "json")
    mine = [a for a in out if a["ID"] not in before]
    assert mine == [{"ID": aid, "Volume ID": v["id"], "Server ID": server,
                     "Status": "attached"}]
    proj = project_of(cloud)
    tok = cloud.token()
    h = {"OpenStack-API-Version": "volume 3.27"}
    st, _, body = cloud.request("GET", "/volume/v3/%s/attachments/%s" % (proj, aid), token=tok,
                                headers=h)
    assert st == 200
    a = body["attachment"]
    assert a["id"] == aid and a["status"] == "attached" and a["instance"] == server
    assert a["attached_at"] == "2026-01-02T03:04:05.000006" and a["detached_at"] == ""
    assert a["attach_mode"] == "rw"
    # Cinder's show puts the volume's admin metadata format in connection_info
    assert a["connection_info"]["format"] == "raw"
    assert a["connection_info"]["driver_volume_type"] == "nfs"
    st, _, body = cloud.request("GET", "/volume/v3/%s/attachments/detail?volume_id=%s" % (
        proj, v["id"]), token=tok, headers=h)
    assert st == 200 and [x["id"] for x in body["attachments"]] == [aid]
    assert "connection_info" in body["attachments"][0]
    st, _, body = cloud.request("GET", "/volume/v3/%s/attachments?volume_id=%s" % (
        proj, v["id"]), token=tok, headers=h)
    assert body["attachments"] == [{"id": aid, "status": "attached", "instance": server,
                                    "volume_id": v["id"]}]
    st, _, body = cloud.request("GET", "/volume/v3/%s/attachments" % proj, token=tok,
                                headers={"OpenStack-API-Version": "volume 3.26"})
    assert st == 404
    st, _, body = cloud.request("GET", "/volume/v3/%s/attachments/%s" % (proj, "f" * 32),
                                token=tok, headers=h)
    assert st == 404 and body["itemNotFound"]["message"] == (
        "Volume attachment could not be found with filter: attachment_id = %s." % ("f" * 32))
    # admin metadata "format" is not shown with the volume (Cinder shows only
    # readonly and attached_mode)
    s = cloud.cli("volume", "show", v["id"], "-f", "json")
    assert s["properties"] == {}
    cloud.sql("UPDATE volume_attachment SET deleted = 1 WHERE id = '%s'" % aid)
    cloud.cli("volume", "delete", v["id"])


def test_snapshot_of_in_use_volume(cloud):
    """force=true on an in-use volume: a standalone copy (the active file a
    guest holds stays as it is), usable as a source, deletable while the
    volume stays in use; an in-use volume cannot be deleted."""
    v = create(cloud, "--size", "1", unique("inuse"))
    base = volume_files(cloud, v["id"])[0]
    d = os.path.dirname(base)
    qemu_io("raw", "write -P 0x61 0 64k", base)
    cloud.cli("volume", "set", "--state", "in-use", v["id"])
    assert cloud.cli("volume", "show", v["id"], "-f", "json")["status"] == "in-use"
    r = cloud.cli("volume", "snapshot", "create", "--volume", v["id"], unique("nf"),
                  check=False)
    assert r.returncode != 0
    assert ("Invalid volume: Volume %s status must be available, but current status is: "
            "in-use. (HTTP 400)" % v["id"]) in r.stderr
    before = os.stat(base)
    s = cloud.cli("volume", "snapshot", "create", "--volume", v["id"], "--force",
                  unique("live"), "-f", "json")
    assert s["status"] == "available"
    copy = os.path.join(d, "volume-%s.%s" % (v["id"], s["id"]))
    # the active file is unchanged: no overlay, no .info, same file
    assert [os.path.basename(f) for f in volume_files(cloud, v["id"])] == \
        sorted(["volume-%s" % v["id"], os.path.basename(copy)])
    after = os.stat(base)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    i = info(copy)
    assert i["format"] == "raw" and "backing-filename" not in i
    assert cloud.sql("SELECT standalone FROM snapshots WHERE id = '%s'" % s["id"]) == \
        [{"standalone": 1}]
    # the volume's data moves on; a volume from the snapshot has the old data
    qemu_io("raw", "write -P 0x62 0 64k", base)
    fs = create(cloud, "--snapshot", s["id"], unique("fromlive"))
    assert fs["status"] == "available"
    p = volume_files(cloud, fs["id"])[0]
    assert "read 65536/65536" in qemu_io("raw", "read -P 0x61 0 64k", p)
    assert info(p)["format"] == "raw"
    # deleting an in-use volume: Cinder's refusal
    cloud.cli("volume", "delete", fs["id"])
    r = cloud.cli("volume", "delete", v["id"], check=False)
    assert r.returncode != 0
    assert ("Invalid volume: Volume status must be available or error or error_restoring or "
            "error_extending or error_managing and must not be migrating, attached, belong to "
            "a group, have snapshots, awaiting a transfer, or be disassociated from snapshots "
            "after volume transfer. (HTTP 400)") in r.stderr
    # the copy is deleted while the volume stays in use
    cloud.cli("volume", "snapshot", "delete", s["id"])
    assert not os.path.exists(copy)
    assert "read 65536/65536" in qemu_io("raw", "read -P 0x62 0 64k", base)
    # still in use: the delete is refused without snapshots too (attached)
    st, _, body = cloud.request("DELETE", "/volume/v3/%s/volumes/%s" % (project_of(cloud),
                                                                        v["id"]),
                                token=cloud.token())
    assert st == 400 and body["badRequest"]["message"].startswith(
        "Invalid volume: Volume status must be available or error")
    cloud.cli("volume", "set", "--state", "available", v["id"])
    cloud.cli("volume", "delete", v["id"])
    assert volume_files(cloud, v["id"]) == [] and volume_files(cloud, fs["id"]) == []


def test_readonly_snapshot_metadata_extensions_and_views(cloud):
    """What Tempest's volume tests read: the readonly flag (admin metadata
    shown among the metadata, access_mode "ro"), snapshot metadata, the
    extension list, the views of create vs show, and Cinder's 404s."""
    proj, token = project_of(cloud), cloud.token()
    base = "/volume/v3/%s" % proj
    v = create(cloud, "--size", "1", unique("ro"))
    # create answers the core view only: no extension attributes
    st, _, body = cloud.request("POST", base + "/volumes", {"volume": {"size": 1}}, token=token)
    assert st == 202 and "os-vol-tenant-attr:tenant_id" not in body["volume"]
    other = body["volume"]["id"]
    st, _, body = cloud.request("GET", base + "/volumes/" + other, token=token)
    assert body["volume"]["os-vol-tenant-attr:tenant_id"] == proj
    cloud.cli("volume", "delete", other)

    cloud.cli("volume", "set", "--read-only", v["id"])
    assert cloud.cli("volume", "show", v["id"], "-f", "json")["properties"] == {
        "readonly": "True"}
    assert cloud.sql("SELECT value FROM volume_admin_metadata WHERE volume_id = '%s' AND "
                     "key = 'readonly' AND deleted = 0" % v["id"]) == [{"value": "True"}]
    # not user metadata: the metadata API does not list it
    st, _, body = cloud.request("GET", base + "/volumes/%s/metadata" % v["id"], token=token)
    assert st == 200 and body == {"metadata": {}}
    cloud.cli("volume", "set", "--read-write", v["id"])
    assert cloud.cli("volume", "show", v["id"], "-f", "json")["properties"] == {
        "readonly": "False"}
    st, _, body = cloud.request("POST", base + "/volumes/%s/action" % v["id"],
                                {"os-update_readonly_flag": {"readonly": "maybe"}}, token=token)
    assert st == 400 and "readonly" in body["badRequest"]["message"]
    cloud.sql("UPDATE volumes SET status = 'in-use' WHERE id = '%s'" % v["id"])
    st, _, body = cloud.request("POST", base + "/volumes/%s/action" % v["id"],
                                {"os-update_readonly_flag": {"readonly": True}}, token=token)
    assert st == 400 and body["badRequest"]["message"] == (
        "Invalid volume: Volume %s status must be available to update readonly flag, but "
        "current status is: in-use." % v["id"])
    cloud.sql("UPDATE volumes SET status = 'available' WHERE id = '%s'" % v["id"])

    # snapshot metadata through OSC (POST .../metadata, DELETE .../metadata/{key})
    s = cloud.cli("volume", "snapshot", "create", "--volume", v["id"], "--property", "a=1",
                  unique("snap"), "-f", "json")
    assert "os-extended-snapshot-attributes:project_id" not in s
    cloud.cli("volume", "snapshot", "set", "--property", "b=2", s["id"])
    assert cloud.cli("volume", "snapshot", "show", s["id"], "-f", "json")["properties"] == {
        "a": "1", "b": "2"}
    cloud.cli("volume", "snapshot", "unset", "--property", "a", s["id"])
    snap = base + "/snapshots/%s/metadata" % s["id"]
    st, _, body = cloud.request("GET", snap, token=token)
    assert st == 200 and body == {"metadata": {"b": "2"}}
    st, _, body = cloud.request("PUT", snap, {"metadata": {"c": "3"}}, token=token)
    assert st == 200 and body == {"metadata": {"c": "3"}}
    st, _, body = cloud.request("PUT", snap + "/c", {"meta": {"c": "4"}}, token=token)
    assert st == 200 and body == {"meta": {"c": "4"}}
    st, _, body = cloud.request("PUT", snap + "/c", {"meta": {"d": "4"}}, token=token)
    assert st == 400 and body["badRequest"]["message"] == "Request body and URI mismatch"
    st, _, body = cloud.request("GET", snap + "/b", token=token)
    assert st == 404 and body["itemNotFound"]["message"] == (
        "Snapshot %s has no metadata with key b." % s["id"])
    assert cloud.sql("SELECT key, value FROM snapshot_metadata WHERE snapshot_id = '%s' AND "
                     "deleted = 0" % s["id"]) == [{"key": "c", "value": "4"}]
    st, _, body = cloud.request("GET", base + "/snapshots/" + s["id"], token=token)
    assert body["snapshot"]["os-extended-snapshot-attributes:project_id"] == proj
    # a null volume_id is an unknown volume, a missing one a bad request
    st, _, body = cloud.request("POST", base + "/snapshots", {"snapshot": {"volume_id": None}},
                                token=token)
    assert st == 404 and body["itemNotFound"]["message"] == "Volume None could not be found."
    st, _, body = cloud.request("POST", base + "/snapshots", {"snapshot": {"name": "x"}},
                                token=token)
    assert st == 400 and "'volume_id' is a required property" in body["badRequest"]["message"]
    cloud.cli("volume", "snapshot", "delete", s["id"])

    # extensions: what is offered, and no os-hosts
    exts = cloud.cli("extension", "list", "--volume", "-f", "json")
    aliases = {e["Alias"] for e in exts}
    assert {"os-availability-zone", "os-volume-actions", "os-vol-tenant-attr",
            "os-extended-snapshot-attributes"} <= aliases and "os-hosts" not in aliases
    st, _, body = cloud.request("GET", base + "/extensions/os-quota-sets", token=token)
    assert st == 200 and body["extension"]["name"] == "Quotas"
    st, _, body = cloud.request("GET", base + "/extensions/os-hosts", token=token)
    assert st == 404
    # no route for a collection: Cinder's router answers 404
    for method in ("PUT", "DELETE"):
        st, _, body = cloud.request(method, base + "/volumes/", {"volume": {}}, token=token)
        assert st == 404 and body["itemNotFound"]["message"] == (
            "The resource could not be found.")
    cloud.cli("volume", "delete", v["id"])


def test_name_and_description_limits(cloud):
    """Cinder's 255-character limit on volume and snapshot names and
    descriptions (volumes: counted after stripping, in characters), with
    its messages, on create and update; 255 is still fine."""
    tok = cloud.token()
    proj = cloud.request("GET", "/identity/v3/auth/tokens", token=tok,
                         headers={"X-Subject-Token": tok})[2]["token"]["project"]["id"]
    base = "/volume/v3/%s" % proj
    long_name, ok_name = "\u00e9" * 256, " " + "\u00e9" * 255 + " "
    for key, entity in (("name", "name"), ("description", "description"),
                        ("display_name", "name")):
        st, _, body = cloud.request("POST", base + "/volumes", {"volume": {
            "size": 1, key: long_name}}, token=tok)
        assert st == 400 and body["badRequest"]["message"] == (
            "Invalid input received: %s has 256 characters, more than 255." % entity), body
    st, _, body = cloud.request("POST", base + "/volumes", {"volume": {
        "size": 1, "name": ok_name, "description": "d" * 255}}, token=tok)
    assert st == 202, body
    vid = body["volume"]["id"]
    st, _, body = cloud.request("PUT", base + "/volumes/" + vid, {"volume": {
        "description": long_name}}, token=tok)
    assert st == 400 and "description has 256 characters" in body["badRequest"]["message"]
    st, _, body = cloud.request("PUT", base + "/volumes/" + vid, {"volume": {"name": 5}},
                                token=tok)
    assert st == 400 and body["badRequest"]["message"] == (
        "Invalid input for field/attribute name. Value: 5. 5 is not of type 'string', 'null'")
    st, _, body = cloud.request("POST", base + "/snapshots", {"snapshot": {
        "volume_id": vid, "name": "s" * 256}}, token=tok)
    assert st == 400 and body["badRequest"]["message"].endswith(
        "'%s' is too long" % ("s" * 256)), body
    st, _, body = cloud.request("GET", base + "/volumes/" + vid, token=tok)
    assert body["volume"]["description"] == "d" * 255
    assert cloud.request("DELETE", base + "/volumes/" + vid, token=tok)[0] == 202


def test_nova_volume_proxy(cloud):
    """Nova's os-volumes / os-snapshots proxy (gone from 2.36)."""
    token = cloud.token()

    def nova(method, path, body=None, mv="2.35"):
        st, _, b = cloud.request(method, "/compute/v2.1" + path, body=body, token=token,
                                 headers={"OpenStack-API-Version": "compute " + mv})
        return st, b

    name = unique("nvol")
    st, b = nova("POST", "/os-volumes", {"volume": {"size": 1, "display_name": name,
                                                    "metadata": {"k": "v"}}})
    assert st == 200, b
    v = b["volume"]
    assert (v["displayName"], v["size"], v["status"], v["metadata"]) == (name, 1, "available",
                                                                         {"k": "v"})
    assert v["attachments"] == [{}] and v["availabilityZone"] == "nova"
    assert set(v) == {"id", "status", "size", "availabilityZone", "createdAt", "attachments",
                      "displayName", "displayDescription", "volumeType", "snapshotId",
                      "metadata"}
    st, b = nova("GET", "/os-volumes/" + v["id"])
    assert st == 200 and b["volume"] == v
    st, b = nova("GET", "/os-volumes/detail?limit=1")
    assert st == 200 and len(b["volumes"]) == 1
    st, b = nova("GET", "/os-volumes")
    assert st == 200 and v["id"] in [x["id"] for x in b["volumes"]]
    st, b = nova("POST", "/os-volumes", {"volume": {"size": 0}})
    assert st == 400 and "badRequest" in b
    st, b = nova("POST", "/os-snapshots", {"snapshot": {"volume_id": v["id"],
                                                        "display_name": "s1"}})
    assert st == 200, b
    s = b["snapshot"]
    assert (s["volumeId"], s["size"], s["status"], s["displayName"]) == (v["id"], 1, "available",
                                                                         "s1")
    st, b = nova("GET", "/os-snapshots/detail")
    assert st == 200 and s["id"] in [x["id"] for x in b["snapshots"]]
    st, b = nova("GET", "/os-snapshots/" + s["id"])
    assert st == 200 and b["snapshot"] == s
    # gone from 2.36
    for path in ("/os-volumes", "/os-volumes/" + v["id"], "/os-snapshots"):
        st, b = nova("GET", path, mv="2.36")
        assert st == 404 and b["itemNotFound"]["message"] == "The resource could not be found."
    assert nova("DELETE", "/os-snapshots/" + s["id"])[0] == 202
    assert nova("GET", "/os-snapshots/" + s["id"])[0] == 404
    assert nova("DELETE", "/os-volumes/" + v["id"])[0] == 202
    st, b = nova("GET", "/os-volumes/" + v["id"])
    assert st == 404 and b == {"itemNotFound": {
        "code": 404, "message": "Volume %s could not be found." % v["id"]}}

"""Image data: streamed upload and download through the real CLI, the
format checks at upload, and memory that stays flat for a large upload."""
import hashlib
import http.client
import json
import os
import subprocess

import pytest

from conftest import CliError, unique


def qemu_img(*args):
    return subprocess.run(["qemu-img"] + [str(a) for a in args], check=True,
                          capture_output=True, text=True).stdout


def virtual_size(path):
    return json.loads(qemu_img("info", "--output=json", path))["virtual-size"]


def digests(path):
    md5, sha = hashlib.md5(), hashlib.sha512()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            md5.update(block)
            sha.update(block)
    return md5.hexdigest(), sha.hexdigest()


def proc_status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no %s in /proc/%d/status" % (key, pid))


def reset_peak(pid):
    """Resets VmHWM to the current RSS (clear_refs 5), so that VmHWM read later
    is the peak since now."""
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")


def create_record(cloud, tok, name, disk_format="qcow2", container_format="bare"):
    st, _, body = cloud.request("POST", "/image/v2/images", token=tok, body={
        "name": name, "disk_format": disk_format, "container_format": container_format})
    assert st == 201, body
    return body["id"]


def put_data(cloud, tok, image_id, path):
    with open(path, "rb") as f:
        data = f.read()
    return cloud.request("PUT", "/image/v2/images/%s/file" % image_id, token=tok, raw=data,
                         headers={"Content-Type": "application/octet-stream",
                                  "Accept": "application/json"})


def check_uploaded(cloud, name, path, disk_format):
    img = cloud.cli("image", "show", name, "-f", "json")
    md5, sha = digests(path)
    assert img["status"] == "active"
    assert img["disk_format"] == disk_format
    assert img["checksum"] == md5
    # OSC lists os_hash_* among the properties
    props = img.get("properties") or {}
    assert img.get("os_hash_algo", props.get("os_hash_algo")) == "sha512"
    assert img.get("os_hash_value", props.get("os_hash_value")) == sha
    assert img["size"] == os.path.getsize(path)
    assert img["virtual_size"] == virtual_size(path)
    return img


@pytest.mark.parametrize("fmt", ["qcow2", "raw"])
def test_upload_show_and_save_roundtrip(cloud, tmp_path, fmt):
    src = tmp_path / ("disk." + fmt)
    qemu_img("create", "-f", fmt, src, "64M")
    if fmt == "raw":  # some non-zero content
        with open(src, "r+b") as f:
            f.seek(1 << 20)
            f.write(os.urandom(4096))
    name = unique("data-" + fmt)
    cloud.cli("image", "create", "--file", src, "--disk-format", fmt, "--container-format",
              "bare", name, "-f", "json")
    img = check_uploaded(cloud, name, src, fmt)
    assert img["virtual_size"] == 64 * 1024 * 1024

    out = tmp_path / "saved"
    cloud.cli("image", "save", "--file", out, name)
    with open(src, "rb") as a, open(out, "rb") as b:
        assert a.read() == b.read()

    # the download carries Glance's headers
    tok = cloud.token()
    conn = http.client.HTTPConnection("127.0.0.1", cloud.port, timeout=60)
    conn.request("GET", "/image/v2/images/%s/file" % img["id"], headers={"X-Auth-Token": tok})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    assert r.status == 200
    assert r.getheader("Content-Type") == "application/octet-stream"
    assert int(r.getheader("Content-Length")) == os.path.getsize(src)
    assert r.getheader("Content-MD5") == img["checksum"]
    assert hashlib.md5(body).hexdigest() == img["checksum"]

    # delete removes the stored file
    stored = os.path.join(cloud.state_dir, "images", img["id"])
    assert os.path.exists(stored)
    cloud.cli("image", "delete", name)
    assert not os.path.exists(stored)


def test_queued_image_has_no_data(cloud):
    tok = cloud.token()
    image_id = create_record(cloud, tok, unique("nodata"))
    st, _, body = cloud.request("GET", "/image/v2/images/%s/file" % image_id, token=tok)
    assert st == 204, body
    assert not os.path.exists(os.path.join(cloud.state_dir, "images", image_id))


def test_raw_declared_qcow2_is_refused(cloud, tmp_path):
    src = tmp_path / "really-raw.img"
    qemu_img("create", "-f", "raw", src, "4M")
    name = unique("liar")
    with pytest.raises(CliError) as e:
        cloud.cli("--debug", "image", "create", "--file", str(src), "--disk-format", "qcow2",
                  "--container-format", "bare", name)
    assert "400" in e.value.stderr
    assert "Image declared qcow2 but its content is raw" in e.value.stderr

    # the image record survives the refusal queued, with no data stored
    tok = cloud.token()
    image_id = create_record(cloud, tok, unique("liar-rest"))
    st, _, body = put_data(cloud, tok, image_id, src)
    assert st == 400
    assert "Image declared qcow2 but its content is raw" in body["message"]
    img = cloud.cli("image", "show", image_id, "-f", "json")
    assert img["status"] == "queued"
    assert img.get("checksum") is None and img.get("size") is None
    images = os.path.join(cloud.state_dir, "images")
    assert os.path.isdir(images)  # uploads went through it
    assert not [f for f in os.listdir(images) if f.startswith(image_id)]


def test_empty_or_absurd_qcow2_upload_is_refused(cloud, tmp_path):
    """An empty upload declared qcow2 is no image (400, back to queued); an
    empty raw one, and Nova's empty upload for the snapshot of a
    volume-backed server (block_device_mapping property), become active as
    in Glance. A qcow2 header declaring more than QEMU opens is a 400."""
    tok = cloud.token()
    hdr = {"Content-Type": "application/octet-stream"}
    empty = create_record(cloud, tok, unique("empty-qcow2"))
    st, _, body = cloud.request("PUT", "/image/v2/images/%s/file" % empty, token=tok, raw=b"",
                                headers=hdr)
    assert st == 400 and "Image declared qcow2 but it has no data (0 bytes)" in body, body
    st, _, img = cloud.request("GET", "/image/v2/images/%s" % empty, token=tok)
    assert img["status"] == "queued" and img["size"] is None
    raw = create_record(cloud, tok, unique("empty-raw"), disk_format="raw")
    assert cloud.request("PUT", "/image/v2/images/%s/file" % raw, token=tok, raw=b"",
                         headers=hdr)[0] == 204
    st, _, snap = cloud.request("POST", "/image/v2/images", token=tok, body={
        "name": unique("bfv-snap"), "disk_format": "qcow2", "container_format": "bare",
        "bdm_v2": "True", "block_device_mapping": "[]", "root_device_name": "/dev/vda"})
    assert st == 201, snap
    assert cloud.request("PUT", "/image/v2/images/%s/file" % snap["id"], token=tok, raw=b"",
                         headers=hdr)[0] == 204
    for image_id in (raw, snap["id"]):
        st, _, img = cloud.request("GET", "/image/v2/images/%s" % image_id, token=tok)
        assert img["status"] == "active" and img["size"] == 0
    src = tmp_path / "huge.qcow2"
    qemu_img("create", "-f", "qcow2", src, "64M")
    with open(src, "r+b") as f:
        f.seek(24)
        f.write((1 << 62).to_bytes(8, "big"))
    huge = create_record(cloud, tok, unique("huge"))
    st, _, body = put_data(cloud, tok, huge, src)
    assert st == 400
    assert "qcow2 virtual size 4611686018427387904 bytes is more than QEMU opens" in \
        body["message"], body


def test_qcow2_with_backing_file_is_refused(cloud, tmp_path):
    src = tmp_path / "backed.qcow2"
    qemu_img("create", "-f", "qcow2", "-b", "/etc/passwd", "-F", "raw", src)
    name = unique("backed")
    with pytest.raises(CliError) as e:
        cloud.cli("--debug", "image", "create", "--file", str(src), "--disk-format", "qcow2",
                  "--container-format", "bare", name)
    assert "400" in e.value.stderr
    assert "qcow2 image has a backing file (/etc/passwd)" in e.value.stderr

    tok = cloud.token()
    image_id = create_record(cloud, tok, unique("backed-rest"))
    st, _, body = put_data(cloud, tok, image_id, src)
    assert st == 400
    assert "qcow2 image has a backing file (/etc/passwd); refusing it" in body["message"]
    assert cloud.cli("image", "show", image_id, "-f", "json")["status"] == "queued"

    # a refused image can still take good data afterwards
    good = tmp_path / "good.qcow2"
    qemu_img("create", "-f", "qcow2", good, "1M")
    st, _, body = put_data(cloud, tok, image_id, good)
    assert st == 204, body
    assert cloud.cli("image", "show", image_id, "-f", "json")["status"] == "active"
    # and an active image refuses a second upload
    st, _, body = put_data(cloud, tok, image_id, good)
    assert st == 409, body


def test_upload_without_disk_format_is_refused(cloud, tmp_path):
    tok = cloud.token()
    st, _, body = cloud.request("POST", "/image/v2/images", token=tok,
                                body={"name": unique("noformat")})
    assert st == 201
    src = tmp_path / "x.raw"
    src.write_bytes(b"\0" * 4096)
    st, _, err = put_data(cloud, tok, body["id"], src)
    assert st == 400
    assert "disk_format, container_format must be set" in err["message"]


def test_upload_needs_a_token_before_any_data(cloud, tmp_path):
    tok = cloud.token()
    image_id = create_record(cloud, tok, unique("noauth"), disk_format="raw")
    src = tmp_path / "x.raw"
    src.write_bytes(b"\1" * 300000)  # above [api] max_request_body_size
    st, hdrs, body = put_data(cloud, None, image_id, src)
    assert st == 401
    assert "WWW-Authenticate" in hdrs
    assert cloud.cli("image", "show", image_id, "-f", "json")["status"] == "queued"


def peak_during(pid, fn):
    """Resident-set peak of pid while fn runs (VmHWM after resetting it)."""
    reset_peak(pid)
    fn()
    return proc_status(pid, "VmHWM")


def test_large_upload_is_streamed(cloud, tmp_path):
    size = 64 * 1024 * 1024
    src = tmp_path / "big.raw"
    with open(src, "wb") as f:
        block = os.urandom(1 << 20)
        for i in range(size >> 20):
            f.write(block[:-8] + i.to_bytes(8, "little"))
    pid = cloud.proc.pid
    name = unique("big")
    # Every CLI call authenticates (password hashing has its own transient
    # peak): the baseline is the peak of a CLI call that moves no data.
    base = peak_during(pid, lambda: cloud.cli("image", "list", "-f", "json"))
    up = peak_during(pid, lambda: cloud.cli(
        "image", "create", "--file", src, "--disk-format", "raw", "--container-format", "bare",
        name, "-f", "json", timeout=300))
    check_uploaded(cloud, name, src, "raw")
    out = tmp_path / "big.out"
    down = peak_during(pid, lambda: cloud.cli("image", "save", "--file", out, name, timeout=300))
    assert digests(out) == digests(src)
    print("nubo VmHWM: plain CLI call %d, 64 MiB upload %d, download %d" % (base, up, down))
    # the image is never held in memory: far less than its 64 MiB on top
    assert up - base < 8 * 1024 * 1024, (base, up)
    assert down - base < 8 * 1024 * 1024, (base, down)
    cloud.cli("image", "delete", name)


def test_client_gone_mid_upload_requeues(cloud):
    import socket
    import time
    tok = cloud.token()
    image_id = create_record(cloud, tok, unique("gone"), disk_format="raw")
    s = socket.create_connection(("127.0.0.1", cloud.port))
    s.sendall(("PUT /image/v2/images/%s/file HTTP/1.1\r\nHost: x\r\nX-Auth-Token: %s\r\n"
               "Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n"
               % (image_id, tok, 16 << 20)).encode())
    s.sendall(b"\0" * (1 << 20))
    partial = os.path.join(cloud.state_dir, "images", image_id + ".partial")
    deadline = time.time() + 10
    while time.time() < deadline and cloud.sql(
            "SELECT status FROM images WHERE id = '%s'" % image_id)[0]["status"] != "saving":
        time.sleep(0.05)
    assert os.path.exists(partial)
    s.close()
    deadline = time.time() + 10
    while time.time() < deadline:
        img = cloud.cli("image", "show", image_id, "-f", "json")
        if img["status"] == "queued" and not os.path.exists(partial):
            break
        time.sleep(0.2)
    assert img["status"] == "queued"
    assert not os.path.exists(partial)


def test_upload_above_image_size_cap_is_413(fresh_cloud, tmp_path):
    c = fresh_cloud("--set", "image.image_size_cap=100000", quota=False)
    tok = c.token()
    image_id = create_record(c, tok, unique("capped"), disk_format="raw")
    src = tmp_path / "x.raw"
    src.write_bytes(b"\1" * 200000)
    st, _, body = put_data(c, tok, image_id, src)
    assert st == 413
    assert "The incoming image is too large" in body["message"]
    assert c.cli("image", "show", image_id, "-f", "json")["status"] == "queued"
    src.write_bytes(b"\1" * 90000)  # under the cap
    st, _, body = put_data(c, tok, image_id, src)
    assert st == 204, body


# -- nubo aio --demo-image: the seeded `cirros` image gets a real file's data
# through nb_image_import_file (same checks and hashes as PUT /file).

def demo_source(tmp_path, fmt):
    """The built test guest when tests/run.sh built it, else a small image of
    the given format with some data in it."""
    built = os.environ.get("NUBO_TEST_IMAGE_DIR")
    if built and os.path.exists(os.path.join(built, "guest." + fmt)):
        return os.path.join(built, "guest." + fmt)
    raw = tmp_path / "demo.raw"
    qemu_img("create", "-f", "raw", raw, "8M")
    with open(raw, "r+b") as f:
        f.seek(3 << 20)
        f.write(os.urandom(65536))
    if fmt == "raw":
        return str(raw)
    out = tmp_path / ("demo." + fmt)
    qemu_img("convert", "-f", "raw", "-O", fmt, raw, out)
    return str(out)


def mode(path):
    return os.stat(path).st_mode & 0o777


def test_aio_demo_image_is_uploaded_once(fresh_cloud, tmp_path):
    src = demo_source(tmp_path, "qcow2")
    c = fresh_cloud("--demo-image", src, quota=False)
    img = check_uploaded(c, "cirros", src, "qcow2")
    assert "nubo_placeholder" not in (img.get("properties") or {})
    stored = os.path.join(c.state_dir, "images", img["id"])
    assert digests(stored) == digests(src)
    assert len(c.cli("image", "list", "--name", "cirros", "-f", "json")) == 1
    # state dir traversable, secrets private
    assert mode(c.state_dir) == 0o755
    for f in ("nubo.conf", "clouds.yaml", "nubo.sqlite"):
        assert mode(os.path.join(c.state_dir, f)) == 0o600, f
    with open(os.path.join(c.state_dir, "nubo.conf")) as f:
        assert "demo_image = %s" % os.path.realpath(src) in f.read()

    # a restart on the same state dir keeps the data and uploads nothing
    before = os.stat(stored).st_mtime_ns
    assert c.stop() == 0
    c.start()
    again = c.cli("image", "show", "cirros", "-f", "json")
    assert (again["id"], again["updated_at"], again["checksum"]) == \
        (img["id"], img["updated_at"], img["checksum"])
    assert os.stat(stored).st_mtime_ns == before
    assert "demo image cirros (%s) already has its data" % img["id"] in c.log("main")
    # an operator's download gives back the file
    out = tmp_path / "saved"
    c.cli("image", "save", "--file", out, "cirros")
    assert digests(out) == digests(src)


def test_aio_demo_image_from_env_is_raw(fresh_cloud, tmp_path, monkeypatch):
    src = demo_source(tmp_path, "raw")
    monkeypatch.setenv("NUBO_DEMO_IMAGE", src)
    c = fresh_cloud(quota=False)
    check_uploaded(c, "cirros", src, "raw")


def test_aio_without_demo_image_keeps_the_placeholder(fresh_cloud, tmp_path, monkeypatch):
    monkeypatch.delenv("NUBO_DEMO_IMAGE", raising=False)
    c = fresh_cloud(quota=False)
    img = c.cli("image", "show", "cirros", "-f", "json")
    assert img["status"] == "active" and img["size"] == 0
    assert not os.path.exists(os.path.join(c.state_dir, "images", img["id"]))
    # the placeholder is filled when the all-in-one restarts with an image
    c.stop()
    src = demo_source(tmp_path, "qcow2")
    c.extra_args = ["--set", "aio.demo_image=%s" % src]
    c.start()
    filled = check_uploaded(c, "cirros", src, "qcow2")
    assert filled["id"] == img["id"]


def test_aio_refuses_an_unsafe_demo_image(fresh_cloud, tmp_path):
    src = tmp_path / "backed.qcow2"
    qemu_img("create", "-f", "qcow2", "-b", "/etc/passwd", "-F", "raw", src)
    with pytest.raises(RuntimeError) as e:
        fresh_cloud("--demo-image", str(src), quota=False)
    assert "qcow2 image has a backing file (/etc/passwd); refusing it" in str(e.value)
    with pytest.raises(RuntimeError) as e:
        fresh_cloud("--demo-image", str(tmp_path / "missing.qcow2"), quota=False)
    assert "No such file or directory" in str(e.value)

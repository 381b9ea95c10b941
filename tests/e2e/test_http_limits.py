"""The listener's guard: one client cannot take the API down, every error a
client can get from the listener has the service's own shape, access lines
as Nova and Placement write them, legacy project-ID URLs, /healthcheck.

One private cloud with a short [api] header_timeout, so that the trickle
tests wait seconds, not minutes. Every socket a test opens is closed at its
end."""
import json
import os
import re
import select
import socket
import time

import pytest

from conftest import Cloud, free_port

HEADER_TIMEOUT = 2
PER_IP = 200
IMAGE_CAP = 100000


@pytest.fixture(scope="module")
def hcloud(tmp_path_factory):
    c = Cloud(tmp_path_factory.mktemp("http"), free_port(),
              ("--set", "api.header_timeout=%d" % HEADER_TIMEOUT,
               "--set", "api.max_connections_per_ip=%d" % PER_IP,
               "--set", "metadata.header_timeout=%d" % HEADER_TIMEOUT,
               "--set", "image.image_size_cap=%d" % IMAGE_CAP))
    c.start()
    yield c
    assert c.stop() == 0, c.tail()


def raw(port, data, src="127.0.0.1", timeout=5):
    """Sends data on a fresh connection from src; returns (status, headers,
    body bytes) of the answer, read until the server closes."""
    s = socket.socket()
    try:
        s.settimeout(timeout)
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(data)
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            out += b
    finally:
        s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    status = int(lines[0].split()[1]) if lines[0].startswith("HTTP/1.") else None
    hdrs = dict(l.split(": ", 1) for l in lines[1:] if ": " in l)
    return status, hdrs, body


def get(port, path, src="127.0.0.1", headers=""):
    return raw(port, ("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s\r\n"
                      % (path, headers)).encode(), src=src)


def closed_within(s, seconds):
    """True if the server closes s (EOF or reset) within seconds."""
    deadline = time.monotonic() + seconds
    p = select.poll()
    p.register(s, select.POLLIN)
    while True:
        if not p.poll(max(0, int((deadline - time.monotonic()) * 1000))):
            return False
        try:
            if not s.recv(4096, socket.MSG_DONTWAIT):
                return True
        except BlockingIOError:
            pass
        except OSError:
            return True


def test_flood_from_one_address_leaves_the_api_to_others(hcloud):
    """1,100 sockets from 127.0.0.2, idle or trickling header bytes: a normal
    request from 127.0.0.1 is answered within a second, the flood beyond the
    per-IP limit is refused at once, and trickling does not keep a socket past
    the header deadline."""
    socks = []
    try:
        for i in range(1100):
            s = socket.socket()
            s.setblocking(True)
            s.bind(("127.0.0.2", 0))
            s.connect(("127.0.0.1", hcloud.port))
            if i % 2:
                s.sendall(b"GET /compute/v2.1 HTTP/1.1\r\n")  # starts a head, never ends it
            socks.append(s)
        t0 = time.monotonic()
        st, _, body = get(hcloud.port, "/compute/v2.1")
        took = time.monotonic() - t0
        assert st == 200, body
        assert took < 1.0, took
        # past the per-IP limit, connections were closed by the server at once
        refused = sum(closed_within(s, 0.01) for s in socks[PER_IP + 50:PER_IP + 150])
        assert refused == 100
        # a trickle does not extend the deadline: one byte every 0.3 s is
        # still cut off at header_timeout after the connection opened
        kept = [s for s in socks[:PER_IP] if not closed_within(s, 0)]
        assert kept, "the per-IP share should have been accepted"
        t_open = time.monotonic()
        trickler = kept[0]
        trickler.setblocking(False)
        cut = False
        while time.monotonic() - t_open < HEADER_TIMEOUT + 3:
            try:
                trickler.send(b"X")
            except OSError:
                cut = True
                break
            if closed_within(trickler, 0.3):
                cut = True
                break
        assert cut, "a trickling client outlived header_timeout"
        # the idle and the trickling ones are all gone by now
        assert all(closed_within(s, 0.05) for s in kept[1:20])
        # and the API still answers
        assert get(hcloud.port, "/compute/v2.1")[0] == 200
    finally:
        for s in socks:
            s.close()


def test_trickled_request_on_kept_alive_connection_is_cut(hcloud):
    """The deadline also holds for the next request on a kept-alive
    connection (parsed by libmicrohttpd, not the guard's first look)."""
    s = socket.create_connection(("127.0.0.1", hcloud.port))
    try:
        s.sendall(b"GET /healthcheck HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(5)
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        t0 = time.monotonic()
        cut = False
        s.setblocking(False)
        for ch in b"GET /compute/v2.1 HTTP/1.1\r\nX-Long: " + b"a" * 100:
            try:
                s.send(bytes([ch]))
            except OSError:
                cut = True
                break
            if closed_within(s, 0.25):
                cut = True
                break
        took = time.monotonic() - t0
        assert cut and took < HEADER_TIMEOUT + 2, took
    finally:
        s.close()


def test_declared_body_over_the_limit_is_413_at_once(hcloud):
    tok = hcloud.token()
    cases = [
        ("POST", "/compute/v2.1/servers", lambda b: json.loads(b)["overLimit"]["code"] == 413),
        ("POST", "/networking/v2.0/networks",
         lambda b: json.loads(b)["NeutronError"]["type"] == "HTTPRequestEntityTooLarge"),
        ("POST", "/placement/resource_providers",
         lambda b: json.loads(b)["errors"][0]["status"] == 413),
        ("POST", "/identity/v3/auth/tokens", lambda b: json.loads(b)["error"]["code"] == 413),
        ("POST", "/volume/v3/%s/volumes" % "x", lambda b: json.loads(b)["overLimit"]["code"] == 413),
    ]
    for method, path, shape in cases:
        t0 = time.monotonic()
        st, hdrs, body = raw(hcloud.port, (
            "%s %s HTTP/1.1\r\nHost: x\r\nX-Auth-Token: %s\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000000000000\r\n\r\n{" % (method, path, tok)).encode())
        assert time.monotonic() - t0 < 1.0, path
        assert st == 413, (path, body)
        assert shape(body), (path, body)
        assert hdrs.get("x-openstack-request-id", "").startswith("req-")
    # the streamed image upload: over [image] image_size_cap, Glance's words
    st, _, body = hcloud.request("POST", "/image/v2/images", token=tok, body={
        "name": "capped", "disk_format": "raw", "container_format": "bare"})
    image_id = body["id"]
    t0 = time.monotonic()
    st, _, body = raw(hcloud.port, (
        "PUT /image/v2/images/%s/file HTTP/1.1\r\nHost: x\r\nX-Auth-Token: %s\r\n"
        "Content-Type: application/octet-stream\r\nAccept: application/json\r\n"
        "Content-Length: %d\r\n\r\n" % (image_id, tok, IMAGE_CAP + 1)).encode())
    assert time.monotonic() - t0 < 1.0
    assert st == 413
    err = json.loads(body)
    assert err["code"] == "413 Request Entity Too Large"
    assert "The incoming image is too large" in err["message"]
    st, _, img = hcloud.request("GET", "/image/v2/images/%s" % image_id, token=tok)
    assert img["status"] == "queued"


def test_chunked_body_over_the_limit_is_413_when_it_passes_it(hcloud):
    tok = hcloud.token()
    s = socket.create_connection(("127.0.0.1", hcloud.port))
    try:
        s.sendall(("POST /compute/v2.1/servers HTTP/1.1\r\nHost: x\r\nX-Auth-Token: %s\r\n"
                   "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                   % tok).encode())
        chunk = b"a" * 65536
        for _ in range(3):  # 192 KiB > [api] max_request_body_size
            s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        s.settimeout(3)
        out = b""
        try:
            while b"\r\n\r\n" not in out or not out.rstrip().endswith(b"}"):
                b = s.recv(4096)
                if not b:
                    break
                out += b
        except (ConnectionResetError, socket.timeout):
            pass
        assert out.startswith(b"HTTP/1.1 413"), out[:200]
        assert b'"overLimit"' in out
    finally:
        s.close()


@pytest.mark.parametrize("data,status,what", [
    (b"GARBAGE\r\n\r\n", 400, "Malformed request line"),
    (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, "Malformed request line"),
    (b"GET /compute/v2.1 HTTP/9.9\r\nHost: x\r\n\r\n", 505, "HTTP version"),
    (b"GET /compute/v2.1 HTTP/1.1\r\nno colon here\r\n\r\n", 400, "Malformed header line"),
    (b"POST /compute/v2.1/servers HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n", 400,
     "Content-Length"),
    (b"GET /compute/v2.1 HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n", 431,
     "too large"),
], ids=["garbage", "tls-hello", "http-9.9", "header-no-colon", "bad-content-length",
        "headers-too-large"])
def test_bad_request_heads_get_the_service_shape(hcloud, data, status, what):
    st, hdrs, body = raw(hcloud.port, data)
    assert st == status, body
    assert hdrs["Content-Type"] == "application/json"
    err = json.loads(body)
    (name, e), = err.items()
    assert e["code"] == status and what in e["message"], err


def test_unknown_paths_and_methods_get_the_service_shape(hcloud):
    tok = hcloud.token()
    h = {"Accept": "application/json"}
    checks = [
        ("GET", "/compute/v2.1/nothing-here", 404, lambda b: b["itemNotFound"]["code"] == 404),
        ("DELETE", "/compute/v2.1/flavors", 405, lambda b: b["badMethod"]["code"] == 405),
        ("GET", "/networking/v2.0/nothing/here/at/all", 404,
         lambda b: b["NeutronError"]["type"] == "HTTPNotFound"),
        ("GET", "/placement/nothing-here", 404, lambda b: b["errors"][0]["status"] == 404),
        ("GET", "/identity/v3/nothing-here", 404, lambda b: b["error"]["code"] == 404),
        ("GET", "/volume/v3/x/nothing-here", 404, lambda b: b["itemNotFound"]["code"] == 404),
        ("GET", "/image/v2/nothing-here", 404, lambda b: b["code"] == "404 Not Found"),
    ]
    for method, path, status, shape in checks:
        st, _, body = hcloud.request(method, path, token=tok, headers=h)
        assert st == status, (path, body)
        assert isinstance(body, dict) and shape(body), (path, body)


def test_access_lines_and_legacy_project_urls(hcloud):
    issued = hcloud.cli("token", "issue", "-f", "json")
    tok, project = issued["id"], issued["project_id"]
    # Nova's legacy URL with the project ID routes as the plain one ...
    st, _, body = hcloud.request("GET", "/compute/v2.1/%s/flavors?limit=1" % project, token=tok)
    assert st == 200 and "flavors" in body, body
    # ... also at the root, as on nova-api's own port
    st, _, body = hcloud.request("GET", "/v2.1/%s/flavors" % project, token=tok)
    assert st == 200 and "flavors" in body, body
    # another project's ID is refused as Nova refuses it
    other = "0" * 32
    st, _, body = hcloud.request("GET", "/compute/v2.1/%s/flavors" % other, token=tok)
    assert st == 400
    assert "doesn't match Context's project_id" in body["badRequest"]["message"]
    st, _, body = hcloud.request("POST", "/v2.1/%s/servers" % project, token=tok,
                                 body={"server": {}})
    assert st == 400  # the create was routed (and validated)
    log = hcloud.log("api")
    assert re.search(r'\] 127\.0\.0\.1 "GET /compute/v2\.1/%s/flavors\?limit=1 HTTP/1\.1" '
                     r'status: 200 len: \d+ time: \d+\.\d{7}$' % project, log, re.M), log[-2000:]
    assert re.search(r'127\.0\.0\.1 "POST /v2\.1/%s/servers HTTP/1\.1" status: 400' % project,
                     log)
    # placement's own requestlog shape, with the microversion
    st, _, _ = hcloud.request("GET", "/placement/resource_providers", token=tok,
                              headers={"OpenStack-API-Version": "placement 1.36"})
    assert st == 200
    assert re.search(r'\] 127\.0\.0\.1 "GET /placement/resource_providers" status: 200 '
                     r'len: \d+ microversion: 1\.36$', hcloud.log("placement"), re.M)


@pytest.mark.parametrize("which", ["api", "metadata"])
def test_healthcheck(hcloud, which):
    port = hcloud.port + (1 if which == "metadata" else 0)
    st, hdrs, body = get(port, "/healthcheck")
    assert (st, body) == (200, b"OK")
    assert hdrs["Content-Type"] == "text/plain; charset=UTF-8"
    st, hdrs, body = get(port, "/healthcheck", headers="Accept: application/json\r\n")
    assert st == 200 and hdrs["Content-Type"] == "application/json"
    assert json.loads(body) == {"detailed": False, "reasons": ["OK"]}
    st, _, body = raw(port, b"HEAD /healthcheck HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert (st, body) == (204, b"")


def test_metadata_listener_refuses_bad_heads_in_its_shape(hcloud):
    st, hdrs, body = raw(hcloud.port + 1, b"GARBAGE\r\n\r\n")
    assert st == 400
    assert body.startswith(b"400 Bad Request\n\n")


def test_client_leaving_mid_upload_is_noticed_at_once(hcloud):
    """A client that closes right after part of an upload: every image is
    back to queued within a couple of seconds (libmicrohttpd alone could
    miss the close and hold the upload until its idle timeout)."""
    tok = hcloud.token()
    ids = []
    for i in range(20):
        st, _, body = hcloud.request("POST", "/image/v2/images", token=tok, body={
            "name": "gone-%d" % i, "disk_format": "raw", "container_format": "bare"})
        ids.append(body["id"])
        s = socket.create_connection(("127.0.0.1", hcloud.port))
        s.sendall(("PUT /image/v2/images/%s/file HTTP/1.1\r\nHost: x\r\nX-Auth-Token: %s\r\n"
                   "Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n"
                   % (body["id"], tok, IMAGE_CAP)).encode())
        s.sendall(b"\0" * (IMAGE_CAP // 2))
        time.sleep(0.02 * (i % 3))
        s.close()
    deadline = time.monotonic() + 3
    left = ids
    while left and time.monotonic() < deadline:
        left = [i for i in left
                if hcloud.request("GET", "/image/v2/images/%s" % i, token=tok)[2]["status"]
                != "queued"]
        time.sleep(0.2)
    assert not left, "uploads still saving after their client left: %s" % left

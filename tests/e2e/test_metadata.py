"""The metadata API as a guest sees it through a metadata proxy: the proxy
signs X-Instance-ID with the shared secret from nubo.conf, the API answers
with Nova's OpenStack and EC2 documents for a server booted with properties,
user data and a keypair, and refuses what it cannot trust."""
import base64
import configparser
import hashlib
import hmac
import http.client
import json
import os
import subprocess

import pytest

from conftest import unique

USER_DATA = b"#cloud-config\nruncmd:\n - echo 'hello \xc3\xa9'\n"


def conf(cloud):
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(os.path.join(cloud.state_dir, "nubo.conf"))
    return cp


def sign(secret, instance_id):
    return hmac.new(secret.encode(), instance_id.encode(), hashlib.sha256).hexdigest()


def md_get(cloud, path, method="GET", instance_id=None, tenant_id=None, signature=None,
           body=None):
    """One request to the metadata API; returns (status, headers, body bytes)."""
    c = conf(cloud)
    assert c["metadata"]["listen"] == "127.0.0.1"
    conn = http.client.HTTPConnection("127.0.0.1", int(c["metadata"]["port"]), timeout=30)
    h = {"X-Forwarded-For": "10.0.2.15"}
    if instance_id is not None:
        h["X-Instance-ID"] = instance_id
    if tenant_id is not None:
        h["X-Tenant-ID"] = tenant_id
    if signature is not None:
        h["X-Instance-ID-Signature"] = signature
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, dict(r.getheaders()), body


@pytest.fixture(scope="module")
def booted(cloud, tmp_path_factory):
    """A server with a keypair, two properties and user data."""
    d = tmp_path_factory.mktemp("md")
    key = d / "k"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    (d / "ud").write_bytes(USER_DATA)
    kp = unique("kp")
    cloud.cli("keypair", "create", "--public-key", str(key) + ".pub", kp, "-f", "json")
    s = cloud.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--key-name", kp,
                  "--property", "role=web", "--property", "tier=front", "--user-data",
                  str(d / "ud"), "--wait", unique("md"), "-f", "json")
    assert s["status"] == "ACTIVE"
    s = cloud.cli("server", "show", s["id"], "-f", "json")
    secret = conf(cloud)["neutron"]["metadata_proxy_shared_secret"]
    assert len(secret) == 64
    yield {"server": s, "key_name": kp, "public_key": (d / "k.pub").read_text().strip(),
           "secret": secret}
    # the shared cloud's hosts as they were: later tests count free memory
    cloud.cli("server", "delete", "--wait", s["id"])
    cloud.cli("keypair", "delete", kp)


def get_as(cloud, booted, path, **kw):
    sid = booted["server"]["id"]
    return md_get(cloud, path, instance_id=sid, tenant_id=booted["server"]["project_id"],
                  signature=sign(booted["secret"], sid), **kw)


def test_openstack_meta_data(cloud, booted):
    s = booted["server"]
    st, h, body = get_as(cloud, booted, "/openstack/latest/meta_data.json")
    assert st == 200, body
    assert h["Content-Type"] == "application/json"
    md = json.loads(body)
    row = cloud.sql("SELECT hostname, availability_zone FROM instances WHERE uuid = '%s'"
                    % s["id"])[0]
    assert md["uuid"] == s["id"]
    assert md["name"] == s["name"]
    assert md["hostname"] == row["hostname"] + ".novalocal"
    assert md["availability_zone"] == row["availability_zone"]
    assert md["project_id"] == s["project_id"]
    assert md["launch_index"] == 0
    assert md["meta"] == {"role": "web", "tier": "front"}
    kp = booted["key_name"]
    assert {k: v.strip() for k, v in md["public_keys"].items()} == {kp: booted["public_key"]}
    assert [(k["name"], k["type"], k["data"].strip()) for k in md["keys"]] == \
        [(kp, "ssh", booted["public_key"])]
    assert md["devices"] == []
    assert len(base64.b64decode(md["random_seed"])) == 512
    # the dated versions answer too, with the fields of their time
    st, _, body = get_as(cloud, booted, "/openstack/2012-08-10/meta_data.json")
    old = json.loads(body)
    assert st == 200 and old["uuid"] == s["id"]
    assert "project_id" not in old and "random_seed" not in old


def test_listings_and_user_data(cloud, booted):
    st, _, body = md_get(cloud, "/")  # the one path that needs no signature
    assert st == 200
    assert body.decode().split("\n")[-2:] == ["2009-04-04", "latest"]
    st, _, body = get_as(cloud, booted, "/openstack")
    assert body.decode().split("\n")[0] == "2012-08-10"
    assert body.decode().endswith("\nlatest")
    st, _, body = get_as(cloud, booted, "/openstack/latest/")
    assert body.decode().split("\n") == ["meta_data.json", "user_data", "password",
                                         "vendor_data.json", "network_data.json",
                                         "vendor_data2.json"]
    st, _, body = get_as(cloud, booted, "/openstack/latest/user_data")
    assert st == 200 and body == USER_DATA
    st, _, body = get_as(cloud, booted, "/latest/user-data")
    assert st == 200 and body == USER_DATA
    st, _, body = get_as(cloud, booted, "/openstack/latest/vendor_data2.json")
    assert json.loads(body) == {"static": {}}


def test_ec2_paths(cloud, booted):
    s = booted["server"]
    st, _, body = get_as(cloud, booted, "/latest/meta-data/")
    assert st == 200
    entries = body.decode().split("\n")
    for e in ("hostname", "instance-id", "local-hostname", "placement/", "public-keys/",
              "ami-launch-index", "instance-type", "reservation-id"):
        assert e in entries, entries
    st, _, body = get_as(cloud, booted, "/latest/meta-data/instance-id")
    assert body.decode() == "i-" + s["id"][:8]
    assert get_as(cloud, booted, "/latest/meta-data/instance-type")[2] == b"m1.tiny"
    assert get_as(cloud, booted, "/latest/meta-data/ami-launch-index")[2] == b"0"
    assert get_as(cloud, booted, "/latest/meta-data/local-ipv4")[2] == b"10.0.2.15"
    row = cloud.sql("SELECT hostname, availability_zone, reservation_id FROM instances "
                    "WHERE uuid = '%s'" % s["id"])[0]
    assert get_as(cloud, booted, "/latest/meta-data/hostname")[2].decode() == \
        row["hostname"] + ".novalocal"
    assert get_as(cloud, booted, "/2009-04-04/meta-data/placement/availability-zone")[2] \
        .decode() == row["availability_zone"]
    assert get_as(cloud, booted, "/latest/meta-data/reservation-id")[2].decode() == \
        row["reservation_id"]
    assert get_as(cloud, booted, "/latest/meta-data/public-keys")[2].decode() == \
        "0=" + booted["key_name"]
    st, _, body = get_as(cloud, booted, "/latest/meta-data/public-keys/0/openssh-key")
    assert st == 200 and body.decode().strip() == booted["public_key"]
    assert get_as(cloud, booted, "/latest/meta-data/nope")[0] == 404
    assert get_as(cloud, booted, "/2010-01-01/meta-data/")[0] == 404
    # each request is in the metadata log, with the instance
    log = cloud.log("metadata")
    assert '"GET /latest/meta-data/instance-id" status: 200' in log
    assert "[instance: %s]" % s["id"] in log


def test_refusals(cloud, booted):
    s = booted["server"]
    sid, project = s["id"], s["project_id"]
    good = sign(booted["secret"], sid)
    path = "/openstack/latest/meta_data.json"
    st, _, body = md_get(cloud, path, instance_id=sid, tenant_id=project,
                         signature=sign("not-the-secret", sid))
    assert st == 403 and b"Invalid proxy request signature." in body
    # a missing header is Nova's 400
    st, _, body = md_get(cloud, path, instance_id=sid, tenant_id=project)
    assert st == 400 and b"X-Instance-ID-Signature header is missing" in body
    st, _, body = md_get(cloud, path, tenant_id=project, signature=good)
    assert st == 400 and b"X-Instance-ID header is missing" in body
    # another instance's signature
    other = "11111111-2222-4333-8444-555555555555"
    st, _, _ = md_get(cloud, path, instance_id=sid, tenant_id=project,
                      signature=sign(booted["secret"], other))
    assert st == 403
    # signed, but unknown; or not that project's
    st, _, body = md_get(cloud, path, instance_id=other, tenant_id=project,
                         signature=sign(booted["secret"], other))
    assert st == 404, body
    st, _, _ = md_get(cloud, path, instance_id=sid, tenant_id="someone-else", signature=good)
    assert st == 404
    st, h, _ = md_get(cloud, path, method="POST", instance_id=sid, tenant_id=project,
                      signature=good)
    assert st == 405 and h["Allow"] == "GET, HEAD, POST"  # POST: the password only
    log = cloud.log("metadata")
    assert "status: 403" in log and "Invalid proxy request signature." in log


def test_password_posted_once_then_read_and_cleared(cloud, booted):
    """The guest POSTs its password once (Nova's password.py); the owner
    reads it with GET /servers/{id}/os-server-password and clears it."""
    s = booted["server"]
    sid, project = s["id"], s["project_id"]
    good = sign(booted["secret"], sid)
    api = "/compute/v2.1/servers/%s/os-server-password" % sid
    tok = cloud.token()
    assert cloud.request("GET", api, token=tok)[::2] == (200, {"password": ""})
    pw = "Zm9vYmFy" * 12  # 96 bytes, base64 as a guest posts it
    path = "/openstack/2013-10-17/password"
    st, _, body = md_get(cloud, path, "POST", sid, project, good, body=pw)
    assert (st, body) == (200, b"")
    st, _, body = md_get(cloud, "/openstack/latest/password", "GET", sid, project, good)
    assert (st, body) == (200, pw.encode())
    assert cloud.request("GET", api, token=tok)[::2] == (200, {"password": pw})
    st, _, _ = md_get(cloud, path, "POST", sid, project, good, body="again")
    assert st == 409
    st, _, _ = md_get(cloud, path, "POST", sid, project, good, body="x" * 257)
    assert st == 409  # conflict is checked first, as Nova does
    assert cloud.request("DELETE", api, token=tok)[0] == 204
    assert cloud.request("GET", api, token=tok)[::2] == (200, {"password": ""})
    st, _, _ = md_get(cloud, path, "POST", sid, project, good, body="x" * 257)
    assert st == 400
    st, _, body = md_get(cloud, path, "POST", sid, project, good, body="later")
    assert st == 200
    assert cloud.request("GET", api, token=tok)[::2] == (200, {"password": "later"})
    # an unknown server is 404
    st, _, _ = cloud.request("GET", "/compute/v2.1/servers/%s/os-server-password" % unique("x"),
                             token=tok)
    assert st == 404


def test_deleted_server_is_gone(cloud, booted):
    s = cloud.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait",
                  unique("mdd"), "-f", "json")
    sig = sign(booted["secret"], s["id"])
    project = booted["server"]["project_id"]
    assert md_get(cloud, "/latest/meta-data/", instance_id=s["id"], tenant_id=project,
                  signature=sig)[0] == 200
    # no user data, no key: Nova's listings leave them out
    st, _, body = md_get(cloud, "/openstack/latest", instance_id=s["id"], tenant_id=project,
                         signature=sig)
    assert "user_data" not in body.decode().split("\n")
    assert md_get(cloud, "/latest/user-data", instance_id=s["id"], tenant_id=project,
                  signature=sig)[0] == 404
    cloud.cli("server", "delete", "--wait", s["id"])
    assert md_get(cloud, "/latest/meta-data/", instance_id=s["id"], tenant_id=project,
                  signature=sig)[0] == 404


def test_no_secret_trusts_nobody(fresh_cloud):
    c = fresh_cloud("--set", "neutron.metadata_proxy_shared_secret=")
    s = c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait",
              unique("md"), "-f", "json")
    s = c.cli("server", "show", s["id"], "-f", "json")
    st, _, body = md_get(c, "/latest/meta-data/", instance_id=s["id"],
                         tenant_id=s["project_id"], signature=sign("", s["id"]))
    assert st == 403 and b"metadata_proxy_shared_secret is not configured" in body
    assert md_get(c, "/")[0] == 200

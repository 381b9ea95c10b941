"""Cinder's attachments API, write side (microversions 3.27, 3.44, 3.54), on
fake hosts: the real `openstack volume attachment create|set|complete|delete`
(python3-openstackclient 6) for the flow an operator or Nova drives —
create (reserved) -> set (connector: connection_info, attaching) ->
complete (in-use) -> delete (available) — with the volume's status read at
each step, and raw HTTP where the exact answer matters: Cinder's schema
errors, the 400 of a volume that cannot be reserved, 404s, another
project's attachment, the 409 of an attachment the compute service holds."""
import json
import uuid

import pytest

from conftest import unique

MV = "3.44"


@pytest.fixture(scope="module", autouse=True)
def volume_quota(cloud):
    cloud.cli("quota", "set", "--volumes", "100", "--gigabytes", "500", "admin")


@pytest.fixture(scope="module")
def server(cloud):
    """A server for the attachments to name (OSC resolves it through the
    compute API)."""
    return cloud.cli("server", "create", "--wait", "--flavor", "m1.tiny", "--image", "cirros",
                     unique("srv"), "-f", "json")


def volume(cloud, cloud_name="nubo"):
    v = cloud.cli("volume", "create", "--size", "1", unique("vol"), "-f", "json",
                  cloud=cloud_name)
    assert v["status"] == "available", v
    return v["id"]


def vstatus(cloud, vid):
    return cloud.cli("volume", "show", vid, "-f", "json")["status"]


def att_cli(cloud, *args, mv=MV, cloud_name="nubo", check=True):
    return cloud.cli("--os-volume-api-version", mv, "volume", "attachment", *args,
                     cloud=cloud_name, check=check)


_TOKENS = {}


def token_of(cloud, cloud_name="nubo"):
    """(token, project id) of a cloud entry, issued once per module (each
    CLI run is slow on a loaded machine)."""
    if cloud_name not in _TOKENS:
        t = cloud.cli("token", "issue", "-f", "json", cloud=cloud_name)
        _TOKENS[cloud_name] = (t["id"], t["project_id"])
    return _TOKENS[cloud_name]


def api(cloud, method, path, body=None, mv=MV, cloud_name="nubo"):
    tok, proj = token_of(cloud, cloud_name)
    return cloud.request(method, "/volume/v3/%s%s" % (proj, path), body, token=tok,
                         headers={"OpenStack-API-Version": "volume %s" % mv})


def test_create_set_complete_delete_cli(cloud, server):
    vid = volume(cloud)
    a = att_cli(cloud, "create", vid, server["id"], "-f", "json")
    assert a["Volume ID"] == vid and a["Instance ID"] == server["id"], a
    assert a["Status"] == "reserved", a
    aid = a["ID"]
    assert vstatus(cloud, vid) == "reserved"
    # while reserved, nobody else can reserve it (Cinder's 400)
    other = str(uuid.uuid4())
    st, _, body = api(cloud, "POST", "/attachments",
                      {"attachment": {"volume_uuid": vid, "instance_uuid": other}})
    assert st == 400 and body["badRequest"]["message"] == (
        "Invalid volume: Volume %s status must be available or downloading to reserve, but "
        "the current status is reserved." % vid), body

    a = att_cli(cloud, "set", aid, "--host", "fake-host-1", "--mountpoint", "/dev/vdb",
                "--initiator", "iqn.2026-11.test:1", "-f", "json")
    assert a["Status"] == "attaching", a
    assert a["Properties"]["attachment_id"] == aid, a
    st, _, body = api(cloud, "GET", "/attachments/%s" % aid)
    assert st == 200
    shown = body["attachment"]
    info = shown["connection_info"]
    # Cinder's flattened NFS connection info, naming this attachment
    assert info["driver_volume_type"] == "nfs" and info["attachment_id"] == aid, info
    assert info["name"] == "volume-%s" % vid and info["format"] == "raw", info
    assert info["access_mode"] == "rw" and info["export"] and info["mount_point_base"], info
    assert shown["attach_mode"] == "rw" and shown["attached_at"] and shown["detached_at"] == ""
    assert vstatus(cloud, vid) == "attaching"
    row = cloud.sql("SELECT attached_host, mountpoint, connector FROM volume_attachment "
                    "WHERE id = '%s'" % aid)[0]
    assert row["attached_host"] == "fake-host-1" and row["mountpoint"] == "/dev/vdb"
    assert json.loads(row["connector"])["initiator"] == "iqn.2026-11.test:1"

    att_cli(cloud, "complete", aid)
    assert vstatus(cloud, vid) == "in-use"
    listed = att_cli(cloud, "list", "--volume-id", vid, "-f", "json")
    assert [(x["ID"], x["Status"]) for x in listed] == [(aid, "attached")]
    # an in-use volume cannot be deleted while attached
    r = cloud.cli("volume", "delete", vid, check=False)
    assert r.returncode != 0 and "Invalid volume" in r.stderr

    att_cli(cloud, "delete", aid)
    assert vstatus(cloud, vid) == "available"
    assert att_cli(cloud, "list", "--volume-id", vid, "-f", "json") == []
    st, _, body = api(cloud, "GET", "/attachments/%s" % aid)
    assert st == 404
    cloud.cli("volume", "delete", vid)


def test_create_with_connector_and_mode(cloud, server):
    """A connector in the create: connected at once (attaching, connection
    info); 3.54's mode is the record's attach mode."""
    vid = volume(cloud)
    st, _, body = api(cloud, "POST", "/attachments",
                      {"attachment": {"volume_uuid": vid, "instance_uuid": server["id"],
                                      "connector": {"host": "h2", "mountpoint": "/dev/vdc"},
                                      "mode": "ro"}}, mv="3.54")
    assert st == 200, body
    a = body["attachment"]
    assert a["status"] == "attaching" and a["instance"] == server["id"], a
    assert a["attach_mode"] == "ro" and a["connection_info"]["attachment_id"] == a["id"], a
    assert a["connection_info"]["driver_volume_type"] == "nfs"
    assert vstatus(cloud, vid) == "attaching"
    # before 3.54 mode is not in the schema
    st, _, body = api(cloud, "POST", "/attachments",
                      {"attachment": {"volume_uuid": vid, "mode": "ro"}}, mv="3.53")
    assert st == 400 and "Additional properties are not allowed ('mode' was unexpected)" in \
        body["badRequest"]["message"], body
    # os-complete is 3.44
    st, _, body = api(cloud, "POST", "/attachments/%s/action" % a["id"],
                      {"os-complete": None}, mv="3.43")
    assert st == 404, body
    st, _, body = api(cloud, "POST", "/attachments/%s/action" % a["id"], {"os-complete": None})
    assert st == 204, body
    assert vstatus(cloud, vid) == "in-use"
    # delete answers with the volume's attachments left: none
    st, _, body = api(cloud, "DELETE", "/attachments/%s" % a["id"])
    assert st == 200 and body == {"attachments": []}, body
    assert vstatus(cloud, vid) == "available"
    # without a connector, and at 3.27: reserved, attach_mode "null", {} info
    st, _, body = api(cloud, "POST", "/attachments", {"attachment": {"volume_uuid": vid}},
                      mv="3.27")
    assert st == 200, body
    a = body["attachment"]
    assert (a["status"], a["instance"], a["attach_mode"], a["connection_info"]) == \
        ("reserved", None, "null", {}), a
    st, _, body = api(cloud, "DELETE", "/attachments/%s" % a["id"], mv="3.27")
    assert st == 200 and body == {"attachments": []}
    assert vstatus(cloud, vid) == "available"
    cloud.cli("volume", "delete", vid)


def test_same_instance_and_delete_answer(cloud, server):
    """The instance holding the volume may reserve it again (it is moving
    host); deleting one record answers with the other, and the volume
    follows the record left."""
    vid = volume(cloud)
    body = {"attachment": {"volume_uuid": vid, "instance_uuid": server["id"]}}
    st, _, b1 = api(cloud, "POST", "/attachments", body)
    st2, _, b2 = api(cloud, "POST", "/attachments", body)
    assert st == 200 and st2 == 200, (b1, b2)
    a1, a2 = b1["attachment"]["id"], b2["attachment"]["id"]
    assert vstatus(cloud, vid) == "reserved"
    st, _, body = api(cloud, "DELETE", "/attachments/%s" % a1)
    assert st == 200 and body == {"attachments": [
        {"id": a2, "status": "reserved", "instance": server["id"], "volume_id": vid}]}, body
    assert vstatus(cloud, vid) == "reserved"
    st, _, body = api(cloud, "DELETE", "/attachments/%s" % a2)
    assert st == 200 and body == {"attachments": []}
    assert vstatus(cloud, vid) == "available"
    cloud.cli("volume", "delete", vid)


def test_errors(cloud):
    vid = volume(cloud)
    missing = str(uuid.uuid4())
    # an unknown volume: Cinder's 404
    st, _, body = api(cloud, "POST", "/attachments", {"attachment": {"volume_uuid": missing}})
    assert st == 404 and body["itemNotFound"]["message"] == \
        "Volume %s could not be found." % missing, body
    # the schema: volume_uuid required, a uuid; instance_uuid a uuid; no extras
    cases = [
        ({"attachment": {}},
         "Invalid input for field/attribute attachment. Value: {}. 'volume_uuid' is a "
         "required property"),
        ({"attachment": {"volume_uuid": "abc"}},
         "Invalid input for field/attribute volume_uuid. Value: abc. 'abc' is not a 'uuid'"),
        ({"attachment": {"volume_uuid": vid, "instance_uuid": 5}},
         "Invalid input for field/attribute instance_uuid. Value: 5. 5 is not of type "
         "'string'"),
        ({"attachment": {"volume_uuid": vid, "connector": "x"}},
         "Invalid input for field/attribute connector. Value: x. 'x' is not of type 'object', "
         "'null'"),
        ({"attachment": {"volume_id": vid}},
         "Invalid input for field/attribute attachment. Value: {'volume_id': '%s'}. "
         "'volume_uuid' is a required property" % vid),
        ({"volume_uuid": vid}, "'attachment' is a required property"),
        ({"attachment": "x"},
         "Invalid input for field/attribute attachment. Value: x. 'x' is not of type "
         "'object'"),
    ]
    for req, msg in cases:
        st, _, body = api(cloud, "POST", "/attachments", req)
        assert st == 400 and body["badRequest"]["message"] == msg, (req, body)
    st, _, body = api(cloud, "POST", "/attachments",
                      {"attachment": {"volume_uuid": vid, "mode": "rx"}}, mv="3.54")
    assert st == 400 and body["badRequest"]["message"] == (
        "Invalid input for field/attribute mode. Value: rx. 'rx' is not one of ['rw', 'ro']")
    # below 3.27 there is no such API
    st, _, body = api(cloud, "POST", "/attachments", {"attachment": {"volume_uuid": vid}},
                      mv="3.26")
    assert st == 404
    # an unknown attachment
    for method, path, req in [("PUT", "/attachments/%s" % missing,
                               {"attachment": {"connector": {"host": "h"}}}),
                              ("DELETE", "/attachments/%s" % missing, None),
                              ("POST", "/attachments/%s/action" % missing,
                               {"os-complete": None})]:
        st, _, body = api(cloud, method, path, req)
        assert st == 404 and body["itemNotFound"]["message"] == (
            "Volume attachment could not be found with filter: attachment_id = %s." % missing), \
            (method, body)
    # update: a non-empty connector object is required
    st, _, body = api(cloud, "POST", "/attachments", {"attachment": {"volume_uuid": vid}})
    aid = body["attachment"]["id"]
    for req, msg in [
            ({"attachment": {}}, "Invalid input for field/attribute attachment. Value: {}. "
             "'connector' is a required property"),
            ({"attachment": {"connector": {}}}, "Invalid input for field/attribute connector. "
             "Value: {}. {} does not have enough properties")]:
        st, _, body = api(cloud, "PUT", "/attachments/%s" % aid, req)
        assert st == 400 and body["badRequest"]["message"] == msg, body
    st, _, body = api(cloud, "POST", "/attachments/%s/action" % aid, {"os-foo": None})
    assert st == 400 and body["badRequest"]["message"].startswith(
        "There is no such action: os-foo"), body
    assert vstatus(cloud, vid) == "reserved"
    # a volume in error cannot be attached
    api(cloud, "DELETE", "/attachments/%s" % aid)
    cloud.cli("volume", "set", "--state", "error", vid)
    st, _, body = api(cloud, "POST", "/attachments", {"attachment": {"volume_uuid": vid}})
    assert st == 400 and body["badRequest"]["message"] == (
        "Invalid volume: Volume attachments can not be created if the volume is in an error "
        "state. The Volume %s currently has a status of: error " % vid), body
    cloud.cli("volume", "set", "--state", "available", vid)
    cloud.cli("volume", "delete", vid)


def test_another_project(cloud, server):
    """Another project's attachment is not found; its volume cannot be
    reserved; its own attachments are its own."""
    vid = volume(cloud)
    st, _, body = api(cloud, "POST", "/attachments", {"attachment": {"volume_uuid": vid}})
    aid = body["attachment"]["id"]
    for method, path, req in [("GET", "/attachments/%s" % aid, None),
                              ("PUT", "/attachments/%s" % aid,
                               {"attachment": {"connector": {"host": "h"}}}),
                              ("POST", "/attachments/%s/action" % aid, {"os-complete": None}),
                              ("DELETE", "/attachments/%s" % aid, None)]:
        st, _, body = api(cloud, method, path, req, cloud_name="nubo-demo")
        assert st == 404, (method, body)
    st, _, body = api(cloud, "POST", "/attachments", {"attachment": {"volume_uuid": vid}},
                      cloud_name="nubo-demo")
    assert st == 404 and body["itemNotFound"]["message"] == "Volume %s could not be found." % vid
    assert vstatus(cloud, vid) == "reserved"
    # the demo project's own volume and attachment, through the CLI
    dvid = volume(cloud, cloud_name="nubo-demo")
    st, _, body = api(cloud, "POST", "/attachments", {"attachment": {"volume_uuid": dvid}},
                      cloud_name="nubo-demo")
    assert st == 200, body
    did = body["attachment"]["id"]
    mine = att_cli(cloud, "list", "-f", "json", cloud_name="nubo-demo")
    assert [x["ID"] for x in mine] == [did]
    att_cli(cloud, "delete", did, cloud_name="nubo-demo")
    cloud.cli("volume", "delete", dvid, cloud="nubo-demo")
    api(cloud, "DELETE", "/attachments/%s" % aid)
    cloud.cli("volume", "delete", vid)


def test_compute_attachment_is_the_compute_apis(cloud, server):
    """An attachment the compute service made (server add volume) is
    detached through the compute API: Cinder's 409; and the compute side's
    attach and detach keep working with the records this API shows."""
    vid = volume(cloud)
    cloud.cli("server", "add", "volume", server["id"], vid)
    deadline = __import__("time").time() + 60
    while vstatus(cloud, vid) != "in-use":
        assert __import__("time").time() < deadline
    listed = att_cli(cloud, "list", "--volume-id", vid, "-f", "json")
    assert [(x["Server ID"], x["Status"]) for x in listed] == [(server["id"], "attached")]
    aid = listed[0]["ID"]
    st, _, body = api(cloud, "GET", "/attachments/%s" % aid)
    assert body["attachment"]["connection_info"]["attachment_id"] == aid, body
    st, _, body = api(cloud, "DELETE", "/attachments/%s" % aid)
    assert st == 409 and body["conflictingRequest"]["message"] == (
        "Detach volume from instance %s using the Compute API" % server["id"]), body
    assert vstatus(cloud, vid) == "in-use"
    cloud.cli("server", "remove", "volume", server["id"], vid)
    deadline = __import__("time").time() + 60
    while vstatus(cloud, vid) != "available":
        assert __import__("time").time() < deadline
    assert att_cli(cloud, "list", "--volume-id", vid, "-f", "json") == []
    cloud.cli("volume", "delete", vid)

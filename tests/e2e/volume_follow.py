"""Checks shared by the move tests: a server's volume attachments follow it
(the volume service's records and the block device mapping, as `openstack
volume show` and `openstack volume attachment list` read them)."""
import json

V327 = {"OpenStack-API-Version": "volume 3.27"}


def mapping(c, sid, vid):
    """The server's live block device mapping of volume vid."""
    (row,) = c.sql("SELECT attachment_id, connection_info FROM block_device_mapping WHERE "
                   "instance_uuid = '%s' AND volume_id = '%s' AND deleted = 0" % (sid, vid))
    return row


def assert_attached_on(c, token, sid, vid, host):
    """Volume vid is in-use with exactly one attachment, the mapping's, to
    sid on host, whose connection_info names it; returns the mapping."""
    (proj,) = c.sql("SELECT project_id FROM volumes WHERE id = '%s'" % vid)
    base = "/volume/v3/%s" % proj["project_id"]
    st, _, b = c.request("GET", "%s/volumes/%s" % (base, vid), token=token)
    assert st == 200, b
    vol = b["volume"]
    bdm = mapping(c, sid, vid)
    assert vol["status"] == "in-use", vol
    assert [(a["server_id"], a["host_name"], a["attachment_id"]) for a in vol["attachments"]] == \
        [(sid, host, bdm["attachment_id"])], vol["attachments"]
    st, _, b = c.request("GET", "%s/attachments/detail?volume_id=%s" % (base, vid), token=token,
                         headers=V327)
    assert st == 200, b
    (att,) = b["attachments"]
    assert (att["id"], att["status"], att["instance"]) == (bdm["attachment_id"], "attached", sid)
    assert att["connection_info"]["attachment_id"] == bdm["attachment_id"]
    assert json.loads(bdm["connection_info"])["driver_volume_type"] == "nfs"
    live = c.sql("SELECT attached_host FROM volume_attachment WHERE volume_id = '%s' AND "
                 "deleted = 0" % vid)
    assert live == [{"attached_host": host}], live
    return bdm

"""Compute API odds and ends that clients rely on, driven with the real
`openstack` CLI and openstacksdk's keystoneauth session:

- GET /servers/{id}/ips[/{label}] (Nova's ips.py): the server view's
  addresses reduced to version/addr, Nova's 404s;
- Nova's image proxy (/images, /images/detail, /images/{id}, metadata; gone
  above 2.35, metadata above 2.38) over the Image service, cross-checked with
  `openstack image show`;
- trailing slashes: a resource path with one is a 404 as in Nova, Glance,
  Cinder and Placement, while version discovery with one still answers (the
  CLIs' own discovery keeps working)."""
import json

import pytest

from conftest import unique


def boot(cloud, cloud_name="nubo"):
    """A server with addresses when the cloud has networks: on "private" if
    there is one (with several networks Nova cannot choose), else none."""
    nets = cloud.cli("network", "list", "-f", "json", cloud=cloud_name, check=False)
    names = []
    if not isinstance(nets, str) and nets.returncode == 0 and nets.stdout.strip():
        names = [n["Name"] for n in json.loads(nets.stdout)]
    extra = []
    if names:
        extra = ["--network", "private" if "private" in names else names[0]]
    return cloud.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait",
                     *extra, unique("img"), "-f", "json", cloud=cloud_name)


def req(conn, service, method, path, mv=None, **kw):
    """A request through the sdk's keystoneauth adapter for service; returns
    (status, parsed body or None)."""
    adapter = getattr(conn, service)
    if mv:
        kw["microversion"] = mv
    r = adapter.request(path, method, raise_exc=False, **kw)
    try:
        body = r.json() if r.content else None
    except ValueError:
        body = r.text
    return r.status_code, body


@pytest.fixture(scope="module")
def server(cloud):
    s = boot(cloud)
    yield s
    cloud.cli("server", "delete", "--wait", s["id"], check=False)


@pytest.fixture(scope="module")
def snapshot(cloud, server):
    name = unique("snap")
    img = cloud.cli("server", "image", "create", "--wait", "--name", name, server["id"],
                    "-f", "json")
    yield img
    cloud.cli("image", "delete", img["id"], check=False)


def view_addresses(cloud, sid):
    conn = cloud.sdk()
    st, body = req(conn, "compute", "GET", "/servers/%s" % sid)
    assert st == 200
    return body["server"]["addresses"]


def test_ips_are_the_server_view_addresses(cloud, server):
    conn = cloud.sdk()
    st, body = req(conn, "compute", "GET", "/servers/%s/ips" % server["id"])
    assert st == 200, body
    view = view_addresses(cloud, server["id"])
    expect = {label: [{"version": ip["version"], "addr": ip["addr"]} for ip in ips]
              for label, ips in view.items()}
    assert body == {"addresses": expect}
    for label, ips in expect.items():
        st, one = req(conn, "compute", "GET", "/servers/%s/ips/%s" % (server["id"], label))
        assert st == 200 and one == {label: ips}
    st, body = req(conn, "compute", "GET", "/servers/%s/ips/%s" % (server["id"], unique("nonet")))
    assert st == 404
    assert body["itemNotFound"]["message"] == "Instance is not a member of specified network"


def test_ips_of_another_projects_server_is_404(cloud, server):
    demo = cloud.sdk("nubo-demo")
    st, body = req(demo, "compute", "GET", "/servers/%s/ips" % server["id"])
    assert st == 404
    assert body["itemNotFound"]["message"] == "Instance %s could not be found." % server["id"]
    st, _ = req(demo, "compute", "GET", "/servers/%s/ips/x" % unique("nosuch"))
    assert st == 404


def test_image_proxy_view_matches_glance(cloud, server, snapshot):
    conn = cloud.sdk()
    glance = cloud.cli("image", "show", snapshot["id"], "-f", "json")
    st, body = req(conn, "compute", "GET", "/images/%s" % snapshot["id"], mv="2.35")
    assert st == 200, body
    img = body["image"]
    assert img["id"] == snapshot["id"] and img["name"] == glance["name"]
    assert img["status"] == "ACTIVE" and img["progress"] == 100
    assert img["OS-EXT-IMG-SIZE:size"] == glance["size"]
    assert img["minDisk"] == glance["min_disk"] and img["minRam"] == glance["min_ram"]
    assert img["metadata"]["instance_uuid"] == server["id"]
    assert img["metadata"]["image_type"] == "snapshot"
    assert "disk_format" not in img["metadata"]
    assert img["server"]["id"] == server["id"]
    assert img["server"]["links"][0]["href"].endswith("/compute/v2.1/servers/" + server["id"])
    rels = [link["rel"] for link in img["links"]]
    assert rels == ["self", "bookmark", "alternate"]
    assert img["links"][2]["type"] == "application/vnd.openstack.image"
    assert img["created"].endswith("Z") and img["updated"].endswith("Z")
    # the proxy is gone from 2.36 (metadata from 2.39)
    for path in ("/images", "/images/detail", "/images/%s" % snapshot["id"]):
        st, body = req(conn, "compute", "GET", path, mv="2.36")
        assert st == 404, path
    st, _ = req(conn, "compute", "GET", "/images/%s/metadata" % snapshot["id"], mv="2.38")
    assert st == 200
    st, _ = req(conn, "compute", "GET", "/images/%s/metadata" % snapshot["id"], mv="2.39")
    assert st == 404
    st, body = req(conn, "compute", "GET", "/images/%s" % unique("nosuch"), mv="2.35")
    assert st == 404 and body["itemNotFound"]["message"] == "Image not found."


def test_image_proxy_list_filters_and_paging(cloud, server, snapshot):
    conn = cloud.sdk()
    st, body = req(conn, "compute", "GET", "/images/detail?server=%s&type=snapshot" % server["id"])
    assert st == 200
    assert [i["id"] for i in body["images"]] == [snapshot["id"]]
    st, body = req(conn, "compute", "GET", "/images?name=%s" % snapshot["name"])
    assert [i["id"] for i in body["images"]] == [snapshot["id"]]
    assert set(body["images"][0]) == {"id", "name", "links"}
    st, body = req(conn, "compute", "GET", "/images/detail?status=ACTIVE")
    assert snapshot["id"] in [i["id"] for i in body["images"]]
    st, body = req(conn, "compute", "GET", "/images/detail?status=SAVING")
    assert snapshot["id"] not in [i["id"] for i in body["images"]]
    st, body = req(conn, "compute", "GET", "/images/detail?changes-since=2999-01-01T00:00:00Z")
    assert st == 200 and body["images"] == []
    # paging: the image list the CLI sees through Glance, one at a time
    glance_ids = [i["ID"] for i in cloud.cli("image", "list", "-f", "json")]
    seen, marker = [], None
    while True:
        q = "/images?limit=1" + ("&marker=%s" % marker if marker else "")
        st, body = req(conn, "compute", "GET", q)
        assert st == 200
        if not body["images"]:
            assert "images_links" not in body
            break
        assert "marker=%s" % body["images"][0]["id"] in body["images_links"][0]["href"]
        seen.append(body["images"][0]["id"])
        marker = seen[-1]
    assert sorted(seen) == sorted(glance_ids)
    st, body = req(conn, "compute", "GET", "/images?limit=abc")
    assert st == 400
    assert body["badRequest"]["message"] == "Invalid input received: limit must be an integer"


def test_image_metadata_crud_reaches_glance(cloud, snapshot):
    conn = cloud.sdk()
    iid = snapshot["id"]
    base = "/images/%s/metadata" % iid

    def glance_props():
        return cloud.cli("image", "show", iid, "-f", "json")["properties"]

    st, body = req(conn, "compute", "PUT", base + "/color", json={"meta": {"color": "blue"}})
    assert st == 200 and body == {"meta": {"color": "blue"}}
    assert glance_props()["color"] == "blue"
    st, body = req(conn, "compute", "GET", base + "/color")
    assert body == {"meta": {"color": "blue"}}
    st, body = req(conn, "compute", "PUT", base + "/color", json={"meta": {"size": "L"}})
    assert st == 400 and body["badRequest"]["message"] == "Request body and URI mismatch"
    st, body = req(conn, "compute", "POST", base, json={"metadata": {"shape": "round"}})
    assert st == 200
    assert body["metadata"]["shape"] == "round" and body["metadata"]["color"] == "blue"
    assert body["metadata"]["instance_uuid"]
    st, body = req(conn, "compute", "DELETE", base + "/shape")
    assert st == 204
    assert "shape" not in glance_props()
    st, body = req(conn, "compute", "DELETE", base + "/shape")
    assert st == 404 and body["itemNotFound"]["message"] == "Invalid metadata key"
    st, body = req(conn, "compute", "GET", base + "/shape")
    assert st == 404
    # Nova's metadata_items quota (128) answers 403 before Glance's 413
    big = {"k%d" % i: "v" for i in range(129)}
    st, body = req(conn, "compute", "PUT", base, json={"metadata": big})
    assert st == 403 and body["forbidden"]["message"] == "Image metadata limit exceeded"
    assert glance_props()["color"] == "blue"
    st, body = req(conn, "compute", "PUT", base, json={"metadata": {"a": "1"}})
    assert st == 200 and body == {"metadata": {"a": "1"}}
    props = glance_props()
    assert props.get("a") == "1" and "color" not in props and "instance_uuid" not in props
    st, body = req(conn, "compute", "POST", base, json={"metadata": {"a": 1}})
    assert st == 400
    # another project cannot see the private snapshot
    demo = cloud.sdk("nubo-demo")
    st, body = req(demo, "compute", "GET", base)
    assert st == 404 and body["itemNotFound"]["message"] == "Image not found."


def test_image_proxy_delete(cloud):
    image = cloud.cli("image", "create", "--private", "--disk-format", "raw",
                      "--container-format", "bare", unique("del"), "-f", "json")
    conn = cloud.sdk()
    demo = cloud.sdk("nubo-demo")
    st, _ = req(demo, "compute", "DELETE", "/images/%s" % image["id"])
    assert st == 404
    cloud.cli("image", "set", "--protected", image["id"])
    st, body = req(conn, "compute", "DELETE", "/images/%s" % image["id"])
    assert st == 403
    assert body["forbidden"]["message"] == "You are not allowed to delete the image."
    cloud.cli("image", "set", "--unprotected", image["id"])
    st, body = req(conn, "compute", "DELETE", "/images/%s" % image["id"])
    assert st == 204
    p = cloud.cli("image", "show", image["id"], check=False)
    assert p.returncode != 0
    st, body = req(conn, "compute", "DELETE", "/images/%s" % image["id"])
    assert st == 404 and body["itemNotFound"]["message"] == "Image not found."


def test_trailing_slash_is_a_different_resource(cloud):
    conn = cloud.sdk()
    project = conn.current_project_id
    base = cloud.url
    sess = conn.session
    for method, path in (("GET", "/volume/v3/%s/volumes/" % project),
                         ("GET", "/image/v2/images/"),
                         ("DELETE", "/image/v2/images/"),
                         ("GET", "/compute/v2.1/servers/"),
                         ("GET", "/compute/v2.1/flavors/"),
                         ("GET", "/placement/resource_providers/")):
        r = sess.request(base + path, method, raise_exc=False,
                         headers={"OpenStack-API-Version": "placement 1.10"})
        assert r.status_code == 404, (method, path, r.status_code)
    for path in ("/volume/v3/%s/volumes" % project, "/image/v2/images",
                 "/compute/v2.1/servers", "/placement/resource_providers"):
        r = sess.request(base + path, "GET", raise_exc=False)
        assert r.status_code == 200, (path, r.status_code)
    # version discovery answers with and without the slash (no token needed)
    import urllib.request
    import urllib.error
    for path, status in (("/compute/", 200), ("/compute/v2.1/", 200), ("/identity/", 300),
                         ("/identity/v3/", 200), ("/image/", 300), ("/image/v2/", 200),
                         ("/volume/", 300), ("/volume/v3/", 200), ("/placement/", 200)):
        try:
            with urllib.request.urlopen(base + path) as r:
                got = r.status
                json.loads(r.read())
        except urllib.error.HTTPError as e:
            got = e.code
            json.loads(e.read())
        assert got == status, (path, got)
    # Keystone normalizes URLs: a trailing slash does not matter there
    r = sess.request(base + "/identity/v3/projects/", "GET", raise_exc=False)
    assert r.status_code == 200
    # the CLIs' own discovery still works
    assert cloud.cli("server", "list", "-f", "json") is not None
    assert cloud.cli("volume", "list", "-f", "json") is not None
    assert cloud.cli("image", "list", "-f", "json")
    assert cloud.cli("resource", "provider", "list", "-f", "json")


def test_create_image_metadata_wins_over_nova_properties(cloud, server):
    """createImage's metadata goes over instance_uuid/user_id/image_type
    (compute_utils.create_image), as Tempest's test_create_delete_image
    checks, and the proxy shows the snapshot until it is deleted."""
    conn = cloud.sdk()
    st, body = req(conn, "compute", "POST", "/servers/%s/action" % server["id"], mv="2.45",
                   json={"createImage": {"name": unique("meta"),
                                         "metadata": {"image_type": "test"}}})
    assert st == 202, body
    iid = body["image_id"]
    import time
    deadline = time.time() + 60
    while True:
        st, body = req(conn, "compute", "GET", "/images/%s" % iid)
        assert st == 200
        if body["image"]["status"] != "SAVING" or time.time() > deadline:
            break
        time.sleep(0.5)
    img = body["image"]
    assert img["status"] == "ACTIVE"
    assert img["metadata"]["image_type"] == "test"
    assert img["metadata"]["instance_uuid"] == server["id"]
    st, _ = req(conn, "compute", "DELETE", "/images/%s" % iid)
    assert st == 204
    st, _ = req(conn, "compute", "GET", "/images/%s" % iid)
    assert st == 404

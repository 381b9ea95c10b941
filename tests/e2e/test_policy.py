"""The policy matrix: every write route of every service (from `nubo policy
list --json`, the table the API enforces) x four personas -> the status the
rule implies. The personas: a reader of project demo, a member of demo, a
member of another project, and the admin. Target objects are made in demo
first, so a member of the other project must get 404 (cannot see them) or
403 (sees them, may not change them), never a success.

Expected, per rule:
  admin   reader, member, other member: 403 naming the rule; admin: not 403
  member  reader: 403 naming the rule; demo member and admin: not 403;
          other member: 403/404 on demo's objects, not 403 on collections
  any     nobody is refused by the gate (key pairs, own token, own password)

The bodies are minimal: what matters is who passes the gate, so 400 for an
incomplete body counts as "not refused". Routes are called with plain REST
through one cloud; the whole matrix takes a few seconds.

Also the concrete holes of networking under a reader (and Neutron's 403 for
a visible shared network another project owns)."""
import json
import subprocess
import uuid

import pytest

from conftest import ADMIN_PASSWORD, NUBO_BIN, running_cloud

WRITE = ("POST", "PUT", "PATCH", "DELETE")
PASSWORD = "policy-e2e-secret"


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    yield from running_cloud(tmp_path_factory, "policy")


def login(cloud, user, password, project):
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": user, "domain": {"id": "default"}, "password": password}}},
        "scope": {"project": {"name": project, "domain": {"id": "default"}}}}}
    st, hdrs, out = cloud.request("POST", "/identity/v3/auth/tokens", body)
    assert st == 201, out
    return hdrs["X-Subject-Token"], out["token"]


def call(cloud, tok, method, path, body=None, headers=None, expect=None):
    st, hdrs, out = cloud.request(method, path, body, token=tok, headers=headers)
    if expect is not None:
        assert st == expect, (method, path, st, out)
    return st, out


class World:
    """The personas and the objects the matrix addresses."""


@pytest.fixture(scope="module")
def world(cloud):
    w = World()
    w.admin, tok = login(cloud, "admin", ADMIN_PASSWORD, "admin")
    w.admin_project = tok["project"]["id"]
    a = w.admin

    def mk(path, key, body, t=None):
        _, out = call(cloud, t or a, "POST", path, {key: body})
        assert out and key in out, (path, out)
        return out[key]["id"]

    roles = {r["name"]: r["id"] for r in call(cloud, a, "GET", "/identity/v3/roles")[1]["roles"]}
    projects = {p["name"]: p["id"]
                for p in call(cloud, a, "GET", "/identity/v3/projects")[1]["projects"]}
    w.demo = projects["demo"]
    w.other = mk("/identity/v3/projects", "project", {"name": "other", "domain_id": "default"})
    w.users = {}
    for user, project, role in (("pol-reader", "demo", "reader"), ("pol-member", "demo", "member"),
                                ("pol-other", "other", "member")):
        uid = mk("/identity/v3/users", "user", {"name": user, "password": PASSWORD,
                                                "domain_id": "default"})
        pid = w.demo if project == "demo" else w.other
        call(cloud, a, "PUT", "/identity/v3/projects/%s/users/%s/roles/%s"
             % (pid, uid, roles[role]), expect=204)
        w.users[user] = uid
    w.reader = login(cloud, "pol-reader", PASSWORD, "demo")[0]
    w.member = login(cloud, "pol-member", PASSWORD, "demo")[0]
    w.foreign = login(cloud, "pol-other", PASSWORD, "other")[0]
    m = w.member

    # demo's objects, made by its member
    net = mk("/networking/v2.0/networks", "network", {"name": "pol-net"}, m)
    sub = mk("/networking/v2.0/subnets", "subnet", {
        "network_id": net, "cidr": "10.77.0.0/24", "ip_version": 4}, m)
    port = mk("/networking/v2.0/ports", "port", {"network_id": net}, m)
    sg = mk("/networking/v2.0/security-groups", "security_group", {"name": "pol-sg"}, m)
    rule = mk("/networking/v2.0/security-group-rules", "security_group_rule", {
        "security_group_id": sg, "direction": "ingress"}, m)
    router = mk("/networking/v2.0/routers", "router", {"name": "pol-router"}, m)
    ext = mk("/networking/v2.0/networks", "network", {"name": "pol-ext",
                                                      "router:external": True})
    mk("/networking/v2.0/subnets", "subnet", {"network_id": ext, "cidr": "203.0.113.48/28",
                                              "ip_version": 4})
    fip = mk("/networking/v2.0/floatingips", "floatingip", {"floating_network_id": ext}, m)
    pool = mk("/networking/v2.0/subnetpools", "subnetpool", {
        "name": "pol-pool", "prefixes": ["10.78.0.0/16"]}, m)
    vol = mk("/volume/v3/%s/volumes" % w.demo, "volume", {"size": 1}, m)
    snap = mk("/volume/v3/%s/snapshots" % w.demo, "snapshot", {"volume_id": vol}, m)
    _, img = call(cloud, m, "POST", "/image/v2/images", {
        "name": "pol-img", "disk_format": "raw", "container_format": "bare"}, expect=201)
    st, _, _ = cloud.request("PUT", "/image/v2/images/%s/file" % img["id"], token=m,
                             headers={"Content-Type": "application/octet-stream"},
                             raw=b"\0" * 65536)
    assert st == 204
    call(cloud, m, "POST", "/image/v2/images/%s/members" % img["id"], {"member": w.other},
         expect=200)
    flavors = call(cloud, m, "GET", "/compute/v2.1/flavors")[1]["flavors"]
    st, srv = call(cloud, m, "POST", "/compute/v2.1/servers", {"server": {
        "name": "pol-srv", "flavorRef": flavors[0]["id"], "imageRef": img["id"],
        "networks": "none"}}, headers={"OpenStack-API-Version": "compute 2.37"})
    assert st == 202, srv
    group = mk("/compute/v2.1/os-server-groups", "server_group", {
        "name": "pol-group", "policies": ["affinity"]}, m)

    # admin-only objects, the admin's own to break
    flavor = mk("/compute/v2.1/flavors", "flavor", {
        "name": "pol-flavor", "ram": 64, "vcpus": 1, "disk": 1})
    agg = mk("/compute/v2.1/os-aggregates", "aggregate", {"name": "pol-agg"})
    domain = mk("/identity/v3/domains", "domain", {"name": "pol-domain"})
    scratch_project = mk("/identity/v3/projects", "project", {"name": "pol-scratch",
                                                             "domain_id": "default"})
    scratch_user = mk("/identity/v3/users", "user", {"name": "pol-scratch",
                                                     "domain_id": "default"})
    scratch_role = mk("/identity/v3/roles", "role", {"name": "pol-scratch"})
    st, rp = call(cloud, a, "POST", "/placement/resource_providers", {"name": "pol-rp"},
                  headers={"OpenStack-API-Version": "placement 1.20"})
    assert st == 200, rp

    random = str(uuid.uuid4())
    w.params = {
        "network_id": net, "subnet_id": sub, "port_id": port, "security_group_id": sg,
        "security_group_rule_id": rule, "router_id": router, "subnetpool_id": pool,
        "floatingip_id": fip, "floating_ip_id": fip, "port_forwarding_id": str(uuid.uuid4()),
        "volume_id": vol, "snapshot_id": snap, "image_id": img["id"], "server_id": srv["server"]["id"],
        "group_id": group, "flavor_id": flavor, "aggregate_id": agg, "domain_id": domain,
        "user_id": scratch_user, "role_id": scratch_role, "uuid": rp["uuid"],
        "target_project_id": w.demo, "key": "k1", "tag": "t1", "member_id": w.other,
        "resource_class": "VCPU", "name": "CUSTOM_POL", "keypair_name": "pol-nokey",
        "consumer_uuid": random, "service_id": random, "attachment_id": random,
        "message_id": random, "migration_id": 1, "agent_id": random, "host_name": "fake-1",
        "id": "default",
    }
    w.projects = {w.reader: w.demo, w.member: w.demo, w.foreign: w.other, a: w.admin_project}
    w.own_user = {w.reader: w.users["pol-reader"], w.member: w.users["pol-member"],
                  w.foreign: w.users["pol-other"], a: None}
    w.scratch_project = scratch_project
    return w


def policy_table():
    out = subprocess.run([NUBO_BIN, "policy", "list", "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def fill(w, tok, entry):
    """The concrete path for entry as persona tok: demo's objects, the
    caller's own project in a Cinder URL, the caller's own user for the
    self-service identity calls."""
    path = entry["path"]
    for name, value in w.params.items():
        path = path.replace("{%s}" % name, str(value))
    if path.startswith("/volume/"):
        path = path.replace("{project_id}", w.projects[tok])
    elif path.startswith("/identity/"):
        path = path.replace("{project_id}", w.scratch_project)
        if entry["rule"] == "any" and w.own_user[tok]:
            path = path.replace(w.params["user_id"], w.own_user[tok])
    else:  # quotas of demo
        path = path.replace("{project_id}", w.demo)
    assert "{" not in path, path
    return path


def bodies(w):
    """Valid bodies for the object routes whose services check the body
    before they look the object up (Nova's and Cinder's schemas, Neutron's
    resource key), so the other project's member reaches the ownership
    check. Keyed by "METHOD pattern"; a value is (body, headers, raw)."""
    meta = ({"metadata": {"a": "b"}}, None, None)
    one = ({"meta": {"k1": "v"}}, None, None)
    c, v, n = "/compute/v2.1", "/volume/v3/{project_id}", "/networking/v2.0"
    patch = {"Content-Type": "application/openstack-images-v2.1-json-patch"}
    return {
        "PUT %s/servers/{server_id}" % c: ({"server": {"name": "x"}}, None, None),
        "POST %s/servers/{server_id}/action" % c: ({"os-stop": None}, None, None),
        "POST %s/servers/{server_id}/metadata" % c: meta,
        "PUT %s/servers/{server_id}/metadata" % c: meta,
        "PUT %s/servers/{server_id}/metadata/{key}" % c: one,
        "POST %s/images/{image_id}/metadata" % c: meta,
        "PUT %s/images/{image_id}/metadata" % c: meta,
        "PUT %s/images/{image_id}/metadata/{key}" % c: one,
        "POST %s/servers/{server_id}/os-volume_attachments" % c: (
            {"volumeAttachment": {"volumeId": w.params["volume_id"]}}, None, None),
        # 2.85: an update of the attachment; below, the same body is a swap (admin)
        "PUT %s/servers/{server_id}/os-volume_attachments/{volume_id}" % c: (
            {"volumeAttachment": {"volumeId": w.params["volume_id"],
                                  "delete_on_termination": True}},
            {"OpenStack-API-Version": "compute 2.85"}, None),
        "PATCH /image/v2/images/{image_id}": (
            [{"op": "add", "path": "/pol", "value": "x"}], patch, None),
        "PUT /image/v2/images/{image_id}/file": (
            None, {"Content-Type": "application/octet-stream"}, b"\0" * 512),
        "POST /image/v2/images/{image_id}/members": ({"member": w.other}, None, None),
        "PUT /image/v2/images/{image_id}/members/{member_id}": (
            {"status": "accepted"}, None, None),
        "PUT %s/volumes/{volume_id}" % v: ({"volume": {"name": "x"}}, None, None),
        "POST %s/volumes/{volume_id}/action" % v: ({"os-extend": {"new_size": 2}}, None, None),
        "PUT %s/snapshots/{snapshot_id}" % v: ({"snapshot": {"name": "x"}}, None, None),
        "POST %s/attachments/{attachment_id}/action" % v: ({"os-complete": {}}, None, None),
        "PUT %s/networks/{network_id}" % n: ({"network": {"name": "x"}}, None, None),
        "PUT %s/subnets/{subnet_id}" % n: ({"subnet": {"name": "x"}}, None, None),
        "PUT %s/ports/{port_id}" % n: ({"port": {"name": "x"}}, None, None),
        "PUT %s/security-groups/{security_group_id}" % n: (
            {"security_group": {"name": "x"}}, None, None),
        "PUT %s/routers/{router_id}" % n: ({"router": {"name": "x"}}, None, None),
        "PUT %s/routers/{router_id}/add_router_interface" % n: (
            {"subnet_id": w.params["subnet_id"]}, None, None),
        "PUT %s/routers/{router_id}/remove_router_interface" % n: (
            {"subnet_id": w.params["subnet_id"]}, None, None),
        "PUT %s/floatingips/{floatingip_id}" % n: ({"floatingip": {"description": "x"}}, None,
                                                   None),
        "PUT %s/subnetpools/{subnetpool_id}" % n: ({"subnetpool": {"name": "x"}}, None, None),
        # Keystone deletes only a disabled domain
        "PATCH /identity/v3/domains/{domain_id}": ({"domain": {"enabled": False}}, None, None),
    }


def is_collection(entry):
    """A route whose only parameters name a project: it acts in the caller's
    own project, not on one of demo's objects."""
    params = [s for s in entry["path"].split("/") if s.startswith("{")]
    return all(p in ("{project_id}", "{target_project_id}") for p in params)


# Where the object decides beyond the role: an image member's status is set
# by the member project (here the other project), not by the image's owner.
OBJECT_RULES = {
    "PUT /image/v2/images/{image_id}/members/{member_id}": {"member": {403},
                                                            "other-member": None},
}


def expected(w, tok, entry):
    """The set of statuses the rule allows for persona tok (None: any status
    but 403)."""
    who = {w.reader: "reader", w.member: "member", w.foreign: "other-member"}.get(tok)
    special = OBJECT_RULES.get("%s %s" % (entry["method"], entry["path"]), {})
    if who in special:
        return special[who]
    rule = entry["rule"]
    if rule == "any" or tok == w.admin:
        return None
    if rule == "admin":
        return {403}
    assert rule == "member", entry
    if tok == w.reader:
        return {403}
    if tok == w.foreign and not is_collection(entry):
        if entry["path"].startswith("/networking/v2.0/quotas"):
            return {403}
        return {403, 404}
    return None


def gated(w, tok, entry):
    """True when the persona's roles alone fail the rule."""
    if "%s %s" % (entry["method"], entry["path"]) in OBJECT_RULES:
        return False
    return entry["rule"] == "admin" and tok != w.admin or \
        entry["rule"] == "member" and tok == w.reader


def test_table_covers_every_write(cloud):
    table = policy_table()
    writes = [e for e in table if e["method"] in WRITE]
    assert len(writes) > 120
    assert {e["rule"] for e in writes} <= {"any", "member", "admin", "public"}
    assert [e["path"] for e in writes if e["rule"] == "public"] == ["/identity/v3/auth/tokens"]
    # the running cloud serves exactly these routes: it refuses to start
    # when a route has no entry (nb_policy_check_routes, unit-tested)
    assert cloud.proc.poll() is None


def test_write_matrix(cloud, world):
    w = world
    writes = [e for e in policy_table() if e["method"] in WRITE and e["rule"] != "public"]
    # deletes last, so every route finds demo's objects; the admin last of all
    writes.sort(key=lambda e: e["method"] == "DELETE")
    failures, known = [], bodies(w)
    for tok, who in ((w.foreign, "other-member"), (w.reader, "reader"), (w.member, "member"),
                     (w.admin, "admin")):
        for e in writes:
            path = fill(w, tok, e)
            body, headers, raw = known.get("%s %s" % (e["method"], e["path"]), ({}, None, None))
            st, _, out = cloud.request(e["method"], path, body, token=tok, headers=headers,
                                       raw=raw)
            want = expected(w, tok, e)
            ok = st not in (403, 500) if want is None else st in want
            if ok and gated(w, tok, e) and e["name"] not in str(out):
                ok = False  # a refusal by the gate names the rule
            if not ok:
                failures.append("%s %s %s -> %s (want %s) %s" % (
                    who, e["method"], path, st, sorted(want) if want else "not 403",
                    str(out)[:160]))
    assert not failures, "\n".join(failures)


def neutron(cloud, tok, method, path, body=None):
    st, _, out = cloud.request(method, "/networking/v2.0" + path, body, token=tok)
    err = out.get("NeutronError", {}) if isinstance(out, dict) else {}
    return st, err.get("type"), err.get("message"), out


def test_reader_cannot_change_networking(cloud, world):
    """The issue's holes: a reader of demo changed demo's networking."""
    r, m = world.reader, world.member
    net = neutron(cloud, m, "POST", "/networks", {"network": {"name": "r-net"}})[3]["network"]["id"]
    port = neutron(cloud, m, "POST", "/ports", {"port": {
        "network_id": net, "device_owner": "compute:nova",
        "device_id": str(uuid.uuid4())}})[3]["port"]["id"]
    for path, key, body, rule in (
            ("/networks", "network", {"name": "x"}, "create_network"),
            ("/ports", "port", {"network_id": net}, "create_port"),
            ("/security-groups", "security_group", {"name": "x"}, "create_security_group"),
            ("/routers", "router", {"name": "x"}, "create_router"),
            ("/subnetpools", "subnetpool", {"name": "x", "prefixes": ["10.79.0.0/16"]},
             "create_subnetpool")):
        assert neutron(cloud, r, "POST", path, {key: body})[:3] == (
            403, "PolicyNotAuthorized", "rule:%s is disallowed by policy" % rule), path
    assert neutron(cloud, r, "DELETE", "/networks/" + net)[:3] == (
        403, "PolicyNotAuthorized", "rule:delete_network is disallowed by policy")
    # the port of a server, and demo's default security group
    assert neutron(cloud, r, "PUT", "/ports/" + port, {"port": {"admin_state_up": False}})[0] == 403
    assert neutron(cloud, r, "DELETE", "/ports/" + port)[0] == 403
    st, _, _, out = neutron(cloud, r, "GET", "/security-groups?name=default")
    assert st == 200 and len(out["security_groups"]) == 1
    default = out["security_groups"][0]
    rules_before = sorted(x["id"] for x in default["security_group_rules"])
    assert neutron(cloud, r, "POST", "/security-group-rules", {"security_group_rule": {
        "security_group_id": default["id"], "direction": "ingress",
        "remote_ip_prefix": "0.0.0.0/0"}})[:3] == (
        403, "PolicyNotAuthorized", "rule:create_security_group_rule is disallowed by policy")
    assert neutron(cloud, r, "DELETE", "/security-group-rules/" + rules_before[0])[0] == 403
    # nothing changed, and the reader still reads
    assert neutron(cloud, r, "GET", "/networks/" + net)[0] == 200
    assert neutron(cloud, r, "GET", "/ports/" + port)[3]["port"]["admin_state_up"] is True
    st, _, _, out = neutron(cloud, r, "GET", "/security-groups/" + default["id"])
    assert sorted(x["id"] for x in out["security_group"]["security_group_rules"]) == rules_before


def test_shared_network_of_another_project(cloud, world):
    """Neutron's shared network (the other project's): demo sees it and may
    plug ports into it; only its owner (or an admin) changes it; the owner
    sees demo's port on it and may delete it, not change it."""
    a, m, f = world.admin, world.member, world.foreign
    _, _, _, out = neutron(cloud, a, "POST", "/networks", {"network": {
        "name": "pol-shared", "shared": True, "project_id": world.other}})
    shared = out["network"]["id"]
    _, _, _, out = neutron(cloud, a, "POST", "/subnets", {"subnet": {
        "network_id": shared, "cidr": "10.76.0.0/24", "ip_version": 4}})
    subnet = out["subnet"]["id"]
    assert neutron(cloud, m, "GET", "/networks/" + shared)[0] == 200
    st, _, _, out = neutron(cloud, m, "POST", "/ports", {"port": {"network_id": shared}})
    assert st == 201 and out["port"]["project_id"] == world.demo
    port = out["port"]["id"]
    for method, path, body, rule in (
            ("PUT", "/networks/" + shared, {"network": {"name": "x"}}, "update_network"),
            ("DELETE", "/networks/" + shared, None, "delete_network"),
            ("POST", "/subnets", {"subnet": {"network_id": shared, "cidr": "10.75.0.0/24",
                                             "ip_version": 4}}, "create_subnet"),
            ("PUT", "/subnets/" + subnet, {"subnet": {"name": "x"}}, "update_subnet"),
            ("DELETE", "/subnets/" + subnet, None, "delete_subnet")):
        assert neutron(cloud, m, method, path, body)[:3] == (
            403, "PolicyNotAuthorized", "rule:%s is disallowed by policy" % rule), (method, path)
    # admin-only attributes
    assert neutron(cloud, m, "POST", "/networks", {"network": {"name": "x", "shared": True}})[:3] == (
        403, "PolicyNotAuthorized",
        "(rule:create_network and rule:create_network:shared) is disallowed by policy")
    assert neutron(cloud, m, "POST", "/ports", {"port": {
        "network_id": shared, "binding:host_id": "h"}})[:3] == (
        403, "PolicyNotAuthorized",
        "(rule:create_port and rule:create_port:binding:host_id) is disallowed by policy")
    # demo's own network is invisible to the other project: 404, not 403
    net = neutron(cloud, m, "POST", "/networks", {"network": {"name": "s-net"}})[3]["network"]["id"]
    assert neutron(cloud, f, "DELETE", "/networks/" + net)[:3] == (
        404, "NetworkNotFound", "Network %s could not be found." % net)
    # the network's owner and demo's port on it
    assert neutron(cloud, f, "GET", "/ports/" + port)[0] == 200
    assert neutron(cloud, f, "PUT", "/ports/" + port, {"port": {"name": "x"}})[:3] == (
        403, "PolicyNotAuthorized", "rule:update_port is disallowed by policy")
    assert neutron(cloud, m, "PUT", "/ports/" + port, {"port": {"name": "mine"}})[0] == 200
    assert neutron(cloud, f, "DELETE", "/ports/" + port)[0] == 204
    assert neutron(cloud, f, "PUT", "/networks/" + shared, {"network": {"name": "y"}})[0] == 200
    assert neutron(cloud, a, "DELETE", "/subnets/" + subnet)[0] == 204
    assert neutron(cloud, f, "DELETE", "/networks/" + shared)[0] == 204

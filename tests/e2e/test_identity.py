"""Identity (Keystone v3 subset) driven by the real openstack CLI."""
from conftest import unique


def test_token_issue_and_catalog(cloud):
    tok = cloud.cli("token", "issue", "-f", "json")
    assert len(tok["id"]) >= 32 and tok["project_id"] and tok["user_id"]
    cat = cloud.cli("catalog", "list", "-f", "json")
    types = {c["Type"] for c in cat}
    assert {"identity", "compute", "image", "placement"} <= types
    compute = [c for c in cat if c["Type"] == "compute"][0]
    assert "/compute/v2.1" in str(compute["Endpoints"])


def test_projects_users_roles(cloud):
    pname, uname = unique("proj"), unique("user")
    p = cloud.cli("project", "create", pname, "-f", "json")
    assert p["name"] == pname and p["enabled"]
    u = cloud.cli("user", "create", "--password", "pw-" + uname, "--project", pname, uname, "-f", "json")
    assert u["name"] == uname
    cloud.cli("role", "add", "--project", pname, "--user", uname, "member")
    names = [x["Name"] for x in cloud.cli("project", "list", "-f", "json")]
    assert pname in names and "admin" in names and "demo" in names
    assert uname in [x["Name"] for x in cloud.cli("user", "list", "-f", "json")]
    ra = cloud.cli("role", "assignment", "list", "--names", "--user", uname, "-f", "json")
    assert [r["Role"] for r in ra] == ["member"]
    assert ra[0]["Project"].startswith(pname)
    roles = {r["Name"] for r in cloud.cli("role", "list", "-f", "json")}
    assert {"admin", "member", "reader"} <= roles


def test_no_or_bad_token_is_401(cloud):
    for tok in (None, "garbage", "0" * 64):
        st, _, body = cloud.request("GET", "/compute/v2.1/servers", token=tok)
        assert st == 401, (tok, body)
    st, _, _ = cloud.request("GET", "/placement/resource_providers", token="nope")
    assert st == 401


def test_wrong_password_is_401(cloud):
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": "admin", "domain": {"id": "default"}, "password": "wrong"}}}}}
    st, _, err = cloud.request("POST", "/identity/v3/auth/tokens", body)
    assert st == 401 and err["error"]["code"] == 401


def test_token_validate_and_revoke(cloud):
    admin = cloud.token()
    demo = cloud.token("nubo-demo")
    st, hdrs, body = cloud.request("GET", "/identity/v3/auth/tokens", token=admin,
                                   headers={"X-Subject-Token": demo})
    assert st == 200 and body["token"]["project"]["name"] == "demo"
    assert [r["name"] for r in body["token"]["roles"]].count("member") == 1
    st, _, _ = cloud.request("DELETE", "/identity/v3/auth/tokens", token=admin,
                             headers={"X-Subject-Token": demo})
    assert st == 204
    st, _, _ = cloud.request("GET", "/compute/v2.1/servers", token=demo)
    assert st == 401


def test_passwords_are_hashed(cloud):
    rows = cloud.sql("SELECT name, password_hash FROM user")
    assert rows
    for r in rows:
        assert r["password_hash"].startswith("$"), r
        assert "secret" not in r["password_hash"]


def test_member_cannot_create_project(cloud):
    p = cloud.cli("project", "create", unique("x"), cloud="nubo-demo", check=False)
    assert p.returncode != 0 and "403" in p.stderr


def test_sdk_connects(cloud):
    conn = cloud.sdk()
    assert any(p.name == "admin" for p in conn.identity.projects())
    assert any(f.name == "m1.tiny" for f in conn.compute.flavors())


def test_reader_can_look_but_not_create(cloud):
    name = unique("rdr")
    cloud.cli("user", "create", "--password", "pw-" + name, "--project", "demo", name)
    cloud.cli("role", "add", "--project", "demo", "--user", name, "reader")
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": name, "domain": {"id": "default"}, "password": "pw-" + name}}},
        "scope": {"project": {"name": "demo", "domain": {"id": "default"}}}}}
    st, hdrs, _ = cloud.request("POST", "/identity/v3/auth/tokens", body)
    assert st == 201
    tok = hdrs["X-Subject-Token"]
    st, _, _ = cloud.request("GET", "/compute/v2.1/servers", token=tok)
    assert st == 200
    image = cloud.cli("image", "show", "cirros", "-f", "value", "-c", "id").strip()
    st, _, err = cloud.request("POST", "/compute/v2.1/servers", {"server": {
        "name": "r", "flavorRef": "1", "imageRef": image}}, token=tok)
    assert st == 403
    assert "os_compute_api:servers:create" in err["forbidden"]["message"]

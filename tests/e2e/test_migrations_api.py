"""The migrations APIs (os-migrations, /servers/{id}/migrations: list, show,
abort, force_complete) per microversion, on fake hosts, and `nubo host
drain`.

Real moves make the rows of test_cold_migration_rows_through_the_api,
test_running_live_migration_shown_aborted_and_forced (a fake live migration
that takes 30 s) and the drain tests. The other tests set up with SQL on
the migrations table what no API produces on demand: rows with chosen
created_at/updated_at (ordering, paging, changes-since/-before), a hidden
row, progress counters of a known size, and a live migration held in
"preparing" with its instance's task_state migrating (abort and
force-complete refusals by status and microversion).
"""
import os
import subprocess
import time

import pytest

from conftest import NUBO_BIN, unique

V = "/compute/v2.1"
LIST_KEYS_21 = {"id", "source_compute", "dest_compute", "source_node", "dest_node", "dest_host",
                "instance_uuid", "status", "old_instance_type_id", "new_instance_type_id",
                "created_at", "updated_at"}
SERVER_KEYS = {"id", "server_uuid", "source_compute", "dest_compute", "source_node", "dest_node",
               "dest_host", "status", "created_at", "updated_at", "memory_total_bytes",
               "memory_processed_bytes", "memory_remaining_bytes", "disk_total_bytes",
               "disk_processed_bytes", "disk_remaining_bytes"}


@pytest.fixture(scope="module")
def tok(cloud):
    return {"nubo": cloud.token(), "demo": cloud.token(cloud="nubo-demo")}


def api(cloud, tok, method, path, mv="2.1", body=None, who="nubo", raw=None):
    return cloud.request(method, V + path, body=body, raw=raw, token=tok[who],
                         headers={"X-OpenStack-Nova-API-Version": mv})


def boot(cloud, cloud_name="nubo"):
    return cloud.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait",
                     unique("mig"), "-f", "json", cloud=cloud_name)


def sql(cloud, query):
    subprocess.run(["sqlite3", "-cmd", ".timeout 10000", cloud.db_path, query], check=True,
                   capture_output=True, text=True)


def add_migration(cloud, instance, status, mtype="live-migration", created="2026-01-01T00:00:00.000000",
                  updated=None, hidden=0, **cols):
    """A migration row in a state no API holds (see the module docstring);
    returns (id, uuid)."""
    mig_uuid = cols.pop("uuid", None) or str(__import__("uuid").uuid4())
    row = {"uuid": mig_uuid, "instance_uuid": instance, "status": status, "migration_type": mtype,
           "created_at": created, "updated_at": updated or created, "hidden": hidden,
           "source_compute": "fake-1", "source_node": "fake-1", "dest_compute": "fake-2",
           "dest_node": "fake-2"}
    row.update(cols)
    names = ", ".join(row)
    vals = ", ".join("NULL" if v is None else str(v) if isinstance(v, int) else "'%s'" % v
                     for v in row.values())
    sql(cloud, "INSERT INTO migrations (%s) VALUES (%s)" % (names, vals))
    mid = cloud.sql("SELECT id FROM migrations WHERE uuid = '%s'" % mig_uuid)[0]["id"]
    return mid, mig_uuid


@pytest.fixture(scope="module")
def srv(cloud):
    """One server with a finished cold migration, a running live migration
    with progress, a completed live migration and a hidden resize."""
    s = boot(cloud)
    sid = s["id"]
    u = cloud.sql("SELECT user_id, project_id FROM instances WHERE uuid = '%s'" % sid)[0]
    who = dict(user_id=u["user_id"], project_id=u["project_id"])
    rows = {
        "cold": add_migration(cloud, sid, "finished", "migration", "2026-01-01T10:00:00.000000",
                              "2026-01-01T10:05:00.000000", old_instance_type_id=1,
                              new_instance_type_id=1, dest_host="127.0.0.1", **who),
        "live": add_migration(cloud, sid, "running", "live-migration",
                              "2026-01-01T11:00:00.000000", "2026-01-01T11:05:00.000000",
                              source_compute="fake-3", source_node="fake-3",
                              memory_total=1000, memory_processed=400, memory_remaining=600,
                              disk_total=0, disk_processed=0, disk_remaining=0, **who),
        "done": add_migration(cloud, sid, "completed", "live-migration",
                              "2026-01-01T12:00:00.000000", "2026-01-01T12:05:00.000000",
                              user_id="someone", project_id="elsewhere"),
        "hidden": add_migration(cloud, sid, "confirmed", "resize", "2026-01-01T13:00:00.000000",
                                hidden=1, **who),
    }
    return {"id": sid, "rows": rows, **who}


def migrations(cloud, tok, mv, query=""):
    st, _, body = api(cloud, tok, "GET", "/os-migrations" + query, mv)
    assert st == 200, body
    return body


def test_list_keys_per_microversion(cloud, tok, srv):
    q = "?instance_uuid=" + srv["id"]
    rows = srv["rows"]
    b = migrations(cloud, tok, "2.1", q)
    assert set(b) == {"migrations"}
    got = b["migrations"]
    # hidden rows never show; before 2.59 the order is the table's
    assert [m["id"] for m in got] == [rows["cold"][0], rows["live"][0], rows["done"][0]]
    for m in got:
        assert set(m) == LIST_KEYS_21
    cold = got[0]
    assert cold["status"] == "finished" and cold["dest_host"] == "127.0.0.1"
    assert cold["old_instance_type_id"] == 1 and cold["created_at"] == "2026-01-01T10:00:00.000000"
    assert cold["updated_at"] == "2026-01-01T10:05:00.000000"

    got = migrations(cloud, tok, "2.23", q)["migrations"]
    by_id = {m["id"]: m for m in got}
    assert set(by_id[rows["cold"][0]]) == LIST_KEYS_21 | {"migration_type"}
    live = by_id[rows["live"][0]]
    assert set(live) == LIST_KEYS_21 | {"migration_type", "links"}
    assert live["migration_type"] == "live-migration"
    assert live["links"][0]["rel"] == "self"
    assert live["links"][0]["href"].endswith(
        "/compute/v2.1/servers/%s/migrations/%d" % (srv["id"], rows["live"][0]))
    assert live["links"][1]["rel"] == "bookmark"
    # a finished live migration has no links
    assert "links" not in by_id[rows["done"][0]]

    got = migrations(cloud, tok, "2.59", q)["migrations"]
    assert [m["id"] for m in got] == [rows["done"][0], rows["live"][0], rows["cold"][0]]
    assert got[0]["uuid"] == rows["done"][1]
    assert "user_id" not in got[0]
    got = migrations(cloud, tok, "2.80", q)["migrations"]
    assert set(got[2]) == LIST_KEYS_21 | {"migration_type", "uuid", "user_id", "project_id"}
    assert got[2]["user_id"] == srv["user_id"] and got[0]["project_id"] == "elsewhere"


def test_list_filters(cloud, tok, srv):
    q = "?instance_uuid=%s" % srv["id"]
    rows = srv["rows"]

    def ids(mv, extra):
        return {m["id"] for m in migrations(cloud, tok, mv, q + extra)["migrations"]}

    assert ids("2.1", "&status=running") == {rows["live"][0]}
    assert ids("2.23", "&migration_type=migration") == {rows["cold"][0]}
    assert ids("2.1", "&source_compute=fake-3") == {rows["live"][0]}
    # host matches the source or the destination
    assert ids("2.1", "&host=fake-2") == {rows["cold"][0], rows["live"][0], rows["done"][0]}
    assert ids("2.1", "&host=fake-3") == {rows["live"][0]}
    assert ids("2.59", "&host=fake-9") == set()
    assert ids("2.80", "&user_id=someone") == {rows["done"][0]}
    assert ids("2.80", "&project_id=%s" % srv["project_id"]) == {rows["cold"][0], rows["live"][0]}
    # the hidden filter cannot bring hidden rows back
    assert ids("2.59", "&hidden=1") == set()
    assert ids("2.59", "&hidden=0") == {rows["cold"][0], rows["live"][0], rows["done"][0]}
    other = migrations(cloud, tok, "2.1", "?instance_uuid=%s" % unique("none"))
    assert other == {"migrations": []}


def test_list_paging_and_changes(cloud, tok, srv):
    q = "?instance_uuid=%s" % srv["id"]
    rows = srv["rows"]
    b = migrations(cloud, tok, "2.59", q + "&limit=2")
    assert [m["id"] for m in b["migrations"]] == [rows["done"][0], rows["live"][0]]
    nxt = b["migrations_links"][0]
    assert nxt["rel"] == "next"
    assert "marker=%s" % rows["live"][1] in nxt["href"] and "limit=2" in nxt["href"]
    b = migrations(cloud, tok, "2.59", q + "&limit=2&marker=" + rows["live"][1])
    assert [m["id"] for m in b["migrations"]] == [rows["cold"][0]]
    assert "migrations_links" not in b
    assert migrations(cloud, tok, "2.59", q + "&limit=0") == {"migrations": []}
    # a marker one character off an existing (hidden) row's uuid names none
    h = rows["hidden"][1]
    missing = h[:-1] + ("1" if h.endswith("0") else "0")
    st, _, body = api(cloud, tok, "GET", "/os-migrations?marker=" + missing, "2.59")
    assert st == 400 and body["badRequest"]["message"] == (
        "Marker %s could not be found." % missing)
    # changes-since / changes-before compare updated_at, both inclusive
    since = "&changes-since=2026-01-01T11:05:00Z"
    assert {m["id"] for m in migrations(cloud, tok, "2.59", q + since)["migrations"]} == {
        rows["live"][0], rows["done"][0]}
    before = "&changes-before=2026-01-01T11:05:00Z"
    assert {m["id"] for m in migrations(cloud, tok, "2.66", q + since + before)["migrations"]} == {
        rows["live"][0]}
    # before 2.59 changes-since is dropped; before 2.66 changes-before is refused
    assert len(migrations(cloud, tok, "2.58", q + since)["migrations"]) == 3
    st, _, body = api(cloud, tok, "GET", "/os-migrations" + q + before, "2.65")
    assert st == 400 and "'changes-before' was unexpected" in body["badRequest"]["message"]
    st, _, body = api(cloud, tok, "GET", "/os-migrations?changes-since=2026-01-02T00:00:00Z"
                      "&changes-before=2026-01-01T00:00:00Z", "2.66")
    assert st == 400 and body["badRequest"]["message"] == (
        "The value of changes-since must be less than or equal to changes-before.")


@pytest.mark.parametrize("mv,query,message", [
    ("2.59", "?foo=1", "Additional properties are not allowed ('foo' was unexpected)"),
    ("2.79", "?user_id=u", "Additional properties are not allowed ('user_id' was unexpected)"),
    ("2.59", "?limit=-1", "Invalid input for query parameters limit. Value: -1. '-1' does not "
                          "match '^[0-9]*$'"),
    ("2.59", "?limit=1&limit=2", "Invalid input for query parameters limit. Value: ['1', '2']. "
                                 "['1', '2'] is too long"),
    ("2.59", "?changes-since=yesterday", "Invalid input for query parameters changes-since. "
                                         "Value: yesterday. 'yesterday' is not a 'date-time'"),
])
def test_list_query_refusals(cloud, tok, mv, query, message):
    st, _, body = api(cloud, tok, "GET", "/os-migrations" + query, mv)
    assert st == 400 and body["badRequest"]["message"] == message


def test_list_before_259_ignores_unknown_keys(cloud, tok):
    st, _, body = api(cloud, tok, "GET", "/os-migrations?foo=1&limit=-5", "2.58")
    assert st == 200 and "migrations" in body


def test_admin_only(cloud, tok, srv):
    st, _, body = api(cloud, tok, "GET", "/os-migrations", "2.80", who="demo")
    assert st == 403 and body["forbidden"]["message"] == (
        "Policy doesn't allow os_compute_api:os-migrations:index to be performed.")
    mine = boot(cloud, "nubo-demo")["id"]
    for method, path, mv, rule in [
            ("GET", "/servers/%s/migrations" % mine, "2.23", "index"),
            ("GET", "/servers/%s/migrations/1" % mine, "2.23", "show"),
            ("DELETE", "/servers/%s/migrations/1" % mine, "2.24", "delete"),
    ]:
        st, _, body = api(cloud, tok, method, path, mv, who="demo")
        assert st == 403, body
        assert body["forbidden"]["message"] == (
            "Policy doesn't allow os_compute_api:servers:migrations:%s to be performed." % rule)
    st, _, body = api(cloud, tok, "POST", "/servers/%s/migrations/1/action" % mine, "2.22",
                      body={"force_complete": None}, who="demo")
    assert st == 403 and "servers:migrations:force_complete" in body["forbidden"]["message"]
    # another project's server is not found, before any policy says no
    st, _, body = api(cloud, tok, "GET", "/servers/%s/migrations" % srv["id"], "2.23", who="demo")
    assert st == 404 and body["itemNotFound"]["message"] == (
        "Instance %s could not be found." % srv["id"])


def test_server_migrations_list_and_show(cloud, tok, srv):
    sid, rows = srv["id"], srv["rows"]
    live_id = rows["live"][0]
    st, _, _ = api(cloud, tok, "GET", "/servers/%s/migrations" % sid, "2.22")
    assert st == 404
    st, _, body = api(cloud, tok, "GET", "/servers/%s/migrations" % sid, "2.23")
    assert st == 200
    # only the live migration in progress, with its progress
    assert [m["id"] for m in body["migrations"]] == [live_id]
    m = body["migrations"][0]
    assert set(m) == SERVER_KEYS
    assert (m["server_uuid"], m["status"], m["source_compute"]) == (sid, "running", "fake-3")
    assert (m["memory_total_bytes"], m["memory_processed_bytes"],
            m["memory_remaining_bytes"]) == (1000, 400, 600)
    assert m["disk_total_bytes"] == 0
    st, _, body = api(cloud, tok, "GET", "/servers/%s/migrations/%d" % (sid, live_id), "2.59")
    assert st == 200 and set(body["migration"]) == SERVER_KEYS | {"uuid"}
    assert body["migration"]["uuid"] == rows["live"][1]
    st, _, body = api(cloud, tok, "GET", "/servers/%s/migrations/%d" % (sid, live_id), "2.80")
    assert set(body["migration"]) == SERVER_KEYS | {"uuid", "user_id", "project_id"}
    for mid, msg in [
            (rows["cold"][0], "Migration %d for server %s is not live-migration."),
            (rows["done"][0], "Live migration %d for server %s is not in progress."),
            (999999, "In-progress live migration %d is not found for server %s."),
    ]:
        st, _, body = api(cloud, tok, "GET", "/servers/%s/migrations/%d" % (sid, mid), "2.23")
        assert st == 404 and body["itemNotFound"]["message"] == msg % (mid, sid)
    st, _, body = api(cloud, tok, "GET", "/servers/%s/migrations/abc" % sid, "2.23")
    assert st == 404 and body["itemNotFound"]["message"] == (
        "In-progress live migration abc is not found for server %s." % sid)
    gone = unique("nosuch")
    st, _, body = api(cloud, tok, "GET", "/servers/%s/migrations" % gone, "2.23")
    assert st == 404 and body["itemNotFound"]["message"] == "Instance %s could not be found." % gone


@pytest.fixture
def migrating(cloud):
    """A server with task_state migrating and a live migration in status
    preparing: a live migration caught before it runs (see the module
    docstring). Yields (server id, migration id, migration uuid)."""
    sid = boot(cloud)["id"]
    mid, muuid = add_migration(cloud, sid, "preparing", created="2026-02-01T00:00:00.000000")
    sql(cloud, "UPDATE instances SET task_state = 'migrating' WHERE uuid = '%s'" % sid)
    yield sid, mid, muuid
    sql(cloud, "UPDATE instances SET task_state = NULL WHERE uuid = '%s'" % sid)


def actions(cloud, tok, sid):
    st, _, body = api(cloud, tok, "GET", "/servers/%s/os-instance-actions" % sid, "2.1")
    return [a["action"] for a in body["instanceActions"]]


def test_abort_and_force_complete_need_a_migrating_server(cloud, tok, srv):
    sid, live_id = srv["id"], srv["rows"]["live"][0]
    st, _, body = api(cloud, tok, "DELETE", "/servers/%s/migrations/%d" % (sid, live_id), "2.24")
    assert st == 409 and body["conflictingRequest"]["message"] == (
        "Cannot 'abort live migration' instance %s while it is in task_state None" % sid)
    st, _, body = api(cloud, tok, "POST", "/servers/%s/migrations/%d/action" % (sid, live_id),
                      "2.22", body={"force_complete": None})
    assert st == 409 and body["conflictingRequest"]["message"] == (
        "Cannot 'force_complete' instance %s while it is in task_state None" % sid)
    st, _, _ = api(cloud, tok, "DELETE", "/servers/%s/migrations/%d" % (sid, live_id), "2.23")
    assert st == 404
    st, _, _ = api(cloud, tok, "POST", "/servers/%s/migrations/%d/action" % (sid, live_id), "2.21",
                   body={"force_complete": None})
    assert st == 404


@pytest.mark.parametrize("body,message", [
    ({"force_complete": 1}, "Invalid input for field/attribute force_complete. Value: 1. 1 is not "
                            "of type 'null'"),
    ({"force_complete": None, "x": 1}, "Additional properties are not allowed ('x' was "
                                       "unexpected)"),
    ({"abort": None}, "There is no such action: abort"),
])
def test_force_complete_body(cloud, tok, srv, body, message):
    st, _, got = api(cloud, tok, "POST", "/servers/%s/migrations/1/action" % srv["id"], "2.22",
                     body=body)
    assert st == 400 and got["badRequest"]["message"] == message


def test_abort_by_microversion(cloud, tok, migrating):
    sid, mid, _ = migrating
    path = "/servers/%s/migrations/%d" % (sid, mid)
    st, _, body = api(cloud, tok, "DELETE", "/servers/%s/migrations/999999" % sid, "2.24")
    assert st == 404 and body["itemNotFound"]["message"] == (
        "Migration 999999 not found for instance %s" % sid)
    # preparing: only running before 2.65
    st, _, body = api(cloud, tok, "DELETE", path, "2.64")
    assert st == 400 and body["badRequest"]["message"] == (
        "Migration %d state of instance %s is preparing. Cannot abort live migration while the "
        "migration is in this state." % (mid, sid))
    assert "live_migration_cancel" not in actions(cloud, tok, sid)
    st, _, body = api(cloud, tok, "DELETE", path, "2.65")
    assert st == 202, body
    assert actions(cloud, tok, sid)[0] == "live_migration_cancel"
    # a migration that is over cannot be aborted at any version
    done, _ = add_migration(cloud, sid, "completed")
    st, _, body = api(cloud, tok, "DELETE", "/servers/%s/migrations/%d" % (sid, done), "2.80")
    assert st == 400 and "is completed. Cannot abort live migration" in body["badRequest"]["message"]


def test_force_complete_needs_running(cloud, tok, migrating):
    sid, mid, _ = migrating
    path = "/servers/%s/migrations/%d/action" % (sid, mid)
    st, _, body = api(cloud, tok, "POST", path, "2.22", body={"force_complete": None})
    assert st == 400 and body["badRequest"]["message"] == (
        "Migration %d state of instance %s is preparing. Cannot force complete while the "
        "migration is in this state." % (mid, sid))
    # an unknown migration is a 400 here, as in Nova
    st, _, body = api(cloud, tok, "POST", "/servers/%s/migrations/999999/action" % sid, "2.22",
                      body={"force_complete": None})
    assert st == 400 and body["badRequest"]["message"] == (
        "Migration 999999 not found for instance %s" % sid)
    sql(cloud, "UPDATE migrations SET status = 'running' WHERE id = %d" % mid)
    st, _, body = api(cloud, tok, "POST", path, "2.22", body={"force_complete": None})
    assert st == 202, body
    assert actions(cloud, tok, sid)[0] == "live_migration_force_complete"


def test_cli_migration_commands(cloud, srv, migrating):
    """The commands operators type, at 2.80."""
    sid, mid, muuid = migrating
    mv = ("--os-compute-api-version", "2.80")
    rows = cloud.cli(*mv, "server", "migration", "list", "--server", sid, "-f", "json")
    assert [(r["Id"], r["Status"], r["Type"]) for r in rows] == [(mid, "preparing",
                                                                   "live-migration")]
    assert rows[0]["UUID"] == muuid and rows[0]["Server UUID"] == sid
    everything = cloud.cli(*mv, "server", "migration", "list", "--host", "fake-3", "-f", "json")
    assert srv["rows"]["live"][0] in {r["Id"] for r in everything}
    show = cloud.cli(*mv, "server", "migration", "show", sid, str(mid), "-f", "json")
    assert show["Status"] == "preparing" and show["Server UUID"] == sid
    assert show["UUID"] == muuid and "Memory Total Bytes" in show
    # by uuid too (the client looks the id up in os-migrations)
    show = cloud.cli(*mv, "server", "migration", "show", sid, muuid, "-f", "json")
    assert show["ID"] == mid
    p = cloud.cli(*mv, "server", "migration", "force", "complete", sid, str(mid), check=False)
    assert p.returncode != 0 and "Cannot force complete while the migration" in p.stderr
    cloud.cli(*mv, "server", "migration", "abort", sid, str(mid), parse=False)
    assert cloud.sql("SELECT action FROM instance_actions WHERE instance_uuid = '%s' "
                     "ORDER BY id DESC LIMIT 1" % sid)[0]["action"] == "live_migration_cancel"


def test_cold_migration_rows_through_the_api(cloud, tok):
    """A real cold migration's record, as the lists show it."""
    sid = boot(cloud)["id"]
    src = cloud.cli("server", "show", sid, "-f", "json")["OS-EXT-SRV-ATTR:host"]
    mv = ("--os-compute-api-version", "2.80")
    cloud.cli(*mv, "server", "migrate", "--wait", sid, parse=False, timeout=60)
    rows = cloud.cli(*mv, "server", "migration", "list", "--server", sid, "-f", "json")
    assert len(rows) == 1, rows
    r = rows[0]
    assert (r["Type"], r["Status"], r["Source Compute"]) == ("migration", "finished", src)
    assert r["Dest Compute"] not in (src, None)
    b = migrations(cloud, tok, "2.23", "?instance_uuid=%s&migration_type=migration" % sid)
    m = b["migrations"][0]
    assert set(m) == LIST_KEYS_21 | {"migration_type"}  # no links: not a live migration
    assert m["old_instance_type_id"] == m["new_instance_type_id"] is not None
    # not a live migration: the server's migration list is empty, show is 404
    st, _, body = api(cloud, tok, "GET", "/servers/%s/migrations" % sid, "2.23")
    assert st == 200 and body == {"migrations": []}
    st, _, body = api(cloud, tok, "GET", "/servers/%s/migrations/%d" % (sid, r["Id"]), "2.23")
    assert st == 404 and body["itemNotFound"]["message"] == (
        "Migration %d for server %s is not live-migration." % (r["Id"], sid))
    cloud.cli(*mv, "server", "migration", "confirm", sid, parse=False)
    cloud.wait_server(sid, ("ACTIVE",))
    rows = cloud.cli(*mv, "server", "migration", "list", "--server", sid, "--status", "confirmed",
                     "-f", "json")
    assert [x["Id"] for x in rows] == [r["Id"]]


def wait_for(fn, timeout=60, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError("no %s after %ss" % (what, timeout))


def test_running_live_migration_shown_aborted_and_forced(fresh_cloud):
    """A live migration that takes its time on the fake hosts (30 s): the
    server's migration list and show with progress, the CLI, abort and
    force-complete as Nova's server migrations API does them."""
    c = fresh_cloud("--fake-hosts", "2", "--set", "fake.live_migration_ms=30000")
    t = {"nubo": c.token()}
    mv = ("--os-compute-api-version", "2.80")

    def start(sid):
        st, _, body = api(c, t, "POST", "/servers/%s/action" % sid, "2.25",
                          body={"os-migrateLive": {"host": None, "block_migration": "auto"}})
        assert st == 202, body

        def running():
            st, _, b = api(c, t, "GET", "/servers/%s/migrations" % sid, "2.80")
            ms = [m for m in b["migrations"] if m["status"] == "running"
                  and m["memory_processed_bytes"]]
            return ms[0] if ms else None
        return wait_for(running, 30, "running live migration")

    sid = boot(c)["id"]
    src = c.cli("server", "show", sid, "-f", "json")["OS-EXT-SRV-ATTR:host"]
    m = start(sid)
    assert set(m) == SERVER_KEYS | {"uuid", "user_id", "project_id"}
    assert m["source_compute"] == src and m["dest_compute"] not in (src, None)
    assert m["memory_total_bytes"] == 512 << 20  # m1.tiny
    assert 0 < m["memory_processed_bytes"] <= m["memory_total_bytes"]
    # the index links it while it runs
    st, _, b = api(c, t, "GET", "/os-migrations?instance_uuid=%s" % sid, "2.23")
    assert b["migrations"][0]["links"][0]["href"].endswith(
        "/servers/%s/migrations/%d" % (sid, m["id"]))
    rows = c.cli(*mv, "server", "migration", "list", "--server", sid, "-f", "json")
    assert [(r["Id"], r["Status"], r["Type"]) for r in rows] == [(m["id"], "running",
                                                                   "live-migration")]
    show = c.cli(*mv, "server", "migration", "show", sid, str(m["id"]), "-f", "json")
    assert show["Status"] == "running" and show["Memory Total Bytes"] == 512 << 20
    c.cli(*mv, "server", "migration", "abort", sid, str(m["id"]), parse=False)

    def settled():
        st, _, b = api(c, t, "GET", "/os-migrations?instance_uuid=%s" % sid, "2.59")
        got = {x["id"]: x["status"] for x in b["migrations"]}
        return got if got.get(m["id"]) in ("cancelled", "completed", "error") else None
    assert settled_status(wait_for(settled, 30, "aborted migration"), m["id"]) == "cancelled"
    s = c.wait_server(sid, ("ACTIVE",))
    assert s["OS-EXT-SRV-ATTR:host"] == src and not s["OS-EXT-STS:task_state"]
    assert "live_migration_cancel" in actions(c, t, sid)

    t0 = time.time()
    m = start(sid)
    c.cli(*mv, "server", "migration", "force", "complete", sid, str(m["id"]), parse=False)
    assert settled_status(wait_for(settled, 30, "forced migration"), m["id"]) == "completed"
    s = wait_for(lambda: (lambda x: x if not x["OS-EXT-STS:task_state"] else None)(
        c.cli("server", "show", sid, "-f", "json")), 30, "server settled")
    assert s["status"] == "ACTIVE" and s["OS-EXT-SRV-ATTR:host"] != src
    assert "live_migration_force_complete" in actions(c, t, sid)
    # forced: done well before the 30 s the fake copy would have taken
    assert time.time() - t0 < 25
    st, _, b = api(c, t, "GET", "/servers/%s/migrations" % sid, "2.80")
    assert b == {"migrations": []}


def settled_status(statuses, mid):
    return statuses[mid]


# ---- nubo host drain ---------------------------------------------------------

def drain(cloud, *args):
    conf = os.path.join(cloud.state_dir, "nubo.conf")
    return subprocess.run([NUBO_BIN, "host", "drain", *args, "--config", conf],
                          capture_output=True, text=True, timeout=300)


def compute_service(cloud, host):
    return [s for s in cloud.cli("compute", "service", "list", "--long", "--service",
                                 "nova-compute", "-f", "json") if s["Host"] == host][0]


def test_drain_usage_and_unknown_host(cloud):
    p = subprocess.run([NUBO_BIN, "host", "drain", "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "admin token" in p.stdout and "--dry-run" in p.stdout
    p = subprocess.run([NUBO_BIN, "host", "drain"], capture_output=True, text=True)
    assert p.returncode == 2 and "give exactly one host" in p.stderr
    p = drain(cloud, "no-such-host")
    assert p.returncode == 3 and "no nova-compute service on that host" in p.stderr


def test_drain_moves_every_server(fresh_cloud):
    """Three servers on fake-1 (fake-2 disabled while they boot): the dry run
    changes nothing; then ACTIVE and PAUSED ones move live, the SHUTOFF one
    cold (confirmed), two at a time. Drained back with fake-1 disabled, they
    have nowhere to go: the lines say why, and a server in ERROR is left."""
    c = fresh_cloud("--fake-hosts", "2")
    c.cli("compute", "service", "set", "--disable", "fake-2", "nova-compute", parse=False)
    active, paused, stopped = boot(c), boot(c), boot(c)
    c.cli("server", "pause", paused["id"], parse=False)
    c.cli("server", "stop", stopped["id"], parse=False)
    c.wait_server(paused["id"], ("PAUSED",))
    c.wait_server(stopped["id"], ("SHUTOFF",))
    c.cli("compute", "service", "set", "--enable", "fake-2", "nova-compute", parse=False)
    # the dry run says what would happen and changes nothing
    p = drain(c, "fake-1", "--dry-run", "--live")
    assert p.returncode == 0, p.stderr
    assert "dry run: would disable service nova-compute on fake-1 (now enabled)" in p.stdout
    for s, status in ((active, "ACTIVE"), (paused, "PAUSED")):
        assert "%s %s: would move by live migration (status %s)" % (
            s["id"], s["name"], status) in p.stdout
    assert "%s %s: would be left: status SHUTOFF cannot move live (--live given)" % (
        stopped["id"], stopped["name"]) in p.stdout
    assert compute_service(c, "fake-1")["Status"] == "enabled"
    assert c.cli("--os-compute-api-version", "2.80", "server", "migration", "list",
                 "-f", "json") == []
    p = drain(c, "fake-1", "--concurrency", "2")
    out = p.stdout + p.stderr
    assert "3 server(s) on fake-1" in out
    for s, how in ((active, "live migration"), (paused, "live migration"),
                   (stopped, "cold migration")):
        assert "%s %s: moved by %s, fake-1 -> fake-2 (" % (s["id"], s["name"], how) in out, out
    assert "summary: host fake-1: 3 moved, 0 failed, 0 left" in out
    assert p.returncode == 0
    for s, status in ((active, "ACTIVE"), (paused, "PAUSED"), (stopped, "SHUTOFF")):
        after = c.cli("server", "show", s["id"], "-f", "json")
        assert (after["status"], after["OS-EXT-SRV-ATTR:host"]) == (status, "fake-2")
    rows = c.cli("--os-compute-api-version", "2.80", "server", "migration", "list", "--host",
                 "fake-1", "-f", "json")
    assert sorted((r["Type"], r["Status"]) for r in rows) == [
        ("live-migration", "completed"), ("live-migration", "completed"),
        ("migration", "confirmed")]
    svc = compute_service(c, "fake-1")
    assert svc["Status"] == "disabled" and svc["Disabled Reason"] == "drained by nubo host drain"
    # back: fake-1 is disabled now, so nothing can move; ERROR is left as it is
    c.cli("server", "set", "--state", "error", stopped["id"], parse=False)
    p = drain(c, "fake-2")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "%s %s: left: status ERROR" % (stopped["id"], stopped["name"]) in p.stdout
    for s in (active, paused):
        assert "%s %s: failed (live migration): No valid host was found. There are not enough " \
               "hosts available." % (s["id"], s["name"]) in p.stdout, p.stdout
        assert c.cli("server", "show", s["id"], "-f", "json")["OS-EXT-SRV-ATTR:host"] == "fake-2"
    assert "summary: host fake-2: 0 moved, 2 failed, 1 left; service nova-compute stays " \
           "disabled" in p.stdout
    assert compute_service(c, "fake-2")["Status"] == "disabled"


def test_scheduler_sees_one_host_enabled_and_another_disabled(fresh_cloud):
    """fake-2 disabled while a server boots; then fake-2 enabled and fake-1
    disabled, as after a maintenance: the next boot goes to fake-2, even with
    a host cache kept for a minute (the same number of services disabled is
    not the same services disabled). Before, such a boot found no valid host
    (seen as a failed live migration in `nubo host drain`). Then fake-2 joins
    a new zone and a boot into that zone lands there."""
    c = fresh_cloud("--fake-hosts", "2", "--set", "scheduler.host_cache_ms=60000")
    c.cli("compute", "service", "set", "--disable", "fake-2", "nova-compute", parse=False)
    first = boot(c)
    assert (first["status"], first["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", "fake-1")
    c.cli("compute", "service", "set", "--enable", "fake-2", "nova-compute", parse=False)
    c.cli("compute", "service", "set", "--disable", "fake-1", "nova-compute", parse=False)
    second = boot(c)
    assert (second["status"], second["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", "fake-2"), second
    # a host added to a zone is in it for the next boot, cache or not (before,
    # the boot found no valid host until the cache aged: Tempest's
    # test_aggregate_add_host_create_server_with_az)
    c.cli("aggregate", "create", "--zone", "az-x", unique("agg"), parse=False)
    aggs = c.cli("aggregate", "list", "-f", "json")
    c.cli("aggregate", "add", "host", aggs[0]["ID"], "fake-2", parse=False)
    third = c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait",
                  "--availability-zone", "az-x", unique("mig"), "-f", "json")
    assert (third["status"], third["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", "fake-2"), third

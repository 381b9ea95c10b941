"""Servers through the whole pipeline (API -> scheduler -> placement ->
conductor -> compute agent, fake hosts), as an operator drives them."""
import datetime
import re
import time

from conftest import unique


def boot(cloud, name=None, cloud_name="nubo", *extra, wait=True):
    args = ["server", "create", "--flavor", "m1.tiny", "--image", "cirros"]
    args += list(extra) + [name or unique("srv"), "-f", "json"]
    if wait:
        args.insert(2, "--wait")
    return cloud.cli(*args, cloud=cloud_name)


def test_boot_to_active_with_runbook_columns(cloud):
    s = boot(cloud)
    assert s["status"] == "ACTIVE"
    out = cloud.cli("server", "show", s["id"], "-c", "OS-EXT-SRV-ATTR:hypervisor_hostname",
                    "-c", "volumes_attached", "-c", "status", "-f", "json")
    assert out["status"] == "ACTIVE"
    assert out["OS-EXT-SRV-ATTR:hypervisor_hostname"].startswith("fake-")
    v = cloud.cli("server", "show", s["id"], "-f", "value", "-c", "status",
                  "-c", "OS-EXT-STS:power_state")
    # OSC sorts the columns: power state first
    assert sorted(v.split()) in (["ACTIVE", "Running"], ["1", "ACTIVE"]), v
    full = cloud.cli("server", "show", s["id"], "-f", "json")
    assert full["OS-EXT-STS:vm_state"] == "active"
    assert full["OS-EXT-STS:task_state"] is None
    assert full["OS-SRV-USG:launched_at"]
    assert full["OS-EXT-SRV-ATTR:instance_name"] == s["id"]


def test_events_follow_the_pipeline(cloud):
    s = boot(cloud)
    events = cloud.cli("server", "event", "list", s["id"], "-f", "json")
    assert [e["Action"] for e in events] == ["create"]
    req = events[0]["Request ID"]
    assert req.startswith("req-")
    detail = cloud.cli("--os-compute-api-version", "2.62", "server", "event", "show", s["id"],
                       req, "-f", "json")
    names = [e["event"] for e in detail["events"]]
    assert "conductor_schedule_and_build_instances" in names
    assert "compute__do_build_and_run_instance" in names
    for e in detail["events"]:
        assert e["result"] == "Success", e
    host = cloud.cli("server", "show", s["id"], "-f", "value", "-c",
                     "OS-EXT-SRV-ATTR:host").strip()
    assert any(e.get("host") == host for e in detail["events"])
    # one request ID across the role logs: API, conductor, scheduler, compute
    for role in ("api", "conductor", "scheduler", "compute"):
        assert req in cloud.log(role), role


def test_power_actions(cloud):
    s = boot(cloud)
    sid = s["id"]
    cloud.cli("server", "stop", sid)
    st = cloud.wait_server(sid, ("SHUTOFF",))
    assert st["OS-EXT-STS:power_state"] in ("Shutdown", 4)
    cloud.cli("server", "start", sid)
    cloud.wait_server(sid, ("ACTIVE",))
    cloud.cli("server", "reboot", "--hard", "--wait", sid)
    assert cloud.wait_server(sid, ("ACTIVE",))["OS-EXT-STS:task_state"] is None
    cloud.cli("server", "reboot", "--soft", "--wait", sid)
    cloud.wait_server(sid, ("ACTIVE",))
    actions = [e["Action"] for e in cloud.cli("server", "event", "list", sid, "-f", "json")]
    assert actions[:4] == ["reboot", "reboot", "start", "stop"]


def test_reset_state_and_lock(cloud):
    s = boot(cloud)
    sid = s["id"]
    cloud.cli("server", "set", "--state", "error", sid)
    assert cloud.cli("server", "show", sid, "-f", "json")["status"] == "ERROR"
    cloud.cli("server", "set", "--state", "active", sid)
    assert cloud.cli("server", "show", sid, "-f", "json")["status"] == "ACTIVE"
    cloud.cli("server", "lock", sid)
    # the admin may still act on a locked server; the owner may not
    demo = boot(cloud, None, "nubo-demo")
    cloud.cli("server", "lock", demo["id"])
    p = cloud.cli("server", "stop", demo["id"], cloud="nubo-demo", check=False)
    assert p.returncode != 0 and "locked" in p.stderr.lower()
    cloud.cli("server", "unlock", demo["id"])


def test_delete_releases_everything(cloud):
    s = boot(cloud)
    sid = s["id"]
    assert cloud.sql("SELECT COUNT(*) AS n FROM allocations WHERE consumer_id = '%s'" % sid)[0]["n"] == 3
    cloud.cli("server", "delete", "--wait", sid)
    p = cloud.cli("server", "show", sid, check=False)
    assert p.returncode != 0
    assert cloud.sql("SELECT COUNT(*) AS n FROM allocations WHERE consumer_id = '%s'" % sid)[0]["n"] == 0
    row = cloud.sql("SELECT vm_state, deleted, id FROM instances WHERE uuid = '%s'" % sid)[0]
    assert row["vm_state"] == "deleted" and row["deleted"] == row["id"]


def test_member_isolation_and_hidden_admin_fields(cloud):
    admin_srv = boot(cloud)
    demo_srv = boot(cloud, None, "nubo-demo")
    ids = [x["ID"] for x in cloud.cli("server", "list", "-f", "json", cloud="nubo-demo")]
    assert demo_srv["id"] in ids and admin_srv["id"] not in ids
    p = cloud.cli("server", "show", admin_srv["id"], cloud="nubo-demo", check=False)
    assert p.returncode != 0 and "No server with a name or ID" in p.stderr + p.stdout or "404" in p.stderr
    shown = cloud.cli("server", "show", demo_srv["id"], "-f", "json", cloud="nubo-demo")
    assert not [k for k in shown if k.startswith("OS-EXT-SRV-ATTR")]
    # admin sees it with all_tenants
    all_ids = [x["ID"] for x in cloud.cli("server", "list", "--all-projects", "-f", "json")]
    assert demo_srv["id"] in all_ids


def test_list_filters_and_paging(cloud):
    prefix = unique("page")
    for i in range(5):
        boot(cloud, "%s-%d" % (prefix, i))
    listed = cloud.cli("server", "list", "--name", prefix, "-f", "json")
    assert len(listed) == 5
    tok = cloud.token()
    st, _, body = cloud.request("GET", "/compute/v2.1/servers?name=%s&limit=2" % prefix, token=tok)
    assert st == 200 and len(body["servers"]) == 2
    nxt = body["servers_links"][0]["href"]
    assert "marker=" in nxt
    st, _, body2 = cloud.request("GET", nxt[nxt.index("/compute"):], token=tok)
    assert len(body2["servers"]) == 2
    assert not {s["id"] for s in body["servers"]} & {s["id"] for s in body2["servers"]}
    st, _, body = cloud.request("GET", "/compute/v2.1/servers/detail?status=ACTIVE&name=%s" % prefix,
                                token=tok)
    assert len(body["servers"]) == 5
    # without a regex filter the marker is applied in SQL: paging in 3s gives the unpaged
    # order, sort keys with NULLs (task_state) and ties (vm_state) included (the marker is
    # added by hand: the next link keeps one value of a repeated key, as Nova's does)
    for sort in ("", "&sort_key=display_name&sort_dir=asc", "&sort_key=task_state&sort_dir=asc",
                 "&sort_key=task_state&sort_dir=desc", "&sort_key=vm_state&sort_key=display_name"
                 "&sort_dir=asc&sort_dir=desc"):
        st, _, whole = cloud.request("GET", "/compute/v2.1/servers/detail?limit=1000" + sort, token=tok)
        assert st == 200
        paged, url = [], "/compute/v2.1/servers/detail?limit=3" + sort
        while url:
            st, _, page = cloud.request("GET", url, token=tok)
            assert st == 200, page
            paged += [x["id"] for x in page["servers"]]
            url = None
            if page.get("servers_links"):
                url = "/compute/v2.1/servers/detail?limit=3%s&marker=%s" % (sort, paged[-1])
        assert paged == [x["id"] for x in whole["servers"]], sort


def test_metadata(cloud):
    s = boot(cloud, None, "nubo", "--property", "a=1")
    sid = s["id"]
    cloud.cli("server", "set", "--property", "b=2", sid)
    props = cloud.cli("server", "show", sid, "-f", "json")["properties"]
    assert props in ({"a": "1", "b": "2"}, "a='1', b='2'")
    cloud.cli("server", "unset", "--property", "a", sid)
    props = cloud.cli("server", "show", sid, "-f", "json")["properties"]
    assert props in ({"b": "2"}, "b='2'")


def test_sdk_create_and_wait(cloud):
    conn = cloud.sdk("nubo-demo")
    img = conn.image.find_image("cirros")
    flv = conn.compute.find_flavor("m1.tiny")
    srv = conn.compute.create_server(name=unique("sdk"), image_id=img.id, flavor_id=flv.id,
                                     networks="none")
    srv = conn.compute.wait_for_server(srv, wait=30)
    assert srv.status == "ACTIVE"
    conn.compute.delete_server(srv)
    conn.compute.wait_for_delete(srv, wait=30)


def _build_spans(log):
    """{instance: [start, end, host]} of each spawn in a compute log, from
    Nova's lines "Starting instance build on host H" and "Took N seconds
    to spawn"."""
    spans = {}
    pat = re.compile(r"^(\S+ \S+) .*?\[instance: ([0-9a-f-]{36})\] "
                     r"(Starting instance build on host (\S+)|Took [0-9.]+ seconds to spawn)", re.M)
    for m in pat.finditer(log):
        t = datetime.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S.%f").timestamp()
        span = spans.setdefault(m[2], [None, None, None])
        if m[4]:
            span[0], span[2] = t, m[4]
        else:
            span[1] = t
    return spans


def _most_at_once(spans):
    """The most spawns in progress at one time on one host."""
    most = 0
    for host in {s[2] for s in spans}:
        edges = sorted([(s[0], 1) for s in spans if s[2] == host]
                       + [(s[1], -1) for s in spans if s[2] == host])
        now = 0
        for _, d in edges:
            now += d
            most = max(most, now)
    return most


def test_builds_run_side_by_side_up_to_max_concurrent_builds(fresh_cloud):
    """A build does not hold the compute host's RPC worker: six builds of
    3 s each on one host run three at a time ([DEFAULT] max_concurrent_builds = 3; the
    others log that they wait for a slot), and a stop of another server is
    done while they spawn, not after them (two workers held by builds made
    it wait for all six)."""
    c = fresh_cloud("--fake-hosts", "1", "--set", "fake.spawn_delay_ms=3000",
                    "--set", "DEFAULT.max_concurrent_builds=3")
    tok = c.token()
    image = c.cli("image", "show", "cirros", "-f", "value", "-c", "id").strip()
    first = boot(c, unique("first"))["id"]

    def create(i):
        st, _, body = c.request("POST", "/compute/v2.1/servers", {"server": {
            "name": unique("side%d" % i), "flavorRef": "1", "imageRef": image,
            "networks": "none"}}, token=tok, headers={"OpenStack-API-Version": "compute 2.37"})
        assert st == 202, body
        return body["server"]["id"]
    ids = [create(i) for i in range(6)]
    time.sleep(0.5)  # the builds are on the host
    t0 = time.time()
    st, _, body = c.request("POST", "/compute/v2.1/servers/%s/action" % first, {"os-stop": None},
                            token=tok)
    assert st == 202, body
    while c.sql("SELECT vm_state FROM instances WHERE uuid = '%s'" % first)[0]["vm_state"] \
            != "stopped":
        assert time.time() - t0 < 30, "the stop never finished"
        time.sleep(0.05)
    stop_secs = time.time() - t0
    deadline = time.time() + 60
    while time.time() < deadline:
        rows = c.sql("SELECT vm_state FROM instances WHERE uuid IN (%s)"
                     % ",".join("'%s'" % u for u in ids))
        if all(r["vm_state"] in ("active", "error") for r in rows):
            break
        time.sleep(0.2)
    assert [r["vm_state"] for r in rows] == ["active"] * 6, rows
    log = c.log("compute")
    spans = _build_spans(log)
    assert all(spans.get(u, [None])[-1] for u in ids), (spans, log[-3000:])
    assert {spans[u][2] for u in ids} == {spans[first][2]}, spans  # one host
    assert _most_at_once([spans[u] for u in ids]) == 3, spans
    assert "Build waits for a slot: 3 of 3 concurrent builds of host" in log
    assert stop_secs < 2.5, "the stop waited %.1f s behind the builds:\n%s" % (
        stop_secs, "\n".join(l for l in log.splitlines() if first in l))


def test_server_external_events(cloud):
    """POST /os-server-external-events as Nova answers it: each event's own
    code (200 taken, 404 no such server), 200 / 207 / 404 overall, the
    names allowed by the microversion, admin only; the server's host logs
    what it received."""
    sid = boot(cloud)["id"]
    tok = cloud.token()
    path = "/compute/v2.1/os-server-external-events"

    def post(events, mv="2.1", token=tok):
        return cloud.request("POST", path, {"events": events}, token=token,
                             headers={"OpenStack-API-Version": "compute " + mv})
    st, _, body = post([{"name": "network-changed", "server_uuid": sid}])
    assert st == 200, body
    assert body["events"] == [{"name": "network-changed", "server_uuid": sid,
                               "status": "completed", "code": 200}]
    gone = "8a7f8b47-3fc6-4e1c-a6b2-0d6d3f7c1a11"
    st, _, body = post([{"name": "network-vif-plugged", "server_uuid": sid, "tag": "port-1",
                         "status": "failed"},
                        {"name": "network-changed", "server_uuid": gone}])
    assert st == 207, body
    assert [(e["code"], e["status"], e.get("tag")) for e in body["events"]] == [
        (200, "failed", "port-1"), (404, "failed", None)]
    st, _, body = post([{"name": "network-changed", "server_uuid": gone}])
    assert st == 404 and body["itemNotFound"]["message"] == "No instances found for any event"
    # volume-extended exists from 2.51
    st, _, body = post([{"name": "volume-extended", "server_uuid": sid, "tag": "vol"}])
    assert st == 400 and "events/0/name" in body["badRequest"]["message"], body
    assert "'volume-extended' is not one of ['network-changed'" in body["badRequest"]["message"]
    st, _, body = post([{"name": "volume-extended", "server_uuid": sid, "tag": "vol"}], mv="2.51")
    assert st == 200, body
    for bad, field in (([], "events"), ([{"name": "network-changed"}], "server_uuid"),
                       ([{"name": "network-changed", "server_uuid": sid, "status": "done"}],
                        "events/0/status"),
                       ([{"name": "network-changed", "server_uuid": sid, "x": 1}], "x")):
        st, _, body = post(bad)
        assert st == 400 and field in body["badRequest"]["message"], (bad, body)
    st, _, body = post([{"name": "network-changed", "server_uuid": sid}],
                       token=cloud.token(cloud="nubo-demo"))
    assert st == 403, body
    deadline = time.time() + 10
    while "Received event network-vif-plugged-port-1 (failed)" not in cloud.log("compute"):
        assert time.time() < deadline, cloud.log("compute")[-2000:]
        time.sleep(0.1)
    assert "Received event network-changed (completed)" in cloud.log("compute")


def test_usage_list_and_show(cloud):
    """os-simple-tenant-usage through `openstack usage`: a project's
    servers, deleted ones as terminated, charged by the hours of their
    lifetime in the period times the flavor's sizes; a member reads its own
    project's usage and not the list of all; a period before the servers
    has none; from 2.40 the report pages by instance."""
    live = boot(cloud, None, "nubo-demo", wait=False)
    gone = boot(cloud, None, "nubo-demo", wait=False)
    tok = cloud.token()

    def wait_for(sid, status):  # `--wait` polls every 5 s
        deadline = time.time() + 60
        while True:
            st, _, body = cloud.request("GET", "/compute/v2.1/servers/" + sid, token=tok)
            if st == status or (st == 200 and body["server"]["status"] == status):
                return
            assert time.time() < deadline and st == 200, (sid, st, body)
            time.sleep(0.1)
    wait_for(live["id"], "ACTIVE")
    wait_for(gone["id"], "ACTIVE")
    cloud.cli("server", "delete", gone["id"], cloud="nubo-demo")
    wait_for(gone["id"], 404)
    demo = cloud.cli("project", "show", "demo", "-f", "json")["id"]
    ids = {live["id"], gone["id"]}

    def mine(servers):
        return {u["instance_id"]: u for u in servers if u["instance_id"] in ids}
    rows = [r for r in cloud.cli("usage", "list", "-f", "json") if r["Project"] in ("demo", demo)]
    assert len(rows) == 1, rows
    by_id = mine(rows[0]["Servers"])
    assert set(by_id) == ids, rows
    assert by_id[live["id"]]["state"] == "active" and by_id[live["id"]]["ended_at"] is None
    assert by_id[gone["id"]]["state"] == "terminated" and by_id[gone["id"]]["ended_at"]
    for u in by_id.values():  # m1.tiny: 1 vCPU, 512 MiB, 1 GB
        assert (u["flavor"], u["vcpus"], u["memory_mb"], u["local_gb"]) == ("m1.tiny", 1, 512, 1)
        assert 0 < u["hours"] < 1 and u["uptime"] >= 0
    total = sum(u["hours"] for u in rows[0]["Servers"])
    assert abs(rows[0]["CPU Hours"] - total) < 1e-9
    assert abs(rows[0]["RAM MB-Hours"] - 512 * total) < 1e-6
    # the member's own project; the list of all projects is the admin's
    shown = cloud.cli("usage", "show", "-f", "json", cloud="nubo-demo")
    assert shown["Project"] == demo and set(mine(shown["Servers"])) == ids
    p = cloud.cli("usage", "list", cloud="nubo-demo", check=False)
    assert p.returncode != 0
    assert "Policy doesn't allow os_compute_api:os-simple-tenant-usage:list" in p.stderr
    # a period that ended before the servers: nothing
    old = cloud.cli("usage", "list", "--start", "2020-01-01", "--end", "2020-01-02", "-f", "json")
    assert old == []
    # 2.40: the CLI follows the pages; the API gives one instance a page
    paged = cloud.cli("--os-compute-api-version", "2.40", "usage", "show", "--project", "demo",
                      "-f", "json")
    assert set(mine(paged["Servers"])) == ids
    seen = []
    path = "/compute/v2.1/os-simple-tenant-usage/%s?start=2020-01-01T00:00:00&limit=1" % demo
    for _ in range(50):
        st, _, body = cloud.request("GET", path, token=tok,
                                    headers={"OpenStack-API-Version": "compute 2.40"})
        assert st == 200, body
        seen += [u["instance_id"] for u in body["tenant_usage"].get("server_usages", [])]
        if "tenant_usage_links" not in body:
            break
        href = body["tenant_usage_links"][0]["href"]
        path = href[href.index("/compute"):]
    assert ids <= set(seen) and len(seen) == len(set(seen)) and seen == sorted(seen)
    st, _, body = cloud.request("GET", "/compute/v2.1/os-simple-tenant-usage/%s?start=2026-12-09"
                                % demo, token=tok)
    assert st == 400 and body["badRequest"]["message"] == (
        "Invalid datetime string: Datetime is in invalid format")

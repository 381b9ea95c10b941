"""Placement claims, filters, the 'No valid host' explanation, reschedules
and quotas, on fake hosts."""
import concurrent.futures
import json

from conftest import unique


def create_flavor(cloud, ram, vcpus=1, disk=1):
    name = unique("flv")
    cloud.cli("flavor", "create", "--ram", ram, "--vcpus", vcpus, "--disk", disk, name)
    return name


def fault(cloud, sid):
    tok = cloud.token()
    st, _, body = cloud.request("GET", "/compute/v2.1/servers/%s" % sid, token=tok)
    return body["server"]["fault"]


def largest_free_ram(cloud):
    """The most MEMORY_MB any provider has free now, as placement counts it:
    the shared cloud carries what earlier tests of the session left."""
    tok = cloud.token()
    hdr = {"OpenStack-API-Version": "placement 1.36"}
    _, _, rps = cloud.request("GET", "/placement/resource_providers", token=tok, headers=hdr)
    best = 0
    for rp in rps["resource_providers"]:
        _, _, inv = cloud.request("GET", "/placement/resource_providers/%s/inventories" % rp["uuid"],
                                  token=tok, headers=hdr)
        _, _, use = cloud.request("GET", "/placement/resource_providers/%s/usages" % rp["uuid"],
                                  token=tok, headers=hdr)
        ram = inv["inventories"].get("MEMORY_MB")
        if ram:
            cap = int((ram["total"] - ram["reserved"]) * ram["allocation_ratio"])
            best = max(best, cap - use["usages"].get("MEMORY_MB", 0))
    return best


def test_no_valid_host_explains_placement_shortage(cloud):
    # within the RAM quota (51200) but bigger than any host (32768 - 512 reserved)
    free = largest_free_ram(cloud)
    assert 0 < free <= 32256, free
    big = create_flavor(cloud, 40000)
    s = cloud.cli("server", "create", "--flavor", big, "--image", "cirros", "--wait", unique("big"), "-f", "json", check=False)
    sid = cloud.cli("server", "list", "--flavor", big, "-f", "json")[0]["ID"]
    f = fault(cloud, sid)
    assert f["message"] == "No valid host was found. "
    assert f["code"] == 500
    # which resource was short and the largest free amount seen
    assert "MEMORY_MB: requested 40000, largest free %d" % free in f["details"], f["details"]
    assert "largest free" in f["details"]
    ev = cloud.cli("server", "event", "list", sid, "-f", "json")
    detail = cloud.cli("server", "event", "show", sid, ev[0]["Request ID"], "-f", "json")
    assert any(e["result"] == "Error" for e in detail["events"])


def test_no_valid_host_explains_filters(fresh_cloud):
    # AvailabilityZoneFilter instead of the placement prefilter; fake-4 alone
    # in az2 and full, so placement offers fake-1..3, all in az1.
    c = fresh_cloud("--fake-hosts", "4",
                    "--set", "filter_scheduler.enabled_filters=ComputeFilter,AvailabilityZoneFilter",
                    "--set", "scheduler.query_placement_for_availability_zone=false")
    c.cli("aggregate", "create", "--zone", "az1", "agg1")
    for h in ("fake-1", "fake-2", "fake-3"):
        c.cli("aggregate", "add", "host", "agg1", h)
    c.cli("aggregate", "create", "--zone", "az2", "agg2")
    c.cli("aggregate", "add", "host", "agg2", "fake-4")
    fill = create_flavor(c, 32256)
    c.cli("server", "create", "--flavor", fill, "--image", "cirros", "--availability-zone", "az2",
          "--wait", "filler")
    c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros",
          "--availability-zone", "az2", "--wait", "nohost", check=False)
    sid = [s for s in c.cli("server", "list", "-f", "json") if s["Name"] == "nohost"][0]["ID"]
    f = fault(c, sid)
    assert f["message"] == "No valid host was found. There are not enough hosts available."
    d = f["details"]
    assert "AvailabilityZoneFilter: 3 -> 0" in d, d
    for h in ("fake-1", "fake-2", "fake-3"):
        assert "%s: in zone az1, requested az2" % h in d, d


def test_unknown_zone_is_refused_at_api(cloud):
    p = cloud.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--availability-zone", "nowhere", unique("z"), check=False)
    assert p.returncode != 0 and "availability zone" in p.stderr.lower()


def test_reschedule_moves_allocation(fresh_cloud):
    c = fresh_cloud("--set", "fake.fail_spawn_hosts=fake-1,fake-2",
                    "--set", "filter_scheduler.ram_weight_multiplier=1.0")
    # Boot several: any landing first on a failing host must be rescheduled
    ids = [c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait", unique("rs"), "-f", "json")["id"] for _ in range(3)]
    for sid in ids:
        s = c.cli("server", "show", sid, "-f", "json")
        assert s["status"] == "ACTIVE" and s["OS-EXT-SRV-ATTR:host"] == "fake-3"
        rows = c.sql("SELECT rp.name FROM allocations a JOIN resource_providers rp ON "
                     "rp.id = a.resource_provider_id WHERE a.consumer_id = '%s'" % sid)
        assert {r["name"] for r in rows} == {"fake-3"}


def test_all_hosts_fail_gives_exhausted_fault(fresh_cloud):
    c = fresh_cloud("--set", "fake.fail_spawn_hosts=fake-1,fake-2,fake-3")
    c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait", unique("ex"), check=False)
    sid = c.cli("server", "list", "-f", "json")[0]["ID"]
    f = fault(c, sid)
    assert f["message"].startswith("Exceeded maximum number of retries. Exhausted all hosts "
                                   "available for retrying build failures for instance %s" % sid)
    assert c.sql("SELECT COUNT(*) AS n FROM allocations WHERE consumer_id = '%s'" % sid)[0]["n"] == 0


def test_concurrent_boots_never_overcommit(fresh_cloud):
    # 1 host with room for exactly 3 m1.small-sized (2048 MB) servers after reservation
    c = fresh_cloud("--fake-hosts", "1", "--set", "fake.memory_mb=6656")
    flv = create_flavor(c, 2048)
    tok = c.token()
    body = lambda i: {"server": {"name": "cc-%d" % i, "flavorRef": c.cli(
        "flavor", "show", flv, "-f", "value", "-c", "id").strip(), "imageRef": c.cli(
        "image", "show", "cirros", "-f", "value", "-c", "id").strip(), "networks": "none"}}
    bodies = [body(i) for i in range(6)]
    hdr = {"OpenStack-API-Version": "compute 2.37"}
    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        res = list(ex.map(lambda b: c.request("POST", "/compute/v2.1/servers", b, token=tok,
                                              headers=hdr), bodies))
    assert all(r[0] == 202 for r in res), res
    ids = [r[2]["server"]["id"] for r in res]
    final = {sid: c.wait_server(sid)["status"] for sid in ids}
    assert sorted(final.values()) == ["ACTIVE"] * 3 + ["ERROR"] * 3, final
    usage = c.sql("SELECT SUM(used) AS u FROM allocations WHERE resource_class = 'MEMORY_MB'")
    assert usage[0]["u"] == 3 * 2048


def test_quota_exceeded_message(fresh_cloud):
    c = fresh_cloud(quota=False)
    c.cli("quota", "set", "--cores", "2", "demo")
    flv = create_flavor(c, 256, vcpus=2)
    c.cli("server", "create", "--flavor", flv, "--image", "cirros", "--wait", "q1", cloud="nubo-demo")
    p = c.cli("server", "create", "--flavor", flv, "--image", "cirros", "q2", cloud="nubo-demo", check=False)
    assert p.returncode != 0
    assert "Quota exceeded for cores: Requested 2, but already used 2 of 2 cores" in p.stderr

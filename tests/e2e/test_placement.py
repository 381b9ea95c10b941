"""Placement through osc-placement."""
import concurrent.futures
import uuid

from conftest import unique


def test_providers_inventories_usages(cloud):
    rps = cloud.cli("resource", "provider", "list", "-f", "json")
    names = sorted(r["name"] for r in rps)
    assert names == ["fake-1", "fake-2", "fake-3"]
    rp = [r for r in rps if r["name"] == "fake-1"][0]
    inv = {i["resource_class"]: i for i in
           cloud.cli("resource", "provider", "inventory", "list", rp["uuid"], "-f", "json")}
    assert {"VCPU", "MEMORY_MB", "DISK_GB"} <= set(inv)
    assert inv["VCPU"]["allocation_ratio"] == 4.0
    assert inv["MEMORY_MB"]["reserved"] == 512
    cloud.cli("resource", "provider", "show", rp["uuid"], "-f", "json")
    usage = {u["resource_class"]: u["usage"] for u in
             cloud.cli("resource", "provider", "usage", "show", rp["uuid"], "-f", "json")}
    assert "VCPU" in usage


def test_allocation_show_and_delete(cloud):
    s = cloud.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait", unique("alloc"), "-f", "json")
    allocs = cloud.cli("resource", "provider", "allocation", "show", s["id"], "-f", "json")
    assert len(allocs) == 1 and allocs[0]["resources"] == {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}
    # the runbook's lines, under the create's request ID: placement's request
    # log of the (in-process) claim, and the compute's claim before the spawn
    req = cloud.sql("SELECT request_id FROM instance_actions WHERE instance_uuid = '%s' AND "
                    "action = 'create'" % s["id"])[0]["request_id"]
    put = '- "PUT /placement/allocations/%s" status: 204 len: 0 microversion: 1.36' % s["id"]
    assert [l for l in cloud.log("placement").splitlines() if req in l and put in l]
    claim = "[instance: %s] Claim successful on node %s" % (s["id"], s["OS-EXT-SRV-ATTR:host"])
    assert [l for l in cloud.log("compute").splitlines()
            if req in l and "INFO nubo.compute.claims" in l and claim in l]
    cloud.cli("resource", "provider", "allocation", "delete", s["id"])
    assert cloud.cli("resource", "provider", "allocation", "show", s["id"], "-f", "json") == []


PLC_HDR = {"OpenStack-API-Version": "placement 1.39"}


def vcpu_provider(cloud, tok, total):
    """A new resource provider with `total` VCPU; its UUID."""
    rp = str(uuid.uuid4())
    st, _, _ = cloud.request("POST", "/placement/resource_providers",
                             {"name": unique("rp"), "uuid": rp}, token=tok, headers=PLC_HDR)
    assert st == 200
    st, _, _ = cloud.request("PUT", "/placement/resource_providers/%s/inventories" % rp,
                             {"resource_provider_generation": 0,
                              "inventories": {"VCPU": {"total": total}}}, token=tok, headers=PLC_HDR)
    assert st == 200
    return rp


def claims_at_once(cloud, tok, rp, vcpus, n):
    """n new consumers claiming `vcpus` VCPU of rp at the same time: the
    statuses, sorted."""
    def claim(_):
        return cloud.request("PUT", "/placement/allocations/%s" % uuid.uuid4(), {
            "allocations": {rp: {"resources": {"VCPU": vcpus}}},
            "project_id": str(uuid.uuid4()), "user_id": str(uuid.uuid4()),
            "consumer_generation": None}, token=tok,
            headers={"OpenStack-API-Version": "placement 1.28"})[0]
    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        return sorted(ex.map(claim, range(n)))


def test_concurrent_claims_one_wins(cloud):
    tok = cloud.token()
    rp = vcpu_provider(cloud, tok, 4)
    assert claims_at_once(cloud, tok, rp, 3, 2) == [204, 409]


def test_concurrent_claims_rounds(cloud):
    """Four claims of 2 VCPU at once onto 4, five times over: exactly two
    win each round and the others get placement's 409, never a 500 (on
    MariaDB the capacity checks deadlock and the loser's write is redone)."""
    tok = cloud.token()
    for _ in range(5):
        rp = vcpu_provider(cloud, tok, 4)
        assert claims_at_once(cloud, tok, rp, 2, 4) == [204, 204, 409, 409]
        st, _, body = cloud.request("GET", "/placement/resource_providers/%s/usages" % rp,
                                    token=tok, headers=PLC_HDR)
        assert st == 200 and body["usages"]["VCPU"] == 4


def test_allocation_candidates(cloud):
    out = cloud.cli("--os-placement-api-version", "1.29", "allocation", "candidate", "list",
                    "--resource", "VCPU=1", "--resource", "MEMORY_MB=512", "-f", "json")
    assert len({c["resource provider"] for c in out}) >= 3

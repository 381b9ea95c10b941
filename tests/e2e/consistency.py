"""What a fault test checks once the cloud has settled (issue 13's list):
every server ACTIVE or ERROR with a fault naming the cause, none in a task
state, no duplicate server, no lost acknowledged request (every accepted boot
exists or was deleted, every accepted delete is gone) and placement's
allocations exactly those of the live servers: none leaked (a consumer that is
no live server), none missing (an ACTIVE server without its allocation on its
host's provider).

    servers = settle(cloud, token, prefix="load-")
    check_consistent(cloud, token, accepted=ids, deleted=gone_ids, prefix="load-")

`cloud` is anything with conftest.Cloud's request(method, path, body, token)."""
import time

CMV = {"OpenStack-API-Version": "compute 2.37"}


def _get(c, tok, path):
    st, _, body = c.request("GET", path, token=tok, headers=CMV)
    assert st == 200, (path, st, body)
    return body


def servers_named(c, tok, prefix):
    return _get(c, tok, "/compute/v2.1/servers/detail?all_tenants=1&name=%s" % prefix)["servers"]


def settle(c, tok, prefix, timeout=120, final=("ACTIVE", "ERROR")):
    """Waits until every server whose name starts with prefix is in a final
    status with no task state; returns them. Fails naming the stuck ones."""
    deadline = time.time() + timeout
    while True:
        servers = servers_named(c, tok, prefix)
        busy = [s for s in servers if s["status"] not in final or s["OS-EXT-STS:task_state"]]
        if not busy:
            return servers
        assert time.time() < deadline, "stuck %d s after the fault: %s" % (timeout, [
            (s["name"], s["status"], s["OS-EXT-STS:task_state"]) for s in busy])
        time.sleep(0.5)


def allocations_by_consumer(c, tok):
    """{consumer uuid: {provider name: resources}} over every provider."""
    out = {}
    for rp in _get(c, tok, "/placement/resource_providers")["resource_providers"]:
        allocs = _get(c, tok, "/placement/resource_providers/%s/allocations" % rp["uuid"])
        for consumer, a in allocs["allocations"].items():
            out.setdefault(consumer, {})[rp["name"]] = a["resources"]
    return out


def check_consistent(c, tok, accepted=(), deleted=(), prefix=""):
    """Asserts the list in the module's docstring over the servers named
    prefix*; returns (servers, allocations by consumer)."""
    servers = settle(c, tok, prefix, timeout=5)
    names = [s["name"] for s in servers]
    assert len(names) == len(set(names)), "duplicate servers: %s" % sorted(
        n for n in set(names) if names.count(n) > 1)
    ids = {s["id"] for s in servers}
    lost = [i for i in accepted if i not in ids and i not in deleted]
    assert not lost, "accepted boots with no server: %s" % lost
    for sid in deleted:
        st, _, _ = c.request("GET", "/compute/v2.1/servers/%s" % sid, token=tok)
        assert st == 404, "deleted server %s still there (%s)" % (sid, st)
    for s in servers:
        if s["status"] == "ERROR":
            assert (s.get("fault") or {}).get("message"), "ERROR without a fault: %s" % s
    allocs = allocations_by_consumer(c, tok)
    for s in servers:
        mine = allocs.get(s["id"], {})
        host = s["OS-EXT-SRV-ATTR:hypervisor_hostname"]
        if s["status"] == "ACTIVE":
            assert list(mine) == [host], "%s ACTIVE on %s, allocations on %s" % (
                s["name"], host, list(mine))
        elif not s["OS-EXT-SRV-ATTR:host"]:
            assert not mine, "%s in ERROR with no host holds %s" % (s["name"], mine)
    live = {s["id"] for s in _get(c, tok, "/compute/v2.1/servers?all_tenants=1")["servers"]}
    leaked = {k: v for k, v in allocs.items() if k not in live}
    assert not leaked, "allocations of no live server: %s" % leaked
    return servers, allocs

"""Pause, unpause, suspend, resume and the console log (os-getConsoleOutput)
through the whole pipeline on fake hosts, with the real CLI, as Nova does
them: state checks and their 409s in the API, the work in the conductor and
the agent, instance actions and events, the power sync of paused and
suspended servers, and failures on the driver."""
import json
import os
import time

import pytest

from conftest import unique

POWER = {"Running": 1, "Paused": 3, "Shutdown": 4}
MV = {"OpenStack-API-Version": "compute 2.84"}
_tokens = {}


def token(c, cloud_name="nubo"):
    """A token per cloud and test cloud (the CLI is slow; HTTP polls are not)."""
    key = (c.url, cloud_name)
    if key not in _tokens:
        _tokens[key] = c.token(cloud_name)
    return _tokens[key]


_booted = []


@pytest.fixture(autouse=True)
def delete_booted():
    """Deletes the servers a test booted and waits until they are gone, so
    that the shared cloud's hosts are as free afterwards as before (the
    scheduling tests count free memory)."""
    yield
    gone = []
    while _booted:
        c, sid, cloud_name = _booted.pop()
        if c.proc.poll() is None:  # a fresh cloud may be stopped already
            c.request("DELETE", "/compute/v2.1/servers/%s" % sid, token=token(c, cloud_name))
            gone.append((c, sid, cloud_name))
    for c, sid, cloud_name in gone:
        deadline = time.time() + 30
        while time.time() < deadline:
            st, _, _ = c.request("GET", "/compute/v2.1/servers/%s" % sid,
                                 token=token(c, cloud_name))
            if st == 404:
                break
            time.sleep(0.1)


def boot(c, cloud_name="nubo"):
    s = c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait",
              unique("act"), "-f", "json", cloud=cloud_name)
    _booted.append((c, s["id"], cloud_name))
    return s


def power(show):
    p = show["OS-EXT-STS:power_state"]
    return POWER.get(p, p)


def action(c, sid, name, body=None, cloud_name="nubo"):
    return c.request("POST", "/compute/v2.1/servers/%s/action" % sid, body={name: body},
                     token=token(c, cloud_name))


def show(c, sid, cloud_name="nubo"):
    st, _, body = c.request("GET", "/compute/v2.1/servers/%s" % sid, token=token(c, cloud_name),
                            headers=MV)
    assert st == 200, body
    return body["server"]


def wait(c, sid, statuses, timeout=30, cloud_name="nubo", task_done=True):
    """Polls GET /servers/{id} until the status is one of statuses (and, by
    default, no task is left)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = show(c, sid, cloud_name)
        if s["status"] in statuses and not (task_done and s["OS-EXT-STS:task_state"]):
            return s
        time.sleep(0.1)
    raise AssertionError("server %s not in %s after %ss: %s" % (sid, statuses, timeout, s))


def wait_task_done(c, sid, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = show(c, sid)
        if s["OS-EXT-STS:task_state"] is None:
            return s
        time.sleep(0.1)
    raise AssertionError("task of %s not done after %ss" % (sid, timeout))


def actions(c, sid):
    st, _, body = c.request("GET", "/compute/v2.1/servers/%s/os-instance-actions" % sid,
                            token=token(c), headers=MV)
    assert st == 200, body
    return body["instanceActions"]


def events(c, sid, request_id):
    st, _, body = c.request("GET", "/compute/v2.1/servers/%s/os-instance-actions/%s"
                            % (sid, request_id), token=token(c), headers=MV)
    assert st == 200, body
    return {e["event"]: e for e in body["instanceAction"]["events"]}


def test_pause_unpause_suspend_resume(cloud):
    sid = boot(cloud)["id"]
    cloud.cli("server", "pause", sid)
    s = wait(cloud, sid, ("PAUSED",))
    assert (s["OS-EXT-STS:vm_state"], s["OS-EXT-STS:power_state"]) == ("paused", 3)
    cloud.cli("server", "unpause", sid)
    s = wait(cloud, sid, ("ACTIVE",))
    assert s["OS-EXT-STS:power_state"] == 1
    cloud.cli("server", "suspend", sid)
    s = wait(cloud, sid, ("SUSPENDED",))
    # a suspended libvirt guest is shut off with its memory saved: Nova says 4
    assert (s["OS-EXT-STS:vm_state"], s["OS-EXT-STS:power_state"]) == ("suspended", 4)
    cloud.cli("server", "resume", sid)
    wait(cloud, sid, ("ACTIVE",))
    s = cloud.cli("server", "show", sid, "-f", "json")
    assert (s["status"], power(s), s["OS-EXT-STS:task_state"]) == ("ACTIVE", 1, None)

    acts = cloud.cli("server", "event", "list", sid, "-f", "json")
    assert [a["Action"] for a in acts] == ["resume", "suspend", "unpause", "pause", "create"]
    host = s["OS-EXT-SRV-ATTR:host"]
    for a in acts[:4]:
        ev = events(cloud, sid, a["Request ID"])
        name = "compute_%s_instance" % a["Action"]
        assert list(ev) == [name], ev
        assert ev[name]["result"] == "Success" and ev[name]["host"] == host
    # the request ID runs from the API through the conductor to the host
    for role in ("api", "conductor", "compute"):
        assert acts[0]["Request ID"] in cloud.log(role), role

    log = cloud.cli("console", "log", "show", sid)
    lines = log.splitlines()
    assert "defined on host %s" % host in lines[0], log
    assert "flavor m1.tiny: 1 vCPU, 512 MB RAM, 1 GB root disk" in log
    order = ["paused: vCPUs stopped", "unpaused: vCPUs running",
             "suspended: memory state saved to disk", "resumed from the saved memory state"]
    pos = [log.index(o) for o in order]
    assert pos == sorted(pos), log


def test_wrong_states_are_409_with_novas_messages(cloud):
    sid = boot(cloud)["id"]
    for name in ("unpause", "resume"):
        st, _, body = action(cloud, sid, name)
        assert st == 409, body
        assert body["conflictingRequest"]["message"] == (
            "Cannot '%s' instance %s while it is in vm_state active" % (name, sid))
    assert action(cloud, sid, "pause")[0] == 202
    wait(cloud, sid, ("PAUSED",))
    for name in ("pause", "suspend", "resume"):
        st, _, body = action(cloud, sid, name)
        assert st == 409 and body["conflictingRequest"]["message"] == (
            "Cannot '%s' instance %s while it is in vm_state paused" % (name, sid)), body
    # the CLI shows the same conflict
    p = cloud.cli("server", "pause", sid, check=False)
    assert p.returncode != 0 and "while it is in vm_state paused" in p.stderr
    assert action(cloud, sid, "unpause")[0] == 202
    wait(cloud, sid, ("ACTIVE",))
    assert action(cloud, sid, "suspend")[0] == 202
    # the task state is set before the 202: a second request conflicts at once
    st, _, body = action(cloud, sid, "suspend")
    assert st == 409, body
    wait(cloud, sid, ("SUSPENDED",))
    for name in ("pause", "unpause", "suspend"):
        st, _, body = action(cloud, sid, name)
        assert st == 409 and body["conflictingRequest"]["message"] == (
            "Cannot '%s' instance %s while it is in vm_state suspended" % (name, sid)), body
    # a stopped server is none of these
    assert action(cloud, sid, "resume")[0] == 202
    wait(cloud, sid, ("ACTIVE",))
    assert action(cloud, sid, "os-stop")[0] == 202
    wait(cloud, sid, ("SHUTOFF",))
    st, _, body = action(cloud, sid, "suspend")
    assert st == 409 and "vm_state stopped" in body["conflictingRequest"]["message"]
    # unknown servers are 404
    st, _, body = action(cloud, "5e0d7a4c-0000-4000-8000-000000000000", "pause")
    assert st == 404, body


def test_locked_and_other_projects(cloud):
    demo = boot(cloud, "nubo-demo")["id"]
    cloud.cli("server", "lock", demo, cloud="nubo-demo")
    p = cloud.cli("server", "pause", demo, cloud="nubo-demo", check=False)
    assert p.returncode != 0 and "locked" in p.stderr.lower()
    st, _, body = action(cloud, demo, "suspend", cloud_name="nubo-demo")
    assert st == 409 and body["conflictingRequest"]["message"] == "Instance %s is locked" % demo
    # the admin may act on a locked server
    assert action(cloud, demo, "pause")[0] == 202
    wait(cloud, demo, ("PAUSED",), cloud_name="nubo-demo")
    assert action(cloud, demo, "unlock", cloud_name="nubo-demo")[0] == 202
    assert action(cloud, demo, "unpause", cloud_name="nubo-demo")[0] == 202
    wait(cloud, demo, ("ACTIVE",), cloud_name="nubo-demo")
    # another project's server is not found, for actions and the console
    mine = boot(cloud)["id"]
    for name, args in (("pause", None), ("os-getConsoleOutput", {})):
        st, _, _ = action(cloud, mine, name, args, cloud_name="nubo-demo")
        assert st == 404, name


def test_console_output(cloud):
    sid = boot(cloud)["id"]
    full = cloud.cli("console", "log", "show", sid)
    assert "boot source: " in full and "booted, running" in full
    st, _, body = action(cloud, sid, "os-getConsoleOutput", {})
    assert st == 200 and list(body) == ["output"]
    text = body["output"]
    assert text.endswith("\n") and text.count("\n") >= 4
    assert full.rstrip("\n") == text.rstrip("\n")
    # length N: the last N pieces of the text split at newlines (Nova's
    # _tail_log): with the final newline, N - 1 lines
    for length in (2, "3", 1, 0):
        st, _, body = action(cloud, sid, "os-getConsoleOutput", {"length": length})
        assert st == 200
        n = int(length)
        want = "\n".join(text.split("\n")[-n:]) if n else ""
        assert body["output"] == want, (length, body)
    for length in (None, -1, 1000):
        st, _, body = action(cloud, sid, "os-getConsoleOutput", {"length": length})
        assert st == 200 and body["output"] == text, length
    tail = cloud.cli("console", "log", "show", "--lines", "3", sid)
    assert tail.rstrip("\n") == "\n".join(text.rstrip("\n").split("\n")[-2:])

    # Nova's schema
    bad = [({"length": -2}, "-2 is less than the minimum of -1"),
           ({"length": "ten"}, "'ten' does not match '^-?[0-9]+$'"),
           ({"length": 1.5}, "is not of type 'integer', 'string', 'null'"),
           ({"lines": 3}, "Additional properties are not allowed ('lines' was unexpected)"),
           (None, "None is not of type 'object'")]
    for args, msg in bad:
        st, _, body = action(cloud, sid, "os-getConsoleOutput", args)
        assert st == 400 and msg in body["badRequest"]["message"], (args, body)

    # a stopped server still has its log (Tempest reads it in SHUTOFF)
    assert action(cloud, sid, "os-stop")[0] == 202
    wait(cloud, sid, ("SHUTOFF",))
    st, _, body = action(cloud, sid, "os-getConsoleOutput", {"length": 3})
    assert st == 200 and "shut down" in body["output"] and len(body["output"].split("\n")) == 3

    st, _, body = action(cloud, "5e0d7a4c-0000-4000-8000-000000000001", "os-getConsoleOutput",
                         {"length": 10})
    assert st == 404


def test_console_of_a_server_without_host_is_409(cloud):
    name = unique("flv")
    cloud.cli("flavor", "create", "--ram", "40000", "--vcpus", "1", "--disk", "1", name)
    st, _, body = cloud.request("GET", "/image/v2/images?name=cirros", token=token(cloud))
    image = body["images"][0]["id"]
    st, _, body = cloud.request("GET", "/compute/v2.1/flavors", token=token(cloud))
    flavor = [f["id"] for f in body["flavors"] if f["name"] == name][0]
    st, _, body = cloud.request("POST", "/compute/v2.1/servers", token=token(cloud), body={
        "server": {"name": unique("nohost"), "imageRef": image, "flavorRef": flavor}})
    assert st == 202, body
    sid = body["server"]["id"]
    _booted.append((cloud, sid, "nubo"))
    wait(cloud, sid, ("ERROR",))
    st, _, body = action(cloud, sid, "os-getConsoleOutput", {"length": 5})
    assert st == 409 and body["conflictingRequest"]["message"] == "Instance %s is not ready" % sid
    p = cloud.cli("console", "log", "show", sid, check=False)
    assert p.returncode != 0 and "is not ready" in p.stderr



def test_diagnostics(cloud):
    """GET /servers/{id}/diagnostics from the fake driver through the
    agent: the free-form dict before 2.48, the standard shape from 2.48,
    admin only, 409 when the guest is not running (Nova's messages)."""
    sid = boot(cloud)["id"]
    path = "/compute/v2.1/servers/%s/diagnostics" % sid
    st, _, body = cloud.request("GET", path, token=token(cloud))
    assert st == 200 and body["memory"] == 524288 and "cpu0_time" in body, body
    st, _, body = cloud.request("GET", path, token=token(cloud),
                                headers={"OpenStack-API-Version": "compute 2.48"})
    assert st == 200 and body["state"] == "running" and body["driver"] == "libvirt", body
    assert body["num_cpus"] == len(body["cpu_details"]) == 1
    assert body["num_disks"] == len(body["disk_details"]) and body["num_nics"] == 1
    assert set(body["memory_details"]) == {"maximum", "used"}
    d = cloud.cli("server", "show", "--diagnostics", sid, "-f", "json")
    assert d["memory"] == 524288, d
    st, _, body = cloud.request("GET", path, token=token(cloud, "nubo-demo"))
    assert st in (403, 404), body
    assert action(cloud, sid, "os-stop")[0] == 202
    wait(cloud, sid, ("SHUTOFF",))
    st, _, body = cloud.request("GET", path, token=token(cloud))
    assert st == 409 and body["conflictingRequest"]["message"] == (
        "Cannot 'get_diagnostics' instance %s while it is in power state shutdown" % sid), body

def guests_file(c, host):
    return os.path.join(c.state_dir, "fake", "%s.json" % host)


def set_guest_power(c, host, sid, state):
    """Changes a fake guest behind nubo's back, as an operator's virsh would."""
    path = guests_file(c, host)
    with open(path) as f:
        guests = json.load(f)
    guests[sid]["power_state"] = state
    time.sleep(0.05)  # a different mtime than the driver's own write
    with open(path + ".edit", "w") as f:
        json.dump(guests, f)
    os.rename(path + ".edit", path)


def test_power_sync_of_paused_and_suspended_servers(fresh_cloud):
    c = fresh_cloud("--set", "compute.sync_power_state_interval=1")
    paused, suspended, active = (boot(c)["id"] for _ in range(3))
    assert action(c, paused, "pause")[0] == 202
    assert action(c, suspended, "suspend")[0] == 202
    wait(c, paused, ("PAUSED",))
    wait(c, suspended, ("SUSPENDED",))
    time.sleep(3)  # a few sync passes: a suspended guest is shut down by design
    s = show(c, suspended)
    assert (s["status"], s["OS-EXT-STS:power_state"]) == ("SUSPENDED", 4)
    assert [a["action"] for a in actions(c, suspended)] == ["suspend", "create"]
    for role in ("compute", "conductor"):
        assert not [line for line in c.log(role).splitlines()
                    if suspended in line and ("by itself" in line or "stop API" in line)], role
    assert show(c, paused)["status"] == "PAUSED"

    # the paused guest shuts down behind nubo's back: Nova stops the server
    set_guest_power(c, show(c, paused)["OS-EXT-SRV-ATTR:host"], paused, 4)
    s = wait(c, paused, ("SHUTOFF",), timeout=20)
    assert s["OS-EXT-STS:power_state"] == 4
    acts = actions(c, paused)
    assert [a["action"] for a in acts][:2] == ["stop", "pause"]
    assert "compute_stop_instance" in events(c, paused, acts[0]["request_id"])
    assert "Paused instance shutdown by itself. Calling the stop API." in c.log("conductor")

    # an active guest paused by someone else: Nova ignores it (bug 1097806),
    # only the power state follows
    ahost = show(c, active)["OS-EXT-SRV-ATTR:host"]
    set_guest_power(c, ahost, active, 3)
    deadline = time.time() + 20
    while time.time() < deadline:
        s = show(c, active)
        if s["OS-EXT-STS:power_state"] == 3:
            break
        time.sleep(0.2)
    assert (s["status"], s["OS-EXT-STS:power_state"]) == ("ACTIVE", 3)
    assert "Instance is paused unexpectedly. Ignore." in c.log("conductor")
    # a guest of an active server found suspended (7): Nova calls the stop API
    set_guest_power(c, ahost, active, 7)
    wait(c, active, ("SHUTOFF",), timeout=20)
    assert "Instance is suspended unexpectedly. Calling the stop API." in c.log("conductor")


def test_driver_failures_clear_the_task_and_record_a_fault(fresh_cloud):
    c = fresh_cloud()
    a, b = boot(c)["id"], boot(c)["id"]
    for sid in (a, b):
        set_guest_power(c, show(c, sid)["OS-EXT-SRV-ATTR:host"], sid, 4)  # no sync runs
    # a failed pause leaves the server as it was, with a fault and an Error event
    c.cli("server", "pause", a)
    s = wait_task_done(c, a)
    assert (s["status"], s["OS-EXT-STS:vm_state"]) == ("ACTIVE", "active")
    acts = actions(c, a)
    ev = events(c, a, acts[0]["request_id"])["compute_pause_instance"]
    assert acts[0]["action"] == "pause" and ev["result"] == "Error"
    assert "domain is not running" in ev["details"]
    faults = c.sql("SELECT message FROM instance_faults WHERE instance_uuid = '%s'" % a)
    assert any("domain is not running" in f["message"] for f in faults), faults
    # a failed suspend sets ERROR (Nova's _error_out_instance_on_exception)
    assert action(c, b, "suspend")[0] == 202
    s = wait(c, b, ("ERROR",))
    assert "domain is not running" in s["fault"]["message"]

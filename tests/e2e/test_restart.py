"""Kill nubo during boots and start it again: nothing stays BUILD, no
allocation leaks. SIGTERM finishes in-flight work cleanly."""
import concurrent.futures
import signal
import time

from conftest import Cloud


def test_kill_during_boot_then_restart(fresh_cloud):
    c = fresh_cloud()
    tok = c.token()
    image = c.cli("image", "show", "cirros", "-f", "value", "-c", "id").strip()
    hdr = {"OpenStack-API-Version": "compute 2.37"}

    def boot(i):
        return c.request("POST", "/compute/v2.1/servers", {"server": {
            "name": "k%d" % i, "flavorRef": "1", "imageRef": image, "networks": "none"}},
            token=tok, headers=hdr)
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(boot, i) for i in range(40)]
        time.sleep(0.05)
        c.proc.send_signal(signal.SIGKILL)
        c.proc.wait()
        for f in futs:
            try:
                f.result()
            except Exception:
                pass
    c.start()
    deadline = time.time() + 30
    while time.time() < deadline:
        rows = c.sql("SELECT vm_state FROM instances WHERE deleted = 0 AND vm_state = 'building'")
        if not rows:
            break
        time.sleep(0.2)
    assert rows == []
    leaked = c.sql("SELECT DISTINCT consumer_id FROM allocations WHERE consumer_id NOT IN "
                   "(SELECT uuid FROM instances WHERE deleted = 0 AND host IS NOT NULL)")
    assert leaked == []
    errored = c.sql("SELECT uuid FROM instances WHERE deleted = 0 AND vm_state = 'error'")
    for r in errored:
        assert c.sql("SELECT COUNT(*) AS n FROM instance_faults WHERE instance_uuid = '%s'"
                     % r["uuid"])[0]["n"] >= 1
    # the cloud still works after the restart
    s = c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait", "after", "-f", "json")
    assert s["status"] == "ACTIVE"


def test_sigterm_is_clean(fresh_cloud):
    c = fresh_cloud()
    assert c.stop(signal.SIGTERM) == 0
    assert "stopped" in c.log("main")


def test_recovery_waits_for_the_agents(fresh_cloud):
    """Builds accepted before a kill -9 are resumed once the hosts' agents
    answer: a host that is not up yet is no failed attempt, so every
    accepted server ends ACTIVE (none ERROR with "Exceeded maximum number
    of retries" because of the restart)."""
    c = fresh_cloud("--set", "fake.spawn_delay_ms=4000")
    tok = c.token()
    image = c.cli("image", "show", "cirros", "-f", "value", "-c", "id").strip()
    accepted = []

    def boot(i):
        st, _, body = c.request("POST", "/compute/v2.1/servers", {"server": {
            "name": "r%d" % i, "flavorRef": "1", "imageRef": image, "networks": "none"}},
            token=tok, headers={"OpenStack-API-Version": "compute 2.37"})
        if st == 202:
            accepted.append(body["server"]["id"])
    with concurrent.futures.ThreadPoolExecutor(3) as ex:
        futs = [ex.submit(boot, i) for i in range(15)]
        deadline = time.time() + 20
        while len(accepted) < 6 and time.time() < deadline:
            time.sleep(0.01)
        c.proc.send_signal(signal.SIGKILL)
        c.proc.wait()
        for f in futs:
            try:
                f.result()
            except Exception:
                pass
    assert len(accepted) >= 6
    c.start()
    ids = ",".join("'%s'" % u for u in accepted)
    deadline = time.time() + 60
    while time.time() < deadline:
        rows = c.sql("SELECT uuid, vm_state FROM instances WHERE uuid IN (%s)" % ids)
        if all(r["vm_state"] in ("active", "error") for r in rows):
            break
        time.sleep(0.2)
    faults = c.sql("SELECT instance_uuid, message FROM instance_faults WHERE instance_uuid "
                   "IN (%s) AND instance_uuid IN (SELECT uuid FROM instances WHERE "
                   "vm_state = 'error')" % ids)
    assert faults == []
    assert sorted(r["vm_state"] for r in rows) == ["active"] * len(accepted)

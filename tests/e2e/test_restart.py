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

"""Kill nubo during boots and start it again: nothing stays BUILD, no
allocation leaks. SIGTERM finishes in-flight work cleanly. A restart of
`nubo aio` on its state directory keeps the cloud: configuration, secrets,
passwords, records; options given again are recorded."""
import concurrent.futures
import configparser
import hashlib
import hmac
import http.client
import os
import signal
import subprocess
import time

import pytest
from netagent_cleanup import remove_agent_leftovers

from conftest import ADMIN_PASSWORD, NUBO_BIN, Cloud, free_port


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


def read(path):
    with open(path) as f:
        return f.read()


def conf(c):
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(os.path.join(c.state_dir, "nubo.conf"))
    return cp


def password_token(c, user, password, project, domain="default"):
    """POST /identity/v3/auth/tokens; returns the status."""
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": user, "domain": {"id" if domain == "default" else "name": domain},
        "password": password}}}, "scope": {"project": {
            "name": project, "domain": {"id" if domain == "default" else "name": domain}}}}}
    return c.request("POST", "/identity/v3/auth/tokens", body)[0]


def metadata_status(c, server):
    """GET of the metadata API as the proxy signs it with the secret in
    nubo.conf: 200 only if the running cloud uses that secret."""
    md = conf(c)["metadata"]
    secret = conf(c)["neutron"]["metadata_proxy_shared_secret"]
    sig = hmac.new(secret.encode(), server["id"].encode(), hashlib.sha256).hexdigest()
    conn = http.client.HTTPConnection(md["listen"], int(md["port"]), timeout=30)
    conn.request("GET", "/openstack/latest/meta_data.json", headers={
        "X-Instance-ID": server["id"], "X-Tenant-ID": server["project_id"],
        "X-Instance-ID-Signature": sig})
    st = conn.getresponse().status
    conn.close()
    return st


def test_restart_keeps_config_secrets_passwords_and_servers(tmp_path):
    c = Cloud(tmp_path / "keep", free_port(), ("--set", "compute.reconcile_disk_format=false"))
    c.start()
    try:
        conf_before = read(os.path.join(c.state_dir, "nubo.conf"))
        clouds_before = read(os.path.join(c.state_dir, "clouds.yaml"))
        tok = c.token()
        st, _, body = c.request("POST", "/compute/v2.1/servers", {"server": {
            "name": "kept", "flavorRef": "1", "imageRef": c.sql(
                "SELECT id FROM images WHERE name = 'cirros'")[0]["id"], "networks": "none"}},
            token=tok, headers={"OpenStack-API-Version": "compute 2.37"})
        assert st == 202, body
        server = c.wait_server(body["server"]["id"])
        assert server["status"] == "ACTIVE"
        # an operator's deletion is not undone by a restart's seeding
        assert c.request("DELETE", "/compute/v2.1/flavors/5", token=tok)[0] == 202
        assert c.stop() == 0

        # restart without the --set: the cloud as it was
        c.extra_args = []
        c.start()
        assert read(os.path.join(c.state_dir, "nubo.conf")) == conf_before
        assert read(os.path.join(c.state_dir, "clouds.yaml")) == clouds_before
        assert "reconcile_disk_format = false" in conf_before
        assert "the existing cloud's, kept as it is" in c.tail()
        assert "config %s/nubo.conf: the existing cloud's, kept as it is" % c.state_dir \
            in c.log("main")
        # the old clouds.yaml authenticates, admin and demo (the real CLI)
        assert c.token("nubo") and c.token("nubo-demo")
        su = conf(c)["service_user"]
        assert password_token(c, "nova", su["password"], "service", "Default") == 201
        srv = c.cli("server", "show", server["id"], "-f", "json")
        assert srv["status"] == "ACTIVE"
        assert metadata_status(c, srv) == 200
        assert c.sql("SELECT COUNT(*) AS n FROM flavors WHERE flavorid = '5'") \
            == [{"n": 0}]
        assert c.stop() == 0

        # a new --set is applied and recorded, the rest stays
        c.extra_args = ["--set", "scheduler.max_attempts=7"]
        c.start()
        assert "recorded: scheduler.max_attempts" in c.tail()
        assert c.stop() == 0
        c.extra_args = []
        c.start()
        now = conf(c)
        assert now["scheduler"]["max_attempts"] == "7"
        assert now["compute"]["reconcile_disk_format"] == "false"
        assert read(os.path.join(c.state_dir, "clouds.yaml")) == clouds_before
    finally:
        c.stop()


def test_restart_refuses_another_admin_password_unless_reset(tmp_path):
    c = Cloud(tmp_path / "pw", free_port())
    c.start()
    clouds_before = read(os.path.join(c.state_dir, "clouds.yaml"))
    assert c.stop() == 0
    c.admin_password = "another-password"
    with pytest.raises(RuntimeError) as e:
        c.start()
    assert "the admin password given (NUBO_ADMIN_PASSWORD) is not the one in its clouds.yaml" \
        in str(e.value)
    assert c.proc.returncode == 2
    assert read(os.path.join(c.state_dir, "clouds.yaml")) == clouds_before
    # the flag still works, with a notice; --reset-admin-password sets it
    c.admin_password = None
    c.extra_args = ["--admin-password", "another-password", "--reset-admin-password"]
    c.start()
    try:
        assert "--admin-password is visible to other users in `ps`" in c.tail()
        assert "another-password" not in read("/proc/%d/cmdline" % c.proc.pid)
        assert password_token(c, "admin", "another-password", "admin") == 201
        assert password_token(c, "admin", ADMIN_PASSWORD, "admin") == 401
        assert c.token("nubo") and c.token("nubo-demo")  # clouds.yaml follows, demo kept
        after = read(os.path.join(c.state_dir, "clouds.yaml"))
        assert after != clouds_before
        demo = [l for l in clouds_before.splitlines() if "password" in l][1]
        assert demo in after
    finally:
        c.stop()


def test_aio_help_says_where_the_admin_password_goes():
    out = subprocess.run([NUBO_BIN, "aio", "--help"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0
    assert "NUBO_ADMIN_PASSWORD" in out.stdout and "--admin-password-file" in out.stdout
    assert "`ps`" in out.stdout


def test_libvirt_without_demo_image_seeds_no_empty_cirros_until_one_is_given():
    import shutil
    import test_libvirt as lv
    why = lv.libvirt_ready()
    if why:
        pytest.skip(why)
    c = Cloud(lv.make_state_dir("aio-noimg"), free_port(), ("--driver", "libvirt"))
    c.start(timeout=60)
    try:
        assert "no demo image: with the libvirt driver a `cirros` image without data would " \
            "look bootable and fail every boot, so none is created" in c.tail()
        assert "bash tests/images/build.sh" in c.log("main")
        assert c.sql("SELECT id FROM images WHERE name = 'cirros'") == []
        assert c.stop() == 0
        # a later start given an image makes `cirros` from it; the driver is kept
        c.extra_args = ["--demo-image", lv.QCOW2]
        c.start(timeout=60)
        img = c.cli("image", "show", "cirros", "-f", "json")
        assert img["status"] == "active" and img["size"] == os.path.getsize(lv.QCOW2)
        assert conf(c)["compute"]["driver"] == "libvirt"
        assert "recorded: aio.demo_image" in c.tail()
    finally:
        c.stop(timeout=60)
        remove_agent_leftovers(c.state_dir)  # its agent's qdhcp namespace and dnsmasq
        shutil.rmtree(c.state_dir, ignore_errors=True)


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

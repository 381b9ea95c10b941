"""scripts/setup.sh (README command 1) with the fake driver: it fails, with
the server's fault, when the demo server does not become ACTIVE, and run
again it keeps the cloud and reuses the demo server instead of making a
second one.

setup.sh runs ./build/nubo from the repository, whatever NUBO_BIN says (CI
runs the e2e suite on the sanitizer build; this test is about the script and
the normal build it starts); NUBO_DEMO_IMAGE spares it building the test guest
(the fake driver boots nothing)."""
import os
import subprocess

import pytest

from conftest import ROOT, Cloud, free_port

SETUP = os.path.join(ROOT, "scripts", "setup.sh")
BIN = os.path.join(ROOT, "build", "nubo")


@pytest.fixture
def demo_image(tmp_path):
    path = tmp_path / "demo.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(path), "16M"], check=True)
    return str(path)


def run_setup(state, port, image, **env):
    e = dict(os.environ, NUBO_STATE=str(state), NUBO_PORT=str(port), NUBO_DRIVER="fake",
             NUBO_DEMO_IMAGE=image, PATH="/usr/bin:/bin:/usr/sbin:/sbin")
    e.pop("NUBO_ADMIN_PASSWORD", None)
    e.update(env)
    return subprocess.run(["bash", SETUP], capture_output=True, text=True, env=e, timeout=600)


def stop(state):
    try:
        with open(os.path.join(state, "nubo.pid")) as f:
            pid = int(f.read())
        os.kill(pid, 15)
        for _ in range(300):
            os.kill(pid, 0)
            subprocess.run(["sleep", "0.1"])
    except (OSError, ValueError):
        pass


def demo_servers(c):
    return c.sql("SELECT uuid, vm_state FROM instances WHERE display_name = 'demo' "
                 "AND deleted = 0")


@pytest.mark.skipif(not os.access(BIN, os.X_OK),
                    reason="setup.sh runs the repository's build/nubo, which is not built")
def test_setup_fails_with_the_fault_then_keeps_the_cloud_and_reuses_its_demo_server(
        tmp_path, demo_image):
    # a cloud whose every spawn fails; setup.sh restarts it as it is
    state = tmp_path / "aio"
    c = Cloud(state, free_port(), ("--set", "fake.fail_spawn_hosts=fake-1,fake-2,fake-3",
                                   "--set", "scheduler.max_attempts=1"))
    c.start()
    assert c.stop() == 0
    clouds = (state / "clouds.yaml").read_text()
    try:
        p = run_setup(state, c.port, demo_image)
        assert p.returncode == 1, p.stdout + p.stderr
        assert "the existing cloud's, with these options given now and recorded: " \
            "aio.demo_image" in p.stdout
        assert "the demo server" in p.stderr and "is ERROR, not ACTIVE" in p.stderr, p.stderr
        assert '"fault"' in p.stderr and "spawn failure injected" in p.stderr, p.stderr
        failed = demo_servers(c)
        assert [s["vm_state"] for s in failed] == ["error"], failed

        # the operator removes the cause and the failed server
        stop(state)
        c.extra_args = ["--set", "fake.fail_spawn_hosts="]
        c.start()
        c.cli("server", "delete", "--wait", failed[0]["uuid"], cloud="nubo-demo")
        assert c.stop() == 0
        p = run_setup(state, c.port, demo_image)
        assert p.returncode == 0, p.stdout + p.stderr
        first = demo_servers(c)
        assert [s["vm_state"] for s in first] == ["active"], first
        assert "demo server %s ACTIVE" % first[0]["uuid"] in p.stdout

        # run again: the cloud is restarted as it is, the demo server reused
        p = run_setup(state, c.port, demo_image)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "stopping the running all-in-one" in p.stdout
        assert "the existing cloud's, kept as it is" in p.stdout
        assert "reusing the existing demo server %s" % first[0]["uuid"] in p.stdout
        assert demo_servers(c) == first
        assert (state / "clouds.yaml").read_text() == clouds
        assert "password: in %s/clouds.yaml" % state in p.stdout
    finally:
        stop(state)

"""Real guests: nubo with the libvirt driver against the system libvirtd, TCG.

Every cloud here pins [libvirt] virt_type = qemu (TCG: the same on every
machine) except test_default_virt_type_boots_a_real_guest, which boots a
guest with the defaults, so that virt_type = auto is what is tested there.

The guest is tests/images' test image (NUBO_TEST_IMAGE_DIR, built by
tests/run.sh): it prints GUEST-BOOTED, then what it read from the config
drive (CONFIG-DRIVE ... hostname=... uuid=...), then "HB n" every 100 ms.
Everything is driven with the real openstack CLI and checked with virsh and
the files on disk, as an operator would."""
import os
import re
import shutil
import subprocess
import time
import uuid

import pytest

from conftest import Cloud, free_port, unique
from netagent_cleanup import remove_agent_leftovers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IMAGE_DIR = os.environ.get("NUBO_TEST_IMAGE_DIR", os.path.join(ROOT, "tests", "images", "out"))
QCOW2 = os.path.join(IMAGE_DIR, "guest.qcow2")
RAW = os.path.join(IMAGE_DIR, "guest.raw")
VIRSH = ["virsh", "-q", "-c", "qemu:///system"]


def libvirt_ready():
    if not os.path.exists(QCOW2):
        return "no test image at %s (tests/images/build.sh)" % QCOW2
    try:
        subprocess.run(VIRSH + ["uri"], check=True, capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as e:
        return "libvirtd not reachable: %s" % e
    return None


_why = libvirt_ready()
if _why and os.environ.get("NUBO_REQUIRE_LIBVIRT"):
    raise RuntimeError("libvirt tests required but: " + _why)
pytestmark = pytest.mark.skipif(bool(_why), reason=_why or "")


def virsh(*args, check=True):
    p = subprocess.run(VIRSH + list(args), capture_output=True, text=True, timeout=60)
    if check and p.returncode != 0:
        raise AssertionError("virsh %s: %s" % (" ".join(args), p.stderr))
    return p


def qemu_log(server_id):
    """libvirt's log of the domain's QEMU (its command line, its errors)."""
    try:
        with open("/var/log/libvirt/qemu/%s.log" % server_id, errors="replace") as f:
            return f.read()
    except OSError as e:
        return str(e)


def domstate(server_id):
    p = virsh("domstate", server_id, check=False)
    return p.stdout.strip() if p.returncode == 0 else None


def make_state_dir(name):
    # QEMU runs as libvirt-qemu: the state dir must be reachable by it,
    # which pytest's private tmp dirs (0700) are not.
    base = "/var/tmp/nubo-e2e"
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o755)
    d = os.path.join(base, "%s-%s" % (name, uuid.uuid4().hex[:8]))
    os.makedirs(d)
    os.chmod(d, 0o755)
    return d


def start_libvirt_cloud(name, *extra, virt_type="qemu"):
    """A libvirt cloud; virt_type None leaves [libvirt] virt_type unset
    (auto)."""
    d = make_state_dir(name)
    pin = ("--set", "libvirt.virt_type=" + virt_type) if virt_type else ()
    c = Cloud(d, free_port(), ("--driver", "libvirt") + pin + (
                               "--set", "compute.sync_power_state_interval=600",  # events, not the period
                               "--set", "libvirt.wait_soft_reboot_seconds=20",
                               "--set", "DEFAULT.shutdown_timeout=20",
                               "--set", "image_cache.remove_unused_original_minimum_age_seconds=0")
              + tuple(extra))
    c.start(timeout=60)
    return c


def stop_cloud(c):
    # leave no guests behind for the other tests and later runs
    for s in c.sql("SELECT uuid FROM instances WHERE deleted = 0"):
        virsh("destroy", s["uuid"], check=False)
        virsh("undefine", s["uuid"], "--managed-save", check=False)
    rc = c.stop(timeout=60)
    remove_agent_leftovers(c.state_dir)  # bridges, qdhcp namespaces, dnsmasq
    if not os.environ.get("NUBO_E2E_KEEP"):  # keep the logs for a post-mortem
        shutil.rmtree(c.state_dir, ignore_errors=True)
    return rc


@pytest.fixture(scope="module")
def lvcloud():
    c = start_libvirt_cloud("lv")
    img = c.cli("image", "create", "--file", QCOW2, "--disk-format", "qcow2",
                "--container-format", "bare", "--public", "guest", "-f", "json")
    c.image_id = img["id"]
    yield c
    assert stop_cloud(c) == 0, c.tail()


def api(c, method, path, body=None):
    """Compute API call with a cached admin token (polling through the CLI
    costs seconds per call)."""
    if not getattr(c, "_token", None):
        c._token = c.token()
    st, _, data = c.request(method, "/compute/v2.1" + path, body, token=c._token)
    return st, data


def console(c, sid):
    st, data = api(c, "POST", "/servers/%s/action" % sid, {"os-getConsoleOutput": {}})
    assert st == 200, (st, data)
    return data["output"]


def wait_status(c, sid, statuses=("ACTIVE", "ERROR"), timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st, data = api(c, "GET", "/servers/%s" % sid)
        assert st == 200, (st, data)
        s = data["server"]
        if s["status"] in statuses and not s.get("OS-EXT-STS:task_state"):
            return s
        time.sleep(0.2)
    raise AssertionError("server %s not in %s after %ss: %s" % (sid, statuses, timeout, s))


def wait_console(c, sid, pattern, count=1, timeout=90):
    """Waits until pattern (regex) appears count times in the console log."""
    deadline = time.time() + timeout
    text = ""
    while time.time() < deadline:
        text = console(c, sid)
        if len(re.findall(pattern, text)) >= count:
            return text
        time.sleep(0.2)
    raise AssertionError("%r x%d not in the console of %s after %ss:\n%s"
                         % (pattern, count, sid, timeout, text[-2000:]))


def starts(c, sid):
    """A mark to tell later boots from this one and those before it: the
    time it was taken. (Counting bootloader banners fails once a guest has
    printed more than the 100 KB the console API returns: the first banners
    scroll out, and a new boot leaves the count where it was.)"""
    return time.time()


def booted_since(text, mark):
    """Whether the console text ends in a boot whose kernel started after
    mark (a starts() value): after its last bootloader banner, GUEST-BOOTED
    and a heartbeat from the beginning, and the newest heartbeat's uptime
    shorter than the time since the mark (2 s of slack for the clocks)."""
    last = text.rsplit("SYSLINUX", 1)[-1]
    beats = re.findall(r"^HB (\d+) up=([0-9.]+)", last, re.M)
    if "GUEST-BOOTED" not in last or "HB 1 " not in last or not beats:
        return False
    return time.time() - float(beats[-1][1]) > mark - 2


def wait_new_boot(c, sid, before, timeout=90):
    """Waits for a domain start after the mark `before` (starts()) whose
    guest booted and heartbeats again from the beginning."""
    deadline = time.time() + timeout
    text = ""
    while time.time() < deadline:
        text = console(c, sid)
        if booted_since(text, before):
            return
        time.sleep(0.2)
    raise AssertionError("no new boot of %s in the %ss after %s:\n%s"
                         % (sid, timeout, time.strftime("%H:%M:%S", time.localtime(before)),
                            text[-2000:]))


def boot(c, name, *extra, image=None, wait=True):
    s = c.cli("server", "create", "--flavor", "m1.tiny", "--image", image or c.image_id,
              *extra, name, "-f", "json")
    if wait:
        s = wait_status(c, s["id"])
        assert s["status"] == "ACTIVE", s
    return s


def test_boot_reads_config_drive_and_virsh_shows_it(lvcloud):
    c = lvcloud
    name = unique("lv-boot")
    t0 = time.time()
    s = boot(c, name, "--config-drive", "true")
    sid = s["id"]
    assert s["OS-EXT-STS:power_state"] in (1, "Running")
    assert s["OS-EXT-SRV-ATTR:instance_name"] == sid
    # Nova's hostname on the config drive: <hostname>.<dhcp_domain "novalocal">
    text = wait_console(c, sid, r"CONFIG-DRIVE dev=\S+ hostname=%s\.novalocal uuid=%s fs=iso9660"
                        % (re.escape(name), sid))
    assert "GUEST-BOOTED" in text
    wait_console(c, sid, r"HB 3 ")
    print("boot to config drive line: %.1f s" % (time.time() - t0))
    # virsh sees the domain under the server's UUID
    listing = virsh("list", "--all").stdout
    line = [l for l in listing.splitlines() if sid in l]
    assert line and "running" in line[0], listing
    xml = virsh("dumpxml", sid).stdout
    assert "<nova:name>%s</nova:name>" % name in xml
    assert "type='qemu'" in xml or 'type="qemu"' in xml
    inst_dir = os.path.join(c.state_dir, "instances", sid)
    for f in ("disk", "disk.config", "console.log", "disk.info"):
        assert os.path.exists(os.path.join(inst_dir, f)), f
    info = subprocess.run(["qemu-img", "info", "-U", "--output=json",
                           os.path.join(inst_dir, "disk")],
                          check=True, capture_output=True, text=True).stdout
    assert '"format": "qcow2"' in info and "_base" in info
    assert '"virtual-size": %d' % (1 << 30) in info  # m1.tiny root disk
    # diagnostics: libvirt's counters (GetInfo, vCPUs, block stats)
    st, _, d = c.request("GET", "/compute/v2.1/servers/%s/diagnostics" % sid,
                         token=c.token("nubo"), headers={"OpenStack-API-Version": "compute 2.48"})
    assert st == 200 and d["state"] == "running" and d["hypervisor"] == "qemu", d
    assert d["config_drive"] is True and d["num_disks"] == len(d["disk_details"]) >= 2, d
    assert d["memory_details"]["maximum"] == 512 and d["cpu_details"][0]["time"] > 0, d
    assert d["disk_details"][0]["read_bytes"] > 0, d
    st, _, d = c.request("GET", "/compute/v2.1/servers/%s/diagnostics" % sid,
                         token=c.token("nubo"))
    assert st == 200 and d["memory"] == 512 * 1024 and d["cpu0_time"] > 0, d
    assert d["vda_read"] > 0, d
    # the spawn time is in the compute log, as Nova writes it
    assert re.search(r"\[instance: %s\] Took [0-9.]+ seconds to spawn the instance on the "
                     r"hypervisor" % sid, c.log("compute"))
    # the host is real: hypervisor show reports libvirt's view
    hv = c.cli("hypervisor", "list", "-f", "json")
    assert hv and hv[0]["Hypervisor Type"] == "QEMU"


def test_power_operations_on_a_real_guest(lvcloud):
    c = lvcloud
    sid = boot(c, unique("lv-power"))["id"]
    wait_console(c, sid, r"HB 2 ")
    # stop: graceful shutdown, then SHUTOFF and no running domain
    c.cli("server", "stop", sid)
    s = wait_status(c, sid, statuses=("SHUTOFF", "ERROR"), timeout=60)
    assert s["status"] == "SHUTOFF" and s["OS-EXT-STS:power_state"] in (4, "Shutdown")
    assert domstate(sid) == "shut off"
    assert "POWER-OFF" in console(c, sid)  # the guest saw the ACPI power button
    # start: a new boot
    n = starts(c, sid)
    c.cli("server", "start", sid)
    assert wait_status(c, sid, timeout=60)["status"] == "ACTIVE"
    assert domstate(sid) == "running"
    wait_new_boot(c, sid, n)
    # soft reboot: the guest shuts down, starts again, the heartbeat restarts
    n = starts(c, sid)
    c.cli("server", "reboot", "--soft", sid)
    assert wait_status(c, sid, timeout=90)["status"] == "ACTIVE"
    wait_new_boot(c, sid, n)
    assert "POWER-OFF" in console(c, sid).rsplit("SYSLINUX", 1)[0].rsplit("SYSLINUX", 1)[1]
    # hard reboot: destroy, XML regenerated, start
    n = starts(c, sid)
    c.cli("server", "reboot", "--hard", sid)
    assert wait_status(c, sid, timeout=90)["status"] == "ACTIVE"
    wait_new_boot(c, sid, n)
    actions = [a["Action"] for a in c.cli("server", "event", "list", sid, "-f", "json")]
    for a in ("create", "stop", "start", "reboot"):
        assert a in actions, actions


def last_hb(c, sid):
    beats = re.findall(r"HB (\d+) ", console(c, sid))
    return int(beats[-1]) if beats else -1


def test_pause_and_suspend_keep_the_guest_running_state(lvcloud):
    c = lvcloud
    sid = boot(c, unique("lv-pause"))["id"]
    wait_console(c, sid, r"HB 2 ")
    c.cli("server", "pause", sid)
    s = wait_status(c, sid, statuses=("PAUSED", "ERROR"), timeout=60)
    assert s["status"] == "PAUSED" and s["OS-EXT-STS:power_state"] == 3, s
    assert domstate(sid) == "paused"
    hb = last_hb(c, sid)
    time.sleep(1.5)
    assert last_hb(c, sid) == hb  # vCPUs stopped: no heartbeat
    c.cli("server", "unpause", sid)
    assert wait_status(c, sid, timeout=60)["status"] == "ACTIVE"
    wait_console(c, sid, r"HB %d " % (hb + 3))
    # suspend: memory saved to disk, the domain stops; resume restores it
    c.cli("server", "suspend", sid)
    s = wait_status(c, sid, statuses=("SUSPENDED", "ERROR"), timeout=120)
    assert s["status"] == "SUSPENDED", s
    assert domstate(sid) == "shut off"
    assert re.search(r"Managed save:\s+yes", virsh("dominfo", sid).stdout)
    hb = last_hb(c, sid)
    c.cli("server", "resume", sid)
    assert wait_status(c, sid, timeout=120)["status"] == "ACTIVE"
    assert domstate(sid) == "running"
    wait_console(c, sid, r"HB %d " % (hb + 3))
    # the same boot went on: no second GUEST-BOOTED
    assert console(c, sid).count("GUEST-BOOTED") == 1
    c.cli("server", "delete", "--wait", sid)
    assert domstate(sid) is None


def test_guest_destroyed_behind_nubos_back_is_synced(lvcloud):
    c = lvcloud
    sid = boot(c, unique("lv-sync"))["id"]
    virsh("destroy", sid)
    # the periodic sync is 600 s here: libvirt's lifecycle event does it
    s = wait_status(c, sid, statuses=("SHUTOFF",), timeout=30)
    assert s["OS-EXT-STS:power_state"] in (4, "Shutdown")
    events = c.cli("server", "event", "list", sid, "-f", "json")
    assert any(e["Action"] == "stop" for e in events), events
    assert "Instance shutdown by itself" in c.log("compute")
    # and it starts again
    c.cli("server", "start", sid)
    assert wait_status(c, sid, timeout=60)["status"] == "ACTIVE"
    # the domain vanishes while nubo is down: the first sync after the start
    # reports it, naming server and host (and, as Nova, leaves the state)
    host = c.cli("server", "show", sid, "-f", "json")["OS-EXT-SRV-ATTR:host"]
    assert c.stop(timeout=60) == 0
    virsh("destroy", sid)
    virsh("undefine", sid)
    c.start(timeout=60)
    c._token = None
    want = "Instance %s is ACTIVE in the database but has no guest on host %s" % (sid, host)
    deadline = time.time() + 30
    while want not in c.log("compute") and time.time() < deadline:
        time.sleep(0.3)
    assert want in c.log("compute")
    assert api(c, "GET", "/servers/%s" % sid)[1]["server"]["status"] == "ACTIVE"
    # a hard reboot rebuilds the domain from the database
    n = starts(c, sid)
    c.cli("server", "reboot", "--hard", sid)
    assert wait_status(c, sid, timeout=60)["status"] == "ACTIVE"
    assert domstate(sid) == "running"
    wait_new_boot(c, sid, n)


def test_delete_leaves_nothing(lvcloud):
    c = lvcloud
    sid = boot(c, unique("lv-del"))["id"]
    inst_dir = os.path.join(c.state_dir, "instances", sid)
    assert os.path.isdir(inst_dir)
    rp = c.sql("SELECT uuid FROM resource_providers")[0]["uuid"]
    c.cli("server", "delete", "--wait", sid)
    assert domstate(sid) is None
    assert not os.path.exists(inst_dir)
    assert c.sql("SELECT COUNT(*) AS n FROM allocations WHERE consumer_id = '%s'" % sid)[0]["n"] == 0
    assert rp


def test_default_virt_type_boots_a_real_guest():
    """[libvirt] virt_type unset: auto decides with a probe guest built as
    guests are (under KVM and TCG when libvirt offers KVM), logs what it
    compared, and a real guest then boots ACTIVE under what it chose, with
    the CPU the probe ran. On a host whose nested KVM cannot run the
    host-model CPU, that is TCG; where KVM works, KVM."""
    c = start_libvirt_cloud("lv-auto", virt_type=None)
    try:
        pattern = r"virt_type auto: (kvm|qemu)\b.*? chosen[:,] (.*)"

        def compute_log():  # the compute agent (and its log) starts after the API
            try:
                return c.log("compute")
            except FileNotFoundError:
                return ""
        deadline = time.time() + 60
        while not re.search(pattern, compute_log()) and time.time() < deadline:
            time.sleep(0.3)
        log = compute_log()
        m = re.search(pattern, log)
        assert m, log[-3000:]
        chosen, why = m[1], m[2]
        if "libvirt offers no KVM" not in why and "cannot be had under KVM" not in why:
            # both accelerators booted the probe guest; the log names both outcomes
            assert "the probe guest (machine pc, SeaBIOS" in why, why
            assert re.search(r"under KVM \(cpu host-model\) it (ran in [0-9.]+ s|did not start|"
                             r"started but printed nothing|was paused by QEMU)", why), why
            assert re.search(r"under TCG \(cpu [^)]*\)+ it ran in [0-9.]+ s", why), why
        img = c.cli("image", "create", "--file", QCOW2, "--disk-format", "qcow2",
                    "--container-format", "bare", "guest", "-f", "json")
        sid = boot(c, unique("lv-auto"), image=img["id"])["id"]
        # a TCG boot on a loaded two-core machine: SeaBIOS + SYSLINUX alone
        # can take over a minute (seen: an empty console after 90 s)
        try:
            wait_console(c, sid, r"GUEST-BOOTED", timeout=240)
        except AssertionError as e:
            raise AssertionError("%s\n-- domstate: %s\n-- QEMU's log:\n%s\n-- domain:\n%s\n"
                                 "-- the compute log:\n%s"
                                 % (e, domstate(sid), qemu_log(sid)[-3000:],
                                    virsh("dumpxml", sid, check=False).stdout,
                                    compute_log()[-6000:])) from None
        wait_console(c, sid, r"HB 2 ")
        xml = virsh("dumpxml", sid).stdout
        assert re.search(r"<domain type=.%s." % chosen, xml), xml[:300]
        if chosen == "kvm":
            assert re.search(r"<cpu mode=.host-model.", xml), xml
        assert "virt_type %s" % chosen in log  # the driver's start line agrees
    finally:
        assert stop_cloud(c) == 0


def test_raw_images_type_and_cache_cleanup(tmp_path):
    """images_type raw: the instance disk is a raw copy, no backing file; the
    image here is raw too. Deleting the only server using a cached base
    removes the base (minimum age 0 in these clouds). The same cloud has
    cpu_mode custom: the guest gets the first of cpu_models TCG can run,
    with the extra flags; options nubo does not implement are logged as
    ignored."""
    c = start_libvirt_cloud("lv-raw", "--set", "libvirt.images_type=raw",
                            "--set", "libvirt.cpu_mode=custom",
                            "--set", "libvirt.cpu_models=SandyBridge,nehalem",
                            "--set", "libvirt.cpu_model_extra_flags=-svm",
                            "--set", "libvirt.rx_queue_size=512",
                            "--set", "libvirt.block_migration=true")
    try:
        img = c.cli("image", "create", "--file", RAW, "--disk-format", "raw",
                    "--container-format", "bare", "raw-guest", "-f", "json")
        sid = boot(c, unique("lv-rawdisk"), "--config-drive", "true", image=img["id"])["id"]
        wait_console(c, sid, r"CONFIG-DRIVE dev=\S+ .* fs=iso9660")
        log = c.log("compute")
        for opt in ("rx_queue_size = 512", "block_migration = true"):
            assert len(re.findall(r"WARNING .*\[libvirt\] %s is ignored: nubo does not "
                                  r"implement this option" % re.escape(opt), log)) == 1, log[-3000:]
        xml = virsh("dumpxml", sid, "--inactive").stdout
        assert re.search(r"<cpu mode=.custom. match=.exact.", xml), xml
        assert re.search(r"<model[^>]*>Nehalem</model>", xml), xml
        assert re.search(r"<feature policy=.disable. name=.svm./>", xml), xml
        disk = os.path.join(c.state_dir, "instances", sid, "disk")
        info = subprocess.run(["qemu-img", "info", "-U", "--output=json", disk], check=True,
                              capture_output=True, text=True).stdout
        assert '"format": "raw"' in info and "backing" not in info
        assert '"virtual-size": %d' % (1 << 30) in info  # resized to the flavor's root disk
        base = os.path.join(c.state_dir, "instances", "_base")
        assert len([f for f in os.listdir(base) if len(f) == 40]) == 1
        c.cli("server", "delete", "--wait", sid)
        assert [f for f in os.listdir(base) if len(f) == 40] == []
        assert "Removing base or swap file" in c.log("compute")
    finally:
        assert stop_cloud(c) == 0


def test_second_server_without_ram_gets_no_valid_host(tmp_path):
    # the host's memory as libvirt reports it (a cgroup limit may make it
    # less than /proc/meminfo says)
    total_mb = int(re.search(r"Memory size:\s+(\d+) KiB", virsh("nodeinfo").stdout)[1]) // 1024
    c = start_libvirt_cloud("lv-ram", "--set", "DEFAULT.ram_allocation_ratio=1.0")
    try:
        img = c.cli("image", "create", "--file", QCOW2, "--disk-format", "qcow2",
                    "--container-format", "bare", "guest", "-f", "json")
        big = total_mb * 6 // 10
        c.cli("flavor", "create", "--ram", str(big), "--vcpus", "1", "--disk", "1", "big")
        first = c.cli("server", "create", "--flavor", "big", "--image", img["id"], "big1",
                      "-f", "json")
        s1 = wait_status(c, first["id"])
        assert s1["status"] == "ACTIVE", s1.get("fault")
        second = c.cli("server", "create", "--flavor", "big", "--image", img["id"], "big2",
                       "-f", "json")
        s = wait_status(c, second["id"], timeout=60)
        assert s["status"] == "ERROR"
        fault = s["fault"]
        assert fault["message"] == "No valid host was found. ", fault
        inv = c.sql("SELECT total, reserved, allocation_ratio FROM inventories "
                    "WHERE resource_class = 'MEMORY_MB'")[0]
        # the host's real memory, from libvirt, is what placement was told
        assert abs(inv["total"] - total_mb) <= 64, (inv, total_mb)
        free = int(inv["total"] * inv["allocation_ratio"]) - inv["reserved"] - big
        assert "MEMORY_MB: requested %d, largest free %d" % (big, free) in fault["details"], fault
    finally:
        assert stop_cloud(c) == 0

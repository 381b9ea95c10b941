"""Cold migration of real guests between two libvirt hosts on one machine,
on the two-host lab of test_migration_libvirt (tests/hosts/hosts.sh: a
libvirtd per host in its own namespaces, the control plane outside, one
agent per host): with per-host instances paths the disks are uploaded
through the destination's libvirtd, then confirm (the source's domain and
<uuid>_resize gone) and a migration back, reverted (the guest runs on the
destination of the first move again); with the shared instances path
nothing is sent, the copy stays on the share."""
import os
import time

import pytest

from conftest import unique

lm = pytest.importorskip("test_migration_libvirt")  # the lab: hosts, agents, control plane
lab = lm.lab  # the module fixture, reused for this module
pytestmark = [pytest.mark.skipif(bool(lm._why), reason=lm._why or ""),
              pytest.mark.xdist_group("hosts")]


def cold(lab, *args):
    lab.cloud.cli("--os-compute-api-version", lm.MV, *args, parse=False, timeout=300)


def last_migration(lab, sid):
    return lab.cloud.sql("SELECT * FROM migrations WHERE instance_uuid = '%s' ORDER BY id DESC "
                         "LIMIT 1" % sid)[0]


def status_is(lab, sid, status, timeout=120):
    lm.wait_for(status, lambda: lab.server(sid)["status"] == status, timeout)


def test_cold_migrate_local_disks_confirm_then_back_and_revert(lab):
    lab.agents(lm.LOCAL)
    sid = lab.boot(unique("cm"), "host1", lab.image)
    lm.wait_heartbeat(lm.console_path(lm.LOCAL, sid, "host1"))
    t0 = time.time()
    cold(lab, "server", "migrate", "--host", "host2", "--wait", sid)
    print("cold migration host1 -> host2 with the disk uploaded: %.2f s" % (time.time() - t0))
    s = lab.server(sid)
    assert (s["status"], s["OS-EXT-SRV-ATTR:host"]) == ("VERIFY_RESIZE", "host2"), lab.fault(sid)
    assert "running" in lab.virsh("host2", "domstate", sid)
    assert "shut off" in lab.virsh("host1", "domstate", sid)  # kept until confirm
    d2 = os.path.join(lm.BASE, "host2", "local", "instances", sid)
    assert os.path.exists(os.path.join(d2, "disk"))
    assert not os.path.exists(os.path.join(d2, "resize.dest"))
    lm.wait_heartbeat(lm.console_path(lm.LOCAL, sid, "host2"))  # the guest boots there
    rps = lab.providers()
    m = last_migration(lab, sid)
    assert (m["status"], m["migration_type"]) == ("finished", "migration")
    assert lab.allocations(m["uuid"]) == {rps["host1"]} and lab.allocations(sid) == {rps["host2"]}
    cold(lab, "server", "migration", "confirm", sid)
    status_is(lab, sid, "ACTIVE")
    assert sid not in lab.domains("host1")
    d1 = os.path.join(lm.BASE, "host1", "local", "instances", sid)
    assert not os.path.exists(d1 + "_resize") and not os.path.exists(d1)
    assert lab.allocations(sid) == {rps["host2"]} and lab.allocations(m["uuid"]) == set()
    # and back to host1, reverted: the guest runs on host2 again, host1 is clean
    cold(lab, "server", "migrate", "--host", "host1", "--wait", sid)
    assert lab.server(sid)["status"] == "VERIFY_RESIZE", lab.fault(sid)
    cold(lab, "server", "migration", "revert", sid)
    status_is(lab, sid, "ACTIVE")
    s = lab.server(sid)
    assert s["OS-EXT-SRV-ATTR:host"] == "host2" and sid not in lab.domains("host1")
    assert "running" in lab.virsh("host2", "domstate", sid)
    assert not os.path.exists(d1) and not os.path.exists(d2 + "_resize")
    assert lab.allocations(sid) == {rps["host2"]}
    assert last_migration(lab, sid)["status"] == "reverted"


def test_cold_migrate_on_shared_storage_sends_nothing(lab):
    lab.agents(lm.SHARED)
    sid = lab.boot(unique("cms"), "host1", lab.image)
    cold(lab, "server", "migrate", "--host", "host2", "--wait", sid)
    assert lab.server(sid)["status"] == "VERIFY_RESIZE", lab.fault(sid)
    assert "running" in lab.virsh("host2", "domstate", sid)
    assert os.path.isdir(os.path.join(lm.SHARED, sid + "_resize"))
    assert "copied on the shared instances path" in open(
        os.path.join(lm.BASE, "host1", "agent-log", "nubo-compute.log")).read()
    cold(lab, "server", "migration", "confirm", sid)
    status_is(lab, sid, "ACTIVE")
    assert not os.path.exists(os.path.join(lm.SHARED, sid + "_resize"))
    assert os.path.exists(os.path.join(lm.SHARED, sid, "disk"))

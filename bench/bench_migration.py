#!/usr/bin/python3
"""Live migration through nubo next to a bare `virsh migrate --live` of the
same guest between the same two hosts. Prints figures; asserts nothing about
time. Usage (as root; needs what tests/e2e/test_migration_libvirt.py needs):

  NUBO_BIN=build/nubo NUBO_TEST_IMAGE_DIR=tests/images/out \\
      /usr/bin/python3 bench/bench_migration.py [--rounds 3] [--block]

Brings up two hypervisor hosts (tests/hosts/hosts.sh), the control plane and
one agent per host exactly as the e2e module does, boots the test guest (TCG,
128 MiB, heartbeat every 0.1 s on its serial console) on host1, then per
round:
  nubo  host1 -> host2 and back: POST os-migrateLive (2.80, host given) until
        the migration is `completed` and the server's task cleared, polled
        every 20 ms over REST (what `--wait` would see without its 2 s
        polling); the prechecks' share from the action's events;
  bare  the agents stopped, the same guest host1 -> host2 and back with
        `virsh migrate --live --p2p --persistent --undefinesource` (plus
        --unsafe on the shared directory, --copy-storage-inc with --block)
        run inside the source host, as nubo's flags; agents started again.
Downtime is the largest gap between heartbeats seen (host time) in the
console file(s); QEMU's own downtime figure is printed beside it. With
--block the instances paths are per host and the disks are copied."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
os.environ.setdefault("NUBO_BIN", os.path.join(ROOT, "build", "nubo"))

import test_migration_libvirt as lm  # noqa: E402


def parse_time(s):
    from datetime import datetime
    return datetime.fromisoformat(s.replace("Z", "")).timestamp()


def console_paths(inst_path, sid, block):
    if block:
        return [lm.console_path(inst_path, sid, "host1"), lm.console_path(inst_path, sid, "host2")]
    return [lm.console_path(inst_path, sid)]


def nubo_move(lab, sid, src, dst, paths, block):
    hb = lm.Heartbeat(paths)
    time.sleep(1)
    before = {m["id"] for m in lab.migrations(sid)}
    t0 = time.time()
    st, data = lab.api("POST", "/servers/%s/action" % sid,
                       {"os-migrateLive": {"host": dst, "block_migration": block}})
    assert st == 202, data
    while True:
        ms = [m for m in lab.migrations(sid) if m["id"] not in before]
        if ms and ms[0]["status"] in ("completed", "error", "failed", "cancelled"):
            s = lab.server(sid)
            if not s["OS-EXT-STS:task_state"]:
                break
        time.sleep(0.02)
    total = time.time() - t0
    assert ms[0]["status"] == "completed" and s["OS-EXT-SRV-ATTR:host"] == dst, (ms[0], s)
    _, (gap, _) = hb.finish()
    ev = {e["event"]: e for e in lab.lm_events(sid)}
    c = ev["conductor_live_migrate_instance"]
    pre = parse_time(c["finish_time"]) - parse_time(c["start_time"])
    run = ev.get("compute_live_migration")
    mig = parse_time(run["finish_time"]) - parse_time(run["start_time"]) if run else 0
    log = open(os.path.join(lm.BASE, src, "agent-log", "nubo-compute.log")).read()
    q = re.findall(r"Migration operation has completed: .*?downtime (\d+) ms", log)
    return {"total": total, "gap": gap, "qemu_ms": int(q[-1]) if q else None,
            "prechecks": pre, "libvirt": mig}


def bare_move(lab, sid, src, dst, paths, block):
    hb = lm.Heartbeat(paths)
    time.sleep(1)
    flags = ["--copy-storage-inc"] if block else ["--unsafe"]
    if block:  # as nubo's pre_live_migration: the destination's empty disk on its base
        prepare_block_target(lab, sid, src, dst)
    suri = "qemu+tcp://%s/system" % lm.hosts("ip", src).stdout.strip()
    dip = lm.hosts("ip", dst).stdout.strip()
    t0 = time.time()
    p = lm.hosts("exec", src, "virsh", "-c", suri, "migrate", "--live", "--p2p", "--persistent",
                 "--undefinesource", *flags, sid, "qemu+tcp://%s/system" % dip, "--migrateuri",
                 "tcp://%s" % dip, check=False, timeout=300)
    total = time.time() - t0
    assert p.returncode == 0, p.stderr
    _, (gap, _) = hb.finish()
    info = lab.virsh(dst, "domjobinfo", sid, "--completed")
    q = re.search(r"Total downtime:\s+(\d+) ms", info)
    # (with --p2p the destination's completed job carries no downtime figure)
    if block:
        subprocess.run(["rm", "-rf", os.path.join(lm.BASE, src, "local", "instances", sid)])
    return {"total": total, "gap": gap, "qemu_ms": int(q.group(1)) if q else None}


def prepare_block_target(lab, sid, src, dst):
    """What pre_live_migration makes for a block migration, by hand: the
    instance directory on the destination with an empty overlay of the same
    virtual size on the same base (copied there if missing), the config
    drive and disk.info copied."""
    import json
    s_root = os.path.join(lm.BASE, src, "local", "instances")
    d_root = os.path.join(lm.BASE, dst, "local", "instances")
    s_dir, d_dir = os.path.join(s_root, sid), os.path.join(d_root, sid)
    os.makedirs(d_dir, exist_ok=True)
    os.chmod(d_dir, 0o755)
    j = json.loads(subprocess.run(["qemu-img", "info", "-U", "--output=json",
                                   os.path.join(s_dir, "disk")], capture_output=True, text=True,
                                  check=True).stdout)
    cmd = ["qemu-img", "create", "-q", "-f", "qcow2"]
    base = j.get("backing-filename")  # as the hosts see it: the same path on both
    if base:
        name = os.path.basename(base)
        os.makedirs(os.path.join(d_root, "_base"), exist_ok=True)
        if not os.path.exists(os.path.join(d_root, "_base", name)):
            subprocess.run(["cp", os.path.join(s_root, "_base", name),
                            os.path.join(d_root, "_base", name)], check=True)
        cmd += ["-o", "backing_file=%s,backing_fmt=%s" % (base, j.get("backing-filename-format",
                                                                      "qcow2"))]
    lm.hosts("exec", dst, *cmd, os.path.join(lm.LOCAL, sid, "disk"), str(j["virtual-size"]))
    for f in ("disk.info", "disk.config"):
        if os.path.exists(os.path.join(s_dir, f)):
            subprocess.run(["cp", os.path.join(s_dir, f), d_dir], check=True)


def med(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def fmt(v, f):
    return f % v if v is not None else "n/a"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--block", action="store_true", help="per-host disks, block migration")
    a = ap.parse_args()
    why = lm.hosts_unavailable()
    if why:
        sys.exit("bench_migration: " + why)
    inst_path = lm.LOCAL if a.block else lm.SHARED
    kind = "block migration (local disks)" if a.block else "shared storage"
    with lm.running_lab(inst_path) as lab:
        sid = lab.boot("bench-lm", "host1", lab.image, "--config-drive", "True")
        paths = console_paths(inst_path, sid, a.block)
        lm.wait_heartbeat(paths[0])
        nubo, bare = [], []
        for r in range(a.rounds):
            for src, dst in (("host1", "host2"), ("host2", "host1")):
                x = nubo_move(lab, sid, src, dst, paths, a.block)
                nubo.append(x)
                print("round %d nubo %s->%s: total %.2f s (prechecks %.2f s, migration step "
                      "%.2f s), downtime %.3f s (QEMU %s ms)" % (r + 1, src, dst, x["total"],
                      x["prechecks"], x["libvirt"], x["gap"], x["qemu_ms"]), flush=True)
            for h in ("host1", "host2"):
                lm.hosts("agent-stop", h)
            for src, dst in (("host1", "host2"), ("host2", "host1")):
                x = bare_move(lab, sid, src, dst, paths, a.block)
                bare.append(x)
                print("round %d bare virsh %s->%s: total %.2f s, downtime %.3f s"
                      % (r + 1, src, dst, x["total"], x["gap"]), flush=True)
            lab.agents(inst_path)
        lab.cloud.cli("server", "delete", "--wait", sid, parse=False)
    n_t, b_t = med(nubo, "total"), med(bare, "total")
    n_g, b_g = med(nubo, "gap"), med(bare, "gap")
    print()
    print("live migration, %s, TCG guest 128 MiB, %d migrations each (median):" % (kind, len(nubo)))
    print("  %-28s %8s %10s %9s" % ("", "total s", "downtime s", "QEMU ms"))
    print("  %-28s %8.2f %10.3f %9s" % ("nubo (API -> completed)", n_t, n_g,
                                         fmt(med(nubo, "qemu_ms"), "%.0f")))
    print("  %-28s %8.2f %10.3f %9s" % ("bare virsh migrate --live", b_t, b_g,
                                         fmt(med(bare, "qemu_ms"), "%.0f")))
    print("  ratio nubo / bare: total %.2f, downtime %.2f; nubo's prechecks %.2f s, its "
          "migration step %.2f s" % (n_t / b_t, n_g / b_g, med(nubo, "prechecks"),
                                    med(nubo, "libvirt")))


if __name__ == "__main__":
    main()

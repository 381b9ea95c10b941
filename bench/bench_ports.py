#!/usr/bin/python3
"""nubo data-plane benchmark: ports wired per second when N servers boot at once.

Usage: /usr/bin/python3 bench/bench_ports.py [--bin build/nubo] [--servers 50]
           [--guest tests/images/out/guest.qcow2] [--threads N] [--cidr CIDR]
           [--set SECTION.KEY=VALUE ...]

  nubo  a libvirt all-in-one (real driver, the host's network agent, TCG),
        the seeded network on 10.164.1.0/24 (the bench CIDR): N POST /servers
        of m1.nano (128 MiB, 1 vCPU, no config drive), sent at once from N
        client threads. A poller (every 10 ms) records, per server, when its
        port appears, when its tap (tap<port[:11]>) is on a bridge, when the
        port is ACTIVE and when the server is ACTIVE. What counts is POST ->
        port ACTIVE (the agent saw the tap and the plugin marked the port),
        not the guest's boot.
  hand  the same number of taps made and put on a bridge by hand:
        `ip tuntap add dev T mode tap` + `ip link set T master BR up`, one
        process each (as an operator would), and once more in one
        `ip -batch` (the kernel's floor).
Prints wired/s, median and p99 POST -> port ACTIVE (and -> tap on bridge,
-> server ACTIVE), and the ratios against the hand-made wiring, with the
load average before and after. Everything made is removed (servers, the
agent's bridges and namespaces, the hand bridge ntbpbr0 and taps ntbpt*).
Needs root, libvirtd and the test image.
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dhcp import start_aio  # noqa: E402
from bench_libvirt import MV, ROOT, create_image, domain_exists, put_image_file, stop_aio, virsh  # noqa: E402

HAND_BR, HAND_TAP = "ntbpbr0", "ntbpt"
POLL = 0.01


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


def pct(xs, p):
    """The p-th percentile (nearest rank) of xs."""
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, int(round(p / 100.0 * len(s) + 0.5)) - 1))]


def stats(xs):
    return "median %.0f ms, p99 %.0f ms (min %.0f, max %.0f)" % (
        statistics.median(xs), pct(xs, 99), min(xs), max(xs))


def ip(*argv, check=True):
    p = subprocess.run(["ip"] + list(argv), capture_output=True, text=True, timeout=60)
    if check and p.returncode != 0:
        raise RuntimeError("ip %s: %s" % (" ".join(argv), p.stderr.strip()))
    return p


def master_of(dev):
    path = "/sys/class/net/%s/master" % dev
    return os.path.basename(os.readlink(path)) if os.path.islink(path) else None


def hand_down(n):
    for i in range(n):
        if os.path.exists("/sys/class/net/%s%d" % (HAND_TAP, i)):
            ip("link", "del", "%s%d" % (HAND_TAP, i), check=False)
    if os.path.exists("/sys/class/net/" + HAND_BR):
        ip("link", "del", HAND_BR, check=False)


def hand_run(n, batch=False):
    """Seconds to make n taps and put them, up, on a fresh bridge; per-tap
    seconds (processes only)."""
    hand_down(n)
    ip("link", "add", HAND_BR, "type", "bridge", "stp_state", "0", "forward_delay", "0")
    ip("link", "set", HAND_BR, "up")
    per = []
    try:
        t0 = time.perf_counter()
        if batch:
            cmds = "".join("tuntap add dev %s%d mode tap\nlink set %s%d master %s up\n"
                           % (HAND_TAP, i, HAND_TAP, i, HAND_BR) for i in range(n))
            subprocess.run(["ip", "-batch", "-"], input=cmds, text=True, check=True)
        else:
            for i in range(n):
                t = time.perf_counter()
                ip("tuntap", "add", "dev", "%s%d" % (HAND_TAP, i), "mode", "tap")
                ip("link", "set", "%s%d" % (HAND_TAP, i), "master", HAND_BR, "up")
                per.append(time.perf_counter() - t)
        total = time.perf_counter() - t0
        assert all(master_of("%s%d" % (HAND_TAP, i)) == HAND_BR for i in range(n))
        return total, per
    finally:
        hand_down(n)


class Poller(threading.Thread):
    """Every POLL s: the ports of the servers (one GET), their taps' master,
    and (every 10th round) the servers' status; first time of each event."""

    def __init__(self, aio, t0, sids):
        super().__init__(daemon=True)
        self.aio, self.t0, self.sids = aio, t0, sids
        self.ev = {}   # sid -> {"port": s, "tap": s, "active": s, "server": s, "status": str}
        self.ports = {}  # sid -> port id
        self.stop = False
        self.error = None

    def mark(self, sid, what, now):
        self.ev.setdefault(sid, {}).setdefault(what, now - self.t0)

    def run(self):
        try:
            self.loop()
        except Exception as e:  # reported by the main thread
            self.error = e

    def loop(self):
        c = self.aio.client()
        rounds = 0
        while not self.stop:
            st, _, body = c.req("GET", "/networking/v2.0/ports?fields=id&fields=device_id"
                                "&fields=status&fields=device_owner")
            now = time.perf_counter()
            if st != 200:
                raise RuntimeError("GET ports: %d %s" % (st, body))
            for p in body["ports"]:
                sid = p["device_id"]
                if not p["device_owner"].startswith("compute:") or sid not in self.sids:
                    continue
                self.ports[sid] = p["id"]
                self.mark(sid, "port", now)
                if p["status"] == "ACTIVE":
                    self.mark(sid, "active", now)
            for sid, pid in list(self.ports.items()):
                if "tap" not in self.ev.get(sid, {}) and master_of("tap" + pid[:11]):
                    self.mark(sid, "tap", time.perf_counter())
            if rounds % 10 == 0:
                self.servers(c)
            rounds += 1
            time.sleep(POLL)

    def servers(self, c):
        st, _, body = c.req("GET", "/compute/v2.1/servers/detail")
        now = time.perf_counter()
        for s in body.get("servers", []) if st == 200 else []:
            if s["id"] in self.sids and s["status"] in ("ACTIVE", "ERROR"):
                self.mark(s["id"], "server", now)
                self.ev[s["id"]]["status"] = s["status"]

    def done(self, n):
        return (sum(1 for e in self.ev.values() if "active" in e and "server" in e) >= n
                or sum(1 for e in self.ev.values() if e.get("status") == "ERROR") > 0)


def boot_all(aio, n, image_id, flavor, threads):
    """N POSTs at once (a barrier releases the threads); returns
    ({sid: POST send time}, t0 of the first send)."""
    sent, errors = {}, []
    barrier = threading.Barrier(threads)
    lock = threading.Lock()
    todo = list(range(n))

    def worker():
        c = aio.client()
        c.req("GET", "/compute/v2.1/flavors")  # connect before the barrier
        barrier.wait()
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            t = time.perf_counter()
            st, _, body = c.req("POST", "/compute/v2.1/servers", {"server": {
                "name": "bp-%d" % i, "flavorRef": flavor, "imageRef": image_id,
                "networks": "auto"}}, MV)
            if st != 202:
                errors.append("POST /servers: %d %s" % (st, body))
                return
            with lock:
                sent[body["server"]["id"]] = t
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError(errors[0])
    return sent


def delete_all(aio, sids, timeout=300):
    c = aio.client()
    for sid in sids:
        c.req("DELETE", "/compute/v2.1/servers/%s" % sid)
    end = time.time() + timeout
    left = set(sids)
    while left and time.time() < end:
        for sid in list(left):
            st, _, _ = c.req("GET", "/compute/v2.1/servers/%s" % sid)
            if st == 404 and not domain_exists(sid):
                left.discard(sid)
        time.sleep(0.5)
    return left


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "nubo"))
    ap.add_argument("--servers", type=int, default=50)
    ap.add_argument("--threads", type=int, default=0, help="client threads (default: --servers)")
    ap.add_argument("--guest", default=os.path.join(os.environ.get(
        "NUBO_TEST_IMAGE_DIR", os.path.join(ROOT, "tests", "images", "out")), "guest.qcow2"))
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--max-builds", type=int, default=0,
                    help="[DEFAULT] max_concurrent_builds (default: nubo's, 10)")
    ap.add_argument("--keep-logs", help="copy the cloud's log directory there at the end")
    ap.add_argument("--cidr", default="10.164.1.0/24", help="the seeded network's CIDR")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="more nubo options (e.g. agent.duplicate_address_probe=false)")
    a = ap.parse_args()
    n = a.servers
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    print("ports wired: %d servers at once, %s, %d cores, max_concurrent_builds %s, load %s, %s"
          % (n, os.path.abspath(a.bin), os.cpu_count(), a.max_builds or "10 (default)", load(),
             time.strftime("%Y-%m-%d %H:%M")))
    sys.stdout.flush()
    aio = None
    sids = set()
    try:
        aio = start_aio(os.path.abspath(a.bin), "--driver", "libvirt",
                        "--set", "libvirt.virt_type=qemu",
                        "--set", "network.seed_private_cidr=" + a.cidr,
                        "--set", "DEFAULT.cpu_allocation_ratio=64",
                        "--set", "DEFAULT.disk_allocation_ratio=100",
                        "--set", "DEFAULT.ram_allocation_ratio=4",
                        "--set", "quota.instances=-1", "--set", "quota.cores=-1",
                        "--set", "quota.ram=-1",
                        "--set", "compute.sync_power_state_interval=600",
                        *(("--set", "DEFAULT.max_concurrent_builds=%d" % a.max_builds)
                          if a.max_builds else ()),
                        *[x for kv in a.set for x in ("--set", kv)])
        c = aio.client()
        image_id = create_image(c, "bench-guest", "qcow2")
        put_image_file(aio, image_id, os.path.abspath(a.guest))
        _, _, fl = c.req("GET", "/compute/v2.1/flavors")
        flavor = [f["id"] for f in fl["flavors"] if f["name"] == "m1.nano"][0]
        # one unmeasured boot: fills the image cache, makes the network's
        # bridge and DHCP namespace (what any later boot finds in place)
        warm = boot_all(aio, 1, image_id, flavor, 1)
        sids |= set(warm)
        p = Poller(aio, min(warm.values()), set(warm))
        p.start()
        end = time.time() + a.timeout
        while not p.done(1) and time.time() < end and not p.error:
            time.sleep(0.1)
        p.stop = True
        p.join()
        left = delete_all(aio, list(warm))
        sids -= set(warm) - left
        print("warm-up boot: port ACTIVE %.0f ms, server %s %.0f ms" % (
            p.ev[list(warm)[0]].get("active", -1) * 1000, p.ev[list(warm)[0]].get("status"),
            p.ev[list(warm)[0]].get("server", -1) * 1000))
        sys.stdout.flush()

        load_before = load()
        t0 = time.perf_counter()
        poll = Poller(aio, t0, set())
        sent_box = {}

        def send():
            sent_box.update(boot_all(aio, n, image_id, flavor, a.threads or n))
        # the poller must know the ids as soon as each POST answers
        poll.sids = _LiveIds(sent_box)
        poll.start()
        send()
        sids |= set(sent_box)
        end = time.time() + a.timeout
        while not poll.done(n) and time.time() < end and not poll.error:
            time.sleep(0.05)
        poll.stop = True
        poll.join()
        load_after = load()
        if poll.error:
            raise poll.error
        wall, act = report(n, sent_box, poll, t0, load_before, load_after)
        left = delete_all(aio, list(sids))
        sids = left

        print("hand: %d taps + bridge attach, load %s" % (n, load()))
        hand = [hand_run(n) for _ in range(3)]
        batch = [hand_run(n, batch=True)[0] for _ in range(3)]
        hand_total = statistics.median(h[0] for h in hand)
        per = [x * 1000 for h in hand for x in h[1]]
        print("  ip tuntap + ip link set master, one process each: %d taps in %.0f ms "
              "(median of 3), %.1f taps/s; per tap median %.1f ms, p99 %.1f ms"
              % (n, hand_total * 1000, n / hand_total, statistics.median(per), pct(per, 99)))
        print("  the same in one ip -batch: %.1f ms (median of 3), %.0f taps/s"
              % (statistics.median(batch) * 1000, n / statistics.median(batch)))
        print("ratios: nubo's wall to %d ports ACTIVE / hand wiring = %.1f (/ ip -batch = %.0f); "
              "nubo's median POST -> port ACTIVE / hand per-tap median = %.0f"
              % (n, wall / hand_total, wall / statistics.median(batch),
                 statistics.median(act) / statistics.median(per)))
    finally:
        if aio:
            if sids:
                delete_all(aio, list(sids), timeout=120)
            for sid in list(sids):
                virsh("destroy", sid, check=False)
                virsh("undefine", sid, "--managed-save", check=False)
            state = aio.dir
            stop_aio(aio, keep=True)
            if a.keep_logs:
                shutil.copytree(os.path.join(state, "log"), a.keep_logs, dirs_exist_ok=True)
            sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
            from netagent_cleanup import remove_agent_leftovers
            remove_agent_leftovers(state)
            shutil.rmtree(state, ignore_errors=True)
        hand_down(n)


class _LiveIds:
    """`sid in ids` against the dict the POST threads fill."""

    def __init__(self, d):
        self.d = d

    def __contains__(self, sid):
        return sid in self.d


def _lat(poll, sent, t0, what):
    """Per server: POST send -> event, ms."""
    return [(poll.ev[s][what] - (sent[s] - t0)) * 1000 for s in sent if what in poll.ev.get(s, {})]


def report(n, sent, poll, t0, load_before, load_after):
    act = _lat(poll, sent, t0, "active")
    tap = _lat(poll, sent, t0, "tap")
    srv = _lat(poll, sent, t0, "server")
    errs = sum(1 for e in poll.ev.values() if e.get("status") == "ERROR")
    last_post = (max(sent.values()) - t0) * 1000
    first = min(sent.values()) - t0
    wall = max(e["active"] for e in poll.ev.values() if "active" in e) - first
    print("nubo: %d servers, %d POSTs answered within %.0f ms; %d ports ACTIVE, %d servers ERROR"
          % (n, len(sent), last_post, len(act), errs))
    print("  load average before %s, after %s" % (load_before, load_after))
    print("  first POST -> all %d ports ACTIVE: %.2f s = %.1f ports wired/s"
          % (len(act), wall, len(act) / wall))
    print("  POST -> tap on the bridge: %s" % stats(tap))
    print("  POST -> port ACTIVE:       %s" % stats(act))
    if srv:
        print("  POST -> server ACTIVE:     %s" % stats(srv))
    sys.stdout.flush()
    return wall, act


if __name__ == "__main__":
    main()

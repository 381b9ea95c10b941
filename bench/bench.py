#!/usr/bin/python3
"""nubo control-plane benchmarks (fake hosts). Prints figures; asserts nothing
about time. Usage: /usr/bin/python3 bench/bench.py [--bin build/nubo] [--only NAME]
                                                 [--networks none|auto]
--networks auto boots every server with a port on the seeded shared network
(made a /16 here so that 1,000 servers fit); none (default) boots without.

  boot_seq     POST /servers -> ACTIVE, 100 sequential boots: median, p90
  boot_burst   200 concurrent boots: wall time, servers/s, all ACTIVE?
  list_detail  GET /servers/detail with 1,000 servers: median latency, req/s at concurrency 8
  candidates   GET /allocation_candidates with 1,000 resource providers: median latency
  rss          resident memory of the all-in-one holding 1,000 servers
--poll-ms N: boot_seq's status poll interval (default 0.5; the scale target's is 5).
--spawn-ms N gives the fake driver's spawns N ms ([fake] spawn_delay_ms), the time a
real spawn takes, so boot_burst shows how many builds a host runs at once
([DEFAULT] max_concurrent_builds; --set passes any other option to the aio).
--smoke runs boot_seq and boot_burst only (CI's check of the normal build;
a boot that does not end ACTIVE fails the run).
--callgrind runs the candidates benchmark's all-in-one under valgrind's
callgrind, counting instructions only around its GET loop: instructions per
answer, the same on a loaded machine as on a quiet one (the latencies then
mean nothing). BENCH_PMAP=1 prints the all-in-one's largest mappings after
the list_detail load (where the resident memory is).
"""
import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PW = "bench-secret"


def free_port():
    """A free port whose successor is free too (the metadata API's)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
            return port
        except (OSError, OverflowError):
            continue


class Client:
    """One keep-alive HTTP connection."""

    def __init__(self, port, token=None):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.token = token

    def req(self, method, path, body=None, headers=None):
        h = {"Content-Type": "application/json"}
        if self.token:
            h["X-Auth-Token"] = self.token
        h.update(headers or {})
        self.conn.request(method, path, json.dumps(body) if body is not None else None, h)
        r = self.conn.getresponse()
        data = r.read()
        return r.status, r.getheader("X-Subject-Token"), (json.loads(data) if data else None)


class Aio:
    def __init__(self, binary, *extra, state_parent=None, prefix=()):
        # state_parent: create the state dir there, 0755 (QEMU, run by the
        # libvirt driver as another user, must reach the instance files)
        self.dir = tempfile.mkdtemp(prefix="nubo-bench-", dir=state_parent)
        if state_parent:
            os.chmod(self.dir, 0o755)
        self.port = free_port()
        self.proc = subprocess.Popen(
            list(prefix) + [binary, "aio", "--state-dir", self.dir, "--port", str(self.port),
             "--admin-password", PW] + list(extra),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.time() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.time() > end:
                    raise RuntimeError("nubo aio (%s) did not start: exit %s" % (self.dir, self.proc.poll()))
                time.sleep(0.05)
        st, tok, _ = Client(self.port).req("POST", "/identity/v3/auth/tokens", {"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": "admin", "domain": {"id": "default"}, "password": PW}}},
            "scope": {"project": {"name": "admin", "domain": {"id": "default"}}}}})
        assert st == 201, st
        self.token = tok
        c = self.client()
        _, _, imgs = c.req("GET", "/image/v2/images?name=cirros")
        self.image = imgs["images"][0]["id"]

    def client(self):
        return Client(self.port, self.token)

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


HDR = {"OpenStack-API-Version": "compute 2.37"}
BIG = ["--set", "fake.vcpus=256", "--set", "fake.memory_mb=262144", "--set", "fake.disk_gb=4000",
       "--set", "quota.instances=-1", "--set", "quota.cores=-1", "--set", "quota.ram=-1",
       "--set", "network.seed_private_cidr=10.0.0.0/16"]
NETWORKS = "none"
EXTRA = []  # --spawn-ms and --set
CALLGRIND = False
POLL = 0.0005  # --poll-ms: boot_seq's status poll interval


def boot(c, image, name, flavor="42"):
    st, _, body = c.req("POST", "/compute/v2.1/servers", {"server": {
        "name": name, "flavorRef": flavor, "imageRef": image, "networks": NETWORKS}}, HDR)
    assert st == 202, (st, body)
    return body["server"]["id"]


def wait_active(c, sid, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        _, _, body = c.req("GET", "/compute/v2.1/servers/%s" % sid)
        status = body["server"]["status"]
        if status in ("ACTIVE", "ERROR"):
            return status
        time.sleep(POLL)
    return "TIMEOUT"


def bench_boot_seq(binary, n=100):
    aio = Aio(binary, *BIG)
    try:
        c = aio.client()
        times = []
        for i in range(n):
            t0 = time.perf_counter()
            sid = boot(c, aio.image, "seq-%d" % i)
            assert wait_active(c, sid) == "ACTIVE"
            times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        print("boot_seq: %d sequential boots POST->ACTIVE (status polled every %g ms): median %.2f ms, "
              "p90 %.2f ms, min %.2f ms" % (n, POLL * 1000, statistics.median(times),
                                            times[int(n * 0.9) - 1], times[0]))
    finally:
        aio.stop()


def bench_boot_burst(binary, n=200, threads=16):
    aio = Aio(binary, *BIG, *EXTRA)
    try:
        ids, lock = [], threading.Lock()

        def worker(k):
            c = aio.client()
            for i in range(k, n, threads):
                sid = boot(c, aio.image, "burst-%d" % i)
                with lock:
                    ids.append(sid)
        t0 = time.perf_counter()
        run_workers(worker, threads)
        c = aio.client()
        statuses = {}
        for sid in ids:
            statuses[sid] = wait_active(c, sid)
        wall = time.perf_counter() - t0
        active = sum(1 for s in statuses.values() if s == "ACTIVE")
        print("boot_burst: %d concurrent boots (%d client threads%s): %d ACTIVE, wall %.2f s, "
              "%.1f servers/s" % (n, threads, (", " + " ".join(EXTRA)) if EXTRA else "", active,
                                  wall, n / wall))
        assert active == n, "boot_burst: %d of %d servers not ACTIVE: %s" % (
            n - active, n, sorted(set(statuses.values())))
    finally:
        aio.stop()


def run_workers(worker, threads):
    """worker(k) in threads threads, k = 0..threads-1; returns once all end."""
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    [t.start() for t in ts]
    [t.join() for t in ts]


def wait_builds(aio, timeout, interval):
    """Until no server is in BUILD (or timeout seconds)."""
    c = aio.client()
    end = time.time() + timeout
    while time.time() < end:
        _, _, body = c.req("GET", "/compute/v2.1/servers/detail?status=BUILD&limit=1")
        if not body["servers"]:
            break
        time.sleep(interval)


def fill(aio, n=1000, threads=8):
    def worker(k):
        c = aio.client()
        for i in range(k, n, threads):
            boot(c, aio.image, "fill-%d" % i)
    run_workers(worker, threads)
    wait_builds(aio, 300, 0.2)


def bench_list_detail_and_rss(binary, n=1000):
    aio = Aio(binary, *BIG)
    try:
        rss0 = aio.rss_kib()
        fill(aio, n)
        time.sleep(1)
        rss = aio.rss_kib()
        c = aio.client()
        st, _, body = c.req("GET", "/compute/v2.1/servers/detail?limit=%d" % (n + 10))
        count = len(body["servers"])
        lat = []
        for _ in range(30):
            t0 = time.perf_counter()
            c.req("GET", "/compute/v2.1/servers/detail?limit=%d" % (n + 10))
            lat.append((time.perf_counter() - t0) * 1000)
        done = [0]
        lock = threading.Lock()
        stop_at = time.perf_counter() + 10

        def worker():
            cc = aio.client()
            while time.perf_counter() < stop_at:
                cc.req("GET", "/compute/v2.1/servers/detail?limit=%d" % (n + 10))
                with lock:
                    done[0] += 1
        t0 = time.perf_counter()
        ts = [threading.Thread(target=worker) for _ in range(8)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        rps = done[0] / (time.perf_counter() - t0)
        rss_after = aio.rss_kib()
        if os.environ.get("BENCH_PMAP"):
            subprocess.run("pmap -x %d | sort -k3 -n | tail -25; grep -E 'Rss|Pss_' /proc/%d/smaps_rollup; ls /proc/%d/task | wc -l"
                           % (aio.proc.pid, aio.proc.pid, aio.proc.pid), shell=True)
        print("list_detail: GET /servers/detail returning %d servers: median %.1f ms (sequential, 30 runs); "
              "%.1f req/s at concurrency 8 for 10 s" % (count, statistics.median(lat), rps))
        print("rss: all-in-one resident memory: %.1f MiB at start, %.1f MiB with %d servers, "
              "%.1f MiB after the list load" % (rss0 / 1024, rss / 1024, count, rss_after / 1024))
    finally:
        aio.stop()


def callgrind_ir(path):
    """The instruction count (Ir) of a callgrind output file."""
    ir = 0
    with open(path) as f:
        for line in f:
            if line.startswith("totals:"):
                ir = int(line.split()[1])
    return ir


def bench_candidates(binary, n=1000):
    cg = os.path.join(tempfile.gettempdir(), "nubo-bench-callgrind.%d" % os.getpid()) if CALLGRIND else None
    prefix = ("valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=" + cg) if cg else ()
    aio = Aio(binary, prefix=prefix)
    try:
        c = aio.client()
        hdr = {"OpenStack-API-Version": "placement 1.39"}
        for i in range(n):
            rp = str(uuid.uuid4())
            st, _, _ = c.req("POST", "/placement/resource_providers", {"name": "bench-rp-%d" % i, "uuid": rp}, hdr)
            assert st == 200, st
            st, _, _ = c.req("PUT", "/placement/resource_providers/%s/inventories" % rp, {
                "resource_provider_generation": 0, "inventories": {
                    "VCPU": {"total": 32, "allocation_ratio": 4.0},
                    "MEMORY_MB": {"total": 65536, "reserved": 512},
                    "DISK_GB": {"total": 1000}}}, hdr)
            assert st == 200, st
        q = "/placement/allocation_candidates?resources=VCPU:1,MEMORY_MB:512,DISK_GB:1"
        if cg:
            subprocess.run(["callgrind_control", "-i", "on", str(aio.proc.pid)], check=True, capture_output=True)
        lat = []
        for _ in range(30):
            t0 = time.perf_counter()
            st, _, body = c.req("GET", q, None, hdr)
            lat.append((time.perf_counter() - t0) * 1000)
        if cg:
            subprocess.run(["callgrind_control", "-i", "off", str(aio.proc.pid)], check=True, capture_output=True)
        ql = q + "&limit=50"
        lat50 = []
        for _ in range(30):
            t0 = time.perf_counter()
            c.req("GET", ql, None, hdr)
            lat50.append((time.perf_counter() - t0) * 1000)
        print("candidates: GET allocation_candidates over %d providers (%d candidates): median %.1f ms; "
              "with limit=50: median %.1f ms" % (n + 3, len(body["allocation_requests"]),
                                                statistics.median(lat), statistics.median(lat50)))
    finally:
        aio.stop()
    if cg:
        ir = callgrind_ir(cg)
        os.unlink(cg)
        print("candidates (callgrind): %.1f M instructions per answer of all %d providers (30 answers)"
              % (ir / 30 / 1e6, n + 3))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "nubo"))
    ap.add_argument("--only")
    ap.add_argument("--networks", choices=("none", "auto"), default="none")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--spawn-ms", type=int, default=0)
    ap.add_argument("--poll-ms", type=float, default=0.5)
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    a = ap.parse_args()
    global NETWORKS, CALLGRIND, POLL
    POLL = a.poll_ms / 1000
    NETWORKS = a.networks
    CALLGRIND = a.callgrind
    if a.spawn_ms:
        EXTRA.extend(["--set", "fake.spawn_delay_ms=%d" % a.spawn_ms])
    for kv in a.set:
        EXTRA.extend(["--set", kv])
    print("nubo benchmarks: %s, %d cores, %s, networks %s"
          % (a.bin, os.cpu_count(), time.strftime("%Y-%m-%d"), NETWORKS))
    for name, fn in (("boot_seq", bench_boot_seq), ("boot_burst", bench_boot_burst),
                     ("list_detail", bench_list_detail_and_rss), ("candidates", bench_candidates)):
        if a.smoke and name not in ("boot_seq", "boot_burst"):
            continue
        if not a.only or a.only == name:
            fn(a.bin)
            sys.stdout.flush()


if __name__ == "__main__":
    main()

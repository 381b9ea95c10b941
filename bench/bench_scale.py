#!/usr/bin/python3
"""nubo at scale: one all-in-one with many fake hosts (SQLite). Prints
figures and ratios; asserts nothing about time.

Usage: /usr/bin/python3 bench/bench_scale.py [--bin build/nubo] [--hosts 1000,10000]
           [--servers 10000] [--boots 1000] [--only NAME[,NAME]] [--db sqlite|mariadb]

For each host count (one all-in-one each, `nubo aio --fake-hosts N`):
  start        time until all N hosts are registered (resource providers), RSS, threads
  heartbeat    database transactions/s and bus casts/s from N idle hosts over 25 s
               (/metrics: nubo_db_transaction_duration_seconds_count)
  candidates   GET allocation_candidates over the N providers: median of all, with limit=50
  boots        --boots concurrent boots (16 client threads, no polling): placements/s (the
               wall until none is in BUILD); then 200 boots from 8 clients each polling
               its server every 5 ms: POST -> ACTIVE median and p99
  providers    provider + inventory creation at concurrency 8 (POST provider, PUT
               inventories): providers/s
  list         --servers servers (filled by the boots, then concurrent boots to reach it),
               GET /servers/detail?limit=1000 paged over all of them, and limit=50:
               median and req/s at concurrency 8
  rss          resident memory and threads after the workload
--db mariadb uses NUBO_TEST_MARIA_URL (mysql://user:pw@host:port/db, an empty database).
"""
import argparse
import os
import statistics
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Aio, HDR, ROOT, run_workers, wait_builds  # noqa: E402

PHDR = {"OpenStack-API-Version": "placement 1.39"}
BIG = ["--set", "fake.vcpus=256", "--set", "fake.memory_mb=262144", "--set", "fake.disk_gb=4000",
       "--set", "quota.instances=-1", "--set", "quota.cores=-1", "--set", "quota.ram=-1",
       "--set", "quota.server_groups=-1"]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def metrics(aio):
    """{name{labels}: value} of GET /metrics."""
    c = aio.client()
    c.conn.request("GET", "/metrics")
    r = c.conn.getresponse()
    text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


def msum(m, prefix):
    return sum(v for k, v in m.items() if k.startswith(prefix))


def nthreads(aio):
    return len(os.listdir("/proc/%d/task" % aio.proc.pid))


def count_providers(aio):
    _, _, body = aio.client().req("GET", "/placement/resource_providers", None, PHDR)
    return len(body["resource_providers"])


def phase_start(aio, n, t0):
    end = time.time() + 600
    while count_providers(aio) < n and time.time() < end:
        time.sleep(0.5)
    got = count_providers(aio)
    print("start: %d fake hosts, %d providers registered %.1f s after the start; RSS %.1f MiB; "
          "%d threads" % (n, got, time.perf_counter() - t0, aio.rss_kib() / 1024, nthreads(aio)))


def phase_heartbeat(aio, n, secs=25):
    m0, t0 = metrics(aio), time.perf_counter()
    time.sleep(secs)
    m1, dt = metrics(aio), time.perf_counter() - t0
    tx = msum(m1, "nubo_db_transaction_duration_seconds_count") - \
        msum(m0, "nubo_db_transaction_duration_seconds_count")
    txs = msum(m1, "nubo_db_transaction_duration_seconds_sum") - \
        msum(m0, "nubo_db_transaction_duration_seconds_sum")
    casts = msum(m1, "nubo_bus_casts_total") - msum(m0, "nubo_bus_casts_total")
    calls = msum(m1, "nubo_bus_call_duration_seconds_count") - \
        msum(m0, "nubo_bus_call_duration_seconds_count")
    print("heartbeat: %d idle hosts over %.0f s: %.2f database transactions/s (%.1f ms of "
          "transactions per s), %.2f bus casts/s, %.2f bus calls/s"
          % (n, dt, tx / dt, txs / dt * 1000, casts / dt, calls / dt))


def phase_candidates(aio, n):
    c = aio.client()
    q = "/placement/allocation_candidates?resources=VCPU:1,MEMORY_MB:512,DISK_GB:1"
    c.req("GET", q, None, PHDR)
    runs = 30 if n <= 2000 else 10
    lat = []
    for _ in range(runs):
        t0 = time.perf_counter()
        st, _, body = c.req("GET", q, None, PHDR)
        lat.append((time.perf_counter() - t0) * 1000)
    raw, size = [], 0
    for _ in range(runs):  # the same without the client's JSON parse
        t0 = time.perf_counter()
        c.conn.request("GET", q, headers=dict(PHDR, **{"X-Auth-Token": aio.token}))
        size = len(c.conn.getresponse().read())
        raw.append((time.perf_counter() - t0) * 1000)
    lat50 = []
    for _ in range(30):
        t0 = time.perf_counter()
        c.req("GET", q + "&limit=50", None, PHDR)
        lat50.append((time.perf_counter() - t0) * 1000)
    print("candidates: allocation_candidates over %d providers (%d returned, %.0f KB): median "
          "%.1f ms (%d runs; %.1f ms without the client's JSON parse); limit=50: median %.2f ms"
          % (n, len(body["allocation_requests"]), size / 1000, statistics.median(lat), runs,
             statistics.median(raw), statistics.median(lat50)))


def burst(aio, nboots, threads=16, tag="burst"):
    """nboots POSTs from threads clients, then a wait until none is in
    BUILD: (wall seconds, {status: count})."""
    def worker(k):
        c = aio.client()
        for i in range(k, nboots, threads):
            st, _, body = c.req("POST", "/compute/v2.1/servers", {"server": {
                "name": "%s-%d" % (tag, i), "flavorRef": "42", "imageRef": aio.image,
                "networks": "none"}}, HDR)
            assert st == 202, (st, body)
    t0 = time.perf_counter()
    run_workers(worker, threads)
    wait_builds(aio, 900, 0.05)
    wall = time.perf_counter() - t0
    c = aio.client()
    _, _, body = c.req("GET", "/compute/v2.1/servers?status=ERROR&limit=1000")
    return wall, len(body["servers"])


def phase_burst(aio, nboots):
    wall, errors = burst(aio, nboots)
    print("boots: %d concurrent boots (16 client threads, no polling): wall %.1f s, %.0f "
          "placements/s; servers in ERROR after it: %d" % (nboots, wall, nboots / wall, errors))


def phase_latency(aio, nboots, threads=8, poll=0.005, tag="lat"):
    """POST -> ACTIVE of nboots boots from threads clients, each polling
    its server every poll seconds."""
    lat, errs, lock = [], [], threading.Lock()

    def worker(k):
        c = aio.client()
        for i in range(k, nboots, threads):
            t0 = time.perf_counter()
            st, _, body = c.req("POST", "/compute/v2.1/servers", {"server": {
                "name": "%s-%d" % (tag, i), "flavorRef": "42", "imageRef": aio.image,
                "networks": "none"}}, HDR)
            if st != 202:
                with lock:
                    errs.append(st)
                continue
            sid = body["server"]["id"]
            end = time.time() + 120
            status = "TIMEOUT"
            while time.time() < end:
                _, _, b = c.req("GET", "/compute/v2.1/servers/%s" % sid)
                status = b["server"]["status"]
                if status in ("ACTIVE", "ERROR"):
                    break
                time.sleep(poll)
            with lock:
                if status == "ACTIVE":
                    lat.append((time.perf_counter() - t0) * 1000)
                else:
                    errs.append(status)
    t0 = time.perf_counter()
    run_workers(worker, threads)
    wall = time.perf_counter() - t0
    print("latency: %d boots from %d concurrent clients each polling its server every %.0f ms: "
          "%d ACTIVE, %d not (%s); POST->ACTIVE median %.1f ms, p99 %.1f ms; %.0f boots/s"
          % (nboots, threads, poll * 1000, len(lat), len(errs), sorted(set(map(str, errs))),
             statistics.median(lat) if lat else 0, pct(lat, 0.99) if lat else 0, nboots / wall))


def phase_providers(aio, n=2000, threads=8):
    done, lock = [0], threading.Lock()

    def worker(k):
        c = aio.client()
        for i in range(k, n, threads):
            rp = str(uuid.uuid4())
            st, _, _ = c.req("POST", "/placement/resource_providers",
                             {"name": "bench-rp-%s" % rp, "uuid": rp}, PHDR)
            assert st == 200, st
            st, _, _ = c.req("PUT", "/placement/resource_providers/%s/inventories" % rp, {
                "resource_provider_generation": 0, "inventories": {
                    "VCPU": {"total": 32, "allocation_ratio": 4.0},
                    "MEMORY_MB": {"total": 65536, "reserved": 512},
                    "DISK_GB": {"total": 1000}}}, PHDR)
            assert st == 200, st
            with lock:
                done[0] += 1
    t0 = time.perf_counter()
    run_workers(worker, threads)
    wall = time.perf_counter() - t0
    print("providers: %d providers + inventories at concurrency %d: %.1f s, %.0f providers/s "
          "(%.0f requests/s)" % (done[0], threads, wall, done[0] / wall, 2 * done[0] / wall))
    # they are not hosts: gone again, so that the candidates stay the hosts
    c = aio.client()
    _, _, body = c.req("GET", "/placement/resource_providers", None, PHDR)
    for rp in body["resource_providers"]:
        if rp["name"].startswith("bench-rp-"):
            c.req("DELETE", "/placement/resource_providers/%s" % rp["uuid"], None, PHDR)


def fill_servers(aio, want, have, threads=16):
    """Boots until want servers exist, then waits for BUILD to end:
    (wall, servers in ERROR)."""
    return burst(aio, max(0, want - have), threads, "fill")


def phase_list(aio, want):
    c = aio.client()
    page, lat, total, marker = 1000, [], 0, None
    t_all = time.perf_counter()
    while True:
        q = "/compute/v2.1/servers/detail?limit=%d" % page + ("&marker=%s" % marker if marker else "")
        t0 = time.perf_counter()
        st, _, body = c.req("GET", q)
        lat.append((time.perf_counter() - t0) * 1000)
        assert st == 200, st
        total += len(body["servers"])
        if len(body["servers"]) < page:
            break
        marker = body["servers"][-1]["id"]
    t_all = time.perf_counter() - t_all
    print("list: GET /servers/detail?limit=%d paged over %d servers (%d pages): %.2f s in all, "
          "page median %.1f ms, max %.1f ms" % (page, total, len(lat), t_all,
                                                statistics.median(lat), max(lat)))
    q = "/compute/v2.1/servers/detail?limit=50"
    lat = []
    for _ in range(100):
        t0 = time.perf_counter()
        c.req("GET", q)
        lat.append((time.perf_counter() - t0) * 1000)
    done, lock, stop_at = [0], threading.Lock(), time.perf_counter() + 10

    def worker():
        cc = aio.client()
        while time.perf_counter() < stop_at:
            cc.req("GET", q)
            with lock:
                done[0] += 1
    t0 = time.perf_counter()
    ts = [threading.Thread(target=worker) for _ in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    print("list: GET /servers/detail?limit=50 of %d servers: median %.2f ms sequential (100 runs); "
          "%.0f req/s at concurrency 8 for 10 s" % (total, statistics.median(lat),
                                                     done[0] / (time.perf_counter() - t0)))
    return total


def run(binary, n, a):
    only = set(a.only.split(",")) if a.only else None

    def want(name):
        return not only or name in only
    extra = list(BIG)
    if a.db == "mariadb":
        extra += ["--set", "database.connection=" + os.environ["NUBO_TEST_MARIA_URL"]]
    t0 = time.perf_counter()
    aio = Aio(binary, "--fake-hosts", str(n), *extra)
    try:
        print("== %d fake hosts (%s), load average %s" % (n, a.db, open("/proc/loadavg").read().split()[:3]))
        phase_start(aio, n, t0)
        if want("heartbeat"):
            phase_heartbeat(aio, n)
        if want("candidates"):
            phase_candidates(aio, n)
        booted = 0
        if want("boots"):
            phase_burst(aio, a.boots)
            phase_latency(aio, 200)
            booted = a.boots + 200
        if want("providers"):
            phase_providers(aio)
        if want("list"):
            t1 = time.perf_counter()
            _, errors = fill_servers(aio, a.servers, booted)
            print("list: filled to %d servers in %.1f s (%d in ERROR)"
                  % (a.servers, time.perf_counter() - t1, errors))
            phase_list(aio, a.servers)
        if want("candidates") and (want("boots") or want("list")):
            phase_candidates(aio, n)
        print("rss: resident memory after the workload %.1f MiB; %d threads"
              % (aio.rss_kib() / 1024, nthreads(aio)))
        sys.stdout.flush()
    finally:
        aio.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "nubo"))
    ap.add_argument("--hosts", default="1000,8000")
    ap.add_argument("--servers", type=int, default=10000)
    ap.add_argument("--boots", type=int, default=1000)
    ap.add_argument("--only")
    ap.add_argument("--db", choices=("sqlite", "mariadb"), default="sqlite")
    a = ap.parse_args()
    print("nubo scale benchmark: %s, %d cores, %s" % (a.bin, os.cpu_count(), time.strftime("%Y-%m-%d %H:%M")))
    for n in (int(x) for x in a.hosts.split(",")):
        run(a.bin, n, a)


if __name__ == "__main__":
    main()

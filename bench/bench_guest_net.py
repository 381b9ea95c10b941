#!/usr/bin/python3
"""nubo data-plane benchmark: same-host guest-to-guest RTT and TCP throughput.

Usage: /usr/bin/python3 bench/bench_guest_net.py [--bin build/nubo] [--rounds 2]
           [--mib 32] [--pings 20] [--guest tests/images/out/guest.qcow2]

Two TCG guests of the test image (m1.nano: 128 MiB, 1 vCPU, config drive
with user data) on one network:
  nubo  a libvirt all-in-one with its network agent, the seeded network on
        10.164.2.0/24: tap -> brq<net> (security groups of the default group
        in nftables) -> tap.
  bare  the same two domains (nubo's XML, renamed, fresh overlays, copies of
        their config drives, so the same MACs, addresses and user data) by
        `virsh create` on a hand-made bridge ntbgbr0 with a hand-run dnsmasq
        in namespace ntbgdhcp (bench_dhcp.py's recipe), no filtering.
B's user data listens with busybox nc on 5001; A's pings B until it answers,
then pings it --pings times 0.2 s apart and sends --mib MiB of zeros to B
with busybox nc. Measured on the host: the RTT of A's pings from an AF_PACKET
capture with kernel timestamps on A's tap (the guests' own clocks run on
jiffies under TCG, so their ping prints 4 ms steps; its summary is shown as
well), and the throughput from B's tap byte counter sampled every 10 ms (first
to last growth during the transfer); then A downloads --wget-mib MiB from
B's busybox httpd (sendfile on B's side), from A's tap counter (the
multi-host figure of tests/e2e/test_multihost_network.py is such a wget).
Runs alternate nubo / bare. Everything
made is removed. Needs root, libvirtd and the test image.
"""
import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_dhcp import start_aio  # noqa: E402
from bench_libvirt import (MV, ROOT, VARTMP, Bare, ConsoleWatch, create_image,  # noqa: E402
                           domain_exists, put_image_file, stop_aio, virsh)

CIDR = "10.164.2.0/24"
BR, NS, VETH = "ntbgbr0", "ntbgdhcp", "ntbgd0"
BARE_DHCP = "10.164.2.250"
PORT = 5001

B_DATA = """#!/bin/sh
(while :; do sleep 3600 | nc -l -p {port} >/dev/null; done) </dev/null >/dev/null 2>&1 &
mkdir -p /run/www && dd if=/dev/zero of=/run/www/f bs=1M count={wmib} 2>/dev/null
httpd -p 8080 -h /run/www
echo "NC-LISTEN port={port} HTTPD port=8080"
"""

A_DATA = """#!/bin/sh
i=0
until ping -c 1 -W 1 {b} >/dev/null 2>&1; do
  i=$((i+1)); [ $i -ge 120 ] && {{ echo "PEER-PING {b} FAILED"; exit 1; }}
  sleep 0.5
done
echo "PEER-UP {b} after $i tries"
echo "PING-RUN $(ping -c {n} -i 0.2 {b} 2>&1 | tail -1)"
sleep 0.5
echo "XFER-START"
dd if=/dev/zero bs=64k count={blocks} 2>/dev/null | nc {b} {port}
echo "XFER-END rc=$?"
sleep 0.5
echo "WGET-START"
wget -q -O /dev/null http://{b}:8080/f
echo "WGET-END rc=$?"
"""


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


def sh(*argv, check=True):
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60)
    if check and p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(map(str, argv)), p.stderr.strip()))
    return p


class RttCapture(threading.Thread):
    """ICMP echo request/reply on iface, kernel timestamps (pktrtt.py's
    method); rtts() -> ms of the echo id with the most answered pings."""

    def __init__(self, iface):
        super().__init__(daemon=True)
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        self.s.bind((iface, 0))
        self.s.setsockopt(socket.SOL_SOCKET, 35, 1)  # SO_TIMESTAMPNS
        self.s.settimeout(0.2)
        self.req, self.pairs, self.stop = {}, {}, False

    def run(self):
        while not self.stop:
            try:
                data, anc, _, _ = self.s.recvmsg(2048, 64)
            except socket.timeout:
                continue
            ts = time.time()
            for lvl, typ, d in anc:
                if lvl == socket.SOL_SOCKET and typ == 35:
                    sec, ns = struct.unpack("qq", d[:16])
                    ts = sec + ns / 1e9
            if len(data) < 42 or data[12:14] != b"\x08\x00" or data[23] != 1:
                continue
            icmp = data[14 + (data[14] & 15) * 4:]
            ident, seq = struct.unpack("!HH", icmp[4:8])
            if icmp[0] == 8:
                self.req[(ident, seq)] = ts
            elif icmp[0] == 0 and (ident, seq) in self.req:
                self.pairs.setdefault(ident, []).append((ts - self.req.pop((ident, seq))) * 1000)
        self.s.close()

    def rtts(self):
        return max(self.pairs.values(), key=len) if self.pairs else []


class ByteSampler(threading.Thread):
    """tx_bytes of a tap (bytes to its guest) every 10 ms: the throughput of
    the transfer is (last - first growth) bytes over that time."""

    def __init__(self, tap):
        super().__init__(daemon=True)
        self.path = "/sys/class/net/%s/statistics/tx_bytes" % tap
        self.samples, self.stop = [], False

    def run(self):
        while not self.stop:
            try:
                with open(self.path) as f:
                    self.samples.append((time.perf_counter(), int(f.read())))
            except (OSError, ValueError):
                pass
            time.sleep(0.01)

    def throughput(self, t_from, nbytes):
        """MB/s of a transfer of about nbytes that starts after t_from: over
        the samples from the first at 256 KiB above the level at t_from to
        the first at nbytes - 256 KiB above it (the other traffic, ARP,
        DHCP and pings, is a few KiB); (MB/s, seconds) or None."""
        s = [x for x in self.samples if x[0] >= t_from]
        if not s:
            return None
        base, lo, hi = s[0][1], 256 << 10, nbytes - (256 << 10)
        a = next((x for x in s if x[1] - base >= lo), None)
        b = next((x for x in s if x[1] - base >= hi), None)
        if not a or not b or b[0] <= a[0]:
            return None
        return (b[1] - a[1]) / (b[0] - a[0]) / 1e6, b[0] - a[0]


def measure(tap_a, tap_b, cw_a, a):
    """Waits for A's run on its console while capturing; returns a dict."""
    cap, to_b, to_a = RttCapture(tap_a), ByteSampler(tap_b), ByteSampler(tap_a)
    for t in (cap, to_b, to_a):
        t.start()
    try:
        cw_a.wait_for(lambda t: re.search(rb"XFER-END rc=\d+\r?\n", t), a.timeout)
        t_wget = time.perf_counter()
        cw_a.wait_for(lambda t: re.search(rb"WGET-END rc=\d+\r?\n", t), a.timeout)
    finally:
        cap.stop = to_b.stop = to_a.stop = True
        for t in (cap, to_b, to_a):
            t.join()
    text = cw_a.text.decode(errors="replace")
    m = re.search(r"PING-RUN ([^\r\n]*)", text)
    rc = re.search(r"XFER-END rc=(\d+)", text).group(1) + "/" + \
        re.search(r"WGET-END rc=(\d+)", text).group(1)
    return {"rtt": cap.rtts(), "guest_ping": m.group(1) if m else "?",
            "tput": to_b.throughput(0, a.mib << 20),
            "wget": to_a.throughput(t_wget - 0.01, a.wget_mib << 20), "rc": rc}


def fmt_rtt(xs):
    if not xs:
        return "no answered pings captured"
    return "min/avg/median/max %.3f/%.3f/%.3f/%.3f ms (n=%d)" % (
        min(xs), statistics.mean(xs), statistics.median(xs), max(xs), len(xs))


def bare_net_up(d, subnet_mask, hosts):
    """The hand-made bridge, namespace and dnsmasq; hosts: [(mac, ip)]."""
    sh("ip", "link", "add", BR, "type", "bridge", "stp_state", "0", "forward_delay", "0")
    sh("ip", "link", "set", BR, "up")
    sh("ip", "netns", "add", NS)
    sh("ip", "link", "add", VETH, "type", "veth", "peer", "name", "ns-bench", "netns", NS)
    sh("ip", "link", "set", VETH, "master", BR, "up")
    sh("ip", "-n", NS, "link", "set", "lo", "up")
    sh("ip", "-n", NS, "addr", "add", "%s/%s" % (BARE_DHCP, subnet_mask), "dev", "ns-bench")
    sh("ip", "-n", NS, "link", "set", "ns-bench", "up")
    with open(os.path.join(d, "host"), "w") as f:
        for mac, ipaddr in hosts:
            f.write("%s,host-%s,%s\n" % (mac, ipaddr.replace(".", "-"), ipaddr))
    net = CIDR.split("/")[0]
    sh("ip", "netns", "exec", NS, "dnsmasq", "--no-hosts", "--no-resolv", "--port=0",
       "--conf-file=/dev/null", "--pid-file=%s/pid" % d, "--dhcp-hostsfile=%s/host" % d,
       "--dhcp-leasefile=%s/leases" % d, "--bind-interfaces", "--interface=ns-bench",
       "--except-interface=lo", "--dhcp-range=set:s,%s,static,255.255.255.0,86400s" % net,
       "--user=root", "--group=root")


def bare_net_down(d):
    try:
        os.kill(int(open(os.path.join(d, "pid")).read()), signal.SIGTERM)
    except (OSError, ValueError):
        pass
    sh("ip", "link", "del", VETH, check=False)
    sh("ip", "netns", "del", NS, check=False)
    sh("ip", "link", "del", BR, check=False)


class Nubo:
    def __init__(self, a):
        self.a = a
        self.servers = set()
        self.aio = start_aio(os.path.abspath(a.bin), "--driver", "libvirt",
                             "--set", "libvirt.virt_type=qemu",
                             "--set", "network.seed_private_cidr=" + CIDR,
                             "--set", "compute.sync_power_state_interval=600")
        c = self.aio.client()
        self.image = create_image(c, "bench-guest", "qcow2")
        put_image_file(self.aio, self.image, os.path.abspath(a.guest))
        _, _, fl = c.req("GET", "/compute/v2.1/flavors")
        self.flavor = [f["id"] for f in fl["flavors"] if f["name"] == "m1.nano"][0]

    def boot(self, name, user_data):
        import base64
        st, _, body = self.aio.client().req("POST", "/compute/v2.1/servers", {"server": {
            "name": name, "flavorRef": self.flavor, "imageRef": self.image,
            "config_drive": True, "networks": "auto",
            "user_data": base64.b64encode(user_data.encode()).decode()}}, MV)
        if st != 202:
            raise RuntimeError("POST /servers: %d %s" % (st, body))
        sid = body["server"]["id"]
        self.servers.add(sid)
        return sid

    def port(self, sid, timeout=120):
        """(port id, mac, ip) of the server's port once ACTIVE."""
        c = self.aio.client()
        end = time.time() + timeout
        while time.time() < end:
            _, _, body = c.req("GET", "/networking/v2.0/ports?device_id=" + sid)
            ps = body.get("ports", [])
            if ps and ps[0]["status"] == "ACTIVE":
                p = ps[0]
                return p["id"], p["mac_address"], p["fixed_ips"][0]["ip_address"]
            time.sleep(0.05)
        raise RuntimeError("port of %s not ACTIVE after %ds" % (sid, timeout))

    def console(self, sid):
        return os.path.join(self.aio.dir, "instances", sid, "console.log")

    def delete(self, sid, timeout=120):
        c = self.aio.client()
        c.req("DELETE", "/compute/v2.1/servers/%s" % sid)
        end = time.time() + timeout
        while time.time() < end:
            st, _, _ = c.req("GET", "/compute/v2.1/servers/%s" % sid)
            if st == 404 and not domain_exists(sid):
                self.servers.discard(sid)
                return
            time.sleep(0.1)

    def close(self):
        for sid in list(self.servers):
            self.delete(sid, 60)
            virsh("destroy", sid, check=False)
            virsh("undefine", sid, "--managed-save", check=False)
        state = self.aio.dir
        stop_aio(self.aio, keep=True)
        sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
        from netagent_cleanup import remove_agent_leftovers
        remove_agent_leftovers(state)
        shutil.rmtree(state, ignore_errors=True)


def nubo_round(n, a, i, keep=False):
    """B then A through nubo; returns (result, templates) where templates
    holds what the bare run needs (XML, config drive, base) when keep."""
    sb = n.boot("bg-b-%d" % i, B_DATA.format(port=PORT, wmib=a.wget_mib))
    _, mac_b, ip_b = n.port(sb)
    ud = A_DATA.format(b=ip_b, n=a.pings, blocks=a.mib * 16, port=PORT)
    sa = n.boot("bg-a-%d" % i, ud)
    pa, mac_a, ip_a = n.port(sa)
    pb = n.port(sb)[0]
    cw = ConsoleWatch(n.console(sa), time.perf_counter())
    try:
        r = measure("tap" + pa[:11], "tap" + pb[:11], cw, a)
    finally:
        cw.close()
    tpl = None
    if keep:
        tpl = {}
        for role, sid, mac, ipaddr in (("a", sa, mac_a, ip_a), ("b", sb, mac_b, ip_b)):
            d = os.path.join(n.aio.dir, "instances", sid)
            tpl[role] = {"xml": virsh("dumpxml", "--inactive", sid).stdout, "sid": sid,
                         "dir": d, "mac": mac, "ip": ipaddr,
                         "cfg": open(os.path.join(d, "disk.config"), "rb").read(),
                         "info": subprocess.run(["qemu-img", "info", "-U", "--output=json",
                                                 os.path.join(d, "disk")], check=True,
                                                capture_output=True, text=True).stdout}
    n.delete(sa)
    n.delete(sb)
    return r, tpl


def bare_round(bare, tpl, root, domains, a):
    import json
    made = {}
    for role in ("b", "a"):
        t = tpl[role]
        u = str(uuid.uuid4())
        name = "nubo-bench-bg-" + u[:8]
        d = os.path.join(root, u)
        os.mkdir(d)
        os.chmod(d, 0o755)
        domains[name] = d
        info = json.loads(t["info"])
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F",
                        info["backing-filename-format"], "-b", info["full-backing-filename"],
                        os.path.join(d, "disk"), str(info["virtual-size"])], check=True)
        with open(os.path.join(d, "disk.config"), "wb") as f:
            f.write(t["cfg"])
        x = t["xml"].replace("<name>%s</name>" % t["sid"], "<name>%s</name>" % name)
        x = x.replace(t["dir"], d).replace(t["sid"], u)
        x = re.sub(r"<source bridge='[^']*'/>", "<source bridge='%s'/>" % BR, x)
        tap = "ntbgtap" + role
        x = re.sub(r"<target dev='tap[^']*'/>", "<target dev='%s'/>" % tap, x)
        xp = os.path.join(d, "domain.xml")
        with open(xp, "w") as f:
            f.write(x)
        cw = ConsoleWatch(os.path.join(d, "console.log"), time.perf_counter())
        bare.create(xp)
        made[role] = (name, tap, cw)
    try:
        return measure(made["a"][1], made["b"][1], made["a"][2], a)
    finally:
        for name, _, cw in made.values():
            cw.close()
            bare.destroy(name)
            shutil.rmtree(domains.pop(name), ignore_errors=True)


def report(label, rs, a):
    rtt = [x for r in rs for x in r["rtt"]]
    tp = [r["tput"][0] for r in rs if r["tput"]]
    wg = [r["wget"][0] for r in rs if r["wget"]]
    print("%s, %d round(s), exit codes nc/wget %s:" % (label, len(rs),
                                                        " ".join(r["rc"] for r in rs)))
    print("  ping A -> B, host capture on A's tap: %s" % fmt_rtt(rtt))
    for r in rs:
        print("    guest's own ping summary: %s" % r["guest_ping"])
    for key, what in (("tput", "TCP A -> B, busybox nc, %d MiB, B's tap counter" % a.mib),
                      ("wget", "TCP B -> A, wget of %d MiB from httpd, A's tap counter"
                       % a.wget_mib)):
        print("  %s: %s" % (what, ", ".join("%.1f MB/s in %.2f s" % r[key] if r[key]
                                            else "not seen" for r in rs)))
    med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
    return med(rtt), med(tp), med(wg)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "nubo"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--mib", type=int, default=32)
    ap.add_argument("--pings", type=int, default=20)
    ap.add_argument("--wget-mib", type=int, default=16)
    ap.add_argument("--guest", default=os.path.join(os.environ.get(
        "NUBO_TEST_IMAGE_DIR", os.path.join(ROOT, "tests", "images", "out")), "guest.qcow2"))
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    print("guest-to-guest, same host: %s, %d cores, load %s, %s"
          % (os.path.abspath(a.bin), os.cpu_count(), load(), time.strftime("%Y-%m-%d %H:%M")))
    sys.stdout.flush()
    root = tempfile.mkdtemp(prefix="nubo-bench-gn-", dir=VARTMP)
    os.chmod(root, 0o755)
    n = bare = None
    domains, nres, bres, loads = {}, [], [], []
    net_up = False
    try:
        n = Nubo(a)
        bare = Bare()
        tpl = None
        for i in range(a.rounds):
            for which in (("nubo", "bare") if i % 2 == 0 else ("bare", "nubo")):
                loads.append("%s %s" % (which, load()))
                if which == "nubo":
                    r, t = nubo_round(n, a, i, keep=tpl is None)
                    nres.append(r)
                    if t:
                        tpl = t
                        bare_net_up(root, 24, [(t["a"]["mac"], t["a"]["ip"]),
                                               (t["b"]["mac"], t["b"]["ip"])])
                        net_up = True
                else:
                    bres.append(bare_round(bare, tpl, root, domains, a))
                print("  %s round %d done, load %s" % (which, i, load()))
                sys.stdout.flush()
        print("load average at the start of each run: %s" % "; ".join(loads))
        nv = report("nubo (tap -> brq bridge + security groups -> tap)", nres, a)
        bv = report("bare (virsh create on a hand-made bridge, no filtering)", bres, a)
        for k, what in enumerate(("median RTT", "median nc throughput",
                                  "median wget throughput")):
            if nv[k] and bv[k]:
                print("ratio nubo / bare: %s %.2f (nubo %.3g, bare %.3g)"
                      % (what, nv[k] / bv[k], nv[k], bv[k]))
    finally:
        for name in list(domains):
            if bare:
                bare.destroy(name)
            virsh("destroy", name, check=False)
        if bare:
            bare.close()
        if net_up:
            bare_net_down(root)
        if n:
            n.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

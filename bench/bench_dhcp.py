#!/usr/bin/python3
"""nubo data-plane benchmark: boot -> DHCP lease of a real TCG guest.

Usage: /usr/bin/python3 bench/bench_dhcp.py [--bin build/nubo] [--runs 3]
           [--guest tests/images/out/guest.qcow2]

  nubo  (--driver libvirt, the network agent): POST /servers (m1.tiny, the
        test guest, config drive, the seeded "private" network) -> ACTIVE,
        -> the guest's DHCP-LEASE console line (its lease from the agent's
        dnsmasq in qdhcp-<net> over brq<net>).
  bare  `virsh create` (or the libvirt binding) of nubo's own domain XML for
        that guest, renamed, on a fresh overlay, its <interface> moved to a
        hand-made bridge ntbenchbr0 with a dnsmasq in namespace ntbenchdhcp
        (the commands of shared/notes/network/RECIPE.md) -> DHCP-LEASE.
One unmeasured warm-up boot fills nubo's image cache and gives the XML;
then nubo and bare runs alternate so both see the same load. Console times
come from polling the console file every 10 ms. Everything made is removed.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
from bench_libvirt import (MV, ROOT, VARTMP, Bare, ConsoleWatch, create_image,  # noqa: E402
                           domain_exists, fmt_stats, put_image_file, stop_aio, virsh)


def start_aio(binary, *extra):
    """bench.Aio without its wait for a seeded image (this benchmark uploads
    its own)."""
    orig = bench.Client.req

    def req(self, method, path, *args, **kw):
        if path == "/image/v2/images?name=cirros":
            return 200, None, {"images": [{"id": None}]}
        return orig(self, method, path, *args, **kw)
    bench.Client.req = req
    try:
        return bench.Aio(binary, *extra, state_parent=VARTMP)
    finally:
        bench.Client.req = orig

BR, NS, VETH = "ntbenchbr0", "ntbenchdhcp", "ntbenchd0"
NET, DHCP_IP, GUEST_IP = "203.0.113.16/28", "203.0.113.18", "203.0.113.20"
MAC = "fa:16:3e:1b:00:20"


def sh(*argv, check=True):
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60)
    if check and p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(map(str, argv)), p.stderr.strip()))
    return p


def bare_net_up(d):
    """The hand-made bridge, namespace and dnsmasq (RECIPE.md §1)."""
    sh("ip", "link", "add", BR, "type", "bridge", "stp_state", "0", "forward_delay", "0")
    sh("ip", "link", "set", BR, "up")
    sh("ip", "netns", "add", NS)
    sh("ip", "link", "add", VETH, "type", "veth", "peer", "name", "ns-bench", "netns", NS)
    sh("ip", "link", "set", VETH, "master", BR, "up")
    sh("ip", "-n", NS, "link", "set", "lo", "up")
    sh("ip", "-n", NS, "addr", "add", DHCP_IP + "/28", "dev", "ns-bench")
    sh("ip", "-n", NS, "link", "set", "ns-bench", "up")
    with open(os.path.join(d, "host"), "w") as f:
        f.write("%s,host-%s,%s\n" % (MAC, GUEST_IP.replace(".", "-"), GUEST_IP))
    with open(os.path.join(d, "opts"), "w") as f:
        f.write("tag:s,option:router,%s\n" % DHCP_IP)
    sh("ip", "netns", "exec", NS, "dnsmasq", "--no-hosts", "--no-resolv", "--port=0",
       "--conf-file=/dev/null", "--pid-file=%s/pid" % d, "--dhcp-hostsfile=%s/host" % d,
       "--dhcp-optsfile=%s/opts" % d, "--dhcp-leasefile=%s/leases" % d, "--bind-interfaces",
       "--interface=ns-bench", "--except-interface=lo",
       "--dhcp-range=set:s,203.0.113.16,static,255.255.255.240,86400s", "--user=root",
       "--group=root")


def bare_net_down(d):
    try:
        os.kill(int(open(os.path.join(d, "pid")).read()), signal.SIGTERM)
    except (OSError, ValueError):
        pass
    sh("ip", "link", "del", VETH, check=False)
    sh("ip", "netns", "del", NS, check=False)
    sh("ip", "link", "del", BR, check=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "nubo"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--guest", default=os.path.join(ROOT, "tests", "images", "out", "guest.qcow2"))
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    print("nubo data-plane benchmark: %s, %d cores, load %.1f, %s"
          % (os.path.abspath(a.bin), os.cpu_count(), os.getloadavg()[0],
             time.strftime("%Y-%m-%d %H:%M")))
    sys.stdout.flush()
    bare_root = tempfile.mkdtemp(prefix="nubo-bench-dhcp-", dir=VARTMP)
    os.chmod(bare_root, 0o755)
    aio = bare = None
    servers, domains = set(), {}
    try:
        aio = start_aio(os.path.abspath(a.bin), "--driver", "libvirt",
                        "--set", "libvirt.virt_type=qemu")
        c = aio.client()
        image_id = create_image(c, "bench-guest", "qcow2")
        put_image_file(aio, image_id, os.path.abspath(a.guest))
        _, _, fl = c.req("GET", "/compute/v2.1/flavors")
        flavor = [f["id"] for f in fl["flavors"] if f["name"] == "m1.tiny"][0]
        bare = Bare()
        bare_net_up(bare_root)

        def nubo_run(name):
            t0 = time.perf_counter()
            st, _, body = aio.client().req("POST", "/compute/v2.1/servers", {"server": {
                "name": name, "flavorRef": flavor, "imageRef": image_id,
                "config_drive": True, "networks": "auto"}}, MV)
            if st != 202:
                raise RuntimeError("POST /servers: %d %s" % (st, body))
            sid = body["server"]["id"]
            servers.add(sid)
            cw = ConsoleWatch(os.path.join(aio.dir, "instances", sid, "console.log"), t0)
            try:
                lease = cw.wait_for(b"DHCP-LEASE ip=", a.timeout)
                text = cw.text
            finally:
                cw.close()
            return {"id": sid, "lease": lease, "text": text}

        def nubo_delete(sid):
            c = aio.client()  # a fresh connection: the last one idled through a boot
            c.req("DELETE", "/compute/v2.1/servers/%s" % sid)
            end = time.time() + 120
            while time.time() < end:
                st, _, _ = c.req("GET", "/compute/v2.1/servers/%s" % sid)
                if st == 404 and not domain_exists(sid):
                    servers.discard(sid)
                    return
                time.sleep(0.05)

        warm = nubo_run("bench-warmup")
        sid = warm["id"]
        inst_dir = os.path.join(aio.dir, "instances", sid)
        xml = virsh("dumpxml", "--inactive", sid).stdout
        info = json.loads(subprocess.run(["qemu-img", "info", "-U", "--output=json",
                                          os.path.join(inst_dir, "disk")], check=True,
                                         capture_output=True, text=True).stdout)
        base, fmt, vsize = (info["full-backing-filename"], info["backing-filename-format"],
                            info["virtual-size"])
        cfg = os.path.join(bare_root, "disk.config.template")
        shutil.copyfile(os.path.join(inst_dir, "disk.config"), cfg)
        nubo_delete(sid)

        def bare_run():
            u = str(uuid.uuid4())
            name = "nubo-bench-" + u[:8]
            d = os.path.join(bare_root, u)
            os.mkdir(d)
            os.chmod(d, 0o755)
            domains[name] = d
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", fmt, "-b", base,
                            os.path.join(d, "disk"), str(vsize)], check=True)
            shutil.copyfile(cfg, os.path.join(d, "disk.config"))
            x = xml.replace("<name>%s</name>" % sid, "<name>%s</name>" % name)
            x = x.replace(inst_dir, d).replace(sid, u)
            x = re.sub(r"<mac address='[^']*'/>", "<mac address='%s'/>" % MAC, x)
            x = re.sub(r"<source bridge='[^']*'/>", "<source bridge='%s'/>" % BR, x)
            x = re.sub(r"<target dev='tap[^']*'/>", "<target dev='ntbenchtap0'/>", x)
            xp = os.path.join(d, "domain.xml")
            with open(xp, "w") as f:
                f.write(x)
            cw = ConsoleWatch(os.path.join(d, "console.log"), 0)
            t0 = time.perf_counter()
            cw.t0 = t0
            try:
                bare.create(xp)
                lease = cw.wait_for(b"DHCP-LEASE ip=", a.timeout)
                text = cw.text
            finally:
                cw.close()
            bare.destroy(name)
            shutil.rmtree(d, ignore_errors=True)
            del domains[name]
            return {"lease": lease, "text": text}

        nubo_res, bare_res = [], []
        for i in range(a.runs):
            for which in (("nubo", "bare") if i % 2 == 0 else ("bare", "nubo")):
                if which == "nubo":
                    r = nubo_run("bench-%d" % i)
                    nubo_delete(r["id"])
                    nubo_res.append(r)
                else:
                    bare_res.append(bare_run())

        def up(rs, key):  # the guest's own uptime figures on the lease line
            out = []
            for r in rs:
                m = re.search(rb"DHCP-LEASE [^\n]* up=([0-9.]+)", r["text"])
                n = re.search(rb"NET-START [^\n]* up=([0-9.]+)", r["text"])
                if m and n:
                    out.append((float(m.group(1)) - float(n.group(1))) * 1000)
            return out

        ms = lambda rs: [r["lease"] * 1000 for r in rs]  # noqa: E731
        print("%-52s %s" % ("nubo: POST /servers -> DHCP-LEASE on the console", fmt_stats(ms(nubo_res))))
        print("%-52s %s" % ("bare: virsh create -> DHCP-LEASE on the console", fmt_stats(ms(bare_res))))
        print("%-52s %s" % ("nubo: guest NET-START -> lease (guest clock)", fmt_stats(up(nubo_res, 0))))
        print("%-52s %s" % ("bare: guest NET-START -> lease (guest clock)", fmt_stats(up(bare_res, 0))))
        print("difference of the medians (nubo - bare): %+.0f ms"
              % (statistics.median(ms(nubo_res)) - statistics.median(ms(bare_res))))
    finally:
        for name, d in list(domains.items()):
            if bare:
                bare.destroy(name)
            virsh("destroy", name, check=False)
        if bare:
            bare.close()
        bare_net_down(bare_root)
        if aio:
            for sid in list(servers):
                aio.client().req("DELETE", "/compute/v2.1/servers/%s" % sid)
                end = time.time() + 60
                while time.time() < end and domain_exists(sid):
                    time.sleep(0.2)
                virsh("destroy", sid, check=False)
                virsh("undefine", sid, "--managed-save", check=False)
            state = aio.dir
            stop_aio(aio, keep=True)
            sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
            from netagent_cleanup import remove_agent_leftovers
            remove_agent_leftovers(state)
            shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(bare_root, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""nubo data-plane benchmark: boot -> DHCP lease and boot -> metadata of a
real TCG guest.

Usage: /usr/bin/python3 bench/bench_dhcp.py [--bin build/nubo] [--runs 3]
           [--metadata both|config-drive|http] [--guest tests/images/out/guest.qcow2]

  nubo  (--driver libvirt, the network agent, the seeded network on
        10.164.4.0/24): POST /servers (m1.tiny, the test guest, the seeded
        "private" network) -> the guest's DHCP-LEASE console line (its lease
        from the agent's dnsmasq in qdhcp-<net> over brq<net>) and its
        METADATA source=... line. Mode config-drive: with a config drive
        (the guest reads its metadata from it); mode http: without one, the
        guest fetches http://169.254.169.254/openstack/latest/meta_data.json
        through the agent's metadata proxy in qdhcp-<net> (route by DHCP
        option 121) and the metadata API.
  bare  `virsh create` (or the libvirt binding) of nubo's own domain XML for
        that guest, renamed, on a fresh overlay, its <interface> moved to a
        hand-made bridge ntbenchbr0 with a dnsmasq in namespace ntbenchdhcp
        (the commands of shared/notes/network/RECIPE.md, 10.164.3.0/24) ->
        the same lines; the namespace also holds 169.254.169.254 with
        `python3 -m http.server` serving a static meta_data.json (option 121
        routes the guest to it): the floor of a metadata service, no proxy,
        no signing, no database.
One unmeasured warm-up boot per mode fills nubo's image cache and gives the
XML; then nubo and bare runs alternate so both see the same load; the load
average is printed with each run. Console times come from polling the
console file every 10 ms. Everything made is removed.
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
NUBO_CIDR = "10.164.4.0/24"
DHCP_IP, GUEST_IP, MASK = "10.164.3.2", "10.164.3.20", "255.255.255.0"
MD_IP = "169.254.169.254"
MAC = "fa:16:3e:1b:00:20"


def sh(*argv, check=True):
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60)
    if check and p.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(map(str, argv)), p.stderr.strip()))
    return p


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


def bare_net_up(d):
    """The hand-made bridge, namespace, dnsmasq (RECIPE.md §1) and a static
    metadata server on 169.254.169.254:80 in the namespace (§3 without the
    proxy and agent); option 121 routes the guest to it and on-link."""
    sh("ip", "link", "add", BR, "type", "bridge", "stp_state", "0", "forward_delay", "0")
    sh("ip", "link", "set", BR, "up")
    sh("ip", "netns", "add", NS)
    sh("ip", "link", "add", VETH, "type", "veth", "peer", "name", "ns-bench", "netns", NS)
    sh("ip", "link", "set", VETH, "master", BR, "up")
    sh("ip", "-n", NS, "link", "set", "lo", "up")
    sh("ip", "-n", NS, "addr", "add", DHCP_IP + "/24", "dev", "ns-bench")
    sh("ip", "-n", NS, "addr", "add", MD_IP + "/32", "dev", "ns-bench")
    sh("ip", "-n", NS, "link", "set", "ns-bench", "up")
    with open(os.path.join(d, "host"), "w") as f:
        f.write("%s,host-%s,%s\n" % (MAC, GUEST_IP.replace(".", "-"), GUEST_IP))
    with open(os.path.join(d, "opts"), "w") as f:
        f.write("tag:s,option:classless-static-route,%s/32,%s,10.164.3.0/24,0.0.0.0\n"
                % (MD_IP, DHCP_IP))
    sh("ip", "netns", "exec", NS, "dnsmasq", "--no-hosts", "--no-resolv", "--port=0",
       "--conf-file=/dev/null", "--pid-file=%s/pid" % d, "--dhcp-hostsfile=%s/host" % d,
       "--dhcp-optsfile=%s/opts" % d, "--dhcp-leasefile=%s/leases" % d, "--bind-interfaces",
       "--interface=ns-bench", "--except-interface=lo",
       "--dhcp-range=set:s,10.164.3.0,static,%s,86400s" % MASK, "--user=root",
       "--group=root")
    md = os.path.join(d, "md")
    os.makedirs(os.path.join(md, "openstack", "latest"))
    md_proc = subprocess.Popen(["ip", "netns", "exec", NS, sys.executable, "-m", "http.server",
                                "--bind", MD_IP, "--directory", md, "80"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.time() + 10
    while sh("ip", "netns", "exec", NS, "busybox", "wget", "-q", "-O", "/dev/null",
             "http://%s/" % MD_IP, check=False).returncode != 0:
        if time.time() > end:
            raise RuntimeError("the bare metadata server did not answer")
        time.sleep(0.1)
    return md_proc


def bare_metadata(d, u, name):
    with open(os.path.join(d, "md", "openstack", "latest", "meta_data.json"), "w") as f:
        json.dump({"uuid": u, "name": name, "hostname": name, "public_keys": {}}, f)


def bare_net_down(d, md_proc):
    if md_proc:
        md_proc.terminate()
        try:
            md_proc.wait(10)
        except subprocess.TimeoutExpired:
            md_proc.kill()
    try:
        os.kill(int(open(os.path.join(d, "pid")).read()), signal.SIGTERM)
    except (OSError, ValueError):
        pass
    sh("ip", "link", "del", VETH, check=False)
    sh("ip", "netns", "del", NS, check=False)
    sh("ip", "link", "del", BR, check=False)


# whole lines only: a poll may see a line half written
LEASE_RE = rb"DHCP-LEASE ip=[^\n]* up=([0-9.]+)\r?\n"
START_RE = rb"NET-START [^\n]* up=([0-9.]+)\r?\n"
MD_RE = rb"METADATA source=(\S+)[^\n]* up=([0-9.]+)\r?\n"
MD_ANY_RE = rb"METADATA (source|error)=[^\n]*\n"


def watch(path, t0, timeout):
    """Console times (s since t0) of the lease and the metadata lines, and
    the guest's own uptime figures on them."""
    cw = ConsoleWatch(path, t0)
    try:
        lease = cw.wait_for(lambda t: re.search(LEASE_RE, t), timeout)
        md = cw.wait_for(lambda t: re.search(MD_ANY_RE, t), timeout)
        text = cw.text
    finally:
        cw.close()
    m = re.search(MD_RE, text)
    if not m:
        raise RuntimeError("no metadata: %r" % re.search(rb"METADATA [^\n]*", text).group(0))
    guest = {k: float(re.search(r, text).group(1 if k != "md" else 2))
             for k, r in (("start", START_RE), ("lease", LEASE_RE), ("md", MD_RE))}
    return {"lease": lease, "md": md, "source": m.group(1).decode(), "guest": guest}


class Mode:
    """One metadata mode: nubo's runs, the template for the bare runs."""

    def __init__(self, name, aio, image_id, flavor, bare_root, a, servers):
        self.name, self.aio, self.image_id, self.flavor = name, aio, image_id, flavor
        self.cd = name == "config-drive"
        self.root, self.a, self.servers = bare_root, a, servers

    def nubo_run(self, name):
        t0 = time.perf_counter()
        st, _, body = self.aio.client().req("POST", "/compute/v2.1/servers", {"server": {
            "name": name, "flavorRef": self.flavor, "imageRef": self.image_id,
            "config_drive": self.cd, "networks": "auto"}}, MV)
        if st != 202:
            raise RuntimeError("POST /servers: %d %s" % (st, body))
        sid = body["server"]["id"]
        self.servers.add(sid)
        r = watch(os.path.join(self.aio.dir, "instances", sid, "console.log"), t0,
                  self.a.timeout)
        r["id"] = sid
        return r

    def nubo_delete(self, sid):
        c = self.aio.client()  # a fresh connection: the last one idled through a boot
        c.req("DELETE", "/compute/v2.1/servers/%s" % sid)
        end = time.time() + 120
        while time.time() < end:
            st, _, _ = c.req("GET", "/compute/v2.1/servers/%s" % sid)
            if st == 404 and not domain_exists(sid):
                self.servers.discard(sid)
                return
            time.sleep(0.05)

    def warm_up(self):
        warm = self.nubo_run("bench-warmup-" + self.name)
        sid = self.sid = warm["id"]
        self.inst_dir = os.path.join(self.aio.dir, "instances", sid)
        self.xml = virsh("dumpxml", "--inactive", sid).stdout
        info = json.loads(subprocess.run(["qemu-img", "info", "-U", "--output=json",
                                          os.path.join(self.inst_dir, "disk")], check=True,
                                         capture_output=True, text=True).stdout)
        self.base, self.fmt, self.vsize = (info["full-backing-filename"],
                                           info["backing-filename-format"], info["virtual-size"])
        self.cfg = None
        if self.cd:
            self.cfg = os.path.join(self.root, "disk.config.template")
            shutil.copyfile(os.path.join(self.inst_dir, "disk.config"), self.cfg)
        self.nubo_delete(sid)

    def bare_run(self, bare, domains):
        u = str(uuid.uuid4())
        name = "nubo-bench-" + u[:8]
        d = os.path.join(self.root, u)
        os.mkdir(d)
        os.chmod(d, 0o755)
        domains[name] = d
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", self.fmt, "-b",
                        self.base, os.path.join(d, "disk"), str(self.vsize)], check=True)
        if self.cfg:
            shutil.copyfile(self.cfg, os.path.join(d, "disk.config"))
        bare_metadata(self.root, u, name)
        x = self.xml.replace("<name>%s</name>" % self.sid, "<name>%s</name>" % name)
        x = x.replace(self.inst_dir, d).replace(self.sid, u)
        x = re.sub(r"<mac address='[^']*'/>", "<mac address='%s'/>" % MAC, x)
        x = re.sub(r"<source bridge='[^']*'/>", "<source bridge='%s'/>" % BR, x)
        x = re.sub(r"<target dev='tap[^']*'/>", "<target dev='ntbenchtap0'/>", x)
        xp = os.path.join(d, "domain.xml")
        with open(xp, "w") as f:
            f.write(x)
        t0 = time.perf_counter()
        try:
            bare.create(xp)
            return watch(os.path.join(d, "console.log"), t0, self.a.timeout)
        finally:
            bare.destroy(name)
            shutil.rmtree(d, ignore_errors=True)
            del domains[name]


def summary(label, rs):
    ms = lambda k: [r[k] * 1000 for r in rs]  # noqa: E731
    g = lambda a, b: [(r["guest"][b] - r["guest"][a]) * 1000 for r in rs]  # noqa: E731
    srcs = sorted(set(r["source"] for r in rs))
    print("  %s (metadata source %s):" % (label, ",".join(srcs)))
    print("    %-44s %s" % ("request -> DHCP-LEASE on the console", fmt_stats(ms("lease"))))
    print("    %-44s %s" % ("request -> METADATA on the console", fmt_stats(ms("md"))))
    print("    %-44s %s" % ("guest clock: uptime at DHCP-LEASE",
                            fmt_stats([r["guest"]["lease"] * 1000 for r in rs])))
    print("    %-44s %s" % ("guest clock: NET-START -> lease", fmt_stats(g("start", "lease"))))
    print("    %-44s %s" % ("guest clock: lease -> METADATA", fmt_stats(g("lease", "md"))))
    print("    %-44s %s" % ("load average (1 min) at each run's start",
                            ", ".join("%.1f" % r["load"] for r in rs)))
    return statistics.median(ms("lease")), statistics.median(ms("md"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "nubo"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--metadata", choices=("both", "config-drive", "http"), default="both")
    ap.add_argument("--guest", default=os.path.join(os.environ.get(
        "NUBO_TEST_IMAGE_DIR", os.path.join(ROOT, "tests", "images", "out")), "guest.qcow2"))
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    print("nubo data-plane benchmark: %s, %d cores, load %s, %s"
          % (os.path.abspath(a.bin), os.cpu_count(), load(), time.strftime("%Y-%m-%d %H:%M")))
    sys.stdout.flush()
    bare_root = tempfile.mkdtemp(prefix="nubo-bench-dhcp-", dir=VARTMP)
    os.chmod(bare_root, 0o755)
    aio = bare = md_proc = None
    servers, domains = set(), {}
    try:
        aio = start_aio(os.path.abspath(a.bin), "--driver", "libvirt",
                        "--set", "libvirt.virt_type=qemu",
                        "--set", "network.seed_private_cidr=" + NUBO_CIDR,
                        "--set", "compute.sync_power_state_interval=600")
        c = aio.client()
        image_id = create_image(c, "bench-guest", "qcow2")
        put_image_file(aio, image_id, os.path.abspath(a.guest))
        _, _, fl = c.req("GET", "/compute/v2.1/flavors")
        flavor = [f["id"] for f in fl["flavors"] if f["name"] == "m1.tiny"][0]
        bare = Bare()
        md_proc = bare_net_up(bare_root)
        names = ("config-drive", "http") if a.metadata == "both" else (a.metadata,)
        results = {}
        for mname in names:
            mode = Mode(mname, aio, image_id, flavor, bare_root, a, servers)
            mode.warm_up()
            nubo_res, bare_res = [], []
            for i in range(a.runs):
                for which in (("nubo", "bare") if i % 2 == 0 else ("bare", "nubo")):
                    la = os.getloadavg()[0]
                    if which == "nubo":
                        r = mode.nubo_run("bench-%s-%d" % (mname, i))
                        mode.nubo_delete(r["id"])
                        nubo_res.append(r)
                    else:
                        r = mode.bare_run(bare, domains)
                        bare_res.append(r)
                    r["load"] = la
                    print("  %s %s run %d: lease %.2f s, metadata %.2f s (%s), load %.2f"
                          % (mname, which, i, r["lease"], r["md"], r["source"], la))
                    sys.stdout.flush()
            results[mname] = (nubo_res, bare_res)
        print("results (load average now %s):" % load())
        for mname, (nr, br) in results.items():
            print("mode %s:" % mname)
            nl, nm = summary("nubo: POST /servers", nr)
            bl, bm = summary("bare: virsh create", br)
            print("    difference of the medians (nubo - bare): lease %+.0f ms, metadata %+.0f ms;"
                  " ratio lease %.2f, metadata %.2f" % (nl - bl, nm - bm, nl / bl, nm / bm))
    finally:
        for name, d in list(domains.items()):
            if bare:
                bare.destroy(name)
            virsh("destroy", name, check=False)
        if bare:
            bare.close()
        bare_net_down(bare_root, md_proc)
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

#!/usr/bin/python3
"""nubo step-2 benchmarks: real QEMU guests (TCG) under the system libvirtd,
and the image service's data path. Prints figures; asserts nothing about time.

Usage: /usr/bin/python3 bench/bench_libvirt.py [--bin build/nubo] [--only boot|image]
           [--runs 5] [--image-mib 1024] [--guest tests/images/out/guest.qcow2]

  boot   nubo (--driver libvirt): POST /servers (m1.tiny, the test guest image,
         config drive) -> ACTIVE, -> first console byte, -> GUEST-BOOTED line.
         bare libvirt: `virsh create` (or the libvirt Python binding when
         installed) of the same domain XML (nubo's, renamed, on a fresh qcow2
         overlay on the same _base file and a copy of its config drive)
         -> create returned, -> first console byte, -> GUEST-BOOTED.
         The control plane's overhead is the difference of the medians.
         One unmeasured warm-up boot fills nubo's image cache (its times are
         shown as "cold"); then nubo and bare runs alternate, so that both
         see the same machine load.
  image  PUT /image/v2/images/{id}/file of an --image-mib MiB random file
         (streamed), GET of it (streamed, discarded), and `cp` of the same
         file, in MiB/s.

Console times come from polling the console.log file every 10 ms. State lives
under /var/tmp (QEMU runs as libvirt-qemu and must reach the instance files);
everything created is removed at the end, also on failure.
"""
import argparse
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Aio  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
URI = "qemu:///system"
VIRSH = ["virsh", "-q", "-c", URI]
VARTMP = "/var/tmp"
MV = {"OpenStack-API-Version": "compute 2.37"}
POLL = 0.01  # console file and status polling interval, seconds
MIB = 1 << 20

try:
    import libvirt  # Debian's python3-libvirt
except ImportError:
    libvirt = None


# ------------------------------------------------------------------ helpers

def fmt_stats(xs, unit="ms", prec=0):
    """median (min-max) of xs."""
    f = "%%.%df" % prec
    return ("median " + f + " %s (min " + f + ", max " + f + ")") % (
        statistics.median(xs), unit, min(xs), max(xs))


def virsh(*args, check=True, timeout=120):
    p = subprocess.run(VIRSH + list(args), capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError("virsh %s: %s" % (" ".join(args), p.stderr.strip()))
    return p


def domain_exists(name_or_uuid):
    return virsh("domstate", name_or_uuid, check=False).returncode == 0


def start_aio(binary, *extra):
    """An Aio whose process is stopped again when its start fails half-way."""
    aio = Aio.__new__(Aio)
    try:
        aio.__init__(binary, *extra, state_parent=VARTMP)
    except BaseException:
        if getattr(aio, "proc", None):
            stop_aio(aio)
        raise
    return aio


def stop_aio(aio, keep=False):
    try:
        aio.proc.terminate()
        aio.proc.wait(60)
    except subprocess.TimeoutExpired:
        aio.proc.kill()
        aio.proc.wait()
    if keep:
        print("  (state dir kept: %s)" % aio.dir)
    else:
        shutil.rmtree(aio.dir, ignore_errors=True)


def log_tail(aio, n=30):
    out = []
    logdir = os.path.join(aio.dir, "log")
    for f in sorted(os.listdir(logdir)) if os.path.isdir(logdir) else []:
        with open(os.path.join(logdir, f), errors="replace") as fh:
            lines = fh.readlines()[-n:]
        out.append("---- %s\n%s" % (f, "".join(lines)))
    return "\n".join(out)


def put_image_file(aio, image_id, path, blocksize=MIB):
    """Streams path as the image's data: http.client reads the file object
    blocksize bytes at a time. Returns seconds from request to response."""
    size = os.path.getsize(path)
    conn = http.client.HTTPConnection("127.0.0.1", aio.port, timeout=600, blocksize=blocksize)
    try:
        with open(path, "rb") as f:
            t0 = time.perf_counter()
            conn.request("PUT", "/image/v2/images/%s/file" % image_id, body=f, headers={
                "Content-Type": "application/octet-stream", "Content-Length": str(size),
                "X-Auth-Token": aio.token})
            r = conn.getresponse()
            data = r.read()
            dt = time.perf_counter() - t0
    finally:
        conn.close()
    if r.status != 204:
        raise RuntimeError("PUT image file: %d %s" % (r.status, data[:300]))
    return dt


def get_image_file(aio, image_id, blocksize=MIB):
    """Streams the image's data into a reused buffer. Returns (seconds, bytes, Content-MD5)."""
    conn = http.client.HTTPConnection("127.0.0.1", aio.port, timeout=600)
    buf = memoryview(bytearray(blocksize))
    n = 0
    try:
        t0 = time.perf_counter()
        conn.request("GET", "/image/v2/images/%s/file" % image_id,
                     headers={"X-Auth-Token": aio.token})
        r = conn.getresponse()
        if r.status != 200:
            raise RuntimeError("GET image file: %d %s" % (r.status, r.read()[:300]))
        while True:
            k = r.readinto(buf)
            if not k:
                break
            n += k
        dt = time.perf_counter() - t0
        return dt, n, r.getheader("Content-MD5")
    finally:
        conn.close()


def hash_seconds(path):
    """Seconds to md5 and sha512 the file block by block in one thread, as
    nubo's upload does: the CPU ceiling of its upload on this machine."""
    md5, sha = hashlib.md5(), hashlib.sha512()
    buf = memoryview(bytearray(MIB))
    with open(path, "rb", buffering=0) as f:
        t0 = time.perf_counter()
        while True:
            k = f.readinto(buf)
            if not k:
                break
            md5.update(buf[:k])
            sha.update(buf[:k])
        return time.perf_counter() - t0


def create_image(c, name, disk_format):
    st, _, body = c.req("POST", "/image/v2/images", {
        "name": name, "disk_format": disk_format, "container_format": "bare"})
    if st != 201:
        raise RuntimeError("POST /images: %d %s" % (st, body))
    return body["id"]


def delete_image(c, image_id):
    st, _, body = c.req("DELETE", "/image/v2/images/%s" % image_id)
    if st not in (204, 404):
        raise RuntimeError("DELETE image %s: %d %s" % (image_id, st, body))


class ConsoleWatch:
    """Polls a console log file every POLL s; times (since t0) of its first
    byte and of the first line matching each of the patterns."""

    def __init__(self, path, t0):
        self.path, self.t0 = path, t0
        self.first_byte = None
        self.text = b""
        self.f = None

    def poll(self):
        if self.f is None:
            try:
                self.f = open(self.path, "rb")
            except FileNotFoundError:
                return
        data = self.f.read()
        if data:
            now = time.perf_counter()
            if self.first_byte is None:
                self.first_byte = now - self.t0
            self.text += data
            return now
        return None

    def wait_for(self, pattern, timeout, also=None):
        """Polls until pattern (bytes) is in the text, or pattern(text) is
        true when it is a callable; returns seconds since t0 of the poll that
        saw it. also(): called every round (may raise)."""
        seen = pattern if callable(pattern) else (lambda t: pattern in t)
        end = time.perf_counter() + timeout
        while True:
            now = self.poll()
            if now is not None and seen(self.text):
                return now - self.t0
            if also:
                also()
            if time.perf_counter() > end:
                raise RuntimeError("%r not on the console %s after %ds; console: %r"
                                   % (pattern, self.path, timeout, self.text[-500:]))
            time.sleep(POLL)

    def close(self):
        if self.f:
            self.f.close()


# ------------------------------------------------------------- bare libvirt

class Bare:
    """Starts transient domains through the libvirt binding if installed,
    else through virsh."""

    def __init__(self):
        self.conn = libvirt.open(URI) if libvirt else None
        self.how = ("libvirt Python binding (virConnect.createXML)" if self.conn
                    else "virsh create (subprocess; python3-libvirt not installed)")

    def create(self, xml_path):
        if self.conn:
            with open(xml_path) as f:
                self.conn.createXML(f.read(), 0)
        else:
            virsh("create", xml_path)

    def destroy(self, name):
        if self.conn:
            try:
                self.conn.lookupByName(name).destroy()
            except libvirt.libvirtError:
                pass
        else:
            virsh("destroy", name, check=False)

    def close(self):
        if self.conn:
            self.conn.close()


def virsh_noop_ms(n=5):
    """What a `virsh` process costs by itself (start, connect, one call)."""
    xs = []
    for _ in range(n):
        t0 = time.perf_counter()
        virsh("uri")
        xs.append((time.perf_counter() - t0) * 1000)
    return statistics.median(xs)


# ------------------------------------------------------------------- boot

def bench_boot(a):
    if not os.path.exists(a.guest):
        sys.exit("no guest image %s (bash tests/images/build.sh)" % a.guest)
    if subprocess.run(VIRSH + ["uri"], capture_output=True).returncode != 0:
        subprocess.run([os.path.join(ROOT, "scripts", "libvirt-up.sh")], check=False)
        virsh("uri")
    ver = virsh("version").stdout
    hv = re.search(r"hypervisor: (.*)", ver, re.I)
    aio = bare = None
    bare_root = tempfile.mkdtemp(prefix="nubo-bench-bare-", dir=VARTMP)
    os.chmod(bare_root, 0o755)
    servers = set()   # nubo servers not yet seen gone
    domains = {}      # bare domain name -> dir
    failed = True
    try:
        aio = start_aio(a.bin, "--driver", "libvirt")
        c = aio.client()
        image_id = create_image(c, "bench-guest", "qcow2")
        put_image_file(aio, image_id, a.guest)
        _, _, fl = c.req("GET", "/compute/v2.1/flavors")
        flavor = [f["id"] for f in fl["flavors"] if f["name"] == "m1.tiny"][0]
        bare = Bare()
        print("boot: QEMU guest %s, flavor m1.tiny, config drive; hypervisor %s; bare runs via %s"
              % (os.path.relpath(a.guest, ROOT), hv.group(1).strip() if hv else "?", bare.how))
        sys.stdout.flush()

        def nubo_run(name):
            t0 = time.perf_counter()
            st, _, body = c.req("POST", "/compute/v2.1/servers", {"server": {
                "name": name, "flavorRef": flavor, "imageRef": image_id,
                "config_drive": True, "networks": "none"}}, MV)
            if st != 202:
                raise RuntimeError("POST /servers: %d %s" % (st, body))
            sid = body["server"]["id"]
            servers.add(sid)
            res = {"id": sid}

            def status_poller():  # own connection: http.client is not thread-safe
                cc = aio.client()
                end = time.time() + a.timeout
                while time.time() < end:
                    st, _, b = cc.req("GET", "/compute/v2.1/servers/%s" % sid)
                    if st != 200:
                        res["status"] = "GET %d" % st
                        return
                    s = b["server"]["status"]
                    if s in ("ACTIVE", "ERROR"):
                        res["active"] = time.perf_counter() - t0
                        res["status"] = s
                        return
                    time.sleep(POLL)
                res["status"] = "TIMEOUT"
            th = threading.Thread(target=status_poller, daemon=True)
            th.start()

            def check():
                if res.get("status", "ACTIVE") != "ACTIVE":
                    raise RuntimeError("server %s went %s\n%s" % (sid, res["status"], log_tail(aio)))
            cw = ConsoleWatch(os.path.join(aio.dir, "instances", sid, "console.log"), t0)
            try:
                res["booted"] = cw.wait_for(b"GUEST-BOOTED", a.timeout, check)
                res["first"] = cw.first_byte
            finally:
                cw.close()
            th.join(a.timeout)
            check()
            return res

        def nubo_delete(sid):
            st, _, body = c.req("DELETE", "/compute/v2.1/servers/%s" % sid)
            if st not in (204, 404):
                raise RuntimeError("DELETE server %s: %d %s" % (sid, st, body))
            end = time.time() + 120
            while time.time() < end:
                st, _, _ = c.req("GET", "/compute/v2.1/servers/%s" % sid)
                if st == 404 and not domain_exists(sid):
                    servers.discard(sid)
                    return
                time.sleep(0.05)
            raise RuntimeError("server %s not gone 120 s after DELETE" % sid)

        # warm-up: fills the image cache; its domain XML, disk and config
        # drive are the template of the bare runs
        cold = nubo_run("bench-warmup")
        sid = cold["id"]
        inst_dir = os.path.join(aio.dir, "instances", sid)
        xml = virsh("dumpxml", "--inactive", sid).stdout
        info = subprocess.run(["qemu-img", "info", "-U", "--output=json",
                               os.path.join(inst_dir, "disk")],
                              check=True, capture_output=True, text=True).stdout
        info = json.loads(info)
        base, base_fmt = info["full-backing-filename"], info["backing-filename-format"]
        vsize = info["virtual-size"]
        cfg_tmpl = os.path.join(bare_root, "disk.config.template")
        shutil.copyfile(os.path.join(inst_dir, "disk.config"), cfg_tmpl)
        dom_type = re.search(r"<domain type='(\w+)'", xml).group(1)
        nubo_delete(sid)

        def bare_run():
            u = str(uuid.uuid4())
            name = "nubo-bench-" + u[:8]
            d = os.path.join(bare_root, u)
            os.mkdir(d)
            os.chmod(d, 0o755)
            domains[name] = d
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", base_fmt, "-b", base,
                            os.path.join(d, "disk"), str(vsize)], check=True)
            shutil.copyfile(cfg_tmpl, os.path.join(d, "disk.config"))
            x = xml.replace("<name>%s</name>" % sid, "<name>%s</name>" % name)
            x = x.replace(inst_dir, d).replace(sid, u)
            if sid in x:
                raise RuntimeError("domain XML still refers to nubo's guest")
            xp = os.path.join(d, "domain.xml")
            with open(xp, "w") as f:
                f.write(x)
            cw = ConsoleWatch(os.path.join(d, "console.log"), 0)
            t0 = time.perf_counter()
            cw.t0 = t0
            try:
                bare.create(xp)
                res = {"created": time.perf_counter() - t0}
                res["booted"] = cw.wait_for(b"GUEST-BOOTED", a.timeout)
                res["first"] = cw.first_byte
            finally:
                cw.close()
            bare.destroy(name)
            shutil.rmtree(d, ignore_errors=True)
            del domains[name]
            return res

        nubo_res, bare_res = [], []
        for i in range(a.runs):
            order = ("nubo", "bare") if i % 2 == 0 else ("bare", "nubo")
            for which in order:
                if which == "nubo":
                    r = nubo_run("bench-%d" % i)
                    nubo_delete(r["id"])
                    nubo_res.append(r)
                else:
                    bare_res.append(bare_run())
        ms = lambda rs, k: [r[k] * 1000 for r in rs]  # noqa: E731
        n = a.runs
        print("boot: domain type %s; console polled every %d ms; %d runs each, nubo and bare alternating"
              % (dom_type, POLL * 1000, n))
        print("boot nubo (cold image cache, 1 run): POST->ACTIVE %.0f ms, ->first console byte %.0f ms, "
              "->GUEST-BOOTED %.0f ms" % (cold["active"] * 1000, cold["first"] * 1000, cold["booted"] * 1000))
        print("%-47s %s" % ("boot nubo: POST->ACTIVE", fmt_stats(ms(nubo_res, "active"))))
        print("%-47s %s" % ("boot nubo: POST->first console byte", fmt_stats(ms(nubo_res, "first"))))
        print("%-47s %s" % ("boot nubo: POST->GUEST-BOOTED", fmt_stats(ms(nubo_res, "booted"))))
        print("%-47s %s" % ("boot bare: create->returned", fmt_stats(ms(bare_res, "created"))))
        print("%-47s %s" % ("boot bare: create->first console byte", fmt_stats(ms(bare_res, "first"))))
        print("%-47s %s" % ("boot bare: create->GUEST-BOOTED", fmt_stats(ms(bare_res, "booted"))))
        if not bare.conn:
            print("boot bare: (a virsh process by itself, `virsh uri`, costs median %.0f ms; "
                  "it is part of the bare times)" % virsh_noop_ms())
        for k, label in (("first", "first console byte"), ("booted", "GUEST-BOOTED")):
            ov = statistics.median(ms(nubo_res, k)) - statistics.median(ms(bare_res, k))
            print("boot overhead of the control plane to %s: %+.0f ms "
                  "(median nubo POST->%s minus median bare create->%s; target < 100 ms)"
                  % (label, ov, label, label))
        delete_image(c, image_id)
        failed = False
    finally:
        for name, d in list(domains.items()):
            if bare:
                bare.destroy(name)
            virsh("destroy", name, check=False)
            shutil.rmtree(d, ignore_errors=True)
        if bare:
            bare.close()
        if aio:
            for sid in list(servers):
                try:
                    aio.client().req("DELETE", "/compute/v2.1/servers/%s" % sid)
                    end = time.time() + 60
                    while time.time() < end and domain_exists(sid):
                        time.sleep(0.2)
                except Exception:
                    pass
                virsh("destroy", sid, check=False)
                virsh("undefine", sid, "--managed-save", check=False)
            if isinstance(sys.exc_info()[1], Exception):  # not on ^C or SIGTERM
                print(log_tail(aio), file=sys.stderr)
            stop_aio(aio, keep=failed and a.keep)
        shutil.rmtree(bare_root, ignore_errors=True)


# ------------------------------------------------------------------ image

def bench_image(a):
    size = a.image_mib * MIB
    fd, src = tempfile.mkstemp(prefix="nubo-bench-data-", suffix=".bin", dir=VARTMP)
    dst = src + ".cp"
    aio = None
    image_id = None
    failed = True
    try:
        md5 = hashlib.md5()
        with os.fdopen(fd, "wb") as f:
            for _ in range(a.image_mib):
                b = os.urandom(MIB)
                md5.update(b)
                f.write(b)
        md5 = md5.hexdigest()
        aio = start_aio(a.bin)
        c = aio.client()
        up, down, cp, cps, hs = [], [], [], [], []
        for i in range(a.runs):
            image_id = create_image(c, "bench-data-%d" % i, "raw")
            up.append(put_image_file(aio, image_id, src))
            _, _, img = c.req("GET", "/image/v2/images/%s" % image_id)
            if img["status"] != "active" or img["size"] != size or img["checksum"] != md5:
                raise RuntimeError("uploaded image is wrong: %s" % img)
            dt, n, hdr_md5 = get_image_file(aio, image_id)
            if n != size or (hdr_md5 and hdr_md5 != md5):
                raise RuntimeError("download: %d bytes, Content-MD5 %s (want %d, %s)"
                                   % (n, hdr_md5, size, md5))
            down.append(dt)
            delete_image(c, image_id)
            image_id = None
            # cp after the upload: both read the source from the page cache
            t0 = time.perf_counter()
            subprocess.run(["cp", src, dst], check=True)
            t1 = time.perf_counter()
            subprocess.run(["sync", dst], check=True)  # fsync(dst), as nubo does before going active
            t2 = time.perf_counter()
            cp.append(t1 - t0)
            cps.append(t2 - t0)
            os.unlink(dst)
            hs.append(hash_seconds(src))
        rate = lambda ts: [a.image_mib / t for t in ts]  # noqa: E731
        print("image: %d MiB of random data in %s, %d runs; the source file is in the page cache "
              "for all (written just before; cp runs after the upload)" % (a.image_mib, VARTMP, a.runs))
        print("%-47s %s" % ("image: PUT /file (streamed in 1 MiB blocks)", fmt_stats(rate(up), "MiB/s")))
        print("%-47s %s" % ("image: GET /file (streamed, discarded)", fmt_stats(rate(down), "MiB/s")))
        print("%-47s %s" % ("image: cp", fmt_stats(rate(cp), "MiB/s")))
        print("%-47s %s" % ("image: cp + fsync of the copy", fmt_stats(rate(cps), "MiB/s")))
        print("%-47s %s" % ("image: md5 then sha512 per block, one thread", fmt_stats(rate(hs), "MiB/s")))
        mu, md = statistics.median(rate(up)), statistics.median(rate(down))
        mc, mcs = statistics.median(rate(cp)), statistics.median(rate(cps))
        print("image: ratio nubo/cp (medians): upload %.2f, download %.2f; upload/(cp+fsync) %.2f "
              "(nubo's upload also computes md5 and sha512, as the line above does with OpenSSL "
              "through hashlib, and fsyncs)" % (mu / mc, md / mc, mu / mcs))
        failed = False
    finally:
        if aio:
            if image_id:
                try:
                    delete_image(aio.client(), image_id)
                except Exception:
                    pass
            if isinstance(sys.exc_info()[1], Exception):  # not on ^C or SIGTERM
                print(log_tail(aio), file=sys.stderr)
            stop_aio(aio, keep=failed and a.keep)
        for p in (src, dst):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "nubo"))
    ap.add_argument("--only", choices=("boot", "image"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--image-mib", type=int, default=1024, help="size of the image-service test file")
    ap.add_argument("--guest", default=os.path.join(ROOT, "tests", "images", "out", "guest.qcow2"))
    ap.add_argument("--timeout", type=int, default=300, help="seconds to wait for each boot")
    ap.add_argument("--keep", action="store_true", help="keep the aio state dir on failure")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    a.guest = os.path.abspath(a.guest)
    # SIGTERM/SIGHUP: unwind through the finally blocks (clean-up)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    print("nubo step-2 benchmarks: %s, %d cores, load %.1f, %s"
          % (a.bin, os.cpu_count(), os.getloadavg()[0], time.strftime("%Y-%m-%d %H:%M")))
    sys.stdout.flush()
    for name, fn in (("boot", bench_boot), ("image", bench_image)):
        if not a.only or a.only == name:
            fn(a)
            sys.stdout.flush()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""nubo step-3 benchmarks: the volume data paths with real QEMU guests (TCG)
under the system libvirtd, each against a bare baseline on the same machine.
Prints figures and ratios; asserts nothing about time.

Usage: /usr/bin/python3 bench/bench_volumes.py [--bin build/nubo]
           [--only boot|create|attach|format] [--runs 5]
           [--guest tests/images/out/guest.qcow2] [--max-load 3 --load-wait 2400]

  boot    POST /servers with block_device_mapping_v2 (source volume, boot
          index 0; the volume made from the guest image through the volume
          API, once per run, not timed) -> ACTIVE, -> first console byte,
          -> GUEST-BOOTED; against the image-backed boot of the same guest
          (imageRef, as bench_libvirt.py). Both m1.tiny with a config drive;
          the runs alternate. The difference of the medians is what the
          volume path costs.
  create  POST /volume/v3/{project}/volumes {size 1, imageRef} -> available,
          against `qemu-img convert -f qcow2 -O raw` of the same image file
          to a new file on the same file system (and that plus the
          `qemu-img resize` to 1 GiB the backend also does).
  attach  POST os-volume_attachments of a blank 1 GiB volume to a running
          guest -> volume in-use, -> the guest's console prints a
          BLOCK-DEVICES line with the new device; DELETE of it -> available,
          -> BLOCK-DEVICES without it. Bare: `virsh attach-device --live` /
          `detach-device --live` of the disk XML nubo gave libvirt (from
          `virsh dumpxml` during a warm-up attach, target renamed) on the same
          guest -> command returned, -> the same console lines.
  format  The disk-format check before a domain start: os-start of a stopped
          volume-backed server -> ACTIVE (and first console byte,
          GUEST-BOOTED), with [compute] reconcile_disk_format true and false
          (the all-in-one restarted on the same state dir, with --set for
          false, before each measured start, then one stop/start not
          counted; the settings alternate). And the check itself: nubo's format inspector
          (nb_format_inspect_path) and the agent's whole per-volume check
          (nb_disk_check, path + stat + inspect, on the server's real
          block_device_mapping row), called in-process by a small C program
          linked against the libnubo.a next to --bin, on the 1 GiB raw volume
          file and a qcow2 copy of it; `qemu-img info` of the same files as
          the external comparison.

Console times come from polling the console.log file every 10 ms (the
guest itself looks at /sys/block every 100 ms, its heartbeat). State lives
under /var/tmp; everything created (servers, volumes, domains, files) is
removed at the end, also on failure.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_libvirt as bl  # noqa: E402
from bench_libvirt import (MV, POLL, VARTMP, ConsoleWatch, create_image, delete_image,  # noqa: E402
                           domain_exists, fmt_stats, log_tail, put_image_file, start_aio,
                           stop_aio, virsh, virsh_noop_ms)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
GIB = 1 << 30
AIO_ARGS = ("--driver", "libvirt", "--set", "DEFAULT.shutdown_timeout=20")


def ms(rs, k):
    return [r[k] * 1000 for r in rs]


def med(rs, k):
    return statistics.median(ms(rs, k))


def line(label, xs, unit="ms", prec=0):
    print("%-58s %s" % (label, fmt_stats(xs, unit, prec)))


def block_lines(text):
    """The device sets of the BLOCK-DEVICES lines in text, in order."""
    return [frozenset(m.split()) for m in
            re.findall(rb"BLOCK-DEVICES([^\r\n]*)\r?\n", text)]


def fresh_watch(path):
    """A ConsoleWatch that has read everything already in path: its text,
    first_byte and t0 then concern only what comes after."""
    cw = ConsoleWatch(path, 0)
    cw.poll()
    cw.text, cw.first_byte = b"", None
    return cw


def wait_console(cw, pred, timeout, what, also=None):
    """Polls cw until pred(cw.text); seconds since cw.t0 of that poll."""
    try:
        return cw.wait_for(pred, timeout, also)
    except RuntimeError as e:
        raise RuntimeError("%s: %s" % (what, e)) from None


class Poller:
    """Polls fn(client) on its own connection (http.client is not
    thread-safe) in a thread until it returns True; .t is seconds from t0 to
    that poll, .err what went wrong."""

    def __init__(self, cloud, t0, fn, timeout):
        self.t, self.err = None, None

        def run():
            c = cloud.aio.client()
            end = time.time() + timeout
            try:
                while time.time() < end:
                    if fn(c):
                        self.t = time.perf_counter() - t0
                        return
                    time.sleep(POLL)
                self.err = "timeout after %ds" % timeout
            except Exception as e:  # reported by check()
                self.err = str(e)
        self.th = threading.Thread(target=run, daemon=True)
        self.th.start()

    def check(self):
        if self.err:
            raise RuntimeError(self.err)

    def join(self, timeout):
        self.th.join(timeout)
        self.check()
        if self.t is None:
            raise RuntimeError("poller still running")
        return self.t


# ------------------------------------------------------------------ cloud

class Cloud:
    """One all-in-one with the libvirt driver, the guest image uploaded, and
    what the benchmarks create, for the clean-up."""

    def __init__(self, a):
        self.a = a
        self.extra = ()
        self.servers, self.volumes = set(), set()
        self.image = None
        self.aio = start_aio(a.bin, *AIO_ARGS)
        try:
            self._login()
            self.image = create_image(self.c, "bench-guest", "qcow2")
            put_image_file(self.aio, self.image, a.guest)
            _, _, fl = self.c.req("GET", "/compute/v2.1/flavors")
            self.flavor = [f["id"] for f in fl["flavors"] if f["name"] == "m1.tiny"][0]
        except BaseException:
            if isinstance(sys.exc_info()[1], Exception):
                print(log_tail(self.aio), file=sys.stderr)
            stop_aio(self.aio, keep=a.keep)
            raise

    def _login(self):
        self.c = self.aio.client()
        st, _, body = self.c.req("GET", "/identity/v3/auth/tokens",
                                 headers={"X-Subject-Token": self.aio.token})
        if st != 200:
            raise RuntimeError("GET auth/tokens: %d %s" % (st, body))
        self.project = body["token"]["project"]["id"]

    def restart(self, *extra):
        """Restarts the all-in-one on the same state dir with extra options."""
        state = self.aio.dir
        try:
            self.aio.proc.terminate()
            self.aio.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.aio.proc.kill()
            self.aio.proc.wait()
        with mock.patch("tempfile.mkdtemp", return_value=state):
            self.aio = start_aio(self.a.bin, *(AIO_ARGS + tuple(extra)))
        self.extra = tuple(extra)
        self._login()

    # volumes
    def vol(self, method, path, body=None, c=None):
        return (c or self.c).req(method, "/volume/v3/%s%s" % (self.project, path), body)[::2]

    def volume_status(self, vid, c=None):
        st, body = self.vol("GET", "/volumes/%s" % vid, c=c)
        if st != 200:
            raise RuntimeError("GET volume %s: %d %s" % (vid, st, body))
        return body["volume"]["status"]

    def create_volume(self, name, size=1, image=None):
        """POST /volumes; (id, seconds to available)."""
        body = {"size": size, "name": name}
        if image:
            body["imageRef"] = image
        t0 = time.perf_counter()
        st, b = self.vol("POST", "/volumes", {"volume": body})
        if st != 202:
            raise RuntimeError("POST /volumes: %d %s" % (st, b))
        vid = b["volume"]["id"]
        self.volumes.add(vid)
        end = time.time() + self.a.timeout
        while time.time() < end:
            s = self.volume_status(vid)
            if s == "available":
                return vid, time.perf_counter() - t0
            if s == "error":
                raise RuntimeError("volume %s went error\n%s" % (vid, log_tail(self.aio)))
            time.sleep(POLL)
        raise RuntimeError("volume %s not available after %ds" % (vid, self.a.timeout))

    def delete_volume(self, vid):
        st, b = self.vol("DELETE", "/volumes/%s" % vid)
        if st not in (202, 404):
            raise RuntimeError("DELETE volume %s: %d %s" % (vid, st, b))
        end = time.time() + 120
        while time.time() < end:
            if self.vol("GET", "/volumes/%s" % vid)[0] == 404:
                self.volumes.discard(vid)
                return
            time.sleep(0.05)
        raise RuntimeError("volume %s not gone 120 s after DELETE" % vid)

    def wait_volume(self, vid, want, timeout=120):
        end = time.time() + timeout
        s = None
        while time.time() < end:
            s = self.volume_status(vid)
            if s == want:
                return
            time.sleep(0.05)
        raise RuntimeError("volume %s is %s, not %s, after %ds" % (vid, s, want, timeout))

    # servers
    def server(self, sid, c=None):
        st, _, b = (c or self.c).req("GET", "/compute/v2.1/servers/%s" % sid)
        if st != 200:
            raise RuntimeError("GET server %s: %d %s" % (sid, st, b))
        return b["server"]

    def console_path(self, sid):
        return os.path.join(self.aio.dir, "instances", sid, "console.log")

    def until_active(self, sid):
        """fn for a Poller: True once the server is ACTIVE; raises when it
        went ERROR or an action ended without it becoming ACTIVE."""
        def fn(c):
            s = self.server(sid, c)
            if s["status"] == "ACTIVE" and not s.get("OS-EXT-STS:task_state"):
                return True
            if s["status"] == "ERROR" or (s["status"] == "SHUTOFF"
                                          and not s.get("OS-EXT-STS:task_state")
                                          and s.get("fault")):
                raise RuntimeError("server %s went %s: %s\n%s"
                                   % (sid, s["status"], s.get("fault"), log_tail(self.aio)))
            return False
        return fn

    def boot(self, name, volume=None):
        """Boots the guest from the image, or from volume (boot index 0);
        times of ACTIVE, first console byte, GUEST-BOOTED since the POST."""
        body = {"name": name, "flavorRef": self.flavor, "config_drive": True,
                "networks": "none"}
        if volume:
            body["imageRef"] = ""
            body["block_device_mapping_v2"] = [{
                "source_type": "volume", "destination_type": "volume", "uuid": volume,
                "boot_index": 0, "delete_on_termination": False}]
        else:
            body["imageRef"] = self.image
        t0 = time.perf_counter()
        st, _, b = self.c.req("POST", "/compute/v2.1/servers", {"server": body}, MV)
        if st != 202:
            raise RuntimeError("POST /servers: %d %s" % (st, b))
        sid = b["server"]["id"]
        self.servers.add(sid)
        p = Poller(self, t0, self.until_active(sid), self.a.timeout)
        cw = ConsoleWatch(self.console_path(sid), t0)
        try:
            booted = cw.wait_for(b"GUEST-BOOTED", self.a.timeout, p.check)
        finally:
            cw.close()
        return {"id": sid, "active": p.join(self.a.timeout), "first": cw.first_byte,
                "booted": booted}

    def action(self, sid, name):
        st, _, b = self.c.req("POST", "/compute/v2.1/servers/%s/action" % sid, {name: None})
        if st != 202:
            raise RuntimeError("%s %s: %d %s" % (name, sid, st, b))

    def stop_server(self, sid):
        self.action(sid, "os-stop")
        end = time.time() + 120
        while time.time() < end:
            s = self.server(sid)
            if s["status"] == "SHUTOFF" and not s.get("OS-EXT-STS:task_state"):
                return
            time.sleep(0.05)
        raise RuntimeError("server %s not SHUTOFF 120 s after os-stop" % sid)

    def start_server(self, sid):
        """os-start; times of ACTIVE, first console byte and GUEST-BOOTED of
        the new boot since the POST."""
        cw = fresh_watch(self.console_path(sid))
        t0 = time.perf_counter()
        cw.t0 = t0
        try:
            self.action(sid, "os-start")
            p = Poller(self, t0, self.until_active(sid), self.a.timeout)
            booted = cw.wait_for(b"GUEST-BOOTED", self.a.timeout, p.check)
            # the guest must reach its heartbeat (acpid runs) before the next os-stop
            wait_console(cw, lambda t: b"HB 1 " in t, self.a.timeout, "heartbeat")
        finally:
            cw.close()
        return {"active": p.join(self.a.timeout), "first": cw.first_byte, "booted": booted}

    def delete_server(self, sid):
        st, _, b = self.c.req("DELETE", "/compute/v2.1/servers/%s" % sid)
        if st not in (204, 404):
            raise RuntimeError("DELETE server %s: %d %s" % (sid, st, b))
        end = time.time() + 120
        while time.time() < end:
            st, _, _ = self.c.req("GET", "/compute/v2.1/servers/%s" % sid)
            if st == 404 and not domain_exists(sid):
                self.servers.discard(sid)
                return
            time.sleep(0.05)
        raise RuntimeError("server %s not gone 120 s after DELETE" % sid)

    def cleanup(self, failed):
        """Deletes what is left (servers, then volumes), stops the
        all-in-one and removes its state dir."""
        for sid in list(self.servers):
            try:
                self.delete_server(sid)
            except Exception as e:
                print("clean-up: server %s: %s" % (sid, e), file=sys.stderr)
            virsh("destroy", sid, check=False)
            virsh("undefine", sid, "--managed-save", check=False)
        for vid in list(self.volumes):
            try:
                self.delete_volume(vid)
            except Exception as e:
                print("clean-up: volume %s: %s" % (vid, e), file=sys.stderr)
        try:
            if self.image:
                delete_image(self.c, self.image)
        except Exception:
            pass
        if failed and isinstance(sys.exc_info()[1], Exception):  # not on ^C or SIGTERM
            print(log_tail(self.aio), file=sys.stderr)
        stop_aio(self.aio, keep=failed and self.a.keep)


# ------------------------------------------------------------------- boot

def bench_boot(cl):
    a = cl.a
    # warm-up, not counted: fills the image cache and the page cache
    r = cl.boot("bench-warm-image")
    cold = r
    cl.delete_server(r["id"])
    vid, _ = cl.create_volume("bench-warm-vol", image=cl.image)
    r = cl.boot("bench-warm-bfv", volume=vid)
    cl.delete_server(r["id"])
    cl.delete_volume(vid)

    img, bfv, vc = [], [], []
    for i in range(a.runs):
        for which in (("image", "volume") if i % 2 == 0 else ("volume", "image")):
            if which == "image":
                r = cl.boot("bench-image-%d" % i)
                cl.delete_server(r["id"])
                img.append(r)
            else:
                vid, dt = cl.create_volume("bench-boot-%d" % i, image=cl.image)
                vc.append(dt)
                r = cl.boot("bench-bfv-%d" % i, volume=vid)
                cl.delete_server(r["id"])
                cl.delete_volume(vid)
                bfv.append(r)
    print("boot: %d runs each, image- and volume-backed alternating; the boot volume (raw, "
          "1 GiB, from the image) made before each volume boot, not timed (median %.0f ms)"
          % (a.runs, statistics.median(vc) * 1000))
    print("boot: first image-backed boot, cold image cache (1 run): ACTIVE %.0f ms, first "
          "byte %.0f ms, GUEST-BOOTED %.0f ms"
          % (cold["active"] * 1000, cold["first"] * 1000, cold["booted"] * 1000))
    for k, what in (("active", "ACTIVE"), ("first", "first console byte"),
                    ("booted", "GUEST-BOOTED")):
        line("boot from image:  POST->%s" % what, ms(img, k))
        line("boot from volume: POST->%s" % what, ms(bfv, k))
    for k, what in (("active", "ACTIVE"), ("first", "first console byte"),
                    ("booted", "GUEST-BOOTED")):
        d = med(bfv, k) - med(img, k)
        print("boot: the volume path costs %+.0f ms to %s (median volume minus median image; "
              "ratio %.2f)" % (d, what, med(bfv, k) / med(img, k)))


# ----------------------------------------------------------------- create

def bench_create(cl):
    a = cl.a
    d = tempfile.mkdtemp(prefix="nubo-bench-bare-", dir=VARTMP)
    try:
        dst = os.path.join(d, "volume.raw")

        def bare():
            t0 = time.perf_counter()
            subprocess.run(["qemu-img", "convert", "-f", "qcow2", "-O", "raw", a.guest, dst],
                           check=True)
            t1 = time.perf_counter()
            subprocess.run(["qemu-img", "resize", "-q", "-f", "raw", dst, "1G"], check=True)
            t2 = time.perf_counter()
            os.unlink(dst)
            return {"convert": t1 - t0, "resize": t2 - t0}

        vid, _ = cl.create_volume("bench-warm", image=cl.image)  # warm-up
        cl.delete_volume(vid)
        bare()
        nubo, bares = [], []
        for i in range(a.runs):
            for which in (("nubo", "bare") if i % 2 == 0 else ("bare", "nubo")):
                if which == "nubo":
                    vid, dt = cl.create_volume("bench-create-%d" % i, image=cl.image)
                    cl.delete_volume(vid)
                    nubo.append({"create": dt})
                else:
                    bares.append(bare())
        print("create: volume of 1 GiB from the %.1f MiB qcow2 guest image (raw volumes, "
              "[volume] volume_format default); %d runs each, alternating; bare files in %s, "
              "the file system of the share" % (os.path.getsize(a.guest) / (1 << 20), a.runs,
                                                 VARTMP))
        line("create nubo: POST /volumes imageRef -> available", ms(nubo, "create"))
        line("create bare: qemu-img convert -O raw", ms(bares, "convert"))
        line("create bare: qemu-img convert -O raw + resize 1G", ms(bares, "resize"))
        n = med(nubo, "create")
        print("create: nubo %+.0f ms over convert (ratio %.2f), %+.0f ms over convert + resize "
              "(ratio %.2f)" % (n - med(bares, "convert"), n / med(bares, "convert"),
                                n - med(bares, "resize"), n / med(bares, "resize")))
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ----------------------------------------------------------------- attach

def disk_xml_of(sid, target, new_target):
    """The <disk> nubo gave libvirt for target, for a bare attach: alias and
    address dropped (libvirt picks them), target renamed."""
    dom = ET.fromstring(virsh("dumpxml", sid).stdout)
    for disk in dom.iter("disk"):
        t = disk.find("target")
        if t is not None and t.get("dev") == target:
            for tag in ("alias", "address"):
                for e in disk.findall(tag):
                    disk.remove(e)
            t.set("dev", new_target)
            return ET.tostring(disk, encoding="unicode")
    raise RuntimeError("no disk %s in the domain of %s" % (target, sid))


def bench_attach(cl):
    a = cl.a
    d = tempfile.mkdtemp(prefix="nubo-bench-bare-", dir=VARTMP)
    try:
        r = cl.boot("bench-attach")
        sid = r["id"]
        path = cl.console_path(sid)
        cw = ConsoleWatch(path, time.perf_counter())
        wait_console(cw, lambda t: b"HB 1 " in t and block_lines(t), a.timeout, "heartbeat")
        base = block_lines(cw.text)[-1]
        cw.close()
        vid, _ = cl.create_volume("bench-attach-data")

        def has_new(t):
            ls = block_lines(t)
            return bool(ls) and len(ls[-1]) == len(base) + 1 and base < ls[-1]

        def back(t):
            ls = block_lines(t)
            return bool(ls) and ls[-1] == base

        def nubo_op(method, url, want, status, pred, what, **body):
            cw = fresh_watch(path)
            t0 = time.perf_counter()
            cw.t0 = t0
            try:
                st, _, b = cl.c.req(method, url, body or None)
                if st != want:
                    raise RuntimeError("%s: %d %s" % (what, st, b))
                p = Poller(cl, t0, lambda c: cl.volume_status(vid, c) == status, a.timeout)
                seen = wait_console(cw, pred, a.timeout, what, p.check)
                return {"status": p.join(a.timeout), "seen": seen, "body": b}
            finally:
                cw.close()

        attachments = "/compute/v2.1/servers/%s/os-volume_attachments" % sid

        def nubo_attach():
            r = nubo_op("POST", attachments, 200, "in-use", has_new, "attached device",
                        volumeAttachment={"volumeId": vid})
            r["device"] = r.pop("body")["volumeAttachment"]["device"]
            return r

        def nubo_detach():
            r = nubo_op("DELETE", "%s/%s" % (attachments, vid), 202, "available", back,
                        "detached device")
            r.pop("body")
            return r

        # warm-up: nubo's attach gives the disk XML of the bare runs
        r = nubo_attach()
        target = r["device"].rsplit("/", 1)[-1]
        bare_target = target[:-1] + chr(ord(target[-1]) + 1)
        xml_path = os.path.join(d, "disk.xml")
        with open(xml_path, "w") as f:
            f.write(disk_xml_of(sid, target, bare_target))
        nubo_detach()

        def bare(verb, pred):
            cw = fresh_watch(path)
            t0 = time.perf_counter()
            cw.t0 = t0
            # virsh in a thread: the guest may show the change before virsh
            # returns (detach-device waits for QEMU's DEVICE_DELETED)
            res = {}

            def run():
                p = subprocess.run(bl.VIRSH + [verb, sid, xml_path, "--live"],
                                   capture_output=True, text=True, timeout=a.timeout)
                res["t"], res["rc"], res["err"] = time.perf_counter() - t0, p.returncode, p.stderr

            def check():
                if res.get("rc"):
                    raise RuntimeError("virsh %s: %s" % (verb, res["err"].strip()))
            th = threading.Thread(target=run, daemon=True)
            try:
                th.start()
                seen = wait_console(cw, pred, a.timeout, "bare %s" % verb, check)
                th.join(a.timeout)
                check()
                if "t" not in res:
                    raise RuntimeError("virsh %s did not return" % verb)
                ret = res["t"]
            finally:
                cw.close()
            if verb == "detach-device":  # gone for libvirt too before the next attach
                end = time.time() + 60
                while bare_target in virsh("domblklist", sid).stdout:
                    if time.time() > end:
                        raise RuntimeError("%s still in the domain 60 s after detach"
                                           % bare_target)
                    time.sleep(0.05)
            return {"returned": ret, "seen": seen}

        na, nd, ba, bd = [], [], [], []
        for i in range(a.runs):
            for which in (("nubo", "bare") if i % 2 == 0 else ("bare", "nubo")):
                if which == "nubo":
                    na.append(nubo_attach())
                    nd.append(nubo_detach())
                else:
                    ba.append(bare("attach-device", has_new))
                    bd.append(bare("detach-device", back))
        devs = " ".join(sorted(x.decode() for x in base))
        print("attach: blank raw 1 GiB volume to a running image-backed guest (devices %s), "
              "nubo target %s, bare target %s; %d runs each, alternating; the guest rescans "
              "/sys/block every 100 ms" % (devs, target, bare_target, a.runs))
        line("attach nubo: POST os-volume_attachments -> in-use", ms(na, "status"))
        line("attach nubo: POST -> BLOCK-DEVICES with the device", ms(na, "seen"))
        line("attach bare: virsh attach-device --live -> returned", ms(ba, "returned"))
        line("attach bare: virsh attach-device -> BLOCK-DEVICES", ms(ba, "seen"))
        line("detach nubo: DELETE os-volume_attachments -> available", ms(nd, "status"))
        line("detach nubo: DELETE -> BLOCK-DEVICES without it", ms(nd, "seen"))
        line("detach bare: virsh detach-device --live -> returned", ms(bd, "returned"))
        line("detach bare: virsh detach-device -> BLOCK-DEVICES", ms(bd, "seen"))
        print("attach: virsh by itself (`virsh uri`, a process) costs median %.0f ms; it is "
              "part of the bare times" % virsh_noop_ms())
        for what, n, b in (("attach", na, ba), ("detach", nd, bd)):
            print("%s: nubo %+.0f ms over bare to the guest seeing it (ratio %.2f)"
                  % (what, med(n, "seen") - med(b, "seen"), med(n, "seen") / med(b, "seen")))
        cl.delete_server(sid)
        cl.delete_volume(vid)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ----------------------------------------------------------------- format

HARNESS = r"""
/* bench_volumes.py's probe: nubo's format inspector and the agent's
 * per-volume disk-format check, called in-process. */
#include "compute/agent/internal.h"
#include "image/format.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* usage: probe N FILE BDM_JSON_FILE: prints one JSON line */
int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    int n = atoi(argv[1]);
    double *t = calloc((size_t)n, sizeof(*t)), *u = calloc((size_t)n, sizeof(*u));
    json_error_t je;
    json_t *bdm = json_load_file(argv[3], 0, &je);
    if (!t || !u || !bdm || n < 1)
        return 2;
    struct nb_format_info info;
    struct nb_disk_check chk;
    char err[1024];
    int verdict = -1;
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        if (nb_format_inspect_path(argv[2], &info, err, sizeof(err)) < 0) {
            fprintf(stderr, "inspect: %s\n", err);
            return 1;
        }
        double t1 = now_us();
        verdict = nb_disk_check(bdm, &chk, err, sizeof(err));
        double t2 = now_us();
        if (verdict < 0) {
            fprintf(stderr, "check: %s\n", err);
            return 1;
        }
        t[i] = t1 - t0;
        u[i] = t2 - t1;
    }
    qsort(t, (size_t)n, sizeof(*t), cmp);
    qsort(u, (size_t)n, sizeof(*u), cmp);
    printf("{\"format\": \"%s\", \"virtual_size\": %llu, \"inspect_us\": %.2f, "
           "\"inspect_min_us\": %.2f, \"check_us\": %.2f, \"check_min_us\": %.2f, "
           "\"verdict\": %d, \"path\": \"%s\", \"declared\": \"%s\", \"actual\": \"%s\"}\n",
           info.format, (unsigned long long)info.virtual_size, t[n / 2], t[0], u[n / 2], u[0],
           verdict, chk.path, chk.declared, chk.actual);
    return 0;
}
"""


def build_probe(bin_path, d):
    """Compiles HARNESS against the libnubo.a next to bin_path; its path, or
    (None, why)."""
    lib = os.path.join(os.path.dirname(bin_path), "libnubo.a")
    if not os.path.exists(lib):
        return None, "no %s" % lib
    src, out = os.path.join(d, "probe.c"), os.path.join(d, "probe")
    with open(src, "w") as f:
        f.write(HARNESS)
    pkgs = ["libmicrohttpd", "jansson", "sqlite3", "inih", "libcrypt", "openssl", "uuid",
            "libvirt", "libxml-2.0", "libcurl"]
    p = subprocess.run(["pkg-config", "--cflags", "--libs"] + pkgs, capture_output=True,
                       text=True)
    if p.returncode != 0:
        return None, "pkg-config: " + p.stderr.strip()
    p = subprocess.run(["cc", "-O2", "-std=c17", "-D_GNU_SOURCE", "-I", os.path.join(ROOT, "src"),
                        src, "-o", out, lib] + p.stdout.split() + ["-lm", "-pthread"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, "cc: " + p.stderr.strip()[-800:]
    return out, None


def bdm_row(cl, sid):
    """The server's live boot mapping row, as the agent sees it (JSON)."""
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(cl.aio.dir, "nubo.sqlite"), uri=True,
                         timeout=30)
    try:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT * FROM block_device_mapping WHERE instance_uuid = ? AND "
                          "deleted = 0 AND boot_index = 0", (sid,)).fetchall()
    finally:
        db.close()
    if len(rows) != 1:
        raise RuntimeError("%d boot mappings for %s" % (len(rows), sid))
    return dict(rows[0])


def qemu_img_info_ms(path, n=20):
    xs = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(["qemu-img", "info", "-U", "--output=json", path], check=True,
                       capture_output=True)
        xs.append((time.perf_counter() - t0) * 1000)
    return xs


def bench_format(cl):
    a = cl.a
    d = tempfile.mkdtemp(prefix="nubo-bench-probe-", dir=VARTMP)
    try:
        vid, _ = cl.create_volume("bench-format", image=cl.image)
        r = cl.boot("bench-format", volume=vid)
        sid = r["id"]
        cw = ConsoleWatch(cl.console_path(sid), time.perf_counter())
        wait_console(cw, lambda t: b"HB 1 " in t, a.timeout, "heartbeat")
        cw.close()

        # the check itself, in-process, and qemu-img info
        row = bdm_row(cl, sid)
        ci = json.loads(row["connection_info"])
        raw_path = os.path.join(ci["mount_point_base"],
                                hashlib.md5(ci["data"]["export"].encode()).hexdigest(),
                                ci["data"]["name"])
        if not os.path.exists(raw_path):
            raise RuntimeError("the boot volume's file is not at %s" % raw_path)
        qid = str(uuid.uuid4())
        qcow_path = os.path.join(os.path.dirname(raw_path), "volume-%s" % qid)
        subprocess.run(["qemu-img", "convert", "-U", "-f", "raw", "-O", "qcow2", raw_path,
                        qcow_path], check=True)
        files = {"raw": (raw_path, row)}
        qrow = dict(row, volume_id=qid)
        qci = json.loads(row["connection_info"])
        qci["data"].update(name="volume-%s" % qid, format="qcow2")
        qrow["connection_info"] = json.dumps(qci)
        files["qcow2"] = (qcow_path, qrow)
        probe, why = build_probe(a.bin, d)
        micro = {}
        for fmt, (path, brow) in files.items():
            info = json.loads(subprocess.run(["qemu-img", "info", "-U", "--output=json", path],
                                             check=True, capture_output=True).stdout)
            entry = {"size": info["virtual-size"], "alloc": info.get("actual-size", 0),
                     "qemu": qemu_img_info_ms(path)}
            if probe:
                bp = os.path.join(d, "bdm-%s.json" % fmt)
                with open(bp, "w") as f:
                    json.dump(brow, f)
                p = subprocess.run([probe, "2000", path, bp], capture_output=True, text=True)
                if p.returncode != 0:
                    raise RuntimeError("probe on %s: %s" % (path, p.stderr))
                entry["probe"] = json.loads(p.stdout)
                if entry["probe"]["format"] != fmt or entry["probe"]["actual"] != fmt or \
                        entry["probe"]["path"] != path or entry["probe"]["verdict"] != 0:
                    raise RuntimeError("probe saw %s" % entry["probe"])
            micro[fmt] = entry
        os.unlink(qcow_path)

        # os-start with the check reconciling (true) and not (false)
        runs = {"true": [], "false": []}
        for i in range(a.runs):
            for setting in (("true", "false") if i % 2 == 0 else ("false", "true")):
                want = () if setting == "true" else (
                    "--set", "compute.reconcile_disk_format=false")
                # every measured start has the same history: a restart with
                # its setting, one stop/start not counted, then the stop
                cl.restart(*want)
                cl.stop_server(sid)
                cl.start_server(sid)
                cl.stop_server(sid)
                runs[setting].append(cl.start_server(sid))
        if cl.extra:
            cl.restart()
        cl.delete_server(sid)
        cl.delete_volume(vid)

        print("format: os-start of a stopped server booted from a raw 1 GiB volume (formats "
              "agree); %d runs per setting, alternating; before each, the all-in-one is restarted "
              "(with --set compute.reconcile_disk_format=false for false) and the server "
              "stopped and started once, not counted" % a.runs)
        for k, what in (("active", "ACTIVE"), ("first", "first console byte"),
                        ("booted", "GUEST-BOOTED")):
            for s in ("true", "false"):
                line("start (reconcile %-5s): os-start->%s" % (s, what), ms(runs[s], k))
        dd = med(runs["true"], "active") - med(runs["false"], "active")
        print("format: start->ACTIVE true minus false: %+.0f ms (ratio %.2f). The setting only "
              "decides what happens on a mismatch; with either value the agent inspects every "
              "volume file before the start, so this is the run-to-run spread, not the check"
              % (dd, med(runs["true"], "active") / med(runs["false"], "active")))
        for fmt, e in micro.items():
            what = "%s volume file (%d MiB virtual, %d MiB allocated)" % (
                fmt, e["size"] >> 20, e["alloc"] >> 20)
            line("inspect %s: qemu-img info -U (a process)" % fmt, e["qemu"], prec=1)
            if "probe" in e:
                p = e["probe"]
                print("%-58s median %.1f us (min %.1f)" % (
                    "inspect %s: nb_format_inspect_path, in-process" % fmt, p["inspect_us"],
                    p["inspect_min_us"]))
                print("%-58s median %.1f us (min %.1f)" % (
                    "inspect %s: nb_disk_check (agent's check), in-process" % fmt, p["check_us"],
                    p["check_min_us"]))
                print("format: %s: nubo's whole check is %.4f%% of the start->ACTIVE median; "
                      "qemu-img info takes %.0fx as long as the in-process check"
                      % (what, p["check_us"] / 10 / med(runs["true"], "active"),
                         statistics.median(e["qemu"]) * 1000 / p["check_us"]))
        if not probe:
            print("format: nubo's inspector not reachable in-process (%s); only the start "
                  "times above" % why)
        else:
            print("format: in-process figures are medians of 2000 calls with the file in the "
                  "page cache; the inspector reads the first 2 MiB (as the streaming upload "
                  "inspector keeps them), the regions the headers point at and the last 2 KiB")
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------- main

def build_type(bin_path):
    p = os.path.join(os.path.dirname(bin_path), "meson-info", "intro-buildoptions.json")
    try:
        with open(p) as f:
            return [o["value"] for o in json.load(f) if o["name"] == "buildtype"][0]
    except (OSError, ValueError, IndexError):
        return "unknown"


def wait_for_load(max_load, wait):
    """Waits (polling every 3 minutes, at most wait s) for the 1-minute load
    average to drop to max_load; returns it."""
    end = time.time() + wait
    while True:
        load = os.getloadavg()[0]
        if load <= max_load or time.time() >= end:
            return load
        print("load average %.2f > %.1f: waiting (until %s at the latest)"
              % (load, max_load, time.strftime("%H:%M", time.localtime(end))))
        sys.stdout.flush()
        time.sleep(min(180, max(1, end - time.time())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "nubo"))
    ap.add_argument("--only", choices=("boot", "create", "attach", "format"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--guest", default=os.path.join(ROOT, "tests", "images", "out", "guest.qcow2"))
    ap.add_argument("--timeout", type=int, default=300, help="seconds to wait for each step")
    ap.add_argument("--keep", action="store_true", help="keep the aio state dir on failure")
    ap.add_argument("--max-load", type=float, default=3.0,
                    help="wait for the 1-minute load average to drop to this first")
    ap.add_argument("--load-wait", type=int, default=2400, help="at most this many seconds")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    a.guest = os.path.abspath(a.guest)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    if not os.path.exists(a.guest):
        sys.exit("no guest image %s (bash tests/images/build.sh)" % a.guest)
    if subprocess.run(bl.VIRSH + ["uri"], capture_output=True).returncode != 0:
        subprocess.run([os.path.join(ROOT, "scripts", "libvirt-up.sh")], check=False)
        virsh("uri")
    load = wait_for_load(a.max_load, a.load_wait)
    ver = re.search(r"hypervisor: (.*)", virsh("version").stdout, re.I)
    print("nubo step-3 benchmarks: %s (buildtype %s), %d cores, load %.2f %.2f %.2f, %s, %s, "
          "guest %s, bare libvirt via %s"
          % (a.bin, build_type(a.bin), os.cpu_count(), *os.getloadavg(),
             ver.group(1).strip() if ver else "?", time.strftime("%Y-%m-%d %H:%M"),
             os.path.relpath(a.guest, ROOT), "virsh (subprocess)"))
    if load > a.max_load:
        print("(the load stayed above %.1f for %d s: figures taken anyway)"
              % (a.max_load, a.load_wait))
    sys.stdout.flush()
    cl = None
    failed = True
    try:
        cl = Cloud(a)
        for name, fn in (("boot", bench_boot), ("create", bench_create),
                         ("attach", bench_attach), ("format", bench_format)):
            if not a.only or a.only == name:
                fn(cl)
                print("(load after %s: %.2f %.2f %.2f)" % ((name,) + os.getloadavg()))
                sys.stdout.flush()
        failed = False
    finally:
        if cl:
            cl.cleanup(failed)


if __name__ == "__main__":
    main()

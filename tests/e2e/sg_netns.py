"""A small bench of "ports" for security-group tests: network namespaces
wired to a real Linux bridge by veths named as the ports' taps, filtered by
the nft script the network agent's renderer makes of a host state
(build/tests/unit/sg_render_tool, the code na_sg_sync runs), loaded with
`nft -f -` as the agent does, the conntrack cuts of each change run as the
agent runs them. No guest boots: this checks what the kernel does with the
rules; test_dataplane_sg.py's cloud part checks the same with real guests.

Everything it makes is named ntsg* (tables nubo_*_ntsge2e0) and removed by
down(). Needs root, nft, conntrack and busybox."""
import json
import os
import shutil
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("NUBO_BUILD") or (os.path.dirname(os.environ["NUBO_BIN"]) if
                                         os.environ.get("NUBO_BIN") else
                                         os.path.join(ROOT, "build"))
TOOL = os.path.join(BUILD, "tests", "unit", "sg_render_tool")
TAG = "ntsge2e0"
BRIDGE = "ntsgbr1"
NET = "ntsg0000-0000-4000-8000-000000000001"
PREFIX = "203.0.113.64/28"

ECHO_SERVER = r"""
import socket, selectors, sys
sel = selectors.DefaultSelector()
for fam, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
    for port in [22] + list(range(8000, 8011)):
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((addr, port)); s.listen(16); s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, "listen")
print("READY", flush=True)
while True:
    for key, _ in sel.select():
        if key.data == "listen":
            c, _ = key.fileobj.accept(); c.setblocking(False)
            sel.register(c, selectors.EVENT_READ, "conn")
        else:
            try:
                d = key.fileobj.recv(4096)
            except OSError:
                d = b""
            if d:
                key.fileobj.send(d)
            else:
                sel.unregister(key.fileobj); key.fileobj.close()
"""

# A client kept open across a change: "open" connects and echoes once, then
# each line on stdin "send" echoes again; prints OK/FAIL per step.
HELD_CLIENT = r"""
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
s = socket.create_connection((host, port), timeout=2)
s.send(b"x"); print("OK" if s.recv(8) == b"x" else "FAIL", flush=True)
for line in sys.stdin:
    try:
        s.settimeout(1.5); s.send(b"y"); print("OK" if s.recv(8) == b"y" else "FAIL", flush=True)
    except OSError as e:
        print("FAIL", e, flush=True)
"""


def sh(*args, check=True, **kw):
    return subprocess.run(args, check=check, capture_output=True, text=True, **kw)


def missing():
    if os.geteuid() != 0:
        return "needs root (namespaces, nft)"
    for tool in ("nft", "ip", "busybox", "conntrack"):
        if not shutil.which(tool):
            return "no %s" % tool
    if not os.access(TOOL, os.X_OK):
        return "no %s (ninja -C %s)" % (TOOL, BUILD)
    if open("/proc/sys/net/bridge/bridge-nf-call-iptables").read().strip() != "1":
        return "bridge-nf-call-iptables is 0"
    return None


class Port:
    def __init__(self, name, index, groups, filtered=True):
        self.name = name
        self.ns = "ntsg-" + name
        self.tap = "ntsgtap" + name
        self.ip = "203.0.113.%d" % (65 + index)
        self.ip6 = "2001:db8:64::%x" % (65 + index)
        self.mac = "fa:16:3e:64:00:%02x" % index
        self.id = "%08x-0000-4000-8000-%012x" % (0x5a000000 + index, index)
        self.groups = list(groups)
        self.filtered = filtered          # in the state's ports (a compute port)
        self.port_security = True
        self.pairs = []

    def view(self):
        return {"id": self.id, "network_id": NET, "tap": self.tap, "mac": self.mac,
                "port_security_enabled": self.port_security,
                "fixed_ips": [{"ip_address": self.ip}, {"ip_address": self.ip6}],
                "security_groups": list(self.groups), "allowed_address_pairs": self.pairs}


class Bench:
    """Ports on one bridge and the security groups they are in."""

    def __init__(self):
        self.ports = {}
        self.groups = {}        # id -> {"id", "stateful", "rules"}
        self.applied = None     # the state last loaded
        self.procs = []

    # --- wiring -------------------------------------------------------------
    def up(self, ports):
        self.down()
        sh("ip", "link", "add", BRIDGE, "type", "bridge", "stp_state", "0")
        sh("sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        for p in ports:
            self.ports[p.name] = p
            sh("ip", "netns", "add", p.ns)
            sh("ip", "link", "add", p.tap, "type", "veth", "peer", "name", "eth0", "netns", p.ns)
            sh("ip", "link", "set", p.tap, "master", BRIDGE, "up")
            sh("ip", "-n", p.ns, "link", "set", "lo", "up")
            sh("ip", "-n", p.ns, "link", "set", "eth0", "address", p.mac)
            sh("ip", "-n", p.ns, "link", "set", "eth0", "up")
            sh("ip", "-n", p.ns, "addr", "add", p.ip + "/28", "dev", "eth0")
            sh("ip", "-n", p.ns, "addr", "add", p.ip6 + "/64", "dev", "eth0", "nodad")

    def down(self):
        for pr in self.procs:
            pr.kill()
            pr.wait()
        self.procs = []
        for name in [l.split(":")[1].strip().split("@")[0]
                     for l in sh("ip", "-o", "link", "show").stdout.splitlines()]:
            if name.startswith("ntsgtap"):
                sh("ip", "link", "del", name, check=False)
        for ns in sh("ip", "netns", "list").stdout.split():
            if ns.startswith("ntsg-"):
                sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", BRIDGE, check=False)
        sh("nft", "delete", "table", "bridge", "nubo_port_" + TAG, check=False)
        sh("nft", "delete", "table", "inet", "nubo_sg_" + TAG, check=False)

    def serve(self, name):
        pr = subprocess.Popen(["ip", "netns", "exec", self.ports[name].ns, "/usr/bin/python3",
                               "-c", ECHO_SERVER], stdout=subprocess.PIPE, text=True)
        assert pr.stdout.readline().strip() == "READY"
        self.procs.append(pr)

    # --- the state and its load ---------------------------------------------
    def group(self, gid, rules, stateful=True):
        self.groups[gid] = {"id": gid, "stateful": stateful, "rules": rules}

    def state(self):
        members = {gid: [] for gid in self.groups}
        for p in self.ports.values():
            for g in p.groups:
                members.setdefault(g, []).extend([p.ip, p.ip6] +
                                                 [a["ip_address"] for a in p.pairs])
        sgs = [dict(g, members=members.get(gid, [])) for gid, g in self.groups.items()]
        return json.loads(json.dumps({"host": "ntsg", "networks": [{"id": NET, "bridge": BRIDGE}],
                "ports": [p.view() for p in self.ports.values() if p.filtered],
                "security_groups": sgs}))  # a copy: later edits do not reach it

    def apply(self):
        """Renders and loads the state as the agent does; returns seconds."""
        st = self.state()
        t0 = time.monotonic()
        script = sh(TOOL, "-", TAG, input=json.dumps(st)).stdout
        sh("nft", "-f", "-", input=script)
        if self.applied is not None:
            old, new = "/tmp/ntsg-old.json", "/tmp/ntsg-new.json"
            json.dump(self.applied, open(old, "w"))
            json.dump(st, open(new, "w"))
            for line in sh(TOOL, "--cuts", old, new, TAG).stdout.splitlines():
                sh(*line.split(), check=False)
        self.applied = st
        return time.monotonic() - t0

    # --- probes -------------------------------------------------------------
    def ping(self, src, dst, v6=False, source=None, wait=1):
        d = self.ports[dst].ip6 if v6 else self.ports[dst].ip if dst in self.ports else dst
        cmd = ["ip", "netns", "exec", self.ports[src].ns, "busybox",
               "ping6" if v6 else "ping", "-c", "1", "-W", str(wait)]
        if source:
            cmd += ["-I", source]
        return sh(*cmd, d, check=False).returncode == 0

    def tcp(self, src, dst, port, v6=False):
        d = self.ports[dst].ip6 if v6 else self.ports[dst].ip
        code = ("import socket,sys\ntry:\n s=socket.create_connection((%r,%d),timeout=1)\n"
                " s.send(b'q'); sys.exit(0 if s.recv(4)==b'q' else 1)\n"
                "except OSError: sys.exit(1)" % (d, port))
        return sh("ip", "netns", "exec", self.ports[src].ns, "/usr/bin/python3", "-c", code,
                  check=False).returncode == 0

    def held(self, src, dst, port):
        pr = subprocess.Popen(["ip", "netns", "exec", self.ports[src].ns, "/usr/bin/python3",
                               "-c", HELD_CLIENT, self.ports[dst].ip, str(port)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(pr)
        return pr

    def until(self, probe, want=True, timeout=3.0):
        """Seconds until probe() == want (probing every 20 ms), or None."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if probe() == want:
                return time.monotonic() - t0
            time.sleep(0.02)
        return None

    def counter(self, comment):
        """Packets counted by the rules with that comment in the bridge table."""
        out = sh("nft", "list", "table", "bridge", "nubo_port_" + TAG).stdout
        n = 0
        for line in out.splitlines():
            if 'comment "%s"' % comment in line and "packets" in line:
                n += int(line.split("packets")[1].split()[0])
        return n


def rule(direction, ethertype="IPv4", protocol=None, pmin=None, pmax=None, prefix=None,
         group=None, rid=None):
    return {"id": rid or "r-%s-%s-%s-%s-%s" % (direction, ethertype, protocol, pmin, prefix),
            "direction": direction, "ethertype": ethertype, "protocol": protocol,
            "port_range_min": pmin, "port_range_max": pmax, "remote_ip_prefix": prefix,
            "remote_group_id": group}


def default_rules(gid):
    """Neutron's default group: ingress from the group, egress anywhere."""
    return [rule("ingress", "IPv4", group=gid, rid="d-in4"),
            rule("ingress", "IPv6", group=gid, rid="d-in6"),
            rule("egress", "IPv4", rid="d-out4"), rule("egress", "IPv6", rid="d-out6")]

"""What a stopped test cloud's network agents leave on the host, and its
removal: the agent keeps the data plane when nubo stops (guests keep their
network across an agent restart), so a test that stops a cloud for good
removes what its agents recorded as their own in
<state>/network-agent/<host>/owned.json (dnsmasq and radvd by pid file,
namespaces, links, bridges, nft tables); nothing else on the machine is touched."""
import glob
import json
import os
import subprocess


def sh(*argv, check=False):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60,
                          check=check)


def link_exists(dev):
    return os.path.exists("/sys/class/net/" + dev)


def agent_dirs(state_dir):
    return sorted(glob.glob(os.path.join(state_dir, "network-agent", "*")))


def _alive(pidfile, arg):
    try:
        pid = int(open(pidfile).read().strip())
        cmd = open("/proc/%d/cmdline" % pid, "rb").read().split(b"\0")
        stat = open("/proc/%d/stat" % pid).read()
    except (OSError, ValueError):
        return None
    if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
        return None
    return pid if arg.encode() in cmd else None


def _alive_dnsmasq(pidfile):
    return _alive(pidfile, "--pid-file=" + pidfile)


def radvd_pid(state_dir, router_id):
    """The pid of the agent's radvd for router_id (radvd.c), None if not running."""
    for d in agent_dirs(state_dir):
        pidfile = os.path.join(d, "l3", router_id, "radvd.pid")
        pid = _alive(pidfile, pidfile)
        if pid:
            return pid
    return None


def dnsmasq_pid(state_dir, network_id):
    """The pid of the agent's dnsmasq for network_id, None if not running."""
    for d in agent_dirs(state_dir):
        pid = _alive_dnsmasq(os.path.join(d, "dhcp", network_id, "pid"))
        if pid:
            return pid
    return None


def owned(state_dir):
    """The union of the agents' ownership records: {kind: [name, ...]}."""
    out = {}
    for d in agent_dirs(state_dir):
        try:
            rec = json.load(open(os.path.join(d, "owned.json")))
        except (OSError, ValueError):
            continue
        for kind, names in rec.items():
            out.setdefault(kind, []).extend(names)
    return out


def remove_agent_leftovers(state_dir):
    """Removes what the (stopped) cloud's agents recorded as theirs:
    dnsmasq and radvd (by pid file), namespaces, links, bridges, nft tables."""
    for d in agent_dirs(state_dir):
        for pidfile in (glob.glob(os.path.join(d, "dhcp", "*", "pid"))
                        + glob.glob(os.path.join(d, "l3", "*", "radvd.pid"))):
            pid = _alive(pidfile, pidfile if pidfile.endswith("radvd.pid")
                         else "--pid-file=" + pidfile)
            if pid:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
    rec = owned(state_dir)
    for ns in rec.get("netns", []) + rec.get("router_netns", []):
        sh("ip", "netns", "del", ns)
    for entry in rec.get("router_host_addr", []):  # "<bridge> <ip>/<len>" (l3.c)
        br, _, addr = entry.partition(" ")
        if link_exists(br):
            sh("ip", "addr", "del", addr, "dev", br)
    for dev in rec.get("link", []) + rec.get("router_link", []) + rec.get("bridge", []):
        if link_exists(dev):
            sh("ip", "link", "del", dev)
    for t in rec.get("nft_table", []):
        sh("nft", "delete", "table", *t.split())

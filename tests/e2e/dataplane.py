"""Helpers for the data-plane tests: a libvirt all-in-one whose host runs the
network agent (TCG guests on brq bridges, DHCP by the agent's dnsmasq in
qdhcp namespaces), guests booted with user data, their console lines, and
commands run in a network namespace.

A cloud's agent leaves the data plane in place when nubo stops (guests keep
their network across an agent restart), so whoever stops a test cloud
removes what its agent recorded as its own (remove_agent_leftovers: the
agent's ownership records under <state>/network-agent/<host>/owned.json);
nothing else on the machine is touched.

The guest is tests/images' image (NUBO_TEST_IMAGE_DIR): it prints
NET-START / DHCP-LEASE ip=.. mask=.. router=.. mtu=.. / NET-UP on its
serial console, runs a "#!" user data script with its output on the
console, then "USER-DATA rc=N"."""
import os
import re
import subprocess
import time

from conftest import unique
from netagent_cleanup import agent_dirs, dnsmasq_pid, owned, remove_agent_leftovers  # noqa: F401
from test_libvirt import QCOW2, api, libvirt_ready, start_libvirt_cloud, stop_cloud, wait_status

RESYNC = 4  # [agent] resync_interval of the test clouds (s)


def dataplane_unavailable():
    if os.geteuid() != 0:
        return "needs root (bridges, namespaces)"
    return libvirt_ready()


def sh(*argv, check=True, timeout=60, input=None):
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout,
                       input=input)
    if check and p.returncode != 0:
        raise AssertionError("%s: rc %d\n%s%s" % (" ".join(map(str, argv)), p.returncode,
                                                  p.stdout, p.stderr))
    return p


def in_netns(ns, *argv, check=True, timeout=60):
    """Runs argv in network namespace ns (`ip netns exec`)."""
    return sh("ip", "netns", "exec", ns, *argv, check=check, timeout=timeout)


def netns_exists(ns):
    return os.path.exists("/run/netns/" + ns)


def link_exists(dev):
    return os.path.exists("/sys/class/net/" + dev)


def master_of(dev):
    path = "/sys/class/net/%s/master" % dev
    return os.path.basename(os.readlink(path)) if os.path.islink(path) else None


def wait_for(what, fn, timeout=30, step=0.2):
    end = time.time() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.time() > end:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(step)


def start_dataplane_cloud(name, *extra):
    """A libvirt all-in-one with the network agent (auto: the libvirt
    driver), the test image uploaded as c.image_id, c.host its host."""
    c = start_libvirt_cloud(name, "--set", "agent.resync_interval=%d" % RESYNC,
                            "--set", "agent.report_interval=5", *extra)
    try:
        img = c.cli("image", "create", "--file", QCOW2, "--disk-format", "qcow2",
                    "--container-format", "bare", "--public", "guest", "-f", "json")
        c.image_id = img["id"]
        c.host = wait_for("the compute host", lambda: (c.cli(
            "compute", "service", "list", "--service", "nova-compute", "-f", "json") or [{}])[0]
            .get("Host"), timeout=60)
    except Exception:
        stop_dataplane_cloud(c)
        raise
    return c


def stop_dataplane_cloud(c):
    return stop_cloud(c)  # the agent's leftovers too


def make_network(c, name, cidr, gateway, mtu=None):
    """A network with one subnet (DHCP on); returns (network, subnet)."""
    args = ["network", "create", name, "-f", "json"]
    if mtu:
        args[3:3] = ["--mtu", str(mtu)]
    net = c.cli(*args)
    sub = c.cli("subnet", "create", "--network", net["id"], "--subnet-range", cidr,
                "--gateway", gateway, name + "-subnet", "-f", "json")
    return net, sub


def make_port(c, net, subnet, ip, name=None):
    return c.cli("port", "create", "--network", net["id"], "--fixed-ip",
                 "subnet=%s,ip-address=%s" % (subnet["id"], ip), name or unique("nt-agent-p"),
                 "-f", "json")


def boot(c, name, port_id, user_data=None, wait=False):
    """Boots the test guest on an existing port with a config drive (its
    user data read from there: no wait on the metadata service)."""
    args = ["server", "create", "--flavor", "m1.tiny", "--image", c.image_id,
            "--nic", "port-id=" + port_id, "--config-drive", "true"]
    if user_data:
        path = os.path.join(c.state_dir, name + ".userdata")
        with open(path, "w") as f:
            f.write(user_data)
        args += ["--user-data", path]
    s = c.cli(*(args + [name, "-f", "json"]))
    return wait_status(c, s["id"]) if wait else s


def console(c, sid):
    st, data = api(c, "POST", "/servers/%s/action" % sid, {"os-getConsoleOutput": {}})
    assert st == 200, (st, data)
    return data["output"]


def wait_console_line(c, sid, pattern, timeout=300):
    """Waits for a console line matching pattern (regex); returns the match."""
    text = ""
    end = time.time() + timeout
    while time.time() < end:
        text = console(c, sid)
        m = re.search(pattern, text)
        if m:
            return m
        time.sleep(0.5)
    raise AssertionError("%r not on the console of %s after %ss:\n%s"
                         % (pattern, sid, timeout, text[-3000:]))


def port_show(c, pid):
    st, data = api_net(c, "GET", "/ports/" + pid)
    assert st == 200, (st, data)
    return data["port"]


def api_net(c, method, path, body=None):
    if not getattr(c, "_token", None):
        c._token = c.token()
    st, _, data = c.request(method, "/networking/v2.0" + path, body, token=c._token)
    return st, data


def wait_port_status(c, pid, status, timeout=30):
    return wait_for("port %s %s" % (pid, status),
                    lambda: (lambda p: p if p["status"] == status else None)(port_show(c, pid)),
                    timeout=timeout)


def ping_script(peer, tries=240):
    """User data: ping peer until it answers (at most `tries` s), then print
    PEER-PING <peer> OK|FAILED with busybox ping's summary."""
    return """#!/bin/sh
i=0
while [ $i -lt %d ]; do
  out=$(ping -c 1 -W 1 %s 2>&1)
  if [ $? -eq 0 ]; then
    echo "PEER-PING %s OK after $i tries: $(echo "$out" | grep -o '[0-9]* packets received')"
    exit 0
  fi
  i=$((i+1)); sleep 1
done
echo "PEER-PING %s FAILED"
exit 1
""" % (tries, peer, peer, peer)


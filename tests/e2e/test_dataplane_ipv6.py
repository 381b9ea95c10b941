"""IPv6 by SLAAC with real guests: a libvirt all-in-one (TCG) whose host
runs the network agent, driven with the openstack CLI as an operator does.

A network with an IPv4 subnet (10.170.1.0/24, for the guests' DHCP lease)
and an IPv6 subnet fd00:170:1::/64 with ipv6_ra_mode = ipv6_address_mode =
slaac, attached to a router: the agent runs radvd in qrouter-<id>
advertising the prefix as autonomous (Neutron's ra.py), the API gives each
port the EUI-64 address of its MAC, and each of two guests autoconfigures
exactly that address from the router advertisement (the test guest prints
"NET6 addr=..." once DAD is done) and pings the other over IPv6 through the
default security group ("same group in" for IPv6). While they boot: an
explicit address on the SLAAC subnet is refused as Neutron refuses it, a
MAC change moves the port's address, and dhcpv6-stateful/-stateless are
checked as rendered (radvd flags, dnsmasq ranges), and a radvd killed by
hand comes back. Removing the router's interface stops radvd; deleting
everything leaves no radvd, namespace or bridge. Then a guest on a
dhcpv6-stateful subnet takes its port's address from dnsmasq, one on a
dhcpv6-stateless subnet its SLAAC address and DNS server by DHCPv6
(the test guest runs dhcpcd as the RA's M/O flags say), and they ping
each other through the router."""
import glob
import ipaddress
import os
import re
import time

import pytest

import dataplane as dp
from conftest import unique
from netagent_cleanup import dnsmasq_pid, radvd_pid
from test_libvirt import wait_status

_why = dp.dataplane_unavailable()
if _why and os.environ.get("NUBO_REQUIRE_LIBVIRT"):
    raise RuntimeError("data-plane tests required but: " + _why)
pytestmark = pytest.mark.skipif(bool(_why), reason=_why or "")

NET4 = "10.170.1.0/24"
NET6 = "fd00:170:1::/64"
RA6 = r"RA6 (?:error=.*|managed=(\S+) other=(\S+) router=\S+ up=\S+)"  # the guest's flags


def eui64(cidr, mac):
    """neutron_lib's get_ipv6_addr_by_EUI64."""
    b = bytes(int(x, 16) for x in mac.split(":"))
    iid = int.from_bytes(b[:3] + b"\xff\xfe" + b[3:], "big")
    net = ipaddress.ip_network(cidr)
    return str(ipaddress.ip_address((int(net.network_address) + iid) ^ (1 << 57)))


def v6_of(port):
    ips = [f["ip_address"] for f in port["fixed_ips"] if ":" in f["ip_address"]]
    assert len(ips) == 1, port["fixed_ips"]
    return ips[0]


def ping6_script(*peers, tries=150):
    """User data: ping each peer over IPv6 in turn until it answers (at most
    `tries` s each): "PEER-PING6 <peer> OK after <n> tries" or "... FAILED"."""
    return "#!/bin/sh\nrc=0\n" + "".join("""i=0
while [ $i -lt %d ]; do
  if ping -c 1 -W 1 %s >/dev/null 2>&1; then echo "PEER-PING6 %s OK after $i tries"; break; fi
  i=$((i+1)); sleep 1
done
[ $i -lt %d ] || { echo "PEER-PING6 %s FAILED"; rc=1; }
""" % (tries, p, p, tries, p) for p in peers) + "exit $rc\n"


@pytest.fixture(scope="module")
def v6():
    c = dp.start_dataplane_cloud("v6")
    try:
        yield c
    finally:
        dp.stop_dataplane_cloud(c)


def test_slaac_guests_and_radvd(v6):
    c = v6
    t0 = time.time()
    net = c.cli("network", "create", unique("v6-net"), "-f", "json")
    c.cli("subnet", "create", "--network", net["id"], "--subnet-range", NET4,
          unique("v6-s4"), "-f", "json")
    s6 = c.cli("subnet", "create", "--network", net["id"], "--ip-version", "6",
               "--subnet-range", NET6, "--ipv6-ra-mode", "slaac", "--ipv6-address-mode",
               "slaac", unique("v6-s6"), "-f", "json")
    router = c.cli("router", "create", unique("v6-r"), "-f", "json")
    c.cli("router", "add", "subnet", router["id"], s6["id"])
    ports = [dp.port_show(c, c.cli("port", "create", "--network", net["id"], unique("v6-p"),
                                   "-f", "json")["id"]) for _ in range(2)]
    addrs = [v6_of(p) for p in ports]
    for p, a in zip(ports, addrs):
        assert a == eui64(NET6, p["mac_address"]), p
    servers = [dp.boot(c, unique("v6-vm"), p["id"], ping6_script(addrs[1 - i]))["id"]
               for i, p in enumerate(ports)]

    # meanwhile, the API and the router's radvd
    st, err = dp.api_net(c, "POST", "/ports", {"port": {
        "network_id": net["id"], "fixed_ips": [{"subnet_id": s6["id"],
                                                "ip_address": "fd00:170:1::99"}]}})
    assert st == 400 and err["NeutronError"]["type"] == "AllocationOnAutoAddressSubnet", err
    spare = c.cli("port", "create", "--network", net["id"], unique("v6-spare"), "-f", "json")
    c.cli("port", "set", "--mac-address", "fa:16:3e:70:00:01", spare["id"])
    assert v6_of(dp.port_show(c, spare["id"])) == eui64(NET6, "fa:16:3e:70:00:01")
    c.cli("port", "delete", spare["id"])
    pid = dp.wait_for("radvd of the router", lambda: radvd_pid(c.state_dir, router["id"]))
    ns = "qrouter-" + router["id"]
    assert os.stat("/proc/%d/ns/net" % pid).st_ino == os.stat("/run/netns/" + ns).st_ino
    rdir = glob.glob(os.path.join(c.state_dir, "network-agent", "*", "l3", router["id"]))
    assert len(rdir) == 1, rdir
    conf = open(os.path.join(rdir[0], "radvd.conf")).read()
    assert re.search(r"prefix fd00:170:1::/64\s*\{\s*AdvOnLink on;\s*AdvAutonomous on;", conf), conf
    assert "AdvManagedFlag" not in conf and "AdvOtherConfigFlag" not in conf, conf
    assert "AdvLinkMTU %d;" % net["mtu"] in conf, conf

    check_dhcpv6_modes(c)

    # each guest takes exactly its port's address, and reaches the other
    for sid, a in zip(servers, addrs):
        assert wait_status(c, sid)["status"] == "ACTIVE"
    for sid, a in zip(servers, addrs):
        m = dp.wait_console_line(c, sid, r"NET6 addr=(\S+)/(\d+) up=(\S+)", timeout=240)
        assert ipaddress.ip_address(m.group(1)) == ipaddress.ip_address(a), m.group(0)
        assert m.group(2) == "64"
        print("%s: %s" % (sid, m.group(0)))
    for sid, a in zip(servers, addrs):
        m = dp.wait_console_line(c, sid, r"PEER-PING6 \S+ (OK|FAILED).*", timeout=180)
        assert m.group(1) == "OK", dp.console(c, sid)[-2000:]
        print("%s: %s" % (sid, m.group(0)))
    print("two SLAAC guests pinging each other %.1f s after the network was made"
          % (time.time() - t0))

    # nothing left behind: radvd goes with the router's last IPv6 interface
    c.cli("server", "delete", "--wait", *servers)
    for p in ports:
        c.cli("port", "delete", p["id"])
    c.cli("router", "remove", "subnet", router["id"], s6["id"])
    dp.wait_for("radvd stopped", lambda: radvd_pid(c.state_dir, router["id"]) is None)
    c.cli("router", "delete", router["id"])
    dp.wait_for("the router's namespace gone", lambda: not dp.netns_exists(ns))
    assert not os.path.exists(rdir[0])
    c.cli("network", "delete", net["id"])
    dp.wait_for("the network's bridge gone", lambda: not dp.link_exists("brq" + net["id"][:11]))


def dhcp_file(c, net_id, name):
    f = glob.glob(os.path.join(c.state_dir, "network-agent", "*", "dhcp", net_id, name))
    return open(f[0]).read() if f else ""


def test_dhcpv6_guests(v6):
    """Two guests, one on a dhcpv6-stateful and one on a dhcpv6-stateless
    subnet (each network with an IPv4 subnet too, for the guest's DHCP
    lease), both subnets on one router. The guest reads the RA's flags (M,
    resp. O only) and runs dhcpcd: the stateful one takes exactly its port's
    address from dnsmasq (its lease in the leases file, a /128 on eth0), the
    stateless one its SLAAC (EUI-64) address and, by an information request,
    the subnet's DNS server. Each pings its router and, through it, the
    other, with the default security group (IPv6 from the same group in)."""
    c = v6
    t0 = time.time()
    router = c.cli("router", "create", unique("v6-r3"), "-f", "json")
    made = []
    for i, mode in ((4, "dhcpv6-stateful"), (5, "dhcpv6-stateless")):
        cidr = "fd00:170:%d::/64" % i
        net = c.cli("network", "create", unique("v6-g-" + mode), "-f", "json")
        c.cli("subnet", "create", "--network", net["id"], "--subnet-range", "10.170.%d.0/24" % i,
              unique("v6-g4"), "-f", "json")
        sub = c.cli("subnet", "create", "--network", net["id"], "--ip-version", "6",
                    "--subnet-range", cidr, "--ipv6-ra-mode", mode, "--ipv6-address-mode", mode,
                    "--dns-nameserver", "fd00:170:%d::53" % i, unique("v6-g6"), "-f", "json")
        c.cli("router", "add", "subnet", router["id"], sub["id"])
        port = dp.port_show(c, c.cli("port", "create", "--network", net["id"], unique("v6-gp"),
                                     "-f", "json")["id"])
        made.append((net, sub, port, cidr, mode))
    addrs = [v6_of(m[2]) for m in made]
    assert ipaddress.ip_address(addrs[0]) in ipaddress.ip_network(made[0][3])
    assert addrs[0] != eui64(made[0][3], made[0][2]["mac_address"])  # from the pool
    assert addrs[1] == eui64(made[1][3], made[1][2]["mac_address"])
    servers = [dp.boot(c, unique("v6-gvm"), m[2]["id"],
                       ping6_script(m[1]["gateway_ip"], addrs[1 - k]))["id"]
               for k, m in enumerate(made)]
    for sid in servers:
        assert wait_status(c, sid)["status"] == "ACTIVE"

    (snet, ssub, sport, scidr, _), (lnet, lsub, lport, lcidr, _) = made
    sid, lid = servers
    m = dp.wait_console_line(c, sid, RA6, timeout=240)
    assert m.groups() == ("yes", "no"), m.group(0)
    print("%s: %s" % (sid, m.group(0)))
    m = dp.wait_console_line(c, sid, r"DHCP6-LEASE addr=(\S+) dns=(\S*) domain=\S* up=\S+")
    assert ipaddress.ip_address(m.group(1)) == ipaddress.ip_address(addrs[0]), m.group(0)
    assert m.group(2) == "fd00:170:4::53", m.group(0)
    print("%s: %s" % (sid, m.group(0)))
    m = dp.wait_console_line(c, sid, r"NET6 addr=(\S+)/(\d+) up=\S+", timeout=60)
    assert ipaddress.ip_address(m.group(1)) == ipaddress.ip_address(addrs[0]), m.group(0)
    assert m.group(2) == "128", m.group(0)  # the prefix is on link by the RA
    assert addrs[0] in dhcp_file(c, snet["id"], "leases")  # dnsmasq's lease

    m = dp.wait_console_line(c, lid, RA6, timeout=240)
    assert m.groups() == ("no", "yes"), m.group(0)
    print("%s: %s" % (lid, m.group(0)))
    m = dp.wait_console_line(c, lid, r"DHCP6-INFO dns=(\S*) domain=\S* up=\S+")
    assert m.group(1) == "fd00:170:5::53", m.group(0)
    print("%s: %s" % (lid, m.group(0)))
    m = dp.wait_console_line(c, lid, r"NET6 addr=(\S+)/(\d+) up=\S+", timeout=60)
    assert ipaddress.ip_address(m.group(1)) == ipaddress.ip_address(addrs[1]), m.group(0)
    assert m.group(2) == "64", m.group(0)
    assert "tag:subnet-%s,option6:dns-server,[fd00:170:5::53]" % lsub["id"] in dhcp_file(
        c, lnet["id"], "opts")

    for k, sid_ in enumerate(servers):
        for peer in (made[k][1]["gateway_ip"], addrs[1 - k]):
            m = dp.wait_console_line(c, sid_, r"PEER-PING6 %s (OK|FAILED).*" % re.escape(peer),
                                     timeout=180)
            assert m.group(1) == "OK", dp.console(c, sid_)[-2000:]
            print("%s: %s" % (sid_, m.group(0)))
    print("DHCPv6 stateful and stateless guests pinging each other %.1f s after the "
          "networks were made" % (time.time() - t0))

    # the stateful port's real lease goes with the port
    c.cli("server", "delete", "--wait", *servers)
    dpid = dnsmasq_pid(c.state_dir, snet["id"])
    for net, sub, port, cidr, mode in made:
        c.cli("port", "delete", port["id"])
    dp.wait_for("the stateful port's lease dropped", lambda: addrs[0] not in dhcp_file(
        c, snet["id"], "leases") and dnsmasq_pid(c.state_dir, snet["id"]) not in (None, dpid))
    for net, sub, *_ in made:
        c.cli("router", "remove", "subnet", router["id"], sub["id"])
    c.cli("router", "delete", router["id"])
    for net, *_ in made:
        c.cli("network", "delete", net["id"])


def check_dhcpv6_modes(c):
    """For dhcpv6-stateful and dhcpv6-stateless (test_dhcpv6_guests boots
    guests on them) what the agent renders is checked: radvd's M flag and
    non-autonomous prefix, resp. O flag and autonomous prefix, and
    dnsmasq's DHCPv6 ranges; a stateful port's
    address comes from the pool, a stateless one's is EUI-64, and a DHCPv6
    lease of the stateful port goes with the port. (Called while
    the SLAAC guests boot.)"""
    router = c.cli("router", "create", unique("v6-r2"), "-f", "json")
    made = []
    for cidr, mode in (("fd00:170:2::/64", "dhcpv6-stateful"),
                       ("fd00:170:3::/64", "dhcpv6-stateless")):
        net = c.cli("network", "create", unique("v6-" + mode), "-f", "json")
        sub = c.cli("subnet", "create", "--network", net["id"], "--ip-version", "6",
                    "--subnet-range", cidr, "--ipv6-ra-mode", mode, "--ipv6-address-mode",
                    mode, unique("v6-s"), "-f", "json")
        c.cli("router", "add", "subnet", router["id"], sub["id"])
        port = dp.port_show(c, c.cli("port", "create", "--network", net["id"],
                                     unique("v6-p"), "-f", "json")["id"])
        made.append((net, sub, port, cidr, mode))
    stateful = made[0][2]
    assert ipaddress.ip_address(v6_of(stateful)) in ipaddress.ip_network("fd00:170:2::/64")
    assert v6_of(stateful) != eui64("fd00:170:2::/64", stateful["mac_address"])  # the pool's
    assert v6_of(made[1][2]) == eui64("fd00:170:3::/64", made[1][2]["mac_address"])
    pid = dp.wait_for("radvd of the router", lambda: radvd_pid(c.state_dir, router["id"]))
    rdir = glob.glob(os.path.join(c.state_dir, "network-agent", "*", "l3", router["id"]))[0]

    def both_blocks():
        conf = open(os.path.join(rdir, "radvd.conf")).read()
        return conf if conf.count("interface qr-") == 2 else None
    conf = dp.wait_for("both interfaces in radvd.conf", both_blocks)
    blocks = {b.split("\n", 1)[0]: b for b in conf.split("interface ")[1:]}
    for net, sub, port, cidr, mode in made:
        qr = [b for b in blocks.values() if "prefix " + cidr in b]
        assert len(qr) == 1, conf
        b = qr[0]
        if mode == "dhcpv6-stateful":
            assert "AdvManagedFlag on;" in b and "AdvOtherConfigFlag" not in b, b
            assert "AdvAutonomous off;" in b, b
        else:
            assert "AdvOtherConfigFlag on;" in b and "AdvManagedFlag" not in b, b
            assert "AdvAutonomous on;" in b, b
        cmd = dp.wait_for("dnsmasq of " + mode, lambda: (lambda f: open(f).read() if f else None)(
            (glob.glob(os.path.join(c.state_dir, "network-agent", "*", "dhcp", net["id"],
                                    "cmdline")) or [None])[0]))
        assert "--dhcp-range=set:subnet-%s,%s,static,64," % (sub["id"], cidr.split("/")[0]) \
            in cmd, cmd
    assert radvd_pid(c.state_dir, router["id"]) == pid  # reloaded, not restarted
    # a DHCPv6 lease (keyed by IAID and DUID) of the stateful port, written
    # as dnsmasq writes it (no guest here): when the port goes, its dnsmasq
    # is restarted without it
    snet = made[0][0]["id"]
    dpid = dp.wait_for("dnsmasq of dhcpv6-stateful", lambda: dnsmasq_pid(c.state_dir, snet))
    leases = glob.glob(os.path.join(c.state_dir, "network-agent", "*", "dhcp", snet, "leases"))[0]
    duid = "" if "duid " in open(leases).read() else "duid 00:01:00:01:2e:9a:6b:1c\n"
    with open(leases, "a") as f:
        f.write("%s4102444800 1041 %s * 00:03:00:01:%s\n"
                % (duid, v6_of(stateful), stateful["mac_address"]))
    # a radvd killed by hand is back within the agent's resync
    os.kill(pid, 9)
    dp.wait_for("radvd restarted", lambda: radvd_pid(c.state_dir, router["id"]) not in (None, pid),
                timeout=20)
    for net, sub, port, cidr, mode in made:
        c.cli("router", "remove", "subnet", router["id"], sub["id"])
        c.cli("port", "delete", port["id"])
    dp.wait_for("the stateful port's lease dropped", lambda: v6_of(stateful) not in open(
        leases).read() and dnsmasq_pid(c.state_dir, snet) not in (None, dpid))
    dp.wait_for("radvd stopped", lambda: radvd_pid(c.state_dir, router["id"]) is None)
    c.cli("router", "delete", router["id"])
    for net, *_ in made:
        c.cli("network", "delete", net["id"])

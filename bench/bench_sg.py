#!/usr/bin/python3
"""Security groups of the network agent: time from a rule change to it being
in force, with N (default 100) filtered ports on the host.

The state is synthetic (N ports over 10 bridges, 5 groups of 12 rules with a
remote group each) but two of its ports are real: network namespaces
wired to a real bridge by veths named as the ports' taps. A change is: the
agent's renderer (build/tests/unit/sg_render_tool, the code na_sg_sync
runs) turns the state into the nft script, `nft -f -` loads it in one
transaction, then one ping between the two real ports shows the rule is in
force (ICMP allowed) or not (ICMP removed). Prints figures; asserts only
that the rules did what they say. Needs root and nft. Everything it makes
is named ntsgb*/nubo_*_ntsgbnch and removed at the end.

Usage: /usr/bin/python3 bench/bench_sg.py [--ports N] [--runs R] [--build DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

TAG = "ntsgbnch"
BR = "ntsgbbr0"
NS = ["ntsgb-a", "ntsgb-b"]
IPS = ["203.0.113.74", "203.0.113.75"]


def sh(*args, check=True, **kw):
    return subprocess.run(args, check=check, capture_output=True, text=True, **kw)


def up():
    sh("ip", "link", "add", BR, "type", "bridge", "stp_state", "0", check=False)
    sh("ip", "link", "set", BR, "up")
    for i, ns in enumerate(NS):
        sh("ip", "netns", "add", ns, check=False)
        sh("ip", "link", "add", "ntsgbtap%d" % i, "type", "veth", "peer", "name", "eth0",
           "netns", ns, check=False)
        sh("ip", "link", "set", "ntsgbtap%d" % i, "master", BR, "up")
        sh("ip", "-n", ns, "link", "set", "eth0", "address", "fa:16:3e:77:00:%02x" % i)
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "addr", "replace", IPS[i] + "/28", "dev", "eth0")


def down():
    for i, ns in enumerate(NS):
        sh("ip", "link", "del", "ntsgbtap%d" % i, check=False)
        sh("ip", "netns", "del", ns, check=False)
    sh("ip", "link", "del", BR, check=False)
    sh("nft", "delete", "table", "bridge", "nubo_port_" + TAG, check=False)
    sh("nft", "delete", "table", "inet", "nubo_sg_" + TAG, check=False)


def rule(rid, direction, **kw):
    r = {"id": rid, "direction": direction, "ethertype": "IPv4", "protocol": None,
         "port_range_min": None, "port_range_max": None, "remote_ip_prefix": None,
         "remote_group_id": None}
    r.update(kw)
    return r


def state(nports, icmp):
    groups = []
    for g in range(5):
        gid = "5e000000-0000-4000-8000-%012d" % g
        rules = [rule("e%d" % g, "egress"), rule("g%d" % g, "ingress", remote_group_id=gid)]
        for k in range(10):
            rules.append(rule("t%d-%d" % (g, k), "ingress", protocol="tcp",
                              port_range_min=1000 + k * 10, port_range_max=1005 + k * 10,
                              remote_ip_prefix="198.51.100.%d/32" % k))
        if icmp and g == 0:
            rules.append(rule("icmp", "ingress", protocol="icmp"))
        groups.append({"id": gid, "stateful": True, "rules": rules, "members": []})
    nets, ports = [], []
    for n in range(10):
        nets.append({"id": "net%d" % n, "bridge": BR if n == 0 else "ntsgbbrx%d" % n})
    for p in range(nports):
        real = p < 2
        ip = IPS[p] if real else "10.%d.%d.%d" % (p % 10, p // 250, p % 250 + 2)
        g = 0 if real else p % 5
        groups[g]["members"].append(ip)
        ports.append({
            "id": "p%07d-0000-4000-8000-000000000000" % p,
            "network_id": "net0" if real else "net%d" % (p % 10),
            "tap": "ntsgbtap%d" % p if real else "ntsgbtx%05d" % p,
            "mac": "fa:16:3e:77:%02x:%02x" % (p // 256, p % 256),
            "port_security_enabled": True,
            "fixed_ips": [{"ip_address": ip}],
            "security_groups": [groups[g]["id"]],
            "allowed_address_pairs": [],
        })
    # the two real ports: different groups, so only the ICMP rule lets b ping a
    ports[1]["security_groups"] = [groups[1]["id"]]
    groups[0]["members"].remove(IPS[1])
    groups[1]["members"].append(IPS[1])
    return {"networks": nets, "ports": ports, "security_groups": groups}


def ping_ok():
    r = sh("ip", "netns", "exec", NS[1], "busybox", "ping", "-c", "1", "-W", "1", IPS[0],
           check=False)
    return r.returncode == 0


def change(tool, st):
    """One rule change: render + nft -f; returns (render s, nft s, bytes)."""
    t0 = time.monotonic()
    script = sh(tool, "-", TAG, input=json.dumps(st)).stdout
    t1 = time.monotonic()
    sh("nft", "-f", "-", input=script)
    t2 = time.monotonic()
    return t1 - t0, t2 - t1, len(script)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ports", type=int, default=100)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--build", default=os.environ.get("NUBO_BUILD", "build"))
    a = ap.parse_args()
    tool = os.path.join(a.build, "tests", "unit", "sg_render_tool")
    if not os.access(tool, os.X_OK):
        sys.exit("no %s: ninja -C %s" % (tool, a.build))
    down()
    up()
    try:
        change(tool, state(a.ports, False))
        assert not ping_ok(), "ICMP passed without a rule"
        add, rm, size = [], [], 0
        for _ in range(a.runs):
            r, n, size = change(tool, state(a.ports, True))
            t_in = time.monotonic()
            assert ping_ok(), "ICMP blocked after the rule was added"
            add.append((r, n, time.monotonic() - t_in))
            r, n, size = change(tool, state(a.ports, False))
            assert not ping_ok(), "ICMP passed after the rule was removed"
            rm.append((r, n))
        rules = sh("nft", "-a", "list", "table", "inet", "nubo_sg_" + TAG).stdout.count("\n")
        print("security groups, %d filtered ports, script %d bytes, inet table %d lines, %d runs"
              % (a.ports, size, rules, a.runs))
        for name, rows in (("add ICMP rule", add), ("remove ICMP rule", rm)):
            tot = [x[0] + x[1] for x in rows]
            print("  %-17s render median %.1f ms, nft -f median %.1f ms, change in force "
                  "median %.1f ms, max %.1f ms"
                  % (name, 1000 * statistics.median(x[0] for x in rows),
                     1000 * statistics.median(x[1] for x in rows),
                     1000 * statistics.median(tot), 1000 * max(tot)))
        print("  first ping after the add answered in median %.1f ms"
              % (1000 * statistics.median(x[2] for x in add)))
    finally:
        down()


if __name__ == "__main__":
    main()

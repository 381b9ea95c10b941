"""The metadata path of the real data plane, as a guest without a config
drive sees it: DHCP from dnsmasq in qdhcp-<net> (option 121 routes
169.254.169.254 to the DHCP port), the network agent's metadata proxy on
169.254.169.254:80 in that namespace, the metadata API behind it.

Two TCG guests on one tenant network (203.0.113.32/28) of one libvirt
cloud. The test guest (tests/images) prints what it did on its console
(METADATA source=http ..., HOSTNAME, SSH-KEY, USER-DATA rc=...); its user
data script prints what it fetches itself, among it a request with the
forged identity headers of the other instance, which must still answer its
own document. The metadata API itself refuses a bad signature (403)."""
import os
import re
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import NUBO_BIN, unique
from dataplane import (dataplane_unavailable, in_netns, make_network, start_dataplane_cloud,
                       stop_dataplane_cloud)
from test_libvirt import api, console, wait_console, wait_status

_why = dataplane_unavailable()
pytestmark = pytest.mark.skipif(bool(_why), reason=_why or "")

CIDR = "203.0.113.32/28"


@pytest.fixture(scope="module")
def dpcloud():
    c = start_dataplane_cloud("dpmd")
    net, _ = make_network(c, unique("ntguest-md"), CIDR, "203.0.113.33")
    c.net_id = net["id"]
    c.cli("keypair", "create", "--public-key", write_key(c), "ntguest-key", "-f", "json")
    # both guests boot at once: B knows A's id from A's create
    c.name_a, c.name_b = unique("ntg-a"), unique("ntg-b")
    a = create(c, c.name_a, UD % {"other": "00000000-0000-4000-8000-000000000000",
                                  "other_project": "x", "sig": "0" * 64})
    b = create(c, c.name_b, UD % {"other": a["id"], "other_project": a["project"],
                                  "sig": "f" * 64})
    c.server_a, c.server_b = wait_active(c, a), wait_active(c, b)
    yield c
    assert stop_dataplane_cloud(c) == 0, c.tail()


def write_key(c):
    c.key = os.path.join(c.state_dir, "ntguest-key")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ntguest@e2e", "-f",
                    c.key], check=True, timeout=30)
    return c.key + ".pub"


def create(c, name, user_data):
    path = os.path.join(c.state_dir, name + ".ud")
    with open(path, "w") as f:
        f.write(user_data)
    s = c.cli("server", "create", "--flavor", "m1.tiny", "--image", c.image_id,
              "--network", c.net_id, "--key-name", "ntguest-key", "--user-data", path,
              name, "-f", "json")
    st, data = api(c, "GET", "/servers/%s" % s["id"])
    s["project"] = data["server"]["tenant_id"]
    return s


def wait_active(c, s):
    got = wait_status(c, s["id"], timeout=180)
    assert got["status"] == "ACTIVE", got
    s.update(got)
    return s


UD = """#!/bin/sh
md=http://169.254.169.254/openstack/latest
echo "UD-OWN $(timeout 10 wget -q -O - $md/meta_data.json | tr -d '\\n' | sed 's/.*"uuid": *"\\([^"]*\\)".*/\\1/')"
echo "UD-FORGED $(timeout 10 wget -q -O - --header 'X-Instance-ID: %(other)s' \\
    --header 'X-Tenant-ID: %(other_project)s' --header 'X-Instance-ID-Signature: %(sig)s' \\
    --header 'X-Forwarded-For: 203.0.113.46' $md/meta_data.json | tr -d '\\n' | \\
    sed 's/.*"uuid": *"\\([^"]*\\)".*/\\1/')"
echo "UD-NETDATA $(timeout 10 wget -q -O - $md/network_data.json | tr -d '\\n' | head -c 400)"
exit 0
"""


def test_guest_without_config_drive_reads_metadata_through_the_proxy(dpcloud):
    c = dpcloud
    name_a, a = c.name_a, c.server_a
    text = wait_console(c, a["id"], r"USER-DATA rc=\d+", timeout=180)
    lease = re.search(r"DHCP-LEASE ip=(\S+) mask=28 router=\S* mtu=(\d*) ", text)
    assert lease and lease.group(1).startswith("203.0.113."), text
    assert re.search(r"NET-UP .*169\.254\.169\.254 via 203\.0\.113\.", text), text
    assert "METADATA source=http uuid=%s hostname=%s" % (a["id"], name_a) in text, text
    assert "HOSTNAME %s source=metadata" % name_a in text, text
    assert "SSH-KEY n=1" in text, text
    assert "UD-OWN %s" % a["id"] in text, text
    assert "USER-DATA rc=0" in text, text
    # network_data.json from network_info: the port's MAC, DHCP on network0
    nd = re.search(r"UD-NETDATA (.*)", text).group(1)
    assert '"type": "ipv4_dhcp"' in nd and '"network_id": "%s"' % c.net_id in nd, nd


def test_ssh_with_the_key_the_metadata_gave(dpcloud):
    """From the network's DHCP namespace (the one place on the host with an
    address on the tenant network), as an operator would."""
    c = dpcloud
    a = c.server_a
    text = wait_console(c, a["id"], r"SSHD up port=22", timeout=180)
    # the default group lets in only its own members: open SSH, as the
    # runbooks (and Tempest's validation resources) do
    port = c.cli("port", "list", "--server", a["id"], "-f", "json")[0]
    port = c.cli("port", "show", port["ID"], "-f", "json")
    groups = port.get("security_group_ids") or port.get("security_groups")
    c.cli("security", "group", "rule", "create", "--ingress", "--protocol", "tcp",
          "--dst-port", "22", groups[0], "-f", "json")
    ip = re.search(r"DHCP-LEASE ip=(\S+) ", text).group(1)
    cmd = ["ssh", "-i", c.key, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
           "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10",
           "-o", "LogLevel=ERROR", "root@" + ip, "hostname; grep -c ^processor /proc/cpuinfo"]
    out = None
    for _ in range(10):
        p = in_netns("qdhcp-" + c.net_id, *cmd, check=False)
        if p.returncode == 0:
            out = p.stdout.split()
            break
        time.sleep(1)
    assert out, (p.stderr, console(c, a["id"])[-3000:])
    assert out[0] == a["name"], out  # what Tempest's test_host_name_is_same_as_server_name checks
    assert out[1] == "1", out        # m1.tiny: one vCPU (test_verify_created_server_vcpus)


def test_forged_identity_headers_get_the_guests_own_document(dpcloud):
    c = dpcloud
    a, b = c.server_a, c.server_b
    text = wait_console(c, b["id"], r"USER-DATA rc=\d+", timeout=180)
    assert "UD-OWN %s" % b["id"] in text, text
    # the proxy drops what the guest sent: B still gets B's document
    forged = re.search(r"UD-FORGED (.*)", text).group(1)
    assert forged == b["id"] and a["id"] not in forged, text


def test_metadata_api_refuses_a_bad_signature(dpcloud):
    c = dpcloud
    a = c.server_a
    port = c.port + 1  # the all-in-one puts the metadata API next to the API
    req = urllib.request.Request(
        "http://127.0.0.1:%d/openstack/latest/meta_data.json" % port,
        headers={"X-Instance-ID": a["id"], "X-Tenant-ID": a["project"],
                 "X-Instance-ID-Signature": "0" * 64, "X-Forwarded-For": "203.0.113.40"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 403
    assert "Invalid proxy request signature." in e.value.read().decode()


def test_doctor_shows_the_network_path(dpcloud):
    c = dpcloud
    a = c.server_a
    p = subprocess.run([NUBO_BIN, "doctor", "server", a["id"], "--config",
                        os.path.join(c.state_dir, "nubo.conf")],
                       capture_output=True, text=True, timeout=120)
    out = p.stdout
    assert "AddressSanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    port = c.cli("port", "list", "--server", a["id"], "-f", "json")[0]
    tap, bridge = "tap" + port["ID"][:11], "brq" + c.net_id[:11]
    assert re.search(r"\[OK\] port %s: %s .*status=ACTIVE .*binding:vif_type=bridge" %
                     (port["ID"][:8], port["ID"]), out), out
    assert "[OK] host state: the network service sends host" in out, out
    assert re.search(r"\[OK\] tap: %s on %s, mtu \d+" % (tap, bridge), out), out
    assert re.search(r"\[OK\] dhcp: namespace qdhcp-%s present; \S+/host has \"%s," %
                     (c.net_id, port["MAC Address"]), out), out
    assert re.search(r"\[OK\] metadata: egress to 169\.254\.169\.254:80 is allowed by rule \S+ of "
                     r"group default ", out), out
    assert re.search(r"\[OK\] dhcp rules: bridge from_%s: \"ip saddr 0\.0\.0\.0 ip daddr "
                     r"255\.255\.255\.255 udp sport 68 udp dport 67 accept.*; inet egress_%s: "
                     r"\".*udp sport 68 udp dport 67 return.*; inet ingress_%s: \".*udp sport 67 "
                     r"udp dport 68 accept" % (tap, tap, tap), out), out
    assert "[PROBLEM]" not in out, out

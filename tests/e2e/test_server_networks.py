"""Servers on networks: the conductor's networking step allocates ports of the
Networking service (Nova's allocate_for_instance), instance_info_caches keeps
their network_info, the server view's "addresses" shows them, `server list
--ip` filters on them, delete releases them, and neither a full network, a
reschedule nor a kill during boots leaves a port behind. Driven with the real
`openstack` CLI against a private all-in-one (the seeded shared network is
the only shared one, so "auto" has exactly one choice)."""
import concurrent.futures
import json
import signal
import time

import pytest

from conftest import Cloud, free_port, unique


@pytest.fixture(scope="module")
def nc(tmp_path_factory):
    c = Cloud(tmp_path_factory.mktemp("netaio"), free_port(),
              ("--set", "quota.instances=200", "--set", "quota.cores=400",
               "--set", "quota.ram=409600"))
    c.start()
    yield c
    c.stop()


def boot(c, *extra, wait=True, check=True, cloud="nubo", mv=None):
    args = ["server", "create", "--flavor", "m1.tiny", "--image", "cirros"]
    if mv:  # --nic none/auto need 2.37
        args = ["--os-compute-api-version", mv] + args
    if wait:
        args.append("--wait")
    args += list(extra) + [unique("ns"), "-f", "json"]
    return c.cli(*args, check=check, cloud=cloud)


def addresses(c, sid, cloud="nubo"):
    """{label: [addr…]} as `server show -c addresses` prints it."""
    a = c.cli("server", "show", sid, "-c", "addresses", "-f", "json", cloud=cloud)["addresses"]
    if isinstance(a, str):  # older OSC: "net=10.0.0.3, 10.0.0.4; other=…"
        out = {}
        for part in filter(None, (p.strip() for p in a.split(";"))):
            label, ips = part.split("=", 1)
            out[label] = [ip.strip() for ip in ips.split(",")]
        return out
    return a


def ports_of(c, sid, cloud="nubo"):
    return c.cli("port", "list", "--server", sid, "-f", "json", cloud=cloud)


def make_net(c, cidr, *subnet_args):
    name = unique("net")
    net = c.cli("network", "create", name, "-f", "json")
    c.cli("subnet", "create", "--network", name, "--subnet-range", cidr, *subnet_args,
          name + "-sub", "-f", "json")
    return net


def compute_ports(c):
    return c.sql("SELECT id, device_id, binding_host_id FROM ports WHERE device_owner LIKE "
                 "'compute:%'")


def test_auto_uses_the_one_shared_network(nc):
    # the demo project owns no network and one is shared
    nets = nc.cli("network", "list", "--share", "-f", "json", cloud="nubo-demo")
    assert len(nets) == 1, nets
    label = nets[0]["Name"]
    s = boot(nc, cloud="nubo-demo")
    assert s["status"] == "ACTIVE"
    addrs = addresses(nc, s["id"], cloud="nubo-demo")
    assert list(addrs) == [label] and len(addrs[label]) == 1
    ports = ports_of(nc, s["id"], cloud="nubo-demo")
    assert len(ports) == 1 and ports[0]["Status"] == "ACTIVE"
    # the runbook's SQL, verbatim, with sqlite3
    rows = nc.sql("SELECT network_info FROM instance_info_caches WHERE instance_uuid='%s'"
                  % s["id"])
    nw = json.loads(rows[0]["network_info"])
    assert [v["id"] for v in nw] == [ports[0]["ID"]]
    assert nw[0]["network"]["label"] == label
    assert nw[0]["address"] == ports[0]["MAC Address"]
    assert nw[0]["network"]["subnets"][0]["ips"][0]["address"] == addrs[label][0]


def test_addresses_view_keys(nc):
    s = boot(nc, "--network", "private")
    tok = nc.token()
    st, _, body = nc.request("GET", "/compute/v2.1/servers/%s" % s["id"], token=tok)
    assert st == 200
    (label, ips), = body["server"]["addresses"].items()
    port = ports_of(nc, s["id"])[0]
    assert ips == [{"version": 4, "addr": ips[0]["addr"], "OS-EXT-IPS:type": "fixed",
                    "OS-EXT-IPS-MAC:mac_addr": port["MAC Address"]}]
    st, _, body = nc.request("GET", "/compute/v2.1/servers/detail", token=tok)
    mine = [x for x in body["servers"] if x["id"] == s["id"]][0]
    assert mine["addresses"] == {label: ips}


def test_nic_net_id_and_network_name(nc):
    net = make_net(nc, "10.20.0.0/24")
    s1 = boot(nc, "--nic", "net-id=%s" % net["id"])
    s2 = boot(nc, "--network", net["name"])
    for s in (s1, s2):
        a = addresses(nc, s["id"])
        assert list(a) == [net["name"]] and a[net["name"]][0].startswith("10.20.0.")
        ports = ports_of(nc, s["id"])
        assert len(ports) == 1
        p = nc.cli("port", "show", ports[0]["ID"], "-f", "json")
        assert p["device_id"] == s["id"] and p["device_owner"] == "compute:nova"
        assert p["binding_host_id"] == nc.cli("server", "show", s["id"], "-f", "value", "-c",
                                              "OS-EXT-SRV-ATTR:host").strip()


def test_security_groups_reach_the_ports_and_os_interface_lists_them(nc):
    """A server created with --security-group gets its ports in those groups
    (not the project's default one), as Nova passes them to Neutron; the
    ports are what GET /servers/{id}/os-interface lists."""
    sg = nc.cli("security", "group", "create", unique("nsg"), "-f", "json")
    s = boot(nc, "--security-group", sg["id"], "--network", "private")
    (port,) = ports_of(nc, s["id"])
    p = nc.cli("port", "show", port["ID"], "-f", "json")
    assert p["security_group_ids"] == [sg["id"]], p
    tok = nc.token()
    st, _, body = nc.request("GET", "/compute/v2.1/servers/%s/os-interface" % s["id"], token=tok)
    assert st == 200, body
    (att,) = body["interfaceAttachments"]
    assert att["port_id"] == port["ID"] and att["net_id"] == p["network_id"]
    assert att["mac_addr"] == p["mac_address"]
    assert [f["ip_address"] for f in att["fixed_ips"]] == [
        f["ip_address"] for f in p["fixed_ips"]]
    st, _, one = nc.request("GET", "/compute/v2.1/servers/%s/os-interface/%s" % (s["id"],
                                                                              port["ID"]), token=tok)
    assert (st, one) == (200, {"interfaceAttachment": att})
    st, _, _ = nc.request("GET", "/compute/v2.1/servers/%s/os-interface/%s" % (s["id"],
                                                                            unique("p")), token=tok)
    assert st == 404
    # an unknown group fails the boot (400 from the API, or the server in ERROR)
    bad = boot(nc, "--security-group", unique("nosuch"), "--network", "private", check=False)
    assert bad.returncode != 0, bad.stdout


def test_add_remove_security_group_and_the_proxy_until_2_35(nc):
    """`openstack server add/remove security group` (Nova's addSecurityGroup
    and removeSecurityGroup actions) change the groups of the server's
    ports; GET /servers/{id}/os-security-groups and the server view list
    them; the os-security-groups proxy answers up to 2.35 and 404s from
    2.36, where Nova removed it; a create naming an unknown group is a 400."""
    sg = nc.cli("security", "group", "create", unique("asg"), "-f", "json")
    s = boot(nc, "--network", "private")
    (port,) = ports_of(nc, s["id"])
    default = nc.cli("port", "show", port["ID"], "-f", "json")["security_group_ids"]
    nc.cli("server", "add", "security", "group", s["id"], sg["name"])
    p = nc.cli("port", "show", port["ID"], "-f", "json")
    assert p["security_group_ids"] == default + [sg["id"]], p
    tok = nc.token()
    st, _, body = nc.request("GET", "/compute/v2.1/servers/%s/os-security-groups" % s["id"],
                             token=tok)
    assert st == 200 and sg["id"] in [g["id"] for g in body["security_groups"]], body
    st, _, body = nc.request("GET", "/compute/v2.1/servers/%s" % s["id"], token=tok)
    assert {"name": sg["name"]} in body["server"]["security_groups"], body
    nc.cli("server", "remove", "security", "group", s["id"], sg["name"])
    assert nc.cli("port", "show", port["ID"], "-f", "json")["security_group_ids"] == default
    again = nc.cli("server", "remove", "security", "group", s["id"], sg["name"], check=False)
    assert again.returncode != 0
    st, _, body = nc.request("POST", "/compute/v2.1/servers/%s/action" % s["id"], token=tok,
                             body={"removeSecurityGroup": {"name": sg["name"]}})
    assert (st, body["itemNotFound"]["message"]) == (
        404, "Security group %s not associated with the instance %s" % (sg["name"], s["id"]))
    for mv, want in (("2.35", 200), ("2.36", 404)):
        h = {"OpenStack-API-Version": "compute " + mv}
        st, _, body = nc.request("GET", "/compute/v2.1/os-security-groups", token=tok, headers=h)
        assert st == want, (mv, body)
        st, _, body = nc.request("GET", "/compute/v2.1/os-security-groups/" + sg["id"],
                                 token=tok, headers=h)
        assert st == want, (mv, body)
    assert body == {"itemNotFound": {"code": 404, "message": "The resource could not be found."}}
    nosuch = unique("nosuch")
    st, _, body = nc.request("POST", "/compute/v2.1/servers", token=tok, body={"server": {
        "name": unique("ns"), "flavorRef": "1",
        "imageRef": nc.cli("image", "show", "cirros", "-f", "json")["id"],
        "security_groups": [{"name": nosuch}]}})
    assert (st, body["badRequest"]["message"]) == (
        400, "Unable to find security_group with name or id '%s'" % nosuch), body


def test_network_without_port_security_boots_without_groups(nc):
    """Tempest's test_boot_into_disabled_port_security_network_without_secgroup:
    on a network with port security off, a server that names no group (the
    API records "default", which Nova drops before asking Neutron) gets a
    port without security groups instead of a failed build; a port made on
    it without port_security_enabled inherits the network's and no group."""
    name = unique("sd-nops")
    net = nc.cli("network", "create", "--disable-port-security", name, "-f", "json")
    nc.cli("subnet", "create", "--network", name, "--subnet-range", "10.190.7.0/24",
           name + "-sub", "-f", "json")
    s = boot(nc, "--network", net["id"])
    (port,) = ports_of(nc, s["id"])
    p = nc.cli("port", "show", port["ID"], "-f", "json")
    assert p["port_security_enabled"] is False and p["security_group_ids"] == [], p
    p = nc.cli("port", "create", "--network", net["id"], unique("sd-p"), "-f", "json")
    assert p["port_security_enabled"] is False and p["security_group_ids"] == [], p


def test_nic_none(nc):
    s = boot(nc, "--nic", "none", mv="2.37")
    assert addresses(nc, s["id"]) == {}
    assert ports_of(nc, s["id"]) == []


def test_list_filtered_by_ip(nc):
    net = make_net(nc, "10.40.0.0/24")
    s = boot(nc, "--nic", "net-id=%s" % net["id"])
    ip = addresses(nc, s["id"])[net["name"]][0]
    exact = nc.cli("server", "list", "--ip", ip.replace(".", "\\.") + "$", "-f", "json")
    assert [x["ID"] for x in exact] == [s["id"]]
    regex = nc.cli("server", "list", "--ip", "10.40.", "-f", "json")
    assert s["id"] in [x["ID"] for x in regex]
    assert nc.cli("server", "list", "--ip", "10.99.", "-f", "json") == []


def test_delete_releases_ports_and_keeps_user_port(nc):
    net = make_net(nc, "10.50.0.0/24")
    port = nc.cli("port", "create", "--network", net["id"], unique("p"), "-f", "json")
    s = boot(nc, "--nic", "port-id=%s" % port["id"], "--nic", "net-id=%s" % net["id"])
    ports = ports_of(nc, s["id"])
    assert len(ports) == 2 and port["id"] in [p["ID"] for p in ports]
    other = [p["ID"] for p in ports if p["ID"] != port["id"]][0]
    assert len(addresses(nc, s["id"])[net["name"]]) == 2
    nc.cli("server", "delete", "--wait", s["id"])
    kept = nc.cli("port", "show", port["id"], "-f", "json")
    assert kept["device_id"] == "" and kept["device_owner"] == "" and kept["binding_host_id"] == ""
    gone = nc.cli("port", "show", other, check=False)
    assert gone.returncode != 0
    assert nc.sql("SELECT id FROM ports WHERE device_id = '%s'" % s["id"]) == []
    # the kept port can be used again
    s2 = boot(nc, "--nic", "port-id=%s" % port["id"])
    assert [p["ID"] for p in ports_of(nc, s2["id"])] == [port["id"]]


def test_full_network_gives_clear_fault(nc):
    net = make_net(nc, "10.60.0.0/29", "--allocation-pool", "start=10.60.0.2,end=10.60.0.2")
    ok = boot(nc, "--nic", "net-id=%s" % net["id"])
    assert ok["status"] == "ACTIVE"
    before = len(compute_ports(nc))
    boot(nc, "--nic", "net-id=%s" % net["id"], check=False)
    bad = [x for x in nc.cli("server", "list", "-f", "json", "--status", "ERROR")]
    assert len(bad) == 1
    s = nc.cli("server", "show", bad[0]["ID"], "-f", "json")
    fault = s["fault"]
    if isinstance(fault, str):
        fault = json.loads(fault.replace("'", '"')) if fault.startswith("{") else {"message": fault}
    assert fault["message"] == (
        "Build of instance %s aborted: Failed to allocate the network(s) with error No fixed IP "
        "addresses available for network: %s, not rescheduling." % (s["id"], net["id"]))
    assert "No more IP addresses available on network %s" % net["id"] in fault.get("details", "")
    assert s["OS-EXT-SRV-ATTR:host"] is None
    assert ports_of(nc, s["id"]) == [] and len(compute_ports(nc)) == before
    cache = nc.sql("SELECT network_info FROM instance_info_caches WHERE instance_uuid = '%s'"
                   % s["id"])
    assert cache in ([], [{"network_info": "[]"}])
    assert nc.sql("SELECT COUNT(*) AS n FROM allocations WHERE consumer_id = '%s'"
                  % s["id"])[0]["n"] == 0
    ev = nc.sql("SELECT e.event, e.result FROM instance_actions_events e JOIN instance_actions a "
                "ON a.id = e.action_id WHERE a.instance_uuid = '%s'" % s["id"])
    assert {"event": "compute_networking", "result": "Error"} in ev
    nc.cli("server", "delete", "--wait", s["id"])
    nc.cli("server", "delete", "--wait", ok["id"])


def test_reschedule_rebinds_ports(fresh_cloud):
    c = fresh_cloud("--set", "fake.fail_spawn_hosts=fake-1,fake-2",
                    "--set", "filter_scheduler.ram_weight_multiplier=1.0")
    ids = [boot(c, "--network", "private")["id"] for _ in range(3)]
    for sid in ids:
        s = c.cli("server", "show", sid, "-f", "json")
        assert s["status"] == "ACTIVE" and s["OS-EXT-SRV-ATTR:host"] == "fake-3"
        rows = c.sql("SELECT binding_host_id FROM ports WHERE device_id = '%s'" % sid)
        assert rows == [{"binding_host_id": "fake-3"}]
        nw = json.loads(c.sql("SELECT network_info FROM instance_info_caches WHERE "
                              "instance_uuid = '%s'" % sid)[0]["network_info"])
        assert [v["id"] for v in nw] == [p["ID"] for p in ports_of(c, sid)]
    assert len(compute_ports(c)) == 3


def test_kill_during_boots_leaks_no_port(fresh_cloud):
    c = fresh_cloud("--set", "fake.spawn_delay_ms=300")
    tok = c.token()
    image = c.cli("image", "show", "cirros", "-f", "value", "-c", "id").strip()
    net = c.cli("network", "show", "private", "-f", "value", "-c", "id").strip()
    hdr = {"OpenStack-API-Version": "compute 2.37"}

    def create(i):
        return c.request("POST", "/compute/v2.1/servers", {"server": {
            "name": "k%d" % i, "flavorRef": "1", "imageRef": image,
            "networks": [{"uuid": net}]}}, token=tok, headers=hdr)
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(create, i) for i in range(20)]
        time.sleep(0.5)
        c.proc.send_signal(signal.SIGKILL)
        c.proc.wait()
        for f in futs:
            try:
                f.result()
            except Exception:
                pass
    # a deleted instance whose ports outlived it (as after a crash between
    # the two): the restart releases them
    victim = c.sql("SELECT device_id FROM ports WHERE device_owner LIKE 'compute:%' LIMIT 1")
    if victim:
        c.sql("UPDATE instances SET deleted = id, vm_state = 'deleted' WHERE uuid = '%s'"
              % victim[0]["device_id"])
    c.start()
    deadline = time.time() + 60
    while time.time() < deadline:
        if not c.sql("SELECT uuid FROM instances WHERE deleted = 0 AND vm_state = 'building'"):
            break
        time.sleep(0.3)
    time.sleep(1)
    leaked = c.sql("SELECT p.id, p.device_id FROM ports p LEFT JOIN instances i ON i.uuid = "
                   "p.device_id AND i.deleted = 0 WHERE p.device_owner LIKE 'compute:%' AND "
                   "(i.uuid IS NULL OR (i.vm_state = 'error' AND i.host IS NULL))")
    assert leaked == []
    # each live server has exactly the ports its cache names, bound to its host
    for r in c.sql("SELECT uuid, host FROM instances WHERE deleted = 0 AND vm_state = 'active'"):
        ports = c.sql("SELECT id, binding_host_id FROM ports WHERE device_id = '%s'" % r["uuid"])
        nw = json.loads(c.sql("SELECT network_info FROM instance_info_caches WHERE "
                              "instance_uuid = '%s'" % r["uuid"])[0]["network_info"])
        assert sorted(p["id"] for p in ports) == sorted(v["id"] for v in nw)
        assert len(ports) == 1 and ports[0]["binding_host_id"] == r["host"]
    # every server deleted: no compute port remains
    for r in c.sql("SELECT uuid FROM instances WHERE deleted = 0"):
        st, _, _ = c.request("DELETE", "/compute/v2.1/servers/%s" % r["uuid"], token=tok)
        assert st == 204, st
    deadline = time.time() + 60
    while time.time() < deadline and c.sql("SELECT uuid FROM instances WHERE deleted = 0"):
        time.sleep(0.3)
    assert c.sql("SELECT uuid FROM instances WHERE deleted = 0") == []
    assert compute_ports(c) == []

"""Provider networks and agents as an operator drives them with the fake
driver (no data plane): ML2's segments (`openstack network create
--provider-network-type ...`, the lowest free VNI, NoNetworkAvailable), the
MTU each type allows, the extensions announced, `openstack network agent
list` (empty: nothing reports), and the admin read of a host's desired
state (GET /networking/v2.0/hosts/{host}/state)."""
import time
import uuid

import pytest

from conftest import Cloud, CliError, free_port, unique

PUBLIC_CIDR = "203.0.113.0/28"  # netctl's public range


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    """This module's all-in-one: a public network is seeded, and only four
    VNIs exist (the seeded private network takes the first)."""
    c = Cloud(tmp_path_factory.mktemp("provider"), free_port(),
              ("--set", "network.seed_public_cidr=" + PUBLIC_CIDR,
               "--set", "ml2_type_vxlan.vni_ranges=1:4"))
    c.start()
    yield c
    assert c.stop() == 0, c.tail()


_tokens = {}


def api(cloud, method, path, body=None, cl="nubo", expect=None):
    if cl not in _tokens:
        _tokens[cl] = cloud.token(cloud=cl)
    code, _, out = cloud.request(method, "/networking/v2.0/" + path, body, token=_tokens[cl])
    if expect is not None:
        assert code == expect, (code, out)
    return code, out


def net_post(cloud, body, cl="nubo"):
    return api(cloud, "POST", "networks", {"network": body}, cl=cl)


def error(out):
    return out["NeutronError"]["type"], out["NeutronError"]["message"]


def test_seeded_networks(cloud):
    nets = {n["name"]: n for n in api(cloud, "GET", "networks", expect=200)[1]["networks"]}
    private, public = nets["private"], nets["public"]
    assert private["provider:network_type"] == "vxlan"
    assert private["provider:segmentation_id"] == 1
    assert private["provider:physical_network"] is None
    assert private["mtu"] == 1450
    assert public["provider:network_type"] == "flat"
    assert public["provider:physical_network"] == "public"
    assert public["provider:segmentation_id"] is None
    assert public["router:external"] is True and public["mtu"] == 1500
    # a member sees neither (Neutron's policy: admin only)
    demo = {n["name"]: n for n in api(cloud, "GET", "networks", cl="nubo-demo",
                                      expect=200)[1]["networks"]}
    assert "provider:network_type" not in demo["private"]
    assert "provider:segmentation_id" not in demo["public"]


def test_extensions(cloud):
    aliases = {e["alias"] for e in api(cloud, "GET", "extensions", expect=200)[1]["extensions"]}
    assert {"provider", "agent", "dhcp_agent_scheduler", "l3_agent_scheduler"} <= aliases


def test_provider_create_cli(cloud):
    name = unique("vx")
    net = cloud.cli("network", "create", name, "--provider-network-type", "vxlan",
                    "--provider-segment", "3", "-f", "json")
    assert net["provider:network_type"] == "vxlan" and net["provider:segmentation_id"] == 3
    assert net["mtu"] == 1450
    # the same VNI again
    with pytest.raises(CliError) as e:
        cloud.cli("network", "create", unique("vx"), "--provider-network-type", "vxlan",
                  "--provider-segment", "3", "-f", "json")
    assert "The tunnel ID 3 is in use" in str(e.value)
    cloud.cli("network", "delete", net["id"], parse=False)


def test_provider_errors(cloud):
    code, out = net_post(cloud, {"name": unique("n"), "provider:network_type": "vxlan"},
                         cl="nubo-demo")
    assert code == 403 and error(out)[0] == "PolicyNotAuthorized", out
    assert "provider:network_type" in error(out)[1]
    code, out = net_post(cloud, {"name": unique("n"), "provider:network_type": "flat",
                                 "provider:physical_network": "public"})
    assert code == 409 and error(out) == (
        "FlatNetworkInUse",
        "Unable to create the flat network. Physical network public is in use."), out
    code, out = net_post(cloud, {"name": unique("n"), "provider:network_type": "flat"})
    assert code == 400 and error(out)[1] == (
        "Invalid input for operation: physical_network required for flat provider network."), out
    code, out = net_post(cloud, {"name": unique("n"), "provider:network_type": "vlan",
                                 "provider:physical_network": "physnet9"})
    assert code == 400 and "physical_network 'physnet9' unknown for VLAN provider network" in \
        error(out)[1], out
    code, out = net_post(cloud, {"name": unique("n"), "provider:network_type": "gre"})
    assert code == 400 and "network_type value 'gre' not supported" in error(out)[1], out
    code, out = net_post(cloud, {"name": unique("n"), "provider:segmentation_id": "x",
                                 "provider:network_type": "vxlan"})
    assert code == 400 and error(out)[1] == (
        "Invalid input for operation: 'x' is not an integer."), out  # neutron_lib's words


def test_mtu_limits(cloud):
    code, out = net_post(cloud, {"name": unique("n"), "mtu": 1451})
    assert code == 400 and error(out) == (
        "InvalidInput",
        "Invalid input for operation: Requested MTU is too big, maximum is 1450."), out
    code, out = net_post(cloud, {"name": unique("n"), "mtu": 1400})
    assert code == 201 and out["network"]["mtu"] == 1400, out
    nid = out["network"]["id"]
    code, out = api(cloud, "PUT", "networks/" + nid, {"network": {"mtu": 9000}})
    assert code == 400 and "maximum is 1450" in error(out)[1], out
    api(cloud, "PUT", "networks/" + nid, {"network": {"mtu": 1450}}, expect=200)
    api(cloud, "DELETE", "networks/" + nid, expect=204)


def test_vni_allocation(cloud):
    """VNIs 1:4; the seeded network has 1: tenant networks get the lowest
    free one, a deleted network's VNI comes back, and then none is left."""
    made = []
    for want in (2, 3, 4):
        out = net_post(cloud, {"name": unique("t")})[1]
        assert out["network"]["provider:segmentation_id"] == want, out
        made.append(out["network"]["id"])
    code, out = net_post(cloud, {"name": unique("t")})
    assert code == 503 and error(out) == (
        "NoNetworkAvailable",
        "Unable to create the network. No tenant network is available for allocation."), out
    api(cloud, "DELETE", "networks/" + made[1], expect=204)
    out = net_post(cloud, {"name": unique("t")})[1]
    assert out["network"]["provider:segmentation_id"] == 3
    made[1] = out["network"]["id"]
    # flat needs no VNI
    code, out = net_post(cloud, {"name": unique("f"), "provider:network_type": "flat",
                                 "provider:physical_network": "physnet-nt"})
    assert code == 201 and out["network"]["mtu"] == 1500, out
    made.append(out["network"]["id"])
    for nid in made:
        api(cloud, "DELETE", "networks/" + nid, expect=204)


def test_agents_empty(cloud):
    assert cloud.cli("network", "agent", "list", "-f", "json") == []
    assert cloud.cli("network", "agent", "list", "--host", "nohost", "--agent-type", "dhcp",
                     "-f", "json") == []
    code, out = api(cloud, "GET", "agents/0f0e0d0c-0000-4000-8000-000000000000")
    assert code == 404 and error(out)[0] == "AgentNotFound", out
    code, out = api(cloud, "GET", "agents", cl="nubo-demo")
    assert code == 403, out
    private = api(cloud, "GET", "networks?name=private", expect=200)[1]["networks"][0]
    out = api(cloud, "GET", "networks/%s/dhcp-agents" % private["id"], expect=200)[1]
    assert out["agents"] == []


def test_host_state(cloud):
    """A port bound to a host without an agent: the fake driver's binding
    (ovs, ACTIVE), and the host's state lists it with its network."""
    private = api(cloud, "GET", "networks?name=private", expect=200)[1]["networks"][0]
    port = api(cloud, "POST", "ports", {"port": {
        "network_id": private["id"], "binding:host_id": "nt-netctl-host",
        "device_owner": "compute:nova", "device_id": "nt-netctl-dev"}}, expect=201)[1]["port"]
    assert port["binding:vif_type"] == "ovs" and port["status"] == "ACTIVE"
    st = api(cloud, "GET", "hosts/nt-netctl-host/state", expect=200)[1]
    assert st["host"] == "nt-netctl-host" and st["local_ip"] == ""
    assert [p["id"] for p in st["ports"]] == [port["id"]]
    p = st["ports"][0]
    assert p["tap"] == "tap" + port["id"][:11] and p["mac"] == port["mac_address"]
    assert p["fixed_ips"][0]["prefixlen"] == 26 and p["fixed_ips"][0]["ip_version"] == 4
    assert len(p["security_groups"]) == 1
    [n] = st["networks"]
    assert n["id"] == private["id"] and n["bridge"] == "brq" + private["id"][:11]
    assert n["network_type"] == "vxlan" and n["segmentation_id"] == 1 and n["mtu"] == 1450
    assert n["dhcp"] is None and n["dhcp_hosts"] == [] and n["vxlan_peers"] == []
    assert n["subnets"][0]["cidr"] == "10.0.0.0/26"
    [sg] = st["security_groups"]
    assert sg["id"] == p["security_groups"][0] and p["fixed_ips"][0]["ip_address"] in sg["members"]
    assert {r["direction"] for r in sg["rules"]} == {"ingress", "egress"}
    assert st["routers"] == []
    empty = api(cloud, "GET", "hosts/nt-netctl-none/state", expect=200)[1]
    assert empty["ports"] == [] and empty["networks"] == []
    code, _ = api(cloud, "GET", "hosts/nt-netctl-host/state", cl="nubo-demo")
    assert code == 403
    api(cloud, "DELETE", "ports/" + port["id"], expect=204)


def add_agent(cloud, agent_id, type_, binary, host, heartbeat, conf="{}"):
    cloud.sql("INSERT INTO agents (id, agent_type, \"binary\", topic, host, created_at, "
              "started_at, heartbeat_timestamp, configurations, availability_zone) VALUES "
              "('%s', '%s', '%s', 'N/A', '%s', '%s', '%s', '%s', '%s', 'nova')"
              % (agent_id, type_, binary, host, heartbeat, heartbeat, heartbeat, conf))


def test_agents_scheduling_and_binding(cloud):
    """Agents as their report_state leaves them in the agents table (no
    agent process with the fake driver: the rows are written directly):
    the list and its filters, a new DHCP network scheduled to the live DHCP
    agent with its network:dhcp port, ports on a host with a live Linux
    bridge agent bound "bridge" and DOWN, on a dead one "binding_failed";
    PUT and DELETE."""
    now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    host = "nt-netctl-h1"
    lb, dhcp = str(uuid.uuid4()), str(uuid.uuid4())
    add_agent(cloud, lb, "Linux bridge agent", "neutron-linuxbridge-agent", host, now,
              '{"local_ip": "192.0.2.201", "tunnel_types": ["vxlan"]}')
    add_agent(cloud, dhcp, "DHCP agent", "neutron-dhcp-agent", host, now)
    add_agent(cloud, str(uuid.uuid4()), "DHCP agent", "neutron-dhcp-agent", "nt-netctl-dead",
              "2000-01-01 00:00:00")
    rows = cloud.cli("network", "agent", "list", "--host", host, "-f", "json")
    assert sorted(r["Agent Type"] for r in rows) == ["DHCP agent", "Linux bridge agent"]
    assert all(r["Alive"] in (True, ":-)") for r in rows), rows
    rows = cloud.cli("network", "agent", "list", "--agent-type", "dhcp", "-f", "json")
    assert {r["Host"] for r in rows} == {host, "nt-netctl-dead"}
    dead = [r for r in rows if r["Host"] == "nt-netctl-dead"][0]
    assert dead["Alive"] in (False, "XXX"), dead
    a = api(cloud, "GET", "agents/" + lb, expect=200)[1]["agent"]
    assert a["alive"] is True and a["configurations"]["local_ip"] == "192.0.2.201"
    assert a["heartbeat_timestamp"] == now and a["binary"] == "neutron-linuxbridge-agent"

    # a network with a DHCP subnet: served by the live agent, its port on host
    net = net_post(cloud, {"name": unique("dh")})[1]["network"]
    api(cloud, "POST", "subnets", {"subnet": {"network_id": net["id"], "cidr": "10.66.0.0/24",
                                              "ip_version": 4}}, expect=201)
    agents = api(cloud, "GET", "networks/%s/dhcp-agents" % net["id"], expect=200)[1]["agents"]
    assert [x["id"] for x in agents] == [dhcp]
    # it serves every DHCP network: the seeded private one too, not public
    # (its subnet has no DHCP, as devstack's)
    nets = api(cloud, "GET", "agents/%s/dhcp-networks" % dhcp, expect=200)[1]["networks"]
    assert net["id"] in [n["id"] for n in nets]
    assert "private" in {n["name"] for n in nets} and "public" not in {n["name"] for n in nets}
    [dp] = api(cloud, "GET", "ports?device_owner=network:dhcp&network_id=" + net["id"],
               expect=200)[1]["ports"]
    assert dp["binding:host_id"] == host and dp["binding:vif_type"] == "bridge"
    assert dp["status"] == "DOWN" and dp["fixed_ips"][0]["ip_address"] == "10.66.0.2"
    assert dp["device_id"].startswith("dhcp") and dp["device_id"].endswith("-" + net["id"])
    assert dp["binding:vif_details"] == {"port_filter": True, "connectivity": "l2"}
    st = api(cloud, "GET", "hosts/%s/state" % host, expect=200)[1]
    assert st["local_ip"] == "192.0.2.201"
    [n] = [n for n in st["networks"] if n["id"] == net["id"]]
    assert n["dhcp"]["port_id"] == dp["id"] and n["dhcp"]["namespace"] == "qdhcp-" + net["id"]
    assert n["dhcp"]["dev"] == "ns-" + dp["id"][:11]

    # a compute port on host: bridge, DOWN until the agent says it is up
    port = api(cloud, "POST", "ports", {"port": {
        "network_id": net["id"], "binding:host_id": host, "device_owner": "compute:nova",
        "device_id": "nt-netctl-dev2"}}, expect=201)[1]["port"]
    assert port["binding:vif_type"] == "bridge" and port["status"] == "DOWN"
    st = api(cloud, "GET", "hosts/%s/state" % host, expect=200)[1]
    assert port["id"] in [p["id"] for p in st["ports"]]
    [n] = [n for n in st["networks"] if n["id"] == net["id"]]
    assert port["id"] in [h["port_id"] for h in n["dhcp_hosts"]]

    # the agent is dead: a new binding there fails
    cloud.sql("UPDATE agents SET heartbeat_timestamp = '2000-01-01 00:00:00' WHERE id = '%s'"
              % lb)
    p2 = api(cloud, "POST", "ports", {"port": {
        "network_id": net["id"], "binding:host_id": host}}, expect=201)[1]["port"]
    assert p2["binding:vif_type"] == "binding_failed", p2

    # admin_state_up and description; delete
    a = api(cloud, "PUT", "agents/" + dhcp, {"agent": {"admin_state_up": False,
                                                        "description": "drained"}},
            expect=200)[1]["agent"]
    assert a["admin_state_up"] is False and a["description"] == "drained"
    code, out = api(cloud, "PUT", "agents/" + dhcp, {"agent": {"host": "x"}})
    assert code == 400, out
    for pid in (port["id"], p2["id"]):
        api(cloud, "DELETE", "ports/" + pid, expect=204)
    api(cloud, "DELETE", "networks/" + net["id"], expect=204)
    for row in cloud.sql("SELECT id FROM agents"):
        api(cloud, "DELETE", "agents/" + row["id"], expect=204)
    assert api(cloud, "GET", "agents", expect=200)[1]["agents"] == []


def test_binding_failed_build(cloud):
    """Every compute host's Linux bridge agent dead: the build's port
    cannot be bound and the server ends in ERROR as Nova's (the binding's
    message in the fault's details)."""
    for h in ("fake-1", "fake-2", "fake-3"):
        add_agent(cloud, str(uuid.uuid4()), "Linux bridge agent", "neutron-linuxbridge-agent",
                  h, "2000-01-01 00:00:00")
    try:
        s = cloud.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros",
                      "--network", "private", unique("nt-netctl-bf"), "-f", "json")
        s = cloud.wait_server(s["id"])
        assert s["status"] == "ERROR", s
        fault = s["fault"]
        assert "Failed to allocate the network(s), not rescheduling." in fault["message"], fault
        assert "Binding failed for port " in fault.get("details", ""), fault
        assert "please check neutron logs for more information." in fault["details"]
        assert api(cloud, "GET", "ports?device_id=" + s["id"], expect=200)[1]["ports"] == []
        cloud.cli("server", "delete", "--wait", s["id"], parse=False)
    finally:
        cloud.sql("DELETE FROM agents")

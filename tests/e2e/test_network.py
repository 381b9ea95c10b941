"""The networking service (Neutron API v2.0) driven like an operator does:
`openstack network|subnet|port ...`, `openstack availability zone list`,
`openstack extension list --network`, and plain HTTP where the CLI hides the
answer (error bodies, version discovery)."""
import json

import pytest

from conftest import Cloud, free_port, unique


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    """This module's own all-in-one: it makes networks (external ones too) in
    the admin project, which would make the shared cloud's admin boots
    without --nic ambiguous (409 NetworkAmbiguous, as Nova)."""
    c = Cloud(tmp_path_factory.mktemp("netapi"), free_port())
    c.start()
    yield c
    assert c.stop() == 0, c.tail()


# The CLI is slow on a loaded machine: each operation is driven once through
# `openstack`, and the many requests a test needs around it go over HTTP.

_tokens = {}


def token(cloud, cl="nubo"):
    if cl not in _tokens:
        _tokens[cl] = cloud.token(cloud=cl)
    return _tokens[cl]


def api(cloud, method, path, body=None, cl="nubo", expect=None):
    code, _, out = cloud.request(method, "/networking/v2.0/" + path, body, token=token(cloud, cl))
    if expect is not None:
        assert code == expect, (code, out)
    return code, out


def net_create(cloud, name, cl="nubo"):
    return api(cloud, "POST", "networks", {"network": {"name": name}}, cl=cl, expect=201)[1][
        "network"]


def subnet_create(cloud, net_id, cidr, **kw):
    body = dict(network_id=net_id, cidr=cidr, ip_version=4, **kw)
    return api(cloud, "POST", "subnets", {"subnet": body}, expect=201)[1]["subnet"]


def port_create(cloud, net_id, **kw):
    return api(cloud, "POST", "ports", {"port": dict(network_id=net_id, **kw)}, expect=201)[1][
        "port"]


def test_seeded_network(cloud):
    """`nubo aio` starts with devstack's "private" network, shared, so that
    servers booted without naming a network get a port on it."""
    _, out = api(cloud, "GET", "networks?name=private", expect=200)
    assert len(out["networks"]) == 1
    private = out["networks"][0]
    assert private["shared"] is True and private["router:external"] is False
    sub = cloud.cli("subnet", "show", "private-subnet", "-f", "json")
    assert sub["cidr"] == "10.0.0.0/26" and sub["gateway_ip"] == "10.0.0.1"
    assert sub["network_id"] == private["id"]
    assert sub["allocation_pools"] == [{"start": "10.0.0.2", "end": "10.0.0.62"}]
    # the demo project sees the shared network too
    demo = cloud.cli("network", "list", "-f", "json", cloud="nubo-demo")
    assert private["id"] in [n["ID"] for n in demo]


def test_network_lifecycle(cloud):
    name = unique("net")
    net = cloud.cli("network", "create", name, "-f", "json")
    assert net["status"] == "ACTIVE" and net["admin_state_up"] is True
    assert net["mtu"] == 1450 and net["shared"] is False and net["subnets"] == []  # vxlan: 1500 - 50
    assert net["availability_zones"] == ["nova"] and net["revision_number"] == 0
    listed = cloud.cli("network", "list", "-f", "json")
    assert net["id"] in [n["ID"] for n in listed]
    cloud.cli("network", "set", "--name", name + "-b", "--description", "blue", "--disable",
              net["id"])
    shown = cloud.cli("network", "show", net["id"], "-f", "json")
    assert shown["name"] == name + "-b" and shown["description"] == "blue"
    assert shown["admin_state_up"] is False and shown["revision_number"] == 1
    cloud.cli("network", "delete", net["id"])
    p = cloud.cli("network", "show", net["id"], check=False)
    assert p.returncode != 0 and "No Network found" in p.stderr


def test_subnet_pools_gateway_dns(cloud):
    net = net_create(cloud, unique("net"))
    sub = cloud.cli("subnet", "create", "--network", net["id"], "--subnet-range",
                    "192.168.50.0/24", "--allocation-pool", "start=192.168.50.10,end=192.168.50.20",
                    "--dns-nameserver", "8.8.8.8", "--dns-nameserver", "8.8.4.4",
                    "--host-route", "destination=10.20.0.0/24,gateway=192.168.50.254",
                    unique("sub"), "-f", "json")
    assert sub["gateway_ip"] == "192.168.50.1"
    assert sub["allocation_pools"] == [{"start": "192.168.50.10", "end": "192.168.50.20"}]
    assert sub["dns_nameservers"] == ["8.8.8.8", "8.8.4.4"]
    assert sub["host_routes"] == [{"destination": "10.20.0.0/24", "nexthop": "192.168.50.254"}]
    assert sub["enable_dhcp"] is True and sub["ip_version"] == 4
    nogw = cloud.cli("subnet", "create", "--network", net["id"], "--subnet-range",
                     "192.168.51.0/24", "--gateway", "none", unique("sub"), "-f", "json")
    assert nogw["gateway_ip"] is None
    assert nogw["gateway_ip"] is None
    # without a gateway the pool starts at the first host
    assert nogw["allocation_pools"] == [{"start": "192.168.51.1", "end": "192.168.51.254"}]
    ids = [s["ID"] for s in cloud.cli("subnet", "list", "--network", net["id"], "-f", "json")]
    assert sorted(ids) == sorted([sub["id"], nogw["id"]])
    cloud.cli("subnet", "set", "--name", "renamed", "--no-dns-nameservers", sub["id"])
    shown = cloud.cli("subnet", "show", sub["id"], "-f", "json")
    assert shown["dns_nameservers"] == [] and shown["name"] == "renamed"
    cloud.cli("subnet", "delete", nogw["id"])
    api(cloud, "GET", "subnets/" + nogw["id"], expect=404)
    # deleting the network takes its remaining subnet with it
    api(cloud, "DELETE", "networks/" + net["id"], expect=204)
    api(cloud, "GET", "subnets/" + sub["id"], expect=404)


def test_subnet_errors(cloud):
    net = net_create(cloud, unique("net"))
    bad = cloud.cli("subnet", "create", "--network", net["id"], "--subnet-range",
                    "192.168.60.0/33", unique("sub"), check=False)
    assert bad.returncode != 0
    assert "Invalid input for cidr. Reason: '192.168.60.0/33' is not a valid IP subnet." in bad.stderr
    nid = net["id"]
    code, out = api(cloud, "POST", "subnets", {"subnet": {
        "network_id": nid, "cidr": "192.168.61.0/24", "ip_version": 4,
        "allocation_pools": [{"start": "192.168.61.10", "end": "192.168.62.5"}]}})
    assert code == 400 and out["NeutronError"]["message"] == (
        "The allocation pool 192.168.61.10-192.168.62.5 spans beyond the subnet cidr "
        "192.168.61.0/24.")
    code, out = api(cloud, "POST", "subnets", {"subnet": {
        "network_id": nid, "cidr": "192.168.63.0/24", "ip_version": 4,
        "gateway_ip": "192.168.63.15",
        "allocation_pools": [{"start": "192.168.63.10", "end": "192.168.63.20"}]}})
    assert code == 409 and out["NeutronError"]["type"] == "GatewayConflictWithAllocationPools"
    subnet_create(cloud, nid, "192.168.64.0/24")
    code, out = api(cloud, "POST", "subnets", {"subnet": {
        "network_id": nid, "cidr": "192.168.64.128/25", "ip_version": 4}})
    assert code == 400 and "overlaps with another subnet" in out["NeutronError"]["message"]
    code, out = api(cloud, "POST", "subnets", {"subnet": {
        "network_id": nid, "cidr": "2001:db8::/64", "ip_version": 4}})
    assert code == 400 and out["NeutronError"]["message"] == (
        "Invalid input for operation: cidr '2001:db8::/64' does not match the ip_version '4'.")
    api(cloud, "DELETE", "networks/" + nid, expect=204)


def test_ports(cloud):
    net = net_create(cloud, unique("net"))
    nid = net["id"]
    sub = subnet_create(cloud, nid, "192.168.70.0/29")  # pool .2-.6
    p1 = cloud.cli("port", "create", "--network", nid, unique("port"), "-f", "json")
    assert p1["fixed_ips"] == [{"subnet_id": sub["id"], "ip_address": "192.168.70.2"}]
    assert p1["mac_address"].startswith("fa:16:3e:") and p1["status"] == "DOWN"
    p2 = cloud.cli("port", "create", "--network", nid, "--fixed-ip",
                   "subnet=%s,ip-address=192.168.70.6" % sub["id"], unique("port"), "-f", "json")
    assert p2["fixed_ips"][0]["ip_address"] == "192.168.70.6"
    code, out = api(cloud, "POST", "ports", {"port": {
        "network_id": nid, "fixed_ips": [{"subnet_id": sub["id"], "ip_address": "192.168.70.6"}]}})
    assert code == 409 and out["NeutronError"] == {
        "type": "IpAddressAlreadyAllocated", "detail": "",
        "message": "IP address 192.168.70.6 already allocated in subnet %s" % sub["id"]}
    more = [port_create(cloud, nid) for _ in range(3)]
    assert [m["fixed_ips"][0]["ip_address"] for m in more] == [
        "192.168.70.3", "192.168.70.4", "192.168.70.5"]
    code, out = api(cloud, "POST", "ports", {"port": {"network_id": nid}})
    assert code == 409 and out["NeutronError"]["message"] == (
        "No more IP addresses available on network %s." % nid)
    assert len({p["mac_address"] for p in [p1, p2] + more}) == 5

    cloud.cli("port", "set", "--name", "renamed", "--device", "dev-1", p1["id"])
    shown = cloud.cli("port", "show", p1["id"], "-f", "json")
    assert shown["name"] == "renamed" and shown["device_id"] == "dev-1"
    listed = cloud.cli("port", "list", "--network", nid, "-f", "json")
    assert len(listed) == 5
    _, out = api(cloud, "GET", "ports?fixed_ips=ip_address%3D192.168.70.6", expect=200)
    assert [p["id"] for p in out["ports"]] == [p2["id"]]

    # a network with ports cannot be deleted, nor a subnet holding their IPs
    code, out = api(cloud, "DELETE", "subnets/" + sub["id"])
    assert code == 409 and out["NeutronError"]["type"] == "SubnetInUse"
    code, out = api(cloud, "DELETE", "networks/" + nid)
    assert code == 409 and out["NeutronError"] == {
        "type": "NetworkInUse", "detail": "",
        "message": ("Unable to complete operation on network %s. There are one or more ports "
                    "still in use on the network." % nid)}
    cloud.cli("port", "delete", p1["id"])
    for p in [p2] + more:
        api(cloud, "DELETE", "ports/" + p["id"], expect=204)
    # the freed address is handed out again
    again = port_create(cloud, nid, fixed_ips=[{"subnet_id": sub["id"]}])
    assert again["fixed_ips"][0]["ip_address"] == "192.168.70.2"
    api(cloud, "DELETE", "ports/" + again["id"], expect=204)
    cloud.cli("network", "delete", nid)
    code, out = api(cloud, "GET", "ports/" + p1["id"])
    assert code == 404 and out["NeutronError"]["message"] == (
        "Port %s could not be found." % p1["id"])


def test_port_fixed_ip_outside_subnet(cloud):
    net = net_create(cloud, unique("net"))
    sub = subnet_create(cloud, net["id"], "192.168.80.0/24")
    code, out = api(cloud, "POST", "ports", {"port": {
        "network_id": net["id"], "fixed_ips": [{"subnet_id": sub["id"], "ip_address": "10.9.9.9"}]}})
    assert code == 400 and out["NeutronError"]["message"] == (
        "IP address 10.9.9.9 is not a valid IP for the specified subnet.")
    api(cloud, "DELETE", "networks/" + net["id"], expect=204)


def test_other_projects_network_is_404(cloud):
    net = net_create(cloud, unique("net"))
    code, out = api(cloud, "GET", "networks/" + net["id"], cl="nubo-demo")
    assert code == 404 and out["NeutronError"] == {
        "type": "NetworkNotFound", "detail": "",
        "message": "Network %s could not be found." % net["id"]}
    p = cloud.cli("network", "show", net["id"], cloud="nubo-demo", check=False)
    assert p.returncode != 0
    _, out = api(cloud, "GET", "networks", cl="nubo-demo", expect=200)
    assert net["id"] not in [n["id"] for n in out["networks"]]
    # a port on it is refused the same way
    code, out = api(cloud, "POST", "ports", {"port": {"network_id": net["id"]}}, cl="nubo-demo")
    assert code == 404
    # only an admin makes shared or external networks
    code, out = api(cloud, "POST", "networks", {"network": {"name": "x", "shared": True}},
                    cl="nubo-demo")
    assert code == 403 and "disallowed by policy" in out["NeutronError"]["message"]
    api(cloud, "DELETE", "networks/" + net["id"], expect=204)


def test_bad_input_names_the_field(cloud):
    tok = token(cloud)
    code, _, body = cloud.request("POST", "/networking/v2.0/networks",
                                  {"network": {"name": "x", "admin_state_up": "maybe"}}, token=tok)
    assert code == 400
    assert "'maybe' cannot be converted to boolean" in body["NeutronError"]["message"]
    code, _, body = cloud.request("POST", "/networking/v2.0/ports",
                                  {"port": {"network_id": "not-a-uuid"}}, token=tok)
    assert code == 400
    assert body["NeutronError"]["message"] == (
        "Invalid input for network_id. Reason: 'not-a-uuid' is not a valid UUID.")
    code, _, body = cloud.request("POST", "/networking/v2.0/networks",
                                  {"network": {"name": "x", "colour": "red"}}, token=tok)
    assert code == 400 and body["NeutronError"]["message"] == "Unrecognized attribute(s) 'colour'"
    code, _, body = cloud.request("POST", "/networking/v2.0/subnets",
                                  {"subnet": {"cidr": "10.0.0.0/24", "ip_version": 4}}, token=tok)
    assert code == 400 and body["NeutronError"]["message"] == (
        "Failed to parse request. Required attribute 'network_id' not specified")


def test_head_answers_as_neutron_pecan(cloud):
    """Neutron's resource controllers refuse HEAD with 405; its extensions
    controller, keeping the legacy one's answer, with 404."""
    tok = token(cloud)
    for path, want in (("networks", 405), ("ports", 405), ("extensions", 404),
                       ("extensions/router", 404)):
        code, _, _ = cloud.request("HEAD", "/networking/v2.0/" + path, token=tok)
        assert (path, code) == (path, want)


def test_list_fields_sorting_paging(cloud):
    tok = token(cloud)
    made = [net_create(cloud, "page-%d-%s" % (i, unique("n")))["id"] for i in range(3)]
    code, _, body = cloud.request("GET", "/networking/v2.0/networks?fields=id&fields=name"
                                  "&sort_key=name&sort_dir=desc", token=tok)
    assert code == 200
    names = [n["name"] for n in body["networks"]]
    assert names == sorted(names, reverse=True)
    assert all(sorted(n) == ["id", "name"] for n in body["networks"])
    code, _, page = cloud.request("GET", "/networking/v2.0/networks?limit=2&sort_key=name",
                                  token=tok)
    assert len(page["networks"]) == 2
    nxt = [l for l in page["networks_links"] if l["rel"] == "next"][0]["href"]
    code, _, page2 = cloud.request("GET", nxt[nxt.index("/networking"):], token=tok)
    assert code == 200 and page2["networks"][0]["name"] > page["networks"][1]["name"]
    ext = unique("ext")
    ext_id = cloud.cli("network", "create", "--external", ext, "-f", "json")["id"]
    subnet_create(cloud, ext_id, "172.24.4.0/24")
    code, _, body = cloud.request("GET", "/networking/v2.0/networks?router:external=True",
                                  token=tok)
    assert [n["name"] for n in body["networks"]] == [ext]
    # an external network is visible to every project, its subnets are not
    _, out = api(cloud, "GET", "networks?router:external=true", cl="nubo-demo", expect=200)
    assert [n["name"] for n in out["networks"]] == [ext]
    _, out = api(cloud, "GET", "subnets?network_id=" + ext_id, cl="nubo-demo", expect=200)
    assert out["subnets"] == []
    _, out = api(cloud, "GET", "subnets?network_id=" + ext_id, expect=200)
    assert len(out["subnets"]) == 1
    # networks left in the admin project would make its servers' "auto" ambiguous
    for nid in made + [ext_id]:
        api(cloud, "DELETE", "networks/" + nid, expect=204)


def test_bulk_create_is_all_or_nothing(cloud):
    tok = token(cloud)
    name = unique("bulk")
    code, _, body = cloud.request("POST", "/networking/v2.0/networks", {"networks": [
        {"name": name}, {"name": name, "mtu": "lots"}]}, token=tok)
    assert code == 400
    _, out = api(cloud, "GET", "networks?name=" + name, expect=200)
    assert out["networks"] == []
    code, _, body = cloud.request("POST", "/networking/v2.0/networks", {"networks": [
        {"name": name}, {"name": name}]}, token=tok)
    assert code == 201 and len(body["networks"]) == 2
    for n in body["networks"]:
        api(cloud, "DELETE", "networks/" + n["id"], expect=204)


def test_versions_and_extensions(cloud):
    code, _, body = cloud.request("GET", "/networking/")
    assert code == 200 and body["versions"][0]["id"] == "v2.0"
    code, _, body = cloud.request("GET", "/networking/v2.0/", token=token(cloud))
    assert {"network", "subnet", "port"} <= {r["name"] for r in body["resources"]}
    aliases = {e["Alias"] for e in cloud.cli("extension", "list", "--network", "-f", "json")}
    assert {"external-net", "binding", "port-security", "availability_zone", "net-mtu",
            "standard-attr-timestamp"} <= aliases
    ext = cloud.cli("extension", "show", "external-net", "-f", "json")
    assert ext["alias"] == "external-net"


def test_availability_zone_list_covers_all_services(cloud):
    """issue 2: `openstack availability zone list` failed with "Public
    endpoint for network service in RegionOne region not found" before the
    network service existed; it lists compute, volume and network zones."""
    p = cloud.cli("availability", "zone", "list", "-f", "json", check=False)
    assert p.returncode == 0, p.stderr
    zones = cloud.cli("availability", "zone", "list", "--long", "-f", "json")
    network = {(z["Zone Name"], z["Zone Resource"], z["Zone Status"]) for z in zones
               if z["Zone Resource"]}
    assert network == {("nova", "network", "available"), ("nova", "router", "available")}
    assert any(z["Service Name"] == "nova-compute" and z["Zone Name"] == "nova" for z in zones)
    # the volume service's zone has neither a resource nor services
    assert any(z["Zone Name"] == "nova" and not z["Zone Resource"] and not z["Service Name"]
               for z in zones)

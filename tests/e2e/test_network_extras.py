"""Security groups, routers and subnet pools of the networking service
(Neutron API v2.0), driven like an operator does: `openstack security group
...`, `security group rule ...`, `router ...`, `subnet pool ...`, and plain
HTTP where the CLI hides the answer (NeutronError bodies, status codes)."""
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


DEMO = "nubo-demo"
_tokens = {}


def token(cloud, cl):
    """A token of cloud entry cl, issued once per all-in-one."""
    key = (cloud.url, cl)
    if key not in _tokens:
        _tokens[key] = cloud.token(cl)
    return _tokens[key]


def neutron_error(cloud, method, path, body=None, cl=DEMO):
    """(status, NeutronError type, message) of a request expected to fail."""
    status, _, out = cloud.request(method, "/networking/v2.0" + path, body,
                                   token=token(cloud, cl))
    err = out["NeutronError"]
    return status, err["type"], err["message"]


def external_net(cloud, cidr):
    """An admin's router:external network with one subnet (as devstack's
    "public"), visible to every project."""
    net = cloud.cli("network", "create", "--external", unique("ext"), "-f", "json")
    cloud.cli("subnet", "create", "--network", net["id"], "--subnet-range", cidr, unique("sub"))
    return net


def rule_create(cloud, group, *args, cl=DEMO):
    return cloud.cli("security", "group", "rule", "create", *args, group, "-f", "json", cloud=cl)


def test_default_group_made_on_first_use(cloud):
    groups = cloud.cli("security", "group", "list", "-f", "json", cloud=DEMO)
    defaults = [g for g in groups if g["Name"] == "default"]
    assert len(defaults) == 1
    # listing again does not make a second one
    again = cloud.cli("security", "group", "list", "-f", "json", cloud=DEMO)
    assert [g["ID"] for g in again if g["Name"] == "default"] == [defaults[0]["ID"]]
    rules = cloud.cli("security", "group", "rule", "list", defaults[0]["ID"], "-f", "json",
                      cloud=DEMO)
    got = sorted((r["Direction"], r["Ethertype"], r["Remote Security Group"]) for r in rules)
    me = defaults[0]["ID"]
    assert got == [("egress", "IPv4", None), ("egress", "IPv6", None),
                   ("ingress", "IPv4", me), ("ingress", "IPv6", me)]
    # a second "default" cannot be made, in any case of the name
    for name in ("default", "Default"):
        p = cloud.cli("security", "group", "create", name, check=False, cloud=DEMO)
        assert p.returncode != 0 and "Default security group already exists." in p.stderr
    st, typ, _ = neutron_error(cloud, "POST", "/security-groups",
                               {"security_group": {"name": "default"}})
    assert (st, typ) == (409, "SecurityGroupDefaultAlreadyExists")
    # nor can the default group be renamed, nor deleted by a member
    st, typ, msg = neutron_error(cloud, "PUT", "/security-groups/" + me,
                                 {"security_group": {"name": "x"}})
    assert (st, typ, msg) == (409, "SecurityGroupCannotUpdateDefault",
                              "Updating default security group not allowed.")
    st, typ, _ = neutron_error(cloud, "DELETE", "/security-groups/" + me)
    assert (st, typ) == (409, "SecurityGroupCannotRemoveDefault")


def test_group_lifecycle_and_rules(cloud):
    name = unique("sg")
    sg = cloud.cli("security", "group", "create", name, "--description", "web", "-f", "json",
                   cloud=DEMO)
    assert sg["name"] == name and sg["description"] == "web" and sg["stateful"] is True
    # a new group has the two egress rules only
    assert sorted((r["direction"], r["ethertype"]) for r in sg["rules"]) == [
        ("egress", "IPv4"), ("egress", "IPv6")]
    ssh = rule_create(cloud, name, "--protocol", "tcp", "--dst-port", "22",
                      "--remote-ip", "10.0.0.5")
    assert ssh["protocol"] == "tcp" and ssh["port_range_min"] == 22
    assert ssh["port_range_max"] == 22 and ssh["remote_ip_prefix"] == "10.0.0.5/32"
    assert ssh["ether_type"] == "IPv4" and ssh["direction"] == "ingress"
    # the same rule again (the prefix written another way) is a duplicate
    p = cloud.cli("security", "group", "rule", "create", "--protocol", "6", "--dst-port", "22",
                  "--remote-ip", "10.0.0.5/32", name, check=False, cloud=DEMO)
    assert p.returncode != 0
    assert "Security group rule already exists. Rule id is %s." % ssh["id"] in p.stderr
    icmp = rule_create(cloud, name, "--protocol", "icmp", "--icmp-type", "8", "--icmp-code", "0")
    assert (icmp["port_range_min"], icmp["port_range_max"]) == (8, 0)
    # the full port range is stored as "any port", as Neutron does
    anyport = rule_create(cloud, name, "--protocol", "udp", "--dst-port", "1:65535")
    assert anyport["port_range_min"] is None and anyport["port_range_max"] is None
    # legacy IPv6 ICMP names are made canonical
    v6 = rule_create(cloud, name, "--ethertype", "IPv6", "--protocol", "icmp")
    assert v6["protocol"] == "ipv6-icmp"
    shown = cloud.cli("security", "group", "rule", "show", ssh["id"], "-f", "json", cloud=DEMO)
    assert shown["id"] == ssh["id"] and shown["security_group_id"] == sg["id"]
    listed = cloud.cli("security", "group", "rule", "list", name, "-f", "json", cloud=DEMO)
    assert {ssh["id"], icmp["id"], anyport["id"], v6["id"]} <= {r["ID"] for r in listed}
    cloud.cli("security", "group", "rule", "delete", icmp["id"], cloud=DEMO)
    listed = cloud.cli("security", "group", "rule", "list", name, "-f", "json", cloud=DEMO)
    assert icmp["id"] not in {r["ID"] for r in listed}
    cloud.cli("security", "group", "set", "--name", name + "-b", name, cloud=DEMO)
    shown = cloud.cli("security", "group", "show", sg["id"], "-f", "json", cloud=DEMO)
    assert shown["name"] == name + "-b" and shown["revision_number"] == 1
    cloud.cli("security", "group", "delete", sg["id"], cloud=DEMO)
    p = cloud.cli("security", "group", "show", sg["id"], check=False, cloud=DEMO)
    assert p.returncode != 0
    # its rules went with it
    st, typ, _ = neutron_error(cloud, "GET", "/security-group-rules/" + ssh["id"])
    assert (st, typ) == (404, "SecurityGroupRuleNotFound")


def test_rule_bad_input(cloud):
    sg = cloud.cli("security", "group", "create", unique("sg"), "-f", "json", cloud=DEMO)
    other = cloud.cli("security", "group", "create", unique("sg"), "-f", "json", cloud=DEMO)

    def bad(**rule):
        body = {"security_group_rule": dict({"security_group_id": sg["id"],
                                             "direction": "ingress"}, **rule)}
        return neutron_error(cloud, "POST", "/security-group-rules", body)

    st, typ, msg = bad(protocol="bad_protocol_name")
    assert (st, typ) == (400, "SecurityGroupRuleInvalidProtocol")
    assert msg.startswith("Security group rule protocol bad_protocol_name not supported.")
    assert bad(protocol=256)[:2] == (400, "SecurityGroupRuleInvalidProtocol")
    st, typ, msg = bad(ethertype="bad_ethertype")
    assert (st, typ) == (400, "SecurityGroupRuleInvalidEtherType")
    for prefix in ("192.168.1./24", "192.168.1.1/33", "bad_prefix", "256"):
        st, typ, msg = bad(protocol="tcp", remote_ip_prefix=prefix)
        assert (st, typ, msg) == (400, "InvalidCIDR",
                                  "Invalid CIDR %s given as IP prefix." % prefix)
    assert bad(protocol="tcp", port_range_min=-16, port_range_max=80) == (
        400, "SecurityGroupInvalidPortValue", "Invalid value for port -16")
    assert bad(protocol="tcp", port_range_min=80, port_range_max=79) == (
        400, "SecurityGroupInvalidPortRange",
        "For TCP/UDP protocols, port_range_min must be <= port_range_max")
    assert bad(protocol="tcp", port_range_min=80, port_range_max=65536)[2] == \
        "Invalid value for port 65536"
    assert bad(protocol="icmp", port_range_min=1, port_range_max=256)[2] == \
        "Invalid value for ICMP code (port_range_max) 256. It must be 0 to 255."
    assert bad(protocol="icmp", port_range_max=6)[2] == \
        "ICMP code (port-range-max) 6 is provided but ICMP type (port-range-min) is missing."
    assert bad(port_range_min=22, port_range_max=22)[1] == "SecurityGroupProtocolRequiredWithPorts"
    assert bad(protocol="gre", port_range_min=1, port_range_max=2)[1] == \
        "SecurityGroupInvalidProtocolForPort"
    assert bad(ethertype="IPv6", protocol="tcp", remote_ip_prefix="10.0.0.0/24") == (
        400, "SecurityGroupRuleParameterConflict",
        "Conflicting value ethertype IPv6 for CIDR 10.0.0.0/24")
    assert bad(protocol="ipv6-icmp")[:2] == (400, "SecurityGroupEthertypeConflictWithProtocol")
    assert bad(remote_ip_prefix="10.0.0.0/8", remote_group_id=other["id"])[1] == \
        "SecurityGroupMultipleRemoteEntites"
    for gid in ("bad_group_id", "7b0b4bd4-7c3f-4a39-9f47-0d3c1c3d5e61"):
        assert bad(protocol="tcp", remote_group_id=gid)[:2] == (404, "SecurityGroupNotFound")
    assert bad(direction="sideways")[0] == 400
    assert bad(bogus=1)[2] == "Unrecognized attribute(s) 'bogus'"
    body = {"security_group_rule": {"security_group_id": "7b0b4bd4-7c3f-4a39-9f47-0d3c1c3d5e61",
                                    "direction": "ingress"}}
    assert neutron_error(cloud, "POST", "/security-group-rules", body)[:2] == (
        404, "SecurityGroupNotFound")
    # a remote group rule is fine
    ok = rule_create(cloud, sg["id"], "--protocol", "udp", "--dst-port", "50:55",
                     "--remote-group", other["id"])
    assert ok["remote_group_id"] == other["id"]


def test_group_in_use_and_other_project(cloud):
    sg = cloud.cli("security", "group", "create", unique("sg"), "-f", "json", cloud=DEMO)
    net = cloud.cli("network", "create", unique("net"), "-f", "json", cloud=DEMO)
    cloud.cli("subnet", "create", "--network", net["id"], "--subnet-range", "10.77.0.0/24",
              unique("sub"), cloud=DEMO)
    port = cloud.cli("port", "create", "--network", net["id"], "--security-group", sg["id"],
                     unique("port"), "-f", "json", cloud=DEMO)
    assert port["security_group_ids"] == [sg["id"]]
    st, typ, msg = neutron_error(cloud, "DELETE", "/security-groups/" + sg["id"])
    assert (st, typ, msg) == (409, "SecurityGroupInUse", "Security Group %s in use." % sg["id"])
    # a port made without groups gets the project's default group
    plain = cloud.cli("port", "create", "--network", net["id"], unique("port"), "-f", "json",
                      cloud=DEMO)
    default = [g for g in cloud.cli("security", "group", "list", "-f", "json", cloud=DEMO)
               if g["Name"] == "default"][0]
    assert plain["security_group_ids"] == [default["ID"]]
    cloud.cli("port", "delete", port["id"], plain["id"], cloud=DEMO)
    # another project (admin's own view aside) cannot see or use the group
    cloud.cli("project", "create", "--domain", "default", "other-n2")
    cloud.cli("user", "create", "--domain", "default", "--password", "pw-other", "other-n2")
    cloud.cli("role", "add", "--project", "other-n2", "--user", "other-n2", "member")
    tok = cloud.request("POST", "/identity/v3/auth/tokens", {"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": "other-n2", "domain": {"id": "default"}, "password": "pw-other"}}},
        "scope": {"project": {"name": "other-n2", "domain": {"id": "default"}}}}})
    token = tok[1]["X-Subject-Token"]
    st, _, out = cloud.request("GET", "/networking/v2.0/security-groups/" + sg["id"], token=token)
    assert st == 404 and out["NeutronError"]["type"] == "SecurityGroupNotFound"
    st, _, out = cloud.request("GET", "/networking/v2.0/security-groups", token=token)
    assert sg["id"] not in [g["id"] for g in out["security_groups"]]
    st, _, out = cloud.request("DELETE", "/networking/v2.0/security-groups/" + sg["id"],
                               token=token)
    assert st == 404
    cloud.cli("security", "group", "delete", sg["id"], cloud=DEMO)


def test_router_gateway_interfaces_routes(cloud):
    net = cloud.cli("network", "create", unique("net"), "-f", "json", cloud=DEMO)
    sub = cloud.cli("subnet", "create", "--network", net["id"], "--subnet-range",
                    "10.78.0.0/24", unique("sub"), "-f", "json", cloud=DEMO)
    name = unique("router")
    r = cloud.cli("router", "create", name, "-f", "json", cloud=DEMO)
    assert r["status"] == "ACTIVE" and r["admin_state_up"] is True
    assert r["external_gateway_info"] is None and r["routes"] == []
    public = external_net(cloud, "172.31.1.0/24")
    cloud.cli("router", "set", "--external-gateway", public["id"], name, cloud=DEMO)
    gw = cloud.cli("router", "show", name, "-f", "json", cloud=DEMO)["external_gateway_info"]
    assert gw["network_id"] == public["id"] and gw["enable_snat"] is True
    assert gw["external_fixed_ips"][0]["ip_address"] == "172.31.1.2"
    gwports = cloud.cli("port", "list", "--device-owner", "network:router_gateway",
                        "--device-id", r["id"], "-f", "json")
    assert len(gwports) == 1
    cloud.cli("router", "add", "subnet", name, sub["id"], cloud=DEMO)
    ports = cloud.cli("port", "list", "--device-id", r["id"], "-f", "json", cloud=DEMO)
    intf = [p for p in ports if p["Fixed IP Addresses"][0]["subnet_id"] == sub["id"]]
    assert len(intf) == 1
    assert intf[0]["Fixed IP Addresses"][0]["ip_address"] == "10.78.0.1"
    port = cloud.cli("port", "show", intf[0]["ID"], "-f", "json", cloud=DEMO)
    assert port["device_owner"] == "network:router_interface" and port["device_id"] == r["id"]
    # its port cannot be deleted through the port API, nor the router while it has it
    p = cloud.cli("port", "delete", intf[0]["ID"], check=False, cloud=DEMO)
    assert p.returncode != 0 and "cannot be deleted directly via the port API" in p.stderr
    st, typ, msg = neutron_error(cloud, "DELETE", "/routers/" + r["id"])
    assert (st, typ) == (409, "RouterInUse") and intf[0]["ID"] in msg
    # the same subnet twice, or an overlapping one, is refused
    st, typ, msg = neutron_error(cloud, "PUT", "/routers/%s/add_router_interface" % r["id"],
                                 {"subnet_id": sub["id"]})
    assert (st, msg) == (400, "Bad router request: Router already has a port on subnet %s."
                         % sub["id"])
    net2 = cloud.cli("network", "create", unique("net"), "-f", "json", cloud=DEMO)
    sub2 = cloud.cli("subnet", "create", "--network", net2["id"], "--subnet-range",
                     "10.78.0.0/25", unique("sub"), "-f", "json", cloud=DEMO)
    st, typ, msg = neutron_error(cloud, "PUT", "/routers/%s/add_router_interface" % r["id"],
                                 {"subnet_id": sub2["id"]})
    assert st == 400 and "overlaps with cidr 10.78.0.0/24" in msg
    # extra routes: the nexthop must be on a connected subnet
    cloud.cli("router", "set", "--route", "destination=192.168.9.0/24,gateway=10.78.0.7", name,
              cloud=DEMO)
    routes = cloud.cli("router", "show", name, "-f", "json", cloud=DEMO)["routes"]
    assert routes == [{"destination": "192.168.9.0/24", "nexthop": "10.78.0.7"}]
    p = cloud.cli("router", "set", "--route", "destination=192.168.8.0/24,gateway=10.99.0.7",
                  name, check=False, cloud=DEMO)
    assert p.returncode != 0 and "the nexthop is not connected with router" in p.stderr
    # an interface a route needs cannot be removed
    p = cloud.cli("router", "remove", "subnet", name, sub["id"], check=False, cloud=DEMO)
    assert p.returncode != 0 and "required by one or more routes" in p.stderr
    cloud.cli("router", "unset", "--route", "destination=192.168.9.0/24,gateway=10.78.0.7",
              name, cloud=DEMO)
    cloud.cli("router", "remove", "subnet", name, sub["id"], cloud=DEMO)
    assert cloud.cli("port", "list", "--device-id", r["id"], "--device-owner",
                     "network:router_interface", "-f", "json", cloud=DEMO) == []
    cloud.cli("router", "unset", "--external-gateway", name, cloud=DEMO)
    assert cloud.cli("router", "show", name, "-f", "json", cloud=DEMO)[
        "external_gateway_info"] is None
    assert cloud.cli("port", "list", "--device-id", r["id"], "-f", "json") == []
    cloud.cli("router", "set", "--disable", name, cloud=DEMO)
    assert cloud.cli("router", "show", name, "-f", "json", cloud=DEMO)["admin_state_up"] is False
    cloud.cli("router", "delete", name, cloud=DEMO)
    assert neutron_error(cloud, "GET", "/routers/" + r["id"])[:2] == (404, "RouterNotFound")


def test_router_interface_by_port_and_bad_input(cloud):
    net = cloud.cli("network", "create", unique("net"), "-f", "json", cloud=DEMO)
    cloud.cli("subnet", "create", "--network", net["id"], "--subnet-range", "10.79.0.0/24",
              unique("sub"), cloud=DEMO)
    r = cloud.cli("router", "create", unique("router"), "-f", "json", cloud=DEMO)
    port = cloud.cli("port", "create", "--network", net["id"], unique("port"), "-f", "json",
                     cloud=DEMO)
    cloud.cli("router", "add", "port", r["id"], port["id"], cloud=DEMO)
    listed = cloud.cli("port", "list", "--device-id", r["id"], "-f", "json", cloud=DEMO)
    assert [p["ID"] for p in listed] == [port["id"]]
    cloud.cli("router", "remove", "port", r["id"], port["id"], cloud=DEMO)
    # removing an interface deletes its port, as Neutron does
    assert cloud.cli("port", "show", port["id"], check=False, cloud=DEMO).returncode != 0
    # a network that is not router:external is no gateway; an unknown one is 404
    st, typ, msg = neutron_error(cloud, "PUT", "/routers/" + r["id"], {
        "router": {"external_gateway_info": {"network_id": net["id"]}}})
    assert (st, msg) == (400, "Bad router request: Network %s is not an external network."
                         % net["id"])
    st, typ, _ = neutron_error(cloud, "PUT", "/routers/" + r["id"], {
        "router": {"external_gateway_info": {"network_id": r["id"]}}})
    assert (st, typ) == (404, "NetworkNotFound")
    # enable_snat is for admins
    public = external_net(cloud, "172.31.2.0/24")
    st, typ, _ = neutron_error(cloud, "PUT", "/routers/" + r["id"], {
        "router": {"external_gateway_info": {"network_id": public["id"], "enable_snat": False}}})
    assert (st, typ) == (403, "PolicyNotAuthorized")
    st, _, msg = neutron_error(cloud, "PUT", "/routers/%s/add_router_interface" % r["id"], {})
    assert (st, msg) == (400, "Bad router request: Either subnet_id or port_id must be specified.")
    for method, path in (("GET", "/routers/non_exist_router"),
                         ("PUT", "/routers/non_exist_router"),
                         ("DELETE", "/routers/non_exist_router")):
        body = {"router": {"name": "x"}} if method == "PUT" else None
        assert neutron_error(cloud, method, path, body)[:2] == (404, "RouterNotFound")
    cloud.cli("router", "delete", r["id"], cloud=DEMO)
    # another project's router is not found
    admins = cloud.cli("router", "create", unique("router"), "-f", "json")
    for method in ("GET", "DELETE"):
        assert neutron_error(cloud, method, "/routers/" + admins["id"])[:2] == (
            404, "RouterNotFound")
    cloud.cli("router", "delete", admins["id"])


def test_subnet_pools(cloud):
    name = unique("pool")
    pool = cloud.cli("subnet", "pool", "create", "--pool-prefix", "10.90.0.0/16",
                     "--pool-prefix", "10.91.0.0/16", "--default-prefix-length", "24", name,
                     "-f", "json", cloud=DEMO)
    # adjacent prefixes are merged, as netaddr.IPSet.compact does
    assert pool["prefixes"] == ["10.90.0.0/15"] and pool["ip_version"] == 4
    assert (pool["min_prefixlen"], pool["default_prefixlen"], pool["max_prefixlen"]) == (8, 24, 32)
    assert name in [p["Name"] for p in cloud.cli("subnet", "pool", "list", "-f", "json",
                                                 cloud=DEMO)]
    net = cloud.cli("network", "create", unique("net"), "-f", "json", cloud=DEMO)
    s1 = cloud.cli("subnet", "create", "--network", net["id"], "--subnet-pool", name,
                   unique("sub"), "-f", "json", cloud=DEMO)
    assert s1["cidr"] == "10.90.0.0/24" and s1["subnetpool_id"] == pool["id"]
    s2 = cloud.cli("subnet", "create", "--network", net["id"], "--subnet-pool", name,
                   "--prefix-length", "26", unique("sub"), "-f", "json", cloud=DEMO)
    # the smallest free block that fits, as Neutron picks it
    assert s2["cidr"] == "10.90.1.0/26"
    p = cloud.cli("subnet", "create", "--network", net["id"], "--subnet-pool", name,
                  "--prefix-length", "4", unique("sub"), check=False, cloud=DEMO)
    assert p.returncode != 0 and "minimum allowed prefix is 8" in p.stderr
    p = cloud.cli("subnet", "pool", "delete", name, check=False, cloud=DEMO)
    assert p.returncode != 0 and "Subnet pool has existing allocations" in p.stderr
    cloud.cli("subnet", "pool", "set", "--name", name + "-b", "--pool-prefix", "10.92.0.0/16",
              name, cloud=DEMO)
    shown = cloud.cli("subnet", "pool", "show", pool["id"], "-f", "json", cloud=DEMO)
    assert shown["name"] == name + "-b"
    assert shown["prefixes"] == ["10.90.0.0/15", "10.92.0.0/16"]
    cloud.cli("subnet", "delete", s1["id"], s2["id"], cloud=DEMO)
    cloud.cli("subnet", "pool", "delete", pool["id"], cloud=DEMO)
    assert neutron_error(cloud, "GET", "/subnetpools/" + pool["id"])[:2] == (
        404, "SubnetPoolNotFound")


def test_subnet_pool_bad_input(cloud):
    p = cloud.cli("subnet", "pool", "create", "--pool-prefix", "10.0.0.0/8", "--pool-prefix",
                  "fd00::/64", unique("pool"), check=False, cloud=DEMO)
    assert p.returncode != 0 and "Cannot mix IPv4 and IPv6 prefixes in a subnet pool." in p.stderr
    st, typ, msg = neutron_error(cloud, "POST", "/subnetpools", {"subnetpool": {
        "name": "x", "prefixes": ["10.0.0.0/8"], "min_prefixlen": 30, "max_prefixlen": 20}})
    assert (st, typ, msg) == (400, "IllegalSubnetPoolPrefixBounds",
                              "Illegal prefix bounds: min_prefixlen=30, max_prefixlen=20.")
    st, typ, _ = neutron_error(cloud, "POST", "/subnetpools", {"subnetpool": {
        "name": "x", "prefixes": []}})
    assert (st, typ) == (400, "EmptySubnetPoolPrefixList")
    st, _, msg = neutron_error(cloud, "POST", "/subnetpools", {"subnetpool": {
        "name": "x", "prefixes": ["10.0.0.0/33"]}})
    assert st == 400 and "prefixes" in msg
    st, _, msg = neutron_error(cloud, "POST", "/subnetpools", {"subnetpool": {
        "prefixes": ["10.0.0.0/8"]}})
    assert (st, msg) == (400, "Failed to parse request. Required attribute 'name' not specified")
    st, typ, _ = neutron_error(cloud, "POST", "/subnetpools", {"subnetpool": {
        "name": "x", "prefixes": ["10.0.0.0/8"], "shared": True}})
    assert (st, typ) == (403, "PolicyNotAuthorized")
    # shrinking a pool's prefixes is refused
    pool = cloud.cli("subnet", "pool", "create", "--pool-prefix", "10.95.0.0/16", unique("pool"),
                     "-f", "json", cloud=DEMO)
    st, typ, _ = neutron_error(cloud, "PUT", "/subnetpools/" + pool["id"], {"subnetpool": {
        "prefixes": ["10.95.0.0/17"]}})
    assert (st, typ) == (400, "IllegalSubnetPoolPrefixUpdate")
    cloud.cli("subnet", "pool", "delete", pool["id"], cloud=DEMO)

"""Floating IPs (Neutron's /v2.0/floatingips) and network quotas, driven as
an operator does: `openstack floating ip create/list/show/set/unset/delete`,
`openstack server add/remove floating ip`, `openstack quota set/show`, and
plain HTTP where the CLI hides the answer (NeutronError bodies). The
servers use the fake driver: this module checks the API, the data plane is
test_dataplane_l3.py's."""
import pytest

from conftest import Cloud, free_port, unique

PUBLIC_CIDR = "203.0.113.48/28"  # the l3 tests' public range
DEMO = "nubo-demo"


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    """This module's own all-in-one with devstack's "public" network seeded."""
    c = Cloud(tmp_path_factory.mktemp("fip"), free_port(),
              ("--set", "network.seed_public_cidr=" + PUBLIC_CIDR))
    c.start()
    yield c
    assert c.stop() == 0, c.tail()


_tokens = {}


def call(cloud, method, path, body=None, cl=DEMO):
    key = (cloud.url, cl)
    if key not in _tokens:
        _tokens[key] = cloud.token(cl)
    return cloud.request(method, "/networking/v2.0" + path, body, token=_tokens[key])


def neutron_error(cloud, method, path, body=None, cl=DEMO):
    st, _, out = call(cloud, method, path, body, cl)
    return st, out["NeutronError"]["type"], out["NeutronError"]["message"]


def public(cloud):
    return cloud.cli("network", "show", "public", "-f", "json")


@pytest.fixture(scope="module")
def topo(cloud):
    """The demo project's network and subnet, a router joining them to
    public, and one server on it."""
    net = cloud.cli("network", "create", unique("fipnet"), "-f", "json", cloud=DEMO)
    sub = cloud.cli("subnet", "create", "--network", net["id"], "--subnet-range",
                    "10.78.0.0/24", unique("fipsub"), "-f", "json", cloud=DEMO)
    router = cloud.cli("router", "create", unique("fiprouter"), "-f", "json", cloud=DEMO)
    cloud.cli("router", "set", "--external-gateway", "public", router["id"], cloud=DEMO)
    cloud.cli("router", "add", "subnet", router["id"], sub["id"], cloud=DEMO)
    server = cloud.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros",
                       "--network", net["id"], "--wait", unique("fipvm"), "-f", "json",
                       cloud=DEMO)
    port = cloud.cli("port", "list", "--server", server["id"], "-f", "json", cloud=DEMO)[0]
    return {"net": net, "sub": sub, "router": router, "server": server, "port": port}


def test_create_show_delete(cloud):
    pub = public(cloud)
    fip = cloud.cli("floating", "ip", "create", "public", "--description", "web",
                    "-f", "json", cloud=DEMO)
    assert fip["floating_network_id"] == pub["id"]
    assert fip["status"] == "DOWN" and fip["port_id"] is None and fip["router_id"] is None
    assert fip["description"] == "web" and fip["fixed_ip_address"] is None
    addr = fip["floating_ip_address"]
    assert addr.startswith("203.0.113.") and 48 < int(addr.rsplit(".", 1)[1]) < 63
    # the address is held by a port of the floating IP on the external network
    ports = cloud.cli("port", "list", "--device-owner", "network:floatingip", "--long",
                      "-f", "json")
    mine = [p for p in ports if any(ip["ip_address"] == addr for ip in p["Fixed IP Addresses"])]
    assert len(mine) == 1
    port = cloud.cli("port", "show", mine[0]["ID"], "-f", "json")
    assert port["device_id"] == fip["id"] and port["network_id"] == pub["id"]
    # which the port API does not delete
    st, typ, msg = neutron_error(cloud, "DELETE", "/ports/" + port["id"], cl="nubo")
    assert (st, typ) == (409, "ServicePortInUse")
    assert msg == ("Port %s cannot be deleted directly via the port API: has device owner "
                   "network:floatingip." % port["id"])
    shown = cloud.cli("floating", "ip", "show", addr, "-f", "json", cloud=DEMO)
    assert shown["id"] == fip["id"] and shown["port_details"] is None
    cloud.cli("floating", "ip", "delete", fip["id"], cloud=DEMO)
    st, typ, msg = neutron_error(cloud, "GET", "/floatingips/" + fip["id"])
    assert (st, typ, msg) == (404, "FloatingIPNotFound",
                              "Floating IP %s could not be found" % fip["id"])
    assert cloud.cli("port", "list", "--device-id", fip["id"], "-f", "json") == []


def test_create_errors(cloud, topo):
    pub = public(cloud)
    st, typ, msg = neutron_error(cloud, "POST", "/floatingips",
                                 {"floatingip": {"floating_network_id": topo["net"]["id"]}})
    assert (st, typ, msg) == (400, "BadRequest",
                              "Bad floatingip request: Network %s is not a valid external "
                              "network." % topo["net"]["id"])
    st, typ, _ = neutron_error(cloud, "POST", "/floatingips", {"floatingip": {}})
    assert st == 400
    # an address already held: 409, as Neutron's IPAM answers
    fip = cloud.cli("floating", "ip", "create", "public", "-f", "json", cloud=DEMO)
    st, typ, msg = neutron_error(cloud, "POST", "/floatingips", {"floatingip": {
        "floating_network_id": pub["id"], "floating_ip_address": fip["floating_ip_address"]}},
        cl="nubo")
    assert st == 409 and fip["floating_ip_address"] in msg
    # an address outside the external subnets
    st, _, _ = neutron_error(cloud, "POST", "/floatingips", {"floatingip": {
        "floating_network_id": pub["id"], "floating_ip_address": "198.51.100.7"}}, cl="nubo")
    assert st == 400
    # fixed_ip_address needs a port
    st, typ, msg = neutron_error(cloud, "PUT", "/floatingips/" + fip["id"],
                                 {"floatingip": {"fixed_ip_address": "10.78.0.5"}})
    assert (st, msg) == (400, "Bad floatingip request: fixed_ip_address cannot be specified "
                              "without a port_id.")
    cloud.cli("floating", "ip", "delete", fip["id"], cloud=DEMO)


def test_associate_with_server(cloud, topo):
    fip = cloud.cli("floating", "ip", "create", "public", "-f", "json", cloud=DEMO)
    addr, server, port = fip["floating_ip_address"], topo["server"], topo["port"]
    cloud.cli("server", "add", "floating", "ip", server["id"], addr, cloud=DEMO)
    shown = cloud.cli("floating", "ip", "show", fip["id"], "-f", "json", cloud=DEMO)
    fixed = port["Fixed IP Addresses"][0]["ip_address"]
    assert shown["port_id"] == port["ID"] and shown["fixed_ip_address"] == fixed
    assert shown["router_id"] == topo["router"]["id"]
    # DOWN until an L3 agent reports it ACTIVE
    assert shown["status"] == "DOWN"
    st, _, body = call(cloud, "GET", "/floatingips/" + fip["id"])
    details = body["floatingip"]["port_details"]
    assert details["device_id"] == server["id"] and details["mac_address"] == port["MAC Address"]
    # the server shows it as Nova does
    st, _, body = cloud.request("GET", "/compute/v2.1/servers/" + server["id"],
                                token=cloud.token(DEMO))
    addrs = body["server"]["addresses"][topo["net"]["name"]]
    assert [(a["addr"], a["OS-EXT-IPS:type"]) for a in addrs] == [(fixed, "fixed"),
                                                                (addr, "floating")]
    assert addrs[1]["OS-EXT-IPS-MAC:mac_addr"] == port["MAC Address"]
    # the list's filters
    def listed(*args):
        return [f["ID"] for f in cloud.cli("floating", "ip", "list", *args, "-f", "json",
                                           cloud=DEMO)]
    assert fip["id"] in listed("--port", port["ID"])
    assert fip["id"] in listed("--network", "public")
    assert fip["id"] in listed("--router", topo["router"]["id"])
    assert fip["id"] in listed("--status", "DOWN")
    assert fip["id"] not in listed("--status", "ACTIVE")
    assert fip["id"] in listed("--fixed-ip-address", fixed)
    assert fip["id"] in listed("--floating-ip-address", addr)
    assert fip["id"] not in listed("--floating-ip-address", "203.0.113.62")
    st, _, body = call(cloud, "GET", "/floatingips?tags=nope")
    assert st == 200 and body["floatingips"] == []
    # a second floating IP for the same fixed address: 409
    other = cloud.cli("floating", "ip", "create", "public", "-f", "json", cloud=DEMO)
    st, typ, msg = neutron_error(cloud, "PUT", "/floatingips/" + other["id"],
                                 {"floatingip": {"port_id": port["ID"]}})
    assert (st, typ) == (409, "FloatingIPPortAlreadyAssociated")
    assert msg == ("Cannot associate floating IP %s (%s) with port %s using fixed IP %s, as "
                   "that fixed IP already has a floating IP on external network %s."
                   % (other["floating_ip_address"], other["id"], port["ID"], fixed,
                      public(cloud)["id"]))
    # the router's interface and gateway stay while the floating IP needs them
    p = cloud.cli("router", "remove", "subnet", topo["router"]["id"], topo["sub"]["id"],
                  check=False, cloud=DEMO)
    assert p.returncode != 0 and (
        "Router interface for subnet %s on router %s cannot be deleted, as it is required by "
        "one or more floating IPs." % (topo["sub"]["id"], topo["router"]["id"])) in p.stderr
    p = cloud.cli("router", "unset", "--external-gateway", topo["router"]["id"], check=False,
                  cloud=DEMO)
    assert p.returncode != 0 and "is required by one or more floating IPs" in p.stderr
    # description changes alone keep the association
    cloud.cli("floating", "ip", "set", "--description", "kept", fip["id"], cloud=DEMO)
    shown = cloud.cli("floating", "ip", "show", fip["id"], "-f", "json", cloud=DEMO)
    assert shown["description"] == "kept" and shown["port_id"] == port["ID"]
    # disassociate
    cloud.cli("server", "remove", "floating", "ip", server["id"], addr, cloud=DEMO)
    shown = cloud.cli("floating", "ip", "show", fip["id"], "-f", "json", cloud=DEMO)
    assert shown["port_id"] is None and shown["router_id"] is None
    assert shown["fixed_ip_address"] is None
    srv = cloud.cli("server", "show", server["id"], "-f", "json", cloud=DEMO)
    assert addr not in str(srv["addresses"])
    for f in (fip, other):
        cloud.cli("floating", "ip", "delete", f["id"], cloud=DEMO)


def test_unreachable_and_several_fixed_ips(cloud, topo):
    # a network without a router to public
    net = cloud.cli("network", "create", unique("lonely"), "-f", "json", cloud=DEMO)
    sub = cloud.cli("subnet", "create", "--network", net["id"], "--subnet-range",
                    "10.79.0.0/24", unique("lonelysub"), "-f", "json", cloud=DEMO)
    port = cloud.cli("port", "create", "--network", net["id"], unique("p"), "-f", "json",
                     cloud=DEMO)
    fip = cloud.cli("floating", "ip", "create", "public", "-f", "json", cloud=DEMO)
    st, typ, msg = neutron_error(cloud, "PUT", "/floatingips/" + fip["id"],
                                 {"floatingip": {"port_id": port["id"]}})
    assert (st, typ) == (404, "ExternalGatewayForFloatingIPNotFound")
    assert msg == ("External network %s is not reachable from subnet %s.  Therefore, cannot "
                   "associate Port %s with a Floating IP." % (public(cloud)["id"], sub["id"],
                                                              port["id"]))
    # a port with two IPv4 addresses on the routed subnet
    two = cloud.cli("port", "create", "--network", topo["net"]["id"],
                    "--fixed-ip", "subnet=%s,ip-address=10.78.0.50" % topo["sub"]["id"],
                    "--fixed-ip", "subnet=%s,ip-address=10.78.0.51" % topo["sub"]["id"],
                    unique("two"), "-f", "json", cloud=DEMO)
    st, typ, msg = neutron_error(cloud, "PUT", "/floatingips/" + fip["id"],
                                 {"floatingip": {"port_id": two["id"]}})
    assert (st, msg) == (400, "Bad floatingip request: Port %s has multiple fixed IPv4 "
                              "addresses.  Must provide a specific IPv4 address when "
                              "assigning a floating IP." % two["id"])
    st, _, msg = neutron_error(cloud, "PUT", "/floatingips/" + fip["id"], {"floatingip": {
        "port_id": two["id"], "fixed_ip_address": "10.78.0.52"}})
    assert (st, msg) == (400, "Bad floatingip request: Port %s does not have fixed ip "
                              "10.78.0.52." % two["id"])
    cloud.cli("floating", "ip", "set", "--port", two["id"], "--fixed-ip-address", "10.78.0.51",
              fip["id"], cloud=DEMO)
    shown = cloud.cli("floating", "ip", "show", fip["id"], "-f", "json", cloud=DEMO)
    assert shown["fixed_ip_address"] == "10.78.0.51" and shown["port_id"] == two["id"]
    # deleting the port disassociates the floating IP, as Neutron does
    cloud.cli("port", "delete", two["id"], cloud=DEMO)
    shown = cloud.cli("floating", "ip", "show", fip["id"], "-f", "json", cloud=DEMO)
    assert shown["port_id"] is None and shown["fixed_ip_address"] is None
    assert shown["router_id"] is None
    cloud.cli("floating", "ip", "delete", fip["id"], cloud=DEMO)
    cloud.cli("port", "delete", port["id"], cloud=DEMO)


def test_quotas_set_show_enforced(cloud):
    project = cloud.cli("project", "show", "demo", "-f", "json")["id"]
    used = len(cloud.cli("network", "list", "--project", project, "-f", "json"))
    cloud.cli("quota", "set", "--networks", str(used + 1), "--floating-ips", "1",
              "--routers", "5", project)
    q = cloud.cli("quota", "show", project, "-f", "json")
    assert (q["networks"], q["floating-ips"], q["routers"]) == (used + 1, 1, 5)
    assert q["subnets"] == 100  # untouched: the default
    st, _, body = call(cloud, "GET", "/quotas/%s/details" % project)
    assert body["quota"]["network"] == {"limit": used + 1, "used": used, "reserved": 0}
    st, _, body = call(cloud, "GET", "/quotas/%s/default" % project)
    assert body["quota"]["network"] == 100
    st, _, body = call(cloud, "GET", "/quotas", cl="nubo")
    assert [x["network"] for x in body["quotas"] if x["project_id"] == project] == [used + 1]
    cloud.cli("network", "create", unique("q"), cloud=DEMO)
    p = cloud.cli("network", "create", unique("q"), check=False, cloud=DEMO)
    assert p.returncode != 0 and "Quota exceeded for resources: ['network']." in p.stderr
    st, typ, msg = neutron_error(cloud, "POST", "/networks", {"network": {"name": "x"}})
    assert (st, typ, msg) == (409, "OverQuota", "Quota exceeded for resources: ['network'].")
    fips = cloud.cli("floating", "ip", "list", "-f", "json", cloud=DEMO)
    if not fips:
        cloud.cli("floating", "ip", "create", "public", cloud=DEMO)
    p = cloud.cli("floating", "ip", "create", "public", check=False, cloud=DEMO)
    assert p.returncode != 0 and "Quota exceeded for resources: ['floatingip']." in p.stderr
    # members neither set nor reset
    st, typ, msg = neutron_error(cloud, "PUT", "/quotas/" + project,
                                 {"quota": {"network": 50}})
    assert (st, msg) == (403, "rule:update_quota is disallowed by policy")
    # bad limits, unknown resources
    st, _, msg = neutron_error(cloud, "PUT", "/quotas/" + project, {"quota": {"network": -2}},
                               cl="nubo")
    assert (st, msg) == (400, "Invalid input for network. Reason: '-2' is too small - must be "
                              "at least '-1'.")
    st, _, msg = neutron_error(cloud, "PUT", "/quotas/" + project,
                               {"quota": {"network": "many"}}, cl="nubo")
    assert (st, msg) == (400, "Invalid input for operation: 'many' is not an integer.")
    st, _, msg = neutron_error(cloud, "PUT", "/quotas/" + project, {"quota": {"bogus": 1}},
                               cl="nubo")
    assert (st, msg) == (400, "Unrecognized attribute(s) 'bogus'")
    # check_limit refuses a limit below the usage
    st, _, msg = neutron_error(cloud, "PUT", "/quotas/" + project,
                               {"quota": {"network": 0, "check_limit": True}}, cl="nubo")
    assert st == 400 and "must be greater than or equal to already used" in msg
    # -1 is unlimited; delete returns to the defaults
    cloud.cli("quota", "set", "--networks", "-1", project)
    cloud.cli("network", "create", unique("q"), cloud=DEMO)
    st, _, _ = call(cloud, "DELETE", "/quotas/" + project, cl="nubo")
    assert st == 204
    q = cloud.cli("quota", "show", project, "-f", "json")
    assert (q["networks"], q["floating-ips"]) == (100, 50)


def test_port_forwarding(cloud, topo):
    fip = cloud.cli("floating", "ip", "create", "public", "-f", "json", cloud=DEMO)
    port = cloud.cli("port", "create", "--network", topo["net"]["id"], unique("pf"), "-f", "json",
                     cloud=DEMO)
    ip = port["fixed_ips"][0]["ip_address"]
    pf = cloud.cli("floating", "ip", "port", "forwarding", "create", "--internal-ip-address", ip,
                   "--port", port["id"], "--internal-protocol-port", "22",
                   "--external-protocol-port", "2222", "--protocol", "tcp",
                   "--description", "ssh", fip["id"], "-f", "json", cloud=DEMO)
    assert (pf["internal_ip_address"], pf["internal_port"], pf["external_port"]) == (ip, 22, 2222)
    assert pf["protocol"] == "tcp" and pf["internal_port_id"] == port["id"]
    assert pf["description"] == "ssh"
    # the floating IP belongs to the router now, associated with no port
    shown = cloud.cli("floating", "ip", "show", fip["id"], "-f", "json", cloud=DEMO)
    assert shown["router_id"] == topo["router"]["id"] and shown["port_id"] is None
    listed = cloud.cli("floating", "ip", "port", "forwarding", "list", fip["id"], "-f", "json",
                       cloud=DEMO)
    assert [x["ID"] for x in listed] == [pf["id"]]
    # the same external port again is a duplicate
    st, typ, msg = neutron_error(cloud, "POST", "/floatingips/%s/port_forwardings" % fip["id"], {
        "port_forwarding": {"protocol": "tcp", "external_port": 2222, "internal_port": 23,
                            "internal_ip_address": ip, "internal_port_id": port["id"]}})
    assert st == 400 and "A duplicate port forwarding entry" in msg
    st, _, msg = neutron_error(cloud, "POST", "/floatingips/%s/port_forwardings" % fip["id"], {
        "port_forwarding": {"protocol": "tcp", "external_port": 0, "internal_port": 23,
                            "internal_ip_address": ip, "internal_port_id": port["id"]}})
    assert (st, msg) == (400, "Invalid input for external_port. Reason: '0' is too small - "
                              "must be at least '1'.")
    # a floating IP with forwardings is not associated with a port
    st, typ, msg = neutron_error(cloud, "PUT", "/floatingips/" + fip["id"],
                                 {"floatingip": {"port_id": port["id"]}})
    assert (st, typ, msg) == (409, "FipInUseByPortForwarding",
                              "Floating IP %s in use by Port Forwarding resources." % fip["id"])
    cloud.cli("floating", "ip", "port", "forwarding", "set", "--external-protocol-port", "2200",
              fip["id"], pf["id"], cloud=DEMO)
    got = cloud.cli("floating", "ip", "port", "forwarding", "show", fip["id"], pf["id"],
                    "-f", "json", cloud=DEMO)
    assert got["external_port"] == 2200 and got["internal_port"] == 22
    cloud.cli("floating", "ip", "port", "forwarding", "delete", fip["id"], pf["id"], cloud=DEMO)
    shown = cloud.cli("floating", "ip", "show", fip["id"], "-f", "json", cloud=DEMO)
    assert shown["router_id"] is None
    cloud.cli("floating", "ip", "delete", fip["id"], cloud=DEMO)
    cloud.cli("port", "delete", port["id"], cloud=DEMO)


def nova(cloud, method, path, body=None, mv="2.35", cl=DEMO):
    key = (cloud.url, cl)
    if key not in _tokens:
        _tokens[key] = cloud.token(cl)
    return cloud.request(method, "/compute/v2.1" + path, body, token=_tokens[key],
                         headers={"OpenStack-API-Version": "compute " + mv})


def test_nova_proxy(cloud, topo):
    """Nova's os-floating-ips / os-floating-ip-pools and the addFloatingIp /
    removeFloatingIp actions over the same floating IPs, gone at 2.36 and
    2.44."""
    st, _, out = nova(cloud, "GET", "/os-floating-ip-pools")
    assert st == 200 and {"name": "public"} in out["floating_ip_pools"]
    st, _, out = nova(cloud, "POST", "/os-floating-ips", {"pool": "nowhere"})
    assert (st, out["itemNotFound"]["message"]) == (404, "Floating IP pool not found.")
    st, _, out = nova(cloud, "POST", "/os-floating-ips", {"pool": "public"})
    assert st == 200, out
    fip = out["floating_ip"]
    assert fip["pool"] == "public" and fip["fixed_ip"] is None and fip["instance_id"] is None
    st, _, out = nova(cloud, "GET", "/os-floating-ips/" + fip["id"])
    assert st == 200 and out["floating_ip"] == fip
    st, _, out = nova(cloud, "GET", "/os-floating-ips")
    assert st == 200 and fip in out["floating_ips"]
    sid, fixed = topo["server"]["id"], topo["port"]["Fixed IP Addresses"][0]["ip_address"]
    act = "/servers/%s/action" % sid
    st, _, out = nova(cloud, "POST", act, {"addFloatingIp": {"address": fip["ip"]}})
    assert st == 202, out
    st, _, out = nova(cloud, "GET", "/os-floating-ips/" + fip["id"])
    assert out["floating_ip"]["instance_id"] == sid and out["floating_ip"]["fixed_ip"] == fixed
    st, _, out = nova(cloud, "POST", act, {"addFloatingIp": {"address": "192.0.2.1"}})
    assert (st, out["itemNotFound"]["message"]) == (404, "floating IP not found")
    st, _, out = nova(cloud, "POST", act, {"addFloatingIp": {"address": fip["ip"],
                                                             "fixed_address": "10.9.9.9"}})
    assert (st, out["badRequest"]["message"]) == (
        400, "Specified fixed address not assigned to instance")
    st, _, out = nova(cloud, "POST", act, {"removeFloatingIp": {"address": fip["ip"]}})
    assert st == 202, out
    # no instance has it now: Nova's policy target is {}, which only an admin passes
    st, _, out = nova(cloud, "POST", act, {"removeFloatingIp": {"address": fip["ip"]}})
    assert st == 403, out
    st, _, out = nova(cloud, "POST", act, {"removeFloatingIp": {"address": fip["ip"]}}, cl="nubo")
    assert (st, out["conflictingRequest"]["message"]) == (
        409, "Floating IP %s is not associated with instance %s." % (fip["ip"], sid))
    st, _, out = nova(cloud, "POST", act, {"addFloatingIp": {"address": fip["ip"]}}, mv="2.44")
    assert st == 404
    for path in ("/os-floating-ips", "/os-floating-ip-pools", "/os-floating-ips/" + fip["id"]):
        st, _, out = nova(cloud, "GET", path, mv="2.36")
        assert (st, out["itemNotFound"]["message"]) == (404, "The resource could not be found.")
    st, _, _ = nova(cloud, "DELETE", "/os-floating-ips/" + fip["id"])
    assert st == 202
    st, _, out = nova(cloud, "GET", "/os-floating-ips/" + fip["id"])
    assert (st, out["itemNotFound"]["message"]) == (
        404, "Floating IP not found for ID %s" % fip["id"])

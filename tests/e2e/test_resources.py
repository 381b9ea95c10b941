"""Flavors, keypairs, services, hypervisors, zones, aggregates, server
groups, images, limits and quotas with the real CLI."""
import subprocess
import time

from conftest import unique


def test_default_flavors(cloud):
    flv = {f["Name"]: f for f in cloud.cli("flavor", "list", "-f", "json")}
    assert flv["m1.tiny"]["RAM"] == 512 and flv["m1.tiny"]["VCPUs"] == 1 and flv["m1.tiny"]["Disk"] == 1
    assert {"m1.small", "m1.medium"} <= set(flv)


def test_flavor_crud_and_extra_specs(cloud):
    name = unique("f")
    f = cloud.cli("flavor", "create", "--ram", "256", "--vcpus", "1", "--disk", "2",
                  "--property", "hw:cpu_policy=shared", name, "-f", "json")
    assert f["name"] == name and f["ram"] == 256
    shown = cloud.cli("flavor", "show", name, "-f", "json")
    assert "hw:cpu_policy" in str(shown["properties"])
    cloud.cli("flavor", "delete", name)
    assert cloud.cli("flavor", "show", name, check=False).returncode != 0


def test_keypairs_import_and_generate(cloud, tmp_path):
    key = tmp_path / "k"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    name = unique("kp")
    kp = cloud.cli("keypair", "create", "--public-key", str(key) + ".pub", name, "-f", "json")
    fp = subprocess.run(["ssh-keygen", "-l", "-E", "md5", "-f", str(key) + ".pub"],
                        capture_output=True, text=True).stdout.split()[1]
    assert kp["fingerprint"] == fp.replace("MD5:", "")
    gen = unique("gen")
    priv = cloud.cli("keypair", "create", gen)
    assert "PRIVATE KEY" in priv
    names = [k["Name"] for k in cloud.cli("keypair", "list", "-f", "json")]
    assert name in names and gen in names
    s = cloud.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--key-name", name, "--wait", unique("k"), "-f", "json")
    assert s["key_name"] == name
    cloud.cli("keypair", "delete", name, gen)


def test_services_and_hypervisors(cloud):
    svcs = cloud.cli("compute", "service", "list", "-f", "json")
    comp = [s for s in svcs if s["Binary"] == "nova-compute"]
    assert sorted(s["Host"] for s in comp) == ["fake-1", "fake-2", "fake-3"]
    assert all(s["State"] == "up" and s["Status"] == "enabled" for s in comp)
    assert {"nova-scheduler", "nova-conductor"} <= {s["Binary"] for s in svcs}
    only = cloud.cli("compute", "service", "list", "--service", "nova-compute", "-f", "json")
    assert len(only) == 3
    hyp = cloud.cli("hypervisor", "list", "--long", "-f", "json")
    assert len(hyp) == 3 and all(h["State"] == "up" for h in hyp)
    show = cloud.cli("hypervisor", "show", "fake-1", "-f", "json")
    assert show["hypervisor_type"] and show["service_host"] if "service_host" in show else True
    stats = cloud.cli("hypervisor", "stats", "show", "-f", "json")
    assert stats["count"] == 3 and stats["vcpus"] > 0 and stats["memory_mb"] > 0



def test_hosts_and_extensions(cloud):
    hosts = cloud.cli("host", "list", "-f", "json")
    comp = sorted(h["Host Name"] for h in hosts if h["Service"] == "compute")
    assert comp == ["fake-1", "fake-2", "fake-3"]
    assert {h["Zone"] for h in hosts if h["Service"] == "compute"} == {"nova"}
    assert [h for h in cloud.cli("host", "list", "--zone", "nova", "-f", "json")
            if h["Service"] == "compute"] and not cloud.cli("host", "list", "--zone", "xxx", "-f", "json")
    rows = cloud.cli("host", "show", "fake-1", "-f", "json")
    assert [r["Project"] for r in rows][:3] == ["(total)", "(used_now)", "(used_max)"]
    assert rows[0]["CPU"] > 0 and rows[0]["Memory MB"] > 0
    assert cloud.cli("host", "show", "nonexistent", check=False).returncode != 0
    exts = cloud.cli("extension", "list", "--compute", "-f", "json")
    assert "os-hosts" in {e["Alias"] for e in exts} and "Hosts" in {e["Name"] for e in exts}

def test_service_disable_enable(fresh_cloud):
    c = fresh_cloud()
    c.cli("compute", "service", "set", "--disable", "--disable-reason", "maintenance",
          "fake-1", "nova-compute")
    svc = [s for s in c.cli("compute", "service", "list", "--long", "-f", "json")
           if s["Host"] == "fake-1" and s["Binary"] == "nova-compute"][0]
    assert svc["Status"] == "disabled" and svc["Disabled Reason"] == "maintenance"
    # ComputeFilter keeps disabled hosts out
    for _ in range(3):
        s = c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--wait", unique("d"), "-f", "json")
        assert c.cli("server", "show", s["id"], "-f", "json")["OS-EXT-SRV-ATTR:host"] != "fake-1"
    c.cli("compute", "service", "set", "--enable", "fake-1", "nova-compute")


def test_zones_and_aggregates(fresh_cloud):
    c = fresh_cloud()
    agg = c.cli("aggregate", "create", "--zone", "az1", "agg1", "-f", "json")
    c.cli("aggregate", "add", "host", "agg1", "fake-1")
    # plain `availability zone list` also builds a network client in OSC 6.0
    zones = {z["Zone Name"] for z in c.cli("availability", "zone", "list", "--compute", "-f",
                                           "json")}
    assert "az1" in zones
    s = c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--availability-zone", "az1", "--wait", unique("z"), "-f", "json")
    shown = c.cli("server", "show", s["id"], "-f", "json")
    assert shown["OS-EXT-SRV-ATTR:host"] == "fake-1"
    assert shown["OS-EXT-AZ:availability_zone"] == "az1"
    # The membership is mirrored into placement (the compute API calls
    # placement's own aggregate call, which bumps the generation).
    tok = c.token()
    ph = {"OpenStack-API-Version": "placement 1.39"}
    _, _, body = c.request("GET", "/placement/resource_providers", token=tok, headers=ph)
    rps = {r["name"]: r for r in body["resource_providers"]}
    _, _, body = c.request("GET", "/placement/resource_providers/%s/aggregates"
                           % rps["fake-1"]["uuid"], token=tok, headers=ph)
    assert body["aggregates"] == [agg["uuid"]]
    # Deleting fake-3's compute service (no instances there) deletes its
    # provider in placement and takes the host out of its aggregates.
    nh = {"OpenStack-API-Version": "compute 2.53"}
    agg_url = "/compute/v2.1/os-aggregates/%s" % agg["id"]
    st, _, _ = c.request("POST", agg_url + "/action", {"add_host": {"host": "fake-3"}},
                         token=tok, headers=nh)
    assert st == 200
    _, _, body = c.request("GET", "/compute/v2.1/os-services?binary=nova-compute&host=fake-3",
                           token=tok, headers=nh)
    st, _, _ = c.request("DELETE", "/compute/v2.1/os-services/%s" % body["services"][0]["id"],
                         token=tok, headers=nh)
    assert st == 204
    st, _, _ = c.request("GET", "/placement/resource_providers/%s" % rps["fake-3"]["uuid"],
                         token=tok, headers=ph)
    assert st == 404
    _, _, body = c.request("GET", "/placement/allocation_candidates?resources=VCPU:1",
                           token=tok, headers=ph)
    assert rps["fake-3"]["uuid"] not in body["provider_summaries"]
    _, _, body = c.request("GET", agg_url, token=tok, headers=nh)
    assert body["aggregate"]["hosts"] == ["fake-1"]


def test_server_group_anti_affinity(fresh_cloud):
    c = fresh_cloud()
    g = c.cli("server", "group", "create", "--policy", "anti-affinity", "g1", "-f", "json")
    hosts = set()
    for i in range(3):
        s = c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--hint", "group=%s" % g["id"], "--wait", "ga%d" % i, "-f", "json")
        hosts.add(c.cli("server", "show", s["id"], "-f", "json")["OS-EXT-SRV-ATTR:host"])
    assert len(hosts) == 3
    c.cli("server", "create", "--flavor", "m1.tiny", "--image", "cirros", "--hint", "group=%s" % g["id"], "--wait", "ga4", check=False)
    s4 = [x for x in c.cli("server", "list", "-f", "json") if x["Name"] == "ga4"][0]
    assert s4["Status"] == "ERROR"
    tok = c.token()
    _, _, body = c.request("GET", "/compute/v2.1/servers/%s" % s4["ID"], token=tok)
    assert "ServerGroupAntiAffinityFilter: 3 -> 0" in body["server"]["fault"]["details"]


def test_images_records(cloud):
    imgs = {i["Name"]: i for i in cloud.cli("image", "list", "-f", "json")}
    assert imgs["cirros"]["Status"] == "active"
    name = unique("img")
    im = cloud.cli("image", "create", "--disk-format", "raw", "--container-format", "bare",
                   "--property", "hw_disk_bus=virtio", name, "-f", "json")
    assert im["status"] == "queued"
    cloud.cli("image", "set", "--property", "os_distro=debian", name)
    shown = cloud.cli("image", "show", name, "-f", "json")
    assert "os_distro" in str(shown["properties"])
    assert name in [i["Name"] for i in cloud.cli("image", "list", "--status", "queued", "-f", "json")]
    cloud.cli("image", "delete", name)
    assert cloud.cli("image", "show", name, check=False).returncode != 0


def test_limits_and_quotas(cloud):
    lim = {l["Name"]: l["Value"] for l in cloud.cli("limits", "show", "--absolute", "-f", "json",
                                                    cloud="nubo-demo")}
    assert lim["maxTotalInstances"] == 10 and lim["maxTotalCores"] == 20
    assert lim["maxTotalRAMSize"] == 51200
    q = cloud.cli("quota", "show", "demo", "-f", "json")
    assert q["instances"] == 10 or {"Resource": "instances", "Limit": 10} in q



def test_quota_class_default_is_every_projects_default(cloud):
    """PUT /os-quota-class-sets/default (openstack quota set --class) sets
    what GET /os-quota-sets/{project}/defaults and the project's limits
    then report (Nova's DB quota driver); key_pairs, which no other test
    counts, and put back after."""
    tok = cloud.token("nubo")
    cloud.cli("quota", "set", "--class", "--key-pairs", "150", "default")
    try:
        st, _, body = cloud.request("GET", "/compute/v2.1/os-quota-class-sets/default", token=tok)
        assert st == 200 and body["quota_class_set"]["key_pairs"] == 150, body
        assert body["quota_class_set"]["id"] == "default"
        assert "server_groups" not in body["quota_class_set"]  # before 2.50
        demo = cloud.cli("project", "show", "demo", "-f", "json")["id"]
        st, _, body = cloud.request("GET", "/compute/v2.1/os-quota-sets/%s/defaults" % demo,
                                    token=tok)
        assert st == 200 and body["quota_set"]["key_pairs"] == 150, body
        q = cloud.cli("quota", "show", "demo", "-f", "json")
        assert q["key-pairs"] == 150 or {"Resource": "key-pairs", "Limit": 150} in q, q
        st, _, body = cloud.request("PUT", "/compute/v2.1/os-quota-class-sets/default", token=tok,
                                    headers={"OpenStack-API-Version": "compute 2.57"},
                                    body={"quota_class_set": {"injected_files": 7}})
        assert st == 400 and "'injected_files' was unexpected" in body["badRequest"]["message"]
        st, _, _ = cloud.request("PUT", "/compute/v2.1/os-quota-class-sets/default",
                                 token=cloud.token("nubo-demo"),
                                 body={"quota_class_set": {"key_pairs": 7}})
        assert st == 403
    finally:
        cloud.cli("quota", "set", "--class", "--key-pairs", "100", "default")

def test_hypervisor_disk_used_leaves_out_volume_roots(fresh_cloud):
    """A boot-from-volume root is no local disk: `hypervisor stats show`
    and the per-hypervisor local_gb_used (2.1) count only the image-backed
    server's root, as placement does (DISK_GB usage)."""
    c = fresh_cloud("--set", "DEFAULT.update_resources_interval=1")
    tok = c.token()
    st, _, img = c.request("POST", "/image/v2/images", {
        "name": "raw1m", "disk_format": "raw", "container_format": "bare"}, token=tok)
    assert st == 201, img
    image = img["id"]
    st, _, _ = c.request("PUT", "/image/v2/images/%s/file" % image, token=tok, raw=b"\0" * 65536,
                         headers={"Content-Type": "application/octet-stream"})
    assert st == 204
    servers = [{"name": "bfv", "flavorRef": "1", "networks": "none",
                "block_device_mapping_v2": [{"uuid": image, "source_type": "image",
                                             "destination_type": "volume", "volume_size": 1,
                                             "boot_index": 0, "delete_on_termination": True}]},
               {"name": "local", "flavorRef": "1", "imageRef": image, "networks": "none"}]
    hdr = {"OpenStack-API-Version": "compute 2.37"}
    for srv in servers:
        st, _, body = c.request("POST", "/compute/v2.1/servers", {"server": srv}, token=tok,
                                headers=hdr)
        assert st == 202, body
        srv["id"] = body["server"]["id"]
    deadline = time.time() + 30
    while time.time() < deadline:
        status = [c.request("GET", "/compute/v2.1/servers/%s" % srv["id"], token=tok)[2]
                  ["server"]["status"] for srv in servers]
        if "BUILD" not in status:
            break
        time.sleep(0.1)
    assert status == ["ACTIVE", "ACTIVE"]
    deadline = time.time() + 30
    while time.time() < deadline:
        st, _, body = c.request("GET", "/compute/v2.1/os-hypervisors/detail", token=tok)
        hvs = body["hypervisors"]
        if sum(h["running_vms"] for h in hvs) == 2:
            break
        time.sleep(0.2)
    assert sum(h["local_gb_used"] for h in hvs) == 1, hvs
    rps = c.request("GET", "/placement/resource_providers", token=tok)[2]["resource_providers"]
    disk = 0
    for rp in rps:
        usage = c.request("GET", "/placement/resource_providers/%s/usages" % rp["uuid"],
                          token=tok)[2]["usages"]
        disk += usage.get("DISK_GB", 0)
    assert disk == 1
    stats = c.cli("hypervisor", "stats", "show", "-f", "json")
    assert stats["local_gb_used"] == 1 and stats["free_disk_gb"] == stats["local_gb"] - 1, stats


def test_volume_services_and_network_agents(cloud):
    """`openstack volume service list` shows the cinder-scheduler and
    cinder-volume parts nubo runs, up by their heartbeats (a row whose
    heartbeat stopped is down); `openstack network agent list` is empty:
    nubo runs no Neutron agent."""
    cloud.sql("INSERT INTO volume_services (host, \"binary\", availability_zone, created_at, "
              "updated_at) VALUES ('gone@nfs', 'cinder-volume', 'nova', "
              "'2020-01-01T00:00:00.000000', '2020-01-01T00:00:00.000000')")
    rows = {(r["Binary"], r["Host"]): r for r in
            cloud.cli("volume", "service", "list", "-f", "json")}
    host = cloud.sql("SELECT host FROM services WHERE \"binary\" = 'nova-conductor'")[0]["host"]
    assert set(rows) == {("cinder-scheduler", host), ("cinder-volume", host + "@nfs"),
                         ("cinder-volume", "gone@nfs")}
    for key in (("cinder-scheduler", host), ("cinder-volume", host + "@nfs")):
        assert rows[key]["State"] == "up" and rows[key]["Status"] == "enabled", rows
        assert rows[key]["Zone"] == "nova"
    assert rows[("cinder-volume", "gone@nfs")]["State"] == "down"
    assert cloud.cli("network", "agent", "list", "-f", "json") == []

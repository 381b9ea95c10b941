"""The conductor and the scheduler in processes of their own, as
nova-conductor and nova-scheduler run.

One split cloud (fake driver, its own RabbitMQ vhost, as in
test_multiprocess): `nubo serve` with the API roles (api, placement,
metadata), `nubo serve --set DEFAULT.roles=conductor`, `nubo serve --set
DEFAULT.roles=scheduler` and one `nubo compute`. Each process initialises
the modules its roles call in-process (the conductor: placement, image,
volume, network; the scheduler: placement) and reaches the others over the
bus; a process with no HTTP role serves none. Boots that make the conductor
create a port and a volume and the scheduler claim in placement finish,
a delete releases them, both services are up in `openstack compute service
list`, and a conductor killed -9 and started again finishes a boot accepted
while it was gone."""
import signal
import subprocess

import pytest

from conftest import NUBO_BIN, unique
from test_multiprocess import Proc, Split, new_vhost, wait_for

API_ROLES = "api,placement,metadata"
MV = {"X-OpenStack-Nova-API-Version": "2.37"}


@pytest.fixture(scope="module")
def vhost():
    yield from new_vhost()


class SplitRoles(Split):
    """Split with the conductor and the scheduler out of `nubo serve`."""

    def start_serve(self):
        """The three control-plane processes started at once, as
        nubo-api.service pulls in nubo-conductor and nubo-scheduler."""
        self.serve, self.conductor, self.scheduler = [
            self.role(r, wait=False) for r in (API_ROLES, "conductor", "scheduler")]
        for p in (self.serve, self.conductor, self.scheduler):
            p.wait_ready(60)
        return self

    def role(self, roles, wait=True):
        p = Proc(roles.split(",")[0], ["serve", "--config", self.conf, "--set",
                                       "DEFAULT.roles=%s" % roles], self.cloud.state_dir).start()
        return p.wait_ready(60) if wait else p

    def stop(self):
        rcs = [p.stop() for p in self.computes.values()]
        rcs += [p.stop() for p in (self.conductor, self.scheduler) if p]
        if self.serve:
            rcs.append(self.serve.stop())
        return rcs


@pytest.fixture(scope="module")
def split(tmp_path_factory, vhost):
    s = SplitRoles(tmp_path_factory.mktemp("roles"), vhost).create()
    s.conductor = s.scheduler = None
    s.start_serve()
    s.compute("fake-r1")
    yield s
    rcs = s.stop()
    assert all(rc == 0 for rc in rcs), (rcs, s.conductor.tail(), s.scheduler.tail())


def rest(c, method, path, body=None, ok=(200,)):
    if not getattr(c, "_token", None):
        c._token = c.token()
    st, _, data = c.request(method, path, body, token=c._token, headers=MV)
    assert st in ok, (method, path, st, data)
    return data


def lookup(c):
    """cirros, m1.tiny and the private network's IDs."""
    img = rest(c, "GET", "/image/v2/images?name=cirros")["images"][0]["id"]
    flavor = [f["id"] for f in rest(c, "GET", "/compute/v2.1/flavors")["flavors"]
              if f["name"] == "m1.tiny"][0]
    net = rest(c, "GET", "/networking/v2.0/networks?name=private")["networks"][0]["id"]
    return img, flavor, net


def raw_image(c):
    """A public 1 MiB raw image with data (cirros is a record without data
    on the fake driver's cloud)."""
    img = rest(c, "POST", "/image/v2/images", {"name": unique("sr-raw"), "disk_format": "raw",
                                               "container_format": "bare",
                                               "visibility": "public"}, ok=(201,))["id"]
    st, _, data = c.request("PUT", "/image/v2/images/%s/file" % img, token=c._token,
                            headers={"Content-Type": "application/octet-stream"},
                            raw=b"\0" * (1 << 20))
    assert st == 204, (st, data)
    return img


def create(c, name, **extra):
    body = {"server": dict({"name": name, "flavorRef": extra.pop("flavor")}, **extra)}
    return rest(c, "POST", "/compute/v2.1/servers", body, ok=(202,))["server"]["id"]


def settled(c, sid, timeout=60):
    """The server once it is ACTIVE or ERROR with no task."""
    return wait_for("server %s settled" % sid, lambda: (
        lambda v: v["status"] in ("ACTIVE", "ERROR") and not v["OS-EXT-STS:task_state"] and v)(
            rest(c, "GET", "/compute/v2.1/servers/%s" % sid)["server"]), timeout)


def test_conductor_and_scheduler_run_in_processes_of_their_own(split):
    c = split.cloud
    for p, role in ((split.conductor, "conductor"), (split.scheduler, "scheduler")):
        assert "nubo: ready (roles %s, host " % role in p.tail()
    svc = wait_for("conductor and scheduler up", lambda: (lambda s: all(
        s.get(b) == "up" for b in ("nova-conductor", "nova-scheduler", "nova-compute")) and s)({
            s["Binary"]: s["State"] for s in c.cli("compute", "service", "list", "-f", "json")}))
    assert set(svc) == {"nova-conductor", "nova-scheduler", "nova-compute"}, svc
    # each role is reported by the process that runs it
    out = subprocess.run([NUBO_BIN, "status", "--config", split.conf], capture_output=True,
                         text=True, timeout=60).stdout
    pids = {l.split()[0]: l for l in out.splitlines()}
    assert "pid=%d " % split.conductor.p.pid in pids["nova-conductor"], out
    assert "pid=%d " % split.scheduler.p.pid in pids["nova-scheduler"], out
    assert "pid=%d " % split.serve.p.pid in pids["nova-api"], out
    # a process without an HTTP role listens on no port of the API
    assert "ready at" not in split.conductor.tail() + split.scheduler.tail()


def test_boots_with_a_port_and_a_volume_then_delete_releases_them(split):
    c = split.cloud
    img, flavor, net = lookup(c)
    raw = raw_image(c)
    sids = [
        create(c, unique("sr-none"), flavor=flavor, imageRef=img, networks="none"),
        create(c, unique("sr-net"), flavor=flavor, imageRef=img, networks=[{"uuid": net}]),
        create(c, unique("sr-bfv"), flavor=flavor, imageRef="", networks="none",
               block_device_mapping_v2=[{"boot_index": 0, "uuid": raw, "source_type": "image",
                                         "destination_type": "volume", "volume_size": 1,
                                         "delete_on_termination": True}]),
    ]
    views = [settled(c, sid) for sid in sids]
    for v in views:
        assert v["status"] == "ACTIVE" and v["OS-EXT-SRV-ATTR:host"] == "fake-r1", v.get("fault")
    # the conductor allocated the port, the scheduler claimed in placement
    assert views[1]["addresses"]["private"][0]["addr"].startswith("10.0.0."), views[1]
    ports = rest(c, "GET", "/networking/v2.0/ports?device_id=%s" % sids[1])["ports"]
    assert len(ports) == 1 and ports[0]["binding:host_id"] == "fake-r1", ports
    vols = views[2]["os-extended-volumes:volumes_attached"]
    assert len(vols) == 1
    assert rest(c, "GET", "/volume/v3/%s/volumes/%s" % (views[2]["tenant_id"], vols[0]["id"]))[
        "volume"]["status"] == "in-use"
    for sid in sids:
        assert rest(c, "GET", "/placement/allocations/%s" % sid)["allocations"], sid
        rest(c, "DELETE", "/compute/v2.1/servers/%s" % sid, ok=(204,))
    for sid in sids:
        wait_for("server %s gone" % sid, lambda: c.request(
            "GET", "/compute/v2.1/servers/%s" % sid, token=c._token)[0] == 404)
        assert rest(c, "GET", "/placement/allocations/%s" % sid)["allocations"] == {}
    assert rest(c, "GET", "/networking/v2.0/ports?device_id=%s" % sids[1])["ports"] == []
    st = c.request("GET", "/volume/v3/%s/volumes/%s" % (views[2]["tenant_id"], vols[0]["id"]),
                   token=c._token)[0]
    assert st == 404
    rest(c, "DELETE", "/image/v2/images/%s" % raw, ok=(204,))


def test_a_boot_accepted_while_the_conductor_is_killed_finishes_after_its_restart(split):
    c = split.cloud
    img, flavor, _ = lookup(c)
    split.conductor.stop(signal.SIGKILL)
    sid = create(c, unique("sr-kill"), flavor=flavor, imageRef=img, networks="none")
    split.conductor = split.role("conductor")
    v = settled(c, sid)
    assert v["status"] == "ACTIVE", v.get("fault")
    rest(c, "DELETE", "/compute/v2.1/servers/%s" % sid, ok=(204,))
    wait_for("server gone", lambda: c.request("GET", "/compute/v2.1/servers/%s" % sid,
                                              token=c._token)[0] == 404)

"""The bus's broker restarted under load, and down for a minute (issue 13,
"Faults the cloud must survive").

The module runs a RabbitMQ node of its own (its own node name, AMQP and
distribution ports, data and log directories under the test's tmp dir),
so restarting it disturbs no other test's broker. On it: a split cloud,
`nubo serve` (api, conductor, scheduler, placement) and two `nubo compute`
agents with the fake driver, whose spawns take 1.5 s. Boots are in flight
(50, and 10 deletes) when the broker is killed -9; it is started again 5 s
later. A resize, a volume attach and detach and a snapshot asked for while
it is down are carried out when it is back; one whose sender gives up
(`nubo serve` stopped before the bus is back) is undone.
Afterwards every server is ACTIVE, or ERROR with a fault naming the cause,
none is left in a task state, every ACTIVE server has its allocation and
no deleted one keeps one, and the cloud boots again."""
import json
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import free_port, unique
from test_multiprocess import Split, fake_compute, wait_for
from test_split_roles import create, lookup, rest, settled

RMQ = "/usr/lib/rabbitmq/bin/rabbitmq-server"


def amqp_answers(port):
    """Whether something on 127.0.0.1:port answers the AMQP 0-9-1 header
    with a method frame (connection.start)."""
    try:
        with socket.create_connection(("127.0.0.1", port), 1) as s:
            s.settimeout(2)
            s.sendall(b"AMQP\x00\x00\x09\x01")
            return s.recv(1) == b"\x01"
    except OSError:
        return False


class Broker:
    """A RabbitMQ node of the test's own, started and stopped as a process."""

    def __init__(self, base):
        self.base = str(base)
        self.port, self.dist = free_port(), free_port()
        self.node = "nubo-e2e-%d@localhost" % self.port
        for d in ("mnesia", "log"):
            os.makedirs(os.path.join(self.base, d), exist_ok=True)
        with open(os.path.join(self.base, "plugins"), "w") as f:
            f.write("[].\n")
        self.env = dict(os.environ, RABBITMQ_NODENAME=self.node,
                        RABBITMQ_NODE_PORT=str(self.port), RABBITMQ_DIST_PORT=str(self.dist),
                        RABBITMQ_MNESIA_BASE=os.path.join(self.base, "mnesia"),
                        RABBITMQ_LOG_BASE=os.path.join(self.base, "log"),
                        RABBITMQ_PID_FILE=os.path.join(self.base, "pid"),
                        RABBITMQ_ENABLED_PLUGINS_FILE=os.path.join(self.base, "plugins"))
        self.p = None

    def start(self, timeout=60):
        out = open(os.path.join(self.base, "out"), "ab")
        self.p = subprocess.Popen([RMQ], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
        wait_for("RabbitMQ node %s answering on %d" % (self.node, self.port),
                 lambda: self.p.poll() is None and amqp_answers(self.port), timeout, 0.2)
        return self

    def stop(self):
        """The whole node killed -9 (beam and its helpers): every connection
        drops at once, and the queues (not durable) are gone when it is back."""
        if self.p and self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait(30)

    @property
    def url(self):
        return "rabbit://guest:guest@127.0.0.1:%d/" % self.port


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    if not os.path.exists(RMQ):
        pytest.skip("rabbitmq-server is not installed")
    b = Broker(tmp_path_factory.mktemp("rabbit")).start()
    yield b
    b.stop()
    shutil.rmtree(b.base, ignore_errors=True)


@pytest.fixture(scope="module")
def split(tmp_path_factory, broker):
    s = Split(tmp_path_factory.mktemp("bfault"), broker.url,
              ("--set", "fake.spawn_delay_ms=1500")).create().start_serve()
    s.compute("bf-a")
    s.compute("bf-b")
    s.cloud.cli("quota", "set", "--instances", "100", "--cores", "100", "admin")
    yield s
    rcs = s.stop()
    assert all(rc == 0 for rc in rcs), (rcs, s.serve.tail(), [p.tail() for p in s.computes.values()])


def allocations(c, sid):
    return rest(c, "GET", "/placement/allocations/%s" % sid)["allocations"]


def settle_all(c, sids, timeout, when):
    """Every server ACTIVE with its allocation, or ERROR with a fault
    naming the cause, none in a task state; prints the count. The views."""
    views = [settled(c, sid, timeout=timeout) for sid in sids]
    for v in views:
        if v["status"] == "ERROR":
            assert v.get("fault", {}).get("message"), v
        else:
            assert allocations(c, v["id"]), v
    active = [v for v in views if v["status"] == "ACTIVE"]
    print("%s: %d ACTIVE, %d ERROR (%s)" % (
        when, len(active), len(views) - len(active),
        sorted({v.get("fault", {}).get("message", "")[:80] for v in views
                if v["status"] == "ERROR"})))
    return views


def clear_servers(c):
    """Deletes what the earlier tests left, so that both hosts have room."""
    ids = [s["id"] for s in rest(c, "GET", "/compute/v2.1/servers?all_tenants=1")["servers"]]
    for sid in ids:  # 404: its delete, listed, finished meanwhile
        rest(c, "DELETE", "/compute/v2.1/servers/%s" % sid, ok=(204, 404))
    wait_for("servers of earlier tests gone", lambda: not rest(
        c, "GET", "/compute/v2.1/servers?all_tenants=1")["servers"], 120)


def test_broker_restarted_with_boots_and_deletes_in_flight(split, broker):
    c = split.cloud
    img, flavor, _ = lookup(c)
    # servers to delete while the broker is gone
    doomed = [create(c, unique("bf-del"), flavor=flavor, imageRef=img, networks="none")
              for _ in range(10)]
    for sid in doomed:
        assert settled(c, sid)["status"] == "ACTIVE"
    inflight = [create(c, unique("bf"), flavor=flavor, imageRef=img, networks="none")
                for _ in range(50)]
    for sid in doomed:
        rest(c, "DELETE", "/compute/v2.1/servers/%s" % sid, ok=(204,))
    time.sleep(0.5)  # the first builds are spawning on the agents now
    t0 = time.time()
    broker.stop()
    down_at = time.time()
    # the API stays up and answers while the bus is gone
    rest(c, "GET", "/compute/v2.1/servers/%s" % inflight[0])
    time.sleep(5)
    broker.start()
    print("broker down %.1f s (stop took %.1f s)" % (time.time() - down_at, down_at - t0))

    settle_all(c, inflight, 120, "after the restart")
    # the deletes accepted before the outage finish, and leave no allocation
    wait_for("the deleted servers gone", lambda: all(
        c.request("GET", "/compute/v2.1/servers/%s" % sid, token=c._token)[0] == 404
        for sid in doomed), 120)
    for sid in doomed:
        assert allocations(c, sid) == {}, sid
    # no duplicate: each name once
    names = [s["name"] for s in rest(c, "GET", "/compute/v2.1/servers?all_tenants=1")["servers"]]
    assert len(names) == len(set(names)), names
    # and the cloud boots again over the restarted broker
    sid = create(c, unique("bf-after"), flavor=flavor, imageRef=img, networks="none")
    assert settled(c, sid, timeout=60)["status"] == "ACTIVE"
    wait_for("both agents up", lambda: sorted(
        s["host"] for s in rest(c, "GET", "/compute/v2.1/os-services?binary=nova-compute")[
            "services"] if s["state"] == "up") == ["bf-a", "bf-b"], 60)


def test_broker_down_for_a_minute_with_requests_during_the_outage(split, broker):
    """RabbitMQ gone for 60 s (the issue's outage): boots and deletes are in
    flight when it goes, and more are asked for while it is away. Each
    request answered while the bus is down either was refused (an error
    status, nothing left behind) or, once acknowledged, is carried out when
    the bus is back: no 202 is lost."""
    c = split.cloud
    clear_servers(c)
    img, flavor, _ = lookup(c)
    down_s = float(os.environ.get("NUBO_BROKER_DOWN_S", "60"))
    doomed = [create(c, unique("bo-del"), flavor=flavor, imageRef=img, networks="none")
              for _ in range(3)]
    to_stop = create(c, unique("bo-stop"), flavor=flavor, imageRef=img, networks="none")
    for sid in doomed + [to_stop]:
        assert settled(c, sid)["status"] == "ACTIVE"
    inflight = [create(c, unique("bo"), flavor=flavor, imageRef=img, networks="none")
                for _ in range(20)]
    rest(c, "DELETE", "/compute/v2.1/servers/%s" % doomed[0], ok=(204,))
    time.sleep(0.5)
    broker.stop()
    down_at = time.time()
    accepted, refused, deleted = [], [], [doomed[0]]
    # a power action acknowledged while the bus is gone is carried out after
    st, _, data = c.request("POST", "/compute/v2.1/servers/%s/action" % to_stop,
                            {"os-stop": None}, token=c._token)
    assert st == 202, (st, data)
    # requests during the outage: a boot every few seconds, and two deletes
    while time.time() - down_at < down_s - 5:
        t0 = time.time()
        st, _, data = c.request("POST", "/compute/v2.1/servers", {"server": {
            "name": unique("bo-out"), "flavorRef": flavor, "imageRef": img,
            "networks": "none"}}, token=c._token, headers={"OpenStack-API-Version":
                                                            "compute 2.80"})
        took = time.time() - t0
        assert took < 70, ("a boot during the outage hung", took)
        if st == 202:
            accepted.append(data["server"]["id"])
        else:
            assert st in (500, 503), (st, data)
            refused.append((st, str(data)[:160]))
        if len(deleted) < 3:
            sid = doomed[len(deleted)]
            st, _, data = c.request("DELETE", "/compute/v2.1/servers/%s" % sid, token=c._token)
            assert st in (204, 500, 503), (st, data)
            if st == 204:
                deleted.append(sid)
        time.sleep(max(0, 5 - (time.time() - t0)))
    time.sleep(max(0, down_s - (time.time() - down_at)))
    broker.start()
    print("broker down %.0f s; during it %d boots accepted, %d refused %s; %d deletes "
          "accepted" % (time.time() - down_at, len(accepted), len(refused),
                        sorted({r[1][:100] for r in refused}), len(deleted) - 1))
    views = settle_all(c, inflight + accepted, 180, "after the outage")
    # both hosts have room: a build must not fail because the heartbeats
    # were lost with the bus (the conductor schedules it again meanwhile)
    assert all(v["status"] == "ACTIVE" for v in views), [
        (v["id"], v.get("fault")) for v in views if v["status"] != "ACTIVE"]
    wait_for("the deleted servers gone", lambda: all(
        c.request("GET", "/compute/v2.1/servers/%s" % sid, token=c._token)[0] == 404
        for sid in deleted), 180)
    for sid in deleted:
        assert allocations(c, sid) == {}, sid
    wait_for("the server stopped during the outage SHUTOFF", lambda: (lambda v: v[
        "status"] == "SHUTOFF" and not v["OS-EXT-STS:task_state"])(rest(
            c, "GET", "/compute/v2.1/servers/%s" % to_stop)["server"]), 60)
    names = [s["name"] for s in rest(c, "GET", "/compute/v2.1/servers?all_tenants=1")["servers"]]
    assert len(names) == len(set(names)), names
    sid = create(c, unique("bo-after"), flavor=flavor, imageRef=img, networks="none")
    assert settled(c, sid, timeout=60)["status"] == "ACTIVE"
    wait_for("both agents up", lambda: sorted(
        s["host"] for s in rest(c, "GET", "/compute/v2.1/os-services?binary=nova-compute")[
            "services"] if s["state"] == "up") == ["bf-a", "bf-b"], 90)


def server(c, sid):
    return rest(c, "GET", "/compute/v2.1/servers/%s" % sid)["server"]


def volume_status(c, project, vid):
    return rest(c, "GET", "/volume/v3/%s/volumes/%s" % (project, vid))["volume"]["status"]


def asked(c, what, method, path, body, ok, mv="2.45"):
    """A request during the outage: recorded and acknowledged at once (its
    cast goes out when the bus is back). Its body."""
    t0 = time.time()
    st, _, data = c.request(method, path, body, token=c._token,
                            headers={"X-OpenStack-Nova-API-Version": mv})
    took = time.time() - t0
    assert took < 30, ("%s hung during the outage" % what, took)
    assert st == ok, (what, st, data)
    print("%s during the outage: %d in %.1f s" % (what, st, took))
    return data


def test_resize_attach_detach_and_snapshot_asked_for_during_an_outage(split, broker):
    """A resize, a volume attach, a volume detach and a snapshot asked for
    while RabbitMQ is down: each is recorded and acknowledged at once, sent
    once the bus is back, and ends in its final state (VERIFY_RESIZE on
    the other host, then confirmed; volume in-use / available; image
    active) or in a clean error with a fault; no server stays in a task
    state."""
    c = split.cloud
    clear_servers(c)
    img, tiny, _ = lookup(c)
    small = [f["id"] for f in rest(c, "GET", "/compute/v2.1/flavors")["flavors"]
             if f["name"] == "m1.small"][0]
    sids = [create(c, unique("bm"), flavor=tiny, imageRef=img, networks="none")
            for _ in range(4)]
    to_resize, to_attach, to_detach, to_snap = sids
    views = [settled(c, sid) for sid in sids]
    assert all(v["status"] == "ACTIVE" for v in views), views
    project = views[0]["tenant_id"]
    vols = [rest(c, "POST", "/volume/v3/%s/volumes" % project,
                 {"volume": {"size": 1, "name": unique("bm-vol")}}, ok=(202,))["volume"]["id"]
            for _ in range(2)]
    va, vd = vols
    for v in vols:
        wait_for("volume %s available" % v, lambda v=v: volume_status(c, project, v) ==
                 "available", 30)
    rest(c, "POST", "/compute/v2.1/servers/%s/os-volume_attachments" % to_detach,
         {"volumeAttachment": {"volumeId": vd}})
    wait_for("volume to detach in-use", lambda: volume_status(c, project, vd) == "in-use", 60)
    src_host = views[0]["OS-EXT-SRV-ATTR:host"]

    broker.stop()
    down_at = time.time()
    asked(c, "resize", "POST", "/compute/v2.1/servers/%s/action" % to_resize,
          {"resize": {"flavorRef": small}}, 202)
    asked(c, "attach", "POST", "/compute/v2.1/servers/%s/os-volume_attachments" % to_attach,
          {"volumeAttachment": {"volumeId": va}}, 200)
    asked(c, "detach", "DELETE", "/compute/v2.1/servers/%s/os-volume_attachments/%s" % (
        to_detach, vd), None, 202)
    snap = asked(c, "createImage", "POST", "/compute/v2.1/servers/%s/action" % to_snap,
                 {"createImage": {"name": unique("bm-snap")}}, 202)["image_id"]
    time.sleep(max(0, 2 - (time.time() - down_at)))
    broker.start()
    print("broker down %.0f s" % (time.time() - down_at))

    def final(sid, states):
        return wait_for("server %s out of its task" % sid, lambda: (
            lambda v: v["status"] in states and not v["OS-EXT-STS:task_state"] and v)(
                server(c, sid)), 180)

    def faulted(v):
        return v["status"] == "ERROR" or rest(
            c, "GET", "/compute/v2.1/servers/%s/os-instance-actions" % v["id"])[
                "instanceActions"][0]["message"]

    v = final(to_resize, ("VERIFY_RESIZE", "ACTIVE", "ERROR"))
    if v["status"] == "VERIFY_RESIZE":
        assert v["OS-EXT-SRV-ATTR:host"] != src_host and v["flavor"]["id"] == small, v
        rest(c, "POST", "/compute/v2.1/servers/%s/action" % to_resize, {"confirmResize": None},
             ok=(204,))
        v = final(to_resize, ("ACTIVE",))
        assert v["OS-EXT-SRV-ATTR:host"] != src_host, v
    else:
        assert faulted(v), v
    print("resize: %s on %s" % (v["status"], v["OS-EXT-SRV-ATTR:host"]))

    def volume_settled(vid):
        return wait_for("volume %s settled" % vid, lambda: (
            lambda s: s in ("in-use", "available") and s)(volume_status(c, project, vid)), 120)
    st, st2 = volume_settled(va), volume_settled(vd)
    assert st == "in-use" or faulted(final(to_attach, ("ACTIVE", "ERROR"))), st
    assert st2 == "available" or faulted(final(to_detach, ("ACTIVE", "ERROR"))), st2
    print("volumes: attached one %s, detached one %s" % (st, st2))

    def image_done():
        st, _, d = c.request("GET", "/image/v2/images/%s" % snap, token=c._token)
        return (st == 404 and "gone") or (d["status"] in ("active", "killed") and d["status"])
    ist = wait_for("snapshot image settled", image_done, 120)
    assert ist == "active" or faulted(final(to_snap, ("ACTIVE", "ERROR"))), ist
    print("snapshot image: %s" % ist)
    for sid in sids:
        final(sid, ("ACTIVE", "ERROR"))
    for sid in sids:
        rest(c, "DELETE", "/compute/v2.1/servers/%s" % sid, ok=(204,))


def test_acknowledged_resize_undone_when_its_sender_gives_up(split, broker):
    """A resize acknowledged while RabbitMQ is down, then `nubo serve`
    stopped before the bus is back: its sender gives up and undoes it, so
    once the cloud is up again the server is ACTIVE on its host with no
    task, the migration is in error and the action says why (not a
    server in resize_prep that nothing works on)."""
    c = split.cloud
    clear_servers(c)
    img, tiny, _ = lookup(c)
    small = [f["id"] for f in rest(c, "GET", "/compute/v2.1/flavors")["flavors"]
             if f["name"] == "m1.small"][0]
    sid = create(c, unique("bu"), flavor=tiny, imageRef=img, networks="none")
    host = settled(c, sid)["OS-EXT-SRV-ATTR:host"]
    bus_logs = {h: os.path.join(p.logdir, "nubo-bus.log") for h, p in split.computes.items()}
    at = {h: os.path.getsize(f) for h, f in bus_logs.items()}
    broker.stop()
    asked(c, "resize", "POST", "/compute/v2.1/servers/%s/action" % sid,
          {"resize": {"flavorRef": small}}, 202)
    assert server(c, sid)["OS-EXT-STS:task_state"] == "resize_prep"
    assert split.serve.stop() == 0, split.serve.tail()
    assert "acknowledged but never sent: undoing it" in split.serve.tail(20000)
    broker.start()

    def listening(h):
        with open(bus_logs[h]) as f:
            f.seek(at[h])
            return "Reconnected to AMQP server" in f.read()
    # the agents listening again: the undo, not a lost queue, is tested
    # here (test_fresh_serve_builds_on_a_host_whose_queue_the_broker_lost)
    wait_for("both agents listening again", lambda: all(map(listening, bus_logs)), 60)
    split.start_serve()
    v = server(c, sid)
    assert v["status"] == "ACTIVE" and not v["OS-EXT-STS:task_state"], v
    assert v["OS-EXT-SRV-ATTR:host"] == host and v["flavor"]["id"] == tiny, v
    migs = rest(c, "GET", "/compute/v2.1/os-migrations?instance_uuid=%s" % sid)["migrations"]
    assert [m["status"] for m in migs] == ["error"], migs
    act = [a for a in rest(c, "GET", "/compute/v2.1/servers/%s/os-instance-actions" % sid)[
        "instanceActions"] if a["action"] == "resize"]
    assert act and "could not be sent" in (act[0]["message"] or ""), act
    rest(c, "DELETE", "/compute/v2.1/servers/%s" % sid, ok=(204,))


def test_attach_reservation_undone_after_kill_9_before_it_was_sent(split, broker):
    """A volume attach acknowledged while RabbitMQ is down, then `nubo
    serve` killed -9 (its sender dies with it, the undo never runs): the
    next start's recovery fails the attach, so the volume is available
    again (not reserved for good), the server keeps no mapping for it, the
    action says why, and the volume attaches again."""
    c = split.cloud
    clear_servers(c)
    img, tiny, _ = lookup(c)
    sid = create(c, unique("br"), flavor=tiny, imageRef=img, networks="none")
    project = settled(c, sid)["tenant_id"]
    vid = rest(c, "POST", "/volume/v3/%s/volumes" % project,
               {"volume": {"size": 1, "name": unique("br-vol")}}, ok=(202,))["volume"]["id"]
    wait_for("volume available", lambda: volume_status(c, project, vid) == "available", 30)
    broker.stop()
    asked(c, "attach", "POST", "/compute/v2.1/servers/%s/os-volume_attachments" % sid,
          {"volumeAttachment": {"volumeId": vid}}, 200)
    assert volume_status(c, project, vid) == "reserved"
    assert split.serve.stop(signal.SIGKILL) == -signal.SIGKILL
    broker.start()
    split.start_serve()
    wait_for("volume available again", lambda: volume_status(c, project, vid) == "available",
             60)
    atts = rest(c, "GET", "/compute/v2.1/servers/%s/os-volume_attachments" % sid)[
        "volumeAttachments"]
    assert atts == [], atts
    act = [a for a in rest(c, "GET", "/compute/v2.1/servers/%s/os-instance-actions" % sid)[
        "instanceActions"] if a["action"] == "attach_volume"]
    assert act and act[0]["message"] == "Error", act
    logs = ""
    for name in os.listdir(os.path.join(c.state_dir, "log")):
        with open(os.path.join(c.state_dir, "log", name), errors="replace") as f:
            logs += f.read()
    assert "volume %s (reserved) was interrupted before it began" % vid in logs
    v = server(c, sid)
    assert v["status"] == "ACTIVE" and not v["OS-EXT-STS:task_state"], v
    rest(c, "POST", "/compute/v2.1/servers/%s/os-volume_attachments" % sid,
         {"volumeAttachment": {"volumeId": vid}})
    wait_for("volume in-use", lambda: volume_status(c, project, vid) == "in-use", 60)
    rest(c, "DELETE", "/compute/v2.1/servers/%s" % sid, ok=(204,))


def test_fresh_serve_builds_on_a_host_whose_queue_the_broker_lost(split, broker):
    """RabbitMQ restarted (it loses the agents' queues) while no `nubo
    serve` runs; one is started once it is back, before a compute agent
    declared its queue again (that agent's listener retries every 20 s
    here), and builds on that host: the build waits in the queue the
    sender declares again and is ACTIVE once the agent listens again,
    instead of failing with "No valid host was found" (its cast returned
    as unroutable by a serve that never saw the queue, the host taken for
    gone)."""
    c = split.cloud
    clear_servers(c)
    img, flavor, _ = lookup(c)
    agent = fake_compute(split.conf, c.state_dir, "bf-c")
    agent.args += ["--set", "oslo_messaging_rabbit.rabbit_retry_interval=20",
                   "--set", "oslo_messaging_rabbit.rabbit_interval_max=20"]
    split.computes["bf-c"] = agent.start().wait_ready(30)
    bus_log = os.path.join(agent.logdir, "nubo-bus.log")

    def since(at):
        with open(bus_log) as f:
            f.seek(at)
            return f.read()
    assert split.serve.stop() == 0, split.serve.tail()
    at = os.path.getsize(bus_log)
    broker.stop()
    broker.start()
    split.start_serve()
    wait_for("bf-c up", lambda: [s for s in rest(
        c, "GET", "/compute/v2.1/os-services?binary=nova-compute")["services"]
        if s["host"] == "bf-c" and s["state"] == "up"], 30)
    st, _, data = c.request("POST", "/compute/v2.1/servers", {"server": {
        "name": unique("bq"), "flavorRef": flavor, "imageRef": img, "networks": "none",
        "host": "bf-c"}}, token=c._token, headers={"OpenStack-API-Version": "compute 2.74"})
    assert st == 202, (st, data)
    sid = data["server"]["id"]
    wait_for("the build cast to bf-c", lambda: (lambda v: v["OS-EXT-STS:task_state"] == (
        "spawning") or v["status"] != "BUILD")(server(c, sid)), 30)
    time.sleep(1)
    assert "Reconnected to AMQP server" not in since(at), \
        "bf-c listened again before the build was cast: nothing was provoked"
    v = settled(c, sid, timeout=90)
    assert v["status"] == "ACTIVE" and v["OS-EXT-SRV-ATTR:host"] == "bf-c", v
    rest(c, "DELETE", "/compute/v2.1/servers/%s" % sid, ok=(204,))
    wait_for("server %s gone" % sid, lambda: c.request(
        "GET", "/compute/v2.1/servers/%s" % sid, token=c._token)[0] == 404, 60)
    assert agent.stop() == 0, agent.tail()
    del split.computes["bf-c"]
    # bf-c leaves the cloud as a decommissioned host does: a stopped agent's
    # service stays up until its heartbeats lapse, and builds the next tests
    # send there would wait in its queue for an agent that never comes back
    mv = {"OpenStack-API-Version": "compute 2.53"}
    st, _, data = c.request("GET", "/compute/v2.1/os-services?binary=nova-compute&host=bf-c",
                            token=c._token, headers=mv)
    assert st == 200 and len(data["services"]) == 1, (st, data)
    st, _, data = c.request("DELETE", "/compute/v2.1/os-services/%s" % data["services"][0]["id"],
                            token=c._token, headers=mv)
    assert st == 204, (st, data)


def test_compute_agent_killed_mid_spawn_and_started_again(split):
    """kill -9 of a compute agent while builds spawn on it (issue 13): once
    it is started again, every build it had is ACTIVE (its guest runs
    there) or ERROR with a fault, none stays in BUILD, and no allocation is
    left without a server or missing for one."""
    c = split.cloud
    clear_servers(c)
    img, flavor, _ = lookup(c)
    agent = split.computes["bf-a"]
    log0 = os.path.getsize(os.path.join(agent.logdir, "nubo-compute.log"))
    sids = [create(c, unique("bk"), flavor=flavor, imageRef=img, networks="none")
            for _ in range(20)]

    def spawning_on_a():
        with open(os.path.join(agent.logdir, "nubo-compute.log")) as f:
            f.seek(log0)
            return f.read().count("Starting instance build") >= 2
    wait_for("builds spawning on bf-a", spawning_on_a, 60, 0.1)
    agent.stop(signal.SIGKILL)
    killed_at = time.time()
    time.sleep(2)
    split.compute("bf-a")
    print("bf-a killed -9 mid-spawn, started again after %.1f s" % (time.time() - killed_at))
    views = [settled(c, sid, timeout=180) for sid in sids]
    with open(os.path.join(split.cloud.state_dir, "fake", "bf-a.json")) as f:
        on_a = json.load(f)
    for v in views:
        if v["status"] == "ERROR":
            assert v.get("fault", {}).get("message"), v
            assert allocations(c, v["id"]) == {} or v["OS-EXT-SRV-ATTR:host"], v
        else:
            assert allocations(c, v["id"]), v
            if v["OS-EXT-SRV-ATTR:host"] == "bf-a":
                assert v["id"] in on_a, v
    hosts = [v["OS-EXT-SRV-ATTR:host"] for v in views]
    print("after the kill: %d ACTIVE (%d on bf-a), %d ERROR %s" % (
        sum(v["status"] == "ACTIVE" for v in views), hosts.count("bf-a"),
        sum(v["status"] == "ERROR" for v in views),
        sorted({v.get("fault", {}).get("message", "")[:100] for v in views
                if v["status"] == "ERROR"})))
    # guests the agent had that no ACTIVE server owns are gone from bf-a
    owners = {v["id"] for v in views if v["status"] == "ACTIVE" and
              v["OS-EXT-SRV-ATTR:host"] == "bf-a"}
    stray = set(on_a) & ({v["id"] for v in views} - owners)
    assert not stray, stray
    for sid in sids:
        rest(c, "DELETE", "/compute/v2.1/servers/%s" % sid, ok=(204,))

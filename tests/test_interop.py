"""Interoperation with Apache Tomcat 10.1's own Tribes code, both ways.

Each test runs a Tomcat node (tests/interop/TribesNode.java against Debian's
tomcat10-tribes.jar) and mcastmember on loopback (127.0.0.1, TTL 0), in two
configurations: a bare McastService ("plain") and Tomcat's default cluster
stack with TcpFailureDetector ("stack"). Skipped when Java or the jars are
missing.
"""

import json
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from mcastmember import McastService

from support import GROUP, LOOPBACK
from tribes import TribesNode, build_harness

pytestmark = pytest.mark.network
FREQUENCY, DROP_TIME = 250, 1500
TIMING = {"frequency": FREQUENCY, "drop_time": DROP_TIME}


@pytest.fixture(scope="session")
def classpath(tmp_path_factory):
    path, reason = build_harness(tmp_path_factory.mktemp("tribes-classes"))
    if path is None:
        pytest.skip(reason)
    return path


def free_tcp_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(params=["plain", "stack"])
def tomcat(request, classpath, group_port):
    """A running Tomcat node with domain "dom1" and payload "alpha"."""
    node = TribesNode(classpath, request.param, GROUP, group_port, free_tcp_port(),
                      domain="dom1", payload=b"alpha", **TIMING)
    node.mode = request.param
    yield node
    node.kill()


def python_service(group_port, **settings):
    options = dict(LOOPBACK, member_port=free_tcp_port(), tomcat=True, **TIMING)
    options.update(settings)
    return McastService(GROUP, group_port, **options)


class Events:
    def __init__(self, service):
        self.events = []
        service.add_listener(lambda e: self.events.append((time.monotonic(), e)))

    def wait(self, kind, port, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for seen, event in list(self.events):
                if event.kind == kind and event.member.port == port:
                    return seen, event
            time.sleep(0.01)
        raise AssertionError(f"no {kind} for {port}: {self.events}")


def test_each_side_sees_the_other_with_all_fields(tomcat, group_port):
    service = python_service(group_port, domain="pydom", payload=b"\x00py")
    events = Events(service)
    with service:
        _, ours = events.wait("added", tomcat.member_port)
        assert ours.member.address == "127.0.0.1"
        assert ours.member.unique_id == tomcat.unique_id
        assert ours.member.domain == b"dom1"
        assert ours.member.payload == b"alpha"
        _, theirs = tomcat.wait_event("ADDED", service.config.member_port)
        assert theirs.host == "127.0.0.1"
        assert theirs.unique_id == service.local_member.unique_id
        assert theirs.domain == b"pydom"
        assert theirs.payload == b"\x00py"
        assert [m.port for m in service.members()] == [tomcat.member_port]


def test_our_graceful_stop_is_a_shutdown_for_tomcat(tomcat, group_port):
    service = python_service(group_port)
    with service:
        tomcat.wait_event("ADDED", service.config.member_port)
    stopped = time.monotonic()
    seen, gone = tomcat.wait_event("GONE", service.config.member_port, timeout=5)
    assert seen - stopped < 1.0
    assert gone.command == b"BABY-ALEX"


def test_tomcat_graceful_stop_is_a_shutdown_for_us(tomcat, group_port):
    with python_service(group_port) as service:
        events = Events(service)
        events.wait("added", tomcat.member_port)
        stopped = time.monotonic()
        tomcat.stop()
        seen, gone = events.wait("removed", tomcat.member_port, timeout=5)
    assert gone.reason == "shutdown"
    assert seen - stopped < 1.0 + 0.5   # Tomcat's stop itself takes a moment before it sends


def test_killed_tomcat_is_expired_after_drop_time(tomcat, group_port):
    with python_service(group_port) as service:
        events = Events(service)
        events.wait("added", tomcat.member_port)
        tomcat.kill()
        killed = time.monotonic()
        seen, gone = events.wait("removed", tomcat.member_port, timeout=10)
    assert gone.reason == "expired"
    # Tomcat's last heartbeat left up to a period (and its scheduling) before the kill
    assert DROP_TIME / 1000 - 2 * FREQUENCY / 1000 <= seen - killed <= DROP_TIME / 1000 + 0.5


def test_killed_python_node_is_dropped_by_tomcat(tomcat, group_port, tmp_path):
    member_port = free_tcp_port()
    demo = [shutil.which("mcast-demo") or sys.executable, "join", GROUP, "--port",
            str(group_port), "--interface", "127.0.0.1", "--ttl", "0", "--member-port",
            str(member_port), "--frequency", str(FREQUENCY), "--drop-time", str(DROP_TIME),
            "--tomcat", "--json"]
    if not shutil.which("mcast-demo"):
        demo[1:1] = ["-m", "mcastmember.cli"]
    proc = subprocess.Popen(demo, stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        tomcat.wait_event("ADDED", member_port)
        proc.send_signal(signal.SIGKILL)
        proc.wait(5)
        killed = time.monotonic()
        seen, gone = tomcat.wait_event("GONE", member_port, timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert gone.command == b""            # not a shutdown: a crash Tomcat detected
    assert seen - killed >= DROP_TIME / 1000 - 2 * FREQUENCY / 1000


def test_payload_change_reaches_tomcats_member_record(tomcat, group_port):
    with python_service(group_port, payload=b"one") as service:
        tomcat.wait_event("ADDED", service.config.member_port)
        service.set_payload(b"two")
        deadline = time.monotonic() + 5
        while True:
            ours = [m for m in tomcat.members() if m.port == service.config.member_port]
            if ours and ours[0].payload == b"two":
                break
            assert time.monotonic() < deadline, ours
            time.sleep(0.1)


def test_tomcat_channel_frames_are_ignored_quietly(tomcat, group_port, caplog):
    with python_service(group_port) as service:
        events = Events(service)
        events.wait("added", tomcat.member_port)
        for _ in range(3):
            tomcat.command("broadcast")
        deadline = time.monotonic() + 5
        while service.stats().get("channel_frames", 0) < 3:
            assert time.monotonic() < deadline, service.stats()
            time.sleep(0.05)
        stats = service.stats()
    assert not [k for k in stats if k.startswith("malformed.")]
    # Nothing but the member, and its removal when we stopped.
    assert [(e.kind, e.reason) for _, e in events.events] == [("added", None),
                                                              ("removed", "stopped")]
    assert "mcastmember" not in caplog.text


def test_probe_listener_takes_tomcats_probes_and_any_bytes(tomcat, group_port):
    with python_service(group_port) as service:
        Events(service).wait("added", tomcat.member_port)
        tomcat.wait_event("ADDED", service.config.member_port)
        with socket.create_connection(("127.0.0.1", service.config.member_port)) as junk:
            junk.sendall(bytes(range(256)) * 400)
        time.sleep(0.2)
        stats = service.stats()
        if tomcat.mode == "stack":
            assert stats["probe_connections"] >= 2   # Tomcat's detector and our junk
        assert stats["members"] == 1
    with pytest.raises(OSError):    # closed on stop
        socket.create_connection(("127.0.0.1", service.config.member_port), timeout=1)


def test_demo_tomcat_flag_in_json_mode(tomcat, group_port, tmp_path):
    member_port = free_tcp_port()
    cmd = [shutil.which("mcast-demo"), "join", GROUP, "--port", str(group_port), "--interface",
           "127.0.0.1", "--ttl", "0", "--member-port", str(member_port), "--frequency",
           str(FREQUENCY), "--drop-time", str(DROP_TIME), "--tomcat", "--json",
           "--duration", "2"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert result.returncode == 0
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert events[0]["event"] == "added"
    assert events[0]["member"]["port"] == tomcat.member_port
    assert events[0]["member"]["alive_ms"] > 0
    _, theirs = tomcat.wait_event("ADDED", member_port)
    tomcat.wait_event("GONE", member_port)


@pytest.mark.parametrize("mode", ["stack"])
def test_without_the_listener_tomcats_stack_never_reports_us(classpath, group_port, mode):
    """Why ``tomcat=True`` opens the TCP listener: TcpFailureDetector refuses
    a member it cannot connect to, even though it hears the heartbeats."""
    node = TribesNode(classpath, mode, GROUP, group_port, free_tcp_port(), **TIMING)
    try:
        with python_service(group_port, tomcat=False) as service:
            time.sleep(DROP_TIME / 1000 + 0.5)
            heard = [m.port for m in node.members()]
            assert service.config.member_port in heard       # the heartbeats arrive...
            assert not [m for _, m in node.events if m.port == service.config.member_port]
    finally:
        node.kill()

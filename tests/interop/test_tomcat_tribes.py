"""Interoperation with Apache Tomcat 10.1's own Tribes code, both ways.

Each test runs a Tomcat node (tests/interop/TribesNode.java against Debian's
tomcat10-tribes.jar) and mcastmember on loopback (127.0.0.1, TTL 0), in two
configurations: a bare McastService ("plain") and Tomcat's default cluster
stack with TcpFailureDetector ("stack"). Skipped when Java or the jars are
missing.
"""

import asyncio
import contextlib
import json
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from mcastmember import McastService
from mcastmember.tribes.fronts.aio import AsyncMembership

from support import GROUP, LOOPBACK, wait_until
from tribes import TribesNode

pytestmark = pytest.mark.network
FREQUENCY, DROP_TIME = 250, 1500
TIMING = {"frequency": FREQUENCY, "drop_time": DROP_TIME}


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


def python_settings(**settings):
    options = dict(LOOPBACK, member_port=free_tcp_port(), tomcat=True, **TIMING)
    options.update(settings)
    return options


def python_service(group_port, **settings):
    return McastService(GROUP, group_port, **python_settings(**settings))


class RunningMember:
    def __init__(self, member_port, stats):
        self.member_port, self.stats = member_port, stats


@contextlib.contextmanager
def run_member(front, group_port, **settings):
    """A member on the threaded front, or on the asyncio front with its loop
    on a thread of its own; yields its member port and a stats() call."""
    if front == "threads":
        with McastService(GROUP, group_port, **settings) as service:
            yield RunningMember(service.local_member.port, service.stats)
        return
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def on_loop(coro_or_call):
        if not asyncio.iscoroutine(coro_or_call):
            coro_or_call = asyncio.sleep(0, coro_or_call())
        return asyncio.run_coroutine_threadsafe(coro_or_call, loop).result(30)

    member = AsyncMembership(GROUP, group_port, **settings)
    on_loop(member.start())
    try:
        yield RunningMember(member.local_member.port, lambda: on_loop(member.stats))
    finally:
        on_loop(member.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


class Events:
    def __init__(self, service):
        self.events = []
        service.add_listener(lambda e: self.events.append((time.monotonic(), e)))

    def wait(self, kind, port, timeout=10.0):
        return wait_until(lambda: next(((seen, event) for seen, event in list(self.events)
                                        if event.kind == kind and event.member.port == port), None),
                          timeout, message=lambda: f"{kind} for {port}: {self.events}")


def test_each_side_sees_the_other_with_all_fields(tomcat, group_port):
    service = python_service(group_port, domain="pydom", payload=b"\x00py")
    events = Events(service)
    with service:
        _, ours = events.wait("added", tomcat.member_port)
        assert ours.member.address == "127.0.0.1"
        assert ours.member.unique_id == tomcat.unique_id
        assert ours.member.domain == b"dom1"
        assert ours.member.payload == b"alpha"
        _, theirs = tomcat.wait_event("ADDED", service.local_member.port)
        assert theirs.host == "127.0.0.1"
        assert theirs.unique_id == service.local_member.unique_id
        assert theirs.domain == b"pydom"
        assert theirs.payload == b"\x00py"
        assert [m.port for m in service.members()] == [tomcat.member_port]


def test_our_graceful_stop_is_a_shutdown_for_tomcat(tomcat, group_port):
    service = python_service(group_port)
    with service:
        tomcat.wait_event("ADDED", service.local_member.port)
    stopped = time.monotonic()
    seen, gone = tomcat.wait_event("GONE", service.local_member.port, timeout=5)
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
        demo[1:1] = ["-m", "mcastmember"]
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
        tomcat.wait_event("ADDED", service.local_member.port)
        service.set_payload(b"two")
        wait_until(lambda: [m.payload for m in tomcat.members() if m.port == service.local_member.port] == [b"two"],
                   timeout=5, interval=0.1, message=tomcat.members)


def test_tomcat_channel_frames_are_ignored_quietly(tomcat, group_port, caplog):
    with python_service(group_port) as service:
        events = Events(service)
        events.wait("added", tomcat.member_port)
        for _ in range(3):
            tomcat.command("broadcast")
        stats = wait_until(lambda: (stats := service.stats()).get("channel_frames", 0) >= 3 and stats,
                           timeout=5, message=service.stats)
    assert not [k for k, v in stats.items() if k.startswith("malformed.") and v]
    # Nothing but the member, and its removal when we stopped.
    assert [(e.kind, e.reason) for _, e in events.events] == [("added", None),
                                                              ("removed", "stopped")]
    assert "mcastmember" not in caplog.text


def test_probe_listener_takes_tomcats_probes_and_any_bytes(tomcat, group_port):
    with python_service(group_port) as service:
        Events(service).wait("added", tomcat.member_port)
        tomcat.wait_event("ADDED", service.local_member.port)
        with socket.create_connection(("127.0.0.1", service.local_member.port)) as junk:
            junk.sendall(bytes(range(256)) * 400)
        # Tomcat's detector (its stack mode) and our junk
        want = 2 if tomcat.mode == "stack" else 1
        stats = wait_until(lambda: (stats := service.stats())["probe_connections"] >= want and stats)
        assert stats["members"] == 1
    with pytest.raises(OSError):    # closed on stop
        socket.create_connection(("127.0.0.1", service.local_member.port), timeout=1)


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
    """Why a listed member needs the TCP listener: TcpFailureDetector refuses
    a member it cannot connect to, even though it hears the heartbeats."""
    node = TribesNode(classpath, mode, GROUP, group_port, free_tcp_port(), **TIMING)
    try:
        with python_service(group_port, tomcat=False, tcp_listener=False) as service:
            time.sleep(DROP_TIME / 1000 + 0.5)      # on purpose: a drop time, and the stack may not report us
            wait_until(lambda: service.local_member.port in [m.port for m in node.members()])  # the heartbeats arrive...
            assert not [m for _, m in node.events if m.port == service.local_member.port]
    finally:
        node.kill()


# -- Tribes' channel: a listed member answers at once (do no harm) -----------

def tomcat_reads(classpath, data):
    """What Tomcat's own deserializer makes of ``data``."""
    result = subprocess.run(["java", "-cp", classpath, "TribesVectors", "read", data.hex()],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_tomcat_reads_our_answers_as_its_own_classes(classpath):
    from mcastmember.tribes.wire import javaser
    from support import JAVA_GET_ALL_SESSIONS, JAVA_RPC_REQUEST_LONG_ID
    request = javaser.rpc_request(JAVA_RPC_REQUEST_LONG_ID)
    assert tomcat_reads(classpath, javaser.no_rpc_reply(request)) == [
        "RPC", "org.apache.catalina.tribes.group.RpcMessage$NoRpcChannelReply", "true",
        request.uuid.hex(), request.rpc_id.hex()]
    assert tomcat_reads(classpath, javaser.session_state_reply(JAVA_GET_ALL_SESSIONS)) == [
        "SESSION", "14", "/shop", "1764760000123"]


@pytest.fixture
def stack(classpath, group_port):
    node = TribesNode(classpath, "stack", GROUP, group_port, free_tcp_port(), **TIMING)
    yield node
    node.kill()


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_tomcats_messages_to_a_listed_member_never_wait(stack, group_port, front):
    """Sends with acks (channelSendOptions 6 and 2), an RPC and a request
    for all sessions, to a member with tomcat=True: each is answered at once
    (Tomcat's ack timeout is 3 s, its RPC timeout here 10 s, a DeltaManager's
    state wait 60 s)."""
    with run_member(front, group_port, **python_settings()) as member:
        stack.wait_event("ADDED", member.member_port, timeout=10)
        for options in (6, 2, 8):
            assert stack.command(f"send {member.member_port} {options}", ("SENT", "FAILED")) \
                .startswith("SENT")
        replies, elapsed = stack.command(f"rpc {member.member_port}", "RPC").split()[1:]
        assert replies == "0"                 # a NoRpcChannelReply counts as no answer...
        assert int(elapsed) < 9000            # ...but ends the wait (timeout 10,000 ms)
        stack.command(f"getall {member.member_port} /shop")
        # answered, not waited out (a DeltaManager waits 60 s); the bound leaves
        # a busy machine's JVM room (5 s once fell short with CI and a bench running)
        event, context = stack.expect("SESSION", timeout=30).split()[1:3]
        assert (event, context) == ("14", "/shop")      # transfer complete: no sessions held
        stats = member.stats()
    assert stats["probe_acks"] == 3        # options 6, 2 and the RPC (sent with USE_ACK)
    assert stats["probe_frames"] >= 5
    assert (stats["probe_rpc_replies"], stats["probe_state_replies"]) == (1, 1)
    assert stats["probe_replies_failed"] == 0 and stats["probe_malformed"] == 0


def test_tomcat_sorts_a_listed_member_after_every_tomcat(stack, classpath, group_port):
    """DeltaManager asks the first member of its list (largest alive time)
    for sessions: with tomcat=True we advertise a negative alive time, so
    even a Tomcat that started after us comes first."""
    with python_service(group_port) as service:
        stack.wait_event("ADDED", service.local_member.port)
        younger = TribesNode(classpath, "stack", GROUP, group_port, free_tcp_port(), **TIMING)
        try:
            stack.wait_event("ADDED", younger.member_port)
            assert service.local_member.alive_ms < 0
            for _ in range(4):
                assert [m.port for m in stack.members()] == [younger.member_port,
                                                             service.local_member.port]
                time.sleep(FREQUENCY / 1000)       # on purpose: the order holds period after period
        finally:
            younger.kill()

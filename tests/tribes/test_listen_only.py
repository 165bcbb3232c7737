"""Listen-only: hear a group without joining it. The
engine decides it (no heartbeat, no goodbye, no sender socket); both fronts
and ``mcast-demo watch`` send nothing, counted on the group by a socket of
the test's own. Loopback only, TTL 0."""

import os
import signal
import socket
import struct
import subprocess

import pytest

from mcastmember import ConfigurationError, McastService, implementation
from mcastmember.tribes.kernel import _fast_py
from mcastmember.tribes.engine.config import ServiceConfig
from mcastmember.tribes.engine.engine import RECEIVE, MembershipEngine

from fronts import FAST, FRONTS
from support import GROUP, LOOPBACK, heartbeat, rest_of_stdout, wait_until
from test_cli import DEMO, read_event, run


def listen_only_engine(codec):
    config = ServiceConfig(GROUP, 45564, **LOOPBACK, frequency=500, drop_time=3000,
                           listen_only=True)
    return MembershipEngine(config, codec=codec)


def wake(engine, start, until):
    """Wake ``engine`` at each of its deadlines from ``start`` to ``until``,
    as a driver does; return the times it had something to send."""
    sent, now = [], start
    while now <= until:
        engine.on_timer(now)
        if engine.outgoing(now) is not None:
            sent.append(now)
        now = engine.next_deadline()
    return sent


def test_a_listen_only_engine_sends_nothing_and_keeps_the_table(codec):
    engine = listen_only_engine(codec)
    assert engine.sockets() == [RECEIVE]            # no socket to send from
    engine.start(0.0)
    assert wake(engine, 0.0, 2.0) == []
    assert engine.next_deadline() == 2.5            # it still wakes on the grid
    engine.set_payload(b"changed")                   # nothing to announce either
    assert engine.outgoing(2.0) is None
    packet = heartbeat(codec, port=4001)
    engine.receive(bytearray(packet), len(packet), 2.1)
    assert [(e.kind, e.member.port) for e in engine.events()] == [("added", 4001)]
    assert wake(engine, 2.1, 5.2) == []
    assert [(e.kind, e.reason) for e in engine.events()] == [("removed", "expired")]
    engine.receive(bytearray(packet), len(packet), 6.0)
    engine.events()
    assert engine.stop(6.5) is None                  # no goodbye
    assert [(e.kind, e.reason) for e in engine.events()] == [("removed", "stopped")]
    assert engine.stats()["sent"] == 0


@pytest.mark.parametrize("settings, message", [
    (dict(tomcat=True), "listen_only sends nothing: it cannot have tomcat or tcp_listener"),
    (dict(verify=True), "listen_only sends nothing: it cannot have verify or tcp_listener"),
    (dict(tcp_listener=True), "listen_only sends nothing: it cannot have tcp_listener"),
    (dict(peers="127.0.0.2"), "listen_only hears a multicast group only"),
    (dict(listen_only="yes"), "listen_only must be True or False"),
])
def test_listen_only_refuses_what_would_send(settings, message):
    options = dict(LOOPBACK, listen_only=True)
    options.update(settings)
    with pytest.raises(ConfigurationError, match=message):
        ServiceConfig(GROUP, 45564, **options)


def group_counter(group_port):
    """A plain socket on the group, as any member's: it hears every datagram."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((GROUP, group_port))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                    struct.pack("4s4s", socket.inet_aton(GROUP), socket.inet_aton("127.0.0.1")))
    sock.setblocking(False)
    return sock


def senders(sock):
    """The member port of each datagram waiting on ``sock`` (None: not a
    membership packet), in order."""
    ports = []
    while True:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return ports
        ok = _fast_py.check(data, len(data)) == 0
        ports.append(_fast_py.parse(data, len(data))[1] if ok else None)


@pytest.mark.network
@pytest.mark.parametrize("kind", sorted(FRONTS))
def test_a_listen_only_front_hears_the_group_and_sends_nothing(kind, group_port):
    counter = group_counter(group_port)
    watcher = FRONTS[kind](group_port, 4009, listen_only=True)
    member = McastService(GROUP, group_port, member_port=4001, **LOOPBACK, **FAST)
    try:
        watcher.start()
        member.start()
        watcher.events.wait_for(lambda e: e.kind == "added" and e.member.port == 4001)
        member.stop()
        watcher.events.wait_for(lambda e: e.kind == "removed" and e.reason == "shutdown")
        watcher.stop()
        heard = senders(counter)
        assert heard.count(4001) >= 2 and set(heard) == {4001}   # a heartbeat or more, a goodbye
        assert watcher.stats()["sent"] == 0
        assert watcher.stats()["added"] == 1
        with socket.socket() as probe:                           # no TCP listener
            assert probe.connect_ex(("127.0.0.1", 4009)) != 0
    finally:
        watcher.close()
        member.stop()
        counter.close()


def sockets_of(pid):
    """How many sockets of each kind (udp, udp6, tcp, tcp6) process ``pid`` has open."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue        # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    counts = {}
    for kind in ("udp", "udp6", "tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{kind}") as table:
            rows = [line.split() for line in table.readlines()[1:]]
        found = sum(1 for row in rows if row[9] in inodes)
        if found:
            counts[kind] = found
    return counts


@pytest.mark.network
def test_mcast_demo_watch_shows_the_group_and_sends_nothing(group_port, tmp_path):
    counter = group_counter(group_port)
    watch = subprocess.Popen(
        DEMO + ["watch", GROUP, "--port", str(group_port), "--interface", "127.0.0.1",
                "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=tmp_path)
    member = McastService(GROUP, group_port, member_port=4001, **LOOPBACK, **FAST)
    try:
        wait_until(lambda: sockets_of(watch.pid).get("udp") == 1)
        member.start()
        event, _ = read_event(watch)
        assert set(event) == {"event", "reason", "member", "previous", "time"}   # as join's
        assert (event["event"], event["member"]["port"]) == ("added", 4001)
        assert event["member"]["unique_id"] == member.local_member.unique_id.hex()
        assert sockets_of(watch.pid) == {"udp": 1}   # no socket to send from, no TCP listener
        member.stop()
        event, _ = read_event(watch)
        assert (event["event"], event["reason"]) == ("removed", "shutdown")
        watch.send_signal(signal.SIGTERM)
        assert watch.wait(5) == 0
        assert rest_of_stdout(watch) == ""
        assert watch.stderr.read() == ""
        heard = senders(counter)
        assert heard.count(4001) >= 2 and set(heard) == {4001}    # the member's only
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
        watch.stdout.close()
        watch.stderr.close()
        member.stop()
        counter.close()


@pytest.mark.parametrize("args, message", [
    (["watch"], "the following arguments are required: group"),
    (["watch", "10.1.2.3"], "not a multicast group"),
])
def test_bad_watch_arguments_get_one_line_and_exit_2(tmp_path, args, message):
    result = run(args, tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.network
def test_watch_piped_says_what_it_watches_and_that_it_sent_nothing(group_port, tmp_path):
    # --ttl 0 as join takes it (copied with join's loopback flags): accepted, nothing sent
    result = run(["watch", GROUP, "--port", str(group_port), "--interface", "127.0.0.1",
                  "--ttl", "0", "--duration", "0.3"], tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    first, last = result.stdout.splitlines()
    assert first.endswith(f" watching {GROUP}:{group_port} (listen-only: nothing sent) "
                          f"({implementation()} codec, auth off)")
    assert last.endswith(" stopped watching (nothing was sent)")

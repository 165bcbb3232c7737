"""The streams others open to a gossip member, on both fronts: its slots are
shared per source (a stranger, not yet a member, gets an eighth of
``max_streams``; a member's host half), so connections that hold slots from
a few sources leave room for real members to join; at the cap a member's
host closes the idlest stranger's connection, and a stranger never closes
a member's; a stream that trickles is closed at ``tcp_timeout`` as
memberlist's; ``accept`` failing for want of descriptors waits, counted,
instead of spinning. Loopback only."""

import asyncio
import errno
import socket
import time

import pytest

pytest.importorskip("msgpack")

from mcastmember.gossip.fronts.aio import AsyncSerfService  # noqa: E402
from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.memberlist import messages  # noqa: E402
from mcastmember.gossip.memberlist.layout import NodeState  # noqa: E402
from support import free_gossip_port, wait_until  # noqa: E402

FRONTS = ["threads", "asyncio"]
#: no push/pull of its own during a test: only the streams the test opens reach the member
QUIET = {"push_pull_interval": 300.0}


def push_pull(nodes=5):
    """A push/pull of ``nodes`` dead strangers: a message never whole until its last byte."""
    states = [messages.PushNodeState(name=f"stranger-{i}", addr=bytes((127, 9, 0, i)), port=7946, incarnation=1,
                                     state=NodeState.DEAD, vsn=bytes((1, 5, 2, 2, 5, 5))) for i in range(nodes)]
    return messages.encode_push_pull(messages.PushPull(join=False, nodes=states))


def on_front(front, work, **options):
    """``work(svc, call)`` beside member "a" (127.0.0.1) started on
    ``front``; ``call(fn)`` runs ``fn()`` where the front runs (its loop for
    asyncio) and returns what it returned."""
    port = free_gossip_port("127.0.0.1")
    if front == "threads":
        with SerfService("a", "127.0.0.1", port, **options) as svc:
            work(svc, lambda fn: fn())
        return

    async def main():
        async with AsyncSerfService("a", "127.0.0.1", port, **options) as svc:
            loop = asyncio.get_running_loop()

            async def run(fn):
                return fn()

            await asyncio.to_thread(work, svc, lambda fn: asyncio.run_coroutine_threadsafe(
                run(fn), loop).result(30))
    asyncio.run(asyncio.wait_for(main(), 60))


def connect(source, port):
    """A connection to 127.0.0.1:``port`` from ``source`` (a loopback address)."""
    return socket.create_connection(("127.0.0.1", port), source_address=(source, 0))


def is_open(sock):
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:         # reset
        return False
    finally:
        sock.setblocking(True)


def counts(call, svc, *keys):
    stats = call(svc.stats)
    return [stats[k] for k in keys]


def alive(call, svc):
    return sorted(m.name for m in call(svc.members) if m.status.name == "ALIVE")


def join_five(port):
    """Five members (127.0.0.21 to .25) join 127.0.0.1:``port`` in turn:
    what each join returned (joined, errors)."""
    done = []
    for i in range(21, 26):
        host = f"127.0.0.{i}"
        with SerfService(f"j{i}", host, free_gossip_port(host), **QUIET) as joiner:
            result = joiner.join([("127.0.0.1", port)])
            done.append((result.joined, result.errors))
    return done


@pytest.mark.parametrize("front", FRONTS)
def test_forty_silent_connections_from_one_source_leave_room_for_five_joins(front):
    """A slowloris from 127.0.0.5 holds a stranger's share of the 32 slots
    (4); the other 36 connections are refused, and five members join."""
    def work(a, call):
        held = [connect("127.0.0.5", a.port) for _ in range(40)]
        wait_until(lambda: sum(counts(call, a, "connections_accepted", "connections_refused")) == 40)
        assert counts(call, a, "connections_accepted", "connections_refused") == [4, 36]
        assert join_five(a.port) == [(1, ())] * 5
        wait_until(lambda: alive(call, a) == ["a", "j21", "j22", "j23", "j24", "j25"])
        assert counts(call, a, "connections_accepted", "connections_refused", "connections_evicted") \
            == [4 + 5, 36, 0]
        assert sum(map(is_open, held)) == 4
        for sock in held:
            sock.close()
    on_front(front, work, **QUIET)


@pytest.mark.parametrize("front", FRONTS)
def test_hundreds_of_connections_from_three_sources_leave_room_for_five_joins(front):
    """300 connections at once from 127.0.0.5, .6 and .7: each source holds
    its share (4), every other slot stays free for the joins."""
    def work(a, call):
        held = []
        for i in range(300):
            sock = socket.socket()
            sock.bind((f"127.0.0.{5 + i % 3}", 0))
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", a.port))
            held.append(sock)
        wait_until(lambda: counts(call, a, "connections_accepted") == [12])
        assert join_five(a.port) == [(1, ())] * 5
        wait_until(lambda: alive(call, a) == ["a", "j21", "j22", "j23", "j24", "j25"])
        assert counts(call, a, "connections_accepted", "connections_evicted") == [12 + 5, 0]
        for sock in held:
            sock.close()
    on_front(front, work, **QUIET, tcp_timeout=30.0)


@pytest.mark.parametrize("front", FRONTS)
def test_a_members_host_closes_the_idlest_strangers_connection_and_a_stranger_never_a_members(front):
    """Four slots (a member's host may hold 2, a stranger 1), four strangers
    in them: a connection from member b's host closes the idlest stranger's
    (heard from longest ago), a second one the next idlest; then a new
    stranger is refused rather than closing b's host's."""
    def work(a, call):
        with SerfService("b", "127.0.0.2", free_gossip_port("127.0.0.2"), **QUIET) as b:
            assert b.join([("127.0.0.1", a.port)]).joined == 1
            wait_until(lambda: alive(call, a) == ["a", "b"] and counts(call, a, "connections_open") == [0])
            strangers = {}
            for n in (5, 6, 7):
                strangers[n] = connect(f"127.0.0.{n}", a.port)
                wait_until(lambda: counts(call, a, "connections_open") == [len(strangers)])
            before = counts(call, a, "bytes_received.tcp")[0]
            strangers[5].sendall(push_pull()[:1])       # 5 is heard from last
            wait_until(lambda: counts(call, a, "bytes_received.tcp") == [before + 1])
            strangers[8] = connect("127.0.0.8", a.port)
            wait_until(lambda: counts(call, a, "connections_open") == [4])
            first = connect("127.0.0.2", a.port)
            wait_until(lambda: not is_open(strangers[6]))
            second = connect("127.0.0.2", a.port)
            wait_until(lambda: not is_open(strangers[7]))
            assert counts(call, a, "connections_evicted", "connections_refused") == [2, 0]
            late = connect("127.0.0.9", a.port)
            wait_until(lambda: not is_open(late))
            assert counts(call, a, "connections_evicted", "connections_refused", "connections_open") == [2, 1, 4]
            assert [is_open(s) for s in (strangers[5], strangers[8], first, second)] == [True] * 4
            for sock in (*strangers.values(), first, second, late):
                sock.close()
    on_front(front, work, max_streams=4, **QUIET)


@pytest.mark.parametrize("front", FRONTS)
def test_a_stream_that_trickles_is_closed_at_tcp_timeout(front):
    """memberlist gives every stream one deadline, tcp_timeout from its
    start: bytes that keep coming, a message never whole, do not extend it."""
    def work(a, call):
        sock = connect("127.0.0.5", a.port)
        data, sent = push_pull(), 0
        while is_open(sock) and sent < len(data):    # bounded: a stream never closed fails below
            try:
                sock.sendall(data[sent:sent + 1])
            except OSError:         # closed meanwhile
                break
            sent += 1
            time.sleep(0.02)        # paced: a byte every 20 ms, a trickle
        assert counts(call, a, "connections_timed_out", "connections_open", "streams_received") == [1, 0, 0]
        assert 1 < sent < len(data)
        sock.close()
    on_front(front, work, **QUIET, tcp_timeout=0.5)


@pytest.mark.parametrize("front", FRONTS)
def test_accept_waits_when_descriptors_run_out_instead_of_spinning(front, monkeypatch):
    """accept() failing with EMFILE leaves the connection in the backlog, so
    the port stays readable: the front stops accepting for 0.1 s, then
    0.2 s... (counted ``accept_errors``), and takes the connection once
    accept works again."""
    tries = []
    real = socket.socket.accept

    def work(a, call):
        def accept(sock):
            if sock.getsockname()[1] == a.port:
                tries.append(time.monotonic())
                raise OSError(errno.EMFILE, "Too many open files")
            return real(sock)
        monkeypatch.setattr(socket.socket, "accept", accept)
        waiting = connect("127.0.0.5", a.port)
        wait_until(lambda: len(tries) >= 3)
        monkeypatch.undo()
        gaps = [later - earlier for earlier, later in zip(tries, tries[1:])]
        assert min(gaps[:2]) >= 0.09, gaps
        wait_until(lambda: counts(call, a, "connections_accepted") == [1])
        assert counts(call, a, "accept_errors") == [len(tries)]
        waiting.close()
    on_front(front, work, **QUIET)

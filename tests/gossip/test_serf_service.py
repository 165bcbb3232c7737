"""SerfService (mcastmember.gossip.fronts.service) on loopback: two Python
Serf members on real sockets, the bounds on streams others open to us, and
its errors for bad settings. The real Serf agent is in test_serf_agent."""

import asyncio
import errno
import os
import socket
import threading
import time

import pytest

pytest.importorskip("msgpack")

from mcastmember.gossip.fronts.aio import AsyncSerfService  # noqa: E402
from mcastmember.gossip.fronts.service import FRONT_COUNTERS, SerfService  # noqa: E402
from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import messages  # noqa: E402
from mcastmember.gossip.memberlist.errors import Truncated  # noqa: E402
from mcastmember.gossip.memberlist.layout import MessageType, NodeState  # noqa: E402
from mcastmember.gossip.memberlist.limits import Limits  # noqa: E402
from mcastmember.gossip.serf.node import SerfMemberEvent, UserEventReceived  # noqa: E402
from mcastmember._runtime.errors import ConfigurationError  # noqa: E402
from support import free_gossip_port as free_port, silent_port, wait_until  # noqa: E402


def view(svc):
    return {m.name: (m.addr, m.status.name.lower(), m.tags) for m in svc.members()}


def test_two_fronts_join_see_tags_and_events_and_leave():
    pa, pb = free_port("127.0.0.1"), free_port("127.0.0.2")
    with SerfService("a", "127.0.0.1", pa, tags={"role": "web"}, seed=1) as a, \
            SerfService("b", "127.0.0.2", pb, tags={"role": "db"}, seed=2) as b:
        events = []
        a.add_listener(events.append)
        done = b.join([("127.0.0.1", pa)])
        assert (done.joined, done.errors) == (1, ())
        expected = {"a": ("127.0.0.1", "alive", {"role": "web"}), "b": ("127.0.0.2", "alive", {"role": "db"})}
        wait_until(lambda: view(a) == expected and view(b) == expected)
        b.user_event("deploy", b"v1")
        wait_until(lambda: any(isinstance(e, UserEventReceived) for e in events))
        assert [(e.name, e.payload) for e in events if isinstance(e, UserEventReceived)] == [("deploy", b"v1")]
        assert b.leave().ok
        wait_until(lambda: view(a)["b"][1] == "left")
        kinds = [e.kind for e in events if isinstance(e, SerfMemberEvent) and e.member.name == "b"]
        assert kinds == ["joined", "left"]
        stats = a.stats()
        assert stats["connections_accepted"] >= 1 and stats["datagrams_received"] >= 1
        assert [stats[k] for k in ("connections_refused", "connections_too_big", "listener_events_dropped")] \
            == [0, 0, 0]


def test_streams_past_the_cap_are_refused_and_idle_ones_time_out():
    port = free_port("127.0.0.1")
    with SerfService("a", "127.0.0.1", port, max_streams=1, tcp_timeout=0.3) as a:
        first = socket.create_connection(("127.0.0.1", port))
        wait_until(lambda: a.stats()["connections_accepted"] == 1)
        second = socket.create_connection(("127.0.0.1", port))
        wait_until(lambda: a.stats()["connections_refused"] == 1)
        assert second.recv(10) == b""          # closed at once
        wait_until(lambda: a.stats()["connections_timed_out"] == 1)
        assert first.recv(10) == b""           # the idle one closed at tcp_timeout
        assert a.stats()["connections_open"] == 0
        first.close()
        second.close()


def test_a_join_to_a_closed_port_or_a_silent_one_fails_with_the_reason():
    closed = free_port("127.0.0.2")
    with SerfService("a", "127.0.0.1", free_port("127.0.0.1"), tcp_timeout=0.5) as a, \
            silent_port() as silent:
        done = a.join([("127.0.0.2", closed), silent])
        assert done.joined == 0
        assert sorted(done.errors) == sorted([f"127.0.0.2:{closed}: connect: {os.strerror(errno.ECONNREFUSED)}",
                                              f"{silent[0]}:{silent[1]}: timed out"])
        stats = a.stats()
        assert (stats["connections_opened"], stats["connections_failed"], stats["connections_timed_out"]) \
            == (2, 1, 1)


def test_join_and_leave_need_a_started_service():
    svc = SerfService("a", "127.0.0.1", free_port("127.0.0.1"))
    with pytest.raises(RuntimeError, match="start the service before joining"):
        svc.join([("127.0.0.2", 7946)])
    with pytest.raises(RuntimeError, match="start the service before leaving"):
        svc.leave()


def test_the_fronts_counters_do_not_hide_the_nodes():
    """stats() is the node's counters and the front's: no name may be both."""
    svc = SerfService("a", "127.0.0.1", free_port("127.0.0.1"))
    assert set(FRONT_COUNTERS) & set(svc.node.stats()) == set()
    assert set(FRONT_COUNTERS) | {"connections_open"} <= set(svc.stats())


@pytest.mark.parametrize("args, kwargs, message", [
    (("a", "0.0.0.0"), {"advertise": "0.0.0.0"}, "advertise '0.0.0.0' is not a specific address"),
    (("a", "here"), {}, "bind address 'here' is not an IP address"),
    (("a", "127.0.0.1", 0), {}, "port 0 is not between 1 and 65535"),
    (("a",), {"max_streams": 0}, "max_streams must be at least 1"),
    (("a",), {"nope": 1}, "SerfService() got an unexpected keyword argument 'nope'"),
    (("a",), {"tcp_timeout": "1s"}, "tcp_timeout must be a number, not '1s'"),
])
def test_bad_settings_are_one_clear_sentence(args, kwargs, message):
    with pytest.raises(ConfigurationError) as caught:
        SerfService(*args, **kwargs)
    assert str(caught.value) == message


def test_wait_for_and_a_replayed_listener_as_the_heartbeat_front_has_them():
    pa, pb = free_port("127.0.0.1"), free_port("127.0.0.2")
    with SerfService("a", "127.0.0.1", pa, seed=1) as a, SerfService("b", "127.0.0.2", pb, seed=2) as b:
        b.join([("127.0.0.1", pa)])
        assert [m.name for m in a.wait_for(lambda ms: len(ms) == 2, 5)] == ["a", "b"]
        heard = []
        a.add_listener(heard.append, replay=True)
        wait_until(lambda: len(heard) >= 2)
        assert [(e.kind, e.member.name) for e in heard[:2]] == [("joined", "a"), ("joined", "b")]
        with pytest.raises(TimeoutError, match="predicate not true within 0.1 s"):
            a.wait_for(lambda ms: len(ms) == 3, 0.1)
        assert a.stats()["subscribers"] == 1
    with pytest.raises(RuntimeError, match="SerfService is not running"):
        a.wait_for(lambda ms: False)


def _trickled_push_pull(nodes):
    """A plain (uncompressed) push/pull of ``nodes`` dead strangers: decoded
    in full, merged into nothing (memberlist ignores the death of a node it
    does not know)."""
    states = [messages.PushNodeState(name=f"stranger-{i:05}", addr=bytes((127, 9, i >> 8 & 255, i & 255)),
                                     port=7946, incarnation=1, state=NodeState.DEAD, vsn=bytes((1, 5, 2, 2, 5, 5)))
              for i in range(nodes)]
    return messages.encode_push_pull(messages.PushPull(join=False, nodes=states))


def _trickle(sock, data):
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for start in range(0, len(data), 2048):
        sock.sendall(data[start:start + 2048])
        time.sleep(0.001)             # the pieces arrive apart, as over a slow link


def _read_all(sock):
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def _on_front(front, port, work):
    """``work(svc, join)`` beside a started front ("threads" or "asyncio",
    whose loop runs meanwhile: ``join`` blocks this thread, not the loop);
    returns the front, stopped."""
    options = {"enable_compression": False}
    if front == "threads":
        with SerfService("a", "127.0.0.1", port, **options) as svc:
            work(svc, svc.join)
        return svc

    async def main():
        async with AsyncSerfService("a", "127.0.0.1", port, **options) as svc:
            loop = asyncio.get_running_loop()
            await asyncio.to_thread(work, svc, lambda seeds: asyncio.run_coroutine_threadsafe(
                svc.join(seeds), loop).result(30))
        return svc
    return asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_big_push_pull_read_in_many_pieces_is_decoded_a_bounded_number_of_times(front):
    """The front hands the node the stream read so far; a 230 KB push/pull
    arriving in 2 KB pieces is not decoded again after every piece (that is
    quadratic: 56 attempts, 5 MB in all, before this was fixed), only when
    what was read has doubled or the sender went quiet: at most three times
    its size in all. The reply is our own state, as memberlist's."""
    data = _trickled_push_pull(3000)
    port = free_port("127.0.0.1")
    handed, replies = [], []

    def work(a, join):
        real = a.node.receive_stream
        a.node.receive_stream = lambda buf, addr, now: handed.append(len(buf)) or real(buf, addr, now)
        with socket.create_connection(("127.0.0.1", port)) as peer:
            _trickle(peer, data)
            replies.append(_read_all(peer))

    a = _on_front(front, port, work)
    (kind, state), used = framing.decode_stream(replies[0], Limits())
    assert (kind, [n.name for n in state.nodes], used) == (MessageType.PUSH_PULL, ["a"], len(replies[0]))
    assert handed[-1] == len(data)
    assert sum(handed) <= 3 * len(data), (len(handed), sum(handed), len(data))
    assert [m.name for m in a.members()] == ["a"]
    assert (a.stats()["streams_received"], a.stats()["streams_bad"]) == (1, 0)


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_big_push_pull_reply_read_in_many_pieces_is_decoded_a_bounded_number_of_times(front):
    """The same for the reply to our own push/pull (a join): a peer that
    answers with 230 KB in 2 KB pieces and then waits."""
    data = _trickled_push_pull(3000)
    handed, done = [], []

    def peer(server):
        conn, _ = server.accept()
        with conn:
            got = b""
            while True:                   # our push/pull first, whole
                got += conn.recv(65536)
                try:
                    framing.decode_stream(got, Limits())
                    break
                except Truncated:
                    continue
            _trickle(conn, data)
            conn.recv(1)                  # until the service closes

    def work(a, join):
        real = a.node.stream_response
        a.node.stream_response = lambda sid, buf, now: handed.append(len(buf)) or real(sid, buf, now)
        with socket.create_server(("127.0.0.2", 0)) as server:
            thread = threading.Thread(target=peer, args=(server,), daemon=True)
            thread.start()
            done.append(join([server.getsockname()]))
            thread.join(10)

    a = _on_front(front, free_port("127.0.0.1"), work)
    assert (done[0].joined, done[0].errors) == (1, ())
    assert handed[-1] == len(data)
    assert sum(handed) <= 3 * len(data), (len(handed), sum(handed), len(data))
    assert [m.name for m in a.members()] == ["a"]


def test_a_listener_may_stop_the_service():
    """stop() from a listener (on the dispatcher thread) ends the service:
    its sockets closed (the port is free again), no listener error, and the
    I/O thread gone."""
    port = free_port("127.0.0.1")
    svc = SerfService("a", "127.0.0.1", port)
    returned = threading.Event()

    def stop_on_first(event):
        svc.stop()
        returned.set()

    svc.add_listener(stop_on_first)
    svc.start()                                   # our own "joined" event comes at once
    assert returned.wait(10)
    assert svc.stats()["listener_errors"] == 0
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", port))
        udp.bind(("127.0.0.1", port))
    wait_until(lambda: not any(t.name.startswith("serf-io-a") for t in threading.enumerate()))

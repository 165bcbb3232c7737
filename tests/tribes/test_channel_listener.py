"""The TCP listeners for Tomcat (tribes_listener.py, tribes_listener_aio.py) on loopback: they
answer frames at once, deliver replies to the sender's receiver, and stay
within their bounds. The same checks run on the threaded and asyncio ones."""

import asyncio
import contextlib
import json
import select
import socket
import subprocess
import sys
import textwrap
import threading

import pytest

from mcastmember.tribes.kernel import codec as _codec

from mcastmember._runtime import listen

from mcastmember.tribes.fronts import channel_listener as probe

from mcastmember.tribes.fronts import channel_listener_aio as probe_aio
from mcastmember.tribes.wire import layout as L
from mcastmember.tribes.engine.channel import ACK_FRAME, ChannelData, FrameReader, frame
from mcastmember.tribes.engine.config import ServiceConfig
from mcastmember.tribes.engine.member import Member

from fronts import FAST, FRONTS
from support import (GROUP, JAVA_GET_ALL_SESSIONS, JAVA_NO_RPC_REPLY, JAVA_RPC_REQUEST, LOOPBACK,
                     child_env, heartbeat, wait_until)

OURS = heartbeat(port=4100)


def accepting(listener_class):
    """A listener of ``listener_class`` that accepts as members (replies may
    go to them) the senders whose packets are in its ``members`` set."""
    members = set()

    def accepts(member):
        return any(member == _member(packet) for packet in members)
    def hosts():
        return {_member(packet).address for packet in members}
    listener = listener_class("127.0.0.1", 0, lambda: OURS, accepts, hosts)
    listener.members = members
    return listener


def _member(packet):
    fields = _codec.parse(packet)
    return Member(fields[4], fields[1], fields[7])


@contextlib.contextmanager
def threaded_listener():
    listener = accepting(probe.TribesListener)
    listener.start()
    try:
        yield listener
    finally:
        listener.stop()


@contextlib.contextmanager
def asyncio_listener():
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    listener = accepting(probe_aio.AsyncTribesListener)
    listener.loop = loop
    asyncio.run_coroutine_threadsafe(listener.start(), loop).result(10)
    try:
        yield listener
    finally:
        # must return although clients are still connected (Python 3.12.1+'s
        # wait_closed waits for them)
        asyncio.run_coroutine_threadsafe(listener.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


@pytest.fixture(params=["threads", "asyncio"])
def listener(request):
    with (threaded_listener if request.param == "threads" else asyncio_listener)() as running:
        yield running


def connect(listener, source="127.0.0.1"):
    return socket.create_connection(("127.0.0.1", listener.port), timeout=5,
                                    source_address=(source, 0))


def message(options, body, sender=OURS):
    return frame(ChannelData(options, 0, b"i" * 16, sender, body).encode())


def read_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def test_frames_asking_for_acks_are_acked_at_once(listener):
    with connect(listener) as sock:
        sock.sendall(message(6, b"x") + message(8, b"y") + message(2, b"z"))
        assert read_exactly(sock, 2 * len(ACK_FRAME)) == ACK_FRAME * 2
        sock.settimeout(0.3)
        with pytest.raises(socket.timeout):      # nothing for the frame with options 8
            sock.recv(1)
    assert listener.stats()["probe_acks"] == 2


def test_an_rpc_reply_reaches_the_senders_receiver(listener):
    with socket.socket() as receiver:            # stands in for Tomcat's NioReceiver
        receiver.bind(("127.0.0.1", 0))
        receiver.listen(1)
        receiver.settimeout(5)
        sender = heartbeat(port=receiver.getsockname()[1])
        listener.members.add(sender)             # a member of ours
        with connect(listener) as sock:
            sock.sendall(message(L.SEND_OPTIONS_ASYNCHRONOUS, JAVA_RPC_REQUEST, sender=sender))
            conn, _ = receiver.accept()
            with conn:
                conn.settimeout(5)
                data = b""
                while not data.endswith(L.CHANNEL_END):
                    data += conn.recv(4096)
    (head, complete), = FrameReader().feed(data)
    reply = ChannelData.parse(head, complete)
    assert reply.message == JAVA_NO_RPC_REPLY and reply.sender == OURS
    wait_until(lambda: listener.stats()["probe_rpc_replies"] == 1)     # once written


def test_a_reply_nobody_takes_is_counted_not_retried(listener):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead_port = closed.getsockname()[1]      # nothing listens here once closed
    listener.members.add(heartbeat(port=dead_port))
    with connect(listener) as sock:
        sock.sendall(message(2, JAVA_RPC_REQUEST, sender=heartbeat(port=dead_port)))
        assert read_exactly(sock, len(ACK_FRAME)) == ACK_FRAME
        wait_until(lambda: listener.stats()["probe_replies_failed"] > 0)
    stats = listener.stats()
    assert (stats["probe_replies_failed"], stats["probe_rpc_replies"]) == (1, 0)   # none sent


def quiet(sock, seconds=0.3):
    """True when nothing arrives on ``sock`` (a listening socket: no
    connection) within ``seconds``."""
    return not select.select([sock], [], [], seconds)[0]


def test_a_frame_naming_a_stranger_makes_no_connection(listener, monkeypatch):
    """A frame whose sender names another address (here
    127.0.0.9:port, where something listens) must not make us connect there
    (its reply is held for the sender's first heartbeat, then dropped)."""
    monkeypatch.setattr(probe, "HOLD_S", 0.3, raising=False)
    with socket.socket() as target:
        target.bind(("127.0.0.9", 0))
        target.listen(8)
        stranger = heartbeat(port=target.getsockname()[1], host=bytes((127, 0, 0, 9)))
        with connect(listener) as sock:
            sock.sendall(message(8, JAVA_RPC_REQUEST, sender=stranger)
                         + message(8, JAVA_GET_ALL_SESSIONS, sender=stranger)
                         + message(2, b"sync"))
            assert read_exactly(sock, len(ACK_FRAME)) == ACK_FRAME
            wait_until(lambda: listener.stats().get("probe_replies_refused") == 2)
        assert quiet(target)
    stats = listener.stats()
    assert (stats["probe_replies_refused"], stats["probe_rpc_replies"],
            stats["probe_state_replies"], stats["probe_replies_failed"]) == (2, 0, 0, 0)


def test_frames_before_garbage_in_one_read_are_acked(listener):
    """The acks of the frames that came whole are sent
    before the connection is closed for the garbage after them."""
    with connect(listener) as sock:
        sock.sendall(message(2, b"one") + message(6, b"two") + b"GET / HTTP/1.1\r\n\r\n")
        assert read_exactly(sock, 3 * len(ACK_FRAME)) == ACK_FRAME * 2   # then the end
    stats = listener.stats()
    assert (stats["probe_frames"], stats["probe_acks"], stats["probe_malformed"]) == (2, 2, 1)


def test_junk_closes_only_its_own_connection(listener):
    with connect(listener) as good, connect(listener) as junk:
        junk.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert junk.recv(1) == b""               # closed by the listener
        good.sendall(message(2, b"still here"))
        assert read_exactly(good, len(ACK_FRAME)) == ACK_FRAME
    assert listener.stats()["probe_malformed"] == 1


def test_at_the_cap_the_idlest_connection_makes_room(listener, monkeypatch):
    monkeypatch.setattr(probe, "MAX_CONNECTIONS", 3)
    idle = [connect(listener) for _ in range(3)]
    try:
        for sock in idle[1:]:                    # the first stays silent longest
            sock.sendall(message(2, b"hi"))
            assert read_exactly(sock, len(ACK_FRAME)) == ACK_FRAME
        # e.g. Tomcat's failure detector, from another host than the crowd's
        with connect(listener, "127.0.0.2") as newcomer:
            newcomer.sendall(message(2, b"probe"))
            assert read_exactly(newcomer, len(ACK_FRAME)) == ACK_FRAME
            assert idle[0].recv(1) == b""        # the idlest was closed to admit it
    finally:
        for sock in idle:
            sock.close()
    assert listener.stats()["probe_evicted"] == 1


def test_at_the_cap_a_members_host_gets_in_past_a_crowd_of_sources(listener, monkeypatch):
    """Sources holding one idle connection each fill the listener: Tomcat,
    connecting from a member's host, closes the idlest of theirs to get in
    (a stranger could not: one connection each is even)."""
    monkeypatch.setattr(probe, "MAX_CONNECTIONS", 3)
    listener.members.add(heartbeat(port=4000))          # a member at 127.0.0.1
    crowd = [connect(listener, f"127.0.0.{n}") for n in (2, 3, 4)]
    try:
        wait_until(lambda: listener.stats()["probe_connections"] == 3)
        with connect(listener, "127.0.0.5") as stranger:
            assert stranger.recv(1) == b""               # refused
        with connect(listener, "127.0.0.1") as tomcat:
            tomcat.sendall(message(2, b"probe"))
            assert read_exactly(tomcat, len(ACK_FRAME)) == ACK_FRAME
            assert crowd[0].recv(1) == b""               # the idlest stranger made room
    finally:
        for sock in crowd:
            sock.close()
    stats = listener.stats()
    assert (stats["probe_refused"], stats["probe_evicted"]) == (1, 1)


def test_a_connection_that_sends_no_whole_frame_is_closed_soon(listener, monkeypatch):
    monkeypatch.setattr(probe, "FIRST_FRAME_TIMEOUT_S", 0.3, raising=False)
    with connect(listener) as silent, connect(listener) as partial, connect(listener) as tomcat:
        partial.sendall(message(2, b"half")[:20])
        tomcat.sendall(message(2, b"whole"))
        assert read_exactly(tomcat, len(ACK_FRAME)) == ACK_FRAME
        assert silent.recv(1) == b"" and partial.recv(1) == b""    # closed by the listener
        tomcat.sendall(message(2, b"still here"))
        assert read_exactly(tomcat, len(ACK_FRAME)) == ACK_FRAME


def test_an_ipv6_source_is_counted_by_its_64():
    assert listen.source_group("2001:db8::1") == listen.source_group("2001:db8::ffff:2") \
        == "2001:db8::/64"
    assert listen.source_group("::ffff:127.0.0.2") == "127.0.0.2"
    assert listen.same_host("::ffff:127.0.0.2", "127.0.0.2")


def test_a_flood_from_one_source_never_takes_another_sources_connection(listener, monkeypatch):
    """One source opening connections without end gets its
    share; the rest are refused, and a Tomcat's pooled connection from
    another source is never the one closed."""
    monkeypatch.setattr(probe, "MAX_CONNECTIONS", 6)
    monkeypatch.setattr(probe, "MAX_PER_SOURCE", 4, raising=False)   # (raising: before it existed)
    with connect(listener, "127.0.0.2") as tomcat:
        tomcat.sendall(message(2, b"pooled"))
        assert read_exactly(tomcat, len(ACK_FRAME)) == ACK_FRAME
        flood = [connect(listener, "127.0.0.3") for _ in range(10)]
        wait_until(lambda: listener.stats()["probe_connections"] == 11)
        # .3 holds its 4; a second flooder evens out with it (one of .3's
        # closed to admit it, 6 in all), and never below .2's one.
        flood += [connect(listener, "127.0.0.4") for _ in range(10)]
        wait_until(lambda: listener.stats()["probe_connections"] == 21)
        tomcat.sendall(message(2, b"still pooled"))
        assert read_exactly(tomcat, len(ACK_FRAME)) == ACK_FRAME
        for sock in flood:
            sock.close()
    stats = listener.stats()
    assert (stats["probe_refused"], stats["probe_evicted"]) == (6 + 8, 1)


def test_a_client_that_never_reads_its_acks_is_dropped(listener, monkeypatch):
    monkeypatch.setattr(probe, "MAX_UNSENT", 1000)
    monkeypatch.setattr(probe_aio, "MAX_UNSENT", 1000)
    with connect(listener) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        burst = message(2, b"", sender=b"") * 20000     # 420,000 bytes of acks, never read
        try:
            sock.sendall(burst)
            sock.settimeout(10)
            while sock.recv(65536):   # a listener that kept it would block here: TimeoutError
                pass
        except (ConnectionResetError, BrokenPipeError):
            pass                      # dropped while we were still writing or reading


def test_the_listener_binds_the_advertised_address_never_all():
    # No interface given: bind where Tomcat connects (the address we advertise).
    config = ServiceConfig(host="127.0.0.2", tomcat=True)
    assert config.listen_address == "127.0.0.2"
    assert ServiceConfig(interface="127.0.0.1", ttl=0, tomcat=True).listen_address == "127.0.0.1"


def test_async_membership_stops_while_tomcat_holds_a_connection(group_port):
    """Python 3.12.1+'s Server.wait_closed waits for open connections, and
    Tomcat keeps its sender connections open: stop() must close them itself."""
    from mcastmember.tribes.fronts.aio import AsyncMembership

    async def main():
        member = AsyncMembership(GROUP, group_port, **LOOPBACK, member_port=0, tomcat=True)
        await member.start()
        _, writer = await asyncio.open_connection("127.0.0.1", member.local_member.port)
        writer.write(message(2, b"hello"))
        await asyncio.wait_for(member.stop(), 10)
        writer.close()

    asyncio.run(main())


# -- accept failing for want of descriptors: back off, no busy loop ------------------

_EXHAUSTED = textwrap.dedent("""
    import asyncio, json, resource, socket, sys, threading, time
    from support import wait_until
    from mcastmember.tribes.fronts import channel_listener as probe
    from mcastmember.tribes.fronts import channel_listener_aio as probe_aio
    kind = sys.argv[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    if kind == "threads":
        listener = probe.TribesListener("127.0.0.1", 0, lambda: b"")
        listener.start()
        call = lambda f: f()
    else:
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, daemon=True).start()
        listener = probe_aio.AsyncTribesListener("127.0.0.1", 0, lambda: b"")
        asyncio.run_coroutine_threadsafe(listener.start(), loop).result(10)
        async def on_loop(f):
            return f()
        call = lambda f: asyncio.run_coroutine_threadsafe(on_loop(f), loop).result(10)
    hog = []
    try:
        while True:
            hog.append(socket.socket())
    except OSError:
        pass
    print(listener.port, flush=True)
    sys.stdin.readline()                          # the parent connected
    wait_until(lambda: call(listener.stats)["probe_accept_errors"] > 0)
    start = time.monotonic()
    time.sleep(1.0)                               # on purpose: the errors in one second are the rate measured
    errors = call(listener.stats)["probe_accept_errors"]
    elapsed = time.monotonic() - start
    for sock in hog:                               # descriptors again: it accepts
        sock.close()
    print(json.dumps([errors, elapsed]), flush=True)
    sys.stdin.readline()
""")


@pytest.mark.parametrize("kind", ["threads", "asyncio"])
def test_accept_backs_off_when_descriptors_run_out(kind):
    """Out of descriptors, accept() fails at once as long as a connection
    waits: the listener must wait between attempts (not spin a core), count
    them, and serve the waiting connection once descriptors are back."""
    child = subprocess.Popen([sys.executable, "-c", _EXHAUSTED, kind], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        port = int(child.stdout.readline())
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            child.stdin.write("go\n")
            child.stdin.flush()
            errors, elapsed = json.loads(child.stdout.readline())
            # At most one attempt per back-off step (0.1 s, doubling), and one
            # more at either end of the interval: a spinning loop makes 10^5.
            assert 1 <= errors <= elapsed / listen.BACKOFF_FIRST_S + 2
            sock.sendall(message(2, b"served"))
            assert read_exactly(sock, len(ACK_FRAME)) == ACK_FRAME
        child.stdin.write("done\n")
        child.stdin.flush()
        assert child.wait(10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdin.close()
        child.stdout.close()


# -- through the fronts: replies go only to the sender's own address ------------------

@pytest.mark.parametrize("kind", sorted(FRONTS))
def test_replies_go_to_members_only(kind, group_port, monkeypatch):
    """A front with the TCP listener answers an RPC request from a member it
    lists (its receiver gets the reply), never one whose sender it does not
    list: no connection to that address at all."""
    monkeypatch.setattr(probe, "HOLD_S", 0.3, raising=False)
    from mcastmember import McastService
    with socket.socket() as receiver, socket.socket() as target:
        for sock in (receiver, target):
            sock.bind(("127.0.0.1", 0))
            sock.listen(8)
        front = FRONTS[kind](group_port, 0, tomcat=True)
        member = McastService(GROUP, group_port, member_port=receiver.getsockname()[1],
                              **LOOPBACK, **FAST)
        front.start()
        member.start()
        try:
            front.events.wait_for(lambda e: e.kind == "added")
            port = front.front.local_member.port
            stranger = heartbeat(port=target.getsockname()[1], uid=b"s" * 16)
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(message(8, JAVA_RPC_REQUEST, sender=stranger) + message(2, b"sync"))
                assert read_exactly(sock, len(ACK_FRAME)) == ACK_FRAME
                wait_until(lambda: front.stats().get("probe_replies_refused") == 1)
                assert quiet(target)
                sock.sendall(message(8, JAVA_RPC_REQUEST, sender=member.config.encode()))
                receiver.settimeout(5)
                conn, _ = receiver.accept()
                conn.close()
            wait_until(lambda: front.stats()["probe_rpc_replies"] == 1)
            stats = front.stats()
            assert (stats["probe_replies_refused"], stats["probe_rpc_replies"]) == (1, 1)
        finally:
            member.stop()
            front.close()


def test_a_reply_waits_for_its_senders_first_heartbeat(listener):
    """Tomcat may ask as soon as it heard us, before its own first heartbeat
    reached us: the reply is held, and sent once the sender is a member."""
    with socket.socket() as receiver:
        receiver.bind(("127.0.0.1", 0))
        receiver.listen(1)
        sender = heartbeat(port=receiver.getsockname()[1])
        with connect(listener) as sock:
            sock.sendall(message(8, JAVA_RPC_REQUEST, sender=sender) + message(2, b"sync"))
            assert read_exactly(sock, len(ACK_FRAME)) == ACK_FRAME
            assert listener.stats()["probe_rpc_replies"] == 0
            listener.members.add(sender)            # its heartbeat arrives
            receiver.settimeout(5)
            conn, _ = receiver.accept()
            conn.close()
    wait_until(lambda: listener.stats()["probe_rpc_replies"] == 1)
    assert listener.stats()["probe_replies_refused"] == 0


# -- replies: only to the requester's host, within rates (security review) ---------

def _receiver():
    receiver = socket.socket()
    receiver.bind(("127.0.0.1", 0))
    receiver.listen(64)
    return receiver


def _accept_all(receiver, n):
    """Accept ``n`` connections on ``receiver`` and read each to its end."""
    total = 0
    receiver.settimeout(5)
    for _ in range(n):
        conn, _ = receiver.accept()
        with conn:
            conn.settimeout(5)
            while chunk := conn.recv(65536):
                total += len(chunk)
    return total


def test_a_frame_naming_a_member_from_another_host_gets_no_reply(listener):
    """A client at 127.0.0.7 sending frames whose sender is a member's
    packet (public bytes) must not make us connect to that member: the
    reply would go where the request did not come from (a relay and an
    amplifier: our whole packet, payload included, per frame)."""
    with _receiver() as receiver:
        member = heartbeat(port=receiver.getsockname()[1])     # at 127.0.0.1, accepted
        listener.members.add(member)
        with connect(listener, "127.0.0.7") as sock:
            sock.sendall(message(8, JAVA_RPC_REQUEST, sender=member) * 5
                         + message(8, JAVA_GET_ALL_SESSIONS, sender=member) + message(2, b"sync"))
            assert read_exactly(sock, len(ACK_FRAME)) == ACK_FRAME
            wait_until(lambda: listener.stats()["probe_replies_refused"] == 6)
        assert quiet(receiver)
    stats = listener.stats()
    assert (stats["probe_rpc_replies"], stats["probe_state_replies"],
            stats["probe_replies_failed"]) == (0, 0, 0)


@pytest.mark.parametrize("bound", ["count", "bytes"])
@pytest.mark.parametrize("kind", ["threads", "asyncio"])
def test_replies_to_one_host_are_bounded_in_count_and_bytes(kind, bound, monkeypatch):
    if bound == "count":       # a burst of 3, then (almost) nothing
        monkeypatch.setattr(probe, "DEST_REPLY_BURST", 3, raising=False)
        monkeypatch.setattr(probe, "DEST_REPLY_RATE", 1e-9, raising=False)
        sent = 3
    else:                      # one reply spends the second's bytes, and more
        monkeypatch.setattr(probe, "DEST_REPLY_BYTES_PER_S", 1, raising=False)
        sent = 1
    with (threaded_listener if kind == "threads" else asyncio_listener)() as listener, \
            _receiver() as receiver:
        member = heartbeat(port=receiver.getsockname()[1])
        listener.members.add(member)
        with connect(listener) as sock:
            sock.sendall(message(8, JAVA_RPC_REQUEST, sender=member) * 10 + message(2, b"sync"))
            assert read_exactly(sock, len(ACK_FRAME)) == ACK_FRAME
            _accept_all(receiver, sent)
            wait_until(lambda: listener.stats()["probe_rpc_replies"] == sent)
            assert quiet(receiver)
        stats = listener.stats()
    assert (stats["probe_rpc_replies"], stats["probe_replies_limited"],
            stats["probe_replies_failed"]) == (sent, 10 - sent, 0)


def test_a_reply_over_the_in_flight_cap_is_not_counted_as_sent(listener, monkeypatch):
    monkeypatch.setattr(probe, "MAX_REPLIES_IN_FLIGHT", 0)
    with _receiver() as receiver:
        member = heartbeat(port=receiver.getsockname()[1])
        listener.members.add(member)
        with connect(listener) as sock:
            sock.sendall(message(8, JAVA_RPC_REQUEST, sender=member) + message(2, b"sync"))
            assert read_exactly(sock, len(ACK_FRAME)) == ACK_FRAME
            wait_until(lambda: listener.stats()["probe_replies_failed"] == 1)
    assert listener.stats()["probe_rpc_replies"] == 0


@pytest.mark.parametrize("kind", sorted(FRONTS))
def test_a_front_lets_a_members_host_in_past_a_crowd(kind, group_port, monkeypatch):
    """Through the fronts: the hosts of the members they list come first at
    the listener's cap (Tomcat connects from its own host)."""
    monkeypatch.setattr(probe, "MAX_CONNECTIONS", 2)
    from mcastmember import McastService
    front = FRONTS[kind](group_port, 0, tomcat=True)
    member = McastService(GROUP, group_port, member_port=4002, **LOOPBACK, **FAST)
    front.start()
    member.start()
    try:
        front.events.wait_for(lambda e: e.kind == "added")
        port = front.front.local_member.port
        crowd = [socket.create_connection(("127.0.0.1", port), timeout=5,
                                          source_address=(f"127.0.0.{n}", 0)) for n in (2, 3)]
        wait_until(lambda: front.stats()["probe_connections"] == 2)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as tomcat:
            tomcat.sendall(message(2, b"probe"))
            assert read_exactly(tomcat, len(ACK_FRAME)) == ACK_FRAME
        for sock in crowd:
            sock.close()
        assert (front.stats()["probe_evicted"], front.stats()["probe_refused"]) == (1, 0)
    finally:
        member.stop()
        front.close()


def test_a_newcomer_refused_while_connections_are_set_up_is_counted_refused(monkeypatch):
    """The asyncio listener: at the cap, when the connections it would close
    are still being set up (accepted in the same wake-up), the newcomer is
    refused and counted so, not as an eviction that did not happen."""
    monkeypatch.setattr(probe, "MAX_CONNECTIONS", 2)
    with asyncio_listener() as listener:
        held = threading.Event()
        listener.loop.call_soon_threadsafe(held.wait, 10)    # the loop waits: a backlog forms
        try:
            socks = [connect(listener, "127.0.0.3"), connect(listener, "127.0.0.3"),
                     connect(listener, "127.0.0.4")]
        finally:
            held.set()                  # one wake-up accepts all three
        try:
            wait_until(lambda: listener.stats()["probe_connections"] == 3)
            assert socks[2].recv(1) == b""
            stats = listener.stats()
            assert (stats["probe_refused"], stats["probe_evicted"]) == (1, 0)
        finally:
            for sock in socks:
                sock.close()

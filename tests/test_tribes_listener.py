"""The TCP listeners for Tomcat (tribes_listener.py, tribes_listener_aio.py) on loopback: they
answer frames at once, deliver replies to the sender's receiver, and stay
within their bounds. The same checks run on the threaded and asyncio ones."""

import asyncio
import contextlib
import socket
import threading

import pytest

from mcastmember.wire import layout as L
from mcastmember.fronts import tribes_listener as probe
from mcastmember.fronts import tribes_listener_aio as probe_aio
from mcastmember.engine.channel import ACK_FRAME, ChannelData, FrameReader, frame
from mcastmember.engine.config import ServiceConfig

from support import GROUP, JAVA_NO_RPC_REPLY, JAVA_RPC_REQUEST, LOOPBACK, heartbeat

OURS = heartbeat(port=4100)


@contextlib.contextmanager
def threaded_listener():
    listener = probe.TribesListener("127.0.0.1", 0, lambda: OURS)
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
    listener = probe_aio.AsyncTribesListener("127.0.0.1", 0, lambda: OURS)
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


def connect(listener):
    sock = socket.create_connection(("127.0.0.1", listener.port), timeout=5)
    return sock


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
    assert listener.stats()["probe_rpc_replies"] == 1


def test_a_reply_nobody_takes_is_counted_not_retried(listener):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead_port = closed.getsockname()[1]      # nothing listens here once closed
    with connect(listener) as sock:
        sock.sendall(message(2, JAVA_RPC_REQUEST, sender=heartbeat(port=dead_port)))
        assert read_exactly(sock, len(ACK_FRAME)) == ACK_FRAME
        deadline = 50
        while listener.stats()["probe_replies_failed"] == 0 and deadline:
            threading.Event().wait(0.1)
            deadline -= 1
    assert listener.stats()["probe_replies_failed"] == 1


def test_junk_closes_only_its_own_connection(listener):
    with connect(listener) as good, connect(listener) as junk:
        junk.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert junk.recv(1) == b""               # closed by the listener
        good.sendall(message(2, b"still here"))
        assert read_exactly(good, len(ACK_FRAME)) == ACK_FRAME
    assert listener.stats()["probe_malformed"] == 1


def test_at_the_cap_the_idlest_connection_makes_room(listener, monkeypatch):
    monkeypatch.setattr(probe, "MAX_CONNECTIONS", 3)
    monkeypatch.setattr(probe_aio, "MAX_CONNECTIONS", 3)
    idle = [connect(listener) for _ in range(3)]
    try:
        for sock in idle[1:]:                    # the first stays silent longest
            sock.sendall(message(2, b"hi"))
            assert read_exactly(sock, len(ACK_FRAME)) == ACK_FRAME
        with connect(listener) as newcomer:      # e.g. Tomcat's failure detector
            newcomer.sendall(message(2, b"probe"))
            assert read_exactly(newcomer, len(ACK_FRAME)) == ACK_FRAME
            assert idle[0].recv(1) == b""        # the idlest was closed to admit it
    finally:
        for sock in idle:
            sock.close()
    assert listener.stats()["probe_evicted"] == 1


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
    from mcastmember.fronts.aio import AsyncMembership

    async def main():
        member = AsyncMembership(GROUP, group_port, **LOOPBACK, member_port=0, tomcat=True)
        await member.start()
        _, writer = await asyncio.open_connection("127.0.0.1", member.config.member_port)
        writer.write(message(2, b"hello"))
        await asyncio.wait_for(member.stop(), 10)
        writer.close()

    asyncio.run(main())

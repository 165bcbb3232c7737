"""The agent RPC's bounds, each flooded, on both fronts: connections from one
source past its share are refused while another source is served; a
request over ``rpc_max_request`` bytes, or bytes that are no request,
close their connection; streams past ``rpc_max_streams`` are refused; a
monitor that never reads loses lines past ``rpc_stream_queue``, each
counted, while the member answers others; a connection with
``rpc_max_pending`` requests in progress is not read until one ends.
Loopback only (127.0.0.2 as a second source)."""

import contextlib
import logging
import socket

import pytest

pytest.importorskip("msgpack")

from mcastmember.gossip.agent.rpc_server import RpcConfig, RpcLimits, RpcServer  # noqa: E402
from rpc_client import FRONTS, RpcClient, on_front  # noqa: E402
from support import silent_port, wait_until  # noqa: E402

# What a Serf agent adds around a member is written once, above the gossip
# engine; the default implementation (compiled or pure) changes only the hot
# path's matcher beneath it, so CI's compiled pass runs these (single_pass).
pytestmark = pytest.mark.single_pass


def served(addr, source=None):
    """Whether a client from ``source`` gets its handshake answered."""
    try:
        with RpcClient(addr, source, timeout=2.0) as client:
            client.handshake()
            return [m["Name"] for m in client.call("members")[1]["Members"]] == ["py1"]
    except (ConnectionError, OSError):
        return False


def counters(svc, on, *names):
    stats = on(svc.stats)
    return {name: stats[name] for name in names}


@pytest.mark.parametrize("front", FRONTS)
def test_one_source_holds_half_the_connections_and_another_is_still_served(front):
    def work(svc, on):
        addr = svc.rpc_address
        held = [socket.create_connection(addr) for _ in range(8)]
        try:
            wait_until(lambda: on(svc.stats)["rpc_connections_refused"] == 4)
            assert counters(svc, on, "rpc_connections_open", "rpc_connections_accepted") == {
                "rpc_connections_open": 4, "rpc_connections_accepted": 4}
            assert not served(addr)                     # 127.0.0.1's share is full
            assert served(addr, source="127.0.0.2")     # another source gets in
        finally:
            for sock in held:
                sock.close()
        wait_until(lambda: on(svc.stats)["rpc_connections_open"] == 0)
        assert served(addr)
        return on(svc.stats)["rpc_connections_refused"]

    assert on_front(front, work, rpc_max_connections=8) == 5


@pytest.mark.parametrize("front", FRONTS)
def test_an_oversized_request_or_garbage_closes_only_its_connection(front):
    def work(svc, on):
        addr = svc.rpc_address
        with RpcClient(addr) as big:
            big.handshake()
            big.send("event", {"Name": "big", "Payload": b"x" * 4096, "Coalesce": True})
            assert big.closed()
        with RpcClient(addr) as garbage:
            garbage.sock.sendall(b"\xc1" * 16)          # a byte msgpack never uses
            assert garbage.closed()
        assert served(addr)
        return counters(svc, on, "rpc_requests_too_big", "rpc_requests_bad")

    assert on_front(front, work, rpc_max_request=1024) == {"rpc_requests_too_big": 1, "rpc_requests_bad": 1}


@pytest.mark.parametrize("front", FRONTS)
def test_streams_past_the_bound_are_refused_until_one_stops(front):
    def work(svc, on):
        with RpcClient(svc.rpc_address) as one, RpcClient(svc.rpc_address) as two:
            one.handshake()
            two.handshake()
            first = one.send("stream", {"Type": "*"})
            assert one.read() == {"Error": "", "Seq": first}
            assert one.call("monitor", {"LogLevel": "ERR"})[0]["Error"] == ""
            assert two.call("stream", {"Type": "user"})[0]["Error"] == ""
            assert two.call("stream", {"Type": "query"})[0]["Error"] == "Too many streams"
            assert two.call("query", {"Name": "q", "Payload": b""})[0]["Error"] == "Too many streams"
            assert one.call("stop", {"Stop": first})[0]["Error"] == ""
            assert two.call("stream", {"Type": "query"})[0]["Error"] == ""
            return counters(svc, on, "rpc_streams_refused", "rpc_streams_open")

    assert on_front(front, work, rpc_max_streams=3) == {"rpc_streams_refused": 2, "rpc_streams_open": 3}


@pytest.mark.parametrize("front", FRONTS)
def test_a_monitor_that_never_reads_loses_lines_counted_and_others_are_served(front, monkeypatch):
    lines, size = 3000, 4000        # 12 MB: more than the kernel's buffers hold on loopback

    def work(svc, on):
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(svc.rpc_address)
        with RpcClient(svc.rpc_address) as client, contextlib.closing(slow):
            client.sock.close()
            client.sock = slow
            client.handshake()
            seq = client.send("monitor", {"LogLevel": "ERR"})
            assert client.read() == {"Error": "", "Seq": seq}
            for n in range(lines):
                logging.getLogger("mcastmember").error("flood %05d %s", n, "x" * size)
            wait_until(lambda: on(svc.stats)["rpc_records_dropped"] > 0)
            assert served(svc.rpc_address)
            client.sock.settimeout(0.5)
            received = 0
            with contextlib.suppress(socket.timeout):    # until nothing came for half a second
                while True:
                    assert client.record(seq)["Log"].endswith("x" * size)
                    received += 1
            dropped = on(svc.stats)["rpc_records_dropped"]
            return received + dropped, dropped

    monkeypatch.setattr(logging.getLogger("mcastmember"), "propagate", False)   # no console for 12 MB
    total, dropped = on_front(front, work, rpc_stream_queue=16)
    assert (total, dropped > 0) == (lines, True)


def test_a_subscriber_holds_at_most_its_queue_of_records_unwritten():
    """Sans-IO: a monitor whose bytes are never written holds
    ``stream_queue`` records, every later one dropped and counted; written,
    room comes back."""
    server = RpcServer(member=None, config=RpcConfig("127.0.0.1", 7373, limits=RpcLimits(stream_queue=8)))
    conn, _ = server.connect("127.0.0.1")
    conn.receive(b"\x82\xa7Command\xa9handshake\xa3Seq\x01\x81\xa7Version\x01"
                 b"\x82\xa7Command\xa7monitor\xa3Seq\x02\x81\xa8LogLevel\xa4INFO")
    answered = len(conn.data())
    conn.sent(answered)
    for n in range(100):
        server.on_log(logging.INFO, f"line {n}")
    assert (conn.records_queued, server.counts["rpc_records_dropped"]) == (8, 92)
    while conn.wants_write():
        conn.sent(len(conn.data()))
    server.on_log(logging.INFO, "after")
    assert (conn.records_queued, server.counts["rpc_records_dropped"]) == (1, 92)


@pytest.mark.parametrize("front", FRONTS)
def test_a_connection_with_its_requests_in_progress_is_not_read_further(front):
    def hold(svc, on):
        with silent_port() as silent, RpcClient(svc.rpc_address, timeout=10) as client:
            client.handshake()
            joins = [client.send("join", {"Existing": [f"{silent[0]}:{silent[1]}"], "Replay": False})
                     for _ in range(2)]
            members = client.send("members")
            order = []
            for _ in range(3):
                head = client.read()
                client.read()
                order.append(head["Seq"])
            # the members request waited, unread, for the first join to end; then was answered at once
            return order == [joins[0], members, joins[1]], on(svc.stats)["rpc_pending_full"]

    assert on_front(front, hold, rpc_max_pending=2, tcp_timeout=0.25) == (True, 1)

"""Unicast fan-out (``Targets``, ``HeartbeatPacket.send_to``) and the sender
address of slow-path datagrams (``MemberIndex.source``): both implementations,
on loopback, and in a namespace of our own where a peer has no route."""

import errno
import math
import socket
import subprocess
import uuid

import pytest

from mcastmember.tribes.wire import layout as L

from netlab import Lan, run_in_netns
from support import heartbeat

LOOPBACK = b"\x7f\x00\x00\x01"


def _receiver(address="127.0.0.1", family=socket.AF_INET):
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.bind((address, 0))
    sock.setblocking(False)
    return sock


def _drain(sock):
    got = []
    while True:
        try:
            got.append(sock.recv(65536))
        except BlockingIOError:
            return got


def _sender(address="127.0.0.1", family=socket.AF_INET):
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.bind((address, 0))
    sock.setblocking(False)
    return sock


def test_send_to_reaches_every_peer_with_one_stamp(codec):
    receivers = [_receiver() for _ in range(3)]
    sender = _sender()
    try:
        targets = codec.Targets([(LOOPBACK, r.getsockname()[1]) for r in receivers],
                                socket.AF_INET)
        assert len(targets) == 3
        packet = codec.HeartbeatPacket(heartbeat(codec), 0)
        assert packet.send_to(sender.fileno(), targets) == 3
        assert (packet.sent, packet.errors) == (3, 0)
        copies = [_drain(r) for r in receivers]
        assert [len(c) for c in copies] == [1, 1, 1]
        assert copies[0][0] == copies[1][0] == copies[2][0] == bytes(packet.buffer)
    finally:
        for sock in receivers + [sender]:
            sock.close()


def test_send_to_no_peers_sends_nothing(codec):
    sender = _sender()
    try:
        packet = codec.HeartbeatPacket(heartbeat(codec))
        assert packet.send_to(sender.fileno(), codec.Targets([], socket.AF_INET)) == 0
        assert packet.sent == 0
    finally:
        sender.close()


def test_send_to_many_peers_returns_the_count_without_making_an_int(codec):
    """Past 256 (Python's cached ints) the compiled fan-out still allocates
    nothing: a full round returns one int made with the Targets."""
    receiver, sender = _receiver(), _sender()
    try:
        targets = codec.Targets([(LOOPBACK, receiver.getsockname()[1])] * 300, socket.AF_INET)
        packet = codec.HeartbeatPacket(heartbeat(codec), 0)
        first, second = (packet.send_to(sender.fileno(), targets) for _ in range(2))
        assert first == second == 300
        if codec.__name__.endswith("._fast"):
            assert first is second
    finally:
        receiver.close()
        sender.close()


def test_send_to_a_bad_socket_fails_with_errno(codec):
    packet = codec.HeartbeatPacket(heartbeat(codec))
    targets = codec.Targets([(LOOPBACK, 9)], socket.AF_INET)
    assert packet.send_to(-1, targets) == -errno.EBADF
    assert (packet.sent, packet.errors) == (0, 1)


def test_an_ipv6_socket_reaches_ipv4_peers_as_mapped_addresses(codec):
    receiver = _receiver()
    try:
        sender = _sender("::", socket.AF_INET6)
    except OSError:
        receiver.close()
        pytest.skip("no IPv6 on this host")
    try:
        targets = codec.Targets([(LOOPBACK, receiver.getsockname()[1])], socket.AF_INET6)
        packet = codec.HeartbeatPacket(heartbeat(codec))
        assert packet.send_to(sender.fileno(), targets) == 1
        assert _drain(receiver) == [bytes(packet.buffer)]
    finally:
        receiver.close()
        sender.close()


@pytest.mark.parametrize("peer, family, message", [
    ((bytes(16), 45564), socket.AF_INET, "16 bytes cannot be reached"),
    ((b"\x01\x02\x03", 45564), socket.AF_INET6, "3 bytes cannot be reached"),
    ((LOOPBACK, 0), socket.AF_INET, "port 0 is out of range"),
    ((LOOPBACK, 65536), socket.AF_INET, "port 65536 is out of range"),
])
def test_targets_refuse_what_the_socket_cannot_reach(codec, peer, family, message):
    with pytest.raises(ValueError, match=message):
        codec.Targets([peer], family)


def test_targets_refuse_a_family_that_is_not_ip(codec):
    with pytest.raises(ValueError, match="neither AF_INET nor AF_INET6"):
        codec.Targets([], socket.AF_UNIX)


def test_a_peer_without_a_route_does_not_cost_the_others_their_heartbeat(codec):
    why = Lan.available()
    if why:
        pytest.skip(why)
    name = f"mcmfan{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        result = run_in_netns(name, _fan_out_with_an_unroutable_peer_inside, codec)
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
    assert result == (-errno.ENETUNREACH, 2, 1, [1, 1])


def _fan_out_with_an_unroutable_peer_inside(codec):
    receivers = [_receiver() for _ in range(2)]
    sender = _sender()
    try:
        peers = [(b"\x0a\x09\x09\x09", 45564), (LOOPBACK, receivers[0].getsockname()[1]),
                 (b"\x0a\x09\x09\x08", 45564), (LOOPBACK, receivers[1].getsockname()[1])]
        packet = codec.HeartbeatPacket(heartbeat(codec))
        result = packet.send_to(sender.fileno(), codec.Targets(peers, socket.AF_INET))
        return result, packet.sent, packet.errors, [len(_drain(r)) for r in receivers]
    finally:
        for sock in receivers + [sender]:
            sock.close()


# -- the sender of a slow-path datagram ---------------------------------------------

def test_source_names_the_sender_of_the_datagram_pump_returned(codec):
    receiver = _receiver("127.0.0.1")
    sender, elsewhere = _sender("127.0.0.2"), _sender("127.0.0.3")
    two = b"\x7f\x00\x00\x02"
    try:
        index = codec.MemberIndex(4)
        assert index.source() is None
        sender.sendto(heartbeat(codec, host=two), receiver.getsockname())
        buf = bytearray(L.RECV_BUFFER_LEN)
        assert index.pump(receiver.fileno(), buf, math.inf, sources=True) == \
            len(heartbeat(codec, host=two))
        assert index.source() == (two, sender.getsockname()[1])
        # Known now: the next copy from its own host stays inside pump,
        # which returns no sender...
        index.add(heartbeat(codec, host=two), -1, 0.0, L.KIND_MEMBER)
        sender.sendto(heartbeat(codec, alive=5, host=two), receiver.getsockname())
        assert index.pump(receiver.fileno(), buf, math.inf, sources=True) == -errno.EAGAIN
        assert index.source() is None
        assert index.hits == 1
        # ... and one from another address comes back, with that sender, unheard.
        elsewhere.sendto(heartbeat(codec, alive=6, host=two), receiver.getsockname())
        assert index.pump(receiver.fileno(), buf, math.inf, sources=True) == \
            len(heartbeat(codec, host=two))
        assert index.source() == (b"\x7f\x00\x00\x03", elsewhere.getsockname()[1])
        assert index.hits == 1
    finally:
        receiver.close()
        sender.close()
        elsewhere.close()


def test_without_sources_pump_keeps_no_sender(codec):
    """The multicast socket's pump asks for no addresses (the kernel copies
    none): the datagram still comes back, its sender does not."""
    receiver, sender = _receiver(), _sender()
    try:
        index = codec.MemberIndex(4)
        sender.sendto(heartbeat(codec), receiver.getsockname())
        buf = bytearray(L.RECV_BUFFER_LEN)
        assert index.pump(receiver.fileno(), buf, math.inf) == len(heartbeat(codec))
        assert bytes(buf[:len(heartbeat(codec))]) == heartbeat(codec)
        assert index.source() is None
    finally:
        receiver.close()
        sender.close()


def test_source_of_an_ipv6_sender_is_sixteen_bytes(codec):
    try:
        receiver = _receiver("::1", socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback on this host")
    sender = _sender("::1", socket.AF_INET6)
    try:
        index = codec.MemberIndex(4)
        sender.sendto(heartbeat(codec), receiver.getsockname()[:2])
        assert index.pump(receiver.fileno(), bytearray(L.RECV_BUFFER_LEN), math.inf,
                          sources=True) > 0
        assert index.source() == (bytes(15) + b"\x01", sender.getsockname()[1])
    finally:
        receiver.close()
        sender.close()


def test_source_is_none_for_a_socket_without_ip_addresses(codec):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    b.setblocking(False)
    try:
        index = codec.MemberIndex(4)
        a.send(heartbeat(codec))
        assert index.pump(b.fileno(), bytearray(L.RECV_BUFFER_LEN), math.inf,
                          sources=True) > 0
        assert index.source() is None
    finally:
        a.close()
        b.close()

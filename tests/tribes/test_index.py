"""MemberIndex: recognising known heartbeats and ordering expiry, both implementations."""

import errno
import math
import socket

import pytest

from mcastmember.tribes.wire import layout as L

from support import heartbeat


def _uid(i):
    return i.to_bytes(16, "big")


def test_lookup_recognises_a_packet_whatever_its_alive_time(codec):
    index = codec.MemberIndex(4)
    slot = index.add(heartbeat(codec, alive=1), -1, 10.0, L.KIND_MEMBER)
    assert slot == 0
    later = heartbeat(codec, alive=999)
    assert index.lookup(later, len(later), 11.5) == L.KIND_MEMBER
    assert index.heard(slot) == 11.5
    assert index.alive(slot) == 999
    assert index.hits == 1


def test_lookup_misses_any_other_difference(codec):
    index = codec.MemberIndex(4)
    index.add(heartbeat(codec, payload=b"a"), -1, 0.0, L.KIND_MEMBER)
    for other in (heartbeat(codec, payload=b"b"), heartbeat(codec, port=4002, payload=b"a"),
                  heartbeat(codec, uid=_uid(7), payload=b"a"), b"short", b""):
        assert index.lookup(other, len(other), 1.0) == -1
    assert index.hits == 0


def test_lookup_reads_only_n_bytes(codec):
    index = codec.MemberIndex(2)
    packet = heartbeat(codec)
    index.add(packet, -1, 0.0, L.KIND_LOCAL)
    buf = bytearray(packet) + bytearray(b"\xff" * 50)
    assert index.lookup(buf, len(packet), 1.0) == L.KIND_LOCAL
    assert index.lookup(buf, len(buf), 1.0) == -1


def test_slots_are_handed_out_lowest_first_and_reused_last_freed_first(codec):
    index = codec.MemberIndex(3)
    slots = [index.add(heartbeat(codec, uid=_uid(i)), -1, 0.0, L.KIND_MEMBER) for i in range(3)]
    assert slots == [0, 1, 2]
    assert index.add(heartbeat(codec, uid=_uid(9)), -1, 0.0, L.KIND_MEMBER) == -1   # full
    index.remove(1)
    index.remove(0)
    assert index.add(heartbeat(codec, uid=_uid(5)), -1, 0.0, L.KIND_MEMBER) == 0
    assert index.add(heartbeat(codec, uid=_uid(6)), -1, 0.0, L.KIND_MEMBER) == 1
    assert len(index) == 3


def test_expire_pops_the_least_recently_heard_first(codec):
    index = codec.MemberIndex(8)
    packets = [heartbeat(codec, uid=_uid(i)) for i in range(4)]
    for i, packet in enumerate(packets):
        index.add(packet, -1, float(i), L.KIND_MEMBER)
    index.lookup(packets[0], len(packets[0]), 10.0)    # slot 0 heard again, moves last
    assert index.oldest_heard() == 1.0
    assert index.expire(1.0) == ()                      # strictly before the deadline
    assert list(index.expire(3.5)) == [1, 2, 3]
    assert len(index) == 1
    assert list(index.expire(100.0)) == [0]
    assert index.oldest_heard() is None
    assert index.expire(200.0) == ()


def test_replace_rekeys_the_slot(codec):
    index = codec.MemberIndex(2)
    old, new = heartbeat(codec, payload=b"old"), heartbeat(codec, payload=b"new")
    slot = index.add(old, -1, 0.0, L.KIND_MEMBER)
    index.replace(slot, new, len(new), 5.0)
    assert index.lookup(old, len(old), 6.0) == -1
    assert index.lookup(new, len(new), 6.0) == L.KIND_MEMBER
    assert index.heard(slot) == 6.0
    with pytest.raises(KeyError):
        index.replace(1, new, len(new), 7.0)


def test_many_entries_survive_removals_in_any_order(codec):
    """Exercises the hash table's deletion (backward shift) under collisions."""
    index = codec.MemberIndex(300)
    packets = {i: heartbeat(codec, uid=_uid(i), port=i) for i in range(300)}
    slots = {i: index.add(p, -1, 0.0, L.KIND_MEMBER) for i, p in packets.items()}
    for i in range(0, 300, 3):
        index.remove(slots.pop(i))
    for i, packet in packets.items():
        expected = L.KIND_MEMBER if i in slots else -1
        assert index.lookup(packet, len(packet), 1.0) == expected, i
    assert len(index) == 200


def test_capacity_must_be_positive(codec):
    with pytest.raises(ValueError):
        codec.MemberIndex(0)


# -- pump and send: the socket-facing halves, on a local socketpair (no network) --

@pytest.fixture
def pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


def test_pump_refreshes_known_packets_and_stops_at_the_first_unknown(codec, pair):
    tx, rx = pair
    index = codec.MemberIndex(4)
    known = heartbeat(codec, alive=1)
    index.add(known, -1, 0.0, L.KIND_MEMBER)
    stranger = heartbeat(codec, uid=_uid(2))
    for packet in (heartbeat(codec, alive=7), heartbeat(codec, alive=8), stranger):
        tx.send(packet)
    buf = bytearray(65536)
    n = index.pump(rx.fileno(), buf, math.inf)
    assert n == len(stranger) and bytes(buf[:n]) == stranger
    assert index.hits == 2 and index.alive(0) == 8
    assert index.heard(0) > 0.0
    assert index.pump(rx.fileno(), buf, math.inf) == -errno.EAGAIN   # empty now


def test_pump_returns_at_the_deadline_and_after_its_budget(codec, pair):
    tx, rx = pair
    index = codec.MemberIndex(4)
    packet = heartbeat(codec)
    index.add(packet, -1, 0.0, L.KIND_MEMBER)
    for _ in range(5):
        tx.send(packet)
    buf = bytearray(65536)
    assert index.pump(rx.fileno(), buf, 0.0) == -errno.EAGAIN          # deadline passed
    assert index.hits == 1
    assert index.pump(rx.fileno(), buf, math.inf, 2) == -errno.EAGAIN  # budget of 2
    assert index.hits == 3
    assert index.pump(rx.fileno(), buf, math.inf) == -errno.EAGAIN
    assert index.hits == 5


def test_pump_skips_short_datagrams_and_reports_errors(codec, pair):
    tx, rx = pair
    index = codec.MemberIndex(1)
    tx.send(b"tiny")
    buf = bytearray(L.RECV_BUFFER_LEN)
    assert index.pump(rx.fileno(), buf, math.inf) == -errno.EAGAIN
    assert index.dropped() == {L.NOT_MEMBERSHIP: 1}
    assert index.pump(-1, buf, math.inf) == -errno.EBADF


def test_send_stamps_and_sends_one_datagram(codec, pair):
    tx, rx = pair
    packet = codec.HeartbeatPacket(heartbeat(codec, payload=b"x"))
    assert packet.send(tx.fileno()) == len(packet.buffer)
    got = rx.recv(65536)
    assert got == bytes(packet.buffer)
    assert codec.parse(got)[-1] == b"x"
    assert (packet.sent, packet.errors) == (1, 0)
    assert packet.send(-1) == -errno.EBADF
    assert (packet.sent, packet.errors) == (1, 1)


def test_pump_counts_and_skips_malformed_datagrams(codec, pair):
    tx, rx = pair
    index = codec.MemberIndex(2)
    good = heartbeat(codec)
    for junk in (b"tiny", good[:-1], b"FLT2002" + bytes(20), good[:8] + b"\x02\x00" + good[10:],
                 b"MCDOCTOR\x01M" + bytes(28)):
        tx.send(junk)
    tx.send(good)
    buf = bytearray(65536)
    assert index.pump(rx.fileno(), buf, math.inf) == len(good)     # only the good one
    assert index.dropped() == {L.NOT_MEMBERSHIP: 1, L.CHANNEL_FRAME: 1, L.TRUNCATED: 1,
                               L.BAD_VERSION: 1, L.DOCTOR_PROBE: 1}


def test_datagrams_after_a_stranger_are_handled_by_the_next_pump(codec, pair):
    """The compiled pump reads in batches: what it read behind a datagram it
    hands back must still be handled, even once the socket itself is empty."""
    tx, rx = pair
    index = codec.MemberIndex(4)
    known = heartbeat(codec)
    index.add(known, -1, 0.0, L.KIND_MEMBER)
    stranger = heartbeat(codec, uid=_uid(3))
    for packet in (known, stranger, known, b"junk", known):
        tx.send(packet)
    buf = bytearray(65536)
    assert index.pump(rx.fileno(), buf, math.inf) == len(stranger)
    assert index.hits == 1
    assert index.pump(rx.fileno(), buf, math.inf) == -errno.EAGAIN
    assert index.hits == 3 and index.dropped() == {L.NOT_MEMBERSHIP: 1}
    assert index.pending() == 0


def test_hits_are_counted_by_kind_by_lookup_and_by_pump(codec, pair):
    # The table tells our own heartbeats (KIND_LOCAL) from others' by these.
    tx, rx = pair
    index = codec.MemberIndex(4)
    member, own, other_domain = (heartbeat(codec, uid=_uid(i)) for i in (1, 2, 3))
    for packet, kind in ((member, L.KIND_MEMBER), (own, L.KIND_LOCAL),
                         (other_domain, L.KIND_FILTERED)):
        index.add(packet, -1, 0.0, kind)
    assert index.hits_by_kind() == {}
    for packet in (own, member, own):
        assert index.lookup(packet, len(packet), 1.0) >= 0
    assert index.hits_by_kind() == {L.KIND_MEMBER: 1, L.KIND_LOCAL: 2}
    for packet in (own, other_domain, member, own, own):
        tx.send(packet)
    buf = bytearray(65536)
    assert index.pump(rx.fileno(), buf, math.inf) == -errno.EAGAIN
    assert index.hits_by_kind() == {L.KIND_MEMBER: 2, L.KIND_LOCAL: 5, L.KIND_FILTERED: 1}
    assert index.hits == 8


def test_add_refuses_an_unknown_kind(codec):
    index = codec.MemberIndex(2)
    for kind in (L.KIND_FREE, 4, 255, -1):
        with pytest.raises(ValueError, match="kind"):
            index.add(heartbeat(codec), -1, 0.0, kind)
    assert len(index) == 0

"""Authentication on the hot path, against both implementations: the C
HMAC-SHA256 against hmac/hashlib, signing heartbeats, the index judging a
known member's trailer (fast path, replay, counts), the table's slow path
(forged shutdown, replayed captures, permissive marking, rotation)."""

import errno
import hashlib
import hmac
import math
import os
import socket

import pytest

from mcastmember.tribes.wire import layout as L
from mcastmember.tribes.wire import auth
from mcastmember.tribes.engine.table import MemberEvent, Membership

from support import heartbeat

try:
    from mcastmember.tribes.kernel import _fast
except ImportError:
    _fast = None

KEY1, KEY2 = bytes(range(32)), bytes(range(100, 132))
RING = auth.HeartbeatKeys([(1, KEY1)])
NOW_US = 1_800_000_000_000_000        # the tables' wall clock (µs)


def _uid(i):
    return i.to_bytes(16, "big")


def signed(packet, sequence, ring=RING):
    return packet + auth.trailer(packet, ring, sequence)


def hb(codec, uid=1, **fields):
    return heartbeat(codec, uid=_uid(uid), **fields)


def keyed_table(codec, mode=L.AUTH_ENFORCE, ring=RING, **settings):
    table = Membership(drop_time=3.0, codec=codec, wall_clock=lambda: NOW_US, **settings)
    table.set_keys(mode, ring)
    return table


def feed(table, datagram, now):
    buf = bytearray(L.RECV_BUFFER_LEN)
    buf[:len(datagram)] = datagram
    return table.receive(buf, len(datagram), now)


def kinds(events):
    return [(e.kind, e.reason) for e in events]


# -- the primitive -------------------------------------------------------------------

@pytest.fixture(params=[True, False], ids=["sha-extensions", "portable-c"])
def sha_path(request):
    """The compiled SHA-256 with the CPU's SHA extensions (where it has
    them) and in portable C: both are checked."""
    if _fast is None:
        pytest.skip("compiled extension not built")
    used = _fast._use_sha_extensions(request.param)
    if request.param and not used:
        pytest.skip("this CPU has no SHA extensions")
    yield used
    _fast._use_sha_extensions(True)


@pytest.mark.parametrize("key_len", [0, 1, 32, 63, 64])
def test_compiled_hmac_sha256_matches_hashlib(sha_path, key_len):
    key = bytes((i * 7 + key_len) & 0xFF for i in range(key_len))
    # Every length around the block and padding boundaries, and long ones.
    for n in list(range(0, 140)) + [183, 184, 1000, 65507]:
        message = os.urandom(n)
        assert _fast._hmac_sha256(key, message) == hmac.new(key, message, hashlib.sha256).digest()


def test_compiled_hmac_sha256_rfc4231_case_2(sha_path):
    tag = _fast._hmac_sha256(b"Jefe", b"what do ya want for nothing?")
    assert tag.hex() == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"


# -- signing ---------------------------------------------------------------------------

def test_a_keyed_heartbeat_carries_a_valid_trailer_with_growing_sequences(codec):
    packet = codec.HeartbeatPacket(hb(codec), origin_ns=0)
    plain = bytes(packet.buffer)
    packet.set_key(1, KEY1, after=NOW_US * 10)      # "after": the packet it replaces
    assert packet.key_id == 1 and packet.sequence == NOW_US * 10 + 1
    sequences = []
    for _ in range(3):
        packet.stamp_now()
        sent = bytes(packet.buffer)
        assert len(sent) == len(plain) + L.AUTH_TRAILER_LEN
        assert sent[:L.OFF_ALIVE] + sent[L.OFF_PORT:len(plain)] \
            == plain[:L.OFF_ALIVE] + plain[L.OFF_PORT:]
        assert auth.check(sent, RING) == (auth.AUTH_OK, 1, packet.sequence)
        sequences.append(packet.sequence)
    assert sequences == sorted(set(sequences)) and sequences[0] > NOW_US * 10 + 1
    packet.set_key(0)
    packet.stamp(7)
    assert bytes(packet.buffer) == plain[:L.OFF_ALIVE] + (7).to_bytes(8, "big") + plain[L.OFF_PORT:]


def test_set_key_refuses_bad_keys(codec):
    packet = codec.HeartbeatPacket(hb(codec))
    with pytest.raises(ValueError):
        packet.set_key(1, b"short")
    with pytest.raises(ValueError):
        packet.set_key(256, KEY1)
    with pytest.raises(ValueError, match="after its end marker"):
        codec.HeartbeatPacket(hb(codec) + b"x").set_key(1, KEY1)
    with pytest.raises(TypeError):          # a key id without its secret, as in both twins
        packet.set_key(1)
    assert packet.key_id == 0


def test_a_keyed_packet_sent_on_a_socket_is_what_it_signed(codec):
    tx, rx = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    packet = codec.HeartbeatPacket(hb(codec))
    packet.set_key(1, KEY1)
    assert packet.send(tx.fileno()) == len(hb(codec)) + L.AUTH_TRAILER_LEN
    sent = rx.recv(65536)
    assert sent == bytes(packet.buffer)
    assert auth.check(sent, RING) == (auth.AUTH_OK, 1, packet.sequence)
    tx.close()
    rx.close()


# -- the index judges known members ------------------------------------------------------

def _index_with_member(codec, mode, authenticated=True, sequence=100):
    index = codec.MemberIndex(4)
    index.set_keys(mode, {1: KEY1})
    slot = index.add(hb(codec), -1, 0.0, L.KIND_MEMBER)
    index.set_auth(slot, authenticated, sequence)
    return index, slot


def _lookup(index, datagram, now=1.0):
    return index.lookup(datagram, len(datagram), now)


def test_enforce_index_admits_fresh_and_drops_the_rest_by_reason(codec):
    index, slot = _index_with_member(codec, L.AUTH_ENFORCE)
    packet = hb(codec, alive=2)
    assert _lookup(index, signed(packet, 101)) == L.KIND_MEMBER
    assert index.sequence(slot) == 101 and index.hits == 1
    forged = bytearray(signed(packet, 500))
    forged[-1] ^= 1
    other = auth.HeartbeatKeys([(2, KEY2)])
    for datagram in (signed(packet, 101), signed(packet, 50), packet, bytes(forged),
                     signed(packet, 600, other), packet + b"\0" * L.AUTH_TRAILER_LEN):
        assert _lookup(index, datagram) == L.INDEX_DROPPED
    assert index.auth_failures() == {L.AUTH_NO_TRAILER: 1, L.AUTH_BAD_TRAILER: 1,
                                     L.AUTH_UNKNOWN_KEY: 1, L.AUTH_BAD_MAC: 1, L.AUTH_REPLAY: 2}
    assert index.sequence(slot) == 101 and index.hits == 1 and index.heard(slot) == 1.0


def test_permissive_index_admits_unauthenticated_and_hands_a_change_of_status_back(codec):
    index, slot = _index_with_member(codec, L.AUTH_PERMISSIVE, authenticated=False, sequence=0)
    packet = hb(codec, alive=2)
    assert _lookup(index, packet) == L.KIND_MEMBER                # still unauthenticated
    assert index.auth_failures() == {L.AUTH_NO_TRAILER: 1}
    assert _lookup(index, signed(packet, 5)) == -1                # now authentic: slow path
    index.set_auth(slot, True, 5)
    assert _lookup(index, signed(packet, 6)) == L.KIND_MEMBER
    assert _lookup(index, signed(packet, 6)) == L.INDEX_DROPPED   # a replay, in any mode
    assert _lookup(index, packet) == -1                           # unauthenticated again


def test_off_index_ignores_trailers_but_still_recognises_keyed_heartbeats(codec):
    index = codec.MemberIndex(4)
    index.add(hb(codec), -1, 0.0, L.KIND_MEMBER)
    assert _lookup(index, signed(hb(codec, alive=9), 1)) == L.KIND_MEMBER
    assert _lookup(index, hb(codec, alive=9) + b"\0" * 5) == -1    # other bytes are compared
    assert index.auth_failures() == {}


def test_pump_judges_keyed_heartbeats_without_returning(codec):
    index, slot = _index_with_member(codec, L.AUTH_ENFORCE)
    tx, rx = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    rx.setblocking(False)
    packet = hb(codec, alive=2)
    for datagram in (signed(packet, 101), signed(packet, 101), packet, signed(packet, 102)):
        tx.send(datagram)
    buf = bytearray(L.RECV_BUFFER_LEN)
    assert index.pump(rx.fileno(), buf, math.inf) == -errno.EAGAIN
    assert index.hits == 2 and index.sequence(slot) == 102
    assert index.auth_failures() == {L.AUTH_NO_TRAILER: 1, L.AUTH_REPLAY: 1}
    tx.close()
    rx.close()


def test_set_keys_refuses_bad_input(codec):
    index = codec.MemberIndex(4)
    for mode, keys in ((L.AUTH_ENFORCE, None), (L.AUTH_ENFORCE, {0: KEY1}),
                       (L.AUTH_ENFORCE, {1: b"short"}), (7, {1: KEY1})):
        with pytest.raises(ValueError):
            index.set_keys(mode, keys)


# -- the table: forged, replayed and unkeyed heartbeats --------------------------------

def test_forged_shutdown_changes_nothing_under_enforce(codec):
    table = keyed_table(codec)
    assert kinds(feed(table, signed(hb(codec), NOW_US), 0.0)) == [("added", None)]
    shutdown = hb(codec, command=L.SHUTDOWN_COMMAND)
    forged = signed(shutdown, NOW_US + 1, auth.HeartbeatKeys([(1, KEY2)]))    # a wrong key
    for t, datagram in enumerate((shutdown, forged, shutdown + b"junk"), 1):
        assert feed(table, datagram, 0.1 * t) == ()
    assert len(table) == 1
    assert table.auth_failures() == {"no_trailer": 1, "bad_mac": 1, "bad_trailer": 1}
    # The member's own, signed shutdown removes it.
    assert kinds(feed(table, signed(shutdown, NOW_US + 2), 1.0)) == [("removed", "shutdown")]


def test_replayed_captures_change_nothing(codec):
    table = keyed_table(codec)
    first, later = signed(hb(codec, alive=1), NOW_US), signed(hb(codec, alive=2), NOW_US + 10)
    goodbye = signed(hb(codec, command=L.SHUTDOWN_COMMAND), NOW_US + 20)
    feed(table, first, 0.0)
    assert feed(table, later, 0.5) == ()
    assert feed(table, first, 0.6) == ()                     # an older heartbeat, replayed
    assert kinds(feed(table, goodbye, 1.0)) == [("removed", "shutdown")]
    for t, capture in enumerate((first, later, goodbye), 2):  # after it left
        assert feed(table, capture, float(t)) == ()
    assert len(table) == 0 and table.auth_failures() == {"replay": 4}
    # After expiry too: the sequence the fast path accepted is remembered.
    feed(table, signed(hb(codec, uid=2, alive=1), NOW_US), 10.0)
    feed(table, signed(hb(codec, uid=2, alive=2), NOW_US + 50), 10.5)
    assert kinds(table.expire(20.0)) == [("removed", "expired")]
    assert feed(table, signed(hb(codec, uid=2, alive=1), NOW_US + 40), 20.1) == ()
    assert len(table) == 0


def test_a_first_packet_older_than_the_window_is_refused(codec):
    table = keyed_table(codec)
    stale = NOW_US - int(60.5e6)
    assert feed(table, signed(hb(codec), stale), 0.0) == ()
    assert table.auth_failures() == {"skew": 1}
    assert kinds(feed(table, signed(hb(codec), NOW_US - int(59e6)), 0.1)) == [("added", None)]


def test_a_sender_whose_clock_is_off_by_more_than_the_window_is_refused_as_skew(codec):
    # Either way, in both modes: a capture and a clock 120 s behind look
    # the same; a clock far ahead would plant a sequence refusing its sender.
    for mode in (L.AUTH_ENFORCE, L.AUTH_PERMISSIVE):
        table = keyed_table(codec, mode)
        for t, offset in enumerate((-120e6, 120e6, 86_400e6)):
            assert feed(table, signed(hb(codec, uid=t + 1), NOW_US + int(offset)), t) == ()
        assert (len(table), table.auth_failures()) == (0, {"skew": 3})


def test_a_fixed_identity_whose_clock_was_far_ahead_is_admitted_again(codec):
    # Its clock jumps a day ahead while it is a member (the fast path takes
    # the newer sequences), it leaves, the clock is put right and it comes
    # back with the same unique id: refused as a replay while any capture of
    # it could still be fresh, admitted again two windows after it was last
    # accepted (it used to be refused for as long as the table remembered it).
    wall = [NOW_US]
    table = Membership(drop_time=3.0, codec=codec, wall_clock=lambda: wall[0])
    table.set_keys(L.AUTH_ENFORCE, RING)
    day = 86_400_000_000
    assert kinds(feed(table, signed(hb(codec, alive=1), NOW_US), 0.0)) == [("added", None)]
    assert feed(table, signed(hb(codec, alive=2), NOW_US + day), 0.5) == ()
    goodbye = signed(hb(codec, command=L.SHUTDOWN_COMMAND), NOW_US + day + 1)
    assert kinds(feed(table, goodbye, 1.0)) == [("removed", "shutdown")]
    back = NOW_US + 10_000_000                               # restarted, clock right
    wall[0] = back
    assert feed(table, signed(hb(codec, alive=1), back), 10.0) == ()
    assert feed(table, goodbye, 10.1) == ()                  # a capture: refused
    window = int(60e6)
    wall[0] = NOW_US + 2 * window                            # the window after the last
    assert feed(table, signed(hb(codec, alive=1), wall[0]), 120.0) == ()
    wall[0] = NOW_US + 2 * window + 1_000_000
    assert kinds(feed(table, signed(hb(codec, alive=1), wall[0]), 121.0)) == [("added", None)]
    assert table.auth_failures() == {"replay": 3}


def test_reordered_heartbeats_do_not_flap(codec):
    table = keyed_table(codec)
    feed(table, signed(hb(codec, alive=1), NOW_US), 0.0)
    assert feed(table, signed(hb(codec, alive=3), NOW_US + 3), 1.0) == ()
    assert feed(table, signed(hb(codec, alive=2), NOW_US + 2), 1.0) == ()   # late: dropped
    assert table.expire(3.5) == () and len(table) == 1


def test_enforce_does_not_list_an_unkeyed_member_permissive_marks_it(codec):
    enforce, permissive = keyed_table(codec), keyed_table(codec, L.AUTH_PERMISSIVE)
    assert feed(enforce, hb(codec), 0.0) == ()
    assert enforce.auth_failures() == {"no_trailer": 1}
    (added,) = feed(permissive, hb(codec), 0.0)
    assert added.kind == "added" and added.member.authenticated is False
    assert feed(permissive, hb(codec, alive=2), 0.5) == ()          # fast path, counted
    (keyed,) = feed(permissive, signed(hb(codec, uid=2), NOW_US), 0.5)
    assert keyed.member.authenticated is True
    # The unkeyed member starts signing: one update, then the fast path.
    (update,) = feed(permissive, signed(hb(codec, alive=3), NOW_US), 1.0)
    assert update.kind == "updated" and update.member.authenticated is True
    assert feed(permissive, signed(hb(codec, alive=4), NOW_US + 1), 1.5) == ()
    assert [m.authenticated for m in permissive.members()] == [True, True]
    assert permissive.stats()["fast_path"] == 2
    assert permissive.auth_failures() == {"no_trailer": 2}


def test_rotation_on_a_running_table_removes_no_member(codec):
    old, new = (1, KEY1), (2, KEY2)
    table = keyed_table(codec)
    t, seq = 0.0, NOW_US
    events = []

    def beat(ring, uid):
        nonlocal seq
        seq += 1
        events.extend(feed(table, signed(hb(codec, uid=uid, alive=seq - NOW_US), seq, ring), t))

    for ring_here, signing in (([old], [old]), ([old, new], [old]), ([new, old], [new]),
                               ([new], [new])):
        table.set_keys(L.AUTH_ENFORCE, auth.HeartbeatKeys(ring_here))
        for _ in range(4):
            beat(auth.HeartbeatKeys(signing), 1)
            beat(auth.HeartbeatKeys(signing), 2)
            t += 0.5
            events.extend(table.expire(t))
    assert kinds(events) == [("added", None), ("added", None)]
    assert table.auth_failures() == {}


@pytest.mark.skipif(_fast is None, reason="compiled extension not built")
def test_compiled_signing_and_checking_allocate_nothing():
    import tracemalloc
    packet = _fast.HeartbeatPacket(hb(_fast))
    packet.set_key(1, KEY1)
    index, slot = _index_with_member(_fast, L.AUTH_ENFORCE, sequence=0)
    tx, rx = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    rx.setblocking(False)
    tx.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    fd, buf = tx.fileno(), bytearray(L.RECV_BUFFER_LEN)
    stamp, send, pump = packet.stamp_now, packet.send, index.pump
    for _ in range(100):
        send(fd)                          # signed heartbeats of the member, queued
    def peak(calls, fn, *args):
        """Python heap held at most while calling ``fn`` ``calls`` times."""
        tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(calls):
            fn(*args)
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return top - base

    def nothing(*args):
        return -errno.EAGAIN

    loop_itself = peak(1000, nothing)
    assert peak(1000, stamp) <= loop_itself
    assert peak(1, pump, rx.fileno(), buf, math.inf) <= peak(1, nothing, rx.fileno(), buf, 0.0)
    assert index.hits == 100 and index.auth_failures() == {}
    tx.close()
    rx.close()


def test_permissive_never_lets_an_unkeyed_packet_touch_a_keyed_member(codec):
    # Unkeyed strangers are admitted and marked, but a forged copy
    # with no trailer in a keyed member's name is refused, whatever it says.
    table = keyed_table(codec, L.AUTH_PERMISSIVE, domain=b"d")
    (added,) = feed(table, signed(hb(codec, payload=b"real", domain=b"d"), NOW_US), 0.0)
    assert added.member.authenticated is True
    forged = [hb(codec, payload=b"forged", domain=b"d"),                 # a payload change
              hb(codec, payload=b"real", domain=b"d", alive=7),          # a refresh
              hb(codec, payload=b"real", domain=b"other"),               # a domain move
              hb(codec, payload=b"real", domain=b"d", command=L.SHUTDOWN_COMMAND)]
    for t, datagram in enumerate(forged, 1):
        assert feed(table, datagram, 0.1 * t) == ()
    (member,) = table.members()
    assert (member.payload, member.authenticated, member.last_heard) == (b"real", True, 0.0)
    # A suspect too: no unkeyed packet brings it back or removes it.
    assert kinds(table.expire(3.5, suspect=True)) == [("suspect", None)]
    for t, datagram in enumerate(forged, 40):
        assert feed(table, datagram, 0.1 * t) == ()
    assert table.is_suspect(member.identity)
    stats = table.stats()
    assert (stats["refused_unauthenticated"], stats["auth.no_trailer"]) == (8, 8)
    assert (stats["updated"], stats["removed.shutdown"], stats["removed.filtered"]) == (0, 0, 0)
    # Strangers without keys are still admitted, marked.
    (stranger,) = feed(table, hb(codec, uid=2, domain=b"d"), 5.0)
    assert (stranger.kind, stranger.member.authenticated) == ("added", False)
    # The member's own signed heartbeat brings it back.
    (back,) = feed(table, signed(hb(codec, payload=b"real2", domain=b"d"), NOW_US + 1), 5.1)
    assert (back.kind, back.member.authenticated) == ("updated", True)

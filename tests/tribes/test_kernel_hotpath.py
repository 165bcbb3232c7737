"""Hot-path defects once found, each pinned by a test, against both
implementations: the heartbeat packet owns its bytes; the pump's batch never
outlives a clear() or its socket; a shut-down socket ends the pump; the index
checks what it stores and refuses changes while pump runs; one clock; the
twins agree on the edge cases; the table hash is seeded per process."""

import contextlib
import errno
import math
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from mcastmember.tribes.wire import layout as L
from mcastmember.tribes.wire.errors import MalformedPacket
from mcastmember.tribes.engine.table import Membership

from support import heartbeat, wait_until


def _uid(i):
    return i.to_bytes(16, "big")


def _unix_pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    b.setblocking(False)
    return a, b


def _udp_pair():
    """Unicast UDP on 127.0.0.1: nothing leaves the host."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.setblocking(False)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.connect(rx.getsockname())
    return tx, rx


@pytest.fixture(params=[_unix_pair, _udp_pair], ids=["unix", "udp"])
def pair(request):
    tx, rx = request.param()
    yield tx, rx
    tx.close()
    rx.close()


def _buf():
    return bytearray(L.RECV_BUFFER_LEN)


# -- 1. HeartbeatPacket owns its bytes ---------------------------------------------

def test_heartbeat_buffer_is_a_read_only_view_that_cannot_be_resized(codec, pair):
    tx, rx = pair
    template = heartbeat(codec, payload=b"x" * 40)
    packet = codec.HeartbeatPacket(template, origin_ns=0)
    view = packet.buffer
    assert view.readonly and packet.buffer is view
    with pytest.raises(TypeError):
        view[0] = 0
    for resize in (lambda: view.clear(), lambda: view.extend(b"more")):
        with pytest.raises(AttributeError):
            resize()
    assert packet.send(tx.fileno()) == len(template)
    sent = rx.recv(65536)
    assert sent[:14] + sent[22:] == template[:14] + template[22:]


def test_heartbeat_packet_is_whole_from_the_start_and_stays_so(codec, pair):
    tx, rx = pair
    with pytest.raises(TypeError):       # no half-made packet to stamp or send
        codec.HeartbeatPacket.__new__(codec.HeartbeatPacket)
    template = heartbeat(codec, payload=b"one")
    packet = codec.HeartbeatPacket(template, origin_ns=0, alive_cap=5)
    packet.__init__(heartbeat(codec, payload=b"other" * 50), origin_ns=9)   # changes nothing
    assert (packet.origin_ns, packet.alive_cap) == (0, 5)
    assert packet.send(tx.fileno()) == len(template)
    sent = rx.recv(65536)
    assert sent[:14] + sent[22:] == template[:14] + template[22:]
    assert bytes(packet.buffer) == sent


# -- 2. the pump's batch never outlives clear() or its socket ---------------------------

def _send_all(tx, packets):
    for packet in packets:
        tx.send(packet)


def test_restart_does_not_replay_datagrams_read_before_the_stop(codec):
    table = Membership(codec=codec)
    old = [heartbeat(codec, uid=_uid(i)) for i in (1, 2, 3)]
    tx, rx = _unix_pair()
    _send_all(tx, old)
    buf = _buf()
    n = table.pump(rx.fileno(), buf, math.inf)
    assert [e.kind for e in table.receive(buf, n, 1.0)] == ["added"]
    table.clear()                        # the service stops ...
    tx.close()
    rx.close()
    tx, rx = _unix_pair()                # ... and starts again (often on the same fd number)
    fresh = heartbeat(codec, uid=_uid(9))
    tx.send(fresh)
    n = table.pump(rx.fileno(), buf, math.inf)
    assert bytes(buf[:n]) == fresh
    assert table.pump(rx.fileno(), buf, math.inf) == -errno.EAGAIN
    assert table.pending() == 0
    tx.close()
    rx.close()


@pytest.mark.parametrize("reuse_number", [False, True], ids=["other-fd", "same-fd-number"])
def test_pump_on_another_socket_drops_the_batch_of_the_first(codec, reuse_number):
    index = codec.MemberIndex(4)
    tx1, rx1 = _unix_pair()
    _send_all(tx1, [heartbeat(codec, uid=_uid(i)) for i in (1, 2, 3)])
    buf = _buf()
    assert index.pump(rx1.fileno(), buf, math.inf) > 0
    tx2, rx2 = _unix_pair()
    if reuse_number:                     # the new socket under the old number
        first_fd = rx1.fileno()
        rx1.close()
        os.dup2(rx2.fileno(), first_fd)
        rx2.close()
        rx2 = socket.socket(fileno=first_fd)
    fresh = heartbeat(codec, uid=_uid(9))
    tx2.send(fresh)
    n = index.pump(rx2.fileno(), buf, math.inf)
    assert bytes(buf[:n]) == fresh
    assert index.pump(rx2.fileno(), buf, math.inf) == -errno.EAGAIN
    for sock in (tx1, rx1, tx2, rx2):
        sock.close()


# -- 3. a socket shut down for reading ends the pump ------------------------------------

def test_pump_ends_on_a_shut_down_socket_without_phantom_drops(codec, pair):
    tx, rx = pair
    index = codec.MemberIndex(4)
    known, stranger = heartbeat(codec), heartbeat(codec, uid=_uid(2))
    index.add(known, -1, 0.0, L.KIND_MEMBER)
    _send_all(tx, [known, stranger])
    rx.setblocking(True)     # as the threaded service's (a non-blocking one says EAGAIN)
    with contextlib.suppress(OSError):
        rx.shutdown(socket.SHUT_RDWR)    # ENOTCONN for unconnected UDP, yet it is shut down
    buf = _buf()
    # What was queued before the shutdown is still handled ...
    assert index.pump(rx.fileno(), buf, math.inf, 1000) == len(stranger)
    # ... then the pump ends at once, every time, counting nothing.
    for _ in range(3):
        assert index.pump(rx.fileno(), buf, math.inf, 1000) == -errno.ESHUTDOWN
    assert index.hits == 1
    assert index.dropped() == {}


def test_a_genuine_empty_datagram_is_counted_once(codec, pair):
    tx, rx = pair
    index = codec.MemberIndex(4)
    stranger = heartbeat(codec, uid=_uid(2))
    _send_all(tx, [b"", stranger])
    buf = _buf()
    assert index.pump(rx.fileno(), buf, math.inf) == len(stranger)
    assert index.pump(rx.fileno(), buf, math.inf) == -errno.EAGAIN
    assert index.dropped() == {L.NOT_MEMBERSHIP: 1}


# -- 6. the index checks what it stores; no changes while pump runs ---------------------

def test_add_and_replace_refuse_lengths_that_are_not_one_packet(codec):
    index = codec.MemberIndex(4)
    packet = heartbeat(codec)
    for n in (0, 10, L.OFF_PORT - 1, len(packet) - 1):
        with pytest.raises(MalformedPacket):
            index.add(packet, n, 0.0, L.KIND_MEMBER)
    with pytest.raises(ValueError, match="past the end"):
        index.add(packet, len(packet) + 1, 0.0, L.KIND_MEMBER)
    with pytest.raises(MalformedPacket):
        index.add(b"short", -1, 0.0, L.KIND_MEMBER)
    assert len(index) == 0
    slot = index.add(packet, -1, 0.0, L.KIND_MEMBER)
    for bad, n in ((b"short", 5), (packet, 10), (packet, len(packet) + 1)):
        with pytest.raises(ValueError):
            index.replace(slot, bad, n, 1.0)
    # the slot is untouched: still found, and removable (no endless delete)
    assert index.lookup(packet, len(packet), 2.0) == L.KIND_MEMBER
    index.remove(slot)
    assert len(index) == 0 and index.lookup(packet, len(packet), 3.0) == -1


@contextlib.contextmanager
def _pumping(owner, last):
    """Run ``owner.pump`` on another thread, blocked in an empty socket, for
    the body of the with; then send ``last`` to end it. Yields a list that
    holds pump's result and the buffer afterwards."""
    tx, rx = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)   # rx blocks
    buf, results = _buf(), []
    thread = threading.Thread(target=lambda: results.append(owner.pump(rx.fileno(), buf,
                                                                       math.inf)))
    thread.start()
    try:
        wait_until(lambda: getattr(owner, "busy", None) or getattr(owner, "pumping", None))
        yield results, buf, rx
    finally:
        for datagram in last:
            tx.send(datagram)
        thread.join()
        tx.close()
        rx.close()


def test_index_refuses_changes_while_pump_waits_on_another_thread(codec):
    index = codec.MemberIndex(4)
    packet = heartbeat(codec)
    slot = index.add(packet, -1, 0.0, L.KIND_MEMBER)
    stranger = heartbeat(codec, uid=_uid(2))
    with _pumping(index, [stranger]) as (results, _, rx):
        for change in (lambda: index.add(heartbeat(codec, uid=_uid(5)), -1, 0.0, L.KIND_MEMBER),
                       lambda: index.replace(slot, packet, -1, 1.0),
                       lambda: index.remove(slot),
                       lambda: index.lookup(packet, len(packet), 1.0),
                       lambda: index.expire(100.0),
                       lambda: index.clear(),
                       lambda: index.pump(rx.fileno(), _buf(), math.inf)):
            with pytest.raises(RuntimeError, match="in use by pump"):
                change()
    assert results == [len(stranger)] and not index.busy
    assert len(index) == 1


# -- 4. set_domain changes what filter_domain keeps, fast path included ------------------

def _events(events):
    return [(e.kind, e.reason, e.member.unique_id) for e in events]


def test_set_domain_judges_again_senders_already_on_the_fast_path(codec):
    table = Membership(domain=b"a", codec=codec)
    in_a = heartbeat(codec, uid=_uid(1), domain=b"a")
    in_b = heartbeat(codec, uid=_uid(2), domain=b"b")
    assert _events(table.receive(in_a, -1, 1.0)) == [("added", None, _uid(1))]
    assert table.receive(in_b, -1, 1.0) == ()
    assert table.receive(in_b, -1, 1.1) == ()      # recognised unparsed: filtered
    assert _events(table.set_domain(b"b")) == [("removed", "filtered", _uid(1))]
    assert _events(table.receive(in_b, -1, 1.2)) == [("added", None, _uid(2))]
    assert table.receive(in_a, -1, 1.3) == ()      # now a's member is the one filtered
    assert [m.unique_id for m in table.members()] == [_uid(2)]
    assert table.set_domain(None) == ()
    assert _events(table.receive(in_a, -1, 1.4)) == [("added", None, _uid(1))]


def test_set_domain_while_pump_runs_takes_effect_when_it_returns(codec):
    table = Membership(domain=b"a", codec=codec)
    table.receive(heartbeat(codec, uid=_uid(1), domain=b"a"), -1, 1.0)
    with _pumping(table, [b"junk", heartbeat(codec, uid=_uid(3), domain=b"b")]) as (results,
                                                                                  buf, _):
        assert table.set_domain(b"b") == ()        # the index is not to be touched now
    assert _events(table.receive(buf, results[0], 2.0)) == [("removed", "filtered", _uid(1)),
                                                           ("added", None, _uid(3))]
    assert table.expire(2.0) == ()


def test_set_domain_interrupted_by_pump_finishes_later_without_loss(codec):
    """pump may start on another thread while set_domain works through the
    index: what it could not do yet (RuntimeError from the index) is done,
    with its events, at the next expire; nothing is half done."""
    import types

    class Index(codec.MemberIndex):
        calls, fail_at = 0, None     # the remove() call that meets a running pump

        def remove(self, slot):
            self.calls += 1
            if self.calls == self.fail_at:
                raise RuntimeError("MemberIndex is in use by pump() (on another thread)")
            return super().remove(slot)

    fake = types.SimpleNamespace(MemberIndex=Index, check=codec.check, parse=codec.parse,
                                 identity=codec.identity)
    table = Membership(domain=b"a", codec=fake)
    for i in (1, 2):
        table.receive(heartbeat(codec, uid=_uid(i), domain=b"a"), -1, 1.0)
    table._index.fail_at = table._index.calls + 2      # the second removal
    first = table.set_domain(b"b")
    assert len(first) == 1
    second = table.expire(1.5)
    assert sorted(_events(first + second)) == [("removed", "filtered", _uid(1)),
                                               ("removed", "filtered", _uid(2))]
    assert len(table) == 0 and table.expire(1.6) == ()


# -- 5. one clock: the C code reads time.monotonic()'s ------------------------------------

def test_heard_times_and_origins_come_from_time_monotonic(codec, pair):
    tx, rx = pair
    index = codec.MemberIndex(2)
    known = heartbeat(codec)
    index.add(known, -1, 0.0, L.KIND_MEMBER)
    tx.send(known)
    before = time.monotonic()
    assert index.pump(rx.fileno(), _buf(), math.inf) == -errno.EAGAIN
    after = time.monotonic()
    assert before <= index.heard(0) <= after
    before_ns = time.monotonic_ns()
    packet = codec.HeartbeatPacket(known)          # origin: now, on its own clock
    packet.stamp_now()
    after_ns = time.monotonic_ns()
    assert before_ns <= packet.origin_ns <= after_ns
    assert 0 <= packet.alive_ms <= (after_ns - before_ns) // 1_000_000


# -- 7. the twins agree on the edge cases ------------------------------------------------

def test_alive_time_is_zero_while_the_origin_lies_in_the_future(codec):
    future = time.monotonic_ns() + 10**10 + 500_000     # 10.0005 s ahead
    packet = codec.HeartbeatPacket(heartbeat(codec), origin_ns=future)
    packet.stamp_now()
    assert packet.alive_ms == 0
    below = codec.HeartbeatPacket(heartbeat(codec), origin_ns=future, below_zero=True)
    below.stamp_now()
    assert below.alive_ms == -1                          # still below zero


def test_expire_refuses_nan(codec):
    index = codec.MemberIndex(2)
    index.add(heartbeat(codec), -1, 1.0, L.KIND_MEMBER)
    with pytest.raises(ValueError, match="NaN"):
        index.expire(math.nan)
    assert len(index) == 1
    table = Membership(codec=codec)
    with pytest.raises(ValueError, match="NaN"):
        table.expire(math.nan)


def test_send_to_something_not_a_socket_fails_with_enotsock(codec):
    packet = codec.HeartbeatPacket(heartbeat(codec))
    read_end, write_end = os.pipe()
    try:
        assert packet.send(write_end) == -errno.ENOTSOCK
        assert (packet.sent, packet.errors) == (0, 1)
        assert packet.send(-1) == -errno.EBADF
    finally:
        os.close(read_end)
        os.close(write_end)


@pytest.mark.both_codecs       # names the twin itself: the same test in either CI pass
def test_an_oserror_without_errno_counts_as_eio(monkeypatch):
    """The twin returns -errno; an OSError raised without one (the checkers'
    ``int | None``) is -EIO, not a TypeError from negating None."""
    from mcastmember.tribes.kernel import _fast_py

    def write(fd, data):
        raise OSError("no errno")

    a, b = _unix_pair()
    with a, b:
        packet = _fast_py.HeartbeatPacket(heartbeat(_fast_py))
        monkeypatch.setattr(_fast_py.os, "write", write)
        assert packet.send(a.fileno()) == -errno.EIO
        assert (packet.sent, packet.errors) == (0, 1)


def test_pump_refuses_a_buffer_some_datagram_would_not_fit(codec, pair):
    tx, rx = pair
    index = codec.MemberIndex(2)
    tx.send(heartbeat(codec, payload=bytes(200)))
    with pytest.raises(ValueError, match="at least 65536 bytes"):
        index.pump(rx.fileno(), bytearray(100), math.inf)
    buf = _buf()
    assert index.pump(rx.fileno(), buf, math.inf) == len(heartbeat(codec, payload=bytes(200)))


# -- 8. the table hash is seeded per process -----------------------------------------------

def test_table_hash_differs_between_processes(codec):
    code = (f"import sys; from mcastmember.tribes.kernel import {codec.__name__.rsplit('.', 1)[1]} as c; "
            "sys.path.insert(0, sys.argv[1]); from support import heartbeat; "
            "print(c._key_hash(heartbeat(c)))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tests/
    hashes = {subprocess.run([sys.executable, "-c", code, here], env=env, check=True,
                             capture_output=True, text=True, cwd="/").stdout
              for _ in range(3)}
    assert len(hashes) == 3

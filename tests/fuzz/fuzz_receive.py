#!/usr/bin/env python3
"""Fuzz the receive path of both implementations side by side.

    python tests/fuzz/fuzz_receive.py --count 1000000 [--seed 1]

Feeds random bytes, mutated packets and well-formed packets with random
fields to a Membership table per implementation and checks, for every
datagram: no exception escapes, both give the same verdict, the same fields
and the same events; the table stays within its bound; memory stays bounded.
A failing input is written to tests/fuzz/corpus/ (replayed by the normal suite,
test_fuzz_receive.py) and the run stops with exit status 1.

Then (``--pump-count``, default a tenth of ``--count``) the same datagrams go
through real sockets (unicast UDP on 127.0.0.1) into ``Membership.pump``,
in bursts, with random budgets, ``clear()`` while a batch is pending,
sockets swapped under the pump and shut down under it: both give the same
events and drop counts.
And (``--packet-count``, default a hundredth) ``HeartbeatPacket`` is made
from well-formed and broken templates, stamped and sent: both send the same
bytes and refuse the same templates.
Last (``--keyed-count``, default a tenth) the same with authentication:
tables in enforce and permissive mode, datagrams with trailers (valid,
replayed, wrongly keyed, forged, cut, oversized, mutated), through
``receive`` and through pump; packets signed: identical verdicts, events
(``authenticated`` included) and counters by reason.
"""

import argparse
import errno
import gc
import math
import pathlib
import random
import socket
import sys
import time

from mcastmember.tribes.kernel import _fast_py

from mcastmember.tribes.wire import layout as L

from mcastmember.tribes.wire import auth
from mcastmember.tribes.wire.errors import MalformedPacket
from mcastmember.tribes.engine.table import Membership

try:
    from mcastmember.tribes.kernel import _fast
except ImportError:
    _fast = None

CORPUS = pathlib.Path(__file__).parent / "corpus"
RING = auth.HeartbeatKeys([(1, bytes(range(32))), (2, bytes(range(32, 64)))])
WRONG = auth.HeartbeatKeys([(3, bytes(range(32)))])        # a key id the tables do not hold
WALL_US = 1_800_000_000_000_000     # the keyed tables' wall clock
INTERESTING = [0, 1, 4, 16, 0x7F, 0x80, 0xFF, -1, 2**31 - 1, -2**31, 65507, 77]


def valid_packet(rng, population):
    """A well-formed packet of one of ``population`` members (so that repeats,
    updates and shutdowns of known members happen), with random extras."""
    who = rng.randrange(population)
    host = bytes([127, 0, 0, 1]) if who % 3 else bytes(15) + b"\x01"
    command = rng.choice([b"", b"", b"", L.SHUTDOWN_COMMAND, rng.randbytes(rng.randrange(6))])
    domain = rng.choice([b"", b"dom", rng.randbytes(rng.randrange(10))])
    payload = rng.choice([b"", b"p", rng.randbytes(rng.randrange(40))])
    return _fast_py.encode(rng.randrange(2**40), 4000 + who, -1, -1, host, command, domain,
                           who.to_bytes(16, "big"), payload)


def mutate(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not data:
            break
        at = rng.randrange(len(data))
        action = rng.randrange(6)
        if action == 0:
            data[at] ^= 1 << rng.randrange(8)
        elif action == 1:
            data[at] = rng.randrange(256)
        elif action == 2:
            del data[at:at + rng.randint(1, 16)]
        elif action == 3:
            data[at:at] = rng.randbytes(rng.randint(1, 16))
        elif action == 4:
            value = rng.choice(INTERESTING + [len(data), len(data) - 24])
            data[at:at + 4] = (value & 0xFFFFFFFF).to_bytes(4, "big")
        else:
            data += rng.randbytes(rng.randint(1, 8))
    return bytes(data)


class Signer:
    """Trailers for fuzzed packets: mostly fresh, else replayed, wrongly
    keyed, forged, cut or oversized; sequences near the tables' wall clock."""

    def __init__(self):
        self.sequence = WALL_US

    def __call__(self, rng, packet):
        self.sequence += rng.randint(1, 1000)
        kind = rng.randrange(12)
        if kind < 6:
            return packet + auth.trailer(packet, RING, self.sequence)
        if kind == 6:       # replayed, or a first packet from before the window
            old = self.sequence - rng.choice([1, 5000, 10**6, 61 * 10**6])
            return packet + auth.trailer(packet, RING, old)
        if kind == 7:
            return packet + auth.trailer(packet, WRONG, self.sequence)
        if kind == 8:
            forged = bytearray(packet + auth.trailer(packet, RING, self.sequence))
            forged[rng.randrange(len(forged))] ^= 1 << rng.randrange(8)
            return bytes(forged)
        if kind == 9:
            return packet + auth.trailer(packet, RING, self.sequence)[:rng.randrange(29)]
        if kind == 10:
            return packet + auth.trailer(packet, RING, self.sequence) + rng.randbytes(3)
        return packet


def datagram(rng, population, sign=None):
    if sign is not None:
        kind = rng.randrange(10)
        if kind < 6:
            return sign(rng, valid_packet(rng, population))
        if kind < 8:
            return mutate(rng, sign(rng, valid_packet(rng, population)))
    kind = rng.randrange(10)
    if kind == 0:
        return rng.randbytes(rng.randrange(120))
    if kind == 1:
        return b"FLT2002" + rng.randbytes(rng.randrange(60)) + b"TLF2003"
    if kind == 2:
        return L.BEGIN_MARKER + rng.randbytes(rng.randrange(100))
    if kind < 6:
        return valid_packet(rng, population)
    return mutate(rng, valid_packet(rng, population))


def outcome(codec, table, data, now):
    verdict = codec.check(data)
    try:
        fields = codec.parse(data)
    except MalformedPacket as error:
        if error.code != verdict:
            raise AssertionError("parse and check disagree") from None
        fields = None
    events = table.receive(data, len(data), now)
    return verdict, fields, _events(events)


def _events(events):
    return [(e.kind, e.reason, e.member.identity, e.member.payload, e.member.authenticated)
            for e in events]


def _table(codec, max_members, mode):
    table = Membership(drop_time=3.0, max_members=max_members, codec=codec,
                       wall_clock=lambda: WALL_US)
    if mode is not None:
        table.set_keys(mode, RING)
    return table


def save(data, label):
    CORPUS.mkdir(exist_ok=True)
    path = CORPUS / f"{label}-{data[:8].hex() or 'empty'}-{len(data)}.hex"
    path.write_text(data.hex() + "\n")
    return path


def run(count, seed, population=200, max_members=64, report=True, mode=None):
    """``mode``: None (no keys), _layout.AUTH_PERMISSIVE or AUTH_ENFORCE."""
    rng = random.Random(seed)
    impls = [_fast_py] + ([_fast] if _fast is not None else [])
    tables = [_table(c, max_members, mode) for c in impls]
    sign = None if mode is None else Signer()
    baseline = None
    started = time.perf_counter()
    now = 0.0
    for i in range(count):
        data = datagram(rng, population, sign)
        now += 0.001
        try:
            results = [outcome(c, t, data, now) for c, t in zip(impls, tables)]
        except Exception as error:
            path = save(data, "crash")
            raise SystemExit(f"exception on datagram {i} ({path}): {error!r}")
        if any(r != results[0] for r in results[1:]):
            path = save(data, "divergence")
            raise SystemExit(f"implementations disagree on datagram {i} ({path}): {results}")
        if i % 1000 == 0:
            sweeps = [[(e.kind, e.member.identity) for e in t.expire(now)] for t in tables]
            if any(s != sweeps[0] for s in sweeps[1:]):
                raise SystemExit(f"expiry disagrees at datagram {i}")
            if any(len(t) > max_members for t in tables):
                raise SystemExit("table grew past its bound")
            failures = [t.auth_failures() for t in tables]
            if any(f != failures[0] for f in failures[1:]):
                raise SystemExit(f"authentication counters disagree at datagram {i}: {failures}")
        if i == min(count - 1, 50000):
            gc.collect()
            baseline = sys.getallocatedblocks()
    gc.collect()
    used = sys.getallocatedblocks()
    elapsed = time.perf_counter() - started
    stats = tables[-1].stats()
    if report:
        names = ", ".join(c.IMPLEMENTATION for c in impls)
        keyed = "" if mode is None else f" (keyed, auth {_mode_name(mode)}: " \
            f"{sum(tables[-1].auth_failures().values())} failed authentication)"
        print(f"{count} datagrams through {names}{keyed} in {elapsed:.1f} s: identical verdicts, "
              f"fields and events; members {stats['members']}/{max_members}, refused "
              f"{stats.get('refused', 0)}, malformed "
              f"{sum(v for k, v in stats.items() if k.startswith('malformed.'))}; heap "
              f"{used - (baseline or used):+d} blocks after the first 50,000")
    return stats, (used - (baseline or used))


def _mode_name(mode):
    return {v: k for k, v in L.AUTH_MODES.items()}[mode]


def _loopback_pair():
    """Unicast UDP on 127.0.0.1 (nothing leaves the host); rx non-blocking."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    rx.bind(("127.0.0.1", 0))
    rx.setblocking(False)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.connect(rx.getsockname())
    return tx, rx


class _PumpSide:
    """One implementation's table fed by pump from its own socket."""

    def __init__(self, codec, max_members, mode=None):
        self.codec = codec
        self.table = _table(codec, max_members, mode)
        self.tx, self.rx = _loopback_pair()
        self.buf = bytearray(L.RECV_BUFFER_LEN)

    def swap_socket(self):
        self.tx.close()
        self.rx.close()
        self.tx, self.rx = _loopback_pair()

    def drain_socket(self):
        """Read and discard what the socket still holds (the twin reads one at
        a time, so after clear() the compiled batch has taken more)."""
        while True:
            try:
                self.rx.recv(L.RECV_BUFFER_LEN)
            except BlockingIOError:
                return

    def pump_all(self, budget, now):
        events = []
        while True:
            n = self.table.pump(self.rx.fileno(), self.buf, math.inf, budget)
            if n >= 0:
                events += _events(self.table.receive(self.buf, n, now))
            elif n == -errno.ESHUTDOWN:
                return events + ["shutdown"]
            elif n == -errno.EAGAIN and self.table.pending() == 0:
                try:                     # empty socket, or only the budget ran out?
                    self.rx.recv(1, socket.MSG_PEEK)
                except BlockingIOError:
                    return events
            elif n != -errno.EAGAIN:
                raise AssertionError(f"pump failed: {n}")

    def counts(self):
        stats = self.table.stats()
        return {k: v for k, v in stats.items() if k not in ("fast_path", "slow_path",
                                                           "refreshed_slow")}


def run_pump(count, seed, population=200, max_members=64, report=True, mode=None):
    """``count`` datagrams through pump on real sockets, both implementations."""
    rng = random.Random(seed)
    impls = [_fast_py] + ([_fast] if _fast is not None else [])
    sides = [_PumpSide(c, max_members, mode) for c in impls]
    sign = None if mode is None else Signer()
    sent = clears = swaps = shutdowns = 0
    now = 0.0
    try:
        while sent < count:
            burst = [datagram(rng, population, sign) for _ in range(rng.randint(1, 48))]
            sent += len(burst)
            now += 0.01
            for side in sides:
                for data in burst:
                    side.tx.send(data)
            budget = rng.choice([-1, -1, 1, 2, 5, 31, 33])
            action = rng.randrange(20)
            if action == 0:          # stop and start again, a batch possibly pending
                for side in sides:
                    side.table.pump(side.rx.fileno(), side.buf, math.inf, 1)
                    side.table.clear()
                    side.drain_socket()
                clears += 1
                continue
            if action == 1:          # a new socket under the pump (a reopened receiver)
                for side in sides:
                    side.table.pump(side.rx.fileno(), side.buf, math.inf, 1)
                    side.swap_socket()
                swaps += 1
                continue
            if action == 2:          # shut down under the pump: queued ones, then the end
                for side in sides:
                    side.rx.setblocking(True)
                    try:
                        side.rx.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass         # ENOTCONN (unconnected UDP), yet it is shut down
                shutdowns += 1
            results = [side.pump_all(budget, now) for side in sides]
            if action == 2:
                for side in sides:
                    side.swap_socket()
            if any(r != results[0] for r in results[1:]):
                path = save(b"".join(burst), "pump-divergence")
                raise SystemExit(f"pump results disagree after {sent} datagrams ({path})")
            counts = [side.counts() for side in sides]
            if any(c != counts[0] for c in counts[1:]):
                raise SystemExit(f"pump counters disagree after {sent} datagrams: {counts}")
            if any(len(side.table) > max_members for side in sides):
                raise SystemExit("table grew past its bound")
    finally:
        for side in sides:
            side.tx.close()
            side.rx.close()
    stats = sides[-1].table.stats()
    if report:
        names = ", ".join(c.IMPLEMENTATION for c in impls)
        keyed = "" if mode is None else f", keyed (auth {_mode_name(mode)})"
        print(f"{sent} datagrams through pump on loopback sockets ({names}{keyed}), {clears} clears "
              f"and {swaps} socket swaps with batches pending, {shutdowns} shutdowns: identical "
              f"events and counters; "
              f"members {stats['members']}/{max_members}")
    return stats


def run_packets(count, seed, population=50, report=True, keyed=False):
    """``HeartbeatPacket`` from random templates: made, stamped, sent, refused
    alike; ``keyed``: signed too (the trailers differ by the clock: both must
    verify, with sequences that only grow)."""
    rng = random.Random(seed)
    impls = [_fast_py] + ([_fast] if _fast is not None else [])
    tx, rx = _loopback_pair()
    refused = 0
    try:
        for i in range(count):
            template = valid_packet(rng, population)
            if rng.randrange(4) == 0:
                template = mutate(rng, template)
            origin = time.monotonic_ns() + rng.choice([1, -1]) * rng.randrange(2**40)
            cap = rng.choice([-1, -1, 0, 1, 999, 2**40])
            below = rng.randrange(2) == 0
            outcomes = []
            key_id, after = rng.choice([1, 2]), rng.randrange(2**62)
            for codec in impls:
                try:
                    packet = codec.HeartbeatPacket(template, origin, cap, below)
                except MalformedPacket as error:
                    outcomes.append(("refused", error.code))
                    continue
                alive = rng.randrange(-2**63, 2**63) if i % 2 else None
                if alive is None:
                    packet.stamp_now()   # elapsed time differs per call: check its shape
                    stamped = packet.alive_ms
                    if (stamped < 0) != below or (0 <= cap < abs(stamped + below)):
                        raise SystemExit(f"stamp_now gave {stamped} (cap {cap}, below {below})")
                    packet.stamp(0)
                else:
                    packet.stamp(alive)
                if keyed:
                    try:
                        packet.set_key(key_id, RING.keys[key_id], after)
                    except ValueError:       # bytes after the end marker: both refuse
                        outcomes.append(("no room", key_id))
                        continue
                    last = packet.sequence
                    packet.stamp(rng.randrange(2**40))
                    if packet.sequence <= last:
                        raise SystemExit("a signed packet's sequence did not grow")
                if packet.buffer.readonly is not True:
                    raise SystemExit("HeartbeatPacket.buffer is writable")
                before = bytes(packet.buffer)
                n = packet.send(tx.fileno())
                got = rx.recv(L.RECV_BUFFER_LEN)
                if keyed:
                    if auth.check(got, RING)[:2] != (auth.AUTH_OK, key_id):   # send stamps anew
                        raise SystemExit(f"a signed packet does not verify (template {i}, "
                                         f"{codec.IMPLEMENTATION}: {auth.check(got, RING)})")
                    before, got = before[:-L.AUTH_TRAILER_LEN], got[:-L.AUTH_TRAILER_LEN]
                outcomes.append((n, before[:14] + before[22:], got[:14] + got[22:]))
            if outcomes[0][0] == "refused":
                refused += 1
            if any(o != outcomes[0] for o in outcomes[1:]):
                path = save(template, "packet-divergence")
                raise SystemExit(f"HeartbeatPacket disagrees on template {i} ({path})")
    finally:
        tx.close()
        rx.close()
    if report:
        print(f"{count} heartbeat packets made, stamped and sent by both: identical bytes; "
              f"{refused} broken templates refused alike")
    return refused


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--pump-count", type=int, default=None)
    parser.add_argument("--packet-count", type=int, default=None)
    parser.add_argument("--keyed-count", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if _fast is None:
        print("note: compiled extension not built; fuzzing the pure-Python path alone")
    _, growth = run(args.count, args.seed)
    if growth > 20000:
        raise SystemExit(f"the heap grew by {growth} blocks: not bounded")
    run_pump(args.count // 10 if args.pump_count is None else args.pump_count, args.seed)
    run_packets(args.count // 100 if args.packet_count is None else args.packet_count, args.seed)
    keyed = args.count // 10 if args.keyed_count is None else args.keyed_count
    for mode in (L.AUTH_ENFORCE, L.AUTH_PERMISSIVE):
        _, growth = run(keyed // 2, args.seed, mode=mode)
        if growth > 20000:
            raise SystemExit(f"the heap grew by {growth} blocks: not bounded")
        run_pump(keyed // 20, args.seed, mode=mode)
    run_packets(keyed // 100, args.seed, keyed=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

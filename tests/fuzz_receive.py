#!/usr/bin/env python3
"""Fuzz the receive path of both implementations side by side.

    python tests/fuzz_receive.py --count 1000000 [--seed 1]

Feeds random bytes, mutated packets and well-formed packets with random
fields to a Membership table per implementation and checks, for every
datagram: no exception escapes, both give the same verdict, the same fields
and the same events; the table stays within its bound; memory stays bounded.
A failing input is written to tests/corpus/ (replayed by the normal suite,
test_fuzz.py) and the run stops with exit status 1.
"""

import argparse
import gc
import pathlib
import random
import sys
import time

from mcastmember import _fast_py, _layout as L
from mcastmember.errors import MalformedPacket
from mcastmember.table import Membership

try:
    from mcastmember import _fast
except ImportError:
    _fast = None

CORPUS = pathlib.Path(__file__).parent / "corpus"
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


def datagram(rng, population):
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
    return verdict, fields, [(e.kind, e.reason, e.member.identity, e.member.payload)
                             for e in events]


def save(data, label):
    CORPUS.mkdir(exist_ok=True)
    path = CORPUS / f"{label}-{data[:8].hex() or 'empty'}-{len(data)}.hex"
    path.write_text(data.hex() + "\n")
    return path


def run(count, seed, population=200, max_members=64, report=True):
    rng = random.Random(seed)
    impls = [_fast_py] + ([_fast] if _fast is not None else [])
    tables = [Membership(drop_time=3.0, max_members=max_members, codec=c) for c in impls]
    baseline = None
    started = time.perf_counter()
    now = 0.0
    for i in range(count):
        data = datagram(rng, population)
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
            sweeps = [[(e.kind, e.member.identity) for e in t.sweep(now)] for t in tables]
            if any(s != sweeps[0] for s in sweeps[1:]):
                raise SystemExit(f"expiry disagrees at datagram {i}")
            if any(len(t) > max_members for t in tables):
                raise SystemExit("table grew past its bound")
        if i == min(count - 1, 50000):
            gc.collect()
            baseline = sys.getallocatedblocks()
    gc.collect()
    used = sys.getallocatedblocks()
    elapsed = time.perf_counter() - started
    stats = tables[-1].stats()
    if report:
        names = ", ".join(c.IMPLEMENTATION for c in impls)
        print(f"{count} datagrams through {names} in {elapsed:.1f} s: identical verdicts, fields "
              f"and events; members {stats['members']}/{max_members}, refused "
              f"{stats.get('refused', 0)}, malformed "
              f"{sum(v for k, v in stats.items() if k.startswith('malformed.'))}; heap "
              f"{used - (baseline or used):+d} blocks after the first 50,000")
    return stats, (used - (baseline or used))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if _fast is None:
        print("note: compiled extension not built; fuzzing the pure-Python path alone")
    _, growth = run(args.count, args.seed)
    if growth > 20000:
        raise SystemExit(f"the heap grew by {growth} blocks: not bounded")
    return 0


if __name__ == "__main__":
    sys.exit(main())

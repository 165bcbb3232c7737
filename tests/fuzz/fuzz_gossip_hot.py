#!/usr/bin/env python3
"""Fuzz the gossip hot path: its matcher twins and the engine with and without it.

    python tests/fuzz/fuzz_gossip_hot.py --count 200000 [--seed 1]

Packets: memberlist's hot messages (ping, ack, alive, suspect, dead) with
fields from small pools (so that known members, pending probes, repeats and
refutations happen), other messages, random bytes; behind a CRC header, in
compounds, behind a label or the wrong one; and mutated (bits flipped, bytes
cut, inserted, appended); nearly a third LZW-compressed as memberlist
sends compounds, a few nested deeper. For every packet: the compiled and
pure-Python ``unwrap`` (now and then under tight limits) and ``match`` give
the same result, ``unwrap`` gives nothing or exactly the general framing's
messages, and three engines (the general
path, the pure-Python matcher, the compiled one) end in the same state, send
the same bytes and give the same events and counters. Every few thousand
packets the engines start over. Every fifth packet is also LZW-compressed
(sometimes repeated, sometimes mutated) and read by the compiled and the
pure-Python LZW readers: the same bytes or the same error. A failing input is written to
tests/fuzz/corpus/gossip_hot/ (replayed by tests/gossip/test_memberlist_matcher.py) and the run
stops with exit status 1.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import random
import sys

from mcastmember.gossip.memberlist import _matcher_py as _hot_py
from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import matcher as hot
from mcastmember.gossip.memberlist import lzw
from mcastmember.gossip.memberlist import messages
from mcastmember.gossip.memberlist.errors import GossipWireError
from mcastmember.gossip.memberlist.engine import GossipEngine
from mcastmember.gossip.memberlist.label import add_label
from mcastmember.gossip.memberlist.limits import Limits
from mcastmember.gossip.memberlist.settings import GossipSettings

CORPUS = pathlib.Path(__file__).parent / "corpus" / "gossip_hot"
ME = "py-1"
NAMES = [ME, "serf-1", "serf-2", "serf-3", "", "n\u00e9"]
ADDRS = [bytes((127, 0, 0, 2)), bytes((127, 0, 0, 3)), bytes(16), b"\x01\x02\x03", b""]
VSNS = [bytes((1, 5, 2, 2, 5, 4)), b"", bytes((0, 5, 2, 0, 0, 0)), bytes((5, 1, 2, 0, 0, 0)), b"\x01\x05"]
SENDER = ("127.0.0.9", 7946)
LABEL = b"dc1"
MAXD = Limits().max_packet_decompressed
INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0xFFFFFFFF]


def message(rng: random.Random, seqs: list[int]) -> bytes:
    kind = rng.randrange(7)
    name = rng.choice(NAMES + [rng.randbytes(rng.randrange(4)).decode("latin-1")])
    inc = rng.choice(INTERESTING + [4, 5, 6, rng.getrandbits(32)])
    if kind == 0:
        return messages.encode(messages.Ping(seq_no=rng.choice(INTERESTING), node=name,
                                             source_addr=rng.choice(ADDRS), source_port=rng.choice([0, 7946, 7000]),
                                             source_node=rng.choice(NAMES)))
    if kind == 1:
        seq = rng.choice(seqs) if seqs and rng.random() < 0.7 else rng.choice(INTERESTING)
        return messages.encode(messages.Ack(seq_no=seq, payload=rng.randbytes(rng.choice([0, 0, 3, 40]))))
    if kind == 2:
        return messages.encode(messages.Alive(incarnation=inc, node=name, addr=rng.choice(ADDRS),
                                              port=rng.choice([0, 7946, 7000]), meta=rng.choice([b"", b"m", b"x" * 40]),
                                              vsn=rng.choice(VSNS)))
    if kind in (3, 4):
        cls = messages.Suspect if kind == 3 else messages.Dead
        return messages.encode(cls(incarnation=inc, node=name, from_=rng.choice(NAMES)))
    if kind == 5:
        return messages.encode(messages.Nack(seq_no=rng.choice(INTERESTING)))
    return rng.randbytes(rng.randrange(1, 30))


def mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        if not buf:
            break
        at = rng.randrange(len(buf))
        action = rng.randrange(5)
        if action == 0:
            buf[at] ^= 1 << rng.randrange(8)
        elif action == 1:
            buf[at] = rng.randrange(256)
        elif action == 2:
            del buf[at:at + rng.randint(1, 8)]
        elif action == 3:
            buf[at:at] = rng.randbytes(rng.randint(1, 8))
        else:
            buf += rng.randbytes(rng.randint(1, 4))
    return bytes(buf)


def packet(rng: random.Random, seqs: list[int], labelled: bool) -> bytes:
    parts = [message(rng, seqs) for _ in range(rng.choice([1, 1, 1, 2, 5]))]
    body = parts[0] if len(parts) == 1 else framing.make_compound(parts)
    if rng.random() < 0.3:       # as memberlist sends most compounds; now and then nested deeper
        body = framing.compress_message(body)
        if rng.random() < 0.1:
            body = rng.choice([framing.compress_message, lambda b: framing.make_compound([b])])(body)
    if rng.random() < 0.5:
        body = framing.add_crc(body)
    label = LABEL if labelled else b""
    if rng.random() < 0.05:
        label = rng.choice([b"", b"dc2", LABEL])
    data = add_label(body, label)
    return mutate(rng, data) if rng.random() < 0.3 else data


def state(e: GossipEngine, now: float) -> tuple[object, ...]:
    nodes = [(n.name, n.addr, n.port, n.meta, n.incarnation, n.state, n.state_change, n.vsn) for n in e.table.nodes]
    return (e.outgoing(now), e.streams_to_open(now), e.events(), e.stats(), nodes, sorted(e.shared.suspicions),
            sorted(e.shared.acks), e.broadcasts.size, e.incarnation, e.health_score)


def engines(labelled: bool) -> list[GossipEngine]:
    impls = [None] + [m for m in hot.IMPLEMENTATIONS.values() if m is not None]
    out = []
    for impl in impls:
        e = GossipEngine(GossipSettings(name=ME, label=LABEL if labelled else b"", max_nodes=16), seed=3, hot=impl)
        e.start(0.0)
        out.append(e)
    return out


def fail(data: bytes, why: str) -> None:
    CORPUS.mkdir(parents=True, exist_ok=True)
    path = CORPUS / f"fuzz-{abs(hash(data)) % 10**10}.hex"
    path.write_text(data.hex() + "\n")
    raise SystemExit(f"{why}: input written to {path}")


def general_parts(data: bytes, limits: Limits, label: bytes) -> object:
    """What the general path makes of a packet: its messages, or its refusal."""
    try:
        return framing.split_messages(framing.open_packet(data, limits, label=label), limits)[0]
    except GossipWireError as exc:
        return exc.reason


def lzw_result(fn, data: bytes, max_size: int) -> object:
    try:
        return fn(data, max_size)
    except GossipWireError as exc:
        return (type(exc).__name__, exc.reason, str(exc))


def compiled_lzw(compiled, data: bytes, max_size: int) -> bytes:
    saved, lzw._COMPILED = lzw._COMPILED, compiled.lzw_decompress
    try:
        return lzw.decompress(data, max_size)
    finally:
        lzw._COMPILED = saved


def run(count: int, seed: int) -> None:
    rng = random.Random(seed)
    compiled = hot.IMPLEMENTATIONS["compiled"]
    twins = [_hot_py] + ([compiled] if compiled is not None else [])
    labelled = False
    group = engines(labelled)
    now = 0.0
    seqs: list[int] = []
    kinds: collections.Counter[str] = collections.Counter()
    for i in range(count):
        if i % 3000 == 0:
            labelled = rng.random() < 0.3
            group, now, seqs = engines(labelled), 0.0, []
        data = packet(rng, seqs, labelled)
        header = add_label(b"", LABEL if labelled else b"")
        tight = i % 7 == 0
        limits = Limits(max_messages=rng.choice([0, 1, 2]) if tight else 1024,
                        max_nesting=rng.choice([0, 1, 2]) if tight else 4,
                        max_packet_decompressed=rng.choice([0, 10, 200]) if tight else MAXD)
        unwrapped = {repr(t.unwrap(data, header, 65535, limits.max_messages, limits.max_nesting,
                                   limits.max_packet_decompressed)) for t in twins}
        matched = {repr(t.match(data, ME.encode())) for t in twins}
        for part in _hot_py.unwrap(data, header, 65535, 1024, 4, MAXD) or ():
            found = _hot_py.match(part, ME.encode())
            kinds["unmatched" if found is None else str(found[0])] += 1
        if len(unwrapped) > 1 or len(matched) > 1:
            fail(data, "the compiled and pure-Python matchers disagree")
        found = _hot_py.unwrap(data, header, 65535, limits.max_messages, limits.max_nesting,
                               limits.max_packet_decompressed)
        if found is not None and found != general_parts(data, limits, LABEL if labelled else b""):
            fail(data, "unwrap took a packet and gave other messages than the general framing")
        if compiled is not None and i % 5 == 0:    # the LZW writers on this packet, the readers on it compressed (and mutated)
            plain = data * rng.choice([1, 1, 50])
            packed = lzw.compress_py(plain)
            if compiled.lzw_compress(plain) != packed:
                fail(plain, "the compiled and pure-Python LZW writers disagree")
            packed = mutate(rng, packed) if rng.random() < 0.5 else packed
            most = rng.choice([1 << 24, len(data), 10])
            if lzw_result(lzw.decompress_py, packed, most) != lzw_result(
                    lambda d, m: compiled_lzw(compiled, d, m), packed, most):
                fail(packed, f"the compiled and pure-Python LZW readers disagree (max_size {most})")
            budget = rng.choice([1, 100, 5000])
            turns = [compiled.LzwReader(packed, most), _hot_py.LzwReader(packed, most)]
            while (found := {repr(r.read(budget)) + repr(r.output()) for r in turns}) == {repr(None) + repr(
                    turns[1].output())}:
                pass
            if found != {repr(_hot_py.lzw_decompress(packed, most)) + repr(turns[1].output())}:
                fail(packed, f"the LZW readers read in turns of {budget} bytes disagree (max_size {most})")
        now += rng.choice([0.0, 0.05, 0.3])
        tick = rng.random() < 0.1
        states = []
        for e in group:
            if tick:
                e.on_timer(now)
            e.receive(data, SENDER, now)
            states.append(state(e, now))
        if any(s != states[0] for s in states[1:]):
            fail(data, "the engine with the hot path differs from the general path")
        for sent, _addr in states[0][0]:  # type: ignore[union-attr]
            if len(sent) > 6 and sent[0] == 0:   # our pings: their seqs are the acks worth sending
                seqs.append(int.from_bytes(sent[-4:], "big") if sent[-5] == 0xCE else sent[-1])
        seqs = seqs[-20:]
    final = group[0].stats()
    print(f"{count} packets: the matcher twins and the three engines agree; messages the matcher took by "
          f"type: {dict(sorted(kinds.items()))}; last engines: {final['acks_received']} acks, "
          f"{final['packets_sent']} packets sent, {final['nodes']} nodes")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if hot.IMPLEMENTATIONS["compiled"] is None:
        print("note: compiled matcher not built; fuzzing the pure-Python twin against the general path")
    run(args.count, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Fuzz Serf's layer and the gossip decoders beneath it, through SerfNode.

    python tests/fuzz/fuzz_gossip.py --count 20000 [--seed 1]

Inputs, built from valid messages of a small cast of peers (so that known
members, open queries, pending probes and repeats happen):

- packets: memberlist's messages (alive with Serf tags, suspect, dead, ping,
  ack with a network coordinate, nack, indirect ping) and Serf's inside user
  messages (join and leave intents, user events, queries with node and tag
  filters, hostile regexps among them, internal queries: ping, conflict, the
  key operations; responses to our own queries; relays); in compounds,
  LZW-compressed, nested several deep, behind a CRC, encrypted with the
  node's key or another, behind the node's label or another;
- streams: push/pulls (node states and Serf's user state: member times, left
  members, event slots, clocks), user messages and pings, compressed,
  encrypted, labelled, and handed over whole or cut short; replies to the
  node's own push/pulls likewise;

mutated before or after wrapping: bits flipped, bytes set, cut, inserted,
spliced from another message, length headers (msgpack's, a compound's, an
encrypted stream's) set huge. The node's settings change every few thousand
inputs (encryption, label, Serf protocol 2-5, tight member bounds), and it
asks queries and key operations of its own; what it sends itself (answers
to its own queries) comes back to it. For every input: no exception
escapes; every few hundred: the node's tables and the process's memos (node
states, compiled tag patterns) within their bounds; at the end, the resident
memory gained since the first 2,000 inputs under ``--max-growth-mib`` (64 MiB:
the memos fill up to their bounds, ~9 MiB in 150,000 inputs). A crashing
input is written to tests/fuzz/corpus/gossip_serf/ with the node's settings
(tests/fuzz/test_fuzz_gossip.py replays it), the command that replays the whole
run up to it is printed, and the run stops with exit status 1.
"""

from __future__ import annotations

import argparse
import ast
import collections
import pathlib
import random
import sys
import time
import traceback
from collections.abc import Callable

from mcastmember.gossip.memberlist import crypto
from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import messages as wire
from mcastmember.gossip.memberlist.label import add_label
from mcastmember.gossip.memberlist.layout import MessageType, NodeState
from mcastmember.gossip.memberlist.settings import GossipSettings
from mcastmember.gossip.serf import messages as serf
from mcastmember.gossip.serf.buffers import TAG_REGEXPS
from mcastmember.gossip.serf.layout import (QUERY_CONFLICT, QUERY_INSTALL_KEY, QUERY_LIST_KEYS, QUERY_PING,
                                            QUERY_REMOVE_KEY, QUERY_USE_KEY)
from mcastmember.gossip.serf.node import SerfNode, SerfSettings
from mcastmember.gossip.serf.tags import encode_tags

CORPUS = pathlib.Path(__file__).parent / "corpus" / "gossip_serf"
ME = "py-1"
PEERS = ["serf-1", "serf-2", "serf-3", "serf-4", ME, "", "n\u00e9", "x" * 70]
ADDRS = [bytes((127, 0, 0, 2)), bytes((127, 0, 0, 3)), bytes(15) + b"\x01", b"\x01\x02\x03", b""]
SENDER = ("127.0.0.9", 7946)
KEY, OTHER_KEY = bytes(range(16)), bytes(range(100, 132))
LABEL = b"dc1"
VSNS = [bytes((1, 5, 2, 2, 5, 5)), bytes((1, 5, 2, 2, 5, 4)), b"", bytes((0, 5, 2, 0, 0, 0)), b"\x01\x05"]
TIMES = [0, 1, 2, 3, 5, 100, 511, 512, 513, 2**32 - 1, 2**63, 2**64 - 1]
TAGS = [{}, {"role": "web"}, {"role": "db", "dc": "east"}, {"role": "y" * 36}, {"\u00e9": "\u00fc" * 20}]
PATTERNS = ["^web$", "", ".*" * 9 + "x", "(a+)+$", r"(a)\1", "a(?=b)", r"\pL+", "(", "[", r"\C", "a{1001}",
            r"(?i)\PL" * 60, "(" * 200 + ")" * 200, "\udcff", "y{36}", "^(web|db)$"]
NAMES = ["deploy", "", "e" * 40, QUERY_PING, QUERY_CONFLICT, QUERY_INSTALL_KEY, QUERY_USE_KEY, QUERY_REMOVE_KEY,
         QUERY_LIST_KEYS, "_serf_unknown"]
#: msgpack headers whose length is 32 bits (bin, str, array, map) and 16
#: bits, and integers at their extremes: "length fields set huge"
HUGE = [b"\xc6\xff\xff\xff\xff", b"\xdb\xff\xff\xff\xff", b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff",
        b"\xc5\xff\xff", b"\xda\xff\xff", b"\xdc\xff\xff", b"\xde\xff\xff", b"\xcf" + b"\xff" * 8,
        b"\xd3\x80" + bytes(7), b"\xcb\x7f\xf8" + bytes(6)]


class Cast:
    """What the peers know of the node: its open queries (to answer); and a
    pool of recent valid messages to splice from."""

    def __init__(self) -> None:
        self.queries: list[serf.Query] = []
        self.pool: collections.deque[bytes] = collections.deque(maxlen=64)


def meta(rng: random.Random) -> bytes:
    return encode_tags(rng.choice(TAGS)) if rng.random() < 0.9 else rng.randbytes(rng.randrange(8))


def coordinate(rng: random.Random) -> serf.Coordinate:
    n = rng.choice([8, 8, 8, 3, 0])
    value = rng.choice([0.0, 0.001, 1e9, float("nan"), float("inf"), -1.0])
    return serf.Coordinate(vec=[rng.choice([value, rng.random()]) for _ in range(n)], error=rng.choice([0.5, value]),
                           adjustment=rng.choice([0.0, value]), height=rng.choice([1e-5, value]))


def query_filters(rng: random.Random) -> list[bytes]:
    out = []
    for _ in range(rng.choice([0, 0, 1, 2, 3])):
        if rng.random() < 0.4:
            out.append(serf.encode_node_filter(rng.sample(PEERS, rng.randrange(3))))
        else:
            out.append(serf.encode_tag_filter(rng.choice(["role", "dc", "nope", "\u00e9"]), rng.choice(PATTERNS)))
    return out


def serf_message(rng: random.Random, cast: Cast) -> bytes:
    """One valid Serf message (its type byte first), as a peer sends it."""
    kind = rng.randrange(9)
    name, ltime = rng.choice(PEERS), rng.choice(TIMES)
    if kind == 0:
        return serf.encode(serf.Join(ltime=ltime, node=name))
    if kind == 1:
        return serf.encode(serf.Leave(ltime=ltime, node=name, prune=rng.random() < 0.3))
    if kind == 2:
        return serf.encode(serf.UserEvent(ltime=ltime, name=rng.choice(NAMES), payload=rng.randbytes(rng.randrange(40)),
                                          cc=rng.random() < 0.5))
    if kind in (3, 4):
        qname = rng.choice(NAMES)
        payload = (serf.encode(serf.KeyRequest(key=rng.choice([KEY, OTHER_KEY, b"", b"short"])))
                   if "key" in qname and rng.random() < 0.8 else rng.choice([b"", ME.encode(), rng.randbytes(9)]))
        return serf.encode(serf.Query(ltime=ltime, id=rng.getrandbits(32), addr=rng.choice(ADDRS),
                                      port=rng.choice([7946, 0, 65535]), source_node=name,
                                      filters=query_filters(rng), flags=rng.choice([0, 1, 2, 3, 0xFFFFFFFF]),
                                      relay_factor=rng.choice([0, 0, 1, 3, 255]),
                                      timeout=rng.choice([0, 10**9, -1, 2**63 - 1]), name=qname, payload=payload))
    if kind == 5:
        asked = rng.choice(cast.queries) if cast.queries and rng.random() < 0.8 else None   # ours, still open
        payload = rng.choice([b"", b"answer", serf.encode(serf.KeyResponse(
            result=rng.random() < 0.5, message="m", keys=["AAECAwQFBgcICQoLDA0ODw==", "bad"],
            primary_key="AAECAwQFBgcICQoLDA0ODw==")), serf.encode_conflict_response(serf.SerfMember(
                name=ME, addr=rng.choice(ADDRS), port=7946, tags=rng.choice(TAGS), status=rng.choice([0, 1, 9]))),
            serf.encode_conflict_response(None)])
        return serf.encode(serf.QueryResponse(ltime=asked.ltime if asked else ltime, id=asked.id if asked else 7,
                                              from_=name, flags=rng.choice([0, 1]), payload=payload))
    if kind == 6:
        inner = serf_message(rng, cast) if rng.random() < 0.9 else rng.randbytes(5)
        return serf.encode_relay(rng.choice(ADDRS), rng.choice([7946, 0]), name, inner)
    if kind == 7:
        return serf.encode(push_pull_state(rng))
    return bytes((rng.randrange(12),)) + rng.randbytes(rng.randrange(20))


def push_pull_state(rng: random.Random) -> serf.SerfPushPull:
    slots: list[serf.EventSlot | None] = []
    for _ in range(rng.choice([0, 1, 5, 40])):
        slots.append(None if rng.random() < 0.5 else serf.EventSlot(ltime=rng.choice(TIMES), events=[
            serf.EventEntry(name=rng.choice(NAMES), payload=rng.randbytes(rng.randrange(6)))
            for _ in range(rng.randrange(4))]))
    return serf.SerfPushPull(ltime=rng.choice(TIMES),
                         status_ltimes={rng.choice(PEERS): rng.choice(TIMES) for _ in range(rng.randrange(6))},
                         left_members=rng.sample(PEERS, rng.randrange(4)), event_ltime=rng.choice(TIMES),
                         events=slots, query_ltime=rng.choice(TIMES))


def memberlist_message(rng: random.Random, node: SerfNode, cast: Cast) -> bytes:
    """One valid memberlist message: half of them Serf's inside a user message."""
    kind = rng.randrange(12)
    name = rng.choice(PEERS)
    inc = rng.choice([0, 1, 2, 3, 2**32 - 1])
    if kind < 6:
        msg = serf_message(rng, cast)
        cast.pool.append(msg)
        if rng.random() < 0.25:
            msg = mutate(rng, msg, cast)
        return bytes((MessageType.USER,)) + msg
    if kind == 6:
        return wire.encode(wire.Alive(incarnation=inc, node=name, addr=rng.choice(ADDRS[:3]),
                                      port=rng.choice([7946, 7000]), meta=meta(rng), vsn=rng.choice(VSNS)))
    if kind == 7:
        cls = rng.choice([wire.Suspect, wire.Dead])
        return wire.encode(cls(incarnation=inc, node=name, from_=rng.choice(PEERS)))
    if kind == 8:
        seqs = list(node.engine.shared.acks) or [0]
        payload = serf.encode_ack_payload(coordinate(rng)) if rng.random() < 0.8 else rng.randbytes(6)
        return wire.encode(wire.Ack(seq_no=rng.choice(seqs), payload=payload))
    if kind == 9:
        return wire.encode(wire.Ping(seq_no=rng.getrandbits(32), node=rng.choice([ME, name]),
                                     source_addr=rng.choice(ADDRS), source_port=7946, source_node=name))
    if kind == 10:
        return wire.encode(wire.IndirectPing(seq_no=rng.getrandbits(32), target=rng.choice(ADDRS), port=7946,
                                             node=name, nack=rng.random() < 0.5, source_addr=rng.choice(ADDRS),
                                             source_port=7946, source_node=ME))
    return wire.encode(wire.Nack(seq_no=rng.getrandbits(32)))


def mutate(rng: random.Random, data: bytes, cast: Cast) -> bytes:
    """Bits flipped, bytes set, cut, inserted, spliced, length headers set huge."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        if not buf:
            buf += rng.randbytes(3)
        at = rng.randrange(len(buf))
        action = rng.randrange(8)
        if action == 0:
            buf[at] ^= 1 << rng.randrange(8)
        elif action == 1:
            buf[at] = rng.choice([0, 0x7F, 0x80, 0xC0, 0xFF, rng.randrange(256)])
        elif action == 2:
            del buf[at:]                                          # truncated
        elif action == 3:
            del buf[at:at + rng.randint(1, 8)]
        elif action == 4:
            buf[at:at] = rng.randbytes(rng.randint(1, 8))
        elif action == 5 and cast.pool:                           # a splice of another message
            other = rng.choice(cast.pool)
            start = rng.randrange(len(other))
            buf[at:at + rng.randrange(8)] = other[start:start + rng.randint(1, 40)]
        elif action == 6:                                         # a length header of msgpack's set huge
            headers = [i for i, b in enumerate(buf) if b in (0xC4, 0xC5, 0xC6, 0xD9, 0xDA, 0xDB, 0xDC, 0xDD, 0xDE,
                                                              0xDF) or 0x80 <= b <= 0xBF]
            at = rng.choice(headers) if headers else at
            buf[at:at + 1] = rng.choice(HUGE)
        else:
            buf[at:at + rng.randint(0, 4)] = rng.choice(HUGE)
    return bytes(buf)


def huge_compound_length(rng: random.Random, body: bytes) -> bytes:
    """A compound whose count or one of whose lengths is set huge."""
    if len(body) < 4 or body[0] != MessageType.COMPOUND:
        return body
    buf = bytearray(body)
    if rng.random() < 0.3:
        buf[1] = 255
    else:
        at = 2 + 2 * rng.randrange(max(1, buf[1]))
        buf[at:at + 2] = b"\xff\xff"
    return bytes(buf)


def wrapped(rng: random.Random, parts: list[bytes], depth: int = 0) -> bytes:
    """Parts in a compound (perhaps nested) and/or compressed (perhaps twice)."""
    body = parts[0] if len(parts) == 1 and rng.random() < 0.6 else framing.make_compound(parts)
    for _ in range(rng.choice([0, 0, 1, 1, 2, 5]) if depth == 0 else 0):
        body = rng.choice([framing.compress_message, lambda b: framing.make_compound([b, *parts[:1]])])(body)
    if rng.random() < 0.3:
        body = framing.compress_message(body)
    return huge_compound_length(rng, body) if rng.random() < 0.05 else body


def packet(rng: random.Random, node: SerfNode, cast: Cast, keys: tuple[bytes, ...], label: bytes) -> bytes:
    parts = [memberlist_message(rng, node, cast) for _ in range(rng.choice([1, 1, 1, 2, 3, 8]))]
    body = wrapped(rng, parts)
    if rng.random() < 0.1:
        body = mutate(rng, body, cast)                            # behind the CRC and the key: reaches the decoders
    if rng.random() < 0.5:
        body = framing.add_crc(body)
    label = label if rng.random() < 0.95 else rng.choice([b"", b"dc2", LABEL])
    key = (keys[0] if keys and rng.random() < 0.9 else OTHER_KEY) if keys or rng.random() < 0.05 else None
    if key is not None:
        body = crypto.encrypt_payload(rng.choice([0, 1]), key, body, label)
    data = add_label(body, label)
    return mutate(rng, data, cast) if rng.random() < 0.15 else data


def node_states(rng: random.Random) -> list[wire.PushNodeState]:
    return [wire.PushNodeState(name=rng.choice(PEERS), addr=rng.choice(ADDRS[:3]), port=7946, meta=meta(rng),
                               incarnation=rng.choice([0, 1, 5]), state=rng.choice(list(NodeState)),
                               vsn=rng.choice(VSNS)) for _ in range(rng.choice([0, 1, 3, 8]))]


def stream(rng: random.Random, cast: Cast, keys: tuple[bytes, ...], label: bytes) -> bytes:
    """A TCP stream message: a push/pull (mostly), a user message or a ping."""
    kind = rng.randrange(6)
    if kind < 4:
        state = serf.encode(push_pull_state(rng))
        if rng.random() < 0.2:
            state = mutate(rng, state, cast)
        msg = wire.encode_push_pull(wire.PushPull(join=rng.random() < 0.5, nodes=node_states(rng), user_state=state))
    elif kind == 4:
        msg = wire.encode_user_stream(serf_message(rng, cast))
    else:
        msg = wire.encode(wire.Ping(seq_no=rng.getrandbits(32), node=ME, source_addr=ADDRS[0], source_port=7946,
                                    source_node="serf-1"))
    if rng.random() < 0.1:
        msg = mutate(rng, msg, cast)
    label = label if rng.random() < 0.95 else rng.choice([b"", b"dc2"])
    keyring = crypto.Keyring([keys[0] if rng.random() < 0.9 else OTHER_KEY]) if keys and rng.random() < 0.95 else None
    data = framing.encode_stream(msg, compress=rng.random() < 0.5, keyring=keyring, label=label)
    if keyring is not None and rng.random() < 0.05:          # the encrypted length set huge
        at = len(add_label(b"", label)) + 1
        data = data[:at] + rng.choice([b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff"]) + data[at + 4:]
    if rng.random() < 0.15:
        data = mutate(rng, data, cast)
    return data[:rng.randrange(len(data) + 1)] if rng.random() < 0.1 else data


def new_node(rng: random.Random) -> tuple[SerfNode, dict[str, object]]:
    config: dict[str, object] = {
        "keys": (KEY,) if rng.random() < 0.4 else (),
        "label": LABEL if rng.random() < 0.3 else b"",
        "verify": rng.random() < 0.85,
        "protocol": rng.choice([5, 5, 4, 2]),
        "max_nodes": rng.choice([4, 16]),
        "max_gone": rng.choice([1, 3]),
        "tags": rng.choice(TAGS[1:]),
    }
    return make_node(config), config


def make_node(config: dict[str, object]) -> SerfNode:
    gossip = GossipSettings(name=ME, advertise_addr="127.0.0.1", keys=config["keys"], label=config["label"],
                            gossip_verify_incoming=config["verify"], max_nodes=config["max_nodes"],
                            max_dead_nodes=config["max_nodes"], max_broadcasts=64, max_broadcast_bytes=64 * 1024)
    settings = SerfSettings(protocol_version=config["protocol"], max_failed_members=config["max_gone"],
                            max_left_members=config["max_gone"], reap_interval=1.0, reconnect_timeout=4.0,
                            tombstone_timeout=4.0, reconnect_interval=1.0)
    node = SerfNode(gossip, dict(config["tags"]), settings, seed=1)
    node.start(0.0)
    return node


def check_bounds(node: SerfNode) -> None:
    """Every table the network can grow, within its settings' bound."""
    s, members = node.engine.settings, node.core.members
    found = {
        "memberlist nodes": (len(node.engine.table), s.max_nodes + s.max_dead_nodes),
        "Serf members": (len(members.members), members.max_members),
        "failed members": (len(members.failed_members), members.max_failed_members),
        "left members": (len(members.left_members), members.max_left_members),
        "intents": (len(members.intents), members.intents.max_nodes),
        "known nodes": (len(node._known), s.max_nodes + s.max_dead_nodes),
        "coordinates cached": (len(node.pings.cache), len(members.members) + 1),
        "pending acks": (len(node.engine.shared.acks), s.max_pending_acks),
        "tag regexps": (len(TAG_REGEXPS), TAG_REGEXPS.size),
    }
    for name, memo in (("decoded", wire.DECODED), ("encoded", wire.ENCODED)):   # the process's node-state memos
        found[f"node states {name}"] = (len(memo), memo.entries)
        found[f"node state bytes {name}"] = (memo.bytes, memo.max_bytes)
    for name, queue in (("intents", node.intents), ("queries", node.queries), ("user events", node.user_events)):
        found[f"{name} queued"] = (len(queue), s.max_broadcasts)
    for name, buffer in (("event", node.core.event_buffer), ("query", node.core.query_buffer)):
        held = sum(len(getattr(slot, "events", getattr(slot, "ids", ()))) for slot in buffer._slots if slot)
        found[f"{name} buffer"] = (held, buffer.size * buffer.max_per_slot)
    over = {name: value for name, value in found.items() if value[0] > value[1]}
    if over:
        raise AssertionError(f"over their bounds (count, bound): {over}")


def resident_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def fail(kind: str, data: bytes, config: dict[str, object], why: str) -> None:
    CORPUS.mkdir(parents=True, exist_ok=True)
    path = CORPUS / f"{kind}-{abs(hash(data)) % 10**10}.txt"
    path.write_text(f"{kind} {config!r}\n{data.hex()}\n")
    raise SystemExit(f"{why}: input written to {path}")


def replay(path: pathlib.Path) -> None:
    """A corpus entry through a node with its settings (raises what it
    raised), twice: the first time may teach the node what the input is
    about (a member, a query), as the inputs before it did in the run."""
    head, hexed = path.read_text().splitlines()[:2]
    kind, config = head.split(" ", 1)
    node = make_node(ast.literal_eval(config))
    for now in (1.0, 2.0):
        feed(node, kind, bytes.fromhex(hexed), now)
        node.on_timer(now)
        node.outgoing(now)
        node.events()


def feed(node: SerfNode, kind: str, data: bytes, now: float) -> None:
    """``data`` as a datagram ("packet") or a stream opened to the node
    (anything else: a reply, a query of its own, replayed as one)."""
    if kind == "packet":
        node.receive(data, SENDER, now)
    else:
        node.receive_stream(data, SENDER, now)


def run(count: int, seed: int, report: bool = True, group: int = 2000,
        on_input: Callable[[SerfNode], None] | None = None) -> dict[str, int]:
    """``count`` inputs; returns how many of each kind were fed and the
    last node's counters of interest."""
    rng = random.Random(seed)
    cast = Cast()
    kinds: collections.Counter[str] = collections.Counter()
    node, config, now = None, {}, 0.0
    started = time.perf_counter()
    for i in range(count):
        if i % group == 0:
            node, config = new_node(rng)
            cast, now = Cast(), 0.0
            if rng.random() < 0.5:                                # a join: our push/pull, answered below
                node.join([(f"127.0.0.{rng.randrange(2, 5)}", 7946)], now)
        elif i % group == group * 9 // 10 and rng.random() < 0.5:
            node.leave(now)                                       # the rest of the group goes to a leaving node
        assert node is not None
        now += rng.choice([0.0, 0.01, 0.2, 1.0])
        keys, label = config["keys"], config["label"]
        kind, data = "query", b""
        try:
            if rng.random() < 0.02 and config["protocol"] >= 4:   # queries of our own, to be answered
                if rng.random() < 0.3 and keys:
                    node.key_operation(rng.choice(["install", "use", "remove", "list"]),
                                       rng.choice([KEY, OTHER_KEY, b""]), now)
                else:
                    node.query("q", b"", now, request_ack=True, filters=query_filters(rng)[:1])   # within 1 KiB
            cast.queries = [q.query for q in node._open.values()]   # ours and the conflict queries it asks
            if rng.random() < 0.75:
                kind, data = "packet", packet(rng, node, cast, keys, label)
            else:
                kind, data = "stream", stream(rng, cast, keys, label)
            kinds[kind] += 1
            feed(node, kind, data, now)
            if rng.random() < 0.2 or node.next_deadline() is not None and node.next_deadline() <= now:
                node.on_timer(now)
            for out in node.streams_to_open(now):                 # our push/pulls: answered, or cut off
                if rng.random() < 0.7:
                    kind, data = f"reply:{out.id}", stream(rng, cast, keys, label)
                    kinds["reply"] += 1
                    node.stream_response(out.id, data, now)
                else:
                    node.stream_failed(out.id, now)
            for sent, addr in node.outgoing(now):       # to ourselves (answers to our queries): back in
                if addr == (node.engine.settings.advertise_addr, node.engine.settings.advertise_port):
                    kind, data = "packet", mutate(rng, sent, cast) if rng.random() < 0.1 else sent
                    node.receive(data, addr, now)
            node.events()
        except Exception:
            traceback.print_exc()
            fail(kind.partition(":")[0], data, config, f"an exception escaped on input {i} (all of it again: "
                 f"python tests/fuzz/fuzz_gossip.py --seed {seed} --count {i + 1})")
        if on_input is not None:
            on_input(node)
        if i % 250 == 0 or i == count - 1:
            check_bounds(node)
    assert node is not None
    stats = node.stats()
    out = dict(kinds) | {k: stats[k] for k in ("serf_messages", "serf_messages_bad", "bad_input", "members.alive")
                         if k in stats}
    if report:
        print(f"{count} inputs ({dict(kinds)}) in {time.perf_counter() - started:.1f} s: no exception escaped, "
              f"every table within its bound; last node: {stats.get('serf_messages', 0)} Serf messages, "
              f"{stats.get('serf_messages_bad', 0)} bad; tag regexps: {TAG_REGEXPS.compiled} compiled, "
              f"{TAG_REGEXPS.refused} refused")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-growth-mib", type=float, default=64.0,
                        help="resident memory the run may gain after its first group of inputs")
    args = parser.parse_args()
    warm = min(2000, args.count // 2)
    seen: list[int] = [0]
    baseline: list[float] = []

    def watch(_node: SerfNode) -> None:
        seen[0] += 1
        if seen[0] == warm:
            baseline.append(resident_mib())
    run(args.count, args.seed, on_input=watch)
    grown = resident_mib() - (baseline[0] if baseline else resident_mib())
    print(f"resident memory grew {grown:.1f} MiB after the first {warm} inputs (bound {args.max_growth_mib} MiB)")
    if grown > args.max_growth_mib:
        raise SystemExit(f"resident memory grew {grown:.1f} MiB: not bounded")
    return 0


if __name__ == "__main__":
    sys.exit(main())

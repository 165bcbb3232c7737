"""A deterministic network simulator that drives the real gossip engine.

One process, a virtual clock, N unmodified ``GossipEngine`` instances (or
heartbeat engines in unicast mode, see :class:`HeartbeatNode`) exchanging the
bytes they really produce: UDP datagrams and TCP push/pull and ping streams.
The network has per-link loss, delay and jitter, partitions, members that
crash, members that pause (a GC or VM stall: they neither send, receive nor
run timers; what arrives meanwhile waits in a bounded socket buffer and is
handled on resume, before the late timers) and members that run slow (every
datagram and stream reaches them ``slow`` seconds late, while their own
timers fire on time: the Lifeguard paper's overloaded member).

Everything is one heap of timed events; an engine is touched only when one
of its events is due (its own deadline, a datagram, a stream), so a step
costs O(log events), never O(N). Nothing is kept per pair of members. One
seed drives the network (loss, jitter, who pauses when) and seeds every
engine: the same seed gives the same figures.

TCP is modelled as reliable but slowed by loss: each leg (SYN, SYN-ACK, the
request, the reply) is retransmitted while lost, after 1 s for the handshake
(Linux's initial RTO) and 0.2 s for data (its minimum RTO), doubling, and
given up after six tries (the opener then times out on its own deadline). A
crashed or partitioned host does not answer (a timeout, not a refusal).

Used by tests/sim/test_gossip_sim.py and bench/gossip.py (which puts tests/sim/ on
its path). It is test and bench tooling, not part of the package.
"""

from __future__ import annotations

import gc
import heapq
import math
import random
from dataclasses import dataclass

from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import label as gossip_label
from mcastmember.gossip.memberlist import messages
from mcastmember.gossip.memberlist.engine import GossipEngine, push_pull_scale
from mcastmember.gossip.memberlist.errors import GossipWireError
from mcastmember.gossip.memberlist.events import MemberFailed, MemberJoined, MemberLeft
from mcastmember.gossip.memberlist.layout import MessageType, NodeState
from mcastmember.gossip.memberlist.settings import GossipSettings
from mcastmember.gossip.memberlist.state import Node, ip_bytes, ip_text

PORT = 7946
#: settings that turn Lifeguard's three parts off: no awareness scaling, no
#: nacks asked, a fixed suspicion timeout (the minimum; confirmations cannot
#: shorten what is already the floor)
PLAIN_SWIM = {"awareness_max_multiplier": 1, "suspicion_max_timeout_mult": 1, "nacks": False}
#: Linux's initial (handshake) and minimum (data) retransmission timeouts
SYN_RTO, DATA_RTO, TCP_TRIES = 1.0, 0.2, 6
#: the engine counters a by-type run reports beside the messages (what caused them)
CAUSES = ("probes", "probes_failed", "probes_degraded", "indirect_pings_sent", "nacks_received", "suspects",
          "suspects_told", "refutes")

_TIMER, _PACKET, _STREAM, _REPLY, _RESUME, _CALL = range(6)


def address(i: int) -> tuple[str, int]:
    """Member i's address: 10.0.0.1 onwards (room for 16 million)."""
    i += 1
    return (f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}", PORT)


@dataclass(frozen=True)
class Link:
    """One direction of a link: a share of datagrams lost, a one-way delay
    and a uniform jitter added to it (seconds)."""

    loss: float = 0.0
    delay: float = 0.001
    jitter: float = 0.0


class GossipNode:
    """A GossipEngine as the simulator drives it (the engine's own API)."""

    def __init__(self, engine: GossipEngine):
        self.engine = engine
        self.name = engine.name

    def next_deadline(self):
        return self.engine.next_deadline()

    def timer(self, now):
        self.engine.on_timer(now)

    def receive(self, data, src, now):
        self.engine.receive(data, src, now)

    def outputs(self, now):
        return self.engine.outgoing(now), self.engine.streams_to_open(now)

    def marks(self):
        """(subject name, "failed" / "left" / "joined") for each change seen."""
        out = []
        for event in self.engine.events():
            kind = type(event)
            if kind is MemberFailed:
                out.append((event.node.name, "failed"))
            elif kind is MemberLeft:
                out.append((event.node.name, "left"))
            elif kind is MemberJoined and event.node.name != self.name:
                out.append((event.node.name, "joined"))
        return out


class HeartbeatNode:
    """A heartbeat engine (mcastmember.tribes.engine) in unicast mode, every other
    member listed as a peer: all-to-all heartbeats, for contrast. Its real
    heartbeat bytes go to each peer every period; its table hears them."""

    def __init__(self, i: int, n: int, codec=None, **options):
        from mcastmember.tribes.engine.config import ServiceConfig
        from mcastmember.tribes.engine.engine import MembershipEngine

        self.addr = address(i)
        self.name = self.addr[0]
        peers = [address(j)[0] for j in range(n) if j != i]
        config = ServiceConfig(None, PORT, host=self.addr[0], multicast=False, peers=peers,
                               member_port=4000, unique_id=i.to_bytes(16, "big"), **options)
        self.engine = MembershipEngine(config, codec=codec)
        self._raw = ip_bytes(self.addr[0])

    def next_deadline(self):
        return self.engine.next_deadline()

    def timer(self, now):
        self.engine.on_timer(now)

    def receive(self, data, src, now):
        if self.engine.running:      # before start: no socket yet
            self.engine.receive(bytearray(data), len(data), now, (ip_bytes(src[0]), src[1]))

    def outputs(self, now):
        packet = self.engine.outgoing(now)
        if packet is None:
            return (), ()
        data = bytes(packet.buffer)
        targets = [(ip_text(host), port) for host, port in self.engine.targets.peers]
        self.engine.on_unicast_result(len(targets), now)
        return [(data, dst) for dst in targets], ()

    def marks(self):
        out = []
        for event in self.engine.events():
            subject = ip_text(event.member.host)
            if event.kind == "removed":
                out.append((subject, "failed"))
            elif event.kind == "added":
                out.append((subject, "joined"))
        return out


class Sim:
    """The simulated network; see the module docstring.

    ``link`` is every link's default; ``links[(i, j)]`` overrides the one
    from member i to member j (only when set: nothing is kept per pair
    otherwise). ``inbox_limit`` is a paused member's socket buffer, in
    datagrams (Linux's default 208 KiB holds a few hundred small ones).

    Set ``by_type = tallies()`` to count what is sent by message
    type (each datagram and stream message decoded: costly, off by default);
    ``reset_counters`` zeroes it too.
    """

    def __init__(self, seed: int = 0, link: Link = Link(), inbox_limit: int = 256):
        self.seed = seed
        self.rng = random.Random(seed)
        self.link = link
        self.links: dict[tuple[int, int], Link] = {}
        self.inbox_limit = inbox_limit
        self.now = 0.0
        self.nodes: list = []
        self.index: dict[tuple[str, int], int] = {}
        self.by_name: dict[str, int] = {}
        self.crashed: list[bool] = []
        self.paused_until: list[float] = []
        self.slow: list[float] = []
        self.group: list[int] | None = None      # partition: member -> side
        self._timer_at: list[float | None] = []
        self._inbox: list[list] = []
        self._heap: list = []
        self._order = 0
        # -- what was measured (reset_counters zeroes the traffic)
        self.datagrams = [] ; self.datagram_bytes = [] ; self.stream_bytes = [] ; self.streams = []
        self.lost = 0                  # datagrams the network dropped (loss, partition, down host)
        self.inbox_dropped = 0         # datagrams a paused member's buffer could not hold
        self.marks: list[tuple[float, str, str, str]] = []   # (time, observer, subject, "failed"/"left"/"joined")
        self.by_type: dict[str, dict[str, list[int]]] | None = None
        self.shared: dict[bytes, bytes] = {}     # one copy of each queued broadcast (see add_gossip)

    # ------------------------------------------------------------ building
    def add(self, node) -> int:
        """Add a driven node (GossipNode, HeartbeatNode); returns its index."""
        i = len(self.nodes)
        self.nodes.append(node)
        self.by_name[node.name] = i
        for lst, v in ((self.crashed, False), (self.paused_until, -math.inf), (self.slow, 0.0),
                       (self._timer_at, None), (self._inbox, None), (self.datagrams, 0),
                       (self.datagram_bytes, 0), (self.stream_bytes, 0), (self.streams, 0)):
            lst.append(v)
        if self.group is not None:
            self.group.append(0)
        return i

    def at(self, when: float, fn, *args) -> None:
        """Call ``fn(*args)`` at virtual time ``when``."""
        self._push(when, _CALL, -1, (fn, args))

    def inject(self, data: bytes, src, j: int) -> None:
        """A datagram from anyone (``src``: any address, a member's or not)
        to member j, after the default link's delay: an attacker's."""
        self._push(self.now + self._one_way(self.link), _PACKET, j, (data, src))

    def touched(self, i: int) -> None:
        """After calling a node's API from outside: send what it produced."""
        self._after(i)

    # ------------------------------------------------------------ faults
    def crash(self, i: int) -> None:
        """Member i stops for good: sends, hears and runs nothing."""
        self.crashed[i] = True

    def pause(self, i: int, duration: float) -> None:
        """Member i stalls from now for ``duration`` seconds."""
        if self.crashed[i]:
            return
        until = self.now + duration
        if until > self.paused_until[i]:
            self.paused_until[i] = until
            self._inbox[i] = self._inbox[i] or []
            self._push(until, _RESUME, i, until)

    def partition(self, *sides) -> None:
        """Cut the network into ``sides`` (sets of member indexes); members
        not named form one more side. ``heal()`` joins them again."""
        self.group = [0] * len(self.nodes)
        for g, side in enumerate(sides, 1):
            for i in side:
                self.group[i] = g

    def heal(self) -> None:
        self.group = None

    def reset_counters(self) -> None:
        n = len(self.nodes)
        self.datagrams, self.datagram_bytes = [0] * n, [0] * n
        self.stream_bytes, self.streams = [0] * n, [0] * n
        self.lost = self.inbox_dropped = 0
        if self.by_type is not None:
            self.by_type = tallies()

    # ------------------------------------------------------------ running
    def _push(self, when, kind, i, arg) -> None:
        self._order += 1
        heapq.heappush(self._heap, (when, self._order, kind, i, arg))

    def _link(self, i: int, j: int) -> Link:
        return self.links.get((i, j), self.link) if self.links else self.link

    def _cut(self, i: int, j: int) -> bool:
        return self.crashed[j] or (self.group is not None and self.group[i] != self.group[j])

    def _one_way(self, link: Link) -> float:
        return link.delay + (self.rng.random() * link.jitter if link.jitter else 0.0)

    def _tcp_leg(self, link: Link, rto: float) -> float | None:
        """One TCP segment's time to get through, retransmissions included."""
        t = self._one_way(link)
        for _ in range(TCP_TRIES):
            if not link.loss or self.rng.random() >= link.loss:
                return t
            t += rto
            rto *= 2
        return None

    def _send(self, i: int, data: bytes, dst) -> None:
        if self.by_type is not None:
            _tally_datagram(self.by_type, self.nodes[i], data)
        self.datagrams[i] += 1
        self.datagram_bytes[i] += len(data)
        j = self.index.get(dst)
        if j is None or self._cut(i, j):
            self.lost += 1
            return
        link = self._link(i, j)
        if link.loss and self.rng.random() < link.loss:
            self.lost += 1
            return
        self._push(self.now + self._one_way(link) + self.slow[j], _PACKET, j, (data, self.nodes[i].addr))

    def _open(self, i: int, stream) -> None:
        self.streams[i] += 1
        self.stream_bytes[i] += len(stream.data)
        if self.by_type is not None:
            _tally_stream(self.by_type, self.nodes[i], stream.data)
        j = self.index.get(stream.addr)
        if j is None or self._cut(i, j):
            return          # the opener's own deadline ends it
        link, back = self._link(i, j), self._link(j, i)
        legs = [self._tcp_leg(link, SYN_RTO), self._tcp_leg(back, SYN_RTO), self._tcp_leg(link, DATA_RTO)]
        if None in legs:
            return
        # added in order, not sum(): Python 3.12's sum() of floats rounds
        # differently, and the same seed must give the same run on any Python
        self._push(self.now + (legs[0] + legs[1] + legs[2]) + self.slow[j], _STREAM, j, (i, stream.id, stream.data))

    def _after(self, i: int) -> None:
        node = self.nodes[i]
        now = self.now
        datagrams, streams = node.outputs(now)
        for data, dst in datagrams:
            self._send(i, data, dst)
        for stream in streams:
            self._open(i, stream)
        marks = node.marks()
        if marks:
            observer = node.name
            for subject, what in marks:
                self.marks.append((now, observer, subject, what))
        deadline = node.next_deadline()
        if deadline is not None and deadline != self._timer_at[i]:
            self._timer_at[i] = deadline
            self._push(max(deadline, now), _TIMER, i, deadline)

    def _deliver(self, kind: int, i: int, arg) -> None:
        node = self.nodes[i]
        now = self.now
        if kind == _PACKET:
            node.receive(arg[0], arg[1], now)
        elif kind == _STREAM:
            opener, sid, data = arg
            reply = node.engine.receive_stream(data, self.nodes[opener].addr, now)
            if reply is None:
                reply = b""         # incomplete: the server gives up, the opener sees a close
            self.stream_bytes[i] += len(reply)
            if self.by_type is not None and reply:
                _tally_stream(self.by_type, node, reply)
            if not self._cut(i, opener):
                leg = self._tcp_leg(self._link(i, opener), DATA_RTO)
                if leg is not None:
                    self._push(now + leg + self.slow[opener], _REPLY, opener, (sid, reply))
        elif kind == _REPLY:
            sid, reply = arg
            if not node.engine.stream_response(sid, reply, now):
                node.engine.stream_failed(sid, now, "closed")

    def run(self, until: float) -> None:
        """Advance the virtual clock to ``until``, doing everything due."""
        heap = self._heap
        while heap and heap[0][0] <= until:
            when, _o, kind, i, arg = heapq.heappop(heap)
            self.now = when
            if kind == _CALL:
                fn, args = arg
                fn(*args)
                continue
            if self.crashed[i]:
                continue
            if kind == _TIMER:
                if self._timer_at[i] != arg:
                    continue            # replaced by a later deadline
                self._timer_at[i] = None
                if self.paused_until[i] > when:
                    continue            # run on resume
                self.nodes[i].timer(when)
            elif kind == _RESUME:
                if self.paused_until[i] != arg:
                    continue            # the pause was extended
                inbox, self._inbox[i] = self._inbox[i], None
                for k, a in inbox or ():
                    self._deliver(k, i, a)
                self.nodes[i].timer(when)
            elif self.paused_until[i] > when:
                inbox = self._inbox[i]
                if kind == _PACKET and len(inbox) >= self.inbox_limit:
                    self.inbox_dropped += 1
                else:
                    inbox.append((kind, arg))
                continue
            else:
                self._deliver(kind, i, arg)
            self._after(i)
        self.now = max(self.now, until)

    # ------------------------------------------------------------ looking
    def live(self) -> list[int]:
        return [i for i in range(len(self.nodes)) if not self.crashed[i]]


# ---------------------------------------------------------------- by type

def tallies() -> dict[str, dict[str, list[int]]]:
    """Empty counts of what is sent, by message type: ``datagrams`` by the
    first message in each (what it was sent for: a probe's ping, an ack...,
    or a gossip packet of broadcasts), ``parts`` every message inside them
    (compounds and compression unwrapped: the piggybacked broadcasts too),
    ``streams`` each TCP message (request and reply); each ``[count, bytes]``
    (datagrams: as sent; parts and streams: the message itself)."""
    return {"datagrams": {}, "parts": {}, "streams": {}}


def _add(table: dict[str, list[int]], kind: str, size: int) -> None:
    entry = table.setdefault(kind, [0, 0])
    entry[0] += 1
    entry[1] += size


def _kind(type_byte: int) -> str:
    try:
        return MessageType(type_byte).name.lower()
    except ValueError:
        return f"type {type_byte}"


def _opening(node) -> tuple:
    """What reads a node's packets: its limits, keys and label."""
    s = node.engine.settings
    return s.limits, node.engine.keyring.keys if node.engine.keyring else (), s.label


def _tally_datagram(tally: dict, node, data: bytes) -> None:
    if not isinstance(node, GossipNode):
        _add(tally["datagrams"], "heartbeat", len(data))
        return
    limits, keys, label = _opening(node)
    try:
        parts, _cut = framing.split_messages(
            framing.open_packet(data, limits, keys=keys, label=label, verify_incoming=False), limits)
    except GossipWireError:
        _add(tally["datagrams"], "unreadable", len(data))
        return
    _add(tally["datagrams"], _kind(parts[0][0]), len(data))
    for part in parts:
        _add(tally["parts"], _kind(part[0]), len(part))


def _tally_stream(tally: dict, node, data: bytes) -> None:
    """A stream message's type without decoding it (a push/pull of 1,000
    members would cost more than the simulation): the label skipped and,
    if compressed, the body's first byte."""
    limits = node.engine.settings.limits
    _label, pos = gossip_label.split_label(data)
    kind = data[pos] if pos < len(data) else -1
    if kind == MessageType.COMPRESS:
        try:
            comp, _end = messages.Compress.decode_body(data[pos:], limits, 1)
            kind = framing.decompress_body(comp, limits.max_decompressed)[0]
        except (GossipWireError, IndexError):
            kind = -1
    _add(tally["streams"], "unreadable" if kind < 0 else _kind(kind), len(data))


# ---------------------------------------------------------------- clusters

def gossip_cluster(n: int, *, seed: int = 0, link: Link = Link(), lifeguard: bool = True,
                   **overrides) -> Sim:
    """``n`` gossip members already converged (every table holds every
    member alive at incarnation 1, as after a join and a round of gossip),
    started at random moments within one probe interval (unsynchronised
    tickers). Settings are memberlist's LAN defaults plus ``overrides``;
    ``lifeguard=False`` adds :data:`PLAIN_SWIM`."""
    sim = Sim(seed=seed, link=link)
    if not lifeguard:
        overrides = {**PLAIN_SWIM, **overrides}
    for i in range(n):
        add_gossip(sim, i, overrides)
    vsn = sim.nodes[0].engine.settings.vsn()
    # One name, address and Vsn object per member, shared by every table (a
    # real member decodes its own copies; that is memory, not behaviour).
    known = [(node.name, ip_bytes(node.addr[0])) for node in sim.nodes]
    collecting = gc.isenabled()
    gc.disable()        # N^2 records that live for the whole run: nothing to collect
    try:
        for i, node in enumerate(sim.nodes):
            table = node.engine.table
            nodes = [Node(name, raw, PORT, b"", 1, NodeState.ALIVE, 0.0, vsn)
                     for j, (name, raw) in enumerate(known) if j != i]
            table.rng.shuffle(nodes)            # the probe order, as the first reshuffle makes it
            table.nodes = nodes
            table.by_name = {node.name: node for node in nodes}
    finally:
        if collecting:
            gc.enable()
    settings = sim.nodes[0].engine.settings
    every = push_pull_scale(settings.push_pull_interval, n)
    for i, node in enumerate(sim.nodes):
        node.engine.start(sim.rng.random() * settings.probe_interval)
        if settings.push_pull_interval > 0:
            # As if running for long: the next push/pull anywhere within one
            # scaled interval (a fresh start waits a stagger plus a whole one).
            # No public knob for it; the one private attribute the sim sets.
            assert hasattr(node.engine, "_next_push_pull"), "the engine's push/pull timer moved"
            node.engine._next_push_pull = sim.rng.random() * every
        sim.touched(i)
    return sim


def add_gossip(sim: Sim, i: int, overrides: dict) -> GossipNode:
    """Create member i's engine (name ``n{i}``) and add it to ``sim``."""
    addr = address(i)
    settings = GossipSettings(name=f"n{i}", advertise_addr=addr[0], advertise_port=PORT, **overrides)
    node = GossipNode(GossipEngine(settings, seed=sim.seed * 1_000_003 + i))
    node.addr = addr
    _share_queued(node.engine, sim.shared)
    sim.index[addr] = sim.add(node)
    return node


#: how many distinct queued messages the simulator shares before starting afresh
SHARED_MESSAGES = 100_000


def _share_queued(engine: GossipEngine, shared: dict[bytes, bytes]) -> None:
    """Every member that hears a broadcast queues its own copy of the same
    bytes to gossip on. Under heavy loss at 10,000 members each member's
    queue fills to its bound, 4,096 messages: 4 GB of copies, which would not
    fit beside the tables. So the members of one simulation queue one shared
    copy of each message (memory, not behaviour: the queue sees equal bytes)."""
    queue = engine.broadcasts.queue
    assert callable(queue), "the engine's broadcast queue moved"

    def queue_shared(msg: bytes, name: str | None = None, token: object | None = None, *, own: bool = False) -> bool:
        if len(shared) >= SHARED_MESSAGES:
            shared.clear()          # the copies already queued stay shared
        return queue(shared.setdefault(msg, msg), name, token, own=own)

    engine.broadcasts.queue = queue_shared


def heartbeat_cluster(n: int, *, seed: int = 0, link: Link = Link(), codec=None, **options) -> Sim:
    """``n`` unicast heartbeat members listing each other (defaults: 500 ms
    period, 3 s drop time), started at random moments within one period
    (the first round of heartbeats makes the table)."""
    sim = Sim(seed=seed, link=link)
    for i in range(n):
        node = HeartbeatNode(i, n, codec=codec, **options)
        sim.index[node.addr] = sim.add(node)
    period = sim.nodes[0].engine.config.frequency_s
    for i, node in enumerate(sim.nodes):
        sim.at(sim.rng.random() * period, _start_heartbeat, sim, i)
    return sim


def _start_heartbeat(sim: Sim, i: int) -> None:
    sim.nodes[i].engine.start(sim.now)
    sim.touched(i)


# ---------------------------------------------------------------- scenario

def _quantile(values: list[float], q: float) -> float | None:
    """The nearest-rank quantile (q in 0..1) of ``values``; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def _spread(sim: Sim, subject: str, what: str, since: float, observers: set[str]) -> float | None:
    """Seconds from ``since`` until 99% of ``observers`` saw ``what`` about ``subject``."""
    first: dict[str, float] = {}
    for t, observer, sub, kind in sim.marks:
        if sub == subject and kind == what and t >= since and observer in observers:
            first.setdefault(observer, t)
    need = math.ceil(0.99 * len(observers))
    if need == 0 or len(first) < need:      # nobody to see it (a run ended before the leave)
        return None
    return sorted(first.values())[need - 1] - since


def scenario(n: int, protocol: str = "lifeguard", *, loss: float = 0.0, paused_fraction: float = 0.0,
             slow_fraction: float = 0.0, slow_range: tuple[float, float] = (2.0, 15.0),
             seconds: float = 60.0, traffic: float = 20.0, crashes: int = 3, seed: int = 0,
             warmup: float = 5.0,
             delay: float = 0.001, jitter: float = 0.002, codec=None, by_type: bool = False,
             tell_accused: str = "every") -> dict:
    """One measured run: ``n`` members (``protocol``: "lifeguard", "swim" or
    "unicast-heartbeat"), every link losing ``loss`` of its datagrams, a
    share ``paused_fraction`` of members stalling again and again from
    ``warmup`` on (each alternates running 5-15 s and pausing 2-5 s), a
    share ``slow_fraction`` slow from the start (each reads its input a
    fixed delay late, drawn from ``slow_range``; its timers run on time).
    After ``warmup`` s, the traffic is counted for ``traffic`` s (nothing
    else happens: the steady state, loss and pauses included); then
    ``crashes`` members crash (one every 2 s from 1 s in), a new member
    joins at 2 s (gossip only) and one leaves at 3 s, and the run goes on
    for ``seconds``. False "failed" marks (one member marking a healthy one
    failed: neither crashed, left, paused nor slow, as the Lifeguard paper
    counts them) are counted over both windows, the unhealthy ones apart.
    The leave's spread is over the members that listed the leaver when it
    left (under loss the new member may not have yet).
    ``by_type`` adds what the traffic window sent by message type and the
    engine counters behind it (``by_type`` and ``causes_per_member_s``).
    ``tell_accused`` is the gossip members' setting of that name (a row
    says it when it is not the default). Returns the figures (see
    bench/gossip.py)."""
    link = Link(loss, delay, jitter)
    if protocol == "unicast-heartbeat":
        sim = heartbeat_cluster(n, seed=seed, link=link, codec=codec)
    else:
        sim = gossip_cluster(n, seed=seed, link=link, lifeguard=protocol == "lifeguard", tell_accused=tell_accused)
    gossip = protocol != "unicast-heartbeat"
    pick = random.Random(seed + 1)
    order = pick.sample(range(n), n)
    crashed = order[:crashes]
    leaver = order[crashes] if gossip else None
    pausers = order[crashes + 1:crashes + 1 + round(paused_fraction * n)]
    for i in pausers:
        sim.at(warmup + pick.uniform(0.0, 10.0), _stall, sim, i, pick)
    first_slow = crashes + 1 + len(pausers)
    slow = order[first_slow:first_slow + round(slow_fraction * n)]
    for i in slow:
        sim.slow[i] = pick.uniform(*slow_range)
    sim.run(warmup)
    if by_type:
        sim.by_type = tallies()
        before = _causes(sim)
    sim.reset_counters()
    sim.run(warmup + traffic)
    counted = {"datagrams": sum(sim.datagrams), "dgram": sum(sim.datagram_bytes),
               "stream": sum(sim.stream_bytes), "streams": sum(sim.streams)}
    extra = {}
    if by_type:
        per_s = n * traffic
        extra["by_type"] = {what: {kind: [round(count / per_s, 4), round(size / per_s, 1)]
                                   for kind, (count, size) in sorted(table.items())}
                            for what, table in sim.by_type.items()}
        extra["causes_per_member_s"] = {name: round((count - before[name]) / per_s, 4)
                                        for name, count in _causes(sim).items()}
        sim.by_type = None          # the rest of the run is not counted by type
    start = sim.now
    crash_at = {}
    for k, i in enumerate(crashed):
        crash_at[sim.nodes[i].name] = start + 1.0 + 2.0 * k
        sim.at(start + 1.0 + 2.0 * k, sim.crash, i)
    joiner = joined_at = left_at = None
    knew_leaver: set[str] = set()
    if gossip:
        overrides = sim.nodes[0].engine.settings
        joined_at, left_at = start + 2.0, start + 3.0
        joiner = add_gossip(sim, len(sim.nodes), _overrides(overrides)).name
        sim.at(joined_at, _join, sim, sim.by_name[joiner], sim.nodes[order[-1]].addr)
        # who lists the leaver as it leaves: a member that does not (the new
        # one, whose join is slowed by loss) can never mark it left
        sim.at(left_at, _listing, sim, sim.nodes[leaver].name, knew_leaver)
        sim.at(left_at, _leave, sim, leaver)
    sim.run(start + seconds)
    members = len(sim.nodes)
    gone = {sim.nodes[i].name for i in crashed} | ({sim.nodes[leaver].name} if leaver is not None else set())
    observers = {node.name for node in sim.nodes} - gone
    detect, everyone = [], []
    for subject, t0 in crash_at.items():
        first: dict[str, float] = {}
        for t, observer, sub, kind in sim.marks:
            if sub == subject and kind == "failed" and observer in observers:
                first.setdefault(observer, t - t0)
        detect += first.values()
        everyone.append(max(first.values()) if len(first) == len(observers) else None)
    unhealthy = {sim.nodes[i].name for i in pausers + slow}
    failed = [sub for t, _o, sub, kind in sim.marks if kind == "failed" and sub not in gone and t >= warmup]
    false_marks = sum(1 for sub in failed if sub not in unhealthy)
    hours = n * (traffic + seconds) / 3600.0
    per = n * traffic
    row = {
        "source": "sim", "protocol": protocol, "members": n, "loss": loss,
        "paused_fraction": paused_fraction, "slow_fraction": slow_fraction, "seconds": seconds, "traffic_seconds": traffic, "seed": seed, "crashes": crashes,
        "detect_median_s": _round(_quantile(detect, 0.5)), "detect_p99_s": _round(_quantile(detect, 0.99)),
        "detect_max_s": _round(max(detect, default=None)),
        "detect_everyone_s": _round(max(everyone)) if everyone and None not in everyone else None,
        "detected_share": round(len(detect) / max(len(crash_at) * len(observers), 1), 4),
        "false_failed_marks": false_marks,
        "false_failed_per_member_hour": round(false_marks / hours, 3),
        # the paused and slow members themselves marked failed (they were unresponsive)
        "unhealthy_failed_marks": len(failed) - false_marks,
        "join_99_s": _round(_spread(sim, joiner, "joined", joined_at, observers - {joiner}))
        if joiner else None,
        "leave_99_s": _round(_spread(sim, sim.nodes[leaver].name, "left", left_at, observers & knew_leaver))
        if leaver is not None else None,
        "datagrams_per_member_s": round(counted["datagrams"] / per, 3),
        "datagram_bytes_per_member_s": round(counted["dgram"] / per, 1),
        "stream_bytes_per_member_s": round(counted["stream"] / per, 1),
        "streams_per_member_s": round(counted["streams"] / per, 5),
        "bytes_per_member_s": round((counted["dgram"] + counted["stream"]) / per, 1),
        # during the crashes, join and leave: suspicions and dead/alive gossip
        "event_datagrams_per_member_s": round((sum(sim.datagrams) - counted["datagrams"]) / n / seconds, 3),
        "lost_datagrams": sim.lost, "inbox_dropped": sim.inbox_dropped, "nodes_simulated": members,
        **({"tell_accused": tell_accused} if gossip and tell_accused != "every" else {}),
        **extra,
    }
    return row


def _causes(sim: Sim) -> dict[str, int]:
    """The :data:`CAUSES` counters summed over the gossip members."""
    total = dict.fromkeys(CAUSES, 0)
    for node in sim.nodes:
        if isinstance(node, GossipNode):
            stats = node.engine.stats()
            for name in CAUSES:
                total[name] += stats[name]
    return total


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _overrides(settings: GossipSettings) -> dict:
    """The scenario's settings for a joiner, as its first member has them."""
    return {k: getattr(settings, k) for k in (*PLAIN_SWIM, "tell_accused")}


def _stall(sim: Sim, i: int, pick: random.Random) -> None:
    pause = pick.uniform(2.0, 5.0)
    sim.pause(i, pause)
    sim.at(sim.now + pause + pick.uniform(5.0, 15.0), _stall, sim, i, pick)


def _join(sim: Sim, i: int, seed_addr) -> None:
    engine = sim.nodes[i].engine
    engine.start(sim.now)
    engine.join([seed_addr], sim.now)
    sim.touched(i)


def _listing(sim: Sim, name: str, into: set[str]) -> None:
    """Adds to ``into`` the members whose table holds ``name`` now."""
    into.update(node.name for node in sim.nodes if node.engine.node(name) is not None)


def _leave(sim: Sim, i: int, waited: float = 0.0) -> None:
    """memberlist's Leave: broadcast our dead, wait until it went out (at
    most 15 s), then stop (crash: the process exits)."""
    engine = sim.nodes[i].engine
    if waited == 0.0:
        engine.leave(sim.now)
        sim.touched(i)
    if engine.leave_done or waited >= 15.0:
        sim.crash(i)
    else:
        sim.at(sim.now + 0.1, _leave, sim, i, waited + 0.1)


__all__ = ["CAUSES", "Link", "PLAIN_SWIM", "Sim", "GossipNode", "HeartbeatNode", "address", "add_gossip",
           "gossip_cluster", "heartbeat_cluster", "scenario", "tallies"]

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

Used by tests/test_gossip_sim.py and bench/gossip.py (which puts tests/ on
its path). It is test and bench tooling, not part of the package.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass

from mcastmember.gossip.engine import GossipEngine
from mcastmember.gossip.events import MemberFailed, MemberJoined, MemberLeft
from mcastmember.gossip.layout import NodeState
from mcastmember.gossip.settings import GossipSettings
from mcastmember.gossip.state import Node, ip_bytes

PORT = 7946
#: settings that turn Lifeguard's three parts off: no awareness scaling, no
#: nacks asked, a fixed suspicion timeout (the minimum; confirmations cannot
#: shorten what is already the floor)
PLAIN_SWIM = {"awareness_max_multiplier": 1, "suspicion_max_timeout_mult": 1, "nacks": False}
#: Linux's initial (handshake) and minimum (data) retransmission timeouts
SYN_RTO, DATA_RTO, TCP_TRIES = 1.0, 0.2, 6

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
        self.engine.handle_timer(now)

    def receive(self, data, src, now):
        self.engine.receive_packet(data, src, now)

    def outputs(self, now):
        return self.engine.datagrams_to_send(now), self.engine.streams_to_open(now)

    def events(self):
        return self.engine.events()


class Sim:
    """The simulated network; see the module docstring.

    ``link`` is every link's default; ``links[(i, j)]`` overrides the one
    from member i to member j (only when set: nothing is kept per pair
    otherwise). ``inbox_limit`` is a paused member's socket buffer, in
    datagrams (Linux's default 208 KiB holds a few hundred small ones).
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
        self.on_event = None           # optional callback(sim, observer index, event)

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
        j = self.index.get(stream.addr)
        if j is None or self._cut(i, j):
            return          # the opener's own deadline ends it
        link, back = self._link(i, j), self._link(j, i)
        legs = [self._tcp_leg(link, SYN_RTO), self._tcp_leg(back, SYN_RTO), self._tcp_leg(link, DATA_RTO)]
        if None in legs:
            return
        self._push(self.now + sum(legs) + self.slow[j], _STREAM, j, (i, stream.id, stream.data))

    def _after(self, i: int) -> None:
        node = self.nodes[i]
        now = self.now
        datagrams, streams = node.outputs(now)
        for data, dst in datagrams:
            self._send(i, data, dst)
        for stream in streams:
            self._open(i, stream)
        events = node.events()
        if events:
            self._record(i, events)
        deadline = node.next_deadline()
        if deadline is not None and deadline != self._timer_at[i]:
            self._timer_at[i] = deadline
            self._push(max(deadline, now), _TIMER, i, deadline)

    def _record(self, i: int, events) -> None:
        observer = self.nodes[i].name
        for event in events:
            if self.on_event is not None:
                self.on_event(self, i, event)
            kind = type(event)
            if kind is MemberFailed:
                self.marks.append((self.now, observer, event.node.name, "failed"))
            elif kind is MemberLeft:
                self.marks.append((self.now, observer, event.node.name, "left"))
            elif kind is MemberJoined and event.node.name != observer:
                self.marks.append((self.now, observer, event.node.name, "joined"))

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
    known = [(node.name, ip_bytes(node.addr[0])) for node in sim.nodes]
    for i, node in enumerate(sim.nodes):
        table = node.engine.table
        for j, (name, raw) in enumerate(known):
            if j != i:
                table.add(Node(name, raw, PORT, b"", 1, NodeState.ALIVE, 0.0, vsn))
    interval = sim.nodes[0].engine.settings.probe_interval
    for i, node in enumerate(sim.nodes):
        node.engine.start(sim.rng.random() * interval)
        node.engine.events()        # our own join
        sim._after(i)
    return sim


def add_gossip(sim: Sim, i: int, overrides: dict) -> GossipNode:
    """Create member i's engine (name ``n{i}``) and add it to ``sim``."""
    addr = address(i)
    settings = GossipSettings(name=f"n{i}", advertise_addr=addr[0], advertise_port=PORT, **overrides)
    node = GossipNode(GossipEngine(settings, seed=sim.seed * 1_000_003 + i))
    node.addr = addr
    sim.index[addr] = sim.add(node)
    return node


__all__ = ["Link", "PLAIN_SWIM", "Sim", "GossipNode", "address", "gossip_cluster", "add_gossip"]

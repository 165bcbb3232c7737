"""GossipEngine: memberlist's SWIM with Lifeguard as a sans-IO state machine.

No sockets, threads or clocks: every entry point takes ``now`` (monotonic
seconds) and the engine hands back what to send. A front drives it::

    engine.start(now); engine.join([(host, port)], now)
    loop:
        wait until engine.next_deadline(), a datagram, or stream bytes
        datagram:          engine.receive_packet(data, addr, now)
        accepted stream:   reply = engine.receive_stream(buffered bytes, addr, now)
                           None: read more; bytes: write them (maybe none), close
        our stream's bytes: done = engine.stream_response(id, buffered, now)
        our stream broke:  engine.stream_failed(id, now, why)
        engine.handle_timer(now)
        send engine.datagrams_to_send(now) (UDP); open engine.streams_to_open(now)
            (TCP: connect, write its data, read the reply into stream_response)
        deliver engine.events()

What follows which memberlist 0.2.2 function (read, never copied): probing
(state.go probe, probeNode: direct ping, then indirect pings with nacks and a
TCP ping, Lifeguard awareness deltas), the node-state rules (aliveNode,
suspectNode, deadNode, refute, mergeState), gossip and push/pull (gossip,
pushPull, pushPullScale), packet handling (net.go handleCommand, handlePing,
handleIndirectPing, sendMsg, rawSendMsgPacket), streams (handleConn,
sendLocalState, readRemoteState, mergeRemoteState, verifyProtocol), join and
leave (memberlist.go Join, Leave, setAlive, UpdateNode).
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Union

from . import crypto, framing, messages
from .awareness import Awareness
from .broadcasts import BroadcastQueue
from .errors import GossipWireError, Truncated
from .events import (Event, JoinResult, MemberFailed, MemberJoined, MemberLeft, MemberUpdated, NameConflict,
                     PingCompleted, RemoteState, UserMessage)
from .layout import (COMPOUND_HEADER_OVERHEAD, COMPOUND_MAX_PARTS, COMPOUND_OVERHEAD, CRC_MIN_PROTOCOL,
                     ENCRYPT_OVERHEAD, LABEL_HEADER_SIZE, META_MAX_SIZE, USER_MSG_OVERHEAD, MessageType, NodeState)
from .settings import GossipSettings
from .state import Addr, Node, NodeInfo, NodeTable, ip_bytes, ip_text
from .suspicion import Suspicion, suspicion_timeout

#: util.go pushPullScaleThreshold: push/pull slows down above this many nodes
PUSH_PULL_SCALE_THRESHOLD = 32
#: the lowest protocol max that answers a TCP ping (probeNode) and sends nacks
TCP_PING_MIN_PROTOCOL = 3
NACK_MIN_PROTOCOL = 4
_UINT32 = 0xFFFFFFFF

#: every counter, present from the start
COUNTERS = (
    "packets_received", "bad_input", "messages_received", "messages_bad", "packets_sent",
    "datagrams_dropped", "probes", "probes_failed", "probes_degraded", "pings_misdirected",
    "indirect_pings_sent", "indirect_pings_relayed", "acks_received", "nacks_received",
    "acks_refused", "suspects", "refutes", "alive_refused", "nodes_refused", "nodes_reaped",
    "name_conflicts", "broadcasts_dropped", "user_broadcasts_dropped", "streams_opened",
    "streams_failed", "streams_refused", "streams_received", "streams_bad", "push_pulls",
    "push_pulls_refused", "events_dropped", "user_messages_received")


def protocol_mismatch(ranges: Iterable[bytes], current: Iterable[tuple[str, bytes]]) -> str:
    """memberlist's verifyProtocol on Vsn arrays: the protocol and delegate
    ranges every node of ``ranges`` understands, and the first (name, vsn)
    of ``current`` whose versions fall outside them ('' if none does)."""
    spans = [(v[0], v[1], v[3], v[4]) for v in ranges]
    pmin = max((r[0] for r in spans), default=0)
    pmax = min((r[1] for r in spans), default=255)
    dmin = max((r[2] for r in spans), default=0)
    dmax = min((r[3] for r in spans), default=255)
    for name, vsn in current:
        pcur, dcur = (vsn[2], vsn[5]) if vsn else (0, 0)
        if not pmin <= pcur <= pmax:
            return f"node {name!r} protocol version ({pcur}) is incompatible: [{pmin}, {pmax}]"
        if not dmin <= dcur <= dmax:
            return f"node {name!r} delegate protocol version ({dcur}) is incompatible: [{dmin}, {dmax}]"
    return ""


def push_pull_scale(interval: float, n: int) -> float:
    """util.go pushPullScale: the interval times ceil(log2(n) - log2(32)) + 1
    above 32 nodes."""
    if n <= PUSH_PULL_SCALE_THRESHOLD:
        return interval
    return (math.ceil(math.log2(n) - math.log2(PUSH_PULL_SCALE_THRESHOLD)) + 1.0) * interval


@dataclass(frozen=True)
class OutgoingStream:
    """A TCP connection the front opens to ``addr``: write ``data``, read the
    reply into :meth:`GossipEngine.stream_response` (until it returns True),
    give up at ``deadline``."""

    id: int
    addr: Addr
    data: bytes
    deadline: float


@dataclass(eq=False)
class _Stream:
    id: int
    addr: Addr
    kind: str            # "push_pull" or "ping"
    deadline: float
    join: bool = False
    seq: int = 0


@dataclass(eq=False)
class _Probe:
    """Our probe of one node (probeNode), from the ping to its end."""

    node: Node           # a copy, as Go probes a copy of the node state
    seq: int
    start: float
    timeout_at: float    # the direct ping's wait (ProbeTimeout, not scaled)
    end_at: float        # the whole probe (ProbeInterval scaled by awareness)
    indirect: bool = False
    expected_nacks: int = 0
    nacks: int = 0
    tcp_ok: bool = False

    @property
    def deadline(self) -> float:
        return self.end_at if self.indirect else min(self.timeout_at, self.end_at)


@dataclass(eq=False)
class _Relay:
    """An indirect ping we make for a peer (handleIndirectPing)."""

    seq: int             # the requester's
    addr: Addr           # where its ack or nack goes
    nack: bool
    deadline: float


_Handler = Union[_Probe, _Relay]


@dataclass
class _Leave:
    token: object = field(default_factory=object)
    done: bool = False


class GossipEngine:
    """One memberlist node, sans-IO. ``meta`` is our node meta (Serf's tags,
    at most 512 bytes); ``seed`` seeds every random choice; ``user_state``
    gives the push/pull user state (Delegate.LocalState, given the join flag);
    ``get_broadcasts`` (Delegate.GetBroadcasts), if given, is asked for the
    user messages to piggyback instead of :attr:`user_broadcasts`: called with
    the overhead each message costs, the bytes left and the most messages
    that fit, it returns message bodies (the engine adds the type-8 byte).
    """

    def __init__(self, settings: GossipSettings, *, meta: bytes = b"", seed: int | None = None,
                 user_state: Callable[[bool], bytes] | None = None,
                 get_broadcasts: Callable[[int, int, int], list[bytes]] | None = None):
        if len(meta) > META_MAX_SIZE:
            raise ValueError(f"node meta is at most {META_MAX_SIZE} bytes, not {len(meta)}")
        self.settings = settings
        self.name = settings.name
        self.rng = random.Random(seed)
        self.table = NodeTable(self.rng)
        self.awareness = Awareness(settings.awareness_max_multiplier)
        self.broadcasts = BroadcastQueue(settings.retransmit_mult, settings.max_broadcasts,
                                         settings.max_broadcast_bytes)
        #: user messages to piggyback (Delegate.GetBroadcasts), framed as type 8
        self.user_broadcasts = BroadcastQueue(settings.retransmit_mult, settings.max_broadcasts,
                                              settings.max_broadcast_bytes)
        self.keyring = crypto.Keyring(settings.keys) if settings.keys else None
        self.user_state = user_state
        self.get_broadcasts = get_broadcasts
        #: the payload of our acks (PingDelegate.AckPayload)
        self.ack_payload = b""
        self._meta = meta
        self._addr = ip_bytes(settings.advertise_addr)
        self._port = settings.advertise_port
        self._seq = 0
        self._incarnation = 0
        self._leave: _Leave | None = None
        self._started = False
        self._suspicions: dict[str, tuple[Suspicion, float]] = {}
        self._acks: dict[int, _Handler] = {}
        self._probe: _Probe | None = None
        self._probe_index = 0
        self._probe_buffered = False
        self._streams: dict[int, _Stream] = {}
        self._stream_id = 0
        self._to_open: list[OutgoingStream] = []
        self._datagrams: list[tuple[bytes, Addr]] = []
        self._events: deque[Event] = deque()
        self._counts: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self._bad_reasons: dict[str, int] = {}
        self._next_probe = math.inf
        self._next_gossip = math.inf
        self._next_push_pull = math.inf

    # ------------------------------------------------------------ lifecycle

    def start(self, now: float) -> None:
        """setAlive and schedule: our alive (incarnation 1) is queued for
        gossip; probes and gossip tick every interval from ``now`` (Go's
        tickers start their grid before the random stagger, so the stagger
        does not move them); push/pull starts after a random stagger."""
        if self._started:
            raise RuntimeError("the gossip engine is already started")
        self._started = True
        alive = messages.Alive(incarnation=self._next_incarnation(), node=self.name, addr=self._addr,
                               port=self._port, meta=self._meta, vsn=self.settings.vsn())
        self._alive_node(alive, now, bootstrap=True)
        s = self.settings
        self._next_probe = now + s.probe_interval
        if s.gossip_nodes > 0:
            self._next_gossip = now + s.gossip_interval
        if s.push_pull_interval > 0:
            self._next_push_pull = now + self.rng.random() * s.push_pull_interval + push_pull_scale(
                s.push_pull_interval, len(self.table))

    def join(self, seeds: Iterable[Addr], now: float) -> int:
        """Join: a push/pull (join flag set) with each seed; each ends in a
        :class:`JoinResult` event. Returns how many were started."""
        if not self._started:
            raise RuntimeError("start the gossip engine before it joins")
        started = 0
        for addr in seeds:
            if self._open_push_pull(addr, True, now):
                started += 1
        return started

    def leave(self, now: float) -> None:
        """Leave gracefully (memberlist's Leave): a dead message about
        ourselves from ourselves, so others mark us left. Keep driving the
        engine until :attr:`leave_done` (the message went out to its
        retransmit limit), or a timeout of the front's choosing."""
        if self._leave is not None:
            return
        self._leave = _Leave()
        me = self.table.get(self.name)
        if me is None:
            self._leave.done = True
            return
        self._dead_node(messages.Dead(incarnation=me.incarnation, node=self.name, from_=self.name), now)
        if not any(not n.dead_or_left() and n.name != self.name for n in self.table.nodes):
            self._leave.done = True

    @property
    def leave_done(self) -> bool:
        return self._leave is not None and self._leave.done

    def set_meta(self, meta: bytes, now: float) -> None:
        """UpdateNode: new meta, announced with a new incarnation."""
        if len(meta) > META_MAX_SIZE:
            raise ValueError(f"node meta is at most {META_MAX_SIZE} bytes, not {len(meta)}")
        self._meta = meta
        if not self._started:
            return      # start() announces it
        alive = messages.Alive(incarnation=self._next_incarnation(), node=self.name, addr=self._addr,
                               port=self._port, meta=meta, vsn=self.settings.vsn())
        self._alive_node(alive, now, bootstrap=True)

    def broadcast_user(self, payload: bytes, name: str | None = None) -> None:
        """Piggyback a user message on our packets up to the retransmit
        limit; a named one replaces a queued one of the same name."""
        before = self.user_broadcasts.dropped
        self.user_broadcasts.queue(payload, name)
        self._counts["user_broadcasts_dropped"] += self.user_broadcasts.dropped - before

    def send_user(self, addr: Addr, payload: bytes, now: float) -> None:
        """A user message to one address by UDP (SendToAddress), with
        broadcasts piggybacked."""
        self._send_msg(addr, bytes((MessageType.USER,)) + payload)

    # ----------------------------------------------------------- the outside

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Addr]]:
        out, self._datagrams = self._datagrams, []
        return out

    def streams_to_open(self, now: float) -> list[OutgoingStream]:
        out, self._to_open = self._to_open, []
        return out

    def events(self) -> list[Event]:
        out = list(self._events)
        self._events.clear()
        return out

    def members(self) -> list[NodeInfo]:
        """Every node neither dead nor left, ourselves included (Members)."""
        return [n.info() for n in self.table.nodes if not n.dead_or_left()]

    def node(self, name: str) -> NodeInfo | None:
        found = self.table.get(name)
        return found.info() if found is not None else None

    @property
    def health_score(self) -> int:
        return self.awareness.score

    @property
    def incarnation(self) -> int:
        return self._incarnation

    def stats(self) -> dict[str, int]:
        out = dict(self._counts)
        for reason, count in sorted(self._bad_reasons.items()):
            out[f"bad_input.{reason}"] = count
        out["nodes"] = len(self.table)
        out["members"] = len(self.members())
        out["health_score"] = self.awareness.score
        out["broadcasts_queued"] = len(self.broadcasts)
        out["user_broadcasts_queued"] = len(self.user_broadcasts)
        return out

    def next_deadline(self) -> float | None:
        times = [self._next_probe, self._next_gossip, self._next_push_pull]
        times += [h.deadline for h in self._acks.values()]
        times += [sus.deadline for sus, _change in self._suspicions.values()]
        times += [st.deadline for st in self._streams.values()]
        soonest = min(times)
        return None if soonest == math.inf else soonest

    def handle_timer(self, now: float) -> None:
        for seq, handler in list(self._acks.items()):
            if handler.deadline <= now and self._acks.get(seq) is handler:
                self._expire_handler(seq, handler, now)
        for name, (sus, change) in list(self._suspicions.items()):
            if sus.deadline <= now:
                self._suspicion_expired(name, sus, change, now)
        for sid, stream in list(self._streams.items()):
            if stream.deadline <= now:
                del self._streams[sid]
                self._stream_ended(stream, "timed out", now)
        s = self.settings
        if self._next_probe <= now:
            # Go's ticker drops the ticks a slow receiver misses, and keeps one.
            self._next_probe += s.probe_interval * (math.floor((now - self._next_probe) / s.probe_interval) + 1)
            if self._probe is None:
                self._probe_tick(now)
            else:
                self._probe_buffered = True
        if self._next_gossip <= now:
            self._next_gossip += s.gossip_interval * (math.floor((now - self._next_gossip) / s.gossip_interval) + 1)
            self._gossip(now)
        if self._next_push_pull <= now:
            self._next_push_pull = now + push_pull_scale(s.push_pull_interval, len(self.table))
            peers = self.table.k_random(1, lambda n: n.name == self.name or n.state != NodeState.ALIVE)
            if peers:
                self._open_push_pull(peers[0].address, False, now)

    # ------------------------------------------------------------- packets

    def receive_packet(self, data: bytes, addr: Addr, now: float) -> None:
        """One UDP datagram from ``addr`` (ingestPacket, handleCommand)."""
        self._counts["packets_received"] += 1
        s = self.settings
        try:
            buf = framing.open_packet(data, s.limits, keys=self.keyring.keys if self.keyring else (),
                                      label=s.label, verify_incoming=s.gossip_verify_incoming)
            parts, _cut = framing.split_messages(buf, s.limits)
        except GossipWireError as exc:
            self._bad(exc.reason)
            return
        for part in parts:
            self._handle_message(part, addr, now)

    def _handle_message(self, part: bytes, addr: Addr, now: float) -> None:
        self._counts["messages_received"] += 1
        if part[0] == MessageType.USER:
            self._counts["user_messages_received"] += 1
            self._event(UserMessage(part[1:], addr))
            return
        try:
            msg = messages.decode(part, self.settings.limits)
        except GossipWireError as exc:
            self._counts["messages_bad"] += 1
            self._bad(exc.reason)
            return
        if isinstance(msg, messages.Ping):
            self._handle_ping(msg, addr)
        elif isinstance(msg, messages.IndirectPing):
            self._handle_indirect_ping(msg, addr, now)
        elif isinstance(msg, messages.Ack):
            self._handle_ack(msg, now)
        elif isinstance(msg, messages.Nack):
            self._counts["nacks_received"] += 1
            handler = self._acks.get(msg.seq_no)
            if isinstance(handler, _Probe):
                # Go's nack channel holds IndirectChecks + 1.
                handler.nacks = min(handler.nacks + 1, self.settings.indirect_checks + 1)
        elif isinstance(msg, messages.Suspect):
            self._suspect_node(msg, now)
        elif isinstance(msg, messages.Alive):
            if self.settings.protocol_version < 2 or msg.port == 0:
                msg.port = self._port
            self._alive_node(msg, now, bootstrap=False)
        elif isinstance(msg, messages.Dead):
            self._dead_node(msg, now)
        else:
            self._counts["messages_bad"] += 1
            self._bad("bad_type")

    def _handle_ping(self, ping: messages.Ping, addr: Addr) -> None:
        if ping.node and ping.node != self.name:
            self._counts["pings_misdirected"] += 1
            return
        dest = _source(ping.source_addr, ping.source_port, addr)
        self._send_msg(dest, messages.encode(messages.Ack(seq_no=ping.seq_no, payload=self.ack_payload)))

    def _handle_indirect_ping(self, ind: messages.IndirectPing, addr: Addr, now: float) -> None:
        if len(ind.target) not in (4, 16):
            self._bad("bad_address")
            return
        if len(self._acks) >= self.settings.max_pending_acks:
            self._counts["acks_refused"] += 1
            return
        port = ind.port if ind.port and self.settings.protocol_version >= 2 else self._port
        seq = self._next_seq()
        self._acks[seq] = _Relay(ind.seq_no, _source(ind.source_addr, ind.source_port, addr), ind.nack,
                                 now + self.settings.probe_timeout)
        self._counts["indirect_pings_relayed"] += 1
        ping = messages.Ping(seq_no=seq, node=ind.node, source_addr=self._addr, source_port=self._port,
                             source_node=self.name)
        self._send_msg((ip_text(ind.target), port), messages.encode(ping))

    def _handle_ack(self, ack: messages.Ack, now: float) -> None:
        self._counts["acks_received"] += 1
        handler = self._acks.pop(ack.seq_no, None)
        if isinstance(handler, _Relay):
            self._send_msg(handler.addr, messages.encode(messages.Ack(seq_no=handler.seq)))
        elif isinstance(handler, _Probe):
            if not handler.indirect and self.settings.ping_events:
                self._event(PingCompleted(handler.node.info(), now - handler.start, ack.payload))
            self._finish_probe(handler, -1, now)

    # ---------------------------------------------------------------- probes

    def _probe_tick(self, now: float) -> None:
        """probe: the next node in the shuffled round-robin that is neither
        us nor dead or left; a wrap reaps and reshuffles."""
        checked = 0
        while True:
            nodes = self.table.nodes
            if checked >= len(nodes):
                return
            if self._probe_index >= len(nodes):
                self._reset_nodes(now)
                self._probe_index = 0
                checked += 1
                continue
            node = nodes[self._probe_index]
            self._probe_index += 1
            if node.name == self.name or node.dead_or_left():
                checked += 1
                continue
            self._probe_node(node, now)
            return

    def _reset_nodes(self, now: float) -> None:
        for gone in self.table.reap_and_shuffle(now, self.settings.gossip_to_the_dead_time):
            self._counts["nodes_reaped"] += 1
            self._suspicions.pop(gone.name, None)

    def _probe_node(self, node: Node, now: float) -> None:
        s = self.settings
        interval = self.awareness.scale(s.probe_interval)
        if interval > s.probe_interval:
            self._counts["probes_degraded"] += 1
        self._counts["probes"] += 1
        seq = self._next_seq()
        copy = Node(node.name, node.addr, node.port, node.meta, node.incarnation, node.state,
                    node.state_change, node.vsn)
        probe = _Probe(copy, seq, now, now + s.probe_timeout, now + interval)
        self._probe = probe
        self._acks[seq] = probe
        ping = messages.encode(messages.Ping(seq_no=seq, node=node.name, source_addr=self._addr,
                                             source_port=self._port, source_node=self.name))
        if node.state == NodeState.ALIVE:
            self._send_msg(node.address, ping)
        else:
            # A suspect gets the accusation with the ping, to refute at once.
            suspect = messages.encode(messages.Suspect(incarnation=node.incarnation, node=node.name,
                                                       from_=self.name))
            self._send_raw(node.address, framing.make_compound([ping, suspect]), node)

    def _expire_handler(self, seq: int, handler: _Handler, now: float) -> None:
        if isinstance(handler, _Relay):
            del self._acks[seq]
            if handler.nack:
                self._send_msg(handler.addr, messages.encode(messages.Nack(seq_no=handler.seq)))
            return
        if not handler.indirect:
            self._go_indirect(handler, now)
        if handler.end_at <= now:
            self._probe_failed(handler, now)

    def _go_indirect(self, probe: _Probe, now: float) -> None:
        """No ack in time: ask k others, and try TCP."""
        probe.indirect = True
        target = probe.node
        peers = self.table.k_random(self.settings.indirect_checks, lambda n: n.name in (self.name, target.name)
                                    or n.state != NodeState.ALIVE)
        for peer in peers:
            nack = peer.pmax >= NACK_MIN_PROTOCOL
            probe.expected_nacks += nack
            ind = messages.IndirectPing(seq_no=probe.seq, target=target.addr, port=target.port, node=target.name,
                                        nack=nack, source_addr=self._addr, source_port=self._port,
                                        source_node=self.name)
            self._counts["indirect_pings_sent"] += 1
            self._send_msg(peer.address, messages.encode(ind))
        if not self.settings.disable_tcp_pings and target.pmax >= TCP_PING_MIN_PROTOCOL:
            ping = messages.Ping(seq_no=probe.seq, node=target.name, source_addr=self._addr,
                                 source_port=self._port, source_node=self.name)
            self._open_stream(target.address, "ping", self._stream_bytes(messages.encode(ping)), probe.end_at,
                              seq=probe.seq)

    def _probe_failed(self, probe: _Probe, now: float) -> None:
        if probe.tcp_ok:
            # Reached over TCP only: the network is odd, the node is not dead.
            self._finish_probe(probe, -1, now)
            return
        self._counts["probes_failed"] += 1
        # Lifeguard: missing nacks mean we may be the slow one.
        if probe.expected_nacks > 0:
            delta = max(probe.expected_nacks - probe.nacks, 0)
        else:
            delta = 1
        target = probe.node
        self._suspect_node(messages.Suspect(incarnation=target.incarnation, node=target.name, from_=self.name),
                           now)
        self._finish_probe(probe, delta, now)

    def _finish_probe(self, probe: _Probe, delta: int, now: float) -> None:
        self._acks.pop(probe.seq, None)
        if self._probe is probe:
            self._probe = None
        self.awareness.apply_delta(delta)
        if self._probe_buffered and self._probe is None:
            self._probe_buffered = False
            self._probe_tick(now)

    # ----------------------------------------------------------- node states

    def _alive_node(self, a: messages.Alive, now: float, bootstrap: bool) -> None:
        s = self.settings
        if self._leave is not None and a.node == self.name:
            return
        if len(a.vsn) >= 3 and (a.vsn[0] == 0 or a.vsn[1] == 0 or a.vsn[0] > a.vsn[1]):
            self._counts["alive_refused"] += 1
            return
        if len(a.addr) not in (4, 16):
            self._counts["alive_refused"] += 1
            self._bad("bad_address")
            return
        state = self.table.get(a.node)
        updates_node = False
        if state is None:
            if len(self.table) >= s.max_nodes:
                self._counts["nodes_refused"] += 1
                return
            state = Node(a.node, a.addr, a.port, a.meta, state=NodeState.DEAD, state_change=now)
            if len(a.vsn) > 5:
                state.vsn = a.vsn
            self.table.add(state)
        elif state.addr != a.addr or state.port != a.port:
            reclaim = s.dead_node_reclaim_time > 0 and now - state.state_change > s.dead_node_reclaim_time
            if state.state == NodeState.LEFT or (state.state == NodeState.DEAD and reclaim):
                updates_node = True
            else:
                self._counts["name_conflicts"] += 1
                other = NodeInfo(a.node, ip_text(a.addr), a.port, a.meta, a.incarnation, NodeState.ALIVE, a.vsn)
                self._event(NameConflict(state.info(), other))
                return
        local = state.name == self.name
        if a.incarnation <= state.incarnation and not local and not updates_node:
            return
        if a.incarnation < state.incarnation and local:
            return
        self._suspicions.pop(a.node, None)
        old_state, old_meta = state.state, state.meta
        if not bootstrap and local:
            if a.incarnation == state.incarnation and a.meta == state.meta and a.vsn == state.vsn:
                return
            self._refute(state, a.incarnation)
        else:
            self._broadcast(a.node, messages.encode(a))
            if a.vsn:
                state.vsn = a.vsn
            state.incarnation = a.incarnation
            state.meta, state.addr, state.port = a.meta, a.addr, a.port
            if state.state != NodeState.ALIVE:
                state.state = NodeState.ALIVE
                state.state_change = now
        if old_state in (NodeState.DEAD, NodeState.LEFT):
            self._event(MemberJoined(state.info()))
        elif old_meta != state.meta:
            self._event(MemberUpdated(state.info()))

    def _suspect_node(self, sus: messages.Suspect, now: float) -> None:
        state = self.table.get(sus.node)
        if state is None or sus.incarnation < state.incarnation:
            return
        timer = self._suspicions.get(sus.node)
        if timer is not None:
            if timer[0].confirm(sus.from_, now):
                self._broadcast(sus.node, messages.encode(sus))
            return
        if state.state != NodeState.ALIVE:
            return
        if state.name == self.name:
            self._refute(state, sus.incarnation)
            return
        self._broadcast(sus.node, messages.encode(sus))
        self._counts["suspects"] += 1
        state.incarnation = sus.incarnation
        state.state = NodeState.SUSPECT
        state.state_change = now
        s = self.settings
        # k confirmations drive the timer to its minimum; none expected when
        # the cluster has too few other nodes to give them.
        k = s.suspicion_mult - 2
        n = len(self.table)
        if n - 2 < k:
            k = 0
        low = suspicion_timeout(s.suspicion_mult, n, s.probe_interval)
        high = s.suspicion_max_timeout_mult * low
        self._suspicions[sus.node] = (Suspicion(sus.from_, k, low, high, now), now)

    def _suspicion_expired(self, name: str, sus: Suspicion, change: float, now: float) -> None:
        del self._suspicions[name]
        state = self.table.get(name)
        if state is not None and state.state == NodeState.SUSPECT and state.state_change == change:
            self._dead_node(messages.Dead(incarnation=state.incarnation, node=name, from_=self.name), now)

    def _dead_node(self, d: messages.Dead, now: float) -> None:
        state = self.table.get(d.node)
        if state is None or d.incarnation < state.incarnation:
            return
        self._suspicions.pop(d.node, None)
        if state.dead_or_left():
            return
        token = None
        if state.name == self.name:
            if self._leave is None:
                self._refute(state, d.incarnation)
                return
            token = self._leave.token
        self._broadcast(d.node, messages.encode(d), token)
        state.incarnation = d.incarnation
        state.state = NodeState.LEFT if d.node == d.from_ else NodeState.DEAD
        state.state_change = now
        info = state.info()
        self._event(MemberLeft(info) if state.state == NodeState.LEFT else MemberFailed(info))

    def _refute(self, me: Node, accused: int) -> None:
        """Beat the accusation's incarnation and gossip that we are alive."""
        self._counts["refutes"] += 1
        inc = self._next_incarnation()
        if accused >= inc:
            self._incarnation = inc = (self._incarnation + accused - inc + 1) & _UINT32
        me.incarnation = inc
        self.awareness.apply_delta(1)
        alive = messages.Alive(incarnation=inc, node=me.name, addr=me.addr, port=me.port, meta=me.meta,
                               vsn=me.vsn)
        # memberlist names this broadcast by our address, not our name.
        self._broadcast(ip_text(me.addr), messages.encode(alive))

    # ---------------------------------------------------------------- gossip

    def _gossip(self, now: float) -> None:
        s = self.settings

        def skip(n: Node) -> bool:
            if n.name == self.name:
                return True
            if n.state in (NodeState.ALIVE, NodeState.SUSPECT):
                return False
            return n.state != NodeState.DEAD or now - n.state_change > s.gossip_to_the_dead_time

        avail = s.udp_buffer_size - COMPOUND_HEADER_OVERHEAD - self._wrap_overhead(outgoing_only=False)
        for node in self.table.k_random(s.gossip_nodes, skip):
            msgs = self._get_broadcasts(COMPOUND_OVERHEAD, avail, COMPOUND_MAX_PARTS)
            if not msgs:
                return
            self._send_raw(node.address, msgs[0] if len(msgs) == 1 else framing.make_compound(msgs), node)

    def _broadcast(self, name: str, msg: bytes, token: object | None = None) -> None:
        before = self.broadcasts.dropped
        self.broadcasts.queue(msg, name, token)
        self._counts["broadcasts_dropped"] += self.broadcasts.dropped - before
        self._check_leave()

    def _get_broadcasts(self, overhead: int, limit: int, max_parts: int) -> list[bytes]:
        n = len(self.table)
        out = self.broadcasts.get(overhead, limit, n, max_parts)
        self._check_leave()
        avail = limit - sum(len(m) + overhead for m in out)
        if avail > overhead + USER_MSG_OVERHEAD and len(out) < max_parts:
            if self.get_broadcasts is not None:
                user = self.get_broadcasts(overhead + USER_MSG_OVERHEAD, avail, max_parts - len(out))
            else:
                user = self.user_broadcasts.get(overhead + USER_MSG_OVERHEAD, avail, n, max_parts - len(out))
            out += [bytes((MessageType.USER,)) + m for m in user]
        self.user_broadcasts.finished.clear()
        return out

    def _check_leave(self) -> None:
        finished = self.broadcasts.finished
        if self._leave is not None and self._leave.token in finished:
            self._leave.done = True
        finished.clear()

    # ------------------------------------------------------------- sending

    def _wrap_overhead(self, outgoing_only: bool = True) -> int:
        s = self.settings
        extra = LABEL_HEADER_SIZE + len(s.label) if s.label else 0
        if self.keyring is not None and (s.gossip_verify_outgoing or not outgoing_only):
            extra += ENCRYPT_OVERHEAD[s.encryption_version]
        return extra

    def _send_msg(self, addr: Addr, msg: bytes) -> None:
        """sendMsg: piggyback what broadcasts fit, as a compound."""
        avail = self.settings.udp_buffer_size - len(msg) - COMPOUND_HEADER_OVERHEAD - self._wrap_overhead()
        extra = self._get_broadcasts(COMPOUND_OVERHEAD, avail, COMPOUND_MAX_PARTS - 1)
        self._send_raw(addr, framing.make_compound([msg, *extra]) if extra else msg, None)

    def _send_raw(self, addr: Addr, msg: bytes, node: Node | None) -> None:
        """rawSendMsgPacket: compress if smaller, the CRC header for nodes
        that speak protocol 5, encryption, the label."""
        s = self.settings
        if node is None:
            node = self.table.get(addr[0])   # as memberlist: found only if named by its IP
        keyring = self.keyring if s.gossip_verify_outgoing else None
        packet = framing.encode_packet(msg, compress=s.enable_compression,
                                       crc=node is not None and node.pmax >= CRC_MIN_PROTOCOL, keyring=keyring,
                                       encryption_version=s.encryption_version, label=s.label)
        if len(self._datagrams) >= s.max_datagrams:
            self._counts["datagrams_dropped"] += 1
            return
        self._counts["packets_sent"] += 1
        self._datagrams.append((packet, addr))

    # -------------------------------------------------------------- streams

    def _stream_bytes(self, msg: bytes) -> bytes:
        """rawSendMsgStream: compression always when enabled, encryption, label."""
        s = self.settings
        return framing.encode_stream(msg, compress=s.enable_compression,
                                     keyring=self.keyring if s.gossip_verify_outgoing else None,
                                     encryption_version=s.encryption_version, label=s.label)

    def _local_state(self, join: bool) -> bytes:
        nodes = [messages.PushNodeState(name=n.name, addr=n.addr, port=n.port, meta=n.meta,
                                        incarnation=n.incarnation, state=n.state, vsn=n.vsn)
                 for n in self.table.nodes]
        user = self.user_state(join) if self.user_state is not None else b""
        return self._stream_bytes(messages.encode_push_pull(messages.PushPull(join, nodes, user)))

    def _open_push_pull(self, addr: Addr, join: bool, now: float) -> bool:
        opened = self._open_stream(addr, "push_pull", self._local_state(join), now + self.settings.tcp_timeout,
                                   join=join)
        if not opened and join:
            self._event(JoinResult(addr, False, "too many streams open"))
        return opened

    def _open_stream(self, addr: Addr, kind: str, data: bytes, deadline: float, *, join: bool = False,
                     seq: int = 0) -> bool:
        if len(self._streams) >= self.settings.max_streams:
            self._counts["streams_refused"] += 1
            return False
        self._stream_id += 1
        self._streams[self._stream_id] = _Stream(self._stream_id, addr, kind, deadline, join, seq)
        self._to_open.append(OutgoingStream(self._stream_id, addr, data, deadline))
        self._counts["streams_opened"] += 1
        return True

    def _decode_stream(self, data: bytes) -> tuple[framing.StreamMessage, int] | None:
        """One stream message, None if incomplete; GossipWireError if bad."""
        s = self.settings
        try:
            return framing.decode_stream(data, s.limits, keys=self.keyring.keys if self.keyring else (),
                                         label=s.label, verify_incoming=s.gossip_verify_incoming)
        except Truncated:
            if len(data) > s.limits.max_stream:
                raise GossipWireError("too_large", "stream message over the size limit") from None
            return None

    def receive_stream(self, data: bytes, addr: Addr, now: float) -> bytes | None:
        """A stream someone opened to us (handleConn), every byte read so far.

        None: incomplete, call again with more (if the peer closed, drop it).
        bytes: write them back (maybe none) and close.
        """
        try:
            decoded = self._decode_stream(data)
        except GossipWireError as exc:
            self._counts["streams_bad"] += 1
            self._bad(exc.reason)
            return self._stream_bytes(messages.encode(messages.Err(error=str(exc))))
        if decoded is None:
            return None
        self._counts["streams_received"] += 1
        (kind, msg), _used = decoded
        if isinstance(msg, messages.PushPull):
            reply = self._local_state(msg.join)
            self._merge_remote(msg, msg.join, now)
            return reply
        if kind == MessageType.USER and isinstance(msg, bytes):
            self._counts["user_messages_received"] += 1
            self._event(UserMessage(msg, addr))
        elif isinstance(msg, messages.Ping) and (not msg.node or msg.node == self.name):
            return self._stream_bytes(messages.encode(messages.Ack(seq_no=msg.seq_no)))
        return b""

    def stream_response(self, stream_id: int, data: bytes, now: float) -> bool:
        """The reply read so far on one of our streams; True when it is
        complete (or bad): close the connection."""
        stream = self._streams.get(stream_id)
        if stream is None:
            return True
        try:
            decoded = self._decode_stream(data)
        except GossipWireError as exc:
            self._bad(exc.reason)
            del self._streams[stream_id]
            self._stream_ended(stream, str(exc), now)
            return True
        if decoded is None:
            return False
        del self._streams[stream_id]
        (kind, msg), _used = decoded
        error = ""
        if stream.kind == "ping":
            if isinstance(msg, messages.Ack) and msg.seq_no == stream.seq:
                probe = self._acks.get(stream.seq)
                if isinstance(probe, _Probe):
                    probe.tcp_ok = True
                return True
            error = "no ack"
        elif isinstance(msg, messages.Err):
            error = f"remote error: {msg.error}"
        elif not isinstance(msg, messages.PushPull):
            error = f"unexpected message type {kind}"
        else:
            error = self._merge_remote(msg, stream.join, now)
            if not error:
                self._counts["push_pulls"] += 1
                if stream.join:
                    self._event(JoinResult(stream.addr, True))
                return True
        self._stream_ended(stream, error, now)
        return True

    def stream_failed(self, stream_id: int, now: float, error: str = "connection failed") -> None:
        """One of our streams could not connect or broke before its reply."""
        stream = self._streams.pop(stream_id, None)
        if stream is not None:
            self._stream_ended(stream, error, now)

    def _stream_ended(self, stream: _Stream, error: str, now: float) -> None:
        self._counts["streams_failed"] += 1
        if stream.kind == "push_pull" and stream.join:
            self._event(JoinResult(stream.addr, False, error))

    def _merge_remote(self, remote: messages.PushPull, join: bool, now: float) -> str:
        """mergeRemoteState: '' when merged, else why not."""
        error = self._verify_protocol(remote.nodes)
        if error:
            self._counts["push_pulls_refused"] += 1
            return error
        for r in remote.nodes:
            port = r.port if r.port and self.settings.protocol_version >= 2 else self._port
            if r.state == NodeState.ALIVE:
                self._alive_node(messages.Alive(incarnation=r.incarnation, node=r.name, addr=r.addr, port=port,
                                                meta=r.meta, vsn=r.vsn), now, bootstrap=False)
            elif r.state == NodeState.LEFT:
                self._dead_node(messages.Dead(incarnation=r.incarnation, node=r.name, from_=r.name), now)
            elif r.state in (NodeState.DEAD, NodeState.SUSPECT):
                # A node another thinks dead is only suspected here.
                self._suspect_node(messages.Suspect(incarnation=r.incarnation, node=r.name, from_=self.name), now)
        if remote.user_state:
            self._event(RemoteState(remote.user_state, join))
        return ""

    def _verify_protocol(self, remote: list[messages.PushNodeState]) -> str:
        """verifyProtocol: every node's current versions within what every
        alive node understands; '' if so."""
        ranges = [r.vsn for r in remote if r.state == NodeState.ALIVE and r.vsn]
        ranges += [n.vsn for n in self.table.nodes if n.state == NodeState.ALIVE]
        current = [(r.name, r.vsn) for r in remote] + [(n.name, n.vsn) for n in self.table.nodes]
        return protocol_mismatch(ranges, current)

    # ---------------------------------------------------------------- small

    def _next_seq(self) -> int:
        self._seq = (self._seq + 1) & _UINT32
        return self._seq

    def _next_incarnation(self) -> int:
        self._incarnation = (self._incarnation + 1) & _UINT32
        return self._incarnation

    def _event(self, event: Event) -> None:
        if len(self._events) >= self.settings.max_events:
            self._counts["events_dropped"] += 1
            return
        self._events.append(event)

    def _bad(self, reason: str) -> None:
        self._counts["bad_input"] += 1
        self._bad_reasons[reason] = self._bad_reasons.get(reason, 0) + 1


def _source(addr: bytes, port: int, sender: Addr) -> Addr:
    """Where a reply goes: the message's source if it gives one, else the sender."""
    if len(addr) in (4, 16) and port > 0:
        return (ip_text(addr), port)
    return sender

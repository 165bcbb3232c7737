"""GossipEngine: memberlist's SWIM with Lifeguard as a sans-IO state machine.

No sockets, threads or clocks: every entry point takes ``now`` (monotonic
seconds) and the engine hands back what to send. A front drives it, with
the verbs of the Tribes engine where they mean the same::

    engine.start(now); engine.join([(host, port)], now)
    loop:
        wait until engine.next_deadline(), a datagram, or stream bytes
        datagram:          engine.receive(data, addr, now)
        accepted stream:   reply = engine.receive_stream(buffered bytes, addr, now)
                           None: read more; bytes: write them (maybe none), close
        our stream's bytes: done = engine.stream_response(id, buffered, now)
        our stream broke:  engine.stream_failed(id, now, why)
        engine.on_timer(now)
        send engine.outgoing(now) (UDP); open engine.streams_to_open(now)
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

The engine owns its parts and calls them; each part calls only the parts
below it, which it is given when built (none calls back up)::

    GossipEngine: entry points, timers, the dispatch of a decoded message
    ├── FastPath (fast_path): the frequent messages, no general decode ──> probing, rules, outbox
    ├── Probing (probing): the probe cycle, answers to probes          ──> streams, rules, outbox
    ├── StreamSync (streams): push/pull and the join over TCP          ──> rules
    ├── NodeRules (rules): alive, suspect, dead, refute                ──> outbox
    └── Outbox (outbox): the broadcast queues, gossip, sending

All of them hold one :class:`~.core.EngineState` (the table, pending acks,
suspicions, streams, counters), as memberlist is one struct with its
concerns in files.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from . import framing
from . import matcher as hot_path
from . import messages
from .broadcasts import BroadcastQueue
from .core import COUNTERS, EngineState, LeaveIntent, OutgoingStream
from .crypto import Keyring
from .errors import GossipWireError
from .events import Event, UserMessage
from .fast_path import FastPath
from .layout import META_MAX_SIZE, MessageType, NodeState
from .outbox import Outbox
from .probing import Probing
from .rules import NodeRules
from .settings import GossipSettings
from .state import Addr, NodeInfo
from .streams import StreamSync

__all__ = ["COUNTERS", "GossipEngine", "OutgoingStream", "push_pull_scale"]

#: util.go pushPullScaleThreshold: push/pull slows down above this many nodes
PUSH_PULL_SCALE_THRESHOLD = 32


def push_pull_scale(interval: float, n: int) -> float:
    """util.go pushPullScale: the interval times ceil(log2(n) - log2(32)) + 1
    above 32 nodes."""
    if n <= PUSH_PULL_SCALE_THRESHOLD:
        return interval
    return (math.ceil(math.log2(n) - math.log2(PUSH_PULL_SCALE_THRESHOLD)) + 1.0) * interval


class GossipEngine:
    """One memberlist node, sans-IO. ``meta`` is our node meta (Serf's tags,
    at most 512 bytes); ``seed`` seeds every random choice; ``user_state``
    gives the push/pull user state (Delegate.LocalState, given the join flag);
    ``get_broadcasts`` (Delegate.GetBroadcasts), if given, is asked for the
    user messages to piggyback instead of :attr:`user_broadcasts`: called with
    the overhead each message costs, the bytes left and the most messages
    that fit, it returns message bodies (the engine adds the type-8 byte).
    ``broadcasts_sent``, if given, is called after each gossip round and each
    message sent with broadcasts piggybacked (to act on what the queues
    finished, as memberlist's notified waiters do once the send is out).
    ``hot``: the matcher of the fast path (None: the general decode only).
    """

    def __init__(self, settings: GossipSettings, *, meta: bytes = b"", seed: int | None = None,
                 user_state: Callable[[bool], bytes] | None = None,
                 get_broadcasts: Callable[[int, int, int], list[bytes]] | None = None,
                 broadcasts_sent: Callable[[], None] | None = None,
                 hot: ModuleType | None = hot_path.DEFAULT):
        if len(meta) > META_MAX_SIZE:
            raise ValueError(f"node meta is at most {META_MAX_SIZE} bytes, not {len(meta)}")
        self.shared = shared = EngineState(settings, seed=seed, user_state=user_state, hot=hot)
        self.outbox = Outbox(shared, get_broadcasts, broadcasts_sent)
        self.rules = NodeRules(shared, self.outbox)
        self.streams = StreamSync(shared, self.rules)
        self.probing = Probing(shared, self.outbox, self.rules, self.streams)
        self.fast_path = FastPath(shared, self.outbox, self.probing, self.rules)
        self.settings = settings
        self.name = settings.name
        self.rng = shared.rng
        self.table = shared.table
        self.awareness = shared.awareness
        self.keyring: Keyring | None = shared.keyring
        self.broadcasts: BroadcastQueue = self.outbox.broadcasts
        #: user messages to piggyback (Delegate.GetBroadcasts), framed as type 8
        self.user_broadcasts: BroadcastQueue = self.outbox.user_broadcasts
        self._meta = meta
        self._started = False
        self._next_probe = math.inf
        self._next_gossip = math.inf
        self._next_push_pull = math.inf
        # a decoded message's handler, by its type (the general path)
        self._handlers: dict[type[Any], Callable[[Any, Addr, float], None]] = {
            messages.Ping: self.probing.handle_ping, messages.IndirectPing: self.probing.handle_indirect_ping,
            messages.Ack: self.probing.handle_ack, messages.Nack: self.probing.handle_nack,
            messages.Suspect: self._suspect, messages.Alive: self._alive, messages.Dead: self._dead}

    # ------------------------------------------------------- what the owner sets

    @property
    def ack_payload(self) -> bytes:
        """The payload of our acks (PingDelegate.AckPayload)."""
        return self.probing.ack_payload

    @ack_payload.setter
    def ack_payload(self, payload: bytes) -> None:
        self.probing.ack_payload = payload

    @property
    def stream_turn_size(self) -> int | None:
        """The work one call may do on a stream (None: all at once); see :class:`~.streams.StreamSync`."""
        return self.streams.stream_turn_size

    @stream_turn_size.setter
    def stream_turn_size(self, size: int | None) -> None:
        self.streams.stream_turn_size = size

    @property
    def broadcast_budget(self) -> int:
        """The longest broadcast one gossip packet can carry."""
        return self.outbox.broadcast_budget

    @property
    def user_broadcast_budget(self) -> int:
        """:attr:`broadcast_budget` for a user message (Serf's), which costs its type byte more."""
        return self.outbox.user_broadcast_budget

    def is_member_at(self, name: str, addr: Addr) -> bool:
        """Whether ``name`` is a member we list alive or suspect, at ``addr``
        (see :meth:`~.core.EngineState.is_member_at`)."""
        return self.shared.is_member_at(name, addr)

    # ------------------------------------------------------------ lifecycle

    def start(self, now: float) -> None:
        """setAlive and schedule: our alive (incarnation 1) is queued for
        gossip; probes and gossip tick every interval from ``now`` (Go's
        tickers start their grid before the random stagger, so the stagger
        does not move them); push/pull starts after a random stagger."""
        if self._started:
            raise RuntimeError("the gossip engine is already started")
        self._started = True
        alive = messages.Alive(incarnation=self.shared.next_incarnation(), node=self.name, addr=self.shared.addr,
                               port=self.shared.port, meta=self._meta, vsn=self.settings.vsn())
        self.rules.alive(alive, now, bootstrap=True)
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
            if self.streams.open_push_pull(addr, True, now):
                started += 1
        return started

    def leave(self, now: float) -> None:
        """Leave gracefully (memberlist's Leave): a dead message about
        ourselves from ourselves, so others mark us left. Keep driving the
        engine until :attr:`leave_done` (the message went out to its
        retransmit limit), or a timeout of the front's choosing."""
        if self.shared.leave is not None:
            return
        leave = self.shared.leave = LeaveIntent()
        me = self.table.get(self.name)
        if me is None:
            leave.done = True
            return
        self.rules.dead(messages.Dead(incarnation=me.incarnation, node=self.name, from_=self.name), now)
        if not any(not n.dead_or_left() and n.name != self.name for n in self.table.nodes):
            leave.done = True

    @property
    def leave_done(self) -> bool:
        return self.shared.leave is not None and self.shared.leave.done

    def set_meta(self, meta: bytes, now: float) -> None:
        """UpdateNode: new meta, announced with a new incarnation."""
        if len(meta) > META_MAX_SIZE:
            raise ValueError(f"node meta is at most {META_MAX_SIZE} bytes, not {len(meta)}")
        self._meta = meta
        if not self._started:
            return      # start() announces it
        alive = messages.Alive(incarnation=self.shared.next_incarnation(), node=self.name, addr=self.shared.addr,
                               port=self.shared.port, meta=meta, vsn=self.settings.vsn())
        self.rules.alive(alive, now, bootstrap=True)

    def broadcast_user(self, payload: bytes, name: str | None = None) -> None:
        """Piggyback a user message on our packets up to the retransmit
        limit; a named one replaces a queued one of the same name. One
        longer than :attr:`user_broadcast_budget` is refused (no packet can
        carry it), counted in ``user_broadcasts_dropped``."""
        self.outbox.broadcast_user(payload, name)

    def send_user(self, addr: Addr, payload: bytes, now: float) -> None:
        """A user message to one address by UDP (SendToAddress: rawSendMsgPacket,
        nothing piggybacked, so answers to a query never spend the
        transmissions its rebroadcast needs on the node that asked)."""
        self.outbox.send_raw(addr, bytes((MessageType.USER,)) + payload, None)

    # ----------------------------------------------------------- the outside

    def outgoing(self, now: float) -> list[tuple[bytes, Addr]]:
        """The datagrams to send at ``now`` (data, address), oldest first."""
        datagrams = self.shared.datagrams
        out = datagrams[:]
        datagrams.clear()
        return out

    def streams_to_open(self, now: float) -> list[OutgoingStream]:
        to_open = self.shared.to_open
        out = to_open[:]
        to_open.clear()
        return out

    def events(self) -> list[Event]:
        events = self.shared.events
        out = list(events)
        events.clear()
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
        return self.shared.incarnation

    # ------------------------------------------------------------- streams

    def receive_stream(self, data: bytes, addr: Addr, now: float) -> bytes | None:
        """A stream someone opened to us; see :meth:`~.streams.StreamSync.receive_stream`."""
        return self.streams.receive_stream(data, addr, now)

    def stream_response(self, stream_id: int, data: bytes, now: float) -> bool:
        """The reply so far on one of our streams; see :meth:`~.streams.StreamSync.stream_response`."""
        return self.streams.stream_response(stream_id, data, now)

    def stream_failed(self, stream_id: int, now: float, error: str = "connection failed") -> None:
        """One of our streams could not connect or broke before its reply."""
        self.streams.stream_failed(stream_id, now, error)

    def stream_working(self, key: Addr | int) -> bool:
        """Whether a stream has work left needing no more bytes; see :meth:`~.streams.StreamSync.stream_working`."""
        return self.streams.stream_working(key)

    def stream_turn(self, key: Addr | int, now: float) -> bytes | None:
        """Go on with a stream :meth:`stream_working` named; see :meth:`~.streams.StreamSync.stream_turn`."""
        return self.streams.stream_turn(key, now)

    def stream_closed(self, addr: Addr) -> None:
        """The front closed the stream ``addr`` opened to us."""
        self.streams.stream_closed(addr)

    def stats(self) -> dict[str, int]:
        out = dict(self.shared.counts)
        for reason, count in sorted(self.shared.bad_reasons.items()):
            out[f"bad_input.{reason}"] = count
        out["nodes"] = len(self.table)
        out["members"] = len(self.members())
        out["health_score"] = self.awareness.score
        out["broadcasts_queued"] = len(self.broadcasts)
        out["user_broadcasts_queued"] = len(self.user_broadcasts)
        return out

    def next_deadline(self) -> float | None:
        # the suspicions (hundreds while a large cluster churns) keep their
        # soonest; the pending acks and streams are few
        soonest = min(self._next_probe, self._next_gossip, self._next_push_pull, self.shared.suspicions.soonest())
        for handler in self.shared.acks.values():
            if handler.deadline < soonest:
                soonest = handler.deadline
        for stream in self.shared.streams.values():
            if stream.deadline < soonest:
                soonest = stream.deadline
        return None if soonest == math.inf else soonest

    def on_timer(self, now: float) -> None:
        """Do what is due at ``now``: expired acks, suspicions and streams,
        the probe, gossip and push/pull ticks. Early calls are harmless."""
        self.probing.expire(now)
        suspicions = self.shared.suspicions
        if suspicions.soonest() <= now:       # (else none is due: no need to look at each)
            for name, (sus, change) in list(suspicions.items()):
                if sus.deadline <= now:
                    self.rules.suspicion_expired(name, sus, change, now)
        streams = self.shared.streams
        for sid, stream in list(streams.items()):
            if stream.deadline <= now:
                del streams[sid]
                self.streams.stream_ended(stream, "timed out", now)
        s = self.settings
        if self._next_probe <= now:
            # Go's ticker drops the ticks a slow receiver misses, and keeps one.
            self._next_probe += s.probe_interval * (math.floor((now - self._next_probe) / s.probe_interval) + 1)
            self.probing.ticker(now)
        if self._next_gossip <= now:
            self._next_gossip += s.gossip_interval * (math.floor((now - self._next_gossip) / s.gossip_interval) + 1)
            clock = self.shared.telemetry.clock
            began = clock() if clock is not None else 0.0
            self.outbox.gossip(now)
            if clock is not None:
                self.shared.telemetry.gossip.add((clock() - began) * 1e3, now)
        if self._next_push_pull <= now:
            self._next_push_pull = now + push_pull_scale(s.push_pull_interval, len(self.table))
            peers = self.table.k_random(1, lambda n: n.name == self.name or n.state != NodeState.ALIVE)
            if peers:
                self.streams.open_push_pull(peers[0].address, False, now)

    # ------------------------------------------------------------- packets

    def receive(self, data: bytes, addr: Addr, now: float) -> None:
        """One UDP datagram from ``addr`` (ingestPacket, handleCommand)."""
        counts = self.shared.counts
        counts["packets_received"] += 1
        parts = self.fast_path.unwrap(data)
        if parts is None:
            s = self.settings
            try:
                keys = self.keyring.keys if self.keyring else ()
                buf = framing.open_packet(data, s.limits, keys=keys, label=s.label,
                                          verify_incoming=s.gossip_verify_incoming)
                parts, _cut = framing.split_messages(buf, s.limits)
            except GossipWireError as exc:
                self.shared.bad(exc.reason)
                return
        # the fast path's method called in place, not held: a bound method
        # held in a local is an object made for every packet
        fast_path = self.fast_path
        for part in parts:
            counts["messages_received"] += 1
            if part[0] == MessageType.USER:
                counts["user_messages_received"] += 1
                self.shared.event(UserMessage(part[1:], addr))
            elif not fast_path.message(part, addr, now):
                self._decoded(part, addr, now)

    def _decoded(self, part: bytes, addr: Addr, now: float) -> None:
        """A message the fast path left: decoded in full, to its handler by type."""
        try:
            msg = messages.decode(part, self.settings.limits)
        except GossipWireError as exc:
            self.shared.counts["messages_bad"] += 1
            self.shared.bad(exc.reason)
            return
        handler = self._handlers.get(type(msg))
        if handler is None:
            self.shared.counts["messages_bad"] += 1
            self.shared.bad("bad_type")
            return
        handler(msg, addr, now)

    def _alive(self, msg: messages.Alive, addr: Addr, now: float) -> None:
        if self.settings.protocol_version < 2 or msg.port == 0:
            msg.port = self.shared.port
        self.rules.alive(msg, now, bootstrap=False)

    def _suspect(self, msg: messages.Suspect, addr: Addr, now: float) -> None:
        self.rules.suspect(msg, now, sender=addr)

    def _dead(self, msg: messages.Dead, addr: Addr, now: float) -> None:
        self.rules.dead(msg, now, sender=addr)

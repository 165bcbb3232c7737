"""The gossip engine's state and what every part of it shares.

:class:`EngineCore` holds one memberlist node's state (its table, timers,
pending acks, streams, queues and counters) and the shared steps: queueing a
broadcast, piggybacking broadcasts on a message and wrapping a datagram
(memberlist's sendMsg, rawSendMsgPacket), gossip (state.go gossip), events
and counters. The parts built on it, each a module:

- :mod:`.streams` (``StreamSync``): TCP streams: push/pull and the join,
  answering others' streams, merging a remote state;
- :mod:`.probing` (``Probing``): the SWIM probe cycle with Lifeguard's
  nacks and awareness; answering pings and indirect pings;
- :mod:`.hotpath` (``HotPath``): the frequent messages without the general
  msgpack decode (a matcher, :mod:`.hot`);
- :mod:`.engine` (``GossipEngine``): the public entry points, the timers,
  packet dispatch and the node-state rules (alive, suspect, dead, refute).

Each part is a class that extends the one before (core, streams, probing,
hotpath, engine): one object, one state, and each file owns one concern. The node-state
rules are called from every part, so they are declared here and written in
:mod:`.engine`.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Union

from . import crypto
from . import framing
from . import matcher as hot_path
from . import label as label_mod
from . import messages
from .awareness import Awareness
from .broadcasts import BroadcastQueue
from .events import Event
from .layout import (ACK_SEQ_MAX_SIZE, COMPOUND_HEADER_OVERHEAD, COMPOUND_MAX_PARTS, COMPOUND_OVERHEAD,
                     CRC_MIN_PROTOCOL, ENCRYPT_OVERHEAD, LABEL_HEADER_SIZE, META_MAX_SIZE, USER_MSG_OVERHEAD,
                     MessageType, NodeState)
from .settings import GossipSettings
from .state import Addr, Node, NodeTable, ip_bytes, ip_text
from .suspicion import SuspicionTimers

#: the wrap of our sequence and incarnation numbers (Go's uint32)
UINT32_MASK = 0xFFFFFFFF

#: Our gossip is in doubt (and, with tell_accused="prober", an accusation we
#: start goes straight to the accused as well) when DOUBT_FAILURES or more of
#: our latest RECENT_PROBES probes failed; see Probing._gossip_in_doubt.
RECENT_PROBES = 8
DOUBT_FAILURES = 2

#: every counter, present from the start
COUNTERS = (
    "packets_received", "bad_input", "messages_received", "messages_bad", "packets_sent",
    "datagrams_dropped", "probes", "probes_failed", "probes_degraded", "pings_misdirected",
    "indirect_pings_sent", "indirect_pings_relayed", "acks_received", "nacks_received",
    "acks_refused", "suspects", "suspects_told", "confirmations_refused", "refutes", "alive_refused",
    "nodes_refused", "nodes_evicted", "dead_nodes_evicted", "nodes_reaped", "name_conflicts",
    "broadcasts_dropped", "user_broadcasts_dropped",
    "streams_opened", "streams_failed", "streams_refused", "streams_received", "streams_bad", "streams_dropped",
    "push_pulls",
    "push_pulls_refused", "events_dropped", "user_messages_received", "sends_refused")



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
class StreamRecord:
    id: int
    addr: Addr
    kind: str            # "push_pull" or "ping"
    deadline: float
    join: bool = False
    seq: int = 0


@dataclass(eq=False)
class Probe:
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
class Relay:
    """An indirect ping we make for a peer (handleIndirectPing)."""

    seq: int             # the requester's
    addr: Addr           # where its ack or nack goes
    nack: bool
    deadline: float


Handler = Union[Probe, Relay]


@dataclass
class LeaveIntent:
    token: object = field(default_factory=object)
    done: bool = False



class EngineCore:
    """The state of one memberlist node and the steps every part shares; see
    the module's docstring. Built only through
    :class:`~mcastmember.gossip.memberlist.engine.GossipEngine`."""

    def __init__(self, settings: GossipSettings, *, meta: bytes = b"", seed: int | None = None,
                 user_state: Callable[[bool], bytes] | None = None,
                 get_broadcasts: Callable[[int, int, int], list[bytes]] | None = None,
                 broadcasts_sent: Callable[[], None] | None = None,
                 hot: ModuleType | None = hot_path.DEFAULT):
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
        # No queued message may be longer than a gossip packet carries: one
        # that is could never be sent, nor retire, and would pin the queue.
        self.broadcasts.max_message = self.broadcast_budget
        self.user_broadcasts.max_message = self.user_broadcast_budget
        self.user_state = user_state
        self.get_broadcasts = get_broadcasts
        self.broadcasts_sent = broadcasts_sent
        #: the payload of our acks (PingDelegate.AckPayload)
        self.ack_payload = b""
        self._meta = meta
        self._me = _raw_name(settings.name)
        self._hot = hot if hot is not None and _hot_usable(settings) and self._me is not None else None
        self._label_header = label_mod.add_label(b"", settings.label)
        #: our ack's prefix for ack_payload (hot.ack adds the sequence number),
        #: and whether compressing an ack made from it is never worth trying
        empty = hot_path.ack_prefix(b"")
        self._ack_template = (b"", empty, framing.never_shorter(empty, ACK_SEQ_MAX_SIZE))
        self._addr = ip_bytes(settings.advertise_addr)
        self._own_address = ip_text(self._addr)      # what our refutations are named by
        self._port = settings.advertise_port
        self._seq = 0
        self._incarnation = 0
        self._leave: LeaveIntent | None = None
        self._started = False
        self._suspicions = SuspicionTimers()
        self._acks: dict[int, Handler] = {}
        self._probe: Probe | None = None
        self._probe_index = 0
        self._probe_buffered = False
        # whether each of our latest probes failed (Probing._gossip_in_doubt)
        self._probe_failures: deque[bool] = deque(maxlen=RECENT_PROBES)
        self._tell_every = settings.tell_accused == "every"
        self._streams: dict[int, StreamRecord] = {}
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

    # ------------------------------------------------- the node-state rules
    # Written in engine.py (GossipEngine); every part applies them.

    def _alive_node(self, a: messages.Alive, now: float, bootstrap: bool) -> None:
        raise NotImplementedError

    def _suspect_node(self, sus: messages.Suspect, now: float, sender: Addr | None = None) -> None:
        raise NotImplementedError

    def _dead_node(self, d: messages.Dead, now: float, sender: Addr | None = None) -> None:
        raise NotImplementedError

    def _doubt_began(self) -> None:
        raise NotImplementedError

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
                break
            self._send_raw(node.address, msgs[0] if len(msgs) == 1 else framing.make_compound(msgs), node)
        self._sent()

    @property
    def broadcast_budget(self) -> int:
        """The longest broadcast one gossip packet can carry: what
        :meth:`_gossip` has room for, less one compound part's length.
        GetBroadcasts could never pick a longer one, so the queues refuse it."""
        s = self.settings
        return max(0, s.udp_buffer_size - COMPOUND_HEADER_OVERHEAD - self._wrap_overhead(outgoing_only=False)
                   - COMPOUND_OVERHEAD)

    @property
    def user_broadcast_budget(self) -> int:
        """:attr:`broadcast_budget` for a user message (Serf's), which costs
        its type byte more."""
        return max(0, self.broadcast_budget - USER_MSG_OVERHEAD)

    def _broadcast(self, name: str, msg: bytes, token: object | None = None) -> None:
        queue = self.broadcasts
        before = queue.dropped + queue.oversize
        # Our own news (named by our name, or by our address for a
        # refutation): a full queue drops every relayed message before it.
        queue.queue(msg, name, token, own=name == self.name or name == self._own_address)
        self._counts["broadcasts_dropped"] += queue.dropped + queue.oversize - before
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

    def _send_msg(self, addr: Addr, msg: bytes, compressible: bool = True) -> None:
        """sendMsg: piggyback what broadcasts fit, as a compound
        (``compressible`` False: ``msg`` alone would never compress smaller)."""
        avail = self.settings.udp_buffer_size - len(msg) - COMPOUND_HEADER_OVERHEAD - self._wrap_overhead()
        extra = self._get_broadcasts(COMPOUND_OVERHEAD, avail, COMPOUND_MAX_PARTS - 1)
        if extra:
            self._send_raw(addr, framing.make_compound([msg, *extra]), None)
        else:
            self._send_raw(addr, msg, None, compressible)
        self._sent()

    def _sent(self) -> None:
        """A gossip round or a message with broadcasts piggybacked is out:
        tell ``broadcasts_sent``. memberlist calls a broadcast's Finished as
        GetBroadcasts takes its last transmission, but whoever waits on it
        runs on another goroutine, and in practice acts after the send in
        hand: Serf's leave puts memberlist's dead message on the next
        packet, seldom on the rest of that gossip round (seen on the wire)."""
        if self.broadcasts_sent is not None:
            self.broadcasts_sent()

    def _send_raw(self, addr: Addr, msg: bytes, node: Node | None, compressible: bool = True) -> None:
        """rawSendMsgPacket: compress if smaller, the CRC header for nodes
        that speak protocol 5, encryption, the label."""
        s = self.settings
        if node is None:
            node = self.table.get(addr[0])   # as memberlist: found only if named by its IP
        keyring = self.keyring if s.gossip_verify_outgoing else None
        packet = framing.encode_packet(msg, compress=s.enable_compression and compressible,
                                       crc=node is not None and node.pmax >= CRC_MIN_PROTOCOL, keyring=keyring,
                                       encryption_version=s.encryption_version, label=s.label)
        if len(self._datagrams) >= s.max_datagrams:
            self._counts["datagrams_dropped"] += 1
            return
        self._counts["packets_sent"] += 1
        self._datagrams.append((packet, addr))


    # ---------------------------------------------------------------- small

    def _ack_prefix(self) -> tuple[bytes, bool]:
        """Our ack's prefix for :attr:`ack_payload` (remade when it changes),
        and False if no ack made from it can compress smaller."""
        payload, prefix, plain = self._ack_template
        if payload is not self.ack_payload and payload != self.ack_payload:
            payload, prefix = self.ack_payload, hot_path.ack_prefix(self.ack_payload)
            plain = framing.never_shorter(prefix, ACK_SEQ_MAX_SIZE)
            self._ack_template = (payload, prefix, plain)
        return prefix, not plain

    def _next_seq(self) -> int:
        self._seq = (self._seq + 1) & UINT32_MASK
        return self._seq

    def _next_incarnation(self) -> int:
        self._incarnation = (self._incarnation + 1) & UINT32_MASK
        return self._incarnation

    def _event(self, event: Event) -> None:
        if len(self._events) >= self.settings.max_events:
            self._counts["events_dropped"] += 1
            return
        self._events.append(event)

    def is_member_at(self, name: str, addr: Addr) -> bool:
        """Whether ``name`` is a member we list alive or suspect, at ``addr``:
        what an address a packet names must be before we send anything
        there (an indirect ping's target, a query's asker, a relay's
        destination). Anyone can put any address in a datagram; only a
        member's own is one we may be asked to reach."""
        node = self.table.get(name)
        return node is not None and not node.dead_or_left() and node.address == addr

    def _bad(self, reason: str) -> None:
        self._counts["bad_input"] += 1
        self._bad_reasons[reason] = self._bad_reasons.get(reason, 0) + 1


def _raw_name(name: str) -> bytes | None:
    """Our name as the wire carries it, if the bytes say exactly this name
    (as the general decoder reads them back); else None."""
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return None
    return raw if raw.decode("utf-8", "surrogateescape") == name else None


def _hot_usable(settings: GossipSettings) -> bool:
    """The matcher accepts what the general decoder accepts only when the
    limits allow any string a packet can hold and a struct's fields."""
    limits = settings.limits
    return (limits.max_string >= max(limits.max_packet, limits.max_decompressed) and limits.max_container >= 8
            and limits.max_nesting >= 1)

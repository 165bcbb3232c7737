"""The gossip engine's shared state: what every part of it reads and writes.

:class:`EngineState` holds one memberlist node's state (its table, pending
acks, suspicions, streams, outgoing datagrams, events and counters) and the
small steps over it alone (sequence and incarnation numbers, an event, a
count of bad input). It calls nothing: the parts the engine owns each hold
it, and call one another only downward (see :mod:`.engine`)::

    GossipEngine --> FastPath --> Probing --> StreamSync --> NodeRules --> Outbox
      (engine)     (fast_path)   (probing)    (streams)       (rules)    (outbox)

Each part gets the parts below it that it uses when it is built; every part
holds this state.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Union

from . import crypto
from . import matcher as hot_path
from . import label as label_mod
from .awareness import Awareness
from .events import Event
from .settings import GossipSettings
from .state import Addr, Node, NodeTable, ip_bytes, ip_text
from .suspicion import SuspicionTimers
from .telemetry import EngineTelemetry

#: the wrap of our sequence and incarnation numbers (Go's uint32)
UINT32_MASK = 0xFFFFFFFF

#: Our gossip is in doubt (and, with tell_accused="prober", an accusation we
#: start goes straight to the accused as well) when DOUBT_FAILURES or more of
#: our latest RECENT_PROBES probes failed; see EngineState.gossip_in_doubt.
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
    started: float = 0.0     # when we asked for it (memberlist times its push/pulls)


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


class EngineState:
    """The state of one memberlist node that the engine's parts share; see
    the module's docstring. ``user_state`` gives the push/pull user state
    (Delegate.LocalState); ``hot`` is the chosen matcher, kept only where
    it reads exactly what the general decoder reads."""

    def __init__(self, settings: GossipSettings, *, seed: int | None = None,
                 user_state: Callable[[bool], bytes] | None = None,
                 hot: ModuleType | None = hot_path.DEFAULT):
        self.settings = settings
        self.name = settings.name
        self.rng = random.Random(seed)
        self.table = NodeTable(self.rng)
        self.awareness = Awareness(settings.awareness_max_multiplier)
        self.keyring = crypto.Keyring(settings.keys) if settings.keys else None
        self.user_state = user_state
        #: our name as the wire carries it (None: the matcher cannot say it)
        self.me = _raw_name(settings.name)
        self.hot = hot if hot is not None and _hot_usable(settings) and self.me is not None else None
        self.label_header = label_mod.add_label(b"", settings.label)
        self.addr = ip_bytes(settings.advertise_addr)
        self.own_address = ip_text(self.addr)      # what our refutations are named by
        self.port = settings.advertise_port
        self.seq = 0
        self.incarnation = 0
        self.leave: LeaveIntent | None = None
        self.suspicions = SuspicionTimers()
        self.acks: dict[int, Handler] = {}
        # whether each of our latest probes failed (gossip_in_doubt)
        self.probe_failures: deque[bool] = deque(maxlen=RECENT_PROBES)
        self.tell_every = settings.tell_accused == "every"
        #: our streams under way, and those for the front to open
        self.streams: dict[int, StreamRecord] = {}
        self.to_open: list[OutgoingStream] = []
        #: datagrams for the front to send, and events for the owner
        self.datagrams: list[tuple[bytes, Addr]] = []
        self.events: deque[Event] = deque()
        self.counts: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.bad_reasons: dict[str, int] = {}
        #: memberlist's timings and the counts it names that ours do not have
        self.telemetry = EngineTelemetry()

    def held(self) -> tuple[EngineState, str, GossipSettings, NodeTable, dict[str, int]]:
        """What every part keeps at hand: this state, our name, the
        settings, the node table and the counters (each part reads them
        on every message; none of them is ever replaced)."""
        return self, self.name, self.settings, self.table, self.counts

    def next_seq(self) -> int:
        self.seq = (self.seq + 1) & UINT32_MASK
        return self.seq

    def next_incarnation(self) -> int:
        self.incarnation = (self.incarnation + 1) & UINT32_MASK
        return self.incarnation

    def event(self, event: Event) -> None:
        if len(self.events) >= self.settings.max_events:
            self.counts["events_dropped"] += 1
            return
        self.events.append(event)

    def bad(self, reason: str) -> None:
        self.counts["bad_input"] += 1
        self.bad_reasons[reason] = self.bad_reasons.get(reason, 0) + 1

    def is_member_at(self, name: str, addr: Addr) -> bool:
        """Whether ``name`` is a member we list alive or suspect, at ``addr``:
        what an address a packet names must be before we send anything
        there (an indirect ping's target, a query's asker, a relay's
        destination). Anyone can put any address in a datagram; only a
        member's own is one we may be asked to reach."""
        node = self.table.get(name)
        return node is not None and not node.dead_or_left() and node.address == addr

    def gossip_in_doubt(self) -> bool:
        """Whether enough of our latest probes failed to doubt our own
        gossip, which goes to random nodes of the same table: a table an
        attacker filled with invented nodes, or a network cut around us.
        One failure is the target's (a node that crashed or stalls); two
        within a few probes seldom are in a working cluster. Not Lifeguard's
        missing nacks: the members asked to help nack only after their own
        probe timeout, so at memberlist's timings the nacks for a dead
        target arrive just after our probe ends, and every failed probe
        misses them."""
        return sum(self.probe_failures) >= DOUBT_FAILURES


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

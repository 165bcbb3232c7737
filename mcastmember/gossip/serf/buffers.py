"""Serf's recent-message buffers, sans-IO: what to accept, deliver and gossip on.

- :class:`IntentBuffer`: join/leave intents for nodes memberlist has not
  reported yet (serf.go ``recentIntents``, ``upsertIntent``, ``recentIntent``,
  ``reapIntents``);
- :class:`EventBuffer`: user events by event time (serf.go ``handleUserEvent``
  and ``UserEvent``);
- :class:`QueryBuffer`: query IDs by query time (serf.go ``handleQuery``) and
  the filters that decide whether this node answers (query.go
  ``shouldProcessQuery``).

Go's buffers grow without a bound inside one Lamport time; these cap every
collection and count what they refuse (``dropped``).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..errors import GossipWireError
from .clock import LamportClock
from .codec import SerfLimits
from .layout import (DEFAULT_EVENT_BUFFER, DEFAULT_QUERY_BUFFER, DEFAULT_RECENT_INTENT_TIMEOUT,
                     DEFAULT_USER_EVENT_SIZE_LIMIT, USER_EVENT_SIZE_LIMIT, SerfMessageType)
from .messages import EventEntry, EventSlot, FilterTag, Query, UserEvent, decode_filter, encode


#: the longest tag-filter pattern evaluated
MAX_FILTER_PATTERN = 256
#: a group repeated by *, + or {}: the shape of exponential backtracking
#: (``(a+)+``, ``(a|a)*``); a repeated group is rare in tag filters
_NESTED_QUANTIFIER = re.compile(r"(?<!\\)\)[*+{]")


@dataclass
class Intent:
    """A buffered intent: JOIN or LEAVE, its Lamport time, when it was seen."""

    kind: SerfMessageType
    ltime: int
    seen: float


class IntentBuffer:
    """The latest join or leave intent per node not yet a member.

    ``max_nodes`` bounds it: a new node beyond it pushes out the intent seen
    longest ago (``evicted`` counts those); Go bounds it only by time.
    """

    def __init__(self, timeout: float = DEFAULT_RECENT_INTENT_TIMEOUT, max_nodes: int = 10_000):
        self.timeout = timeout
        self.max_nodes = max_nodes
        self.evicted = 0
        # oldest first: an update moves the node to the end
        self._intents: OrderedDict[str, Intent] = OrderedDict()

    def __len__(self) -> int:
        return len(self._intents)

    def __contains__(self, node: object) -> bool:
        return node in self._intents

    def items(self) -> list[tuple[str, Intent]]:
        return list(self._intents.items())

    def upsert(self, node: str, kind: SerfMessageType, ltime: int, now: float) -> bool:
        """Keep the intent if it is the first for ``node`` or newer than the one
        kept; True if kept (Serf then gossips it on)."""
        current = self._intents.get(node)
        if current is not None and ltime <= current.ltime:
            return False
        if current is None and len(self._intents) >= self.max_nodes:
            self._intents.popitem(last=False)
            self.evicted += 1
        self._intents[node] = Intent(kind, ltime, now)
        self._intents.move_to_end(node)
        return True

    def recent(self, node: str, kind: SerfMessageType) -> int | None:
        """The Lamport time of ``node``'s buffered intent of this kind, if any."""
        intent = self._intents.get(node)
        return intent.ltime if intent is not None and intent.kind == kind else None

    def reap(self, now: float) -> int:
        """Forget intents seen more than ``timeout`` ago; return how many."""
        expired = [node for node, intent in self._intents.items() if now - intent.seen > self.timeout]
        for node in expired:
            del self._intents[node]
        return len(expired)


class EventBuffer:
    """Recent user events, one slot per event time modulo ``size`` (Serf's
    EventBuffer, 512 by default), and the event clock.

    ``min_time``: events before it are ignored (a join that ignores old events).
    """

    def __init__(self, size: int = DEFAULT_EVENT_BUFFER, max_per_slot: int = SerfLimits().max_events_per_slot,
                 clock: LamportClock | None = None):
        if size < 1:
            raise ValueError("the event buffer needs at least one slot")
        self.clock = clock or LamportClock()
        self.min_time = 0
        self.max_per_slot = max_per_slot
        self.dropped = 0
        self._slots: list[EventSlot | None] = [None] * size

    @property
    def size(self) -> int:
        return len(self._slots)

    def slots(self) -> list[EventSlot | None]:
        """Every slot, as Serf's push/pull sends them (None where empty)."""
        return list(self._slots)

    def handle(self, msg: UserEvent) -> bool:
        """An event from the network (or our own): True if it is new, to be
        delivered and gossiped on; False if old or already seen."""
        self.clock.witness(msg.ltime)
        if msg.ltime < self.min_time:
            return False
        now = self.clock.time()
        if now > self.size and msg.ltime < now - self.size:
            return False
        index = msg.ltime % self.size
        slot = self._slots[index]
        entry = EventEntry(name=msg.name, payload=msg.payload)
        if slot is not None and slot.ltime == msg.ltime:
            if entry in slot.events:
                return False
            if len(slot.events) >= self.max_per_slot:
                self.dropped += 1
                return False
        else:
            slot = EventSlot(ltime=msg.ltime)
            self._slots[index] = slot
        slot.events.append(entry)
        return True

    def new_event(self, name: str, payload: bytes, coalesce: bool = False,
                  size_limit: int = DEFAULT_USER_EVENT_SIZE_LIMIT) -> tuple[UserEvent, bytes]:
        """Our own event, as Serf.UserEvent makes it: the message at the current
        event time (then the clock moves on), taken into the buffer, and its
        bytes to broadcast. Raises ValueError if it is over ``size_limit`` or
        Serf's 9 KiB before or after encoding, as Serf refuses it."""
        raw_size = len(name.encode("utf-8", "surrogateescape")) + len(payload)
        for limit, what in ((size_limit, "configured"), (USER_EVENT_SIZE_LIMIT, "sane")):
            if raw_size > limit:
                raise ValueError(f"user event exceeds {what} limit of {limit} bytes before encoding")
        msg = UserEvent(ltime=self.clock.time(), name=name, payload=payload, cc=coalesce)
        raw = encode(msg)
        for limit, what in ((size_limit, "configured"), (USER_EVENT_SIZE_LIMIT, "sane")):
            if len(raw) > limit:
                raise ValueError(f"encoded user event exceeds {what} limit of {limit} bytes")
        self.clock.increment()
        self.handle(msg)
        return msg, raw


@dataclass
class _QuerySlot:
    ltime: int
    ids: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class QueryOutcome:
    """What to do with a query: ``new`` (first time seen: deliver/answer it if
    the filters select us) and ``rebroadcast`` (gossip it on)."""

    new: bool
    rebroadcast: bool


class QueryBuffer:
    """Recent query IDs, one slot per query time modulo ``size`` (Serf's
    QueryBuffer, 512 by default), and the query clock."""

    def __init__(self, size: int = DEFAULT_QUERY_BUFFER, max_per_slot: int = SerfLimits().max_events_per_slot,
                 clock: LamportClock | None = None):
        if size < 1:
            raise ValueError("the query buffer needs at least one slot")
        self.clock = clock or LamportClock()
        self.min_time = 0
        self.max_per_slot = max_per_slot
        self.dropped = 0
        self._slots: list[_QuerySlot | None] = [None] * size

    @property
    def size(self) -> int:
        return len(self._slots)

    def handle(self, query: Query) -> QueryOutcome:
        """A query from the network (or our own), by Serf's rules."""
        old = QueryOutcome(new=False, rebroadcast=False)
        self.clock.witness(query.ltime)
        if query.ltime < self.min_time:
            return old
        now = self.clock.time()
        if now > self.size and query.ltime < now - self.size:
            return old
        index = query.ltime % self.size
        slot = self._slots[index]
        if slot is not None and slot.ltime == query.ltime:
            if query.id in slot.ids:
                return old
            if len(slot.ids) >= self.max_per_slot:
                self.dropped += 1
                return old
        else:
            slot = _QuerySlot(query.ltime)
            self._slots[index] = slot
        slot.ids.append(query.id)
        return QueryOutcome(new=True, rebroadcast=not query.no_broadcast)


def should_process_query(filters: Iterable[bytes], node: str, tags: Mapping[str, str],
                         limits: SerfLimits | None = None) -> bool:
    """Whether a query's filters select this node (query.go shouldProcessQuery):
    every node filter must name it, every tag filter's regexp must match its
    tag (a missing tag is ""). An undecodable filter, a bad regexp or an unknown
    filter type means no, as in Go. Go's regexp (RE2) and Python's ``re``
    agree on the usual patterns; RE2-only syntax counts as a bad regexp.

    RE2 runs in linear time, Python's ``re`` backtracks: a pattern from the
    network that could backtrack exponentially (any repeated group, as
    ``(a+)+`` or ``(a|a)*``) or is over 256 characters is refused (no).
    """
    limits = limits or SerfLimits()
    for raw in filters:
        try:
            flt = decode_filter(raw, limits)
        except GossipWireError:
            return False
        if isinstance(flt, FilterTag):
            if len(flt.expr) > MAX_FILTER_PATTERN or _NESTED_QUANTIFIER.search(flt.expr):
                return False
            try:
                if re.search(flt.expr, tags.get(flt.tag, "")) is None:
                    return False
            except re.error:
                return False
        elif node not in flt:
            return False
    return True

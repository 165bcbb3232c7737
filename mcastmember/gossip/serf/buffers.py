"""Serf's recent-message buffers, sans-IO: what to accept, deliver and gossip on.

- :class:`IntentBuffer`: join/leave intents for nodes memberlist has not
  reported yet (serf.go ``recentIntents``, ``upsertIntent``, ``recentIntent``,
  ``reapIntents``);
- :class:`UserEventBuffer`: user events by event time (serf.go ``handleUserEvent``
  and ``UserEvent``);
- :class:`QueryBuffer`: query IDs by query time (serf.go ``handleQuery``) and
  the filters that decide whether this node answers (query.go
  ``shouldProcessQuery``).

Go's buffers grow without a bound inside one Lamport time; these cap every
collection and count what they refuse (``dropped``).
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ..memberlist.errors import GossipWireError
from .clock import LamportClock
from .codec import SerfLimits, go_bytes
from .layout import (DEFAULT_EVENT_BUFFER, DEFAULT_QUERY_BUFFER, DEFAULT_RECENT_INTENT_TIMEOUT,
                     DEFAULT_USER_EVENT_SIZE_LIMIT, USER_EVENT_SIZE_LIMIT, SerfMessageType)
from .messages import EventEntry, EventSlot, FilterTag, Query, UserEvent, decode_filter, encode

log = logging.getLogger("mcastmember")

#: the names and payloads the recent-event buffer holds, in bytes: Go's has
#: no bound but its 512 slots (of any number of events each). 16 MiB keeps
#: three of Serf's largest events (9 KiB) at every one of the 512 event
#: times; past it the oldest times are forgotten first.
DEFAULT_EVENT_BUFFER_BYTES = 16 << 20

#: the tag-filter patterns of one query, in bytes all together: past it the
#: query selects nobody. A Serf query with its defaults carries at most 1 KiB
#: in all (QuerySizeLimit), so ~880 bytes of patterns; but RE2 parses Unicode
#: classes at up to ~50 us a byte (``(?i)\PL`` repeated: 25 ms at 512 bytes,
#: 55 ms at 1 KiB, measured), and a query must be decided well within 50 ms
#: on the I/O thread, however many filters it has (one UDP packet can carry
#: a hundred: 1.1 s with no bound on the sum)
MAX_FILTER_PATTERN = 512
#: compiled patterns kept (and patterns RE2 refused), least recently used out
#: first: a stream of distinct patterns from the network costs at most this many
FILTER_CACHE_SIZE = 128
#: RE2's memory budget for one pattern (its program and its DFA's states):
#: a pattern over it is refused. 256 KiB still compiles ``.{0,1000}``; with
#: RE2's default 8 MiB, 128 hostile patterns held 179 MiB, here 4 MiB
FILTER_MAX_MEM = 256 * 1024
#: pattern bytes compiled anew per second (and at once), for the whole
#: process: RE2 parses at up to ~50 us a byte, so a flood of distinct
#: patterns (a datagram holds a hundred queries) costs at most ~0.1 s of CPU
#: a second. Past it a pattern not in the cache matches nothing (counted in
#: ``over_budget``); a cluster's own filters repeat, and are in the cache.
FILTER_COMPILE_BYTES_PER_S = 2048
#: what compiling any pattern costs of that budget at least: a flood of
#: short distinct patterns compiles at most 32 a second, so it takes
#: seconds to push a cluster's own patterns out of the cache
FILTER_MIN_COMPILE_COST = 64
#: bytes that are not UTF-8 reach a tag as lone surrogates (go_str); Go's
#: regexp reads each as U+FFFD
_NOT_UTF8_AS_FFFD = dict.fromkeys(range(0xD800, 0xE000), 0xFFFD)


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


class UserEventBuffer:
    """Recent user events, one slot per event time modulo ``size`` (Serf's
    UserEventBuffer, 512 by default), and the event clock.

    ``min_time``: events before it are ignored (a join that ignores old events).
    """

    def __init__(self, size: int = DEFAULT_EVENT_BUFFER, max_per_slot: int = SerfLimits().max_events_per_slot,
                 clock: LamportClock | None = None, max_bytes: int = DEFAULT_EVENT_BUFFER_BYTES):
        if size < 1:
            raise ValueError("the event buffer needs at least one slot")
        if max_bytes < USER_EVENT_SIZE_LIMIT:
            raise ValueError(f"the event buffer must hold at least one event of {USER_EVENT_SIZE_LIMIT} bytes")
        self.clock = clock or LamportClock()
        self.min_time = 0
        self.max_per_slot = max_per_slot
        self.max_bytes = max_bytes
        #: events refused: a full slot, or bigger than any Serf member sends
        self.dropped = 0
        #: older event times forgotten to keep the bytes within ``max_bytes``
        self.evicted = 0
        #: the names and payloads held, in bytes
        self.bytes = 0
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
        cost = _entry_bytes(msg.name, msg.payload)
        if cost > USER_EVENT_SIZE_LIMIT:
            # No Serf member sends one (Serf.UserEvent refuses it): only a
            # forged event is this big, and holding it would cost the
            # buffer's bytes for the legitimate ones.
            self.dropped += 1
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
            if slot is not None:
                self.bytes -= _slot_bytes(slot)
            slot = EventSlot(ltime=msg.ltime)
            self._slots[index] = slot
        slot.events.append(entry)
        self.bytes += cost
        if self.bytes > self.max_bytes:
            self._forget_oldest(keep=index)
        return True

    def _forget_oldest(self, keep: int) -> None:
        """Empty the slots of the oldest event times (never slot ``keep``, the
        newest event's) until the bytes are within ``max_bytes``: a flood of
        big events pushes out older ones, as Serf's ring does with time,
        never the new one (our own included)."""
        held = sorted((slot.ltime, index) for index, slot in enumerate(self._slots)
                      if slot is not None and index != keep)
        for _, index in held:
            if self.bytes <= self.max_bytes:
                return
            slot = self._slots[index]
            assert slot is not None
            self.bytes -= _slot_bytes(slot)
            self._slots[index] = None
            self.evicted += 1

    def new_event(self, name: str, payload: bytes, coalesce: bool = False,
                  size_limit: int = DEFAULT_USER_EVENT_SIZE_LIMIT) -> tuple[UserEvent, bytes]:
        """Our own event, as Serf.UserEvent makes it: the message at the current
        event time (then the clock moves on), taken into the buffer, and its
        bytes to broadcast. Raises ValueError if it is over ``size_limit`` or
        Serf's 9 KiB before or after encoding, as Serf refuses it."""
        raw_size = _entry_bytes(name, payload)
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


def _entry_bytes(name: str, payload: bytes) -> int:
    """What an event costs the buffer: its name's and payload's bytes, as
    Serf counts them against its size limits."""
    return len(name.encode("utf-8", "surrogateescape")) + len(payload)


def _slot_bytes(slot: EventSlot) -> int:
    return sum(_entry_bytes(e.name, e.payload) for e in slot.events)


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


class TagRegexps:
    """The regexps of query tag filters, as Go's regexp.MatchString decides
    them: by RE2 (google-re2: Go's syntax, linear time, an unanchored search),
    compiled once and kept (at most ``size``, least recently used out first).

    A pattern RE2 rejects (a backreference, a lookaround, ``\\C``, invalid
    UTF-8, or a program over RE2's memory budget :data:`FILTER_MAX_MEM`)
    matches nothing, as Go's compile error does; so do patterns over
    :data:`MAX_FILTER_PATTERN` bytes all together.
    Without google-re2 every tag filter matches nothing (Python's ``re``
    backtracks: a network pattern must never reach it), with one warning.

    Counters: ``compiled`` (patterns looked at anew: not in the cache),
    ``refused`` (filters decided no because their pattern is unusable or
    over the bound), ``evicted`` (patterns pushed out of the cache),
    ``unavailable`` (filters decided no for want of google-re2),
    ``over_budget`` (filters decided no because compiling their new pattern
    would pass :data:`FILTER_COMPILE_BYTES_PER_S`). Safe to share between
    threads.
    """

    def __init__(self, size: int = FILTER_CACHE_SIZE, compile_rate: int = FILTER_COMPILE_BYTES_PER_S):
        if size < 1:
            raise ValueError("the tag filter cache needs at least one entry")
        if compile_rate < MAX_FILTER_PATTERN:
            raise ValueError(f"the compile rate must allow one query's patterns ({MAX_FILTER_PATTERN} bytes)")
        self.size = size
        self.compile_rate = compile_rate
        self.compiled = self.refused = self.evicted = self.unavailable = self.over_budget = 0
        #: pattern bytes that may be compiled now, and when it was last filled
        self._budget = float(compile_rate)
        self._budget_at: float | None = None
        self._cache: OrderedDict[bytes, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._re2: ModuleType | None = None
        self._options: Any = None
        self._missing = False

    def __len__(self) -> int:
        return len(self._cache)

    def search(self, pattern: str, text: str, now: float | None = None) -> bool:
        """Whether ``pattern`` matches somewhere in ``text`` (both Go strings)."""
        return self.all_match([(pattern, text)], now)

    def all_match(self, filters: Iterable[tuple[str, str]], now: float | None = None) -> bool:
        """Whether every ``(pattern, text)`` matches, as one query's tag
        filters must: no if the patterns are over :data:`MAX_FILTER_PATTERN`
        bytes all together. ``now`` (seconds, monotonic) spends the compile
        budget on patterns not in the cache (none given: no budget)."""
        if now is not None:
            self._refill(now)
        spent = 0
        for pattern, text in filters:
            raw = go_bytes(pattern)
            spent += len(raw)
            if spent > MAX_FILTER_PATTERN:
                with self._lock:
                    self.refused += 1
                return False
            regexp = self._regexp(raw, metered=now is not None)
            if regexp is None:
                return False
            try:
                data = text.encode("utf-8")
            except UnicodeEncodeError:
                data = text.translate(_NOT_UTF8_AS_FFFD).encode("utf-8")
            if regexp.search(data) is None:
                return False
        return True

    def _refill(self, now: float) -> None:
        with self._lock:
            if self._budget_at is None or now < self._budget_at - 1.0:
                # the first, or a node on another clock (a simulator's):
                # as if long unused
                self._budget = float(self.compile_rate)
            elif now > self._budget_at:
                elapsed = now - self._budget_at
                self._budget = min(float(self.compile_rate), self._budget + elapsed * self.compile_rate)
            else:
                # members of one process on one clock, their threads
                # interleaved: a little behind refills nothing
                return
            self._budget_at = now

    def _regexp(self, pattern: bytes, metered: bool = False) -> Any:
        """The compiled pattern, or None where it matches nothing (or, when
        ``metered``, where compiling it would overspend the budget)."""
        with self._lock:
            if pattern in self._cache:
                self._cache.move_to_end(pattern)
                regexp = self._cache[pattern]
                self.refused += regexp is None
                return regexp
            if metered:
                cost = max(len(pattern), FILTER_MIN_COMPILE_COST)
                if self._budget < cost:
                    self.over_budget += 1
                    return None
                self._budget -= cost
        re2 = self._engine()
        if re2 is None:
            with self._lock:
                self.unavailable += 1
            return None
        regexp = None
        if not _byte_escape(pattern):
            try:
                regexp = re2.compile(pattern, self._options)
            except re2.error:
                pass
        with self._lock:
            self.compiled += 1
            self.refused += regexp is None
            self._cache[pattern] = regexp
            if len(self._cache) > self.size:
                self._cache.popitem(last=False)
                self.evicted += 1
        return regexp

    def _engine(self) -> ModuleType | None:
        """google-re2, imported on the first tag filter; None (warned once) if missing."""
        with self._lock:
            if self._re2 is None and not self._missing:
                try:
                    re2 = importlib.import_module("re2")
                except ImportError:
                    self._missing = True
                    log.warning("query tag filters need google-re2, which is not installed: every tag filter "
                                "matches nothing, so this node answers no query that filters on tags "
                                "(pip install 'mcastmember[gossip]')")
                    return None
                options = re2.Options()
                options.max_mem = FILTER_MAX_MEM
                options.log_errors = False     # a bad pattern from the network is counted, not printed
                options.never_capture = True   # only whether it matches: no submatch to track
                self._options, self._re2 = options, re2
            return self._re2


def _byte_escape(pattern: bytes) -> bool:
    """Whether ``pattern`` has RE2's ``\\C`` (any byte), which Go rejects
    (outside ``\\Q...\\E``, where it is two literal characters)."""
    at = pattern.find(b"\\")
    while at >= 0:
        escaped = pattern[at + 1:at + 2]
        if escaped == b"C":
            return True
        if escaped == b"Q":
            at = pattern.find(b"\\E", at + 2)
            if at < 0:
                return False
        at = pattern.find(b"\\", at + 2)
    return False


#: the process's compiled patterns: every node's filters share them
TAG_REGEXPS = TagRegexps()


def should_process_query(filters: Iterable[bytes], node: str, tags: Mapping[str, str],
                         limits: SerfLimits | None = None, *, regexps: TagRegexps | None = None,
                         now: float | None = None) -> bool:
    """Whether a query's filters select this node (query.go shouldProcessQuery):
    every node filter must name it, every tag filter's regexp must match its
    tag (a missing tag is ""). An undecodable filter, a bad regexp or an unknown
    filter type means no, as in Go. Tag filters are Go regexps, decided by
    RE2 through ``regexps`` (:data:`TAG_REGEXPS` by default; see
    :class:`TagRegexps`), in linear time, once every filter has been read
    (the answer is the same, and the cheap checks come first). ``now``
    meters the compiling of patterns not seen before (see
    :data:`FILTER_COMPILE_BYTES_PER_S`).
    """
    limits = limits or SerfLimits()
    if regexps is None:
        regexps = TAG_REGEXPS
    searches: list[tuple[str, str]] = []
    for raw in filters:
        try:
            flt = decode_filter(raw, limits)
        except GossipWireError:
            return False
        if isinstance(flt, FilterTag):
            searches.append((flt.expr, tags.get(flt.tag, "")))
        elif node not in flt:
            return False
    return regexps.all_match(searches, now)

"""Membership events and their delivery: ``MemberEvent`` with its kinds
and reasons, the ``EventsLost`` marker every front puts where events were
dropped, the buffer of one reader's waiting events, bounded in count and
bytes (each asyncio stream's), and the queue built on it between a
threaded service's driver and its dispatcher. The buffer and the queue are
generic over the event type: the gossip fronts use them too, with their
own measure of an event's bytes."""

from __future__ import annotations

import collections
import enum
import threading
import time
from typing import TYPE_CHECKING, Any, Generic, Literal, NoReturn, TypeVar

from ..wire.errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from .member import Member

# The events an EventBuffer holds (MemberEvent here, the gossip node's in
# the gossip fronts).
E = TypeVar("E")
# What else an EventQueue carries in order with the events (the threaded
# services' listener registrations).
M = TypeVar("M")


class _Text(str, enum.Enum):
    """Members equal the strings they stand for ("added" == EventKind.ADDED)
    and print as them, on every Python version."""

    __str__ = str.__str__
    # typeshed types str.__format__ unbound as taking one argument; it is
    # the very method str itself uses.
    __format__ = str.__format__  # type: ignore[assignment]


class EventKind(_Text):
    """What happened to a member."""

    ADDED = "added"
    UPDATED = "updated"      # its domain, payload, ports or command changed
    REMOVED = "removed"
    # Past its drop time and being asked directly (verify=True): still a
    # member until the answer.
    SUSPECT = "suspect"


class Reason(_Text):
    """Why a member was removed."""

    SHUTDOWN = "shutdown"    # it said goodbye
    EXPIRED = "expired"      # silent past its drop time (and its probe failed, with verify)
    FILTERED = "filtered"    # it moved to another domain (filter_domain)
    STOPPED = "stopped"      # we stopped: every member leaves our table
    UNLISTED = "unlisted"    # its address left DNS (dns_members)


class MemberEvent:
    """A change in membership: ``kind`` (an EventKind: "added", "updated",
    "removed", "suspect"), the ``member`` as of the change, ``reason`` (a
    Reason for removals, else None), ``previous`` (the member before an
    update, else None) and ``time`` (wall-clock seconds since the epoch of
    the decision). Immutable; equal and hashed by kind, member, reason and
    previous (not time)."""

    __slots__ = ("kind", "member", "reason", "previous", "time")
    kind: EventKind
    member: Member
    reason: Reason | None
    previous: Member | None
    time: float

    def __init__(self, kind: EventKind | str, member: Member, reason: Reason | str | None = None,
                 previous: Member | None = None, time: float | None = None) -> None:
        init = object.__setattr__
        init(self, "kind", EventKind(kind))
        init(self, "member", member)
        init(self, "reason", None if reason is None else Reason(reason))
        init(self, "previous", previous)
        init(self, "time", _now() if time is None else time)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("MemberEvent is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("MemberEvent is immutable")

    def __reduce__(self) -> tuple[type[MemberEvent],
                                  tuple[EventKind, Member, Reason | None, Member | None, float]]:
        return (MemberEvent, (self.kind, self.member, self.reason, self.previous, self.time))

    def _key(self) -> tuple[EventKind, Member, Reason | None, Member | None]:
        return (self.kind, self.member, self.reason, self.previous)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MemberEvent):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        reason = f", {self.reason}" if self.reason else ""
        return f"MemberEvent({self.kind}{reason}, {self.member!r})"

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``--json`` line: event, reason, member, previous (for
        updates, else null) and time (ISO-8601, UTC, milliseconds)."""
        return {"event": str(self.kind), "reason": None if self.reason is None else str(self.reason),
                "member": self.member.to_dict(),
                "previous": None if self.previous is None else self.previous.to_dict(),
                "time": iso_time(self.time)}


_now = time.time


def iso_time(seconds: float) -> str:
    """``seconds`` since the epoch as ISO-8601 in UTC with milliseconds."""
    import datetime     # only who prints events needs it (tests/test_startup.py)
    stamp = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class EventsLost:
    """Stands in an event stream where events were dropped because its reader
    fell behind. Resynchronise from ``members()``; later events follow."""

    # Typed so that ``event.member is None`` tells it from a MemberEvent.
    kind: Literal["events_lost"] = "events_lost"
    member: None = None
    reason: None = None

    def __init__(self, count: int) -> None:
        self.count = count

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EventsLost):
            return NotImplemented
        return self.count == other.count

    def __repr__(self) -> str:
        return f"EventsLost({self.count})"


# The bound in bytes of each reader's waiting events (the threaded services'
# listener queue, each asyncio stream), as the front's cost function counts
# them (``event_bytes`` here): 16 MiB, a few hundred events of the largest
# members, tens of thousands of usual ones. The gossip fronts share it.
EVENT_QUEUE_BYTES = 16 << 20


def event_bytes(event: MemberEvent) -> int:
    """What a waiting event holds that the network chose the size of: the
    payload, domain and command bytes of its member, and of the member
    before for an update. (The rest of an event is a few hundred bytes,
    which the bound in count covers.)"""
    total = 0
    for member in (event.member, event.previous):
        if member is not None:
            total += len(member.payload) + len(member.domain) + len(member.command)
    return total


def queue_bounds(size: int, max_bytes: int, names: tuple[str, str]) -> tuple[int, int]:
    """``(size, max_bytes)`` checked: positive whole numbers (``names`` are
    the settings' names, for the ConfigurationError)."""
    for value, name in zip((size, max_bytes), names):
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ConfigurationError(f"{name} must be a positive whole number")
    return int(size), int(max_bytes)


class EventBuffer(Generic[E, M]):
    """The events waiting for one reader, bounded in count (``size``) and in
    bytes (``max_bytes``, as ``cost`` counts each event; one event always
    fits). Never blocks and never raises: past either bound events are
    dropped and counted (``dropped``), and the reader gets one EventsLost
    where the gap is, once it has caught up. Not locked: each front keeps it
    on one thread (asyncio) or under its own lock (EventQueue)."""

    def __init__(self, size: int, max_bytes: int, cost: Callable[[E], int]) -> None:
        self._size = size
        self._max_bytes = max_bytes
        self._cost = cost
        # Each item with the bytes it was counted for (0 for a marker), so
        # that taking it needs neither its type nor the cost again.
        self._items: collections.deque[tuple[E | M, int]] = collections.deque()
        self._lost = 0
        self.bytes = 0          # the cost of the events waiting
        self.dropped = 0

    def offer(self, event: E) -> None:
        cost = self._cost(event)
        # Keep the gap in one place: drop until it has been reported.
        if (self._lost or len(self._items) >= self._size
                or (self.bytes and self.bytes + cost > self._max_bytes)):
            self._lost += 1
            self.dropped += 1
        else:
            self._items.append((event, cost))
            self.bytes += cost

    def put_marker(self, item: M) -> None:
        """``item`` in order with the events, past the bounds: a marker the
        reader acts on (a listener's registration), never dropped."""
        self._items.append((item, 0))

    def take(self) -> E | EventsLost | M | None:
        """The next event or marker, an EventsLost, or None when empty."""
        if self._items:
            item, cost = self._items.popleft()
            self.bytes -= cost
            return item
        if self._lost:
            lost, self._lost = self._lost, 0
            return EventsLost(lost)
        return None

    def __bool__(self) -> bool:
        return bool(self._items or self._lost)


class EventQueue(Generic[E, M]):
    """An EventBuffer between threads: the producer never blocks, the
    reader waits. ``close()`` ends the reader after what is queued."""

    def __init__(self, size: int, max_bytes: int, cost: Callable[[E], int]) -> None:
        self._buffer: EventBuffer[E, M] = EventBuffer(size, max_bytes, cost)
        self._closed = False
        self._cond = threading.Condition()

    @property
    def dropped(self) -> int:
        return self._buffer.dropped

    @property
    def bytes(self) -> int:
        """The cost of the events waiting."""
        return self._buffer.bytes

    def put_many(self, events: Iterable[E]) -> None:
        with self._cond:
            for event in events:
                self._buffer.offer(event)
            self._cond.notify()

    def put_marker(self, item: M) -> None:
        """``item`` in order with the events, past the bounds (see EventBuffer)."""
        with self._cond:
            self._buffer.put_marker(item)
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def get(self) -> E | EventsLost | M | None:
        """The next event, an EventsLost, or None once closed and drained."""
        with self._cond:
            while not (self._buffer or self._closed):
                self._cond.wait()
            return self._buffer.take()

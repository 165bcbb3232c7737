"""Events on their way to the application, the same for both protocols:
the ``EventsLost`` marker every front puts where events were dropped, the
buffer of one reader's waiting events, bounded in count and in bytes through
a cost function the protocol gives (each asyncio stream's), and the queue
built on it between a threaded service's driver and its dispatcher. Generic
over the event type: each protocol's fronts bring their own events and their
own measure of an event's bytes."""

from __future__ import annotations

import collections
import threading
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

from .errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

# The events an EventBuffer holds (each protocol's own).
E = TypeVar("E")
# What else an EventQueue carries in order with the events (the threaded
# services' listener registrations).
M = TypeVar("M")


def iso_time(seconds: float) -> str:
    """``seconds`` since the epoch as ISO-8601 in UTC with milliseconds."""
    import datetime     # only who prints events needs it: imported late, for start-up time
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
# them (each protocol's ``event_bytes``): 16 MiB, a few hundred events of the largest
# members, tens of thousands of usual ones.
EVENT_QUEUE_BYTES = 16 << 20


def queue_bounds(size: int, max_bytes: int, names: tuple[str, str]) -> tuple[int, int]:
    """``(size, max_bytes)`` checked: whole numbers, at least 1 (``names``
    are the settings' names, for the ConfigurationError, which shows the
    value given)."""
    for value, name in zip((size, max_bytes), names):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigurationError(f"{name} must be a whole number, not {value!r}")
        if value < 1:
            raise ConfigurationError(f"{name} must be at least 1, not {value!r}")
    return size, max_bytes


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

"""Delivering events to a reader that may fall behind: the ``EventsLost``
marker both fronts put where events were dropped, and the bounded queue
between the threaded service's driver and its dispatcher."""

import collections
import threading


class EventsLost:
    """Stands in an event stream where events were dropped because its reader
    fell behind. Resynchronise from ``members()``; later events follow."""

    kind = "events_lost"
    member = None
    reason = None

    def __init__(self, count):
        self.count = count

    def __eq__(self, other):
        if not isinstance(other, EventsLost):
            return NotImplemented
        return self.count == other.count

    def __repr__(self):
        return f"EventsLost({self.count})"


class EventQueue:
    """Bounded, and never blocks the producer: past ``size`` events are
    dropped and counted, and the reader gets one EventsLost where the gap is,
    once it has caught up. ``close()`` ends the reader after what is queued."""

    def __init__(self, size):
        self._size = size
        self._items = collections.deque()
        self._lost = 0
        self._closed = False
        self._cond = threading.Condition()
        self.dropped = 0

    def put_many(self, events):
        with self._cond:
            for event in events:
                # Keep the gap in one place: drop until it has been reported.
                if self._lost or len(self._items) >= self._size:
                    self._lost += 1
                    self.dropped += 1
                else:
                    self._items.append(event)
            self._cond.notify()

    def close(self):
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def get(self):
        """The next event, an EventsLost, or None once closed and drained."""
        with self._cond:
            while not (self._items or self._lost or self._closed):
                self._cond.wait()
            if self._items:
                return self._items.popleft()
            if self._lost:
                lost, self._lost = self._lost, 0
                return EventsLost(lost)
            return None

"""The listeners of a threaded front and the thread that calls them, the
same for both protocols.

A threaded service's driver puts the events in an EventQueue (bounded in
count and bytes: past either, an EventsLost where the gap is); one
dispatcher thread takes them out and calls every listener with each, so a
slow or failing listener never holds up the driver. A listener added with
``replay`` is registered by the dispatcher itself, at its place in the
queue, after it was given the members of that moment: it misses nothing
and sees nothing twice.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from .events import EventQueue, EventsLost

# The events a front's listeners are given (each protocol's own).
E = TypeVar("E")


class Replay(Generic[E]):
    """In the event queue: give ``listener`` the ``events`` (the members as
    of this point of the queue), then register it."""

    __slots__ = ("events", "listener")

    def __init__(self, listener: Callable[[E | EventsLost], object], events: Sequence[E]) -> None:
        self.listener, self.events = listener, events


class Listeners(Generic[E]):
    """A front's listeners and its dispatcher. ``call(listener, event)`` is
    the front's way of calling one (it logs and counts what a listener
    raises). The list is replaced, never changed in place, so the dispatcher
    reads it without a lock while listeners add and remove listeners."""

    def __init__(self, call: Callable[[Callable[[E | EventsLost], object], E | EventsLost], None],
                 listeners: Iterable[Callable[[E | EventsLost], object]] = ()) -> None:
        self._call = call
        self._lock = threading.Lock()
        self.listeners: list[Callable[[E | EventsLost], object]] = list(listeners)

    def __len__(self) -> int:
        return len(self.listeners)

    def add(self, listener: Callable[[E | EventsLost], object],
            queue: EventQueue[E, Replay[E]] | None = None, current: Sequence[E] | None = None) -> None:
        """Register ``listener`` now; or, given the running front's ``queue``
        and the ``current`` members as events, have the dispatcher give it
        those and register it at this point of the queue."""
        if queue is not None and current is not None:
            queue.put_marker(Replay(listener, current))
        else:
            self._register(listener)

    def remove(self, listener: Callable[[E | EventsLost], object]) -> None:
        with self._lock:
            self.listeners = [c for c in self.listeners if c != listener]

    def _register(self, listener: Callable[[E | EventsLost], object]) -> None:
        with self._lock:
            self.listeners = self.listeners + [listener]

    def dispatch(self, queue: EventQueue[E, Replay[E]], previous: threading.Thread | None = None) -> None:
        """The dispatcher thread's loop: every event (or EventsLost) of
        ``queue`` to every listener, until the queue is closed and drained.
        Sleeps until an event comes (no periodic wake-up: on an idle member
        each would cost as much as a datagram). A listener that restarted
        its front runs on the ``previous`` dispatcher: this one waits for it
        to end, so listeners never run concurrently."""
        if previous is not None and previous is not threading.current_thread():
            previous.join()
        while True:
            event = queue.get()
            if event is None:
                return
            if isinstance(event, Replay):
                for replayed in event.events:
                    self._call(event.listener, replayed)
                self._register(event.listener)
                continue
            for listener in self.listeners:
                self._call(listener, event)

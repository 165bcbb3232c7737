"""The asyncio side of event delivery, the same for both protocols'
asyncio fronts: ``EventStream``, one subscriber's bounded view of a front's
events as an async iterator, and ``Waiters``, those waiting in ``wait_for``
until a predicate of the members holds."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from .events import EventBuffer, EventsLost, queue_bounds

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, MutableSet

    from typing_extensions import Self

E = TypeVar("E")


class _Buffer(Protocol[E]):
    """What bounds an event stream (the runtime's EventBuffer, for both protocols)."""

    @property
    def dropped(self) -> int: ...

    def offer(self, event: E) -> None: ...

    def take(self) -> E | EventsLost | None: ...


class _Owner(Protocol[E]):
    def _unsubscribe(self, stream: EventStream[E]) -> None: ...


class Waiters(Generic[E]):
    """Those waiting in an asyncio front's ``wait_for`` until a predicate of
    the members (an ``E``) holds. Used by both asyncio fronts."""

    def __init__(self) -> None:
        self._entries: list[tuple[Callable[[E], object], asyncio.Future[E]]] = []

    def __bool__(self) -> bool:
        return bool(self._entries)

    async def wait(self, loop: asyncio.AbstractEventLoop, predicate: Callable[[E], object],
                   timeout: float | None) -> E:
        future = loop.create_future()
        entry = (predicate, future)
        self._entries.append(entry)
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:     # the builtin TimeoutError on 3.10 too
            raise TimeoutError(f"predicate not true within {timeout} s") from None
        finally:
            if entry in self._entries:
                self._entries.remove(entry)

    def check(self, members: E) -> None:
        """Wake those whose predicate holds for ``members`` now."""
        for predicate, future in list(self._entries):
            if future.done():
                continue
            try:
                if predicate(members):
                    future.set_result(members)
            except Exception as error:   # a broken predicate fails its own waiter only
                future.set_exception(error)

    def fail(self, text: str) -> None:
        """Everyone waiting gets a RuntimeError(``text``)."""
        for _predicate, future in self._entries:
            if not future.done():
                future.set_exception(RuntimeError(text))
        self._entries = []


class EventStream(Generic[E]):
    """One subscriber's bounded view of a front's events, as an async
    iterator. It starts with the ``initial`` events (the members present
    when it was created) and then carries every event ``offer``ed, with no
    gap between, until ``end()``. ``buffer`` bounds it (past it: an
    EventsLost where the gap is). Used by both asyncio fronts."""

    def __init__(self, owner: _Owner[E], buffer: _Buffer[E], initial: Iterable[E]) -> None:
        self._owner = owner
        self._buffer = buffer
        self._ready = asyncio.Event()      # set when there is something to read, or the end
        self._closed = False
        for event in initial:    # more than room: an EventsLost, as later
            self.offer(event)

    @property
    def dropped(self) -> int:
        return self._buffer.dropped

    def offer(self, event: E) -> None:
        """Called by the front on the loop: never blocks, never raises."""
        if not self._closed:
            self._buffer.offer(event)
            self._ready.set()

    def end(self) -> None:
        """No more events: the reader gets what waits, then the end."""
        self._closed = True
        self._ready.set()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> E | EventsLost:
        while True:
            event = self._buffer.take()
            if event is not None:
                return event
            if self._closed:    # (the gap before the end was reported just above)
                raise StopAsyncIteration
            self._ready.clear()
            await self._ready.wait()

    def close(self) -> None:
        """Stop receiving events (also done when the front stops)."""
        self._owner._unsubscribe(self)
        self.end()

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


def open_stream(owner: _Owner[E], size: int, max_bytes: int, cost: Callable[[E], int],
                initial: Iterable[E], running: bool, streams: MutableSet[EventStream[E]]) -> EventStream[E]:
    """What both asyncio fronts' ``events()`` return: a stream of at most
    ``size`` waiting events and ``max_bytes`` of them as the protocol's
    ``cost`` counts them (checked: ConfigurationError naming ``queue_size``
    or ``queue_bytes``), starting with the ``initial`` events (the members
    present), added to ``streams`` while the front runs, ended at once if
    it does not."""
    size, max_bytes = queue_bounds(size, max_bytes, ("queue_size", "queue_bytes"))
    stream: EventStream[E] = EventStream(owner, EventBuffer(size, max_bytes, cost), initial)
    if running:
        streams.add(stream)
    else:
        stream.end()
    return stream

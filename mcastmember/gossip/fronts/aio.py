"""AsyncSerfService: the asyncio front of :class:`~mcastmember.gossip.serf.node.SerfNode`, without threads.

The running loop waits for us: it watches the UDP socket, the TCP listening
socket and each TCP connection, and one timer sleeps until the node's next
deadline (or a connection's). After each wake-up the bytes move as in the
threaded front (:class:`~mcastmember.gossip.fronts.driver.GossipFront`, shared
with it), and the node's events go to the listeners, the event streams and
those waiting in :meth:`AsyncSerfService.wait_for`, on the loop. Every
decision is the node's; this module only waits. Needs the ``gossip`` extra;
never imported by ``import mcastmember``.

    async with AsyncSerfService("py1", "127.0.0.1", 7946, tags={"role": "py"}) as node:
        await node.join([("127.0.0.2", 7946)])
        async with node.events() as stream:
            async for event in stream:
                print(event)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

from ..._runtime.aio_events import EventStream, Waiters, open_stream
from ..._runtime.watch import LoopWatch
from .driver import (DEFAULT_BIND_ADDR, DEFAULT_PORT, GossipFront, Listener, Predicate, current,
                     join_seeds, serf_event_bytes)
from .settings import takes_settings
from ..serf.node import GossipMember, JoinDone, LeaveDone, SerfNodeEvent
from ..agent.handler_aio import AsyncHandlers
from ..agent.rpc_aio import AsyncRpc

if TYPE_CHECKING:
    from typing_extensions import Self, Unpack

    from .settings import SerfServiceSettings

log = logging.getLogger("mcastmember")

#: events one stream of ``events()`` may fall behind by, by default
DEFAULT_EVENT_QUEUE = 1024

T = TypeVar("T")

__all__ = ["AsyncSerfService", "DEFAULT_EVENT_QUEUE"]


@takes_settings
class AsyncSerfService(GossipFront):
    """A Serf member on asyncio, with the settings of ``SerfService``:
    ``async with AsyncSerfService("py1", "10.0.0.2", tags={"role": "py"}) as node``.

    ``event_queue_size`` (1,024) and ``event_queue_bytes`` (16 MiB of their
    names, tags and payloads, as ``serf_event_bytes`` counts them; the
    heartbeat fronts' setting) bound each event stream's waiting events (see
    :meth:`events`); past either a stream gets an EventsLost, counted in
    ``stream_events_dropped``. Listeners are called on the loop as events
    come (they must not block), so no events wait for them.
    """

    _default_event_queue = DEFAULT_EVENT_QUEUE
    _handler_runner = AsyncHandlers

    def __init__(self, name: str, bind_addr: str = DEFAULT_BIND_ADDR, port: int = DEFAULT_PORT,
                 **settings: Unpack[SerfServiceSettings]) -> None:
        super().__init__(name, bind_addr, port, lock=contextlib.nullcontext(), **settings)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watched: LoopWatch | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._again: asyncio.Handle | None = None
        # Weakly held: a stream the application dropped unsubscribes itself when collected.
        self._streams: weakref.WeakSet[EventStream[SerfNodeEvent]] = weakref.WeakSet()
        self._stream_drops = 0
        self._waiters: Waiters[list[GossipMember]] = Waiters()
        self._done: list[tuple[type[JoinDone] | type[LeaveDone], asyncio.Future[JoinDone | LeaveDone]]] = []

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop it runs on, while it runs (the metrics read stats() there)."""
        return self._loop if self._running else None

    # -- lifecycle -----------------------------------------------------------
    async def start(self) -> Self:
        """Bind both sockets and start (OSError if the port is taken)."""
        if self._running:
            raise RuntimeError("already started")
        self._loop = asyncio.get_running_loop()
        self._watched = LoopWatch(self._loop, self._on_ready)
        self._bind()
        self._wake()
        if self._rpc_config is not None:
            try:
                self._rpc = AsyncRpc(self, self._rpc_config).start()
            except OSError:
                await self.stop()
                raise
        return self

    async def stop(self) -> None:
        """Close the sockets (no leave: await :meth:`leave` first) and end
        every event stream; those waiting get a RuntimeError."""
        if not self._running:
            return
        if self._rpc is not None:
            self._rpc.stop()
        assert isinstance(self._handlers, AsyncHandlers)
        await self._handlers.close()
        if self._inert:
            self._close_copies()    # a forked child's copy: the loop's epoll is the parent's too
        else:
            for handle in (self._timer, self._again):
                if handle is not None:
                    handle.cancel()
            self._close_all()
        self._timer = self._again = self._timer_at = None
        for stream in list(self._streams):
            self._stream_drops += stream.dropped
            stream.end()
        self._streams = weakref.WeakSet()
        self._waiters.fail("AsyncSerfService stopped")
        for _kind, future in self._done:
            if not future.done():
                future.set_exception(RuntimeError("AsyncSerfService stopped"))
        self._done = []

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def join(self, seeds: Iterable[tuple[str, int]], timeout: float = 10.0,
                   ignore_old: bool | None = None) -> JoinDone:
        """Serf.Join: push/pull with each seed; returns how many answered
        (TimeoutError if not all did within ``timeout``). ``ignore_old``:
        ignore the user events the seeds still hold from before (None: unless
        the setting ``replay_on_join``)."""
        addrs = join_seeds(seeds)
        if not self._running:
            raise RuntimeError("start the service before joining")
        self.node.join(addrs, time.monotonic(), ignore_old)     # its JoinDone comes out at the next flush
        future = self._expect(JoinDone)
        self._poke()
        done = await self._wait(future, timeout, f"join did not finish within {timeout} s")
        assert isinstance(done, JoinDone)
        return done

    async def leave(self, timeout: float = 15.0) -> LeaveDone:
        """Serf.Leave: the leave intent, memberlist's leave, then the propagation
        delay; returns when done (TimeoutError past ``timeout``)."""
        if not self._running:
            raise RuntimeError("start the service before leaving")
        self._record_leave()
        self.node.leave(time.monotonic())
        future = self._expect(LeaveDone)
        self._poke()
        done = await self._wait(future, timeout, f"leave did not finish within {timeout} s")
        assert isinstance(done, LeaveDone)
        return done

    # -- what the application sees -------------------------------------------
    def events(self, queue_size: int | None = None, queue_bytes: int | None = None) -> EventStream[SerfNodeEvent]:
        """An event stream (async iterator; ``async with`` closes it) of the
        node's events: first the current members (each as ``joined``, or
        ``left`` or ``failed``), then every event, with no gap between. Ends
        when the service stops. ``queue_size`` and ``queue_bytes`` (default
        ``event_queue_size`` and ``event_queue_bytes``) bound how far it may
        fall behind, in events and in their bytes, before it gets an EventsLost."""
        return open_stream(self, self._queue_size if queue_size is None else queue_size,
                           self._queue_bytes if queue_bytes is None else queue_bytes, serf_event_bytes,
                           current(self.node.members()), self._running, self._streams)

    def add_listener(self, listener: Listener, replay: bool = False) -> None:
        """Call ``listener(event)`` for every event of the node, on the loop
        (it must not block). With ``replay`` it first gets the current
        members, as :meth:`events` starts, at once."""
        if replay:
            for event in current(self.node.members()):
                self._call_listener(listener, event)
        self._listeners.add(listener)

    def _unsubscribe(self, stream: EventStream[SerfNodeEvent]) -> None:
        if stream in self._streams:
            self._stream_drops += stream.dropped
            self._streams.discard(stream)

    async def wait_for(self, predicate: Predicate, timeout: float | None = None) -> list[GossipMember]:
        """Wait until ``predicate(members)`` is true; return the members then
        (TimeoutError after ``timeout`` seconds)."""
        members = self.node.members()
        if predicate(members):
            return members
        if not self._running:
            raise RuntimeError("AsyncSerfService is not running")
        assert self._loop is not None
        return await self._waiters.wait(self._loop, predicate, timeout)

    def _subscribers(self) -> int:
        return len(self._listeners) + len(self._streams)

    def stats(self) -> dict[str, int]:
        self._counts["stream_events_dropped"] = self._stream_drops + sum(s.dropped for s in self._streams)
        return super().stats()

    # -- waiting -------------------------------------------------------------
    def _expect(self, kind: type[JoinDone] | type[LeaveDone]) -> asyncio.Future[JoinDone | LeaveDone]:
        assert self._loop is not None
        future: asyncio.Future[JoinDone | LeaveDone] = self._loop.create_future()
        self._done.append((kind, future))
        return future

    async def _wait(self, future: asyncio.Future[T], timeout: float | None, late: str) -> T:
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:        # the builtin TimeoutError on 3.10 too
            raise TimeoutError(late) from None
        finally:
            self._done = [(k, f) for k, f in self._done if f is not future]

    def _watch(self, sock: socket.socket, mask: int) -> None:
        assert self._watched is not None
        self._watched.watch(sock, mask)

    def _unwatch(self, sock: socket.socket) -> None:
        if self._watched is not None:
            self._watched.unwatch(sock)

    def _poke(self) -> None:
        """Flush soon, on the loop (never inside the caller, a listener maybe)."""
        if self._running and self._again is None and self._loop is not None:
            self._again = self._loop.call_soon(self._on_poke)

    def _on_poke(self) -> None:
        self._again = None
        self._wake()

    def _on_ready(self, sock: socket.socket, mask: int) -> None:
        if self._running:
            self._ready(sock, mask)
            self._wake()

    def _on_timer(self) -> None:
        self._timer = self._timer_at = None
        self._wake()

    def _wake(self) -> None:
        """Let the node act, then sleep until its next deadline."""
        if not self._running:
            return
        try:
            self._tick()
        except Exception:    # one bad step never ends the front
            log.exception("serf front: unexpected error")
        if not self._running:
            return
        wake = self._next_wake()
        if wake != self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self._timer_at = None
            if wake is not None:
                assert self._loop is not None
                self._timer = self._loop.call_later(max(0.0, wake - time.monotonic()), self._on_timer)
                self._timer_at = wake

    def _deliver(self, events: list[SerfNodeEvent]) -> None:
        for event in events:
            for kind, done in self._done:
                if isinstance(event, kind) and not done.done():
                    done.set_result(event)
            for listener in self._listeners.listeners:
                self._call_listener(listener, event)
            for stream in list(self._streams):
                stream.offer(event)
        if self._waiters:
            self._waiters.check(self.node.members())

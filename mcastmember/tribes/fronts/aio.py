"""AsyncMcastService: the asyncio driver of the membership engine, without threads.

The running loop waits for us: a reader callback lets the data path's pump read
the receive socket, one timer sleeps until the engine's next deadline, and
after each the engine's step decides what to send and what expired. Every
decision about time is the engine's (``engine.py``), so this front behaves
as the threaded one by construction. Heartbeats are sent on the non-blocking
socket directly, so no transport keeps a reference to the buffer we rewrite.

    async with AsyncMcastService(interface="127.0.0.1", ttl=0, member_port=4001) as m:
        async with m.events() as stream:
            async for event in stream:
                print(event.kind, event.member)
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import weakref
from typing import TYPE_CHECKING, cast

from .driver import MembershipFront
from ..engine.config import DEFAULT_GROUP, DEFAULT_PORT, takes_settings
from ..._runtime.events import EVENT_QUEUE_BYTES, EventsLost
from ..engine.events import MemberEvent, event_bytes
from ..._runtime.net import socket_family
from ..._runtime.aio_events import EventStream, Waiters, open_stream
from .channel_listener import probe_stats_idle
from ..engine.table import ADDED

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from collections.abc import Set as AbstractSet

    from typing_extensions import Self, TypeAlias, Unpack

    from ..engine.config import Settings
    from ..engine.verify import ProbeAttempt
    from ..engine.member import Member
    from ..discovery.peers import Lookup
    from .channel_listener_aio import AsyncTribesListener

    # What AsyncMcastService's listeners are called with (the return value is ignored).
    AsyncListener: TypeAlias = "Callable[[MemberEvent], object]"
    # A ``wait_for`` predicate: true for the members waited for.
    Predicate: TypeAlias = "Callable[[list[Member]], object]"

log = logging.getLogger("mcastmember")

DEFAULT_EVENT_QUEUE = 1024

__all__ = ["AsyncMcastService", "AsyncMembership", "EventStream", "EventsLost"]

@takes_settings
class AsyncMcastService(MembershipFront):
    """Join a group from asyncio; the same settings as ``McastService``.

    ``event_queue_size`` (1,024) and ``event_queue_bytes`` (16 MiB of
    payload, domain and command bytes) bound each event stream's waiting
    events (see ``events()``).
    """

    def __init__(self, address: str | None = DEFAULT_GROUP, port: int = DEFAULT_PORT, *,
                 event_queue_size: int = DEFAULT_EVENT_QUEUE,
                 event_queue_bytes: int = EVENT_QUEUE_BYTES,
                 **settings: Unpack[Settings]) -> None:
        super().__init__(address, port, settings, event_queue_size, event_queue_bytes)
        self._loop: asyncio.AbstractEventLoop | None = None
        # Weakly held: a stream the application dropped (a ``break`` out of
        # ``async for``) unsubscribes itself when it is collected.
        self._streams: weakref.WeakSet[EventStream[MemberEvent]] = weakref.WeakSet()
        self._waiters: Waiters[list[Member]] = Waiters()
        self._listeners: list[AsyncListener] = []
        self._timer: asyncio.TimerHandle | None
        self._again: asyncio.Handle | None
        self._timer = self._again = None
        self._timer_at: float | None = None
        self._reader_fds: tuple[int, ...] = ()
        self._probe_server: AsyncTribesListener | None = None
        self._probe_tasks: set[asyncio.Task[None]] = set()

    # -- lifecycle -----------------------------------------------------------
    async def start(self) -> Self:
        if self.running:
            raise RuntimeError("AsyncMcastService is already running")
        self._loop = asyncio.get_running_loop()
        unanswered = None
        if self.config.tcp_listener:
            try:
                await self._start_probe_server()
            except OSError as error:
                unanswered = self.config.listener_failed(error)
        try:
            self._open_sockets()
        except BaseException:
            await self._stop_probe_server()
            raise
        if unanswered:
            log.warning("%s", unanswered)
        self._start_engine()      # the first heartbeat goes out at once
        self._rearm()
        return self

    async def stop(self) -> None:
        """Send the shutdown packet, stop, and end every event stream. All of
        it happens before the first await, so a cancelled stop() still ends
        every ``async for``; only closing the TCP listener is awaited."""
        if not self.running:
            return
        # A forked child's copy of the loop shares the parent's epoll: it must
        # not touch it (removing our reader there would remove the parent's).
        if not self._inert:
            self._watch_receiver(None)
            for handle in (self._timer, self._again):
                if handle is not None:
                    handle.cancel()
        self._timer = self._again = self._timer_at = None
        self._stop_engine()          # "removed"/"stopped" for everyone left, to every stream
        for stream in list(self._streams):
            stream.end()
        self._streams = weakref.WeakSet()
        self._waiters.fail("AsyncMcastService stopped")
        self._close_sockets()
        probes, self._probe_tasks = self._probe_tasks, set()
        if self._inert:
            self._probe_server = None    # the parent's: not ours to close
            probes = set()
        for task in probes:
            task.cancel()                # each closes its socket as it ends
        await self._stop_probe_server()
        if probes:
            await asyncio.wait(probes)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- what the application sees ----------------------------------------------
    def events(self, queue_size: int | None = None,
               queue_bytes: int | None = None) -> EventStream[MemberEvent]:
        """An event stream (async iterator; ``async with`` closes it) of
        MemberEvent: first the current members as "added", then every change.
        Ends when the membership stops. ``queue_size`` and ``queue_bytes``
        (default: ``event_queue_size`` and ``event_queue_bytes``) bound how
        far this reader may fall behind, in events and in their payload,
        domain and command bytes, before it gets an EventsLost instead."""
        return open_stream(self, self._queue_size if queue_size is None else queue_size,
                           self._queue_bytes if queue_bytes is None else queue_bytes, event_bytes,
                           [MemberEvent(ADDED, m) for m in self._engine.members()], self.running,
                           self._streams)

    def add_listener(self, callback: AsyncListener, replay: bool = False) -> None:
        """Call ``callback(event)`` for every MemberEvent, on the event loop
        (as McastService's listeners; it must not block). With ``replay`` it
        first gets an "added" event for every current member, at once."""
        if replay:
            for member in self._engine.members():
                self._call(callback, MemberEvent(ADDED, member))
        self._listeners = self._listeners + [callback]

    def remove_listener(self, callback: AsyncListener) -> None:
        self._listeners = [c for c in self._listeners if c != callback]

    def _unsubscribe(self, stream: EventStream[MemberEvent]) -> None:
        self._streams.discard(stream)

    async def wait_for(self, predicate: Predicate, timeout: float | None = None) -> list[Member]:
        """Wait until ``predicate(members)`` is true; return the members then.
        Raises TimeoutError after ``timeout`` seconds."""
        members = self._engine.members()
        if predicate(members):
            return members
        if not self.running:
            raise RuntimeError("AsyncMcastService is not running")
        assert self._loop is not None       # set by start()
        return await self._waiters.wait(self._loop, predicate, timeout)

    def _front_counts(self) -> dict[str, int]:
        return {"events_dropped": sum(s.dropped for s in self._streams),
                "listener_errors": self._listener_errors,
                "subscribers": len(self._streams) + len(self._listeners),
                **(self._probe_server.stats() if self._probe_server else probe_stats_idle())}

    # -- waiting ----------------------------------------------------------------------
    def _watch_receiver(self, fd: int | None) -> None:
        self._watch_receivers(() if fd is None else (fd,))

    def _watch_receivers(self, fds: tuple[int, ...]) -> None:
        if fds == self._reader_fds:
            return
        assert self._loop is not None       # readers are watched once started
        for fd in self._reader_fds:
            if fd not in fds:
                self._loop.remove_reader(fd)
        for fd in fds:
            if fd not in self._reader_fds:
                self._loop.add_reader(fd, self._on_readable, fd)
        self._reader_fds = fds

    def _rearm(self) -> None:
        """Sleep until the engine's next deadline; read while it wants to."""
        engine, now = self._engine, self.clock()
        self._watch_receivers(self._receive_fds(now))
        deadline = engine.next_deadline()
        assert self._loop is not None and deadline is not None     # called while running
        if deadline != self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self._loop.call_later(max(0.0, deadline - now), self._on_timer)
            self._timer_at = deadline

    def _on_timer(self) -> None:
        self._timer = self._timer_at = None
        self._wake(())

    def _on_readable(self, fd: int | None = None) -> None:
        self._again = None
        self._wake(() if fd is None else (fd,))

    def _wake(self, readable: tuple[int, ...]) -> None:
        if not self.running or self._inert:
            return      # a callback that outlived stop(): the socket is closed
        try:
            # (running: the engine has a deadline)
            more = (self._drain_ready(readable, cast(float, self._engine.next_deadline()))
                    if readable or self._more_fd is not None else False)
            self._step(self.clock())
            if more and self._again is None:
                assert self._loop is not None
                # Read in a batch but not handled yet: the socket may be
                # empty, so readiness will not call us again for them.
                self._again = self._loop.call_soon(self._on_readable)
        except Exception:
            log.exception("membership driver failed; carrying on")
            self._engine.on_internal_error(self.clock())
        finally:
            if self.running:
                self._rearm()

    def _publish(self, events: Sequence[MemberEvent]) -> None:
        for callback in self._listeners:
            for event in events:
                self._call(callback, event)
        for stream in list(self._streams):
            for event in events:
                stream.offer(event)
        if self._waiters:
            self._waiters.check(self._engine.members())

    # -- DNS and host-name lookups ---------------------------------------------------------
    def _start_lookups(self, lookups: list[Lookup]) -> None:
        from ..discovery.resolver import lookup as run

        def query(lookup: Lookup) -> AbstractSet[tuple[str, int]]:       # on an executor thread: never blocks the loop
            return run(lookup, self._resolver())

        assert self._loop is not None       # lookups start while running
        for lookup in lookups:
            future = self._loop.run_in_executor(None, query, lookup)
            future.add_done_callback(functools.partial(self._looked_up, lookup))

    def _looked_up(self, lookup: Lookup, done: asyncio.Future[AbstractSet[tuple[str, int]]]) -> None:
        if done.cancelled() or not self.running or self._inert:
            return
        error = done.exception()
        self._engine.on_lookup(lookup, error if error is not None else done.result(),
                               self.clock())
        self._wake(())           # publish what changed (dns_members), new deadlines

    # -- the second opinion (verify) ---------------------------------------------------
    def _start_probes(self, attempts: list[ProbeAttempt]) -> None:
        assert self._loop is not None       # probes start while running
        for attempt in attempts:
            task = self._loop.create_task(self._attempt(attempt))
            self._probe_tasks.add(task)          # the loop holds tasks weakly
            task.add_done_callback(self._probe_tasks.discard)

    async def _attempt(self, attempt: ProbeAttempt) -> None:
        """One connect, closed as soon as it is answered (nothing is sent or
        read: a port that accepts and hangs holds nothing) or its deadline
        passes."""
        assert self._loop is not None
        member = attempt.member
        answered: bool | None = None        # no answer by the deadline
        sock: socket.socket | None = None
        try:
            sock = socket.socket(socket_family(member.address), socket.SOCK_STREAM)
            sock.setblocking(False)
            await asyncio.wait_for(self._loop.sock_connect(sock, (member.address, member.port)),
                                   attempt.deadline - self.clock())
            answered = True
        except asyncio.TimeoutError:
            pass
        except OSError:
            # Refused (or unreachable); without a socket (out of
            # descriptors) we cannot tell, and the member is not blamed.
            answered = False if sock is not None else None
        finally:
            if sock is not None:
                sock.close()
            # Reported whatever happens (but a stop): until then the attempt
            # holds one of the engine's MAX_PROBE_SOCKETS slots.
            if self.running and not self._inert:
                self._engine.on_probe(attempt, answered, self.clock())
                self._wake(())

    # -- TCP listener for Tomcat ------------------------------------------------------
    async def _start_probe_server(self) -> None:
        cfg = self.config
        from .channel_listener_aio import AsyncTribesListener
        listener = AsyncTribesListener(cfg.listen_address, cfg.member_port, self._engine.encode,
                                      self._may_reply_to, self._member_hosts)
        await listener.start()
        self._probe_server = listener
        if cfg.member_port == 0:
            self._engine.set_member_port(listener.port)

    async def _stop_probe_server(self) -> None:
        server, self._probe_server = self._probe_server, None
        if server is not None:
            await server.stop()


# The name this front had before the gossip wing paired the names.
AsyncMembership = AsyncMcastService

"""AsyncMembership: membership for asyncio applications, without threads.

The running loop drives everything: a reader callback drains the receive
socket into the same table as the threaded service, heartbeats are scheduled
with ``call_at`` on a fixed grid (no drift, and no burst of catch-up beats
after the loop was busy), and sweeps for silent members run on a timer.
Heartbeats are sent with ``socket.send`` on the non-blocking socket directly,
so no transport keeps a reference to the buffer we rewrite.

    async with AsyncMembership(interface="127.0.0.1", ttl=0, member_port=4001) as m:
        async for event in m.events():
            print(event.kind, event.member)
"""

import asyncio
import errno
import logging
import math
import os
import time

from . import _layout as L
from . import net
from . import probe
from ._ratelimit import RateLimitedLog
from ._front import MembershipFront
from .config import SWEEP_INTERVAL_S
from .table import ADDED, MemberEvent

log = logging.getLogger("mcastmember")

# Datagrams read per reader callback at most, so one busy group cannot starve
# the rest of the loop; the loop calls back again at once if more are waiting.
READ_BATCH = 64
DEFAULT_EVENT_QUEUE = 1024


class EventsLost:
    """Stands in an event stream where events were dropped because its reader
    fell behind. Resynchronise from ``members()``; later events follow."""

    kind = "events_lost"
    member = None
    reason = None

    def __init__(self, count):
        self.count = count

    def __repr__(self):
        return f"EventsLost({self.count})"


class EventStream:
    """One subscriber's bounded view of membership changes, as an async
    iterator. It starts with the members present when it was created, as
    "added" events, and then carries every change, with no gap between."""

    def __init__(self, owner, initial, size):
        self._owner = owner
        self._queue = asyncio.Queue(size)
        self._lost = 0
        self._closed = False
        for member in initial:
            self._queue.put_nowait(MemberEvent(ADDED, member))

    def _offer(self, event):
        """Called by the membership on the loop: never blocks, never raises."""
        if self._closed:
            return
        if self._lost:           # keep the gap in one place: drop until it is reported
            self._lost += 1
            return
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self._lost = 1

    def _close(self):
        self._closed = True
        try:
            self._queue.put_nowait(None)
        except asyncio.QueueFull:
            pass    # the reader sees _closed once it has drained the queue

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self._queue.empty():
            if self._lost:
                lost, self._lost = self._lost, 0
                return EventsLost(lost)
            if self._closed:
                raise StopAsyncIteration
        event = await self._queue.get()
        if event is None:
            raise StopAsyncIteration
        return event

    def close(self):
        """Stop receiving events (also done when the membership stops)."""
        self._owner._unsubscribe(self)
        self._close()


class AsyncMembership(MembershipFront):
    """Join a group from asyncio; the same settings as ``McastService``.

    ``event_queue_size`` bounds each subscriber's queue of events.
    """

    def __init__(self, address="228.0.0.4", port=45564, *, event_queue_size=DEFAULT_EVENT_QUEUE,
                 **settings):
        super().__init__(address, port, settings)
        if int(event_queue_size) != event_queue_size or event_queue_size < 1:
            raise ValueError("event_queue_size must be a positive whole number")
        self._queue_size = int(event_queue_size)
        self._loop = None
        self._streams = []
        self._waiters = []
        self._beat_timer = self._sweep_timer = None
        self._probe_server = None
        self._recv_sock = self._send_sock = None
        self._buf = bytearray(L.RECV_BUFFER_LEN)
        self._counts = {"send_errors": 0, "receive_errors": 0}
        self._rate_log = RateLimitedLog(log)

    # -- lifecycle -----------------------------------------------------------
    async def start(self):
        if self._running:
            raise RuntimeError("AsyncMembership is already running")
        cfg = self.config
        self._loop = asyncio.get_running_loop()
        if cfg.tcp_listener:
            await self._start_probe_server()
        try:
            self._recv_sock = net.open_receiver(cfg.address, cfg.port, cfg.interface,
                                                SWEEP_INTERVAL_S)
            self._recv_sock.setblocking(False)
            self._send_sock = net.open_sender(cfg.address, cfg.port, cfg.interface, cfg.ttl,
                                              cfg.loopback)
            self._send_sock.setblocking(False)
        except BaseException:
            await self._close_sockets()
            raise
        self._send_fd = self._send_sock.fileno()
        self._origin_ns = time.monotonic_ns()
        self._new_packet(self._origin_ns)
        self._running = True
        self._recv_fd = self._recv_sock.fileno()
        self._loop.add_reader(self._recv_fd, self._on_readable)
        self._period = cfg.frequency / 1000.0
        self._next_beat = self._loop.time()
        self._beat()                          # the first heartbeat goes out at once
        self.table.sweep(time.monotonic())    # arms the pause guard from the first moment
        self._schedule_sweep()
        return self

    async def stop(self):
        """Send the shutdown packet, stop, and end every event stream."""
        if not self._running:
            return
        self._running = False
        self._beat_timer.cancel()
        self._sweep_timer.cancel()
        self._loop.remove_reader(self._recv_sock.fileno())
        self._send(self.config.heartbeat_packet(self._origin_ns, L.SHUTDOWN_COMMAND))
        await self._close_sockets()
        for stream in self._streams:
            stream._close()
        self._streams = []
        for predicate, future in self._waiters:
            if not future.done():
                future.set_exception(RuntimeError("AsyncMembership stopped"))
        self._waiters = []
        self.table.clear()

    async def _close_sockets(self):
        for sock in (self._recv_sock, self._send_sock):
            if sock is not None:
                sock.close()
        self._recv_sock = self._send_sock = None
        if self._probe_server is not None:
            self._probe_server.close()
            await self._probe_server.wait_closed()
            self._probe_server = None

    async def __aenter__(self):
        return await self.start()

    async def __aexit__(self, *exc):
        await self.stop()

    # -- what the application sees ----------------------------------------------
    def events(self, queue_size=None):
        """An async iterator of MemberEvent: first the current members as
        "added", then every change. Ends when the membership stops.
        ``queue_size`` (default: ``event_queue_size``) bounds how far this
        reader may fall behind before it gets an EventsLost instead."""
        size = self._queue_size if queue_size is None else int(queue_size)
        if size < 1:
            raise ValueError("queue_size must be at least 1")
        stream = EventStream(self, self.table.members(), size)
        if self._running:
            self._streams.append(stream)
        else:
            stream._close()
        return stream

    def _unsubscribe(self, stream):
        if stream in self._streams:
            self._streams.remove(stream)

    async def wait_for(self, predicate, timeout=None):
        """Wait until ``predicate(members)`` is true; return the members then.
        Raises TimeoutError after ``timeout`` seconds."""
        members = self.table.members()
        if predicate(members):
            return members
        if not self._running:
            raise RuntimeError("AsyncMembership is not running")
        future = self._loop.create_future()
        entry = (predicate, future)
        self._waiters.append(entry)
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:     # the builtin TimeoutError on 3.10 too
            raise TimeoutError(f"predicate not true within {timeout} s") from None
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def stats(self):
        counts = self._common_stats(self._counts)
        counts["subscribers"] = len(self._streams)
        return counts

    # -- sending -------------------------------------------------------------------
    def _refresh_packet(self):
        if self._running:
            self._send(self._new_packet(self._origin_ns))

    def _beat(self):
        self._send(self._packet)
        now = self._loop.time()
        self._next_beat += self._period
        if self._next_beat <= now:   # the loop was busy: skip the missed beats, no burst
            self._next_beat += self._period * math.ceil((now - self._next_beat) / self._period)
        self._beat_timer = self._loop.call_at(self._next_beat, self._beat)

    # -- receiving -------------------------------------------------------------------
    def _on_readable(self):
        # Known members' heartbeats are handled inside pump; it returns for
        # anything else, when the socket is empty, or after READ_BATCH datagrams.
        fd, buf, table = self._recv_fd, self._buf, self.table
        for _ in range(READ_BATCH):
            n = table.pump(fd, buf, math.inf, READ_BATCH)
            if n < 0:
                if n != -errno.EAGAIN and n != -errno.EINTR:
                    self._counts["receive_errors"] += 1
                    self._rate_log.log(logging.WARNING, "recv", "receive failed: %s",
                                       os.strerror(-n))
                break
            events = table.receive(buf, n, time.monotonic())
            if events:
                self._publish(events)
        if table.pending() and self._running:
            # Read in a batch but not handled yet: the socket may be empty, so
            # readiness will not call us again for them.
            self._loop.call_soon(self._on_readable)

    def _schedule_sweep(self):
        self._sweep_timer = self._loop.call_later(SWEEP_INTERVAL_S, self._sweep)

    def _sweep(self):
        events = self.table.sweep(time.monotonic())
        if events:
            self._publish(events)
        if self._running:
            self._schedule_sweep()

    def _publish(self, events):
        for stream in self._streams:
            for event in events:
                stream._offer(event)
        if self._waiters:
            members = self.table.members()
            for predicate, future in list(self._waiters):
                if future.done():
                    continue
                try:
                    if predicate(members):
                        future.set_result(members)
                except Exception as error:   # a broken predicate fails its own waiter only
                    future.set_exception(error)

    # -- TCP listener for Tomcat's failure detector ------------------------------------
    async def _start_probe_server(self):
        cfg = self.config

        async def drain(reader, writer):
            try:
                while await asyncio.wait_for(reader.read(probe.READ_SIZE), probe.IDLE_TIMEOUT_S):
                    pass
            except (OSError, asyncio.TimeoutError):
                pass
            finally:
                writer.close()

        try:
            self._probe_server = await asyncio.start_server(
                drain, cfg.interface or "0.0.0.0", cfg.member_port, reuse_address=True)
        except OSError as error:
            raise OSError(error.errno, f"cannot listen on member port {cfg.member_port} "
                                       f"for Tomcat's failure detector: {error.strerror}") from None
        if cfg.member_port == 0:
            cfg.member_port = self._probe_server.sockets[0].getsockname()[1]
            self.table.set_local(cfg.local_member())

"""SerfService: the threaded front of :class:`~mcastmember.gossip.serf.node.SerfNode`.

One UDP socket and one TCP listening socket on the address and port given
(Serf's default 7946), and two daemon threads. The I/O thread waits, with
``select``, until the node's next deadline or until a socket is readable or
writable; the bytes it then moves, and the settings, are
:class:`~mcastmember.gossip.fronts.driver.GossipFront`'s, shared with the
asyncio front. A dispatcher thread calls the listeners, so a slow listener
never holds up the I/O thread. Every decision (what to send, when, what a
member's state is) is the node's; this module only waits. Needs the
``gossip`` extra; never imported by ``import mcastmember``.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .driver import (DEFAULT_BIND_ADDR, DEFAULT_PORT, FRONT_COUNTERS, GossipFront, Listener, Predicate, current,
                     join_seeds, serf_event_bytes)
from .settings import takes_settings
from ..._runtime.dispatch import Replay
from ..._runtime.events import EventQueue
from ..._runtime.watch import drain, unwatch, watch
from ..serf.node import GossipMember, JoinDone, LeaveDone, SerfNodeEvent
from ..agent.handler_threads import ThreadHandlers
from ..agent.rpc_threads import ThreadedRpc

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .settings import SerfServiceSettings

log = logging.getLogger("mcastmember")

#: events waiting for the listeners
EVENT_QUEUE_BOUND = 65_536
#: the longest the I/O thread sleeps with nothing to do
IDLE_WAIT_S = 1.0
#: how long stop() waits for each thread
STOP_WAIT_S = 5.0


@takes_settings
class SerfService(GossipFront):
    """A Serf member on real sockets and threads:
    ``SerfService("py1", "10.0.0.2", tags={"role": "py"}, probe_interval=0.5)``.

    ``bind_addr`` is an IP address: we bind there and open streams from it
    (never another address), and advertise it unless ``advertise`` names
    the address the others reach us at (0.0.0.0: a private address of the
    host is chosen, see ``advertise``). Every other setting is a
    keyword (listed below): the front's own, memberlist's and Serf's, each
    checked (a ConfigurationError names it). ``max_streams`` bounds the streams
    others keep open to us, shared per source (``stream_shares``: past its
    share a connection is refused, ``connections_refused``; at the cap the
    idlest stranger's is closed for a member's host,
    ``connections_evicted``); each is bounded by the node's
    ``limits.max_stream`` bytes (``connections_too_big``) and by one
    deadline, ``tcp_timeout`` from its start (``connections_timed_out``). An
    ``accept`` that fails for want of descriptors waits before the next
    (``accept_errors``). Events wait for the listeners in a queue of
    ``event_queue_size`` events (65,536) and ``event_queue_bytes`` of their
    names, tags and payloads (16 MiB, as ``serf_event_bytes`` counts them;
    the heartbeat fronts' setting): past either, listeners get one
    ``EventsLost`` where events were dropped (counted:
    ``listener_events_dropped``). ``keyring_file`` (Serf's ``-keyring-file``:
    a JSON list of base64 keys, the primary first) gives the keys, and is
    written again whenever ``serf keys`` changes them (a failed write is
    logged and counted ``keyring_file_errors``).
    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    _default_event_queue = EVENT_QUEUE_BOUND
    _handler_runner = ThreadHandlers

    def __init__(self, name: str, bind_addr: str = DEFAULT_BIND_ADDR, port: int = DEFAULT_PORT,
                 **settings: Unpack[SerfServiceSettings]) -> None:
        lock = threading.RLock()
        super().__init__(name, bind_addr, port, lock=lock, **settings)
        self._done = threading.Condition(lock)
        self._join_done: JoinDone | None = None
        self._leave_done: LeaveDone | None = None
        # The heartbeat fronts' queue: bounded in events and bytes, an
        # EventsLost where the gap is; a Replay marker always gets in.
        self._events: EventQueue[SerfNodeEvent, Replay[SerfNodeEvent]] = EventQueue(self._queue_size, self._queue_bytes,
                                                                      serf_event_bytes)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._threads: list[threading.Thread] = []
        #: held by the one stop() that runs (a stop is final; another waits for it to end)
        self._stopping = threading.Lock()

    # ------------------------------------------------------------- lifecycle

    def __enter__(self) -> SerfService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> SerfService:
        """Bind both sockets and start the threads (OSError if the port is
        taken); returns the service."""
        self._bind()
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._threads = [threading.Thread(target=self._io_loop, name=f"serf-io-{self.node.name}", daemon=True),
                         threading.Thread(target=self._listeners.dispatch, args=(self._events,),
                                          name=f"serf-events-{self.node.name}",
                                          daemon=True)]
        for thread in self._threads:
            thread.start()
        if self._rpc_config is not None:
            try:
                self._rpc = ThreadedRpc(self, self._rpc_config).start()
            except OSError:
                self.stop()
                raise
        return self

    def stop(self, timeout: float | None = STOP_WAIT_S) -> None:
        """Close the sockets and end the threads (no leave: call :meth:`leave`
        first). Listeners get every event queued before it. Waits at most
        ``timeout`` seconds (5; None: for ever) for each thread: past it, a
        listener that blocks is left running on the dispatcher (a daemon
        thread, logged), which delivers the rest once it returns and ends.
        A forked child's copy only closes its copies of the sockets."""
        if not self._running:
            return
        if self._inert:
            self._close_copies()
            self._sel.close()      # (our copy of the epoll descriptor: the parent's stays registered)
            self._wake_r.close()
            self._wake_w.close()
            return
        if not self._stopping.acquire(blocking=False):
            # another thread is stopping it (an RPC leave's, beside the application's):
            # wait for it to end, unless on the dispatcher, which that stop may be waiting for
            if threading.current_thread() not in self._threads and self._stopping.acquire(timeout=2 * STOP_WAIT_S):
                self._stopping.release()
            return
        if self._rpc is not None:
            self._rpc.stop()
        self._running = False
        self._handlers.close()
        self._poke()
        io, dispatcher = self._threads
        io.join(timeout)
        # After the events still queued (the I/O thread has ended: it adds
        # none); a listener that calls stop() is on the dispatcher thread,
        # which ends when that listener returns.
        self._events.close()
        if threading.current_thread() is not dispatcher:
            dispatcher.join(timeout)
            if dispatcher.is_alive():
                log.warning("stop(): a listener has not returned within %s s: its dispatcher thread is left "
                            "running, to deliver the events left and end", timeout)
        with self._lock:
            self._close_all()
            self._done.notify_all()
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()
        self._stopping.release()

    def join(self, seeds: Iterable[tuple[str, int]], timeout: float = 10.0,
             ignore_old: bool | None = None) -> JoinDone:
        """Serf.Join: push/pull with each seed; returns how many answered
        (TimeoutError if not all did within ``timeout``). ``ignore_old``:
        ignore the user events the seeds still hold from before (None: unless
        the setting ``replay_on_join``)."""
        addrs = join_seeds(seeds)
        if not self._running:
            raise RuntimeError("start the service before joining")
        with self._lock:
            self._join_done = None
            self.node.join(addrs, time.monotonic(), ignore_old)
            self._poke()
            if not self._done.wait_for(lambda: self._join_done is not None, timeout):
                raise TimeoutError(f"join did not finish within {timeout} s")
            assert self._join_done is not None
            return self._join_done

    def leave(self, timeout: float = 15.0) -> LeaveDone:
        """Serf.Leave: the leave intent, memberlist's leave, then the propagation
        delay; returns when done (TimeoutError past ``timeout``)."""
        if not self._running:
            raise RuntimeError("start the service before leaving")
        with self._lock:
            self._leave_done = None
            self._record_leave()
            self.node.leave(time.monotonic())
            self._poke()
            if not self._done.wait_for(lambda: self._leave_done is not None, timeout):
                raise TimeoutError(f"leave did not finish within {timeout} s")
            assert self._leave_done is not None
            return self._leave_done

    def add_listener(self, listener: Listener, replay: bool = False) -> None:
        """``listener(event)`` is called, on the dispatcher thread, with every
        event of the node (SerfMemberEvent, UserEventReceived, ...); where events
        were dropped (the listeners fell more than ``event_queue_size``
        events or ``event_queue_bytes`` behind) it gets one ``EventsLost``
        instead: resynchronise from ``members()``. With
        ``replay`` it first gets the current members (each as ``joined``, or
        ``left`` or ``failed``), then every event after them: none missed,
        none twice."""
        with self._lock:
            if replay and self._running:
                # The dispatcher registers it when it reaches this point of
                # the queue: what follows happened after the snapshot, under
                # the same lock. What the node decided but the I/O thread has
                # not handed out yet goes first (else a change the snapshot
                # shows would come again after it).
                self._hand_out_events()
                self._listeners.add(listener, self._events, current(self.node.members()))
            else:
                self._listeners.add(listener)

    def wait_for(self, predicate: Predicate, timeout: float | None = None) -> list[GossipMember]:
        """Wait until ``predicate(members)`` is true (checked now and after
        every event of the node, on this thread, under the front's lock: it
        must not block); return the members then. TimeoutError after
        ``timeout`` seconds; RuntimeError when not running or stopped meanwhile."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                members = self.node.members()
                if predicate(members):
                    return members
                if not self._running:
                    raise RuntimeError("SerfService is not running")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"predicate not true within {timeout} s")
                self._done.wait(remaining)

    def _become_inert(self) -> None:
        # In a forked child only the forking thread exists: a lock the
        # parent's threads held would never be released here.
        super()._become_inert()
        self._lock = threading.RLock()
        self._done = threading.Condition(self._lock)

    # ------------------------------------------------------------ waiting

    def _watch(self, sock: socket.socket, mask: int) -> None:
        watch(self._sel, sock, mask)

    def _unwatch(self, sock: socket.socket) -> None:
        unwatch(self._sel, sock)

    def _poke(self) -> None:
        if self._inert:
            return      # the wake-up socket is the parent's too
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass   # the pipe is full (the loop wakes anyway) or closed (stopped)

    def _deliver(self, events: list[SerfNodeEvent]) -> None:
        for event in events:
            if isinstance(event, JoinDone):
                self._join_done = event
            elif isinstance(event, LeaveDone):
                self._leave_done = event
        dropped = self._events.dropped     # (only this thread, under the front's lock, adds)
        self._events.put_many(events)
        self._counts["listener_events_dropped"] += self._events.dropped - dropped
        self._done.notify_all()          # join, leave, wait_for

    def _io_loop(self) -> None:
        while self._running:
            with self._lock:
                wake = self._next_wake()
            now = time.monotonic()
            soonest = now + IDLE_WAIT_S if wake is None else min(wake, now + IDLE_WAIT_S)
            try:
                ready = self._sel.select(max(0.0, soonest - now))
            except (OSError, ValueError):
                if not self._running:
                    return
                raise
            try:
                with self._lock:
                    for key, mask in ready:
                        if key.fileobj is self._wake_r:
                            self._drain_wake()
                        else:
                            self._ready(key.fileobj, mask)
                    self._tick()
            except Exception:    # one bad step never ends the loop
                log.exception("serf front: unexpected error in the I/O loop")
                time.sleep(0.05)

    def _drain_wake(self) -> None:
        drain(self._wake_r)


__all__ = ["DEFAULT_PORT", "FRONT_COUNTERS", "Listener", "SerfService"]

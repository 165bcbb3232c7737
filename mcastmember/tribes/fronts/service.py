"""McastService: the threaded driver of the membership engine.

Two daemon threads. The I/O thread waits, with ``poll``, until the engine's
next deadline or until the receive socket (or a wake-up socket) is readable,
lets the data path's pump read datagrams, and takes the engine's step: what to
send, what expired. The dispatcher calls listeners, so a slow or failing
listener never holds up the I/O thread. Every decision about time is the
engine's (``engine.py``); this module only waits and moves bytes.
"""

from __future__ import annotations

import logging
import math
import queue
import select
import socket
import struct
import threading
import time
import weakref
from typing import TYPE_CHECKING

from .driver import MembershipFront
from ..engine.config import DEFAULT_GROUP, DEFAULT_PORT, takes_settings
from ..._runtime.dispatch import Listeners, Replay
from ..._runtime.events import EVENT_QUEUE_BYTES, EventQueue
from ..engine.events import MemberEvent, event_bytes
from .channel_listener import TribesListener, probe_stats_idle
from .verify_prober import Prober
from ..engine.table import ADDED

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from collections.abc import Set as AbstractSet

    from typing_extensions import Self, TypeAlias, Unpack

    from ..engine.config import Settings
    from ..engine.verify import ProbeAttempt
    from ..._runtime.events import EventsLost
    from ..engine.member import Member
    from ..discovery.peers import Lookup

    # What McastService's listeners are called with: each event, or an
    # EventsLost where the dispatcher fell behind (the return value is ignored).
    Listener: TypeAlias = "Callable[[MemberEvent | EventsLost], object]"

log = logging.getLogger("mcastmember")

EVENT_QUEUE_BOUND = 65536
# How long stop() waits for the listeners to take the events queued before
# it (a listener that blocks longer is left to finish on its daemon thread).
STOP_TIMEOUT_S = 5.0
# How the I/O thread waits (never when: that is the engine's). Two reads
# closer than BUSY_GAP_S mean a busy group: pump then waits in the kernel for
# up to BUSY_SLICE_S per call instead of returning to poll() per datagram.
BUSY_GAP_S = 0.005
BUSY_SLICE_S = 0.02
# Pause after an unexpected exception in the I/O loop before it carries on.
CRASH_BACKOFF_S = 0.05

_STOPPED, _STARTING, _RUNNING, _STOPPING = "stopped", "starting", "running", "stopping"


@takes_settings
class McastService(MembershipFront):
    """Join a multicast group as a member and keep a live table of the others.

    Takes the settings of :class:`mcastmember.tribes.engine.config.ServiceConfig`
    (Tomcat's defaults, listed below). Use as a context manager, or call
    ``start()`` and ``stop()``.
    ``event_queue_size`` (65,536) and ``event_queue_bytes`` (16 MiB of
    payload, domain and command bytes) bound the events waiting for
    listeners; past either, listeners get an ``EventsLost`` marker where
    events were dropped (counted: ``events_dropped``).
    """


    # Listeners run on our dispatcher thread: a SystemExit or KeyboardInterrupt
    # raised there reaches nobody (it would only end the thread, silently,
    # and every later event with it), so it is logged, counted and survived.
    _SURVIVED = (BaseException,)

    def __init__(self, address: str | None = DEFAULT_GROUP, port: int = DEFAULT_PORT, *,
                 event_queue_size: int = EVENT_QUEUE_BOUND,
                 event_queue_bytes: int = EVENT_QUEUE_BYTES,
                 **settings: Unpack[Settings]) -> None:
        super().__init__(address, port, settings, event_queue_size, event_queue_bytes)
        self._lock = self._table_lock = threading.Lock()
        self._state = threading.Condition()   # the lifecycle phase, start/stop one at a time
        self._phase = _STOPPED
        self._listeners: Listeners[MemberEvent] = Listeners(self._call)
        # wait_for: a change (events published, a phase) bumps the generation.
        self._changed = threading.Condition()
        self._generation = 0
        self._io: threading.Thread | None
        self._dispatcher: threading.Thread | None
        self._io = self._dispatcher = None
        self._events: EventQueue[MemberEvent, Replay[MemberEvent]] | None = None
        self._wake_r: socket.socket | None
        self._wake_w: socket.socket | None
        self._wake_r = self._wake_w = None
        self._probe: TribesListener | None = None
        self._prober: Prober | None = None      # verify's connects, while running
        # the queue of the DNS worker thread, while running
        self._lookups: queue.SimpleQueue[Lookup | None] | None = None
        # Every dispatcher thread of ours that may still run a listener (one
        # that restarted us keeps running on the old one for a while).
        self._dispatchers: weakref.WeakSet[threading.Thread] = weakref.WeakSet()

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> Self:
        """Open the sockets, send the first heartbeat at once and start the threads."""
        with self._state:
            if self._phase == _STOPPING and threading.current_thread() in self._dispatchers:
                raise RuntimeError("McastService is stopping (start it again after stop())")
            while self._phase in (_STARTING, _STOPPING):
                self._state.wait()
            if self._phase == _RUNNING:
                raise RuntimeError("McastService is already running")
            self._phase = _STARTING
        try:
            self._start()
        except BaseException:
            self._set_phase(_STOPPED)
            raise
        self._set_phase(_RUNNING)
        return self

    def _start(self) -> None:
        cfg = self.config
        unanswered = None
        if cfg.tcp_listener:
            try:
                self._start_probe_listener()
            except OSError as error:
                unanswered = cfg.listener_failed(error)
        try:
            self._open_sockets()
        except BaseException:
            self._stop_probe_listener()
            raise
        if unanswered:
            log.warning("%s", unanswered)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._stopping = False
        self._lookups = None
        previous, self._events = self._dispatcher, EventQueue(self._queue_size, self._queue_bytes, event_bytes)
        if cfg.verify:
            self._prober = Prober(self._probed, self.clock)
            self._prober.start()
        with self._lock:
            self._start_engine()
        # A listener that restarted us runs on the previous dispatcher: the
        # new one waits for it to finish, so listeners never run concurrently.
        self._dispatcher = threading.Thread(target=self._listeners.dispatch,
                                            args=(self._events, previous),
                                            name="mcastmember-dispatch", daemon=True)
        self._dispatchers.add(self._dispatcher)
        self._io = threading.Thread(target=self._io_loop, name="mcastmember-io", daemon=True)
        self._dispatcher.start()
        self._io.start()
        if cfg.listen_only:
            log.info("listening to %s (listen-only: nothing sent)", cfg.describe())
        else:
            local = self._engine.local_member
            log.info("joined %s as %s:%d", cfg.describe(), local.address, local.port)

    def stop(self, timeout: float | None = STOP_TIMEOUT_S) -> None:
        """Send the shutdown packet, stop the threads and close the sockets.
        Listeners get every event that happened before the stop, then a
        "removed" (reason "stopped") for each member still present. A
        listener may call it too (the dispatcher then ends after that
        listener), also while another thread is stopping us.

        Waits at most ``timeout`` seconds (5; None: for ever) for the
        listeners to take those events: past it, one that blocks is left
        running on the dispatcher (a daemon thread, logged once), which
        delivers the rest once it returns and then ends (a later start()
        calls no listener until it has: listeners never run concurrently)."""
        me = threading.current_thread()
        with self._state:
            if self._phase == _STARTING:
                while self._phase == _STARTING:
                    self._state.wait()
            if self._phase == _STOPPED:
                return
            if self._phase == _STOPPING:
                if me not in self._dispatchers:     # a dispatcher cannot wait for itself
                    while self._phase == _STOPPING:
                        self._state.wait()
                return
            self._phase = _STOPPING
        try:
            self._stop(me, timeout)
        finally:
            self._set_phase(_STOPPED)

    def _stop(self, me: threading.Thread, timeout: float | None) -> None:
        dispatcher, events = self._dispatcher, self._events
        # Running: start() set every one of these.
        assert dispatcher is not None and events is not None and self._io is not None
        assert self._wake_r is not None and self._wake_w is not None
        if not self._inert:
            self._stopping = True
            self._wake()
            self._io.join()
        with self._lock:
            self._stop_engine()    # no goodbye from a forked child's copy
        if self._prober is not None:
            # Unlocked: its thread may be waiting for the lock to report.
            self._prober.stop()
            self._prober = None
        events.close()             # after every event already queued
        if self._lookups is not None:
            # Not joined: a query may take its timeout; what it finds after
            # the stop is ignored by the engine.
            self._lookups.put(None)
            self._lookups = None
        if me not in self._dispatchers and not self._inert:
            dispatcher.join(timeout)   # (a listener's stop: the dispatcher ends after it)
            if dispatcher.is_alive():
                log.warning("stop(): a listener has not returned within %s s: its dispatcher "
                            "thread is left running, to deliver the events left and end",
                            timeout)
        self._close_sockets()
        for sock in (self._wake_r, self._wake_w):
            sock.close()
        self._stop_probe_listener()    # after the goodbye: Tomcat now finds us gone
        self._io = None
        log.info("left %s", self.config.describe())

    def _set_phase(self, phase: str) -> None:
        with self._state:
            self._phase = phase
            self._state.notify_all()
        self._notify_changed()      # waiters see a stop

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _become_inert(self) -> None:
        # In a forked child only the forking thread exists: locks held by the
        # parent's other threads would never be released here.
        super()._become_inert()
        self._lock = self._table_lock = threading.Lock()
        self._state = threading.Condition()
        self._changed = threading.Condition()
        self._listeners = Listeners(self._call, self._listeners.listeners)
        self._probe = None    # the parent's listener thread does not exist here
        self._prober = None   # nor its prober thread
        self._events = EventQueue(self._queue_size, self._queue_bytes, event_bytes)

    # -- what the application sees --------------------------------------------
    def add_listener(self, callback: Listener, replay: bool = False) -> None:
        """Call ``callback(event)`` for every MemberEvent, on the dispatcher
        thread; where events were dropped (the listeners fell more than
        ``event_queue_size`` behind) it gets one ``EventsLost`` instead.
        With ``replay`` it first gets an "added" event for every current
        member, then every change after them: none missed, none twice."""
        with self._lock:
            if replay and self._events is not None and self._phase != _STOPPED:
                # The dispatcher registers it when it reaches this point of
                # the queue: what follows in the queue happened after the
                # snapshot, under the same lock. What the table decided but
                # the driver has not published yet goes first.
                pending = self._engine.events()
                if pending:
                    self._publish(pending)
                self._listeners.add(callback, self._events,
                                    [MemberEvent(ADDED, m) for m in self._engine.members()])
            else:
                self._listeners.add(callback)

    def remove_listener(self, callback: Listener) -> None:
        self._listeners.remove(callback)

    def wait_for(self, predicate: Callable[[list[Member]], object],
                 timeout: float | None = None) -> list[Member]:
        """Wait until ``predicate(members)`` is true (checked now and after
        every change, on this thread); return the members then. TimeoutError
        after ``timeout`` seconds; RuntimeError when not running or stopped
        meanwhile."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._changed:
                generation = self._generation
            members = self.members()
            if predicate(members):
                return members
            with self._changed:
                while self._generation == generation:
                    if self._phase not in (_RUNNING, _STARTING):
                        raise RuntimeError("McastService is not running")
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise TimeoutError(f"predicate not true within {timeout} s")
                    self._changed.wait(remaining)

    def _front_counts(self) -> dict[str, int]:
        return {"events_dropped": self._events.dropped if self._events else 0,
                "listener_errors": self._listener_errors,
                "subscribers": len(self._listeners),
                **(self._probe.stats() if self._probe else probe_stats_idle())}

    # -- the TCP listener for Tomcat ---------------------------------------------
    def _start_probe_listener(self) -> None:
        cfg = self.config
        listener = TribesListener(cfg.listen_address, cfg.member_port, self._engine.encode,
                                 self._may_reply_to, self._member_hosts)
        listener.start()
        if cfg.member_port == 0:     # advertise the port the kernel chose
            with self._lock:
                self._engine.set_member_port(listener.port)
        self._probe = listener

    def _stop_probe_listener(self) -> None:
        if self._probe is not None:
            self._probe.stop()
            self._probe = None

    # -- the I/O thread ------------------------------------------------------------
    def _wake(self) -> None:
        assert self._wake_w is not None     # (closed after a stop: send fails, as it may)
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass    # full: a wake-up is already pending

    def _io_loop(self) -> None:
        assert self._wake_r is not None     # start() made it before this thread
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        watched: set[int] = set()
        more = False          # pump's batch holds datagrams: read again without waiting
        busy = False          # datagrams keep coming: let pump wait in the kernel
        last_read = -math.inf
        engine, lock, clock = self._engine, self._lock, self.clock
        while not self._stopping:
            try:
                with lock:
                    now = clock()
                    deadline = engine.next_deadline()
                    assert deadline is not None     # the engine runs while this loop does
                    fds = self._receive_fds(now)
                if busy and len(fds) == 1 and not more:
                    more, busy = self._drain_busy(deadline, now, fds[0])
                else:
                    for fd in watched - set(fds):
                        poller.unregister(fd)
                    for fd in set(fds) - watched:
                        poller.register(fd, select.POLLIN)
                    watched = set(fds)
                    if more:
                        timeout = 0
                    elif deadline == math.inf:
                        # Nothing due until a report (dns_members, its lookup in
                        # flight): the lookup thread wakes us with the answer.
                        timeout = -1
                    else:
                        timeout = max(0, math.ceil((deadline - now) * 1000))
                    ready = poller.poll(timeout)
                    if self._stopping:
                        break
                    readable = [f for f, _ in ready if f in watched]
                    if fds and (more or readable):
                        now = clock()
                        # Busy mode lets pump block on one socket: never with two.
                        busy = len(fds) == 1 and now - last_read < BUSY_GAP_S
                        last_read = now
                        more = self._drain_ready(readable, deadline)
                    if any(f == self._wake_r.fileno() for f, _ in ready):
                        self._wake_r.recv(4096)
                with lock:
                    self._step(clock())
            except Exception:
                busy = False
                self._crashed()

    def _drain_busy(self, deadline: float, now: float, fd: int) -> tuple[bool, bool]:
        """Datagrams keep coming: rather than poll for each (a return to
        Python per datagram), let pump block in recvmmsg, without the GIL,
        for a short slice at most (so stop() waits that long at worst).
        Returns (more, still busy): a slice that passed in silence ends it.
        (Sends on the unicast socket never block meanwhile: MSG_DONTWAIT.)"""
        sock = self._socket_of(fd)
        assert sock is not None             # fd is one of our receiving sockets
        sock.setblocking(True)
        wait = max(0.001, min(BUSY_SLICE_S, deadline - now))
        micros = int(wait * 1_000_000)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                        struct.pack("@ll", micros // 1_000_000, micros % 1_000_000))
        more = self._drain(deadline, budget=-1, fd=fd)
        if more:
            self._more_fd = fd
        busy = more or self.clock() >= deadline
        if not busy:
            sock.setblocking(False)
        return more, busy

    def _crashed(self) -> None:
        """An unexpected exception in the I/O loop: log it, flag it in
        stats() ("healthy": False), and carry on after a pause, so one bug
        cannot freeze the table while ``running`` stays True."""
        log.exception("membership driver failed; carrying on")
        with self._lock:
            self._engine.on_internal_error(self.clock())
        time.sleep(CRASH_BACKOFF_S)

    # -- DNS and host-name lookups ------------------------------------------------
    def _start_lookups(self, lookups: list[Lookup]) -> None:
        if self._lookups is None:
            self._lookups = queue.SimpleQueue()
            threading.Thread(target=self._lookup_loop, args=(self._lookups,),
                             name="mcastmember-dns", daemon=True).start()
        for lookup in lookups:
            self._lookups.put(lookup)

    def _lookup_loop(self, lookups: queue.SimpleQueue[Lookup | None]) -> None:
        """The DNS worker: a query waits here, never in the I/O thread."""
        from ..discovery.resolver import lookup as run
        while True:
            query = lookups.get()
            if query is None:
                return
            try:
                answer: AbstractSet[tuple[str, int]] | Exception = run(query, self._resolver())
            except Exception as error:     # DnsFailure, or a resolver's own bug
                answer = error
            with self._lock:
                self._engine.on_lookup(query, answer, self.clock())
            self._wake()                   # new members to publish, new deadlines

    # -- the second opinion (verify) ---------------------------------------------
    def _start_probes(self, attempts: list[ProbeAttempt]) -> None:
        # One prober thread for them all: the engine bounds how many are
        # in flight (MAX_PROBE_SOCKETS), the prober closes each socket.
        assert self._prober is not None     # started with verify
        self._prober.submit(attempts)

    def _probed(self, results: list[tuple[ProbeAttempt, bool | None]]) -> None:
        """The prober's reports (on its thread): every attempt it was handed,
        once, so that the engine frees its socket slot."""
        with self._lock:
            for attempt, answered in results:
                self._engine.on_probe(attempt, answered, self.clock())
        self._wake()        # new deadlines, events, room for the next attempts

    # -- events ------------------------------------------------------------------
    def _publish(self, events: Sequence[MemberEvent]) -> None:
        assert self._events is not None     # publishing is for a started service
        self._events.put_many(events)
        self._notify_changed()

    def _notify_changed(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

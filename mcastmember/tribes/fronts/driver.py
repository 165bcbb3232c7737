"""What the threaded service and the asyncio front share: the engine they
drive, the sockets they open, and the one step both take after every
wake-up. Neither front decides anything about time: the engine does."""

from __future__ import annotations

import abc
import contextlib
import errno
import logging
import time
from typing import TYPE_CHECKING, TypeVar, cast

from ..wire import layout as L
from ..._runtime import forks, net
from ..._runtime.listen import host_key
from ..engine.config import ServiceConfig, Settings
from ..engine.settings import refuse_unknown
from ..engine.engine import RECEIVE, SEND, UNICAST, MembershipEngine
from ..._runtime.events import queue_bounds
from ..engine.member import find_by_address, find_by_unique_id

if TYPE_CHECKING:
    import socket
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from typing import ClassVar

    import dns.resolver

    from ..engine.config import AuthMode, Keys
    from ..engine.datapath import Outgoing
    from ..engine.engine import SocketRole
    from ..engine.verify import ProbeAttempt
    from ..._runtime.events import EventsLost
    from ..engine.events import MemberEvent
    from ..engine.member import Member
    from ..discovery.peers import Lookup
    from ..engine.stats import Stats

# Datagrams one pump call may handle before it returns, and pump calls per
# wake-up: a busy group cannot hold the engine (and its lock) for long.
PUMP_BUDGET = 256
PUMP_CALLS = 64
_AGAIN = (-errno.EAGAIN, -errno.EINTR)

log = logging.getLogger("mcastmember")
# What a listener is given: a MemberEvent, or (threads) an EventsLost too.
_Event = TypeVar("_Event", "MemberEvent", "MemberEvent | EventsLost")

class MembershipFront(abc.ABC):
    """Base of McastService and AsyncMcastService: a driver of one
    :class:`mcastmember.tribes.engine.engine.MembershipEngine`. Subclasses wait (threads
    or the event loop), publish events, and guard the engine with
    ``_table_lock`` where more than one thread calls it."""

    _table_lock: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    clock = staticmethod(time.monotonic)    # the only clock: engine times come from it

    def __init__(self, address: str | None, port: int, settings: Settings,
                 event_queue_size: int, event_queue_bytes: int) -> None:
        self._refuse_unknown(settings)
        self.config = ServiceConfig(address, port, **settings)
        self._queue_size, self._queue_bytes = queue_bounds(
            event_queue_size, event_queue_bytes, ("event_queue_size", "event_queue_bytes"))
        self._engine = MembershipEngine(self.config)
        self._listener_errors = 0
        # The open sockets by role (none while stopped).
        self._sockets = {role: _Sockets() for role in self._OPENERS}
        self._more_fd: int | None = None       # the socket whose datagrams pump's batch still holds
        self._dns_resolver: dns.resolver.Resolver | None = None
        self._buf = bytearray(L.RECV_BUFFER_LEN)
        # A forked child's copy of a running front: it must neither say
        # goodbye for the parent nor touch the sockets it shares with it.
        self._inert = False
        forks.disarm_in_child(self)

    def _refuse_unknown(self, settings: Settings) -> None:
        """UnknownSetting for a keyword that is no setting, named with this
        front (not ServiceConfig, which users never call) and the likeliest
        one meant (the runtime's refusal, the gossip fronts' too)."""
        if any(name not in Settings.__optional_keys__ for name in settings):
            import inspect

            refuse_unknown(type(self).__name__, settings, inspect.signature(type(self)).parameters)

    # -- what the application sees ---------------------------------------------
    @property
    def running(self) -> bool:
        return self._engine.running

    @property
    def local_member(self) -> Member:
        """Our own member as we advertise it (with the alive time last sent)."""
        with self._table_lock:
            return self._engine.local_member

    def members(self) -> list[Member]:
        """Snapshot of the other members, oldest first (as Tomcat orders them)."""
        with self._table_lock:
            return self._engine.members()

    def by_unique_id(self, unique_id: bytes) -> Member | None:
        """The member with this 16-byte unique id, or None."""
        return find_by_unique_id(self.members(), unique_id)

    def by_address(self, host: str | bytes, port: int) -> Member | None:
        """The member at ``host`` (address text or raw bytes) and member
        ``port``, or None."""
        return find_by_address(self.members(), host, port)

    def _may_reply_to(self, member: Member) -> bool:
        """Whether the TCP listener may connect to ``member``, a frame's
        sender: only a member of our table (by identity: host, port and
        unique id), and an authenticated one when keys are set."""
        with self._table_lock:
            stored = self._engine.stored(member)
        return stored is not None and stored.authenticated is not False

    def _member_hosts(self) -> set[str]:
        """The hosts (``listen.host_key``) of the members the TCP listener
        may reply to: their connections come first at its cap."""
        return {host_key(m.address) for m in self.members() if m.authenticated is not False}

    def __len__(self) -> int:
        return len(self.members())

    def __bool__(self) -> bool:        # a front is a front, members or none
        return True

    def __iter__(self) -> Iterator[Member]:
        return iter(self.members())

    def __contains__(self, member: object) -> bool:
        return member in self.members()

    def set_payload(self, payload: bytes | str) -> None:
        """Advertise new payload bytes (str: UTF-8); sent at once."""
        with self._table_lock:
            self._engine.set_payload(payload)
            self._send_if_running()

    def set_domain(self, domain: bytes | str) -> None:
        """Advertise a new domain (bytes, or Tomcat's text form); sent at once."""
        with self._table_lock:
            self._engine.set_domain(domain)
            self._send_if_running()
            events = self._engine.events()
            if events:      # members of the old domain removed under filter_domain
                self._publish(events)   # under the lock, in order with the driver's

    @property
    def auth(self) -> AuthMode:
        """The authentication mode now: the ``auth`` setting until ``set_keys``."""
        return self._engine.auth

    def set_keys(self, keys: Keys, auth: AuthMode | None = None) -> None:
        """Authenticate with other keys (or mode) from now on, without a
        restart: ``keys`` and ``auth`` as in ServiceConfig (None: no keys).
        ConfigurationError for a bad key ring; nothing changes then."""
        with self._table_lock:
            self._engine.set_keys(keys, auth)

    def stats(self) -> Stats:
        """Counters of the table (received, fast_path, added, malformed.* ...)
        and of the engine and the front (sent, send_errors, socket_reopened,
        pauses, healthy, events_dropped ...): the same keys on both fronts,
        typed for checkers (``mcastmember.Stats``), a dict at run time."""
        with self._table_lock:
            stats = self._engine.stats()
        stats.update(self._front_counts())
        return cast("Stats", stats)

    # -- sockets -------------------------------------------------------------------
    def _open_receivers(self) -> list[socket.socket]:
        cfg = self.config
        assert cfg.address is not None        # multicast is on: there is a group
        # Non-blocking: the front waits for readiness (or a deadline) itself,
        # so nothing has to shut the socket down to wake a blocked read.
        socks = net.open_receivers(cfg.address, cfg.port, cfg.links, 1.0)
        for sock in socks:
            sock.setblocking(False)
        return socks

    def _open_senders(self) -> list[socket.socket]:
        cfg = self.config
        assert cfg.address is not None        # multicast is on: there is a group
        socks = net.open_senders(cfg.address, cfg.port, cfg.links, cfg.ttl, cfg.loopback)
        for sock in socks:
            sock.setblocking(False)   # a heartbeat that cannot go now is replaced by the next
        return socks

    def _open_unicast(self) -> list[socket.socket]:
        cfg = self.config
        return [net.open_unicast(cfg.unicast_address, cfg.port)]

    # How to open the sockets of each role. Multicast has one sender per card
    # (one receiver, or one per card for a link-scoped IPv6 group); unicast
    # one socket for both.
    _OPENERS: ClassVar[dict[SocketRole, Callable[[MembershipFront], list[socket.socket]]]]
    _OPENERS = {RECEIVE: _open_receivers, SEND: _open_senders, UNICAST: _open_unicast}

    @property
    def _recv_fds(self) -> list[int]:
        return self._sockets[RECEIVE].fds

    @property
    def _send_fds(self) -> list[int]:
        return self._sockets[SEND].fds

    @property
    def _uni_fds(self) -> list[int]:
        return self._sockets[UNICAST].fds

    @property
    def _recv_fd(self) -> int:
        return (self._recv_fds or [-1])[0]

    @property
    def _uni_fd(self) -> int:
        return (self._uni_fds or [-1])[0]

    def _open_sockets(self) -> None:
        try:
            for role in self._engine.sockets():
                self._sockets[role].replace(self._OPENERS[role](self))
        except BaseException:
            self._close_sockets()
            raise

    def _close_sockets(self) -> None:
        for sockets in self._sockets.values():
            sockets.replace([])
        self._more_fd = None

    def _reopen(self, which: SocketRole) -> None:
        try:
            fresh = self._OPENERS[which](self)
        except OSError as error:
            self._engine.on_reopened(which, error)
            return
        if which != SEND:
            self._watch_receiver(None)
            self._more_fd = None
        self._sockets[which].replace(fresh)
        self._engine.on_reopened(which)

    def _receive_fds(self, now: float) -> tuple[int, ...]:
        """The sockets to read at ``now``: multicast's, unicast's, or both."""
        if not self._engine.reading(now):
            return ()
        return tuple(self._recv_fds + self._uni_fds)

    def _socket_of(self, fd: int) -> socket.socket | None:
        """The receiving socket whose descriptor is ``fd``."""
        for sock in self._sockets[RECEIVE].socks + self._sockets[UNICAST].socks:
            if sock.fileno() == fd:
                return sock
        return None

    # -- the driver's steps ----------------------------------------------------------
    def _start_engine(self) -> None:
        """After the sockets are open: start the engine and send the first heartbeat."""
        self._inert = False
        self._engine.start(self.clock())
        self._step(self.clock())

    def _drain_ready(self, ready: Iterable[int], deadline: float) -> bool:
        """Drain the readable sockets among ``ready`` (and the one whose
        datagrams pump's batch still holds, first: pumping another socket
        would drop them). True when more may wait in pump's batch."""
        fds = [self._more_fd] if self._more_fd is not None else []
        fds += [fd for fd in ready if fd != self._more_fd]
        self._more_fd = None
        for fd in fds:
            if self._drain(deadline, fd=fd):
                self._more_fd = fd
                return True
        return False

    def _drain(self, deadline: float, budget: int = PUMP_BUDGET, fd: int | None = None) -> bool:
        """Read what the receive socket ``fd`` (default: multicast's) holds,
        until the engine's ``deadline`` at the latest. Known members' heartbeats stay inside pump (compiled:
        in C, the GIL released, and outside ``_table_lock``, as only the
        driver's own thread ever pumps or expires; through the engine's data
        path, see engine/datapath.py); it returns for a datagram
        the engine must see, or with -EAGAIN when the socket is empty (or its
        receive timeout passed), the deadline reached or the budget spent.
        True when more may wait in pump's batch."""
        engine, buf, lock = self._engine, self._buf, self._table_lock
        fd = self._recv_fd if fd is None else fd
        unicast = fd == self._uni_fd
        path, clock = engine.data_path, self.clock
        for _ in range(PUMP_CALLS):
            n = path.pump(fd, buf, deadline, budget, unicast)
            if n >= 0:
                source = path.source() if unicast else None
                with lock:
                    engine.receive(buf, n, clock(), source)
            elif n in _AGAIN:
                break
            else:
                with lock:
                    engine.on_receive_error(-n, clock(), UNICAST if unicast else RECEIVE)
                return False
        return bool(path.pending())

    def _step(self, now: float) -> None:
        """After every wake-up: what is due, what to send, what to reopen,
        what to tell the application."""
        engine = self._engine
        engine.on_timer(now)
        self._send_due(now)
        lookups = engine.lookups_due(now)
        if lookups:
            self._start_lookups(lookups)
        probes = engine.probes_due(now)
        if probes:
            self._start_probes(probes)
        for which in engine.reopen_due():
            self._reopen(which)
        events = engine.events()
        if events:
            self._publish(events)

    def _send_due(self, now: float) -> None:
        datagram = self._engine.outgoing(now)
        if datagram is not None:
            self._send(datagram, now)

    def _send(self, datagram: Outgoing, now: float) -> None:
        """One heartbeat (or goodbye) to the group and to every unicast peer."""
        engine = self._engine
        path = engine.data_path
        for fd in self._send_fds:           # one per card
            engine.on_send_result(path.send(datagram, fd), now)
        for fd in self._uni_fds:
            engine.on_unicast_result(path.fan_out(datagram, fd), now)

    def _send_if_running(self) -> None:
        """A change is sent at once, by the caller's thread; the table is
        left to the driver's thread (it expires while nothing pumps)."""
        if self._engine.running and not self._inert:
            self._send_due(self.clock())

    def _stop_engine(self) -> None:
        """Stop the engine and say goodbye (unless we are a forked child's
        copy); deliver its last events."""
        if self._inert:
            # A forked child's copy: its engine was copied as the parent's
            # threads left it, maybe in the middle of a step (the member
            # index held by pump), so it is replaced, never stopped: nothing
            # is sent and nothing of the parent's table is touched.
            self._engine = MembershipEngine(self.config)
            return
        goodbye = self._engine.stop(self.clock())
        if goodbye is not None:
            self._send(goodbye, self.clock())   # one try: a lost goodbye costs a drop time
        events = self._engine.events()
        if events:
            self._publish(events)

    def _become_inert(self) -> None:
        self._inert = True

    # -- for subclasses ----------------------------------------------------------------
    # What a listener may raise and the front survives (logged and counted
    # as listener_errors). Exception here; a front whose listeners run on a
    # thread of its own survives everything (see McastService).
    _SURVIVED: tuple[type[BaseException], ...] = (Exception,)

    def _call(self, callback: Callable[[_Event], object], event: _Event) -> None:
        """Call a listener. What it raises of ``_SURVIVED`` is logged and
        counted (``listener_errors``): a failing listener never stops the
        driver. Anything else goes on to whoever runs the driver (under
        asyncio, the event loop: a KeyboardInterrupt or SystemExit stops it,
        as asyncio does for any callback)."""
        try:
            callback(event)
        except self._SURVIVED:
            self._listener_errors += 1
            log.exception("membership listener %r failed on %r", callback, event)

    @abc.abstractmethod
    def _publish(self, events: Sequence[MemberEvent]) -> None:
        """Hand the engine's events to the listeners and waiters."""

    def _watch_receiver(self, fd: int | None) -> None:
        """Wait for readability of ``fd`` (None: of nothing) from now on."""

    @abc.abstractmethod
    def _start_lookups(self, lookups: list[Lookup]) -> None:
        """Run each ``peers.Lookup`` away from the receive path and report it
        with ``engine.on_lookup`` (a thread, or the loop's executor)."""

    @abc.abstractmethod
    def _start_probes(self, attempts: list[ProbeAttempt]) -> None:
        """Make each probe attempt (one TCP connect, closed at once) away
        from the receive path and report it with ``engine.on_probe``."""

    def _resolver(self) -> dns.resolver.Resolver | None:
        """The DNS resolver lookups use (made once, on first use)."""
        if self._dns_resolver is None and self.config.dns is not None:
            from ..discovery.resolver import make_resolver
            self._dns_resolver = make_resolver(self.config.dns_servers)
        return self._dns_resolver

    @abc.abstractmethod
    def _front_counts(self) -> dict[str, int]:
        """The front's own counters, for ``stats()``."""


class _Sockets:
    """The open sockets of one role, and their descriptors (what pump and
    send take), replaced together."""

    __slots__ = ("socks", "fds")

    def __init__(self) -> None:
        self.socks: list[socket.socket] = []
        self.fds: list[int] = []

    def replace(self, fresh: list[socket.socket]) -> None:
        """Take ``fresh`` (none: close them all) and close the ones held before."""
        old, self.socks, self.fds = self.socks, fresh, [sock.fileno() for sock in fresh]
        for sock in old:
            sock.close()

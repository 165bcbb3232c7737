"""What the threaded service and the asyncio front share: the engine they
drive, the sockets they open, and the one step both take after every
wake-up. Neither front decides anything about time: the engine does."""

import contextlib
import errno
import os
import time
import weakref

from . import _layout as L
from . import net
from .config import ServiceConfig
from .engine import RECEIVE, MembershipEngine

# Datagrams one pump call may handle before it returns, and pump calls per
# wake-up: a busy group cannot hold the engine (and its lock) for long.
PUMP_BUDGET = 256
PUMP_CALLS = 64
_AGAIN = (-errno.EAGAIN, -errno.EINTR)

_fronts = weakref.WeakSet()    # every front, so a forked child can disarm its copies


def _after_fork_in_child():
    for front in list(_fronts):
        front._become_inert()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class MembershipFront:
    """Base of McastService and AsyncMembership: a driver of one
    :class:`mcastmember.engine.MembershipEngine`. Subclasses wait (threads
    or the event loop), publish events, and guard the engine with
    ``_table_lock`` where more than one thread calls it."""

    _table_lock = contextlib.nullcontext()
    clock = staticmethod(time.monotonic)    # the only clock: engine times come from it

    def __init__(self, address, port, settings):
        self.config = ServiceConfig(address, port, **settings)
        self._engine = MembershipEngine(self.config)
        self._recv_sock = self._send_sock = None
        self._recv_fd = self._send_fd = -1
        self._buf = bytearray(L.RECV_BUFFER_LEN)
        # A forked child's copy of a running front: it must neither say
        # goodbye for the parent nor touch the sockets it shares with it.
        self._inert = False
        _fronts.add(self)

    # -- what the application sees ---------------------------------------------
    @property
    def running(self):
        return self._engine.running

    @property
    def table(self):
        """The membership table the engine keeps (``Membership``)."""
        return self._engine.table

    @table.setter
    def table(self, table):    # before start(): another table (a benchmark's codec)
        self._engine.table = table

    @property
    def local_member(self):
        """Our own member as we advertise it (with the alive time last sent)."""
        with self._table_lock:
            return self._engine.local_member

    def members(self):
        """Snapshot of the other members, oldest first (as Tomcat orders them)."""
        with self._table_lock:
            return self._engine.table.members()

    def set_payload(self, payload):
        """Advertise new payload bytes (str: UTF-8); sent at once."""
        with self._table_lock:
            self._engine.set_payload(payload)
            self._send_if_running()

    def set_domain(self, domain):
        """Advertise a new domain (bytes, or Tomcat's text form); sent at once."""
        with self._table_lock:
            self._engine.set_domain(domain)
            self._send_if_running()
            events = self._engine.events()
        if events:      # members of the old domain removed under filter_domain
            self._publish(events)

    def set_keys(self, keys, auth=None):
        """Authenticate with other keys (or mode) from now on, without a
        restart: ``keys`` and ``auth`` as in ServiceConfig (None: no keys).
        ConfigurationError for a bad key ring; nothing changes then."""
        with self._table_lock:
            self._engine.set_keys(keys, auth)

    def stats(self):
        """Counters of the table (received, fast_path, added, malformed.* ...)
        and of the engine and the front (sent, send_errors, socket_reopened,
        pauses, healthy, events_dropped ...): the same keys on both fronts."""
        with self._table_lock:
            stats = self._engine.stats()
        stats.update(self._front_counts())
        return stats

    # -- sockets -------------------------------------------------------------------
    def _open_receiver(self):
        cfg = self.config
        # Non-blocking: the front waits for readiness (or a deadline) itself,
        # so nothing has to shut the socket down to wake a blocked read.
        sock = net.open_receiver(cfg.address, cfg.port, cfg.interface, 1.0)
        sock.setblocking(False)
        return sock

    def _open_sender(self):
        cfg = self.config
        sock = net.open_sender(cfg.address, cfg.port, cfg.interface, cfg.ttl, cfg.loopback)
        sock.setblocking(False)   # a heartbeat that cannot go now is replaced by the next
        return sock

    def _open_sockets(self):
        recv = self._open_receiver()
        try:
            send = self._open_sender()
        except BaseException:
            recv.close()
            raise
        self._recv_sock, self._send_sock = recv, send
        self._recv_fd, self._send_fd = recv.fileno(), send.fileno()

    def _close_sockets(self):
        for sock in (self._recv_sock, self._send_sock):
            if sock is not None:
                sock.close()
        self._recv_sock = self._send_sock = None
        self._recv_fd = self._send_fd = -1

    def _reopen(self, which):
        try:
            fresh = self._open_receiver() if which == RECEIVE else self._open_sender()
        except OSError as error:
            self._engine.on_reopened(which, error)
            return
        if which == RECEIVE:
            self._watch_receiver(None)
            old, self._recv_sock, self._recv_fd = self._recv_sock, fresh, fresh.fileno()
        else:
            old, self._send_sock, self._send_fd = self._send_sock, fresh, fresh.fileno()
        old.close()
        self._engine.on_reopened(which)

    # -- the driver's steps ----------------------------------------------------------
    def _start_engine(self):
        """After the sockets are open: start the engine and send the first heartbeat."""
        self._inert = False
        self._engine.start(self.clock())
        self._step(self.clock())

    def _drain(self, deadline, budget=PUMP_BUDGET):
        """Read what the receive socket holds, until the engine's ``deadline``
        at the latest. Known members' heartbeats stay inside pump (compiled:
        in C, the GIL released, and outside ``_table_lock``, as only the
        driver's own thread ever pumps or expires); it returns for a datagram
        the engine must see, or with -EAGAIN when the socket is empty (or its
        receive timeout passed), the deadline reached or the budget spent.
        True when more may wait in pump's batch."""
        engine, fd, buf, lock = self._engine, self._recv_fd, self._buf, self._table_lock
        table, clock = engine.table, self.clock
        for _ in range(PUMP_CALLS):
            n = table.pump(fd, buf, deadline, budget)
            if n >= 0:
                with lock:
                    engine.receive(buf, n, clock())
            elif n in _AGAIN:
                break
            else:
                with lock:
                    engine.on_receive_error(-n, clock())
                return False
        return bool(table.pending())

    def _step(self, now):
        """After every wake-up: what is due, what to send, what to reopen,
        what to tell the application."""
        engine = self._engine
        engine.on_timer(now)
        self._send_due(now)
        for which in engine.reopen_due():
            self._reopen(which)
        events = engine.events()
        if events:
            self._publish(events)

    def _send_due(self, now):
        packet = self._engine.outgoing(now)
        if packet is not None:
            self._engine.on_send_result(packet.send(self._send_fd), now)

    def _send_if_running(self):
        """A change is sent at once, by the caller's thread; the table is
        left to the driver's thread (it expires while nothing pumps)."""
        if self._engine.running and not self._inert:
            self._send_due(self.clock())

    def _stop_engine(self):
        """Stop the engine and say goodbye (unless we are a forked child's
        copy); deliver its last events."""
        goodbye = self._engine.stop(self.clock())
        if goodbye is not None and not self._inert:
            goodbye.send(self._send_fd)   # one try: a lost goodbye costs a drop time
        events = self._engine.events()
        if events:
            self._publish(events)

    def _become_inert(self):
        self._inert = True

    # -- for subclasses ----------------------------------------------------------------
    def _publish(self, events):
        raise NotImplementedError

    def _watch_receiver(self, fd):
        """Wait for readability of ``fd`` (None: of nothing) from now on."""

    def _front_counts(self):
        raise NotImplementedError

"""What both gossip fronts share: SerfService (threads) and AsyncSerfService (asyncio).

A :class:`GossipFront` owns the settings (declared and checked once for
both fronts, in :mod:`.settings`), one UDP socket and one TCP
listening socket, the TCP connections, the front's counters, and every step
that moves bytes between them and the
:class:`~mcastmember.gossip.serf.node.SerfNode`: datagrams in and out,
streams others open to us (bounded in count and bytes), streams the node asks
us to open. What a front adds is how it waits: the threaded one in
``select`` on its own thread, the asyncio one in the running loop. Every
decision (what to send, when, what a member's state is) is the node's.

Needs the ``gossip`` extra (msgpack and cryptography); never imported by
``import mcastmember``.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import os
import selectors
import socket
import time
import typing
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

try:
    from ..serf.node import (GossipMember, KeyringChanged, SerfMemberEvent, QueryReceived, SerfNode,
                                    SerfNodeEvent)
except ImportError as error:
    _missing = (error.name or "").partition(".")[0]
    if _missing not in ("msgpack", "cryptography"):
        raise                           # installed, but broken: its own error says more
    raise ModuleNotFoundError("the gossip fronts need the gossip extra (msgpack and cryptography): "
                              "pip install 'mcastmember[gossip]'", name=_missing) from None
from ..._runtime.events import EventBuffer, EventsLost
from ..._runtime import forks, net
from ..._runtime.dispatch import Listeners
from ..._runtime.ratelimit import RateLimitedLog
from ..serf import messages
from ..serf.layout import MemberStatus
from ..serf.retry_join import RetryJoined, RetryJoinFailed
from ..serf.tags import encode_tags
from ..memberlist.state import Addr
from ..memberlist.streams import STREAM_TURN
from ..._runtime.listen import AcceptBackoff, ConnectionShares, host_key
from .settings import DEFAULT_BIND_ADDR, DEFAULT_PORT, MAX_INCOMING_STREAMS, front_settings, takes_settings
from .keyring_file import save_keyring
from .snapshot_file import open_snapshot, snapshot_stats
from ..agent.handlers import QueryHandler
from ..agent.rpc_server import COUNTERS as RPC_COUNTERS
from .tags_file import save_tags

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..agent.handler_aio import AsyncHandlers
    from ..agent.handler_threads import ThreadHandlers
    from ..agent.handlers import HandlerSettings

    HandlerRunner = typing.Union[ThreadHandlers, AsyncHandlers]

    from .settings import SerfServiceSettings

log = logging.getLogger("mcastmember")

#: connections taken per wake-up of the listening socket, so a flood of
#: them does not hold up the datagrams and the node's timers
ACCEPTS_PER_WAKE = 16
#: how long the members' hosts (who gets a member's share of the stream
#: slots) are taken as they were: a member that just joined is a stranger
#: for at most this long
MEMBER_HOSTS_TTL_S = 1.0
#: datagrams read per wake-up before the front turns to the rest
READ_BATCH = 256
#: bytes read from one stream per wake-up, at most
STREAM_READ = 65536
STREAM_READS_PER_WAKE = 16
#: a stream that grew but not doubled since the node last saw it is handed
#: over once its sender has been quiet this long
STREAM_QUIET_S = 0.02
READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE

#: the front's counters (both fronts have each), beside the node's in stats()
FRONT_COUNTERS = ("datagrams_sent", "datagrams_received", "send_errors", "connections_accepted",
                  "connections_refused", "connections_too_big", "connections_timed_out", "connections_opened",
                  "connections_failed", "listener_events_dropped", "stream_events_dropped", "listener_errors",
                  "bytes_sent.udp", "bytes_received.udp", "bytes_sent.tcp", "bytes_received.tcp",
                  "keyring_file_errors", "connections_evicted", "accept_errors")

#: what listeners are called with: each event, or (SerfService) an EventsLost
#: where the dispatcher fell behind (the return value is ignored)
Listener = Callable[[typing.Union[SerfNodeEvent, EventsLost]], object]
#: a ``wait_for`` predicate: true for the members waited for
Predicate = Callable[[list[GossipMember]], object]


# ------------------------------------------------------------------ events

def serf_event_bytes(event: SerfNodeEvent) -> int:
    """What a waiting event weighs in ``event_queue_bytes``: every string and
    byte string it holds (names, tags, payloads, filters, answers, error
    texts), the network choosing most of their sizes. The rest of an event
    is a few hundred bytes, which the bound in count covers, as for the
    heartbeat fronts' ``event_bytes``."""
    return _held_bytes(event)


def _held_bytes(value: object) -> int:
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, Mapping):
        return sum(_held_bytes(k) + _held_bytes(v) for k, v in value.items())
    if isinstance(value, (tuple, list)):
        return sum(_held_bytes(v) for v in value)
    if dataclasses.is_dataclass(value):     # the events, their members and queries
        return sum(_held_bytes(getattr(value, name)) for name in _field_names(type(value)))
    return 0


_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(kind: type) -> tuple[str, ...]:
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(kind))
    return names


def event_buffer(size: int, max_bytes: int) -> EventBuffer[SerfNodeEvent, typing.NoReturn]:
    """The events waiting for one reader of ``events()``: the heartbeat
    fronts' buffer, at most ``size`` events and ``max_bytes`` as
    :func:`serf_event_bytes` counts them."""
    return EventBuffer(size, max_bytes, serf_event_bytes)


_STATUS_KIND = {MemberStatus.LEFT: "left", MemberStatus.FAILED: "failed"}


def current(members: Iterable[GossipMember]) -> list[SerfMemberEvent]:
    """The members as events: each as the one that put it in its status
    (``joined``, or ``left`` or ``failed``)."""
    return [SerfMemberEvent(_STATUS_KIND.get(m.status, "joined"), m) for m in members]


# ------------------------------------------------------------------ the front

def stream_shares(max_streams: int) -> ConnectionShares:
    """How the ``max_streams`` slots for others' streams are shared, per
    source (an IPv6 source by its /64): a member's host (one of the members
    the node lists alive) may hold half of them, a stranger an eighth (at
    least one each), so a few sources that hold slots open leave the rest
    to the members that join (one stream each). At the cap a member's host
    closes the idlest stranger's stream; a stranger, one of the stranger
    source holding the most (listen.ConnectionShares)."""
    return ConnectionShares(max_streams, max(1, max_streams // 2), max(1, max_streams // 8))


@dataclass(eq=False)
class _StreamConn:
    sock: socket.socket
    addr: Addr
    deadline: float
    incoming: bool
    stream_id: int = 0
    inbuf: bytearray = field(default_factory=bytearray)
    outbuf: bytearray = field(default_factory=bytearray)
    connected: bool = True
    close_after_write: bool = False
    #: how much of ``inbuf`` the node last saw, and when to show it the rest if no more comes
    shown: int = 0
    show_at: float | None = None
    #: the node has work left on what it was shown (a big push/pull): another turn at the next wake-up
    working: bool = False
    #: the peer closed its side (nothing more to read; a reply may still be written)
    peer_closed: bool = False
    #: when it was opened or last had something to read: at the cap the idlest stranger's goes first
    heard: float = 0.0

    @property
    def source(self) -> str:
        """The peer's address, which its slot is counted under."""
        return self.addr[0]

    def next_time(self) -> float:
        return self.deadline if self.show_at is None else min(self.deadline, self.show_at)


@takes_settings
class GossipFront(abc.ABC):
    """A SerfNode on real sockets, without the waiting (see the module).

    A front calls :meth:`_bind` to start, :meth:`_ready` with what its
    waiting found readable or writable, :meth:`_tick` after each wake-up,
    :meth:`_next_wake` for when to wake next, and :meth:`_close_all` to stop;
    it gives :meth:`_watch`, :meth:`_unwatch`, :meth:`_poke` (wake up soon:
    the node has something new) and :meth:`_deliver` (the node's events)."""

    #: a front's own default of ``event_queue_size`` (the declaration leaves it to each)
    _default_event_queue: int | None = None
    #: what runs a front's event handlers (its class, made with the front and its settings)
    _handler_runner: Callable[[Any, HandlerSettings], HandlerRunner]

    def __init__(self, name: str, bind_addr: str = DEFAULT_BIND_ADDR, port: int = DEFAULT_PORT, *,
                 lock: AbstractContextManager[Any], **settings: Unpack[SerfServiceSettings]) -> None:
        cfg = front_settings(type(self).__name__, name, bind_addr, port, settings, self._default_event_queue)
        #: Serf's -keyring-file: the keys at start, written again when ``serf keys`` changes them
        self.keyring_file = cfg.keyring_file
        #: Serf's -tags-file: the tags at start, written again when set_tags changes them
        self.tags_file = cfg.tags_file
        self.bind_addr = bind_addr
        self.port = port
        self.node = SerfNode(cfg.gossip, cfg.tags, cfg.serf, seed=cfg.seed)
        self.node.retry = cfg.retry
        #: where the others list and reach us (the ``advertise`` setting, or the bound address)
        self.advertise: Addr = (cfg.gossip.advertise_addr, cfg.gossip.advertise_port)
        # a stream's decoding and merging a bounded turn at a time (_hand_over), pings answered between
        self.node.engine.stream_turn_size = STREAM_TURN
        # memberlist times its gossip rounds (memberlist.gossip); the engine has no clock of its own
        self.node.engine.shared.telemetry.clock = time.perf_counter
        # Serf's -snapshot: read now, so its clocks are the node's before any socket exists
        self._snapshot = open_snapshot(settings, self.node)
        #: the event handlers' runs (scripts and Python query handlers), off the I/O
        self._handlers = self._handler_runner(self, cfg.handlers)
        #: the agent's RPC, as the settings ask: its config, and its listener once started (a front's start)
        self._rpc_config = cfg.rpc
        self._rpc: Any = None
        self._family = cfg.family
        self._max_streams = cfg.max_streams
        self._queue_size = cfg.event_queue_size
        self._queue_bytes = cfg.event_queue_bytes
        self._max_stream_bytes = cfg.gossip.limits.max_stream
        self._tcp_timeout = cfg.gossip.tcp_timeout
        self._lock = lock
        self._counts: dict[str, int] = dict.fromkeys(FRONT_COUNTERS, 0)
        self._listeners: Listeners[SerfNodeEvent] = Listeners(self._call_listener)
        self._conns: dict[socket.socket, _StreamConn] = {}
        self._outgoing: dict[int, _StreamConn] = {}
        self._shares = stream_shares(cfg.max_streams)
        self._hosts: set[str] | None = None
        self._hosts_until = 0.0
        self._backoff = AcceptBackoff()
        #: while accept backs off (descriptors ran out): when it accepts again
        self._accept_resume: float | None = None
        self._rate_log = RateLimitedLog(log)
        self._udp: socket.socket | None = None
        self._tcp: socket.socket | None = None
        self._running = False
        # A forked child's copy of a running front: it must neither speak for
        # the parent nor touch the sockets and poller it shares with it.
        self._inert = False
        forks.disarm_in_child(self)

    @property
    def running(self) -> bool:
        return self._running

    def _become_inert(self) -> None:
        """In a forked child (runtime.forks): from now on stop() only closes
        our copies of the descriptors."""
        self._inert = True
        self._listeners = Listeners(self._call_listener, self._listeners.listeners)

    # ------------------------------------------------------ what it offers

    def members(self) -> list[GossipMember]:
        """Every member the node knows (ourselves included; left and failed
        ones until reaped), by name."""
        with self._lock:
            return self.node.members()

    def coordinate(self) -> messages.Coordinate:
        """This member's network coordinate (RuntimeError if the serf
        setting ``disable_coordinates`` is on); ``estimate_rtt`` of two
        coordinates is what ``serf rtt`` prints."""
        with self._lock:
            return self.node.coordinate()

    def cached_coordinate(self, name: str) -> messages.Coordinate | None:
        """The network coordinate member ``name`` last acked our probe with
        (ours for our name); None if none yet, or coordinates are disabled."""
        with self._lock:
            return self.node.cached_coordinate(name)

    def user_event(self, name: str, payload: bytes, coalesce: bool = True) -> None:
        """``serf event``: a user event, gossiped to every member (ValueError
        over Serf's size limits)."""
        with self._lock:
            self.node.user_event(name, payload, time.monotonic(), coalesce)
        self._poke()

    def query(self, name: str, payload: bytes, *, filters: Iterable[bytes] = (), request_ack: bool = False,
              timeout: float | None = None, relay_factor: int = 0) -> messages.Query:
        """``serf query``: asked of every member (ourselves included); the
        answers arrive as QueryAnswer events (the query's ``id``), then one
        QueryFinished at its timeout (Serf's default when None)."""
        with self._lock:
            query = self.node.query(name, payload, time.monotonic(), filters=filters, request_ack=request_ack,
                                    timeout=timeout, relay_factor=relay_factor)
        self._poke()
        return query

    def key_operation(self, op: str, key: bytes = b"") -> messages.Query:
        """``serf keys -install/-use/-remove/-list`` (``op``: install, use,
        remove, list; ``key`` the raw key, none for list): asked of every
        member; one KeyResult event when all answered or at the deadline."""
        with self._lock:
            query = self.node.key_operation(op, key, time.monotonic())
        self._poke()
        return query

    def respond(self, received: QueryReceived, payload: bytes) -> None:
        """Answer a query (a ``QueryReceived`` event); ValueError past its
        deadline or over Serf's response size limit."""
        with self._lock:
            self.node.respond(received, payload, time.monotonic())
        self._poke()

    def on_query(self, name: str | None, handler: QueryHandler | None) -> None:
        """Answer the queries called ``name`` (None: any query no other handler
        is for) with ``handler(received)``, run off the I/O (a thread; under
        asyncio a coroutine function is awaited, another callable runs in the
        loop's executor) within ``handler_timeout``: bytes or text it returns
        are the answer, cut to the response size limit; None or empty, none.
        ``handler`` None removes the one for ``name``."""
        self._handlers.set_query_handler(name, handler)

    def force_leave(self, name: str, prune: bool = False) -> None:
        """``serf force-leave``: a failed member ``name`` is marked left
        here and the others are told (``prune``: forgotten at once)."""
        with self._lock:
            self.node.force_leave(name, time.monotonic(), prune)
        self._poke()

    @property
    def rpc_address(self) -> tuple[str, int] | None:
        """Where the agent RPC listens (``rpc_addr``), while it does."""
        return None if self._rpc is None else self._rpc.address

    def set_tags(self, tags: Mapping[str, str]) -> None:
        """New tags for this member, announced to the others; with a
        ``tags_file``, written there first, as Serf's agent does (an OSError
        if it cannot be written, the tags unchanged; a ConfigurationError,
        before any write, for tags Serf refuses)."""
        with self._lock:
            if self.tags_file is not None:
                encode_tags(tags, self.node.serf_settings.protocol_version)     # refused: neither changes
                save_tags(self.tags_file, tags)
            self.node.set_tags(tags, time.monotonic())
        self._poke()

    def _record_leave(self) -> None:
        """Before our leave starts (both fronts' leave()): the snapshot's
        ``leave`` record, written at once, as Serf's Leave does."""
        if self._snapshot is not None:
            self._snapshot.leave()

    def remove_listener(self, listener: Listener) -> None:
        self._listeners.remove(listener)

    def stats(self) -> dict[str, int]:
        """The node's counters (its members by status among them:
        ``members.alive``...) and the front's."""
        with self._lock:
            out = self.node.stats()
            out.update(self._counts)
            out.update(snapshot_stats(self._snapshot))
            out.update(self._handlers.stats())
            out.update(dict.fromkeys(RPC_COUNTERS, 0) if self._rpc is None else self._rpc.stats())
            out["connections_open"] = len(self._conns)
            out["subscribers"] = self._subscribers()
            return out

    def read_node(self, read: Callable[[SerfNode], Any]) -> Any:
        """``read(node)`` while the node is still (the metrics' reading of
        what it records under memberlist's and Serf's names)."""
        with self._lock:
            return read(self.node)

    def _subscribers(self) -> int:
        return len(self._listeners)

    # ------------------------------------------------------ what a front gives

    @abc.abstractmethod
    def _watch(self, sock: socket.socket, mask: int) -> None:
        """Wait for ``sock`` to be ready for ``mask`` (READ, WRITE) from now on."""

    @abc.abstractmethod
    def _unwatch(self, sock: socket.socket) -> None:
        """Stop waiting for ``sock``."""

    @abc.abstractmethod
    def _poke(self) -> None:
        """Wake the waiting up soon (a deadline moved or there is something to send)."""

    @abc.abstractmethod
    def _deliver(self, events: list[SerfNodeEvent]) -> None:
        """Hand the node's events to the listeners and waiters."""

    # ------------------------------------------------------ moving bytes

    def _bind(self) -> None:
        """Both sockets bound and watched, the node started (OSError if the port is taken)."""
        if self._running:
            raise RuntimeError("already started")
        udp = net.open_datagram(self.bind_addr, self.port)
        try:
            # A backlog as long as the kernel allows (as Go's listeners): what
            # a flood leaves waiting is taken and refused in turn, rather
            # than a joining member's connection dropped behind it.
            tcp = net.open_listener(self.bind_addr, self.port, socket.SOMAXCONN)
        except OSError:
            udp.close()
            raise
        self._udp, self._tcp = udp, tcp
        self._watch(udp, READ)
        self._watch(tcp, READ)
        with self._lock:
            self.node.start(time.monotonic())
            if self._snapshot is not None:
                self._snapshot.start(time.monotonic())      # the rejoin, if the snapshot names members
        self._running = True

    def _close_all(self) -> None:
        """Every socket closed (no leave: that is the node's), the snapshot written and closed."""
        self._running = False
        if self._snapshot is not None:
            self._snapshot.close()
        for conn in list(self._conns.values()):
            self._unwatch(conn.sock)
            conn.sock.close()
        self._conns.clear()
        self._outgoing.clear()
        self._shares = stream_shares(self._max_streams)
        self._accept_resume = None
        for sock in (self._udp, self._tcp):
            if sock is not None:
                self._unwatch(sock)
                sock.close()
        self._udp = self._tcp = None

    def _close_copies(self) -> None:
        """A forked child's stop: our copies of the sockets closed, no poller
        told (the epoll instance is the parent's too: removing a socket
        there would leave the parent deaf), nothing sent."""
        self._running = False
        for sock in [c.sock for c in self._conns.values()] + [self._udp, self._tcp]:
            if sock is not None:
                sock.close()
        self._conns.clear()
        self._outgoing.clear()
        self._udp = self._tcp = None

    def _next_wake(self) -> float | None:
        """The node's next deadline, or a connection's (its timeout, or when
        to hand over what a quiet sender sent), or when accept's back-off
        ends, whichever is first."""
        times = [c.next_time() for c in self._conns.values()]
        if self._accept_resume is not None:
            times.append(self._accept_resume)
        if self._snapshot is not None:
            times.append(self._snapshot.next_time())
        deadline = self.node.next_deadline()
        if deadline is not None:
            times.append(deadline)
        return min(times, default=None)

    def _ready(self, sock: object, mask: int) -> None:
        """``sock`` is readable or writable (``mask``)."""
        if sock is self._udp:
            self._read_datagrams()
        elif sock is self._tcp:
            self._accept()
        else:
            assert isinstance(sock, socket.socket)
            conn = self._conns.get(sock)
            if conn is not None:
                if mask & READ:
                    conn.heard = time.monotonic()
                self._service(conn, mask)

    def _tick(self) -> None:
        """After a wake-up: the node's timer if due, streams whose sender went
        quiet handed over, connections past their deadline closed, what the
        node has to send sent."""
        now = time.monotonic()
        deadline = self.node.next_deadline()
        if deadline is not None and deadline <= now:
            self.node.on_timer(now)
        self._resume_accepting(now)
        if self._snapshot is not None:
            self._snapshot.tick(now)
        turn = True
        for conn in list(self._conns.values()):
            if turn and conn.show_at is not None and conn.show_at <= now and conn.sock in self._conns:
                # One stream turn per wake-up, whatever the number of streams,
                # the datagrams (pings) read between and answered before it;
                # the stream goes last in line for the next.
                self._flush(now)
                turn = False
                self._conns[conn.sock] = self._conns.pop(conn.sock)
                self._hand_over(conn, now)
            if conn.deadline <= now and conn.sock in self._conns:
                self._counts["connections_timed_out"] += 1
                self._close(conn, "i/o timeout")
        self._flush(now)

    def _flush(self, now: float) -> None:
        """Send what the node has to send, open what it asks, hand out its events."""
        assert self._udp is not None
        for data, addr in self.node.outgoing(now):
            try:
                self._udp.sendto(data, addr)
                self._counts["datagrams_sent"] += 1
                self._counts["bytes_sent.udp"] += len(data)
            except OSError as exc:
                self._counts["send_errors"] += 1
                log.debug("serf front: sending to %s: %s", addr, exc)
        for stream in self.node.streams_to_open(now):
            self._open(stream.id, stream.addr, stream.data, stream.deadline)
        self._hand_out_events()

    def _hand_out_events(self) -> None:
        """The node's events so far to the front (:meth:`_deliver`), after
        writing the keyring file if they changed the keys."""
        events = self.node.events()
        if events:
            if self._snapshot is not None and self._snapshot.events(events, time.monotonic()):
                self._poke()            # the rejoin's next attempt: its streams opened without waiting for a timer
            for event in events:
                if isinstance(event, (RetryJoined, RetryJoinFailed)):
                    log_retry_join(event)
            if self.keyring_file is not None:
                for event in events:
                    if isinstance(event, KeyringChanged):
                        self._save_keyring(event.keys)
            self._handlers.offer(events)
            self._deliver(events)

    def _save_keyring(self, keys: tuple[bytes, ...]) -> None:
        assert self.keyring_file is not None
        try:
            save_keyring(self.keyring_file, keys)
        except OSError as exc:
            self._counts["keyring_file_errors"] += 1
            log.warning("serf front: cannot write the keyring file %s: %s", self.keyring_file, exc.strerror or exc)

    def _read_datagrams(self) -> None:
        assert self._udp is not None
        for _ in range(READ_BATCH):
            try:
                data, addr = self._udp.recvfrom(65536)
            except OSError:         # nothing left (or an ICMP error from an earlier send)
                return
            self._counts["datagrams_received"] += 1
            self._counts["bytes_received.udp"] += len(data)
            self.node.receive(data, (addr[0], addr[1]), time.monotonic())

    def _accept(self) -> None:
        """Take the connections waiting (ACCEPTS_PER_WAKE at most), each
        within its source's share (stream_shares): refused, or taken, after
        closing the idlest connection the share names if it says so."""
        assert self._tcp is not None

        def member_hosts() -> set[str]:
            # Asked only when a share decision needs it; made anew at most
            # once every MEMBER_HOSTS_TTL_S: it is a pass over the table (0.1 s
            # at 16,000 members), and a source at its share could otherwise
            # have it made at every wake-up.
            now = time.monotonic()
            if self._hosts is None or now >= self._hosts_until:
                self._hosts = {host_key(m.addr) for m in self.node.engine.members()}
                self._hosts_until = now + MEMBER_HOSTS_TTL_S
            return self._hosts

        for _ in range(ACCEPTS_PER_WAKE):
            try:
                sock, addr = self._tcp.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:     # the peer gave up, or descriptors ran out
                self._accept_failed(error)
                return
            self._backoff.accepted()
            now = time.monotonic()
            # memberlist's deadline: tcp_timeout from the start, for the whole stream
            conn = _StreamConn(sock, (addr[0], addr[1]), now + self._tcp_timeout, incoming=True, heard=now)
            admitted, idlest = self._shares.place(conn.source, (c for c in self._conns.values() if c.incoming),
                                                  member_hosts)
            if not admitted:
                self._counts["connections_refused"] += 1
                self._rate_log.log(logging.WARNING, "refused", "serf front: refused a stream from %s "
                                   "(%d open; at most %d per member's host, %d per other source)",
                                   conn.source, len(self._shares), self._shares.per_source,
                                   self._shares.stranger_share)
                sock.close()
                continue
            if idlest is not None:
                self._counts["connections_evicted"] += 1
                self._close(idlest, "evicted")
            self._counts["connections_accepted"] += 1
            sock.setblocking(False)
            self._conns[sock] = conn
            self._shares.add(conn.source)
            self._watch(sock, READ)

    def _accept_failed(self, error: OSError) -> None:
        """After a failed accept. When descriptors or memory ran out, the
        connection stays in the backlog and the socket readable: accepting
        again at once would spin, so stop watching it for a while
        (listen.AcceptBackoff), counted ``accept_errors``."""
        delay = self._backoff.failed(error.errno)
        if delay is None or self._tcp is None:
            log.debug("serf front: accept failed: %s", error)
            return
        self._counts["accept_errors"] += 1
        self._rate_log.log(logging.WARNING, "accept", "serf front: accept failed: %s; accepting again in "
                           "%.1f s", error, delay)
        self._unwatch(self._tcp)
        self._accept_resume = time.monotonic() + delay

    def _resume_accepting(self, now: float) -> None:
        if self._accept_resume is not None and self._accept_resume <= now and self._tcp is not None:
            self._accept_resume = None
            self._watch(self._tcp, READ)

    def _open(self, stream_id: int, addr: Addr, data: bytes, deadline: float) -> None:
        try:
            sock = net.open_connection(self.bind_addr, addr)    # from the given address, never another
        except OSError as exc:
            self._counts["connections_failed"] += 1
            self.node.stream_failed(stream_id, time.monotonic(), str(exc))
            return
        self._counts["connections_opened"] += 1
        conn = _StreamConn(sock, addr, deadline, incoming=False, stream_id=stream_id, outbuf=bytearray(data),
                     connected=False)
        self._conns[sock] = conn
        self._outgoing[stream_id] = conn
        self._watch(sock, WRITE)

    def _service(self, conn: _StreamConn, mask: int) -> None:
        if not conn.connected and mask & WRITE:
            error = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                self._counts["connections_failed"] += 1
                self._close(conn, f"connect: {os.strerror(error)}")
                return
            conn.connected = True
        if mask & WRITE and conn.outbuf:
            try:
                sent = conn.sock.send(conn.outbuf)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._close(conn, f"write: {exc}")
                return
            self._counts["bytes_sent.tcp"] += sent
            del conn.outbuf[:sent]
            if not conn.outbuf:
                if conn.close_after_write:
                    self._close(conn, "")
                    return
                self._watch(conn.sock, READ)
        if mask & READ:
            self._read_stream(conn)

    def _read_stream(self, conn: _StreamConn) -> None:
        """Read what the stream has; the node sees it (at this wake-up's
        tick) when it has doubled since the node last looked (or at once,
        the first time), else once the sender has been quiet for
        STREAM_QUIET_S: copying what was read for the node after every
        piece would cost the square of a big push/pull."""
        closed = False
        for _ in range(STREAM_READS_PER_WAKE):
            try:
                chunk = conn.sock.recv(STREAM_READ)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self._close(conn, f"read: {exc}")
                return
            if not chunk:
                closed = True
                break
            self._counts["bytes_received.tcp"] += len(chunk)
            if len(conn.inbuf) + len(chunk) > self._max_stream_bytes:
                self._counts["connections_too_big"] += 1
                self._close(conn, "stream too big")
                return
            conn.inbuf += chunk
        now = time.monotonic()
        if closed:
            conn.peer_closed = True
            if conn.outbuf:
                self._watch(conn.sock, WRITE)
            else:
                self._unwatch(conn.sock)         # (readable for good now)
        if closed or len(conn.inbuf) >= 2 * conn.shown:
            conn.show_at = now
        elif len(conn.inbuf) > conn.shown:
            conn.show_at = now + STREAM_QUIET_S

    def _hand_over(self, conn: _StreamConn, now: float) -> None:
        """Show the node the stream read so far, or give it another turn on
        what it was shown (the node bounds each call's work, so a big
        push/pull takes a turn per wake-up): a whole message is answered
        (incoming) or ends the stream (ours); else wait for more."""
        conn.show_at = None
        key = conn.addr if conn.incoming else conn.stream_id
        if len(conn.inbuf) > conn.shown:
            conn.shown = len(conn.inbuf)
            if conn.incoming:
                reply = self.node.receive_stream(bytes(conn.inbuf), conn.addr, now)
            else:
                reply = b"" if self.node.stream_response(conn.stream_id, bytes(conn.inbuf), now) else None
        elif conn.working:
            reply = self.node.stream_turn(key, now)
        else:
            reply = None
        conn.working = reply is None and self.node.stream_working(key)
        if reply is None:
            if conn.working or len(conn.inbuf) > conn.shown:
                conn.show_at = now
            elif conn.peer_closed and not conn.close_after_write:
                self._close(conn, "connection closed before a whole message")
            return
        if not conn.incoming:
            self._outgoing.pop(conn.stream_id, None)
            self._close(conn, "")
            return
        if not reply:
            self._close(conn, "")
            return
        conn.outbuf = bytearray(reply)
        conn.close_after_write = True
        self._watch(conn.sock, WRITE)

    def _close(self, conn: _StreamConn, error: str) -> None:
        """End a connection; an outgoing stream that did not finish fails in the node."""
        if self._conns.pop(conn.sock, None) is conn and conn.incoming:
            self._shares.remove(conn.source)
            self.node.stream_closed(conn.addr)      # its work, if any, is dropped
        self._unwatch(conn.sock)
        conn.sock.close()
        if not conn.incoming and self._outgoing.pop(conn.stream_id, None) is not None:
            self.node.stream_failed(conn.stream_id, time.monotonic(), error or "closed")

    # ------------------------------------------------------ listeners

    def _call_listener(self, listener: Listener, event: SerfNodeEvent | EventsLost) -> None:
        """``listener(event)``; what it raises is counted and logged."""
        try:
            listener(event)
        except Exception:
            with self._lock:
                self._counts["listener_errors"] += 1
            log.exception("serf front: a listener failed")


def log_retry_join(event: RetryJoined | RetryJoinFailed) -> None:
    """The agent's log lines for retry-join, each attempt's end."""
    if isinstance(event, RetryJoined):
        log.info("retry-join: joined %d seed(s) at attempt %d", event.joined, event.attempt)
    elif event.gave_up:
        log.error("retry-join: attempt %d joined nobody, the last allowed (retry_max): giving up (%s)",
                  event.attempt, "; ".join(event.errors) or "only this member answered")
    else:
        log.warning("retry-join: attempt %d joined nobody (%s), retrying in %s s", event.attempt,
                    "; ".join(event.errors) or "only this member answered", event.retry_in)


def join_seeds(seeds: Iterable[tuple[str, int]]) -> list[Addr]:
    return [(host, int(port)) for host, port in seeds]


__all__ = ["DEFAULT_BIND_ADDR", "DEFAULT_PORT", "FRONT_COUNTERS", "GossipFront", "GossipMember", "Listener",
           "MAX_INCOMING_STREAMS", "Predicate", "current", "event_buffer",
           "join_seeds", "serf_event_bytes"]

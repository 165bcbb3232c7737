"""What both RPC fronts share: the listening socket, each connection's
socket, the bytes between them and the :class:`~.rpc_server.RpcServer`, and
an inbox for what other threads report (the member's events, log lines, the
end of a join or a leave), handed to the server on the front's own turn.

A front (``rpc_threads`` on its own thread, ``rpc_aio`` on the loop) adds
how it waits (its ``_watcher``, a selector's or the loop's, and ``_poke``)
and how it runs a join or a leave (``_run``). Nothing here decides.
"""

from __future__ import annotations

import abc
import logging
import socket
from collections import deque
from collections.abc import Callable

from ..._runtime import net
from ..._runtime.errors import ConfigurationError
from ..._runtime.listen import AcceptBackoff
from ..._runtime.ratelimit import RateLimitedLog
from ..._runtime.watch import READ, WRITE, LoopWatch, SelectorWatch
from ..fronts.addresses import parse_address
from .rpc_log import LogFeed
from .rpc_server import Action, RpcConfig, RpcConnection, RpcMember, RpcServer

log = logging.getLogger("mcastmember")

#: connections taken per wake-up of the listening socket
ACCEPTS_PER_WAKE = 16
#: bytes read from a connection per wake-up
READ_CHUNK = 65536
#: reports from other threads waiting for the front's turn; past it they are dropped (counted)
INBOX_BOUND = 65536
#: Serf's gossip port, for a join's seed without one
GOSSIP_PORT = 7946


def seed_addresses(specs: tuple[str, ...]) -> tuple[list[tuple[str, int]], list[str]]:
    """A join's seeds (``ADDR[:PORT]``) as addresses, and why each other one is none."""
    addrs, errors = [], []
    for spec in specs:
        try:
            addrs.append(net_address(spec))
        except ConfigurationError as error:
            errors.append(str(error))
    return addrs, errors


def net_address(spec: str) -> tuple[str, int]:
    return parse_address(spec, GOSSIP_PORT, "seed")


class RpcSockets(abc.ABC):
    """The sockets of one member's RPC (see the module)."""

    def __init__(self, member: RpcMember, config: RpcConfig) -> None:
        self.member = member
        self.config = config
        self.server = RpcServer(member, config)
        self._listener: socket.socket | None = None
        self._by_sock: dict[socket.socket, RpcConnection] = {}
        self._socks: dict[int, socket.socket] = {}
        self._masks: dict[socket.socket, int] = {}
        self._inbox: deque[Callable[[RpcServer], None]] = deque()
        self._inbox_dropped = 0
        self._backoff = AcceptBackoff()
        self._rate_log = RateLimitedLog(log)
        self._feed = LogFeed(self._post_log, lambda: self._least_level)
        self._least_level: int | None = None
        self._snapshot = self.server.stats()
        #: how the front waits for sockets (set by the front before it opens)
        self._watcher: SelectorWatch | LoopWatch
        #: where it listens (the port chosen when the config's is 0)
        self.address: tuple[str, int] = (config.host, config.port)

    def stats(self) -> dict[str, int]:
        """The server's counters as of its last turn (safe from any thread:
        no lock, so the member's stats() may ask under its own)."""
        out = dict(self._snapshot)
        out["rpc_records_dropped"] += self._inbox_dropped
        return out

    # -- the front's part
    def _watch(self, sock: socket.socket, mask: int) -> None:
        self._watcher.watch(sock, mask)

    def _unwatch(self, sock: socket.socket) -> None:
        self._watcher.unwatch(sock)

    @abc.abstractmethod
    def _poke(self) -> None:
        """Take a turn soon (something is in the inbox)."""

    @abc.abstractmethod
    def _run(self, action: Action) -> None:
        """Run a join or a leave without blocking the turn; report its end with :meth:`post`."""

    # -- start and stop
    def _open(self) -> None:
        try:
            self._listener = net.open_listener(self.config.host, self.config.port, socket.SOMAXCONN)
        except OSError as error:       # said as the RPC's, not the member's address
            raise OSError(error.errno, f"the agent RPC's {self.config.host}:{self.config.port}: "
                                       f"{error.strerror or error}") from None
        self.address = self._listener.getsockname()[:2]
        self._watch(self._listener, READ)
        logging.getLogger("mcastmember").addFilter(self._feed)
        log.info("agent RPC listening on %s:%d", *self.address)

    def _close(self) -> None:
        logging.getLogger("mcastmember").removeFilter(self._feed)
        for sock in list(self._by_sock):
            self._drop(sock)
        if self._listener is not None:
            self._unwatch(self._listener)
            self._listener.close()
            self._listener = None

    # -- reports from any thread
    def post(self, report: Callable[[RpcServer], None]) -> None:
        if len(self._inbox) >= INBOX_BOUND:
            self._inbox_dropped += 1
            return
        self._inbox.append(report)
        self._poke()

    def on_event(self, event: object) -> None:
        """The member's listener."""
        self.post(lambda server: server.on_events((event,)))

    def _post_log(self, levelno: int, line: str) -> None:
        self.post(lambda server: server.on_log(levelno, line))

    # -- a turn
    def _ready(self, sock: socket.socket, mask: int) -> None:
        if sock is self._listener:
            self._accept()
            return
        conn = self._by_sock.get(sock)
        if conn is None:
            return
        if mask & READ:
            self._read(sock, conn)

    def _turn(self) -> None:
        """After a wake-up: the inbox to the server, the actions it asks
        run, what each connection has to say written, the waiting set."""
        while self._inbox:
            self._inbox.popleft()(self.server)
        for action in self.server.take_actions():
            self._run(action)
        # before the writes too: a close the client sees is counted by then, and a
        # monitor whose answer it reads gets the lines logged from then on
        self._least_level = self.server.wants_logs()
        self._snapshot = self.server.stats()
        for sock, conn in list(self._by_sock.items()):
            self._write(sock, conn)
        self._least_level = self.server.wants_logs()
        self._snapshot = self.server.stats()

    def _accept(self) -> None:
        assert self._listener is not None
        for _ in range(ACCEPTS_PER_WAKE):
            try:
                sock, peer = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                if self._backoff.failed(error.errno) is not None:
                    self._rate_log.log(logging.WARNING, "rpc-accept", "agent RPC: accept failed: %s", error)
                return
            self._backoff.accepted()
            conn, evicted = self.server.connect(str(peer[0]))
            if conn is None:
                self._rate_log.log(logging.WARNING, "rpc-refused", "agent RPC: refused a connection from %s "
                                   "(%d open, at most %d per source)", peer[0], len(self.server.conns),
                                   self.server.shares.per_source)
                sock.close()
                continue
            if evicted is not None:
                for held, owner in list(self._by_sock.items()):
                    if owner is evicted:
                        self._drop(held)
            sock.setblocking(False)
            self._by_sock[sock] = conn
            self._socks[id(conn)] = sock
            self._set_mask(sock, READ)

    def _read(self, sock: socket.socket, conn: RpcConnection) -> None:
        try:
            data = sock.recv(READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(sock)
            return
        if not data:
            self._drop(sock)
            return
        conn.receive(data)

    def _write(self, sock: socket.socket, conn: RpcConnection) -> None:
        if conn not in self.server.conns:      # evicted or forgotten by the server
            self._drop(sock)
            return
        if conn.wants_write():
            try:
                conn.sent(sock.send(conn.data()))
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self._drop(sock)
                return
        if conn.done:
            self._drop(sock)
            return
        self._set_mask(sock, (READ if conn.readable() else 0) | (WRITE if conn.wants_write() else 0))

    def _set_mask(self, sock: socket.socket, mask: int) -> None:
        if self._masks.get(sock) != mask:
            self._masks[sock] = mask
            if mask:
                self._watch(sock, mask)
            else:
                self._unwatch(sock)

    def _drop(self, sock: socket.socket) -> None:
        conn = self._by_sock.pop(sock, None)
        if conn is not None:
            self._socks.pop(id(conn), None)
            self.server.disconnect(conn)
        if self._masks.pop(sock, 0):
            self._unwatch(sock)
        sock.close()


__all__ = ["RpcSockets", "seed_addresses"]

"""The TCP listener on our advertised member port, for Tomcat (``tomcat=True``).

Tomcat's default cluster stack (TcpFailureDetector) lists a new member only
after it has connected to the member's host:port, and keeps a silent member
while that port accepts connections. Once listed, the member receives every
replicated message, and must answer each at once as its options ask
(``channel.py`` decides how). The listeners only move bytes: this one, for
the threaded service, runs a selector on one thread; ``tribes_listener_aio.py`` has
the asyncio one. Both are bounded: fixed-size reads, a cap on inbound
connections in all and per source (an IPv6 source by its /64; a source past
its share is refused; at the cap a member's host, where Tomcat connects
from, closes a stranger's idlest connection to get in, and a stranger only
one of the stranger source holding the most: ``listen.ConnectionShares``;
so a crowd of sources cannot lock Tomcat out), a connection closed when it
sent no whole frame in its first FIRST_FRAME_TIMEOUT_S, an idle timeout
longer than Tomcat's senders keep a connection (60 s), a cap on unsent
acknowledgements per connection, a cap and a timeout on replies in flight,
and rates on replies in count and bytes, in all and per destination (sent
only to members we accept, see channel.py, and only to the host the request
came from), and a back-off when
``accept`` fails for want of descriptors.
"""

from __future__ import annotations

import errno
import logging
import selectors
import socket
import threading
import time
from typing import TYPE_CHECKING

from ..engine.channel import ChannelConnection, ChannelCounters, ChannelError
from ..._runtime.ratelimit import RateLimitedLog
from ..._runtime.listen import (AcceptBackoff, ConnectionShares, ReplyBudget, same_host,
                               source_of)
from ..._runtime.net import open_listener, socket_family, unregister_and_close

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Iterable

    from ..engine.channel import Reply
    from ..engine.member import Member

log = logging.getLogger("mcastmember")

READ_SIZE = 64 * 1024
MAX_CONNECTIONS = 256
# One source's share: above a Tomcat node's pooled senders (25 by default)
# and its failure detector's checks, a quarter of the cap, so it takes at
# least four sources to fill the listener.
MAX_PER_SOURCE = 64
IDLE_TIMEOUT_S = 300.0
# A connection that has not sent one whole frame by then is closed: Tomcat
# sends its first at once.
FIRST_FRAME_TIMEOUT_S = 10.0
# Acks a peer has not read yet; beyond this it is not reading them at all.
MAX_UNSENT = 64 * 1024
# The kernel's send buffer per inbound connection: acks are 21 bytes each, so
# this is thousands of them; fixed, so a peer that never reads is noticed
# before the kernel has buffered megabytes for it.
SEND_BUFFER = 64 * 1024
MAX_REPLIES_IN_FLIGHT = 32
REPLY_TIMEOUT_S = 5.0
# A reply whose sender we do not list yet waits this long for its first
# heartbeat (Tomcat's default drop time), at most MAX_HELD of them, then is
# dropped (probe_replies_refused); held replies are checked this often.
HOLD_S = 3.0
MAX_HELD = 32
HOLD_CHECK_S = 0.1
# Replies sent, in all and per destination host: Tomcat asks (an RPC to a
# new member, a session-state request per web application at start) a few
# times when a member joins; beyond these a reply is dropped
# (probe_replies_limited). Counts per second and burst; bytes per second.
REPLY_RATE, REPLY_BURST, REPLY_BYTES_PER_S = 32, 64, 2 * 1024 * 1024
DEST_REPLY_RATE, DEST_REPLY_BURST, DEST_REPLY_BYTES_PER_S = 8, 16, 512 * 1024


def probe_stats_idle() -> dict[str, int]:
    """The listener's counters when there is no listener: every key, zero,
    so stats() has one shape whatever the settings."""
    return dict.fromkeys(ListenerBase("", 0, lambda: b"").stats(), 0)


def no_one(member: Member) -> bool:
    return False


def no_hosts() -> Container[str]:
    return ()


class Held:
    """What the listeners know of an inbound connection: its source, when
    it was opened and last heard from, and its Tribes stream."""

    __slots__ = ("source", "opened", "heard", "channel")

    def __init__(self, source: str, channel: ChannelConnection, now: float) -> None:
        self.source, self.channel, self.opened, self.heard = source, channel, now, now

    def deadline(self) -> float:
        """When it is closed unless heard from: soon until a whole frame came."""
        if self.channel.frames:
            return self.heard + IDLE_TIMEOUT_S
        return min(self.opened + FIRST_FRAME_TIMEOUT_S, self.heard + IDLE_TIMEOUT_S)


class ListenerBase:
    """Counters and the reply bookkeeping both listeners share.
    ``accepts(member)``: whether a frame's sender is a member replies may
    be sent to (the front's table; by default nobody); ``member_hosts()``:
    the members' hosts (``listen.host_key``), whose connections come first
    at the cap."""

    def __init__(self, address: str, port: int, local_packet: Callable[[], bytes],
                 accepts: Callable[[Member], bool] = no_one,
                 member_hosts: Callable[[], Container[str]] = no_hosts) -> None:
        self.address = address
        self._member_hosts = member_hosts
        self.port = port
        self._local_packet = local_packet
        self._accepts = accepts
        self.accepted = 0
        self.evicted = 0
        self.refused = 0
        self.replies_failed = 0
        self.replies_limited = 0
        self._budget: ReplyBudget | None = None      # made at the first reply
        self.counters = ChannelCounters()
        self._held: list[tuple[float, Reply]] = []     # (deadline, reply): senders not listed yet
        self._shares = ConnectionShares(MAX_CONNECTIONS, MAX_PER_SOURCE)
        self._backoff = AcceptBackoff()
        self._rate_log = RateLimitedLog(log)

    def stats(self) -> dict[str, int]:
        stats = {"probe_connections": self.accepted, "probe_evicted": self.evicted,
                 "probe_refused": self.refused, "probe_accept_errors": self._backoff.failures,
                 "probe_replies_failed": self.replies_failed,
                 "probe_replies_limited": self.replies_limited}
        stats.update(self.counters.as_stats())
        return stats

    def _new_connection(self) -> ChannelConnection:
        return ChannelConnection(self._local_packet, self.counters, self._accepts)

    def _admit(self, source: str, held: Iterable[Held]) -> tuple[bool, Held | None]:
        """Whether to take a new connection from ``source`` and which one of
        ``held`` (those that may be closed) to close first for it (see
        ConnectionShares), counted."""
        # The module's bounds, read at each admission (a test lowers them).
        self._shares.total, self._shares.per_source = MAX_CONNECTIONS, MAX_PER_SOURCE
        self._shares.stranger_share = MAX_PER_SOURCE
        admitted, idlest = self._shares.place(source, held, self._member_hosts)
        if not admitted:
            self.refused += 1
            self._rate_log.log(logging.WARNING, "refused", "TCP listener: refused a connection "
                               "from %s (%d connections in all, at most %d per source)",
                               source, len(self._shares), self._shares.per_source)
        elif idlest is not None:
            self.evicted += 1
        return admitted, idlest

    def _accept_failed(self, error: OSError) -> float | None:
        """Seconds to stop accepting after ``error`` (None: accept on)."""
        delay = self._backoff.failed(error.errno)
        self._rate_log.log(logging.WARNING, "accept", "TCP listener: accept failed: %s%s", error,
                           "" if delay is None else f"; accepting again in {delay:.1f} s")
        return delay

    def _to_send(self, replies: list[Reply], source: str) -> list[Reply]:
        """Of the replies a connection from ``source`` produced, those to
        send now. A reply goes only to the host the request came from (TCP:
        the source is not forged), so a frame naming someone else, member or
        not, makes no connection there (refused); the others whose sender
        is not a member we accept yet are held."""
        now, ready = time.monotonic(), []
        for reply in replies:
            if not same_host(reply.address, source):
                self._refuse(reply, f"the request came from {source}")
            elif reply.accepted:
                ready.append(reply)
            elif len(self._held) >= MAX_HELD:
                self._refuse(reply)
            else:
                self._held.append((now + HOLD_S, reply))
        return ready

    def _release_held(self, now: float) -> list[Reply]:
        """The held replies whose sender is now accepted (to send); those
        past their deadline are refused."""
        ready, kept = [], []
        for deadline, reply in self._held:
            if self._accepts(reply.sender):
                ready.append(reply)
            elif now >= deadline:
                self._refuse(reply)
            else:
                kept.append((deadline, reply))
        self._held = kept
        return ready

    def _refuse(self, reply: Reply, why: str = "not a member we accept") -> None:
        self.counters.replies_refused += 1
        self._rate_log.log(logging.WARNING, "refuse", "no %s reply to %s:%d: %s", reply.kind,
                           reply.address, reply.port, why)

    def _clear_to_send(self, reply: Reply, in_flight: int) -> bool:
        """Whether ``reply`` may go now, with ``in_flight`` replies on their
        way: within the cap and the rates (else counted, not sent)."""
        if in_flight >= MAX_REPLIES_IN_FLIGHT:
            self._reply_failed(reply, "too many replies in flight")
            return False
        if self._budget is None:    # the module's rates, read then (a test lowers them)
            self._budget = ReplyBudget(REPLY_RATE, REPLY_BURST, REPLY_BYTES_PER_S, DEST_REPLY_RATE,
                                       DEST_REPLY_BURST, DEST_REPLY_BYTES_PER_S)
        if not self._budget.take(reply.address, len(reply.frame), time.monotonic()):
            self.replies_limited += 1
            self._rate_log.log(logging.WARNING, "limited", "no %s reply to %s:%d: more replies "
                               "than %d a second in all, %d to one host", reply.kind,
                               reply.address, reply.port, REPLY_RATE, DEST_REPLY_RATE)
            return False
        return True

    def _reply_failed(self, reply: Reply, error: object) -> None:
        self.replies_failed += 1
        self._rate_log.log(logging.WARNING, "reply", "could not answer Tomcat at %s:%d (%s): %s",
                           reply.address, reply.port, reply.kind, error)

    def _bind_error(self, error: OSError) -> OSError:
        return OSError(error.errno, f"cannot listen on {self.address} port {self.port} "
                                    f"for Tomcat: {error.strerror}")


class _Inbound(Held):
    __slots__ = ("sock", "unsent")

    def __init__(self, sock: socket.socket, source: str, channel: ChannelConnection,
                 now: float) -> None:
        super().__init__(source, channel, now)
        self.sock, self.unsent = sock, bytearray()


class _Outbound:
    __slots__ = ("sock", "reply", "data", "deadline")

    def __init__(self, sock: socket.socket, reply: Reply, deadline: float) -> None:
        self.sock, self.reply, self.data, self.deadline = sock, reply, memoryview(reply.frame), deadline


class TribesListener(ListenerBase):
    """Serve ``(address, port)`` on one thread, for the threaded service."""

    def __init__(self, address: str, port: int, local_packet: Callable[[], bytes],
                 accepts: Callable[[Member], bool] = no_one,
                 member_hosts: Callable[[], Container[str]] = no_hosts) -> None:
        super().__init__(address, port, local_packet, accepts, member_hosts)
        self._sock: socket.socket | None = None
        self._resume_accept: float | None = None    # while accept backs off: when it resumes
        self._thread: threading.Thread | None = None
        self._wake_r: socket.socket | None
        self._wake_w: socket.socket | None
        self._wake_r = self._wake_w = None

    def start(self) -> None:
        try:
            sock = open_listener(self.address, self.port)
        except OSError as error:
            raise self._bind_error(error) from None
        # Everything the thread needs is made here, so running out of
        # descriptors fails start() rather than the thread, silently.
        try:
            self._sel = selectors.DefaultSelector()
            self._wake_r, self._wake_w = socket.socketpair()
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._run, name="mcastmember-probe", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        # Started: start() made them all.
        assert self._sock is not None and self._wake_r is not None and self._wake_w is not None
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._thread.join()
        self._thread = None
        for sock in (self._sock, self._wake_r, self._wake_w):
            sock.close()

    def _run(self) -> None:
        assert self._sock is not None and self._wake_r is not None     # start() made them
        sel = self._sel
        sel.register(self._sock, selectors.EVENT_READ, "accept")
        sel.register(self._wake_r, selectors.EVENT_READ, "stop")
        self._inbound: dict[socket.socket, _Inbound] = {}     # socket -> _Inbound
        self._outbound: dict[socket.socket, _Outbound] = {}    # socket -> _Outbound
        try:
            while True:
                for key, _ in sel.select(timeout=self._select_timeout()):
                    if key.data == "stop":
                        return
                    if key.data == "accept":
                        self._accept()
                    elif isinstance(key.data, _Inbound):
                        self._service_inbound(key.data, key.events)
                    else:
                        self._service_outbound(key.data)
                now = time.monotonic()
                if self._resume_accept is not None and now >= self._resume_accept:
                    self._resume_accept = None
                    sel.register(self._sock, selectors.EVENT_READ, "accept")
                for reply in self._release_held(now):
                    self._send_reply(reply)
                self._expire(now)
        except Exception:     # never let the listener die silently: Tomcat would drop us
            log.exception("TCP listener for Tomcat failed")
        finally:
            for sock in list(self._inbound) + list(self._outbound):
                self._close(sock)
            sel.close()

    def _select_timeout(self) -> float | None:
        """Until the next deadline (a reply's, an idle connection's, accept's
        back-off, a held reply's next check), or None: a listener nobody uses
        does not wake (it is on in every member)."""
        now = time.monotonic()
        deadlines = [o.deadline for o in self._outbound.values()]
        deadlines += [conn.deadline() for conn in self._inbound.values()]
        if self._resume_accept is not None:
            deadlines.append(self._resume_accept)
        if self._held:
            deadlines.append(now + HOLD_CHECK_S)
        if not deadlines:
            return None
        return max(0.0, min(deadlines) - now)

    def _expire(self, now: float) -> None:
        for sock, conn in list(self._inbound.items()):
            if now >= conn.deadline():
                self._close(sock)
        for sock, out in list(self._outbound.items()):
            if now >= out.deadline:
                self._reply_failed(out.reply, "timed out")
                self._close(sock)

    def _accept(self) -> None:
        assert self._sock is not None       # the listener runs
        try:
            sock, peer = self._sock.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:   # the peer gave up, or no descriptors left
            delay = self._accept_failed(error)
            if delay is not None:  # the connection waits in the backlog: wait too, don't spin
                self._sel.unregister(self._sock)
                self._resume_accept = time.monotonic() + delay
            return
        self._backoff.accepted()
        self.accepted += 1
        source = source_of(peer)
        admitted, idlest = self._admit(source, list(self._inbound.values()))
        if not admitted:
            sock.close()
            return
        if idlest is not None:
            assert isinstance(idlest, _Inbound)     # one of ours
            self._close(idlest.sock)
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        conn = _Inbound(sock, source, self._new_connection(), time.monotonic())
        self._inbound[sock] = conn
        self._shares.add(source)
        self._sel.register(sock, selectors.EVENT_READ, conn)

    def _service_inbound(self, conn: _Inbound, events: int) -> None:
        if events & selectors.EVENT_READ:
            try:
                data = conn.sock.recv(READ_SIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._close(conn.sock)
                return
            conn.heard = time.monotonic()
            try:
                back, replies = conn.channel.receive(data)
            except ChannelError as error:    # answer what came whole before the bad bytes
                conn.unsent += error.back
                for reply in self._to_send(error.replies, conn.source):
                    self._send_reply(reply)
                if self._flush(conn):
                    self._close(conn.sock)
                return
            conn.unsent += back
            for reply in self._to_send(replies, conn.source):
                self._send_reply(reply)
        self._flush(conn)

    def _flush(self, conn: _Inbound) -> bool:
        """Send what is unsent; False when the connection was closed."""
        if conn.unsent:
            try:
                sent = conn.sock.send(conn.unsent)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self._close(conn.sock)
                return False
            del conn.unsent[:sent]
        if len(conn.unsent) > MAX_UNSENT:
            self._close(conn.sock)
            return False
        wanted = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.unsent else 0)
        if self._sel.get_key(conn.sock).events != wanted:
            self._sel.modify(conn.sock, wanted, conn)
        return True

    def _send_reply(self, reply: Reply) -> None:
        if not self._clear_to_send(reply, len(self._outbound)):
            return
        sock = socket.socket(socket_family(reply.address), socket.SOCK_STREAM)
        sock.setblocking(False)
        code = sock.connect_ex((reply.address, reply.port))
        if code not in (0, errno.EINPROGRESS):
            sock.close()
            self._reply_failed(reply, errno.errorcode.get(code, code))
            return
        out = _Outbound(sock, reply, time.monotonic() + REPLY_TIMEOUT_S)
        self._outbound[sock] = out
        self._sel.register(sock, selectors.EVENT_WRITE, out)

    def _service_outbound(self, out: _Outbound) -> None:
        code = out.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self._reply_failed(out.reply, errno.errorcode.get(code, code))
            self._close(out.sock)
            return
        try:
            out.data = out.data[out.sock.send(out.data):]
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._reply_failed(out.reply, error)
            self._close(out.sock)
            return
        if not out.data:
            self.counters.count_sent(out.reply.kind)
            self._close(out.sock)

    def _close(self, sock: socket.socket) -> None:
        conn = self._inbound.pop(sock, None)
        if conn is not None:
            self._shares.remove(conn.source)
        self._outbound.pop(sock, None)
        unregister_and_close(self._sel, sock)

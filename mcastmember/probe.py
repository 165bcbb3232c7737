"""The TCP listener on our advertised member port, for Tomcat (``tomcat=True``).

Tomcat's default cluster stack (TcpFailureDetector) lists a new member only
after it has connected to the member's host:port, and keeps a silent member
while that port accepts connections. Once listed, the member receives every
replicated message, and must answer each at once as its options ask
(``channel.py`` decides how). The listeners only move bytes: this one, for
the threaded service, runs a selector on one thread; ``probe_aio.py`` has
the asyncio one. Both are bounded: fixed-size reads, a cap on inbound
connections (at the cap the one idle longest is closed, so a crowd of silent
clients cannot lock Tomcat's probes out), an idle timeout longer than
Tomcat's senders keep a connection (60 s), a cap on unsent acknowledgements
per connection, and a cap and a timeout on replies in flight.

``Prober`` makes the threaded service's probe attempts (verify): connects
to the suspects' member ports, on one thread of its own.
"""

from __future__ import annotations

import errno
import logging
import queue
import selectors
import socket
import threading
import time
from typing import TYPE_CHECKING

from ._ratelimit import RateLimitedLog
from .channel import ChannelConnection, ChannelCounters, ChannelError
from .net import socket_address

if TYPE_CHECKING:
    from collections.abc import Callable

    from typing import Literal

    from .channel import Reply
    from .engine import ProbeAttempt

log = logging.getLogger("mcastmember")

READ_SIZE = 64 * 1024
MAX_CONNECTIONS = 256
IDLE_TIMEOUT_S = 300.0
# Acks a peer has not read yet; beyond this it is not reading them at all.
MAX_UNSENT = 64 * 1024
# The kernel's send buffer per inbound connection: acks are 21 bytes each, so
# this is thousands of them; fixed, so a peer that never reads is noticed
# before the kernel has buffered megabytes for it.
SEND_BUFFER = 64 * 1024
MAX_REPLIES_IN_FLIGHT = 32
REPLY_TIMEOUT_S = 5.0


def probe_stats_idle() -> dict[str, int]:
    """The listener's counters when there is no listener: every key, zero,
    so stats() has one shape whatever the settings."""
    return dict.fromkeys(_ListenerBase("", 0, lambda: b"").stats(), 0)


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


class _ListenerBase:
    """Counters and the reply bookkeeping both listeners share."""

    def __init__(self, address: str, port: int, local_packet: Callable[[], bytes]) -> None:
        self.address = address
        self.port = port
        self._local_packet = local_packet
        self.accepted = 0
        self.evicted = 0
        self.replies_failed = 0
        self.counters = ChannelCounters()
        self._rate_log = RateLimitedLog(log)

    def stats(self) -> dict[str, int]:
        stats = {"probe_connections": self.accepted, "probe_evicted": self.evicted,
                 "probe_replies_failed": self.replies_failed}
        stats.update(self.counters.as_stats())
        return stats

    def _new_connection(self) -> ChannelConnection:
        return ChannelConnection(self._local_packet, self.counters)

    def _reply_failed(self, reply: Reply, error: object) -> None:
        self.replies_failed += 1
        self._rate_log.log(logging.WARNING, "reply", "could not answer Tomcat at %s:%d (%s): %s",
                           reply.address, reply.port, reply.kind, error)

    def _bind_error(self, error: OSError) -> OSError:
        return OSError(error.errno, f"cannot listen on {self.address} port {self.port} "
                                    f"for Tomcat: {error.strerror}")


class _Inbound:
    __slots__ = ("sock", "channel", "unsent", "heard")

    def __init__(self, sock: socket.socket, channel: ChannelConnection, now: float) -> None:
        self.sock, self.channel, self.unsent, self.heard = sock, channel, bytearray(), now


class _Outbound:
    __slots__ = ("sock", "reply", "data", "deadline")

    def __init__(self, sock: socket.socket, reply: Reply, deadline: float) -> None:
        self.sock, self.reply, self.data, self.deadline = sock, reply, memoryview(reply.frame), deadline


class ProbeListener(_ListenerBase):
    """Serve ``(address, port)`` on one thread, for the threaded service."""

    def __init__(self, address: str, port: int, local_packet: Callable[[], bytes]) -> None:
        super().__init__(address, port, local_packet)
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._wake_r: socket.socket | None
        self._wake_w: socket.socket | None
        self._wake_r = self._wake_w = None

    def start(self) -> None:
        sock = socket.socket(_family(self.address), socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(socket_address(self.address, self.port))
            sock.listen(64)
            sock.setblocking(False)
        except OSError as error:
            sock.close()
            raise self._bind_error(error) from None
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
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
        self._sel = sel = selectors.DefaultSelector()
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
                self._expire(time.monotonic())
        except Exception:     # never let the listener die silently: Tomcat would drop us
            log.exception("TCP listener for Tomcat failed")
        finally:
            for sock in list(self._inbound) + list(self._outbound):
                self._close(sock)
            sel.close()

    def _select_timeout(self) -> float | None:
        """Until the next deadline (a reply's, an idle connection's), or None:
        a listener nobody uses does not wake (it is on in every member)."""
        deadlines = [o.deadline for o in self._outbound.values()]
        deadlines += [conn.heard + IDLE_TIMEOUT_S for conn in self._inbound.values()]
        if not deadlines:
            return None
        return max(0.0, min(deadlines) - time.monotonic())

    def _expire(self, now: float) -> None:
        for sock, conn in list(self._inbound.items()):
            if now - conn.heard > IDLE_TIMEOUT_S:
                self._close(sock)
        for sock, out in list(self._outbound.items()):
            if now >= out.deadline:
                self._reply_failed(out.reply, "timed out")
                self._close(sock)

    def _accept(self) -> None:
        assert self._sock is not None       # the listener runs
        try:
            sock, _ = self._sock.accept()
        except OSError as error:   # the peer gave up, or no descriptors left
            self._rate_log.log(logging.WARNING, "accept", "TCP listener: accept failed: %s", error)
            return
        self.accepted += 1
        if len(self._inbound) >= MAX_CONNECTIONS:
            idlest = min(self._inbound.values(), key=lambda c: c.heard)
            self._close(idlest.sock)
            self.evicted += 1
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        conn = _Inbound(sock, self._new_connection(), time.monotonic())
        self._inbound[sock] = conn
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
            except ChannelError:
                self._close(conn.sock)
                return
            conn.unsent += back
            for reply in replies:
                self._send_reply(reply)
        self._flush(conn)

    def _flush(self, conn: _Inbound) -> None:
        if conn.unsent:
            try:
                sent = conn.sock.send(conn.unsent)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self._close(conn.sock)
                return
            del conn.unsent[:sent]
        if len(conn.unsent) > MAX_UNSENT:
            self._close(conn.sock)
            return
        wanted = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.unsent else 0)
        if self._sel.get_key(conn.sock).events != wanted:
            self._sel.modify(conn.sock, wanted, conn)

    def _send_reply(self, reply: Reply) -> None:
        if len(self._outbound) >= MAX_REPLIES_IN_FLIGHT:
            self._reply_failed(reply, "too many replies in flight")
            return
        sock = socket.socket(_family(reply.address), socket.SOCK_STREAM)
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
            self._close(out.sock)

    def _close(self, sock: socket.socket) -> None:
        self._inbound.pop(sock, None)
        self._outbound.pop(sock, None)
        _unregister_and_close(self._sel, sock)


def _unregister_and_close(sel: selectors.BaseSelector, sock: socket.socket) -> None:
    try:
        sel.unregister(sock)
    except (KeyError, ValueError):
        pass
    sock.close()


class Prober:
    """The threaded service's probe attempts (verify, see
    ``MembershipEngine.probes_due``): non-blocking TCP connects, all on one
    thread with a selector however many suspects there are (the engine
    bounds the attempts in flight). Each socket is closed as soon as its
    connect is answered (an accepted connection is closed at once: nothing
    is sent or read, so a port that accepts and then hangs holds nothing) or
    its deadline passes. ``report`` gets a list of ``(attempt, answered)``
    on that thread: True accepted, False refused (or unreachable), None no
    answer by the attempt's deadline (on ``clock``, the engine's)."""

    def __init__(self, report: Callable[[list[tuple[ProbeAttempt, bool | None]]], object],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._report = report
        self._clock = clock
        self._queue: queue.SimpleQueue[ProbeAttempt] = queue.SimpleQueue()
        self._pending: dict[socket.socket, ProbeAttempt] = {}
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._rate_log = RateLimitedLog(log)

    def start(self) -> None:
        self._stopping = False
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        for sock in (self._wake_r, self._wake_w):
            sock.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread = threading.Thread(target=self._run, name="mcastmember-prober", daemon=True)
        self._thread.start()

    def submit(self, attempts: list[ProbeAttempt]) -> None:
        """Start ``attempts`` (from any thread; never blocks)."""
        for attempt in attempts:
            self._queue.put(attempt)
        self._wake()

    def stop(self) -> None:
        """End the thread and close every socket; attempts not reported yet
        never are (the engine stopped first and forgot them)."""
        if self._thread is None:
            return
        self._stopping = True
        self._wake()
        self._thread.join()
        self._thread = None
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass        # full: a wake-up is pending already

    def _run(self) -> None:
        try:
            while not self._stopping:
                try:
                    self._turn()
                except Exception:    # never let the prober die: probes would stall
                    log.exception("probe attempts failed; carrying on")
                    time.sleep(0.05)
        finally:
            for sock in list(self._pending):
                self._close(sock)

    def _turn(self) -> None:
        pending = self._pending
        timeout = None
        if pending:
            timeout = max(0.0, min(a.deadline for a in pending.values()) - self._clock())
        results: list[tuple[ProbeAttempt, bool | None]] = []
        for key, _ in self._sel.select(timeout):
            if key.data is None:
                try:
                    self._wake_r.recv(4096)
                except OSError:
                    pass
                continue
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            # Writable: the handshake ended, with an acceptance or an error.
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            results.append((pending[sock], code == 0))
            self._close(sock)
        if self._stopping:
            return
        while True:
            try:
                attempt = self._queue.get_nowait()
            except queue.Empty:
                break
            answered = self._connect(attempt)
            if answered != "pending":
                results.append((attempt, answered))
        now = self._clock()
        for sock, attempt in list(pending.items()):
            if now >= attempt.deadline:
                results.append((attempt, None))
                self._close(sock)
        if results:
            self._report(results)

    def _connect(self, attempt: ProbeAttempt) -> bool | None | Literal["pending"]:
        member = attempt.member
        try:
            sock = socket.socket(_family(member.address), socket.SOCK_STREAM)
        except OSError as error:     # out of descriptors: we cannot tell, the member can't be blamed
            self._rate_log.log(logging.WARNING, "probe-socket", "cannot probe %s:%d: %s",
                               member.address, member.port, error)
            return None
        sock.setblocking(False)
        code = sock.connect_ex((member.address, member.port))
        if code == errno.EINPROGRESS:
            self._pending[sock] = attempt
            self._sel.register(sock, selectors.EVENT_WRITE, attempt)
            return "pending"
        sock.close()
        return code == 0        # at once: accepted, or refused (or no route)

    def _close(self, sock: socket.socket) -> None:
        self._pending.pop(sock, None)
        _unregister_and_close(self._sel, sock)

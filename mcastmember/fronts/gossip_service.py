"""SerfService: the threaded front of :class:`~mcastmember.gossip.serf.node.SerfNode`.

One UDP socket and one TCP listening socket on the address and port given
(Serf's default 7946), and two daemon threads. The I/O thread waits, with
``select``, until the node's next deadline or until a socket is readable or
writable, and moves bytes: datagrams in and out, streams others open to us
(bounded in count and in bytes), streams the node asks us to open (connected
from the given address, given up at the node's deadline). A dispatcher thread
calls the listeners, so a slow listener never holds up the I/O thread. Every
decision (what to send, when, what a member's state is) is the node's; this
module only waits and moves bytes. Needs the ``gossip`` extra; never imported
by ``import mcastmember``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import os
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..gossip.serf.node import JoinDone, KeyResult, KeyringChanged, LeaveDone, Member, QueryReceived, SerfNode, \
    SerfNodeEvent, SerfSettings
from ..gossip.settings import GossipSettings
from ..gossip.state import Addr
from ..wire.errors import ConfigurationError
from .keyring_file import load_keyring, save_keyring

log = logging.getLogger("mcastmember")

#: Serf's default bind port
DEFAULT_PORT = 7946
#: streams others opened to us that are still being read or answered
MAX_INCOMING_STREAMS = 32
#: events waiting for the listeners
EVENT_QUEUE_BOUND = 65_536
#: datagrams read per wake-up before the loop turns to the rest
READ_BATCH = 256
#: the longest the I/O thread sleeps with nothing to do
IDLE_WAIT_S = 1.0

Listener = Callable[[SerfNodeEvent], object]

FRONT_COUNTERS = ("datagrams_sent", "datagrams_received", "send_errors", "connections_accepted",
                  "connections_refused", "connections_too_big", "connections_timed_out", "connections_opened",
                  "connections_failed", "listener_events_dropped", "listener_errors", "keyring_file_errors")


@dataclass(eq=False)
class _Conn:
    sock: socket.socket
    addr: Addr
    deadline: float
    incoming: bool
    stream_id: int = 0
    inbuf: bytearray = field(default_factory=bytearray)
    outbuf: bytearray = field(default_factory=bytearray)
    connected: bool = True
    close_after_write: bool = False


class SerfService:
    """A Serf member on real sockets: ``SerfService("py1", "10.0.0.2", tags={"role": "py"})``.

    ``bind_addr`` is a specific IP address: we bind there, advertise it, and
    open streams from it (never another address). ``gossip`` overrides
    memberlist's settings (``GossipSettings`` fields), ``serf`` Serf's.
    ``max_streams`` bounds the streams others keep open to us (more are
    refused, counted ``connections_refused``); each is bounded by the node's
    ``limits.max_stream`` bytes (``connections_too_big``) and by
    ``tcp_timeout`` (``connections_timed_out``). Events wait for the
    listeners in a queue of ``event_queue_size`` (past it:
    ``listener_events_dropped``). ``keyring_file`` (Serf's ``-keyring-file``:
    a JSON list of base64 keys, the primary first) gives the keys, and is
    written again each time ``serf keys`` changes the keyring (a failed
    write is logged and counted ``keyring_file_errors``).
    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(self, name: str, bind_addr: str = "127.0.0.1", port: int = DEFAULT_PORT, *,
                 tags: Mapping[str, str] | None = None, gossip: Mapping[str, Any] | None = None,
                 serf: SerfSettings | None = None, seed: int | None = None,
                 max_streams: int = MAX_INCOMING_STREAMS, event_queue_size: int = EVENT_QUEUE_BOUND,
                 keyring_file: str | os.PathLike[str] | None = None) -> None:
        try:
            ip = ipaddress.ip_address(bind_addr)
        except ValueError:
            raise ConfigurationError(f"bind address {bind_addr!r} is not an IP address") from None
        if ip.is_unspecified:
            raise ConfigurationError("bind address must be a specific address (it is advertised), not "
                                     f"{bind_addr}")
        if not 0 < port < 65536:
            raise ConfigurationError(f"port {port} is not between 1 and 65535")
        if max_streams < 1:
            raise ConfigurationError("max_streams must be at least 1")
        overrides = dict(gossip or {})
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(GossipSettings)})
        if unknown:
            raise ConfigurationError(f"unknown gossip setting {unknown[0]!r}")
        taken = sorted({"name", "advertise_addr", "advertise_port"} & set(overrides))
        if taken:
            raise ConfigurationError(f"gossip setting {taken[0]!r} comes from SerfService's own arguments")
        if keyring_file is not None:
            if "keys" in overrides:
                raise ConfigurationError("give the keys in the keyring file or in the gossip setting "
                                         "'keys', not both")
            overrides["keys"] = load_keyring(keyring_file)
        self.keyring_file = keyring_file
        settings = GossipSettings(name=name, advertise_addr=bind_addr, advertise_port=port, **overrides)
        self.bind_addr = bind_addr
        self.port = port
        self._family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        self.node = SerfNode(settings, tags, serf, seed=seed)
        self._max_streams = max_streams
        self._max_stream_bytes = settings.limits.max_stream
        self._tcp_timeout = settings.tcp_timeout
        self._lock = threading.RLock()
        self._done = threading.Condition(self._lock)
        self._join_done: JoinDone | None = None
        self._leave_done: LeaveDone | None = None
        self._key_result: KeyResult | None = None
        self._counts: dict[str, int] = dict.fromkeys(FRONT_COUNTERS, 0)
        self._listeners: list[Listener] = []
        self._events: queue.Queue[SerfNodeEvent | None] = queue.Queue(event_queue_size)
        self._conns: dict[socket.socket, _Conn] = {}
        self._outgoing: dict[int, _Conn] = {}
        self._udp: socket.socket | None = None
        self._tcp: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._running = False
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------- lifecycle

    def __enter__(self) -> SerfService:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Bind both sockets and start the threads (OSError if the port is taken)."""
        if self._running:
            raise RuntimeError("already started")
        udp = socket.socket(self._family, socket.SOCK_DGRAM)
        tcp = socket.socket(self._family, socket.SOCK_STREAM)
        try:
            tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            udp.bind((self.bind_addr, self.port))
            tcp.bind((self.bind_addr, self.port))
            tcp.listen(self._max_streams)
        except OSError:
            udp.close()
            tcp.close()
            raise
        udp.setblocking(False)
        tcp.setblocking(False)
        self._udp, self._tcp = udp, tcp
        self._sel.register(udp, selectors.EVENT_READ)
        self._sel.register(tcp, selectors.EVENT_READ)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        with self._lock:
            self.node.start(time.monotonic())
        self._running = True
        self._threads = [threading.Thread(target=self._io_loop, name=f"serf-io-{self.node.name}", daemon=True),
                         threading.Thread(target=self._dispatch, name=f"serf-events-{self.node.name}",
                                          daemon=True)]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Close the sockets and end the threads (no leave: call :meth:`leave` first)."""
        if not self._running:
            return
        self._running = False
        self._wake()
        for thread in self._threads:
            thread.join(5.0)
        try:
            self._events.put_nowait(None)
        except queue.Full:
            pass   # the dispatcher ends on its own once stopped
        for conn in list(self._conns.values()):
            conn.sock.close()
        self._conns.clear()
        self._outgoing.clear()
        for sock in (self._udp, self._tcp):
            if sock is not None:
                sock.close()
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    def join(self, seeds: Iterable[tuple[str, int]], timeout: float = 10.0, ignore_old: bool = True) -> JoinDone:
        """Serf.Join: push/pull with each seed; returns how many answered
        (TimeoutError if not all did within ``timeout``)."""
        seeds = [(host, int(port)) for host, port in seeds]
        if not self._running:
            raise RuntimeError("start the service before joining")
        with self._lock:
            self._join_done = None
            self.node.join(seeds, time.monotonic(), ignore_old)
            self._wake()
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
            self.node.leave(time.monotonic())
            self._wake()
            if not self._done.wait_for(lambda: self._leave_done is not None, timeout):
                raise TimeoutError(f"leave did not finish within {timeout} s")
            assert self._leave_done is not None
            return self._leave_done

    def key_operation(self, op: str, key: bytes = b"", timeout: float = 15.0) -> KeyResult:
        """``serf keys``: ``op`` install, use, remove (``key``) or list, asked
        of every member; returns when all answered or the query's deadline
        passed (TimeoutError past ``timeout``). One at a time."""
        if not self._running:
            raise RuntimeError("start the service before changing keys")
        with self._lock:
            self._key_result = None
            self.node.key_operation(op, key, time.monotonic())
            self._wake()
            if not self._done.wait_for(lambda: self._key_result is not None, timeout):
                raise TimeoutError(f"the key operation did not finish within {timeout} s")
            assert self._key_result is not None
            return self._key_result

    def user_event(self, name: str, payload: bytes, coalesce: bool = True) -> None:
        """``serf event``: a user event, gossiped to every member."""
        with self._lock:
            self.node.user_event(name, payload, time.monotonic(), coalesce)
            self._wake()

    def respond(self, received: QueryReceived, payload: bytes) -> None:
        """Answer a query (a ``QueryReceived`` event); ValueError past its
        deadline or over Serf's response size limit."""
        with self._lock:
            self.node.respond(received, payload, time.monotonic())
            self._wake()

    def set_tags(self, tags: Mapping[str, str]) -> None:
        with self._lock:
            self.node.set_tags(tags, time.monotonic())
            self._wake()

    def members(self) -> list[Member]:
        """Every member the node knows (ourselves included), by name."""
        with self._lock:
            return self.node.members()

    def add_listener(self, listener: Listener) -> None:
        """``listener(event)`` is called, on the dispatcher thread, with every
        event of the node (MemberEvent, UserEventReceived, ...)."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._listeners.remove(listener)

    def stats(self) -> dict[str, int]:
        """The node's counters and the front's."""
        with self._lock:
            out = self.node.stats()
            out.update(self._counts)
            out["connections_open"] = len(self._conns)
            return out

    # ------------------------------------------------------------ the I/O thread

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass   # the pipe is full: the loop wakes anyway

    def _io_loop(self) -> None:
        while self._running:
            with self._lock:
                deadline = self.node.next_deadline()
                conn_deadline = min((c.deadline for c in self._conns.values()), default=None)
            now = time.monotonic()
            soonest = min(t for t in (deadline, conn_deadline, now + IDLE_WAIT_S) if t is not None)
            try:
                ready = self._sel.select(max(0.0, soonest - now))
            except (OSError, ValueError):
                if not self._running:
                    return
                raise
            try:
                with self._lock:
                    self._step(ready)
            except Exception:    # one bad step never ends the loop
                log.exception("serf front: unexpected error in the I/O loop")
                time.sleep(0.05)

    def _step(self, ready: list[tuple[selectors.SelectorKey, int]]) -> None:
        for key, mask in ready:
            sock = key.fileobj
            if sock is self._wake_r:
                try:
                    while self._wake_r.recv(4096):
                        pass
                except OSError:
                    pass
            elif sock is self._udp:
                self._read_datagrams()
            elif sock is self._tcp:
                self._accept()
            else:
                assert isinstance(sock, socket.socket)
                conn = self._conns.get(sock)
                if conn is not None:
                    self._service(conn, mask)
        now = time.monotonic()
        deadline = self.node.next_deadline()
        if deadline is not None and deadline <= now:
            self.node.handle_timer(now)
        for conn in list(self._conns.values()):
            if conn.deadline <= now:
                self._counts["connections_timed_out"] += 1
                self._close(conn, "i/o timeout")
        self._flush(now)

    def _flush(self, now: float) -> None:
        """Send what the node has to send, open what it asks, hand out its events."""
        assert self._udp is not None
        for data, addr in self.node.datagrams_to_send(now):
            try:
                self._udp.sendto(data, addr)
                self._counts["datagrams_sent"] += 1
            except OSError as exc:
                self._counts["send_errors"] += 1
                log.debug("serf front: sending to %s: %s", addr, exc)
        for stream in self.node.streams_to_open(now):
            self._open(stream.id, stream.addr, stream.data, stream.deadline)
        for event in self.node.events():
            if isinstance(event, JoinDone):
                self._join_done = event
                self._done.notify_all()
            elif isinstance(event, LeaveDone):
                self._leave_done = event
                self._done.notify_all()
            elif isinstance(event, KeyResult):
                self._key_result = event
                self._done.notify_all()
            elif isinstance(event, KeyringChanged) and self.keyring_file is not None:
                try:
                    save_keyring(self.keyring_file, event.keys)
                except OSError as exc:
                    self._counts["keyring_file_errors"] += 1
                    log.warning("serf front: cannot write the keyring file %s: %s", self.keyring_file,
                                exc.strerror or exc)
            try:
                self._events.put_nowait(event)
            except queue.Full:
                self._counts["listener_events_dropped"] += 1

    def _read_datagrams(self) -> None:
        assert self._udp is not None
        for _ in range(READ_BATCH):
            try:
                data, addr = self._udp.recvfrom(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return   # an ICMP error from an earlier send
            self._counts["datagrams_received"] += 1
            self.node.receive_packet(data, (addr[0], addr[1]), time.monotonic())

    def _accept(self) -> None:
        assert self._tcp is not None
        while True:
            try:
                sock, addr = self._tcp.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            incoming = sum(1 for c in self._conns.values() if c.incoming)
            if incoming >= self._max_streams:
                self._counts["connections_refused"] += 1
                sock.close()
                continue
            self._counts["connections_accepted"] += 1
            sock.setblocking(False)
            conn = _Conn(sock, (addr[0], addr[1]), time.monotonic() + self._tcp_timeout, incoming=True)
            self._conns[sock] = conn
            self._sel.register(sock, selectors.EVENT_READ)

    def _open(self, stream_id: int, addr: Addr, data: bytes, deadline: float) -> None:
        sock = socket.socket(self._family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.bind((self.bind_addr, 0))    # from the given address, never another
            sock.connect_ex(addr)
        except OSError as exc:
            sock.close()
            self._counts["connections_failed"] += 1
            self.node.stream_failed(stream_id, time.monotonic(), str(exc))
            return
        self._counts["connections_opened"] += 1
        conn = _Conn(sock, addr, deadline, incoming=False, stream_id=stream_id, outbuf=bytearray(data),
                     connected=False)
        self._conns[sock] = conn
        self._outgoing[stream_id] = conn
        self._sel.register(sock, selectors.EVENT_WRITE)

    def _service(self, conn: _Conn, mask: int) -> None:
        if not conn.connected and mask & selectors.EVENT_WRITE:
            error = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                self._counts["connections_failed"] += 1
                self._close(conn, f"connect: {os.strerror(error)}")
                return
            conn.connected = True
        if mask & selectors.EVENT_WRITE and conn.outbuf:
            try:
                sent = conn.sock.send(conn.outbuf)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._close(conn, f"write: {exc}")
                return
            del conn.outbuf[:sent]
            if not conn.outbuf:
                if conn.close_after_write:
                    self._close(conn, "")
                    return
                self._sel.modify(conn.sock, selectors.EVENT_READ)
        if mask & selectors.EVENT_READ:
            self._read_stream(conn)

    def _read_stream(self, conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._close(conn, f"read: {exc}")
            return
        if not chunk:
            self._close(conn, "connection closed before a whole message")
            return
        if len(conn.inbuf) + len(chunk) > self._max_stream_bytes:
            self._counts["connections_too_big"] += 1
            self._close(conn, "stream too big")
            return
        conn.inbuf += chunk
        now = time.monotonic()
        if not conn.incoming:
            if self.node.stream_response(conn.stream_id, bytes(conn.inbuf), now):
                self._outgoing.pop(conn.stream_id, None)
                self._close(conn, "")
            return
        reply = self.node.receive_stream(bytes(conn.inbuf), conn.addr, now)
        if reply is None:
            return
        if not reply:
            self._close(conn, "")
            return
        conn.outbuf = bytearray(reply)
        conn.close_after_write = True
        self._sel.modify(conn.sock, selectors.EVENT_WRITE)

    def _close(self, conn: _Conn, error: str) -> None:
        """End a connection; an outgoing stream that did not finish fails in the node."""
        self._conns.pop(conn.sock, None)
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
        if not conn.incoming and self._outgoing.pop(conn.stream_id, None) is not None:
            self.node.stream_failed(conn.stream_id, time.monotonic(), error or "closed")

    # ------------------------------------------------------------ the dispatcher

    def _dispatch(self) -> None:
        while True:
            try:
                event = self._events.get(timeout=0.5)
            except queue.Empty:
                if not self._running:
                    return
                continue
            if event is None:
                return
            for listener in list(self._listeners):
                try:
                    listener(event)
                except Exception:
                    with self._lock:
                        self._counts["listener_errors"] += 1
                    log.exception("serf front: a listener failed")


__all__ = ["DEFAULT_PORT", "Listener", "SerfService"]

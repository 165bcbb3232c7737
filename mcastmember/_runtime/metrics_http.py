"""The HTTP server of ``metrics.serve``: one thread, one selector, bounded.

A Prometheus scrape is one small GET answered from memory, so the server
needs no thread per connection: one thread accepts, reads each request head
(at most MAX_REQUEST_BYTES), calls the WSGI application (prometheus_client's,
which does the content negotiation and compression), writes the answer and
closes. Bounds, each counted when hit (``stats()``, and the series
``mcastmember_metrics_server_connections_total{outcome=...}``):

- at most MAX_CONNECTIONS connections, MAX_PER_SOURCE from one source (an
  IPv6 source by its /64), STRANGER_SHARE from a source none of whose
  requests was answered yet (``listen.ConnectionShares``: a source past its
  share is refused; at the cap a known source, a scraper, closes the oldest
  connection of a stranger to get in, and a stranger only one of the
  stranger source holding the most);
- SOURCE_REQUEST_RATE requests a second from one source, REQUEST_RATE in
  all (with bursts): past them a 429 answer, the application not called;
- REQUEST_TIMEOUT_S from accept to the last byte written, whatever the peer
  sends or reads (a half-sent request holds one descriptor that long, and
  nothing else);
- ``accept`` failing for want of descriptors or memory: a back-off (0.1 s,
  doubling up to 1 s), never a loop that spins.
"""

from __future__ import annotations

import io
import logging
import selectors
import socket
import sys
import time
from typing import TYPE_CHECKING
from urllib.parse import unquote

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from .listen import (ADMIT, REFUSE, AcceptBackoff, ConnectionShares, ReplyBudget,
                               host_key, source_group, source_of)
from .ratelimit import RateLimitedLog
from .net import open_listener

if TYPE_CHECKING:
    from collections.abc import Iterable

    from _typeshed.wsgi import WSGIApplication, WSGIEnvironment
    from prometheus_client.metrics_core import Metric

log = logging.getLogger("mcastmember")

MAX_CONNECTIONS = 32
MAX_PER_SOURCE = 8
# A source none of whose requests was answered yet holds at most this many,
# and at the cap a known source (a scraper) closes one of theirs to get in;
# the last MAX_KNOWN sources answered are known.
STRANGER_SHARE = 2
MAX_KNOWN = 64
REQUEST_TIMEOUT_S = 10.0
MAX_REQUEST_BYTES = 8 * 1024
READ_SIZE = 4096
# The outcomes a connection is counted under.
OUTCOMES = ("served", "refused", "evicted", "timed_out", "too_large", "bad_request", "limited")
# Requests answered a second, per source (an IPv6 source by its /64) and in
# all, with bursts: Prometheus scrapes every 15-60 s, so a few a second is
# generous; a request past them gets 429 (outcome "limited") without the
# application being called (a scrape costs a few milliseconds of CPU).
SOURCE_REQUEST_RATE, SOURCE_REQUEST_BURST = 5, 10
REQUEST_RATE, REQUEST_BURST = 20, 40


class _Client:
    __slots__ = ("sock", "source", "deadline", "head", "answer")

    def __init__(self, sock: socket.socket, source: str, deadline: float) -> None:
        self.sock, self.source, self.deadline = sock, source, deadline
        self.head = bytearray()
        self.answer: memoryview | None = None     # the response, once the request is read


class MetricsHTTPServer:
    """Serve ``app`` on ``address``:``port`` (0: a free port, see
    ``server_port``): ``serve_forever()`` on a thread of the caller's,
    ``shutdown()`` from another, then ``server_close()``. OSError when the
    port is taken or the address is not ours."""

    def __init__(self, address: str, port: int, app: WSGIApplication) -> None:
        self._app = app
        sock = open_listener(address, port)
        try:
            self._sel = selectors.DefaultSelector()
            self._wake_r, self._wake_w = socket.socketpair()
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self.server_port: int = sock.getsockname()[1]
        self._server_name = str(sock.getsockname()[0])
        self._clients: dict[socket.socket, _Client] = {}
        self._shares = ConnectionShares(MAX_CONNECTIONS, MAX_PER_SOURCE, STRANGER_SHARE)
        self._budget = ReplyBudget(REQUEST_RATE, REQUEST_BURST, 1.0, SOURCE_REQUEST_RATE,
                                   SOURCE_REQUEST_BURST, 1.0)     # (counts only)
        self._known: dict[str, None] = {}      # host_key of sources answered, oldest first
        self._backoff = AcceptBackoff()
        self._resume_accept: float | None = None
        self._stopping = False
        self._counts: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
        self._rate_log = RateLimitedLog(log)

    def stats(self) -> dict[str, int]:
        """Connections by outcome, and failed accepts (``accept_errors``)."""
        return {**self._counts, "accept_errors": self._backoff.failures}

    def serve_forever(self) -> None:
        sel = self._sel
        sel.register(self._sock, selectors.EVENT_READ, "accept")
        sel.register(self._wake_r, selectors.EVENT_READ, "stop")
        try:
            while not self._stopping:
                for key, events in sel.select(self._timeout()):
                    if key.data == "accept":
                        self._accept()
                    elif isinstance(key.data, _Client):
                        self._service(key.data, events)
                now = time.monotonic()
                if self._resume_accept is not None and now >= self._resume_accept:
                    self._resume_accept = None
                    sel.register(self._sock, selectors.EVENT_READ, "accept")
                for client in [c for c in self._clients.values() if now >= c.deadline]:
                    self._close(client, "timed_out")
        except Exception:       # never die silently: the metrics would stop
            log.exception("metrics server failed")
        finally:
            for client in list(self._clients.values()):
                self._close(client, None)

    def shutdown(self) -> None:
        self._stopping = True
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def server_close(self) -> None:
        self._sel.close()
        for sock in (self._sock, self._wake_r, self._wake_w):
            sock.close()

    def _timeout(self) -> float:
        deadlines = [c.deadline for c in self._clients.values()]
        if self._resume_accept is not None:
            deadlines.append(self._resume_accept)
        if not deadlines:
            return 1.0
        return max(0.0, min(deadlines) - time.monotonic())

    def _accept(self) -> None:
        try:
            sock, peer = self._sock.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:    # the peer gave up, or no descriptors left
            delay = self._backoff.failed(error.errno)
            self._rate_log.log(logging.WARNING, "accept", "metrics server: accept failed: %s",
                               error)
            if delay is not None:   # the connection waits in the backlog: wait too, don't spin
                self._sel.unregister(self._sock)
                self._resume_accept = time.monotonic() + delay
            return
        self._backoff.accepted()
        source = source_of(peer)
        verdict = self._shares.admit(source, lambda: self._known)
        oldest = None
        if not isinstance(verdict, bool):
            oldest = min((c for c in self._clients.values() if verdict(c.source)),
                         key=lambda c: c.deadline, default=None)
        if verdict is REFUSE or (verdict is not ADMIT and oldest is None):
            self._counts["refused"] += 1
            self._rate_log.log(logging.WARNING, "refused", "metrics server: refused a connection "
                               "from %s (%d open, at most %d per source)", source,
                               len(self._shares), MAX_PER_SOURCE)
            sock.close()
            return
        if oldest is not None:
            self._close(oldest, "evicted")
        sock.setblocking(False)
        client = _Client(sock, source, time.monotonic() + REQUEST_TIMEOUT_S)
        self._clients[sock] = client
        self._shares.add(source)
        self._sel.register(sock, selectors.EVENT_READ, client)

    def _service(self, client: _Client, events: int) -> None:
        if client.answer is None:
            try:
                data = client.sock.recv(READ_SIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._close(client, None)
                return
            client.head += data
            end = client.head.find(b"\r\n\r\n")
            if end < 0 and len(client.head) <= MAX_REQUEST_BYTES:
                return
            if end < 0 or end > MAX_REQUEST_BYTES:
                self._answer(client, _plain("431 Request Header Fields Too Large"), "too_large")
                return
            if not self._budget.take(source_group(client.source), 0, time.monotonic()):
                self._answer(client, _plain("429 Too Many Requests"), "limited")
                return
            self._answer(client, self._respond(client, bytes(client.head[:end])), "served")
            return
        try:
            sent = client.sock.send(client.answer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(client, None)
            return
        client.answer = client.answer[sent:]
        if not client.answer:
            self._close(client, None)

    def _answer(self, client: _Client, response: bytes | None, outcome: str) -> None:
        if response is None:
            response, outcome = _plain("400 Bad Request"), "bad_request"
        self._counts[outcome] += 1
        if outcome == "served":
            key = host_key(client.source)
            self._known.pop(key, None)
            self._known[key] = None
            if len(self._known) > MAX_KNOWN:
                del self._known[next(iter(self._known))]
        client.answer = memoryview(response)
        self._sel.modify(client.sock, selectors.EVENT_WRITE, client)

    def _respond(self, client: _Client, head: bytes) -> bytes | None:
        """The response to a request head (None: not HTTP)."""
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return None
        method, target, _ = parts
        path, _, query = target.partition("?")
        environ: WSGIEnvironment = {
            "REQUEST_METHOD": method, "PATH_INFO": unquote(path, "latin-1"),
            "QUERY_STRING": query, "SCRIPT_NAME": "", "SERVER_NAME": self._server_name,
            "SERVER_PORT": str(self.server_port), "SERVER_PROTOCOL": "HTTP/1.0",
            "REMOTE_ADDR": client.source, "wsgi.version": (1, 0), "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(), "wsgi.errors": sys.stderr, "wsgi.multithread": False,
            "wsgi.multiprocess": False, "wsgi.run_once": False}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                return None
            key = name.strip().upper().replace("-", "_")
            if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                key = "HTTP_" + key
            environ[key] = value.strip()
        status_headers: list[tuple[str, list[tuple[str, str]]]] = []

        def start_response(status: str, headers: list[tuple[str, str]],
                           exc_info: object = None) -> object:
            status_headers[:] = [(status, headers)]
            return lambda data: None
        try:
            body = b"".join(self._app(environ, start_response))  # type: ignore[arg-type]
        except Exception:
            log.exception("metrics: a scrape failed")
            return _plain("500 Internal Server Error")
        status, headers = status_headers[0]
        return _response(status, headers, b"" if method == "HEAD" else body)

    def _close(self, client: _Client, outcome: str | None) -> None:
        if outcome is not None:
            self._counts[outcome] += 1
        if self._clients.pop(client.sock, None) is not None:
            self._shares.remove(client.source)
        try:
            self._sel.unregister(client.sock)
        except (KeyError, ValueError):
            pass
        client.sock.close()


def _response(status: str, headers: Iterable[tuple[str, str]], body: bytes) -> bytes:
    lines = [f"HTTP/1.0 {status}"]
    lines += [f"{name}: {value}" for name, value in headers
              if name.lower() not in ("content-length", "connection")]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


def _plain(status: str) -> bytes:
    return _response(status, [("Content-Type", "text/plain")], status.encode() + b"\n")


class ServerCollector(Collector):
    """The metrics server's own counters, as series of its registry (with
    the label of the front it serves, as every series: ``group``, or
    ``node`` for a gossip front)."""

    def __init__(self, server: MetricsHTTPServer, group: str,
                 namespace: str = "mcastmember", label: str = "group") -> None:
        self._server = server
        self._group = group
        self._ns = namespace
        self._label = label

    def collect(self) -> list[Metric]:
        stats = self._server.stats()
        connections = CounterMetricFamily(
            f"{self._ns}_metrics_server_connections_total", "Connections to this metrics "
            "server, by outcome: served, refused (over a source's share or the cap), evicted "
            "(closed to make room), timed_out, too_large, bad_request.",
            labels=[self._label, "outcome"])
        for outcome in OUTCOMES:
            connections.add_metric([self._group, outcome], stats[outcome])
        errors = CounterMetricFamily(
            f"{self._ns}_metrics_server_accept_errors_total",
            "accept() failures for want of descriptors or memory (each one waited).",
            labels=[self._label])
        errors.add_metric([self._group], stats["accept_errors"])
        return [connections, errors]

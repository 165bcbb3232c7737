"""The threaded service's verify connects: ``Prober`` makes the probe
attempts the engine decides (``MembershipEngine.probes_due``), non-blocking
TCP connects to the suspects' member ports on one thread of its own. The
asyncio front makes the same attempts on its loop (``aio.py``)."""

from __future__ import annotations

import errno
import logging
import queue
import selectors
import socket
import threading
import time
from typing import TYPE_CHECKING

from ..._runtime.ratelimit import RateLimitedLog
from ..._runtime.net import socket_family, unregister_and_close

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Literal

    from ..engine.verify import ProbeAttempt

log = logging.getLogger("mcastmember")


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
            sock = socket.socket(socket_family(member.address), socket.SOCK_STREAM)
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
        unregister_and_close(self._sel, sock)

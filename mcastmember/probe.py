"""A TCP listener on our advertised member port, for Tomcat's failure detector.

Tomcat's default cluster stack (TcpFailureDetector) reports a new member only
after it has connected to the member's host:port and written a probe frame,
and it keeps a silent member while that port still accepts connections. We
have no Tribes channel to serve, so this listener accepts, reads and discards
whatever arrives (bounded: a fixed read size, a cap on open connections, an
idle timeout) and closes when the service stops, so that Tomcat sees us alive
exactly while we are.
"""

import logging
import selectors
import socket
import threading
import time

from ._ratelimit import RateLimitedLog

log = logging.getLogger("mcastmember")

READ_SIZE = 4096
MAX_CONNECTIONS = 64
IDLE_TIMEOUT_S = 30.0


class ProbeListener:
    """Accept and drain TCP connections on ``(address, port)`` on one thread."""

    def __init__(self, address, port):
        self.address = address
        self.port = port
        self.accepted = 0
        self.bytes_discarded = 0
        self._sock = None
        self._thread = None
        self._wake_r = self._wake_w = None
        self._rate_log = RateLimitedLog(log)

    def start(self):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.address, self.port))
            sock.listen(16)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = threading.Thread(target=self._run, name="mcastmember-probe", daemon=True)
        self._thread.start()

    def stop(self):
        if self._thread is None:
            return
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._thread.join()
        self._thread = None
        for sock in (self._sock, self._wake_r, self._wake_w):
            sock.close()

    def _run(self):
        sel = selectors.DefaultSelector()
        sel.register(self._sock, selectors.EVENT_READ, "accept")
        sel.register(self._wake_r, selectors.EVENT_READ, "stop")
        last_heard = {}    # connection -> monotonic time of its last bytes
        try:
            while True:
                for key, _ in sel.select(timeout=1.0):
                    if key.data == "stop":
                        return
                    if key.data == "accept":
                        self._accept(sel, last_heard)
                    else:
                        self._drain(sel, key.fileobj, last_heard)
                now = time.monotonic()
                for conn, heard in list(last_heard.items()):
                    if now - heard > IDLE_TIMEOUT_S:
                        self._close(sel, conn, last_heard)
        finally:
            for conn in list(last_heard):
                self._close(sel, conn, last_heard)
            sel.close()

    def _accept(self, sel, last_heard):
        try:
            conn, _ = self._sock.accept()
        except OSError as error:   # the peer gave up, or no descriptors left
            self._rate_log.log(logging.WARNING, "accept", "probe listener: accept failed: %s",
                               error)
            return
        self.accepted += 1
        if len(last_heard) >= MAX_CONNECTIONS:
            conn.close()
            return
        conn.setblocking(False)
        sel.register(conn, selectors.EVENT_READ, "conn")
        last_heard[conn] = time.monotonic()

    def _drain(self, sel, conn, last_heard):
        try:
            data = conn.recv(READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(sel, conn, last_heard)
            return
        self.bytes_discarded += len(data)
        last_heard[conn] = time.monotonic()

    @staticmethod
    def _close(sel, conn, last_heard):
        sel.unregister(conn)
        last_heard.pop(conn, None)
        conn.close()

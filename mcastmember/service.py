"""McastService: the threaded membership service.

Three daemon threads: the receiver (blocks on the socket, feeds the table,
sweeps for silent members), the sender (one heartbeat per period) and the
dispatcher (calls listeners, so a slow or failing listener never holds up
the receiver). The table itself does no I/O; this module owns the threads
and sockets around it.
"""

import errno
import logging
import os
import queue
import socket
import threading
import time

from . import _layout as L
from . import net
from ._ratelimit import RateLimitedLog
from ._front import MembershipFront
from .config import SWEEP_INTERVAL_S
from .probe import ProbeListener

log = logging.getLogger("mcastmember")

# Consecutive socket errors before the socket is opened again. Unlike Tomcat,
# reopening does not announce a departure: the table and our identity stay.
RECOVERY_ERRORS = 10
# Pause between failing socket calls, so a broken socket cannot spin a core.
ERROR_BACKOFF_S = 0.05
EVENT_QUEUE_BOUND = 65536
# At most one warning about malformed datagrams per this many seconds.
MALFORMED_REPORT_S = 10.0


class McastService(MembershipFront):
    """Join a multicast group as a member and keep a live table of the others.

    Takes the settings of :class:`mcastmember.config.ServiceConfig` (Tomcat's
    defaults: group 228.0.0.4:45564, heartbeat every 500 ms, drop time
    3000 ms). Use as a context manager, or call ``start()`` and ``stop()``.
    """

    def __init__(self, address="228.0.0.4", port=45564, **settings):
        super().__init__(address, port, settings)
        self._lock = self._table_lock = threading.Lock()
        self._lifecycle = threading.Lock()    # start() and stop() one at a time
        self._listeners = []
        self._threads = []
        self._stopping = threading.Event()
        self._wake_sender = threading.Event()
        self._events = None
        self._recv_sock = self._send_sock = None
        self._probe = None
        self._counts = {"send_errors": 0, "receive_errors": 0,
                        "socket_reopened": 0, "events_dropped": 0, "listener_errors": 0}
        self._rate_log = RateLimitedLog(log)
        self._malformed_reported = 0

    # -- lifecycle -----------------------------------------------------------
    def start(self):
        """Open the sockets, send the first heartbeat at once and start the threads."""
        with self._lifecycle:
            return self._start()

    def _start(self):
        if self._running:
            raise RuntimeError("McastService is already running")
        cfg = self.config
        if cfg.tcp_listener:
            self._start_probe_listener()
        try:
            self._recv_sock = net.open_receiver(cfg.address, cfg.port, cfg.interface,
                                                SWEEP_INTERVAL_S)
            try:
                self._send_sock = net.open_sender(cfg.address, cfg.port, cfg.interface, cfg.ttl,
                                                  cfg.loopback)
            except BaseException:
                self._recv_sock.close()
                raise
        except BaseException:
            self._stop_probe_listener()
            raise
        self._send_fd = self._send_sock.fileno()
        self._origin_ns = time.monotonic_ns()
        self._new_packet(self._origin_ns)
        self._stopping.clear()
        self._wake_sender.clear()
        self._events = queue.Queue(EVENT_QUEUE_BOUND)
        self._running = True
        self._threads = [
            threading.Thread(target=self._dispatch_loop, name="mcastmember-dispatch", daemon=True),
            threading.Thread(target=self._receive_loop, name="mcastmember-receive", daemon=True),
            threading.Thread(target=self._send_loop, name="mcastmember-send", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        log.info("joined %s:%d as %s:%d", cfg.address, cfg.port,
                 self.config.local_member().address, cfg.member_port)
        return self

    def stop(self):
        """Send the shutdown packet, stop the threads and close the sockets.
        Listeners get every event that happened before the stop. A listener
        may call it too (the dispatcher then ends after that listener)."""
        with self._lifecycle:
            self._stop()

    def _stop(self):
        if not self._running:
            return
        self._running = False
        self._stopping.set()
        self._wake_sender.set()
        sender, receiver, dispatcher = self._threads[2], self._threads[1], self._threads[0]
        sender.join()
        self._send_shutdown()
        try:
            self._recv_sock.shutdown(socket.SHUT_RDWR)   # wakes a blocked recv at once
        except OSError:
            pass
        receiver.join()
        self._events.put(None)      # after every event already queued
        if threading.current_thread() is not dispatcher:
            dispatcher.join()
        self._recv_sock.close()
        self._send_sock.close()
        self._stop_probe_listener()    # after the goodbye: Tomcat now finds us gone
        self._threads = []
        with self._lock:
            self.table.clear()
        log.info("left %s:%d", self.config.address, self.config.port)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- what the application sees --------------------------------------------
    def add_listener(self, callback):
        """Call ``callback(event)`` for every MemberEvent, on the dispatcher thread."""
        with self._lock:
            self._listeners = self._listeners + [callback]

    def remove_listener(self, callback):
        with self._lock:
            self._listeners = [c for c in self._listeners if c != callback]

    def stats(self):
        """Counters of the table (received, fast_path, added, malformed.* ...)
        and of the service (sent, send_errors, socket_reopened ...)."""
        counts = self._common_stats(self._counts)
        if self._probe is not None:
            counts.update(self._probe.stats())
        return counts

    # -- the TCP listener for Tomcat ---------------------------------------------
    def _start_probe_listener(self):
        cfg = self.config
        listener = ProbeListener(cfg.listen_address, cfg.member_port, cfg.encode)
        listener.start()
        if cfg.member_port == 0:     # advertise the port the kernel chose
            cfg.member_port = listener.port
            with self._lock:
                self.table.set_local(cfg.local_member())
        self._probe = listener

    def _stop_probe_listener(self):
        if self._probe is not None:
            self._probe.stop()
            self._probe = None

    # -- sending ---------------------------------------------------------------
    def _refresh_packet(self):
        if self._running:
            self._new_packet(self._origin_ns)   # a reference swap: the sender reads it whole
            self._wake_sender.set()

    def _send_loop(self):
        period = self.config.frequency / 1000.0
        next_at = time.monotonic()
        failures = 0
        while not self._stopping.is_set():
            failures = 0 if self._send(self._packet) else failures + 1
            if failures >= RECOVERY_ERRORS:
                self._reopen_sender()
                failures = 0
            now = time.monotonic()
            next_at += period
            if next_at <= now:   # we were held up: skip the missed beats, no burst
                next_at += period * (int((now - next_at) / period) + 1)
            if self._wake_sender.wait(next_at - now):
                self._wake_sender.clear()   # payload changed (send now) or stopping

    def _send_shutdown(self):
        try:
            self._send(self.config.heartbeat_packet(self._origin_ns, L.SHUTDOWN_COMMAND))
        except Exception as error:   # never let a failed goodbye break stop()
            log.warning("shutdown packet not sent: %s", error)

    def _reopen_sender(self):
        cfg = self.config
        try:
            fresh = net.open_sender(cfg.address, cfg.port, cfg.interface, cfg.ttl, cfg.loopback)
        except OSError as error:
            self._rate_log.log(logging.WARNING, "reopen-send", "cannot reopen send socket: %s", error)
            return
        old, self._send_sock = self._send_sock, fresh
        self._send_fd = fresh.fileno()
        old.close()
        self._counts["socket_reopened"] += 1
        log.warning("send socket reopened after repeated errors")

    # -- receiving ---------------------------------------------------------------
    def _receive_loop(self):
        buf = bytearray(L.RECV_BUFFER_LEN)
        table, lock, clock = self.table, self._lock, time.monotonic
        with lock:
            table.sweep(clock())   # arms the pause guard from the first moment
        next_sweep = clock() + SWEEP_INTERVAL_S
        next_report = clock() + MALFORMED_REPORT_S
        failures = 0
        while self._running:
            # Known members' heartbeats are handled inside pump (compiled: with
            # the GIL released); it returns for anything else, and at least
            # every sweep interval thanks to SO_RCVTIMEO and the deadline.
            n = table.pump(self._recv_sock.fileno(), buf, next_sweep)
            if not self._running:
                break
            events = ()
            if n >= 0:
                failures = 0
                with lock:
                    events = table.receive(buf, n, clock())
            elif n != -errno.EAGAIN and n != -errno.EINTR:
                failures += 1
                self._counts["receive_errors"] += 1
                self._rate_log.log(logging.WARNING, "recv", "receive failed: %s",
                                   os.strerror(-n))
                if failures >= RECOVERY_ERRORS:
                    self._reopen_receiver()
                    failures = 0
                self._stopping.wait(ERROR_BACKOFF_S)
            now = clock()
            if now >= next_sweep:
                next_sweep = now + SWEEP_INTERVAL_S
                with lock:
                    expired = table.sweep(now)
                if expired:
                    events = events + expired
                if now >= next_report:
                    next_report = now + MALFORMED_REPORT_S
                    self._report_malformed()
            if events:
                self._publish(events)

    def _report_malformed(self):
        """One warning per period at most about what was dropped, by reason:
        a flood of bad datagrams must not become a flood of log lines."""
        with self._lock:
            stats = self.table.stats()
        dropped = {k[len("malformed."):]: v for k, v in stats.items()
                   if k.startswith("malformed.")}
        total = sum(dropped.values())
        if total > self._malformed_reported:
            log.warning("dropped %d malformed datagrams on %s:%d so far (%s)", total,
                        self.config.address, self.config.port,
                        ", ".join(f"{k} {v}" for k, v in sorted(dropped.items())))
            self._malformed_reported = total

    def _reopen_receiver(self):
        cfg = self.config
        try:
            fresh = net.open_receiver(cfg.address, cfg.port, cfg.interface, SWEEP_INTERVAL_S)
        except OSError as error:
            self._rate_log.log(logging.WARNING, "reopen-recv", "cannot reopen receive socket: %s",
                               error)
            return
        old, self._recv_sock = self._recv_sock, fresh
        old.close()
        self._counts["socket_reopened"] += 1
        log.warning("receive socket reopened after repeated errors")

    # -- events ------------------------------------------------------------------
    def _publish(self, events):
        for event in events:
            try:
                self._events.put_nowait(event)
            except queue.Full:
                self._counts["events_dropped"] += 1
                self._rate_log.log(logging.ERROR, "events", "listeners are too slow: event dropped")

    def _dispatch_loop(self):
        while True:
            event = self._events.get()
            if event is None:
                return
            for callback in self._listeners:
                try:
                    callback(event)
                except Exception:
                    self._counts["listener_errors"] += 1
                    log.exception("membership listener %r failed on %r", callback, event)

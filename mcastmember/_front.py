"""What the threaded service and the asyncio front have in common: our own
member, its packet, and changing what we advertise."""

import contextlib
import logging
import os

from . import _codec
from .config import ServiceConfig


class MembershipFront:
    """Base of McastService and AsyncMembership. Subclasses send with
    ``_refresh_packet()``, guard the table with ``_table_lock``, and set
    ``_send_fd``, ``_counts`` and ``_rate_log`` before sending."""

    _table_lock = contextlib.nullcontext()

    def __init__(self, address, port, settings):
        self.config = ServiceConfig(address, port, **settings)
        self.table = self.config.new_table()
        self._running = False
        self._packet = None
        self._sent_earlier = 0   # by packets since replaced (each counts its own sends)

    @property
    def running(self):
        return self._running

    @property
    def local_member(self):
        """Our own member as we advertise it (with the alive time last sent)."""
        member = self.config.local_member()
        if self._packet is not None:
            member.alive_ms = self._packet.alive_ms
        return member

    def members(self):
        """Snapshot of the other members, oldest first (as Tomcat orders them)."""
        with self._table_lock:
            return self.table.members()

    def set_payload(self, payload):
        """Advertise new payload bytes (str: UTF-8); sent at once."""
        self.config.set_payload(payload)
        self._refresh_packet()

    def set_domain(self, domain):
        """Advertise a new domain (bytes, or Tomcat's text form); sent at once."""
        self.config.set_domain(domain)
        cfg = self.config
        with self._table_lock:
            self.table.set_local(cfg.local_member())
            # filter_domain filters on the new domain, the fast path included
            events = self.table.set_domain(cfg.domain if cfg.filter_domain else None)
        self._refresh_packet()
        if events:
            self._publish(events)

    def _new_packet(self, origin_ns):
        """Build our heartbeat packet afresh, keeping the count of what was sent."""
        if self._packet is not None:
            self._sent_earlier += self._packet.sent
        self._packet = self.config.heartbeat_packet(origin_ns)
        return self._packet

    def _send(self, packet):
        """One heartbeat: on the compiled path a single C call stamps the alive
        bytes and sends. A failure is counted and logged (rate-limited), never
        queued: a later heartbeat replaces a lost one."""
        n = packet.send(self._send_fd)
        if n < 0:
            self._counts["send_errors"] += 1
            self._rate_log.log(logging.WARNING, "send", "heartbeat not sent: %s",
                               os.strerror(-n))
            return False
        return True

    def _common_stats(self, counts):
        with self._table_lock:
            stats = self.table.stats()
        stats.update(counts)
        stats["sent"] = self._sent_earlier + (self._packet.sent if self._packet else 0)
        stats["implementation"] = _codec.IMPLEMENTATION
        return stats

    def _refresh_packet(self):
        raise NotImplementedError

"""MembershipEngine: every decision about *when*, with no I/O.

The engine owns our member and its heartbeat packet, the heartbeat grid, the
membership table and its expiry, the pause guard, the malformed-datagram
report, the counters, the decision to reopen a socket, and the events; the
second opinion's decisions are verify.py's, which it drives. It has
no threads, sockets, sleeps or clocks: every call that needs the time takes
``now`` (monotonic seconds). A driver (``service.py`` with threads,
``aio.py`` with asyncio) opens the sockets and loops::

    path = engine.data_path      (every byte goes through it: datapath.py)
    engine.start(now); send what engine.outgoing(now) returns
    loop:
        wait until engine.next_deadline(), or the receive socket is readable
            (only while engine.reading(now))
        readable: n = path.pump(fd, buf, deadline, budget, unicast) until
                  -EAGAIN; n >= 0: engine.receive(buf, n, now, path.source() on
                  the unicast socket, else None); another -errno:
                  engine.on_receive_error(-n, now)
        engine.on_timer(now)            (first: it notices a late wake-up)
        datagram = engine.outgoing(now): path.send(datagram, fd), then
                  engine.on_send_result(result, now); path.fan_out(datagram,
                  fd) on the unicast socket, engine.on_unicast_result(...)
        engine.reopen_due(): reopen those sockets, engine.on_reopened(which)
        engine.events(): deliver them
    goodbye = engine.stop(now): send it, deliver engine.events(), close

The receive path stays the table's: ``path.pump`` (the table's) recognises
known members' heartbeats itself (compiled: in C, without the GIL) and only
returns for a datagram that needs ``receive``. The send path stays the
packet's: one ``path.send`` stamps the alive time and sends. The engine is not
thread-safe: a threaded driver holds one lock around it, and only the
driver's own thread pumps and calls ``on_timer`` (expiry and pump both
change the table); other threads may call ``set_payload``/``set_domain``
and send what ``outgoing`` returns.
"""

from __future__ import annotations

import logging
import math
import os
import socket
from typing import TYPE_CHECKING, cast

from ..kernel import codec as _codec
from ..wire import layout as L
from ..._runtime.ratelimit import RateLimitedLog
from .events import MemberEvent, Reason
from .config import encode, keys_and_mode, with_domain, with_payload
from .member import Member
from ..discovery.peers import PeerSet, cloud_unique_id
from ..discovery.resolver import Answer
from .datapath import DataPath
from .table import ADDED, REMOVED, SUSPECT, Membership
from .verify import ProbeAttempt, VerifyProbes

if TYPE_CHECKING:
    from collections.abc import Set as AbstractSet
    from types import ModuleType
    from typing import Final, Literal

    from typing_extensions import TypeAlias

    from ..kernel._fast import HeartbeatPacket, Targets
    from .config import AuthMode, Keys, ServiceConfig
    from ..wire.auth import HeartbeatKeys
    from ..discovery.peers import Lookup

    # A socket the engine may ask the driver to reopen (SEND, RECEIVE, UNICAST).
    SocketRole: TypeAlias = Literal["send", "receive", "unicast"]
    # What ``stats()`` returns: counters (int), "implementation" (str) and
    # "healthy" (bool), the same keys on both fronts.
    EngineStats: TypeAlias = "dict[str, int | bool | str]"

log = logging.getLogger("mcastmember")

# Consecutive socket errors before the driver is told to open the socket
# again. Unlike Tomcat, reopening announces no departure: peers never see us flap.
RECOVERY_ERRORS = 10
# Pause in reading after a failed receive, so a broken socket cannot spin a core.
ERROR_BACKOFF_S = 0.05
# At most one warning about malformed datagrams per this many seconds. The
# report rides on wake-ups that happen anyway (heartbeats): it adds none.
MALFORMED_REPORT_S = 10.0
# The pause guard: the driver woke this much later than the deadline we gave
# it, so we were frozen (SIGSTOP, a suspended VM, a starved process) and what
# looks like silence from peers is our own deafness. Half the drop time, but
# never below the floor: scheduling noise of a few tens of ms on a busy host
# must not read as a pause, or a small drop time would never expire anyone.
PAUSE_FLOOR_S = 0.1
# Below this many heartbeats per drop time a member that loses one or two
# datagrams is dropped and re-added: we warn (Tomcat accepts such settings).
SAFE_BEATS_PER_DROP = 3
# An expiry deadline is reported this much after the member's last-heard time
# plus the drop time, so that waking at it always expires the member (a float
# exactly at the boundary would not, and the driver would wake again at once).
EXPIRY_SLACK_S = 0.001

# Reasons of the removals ``stop()`` emits for the members still present,
# and of a dns_members member's whose address left the DNS answer.
STOPPED, UNLISTED = Reason.STOPPED, Reason.UNLISTED
# Every counter the engine adds to the table's (stats()).
ENGINE_COUNTERS = ("sent", "send_errors", "receive_errors", "socket_reopened", "pauses",
                   "internal_errors", "removed." + STOPPED, "removed." + UNLISTED,
                   "unicast_sent", "unicast_send_errors",
                   "verify.kept", "verify.failed", "verify.timed_out", "verify.exhausted",
                   "verify.deferred")
# Sockets the engine may ask the driver to reopen: multicast's two, and the
# one unicast heartbeats are sent from and heard on.
SEND: Final = "send"
RECEIVE: Final = "receive"
UNICAST: Final = "unicast"


class MembershipEngine:
    """Membership as a sans-IO state machine (see the module docstring).

    ``config`` is a :class:`mcastmember.tribes.engine.config.ServiceConfig`; ``codec`` picks
    the implementation (default: the one ``mcastmember`` loaded).
    """

    def __init__(self, config: ServiceConfig, *, codec: ModuleType | None = None) -> None:
        self.config = config    # read only: what changes (below) is the engine's
        self._codec: ModuleType = codec or _codec.impl
        # Our member as we advertise it now (payload, domain, the member port
        # a TCP listener got) and the keys we sign and check with.
        self._local = config.local_member()
        self._ring: HeartbeatKeys | None = config.key_ring
        self._auth: AuthMode = config.auth
        self.table = Membership(drop_time=config.drop_time_s,
                                max_members=config.max_members, local=self._local,
                                domain=config.domain if config.filter_domain else None,
                                codec=self._codec, phi=config.phi)
        if config.auth != "off":
            self.table.set_keys(config.auth_mode, config.key_ring)
        # What the driver moves bytes through (and nothing else of ours).
        self.data_path = DataPath(self.table, lambda: self.targets)
        # Listen-only (config.listen_only) hears the group and sends nothing:
        # no heartbeat, no goodbye; the heartbeat grid still paces the wake-ups
        # (the pause guard and the report ride on them).
        self._sends = config.heartbeats and not config.listen_only
        self._period = config.frequency_s
        self._drop = config.drop_time_s
        self._pause_after = max(self._drop / 2, PAUSE_FLOOR_S)
        if config.drop_time < SAFE_BEATS_PER_DROP * config.frequency:
            log.warning("drop_time %d ms is under %d heartbeats of %d ms: members that lose "
                        "a datagram or two will be dropped and added again", config.drop_time,
                        SAFE_BEATS_PER_DROP, config.frequency)
        self._now = -math.inf
        self._log = RateLimitedLog(log, MALFORMED_REPORT_S, clock=lambda: self._now)
        # Every key from the start, whatever is configured: one shape.
        self._counts = dict.fromkeys(ENGINE_COUNTERS, 0)
        self._peers = config.peer_set() if config.unicast else None
        self.targets: Targets | None = None
        self._listed: dict[bytes, Member] = {}          # dns_members: address bytes -> Member
        if self._peers is not None:
            self._new_targets()
        self._verify = VerifyProbes(self._counts, self._confirm, self._log)     # the second opinion
        self._running = False
        self._packet: HeartbeatPacket | None = None
        self._sent_earlier = 0    # by packets since replaced (each counts its own sends)
        self._events: list[MemberEvent] = []
        self.healthy = True

    # -- lifecycle -------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._running

    def start(self, now: float) -> None:
        """Begin at ``now``: the first heartbeat is due at once, the grid
        runs from here. Raises RuntimeError when already running."""
        if self._running:
            raise RuntimeError("the membership engine is already running")
        self._now = now
        self._origin = now
        self._origin_ns = int(now * 1e9)    # the packet stamps alive times from it
        self._beat = 0                       # the next beat is due at origin + beat * period
        self._change = False                 # our packet changed: send it at once
        self._armed: float | None = None     # the deadline the driver was last given
        self._grace_until = -math.inf
        self._next_report = now + MALFORMED_REPORT_S
        self._malformed_reported = self._malformed_total()
        self._auth_reported = sum(self.table.auth_failures().values())
        self._failures: dict[SocketRole, int] = {SEND: 0, RECEIVE: 0, UNICAST: 0}
        self._read_after = -math.inf
        self._reopen: list[SocketRole] = []
        self.healthy = True
        self._new_packet()
        self._running = True

    def stop(self, now: float) -> HeartbeatPacket | None:
        """Stop at ``now``: return the goodbye packet (send it once, like a
        heartbeat), or None when not running or listen-only. Every member still present is
        removed with reason "stopped" (see ``events()``), so a listener's view
        ends empty and a restart starts from nothing: no member is ever
        "added" twice in a row."""
        if not self._running:
            return None
        self._now = now
        self._running = False
        remaining = self.members()
        self._discard_read_ahead()
        self.table.clear()
        self._listed = {}
        self._verify.reset()        # a restart counts afresh: reports from before are ignored
        self._counts["removed." + STOPPED] += len(remaining)
        self._events.extend(MemberEvent(REMOVED, member, STOPPED) for member in remaining)
        return self._make_packet(L.SHUTDOWN_COMMAND) if self._sends else None

    def _discard_read_ahead(self) -> None:
        """Datagrams pump read before the stop but has not handled (the
        compiled pump reads 32 at a time) must not be replayed after a
        restart. Each call below takes one from that batch, never the socket
        (fd -1, and only while some are pending)."""
        path = self.data_path
        if path.pending():
            scratch = bytearray(L.RECV_BUFFER_LEN)
            while path.pending():
                path.pump(-1, scratch, -math.inf, 1, False)

    # -- time --------------------------------------------------------------------
    def next_deadline(self) -> float | None:
        """When the driver must call ``on_timer``/``outgoing`` next at the
        latest (monotonic seconds), or None when stopped. The driver sleeps
        until then unless the receive socket becomes readable. ``math.inf``:
        nothing is due until a report (dns_members with its lookup in flight
        sends no heartbeats and has no table to expire)."""
        if not self._running:
            return None
        if self.config.heartbeats:
            deadline = self._origin if self._change else self._next_beat()
        else:
            deadline = math.inf
        if self._peers is not None:
            deadline = min(deadline, self._peers.next_deadline() or math.inf)
        expiry = self.table.next_expiry()
        if expiry is not None:
            deadline = min(deadline, max(expiry, self._grace_until) + EXPIRY_SLACK_S)
        if self._verify.busy:
            deadline = min(deadline, self._verify.deadline())
        if self._read_after > self._now:
            deadline = min(deadline, self._read_after)
        # A deadline already past is due now: waking at once is not lateness.
        self._armed = max(deadline, self._now)
        return deadline

    def on_timer(self, now: float) -> None:
        """Do what is due at ``now``: the pause guard, expiry, the report.
        Call it after every wake-up (early calls are cheap and harmless)."""
        if not self._running:
            return
        self._observe(now)
        if now >= self._grace_until:
            events = self.table.expire(now, suspect=self.config.verify)
            for event in events:
                if event.kind == SUSPECT:
                    self._verify.suspect(event.member, now)
            self._events.extend(events)
        if self._verify.busy:
            self._verify.judge(now, self.table.is_suspect)
        if now >= self._next_report:
            self._next_report = now + MALFORMED_REPORT_S
            self._report_malformed()
            self._report_auth()

    def _observe(self, now: float) -> None:
        self._now = now
        armed, self._armed = self._armed, None
        if armed is not None and now - armed > self._pause_after:
            # We slept through our own deadline: peers get one drop time from
            # now to be heard again before anyone is expired.
            self._grace_until = now + self._drop
            self._counts["pauses"] += 1
            log.info("woke %.3f s past a deadline: no member expires before %.3f s from now",
                     now - armed, self._drop)

    # -- sending -------------------------------------------------------------------
    def _next_beat(self) -> float:
        return self._origin + self._beat * self._period

    def outgoing(self, now: float) -> HeartbeatPacket | None:
        """The packet to send at ``now`` (a heartbeat on the grid, or our
        changed packet at once), or None. Send it with ``data_path.send``
        and pass its result to ``on_send_result``. After a stall it is one late beat,
        then the grid again: never a burst of missed beats. A change does not
        move the grid. Listen-only: always None."""
        if not self._running or not self.config.heartbeats:
            return None
        self._now = now
        beat_due = now >= self._next_beat()
        if not (beat_due or self._change):
            return None
        self._change = False
        if beat_due:
            # The next grid point after now (at least the one after this beat).
            self._beat = max(self._beat + 1,
                             math.floor((now - self._origin) / self._period) + 1)
        return self._packet if self._sends else None

    def on_send_result(self, result: int, now: float) -> None:
        """``result`` of ``data_path.send``: bytes sent, or -errno. A failure is
        counted and logged (rate-limited), never queued: a later heartbeat
        replaces a lost one."""
        self._now = now
        if result >= 0:
            self._failures[SEND] = 0
            return
        self._counts["send_errors"] += 1
        self._log.log(logging.WARNING, "send", "heartbeat not sent: %s", os.strerror(-result))
        self._count_failure(SEND)

    def on_unicast_result(self, result: int, now: float) -> None:
        """``result`` of ``data_path.fan_out``. A failure for
        one peer (no route to it, say) is counted and logged, rate-limited;
        it is not the socket's fault, so it never asks for a reopen."""
        self._now = now
        if result >= 0:
            self._counts["unicast_sent"] += result
            return
        self._counts["unicast_send_errors"] += 1
        self._log.log(logging.WARNING, "unicast", "a unicast heartbeat was not sent: %s",
                      os.strerror(-result))

    def set_payload(self, payload: bytes | str) -> None:
        """Advertise new payload bytes (str: UTF-8); ``outgoing`` returns the
        new packet at once, the grid unchanged."""
        self._local = with_payload(self._local, payload)
        self._changed()

    def set_domain(self, domain: bytes | str) -> None:
        """Advertise a new domain; sent at once as ``set_payload``. Under
        ``filter_domain`` the table filters on it from now on, the fast path
        included: members of the old domain are removed ("filtered")."""
        self._local = with_domain(self._local, domain)
        self.table.set_local(self._local)
        self._events.extend(self.table.set_domain(self._local.domain
                                                  if self.config.filter_domain else None))
        self._changed()

    def set_member_port(self, port: int) -> None:
        """The member port we advertise (a TCP listener picked it)."""
        self._local = self._local.replace(port=port)
        self.table.set_local(self._local)
        self._changed()

    def _changed(self) -> None:
        if self._running:
            self._new_packet()
            self._change = True

    def _new_packet(self) -> None:
        if self._packet is not None:
            self._sent_earlier += self._packet.sent
        self._packet = self._make_packet(b"")

    def _make_packet(self, command: bytes) -> HeartbeatPacket:
        packet = self.config.heartbeat_packet(self._local.replace(command=command),
                                              self._origin_ns, self._codec)
        self._sign(packet)
        return packet

    def _sign(self, packet: HeartbeatPacket) -> None:
        """Sign ``packet`` with the ring's signing key (unsigned when off), its
        sequences above every one we sent before."""
        ring = self._ring
        after = self._packet.sequence if self._packet is not None else 0
        if self._auth == "off":
            packet.set_key(0)
        else:
            assert ring is not None     # auth is on: there is a key ring
            packet.set_key(ring.signing_id, ring.keys[ring.signing_id], after)

    def set_keys(self, keys: Keys, auth: AuthMode | None = None) -> None:
        """Other keys and mode (see ServiceConfig ``keys``/``auth``), at once:
        the next heartbeat is signed with the new signing key; members stay
        (rotate by adding the new key everywhere, then signing with it, then
        removing the old one)."""
        self._ring, self._auth = keys_and_mode(keys, auth)
        self.table.set_keys(L.AUTH_MODES[self._auth], self._ring)
        if self._packet is not None:
            self._sign(self._packet)

    def sockets(self) -> list[SocketRole]:
        """The sockets the driver opens, by role: RECEIVE and SEND for
        multicast (listen-only: RECEIVE alone), UNICAST for peers."""
        cfg = self.config
        roles: list[SocketRole] = ([RECEIVE, SEND] if self._sends else [RECEIVE]) if cfg.multicast else []
        if cfg.unicast and cfg.heartbeats:
            roles.append(UNICAST)
        return roles

    # -- receiving ---------------------------------------------------------------------
    def reading(self, now: float) -> bool:
        """Whether the driver should read the receive socket at ``now`` (not
        while backing off after a failed receive)."""
        return self._running and now >= self._read_after

    def receive(self, buf: bytearray, n: int, now: float,
                source: tuple[bytes, int] | None = None) -> None:
        """A datagram ``data_path.pump`` handed back (``n`` bytes in ``buf``).
        ``source``: ``data_path.source()`` for a datagram from the unicast
        socket (None from multicast): one from an address that is not a
        peer is refused unless ``accept_unknown`` (see ``Membership.receive``)."""
        self._failures[UNICAST if source is not None else RECEIVE] = 0
        unlisted = None
        if (source is not None and not self.config.accept_unknown
                and source[0] not in cast("PeerSet", self._peers).hosts):   # unicast: peers
            unlisted = source[0]
        events = self.table.receive(buf, n, now, unlisted)
        if events:
            self._events.extend(events)

    def on_receive_error(self, error: int, now: float, which: SocketRole = RECEIVE) -> None:
        """A receive from ``which`` socket failed with errno ``error`` (not
        EAGAIN/EINTR)."""
        self._now = now
        self._counts["receive_errors"] += 1
        self._log.log(logging.WARNING, "recv", "receive failed: %s", os.strerror(error))
        self._read_after = now + ERROR_BACKOFF_S
        self._count_failure(which)

    # -- the second opinion (verify): decided in verify.py ----------------------------------
    def probes_due(self, now: float) -> list[ProbeAttempt]:
        """The probe attempts to make now (see verify.PROBE_ATTEMPTS): for
        each, try a TCP connect to ``attempt.member``'s address and port,
        close it at once, and report with ``on_probe``; give up when
        ``attempt.deadline`` passes (on the clock that gives the engine its
        times; ``attempt.timeout`` is the same, counted from ``now``). Report
        every attempt once, whatever the engine decided meanwhile: until then
        it counts against verify.MAX_PROBE_SOCKETS."""
        if not self._verify.suspects:
            return []
        self._now = now
        return self._verify.due(now, self.config.verify_timeout_s)

    def on_probe(self, attempt: ProbeAttempt, answered: bool | None, now: float) -> None:
        """``attempt`` (from ``probes_due``) ended: ``answered`` True when the
        port accepted the connection, False when it was refused, None when
        nothing answered by its deadline (what each means:
        ``VerifyProbes.report`` in verify.py)."""
        self._now = now
        self._verify.report(attempt, answered, now, self._drop)

    def _confirm(self, member: Member) -> None:
        event = self.table.confirm(member)
        if event is not None:
            self._events.append(event)

    # -- discovery ---------------------------------------------------------------------------
    def lookups_due(self, now: float) -> list[Lookup]:
        """The name lookups (``peers.Lookup``) to start now: run each with
        ``resolver.lookup`` away from the receive path (a worker thread, an
        executor) and report with ``on_lookup``. None in flight twice."""
        if not self._running or self._peers is None:
            return []
        self._now = now
        return self._peers.due(now)

    def on_lookup(self, lookup: Lookup, answer: AbstractSet[tuple[str, int]] | BaseException,
                  now: float) -> None:
        """``lookup`` ended: ``answer`` is its set of ``(address text, port)``,
        or the ``resolver.DnsFailure`` it raised (any other exception counts
        as reason "error"). A failure keeps the last
        good answer (counted, logged rate-limited): a DNS outage costs no
        member and no peer."""
        self._now = now
        if not self._running:
            return
        assert self._peers is not None      # lookups are the peers'
        if isinstance(answer, BaseException):
            reason = getattr(answer, "reason", "error")
            self._peers.on_failure(lookup, reason, now)
            self._log.log(logging.WARNING, "lookup-" + lookup.name,
                          "cannot resolve %s (%s): keeping its last %s",
                          lookup.name, answer, _addresses(len(lookup.peers)))
            return
        failures = answer.failures if isinstance(answer, Answer) else ()
        changed = self._peers.on_answer(lookup, answer, now, [f.reason for f in failures])
        if failures:      # one kind of record (or an SRV target) failed, the rest answered
            self._log.log(logging.WARNING, "lookup-" + lookup.name,
                          "%s answered in part (%s): using its %s", lookup.name,
                          "; ".join(map(str, failures)), _addresses(len(lookup.peers)))
        if changed:
            self._new_targets()
            if self.config.dns_members:
                self._list_members(now)

    def _new_targets(self) -> None:
        """The fan-out for the current peers, in the unicast socket's family."""
        assert self._peers is not None      # called with peers only
        own = self.config.unicast_address
        family = socket.AF_INET6 if ":" in own else socket.AF_INET
        peers = sorted(self._peers.peers)
        reachable = [p for p in peers if family == socket.AF_INET6 or len(p[0]) == 4]
        # A link-local peer (fe80::/10) is reached through our card.
        index = self.config.links[0].index if self.config.links else 0
        targets: list[tuple[bytes, int] | tuple[bytes, int, int]] = [
            (a, port, index) if a[0] == 0xFE and a[1] & 0xC0 == 0x80 else (a, port)
            for a, port in reachable]
        if len(reachable) < len(peers):
            self._log.log(logging.WARNING, "family", "%d IPv6 peers cannot be reached from "
                          "the IPv4 address %s: skipped", len(peers) - len(reachable), own)
        self.targets = self._codec.Targets(targets, family)

    def _list_members(self, now: float) -> None:
        """dns_members: the members are the DNS answer's addresses (Tomcat's
        cloud membership: unique id the MD5 of the address as Java writes it,
        the port our own member port, alive time -1)."""
        assert self._peers is not None      # dns_members: the peers are DNS's
        listed = {address for address, _ in self._peers.peers}
        for address in [a for a in self._listed if a not in listed]:
            member = self._listed.pop(address)
            self._counts["removed." + UNLISTED] += 1
            self._events.append(MemberEvent(REMOVED, member, UNLISTED))
        for address in sorted(listed - self._listed.keys()):
            member = Member(address, self._local.port, cloud_unique_id(address),
                            alive_ms=-1)
            self._listed[address] = member
            self._events.append(MemberEvent(ADDED, member))

    def stored(self, member: Member) -> Member | None:
        """The member of the table with ``member``'s identity (host, port
        and unique id), with its latest alive time; None for a stranger, a
        suspect or a member listed by DNS."""
        return self.table.get(member)

    def members(self) -> list[Member]:
        """The members, oldest first (as Tomcat orders them)."""
        if not self._listed:
            return self.table.members()
        return self.table.members() + [m for _, m in sorted(self._listed.items())]

    # -- recovery ------------------------------------------------------------------------
    def _count_failure(self, which: SocketRole) -> None:
        self._failures[which] += 1
        if self._failures[which] >= RECOVERY_ERRORS:
            self._failures[which] = 0
            if which not in self._reopen:
                self._reopen.append(which)

    def reopen_due(self) -> list[SocketRole]:
        """The sockets (SEND, RECEIVE) to open afresh after repeated errors;
        asking clears the request. Report with ``on_reopened``."""
        due, self._reopen = self._reopen, []
        return due

    def on_reopened(self, which: SocketRole, error: OSError | None = None) -> None:
        """The driver reopened ``which`` (or failed to, with ``error``: the
        next run of errors asks again)."""
        if error is not None:
            self._log.log(logging.WARNING, "reopen-" + which, "cannot reopen %s socket: %s",
                          which, error)
            return
        self._counts["socket_reopened"] += 1
        log.warning("%s socket reopened after repeated errors", which)

    def on_internal_error(self, now: float) -> None:
        """The driver's loop caught an unexpected exception (it logs it and
        carries on): counted, and ``healthy`` is False until the next start."""
        self._now = now
        self._counts["internal_errors"] += 1
        self.healthy = False

    # -- what the application sees ------------------------------------------------------------
    def events(self) -> list[MemberEvent]:
        """The MemberEvents since the last call, oldest first (the list is handed over)."""
        events, self._events = self._events, []
        return events

    @property
    def local_member(self) -> Member:
        """Our own member as we advertise it (with the alive time last sent)."""
        member = self._local
        if self._packet is not None:
            member = member.with_alive(self._packet.alive_ms)
        return member

    @property
    def auth(self) -> AuthMode:
        """The authentication mode now: the ``auth`` setting until ``set_keys``."""
        return self._auth

    @property
    def key_ring(self) -> HeartbeatKeys | None:
        """The keys we sign and check with now (None: none)."""
        return self._ring

    def encode(self, command: bytes = b"") -> bytes:
        """Our packet as we advertise it now, alive time 0 (the TCP
        listener's replies carry it)."""
        return encode(self._local.replace(command=command))

    def stats(self) -> EngineStats:
        """The table's counters and ours: the same keys whatever the driver."""
        stats = self.table.stats()
        stats.update(self._counts)
        stats.update(self._peers.stats() if self._peers is not None else PeerSet.idle_stats())
        if self._listed:
            stats["members"] += len(self._listed)
        stats["sent"] = self._sent_earlier + (self._packet.sent if self._packet else 0)
        return {**stats, "implementation": self._codec.IMPLEMENTATION, "healthy": self.healthy}

    # -- the report -----------------------------------------------------------------------------
    def _malformed(self) -> dict[str, int]:
        stats = self.table.stats()
        return {k[len("malformed."):]: v for k, v in stats.items() if k.startswith("malformed.") and v}

    def _malformed_total(self) -> int:
        return sum(self._malformed().values())

    def _report_malformed(self) -> None:
        """One warning per period at most about what was dropped, by reason:
        a flood of bad datagrams must not become a flood of log lines."""
        dropped = self._malformed()
        total = sum(dropped.values())
        if total > self._malformed_reported:
            log.warning("dropped %d malformed datagrams on %s so far (%s)", total,
                        self.config.describe(),
                        ", ".join(f"{k} {v}" for k, v in sorted(dropped.items())))
            self._malformed_reported = total

    def _report_auth(self) -> None:
        """As ``_report_malformed``, for datagrams that failed authentication."""
        failures = self.table.auth_failures()
        total = sum(failures.values())
        if total > self._auth_reported:
            fate = ("dropped" if self._auth == "enforce"
                    else "admitted as unauthenticated (permissive)")
            hint = ("; skew: a sender's clock is off from ours by more than the replay "
                    "window (check NTP)" if failures.get("skew") else "")
            log.warning("%d datagrams on %s so far were not authentic and fresh (%s): %s%s",
                        total, self.config.describe(),
                        ", ".join(f"{k} {v}" for k, v in sorted(failures.items())), fate, hint)
            self._auth_reported = total


def _addresses(count: int) -> str:
    """``1 address``, ``2 addresses``: a count of peers in a log line."""
    return f"{count} address" if count == 1 else f"{count} addresses"

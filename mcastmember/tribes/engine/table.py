"""The membership table: who is alive, with events. No I/O; time is passed in.

Known members' heartbeats are recognised by the codec's ``MemberIndex`` (a
byte comparison, no parse, no allocation on the compiled path). Everything
else (a new member, a changed one, a shutdown, our own packets, other
domains, malformed datagrams) takes the slow path here, which parses.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING

from ..wire import layout as L
from ..kernel import codec as _codec
from ..wire import auth
from .events import EventKind, MemberEvent, Reason
from .member import Member, find_by_address, find_by_unique_id
from .settings import DEFAULT_SECONDS, default

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import ModuleType

    from typing_extensions import Buffer

    from ..kernel._fast import MemberIndex
    from .detector import PhiAccrual

    Events = tuple[MemberEvent, ...]

ADDED, UPDATED, REMOVED, SUSPECT = (EventKind.ADDED, EventKind.UPDATED, EventKind.REMOVED,
                                   EventKind.SUSPECT)
SHUTDOWN, EXPIRED, FILTERED = Reason.SHUTDOWN, Reason.EXPIRED, Reason.FILTERED

_NO_EVENTS: tuple[MemberEvent, ...] = ()

# Every counter the table keeps (stats()), present from the start at 0.
TABLE_COUNTERS = (
    ("received", "fast_path", "slow_path", "members", "added", "updated", "refreshed_slow",
     "refused", "refused_unlisted", "refused_unauthenticated", "local", "filtered",
     "shutdown_unknown", "suspected", "suspects_heard", "unprobed", "channel_frames",
     "doctor_probes")
    + tuple("removed." + reason for reason in (SHUTDOWN, EXPIRED, FILTERED))
    + tuple("malformed." + reason for verdict, reason in L.REASONS.items()
            if verdict not in (L.OK, L.CHANNEL_FRAME, L.DOCTOR_PROBE))
    + tuple("auth." + reason for verdict, reason in L.AUTH_REASONS.items()
            if verdict != L.AUTH_OK))
# A first packet from a sender is believed only when its sequence (the
# sender's wall clock) is within this of ours, either way: a capture
# replayed later to a table that never heard its sender (restarted) is
# refused, and so is a sender whose clock is off by more (auth.skew; see
# auth.ReplayGuard). Generous, as the clocks of a cluster's hosts differ.
REPLAY_WINDOW_S = 60.0


def _wall_us() -> int:
    return time.time_ns() // 1000


class Membership:
    """Live table of members heard on the group.

    ``receive(buf, n, now)`` takes one datagram and returns the events it
    caused (an empty tuple for the common case: a known member's heartbeat).
    ``expire(now)`` drops members silent for longer than ``drop_time`` seconds
    and returns their events. ``now`` is a monotonic clock in seconds.

    ``local`` is our own member (or its identity bytes): our heartbeats coming
    back are ignored. ``domain``, when not None, keeps only members whose
    domain bytes are equal to it. At most ``max_members`` members, suspects
    included, are kept: new ones beyond that are refused and counted, known
    ones never evicted.

    ``set_keys`` turns authentication on (see auth.py); ``wall_clock``
    (microseconds, default the system's) judges a first packet's sequence.
    """

    def __init__(self, *, drop_time: float = DEFAULT_SECONDS["drop_time"],
                 max_members: int = default("max_members"),
                 local: Member | Buffer | None = None, domain: Buffer | None = None,
                 codec: ModuleType | None = None, phi: PhiAccrual | None = None,
                 wall_clock: Callable[[], int] | None = None) -> None:
        if not drop_time > 0:
            raise ValueError("drop_time must be positive")
        if int(max_members) != max_members or max_members < 1:
            raise ValueError("max_members must be a positive whole number")
        self.drop_time = float(drop_time)
        self.max_members = int(max_members)
        self._codec: ModuleType = codec or _codec.impl
        self._local = self._identity_of(local)
        self._domain = None if domain is None else bytes(domain)
        # Room for members plus as many ignored senders (our own packets,
        # other domains), so that recognising those stays on the fast path.
        self._index: MemberIndex = self._codec.MemberIndex(2 * self.max_members + 1)
        # phi: a detector.PhiAccrual, to expire members by their own
        # heartbeat intervals instead of the one drop time.
        self._phi = phi
        if phi is not None:
            phi.arm(self._index)
        # One record per slot of the index in use (a member, or a sender we
        # ignore), found by slot (what the index's expiry returns: a list, as
        # the index hands out the lowest free slot first) and by identity
        # (in the order they were added); a suspect's record stays, out of
        # the index (slot -1). Each slot's packet, alive and last-heard
        # times stay the index's.
        self._slots: list[_MemberSlot | _IgnoredSlot | None] = []
        self._members: dict[bytes, _MemberSlot] = {}      # members and suspects
        self._ignored: dict[bytes, _IgnoredSlot] = {}     # our own, other domains'
        self._counts = Counter(dict.fromkeys(TABLE_COUNTERS, 0))   # every key from the start
        self._reclassify = False   # set_domain() waiting for pump to return
        self._auth_mode = L.AUTH_OFF
        self._ring: auth.HeartbeatKeys | None = None
        # auth.ReplayGuard once authentication was on
        self._guard: auth.ReplayGuard | None = None
        self._keys_pending = False  # set_keys() waiting for pump to return
        self._wall_clock = wall_clock or _wall_us

    @staticmethod
    def _identity_of(local: Member | Buffer | None) -> bytes | None:
        if local is None:
            return None
        if isinstance(local, Member):
            return local.identity
        return bytes(local)

    def set_local(self, local: Member | Buffer | None) -> None:
        """Our own member changed (restart with a new unique id, new port)."""
        self._local = self._identity_of(local)

    def set_domain(self, domain: Buffer | None) -> Events:
        """Filter on ``domain`` from now on (None: keep every domain) and
        return the events: members of another domain are removed (FILTERED),
        and senders filtered out before are forgotten, so that their next
        heartbeat is judged again (the fast path would keep the old verdict).
        While ``pump`` runs on another thread the index cannot be changed:
        then this takes effect, with its events, at the next ``receive`` or
        ``expire``."""
        self._domain = None if domain is None else bytes(domain)
        self._reclassify = True
        return self._apply_domain()

    def _apply_domain(self) -> Events:
        if not self._reclassify or self.pumping:
            return _NO_EVENTS
        index = self._index
        events: list[MemberEvent] = []
        try:
            for ignored in [r for r in self._ignored.values()
                            if index.kind(r.slot) == L.KIND_FILTERED]:
                index.remove(ignored.slot)
                self._forget_ignored(ignored)
            if self._domain is not None:
                for record in [r for r in self._members.values()
                               if r.slot >= 0 and r.member.domain != self._domain]:
                    events.append(self._drop(record, FILTERED))
        except RuntimeError:
            # pump started on another thread between our check and now: each
            # step above is whole or not begun, the rest follows next time.
            return tuple(events)
        self._reclassify = False
        return tuple(events)

    def set_keys(self, mode: int, ring: auth.HeartbeatKeys | None = None) -> None:
        """Authenticate from now on: ``mode`` is layout.AUTH_OFF,
        AUTH_PERMISSIVE or AUTH_ENFORCE, ``ring`` an auth.HeartbeatKeys (needed
        unless off). Members stay: the replay guard and each member's last
        sequence outlive a change of keys. Off: members' ``authenticated``
        becomes None. While ``pump`` runs on another thread the fast path
        follows at the next ``receive`` or ``expire``."""
        if mode != L.AUTH_OFF and ring is None:
            raise ValueError("authentication needs a key ring")
        self._auth_mode, self._ring = mode, (ring if mode != L.AUTH_OFF else None)
        if mode != L.AUTH_OFF and self._guard is None:
            self._guard = auth.ReplayGuard(REPLAY_WINDOW_S * 1e6, 4 * self.max_members)
        if mode == L.AUTH_OFF:
            for record in self._in_index():
                record.member = record.member.with_authenticated(None)
        self._keys_pending = True
        self._apply_keys()

    def _apply_keys(self) -> None:
        if not self._keys_pending or self.pumping:
            return
        try:
            self._index.set_keys(self._auth_mode, self._ring.keys if self._ring else None)
            if self._auth_mode == L.AUTH_OFF:
                for record in self._in_index():
                    self._index.set_auth(record.slot, None, 0)
        except RuntimeError:     # pump started on another thread: next time
            return
        self._keys_pending = False

    # -- receiving -----------------------------------------------------------
    def receive(self, buf: Buffer, n: int, now: float, unlisted: bytes | None = None) -> Events:
        """Take the first ``n`` bytes of ``buf`` as one datagram heard at ``now``.

        ``unlisted``: the sender's address bytes when it is not a peer we
        know (a unicast datagram from a stranger). Such a datagram is refused
        ("refused_unlisted") unless it comes from a member already present
        that advertises that very address: a member whose address left DNS
        stays while it heartbeats, but nobody joins, leaves or changes in
        another's name from elsewhere."""
        events = self._apply_domain() if self._reclassify else _NO_EVENTS
        if self._keys_pending:
            self._apply_keys()
        if unlisted is None:     # a stranger's copy of a member's bytes refreshes nobody
            verdict = self._index.lookup(buf, n, now)
            if verdict >= 0 or verdict == L.INDEX_DROPPED:
                return events
        return events + self._receive_slow(buf, n, now, unlisted)

    def pump(self, fd: int, buf: Buffer, deadline: float, budget: int = -1,
             sources: bool = False) -> int:
        """Receive from socket ``fd`` into ``buf`` and refresh known members'
        heartbeats without parsing (compiled: without the GIL, no objects),
        until a datagram needs ``receive``: then return its length. Negative
        results are -errno: -EAGAIN for nothing to read, ``deadline`` reached
        or ``budget`` datagrams handled; ``sources``: keep senders for
        ``source()`` (see MemberIndex.pump)."""
        return self._index.pump(fd, buf, deadline, budget, sources)

    @property
    def pumping(self) -> bool:
        """True while ``pump`` runs (on another thread): the table cannot change then."""
        return self._index.busy

    def pending(self) -> int:
        """Datagrams ``pump`` has read but not handled yet (call it again)."""
        return self._index.pending()

    def source(self) -> tuple[bytes, int] | None:
        """``(address bytes, port)`` of the sender of the datagram ``pump``
        last returned, or None (see MemberIndex.source)."""
        return self._index.source()

    def _receive_slow(self, buf: Buffer, n: int, now: float,
                      unlisted: bytes | None = None) -> Events:
        self._counts["slow_path"] += 1
        codec = self._codec
        verdict = codec.check(buf, n)
        if verdict != L.OK:
            self._counts[self._drop_counter(verdict)] += 1
            return _NO_EVENTS
        identity = codec.identity(buf, n)
        known = self._members.get(identity)       # a member, or a suspect
        if unlisted is not None:
            if known is None or known.member.host != unlisted:
                self._counts["refused_unlisted"] += 1
                return _NO_EVENTS
        if (len(self) >= self.max_members and self._domain is None
                and known is None and identity != self._local):
            # Full, and a stranger: refuse before building anything, so that a
            # flood of forged members costs as little as possible.
            self._counts["refused"] += 1
            return _NO_EVENTS
        member = Member.from_fields(codec.parse(buf, n))
        # The index keeps the packet without its trailer (it changes every time).
        datagram, n = n, auth.packet_part(buf, n)
        if identity == self._local:
            self._counts["local"] += 1
            self._counts["slow_path"] -= 1     # ours, not received: counted as local only
            self._ignore(identity, buf, n, now, L.KIND_LOCAL, member.is_shutdown)
            return _NO_EVENTS
        record = known if known is not None and known.slot >= 0 else None   # in the index
        sequence = 0
        if self._auth_mode != L.AUTH_OFF:
            # Before anything the packet says is believed (a domain move
            # or a shutdown removes a member).
            judged = self._authenticate(buf, datagram, identity, record)
            if judged is None:
                return _NO_EVENTS
            authenticated, sequence = judged
            if not authenticated and known is not None and known.member.authenticated:
                # Permissive admits unkeyed strangers, never an unkeyed
                # packet in a keyed member's name: no change, no refresh,
                # no goodbye, no domain move.
                self._counts["refused_unauthenticated"] += 1
                return _NO_EVENTS
            member = member.with_authenticated(authenticated)
        if self._domain is not None and member.domain != self._domain:
            self._counts["filtered"] += 1
            self._ignore(identity, buf, n, now, L.KIND_FILTERED, member.is_shutdown)
            if record is not None:     # a member moved to another domain
                return (self._drop(record, FILTERED),)
            return _NO_EVENTS
        if member.is_shutdown:
            if record is None:
                if known is not None:        # a suspect said goodbye after all
                    del self._members[identity]
                    self._counts["removed." + SHUTDOWN] += 1
                    return (MemberEvent(REMOVED, known.member, SHUTDOWN),)
                self._counts["shutdown_unknown"] += 1
                return _NO_EVENTS
            return (self._drop(record, SHUTDOWN),)
        if record is None:
            return self._add(member, identity, known, buf, n, now, sequence)
        previous = record.as_of(self._index)     # before the index forgets it
        self._index.replace(record.slot, buf, n, now)
        if self._auth_mode != L.AUTH_OFF:
            self._index.set_auth(record.slot, member.authenticated, sequence)
        member = member.replace(first_seen=previous.first_seen, last_heard=now)
        record.member = member
        if previous.same_state(member):
            self._counts["refreshed_slow"] += 1
            return _NO_EVENTS
        self._counts["updated"] += 1
        return (MemberEvent(UPDATED, member, previous=previous),)

    def _authenticate(self, buf: Buffer, n: int, identity: bytes,
                      record: _MemberSlot | None) -> tuple[bool, int] | None:
        """(True, its sequence) for an authentic and fresh datagram, (False,
        0) for one admitted unauthenticated (permissive), None when dropped."""
        ring = self._ring
        assert ring is not None               # authentication is on (set_keys)
        verdict, _, sequence = auth.verify(ring.keys, memoryview(buf), n)
        if verdict == L.AUTH_OK:
            guard = self._guard
            assert guard is not None          # made by set_keys, before any judging
            wall = self._wall_clock()
            if record is not None:     # what the fast path accepted since
                guard.advance(identity, self._index.sequence(record.slot), wall)
            verdict = guard.judge(identity, sequence, wall)
        if verdict == L.AUTH_OK:
            return True, sequence
        self._counts["auth." + L.AUTH_REASONS[verdict]] += 1
        if verdict in (L.AUTH_REPLAY, L.AUTH_SKEW) or self._auth_mode == L.AUTH_ENFORCE:
            return None
        return False, 0

    def _in_index(self) -> list[_MemberSlot]:
        """The members' records, suspects left out, in the order they were added."""
        return [r for r in self._members.values() if r.slot >= 0]

    def _place(self, record: _MemberSlot | _IgnoredSlot) -> None:
        """File ``record`` under its slot."""
        slots, slot = self._slots, record.slot
        if slot >= len(slots):
            slots.extend([None] * (slot + 1 - len(slots)))
        slots[slot] = record

    def _remember_sequence(self, slot: int, identity: bytes) -> None:
        """A member leaves the index: the replay guard keeps its last sequence."""
        if self._guard is not None:
            self._guard.advance(identity, self._index.sequence(slot), self._wall_clock())

    @staticmethod
    def _drop_counter(verdict: int) -> str:
        if verdict == L.CHANNEL_FRAME:
            return "channel_frames"
        if verdict == L.DOCTOR_PROBE:
            return "doctor_probes"
        return "malformed." + L.REASONS[verdict]

    def _add(self, member: Member, identity: bytes, known: _MemberSlot | None, buf: Buffer,
             n: int, now: float, sequence: int = 0) -> Events:
        """Add ``member`` (``identity``; ``known``: its record as a suspect)."""
        if len(self) >= self.max_members and known is None:
            self._counts["refused"] += 1     # reached when filtering by domain
            return _NO_EVENTS
        slot = self._index.add(buf, n, now, L.KIND_MEMBER)
        if self._auth_mode != L.AUTH_OFF:
            self._index.set_auth(slot, member.authenticated, sequence)
        suspect = None if known is None else known.member
        first_seen = now if suspect is None else suspect.first_seen
        member = member.replace(first_seen=first_seen, last_heard=now)
        record = _MemberSlot(slot, member)
        if slot < len(self._slots):
            self._slots[slot] = record
        else:
            self._place(record)
        if suspect is not None:     # added anew: last in the order, as any member added
            del self._members[identity]
        self._members[identity] = record
        if suspect is not None:
            # Heard again: it never left. Only a change is news.
            self._counts["suspects_heard"] += 1
            if suspect.same_state(member):
                return _NO_EVENTS
            return (MemberEvent(UPDATED, member, previous=suspect),)
        self._counts["added"] += 1
        return (MemberEvent(ADDED, member),)

    def _drop(self, record: _MemberSlot, reason: Reason) -> MemberEvent:
        self._index.remove(record.slot)     # first: it refuses (RuntimeError) while pump runs
        member = record.as_of(self._index)
        identity = member.identity
        self._slots[record.slot] = None
        del self._members[identity]
        self._remember_sequence(record.slot, identity)
        self._counts["removed." + reason] += 1
        return MemberEvent(REMOVED, member, reason)

    def _ignore(self, identity: bytes, buf: Buffer, n: int, now: float, kind: int,
                leaving: bool) -> None:
        """Remember a sender we ignore so its next heartbeats are recognised
        without parsing; forget it when it leaves."""
        ignored = self._ignored.get(identity)
        if leaving:
            if ignored is not None:
                self._forget_ignored(ignored)
                self._index.remove(ignored.slot)
            return
        if ignored is not None:
            self._index.replace(ignored.slot, buf, n, now)
        elif len(self._ignored) < self.max_members + 1:
            slot = self._index.add(buf, n, now, kind)
            if slot >= 0:
                ignored = _IgnoredSlot(slot, identity)
                self._place(ignored)
                self._ignored[identity] = ignored

    def _forget_ignored(self, ignored: _IgnoredSlot) -> None:
        self._slots[ignored.slot] = None
        del self._ignored[ignored.identity]

    # -- expiry --------------------------------------------------------------
    def expire(self, now: float, suspect: bool = False) -> Events:
        """Remove members not heard since ``now - drop_time``; O(expired).
        With ``suspect`` they become suspects instead ("suspect" events):
        still members, until ``confirm`` removes them or they are heard;
        but not a member admitted unauthenticated (permissive): an unkeyed
        sender must not choose where we connect, so it is removed, counted
        "unprobed"."""
        events = self._apply_domain() if self._reclassify else _NO_EVENTS
        if self._keys_pending:
            self._apply_keys()
        if self._phi is not None:
            slots = self._index.expire_phi(now, self.drop_time)
        else:
            slots = self._index.expire(now - self.drop_time)
        if not slots:
            return events
        out = list(events)
        index, records = self._index, self._slots
        for slot in slots:
            record = records[slot]
            if not isinstance(record, _MemberSlot):
                assert record is not None         # the index expires only slots in use
                self._forget_ignored(record)
                continue
            records[slot] = None
            member = record.member.replace(alive_ms=index.alive(slot), last_heard=index.heard(slot))
            identity = member.identity
            self._remember_sequence(slot, identity)
            if suspect and member.authenticated is not False:
                record.slot, record.member = -1, member    # out of the index, still a member
                self._counts["suspected"] += 1
                out.append(MemberEvent(SUSPECT, member))
            else:
                del self._members[identity]
                if suspect:
                    self._counts["unprobed"] += 1
                self._counts["removed." + EXPIRED] += 1
                out.append(MemberEvent(REMOVED, member, EXPIRED))
        return tuple(out)

    def confirm(self, member: Member, reason: Reason = EXPIRED) -> MemberEvent | None:
        """Remove the suspect ``member`` (its event), or None when it is no
        longer a suspect (heard again, or gone)."""
        identity = member.identity
        if not self.is_suspect(identity):
            return None
        suspect = self._members.pop(identity).member
        self._counts["removed." + reason] += 1
        return MemberEvent(REMOVED, suspect, reason)

    def is_suspect(self, identity: bytes) -> bool:
        record = self._members.get(identity)
        return record is not None and record.slot < 0

    def next_expiry(self) -> float | None:
        """The earliest ``now`` at which ``expire`` could remove something, or None."""
        if self._phi is not None:
            return self._index.next_phi_expiry(self.drop_time)
        oldest = self._index.oldest_heard()
        return None if oldest is None else oldest + self.drop_time

    def clear(self) -> None:
        """Forget everyone (without events); used when the service stops. The
        datagrams ``pump`` read but did not hand back yet go too: nothing from
        before is replayed after a restart."""
        self._index.clear()
        self._reclassify = False
        self._slots.clear()
        self._members.clear()
        self._ignored.clear()

    # -- reading -------------------------------------------------------------
    def members(self) -> list[Member]:
        """Snapshot of the members, oldest first (largest alive time, as Tomcat
        orders them), each carrying the alive time of its latest heartbeat."""
        alive, heard = self._index.alive, self._index.heard
        snapshot = [r.member if r.slot < 0 else
                    r.member.replace(alive_ms=alive(r.slot), last_heard=heard(r.slot))
                    for r in self._members.values()]
        snapshot.sort(key=lambda m: (-m.alive_ms, m.identity))
        return snapshot

    def __len__(self) -> int:
        return len(self._members)

    def auth_failures(self) -> dict[str, int]:
        """{reason: count} of datagrams whose trailer failed (no_trailer,
        bad_trailer, unknown_key, bad_mac, replay, skew): dropped under
        enforce (replay and skew in any mode), admitted as unauthenticated
        when permissive."""
        prefix = "auth."
        return {k[len(prefix):]: v for k, v in self.stats().items() if k.startswith(prefix) and v}

    def __contains__(self, member: object) -> bool:
        # Member.identity's getter, called as a function: anything without
        # a member's fields raises AttributeError, as before. (mypy sees the
        # class attribute as the getter itself, pyright fget as maybe None.)
        identity = Member.identity.fget(member)  # type: ignore[attr-defined]
        return identity in self._members

    def get(self, member: Member) -> Member | None:
        """The stored member with this identity (latest alive time), or None."""
        record = self._members.get(member.identity)
        if record is None or record.slot < 0:
            return None
        return record.as_of(self._index)

    def by_unique_id(self, unique_id: Buffer) -> Member | None:
        """The member with this 16-byte unique id, or None."""
        return find_by_unique_id(self.members(), unique_id)

    def by_address(self, host: str | Buffer, port: int) -> Member | None:
        """The member at ``host`` (address text or raw bytes) and member
        ``port``, or None."""
        return find_by_address(self.members(), host, port)

    def __iter__(self) -> Iterator[Member]:
        return iter(self.members())

    def last_heard(self, member: Member) -> float | None:
        record = self._members.get(member.identity)
        return None if record is None or record.slot < 0 else self._index.heard(record.slot)

    def stats(self) -> dict[str, int]:
        """Counters: received, heartbeats recognised on the fast path, and the
        slow path's outcomes (added, updated, removed.*, malformed.*, ...).
        Our own heartbeats heard back count in ``local`` only: ``received``
        (= ``fast_path`` + ``slow_path`` + what ``pump`` dropped) and the two
        paths count others' datagrams. ``local`` and ``filtered`` count every
        such datagram, parsed or recognised."""
        counts = Counter(self._counts)
        dropped_in_pump = 0
        for verdict, count in self._index.dropped().items():
            counts[self._drop_counter(verdict)] += count
            dropped_in_pump += count
        for verdict, count in self._index.auth_failures().items():
            counts["auth." + L.AUTH_REASONS[verdict]] += count
        hits = self._index.hits_by_kind()
        counts["local"] += hits.get(L.KIND_LOCAL, 0)
        counts["filtered"] += hits.get(L.KIND_FILTERED, 0)
        fast = hits.get(L.KIND_MEMBER, 0) + hits.get(L.KIND_FILTERED, 0)
        counts["fast_path"] = fast
        counts["received"] = fast + counts.get("slow_path", 0) + dropped_in_pump
        counts["members"] = len(self._members)
        return dict(counts)


class _MemberSlot:
    """A member as the table's Python side keeps it: its ``slot`` in the
    index (-1: a suspect, out of the index) and the ``member`` as last
    parsed. Its packet, alive time and last-heard time are the index's (C
    arrays, untouched by the fast path's Python); ``as_of`` joins them."""

    __slots__ = ("slot", "member")

    def __init__(self, slot: int, member: Member) -> None:
        self.slot, self.member = slot, member

    def as_of(self, index: MemberIndex) -> Member:
        """The member with its latest alive time and when it was last heard:
        what snapshots and events carry (a suspect: as when it became one).
        A freed slot keeps both until it is reused."""
        slot = self.slot
        if slot < 0:
            return self.member
        return self.member.replace(alive_ms=index.alive(slot), last_heard=index.heard(slot))


class _IgnoredSlot:
    """A sender whose heartbeats the index recognises to drop them (our own
    packets heard back, another domain's members): its ``slot`` and
    ``identity``."""

    __slots__ = ("slot", "identity")

    def __init__(self, slot: int, identity: bytes) -> None:
        self.slot, self.identity = slot, identity

"""Serf's member statuses, sans-IO: intents, memberlist's join/leave, push/pull.

:class:`SerfMembers` follows serf.go: ``handleNodeJoinIntent``,
``handleNodeLeaveIntent``, ``handleNodeJoin``, ``handleNodeLeave``,
``handleNodeUpdate``, ``Leave``/``broadcastJoin``/``forceLeave`` (the local
intents), ``handleReap``; :class:`SerfCore` adds the event and query buffers
and the push/pull user state of delegate.go (``LocalState``,
``MergeRemoteState``). Nothing here sends, sleeps or reads a clock: each call
takes ``now`` (seconds, any monotonic origin), returns what to gossip, and the
events Serf would put on its event channel collect in ``events`` for the
caller to take (:meth:`SerfMembers.take_events`).

What makes ``serf members`` show a node ``left`` rather than ``failed``: its
leave intent (gossiped before memberlist's own dead/leave) turns it
``leaving``; memberlist's leave then turns a leaving member ``left`` and an
alive one ``failed``.

Beyond Serf, failed and left members are bounded apart from the table
(``max_failed_members``, ``max_left_members``: past either, the one that
failed or left first is forgotten early), and a newcomer that finds the
table full takes the place of the member that failed or left longest ago.
Serf keeps them for a day (the reconnect and tombstone timeouts), so
otherwise forged deaths of invented members would keep every real newcomer
out that long.
"""

from __future__ import annotations

from dataclasses import dataclass

from .buffers import UserEventBuffer, IntentBuffer, QueryBuffer
from .clock import LamportClock
from .layout import (DEFAULT_RECONNECT_TIMEOUT, DEFAULT_TOMBSTONE_TIMEOUT, LAMPORT_MASK, MemberStatus,
                     SerfMessageType)
from .messages import Join, Leave, SerfPushPull, UserEvent

#: SerfMembers' (and SerfSettings') default bounds on failed and on left members
DEFAULT_MAX_FAILED_MEMBERS = 4096
DEFAULT_MAX_LEFT_MEMBERS = 4096


@dataclass
class MemberState:
    """Serf's view of one member: its status and the Lamport time of the last
    intent that set it; ``leave_time`` is when it failed or left (for reaping)."""

    name: str
    status: MemberStatus = MemberStatus.ALIVE
    status_ltime: int = 0
    leave_time: float | None = None


@dataclass(frozen=True)
class SerfEvent:
    """What Serf hands its application: ``kind`` as Go's EventType.String()
    (``member-join``, ``member-leave``, ``member-failed``, ``member-update``,
    ``member-reap``, ``user``)."""

    kind: str
    name: str
    payload: bytes = b""
    ltime: int = 0
    coalesce: bool = False


@dataclass(frozen=True)
class LeaveOutcome:
    """A leave intent's result: ``rebroadcast`` it; ``refute``: it is about us
    while we are alive, so send a fresh join intent (:meth:`SerfMembers.local_join`);
    ``prune``: erase the member (:meth:`SerfMembers.erase`), at once if it has
    left or failed, after the leave has propagated if it is leaving."""

    rebroadcast: bool
    refute: bool = False
    prune: bool = False


class SerfMembers:
    """Member statuses by Serf's rules, for the node called ``name``.

    ``max_members`` bounds the table (memberlist's own table bounds it
    first): a newcomer that finds it full takes the place of the member
    that failed or left longest ago (counted in ``evicted``), and is
    refused (counted in ``refused``) only if none did. Failed and left
    members are bounded on their own, oldest out (``max_failed_members``,
    ``failed_evicted``; ``max_left_members``, ``left_evicted``). Ourselves
    are never evicted.
    """

    def __init__(self, name: str, intents: IntentBuffer | None = None, clock: LamportClock | None = None,
                 reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT,
                 tombstone_timeout: float = DEFAULT_TOMBSTONE_TIMEOUT, max_members: int = 100_000,
                 max_failed_members: int = DEFAULT_MAX_FAILED_MEMBERS,
                 max_left_members: int = DEFAULT_MAX_LEFT_MEMBERS):
        self.name = name
        self.clock = clock or LamportClock()
        self.intents = intents or IntentBuffer()
        self.reconnect_timeout = reconnect_timeout
        self.tombstone_timeout = tombstone_timeout
        self.max_members = max_members
        self.max_failed_members = max_failed_members
        self.max_left_members = max_left_members
        self.refused = 0
        self.evicted = 0
        self.failed_evicted = 0
        self.left_evicted = 0
        #: this node: ALIVE, then LEAVING from local_leave(), LEFT from left()
        self.state = MemberStatus.ALIVE
        self.members: dict[str, MemberState] = {}
        # The failed and the left members in the order they became so
        # (Serf's failedMembers and leftMembers lists), as dicts: dropping
        # one is O(1), not a search of thousands.
        self._left: dict[str, MemberState] = {}
        self._failed: dict[str, MemberState] = {}
        self.events: list[SerfEvent] = []

    @property
    def left_members(self) -> list[str]:
        """The left members' names, in the order they left (push/pull
        sends them so); a copy."""
        return list(self._left)

    @property
    def failed_members(self) -> list[str]:
        """The failed members' names, in the order they failed; a copy."""
        return list(self._failed)

    def take_events(self) -> list[SerfEvent]:
        """The events since the last call, oldest first."""
        events, self.events = self.events, []
        return events

    # ----------------------------------------------------------- intents

    def join_intent(self, msg: Join, now: float) -> bool:
        """A join intent (handleNodeJoinIntent): True to gossip it on."""
        self.clock.witness(msg.ltime)
        member = self.members.get(msg.node)
        if member is None:
            return self.intents.upsert(msg.node, SerfMessageType.JOIN, msg.ltime, now)
        if msg.ltime <= member.status_ltime:
            return False
        member.status_ltime = msg.ltime
        if member.status == MemberStatus.LEAVING:
            member.status = MemberStatus.ALIVE
        return True

    def leave_intent(self, msg: Leave, now: float) -> LeaveOutcome:
        """A leave intent (handleNodeLeaveIntent)."""
        self.clock.witness(msg.ltime)
        member = self.members.get(msg.node)
        if member is None:
            return LeaveOutcome(self.intents.upsert(msg.node, SerfMessageType.LEAVE, msg.ltime, now))
        if msg.ltime <= member.status_ltime:
            return LeaveOutcome(False)
        if msg.node == self.name and self.state == MemberStatus.ALIVE:
            return LeaveOutcome(False, refute=True)
        # the time moves even when the status does not: a second leave for a
        # leaving member is then old and not gossiped forever (consul#8179)
        member.status_ltime = msg.ltime
        if member.status == MemberStatus.ALIVE:
            member.status = MemberStatus.LEAVING
        elif member.status == MemberStatus.FAILED:
            member.status = MemberStatus.LEFT
            self._failed.pop(member.name, None)
            self.events.append(SerfEvent("member-leave", member.name))
            self._now_left(member)
        elif member.status not in (MemberStatus.LEAVING, MemberStatus.LEFT):
            return LeaveOutcome(False)
        return LeaveOutcome(True, prune=msg.prune)

    # ------------------------------------------------ memberlist's events

    def node_join(self, name: str, now: float) -> None:
        """memberlist reports ``name`` alive (handleNodeJoin)."""
        member = self.members.get(name)
        if member is None:
            if len(self.members) >= self.max_members:
                oldest = self._oldest_gone()
                if oldest is None:
                    self.refused += 1
                    return
                self.erase(oldest.name)
                self.evicted += 1
            member = MemberState(name)
            join = self.intents.recent(name, SerfMessageType.JOIN)
            if join is not None:
                member.status_ltime = join
            leave = self.intents.recent(name, SerfMessageType.LEAVE)
            if leave is not None:
                member.status = MemberStatus.LEAVING
                member.status_ltime = leave
            self.members[name] = member
        else:
            old = member.status
            member.status = MemberStatus.ALIVE
            member.leave_time = None
            if old in (MemberStatus.FAILED, MemberStatus.LEFT):
                self._failed.pop(name, None)
                self._left.pop(name, None)
        self.events.append(SerfEvent("member-join", name))

    def node_leave(self, name: str, now: float) -> None:
        """memberlist reports ``name`` gone (handleNodeLeave): left if it had
        announced a leave, failed otherwise."""
        member = self.members.get(name)
        if member is None:
            return
        if member.status == MemberStatus.LEAVING:
            member.status = MemberStatus.LEFT
            member.leave_time = now
            self.events.append(SerfEvent("member-leave", name))
            self._now_left(member)
        elif member.status == MemberStatus.ALIVE:
            member.status = MemberStatus.FAILED
            member.leave_time = now
            self.events.append(SerfEvent("member-failed", name))
            self.failed_evicted += self._newest(self._failed, member, self.max_failed_members)

    def node_update(self, name: str) -> None:
        """memberlist reports new meta (tags) for ``name`` (handleNodeUpdate)."""
        if name in self.members:
            self.events.append(SerfEvent("member-update", name))

    # ------------------------------------------------------ our own intents

    def local_join(self, now: float) -> Join:
        """Our join intent at the current time (broadcastJoin): after
        memberlist's join succeeded, or to refute a leave intent about us.
        Applied here; gossip the returned message."""
        msg = Join(ltime=self.clock.time(), node=self.name)
        self.clock.witness(msg.ltime)
        self.join_intent(msg, now)
        return msg

    def local_leave(self, now: float) -> Leave:
        """Our leave intent (Serf.Leave): gossip it (when another member is
        alive), wait for it to go out, then leave memberlist and call
        :meth:`left`. Raises RuntimeError if not alive."""
        if self.state != MemberStatus.ALIVE:
            raise RuntimeError(f"cannot leave: this node is {self.state.name.lower()}")
        self.state = MemberStatus.LEAVING
        msg = Leave(ltime=self.clock.time(), node=self.name)
        self.clock.increment()
        self.leave_intent(msg, now)
        return msg

    def left(self) -> None:
        """memberlist's leave is done: this node has left."""
        self.state = MemberStatus.LEFT

    def force_leave(self, name: str, now: float, prune: bool = False) -> tuple[Leave, LeaveOutcome]:
        """A leave intent on behalf of a failed node (forceLeave), applied here;
        gossip the message if another member is alive."""
        msg = Leave(ltime=self.clock.time(), node=name, prune=prune)
        self.clock.increment()
        return msg, self.leave_intent(msg, now)

    def has_alive_members(self) -> bool:
        """Whether another member is alive (else a leave is not gossiped)."""
        return any(m.status == MemberStatus.ALIVE for n, m in self.members.items() if n != self.name)

    # ------------------------------------------------------------- reaping

    def erase(self, name: str) -> None:
        """Forget a member at once (eraseNode; a prune)."""
        if self.members.pop(name, None) is not None:
            self._left.pop(name, None)
            self._failed.pop(name, None)
            self.events.append(SerfEvent("member-reap", name))

    def reap(self, now: float) -> None:
        """Serf's periodic reap (handleReap, every 15 s by default): failed
        members after the reconnect timeout, left ones after the tombstone
        timeout, buffered intents after theirs."""
        for gone, timeout in ((self._failed, self.reconnect_timeout), (self._left, self.tombstone_timeout)):
            for name, member in list(gone.items()):
                if member.leave_time is not None and now - member.leave_time > timeout:
                    self.erase(name)
        self.intents.reap(now)

    def _now_left(self, member: MemberState) -> None:
        self.left_evicted += self._newest(self._left, member, self.max_left_members)

    def _newest(self, gone: dict[str, MemberState], member: MemberState, bound: int) -> int:
        """``member`` is now the newest of ``gone`` (the failed or the left
        ones); past ``bound`` the oldest (never us) are erased. Returns how
        many were."""
        gone.pop(member.name, None)
        gone[member.name] = member
        erased = 0
        while len(gone) > bound and (oldest := _first_other(gone, self.name)) is not None:
            self.erase(oldest.name)
            erased += 1
        return erased

    def _oldest_gone(self) -> MemberState | None:
        """The member (not us) that failed or left longest ago, if any: the
        first of either kind, the earlier of the two (a failed member that
        then left keeps the time it failed, as in Serf)."""
        failed = _first_other(self._failed, self.name)
        left = _first_other(self._left, self.name)
        if failed is None or left is None:
            return failed or left
        return left if (left.leave_time or 0.0) < (failed.leave_time or 0.0) else failed


def _first_other(gone: dict[str, MemberState], me: str) -> MemberState | None:
    """The first of ``gone`` that is not ``me`` (at most one step past it)."""
    for name, member in gone.items():
        if name != me:
            return member
    return None


class SerfCore:
    """Serf's state machine for one node: members, user events, queries and
    the push/pull user state that carries them between nodes."""

    def __init__(self, name: str, members: SerfMembers | None = None, events: UserEventBuffer | None = None,
                 queries: QueryBuffer | None = None):
        self.members = members or SerfMembers(name)
        self.event_buffer = events or UserEventBuffer()
        self.query_buffer = queries or QueryBuffer()
        #: ignore events older than a join's push/pull: set it during a join
        #: unless replaying (``serf join`` ignores old events, ``-replay`` does not)
        self.event_join_ignore = False

    @classmethod
    def create(cls, name: str) -> SerfCore:
        """A new node's state as serf.Create leaves it: the three clocks at 1
        (no snapshot), the default buffers."""
        core = cls(name)
        for clock in (core.members.clock, core.event_buffer.clock, core.query_buffer.clock):
            clock.increment()
        return core

    def take_events(self) -> list[SerfEvent]:
        return self.members.take_events()

    def user_event(self, msg: UserEvent) -> bool:
        """A user event from the network: True if new (delivered, to gossip on)."""
        if not self.event_buffer.handle(msg):
            return False
        self.members.events.append(SerfEvent("user", msg.name, msg.payload, msg.ltime, msg.cc))
        return True

    def local_state(self) -> SerfPushPull:
        """Our push/pull user state (delegate.go LocalState)."""
        members = self.members
        return SerfPushPull(
            ltime=members.clock.time(),
            status_ltimes={name: m.status_ltime for name, m in members.members.items()},
            left_members=list(members.left_members),
            event_ltime=self.event_buffer.clock.time(),
            events=self.event_buffer.slots(),
            query_ltime=self.query_buffer.clock.time())

    def merge_remote_state(self, state: SerfPushPull, join: bool, now: float) -> bool:
        """A peer's push/pull user state (delegate.go MergeRemoteState): its
        clocks, its members' status times as join or leave intents, its recent
        events. Returns True if it held a leave intent about us that we must
        refute (:meth:`SerfMembers.local_join`)."""
        members = self.members
        for clock, ltime in ((members.clock, state.ltime), (self.event_buffer.clock, state.event_ltime),
                             (self.query_buffer.clock, state.query_ltime)):
            if ltime > 0:
                clock.witness(ltime - 1)
        refute = False
        left = set(state.left_members)
        # a left member's leave came after its last status time (a Go uint64: 2**64 - 1 wraps to 0)
        for name in state.left_members:
            leave = Leave(ltime=(state.status_ltimes.get(name, 0) + 1) & LAMPORT_MASK, node=name)
            outcome = members.leave_intent(leave, now)
            refute = refute or outcome.refute
        for name, ltime in state.status_ltimes.items():
            if name not in left:
                members.join_intent(Join(ltime=ltime, node=name), now)
        if join and self.event_join_ignore:
            self.event_buffer.min_time = max(self.event_buffer.min_time, state.event_ltime)
        for slot in state.events:
            if slot is None:
                continue
            for entry in slot.events:
                self.user_event(UserEvent(ltime=slot.ltime, name=entry.name, payload=entry.payload))
        return refute

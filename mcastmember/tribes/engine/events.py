"""Tribes membership events: ``MemberEvent`` with its kinds and reasons, and
what a waiting one costs (``event_bytes``, the measure the shared event
buffer of ``mcastmember._runtime.events`` bounds)."""

from __future__ import annotations

import enum
import time
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from ..._runtime.events import iso_time

if TYPE_CHECKING:

    from .member import Member

# The events an EventBuffer holds (MemberEvent here, the gossip node's in
# the gossip fronts).
E = TypeVar("E")
# What else an EventQueue carries in order with the events (the threaded
# services' listener registrations).
M = TypeVar("M")


class _Text(str, enum.Enum):
    """Members equal the strings they stand for ("added" == EventKind.ADDED)
    and print as them, on every Python version."""

    __str__ = str.__str__
    # typeshed types str.__format__ unbound as taking one argument; it is
    # the very method str itself uses.
    __format__ = str.__format__  # type: ignore[assignment]


class EventKind(_Text):
    """What happened to a member."""

    ADDED = "added"
    UPDATED = "updated"      # its domain, payload, ports or command changed
    REMOVED = "removed"
    # Past its drop time and being asked directly (verify=True): still a
    # member until the answer.
    SUSPECT = "suspect"


class Reason(_Text):
    """Why a member was removed."""

    SHUTDOWN = "shutdown"    # it said goodbye
    EXPIRED = "expired"      # silent past its drop time (and its probe failed, with verify)
    FILTERED = "filtered"    # it moved to another domain (filter_domain)
    STOPPED = "stopped"      # we stopped: every member leaves our table
    UNLISTED = "unlisted"    # its address left DNS (dns_members)


class MemberEvent:
    """A change in membership: ``kind`` (an EventKind: "added", "updated",
    "removed", "suspect"), the ``member`` as of the change, ``reason`` (a
    Reason for removals, else None), ``previous`` (the member before an
    update, else None) and ``time`` (wall-clock seconds since the epoch of
    the decision). Immutable; equal and hashed by kind, member, reason and
    previous (not time)."""

    __slots__ = ("kind", "member", "reason", "previous", "time")
    kind: EventKind
    member: Member
    reason: Reason | None
    previous: Member | None
    time: float

    def __init__(self, kind: EventKind | str, member: Member, reason: Reason | str | None = None,
                 previous: Member | None = None, time: float | None = None) -> None:
        init = object.__setattr__
        init(self, "kind", EventKind(kind))
        init(self, "member", member)
        init(self, "reason", None if reason is None else Reason(reason))
        init(self, "previous", previous)
        init(self, "time", _now() if time is None else time)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("MemberEvent is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("MemberEvent is immutable")

    def __reduce__(self) -> tuple[type[MemberEvent],
                                  tuple[EventKind, Member, Reason | None, Member | None, float]]:
        return (MemberEvent, (self.kind, self.member, self.reason, self.previous, self.time))

    def _key(self) -> tuple[EventKind, Member, Reason | None, Member | None]:
        return (self.kind, self.member, self.reason, self.previous)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MemberEvent):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        reason = f", {self.reason}" if self.reason else ""
        return f"MemberEvent({self.kind}{reason}, {self.member!r})"

    def to_dict(self) -> dict[str, Any]:
        """The CLI's ``--json`` line: event, reason, member, previous (for
        updates, else null) and time (ISO-8601, UTC, milliseconds)."""
        return {"event": str(self.kind), "reason": None if self.reason is None else str(self.reason),
                "member": self.member.to_dict(),
                "previous": None if self.previous is None else self.previous.to_dict(),
                "time": iso_time(self.time)}


_now = time.time


def event_bytes(event: MemberEvent) -> int:
    """What a waiting event holds that the network chose the size of: the
    payload, domain and command bytes of its member, and of the member
    before for an update. (The rest of an event is a few hundred bytes,
    which the bound in count covers.)"""
    total = 0
    for member in (event.member, event.previous):
        if member is not None:
            total += len(member.payload) + len(member.domain) + len(member.command)
    return total

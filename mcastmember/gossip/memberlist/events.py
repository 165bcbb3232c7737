"""What the gossip engine tells its owner (memberlist's EventDelegate,
Delegate.NotifyMsg and the results of Join), as plain values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from .state import Addr, NodeInfo


@dataclass(frozen=True)
class MemberJoined:
    """A node became alive (NotifyJoin); ourselves at start too."""

    node: NodeInfo


@dataclass(frozen=True)
class MemberUpdated:
    """An alive node's meta changed (NotifyUpdate)."""

    node: NodeInfo


@dataclass(frozen=True)
class MemberLeft:
    """A node left gracefully: a dead message from itself (state LEFT)."""

    node: NodeInfo


@dataclass(frozen=True)
class MemberFailed:
    """A node was declared dead by the failure detector (state DEAD)."""

    node: NodeInfo


@dataclass(frozen=True)
class UserMessage:
    """A user message (type 8) by packet or stream (Delegate.NotifyMsg)."""

    payload: bytes
    addr: Addr


@dataclass(frozen=True)
class RemoteState:
    """The user state of a push/pull (Delegate.MergeRemoteState)."""

    user_state: bytes
    join: bool


@dataclass(frozen=True)
class JoinResult:
    """The end of a join push/pull with one seed."""

    addr: Addr
    ok: bool
    error: str = ""


@dataclass(frozen=True)
class NameConflict:
    """A node claims a known node's name from another address (ConflictDelegate)."""

    existing: NodeInfo
    other: NodeInfo


@dataclass(frozen=True)
class PingCompleted:
    """A direct probe was acked (PingDelegate.NotifyPingComplete); only with
    ``GossipSettings.ping_events``."""

    node: NodeInfo
    rtt: float
    payload: bytes


Event = Union[MemberJoined, MemberUpdated, MemberLeft, MemberFailed, UserMessage, RemoteState, JoinResult,
              NameConflict, PingCompleted]

"""What a :class:`~mcastmember.gossip.serf.node.SerfNode` reports: its members
(:class:`GossipMember`, with their :class:`Tags`) and the events a front
delivers to listeners (:data:`SerfNodeEvent`). Plain frozen records, no
behaviour: the fronts and the CLI read them; the node makes them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Union

from ..memberlist.events import NameConflict
from . import messages
from .layout import MemberStatus
from .retry_join import RetryJoined, RetryJoinFailed

__all__ = ["MEMBER_EVENT_TYPES", "ConflictResolved", "GossipMember", "JoinDone", "KeyResult", "KeyringChanged",
           "LeaveDone", "SerfMemberEvent", "QueryAnswer", "QueryFinished", "QueryReceived", "SerfNodeEvent", "Tags",
           "UserEventReceived", "serf_event_type"]


class Tags(Mapping[str, str]):
    """A member's tags: a read-only mapping, printed and compared as the dict
    it holds, and hashable."""

    __slots__ = ("_tags",)

    def __init__(self, tags: Mapping[str, str] | None = None) -> None:
        self._tags = dict(tags or {})

    def __getitem__(self, key: str) -> str:
        return self._tags[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tags)

    def __len__(self) -> int:
        return len(self._tags)

    def __repr__(self) -> str:
        return repr(self._tags)

    def __hash__(self) -> int:
        return hash(frozenset(self._tags.items()))

    def __reduce__(self) -> tuple[type[Tags], tuple[dict[str, str]]]:
        return (Tags, (self._tags,))


@dataclass(frozen=True)
class GossipMember:
    """A member as Serf lists it (serf.Member): its unique ``name``, the
    ``addr`` and ``port`` it advertises, its ``tags`` (read-only), ``status``
    (alive, leaving, left or failed) and ``vsn``, memberlist's six version
    bytes. Immutable and hashable; ``to_dict()`` is its JSON form."""

    name: str
    addr: str
    port: int
    tags: Mapping[str, str]
    status: MemberStatus
    vsn: bytes = b""

    def __post_init__(self) -> None:
        if not isinstance(self.tags, Tags):
            object.__setattr__(self, "tags", Tags(self.tags))

    @property
    def address(self) -> str:
        """The address as text, as the heartbeat ``Member.address``."""
        return self.addr

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields: ``name``, ``addr``, ``port``, ``tags`` (an
        object) and ``status`` (``alive``, ``leaving``, ``left``, ``failed``)."""
        return {"name": self.name, "addr": self.addr, "port": self.port, "tags": dict(self.tags),
                "status": self.status.name.lower()}


@dataclass(frozen=True)
class SerfMemberEvent:
    """``kind``: joined, updated, left, failed or reaped (Serf's member-join,
    member-update, member-leave, member-failed, member-reap)."""

    kind: str
    member: GossipMember


@dataclass(frozen=True)
class UserEventReceived:
    """A user event, ours included, delivered once (deduplicated by LTime,
    name and payload)."""

    name: str
    payload: bytes
    ltime: int
    coalesce: bool


@dataclass(frozen=True)
class QueryReceived:
    """A query (not one of Serf's internal ones) whose filters select us:
    answer with :meth:`SerfNode.respond` before ``deadline``."""

    query: messages.Query
    deadline: float


@dataclass(frozen=True)
class QueryAnswer:
    """An ack or a response to one of our queries, the first from its node."""

    query_id: int
    from_: str
    payload: bytes
    ack: bool


@dataclass(frozen=True)
class QueryFinished:
    """One of our queries reached its deadline: who acked, who responded."""

    query_id: int
    name: str
    acks: tuple[str, ...]
    responses: tuple[str, ...]


@dataclass(frozen=True)
class KeyResult:
    """The outcome of a key operation (keymanager.go KeyResponse): ``op`` is
    install, use, remove or list; ``ok`` as Serf's: no error and every node
    answered; ``keys`` and ``primary_keys`` count nodes per base64 key."""

    op: str
    num_nodes: int
    num_resp: int
    num_err: int
    messages: dict[str, str]
    keys: dict[str, int]
    primary_keys: dict[str, int]

    @property
    def ok(self) -> bool:
        return self.num_err == 0 and self.num_resp == self.num_nodes


@dataclass(frozen=True)
class JoinDone:
    """The end of :meth:`SerfNode.join`: how many seeds answered, each
    failure's reason."""

    joined: int
    errors: tuple[str, ...]


@dataclass(frozen=True)
class LeaveDone:
    """The end of :meth:`SerfNode.leave`: stop driving the node now."""

    ok: bool
    error: str = ""


@dataclass(frozen=True)
class ConflictResolved:
    """Another node claimed our name; the ``_serf_conflict`` query asked the
    cluster which address it knows for it. In the minority (``majority``
    false) Serf shuts down: the front should stop this node."""

    matching: int
    responses: int

    @property
    def majority(self) -> bool:
        return self.matching >= self.responses // 2 + 1


@dataclass(frozen=True)
class KeyringChanged:
    """A key query changed our keyring (Serf rewrites its keyring file)."""

    keys: tuple[bytes, ...]


#: Serf's names of the member events (serf.EventType), by the kind of a SerfMemberEvent
MEMBER_EVENT_TYPES = {"joined": "member-join", "left": "member-leave", "failed": "member-failed",
                      "updated": "member-update", "reaped": "member-reap"}


def serf_event_type(event: object) -> tuple[str, str] | None:
    """(Serf's type, the user event's or query's name) of an event an
    agent's handlers and streams may be for (member events, user events,
    queries), None for the others (our queries' answers, joins...)."""
    if isinstance(event, SerfMemberEvent):
        return MEMBER_EVENT_TYPES.get(event.kind, ""), ""
    if isinstance(event, UserEventReceived):
        return "user", event.name
    if isinstance(event, QueryReceived):
        return "query", event.query.name
    return None


SerfNodeEvent = Union[SerfMemberEvent, UserEventReceived, QueryReceived, QueryAnswer, QueryFinished, KeyResult,
                      JoinDone, LeaveDone, KeyringChanged, ConflictResolved, NameConflict, RetryJoinFailed,
                      RetryJoined]

"""Serf's messages (serf 0.9.4's ``serf/messages.go``), as dataclasses.

Serf's messages ride in memberlist user messages (type 8, piggybacked on
gossip or sent alone) as a Serf type byte (:class:`SerfMessageType`) and a
msgpack struct. The push/pull user state is the same: type 2, then
:class:`SerfPushPull`. Key-management queries carry a :class:`KeyRequest` (type 7)
as their payload and are answered with a :class:`KeyResponse` (type 8, Go's
``nodeKeyResponse``); the conflict query is answered with a
:class:`SerfMember` (type 6). A relay message (type 9) wraps a query response
for another node to forward. Field names and types follow Go's; Python
attributes use snake_case.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import ClassVar, Union

from ..memberlist import msgpack_go
from ..memberlist.errors import GossipWireError, Truncated
from .codec import (BOOL, BYTES, FLOAT, I64, STR, U8, U16, U32, U64, Field, ListOf, MapOf, Nested, go_bytes,
                    SerfLimits, SerfStruct)
from .layout import PING_VERSION, QUERY_FLAG_ACK, QUERY_FLAG_NO_BROADCAST, FilterType, MemberStatus, SerfMessageType


@dataclass
class Join(SerfStruct):
    """messageJoin: ``node`` joined at Lamport time ``ltime`` (a join intent)."""

    TYPE: ClassVar[SerfMessageType] = SerfMessageType.JOIN
    FIELDS: ClassVar[tuple[Field, ...]] = (("LTime", "ltime", U64), ("Node", "node", STR))
    ltime: int = 0
    node: str = ""


@dataclass
class Leave(SerfStruct):
    """messageLeave: ``node`` leaves at ``ltime`` (a leave intent); ``prune``
    (``serf force-leave -prune``) erases it at once."""

    TYPE: ClassVar[SerfMessageType] = SerfMessageType.LEAVE
    FIELDS: ClassVar[tuple[Field, ...]] = (
        ("LTime", "ltime", U64), ("Node", "node", STR), ("Prune", "prune", BOOL))
    ltime: int = 0
    node: str = ""
    prune: bool = False


@dataclass
class UserEvent(SerfStruct):
    """messageUserEvent: a user event at event time ``ltime``; ``cc``: may be coalesced."""

    TYPE: ClassVar[SerfMessageType] = SerfMessageType.USER_EVENT
    FIELDS: ClassVar[tuple[Field, ...]] = (
        ("LTime", "ltime", U64), ("Name", "name", STR), ("Payload", "payload", BYTES), ("CC", "cc", BOOL))
    ltime: int = 0
    name: str = ""
    payload: bytes = b""
    cc: bool = False


@dataclass
class Query(SerfStruct):
    """messageQuery: a query at query time ``ltime``; answers go to
    addr:port (``source_node``); ``timeout`` is a Go time.Duration (nanoseconds)."""

    TYPE: ClassVar[SerfMessageType] = SerfMessageType.QUERY
    FIELDS: ClassVar[tuple[Field, ...]] = (
        ("LTime", "ltime", U64), ("ID", "id", U32), ("Addr", "addr", BYTES), ("Port", "port", U16),
        ("SourceNode", "source_node", STR), ("Filters", "filters", ListOf(BYTES, "max_list", True)),
        ("Flags", "flags", U32), ("RelayFactor", "relay_factor", U8), ("Timeout", "timeout", I64),
        ("Name", "name", STR), ("Payload", "payload", BYTES))
    ltime: int = 0
    id: int = 0
    addr: bytes = b""
    port: int = 0
    source_node: str = ""
    filters: list[bytes] = field(default_factory=list)
    flags: int = 0
    relay_factor: int = 0
    timeout: int = 0
    name: str = ""
    payload: bytes = b""

    @property
    def ack(self) -> bool:
        """The sender wants an ack from every node the filters select."""
        return bool(self.flags & QUERY_FLAG_ACK)

    @property
    def no_broadcast(self) -> bool:
        """Receivers must not gossip the query further."""
        return bool(self.flags & QUERY_FLAG_NO_BROADCAST)


@dataclass
class QueryResponse(SerfStruct):
    """messageQueryResponse: ``from_``'s answer (or, with the ack flag, its ack)
    to the query at ``ltime`` with this ``id``."""

    TYPE: ClassVar[SerfMessageType] = SerfMessageType.QUERY_RESPONSE
    FIELDS: ClassVar[tuple[Field, ...]] = (
        ("LTime", "ltime", U64), ("ID", "id", U32), ("From", "from_", STR), ("Flags", "flags", U32),
        ("Payload", "payload", BYTES))
    ltime: int = 0
    id: int = 0
    from_: str = ""
    flags: int = 0
    payload: bytes = b""

    @property
    def ack(self) -> bool:
        return bool(self.flags & QUERY_FLAG_ACK)


@dataclass
class EventEntry(SerfStruct):
    """userEvent: one buffered event (name and payload) of a push/pull."""

    FIELDS: ClassVar[tuple[Field, ...]] = (("Name", "name", STR), ("Payload", "payload", BYTES))
    name: str = ""
    payload: bytes = b""


@dataclass
class EventSlot(SerfStruct):
    """userEvents: the buffered events of one event time."""

    FIELDS: ClassVar[tuple[Field, ...]] = (
        ("LTime", "ltime", U64), ("Events", "events", ListOf(Nested(EventEntry), "max_events_per_slot", True)))
    ltime: int = 0
    events: list[EventEntry] = field(default_factory=list)


@dataclass
class SerfPushPull(SerfStruct):
    """messagePushPull: Serf's user state in memberlist's push/pull: the clocks,
    each member's status time, the left members and the recent events (Go
    sends its whole event buffer: one slot per entry, None where empty)."""

    TYPE: ClassVar[SerfMessageType] = SerfMessageType.PUSH_PULL
    FIELDS: ClassVar[tuple[Field, ...]] = (
        ("LTime", "ltime", U64), ("StatusLTimes", "status_ltimes", MapOf(U64, "max_members")),
        ("LeftMembers", "left_members", ListOf(STR, "max_members", False)),
        ("EventLTime", "event_ltime", U64),
        ("Events", "events", ListOf(Nested(EventSlot, optional=True), "max_event_slots", False)),
        ("QueryLTime", "query_ltime", U64))
    ltime: int = 0
    status_ltimes: dict[str, int] = field(default_factory=dict)
    left_members: list[str] = field(default_factory=list)
    event_ltime: int = 0
    events: list[EventSlot | None] = field(default_factory=list)
    query_ltime: int = 0


@dataclass
class KeyRequest(SerfStruct):
    """keyRequest: the payload of the install/use/remove-key queries (after type 7)."""

    TYPE: ClassVar[SerfMessageType] = SerfMessageType.KEY_REQUEST
    FIELDS: ClassVar[tuple[Field, ...]] = (("Key", "key", BYTES),)
    key: bytes = b""


@dataclass
class KeyResponse(SerfStruct):
    """nodeKeyResponse: one node's answer to a key query (after type 8); keys
    and the primary key are base64 text, as Serf sends them."""

    TYPE: ClassVar[SerfMessageType] = SerfMessageType.KEY_RESPONSE
    FIELDS: ClassVar[tuple[Field, ...]] = (
        ("Result", "result", BOOL), ("Message", "message", STR),
        ("Keys", "keys", ListOf(STR, "max_list", True)), ("PrimaryKey", "primary_key", STR))
    result: bool = False
    message: str = ""
    keys: list[str] = field(default_factory=list)
    primary_key: str = ""


@dataclass
class SerfMember(SerfStruct):
    """Serf's Member, as the conflict query's answer carries it (after type 6)."""

    TYPE: ClassVar[SerfMessageType] = SerfMessageType.CONFLICT_RESPONSE
    FIELDS: ClassVar[tuple[Field, ...]] = (
        ("Name", "name", STR), ("Addr", "addr", BYTES), ("Port", "port", U16),
        ("Tags", "tags", MapOf(STR, "max_tags")), ("Status", "status", I64),
        ("ProtocolMin", "protocol_min", U8), ("ProtocolMax", "protocol_max", U8),
        ("ProtocolCur", "protocol_cur", U8), ("DelegateMin", "delegate_min", U8),
        ("DelegateMax", "delegate_max", U8), ("DelegateCur", "delegate_cur", U8))
    name: str = ""
    addr: bytes = b""
    port: int = 0
    tags: dict[str, str] = field(default_factory=dict)
    status: int = MemberStatus.NONE
    protocol_min: int = 0
    protocol_max: int = 0
    protocol_cur: int = 0
    delegate_min: int = 0
    delegate_max: int = 0
    delegate_cur: int = 0


@dataclass
class FilterTag(SerfStruct):
    """filterTag: only nodes whose tag ``tag`` matches the regexp ``expr``."""

    FIELDS: ClassVar[tuple[Field, ...]] = (("Tag", "tag", STR), ("Expr", "expr", STR))
    tag: str = ""
    expr: str = ""


@dataclass
class UDPAddr(SerfStruct):
    """Go's net.UDPAddr as go-msgpack writes it (relay headers)."""

    FIELDS: ClassVar[tuple[Field, ...]] = (("IP", "ip", BYTES), ("Port", "port", I64), ("Zone", "zone", STR))
    ip: bytes = b""
    port: int = 0
    zone: str = ""


@dataclass
class RelayHeader(SerfStruct):
    """relayHeader: where the relaying node must send the message that follows."""

    FIELDS: ClassVar[tuple[Field, ...]] = (
        ("DestAddr", "dest_addr", Nested(UDPAddr)), ("DestName", "dest_name", STR))
    dest_addr: UDPAddr = field(default_factory=UDPAddr)
    dest_name: str = ""


@dataclass
class Coordinate(SerfStruct):
    """Serf's network coordinate (coordinate/coordinate.go), in ping acks."""

    FIELDS: ClassVar[tuple[Field, ...]] = (
        ("Vec", "vec", ListOf(FLOAT, "max_list", False)), ("Error", "error", FLOAT),
        ("Adjustment", "adjustment", FLOAT), ("Height", "height", FLOAT))
    vec: list[float] = field(default_factory=list)
    error: float = 0.0
    adjustment: float = 0.0
    height: float = 0.0


#: The messages memberlist hands Serf (delegate.go NotifyMsg), the push/pull state,
#: and the payloads of the internal queries.
SerfMessage = Union[Join, Leave, UserEvent, Query, QueryResponse, SerfPushPull, KeyRequest, KeyResponse]
_DECODERS: dict[SerfMessageType, type[SerfMessage]] = {
    cls.TYPE: cls for cls in (Join, Leave, UserEvent, Query, QueryResponse, SerfPushPull, KeyRequest, KeyResponse)}


def encode(msg: SerfMessage | SerfMember) -> bytes:
    """A message as Serf's ``encodeMessage()``: its type byte, then the msgpack body."""
    return bytes((msg.TYPE,)) + msg.encode_body()


def _type_of(buf: bytes) -> SerfMessageType:
    if not buf:
        raise Truncated("empty Serf message")
    try:
        return SerfMessageType(buf[0])
    except ValueError:
        raise GossipWireError("bad_type", f"Serf message type {buf[0]} is unknown") from None


def decode(buf: bytes, limits: SerfLimits) -> SerfMessage:
    """One Serf message (type byte + body), as a user message or a push/pull
    user state carries it, or a key query's payload. Relay and conflict
    messages have their own decoders."""
    kind = _type_of(buf)
    cls = _DECODERS.get(kind)
    if cls is None:
        raise GossipWireError("bad_type", f"Serf message type {kind.name} is not a plain message")
    msg, end = cls.decode_body(buf, limits, 1)
    if end != len(buf):
        raise GossipWireError("trailing_bytes", f"{len(buf) - end} trailing bytes after a Serf {kind.name} message")
    return msg if msg is not None else cls()


def decode_conflict_response(buf: bytes, limits: SerfLimits) -> SerfMember | None:
    """The conflict query's answer: the member the responder knows under the
    name asked about, or None (Go encodes a nil *Member)."""
    if _type_of(buf) != SerfMessageType.CONFLICT_RESPONSE:
        raise GossipWireError("bad_type", f"Serf message type {buf[0]} is not a conflict response")
    member, end = SerfMember.decode_body(buf, limits, 1)
    if end != len(buf):
        raise GossipWireError("trailing_bytes", f"{len(buf) - end} trailing bytes after a conflict response")
    return member


def encode_conflict_response(member: SerfMember | None) -> bytes:
    """The conflict query's answer (None: the name is unknown here)."""
    if member is None:
        return bytes((SerfMessageType.CONFLICT_RESPONSE,)) + msgpack_go.pack(None)
    return encode(member)


def encode_relay(dest_ip: bytes, dest_port: int, dest_name: str, msg: bytes) -> bytes:
    """``msg`` (an encoded Serf message) wrapped for a relay to forward to
    dest_ip:dest_port, as query.go relayResponse builds it."""
    header = RelayHeader(dest_addr=UDPAddr(ip=dest_ip, port=dest_port), dest_name=dest_name)
    return bytes((SerfMessageType.RELAY,)) + header.encode_body() + msg


def decode_relay(buf: bytes, limits: SerfLimits) -> tuple[RelayHeader, bytes]:
    """A relay message: its header and the message to forward, as bytes
    (delegate.go forwards them unread)."""
    if _type_of(buf) != SerfMessageType.RELAY:
        raise GossipWireError("bad_type", f"Serf message type {buf[0]} is not a relay")
    header, end = RelayHeader.decode_body(buf, limits, 1)
    if header is None:
        raise GossipWireError("bad_message", "relay header is nil")
    ip = header.dest_addr.ip
    if len(ip) not in (4, 16):
        raise GossipWireError("bad_field", f"relay destination address has {len(ip)} bytes")
    if not 0 < header.dest_addr.port <= 0xFFFF:
        raise GossipWireError("bad_field", f"relay destination port {header.dest_addr.port} is out of range")
    if end >= len(buf):
        raise Truncated("relay message has nothing to forward")
    return header, bytes(buf[end:])


def relay_address(header: RelayHeader) -> tuple[str, int]:
    """The relay's destination as (host, port)."""
    return str(ipaddress.ip_address(header.dest_addr.ip)), header.dest_addr.port


def encode_node_filter(names: list[str]) -> bytes:
    """A query filter naming the nodes that must answer (filterNode)."""
    return bytes((FilterType.NODE,)) + msgpack_go.pack([go_bytes(n) for n in names])


def encode_tag_filter(tag: str, expr: str) -> bytes:
    """A query filter on a tag's value, by regular expression (filterTag)."""
    return bytes((FilterType.TAG,)) + FilterTag(tag=tag, expr=expr).encode_body()


def decode_filter(buf: bytes, limits: SerfLimits) -> list[str] | FilterTag:
    """A query filter: the node names, or a :class:`FilterTag`."""
    if not buf:
        raise Truncated("empty query filter")
    wire = limits.wire()
    if buf[0] == FilterType.NODE:
        value, end = msgpack_go.unpack(buf, wire, 1)
        names = ListOf(STR, "max_list", True).decode([] if value is None else value, "filterNode", limits)
        result: list[str] | FilterTag = list(names)
    elif buf[0] == FilterType.TAG:
        tag, end = FilterTag.decode_body(buf, limits, 1)
        result = tag if tag is not None else FilterTag()
    else:
        raise GossipWireError("bad_type", f"query filter type {buf[0]} is unknown")
    if end != len(buf):
        raise GossipWireError("trailing_bytes", f"{len(buf) - end} trailing bytes after a query filter")
    return result


def encode_ack_payload(coordinate: Coordinate) -> bytes:
    """Serf's ping-ack payload (ping_delegate.go AckPayload): version 1, a coordinate."""
    return bytes((PING_VERSION,)) + coordinate.encode_body()


def decode_ack_payload(buf: bytes, limits: SerfLimits) -> Coordinate:
    """A ping ack's payload from a Serf node: its network coordinate."""
    if not buf:
        raise Truncated("empty ping-ack payload")
    if buf[0] != PING_VERSION:
        raise GossipWireError("bad_version", f"ping-ack payload version {buf[0]} is not {PING_VERSION}")
    coordinate, _end = Coordinate.decode_body(buf, limits, 1)
    return coordinate if coordinate is not None else Coordinate()

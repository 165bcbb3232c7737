"""The agent RPC's bytes: Serf's msgpack IPC as ``serf`` and its clients speak it.

Each request is a msgpack map ``{"Command", "Seq"}`` followed, for the
commands that take one, by a body (a map); each answer is a map ``{"Error",
"Seq"}`` followed, for the commands that return one, by a body. A stream
(``stream``, ``monitor``, a ``query``'s answers) sends more records under the
``Seq`` of the request that opened it. Learnt from Serf's
``cmd/serf/command/agent/ipc*.go`` and ``client/`` (read, never copied); the
shapes here are what the agent writes, byte for byte where the order of a
map's keys shows (its ``Error`` before ``Seq``, members' fields sorted).

No I/O: :class:`RequestReader` takes bytes and gives requests, bounded in
size; the ``*_record`` functions build what goes back.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgpack

from ..serf.events import MEMBER_EVENT_TYPES, GossipMember, QueryReceived, SerfMemberEvent, UserEventReceived
from ..serf.messages import Coordinate

#: the one IPC version Serf's agents and clients speak
IPC_VERSION = 1

#: the commands whose request carries a body after its header
WITH_BODY = frozenset({"handshake", "auth", "event", "force-leave", "join", "members-filtered", "install-key",
                       "use-key", "remove-key", "monitor", "stream", "stop", "tags", "query", "respond",
                       "get-coordinate"})
#: the commands that take none
WITHOUT_BODY = frozenset({"members", "leave", "list-keys", "stats"})
COMMANDS = WITH_BODY | WITHOUT_BODY

# The errors as the agent words them: clients compare some of them (an
# "Authentication required" answer has no body).
UNSUPPORTED_COMMAND = "Unsupported command"
UNSUPPORTED_VERSION = "Unsupported IPC version"
DUPLICATE_HANDSHAKE = "Handshake already performed"
HANDSHAKE_REQUIRED = "Handshake required"
MONITOR_EXISTS = "Monitor already exists"
INVALID_FILTER = "Invalid event filter"
STREAM_EXISTS = "Stream with given sequence exists"
INVALID_QUERY_ID = "No pending queries matching ID"
AUTH_REQUIRED = "Authentication required"
INVALID_AUTH = "Invalid authentication token"
#: beyond the agent: a stream refused at the bound of subscribers
TOO_MANY_STREAMS = "Too many streams"

#: what a stream's filter may name (EventFilter.Valid)
FILTER_EVENTS = frozenset({*MEMBER_EVENT_TYPES.values(), "user", "query", "*"})


class RequestTooBig(Exception):
    """A request (its header and body) longer than the reader's bound."""


class BadRequest(Exception):
    """Bytes that are no request: not msgpack, or no header map."""


@dataclass(frozen=True)
class Request:
    command: str
    seq: int
    body: Mapping[str, Any]


def _text(value: object) -> str:
    """A string field, however the client packed it (str, or raw bytes)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return value if isinstance(value, str) else ""


def _keys(obj: object) -> dict[str, Any]:
    if not isinstance(obj, dict):
        return {}
    return {_text(k): v for k, v in obj.items()}


class RequestReader:
    """Requests from a connection's bytes: ``feed(data)`` then ``next()``
    until None. A request held in the buffer longer than ``max_bytes``
    raises RequestTooBig (msgpack's own bound: no object inside it can be
    longer either); bytes that are not a request raise BadRequest."""

    def __init__(self, max_bytes: int) -> None:
        self._unpacker = msgpack.Unpacker(raw=False, unicode_errors="surrogateescape", strict_map_key=False,
                                          max_buffer_size=max_bytes)
        self._header: Request | None = None
        self.max_bytes = max_bytes

    def feed(self, data: bytes) -> None:
        try:
            self._unpacker.feed(data)
        except msgpack.BufferFull:
            raise RequestTooBig(f"a request over {self.max_bytes} bytes") from None

    def next(self) -> Request | None:
        try:
            if self._header is None:
                header = _keys(self._unpacker.unpack())
                seq = header.get("Seq", 0)
                if "Command" not in header or isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
                    raise BadRequest("a request header is a map of Command and Seq")
                request = Request(_text(header["Command"]), seq, {})
                if request.command not in WITH_BODY:
                    return request
                self._header = request
            body = _keys(self._unpacker.unpack())
        except msgpack.OutOfData:
            return None
        except (ValueError, TypeError, msgpack.UnpackException) as error:
            raise BadRequest(f"not msgpack: {error}") from None
        request, self._header = self._header, None
        return Request(request.command, request.seq, body)


def text_field(body: Mapping[str, Any], key: str) -> str:
    return _text(body.get(key))


def bytes_field(body: Mapping[str, Any], key: str) -> bytes:
    value = body.get(key)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    return bytes(value) if isinstance(value, (bytes, bytearray)) else b""


def int_field(body: Mapping[str, Any], key: str) -> int:
    value = body.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def bool_field(body: Mapping[str, Any], key: str) -> bool:
    return body.get(key) is True


def strings_field(body: Mapping[str, Any], key: str) -> list[str]:
    value = body.get(key)
    return [_text(v) for v in value] if isinstance(value, (list, tuple)) else []


def map_field(body: Mapping[str, Any], key: str) -> dict[str, str]:
    value = body.get(key)
    return {_text(k): _text(v) for k, v in value.items()} if isinstance(value, dict) else {}


# ------------------------------------------------------------------ answers

def pack(obj: object) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)  # type: ignore[no-any-return]


def header(seq: int, error: str = "") -> bytes:
    """An answer's header (the agent writes Error, then Seq)."""
    return pack({"Error": error, "Seq": seq})


def member_record(member: GossipMember) -> dict[str, Any]:
    """A member as the agent lists it: its address as net.IP (4 bytes for
    IPv4), its status as Serf names it, memberlist's version bytes split."""
    vsn = member.vsn.ljust(6, b"\0")
    return {"Addr": packed_ip(member.addr), "DelegateCur": vsn[5], "DelegateMax": vsn[4], "DelegateMin": vsn[3],
            "Name": member.name, "Port": member.port, "ProtocolCur": vsn[2], "ProtocolMax": vsn[1],
            "ProtocolMin": vsn[0], "Status": member.status.name.lower(), "Tags": dict(member.tags)}


def packed_ip(text: str) -> bytes:
    """An address as net.IP carries it (4 bytes for IPv4, 16 for IPv6;
    none for what is no address). inet_pton: a tenth of ipaddress's cost,
    which a 10,000-member answer would feel."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            return socket.inet_pton(family, text)
        except OSError:
            pass
    return b""


def members_body(members: Iterable[GossipMember]) -> dict[str, Any]:
    return {"Members": [member_record(m) for m in members]}


def coordinate_body(coord: Coordinate | None) -> dict[str, Any]:
    """get-coordinate's answer: the coordinate (zeros when unknown) and Ok."""
    if coord is None:
        return {"Coord": {"Adjustment": 0.0, "Error": 0.0, "Height": 0.0, "Vec": None}, "Ok": False}
    return {"Coord": {"Adjustment": float(coord.adjustment), "Error": float(coord.error),
                      "Height": float(coord.height), "Vec": [float(v) for v in coord.vec]}, "Ok": True}


def member_event_record(event: SerfMemberEvent) -> dict[str, Any]:
    return {"Event": MEMBER_EVENT_TYPES[event.kind], "Members": [member_record(event.member)]}


def user_event_record(event: UserEventReceived) -> dict[str, Any]:
    return {"Event": "user", "LTime": event.ltime, "Name": event.name, "Payload": event.payload,
            "Coalesce": event.coalesce}


def query_event_record(event: QueryReceived, query_id: int) -> dict[str, Any]:
    """A query for a stream: ``query_id`` is the connection's own, for ``respond``."""
    query = event.query
    return {"Event": "query", "ID": query_id, "LTime": query.ltime, "Name": query.name, "Payload": query.payload}


def query_record(kind: str, source: str = "", payload: bytes | None = None) -> dict[str, Any]:
    """One of a query's answers streamed back: ``ack``, ``response`` or ``done``."""
    return {"Type": kind, "From": source, "Payload": payload}


# ------------------------------------------------------------------ filters

def parse_event_filter(text: str) -> list[tuple[str, str]] | None:
    """A stream's filter (``member-join,user:deploy``...; empty: every
    event) as (event, name) pairs; None if one names no event."""
    out = []
    for part in (text or "*").split(","):
        event, name = part, ""
        for prefix in ("user:", "query:"):
            if part.startswith(prefix):
                event, name = prefix[:-1], part[len(prefix):]
        if event not in FILTER_EVENTS:
            return None
        out.append((event, name))
    return out


def filter_matches(filters: Iterable[tuple[str, str]], kind: str, name: str) -> bool:
    return any(event == "*" or (event == kind and (not wanted or wanted == name)) for event, wanted in filters)


def handler_entries(specs: Iterable[str]) -> dict[str, str]:
    """``serf info``'s event_handlers section, as the agent fills it: each
    filter of each ``[FILTER=]SCRIPT`` as ``EVENT:NAME`` (``*:`` for every
    event), mapped to its script."""
    out = {}
    for spec in specs:
        text, equals, script = spec.partition("=")
        if not equals:
            text, script = "", spec
        for filt in text.split(",") if text else ["*"]:
            event, _, name = filt.partition(":") if filt.startswith(("user:", "query:")) else (filt, "", "")
            out[f"{event}:{name}"] = script
    return out

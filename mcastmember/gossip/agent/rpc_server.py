"""The agent RPC's decisions, sans-IO: who may connect, what each request
does to the member, and what goes back to whom, within bounds.

An :class:`RpcServer` serves one member (a gossip front, through its public
methods) to many connections. The fronts (``rpc_threads``, ``rpc_aio``) own
the sockets: they ask :meth:`RpcServer.connect` for each accepted one, hand
each connection's bytes to :meth:`RpcConnection.receive`, write what
:meth:`RpcConnection.data` holds, feed the member's events and log lines
in (:meth:`RpcServer.on_events`, :meth:`RpcServer.on_log`) and run the two
requests that wait on the network (:meth:`RpcServer.take_actions`: join,
leave), reporting their ends back. Every bound is here:

- connections: ``max_connections`` in all, half of them per source (an
  IPv6 source by its /64); past its share a newcomer is refused;
- a request (header and body) of at most ``max_request`` bytes, else the
  connection is closed;
- requests in progress per connection, ``max_pending``, with the answers
  not yet written: past it the connection is not read (its sender waits);
- streams (``stream``, ``monitor``, a ``query``'s answers), ``max_streams``
  across connections: past it one is refused;
- records waiting to be written to one connection, ``stream_queue``: past
  it a record is dropped, never queued (a slow subscriber loses records,
  counted in ``rpc_records_dropped``, and holds no more memory).
"""

from __future__ import annotations

import binascii
import base64
import logging
import os
import platform
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, Union

from ..._runtime.listen import ConnectionShares
from ..serf import messages
from ..serf.buffers import TAG_REGEXPS
from ..serf.events import (GossipMember, JoinDone, KeyResult, LeaveDone, QueryAnswer, QueryFinished,
                           QueryReceived, SerfMemberEvent, UserEventReceived, serf_event_type)
from ..serf.layout import INTERNAL_QUERY_PREFIX, MemberStatus
from ..serf.node import SerfNode
from . import rpc_codec as codec
from .rpc_log import LOG_LEVELS, log_line

#: the RPC's counters, in the member's stats() (both fronts, from the start)
COUNTERS = ("rpc_connections_accepted", "rpc_connections_refused", "rpc_requests", "rpc_requests_too_big",
            "rpc_requests_bad", "rpc_auth_failures", "rpc_streams_refused", "rpc_records_dropped",
            "rpc_pending_full")

#: answers waiting to be written past which a connection is not read further
OUT_HIGH_WATER = 1 << 20
#: bytes handed to one write at most
SEND_CHUNK = 256 * 1024
#: query ids a connection's streams handed out that ``respond`` may name, the oldest forgotten first
MAX_RESPONDABLE = 256


@dataclass(frozen=True)
class RpcLimits:
    max_connections: int = 64
    max_request: int = 65536
    max_pending: int = 16
    max_streams: int = 64
    stream_queue: int = 512


@dataclass(frozen=True)
class RpcConfig:
    """Where the RPC listens, its token (empty: none) and its bounds."""

    host: str
    port: int
    auth: str = ""
    limits: RpcLimits = field(default_factory=RpcLimits)
    #: the member's ``event_handlers`` (``[FILTER=]SCRIPT``), which ``serf info`` lists
    event_handlers: tuple[str, ...] = ()


class RpcMember(Protocol):
    """What the server asks of the member: a gossip front's public methods."""

    node: SerfNode

    def members(self) -> list[GossipMember]: ...
    def stats(self) -> dict[str, int]: ...
    def user_event(self, name: str, payload: bytes, coalesce: bool = True) -> None: ...
    def query(self, name: str, payload: bytes, *, filters: Iterable[bytes] = (), request_ack: bool = False,
              timeout: float | None = None, relay_factor: int = 0) -> messages.Query: ...
    def key_operation(self, op: str, key: bytes = b"") -> messages.Query: ...
    def respond(self, received: QueryReceived, payload: bytes) -> None: ...
    def set_tags(self, tags: Mapping[str, str]) -> None: ...
    def cached_coordinate(self, name: str) -> messages.Coordinate | None: ...
    def coordinate(self) -> messages.Coordinate: ...
    def force_leave(self, name: str, prune: bool = False) -> None: ...
    def add_listener(self, listener: Callable[[Any], object], replay: bool = False) -> None: ...
    def remove_listener(self, listener: Callable[[Any], object]) -> None: ...


class ThreadMember(RpcMember, Protocol):
    """A threaded front (SerfService): its join, leave and stop wait."""

    def join(self, seeds: Iterable[tuple[str, int]], timeout: float = 10.0,
             ignore_old: bool | None = None) -> JoinDone: ...
    def leave(self, timeout: float = 15.0) -> LeaveDone: ...
    def stop(self, timeout: float | None = 5.0) -> None: ...


class AsyncMember(RpcMember, Protocol):
    """An asyncio front (AsyncSerfService): its join, leave and stop are awaited."""

    async def join(self, seeds: Iterable[tuple[str, int]], timeout: float = 10.0,
                   ignore_old: bool | None = None) -> JoinDone: ...
    async def leave(self, timeout: float = 15.0) -> LeaveDone: ...
    async def stop(self) -> None: ...


@dataclass(frozen=True)
class JoinAction:
    """Join ``seeds`` (``ADDR[:PORT]`` texts) for request ``seq`` of ``conn``."""

    conn: RpcConnection
    seq: int
    seeds: tuple[str, ...]
    replay: bool


@dataclass(frozen=True)
class LeaveAction:
    """Leave, answer ``seq`` of ``conn``, then stop the member (as the agent shuts down)."""

    conn: RpcConnection
    seq: int


Action = Union[JoinAction, LeaveAction]


class RpcConnection:
    """One client's connection: its handshake and auth, its requests in
    order, its streams, and the bytes waiting to be written to it."""

    def __init__(self, server: RpcServer, source: str, now: float) -> None:
        self.server = server
        self.source = source
        #: when it was accepted (ConnectionShares closes the idlest first)
        self.heard = now
        self.reader = codec.RequestReader(server.limits.max_request)
        self.version = 0
        self.authed = not server.auth
        #: why it must be closed once what is queued is written (None: open)
        self.closing: str | None = None
        self.streams: dict[int, list[tuple[str, str]]] = {}
        self.monitor: tuple[int, int] | None = None          # (seq, least Python level)
        self.respondable: dict[int, QueryReceived] = {}
        self._query_ids = 0
        self.pending = 0
        self._out = bytearray()
        #: (end offset in ``_out``'s running total, a stream record?) of what is queued
        self._marks: deque[tuple[int, bool]] = deque()
        self._written = 0
        self._queued = 0
        self.records_queued = 0

    # -- what the front does
    def receive(self, data: bytes) -> None:
        """Bytes read from the socket: every whole request handled, as far as the bounds allow."""
        if self.closing is not None:
            return
        try:
            self.reader.feed(data)
        except codec.RequestTooBig as error:
            self.server.counts["rpc_requests_too_big"] += 1
            self.close(str(error))
            return
        self.resume()

    def resume(self) -> None:
        """Handle the requests read but waiting (the bounds allowed none more before)."""
        while self.closing is None and self.readable():
            try:
                request = self.reader.next()
            except codec.BadRequest as error:
                self.server.counts["rpc_requests_bad"] += 1
                self.close(str(error))
                return
            if request is None:
                return
            self.server.counts["rpc_requests"] += 1
            self.server.handle(self, request)

    def readable(self) -> bool:
        """Whether more requests may be taken (else leave the socket unread)."""
        return (self.closing is None and self.pending < self.server.limits.max_pending
                and len(self._out) < OUT_HIGH_WATER)

    def data(self) -> bytes:
        """What is waiting to be written, its first SEND_CHUNK bytes at most
        (a copy per write: never all of a large answer each time)."""
        return bytes(self._out[:SEND_CHUNK])

    def wants_write(self) -> bool:
        return bool(self._out)

    def sent(self, count: int) -> None:
        """``count`` bytes of :meth:`data` were written."""
        del self._out[:count]
        self._written += count
        while self._marks and self._marks[0][0] <= self._written:
            _end, record = self._marks.popleft()
            self.records_queued -= record
        self.resume()

    @property
    def done(self) -> bool:
        """Closing, and everything it had to say was written: close it now."""
        return self.closing is not None and not self._out

    def close(self, reason: str) -> None:
        """Close once what is queued is written; its streams end now."""
        if self.closing is None:
            self.closing = reason or "closed"
            self.server.forget_streams(self)

    # -- what the server writes
    def answer(self, seq: int, error: str = "", body: object = None, has_body: bool = False) -> None:
        frame = codec.header(seq, error) + (codec.pack(body) if has_body or body is not None else b"")
        self._queue(frame, record=False)

    def record(self, seq: int, body: object) -> bool:
        """A stream's record, unless the connection already holds
        ``stream_queue`` of them unwritten (then dropped and counted)."""
        if self.closing is not None:
            return False
        if self.records_queued >= self.server.limits.stream_queue:
            self.server.counts["rpc_records_dropped"] += 1
            return False
        self._queue(codec.header(seq) + codec.pack(body), record=True)
        return True

    def _queue(self, frame: bytes, record: bool) -> None:
        self._out += frame
        self._queued += len(frame)
        self._marks.append((self._queued, record))
        self.records_queued += record

    def next_query_id(self, event: QueryReceived) -> int:
        self._query_ids += 1
        self.respondable[self._query_ids] = event
        while len(self.respondable) > MAX_RESPONDABLE:
            del self.respondable[next(iter(self.respondable))]
        return self._query_ids


class RpcServer:
    """The RPC of one member (see the module): ``member`` is its front."""

    def __init__(self, member: RpcMember, config: RpcConfig,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.member = member
        self.auth = config.auth
        self.event_handlers = codec.handler_entries(config.event_handlers)
        self.limits = config.limits
        self.counts: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        share = max(1, config.limits.max_connections // 2)
        self.shares = ConnectionShares(config.limits.max_connections, share, share)
        self.conns: list[RpcConnection] = []
        self._actions: deque[Action] = deque()
        self._key_ops: deque[tuple[RpcConnection, int, str]] = deque()
        self._queries: dict[int, tuple[RpcConnection, int]] = {}
        self._clock = clock
        self._handlers: dict[str, Callable[[RpcConnection, int, Mapping[str, Any]], None]] = {
            "handshake": self._handshake, "auth": self._auth, "members": self._members,
            "members-filtered": self._members_filtered, "event": self._event, "force-leave": self._force_leave,
            "join": self._join, "leave": self._leave, "tags": self._tags, "stats": self._stats,
            "get-coordinate": self._coordinate, "install-key": self._key, "use-key": self._key,
            "remove-key": self._key, "list-keys": self._key, "stream": self._stream, "monitor": self._monitor,
            "stop": self._stop, "query": self._query, "respond": self._respond}
        self._command = ""

    # -- connections
    def connect(self, source: str) -> tuple[RpcConnection | None, RpcConnection | None]:
        """A connection accepted from ``source``: (the new connection, or None
        when refused; a connection to close first to make room, or None)."""
        admitted, idlest = self.shares.place(source, self.conns)
        if not admitted:
            self.counts["rpc_connections_refused"] += 1
            return None, None
        if idlest is not None:
            self.disconnect(idlest)
        conn = RpcConnection(self, source, self._clock())
        self.conns.append(conn)
        self.shares.add(source)
        self.counts["rpc_connections_accepted"] += 1
        return conn, idlest

    def disconnect(self, conn: RpcConnection) -> None:
        """The connection is closed (either side): forget it and its streams."""
        if conn in self.conns:
            self.conns.remove(conn)
            self.shares.remove(conn.source)
        conn.close("closed")

    def take_actions(self) -> list[Action]:
        out = list(self._actions)
        self._actions.clear()
        return out

    def stats(self) -> dict[str, int]:
        out = dict(self.counts)
        out["rpc_connections_open"] = len(self.conns)
        out["rpc_streams_open"] = self.streams_open()
        return out

    def streams_open(self) -> int:
        return len(self._queries) + sum(len(c.streams) + (c.monitor is not None) for c in self.conns)

    # -- what the member reports
    def on_events(self, events: Iterable[object]) -> None:
        """The member's events: to the streams that want them, to the
        queries and key operations asked here."""
        for event in events:
            if isinstance(event, QueryAnswer):
                self._query_record(event.query_id, codec.query_record("ack" if event.ack else "response",
                                                                      event.from_, None if event.ack else
                                                                      event.payload))
            elif isinstance(event, QueryFinished):
                self._query_record(event.query_id, codec.query_record("done"))
                self._queries.pop(event.query_id, None)
            elif isinstance(event, KeyResult):
                self._key_result(event)
            else:
                if isinstance(event, SerfMemberEvent):
                    self._member_line(event)
                self._stream_event(event)

    def on_log(self, levelno: int, line: str) -> None:
        """A log line: to every monitor at its level or below."""
        for conn in self.conns:
            if conn.monitor is not None and levelno >= conn.monitor[1]:
                conn.record(conn.monitor[0], {"Log": line})

    def wants_logs(self) -> int | None:
        """The least level a monitor asks for (None: no monitor)."""
        return min((c.monitor[1] for c in self.conns if c.monitor is not None), default=None)

    def join_done(self, action: JoinAction, joined: int, error: str) -> None:
        self._finish(action.conn, action.seq, error, {"Num": joined})

    def leave_done(self, action: LeaveAction, error: str) -> None:
        self._finish(action.conn, action.seq, error, None)

    def forget_streams(self, conn: RpcConnection) -> None:
        conn.streams.clear()
        conn.monitor = None
        for query_id, (owner, _seq) in list(self._queries.items()):
            if owner is conn:
                del self._queries[query_id]
        self._key_ops = deque(op for op in self._key_ops if op[0] is not conn)

    # -- requests
    def handle(self, conn: RpcConnection, request: codec.Request) -> None:
        command, seq = request.command, request.seq
        if command != "handshake" and conn.version == 0:
            conn.answer(seq, codec.HANDSHAKE_REQUIRED)
            conn.close(codec.HANDSHAKE_REQUIRED)
            return
        if not conn.authed and command not in ("handshake", "auth"):
            self.counts["rpc_auth_failures"] += 1
            conn.answer(seq, codec.AUTH_REQUIRED)
            return
        handler = self._handlers.get(command)
        if handler is None:
            self.counts["rpc_requests_bad"] += 1
            conn.answer(seq, codec.UNSUPPORTED_COMMAND)
            conn.close(f"command {command!r} not recognized")
            return
        self._command = command
        handler(conn, seq, request.body)

    def _handshake(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        version = codec.int_field(body, "Version")
        if version != codec.IPC_VERSION:
            conn.answer(seq, codec.UNSUPPORTED_VERSION)
        elif conn.version:
            conn.answer(seq, codec.DUPLICATE_HANDSHAKE)
        else:
            conn.version = version
            conn.answer(seq)

    def _auth(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        if self.auth and codec.text_field(body, "AuthKey") == self.auth:
            conn.authed = True
            conn.answer(seq)
        elif not self.auth:
            conn.answer(seq)
        else:
            self.counts["rpc_auth_failures"] += 1
            conn.answer(seq, codec.INVALID_AUTH)

    def _members(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        conn.answer(seq, body=codec.members_body(self.member.members()))

    def _members_filtered(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        tags = codec.map_field(body, "Tags")
        status, name = codec.text_field(body, "Status"), codec.text_field(body, "Name")
        chosen = [m for m in self.member.members() if _selected(m, tags, status, name)]
        conn.answer(seq, body=codec.members_body(chosen))

    def _event(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        error = self._attempt(lambda: self.member.user_event(codec.text_field(body, "Name"),
                                                             codec.bytes_field(body, "Payload"),
                                                             codec.bool_field(body, "Coalesce")))
        conn.answer(seq, error)

    def _force_leave(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        node = codec.text_field(body, "Node")
        conn.answer(seq, self._attempt(lambda: self.member.force_leave(node, codec.bool_field(body, "Prune"))))

    def _join(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        self._hold(conn)
        self._actions.append(JoinAction(conn, seq, tuple(codec.strings_field(body, "Existing")),
                                        codec.bool_field(body, "Replay")))

    def _leave(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        self._hold(conn)
        self._actions.append(LeaveAction(conn, seq))

    def _tags(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        deleted = set(codec.strings_field(body, "DeleteTags"))
        tags = {k: v for k, v in self.member.node.tags.items() if k not in deleted}
        tags.update(codec.map_field(body, "Tags"))
        conn.answer(seq, self._attempt(lambda: self.member.set_tags(tags)))

    def _stats(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        conn.answer(seq, body=agent_stats(self.member, self.event_handlers))

    def _coordinate(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        name = codec.text_field(body, "Node")
        coord = self.member.cached_coordinate(name)
        if coord is None and name == self.member.node.name and self.member.node.coordinates is not None:
            coord = self.member.coordinate()        # the agent's cache holds its own from the start
        conn.answer(seq, body=codec.coordinate_body(coord))

    def _key(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        op = self._command.partition("-")[0]
        raw = b""
        if op != "list":
            try:
                raw = base64.b64decode(codec.text_field(body, "Key"), validate=True)
            except (binascii.Error, ValueError) as bad:
                conn.answer(seq, f"illegal base64 data: {bad}", _key_body(None, op))
                return
        refused = self._attempt(lambda: self.member.key_operation(op, raw))
        if refused:
            conn.answer(seq, refused, _key_body(None, op))
            return
        self._hold(conn)
        self._key_ops.append((conn, seq, op))

    def _stream(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        filters = codec.parse_event_filter(codec.text_field(body, "Type"))
        if filters is None:
            conn.answer(seq, codec.INVALID_FILTER)
        elif seq in conn.streams:
            conn.answer(seq, codec.STREAM_EXISTS)
        elif self._refuse_stream(conn, seq):
            return
        else:
            conn.streams[seq] = filters
            conn.answer(seq)

    def _monitor(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        level = codec.text_field(body, "LogLevel").upper()
        if level not in LOG_LEVELS:
            conn.answer(seq, f"Unknown log level: {level}")
        elif conn.monitor is not None:
            conn.answer(seq, codec.MONITOR_EXISTS)
        elif self._refuse_stream(conn, seq):
            return
        else:
            conn.monitor = (seq, LOG_LEVELS[level])
            conn.answer(seq)

    def _stop(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        stopped = codec.int_field(body, "Stop")
        if conn.monitor is not None and conn.monitor[0] == stopped:
            conn.monitor = None
        conn.streams.pop(stopped, None)
        conn.answer(seq)

    def _query(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        name, payload = codec.text_field(body, "Name"), codec.bytes_field(body, "Payload")
        if name.startswith(INTERNAL_QUERY_PREFIX) and (name != INTERNAL_QUERY_PREFIX + "ping" or payload):
            conn.answer(seq, f"Queries cannot contain the '{INTERNAL_QUERY_PREFIX}' prefix")
            return
        if self._refuse_stream(conn, seq):
            return
        filters = []
        nodes = codec.strings_field(body, "FilterNodes")
        if nodes:
            filters.append(messages.encode_node_filter(nodes))
        for tag, expr in codec.map_field(body, "FilterTags").items():
            filters.append(messages.encode_tag_filter(tag, expr))
        timeout_ns = codec.int_field(body, "Timeout")
        started: list[messages.Query] = []
        error = self._attempt(lambda: started.append(self.member.query(
            name, payload, filters=filters, request_ack=codec.bool_field(body, "RequestAck"),
            timeout=timeout_ns / 1e9 if timeout_ns > 0 else None,
            relay_factor=min(255, codec.int_field(body, "RelayFactor")))))
        conn.answer(seq, error)
        if started:
            self._queries[started[0].id] = (conn, seq)

    def _respond(self, conn: RpcConnection, seq: int, body: Mapping[str, Any]) -> None:
        received = conn.respondable.get(codec.int_field(body, "ID"))
        if received is None:
            conn.answer(seq, codec.INVALID_QUERY_ID)
            return
        conn.answer(seq, self._attempt(lambda: self.member.respond(received, codec.bytes_field(body, "Payload"))))

    # -- inside
    def _hold(self, conn: RpcConnection) -> None:
        """One more request of ``conn`` in progress; at the bound, its
        connection is read no further until one ends (counted)."""
        conn.pending += 1
        if conn.pending == self.limits.max_pending:
            self.counts["rpc_pending_full"] += 1

    def _refuse_stream(self, conn: RpcConnection, seq: int) -> bool:
        if self.streams_open() < self.limits.max_streams:
            return False
        self.counts["rpc_streams_refused"] += 1
        conn.answer(seq, codec.TOO_MANY_STREAMS)
        return True

    @staticmethod
    def _attempt(call: Callable[[], object]) -> str:
        """"" if ``call`` went through, else what it raised, as the agent's error text."""
        try:
            call()
        except (ValueError, RuntimeError, OSError) as error:
            return str(error)
        return ""

    def _finish(self, conn: RpcConnection, seq: int, error: str, body: object) -> None:
        conn.pending -= 1
        if conn in self.conns:
            conn.answer(seq, error, body, has_body=body is not None)
            conn.resume()

    def _key_result(self, result: KeyResult) -> None:
        for index, (conn, seq, op) in enumerate(self._key_ops):
            if op == result.op:
                del self._key_ops[index]
                error = ""
                if result.num_err:
                    error = f"{result.num_err}/{result.num_nodes} nodes reported failure"
                elif result.num_resp != result.num_nodes:
                    error = f"{result.num_resp}/{result.num_nodes} nodes reported success"
                self._finish(conn, seq, error, _key_body(result, op))
                return

    def _query_record(self, query_id: int, record: dict[str, Any]) -> None:
        owner = self._queries.get(query_id)
        if owner is not None:
            owner[0].record(owner[1], record)

    def _stream_event(self, event: object) -> None:
        kind = serf_event_type(event)
        if kind is None:
            return
        for conn in self.conns:
            for seq, filters in conn.streams.items():
                if not codec.filter_matches(filters, *kind):
                    continue
                if isinstance(event, QueryReceived):
                    conn.record(seq, codec.query_event_record(event, conn.next_query_id(event)))
                elif isinstance(event, SerfMemberEvent):
                    conn.record(seq, codec.member_event_record(event))
                elif isinstance(event, UserEventReceived):
                    conn.record(seq, codec.user_event_record(event))

    def _member_line(self, event: SerfMemberEvent) -> None:
        """The agent's log line for a member event, to the monitors."""
        if self.wants_logs() is None:
            return
        kind = {"joined": "Join", "left": "Leave", "failed": "Failed", "updated": "Update",
                "reaped": "Reap"}.get(event.kind, event.kind)
        self.on_log(logging.INFO, log_line(logging.INFO, f"serf: EventMember{kind}: {event.member.name} "
                                                         f"{event.member.addr}"))


def _key_body(result: KeyResult | None, op: str) -> dict[str, Any]:
    if result is None:
        return {"Messages": {}, "Keys": {}, "NumNodes": 0, "NumErr": 0, "NumResp": 0}
    return {"Messages": dict(result.messages), "Keys": dict(result.keys) if op == "list" else {},
            "NumNodes": result.num_nodes, "NumErr": result.num_err, "NumResp": result.num_resp}


def _selected(member: GossipMember, tags: Mapping[str, str], status: str, name: str) -> bool:
    """members-filtered: each pattern anchored at both ends, as the agent
    wraps them (Go's syntax, by RE2)."""
    for tag, expr in tags.items():
        if not TAG_REGEXPS.search(f"^{expr}$", member.tags.get(tag, "")):
            return False
    if status and not TAG_REGEXPS.search(f"^{status}$", member.status.name.lower()):
        return False
    return not name or TAG_REGEXPS.search(f"^{name}$", member.name)


def agent_stats(member: RpcMember, event_handlers: Mapping[str, str] | None = None
                ) -> dict[str, dict[str, str]]:
    """``serf info``'s sections, as the agent fills them."""
    node = member.node
    stats = member.stats()
    listed = [m.status for m in member.members()]
    keyring = node.engine.keyring
    serf = {"members": str(len(listed)), "failed": str(listed.count(MemberStatus.FAILED)),
            "left": str(listed.count(MemberStatus.LEFT)), "health_score": str(stats.get("health_score", 0)),
            "member_time": str(node.core.members.clock.time()), "event_time": str(node.core.event_buffer.clock.time()),
            "query_time": str(node.core.query_buffer.clock.time()), "intent_queue": str(stats.get("intents_queued", 0)),
            "event_queue": str(stats.get("events_queued", 0)), "query_queue": str(stats.get("queries_queued", 0)),
            "encrypted": "true" if keyring is not None and keyring.keys else "false"}
    if node.coordinates is not None:
        serf["coordinate_resets"] = str(stats.get("coordinate_resets", 0))
    runtime = {"os": sys.platform, "arch": platform.machine(), "version": f"python{platform.python_version()}",
               "max_procs": str(os.cpu_count() or 1), "goroutines": str(threading.active_count()),
               "cpu_count": str(os.cpu_count() or 1)}
    return {"agent": {"name": node.name}, "runtime": runtime, "serf": serf, "tags": node.tags,
            "event_handlers": dict(event_handlers or {})}


__all__ = ["COUNTERS", "Action", "AsyncMember", "JoinAction", "LeaveAction", "RpcConfig", "RpcConnection",
           "RpcLimits", "RpcMember", "RpcServer", "ThreadMember", "agent_stats"]

"""TCP streams of the gossip engine: push/pull (also the join), answering the
streams others open to us, merging a remote state, and the TCP ping's reply.

memberlist 0.2.2, read, never copied: net.go handleConn, sendLocalState,
readRemoteState, mergeRemoteState, verifyProtocol; state.go pushPull.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable

from . import framing, messages
from .core import EngineCore, OutgoingStream, Probe, StreamRecord
from .errors import GossipWireError, Truncated
from .events import JoinResult, RemoteState, UserMessage
from .layout import MessageType, NodeState
from .state import Addr

#: a table node's push/pull fields, in messages.NodeFields order
_push_fields = operator.attrgetter("name", "addr", "port", "meta", "incarnation", "state", "vsn")


class StreamSync(EngineCore):
    """The stream half of :class:`~mcastmember.gossip.engine.GossipEngine`."""

    # -------------------------------------------------------------- streams

    def _stream_bytes(self, msg: bytes) -> bytes:
        """rawSendMsgStream: compression always when enabled, encryption, label."""
        s = self.settings
        return framing.encode_stream(msg, compress=s.enable_compression,
                                     keyring=self.keyring if s.gossip_verify_outgoing else None,
                                     encryption_version=s.encryption_version, label=s.label)

    def _local_state(self, join: bool) -> bytes:
        user = self.user_state(join) if self.user_state is not None else b""
        return self._stream_bytes(messages.encode_push_pull_fields(join, map(_push_fields, self.table.nodes), user))

    def _open_push_pull(self, addr: Addr, join: bool, now: float) -> bool:
        opened = self._open_stream(addr, "push_pull", self._local_state(join), now + self.settings.tcp_timeout,
                                   join=join)
        if not opened and join:
            self._event(JoinResult(addr, False, "too many streams open"))
        return opened

    def _open_stream(self, addr: Addr, kind: str, data: bytes, deadline: float, *, join: bool = False,
                     seq: int = 0) -> bool:
        if len(self._streams) >= self.settings.max_streams:
            self._counts["streams_refused"] += 1
            return False
        self._stream_id += 1
        self._streams[self._stream_id] = StreamRecord(self._stream_id, addr, kind, deadline, join, seq)
        self._to_open.append(OutgoingStream(self._stream_id, addr, data, deadline))
        self._counts["streams_opened"] += 1
        return True

    def _decode_stream(self, data: bytes) -> tuple[framing.StreamMessage, int] | None:
        """One stream message, None if incomplete; GossipWireError if bad."""
        s = self.settings
        try:
            return framing.decode_stream(data, s.limits, keys=self.keyring.keys if self.keyring else (),
                                         label=s.label, verify_incoming=s.gossip_verify_incoming)
        except Truncated:
            if len(data) > s.limits.max_stream:
                raise GossipWireError("too_large", "stream message over the size limit") from None
            return None

    def receive_stream(self, data: bytes, addr: Addr, now: float) -> bytes | None:
        """A stream someone opened to us (handleConn), every byte read so far.

        None: incomplete, call again with more (if the peer closed, drop it).
        bytes: write them back (maybe none) and close.
        """
        try:
            decoded = self._decode_stream(data)
        except GossipWireError as exc:
            self._counts["streams_bad"] += 1
            self._bad(exc.reason)
            return self._stream_bytes(messages.encode(messages.Err(error=str(exc))))
        if decoded is None:
            return None
        self._counts["streams_received"] += 1
        (kind, msg), _used = decoded
        if isinstance(msg, messages.PushPull):
            reply = self._local_state(msg.join)
            self._merge_remote(msg, msg.join, now)
            return reply
        if kind == MessageType.USER and isinstance(msg, bytes):
            self._counts["user_messages_received"] += 1
            self._event(UserMessage(msg, addr))
        elif isinstance(msg, messages.Ping) and (not msg.node or msg.node == self.name):
            return self._stream_bytes(messages.encode(messages.Ack(seq_no=msg.seq_no)))
        return b""

    def stream_response(self, stream_id: int, data: bytes, now: float) -> bool:
        """The reply read so far on one of our streams; True when it is
        complete (or bad): close the connection."""
        stream = self._streams.get(stream_id)
        if stream is None:
            return True
        try:
            decoded = self._decode_stream(data)
        except GossipWireError as exc:
            self._bad(exc.reason)
            del self._streams[stream_id]
            self._stream_ended(stream, str(exc), now)
            return True
        if decoded is None:
            return False
        del self._streams[stream_id]
        (kind, msg), _used = decoded
        error = ""
        if stream.kind == "ping":
            if isinstance(msg, messages.Ack) and msg.seq_no == stream.seq:
                probe = self._acks.get(stream.seq)
                if isinstance(probe, Probe):
                    probe.tcp_ok = True
                return True
            error = "no ack"
        elif isinstance(msg, messages.Err):
            error = f"remote error: {msg.error}"
        elif not isinstance(msg, messages.PushPull):
            error = f"unexpected message type {kind}"
        else:
            error = self._merge_remote(msg, stream.join, now)
            if not error:
                self._counts["push_pulls"] += 1
                if stream.join:
                    self._event(JoinResult(stream.addr, True))
                return True
        self._stream_ended(stream, error, now)
        return True

    def stream_failed(self, stream_id: int, now: float, error: str = "connection failed") -> None:
        """One of our streams could not connect or broke before its reply."""
        stream = self._streams.pop(stream_id, None)
        if stream is not None:
            self._stream_ended(stream, error, now)

    def _stream_ended(self, stream: StreamRecord, error: str, now: float) -> None:
        self._counts["streams_failed"] += 1
        if stream.kind == "push_pull" and stream.join:
            self._event(JoinResult(stream.addr, False, error))

    def _merge_remote(self, remote: messages.PushPull, join: bool, now: float) -> str:
        """mergeRemoteState: '' when merged, else why not."""
        error = self._verify_protocol(remote.nodes)
        if error:
            self._counts["push_pulls_refused"] += 1
            return error
        plain_port = self.settings.protocol_version < 2
        for r in remote.nodes:
            port = self._port if plain_port or not r.port else r.port
            if r.state == NodeState.ALIVE:
                # what the hot path drops unread, dropped here too: a known
                # node's old news (a whole unchanged table, mostly)
                if self._alive_ignored(r.name, r.incarnation, r.addr, r.port, r.vsn):
                    continue
                self._alive_node(messages.Alive(incarnation=r.incarnation, node=r.name, addr=r.addr, port=port,
                                                meta=r.meta, vsn=r.vsn), now, bootstrap=False)
            elif r.state == NodeState.LEFT:
                self._dead_node(messages.Dead(incarnation=r.incarnation, node=r.name, from_=r.name), now)
            elif r.state in (NodeState.DEAD, NodeState.SUSPECT):
                # A node another thinks dead is only suspected here.
                self._suspect_node(messages.Suspect(incarnation=r.incarnation, node=r.name, from_=self.name), now)
        if remote.user_state:
            self._event(RemoteState(remote.user_state, join))
        return ""

    def _alive_ignored(self, name: str, inc: int, addr: bytes, port: int, vsn: bytes) -> bool:
        raise NotImplementedError     # written in hotpath.py

    def _verify_protocol(self, remote: list[messages.PushNodeState]) -> str:
        """verifyProtocol: every node's current versions within what every
        alive node understands; '' if so. The Vsn arrays are few (most
        nodes share one): each distinct one is checked, and the nodes are
        listed in order only to name the first one out of range."""
        nodes = self.table.nodes
        ranges = {r.vsn for r in remote if r.state == NodeState.ALIVE and r.vsn}
        ranges.update([n.vsn for n in nodes if n.state == NodeState.ALIVE])
        span = _versions_span(ranges)
        vsns = {r.vsn for r in remote}
        vsns.update([n.vsn for n in nodes])
        if not any(_out_of_span(span, "", vsn) for vsn in vsns):
            return ""
        return protocol_mismatch(ranges, [(r.name, r.vsn) for r in remote] + [(n.name, n.vsn) for n in nodes])


Span = tuple[int, int, int, int]


def _versions_span(ranges: Iterable[bytes]) -> Span:
    """The protocol and delegate versions (pmin, pmax, dmin, dmax) every
    Vsn array of ``ranges`` understands."""
    spans = {(v[0], v[1], v[3], v[4]) for v in ranges}
    return (max((r[0] for r in spans), default=0), min((r[1] for r in spans), default=255),
            max((r[2] for r in spans), default=0), min((r[3] for r in spans), default=255))


def _out_of_span(span: Span, name: str, vsn: bytes) -> str:
    """Why node ``name``'s current versions fall outside ``span`` ('' if they do not)."""
    pmin, pmax, dmin, dmax = span
    pcur, dcur = (vsn[2], vsn[5]) if vsn else (0, 0)
    if not pmin <= pcur <= pmax:
        return f"node {name!r} protocol version ({pcur}) is incompatible: [{pmin}, {pmax}]"
    if not dmin <= dcur <= dmax:
        return f"node {name!r} delegate protocol version ({dcur}) is incompatible: [{dmin}, {dmax}]"
    return ""


def protocol_mismatch(ranges: Iterable[bytes], current: Iterable[tuple[str, bytes]]) -> str:
    """memberlist's verifyProtocol on Vsn arrays: the protocol and delegate
    ranges every node of ``ranges`` understands, and the first (name, vsn)
    of ``current`` whose versions fall outside them ('' if none does)."""
    span = _versions_span(ranges)
    for name, vsn in current:
        error = _out_of_span(span, name, vsn)
        if error:
            return error
    return ""

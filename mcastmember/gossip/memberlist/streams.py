"""TCP streams of the gossip engine: push/pull (also the join), answering the
streams others open to us, merging a remote state, and the TCP ping's reply.

memberlist 0.2.2, read, never copied: net.go handleConn, sendLocalState,
readRemoteState, mergeRemoteState, verifyProtocol; state.go pushPull.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterable
from dataclasses import dataclass

from . import framing
from . import messages
from .core import EngineState, OutgoingStream, Probe, StreamRecord
from .errors import GossipWireError, Truncated
from .events import JoinResult, RemoteState, UserMessage
from .layout import MessageType, NodeState
from .limits import Limits
from .rules import NodeRules
from .state import Addr

#: a table node's push/pull fields, in messages.NodeFields order
_push_fields = operator.attrgetter("name", "addr", "port", "meta", "incarnation", "state", "vsn")

#: the work one call may do on a stream when the engine is told to bound it
#: (``stream_turn_size``; the fronts do): node states decoded or merged
#: (LZW output counted framing.LZW_BYTES_PER_NODE bytes to one), about 10 ms
#: of Python, so that the datagrams waiting meanwhile (pings) are answered
#: between the turns of a big push/pull
STREAM_TURN = 1024
#: streams others opened to us with work under way that the engine keeps
#: (the fronts tell it when they close one: this only bounds a front that
#: does not, or one allowing more streams than this). Past it the oldest
#: unfinished one is dropped ("streams_dropped"); a stream's work without its
#: decompressed bytes (bounded apart, limits.max_streams_decompressed) is
#: small, so the bound is far above the fronts' default of 32.
MAX_STREAM_WORK = 1024


@dataclass(eq=False)
class StreamWork:
    """A stream being decoded and merged a turn at a time."""

    decoder: framing.StreamDecoder
    #: the bytes it was last given
    data: bytes
    #: forgotten after it, if still unfinished (a front gives up on the connection at tcp_timeout)
    deadline: float
    #: needs more bytes (False: more turns)
    waiting: bool = True
    #: the push/pull being merged, and how many of its nodes are
    remote: messages.PushPull | None = None
    merged: int = 0
    #: an incoming push/pull: our state, made when the remote one was read (sendLocalState, before the merge)
    reply: bytes = b""


class StreamSync:
    """The engine's TCP streams, over its shared state; a remote state is
    merged through the node-state ``rules``.

    A stream's decoding and merging is done in one call unless
    :attr:`stream_turn_size` bounds it: then a call does at most that much
    and returns as if the stream were incomplete; :meth:`stream_working`
    says that it has work left needing no more bytes, and
    :meth:`stream_turn` goes on with it (the fronts call it between reading
    their datagrams)."""

    #: work one call may do on a stream (see STREAM_TURN); None: all at once
    stream_turn_size: int | None = None

    def __init__(self, shared: EngineState, rules: NodeRules) -> None:
        self.shared, self.name, self.settings, self.table, self.counts = shared.held()
        self.rules = rules
        self._stream_id = 0
        self._incoming_work: dict[Addr, StreamWork] = {}
        self._outgoing_work: dict[int, StreamWork] = {}
        self._stream_limits: Limits | None = None

    # -------------------------------------------------------------- streams

    def stream_bytes(self, msg: bytes, *, header: bool) -> bytes:
        """rawSendMsgStream: compression always when enabled, encryption (the
        label in its associated data); ``header``: the label header first, as
        the side that dials writes it (memberlist >= 0.3); a reply has none."""
        s = self.settings
        return framing.encode_stream(msg, compress=s.enable_compression,
                                     keyring=self.shared.keyring if s.gossip_verify_outgoing else None,
                                     encryption_version=s.encryption_version, label=s.label, header=header)

    def _local_state(self, join: bool, *, header: bool) -> bytes:
        user = self.shared.user_state(join) if self.shared.user_state is not None else b""
        return self.stream_bytes(messages.encode_push_pull_fields(join, map(_push_fields, self.table.nodes), user),
                                 header=header)

    def open_push_pull(self, addr: Addr, join: bool, now: float) -> bool:
        opened = self.open_stream(addr, "push_pull", self._local_state(join, header=True),
                                  now + self.settings.tcp_timeout, join=join, now=now)
        if not opened and join:
            self.shared.event(JoinResult(addr, False, "too many streams open"))
        return opened

    def open_stream(self, addr: Addr, kind: str, data: bytes, deadline: float, *, join: bool = False,
                    seq: int = 0, now: float = 0.0) -> bool:
        if len(self.shared.streams) >= self.settings.max_streams:
            self.counts["streams_refused"] += 1
            return False
        self._stream_id += 1
        self.shared.streams[self._stream_id] = StreamRecord(self._stream_id, addr, kind, deadline, join, seq, now)
        self.shared.to_open.append(OutgoingStream(self._stream_id, addr, data, deadline))
        self.counts["streams_opened"] += 1
        return True

    def _decoder(self, incoming: bool) -> framing.StreamDecoder:
        """A decoder for one stream. A push/pull someone opens to us that
        announces more nodes than our table can ever hold (``max_nodes``)
        is refused at its header, before any of its nodes is read: only a
        part of it could be merged, at a cost its sender chose (memberlist
        refuses past 1,048,576 nodes; below that it merges them all, its
        table unbounded). The reply to our own push/pull (a join: a peer we
        chose) is merged as far as the table allows, as before. The reply
        to our own stream needs no label header (memberlist >= 0.3 writes
        none there)."""
        s = self.settings
        limits = s.limits
        if incoming:
            limits = self._stream_limits or dataclasses.replace(
                limits, max_push_nodes=min(limits.max_push_nodes, s.max_nodes))
            self._stream_limits = limits
        keyring = self.shared.keyring
        return framing.StreamDecoder(limits, keys=keyring.keys if keyring else (), label=s.label,
                                     verify_incoming=s.gossip_verify_incoming, reply=not incoming)

    def _decode_turn(self, work: StreamWork, room: int | None = None) -> tuple[framing.StreamMessage, int] | None:
        """One turn of a stream's decoding: its message, or None (``work.waiting``:
        for more bytes; else for another turn); GossipWireError if bad (or
        if it would decompress to more than ``room``)."""
        try:
            decoded = work.decoder.decode(work.data, self.stream_turn_size, room)
        except Truncated:
            if len(work.data) > self.settings.limits.max_stream:
                raise GossipWireError("too_large", "stream message over the size limit") from None
            work.waiting = True
            return None
        work.waiting = False
        return decoded

    def _merge_turn(self, work: StreamWork, budget: int | None, join: bool, now: float) -> bool:
        """Merge the next nodes of ``work.remote`` (at most ``budget``,
        None: all); True once all are, its user state handed on."""
        remote = work.remote
        assert remote is not None
        stop = len(remote.nodes) if budget is None else min(len(remote.nodes), work.merged + max(budget, 0))
        self._merge_nodes(remote.nodes, work.merged, stop, now)
        work.merged = stop
        if stop < len(remote.nodes):
            return False
        if remote.user_state:
            self.shared.event(RemoteState(remote.user_state, join))
        return True

    def _left(self, work: StreamWork) -> int | None:
        """What is left of this call's turn after the decoder's part."""
        return None if self.stream_turn_size is None else work.decoder.left

    def stream_working(self, key: Addr | int) -> bool:
        """Whether the stream handed over as ``key`` (the address of a
        stream someone opened to us, or the id of ours) has work left that
        needs no more bytes: give it a :meth:`stream_turn`."""
        work = self._outgoing_work.get(key) if isinstance(key, int) else self._incoming_work.get(key)
        return work is not None and not work.waiting

    def stream_turn(self, key: Addr | int, now: float) -> bytes | None:
        """Go on with a stream :meth:`stream_working` named: None while it
        still has work left (or needs bytes); once done, the bytes to write
        back and close (ours: none, close it)."""
        if isinstance(key, int):
            work = self._outgoing_work.get(key)
            if work is None:
                return b""
            return None if not self._outgoing_turn(key, work, now) else b""
        work = self._incoming_work.get(key)
        if work is None:
            return b""
        return self._incoming_turn(key, work, now)

    def stream_closed(self, addr: Addr) -> None:
        """The front closed the stream ``addr`` opened to us: its work, if unfinished, is dropped."""
        self._incoming_work.pop(addr, None)

    def receive_stream(self, data: bytes, addr: Addr, now: float) -> bytes | None:
        """A stream someone opened to us (handleConn), every byte read so far.

        None: incomplete, call again with more (if the peer closed, drop
        it), or, when :meth:`stream_working` says so, give it a
        :meth:`stream_turn`. bytes: write them back (maybe none) and close.
        """
        work = self._incoming_work.get(addr)
        if work is None or not data.startswith(work.data):       # a new stream from there
            for old, stale in list(self._incoming_work.items()):
                if stale.deadline <= now:
                    del self._incoming_work[old]
                elif len(self._incoming_work) >= MAX_STREAM_WORK:
                    del self._incoming_work[old]
                    self.counts["streams_dropped"] += 1
            work = self._incoming_work[addr] = StreamWork(self._decoder(True), data, now + self.settings.tcp_timeout)
        work.data = data
        return self._incoming_turn(addr, work, now)

    def _stream_room(self, work: StreamWork) -> int:
        """The decompressed bytes ``work`` may hold: what the other streams
        others opened to us leave of limits.max_streams_decompressed."""
        others = sum(other.decoder.held for other in self._incoming_work.values() if other is not work)
        return self.settings.limits.max_streams_decompressed - others

    def _incoming_turn(self, addr: Addr, work: StreamWork, now: float) -> bytes | None:
        if work.remote is None:
            try:
                decoded = self._decode_turn(work, self._stream_room(work))
            except GossipWireError as exc:
                del self._incoming_work[addr]
                self.counts["streams_bad"] += 1
                self.shared.bad(exc.reason)
                return self.stream_bytes(messages.encode(messages.Err(error=str(exc))), header=False)
            if decoded is None:
                return None
            self.counts["streams_received"] += 1
            (kind, msg), _used = decoded
            if not isinstance(msg, messages.PushPull):
                del self._incoming_work[addr]
                return self._answer(kind, msg, addr)
            work.reply = self._local_state(msg.join, header=False)
            if self._refusal(msg):
                del self._incoming_work[addr]
                return work.reply
            work.remote, work.waiting = msg, False
            budget = self._left(work)
        else:
            budget = self.stream_turn_size
        if not self._merge_turn(work, budget, work.remote.join, now):
            return None
        del self._incoming_work[addr]
        return work.reply

    def _answer(self, kind: MessageType, msg: object, addr: Addr) -> bytes:
        """What a stream other than a push/pull gets back."""
        if kind == MessageType.USER and isinstance(msg, bytes):
            self.counts["user_messages_received"] += 1
            self.shared.event(UserMessage(msg, addr))
        elif isinstance(msg, messages.Ping) and (not msg.node or msg.node == self.name):
            return self.stream_bytes(messages.encode(messages.Ack(seq_no=msg.seq_no)), header=False)
        return b""

    def stream_response(self, stream_id: int, data: bytes, now: float) -> bool:
        """The reply read so far on one of our streams; True when it is
        complete (or bad): close the connection. False: read more, or, when
        :meth:`stream_working` says so, give it a :meth:`stream_turn`."""
        work = self._outgoing_work.get(stream_id)
        if work is None:
            for old in [sid for sid in self._outgoing_work if sid not in self.shared.streams]:
                del self._outgoing_work[old]
            work = self._outgoing_work[stream_id] = StreamWork(self._decoder(False), data, now)
        work.data = data
        return self._outgoing_turn(stream_id, work, now)

    def _outgoing_turn(self, stream_id: int, work: StreamWork, now: float) -> bool:
        stream = self.shared.streams.get(stream_id)
        if stream is None:                  # timed out meanwhile (or never ours)
            self._outgoing_work.pop(stream_id, None)
            return True
        if work.remote is None:
            try:
                decoded = self._decode_turn(work)
            except GossipWireError as exc:
                self.shared.bad(exc.reason)
                self._stream_done(stream, str(exc), now)
                return True
            if decoded is None:
                return False
            (kind, msg), _used = decoded
            error = ""
            if stream.kind == "ping":
                if isinstance(msg, messages.Ack) and msg.seq_no == stream.seq:
                    probe = self.shared.acks.get(stream.seq)
                    if isinstance(probe, Probe):
                        probe.tcp_ok = True
                    self._stream_done(stream, None, now)
                    return True
                error = "no ack"
            elif isinstance(msg, messages.Err):
                error = f"remote error: {msg.error}"
            elif not isinstance(msg, messages.PushPull):
                error = f"unexpected message type {kind}"
            else:
                error = self._refusal(msg)
            if error:
                self._stream_done(stream, error, now)
                return True
            assert isinstance(msg, messages.PushPull)
            work.remote, work.waiting = msg, False
            budget = self._left(work)
        else:
            budget = self.stream_turn_size
        if not self._merge_turn(work, budget, stream.join, now):
            return False
        self.counts["push_pulls"] += 1
        if stream.join:
            self.shared.event(JoinResult(stream.addr, True))
        self._stream_done(stream, None, now)
        return True

    def _stream_done(self, stream: StreamRecord, error: str | None, now: float) -> None:
        """One of our streams over: ``error`` (None: it went well)."""
        self.shared.streams.pop(stream.id, None)
        self._outgoing_work.pop(stream.id, None)
        if error is not None:
            self.stream_ended(stream, error, now)
        elif stream.kind == "push_pull":
            self.shared.telemetry.push_pull_node.add((now - stream.started) * 1e3, now)

    def stream_failed(self, stream_id: int, now: float, error: str = "connection failed") -> None:
        """One of our streams could not connect or broke before its reply."""
        self._outgoing_work.pop(stream_id, None)
        stream = self.shared.streams.pop(stream_id, None)
        if stream is not None:
            self.stream_ended(stream, error, now)

    def stream_ended(self, stream: StreamRecord, error: str, now: float) -> None:
        self.counts["streams_failed"] += 1
        if stream.kind == "push_pull":      # (memberlist times a failed one too)
            self.shared.telemetry.push_pull_node.add((now - stream.started) * 1e3, now)
        if stream.kind == "push_pull" and stream.join:
            self.shared.event(JoinResult(stream.addr, False, error))

    def _refusal(self, remote: messages.PushPull) -> str:
        """verifyProtocol before a merge: why ``remote`` is refused (counted), '' if it is not."""
        error = self._verify_protocol(remote.nodes)
        if error:
            self.counts["push_pulls_refused"] += 1
        return error

    def _merge_nodes(self, nodes: list[messages.PushNodeState], start: int, stop: int, now: float) -> None:
        """mergeState on ``nodes[start:stop]``."""
        plain_port = self.settings.protocol_version < 2
        me = self.name
        for index in range(start, stop):
            r = nodes[index]
            port = self.shared.port if plain_port or not r.port else r.port
            if r.state == NodeState.ALIVE:
                # what the hot path drops unread, dropped here too: a known
                # node's old news (a whole unchanged table, mostly)
                if self.rules.alive_ignored(r.name, r.incarnation, r.addr, r.port, r.vsn):
                    continue
                self.rules.alive(messages.Alive(incarnation=r.incarnation, node=r.name, addr=r.addr, port=port,
                                                meta=r.meta, vsn=r.vsn), now, bootstrap=False)
            elif r.state == NodeState.LEFT:
                self.rules.dead(messages.Dead(incarnation=r.incarnation, node=r.name, from_=r.name), now)
            elif r.state in (NodeState.DEAD, NodeState.SUSPECT):
                # A node another thinks dead is only suspected here.
                self.rules.suspect(messages.Suspect(incarnation=r.incarnation, node=r.name, from_=me), now)

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

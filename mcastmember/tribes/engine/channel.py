"""Tribes' TCP channel, as much as a listed member needs: no I/O here.

Once Tomcat lists a member it sends it every replicated message over TCP,
in frames of ``FLT2002`` + int32 length + ChannelData + ``TLF2003``
(``org.apache.catalina.tribes.io.XByteBuffer`` and ``ChannelData``). We take
no part in replication, but a member that does not answer harms the cluster:
a sender that asked for an acknowledgement holds a pooled sender until its
timeout (3 s); an RPC waits for our reply; a starting DeltaManager waits 60 s
for our sessions. So each frame is answered at once, as its options ask:

- options with USE_ACK: an ACK frame back on the same connection (what a
  Tomcat node that processed the message without error sends);
- an RPC request: a NoRpcChannelReply to the sender's own receiver port (what
  a Tomcat node without that RPC channel sends);
- a DeltaManager's request for all sessions: "transfer complete", none held.

Those two replies go on a connection of our own to the address the frame's
sender names, and only when that sender is a member we accept (``accepts``:
in our table, and authenticated when keys are set). A reply whose sender is
not accepted yet comes with ``accepted`` False: the listener holds it a few
seconds (a Tomcat that just heard us may ask before its own first heartbeat
reached us), sends it if the sender is accepted meanwhile, and otherwise
drops it, counted. Tomcat reads a reply only from its receiver, never from
the connection it sent on (its sender reads acks there, and a stray frame
would hold up its next ack), so no reply ever goes back on the inbound
connection: an unknown source gets acks (smaller than what it sent) and
nothing else.

``ChannelConnection`` turns the bytes of one inbound connection into the
bytes to write back and the replies to deliver; the listeners in
``tribes_listener.py`` only move them. Reads are bounded: a frame's head (enough for
every message we answer) is kept, the rest of a large frame is skipped as it
streams past, and a stream that is not Tribes framing ends the connection.
"""

from __future__ import annotations

import os
import struct
import time
from typing import TYPE_CHECKING, Literal

from ..wire import layout as L
from ..kernel import codec as _codec
from ..wire import javaser
from ..wire.errors import MalformedPacket
from .member import Member

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from typing_extensions import Buffer

# What is kept of one frame's ChannelData: ids, the sender's member packet and
# the start of the message (RPC requests and state requests are a few hundred
# bytes). Larger frames (session data) are acknowledged, not inspected.
FRAME_HEAD_LIMIT = 64 * 1024
# Tomcat writes frames up to its maximum message size; a length beyond this
# is not Tribes framing.
MAX_FRAME_LEN = 1 << 30
# A frame's ChannelData must hold at least its fixed fields.
_CHANNEL_DATA_MIN = 4 + 8 + 4 + 4 + 4


class ChannelError(Exception):
    """The stream is not Tribes framing: the connection is closed.
    ``back`` and ``replies`` are the answers to the frames that came whole
    before the bad bytes (ChannelConnection.receive): they are still sent."""

    back: bytes = b""
    replies: list[Reply] = []


def frame(payload: bytes) -> bytes:
    """A Tribes frame around ``payload``."""
    return L.CHANNEL_START + struct.pack(">i", len(payload)) + payload + L.CHANNEL_END


ACK_FRAME = frame(L.ACK_DATA)


class ChannelData:
    """The fields of one message: ``options``, ``timestamp``, ``unique_id``,
    ``sender`` (the sender's membership packet), ``message`` (its bytes, cut
    at FRAME_HEAD_LIMIT for large frames: ``complete`` says whether it is whole)."""

    __slots__ = ("options", "timestamp", "unique_id", "sender", "message", "complete")

    # timestamp and unique_id are None when a frame's kept head ends before them.
    def __init__(self, options: int, timestamp: int | None, unique_id: bytes | None,
                 sender: bytes, message: bytes, complete: bool = True) -> None:
        self.options, self.timestamp, self.unique_id = options, timestamp, unique_id
        self.sender, self.message, self.complete = sender, message, complete

    @classmethod
    def parse(cls, head: bytes, complete: bool = True) -> ChannelData:
        """Read the fields from the start of a frame's ChannelData; the
        options are always there, the rest as far as ``head`` goes."""
        if len(head) < 4:
            raise ChannelError("frame too short for its options")
        options: int = struct.unpack_from(">i", head, 0)[0]
        fields = _Fields(head, 4)
        timestamp = fields.int64()
        unique_id = fields.block()
        sender = fields.block()
        message = fields.block(complete)
        return cls(options, timestamp, unique_id, sender or b"", message or b"",
                   complete and message is not None)

    def encode(self) -> bytes:
        # Only whole messages are encoded (ours): every field is there.
        assert self.timestamp is not None and self.unique_id is not None
        return (struct.pack(">iqi", self.options, self.timestamp, len(self.unique_id))
                + self.unique_id + struct.pack(">i", len(self.sender)) + self.sender
                + struct.pack(">i", len(self.message)) + self.message)

    def wants_ack(self) -> bool:
        return bool(self.options & L.SEND_OPTIONS_USE_ACK)


class _Fields:
    """Reads int32-prefixed blocks from a possibly cut ChannelData; a field
    that runs past what was kept reads as None, past the frame as an error."""

    def __init__(self, data: bytes, pos: int) -> None:
        self.data, self.pos = data, pos

    def int64(self) -> int | None:
        if self.pos + 8 > len(self.data):
            return None
        self.pos += 8
        value: int = struct.unpack_from(">q", self.data, self.pos - 8)[0]
        return value

    def block(self, strict: bool = True) -> bytes | None:
        if self.pos + 4 > len(self.data):
            return None
        n: int = struct.unpack_from(">i", self.data, self.pos)[0]
        if n < 0:
            raise ChannelError("negative field length")
        start, end = self.pos + 4, self.pos + 4 + n
        if end > len(self.data):
            if strict:
                raise ChannelError("field runs past the frame")
            return None
        self.pos = end
        return bytes(self.data[start:end])


class FrameReader:
    """Splits a byte stream into frames, keeping at most FRAME_HEAD_LIMIT
    bytes of each: ``feed(data)`` returns ``[(head, complete), ...]``."""

    def __init__(self, head_limit: int = FRAME_HEAD_LIMIT) -> None:
        self._limit = head_limit
        self._buf = bytearray()    # header bytes, then the kept head of the body
        self._length: int | None = None    # the body length, once the header is read
        self._skip = 0             # body bytes still to pass over unkept
        self._tail = b""           # end-marker bytes seen so far

    def feed(self, data: Buffer) -> list[tuple[bytes, bool]]:
        return list(self.frames(data))

    def frames(self, data: Buffer) -> Iterator[tuple[bytes, bool]]:
        """The frames ``data`` completes, each as soon as it is read (so the
        ones before bad bytes are had before the ChannelError)."""
        view = memoryview(data)
        while view:
            if self._length is None:
                view = self._read_header(view)
            elif len(self._buf) < min(self._length, self._limit):
                take = min(self._length, self._limit) - len(self._buf)
                self._buf += view[:take]
                view = view[take:]
            elif self._skip:
                n = min(self._skip, len(view))
                self._skip -= n
                view = view[n:]
            else:
                need = len(L.CHANNEL_END) - len(self._tail)
                self._tail += bytes(view[:need])
                view = view[need:]
                if len(self._tail) == len(L.CHANNEL_END):
                    if self._tail != L.CHANNEL_END:
                        raise ChannelError("frame without its end marker")
                    head, complete = bytes(self._buf), self._length <= self._limit
                    self._buf.clear()
                    self._length, self._tail = None, b""
                    yield head, complete

    def _read_header(self, view: memoryview) -> memoryview:
        need = L.CHANNEL_HEADER_LEN - len(self._buf)
        self._buf += view[:need]
        view = view[need:]
        start = bytes(self._buf[:len(L.CHANNEL_START)])
        if not L.CHANNEL_START.startswith(start):
            raise ChannelError("not a Tribes frame")
        if len(self._buf) == L.CHANNEL_HEADER_LEN:
            length: int = struct.unpack_from(">i", self._buf, len(L.CHANNEL_START))[0]
            if not _CHANNEL_DATA_MIN <= length <= MAX_FRAME_LEN:
                raise ChannelError(f"frame length {length} out of range")
            self._length = length
            self._skip = max(0, length - self._limit)
            self._buf.clear()
        return view


class Reply:
    """A message to deliver to another member's receiver: ``frame`` to be
    written to ``(address, port)`` (``sender``'s) on a connection of its own,
    once ``accepted`` (the sender is a member we accept)."""

    __slots__ = ("address", "port", "frame", "kind", "sender", "accepted")
    kind: Literal["rpc", "state"]

    def __init__(self, sender: Member, frame_bytes: bytes, kind: Literal["rpc", "state"],
                 accepted: bool) -> None:
        self.address, self.port, self.sender = sender.address, sender.port, sender
        self.frame, self.kind, self.accepted = frame_bytes, kind, accepted


def _sender(sender: bytes) -> Member | None:
    """The member a membership packet names (host, port, unique id), or None."""
    try:
        fields = _codec.parse(sender)
    except MalformedPacket:
        return None
    return Member(fields[4], fields[1], fields[7])


class ChannelCounters:
    """What the listener did, summed over its connections. ``rpc_replies``
    and ``state_replies``: replies sent; ``replies_refused``: replies not
    sent because their sender was not a member we accept (by the end of the
    hold, counted by the listener)."""

    __slots__ = ("frames", "acks", "rpc_replies", "state_replies", "replies_refused",
                 "malformed")

    def __init__(self) -> None:
        self.frames = self.acks = self.rpc_replies = self.state_replies = 0
        self.replies_refused = self.malformed = 0

    def count_sent(self, kind: Literal["rpc", "state"]) -> None:
        if kind == "rpc":
            self.rpc_replies += 1
        else:
            self.state_replies += 1

    def as_stats(self) -> dict[str, int]:
        return {f"probe_{name}": getattr(self, name) for name in self.__slots__}


class ChannelConnection:
    """One inbound connection: ``receive(data)`` returns ``(bytes to write
    back, [Reply, ...])`` and raises ChannelError when the stream is not
    Tribes framing (with the answers to the frames before the bad bytes).
    ``local_packet()`` gives our current membership packet, which our
    replies carry as their sender; ``accepts(member)`` says whether a
    frame's sender is a member we may connect to (None: nobody is); a reply
    to anyone else comes with ``accepted`` False, not counted yet."""

    def __init__(self, local_packet: Callable[[], bytes], counters: ChannelCounters,
                 accepts: Callable[[Member], bool] | None = None) -> None:
        self._reader = FrameReader()
        self._local_packet = local_packet
        self._counters = counters
        self._accepts = accepts
        self.frames = 0          # whole frames received

    def receive(self, data: Buffer) -> tuple[bytes, list[Reply]]:
        back: list[bytes] = []
        replies: list[Reply] = []
        try:
            for head, complete in self._reader.frames(data):
                message = ChannelData.parse(head, complete)
                self._counters.frames += 1
                self.frames += 1
                if message.wants_ack():
                    back.append(ACK_FRAME)
                    self._counters.acks += 1
                reply = self._answer(message)
                if reply is not None:
                    replies.append(reply)
        except ChannelError as error:
            self._counters.malformed += 1
            error.back, error.replies = b"".join(back), replies
            raise
        return b"".join(back), replies

    def _answer(self, message: ChannelData) -> Reply | None:
        if (not message.complete or message.options & L.SEND_OPTIONS_BYTE_MESSAGE
                or not message.message.startswith(L.JAVA_STREAM_MAGIC)):
            return None
        request = javaser.rpc_request(message.message)
        kind: Literal["rpc", "state"]
        if request is not None:
            answer, kind = javaser.no_rpc_reply(request), "rpc"
        else:
            state = javaser.session_state_reply(message.message)
            if state is None:
                return None
            answer, kind = state, "state"
        sender = _sender(message.sender)
        if sender is None:
            return None
        accepted = self._accepts is not None and self._accepts(sender)
        # Sent as Tomcat sends these answers: asynchronously, no ack awaited.
        data = ChannelData(L.SEND_OPTIONS_ASYNCHRONOUS, int(time.time() * 1000), os.urandom(16),
                           self._local_packet(), answer)
        return Reply(sender, frame(data.encode()), kind, accepted)

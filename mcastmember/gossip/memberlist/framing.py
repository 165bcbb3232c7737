"""Compound messages, the CRC header, compression wrapping, and whole packets
and TCP stream messages built from them (memberlist 0.2.x util.go and net.go;
labels from >= 0.3).

Layering, outermost first, as rawSendMsgPacket / ingestPacket do it:

    packet:  [label header] [encryption] [hasCrc header] [compress] message-or-compound
    stream:  [label header] [encrypt message] [compress] push/pull | user | ping | ack | err

On a stream only the side that dials writes the label header, once, before
its message (memberlist >= 0.3's transport writes it as it connects); the
reply on that connection carries none, its label only in the encryption's
associated data.

Compression on packets is used only when it makes the packet smaller; on
streams always when enabled (rawSendMsgStream). A compound holds up to 255
parts of at most 65535 bytes; its parts may themselves be compounds or
compressed (Go recurses without a bound: here ``Limits.max_nesting`` bounds it).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

from . import crypto
from . import label as label_mod
from . import lzw
from . import messages
from . import msgpack_go
from .errors import GossipWireError, Truncated
from .layout import (COMPOUND_LENGTH_SIZE, COMPOUND_MAX_PART, COMPOUND_MAX_PARTS, COMPRESS_MESSAGE_OVERHEAD,
                     CRC_HEADER_SIZE, ENCRYPTION_VERSION_MAX, LZW_ALGO, LZW_LIT_WIDTH, LZW_MAX_WIDTH, MessageType)
from .limits import Limits

# ----------------------------------------------------------------- compound


def make_compound(parts: Sequence[bytes]) -> bytes:
    """makeCompoundMessage: type, count, big-endian uint16 lengths, the parts."""
    if len(parts) > COMPOUND_MAX_PARTS:
        raise ValueError(f"a compound holds at most {COMPOUND_MAX_PARTS} messages")
    if any(len(part) > COMPOUND_MAX_PART for part in parts):
        raise ValueError(f"a compound part is at most {COMPOUND_MAX_PART} bytes")
    lengths = b"".join(len(part).to_bytes(COMPOUND_LENGTH_SIZE, "big") for part in parts)
    return bytes((MessageType.COMPOUND, len(parts))) + lengths + b"".join(parts)


def split_compound(body: bytes) -> tuple[list[bytes], int]:
    """decodeCompoundMessage on a compound's body (after its type byte): the
    complete parts and how many were cut off (Go keeps the complete ones)."""
    if not body:
        raise Truncated("compound without its count byte")
    count = body[0]
    pos = 1 + count * COMPOUND_LENGTH_SIZE
    if len(body) < pos:
        raise Truncated("compound lengths cut short")
    parts: list[bytes] = []
    for index in range(count):
        start = 1 + index * COMPOUND_LENGTH_SIZE
        length = int.from_bytes(body[start:start + COMPOUND_LENGTH_SIZE], "big")
        if len(body) - pos < length:
            return parts, count - index
        parts.append(bytes(body[pos:pos + length]))
        pos += length
    return parts, 0


# ---------------------------------------------------------------- CRC header


def add_crc(msg: bytes) -> bytes:
    """The hasCrc header: type 12 and the CRC-32 (IEEE) of ``msg``, big-endian."""
    return bytes((MessageType.HAS_CRC,)) + zlib.crc32(msg).to_bytes(4, "big") + msg


def strip_crc(buf: bytes) -> bytes:
    """``buf`` without its hasCrc header, checked; unchanged if it has none."""
    if len(buf) < CRC_HEADER_SIZE or buf[0] != MessageType.HAS_CRC:
        return buf
    rest = buf[CRC_HEADER_SIZE:]
    if zlib.crc32(rest) != int.from_bytes(buf[1:CRC_HEADER_SIZE], "big"):
        raise GossipWireError("bad_crc", "packet CRC does not match")
    return rest


# --------------------------------------------------------------- compression


#: a compress message up to its Buf value (made by the general encoder once:
#: every datagram goes through compress_message, which then only appends)
_COMPRESS_HEAD = messages.encode(messages.Compress(algo=LZW_ALGO, buf=b"\0"))[:-len(msgpack_go.pack(b"\0"))]


def compress_message(msg: bytes) -> bytes:
    """compressPayload: a compress message holding ``msg`` LZW-compressed
    (what ``messages.encode(Compress(...))`` writes, without its general encoder)."""
    return _COMPRESS_HEAD + msgpack_go.pack(lzw.compress(msg))


#: codes LZW can define before its table is full (12-bit codes less the
#: literals, clear and end of data)
_LZW_TABLE_ROOM = (1 << LZW_MAX_WIDTH) - (1 << LZW_LIT_WIDTH) - 2


def never_shorter(prefix: bytes, tail: int) -> bool:
    """Whether no message of ``prefix`` and at most ``tail`` more bytes
    compresses (:func:`compress_message`) to fewer bytes than itself, so
    that trying is wasted work.

    LZW reads its input in one pass: the codes of ``prefix + more`` are
    those of ``prefix`` but the last, then at least one code no narrower
    than it; so the compressed message never shrinks as bytes are added,
    while the message itself grows by at most ``tail``. That holds while
    the code table cannot fill (each byte adds at most one code; a full
    table is cleared, and codes narrow again): longer messages are tried.
    """
    size = len(prefix) + tail
    if compressed_floor(size) >= size:
        return True
    return size < _LZW_TABLE_ROOM and len(compress_message(prefix)) >= size


def decompress_body(comp: messages.Compress, max_size: int) -> bytes:
    """decompressBuffer: the bytes a compress message holds."""
    if comp.algo != LZW_ALGO:
        raise GossipWireError("bad_compression", f"unknown compression algorithm {comp.algo}")
    return lzw.decompress(comp.buf, max_size)


def compressed_floor(size: int) -> int:
    """The fewest bytes :func:`compress_message` can make of ``size`` bytes.

    LZW's k-th code stands for at most k bytes (each new table entry is a
    sent code's string plus one byte), so ``size`` bytes take at least the
    smallest k with k(k+1)/2 >= size codes, plus the clear and end codes,
    each at least LZW_LIT_WIDTH + 1 bits; the compress message adds its type
    byte, map and keys (12 bytes) and at least a one-byte raw header.
    """
    k = (math.isqrt(8 * size + 1) - 1) // 2
    if k * (k + 1) // 2 < size:
        k += 1
    return COMPRESS_MESSAGE_OVERHEAD + (k + 2) * (LZW_LIT_WIDTH + 1) // -8 * -1


# -------------------------------------------------------------------- packets


def encode_packet(msg: bytes, *, compress: bool = False, crc: bool = False,
                  keyring: crypto.Keyring | None = None, encryption_version: int = ENCRYPTION_VERSION_MAX,
                  label: bytes = b"", nonce: bytes | None = None) -> bytes:
    """A UDP packet as rawSendMsgPacket builds it from a message or compound.

    ``crc`` when the peer's protocol max is >= 5; ``keyring`` when encryption
    is on (and GossipVerifyOutgoing); ``label`` for memberlist >= 0.3 peers.
    """
    if compress and compressed_floor(len(msg)) < len(msg):   # else it cannot get smaller
        packed = compress_message(msg)
        if len(packed) < len(msg):
            msg = packed
    if crc:
        msg = add_crc(msg)
    if keyring is not None:
        msg = crypto.encrypt_payload(encryption_version, keyring.primary_key, msg, label, nonce)
    return label_mod.add_label(msg, label)


def open_packet(buf: bytes, limits: Limits, *, keys: Sequence[bytes] = (), label: bytes = b"",
                verify_incoming: bool = True) -> bytes:
    """ingestPacket's first steps: the label checked and removed, the packet
    decrypted with any of ``keys`` (if given), the CRC checked and removed.

    Without ``verify_incoming`` (a key roll-out), a packet no key opens is
    taken as plain, as memberlist does.
    """
    if len(buf) > limits.max_packet:
        raise GossipWireError("too_large", f"packet of {len(buf)} bytes is over {limits.max_packet}")
    got, start = label_mod.split_label(buf)
    if got != label:
        raise GossipWireError("bad_label", f"packet label {got!r} is not the expected {label!r}")
    buf = buf[start:]
    if keys:
        try:
            buf = crypto.decrypt_payload(keys, buf, label)
        except GossipWireError:
            if verify_incoming:
                raise
    buf = strip_crc(buf)
    if not buf:
        raise Truncated("empty packet")
    return buf


def split_messages(buf: bytes, limits: Limits) -> tuple[list[bytes], int]:
    """handleCommand's unwrapping: the messages inside compounds and compress
    messages, each still with its type byte, and how many compound parts were
    cut off. Nesting, count and decompressed bytes (all the packet's
    compressed messages together, ``max_packet_decompressed``) are bounded by ``limits``."""
    out: list[bytes] = []
    truncated = 0
    budget = limits.max_packet_decompressed
    stack: list[tuple[bytes, int]] = [(buf, 0)]
    while stack:
        msg, depth = stack.pop()
        if not msg:
            raise Truncated("empty message")
        kind = msg[0]
        if kind not in (MessageType.COMPOUND, MessageType.COMPRESS):
            if len(out) == limits.max_messages:
                raise GossipWireError("too_many", f"more than {limits.max_messages} messages in one packet")
            out.append(msg)
            continue
        if depth == limits.max_nesting:
            raise GossipWireError("too_deep", f"compound/compress nested deeper than {limits.max_nesting}")
        if kind == MessageType.COMPOUND:
            parts, cut = split_compound(msg[1:])
            truncated += cut
            stack.extend((part, depth + 1) for part in reversed(parts))
        else:
            comp, _end = messages.Compress.decode_body(msg, limits, 1)
            inner = decompress_body(comp, budget)
            budget -= len(inner)
            stack.append((inner, depth + 1))
    return out, truncated


# -------------------------------------------------------------------- streams


def encode_stream(msg: bytes, *, compress: bool = False, keyring: crypto.Keyring | None = None,
                  encryption_version: int = ENCRYPTION_VERSION_MAX, label: bytes = b"", header: bool = True,
                  nonce: bytes | None = None) -> bytes:
    """A TCP stream message as rawSendMsgStream writes it; with ``header``
    (the dialer's message, the first on its connection) the label header
    before it, as AddLabelHeaderToStream sends it. A reply (``header``
    False) carries none: a Go dialer >= 0.3 reads a 244 there as a bad
    message type. ``label`` is the encryption's associated data either way."""
    if compress:
        msg = compress_message(msg)
    if keyring is not None:
        msg = crypto.encrypt_stream(encryption_version, keyring.primary_key, msg, label, nonce)
    return label_mod.add_label(msg, label) if header else msg


StreamMessage = tuple[MessageType, object]

#: LZW output counted as one node state in a turn of :class:`StreamDecoder`
#: (reading 256 bytes costs about what decoding a node state costs)
LZW_BYTES_PER_NODE = 256
#: LZW output read first, to see a push/pull's header (at most 45 bytes)
#: before the rest is decompressed
HEADER_PEEK = 64
#: "everything": a turn without a bound
_ALL = 1 << 62


def decode_stream(buf: bytes, limits: Limits, *, keys: Sequence[bytes] = (), label: bytes = b"",
                  verify_incoming: bool = True, reply: bool = False) -> tuple[StreamMessage, int]:
    """readStream and what follows it: one stream message at the start of
    ``buf`` and the number of bytes it took (:class:`StreamDecoder` in one go).

    The result is (PUSH_PULL, PushPull), (USER, payload bytes), or (PING,
    Ping), (ACK, Ack), (ERR, Err). :class:`Truncated` means more bytes are
    needed; any other :class:`GossipWireError` that the stream is bad.
    """
    found = StreamDecoder(limits, keys=keys, label=label, verify_incoming=verify_incoming, reply=reply).decode(buf)
    assert found is not None        # (a turn without a bound never stops short)
    return found


class StreamDecoder:
    """readStream and what follows it, for one stream, a turn at a time: a
    push/pull of 100,000 node states (20 MiB once decompressed) takes a
    second of decoding, which must not hold up the pings for that long.

    :meth:`decode` is given every byte read so far (again, or with more)
    and goes on from where it stopped: the label, the decryption (in one
    go: its length is known), the LZW data (``turn`` bounds the bytes read
    per call), then the message, a push/pull's node states a batch per call.
    A push/pull's header is checked against ``limits`` as soon as it is
    read (a compressed one's after its first bytes are decompressed): one
    announcing too many nodes is refused before anything else is read.
    The results and errors are :func:`decode_stream`'s.

    A stream someone opens to us must start with our label's header (none
    without a label). ``reply``: the answer on a stream we opened, which
    memberlist >= 0.3 sends without the header; one that carries our
    label's header (an older mcastmember wrote one) is read too, one with
    another label refused.
    """

    def __init__(self, limits: Limits, *, keys: Sequence[bytes] = (), label: bytes = b"",
                 verify_incoming: bool = True, reply: bool = False) -> None:
        self._limits = limits
        self._keys = keys
        self._label = label
        self._reply = reply
        self._verify = verify_incoming
        #: the message's bytes once known whole (decrypted or decompressed);
        #: None while they are the stream's own, as read so far
        self._body: bytes | None = None
        #: where the message (its type byte) starts, once the framing before it is read
        self._start: int | None = None
        #: the stream bytes the message takes, when its framing tells (encrypted, compressed)
        self._used: int | None = None
        self._lzw: lzw.TurnReader | None = None
        self._peeked = False
        #: whether the body is what the LZW data held, and how many of its bytes earlier turns read
        self._inflated = False
        self._inflated_bytes = 0
        # a push/pull being read: its header, the node states so far, where the next starts
        self._header: messages.PushPullHeader | None = None
        self._nodes: list[messages.PushNodeState] = []
        self._next = 0
        self._reader: msgpack_go.MsgpackReader | None = None
        self._reader_of: bytes | None = None
        #: what the last call left of its turn
        self.left = 0

    @property
    def held(self) -> int:
        """The decompressed bytes this stream holds (its LZW output so far,
        each read counted at what it was asked for: a code's string, at most
        4 KB, may come past it; then the whole message); none if it is not
        compressed."""
        if self._lzw is not None:
            return (HEADER_PEEK if self._peeked else 0) + self._inflated_bytes
        return len(self._body) if self._inflated and self._body is not None else 0

    def decode(self, data: bytes, turn: int | None = None, room: int | None = None
               ) -> tuple[StreamMessage, int] | None:
        """Go on with ``data``: the message and the stream bytes it took, or
        None if ``turn`` (node states, LZW output counted
        LZW_BYTES_PER_NODE to one; None: no bound) ran out first (call
        again, with the same bytes or more). :class:`Truncated` when more
        bytes are needed; any other :class:`GossipWireError` when it is bad,
        "stream_memory" when its LZW data would decompress to more than
        ``room`` bytes (:attr:`held` in all; None: only the limits bound it)."""
        budget = self.left = _ALL if turn is None else turn
        if self._start is None:
            self._frame(data)
        assert self._start is not None
        body = data if self._body is None else self._body
        if self._lzw is None and not self._inflated and self._start < len(body) \
                and body[self._start] == MessageType.COMPRESS:
            self._compressed(body)
        if self._lzw is not None:
            budget = self.left = self._decompress(budget, _ALL if room is None else room)
            if self._lzw is not None:
                return None
            body = self._body
            assert body is not None
        if self._start >= len(body):
            raise Truncated("empty compressed stream message" if self._inflated else "empty stream message")
        kind = body[self._start]
        msg: object
        if kind == MessageType.PUSH_PULL:
            return self._push_pull(body, budget)
        if kind == MessageType.USER:
            msg, end = messages.decode_user_stream(body, self._limits, self._start + 1)
        elif kind in (MessageType.PING, MessageType.ACK, MessageType.ERR):
            msg, end = messages.SIMPLE[MessageType(kind)].decode_body(body, self._limits, self._start + 1)
        else:
            raise GossipWireError("bad_type", f"message type {kind} does not travel on streams")
        return (MessageType(kind), msg), (end if self._used is None else self._used)

    def _frame(self, data: bytes) -> None:
        """The label and the encryption, once they have arrived whole."""
        got, pos = label_mod.split_label(data)
        if got != self._label and not (self._reply and not got):
            raise GossipWireError("bad_label", label_mod.stream_refusal(got, self._label))
        if len(data) <= pos:
            raise Truncated("stream without a message type")
        if data[pos] == MessageType.ENCRYPT:
            if not self._keys:
                raise GossipWireError("bad_encryption", "remote state is encrypted and encryption is not configured")
            self._body, self._used = crypto.decrypt_stream(self._keys, data, self._limits, self._label, pos)
            self._start = 0
            return
        if self._keys and self._verify:
            raise GossipWireError("bad_encryption", "encryption is configured but remote state is not encrypted")
        self._start = pos

    def _compressed(self, body: bytes) -> None:
        """A compress message, once whole: its LZW data to read."""
        assert self._start is not None
        comp, end = messages.Compress.decode_body(body, self._limits, self._start + 1)
        if comp.algo != LZW_ALGO:
            raise GossipWireError("bad_compression", f"unknown compression algorithm {comp.algo}")
        if self._used is None:
            self._used = end
        self._lzw = lzw.reader(comp.buf, self._limits.max_decompressed)

    def _decompress(self, budget: int, room: int) -> int:
        """Read LZW data for at most ``budget``, holding at most ``room``
        bytes of its output; what is left of the budget. Its first bytes
        alone first: a push/pull's header is checked on them (a message that
        small is read whatever the room). Once read whole, they are the
        message's bytes."""
        assert self._lzw is not None
        limit = self._limits.max_decompressed
        done = None
        if not self._peeked:
            self._peeked = True
            done = lzw.read_turn(self._lzw, HEADER_PEEK, limit)
            self._peek(self._lzw.output() if done is None else done)
        while done is None and budget > 0:
            step = min(budget, _ALL // LZW_BYTES_PER_NODE) * LZW_BYTES_PER_NODE
            step = min(step, room - self.held)
            if step > 0:
                done = lzw.read_turn(self._lzw, step, limit)
            if done is None and step >= room - self.held:
                self._lzw = None                # (its bytes let go now)
                raise GossipWireError("stream_memory", "streams' decompressed bytes over the limit "
                                      "(limits.max_streams_decompressed)")
            if done is None:
                self._inflated_bytes += step
                budget = 0
        if done is not None:
            budget -= max(0, len(done) - self._inflated_bytes) // LZW_BYTES_PER_NODE
            self._lzw, self._body, self._start, self._inflated = None, done, 0, True
        return budget

    def _peek(self, head: bytes) -> None:
        """A push/pull header at the start of ``head`` refused now if it
        announces too much (anything else about it is left to the full read)."""
        if not head or head[0] != MessageType.PUSH_PULL:
            return
        try:
            header = messages.PushPullHeader.read(msgpack_go.MsgpackReader(head, self._limits, 1))
        except GossipWireError:
            return
        _check_push_pull(header, self._limits)

    def _push_pull(self, body: bytes, budget: int) -> tuple[StreamMessage, int] | None:
        """A push/pull's header, then its node states, a batch of at most ``budget`` per call."""
        limits = self._limits
        if self._reader_of is not body:        # more bytes of a plain stream: read on from the last batch
            assert self._start is not None
            self._reader = msgpack_go.MsgpackReader(body, limits, self._next or self._start + 1)
            self._reader_of = body
        reader = self._reader
        assert reader is not None
        if self._header is None:
            header = messages.PushPullHeader.read(reader)
            _check_push_pull(header, limits)
            self._header, self._next = header, reader.offset
        header = self._header
        memo = messages.decoded_memo(limits)
        while len(self._nodes) < header.nodes:
            if budget <= 0:
                return None
            count = min(header.nodes - len(self._nodes), budget)
            self._nodes += self._batch(body, reader, memo, count)
            reader = self._reader           # (the batch may have read again with a reader of its own)
            assert reader is not None
            self._next = reader.offset
            budget = self.left = budget - count
        end = self._next + header.user_state_len
        if end > len(body):
            raise Truncated(f"push/pull user state cut short ({len(body) - self._next} of {header.user_state_len} "
                            "bytes)")
        msg = messages.PushPull(join=header.join, nodes=self._nodes, user_state=bytes(body[self._next:end]))
        return (MessageType.PUSH_PULL, msg), (end if self._used is None else self._used)

    def _batch(self, body: bytes, reader: msgpack_go.MsgpackReader, memo: messages.NodeMemo[bytes, messages.NodeFields]
               | None, count: int) -> list[messages.PushNodeState]:
        """The next ``count`` node states, by the decode memo when there is
        one; any trouble and they are decoded again without it, so that
        errors are the general decoder's (as messages.decode_push_pull does)."""
        if memo is not None:
            try:
                return messages._read_nodes_remembered(memo, reader, count, body, self._limits)
            except GossipWireError:     # cut short too: the general decoder may find a fault before the cut
                reader = self._reader = msgpack_go.MsgpackReader(body, self._limits, self._next)
        try:
            return [messages.PushNodeState.read(reader) for _ in range(count)]
        except GossipWireError:
            self._reader_of = None               # read again from the batch's start
            raise


def _check_push_pull(header: messages.PushPullHeader, limits: Limits) -> None:
    """A push/pull header's counts within ``limits`` (readRemoteState's checks)."""
    if header.nodes > limits.max_push_nodes:
        raise GossipWireError("too_many", f"push/pull announces {header.nodes} nodes, over {limits.max_push_nodes}")
    if header.user_state_len > limits.max_user_state:
        raise GossipWireError("too_large", f"push/pull user state of {header.user_state_len} bytes is over the limit")

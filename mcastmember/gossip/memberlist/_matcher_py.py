"""The gossip hot path's matcher, pure Python (the twin of ``_hot.pyx``).

memberlist's hot messages (ping, ack, alive, suspect, dead) are msgpack maps
whose layout go-msgpack makes deterministic: the Go field names sorted, each
of a fixed type, the ``omitempty`` ones left out when zero. :func:`match`
recognises exactly those layouts at the byte level and hands back the fields
as plain values, without a general msgpack decode or message objects. Any
other layout (unknown or missing fields, other value types, a nil string,
a uint64, trailing bytes, a value out of its Go type's range, a meta over
512 bytes, a short Vsn) gives ``None``: the engine then takes the general
path, which decodes it or refuses it as it always did. The compiled twin
``_hot.pyx`` returns the same on every input (tests/gossip/test_memberlist_matcher.py).

Results, strings as their raw bytes:

- ``(PING, seq, addressed_to_me, source_addr, source_port)``;
  ``addressed_to_me``: Node is empty or ``me``;
- ``(ACK, seq, payload)``;
- ``(ALIVE, incarnation, node, addr, port, meta, vsn)``;
- ``(SUSPECT | DEAD, incarnation, node, from)``.

Read from the Go vectors (tests/interop/gossip_vectors), never copied.
"""

from __future__ import annotations

import sys

import zlib

PING = 0
ACK = 2
SUSPECT = 3
ALIVE = 4
DEAD = 5

COMPOUND = 7
COMPRESS = 9
LZW_ALGO = 0
HAS_CRC = 12
HAS_LABEL = 244
CRC_HEADER = 5

META_MAX = 512
VSN_SIZE = 6
U16 = 0xFFFF
U32 = 0xFFFFFFFF

FIXRAW_MAX = 31

# Each key as go-msgpack writes it: a fixraw header and the Go name.
K_NODE = b"\xa4Node"
K_SEQ = b"\xa5SeqNo"
K_SRC_ADDR = b"\xaaSourceAddr"
K_SRC_NODE = b"\xaaSourceNode"
K_SRC_PORT = b"\xaaSourcePort"
K_PAYLOAD = b"\xa7Payload"
K_FROM = b"\xa4From"
K_INC = b"\xabIncarnation"
K_ADDR = b"\xa4Addr"
K_META = b"\xa4Meta"
K_PORT = b"\xa4Port"
K_VSN = b"\xa3Vsn"
K_ALGO = b"\xa4Algo"
K_BUF = b"\xa3Buf"
#: a compress message up to its Buf's raw header: the type, a map of two
#: fields, Algo 0 (LZW), the Buf key (framing.compress_message writes it)
COMPRESS_HEAD = bytes((COMPRESS, 0x82)) + K_ALGO + bytes((LZW_ALGO,)) + K_BUF

#: a failed read: the position is below every real one
BAD = -1


def unwrap(buf: bytes, label_header: bytes, max_packet: int, max_messages: int, max_nesting: int,
           max_decompressed: int) -> list[bytes] | None:
    """The messages of a packet as ingestPacket and handleCommand unwrap
    it, or ``None`` where the general framing must decide. Taken: behind
    ``label_header`` (the expected label's header, or empty for none), an
    optional hasCrc header whose CRC matches, then one message or a
    compound of complete, non-empty plain messages; or a compress message
    in exactly Go's layout (see :func:`_decompressed`) holding one of those,
    read by the LZW reader within ``max_decompressed`` bytes. Compound and
    compress wrappers count against ``max_nesting`` as the general path
    counts them. ``None`` for anything else: an encrypted or damaged packet,
    a wrong label, other nesting, a compress message in another layout or
    whose LZW data fails, more than ``max_messages`` messages, bytes after
    a compound's parts."""
    end = len(buf)
    if end > max_packet or not buf.startswith(label_header):
        return None
    pos = len(label_header)
    if pos == 0 and end and buf[0] == HAS_LABEL:
        return None
    if pos < end and buf[pos] == HAS_CRC:
        if end - pos < CRC_HEADER or zlib.crc32(buf[pos + CRC_HEADER:]) != int.from_bytes(
                buf[pos + 1:pos + CRC_HEADER], "big"):
            return None
        pos += CRC_HEADER
    if pos < end and buf[pos] == COMPRESS:
        if max_nesting < 1:
            return None
        inner = _decompressed(buf, pos, end, max_decompressed)
        if inner is None:
            return None
        return _messages(inner, 0, len(inner), max_messages, max_nesting - 1)
    return _messages(buf, pos, end, max_messages, max_nesting)


def _messages(buf: bytes, pos: int, end: int, max_messages: int, max_nesting: int) -> list[bytes] | None:
    """``buf[pos:end]``: one plain message, or a compound (if ``max_nesting``
    allows one) of complete, non-empty plain messages and nothing after them."""
    if pos >= end or buf[pos] == COMPRESS:
        return None
    if buf[pos] != COMPOUND:
        return [buf[pos:end]] if max_messages >= 1 else None
    if max_nesting < 1 or pos + 1 >= end:
        return None
    count = buf[pos + 1]
    lengths = pos + 2
    part = lengths + 2 * count
    if count > max_messages or part > end:
        return None
    out = []
    for index in range(count):
        size = (buf[lengths + 2 * index] << 8) | buf[lengths + 2 * index + 1]
        stop = part + size
        if size == 0 or stop > end or buf[part] == COMPOUND or buf[part] == COMPRESS:
            return None
        out.append(buf[part:stop])
        part = stop
    return out if part == end else None


def _decompressed(buf: bytes, pos: int, end: int, max_size: int) -> bytes | None:
    """The bytes a compress message at ``pos`` holds, if it is exactly what
    memberlist writes (compressPayload through go-msgpack): a map of Algo 0
    then Buf, the Buf a raw of the shortest width for its length, ending
    at ``end``; and its LZW data reads within ``max_size`` bytes."""
    head = pos + len(COMPRESS_HEAD)
    if head >= end or not buf.startswith(COMPRESS_HEAD, pos):
        return None
    b = buf[head]
    if 0xA0 <= b <= 0xBF:
        start, size = head + 1, b - 0xA0
    elif b == 0xDA and head + 3 <= end:
        start, size = head + 3, (buf[head + 1] << 8) | buf[head + 2]
        if size <= FIXRAW_MAX:
            return None
    elif b == 0xDB and head + 5 <= end:
        start, size = head + 5, int.from_bytes(buf[head + 1:head + 5], "big")
        if size <= U16:
            return None
    else:
        return None
    if start + size != end:
        return None
    found = lzw_decompress(buf[start:end], max_size)
    return found if type(found) is bytes else None


def _uint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """A msgpack unsigned integer of at most 32 bits at ``pos``: (value, next)."""
    if pos >= end:
        return 0, BAD
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    if b == 0xCC:
        size = 1
    elif b == 0xCD:
        size = 2
    elif b == 0xCE:
        size = 4
    else:
        return 0, BAD
    stop = pos + 1 + size
    if stop > end:
        return 0, BAD
    return int.from_bytes(buf[pos + 1:stop], "big"), stop


def _raw(buf: bytes, pos: int, end: int, nil_ok: bool) -> tuple[int, int]:
    """A msgpack raw (fixraw, raw16, raw32) at ``pos``, or nil if ``nil_ok``:
    (start of its bytes, next); nil gives an empty span."""
    if pos >= end:
        return 0, BAD
    b = buf[pos]
    if 0xA0 <= b <= 0xBF:
        start, size = pos + 1, b - 0xA0
    elif b == 0xDA:
        if pos + 3 > end:
            return 0, BAD
        start, size = pos + 3, (buf[pos + 1] << 8) | buf[pos + 2]
    elif b == 0xDB:
        if pos + 5 > end:
            return 0, BAD
        start, size = pos + 5, int.from_bytes(buf[pos + 1:pos + 5], "big")
    elif b == 0xC0 and nil_ok:
        return pos + 1, pos + 1
    else:
        return 0, BAD
    if start + size > end:
        return 0, BAD
    return start, start + size


def _key(buf: bytes, pos: int, key: bytes) -> bool:
    return buf.startswith(key, pos)


def match(buf: bytes, me: bytes) -> tuple[object, ...] | None:
    """One message (type byte + body) in one of the hot layouts, or ``None``."""
    end = len(buf)
    if end < 2:
        return None
    kind = buf[0]
    count = buf[1]
    if kind == PING:
        return _ping(buf, end, count, me)
    if kind == ACK:
        return _ack(buf, end, count)
    if kind == ALIVE:
        return _alive(buf, end, count)
    if kind == SUSPECT or kind == DEAD:
        return _accusation(buf, end, count, kind)
    return None


def _ping(buf: bytes, end: int, count: int, me: bytes) -> tuple[object, ...] | None:
    if not 0x82 <= count <= 0x85 or not _key(buf, 2, K_NODE):
        return None
    node, pos = _raw(buf, 2 + len(K_NODE), end, False)
    if pos == BAD or not _key(buf, pos, K_SEQ):
        return None
    node_end = pos
    seq, pos = _uint(buf, pos + len(K_SEQ), end)
    if pos == BAD or seq > U32:
        return None
    left = count - 0x82
    addr_start = addr_end = port = 0
    if left and _key(buf, pos, K_SRC_ADDR):
        addr_start, pos = _raw(buf, pos + len(K_SRC_ADDR), end, True)
        if pos == BAD:
            return None
        addr_end = pos
        left -= 1
    if left and _key(buf, pos, K_SRC_NODE):
        _start, pos = _raw(buf, pos + len(K_SRC_NODE), end, False)
        if pos == BAD:
            return None
        left -= 1
    if left and _key(buf, pos, K_SRC_PORT):
        port, pos = _uint(buf, pos + len(K_SRC_PORT), end)
        if pos == BAD or port > U16:
            return None
        left -= 1
    if left or pos != end:
        return None
    to_me = node == node_end or buf[node:node_end] == me
    return (PING, seq, to_me, buf[addr_start:addr_end], port)


def _ack(buf: bytes, end: int, count: int) -> tuple[object, ...] | None:
    if count != 0x82 or not _key(buf, 2, K_PAYLOAD):
        return None
    payload, pos = _raw(buf, 2 + len(K_PAYLOAD), end, True)
    if pos == BAD or not _key(buf, pos, K_SEQ):
        return None
    payload_end = pos
    seq, pos = _uint(buf, pos + len(K_SEQ), end)
    if pos != end or seq > U32:
        return None
    return (ACK, seq, buf[payload:payload_end])


def _alive(buf: bytes, end: int, count: int) -> tuple[object, ...] | None:
    if count != 0x86 or not _key(buf, 2, K_ADDR):
        return None
    addr, pos = _raw(buf, 2 + len(K_ADDR), end, True)
    if pos == BAD or not _key(buf, pos, K_INC):
        return None
    addr_end = pos
    inc, pos = _uint(buf, pos + len(K_INC), end)
    if pos == BAD or inc > U32 or not _key(buf, pos, K_META):
        return None
    meta, pos = _raw(buf, pos + len(K_META), end, True)
    if pos == BAD or pos - meta > META_MAX or not _key(buf, pos, K_NODE):
        return None
    meta_end = pos
    node, pos = _raw(buf, pos + len(K_NODE), end, False)
    if pos == BAD or not _key(buf, pos, K_PORT):
        return None
    node_end = pos
    port, pos = _uint(buf, pos + len(K_PORT), end)
    if pos == BAD or port > U16 or not _key(buf, pos, K_VSN):
        return None
    vsn, pos = _raw(buf, pos + len(K_VSN), end, True)
    if pos != end or 0 < pos - vsn < VSN_SIZE:
        return None
    return (ALIVE, inc, buf[node:node_end], buf[addr:addr_end], port, buf[meta:meta_end], buf[vsn:pos])


def _accusation(buf: bytes, end: int, count: int, kind: int) -> tuple[object, ...] | None:
    if count != 0x83 or not _key(buf, 2, K_FROM):
        return None
    sender, pos = _raw(buf, 2 + len(K_FROM), end, False)
    if pos == BAD or not _key(buf, pos, K_INC):
        return None
    sender_end = pos
    inc, pos = _uint(buf, pos + len(K_INC), end)
    if pos == BAD or inc > U32 or not _key(buf, pos, K_NODE):
        return None
    node, pos = _raw(buf, pos + len(K_NODE), end, False)
    if pos != end:
        return None
    return (kind, inc, buf[node:pos], buf[sender:sender_end])


def ack(prefix: bytes, seq: int) -> bytes:
    """An ack message: ``prefix`` (type, map header, the Payload field, the
    SeqNo key) and ``seq`` as go-msgpack writes a uint."""
    if not 0 <= seq <= U32:
        raise ValueError(f"a sequence number is a uint32, not {seq}")
    if seq < 0x80:
        return prefix + bytes((seq,))
    if seq <= 0xFF:
        return prefix + bytes((0xCC, seq))
    if seq <= U16:
        return prefix + b"\xcd" + seq.to_bytes(2, "big")
    return prefix + b"\xce" + seq.to_bytes(4, "big")


# ----------------------------------------------------------------- LZW, read

LZW_LIT_WIDTH = 8
LZW_MAX_WIDTH = 12
LZW_CLEAR = 1 << LZW_LIT_WIDTH
LZW_EOF = LZW_CLEAR + 1
LZW_MAX_CODE = (1 << LZW_MAX_WIDTH) - 1


def lzw_decompress(data: bytes, max_size: int) -> bytes | tuple[int, ...]:
    """Go's compress/lzw reader (LSB, 8-bit literals), at most ``max_size``
    bytes out (the twin of the compiled ``lzw_decompress``; ``lzw.decompress``
    raises from its failures). Returns the bytes, or on failure (1,) the
    data ends without its end code; (2, code, next) an invalid code; (3,)
    more than ``max_size`` bytes."""
    found = LzwReader(data, max_size).read(sys.maxsize)
    assert found is not None        # (a turn this long ends only at the end, or a failure)
    return found


#: the table's single-byte strings, copied into each new table
_LITERALS = [bytes((i,)) for i in range(LZW_CLEAR)]


class LzwReader:
    """:func:`lzw_decompress` a turn at a time (the twin of the compiled
    ``LzwReader``): a stream's 20 MiB is read in pieces between which the
    pings are answered. :meth:`read` goes on from where the last turn
    stopped; the bytes and failures are :func:`lzw_decompress`'s."""

    def __init__(self, data: bytes, max_size: int) -> None:
        self._data = data
        self._max_size = max_size
        self._out = bytearray()
        self._table: list[bytes] = _LITERALS + [b""] * (LZW_MAX_CODE + 1 - LZW_CLEAR)
        # the reader's registers: code width, next code, when to widen, the last code (-1: none), bits held
        self._width, self._hi, self._overflow, self._last = LZW_LIT_WIDTH + 1, LZW_EOF, LZW_CLEAR << 1, -1
        self._bits = self._n_bits = self._pos = 0
        self._result: bytes | tuple[int, ...] | None = None

    def output(self) -> bytes:
        """The bytes read so far (all of them once read)."""
        return bytes(self._out)

    def read(self, budget: int) -> bytes | tuple[int, ...] | None:
        """Read until ``budget`` more bytes are out (a code's whole string:
        up to 4 KB past it) or the end: None if there is more to read, else
        :func:`lzw_decompress`'s result (again on every later call)."""
        if self._result is not None or budget <= 0:
            return self._result
        data, out, table = self._data, self._out, self._table
        width, hi, overflow, last = self._width, self._hi, self._overflow, self._last
        bits, n_bits, pos = self._bits, self._n_bits, self._pos
        size = len(data)
        room = self._max_size - len(out)     # bytes still allowed out
        result: bytes | tuple[int, ...] | None = None
        while True:
            while n_bits < width and pos < size:
                bits |= data[pos] << n_bits
                pos += 1
                n_bits += 8
            if n_bits < width:
                result = (1,)
                break
            code = bits & ((1 << width) - 1)
            bits >>= width
            n_bits -= width
            if code == LZW_CLEAR:
                width, hi, overflow, last = LZW_LIT_WIDTH + 1, LZW_EOF, LZW_CLEAR << 1, -1
                # a clear puts nothing out but costs a turn as a byte out would:
                # a stream of clears alone must end its turns too
                budget -= 1
                if budget <= 0:
                    break
                continue
            if code == LZW_EOF:
                result = bytes(out)
                break
            if code > hi:
                result = (2, code, hi)
                break
            if code == hi and last >= 0:
                # The code being defined right now: last's string plus its own head.
                entry = table[last] + table[last][:1]
            else:
                entry = table[code]
            n = len(entry)
            if n > room:
                result = (3,)
                break
            out += entry
            room -= n
            if last >= 0:
                table[hi] = table[last] + entry[:1]
            last, hi = code, hi + 1
            if hi >= overflow:
                if width == LZW_MAX_WIDTH:
                    # Table full: Go stops defining codes until the next clear.
                    last, hi = -1, hi - 1
                else:
                    width += 1
                    overflow <<= 1
            budget -= n
            if budget <= 0:
                break
        self._width, self._hi, self._overflow, self._last = width, hi, overflow, last
        self._bits, self._n_bits, self._pos = bits, n_bits, pos
        self._result = result
        return result

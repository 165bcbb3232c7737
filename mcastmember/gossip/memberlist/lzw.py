"""Go's ``compress/lzw`` in LSB order with 8-bit literals, both ways (pure
Python, and compiled both ways in ``_hot.pyx``; the pure-Python reader sits
beside the matcher's twin in ``_hot_py``, whose ``unwrap`` reads with it).

memberlist compresses with ``lzw.NewWriter(w, lzw.LSB, 8)`` (util.go); the
behaviour below is Go 1.19's ``compress/lzw`` (reader.go, writer.go), which
Debian's serf is built with, checked byte for byte against vectors:

- codes start 9 bits wide and grow to 12; 256 is clear, 257 end of data;
- the writer sends a clear code first, and a clear code (then starts over)
  when its next code would be 4095; it widens when the next code reaches a
  power of two;
- the reader stops growing its table at 4095 codes until the next clear, and
  refuses a code above the next one it can define; data must end with the
  end-of-data code (Go reports an unexpected EOF otherwise).

Decompression is bounded by ``max_size``: an LZW bomb (each 12-bit code can
stand for up to 4,094 bytes) stops at the bound, with work proportional to it.
A stream's may also be read a turn at a time (:func:`reader`), so that its
20 MiB never hold up the datagrams for long.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .errors import GossipWireError, Truncated
from . import _matcher_py as _hot_py
from .matcher import COMPILED_LZW, COMPILED_LZW_READER, COMPILED_LZW_WRITER
from .layout import LZW_LIT_WIDTH, LZW_MAX_WIDTH

_COMPILED: Callable[[bytes, int], "bytes | tuple[int, ...]"] | None = COMPILED_LZW
_COMPILED_WRITER: Callable[[bytes], bytes] | None = COMPILED_LZW_WRITER

_CLEAR = 1 << LZW_LIT_WIDTH
_EOF = _CLEAR + 1
_MAX_CODE = (1 << LZW_MAX_WIDTH) - 1


def compress(data: bytes) -> bytes:
    """``data`` as Go's ``lzw.NewWriter(w, lzw.LSB, 8)`` writes it, Close
    included. Every gossip datagram is tried compressed (memberlist keeps
    the result only when it is shorter), so this is the engine's hottest
    loop: the compiled writer (``_hot.pyx``) when it is built and chosen
    (see :mod:`.hot`), else :func:`compress_py`: the same bytes."""
    if _COMPILED_WRITER is not None and type(data) is bytes:
        return _COMPILED_WRITER(data)
    return compress_py(data)


def compress_py(data: bytes) -> bytes:
    """:func:`compress` in pure Python (the compiled writer's twin). The
    bit writer is inlined: locals, no method call per code."""
    out = bytearray()
    append = out.append
    width, hi, overflow = LZW_LIT_WIDTH + 1, _EOF, _CLEAR << 1
    table: dict[int, int] = {}  # (prefix code << 8 | byte) -> code
    get = table.get
    bits, n_bits = _CLEAR, width
    tail = []
    if data:
        code = data[0]
        for literal in data[1:]:
            key = code << 8 | literal
            found = get(key)
            if found is not None:
                code = found
                continue
            bits |= code << n_bits
            n_bits += width
            while n_bits >= 8:
                append(bits & 0xFF)
                bits >>= 8
                n_bits -= 8
            code = literal
            # incHi: the next implied code; a full table is cleared (clear code sent
            # at the current width) and the pair is not recorded.
            hi += 1
            if hi == overflow:
                width += 1
                overflow <<= 1
            if hi == _MAX_CODE:
                bits |= _CLEAR << n_bits
                n_bits += width
                width, hi, overflow = LZW_LIT_WIDTH + 1, _EOF, _CLEAR << 1
                table.clear()
                continue
            table[key] = hi
        tail.append((code, width))
        # Close runs incHi once more: it may widen (or clear) before the EOF code.
        hi += 1
        if hi == overflow:
            width += 1
        if hi == _MAX_CODE:
            tail.append((_CLEAR, width))
            width = LZW_LIT_WIDTH + 1
    tail.append((_EOF, width))
    for value, size in tail:
        bits |= value << n_bits
        n_bits += size
    while n_bits > 0:
        append(bits & 0xFF)
        bits >>= 8
        n_bits -= 8
    return bytes(out)


def decompress(data: bytes, max_size: int) -> bytes:
    """Reverse of :func:`compress` as Go's reader does it; at most ``max_size``
    bytes out. The compiled reader (``_hot.pyx``) when it is built and chosen
    (see :mod:`.hot`), else :func:`decompress_py`: the same bytes and the
    same errors."""
    if _COMPILED is not None and type(data) is bytes:
        return _opened(_COMPILED(data, max_size), max_size)
    return decompress_py(data, max_size)


def decompress_py(data: bytes, max_size: int) -> bytes:
    """:func:`decompress` in pure Python (the compiled reader's twin, in the
    matcher's pure-Python twin ``_hot_py``, whose ``unwrap`` reads with it)."""
    return _opened(_hot_py.lzw_decompress(data, max_size), max_size)


class TurnReader(Protocol):
    """What :func:`reader` gives: ``_hot_py.LzwReader`` or its compiled twin."""

    def output(self) -> bytes: ...

    def read(self, budget: int) -> bytes | tuple[int, ...] | None: ...


def reader(data: bytes, max_size: int) -> TurnReader:
    """A reader of ``data`` as :func:`decompress` reads it (at most
    ``max_size`` bytes out), a turn at a time (:func:`read_turn`): the
    compiled one when it is built and chosen (see :mod:`.hot`), else its
    pure-Python twin, which gives the same bytes and errors."""
    if COMPILED_LZW_READER is not None and type(data) is bytes:
        found: TurnReader = COMPILED_LZW_READER(data, max_size)
        return found
    return _hot_py.LzwReader(data, max_size)


def read_turn(lzw_reader: TurnReader, budget: int, max_size: int) -> bytes | None:
    """``lzw_reader`` (made with ``max_size``) read on until ``budget``
    more bytes are out: all the bytes once it has read them all, None if
    there is more to read; its failure raised as :func:`decompress` raises it."""
    result = lzw_reader.read(budget)
    return None if result is None else _opened(result, max_size)


def _opened(result: bytes | tuple[int, ...], max_size: int) -> bytes:
    """A reader's result: its bytes, or its failure raised."""
    if type(result) is bytes:
        return result
    assert isinstance(result, tuple)
    if result[0] == 1:
        raise Truncated("LZW data ends without its end-of-data code")
    if result[0] == 2:
        raise GossipWireError("bad_lzw", f"invalid LZW code {result[1]} (next is {result[2]})")
    raise GossipWireError("too_large", f"LZW data decompresses to more than {max_size} bytes")

"""msgpack exactly as hashicorp/go-msgpack 0.5.x writes it, on the ``msgpack`` package.

What go-msgpack's ``MsgpackHandle{}`` (the handle memberlist uses, WriteExt
off) does, read in its ``codec/msgpack.go`` and ``codec/encode.go``:

- strings AND byte slices are the old "raw" type: fixraw, raw16, raw32; never
  str8 nor bin. msgpack-python writes exactly that with ``use_bin_type=False``.
- unsigned and non-negative integers take the smallest of fixint, uint8..uint64;
  negative ones fixint or int8..int64: msgpack-python's choice too.
- a nil slice is nil (0xc0), so an empty ``[]byte`` Go built is nil on the wire.
- a struct is a map keyed by its Go field names **sorted** (the handle encodes
  from the sorted field table), ``omitempty`` fields dropped when zero.

Measured against the Go vectors (tests/interop/gossip_vectors): msgpack-python with
these options writes the same bytes, so nothing here is hand-written except the
field ordering and the bounds on decoding. Decoding accepts any msgpack (str8,
bin too: newer Go writers may use them) within :class:`Limits`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Union, cast

import msgpack

from .errors import GossipWireError, Truncated
from .limits import Limits

#: What decoding yields: raw strings stay bytes (Go strings need not be UTF-8).
Value = Union[None, bool, int, float, bytes, "list[Value]", "dict[Value, Value]"]


def pack(value: object) -> bytes:
    """One value as go-msgpack writes it (str and bytes both as raw)."""
    return msgpack.packb(value, use_bin_type=False)  # type: ignore[no-any-return]


def uint_size(value: int) -> int:
    """The bytes :func:`pack` writes for an unsigned integer below 2**32."""
    return 1 if value < 0x80 else 2 if value <= 0xFF else 3 if value <= 0xFFFF else 5


def raw_size(length: int) -> int:
    """The bytes :func:`pack` writes for a raw (string or bytes) of ``length`` bytes, its header included."""
    return length + (1 if length < 32 else 3 if length <= 0xFFFF else 5)


def pack_struct(fields: Mapping[str, object]) -> bytes:
    """A Go struct: a map of its (already omitempty-filtered) fields by Go name,
    in the byte order of the names, as go-msgpack sorts them."""
    return pack({name: fields[name] for name in sorted(fields)})


class MsgpackReader:
    """Consecutive msgpack values from one buffer, as go-msgpack's Decoder reads
    a stream (a push/pull is a header, then node states, then raw bytes).

    One unpacker over the whole buffer, so reading n values costs O(bytes),
    not O(n x bytes) as slicing the rest for each value would.
    """

    def __init__(self, buf: bytes, limits: Limits, offset: int = 0):
        self._limits = limits
        self._base = offset
        self._left = len(buf) - offset
        self._unpacker = msgpack.Unpacker(
            raw=True, strict_map_key=False, use_list=True,
            max_buffer_size=max(self._left, 1),
            max_str_len=limits.max_string, max_bin_len=limits.max_string,
            max_array_len=limits.max_container, max_map_len=limits.max_container,
            max_ext_len=0)
        if self._left > 0:
            self._unpacker.feed(memoryview(buf)[offset:])

    @property
    def offset(self) -> int:
        """Where the next value (or the raw bytes after the last one) starts."""
        return self._base + int(self._unpacker.tell())

    def read(self) -> Value:
        """The next value. Raises :class:`Truncated` if the buffer ends inside it
        and :class:`GossipWireError` on anything else bad or over the limits."""
        if self._left <= 0 or self.offset - self._base >= self._left:
            raise Truncated("msgpack value missing: no bytes left")
        try:
            value = self._unpacker.unpack()
        except msgpack.OutOfData:
            raise Truncated("msgpack value cut short") from None
        except (ValueError, TypeError, RecursionError, msgpack.UnpackException) as exc:
            # ValueError covers the max_*_len refusals and msgpack's StackError
            # (its own bound on depth); TypeError an unhashable map key.
            raise GossipWireError("bad_msgpack", f"undecodable msgpack ({exc})") from None
        _check_depth(value, self._limits.max_nesting)
        return value  # type: ignore[no-any-return]


    def raw_values(self, count: int, buf: bytes) -> list[bytes]:
        """The bytes of the next ``count`` values of ``buf`` (the buffer this
        reader reads), each passed over without building it nor checking it
        against the limits: whoever needs a value decodes its bytes. Raises
        :class:`Truncated` if the buffer ends inside them and
        :class:`GossipWireError` if one is malformed."""
        out: list[bytes] = []
        append = out.append
        skip, tell = self._unpacker.skip, self._unpacker.tell
        base, left = self._base, self._left
        start = tell()
        try:
            for _ in range(count):
                if start >= left:
                    raise Truncated("msgpack value missing: no bytes left")
                skip()
                end = tell()
                append(bytes(buf[base + start:base + end]))
                start = end
        except msgpack.OutOfData:
            raise Truncated("msgpack value cut short") from None
        except (ValueError, TypeError, RecursionError, msgpack.UnpackException) as exc:
            raise GossipWireError("bad_msgpack", f"undecodable msgpack ({exc})") from None
        return out


def unpack(buf: bytes, limits: Limits, offset: int = 0) -> tuple[Value, int]:
    """Decode the value starting at ``offset``; return it and the offset after it."""
    reader = MsgpackReader(buf, limits, offset)
    value = reader.read()
    return value, reader.offset


def _check_depth(value: object, max_nesting: int) -> None:
    """Containers may nest ``max_nesting`` deep (a struct is depth 1); ext types
    never appear in memberlist's messages.

    Only containers and ext values are stacked: a struct of scalars (every
    node state of a push/pull) costs one pass over its keys and values."""
    if not isinstance(value, _NESTED):
        return
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, msgpack.ExtType):
            raise GossipWireError("bad_msgpack", "msgpack extension types are not part of the wire")
        depth += 1
        if depth > max_nesting:
            raise GossipWireError("too_deep", f"msgpack nested deeper than {max_nesting}")
        groups: tuple[Iterable[object], ...] = (item.keys(), item.values()) if isinstance(item, dict) else (
            cast(list[object], item),)
        for children in groups:
            for child in children:
                if isinstance(child, _NESTED):
                    stack.append((child, depth))


#: what _check_depth looks into (or refuses)
_NESTED = (list, dict, msgpack.ExtType)
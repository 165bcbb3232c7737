"""Serf's structs as go-msgpack writes them, with bounds on what is read.

Serf encodes its messages with the same go-msgpack handle as memberlist (see
:mod:`mcastmember.gossip.msgpack_go`): structs are maps keyed by the Go field
names in sorted order, strings and byte slices are raw, nil slices are nil.
Serf's structs also hold lists, maps, nested structs and floats, so each field
here has a *kind* that knows how to write and check its value. Maps Serf keeps
(tags, StatusLTimes) go out with sorted keys: Go writes them in random order,
so any order is read, and ours is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from .. import msgpack_go
from ..errors import GossipWireError
from ..layout import MAX_PUSH_STATE_BYTES
from ..limits import Limits


@dataclass(frozen=True)
class SerfLimits:
    """What Serf's decoders accept before they give up with a GossipWireError.

    Serf itself bounds none of these on receive (its push/pull may carry any
    number of members and events); the defaults are generous but finite.
    """

    #: one Serf message or push/pull user state, in bytes
    max_message: int = MAX_PUSH_STATE_BYTES
    #: entries of StatusLTimes and LeftMembers in one push/pull
    max_members: int = 100_000
    #: slots of the Events list of a push/pull (Go sends its whole event
    #: buffer, 512 slots by default, most of them nil)
    max_event_slots: int = 16_384
    #: events at one Lamport time inside one slot
    max_events_per_slot: int = 256
    #: entries of any other list: query filters, key lists, node filters, coordinate
    max_list: int = 1_024
    #: tags in one node meta
    max_tags: int = 256

    def wire(self) -> Limits:
        """The msgpack reader's bounds: the largest of ours per container;
        each list is checked against its own bound after reading."""
        biggest = max(self.max_members, self.max_event_slots, self.max_events_per_slot,
                      self.max_list, self.max_tags)
        # push/pull > Events > userEvents > Events > userEvent: depth 5
        return Limits(max_string=self.max_message, max_container=biggest, max_nesting=5)


def go_str(raw: bytes) -> str:
    """A Go string's bytes as str (bytes that are not UTF-8 survive a round trip)."""
    return raw.decode("utf-8", "surrogateescape")


def go_bytes(text: str) -> bytes:
    """A str back to the Go string's bytes."""
    return text.encode("utf-8", "surrogateescape")


class Kind:
    """How one Go type is written and read."""

    def encode(self, value: Any) -> object:
        raise NotImplementedError

    def decode(self, raw: object, where: str, limits: SerfLimits) -> Any:
        raise NotImplementedError


class _Str(Kind):
    def encode(self, value: Any) -> object:
        return go_bytes(value)

    def decode(self, raw: object, where: str, limits: SerfLimits) -> Any:
        if not isinstance(raw, bytes):
            raise GossipWireError("bad_field", f"{where} is not a string")
        return go_str(raw)


class _Bytes(Kind):
    """[]byte: b"" goes out as nil, as Go sends a nil slice."""

    def encode(self, value: Any) -> object:
        return bytes(value) if value else None

    def decode(self, raw: object, where: str, limits: SerfLimits) -> Any:
        if not isinstance(raw, bytes):
            raise GossipWireError("bad_field", f"{where} is not a byte string")
        return raw


class _Bool(Kind):
    def encode(self, value: Any) -> object:
        return bool(value)

    def decode(self, raw: object, where: str, limits: SerfLimits) -> Any:
        if not isinstance(raw, bool):
            raise GossipWireError("bad_field", f"{where} is not a boolean")
        return raw


class _Int(Kind):
    def __init__(self, low: int, high: int):
        self.low = low
        self.high = high

    def encode(self, value: Any) -> object:
        if not self.low <= value <= self.high:
            raise ValueError(f"{value} is out of range [{self.low}, {self.high}]")
        return int(value)

    def decode(self, raw: object, where: str, limits: SerfLimits) -> Any:
        if not isinstance(raw, int) or isinstance(raw, bool):
            raise GossipWireError("bad_field", f"{where} is not an integer")
        if not self.low <= raw <= self.high:
            raise GossipWireError("bad_field", f"{where} is out of range: {raw}")
        return raw


class _Float(Kind):
    def encode(self, value: Any) -> object:
        return float(value)

    def decode(self, raw: object, where: str, limits: SerfLimits) -> Any:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise GossipWireError("bad_field", f"{where} is not a number")
        return float(raw)


class ListOf(Kind):
    """A Go slice. ``nil_when_empty``: Serf builds it with ``var`` (nil when
    empty) rather than ``make`` (an empty array); ``bound`` names the
    :class:`SerfLimits` field that caps its length."""

    def __init__(self, item: Kind, bound: str, nil_when_empty: bool):
        self.item = item
        self.bound = bound
        self.nil_when_empty = nil_when_empty

    def encode(self, value: Any) -> object:
        if not value and self.nil_when_empty:
            return None
        return [self.item.encode(v) for v in value]

    def decode(self, raw: object, where: str, limits: SerfLimits) -> Any:
        if not isinstance(raw, list):
            raise GossipWireError("bad_field", f"{where} is not a list")
        bound: int = getattr(limits, self.bound)
        if len(raw) > bound:
            raise GossipWireError("too_many", f"{where} has {len(raw)} entries, over the limit of {bound}")
        return [self.item.decode(v, f"{where}[{i}]", limits) for i, v in enumerate(raw)]


class MapOf(Kind):
    """A Go map with string keys: written with sorted keys, read in any order."""

    def __init__(self, value: Kind, bound: str):
        self.value = value
        self.bound = bound

    def encode(self, value: Any) -> object:
        return {go_bytes(k): self.value.encode(value[k]) for k in sorted(value, key=go_bytes)}

    def decode(self, raw: object, where: str, limits: SerfLimits) -> Any:
        if not isinstance(raw, dict):
            raise GossipWireError("bad_field", f"{where} is not a map")
        bound: int = getattr(limits, self.bound)
        if len(raw) > bound:
            raise GossipWireError("too_many", f"{where} has {len(raw)} entries, over the limit of {bound}")
        out: dict[str, Any] = {}
        for key, item in raw.items():
            name = STR.decode(key, f"{where} key", limits)
            out[name] = self.value.decode(item, f"{where}[{name!r}]", limits)
        return out


class Nested(Kind):
    """A struct inside a struct; ``optional``: a pointer, nil allowed (None)."""

    def __init__(self, cls: Callable[[], SerfStruct], optional: bool = False):
        self.cls = cls
        self.optional = optional

    def encode(self, value: Any) -> object:
        return None if value is None else value.to_go()

    def decode(self, raw: object, where: str, limits: SerfLimits) -> Any:
        cls: Any = self.cls
        value = cls.from_go(raw, limits, where)
        return self.cls() if value is None and not self.optional else value


STR = _Str()
BYTES = _Bytes()
BOOL = _Bool()
FLOAT = _Float()
U8 = _Int(0, 0xFF)
U16 = _Int(0, 0xFFFF)
U32 = _Int(0, 0xFFFF_FFFF)
U64 = _Int(0, (1 << 64) - 1)
I64 = _Int(-(1 << 63), (1 << 63) - 1)

#: a field: its Go name, the Python attribute, its kind
Field = tuple[str, str, Kind]

_T = TypeVar("_T", bound="SerfStruct")


@dataclass
class SerfStruct:
    """Base of Serf's structs: encoding and decoding by ``FIELDS``."""

    FIELDS: ClassVar[tuple[Field, ...]] = ()

    def to_go(self) -> dict[bytes, object]:
        """The struct as go-msgpack writes it: every field, by sorted Go name."""
        return {go.encode(): kind.encode(getattr(self, attr))
                for go, attr, kind in sorted(self.FIELDS)}

    def encode_body(self) -> bytes:
        """The msgpack body alone (no type byte)."""
        return msgpack_go.pack(self.to_go())

    @classmethod
    def from_go(cls: type[_T], raw: object, limits: SerfLimits, where: str = "") -> _T | None:
        """Build from a decoded msgpack value; nil gives None (Go's nil pointer).
        Unknown keys are ignored and missing ones left at zero, as go-msgpack does."""
        where = where or cls.__name__
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise GossipWireError("bad_message", f"{where} is not a msgpack map")
        kwargs: dict[str, object] = {}
        for go, attr, kind in cls.FIELDS:
            value = raw.get(go.encode())
            if value is not None:
                kwargs[attr] = kind.decode(value, f"{where}.{go}", limits)
        return cls(**kwargs)

    @classmethod
    def decode_body(cls: type[_T], buf: bytes, limits: SerfLimits, offset: int = 0) -> tuple[_T | None, int]:
        """Decode one struct at ``offset``; return it (None for nil) and the offset after it."""
        if len(buf) - offset > limits.max_message:
            raise GossipWireError("too_large", f"Serf message of {len(buf) - offset} bytes is over the limit")
        value, end = msgpack_go.unpack(buf, limits.wire(), offset)
        return cls.from_go(value, limits), end

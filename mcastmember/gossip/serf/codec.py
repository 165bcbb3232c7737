"""Serf's structs as go-msgpack writes them, with bounds on what is read.

Serf encodes its messages with the same go-msgpack handle as memberlist (see
:mod:`mcastmember.gossip.memberlist.msgpack_go`): structs are maps keyed by the Go field
names in sorted order, strings and byte slices are raw, nil slices are nil.
Serf's structs also hold lists, maps, nested structs and floats, so each field
here has a *kind* that knows how to write and check its value. Maps Serf keeps
(tags, StatusLTimes) go out with sorted keys: Go writes them in random order,
so any order is read, and ours is deterministic.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import msgpack

from ..memberlist import msgpack_go
from ..memberlist.errors import GossipWireError
from ..memberlist.layout import MAX_PUSH_STATE_BYTES
from ..memberlist.limits import Limits
from .layout import DEFAULT_EVENT_BUFFER


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
    #: buffer, 512 slots by default, most of them nil); our own buffer keeps
    #: that many event times, older ones it would drop anyway
    max_event_slots: int = DEFAULT_EVENT_BUFFER
    #: events at one Lamport time inside one slot
    max_events_per_slot: int = 256
    #: events of all the slots of one push/pull together: each costs some
    #: microseconds to decode and merge on the thread that answers the pings,
    #: and a peer's buffer holds one event per event time but for events made
    #: at the same time on several nodes (8 a slot on average here)
    max_push_events: int = 4_096
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


class Kind(abc.ABC):
    """How one Go type is written and read: each kind says both."""

    @abc.abstractmethod
    def encode(self, value: Any) -> object:
        """``value`` as msgpack writes it."""

    @abc.abstractmethod
    def decode(self, raw: object, where: str, limits: SerfLimits) -> Any:
        """``raw`` (as msgpack read it) as the value; GossipWireError naming ``where`` if it is not one."""


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


def read_push_pull(buf: bytes, limits: SerfLimits, offset: int = 0) -> object:
    """The msgpack value of a push/pull's user state (messagePushPull) at
    ``offset``, for :meth:`SerfStruct.from_go`, each list counted against
    its bound from its header before any of its entries is built:
    StatusLTimes and LeftMembers ``max_members``, Events ``max_event_slots``
    slots and ``max_push_events`` entries in all. Values under keys Serf
    does not send are skipped, never built. A push/pull's bytes are
    decoded on the thread that answers the pings: a state of millions of
    empty events (megabytes once compressed from kilobytes) would hold it
    for seconds if it were built first and counted after. Raises
    GossipWireError ("too_many" over a bound)."""
    if len(buf) - offset > limits.max_message:
        raise GossipWireError("too_large", f"Serf message of {len(buf) - offset} bytes is over the limit")
    reader = _BoundedReader(buf, offset, limits)
    try:
        value = reader.push_pull()
    except GossipWireError:
        raise
    except msgpack.OutOfData:
        raise GossipWireError("bad_msgpack", "Serf push/pull cut short") from None
    except (ValueError, TypeError, RecursionError, msgpack.UnpackException) as exc:
        raise GossipWireError("bad_msgpack", f"undecodable msgpack ({exc})") from None
    if reader.offset != len(buf):
        raise GossipWireError("trailing_bytes", f"{len(buf) - reader.offset} trailing bytes after a Serf push/pull")
    return value


def _too_many(where: str, count: int, bound: int) -> GossipWireError:
    return GossipWireError("too_many", f"{where} has {count} entries, over the limit of {bound}")


class _BoundedReader:
    """msgpack read a container header at a time (see read_push_pull)."""

    def __init__(self, buf: bytes, offset: int, limits: SerfLimits):
        self.buf, self.base, self.limits = buf, offset, limits
        self.events = 0
        # scalars only are built whole: no container is longer than a few entries
        self.unpacker = msgpack.Unpacker(
            raw=True, strict_map_key=False, max_buffer_size=max(len(buf) - offset, 1),
            max_str_len=limits.max_message, max_bin_len=limits.max_message,
            max_array_len=0, max_map_len=0, max_ext_len=0)
        self.unpacker.feed(memoryview(buf)[offset:])

    @property
    def offset(self) -> int:
        return self.base + int(self.unpacker.tell())

    def _peek(self) -> int:
        if self.offset >= len(self.buf):
            raise msgpack.OutOfData
        return self.buf[self.offset]

    def _map(self) -> int | None:
        """A map's length (its header read), or None if the next value is nil."""
        head = self._peek()
        if head == 0xC0:
            self.unpacker.skip()
            return None
        if 0x80 <= head <= 0x8F or head in (0xDE, 0xDF):
            return int(self.unpacker.read_map_header())
        raise GossipWireError("bad_field", "Serf push/pull: a map expected")

    def _array(self, where: str, bound: int) -> int | None:
        head = self._peek()
        if head == 0xC0:
            self.unpacker.skip()
            return None
        if not (0x90 <= head <= 0x9F or head in (0xDC, 0xDD)):
            raise GossipWireError("bad_field", f"{where} is not a list")
        count = int(self.unpacker.read_array_header())
        if count > bound:
            raise _too_many(where, count, bound)
        return count

    def _scalar(self) -> object:
        return self.unpacker.unpack()    # a container here is refused (max lengths 0)

    def _struct(self, fields: dict[bytes, Callable[[], object]]) -> object:
        """A struct (nil: None): the values of ``fields`` read by their
        readers, any other key's passed over unbuilt."""
        count = self._map()
        if count is None:
            return None
        out: dict[object, object] = {}
        for _ in range(count):
            key = self._scalar()
            read = fields.get(key) if isinstance(key, bytes) else None
            if read is None:
                self.unpacker.skip()
            else:
                out[key] = read()
        return out

    def push_pull(self) -> object:
        scalar = self._scalar
        return self._struct({b"LTime": scalar, b"EventLTime": scalar, b"QueryLTime": scalar,
                             b"StatusLTimes": self._status_ltimes, b"LeftMembers": self._left_members,
                             b"Events": self._slots})

    def _status_ltimes(self) -> object:
        count = self._map()
        if count is not None and count > self.limits.max_members:
            raise _too_many("PushPull.StatusLTimes", count, self.limits.max_members)
        return None if count is None else {self._scalar(): self._scalar() for _ in range(count)}

    def _left_members(self) -> object:
        count = self._array("PushPull.LeftMembers", self.limits.max_members)
        return None if count is None else [self._scalar() for _ in range(count)]

    def _slots(self) -> object:
        count = self._array("PushPull.Events", self.limits.max_event_slots)
        return None if count is None else [self._slot(i) for i in range(count)]

    def _slot(self, index: int) -> object:
        return self._struct({b"LTime": self._scalar, b"Events": lambda: self._slot_events(index)})

    def _slot_events(self, index: int) -> object:
        count = self._array(f"PushPull.Events[{index}].Events", self.limits.max_events_per_slot)
        if count is None:
            return None
        self.events += count
        if self.events > self.limits.max_push_events:
            raise _too_many("PushPull.Events", self.events, self.limits.max_push_events)
        entry = {b"Name": self._scalar, b"Payload": self._scalar}
        return [self._struct(entry) for _ in range(count)]

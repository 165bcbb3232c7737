"""memberlist's messages (net.go, 0.2.x) as dataclasses, encoded like Go does.

Each class lists its Go fields once (``_FIELDS``: Go name, attribute, kind,
omitempty); one generic encoder and one generic decoder serve them all.
Python attributes use snake_case; the wire uses the Go names.

Conventions, following what Go puts on the wire:

- byte fields (``[]byte``) are ``bytes``; ``b""`` goes out as nil (0xc0), as Go
  sends a nil slice. Both nil and an empty raw decode to ``b""``.
- string fields are ``str``; bytes that are not UTF-8 survive a round trip
  (surrogateescape), as Go strings carry any bytes.
- decoding ignores unknown keys and leaves missing ones at their zero value, as
  go-msgpack does, but refuses a value of the wrong type or out of range.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import ClassVar, Generic, TypeVar, Union, cast

from . import msgpack_go
from .errors import GossipWireError, Truncated
from .layout import META_MAX_SIZE, VSN_SIZE, MessageType, NodeState
from .limits import NODE_MEMO_BYTES, NODE_MEMO_ENTRIES, NODE_MEMO_LIMIT_SETS, NODE_MEMO_MAX_ONE, Limits

# Field kinds: the Go type, as (python type check, range) below.
_UINT_BITS = {"u8": 8, "u16": 16, "u32": 32}
GoField = tuple[str, str, str, bool]  # Go name, attribute, kind, omitempty


def _go_str(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _go_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


@dataclass
class _Struct:
    """Base of every message struct: encoding and decoding by ``_FIELDS``."""

    _FIELDS: ClassVar[tuple[GoField, ...]] = ()

    def to_go(self) -> dict[str, object]:
        """The fields Go would write, by Go name (omitempty ones dropped when zero)."""
        out: dict[str, object] = {}
        for go_name, attr, kind, omitempty in self._FIELDS:
            value = getattr(self, attr)
            if omitempty and not value:
                continue
            if kind == "str":
                value = _go_bytes(value)
            elif kind == "bytes" and not value:
                value = None  # Go's nil slice
            out[go_name] = value
        return out

    def encode_body(self) -> bytes:
        """The msgpack body alone (no type byte)."""
        return msgpack_go.pack_struct(self.to_go())

    @classmethod
    def from_go(cls: type[_S], value: object) -> _S:
        """Build from a decoded msgpack map, checking every known field."""
        if not isinstance(value, dict):
            raise GossipWireError("bad_message", f"{cls.__name__} is not a msgpack map")
        kwargs: dict[str, object] = {}
        for go_name, attr, kind, _omitempty in cls._FIELDS:
            raw = value.get(go_name.encode())
            if raw is None:
                continue  # missing or nil: the zero value, as Go leaves it
            kwargs[attr] = _convert(cls.__name__, go_name, kind, raw)
        obj = cls(**kwargs)
        obj.check()
        return obj

    @classmethod
    def decode_body(cls: type[_S], buf: bytes, limits: Limits, offset: int = 0) -> tuple[_S, int]:
        """Decode one struct at ``offset``; return it and the offset after it."""
        value, end = msgpack_go.unpack(buf, limits, offset)
        return cls.from_go(value), end

    @classmethod
    def read(cls: type[_S], reader: msgpack_go.MsgpackReader) -> _S:
        """The next struct of a stream of msgpack values."""
        return cls.from_go(reader.read())

    def check(self) -> None:
        """Constraints beyond the Go types (overridden where memberlist has some)."""


_S = TypeVar("_S", bound=_Struct)


def _convert(struct: str, go_name: str, kind: str, raw: object) -> object:
    where = f"{struct}.{go_name}"
    if kind in ("str", "bytes"):
        if not isinstance(raw, bytes):
            raise GossipWireError("bad_field", f"{where} is not a string")
        return _go_str(raw) if kind == "str" else raw
    if kind == "bool":
        if not isinstance(raw, bool):
            raise GossipWireError("bad_field", f"{where} is not a boolean")
        return raw
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise GossipWireError("bad_field", f"{where} is not an integer")
    high = (1 << _UINT_BITS[kind]) - 1 if kind in _UINT_BITS else (1 << 63) - 1
    low = 0 if kind != "int" else -(1 << 63)
    if not low <= raw <= high:
        raise GossipWireError("bad_field", f"{where} is out of range: {raw}")
    return raw


def _check_vsn(struct: _Struct, vsn: bytes) -> None:
    # memberlist indexes Vsn[0..5] without checking (a short one panics Go):
    # refuse it here instead. Empty is what protocol 1 peers send.
    if vsn and len(vsn) < VSN_SIZE:
        raise GossipWireError("bad_field", f"{type(struct).__name__}.Vsn has {len(vsn)} bytes, not {VSN_SIZE}")


def _check_meta(struct: _Struct, meta: bytes) -> None:
    if len(meta) > META_MAX_SIZE:
        raise GossipWireError("too_large", f"{type(struct).__name__}.Meta is over {META_MAX_SIZE} bytes")


@dataclass
class Ping(_Struct):
    """ping: a direct probe; ``node`` lets the target refuse a probe meant for
    another (restarted) node; source_* ask for the reply to go there."""

    TYPE: ClassVar[MessageType] = MessageType.PING
    _FIELDS: ClassVar[tuple[GoField, ...]] = (
        ("SeqNo", "seq_no", "u32", False), ("Node", "node", "str", False),
        ("SourceAddr", "source_addr", "bytes", True), ("SourcePort", "source_port", "u16", True),
        ("SourceNode", "source_node", "str", True))
    seq_no: int = 0
    node: str = ""
    source_addr: bytes = b""
    source_port: int = 0
    source_node: str = ""


@dataclass
class IndirectPing(_Struct):
    """indirectPingReq: ask a peer to probe ``target`` for us; ``nack`` asks for a
    nack if it hears nothing (protocol >= 4)."""

    TYPE: ClassVar[MessageType] = MessageType.INDIRECT_PING
    _FIELDS: ClassVar[tuple[GoField, ...]] = (
        ("SeqNo", "seq_no", "u32", False), ("Target", "target", "bytes", False),
        ("Port", "port", "u16", False), ("Node", "node", "str", False), ("Nack", "nack", "bool", False),
        ("SourceAddr", "source_addr", "bytes", True), ("SourcePort", "source_port", "u16", True),
        ("SourceNode", "source_node", "str", True))
    seq_no: int = 0
    target: bytes = b""
    port: int = 0
    node: str = ""
    nack: bool = False
    source_addr: bytes = b""
    source_port: int = 0
    source_node: str = ""


@dataclass
class Ack(_Struct):
    """ackResp: the answer to a ping, with the ping delegate's payload."""

    TYPE: ClassVar[MessageType] = MessageType.ACK
    _FIELDS: ClassVar[tuple[GoField, ...]] = (
        ("SeqNo", "seq_no", "u32", False), ("Payload", "payload", "bytes", False))
    seq_no: int = 0
    payload: bytes = b""


@dataclass
class Nack(_Struct):
    """nackResp: an indirect prober heard nothing back."""

    TYPE: ClassVar[MessageType] = MessageType.NACK
    _FIELDS: ClassVar[tuple[GoField, ...]] = (("SeqNo", "seq_no", "u32", False),)
    seq_no: int = 0


@dataclass
class Err(_Struct):
    """errResp: a stream peer's error, relayed."""

    TYPE: ClassVar[MessageType] = MessageType.ERR
    _FIELDS: ClassVar[tuple[GoField, ...]] = (("Error", "error", "str", False),)
    error: str = ""


@dataclass
class Suspect(_Struct):
    """suspect: ``from_`` suspects ``node`` at ``incarnation``."""

    TYPE: ClassVar[MessageType] = MessageType.SUSPECT
    _FIELDS: ClassVar[tuple[GoField, ...]] = (
        ("Incarnation", "incarnation", "u32", False), ("Node", "node", "str", False),
        ("From", "from_", "str", False))
    incarnation: int = 0
    node: str = ""
    from_: str = ""


@dataclass
class Dead(_Struct):
    """dead: ``node`` is dead at ``incarnation``; from itself, it is a leave."""

    TYPE: ClassVar[MessageType] = MessageType.DEAD
    _FIELDS: ClassVar[tuple[GoField, ...]] = Suspect._FIELDS
    incarnation: int = 0
    node: str = ""
    from_: str = ""


@dataclass
class Alive(_Struct):
    """alive: ``node`` lives at addr:port with this meta (Serf's tags) and the
    versions it speaks (``vsn``: pmin, pmax, pcur, dmin, dmax, dcur)."""

    TYPE: ClassVar[MessageType] = MessageType.ALIVE
    _FIELDS: ClassVar[tuple[GoField, ...]] = (
        ("Incarnation", "incarnation", "u32", False), ("Node", "node", "str", False),
        ("Addr", "addr", "bytes", False), ("Port", "port", "u16", False),
        ("Meta", "meta", "bytes", False), ("Vsn", "vsn", "bytes", False))
    incarnation: int = 0
    node: str = ""
    addr: bytes = b""
    port: int = 0
    meta: bytes = b""
    vsn: bytes = b""

    def check(self) -> None:
        _check_meta(self, self.meta)
        _check_vsn(self, self.vsn)


@dataclass
class PushPullHeader(_Struct):
    """pushPullHeader: how many node states and user-state bytes follow."""

    TYPE: ClassVar[MessageType] = MessageType.PUSH_PULL
    _FIELDS: ClassVar[tuple[GoField, ...]] = (
        ("Nodes", "nodes", "int", False), ("UserStateLen", "user_state_len", "int", False),
        ("Join", "join", "bool", False))
    nodes: int = 0
    user_state_len: int = 0
    join: bool = False

    def check(self) -> None:
        if self.nodes < 0 or self.user_state_len < 0:
            raise GossipWireError("bad_field", "PushPullHeader has a negative count")


@dataclass
class PushNodeState(_Struct):
    """pushNodeState: one node of a push/pull."""

    _FIELDS: ClassVar[tuple[GoField, ...]] = (
        ("Name", "name", "str", False), ("Addr", "addr", "bytes", False), ("Port", "port", "u16", False),
        ("Meta", "meta", "bytes", False), ("Incarnation", "incarnation", "u32", False),
        ("State", "state", "int", False), ("Vsn", "vsn", "bytes", False))
    name: str = ""
    addr: bytes = b""
    port: int = 0
    meta: bytes = b""
    incarnation: int = 0
    state: int = NodeState.ALIVE
    vsn: bytes = b""

    def check(self) -> None:
        _check_meta(self, self.meta)
        _check_vsn(self, self.vsn)


@dataclass
class UserMsgHeader(_Struct):
    """userMsgHeader: a user message over TCP, its length first."""

    TYPE: ClassVar[MessageType] = MessageType.USER
    _FIELDS: ClassVar[tuple[GoField, ...]] = (("UserMsgLen", "user_msg_len", "int", False),)
    user_msg_len: int = 0

    def check(self) -> None:
        if self.user_msg_len < 0:
            raise GossipWireError("bad_field", "UserMsgHeader has a negative length")


@dataclass
class Compress(_Struct):
    """compress: ``buf`` compressed with algorithm ``algo`` (0: LZW)."""

    TYPE: ClassVar[MessageType] = MessageType.COMPRESS
    _FIELDS: ClassVar[tuple[GoField, ...]] = (
        ("Algo", "algo", "u8", False), ("Buf", "buf", "bytes", False))
    algo: int = 0
    buf: bytes = b""


@dataclass
class PushPull:
    """A whole push/pull: the header's join flag, the node states, the user state."""

    join: bool = False
    nodes: list[PushNodeState] = field(default_factory=list)
    user_state: bytes = b""


#: The messages that are one struct after their type byte.
Message = Union[Ping, IndirectPing, Ack, Nack, Err, Suspect, Dead, Alive, Compress]
SIMPLE: dict[MessageType, type[Message]] = {
    cls.TYPE: cls for cls in (Ping, IndirectPing, Ack, Nack, Err, Suspect, Dead, Alive, Compress)}


def encode(msg: Message) -> bytes:
    """A message as memberlist's ``encode()``: its type byte, then the msgpack body."""
    return bytes((msg.TYPE,)) + msg.encode_body()


def decode(buf: bytes, limits: Limits) -> Message:
    """One single-struct message (type byte + body), as a packet or compound part
    carries it. The body must take the whole buffer: nothing follows it there."""
    if not buf:
        raise Truncated("empty message")
    try:
        cls = SIMPLE[MessageType(buf[0])]
    except (ValueError, KeyError):
        raise GossipWireError("bad_type", f"message type {buf[0]} is not a single-struct message") from None
    msg, end = cls.decode_body(buf, limits, 1)
    if end != len(buf):
        raise GossipWireError("trailing_bytes", f"{len(buf) - end} trailing bytes after a {type(msg).__name__} message")
    return msg


#: A node state's fields in :class:`PushNodeState`'s order: name, addr, port,
#: meta, incarnation, state, vsn.
NodeFields = tuple[str, bytes, int, bytes, int, int, bytes]

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class NodeMemo(Generic[_K, _V]):
    """Node states recently encoded or decoded, shared by every engine of the
    process (a simulator's thousands of members hold the same states; a
    member sends and receives its unchanged table again and again).

    Bounded in entries and in bytes (the encoding's length, which the key and
    value each about repeat), least recently used dropped first and counted
    in :attr:`evicted`; an encoding over ``max_one`` bytes is never kept.
    Callers hold :attr:`lock` around their lookups (one per push/pull)."""

    def __init__(self, entries: int, max_bytes: int, max_one: int) -> None:
        self.entries, self.max_bytes, self.max_one = entries, max_bytes, max_one
        self.lock = threading.Lock()
        self.bytes = 0
        self.evicted = 0
        self._map: OrderedDict[_K, tuple[_V, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._map)

    def get(self, key: _K) -> _V | None:
        found = self._map.get(key)
        if found is None:
            return None
        self._map.move_to_end(key)
        return found[0]

    def get_many(self, keys: Iterable[_K]) -> list[_V | None]:
        """:meth:`get` of each key (None for one not kept or unhashable)."""
        out: list[_V | None] = []
        append = out.append
        get, move = self._map.get, self._map.move_to_end
        for key in keys:
            try:
                found = get(key)
            except TypeError:   # an unhashable field (a bytearray meta): never kept
                append(None)
                continue
            if found is None:
                append(None)
            else:
                move(key)
                append(found[0])
        return out

    def lookup(self, keys: list[_K], make: Callable[[_K], tuple[_V, int]]) -> list[_V]:
        """The value of each key: the one kept, else ``make(key)``'s (value,
        size), then kept (unless the key is unhashable or it is too big)."""
        with self.lock:
            found = self.get_many(keys)
            for index, value in enumerate(found):
                if value is None:
                    key = keys[index]
                    value, size = make(key)
                    found[index] = value
                    try:
                        self.put(key, value, size)
                    except TypeError:   # an unhashable field (a bytearray meta)
                        pass
        return cast("list[_V]", found)

    def put(self, key: _K, value: _V, size: int) -> None:
        if size > self.max_one or key in self._map:
            return
        self._map[key] = (value, size)
        self.bytes += size
        while len(self._map) > self.entries or self.bytes > self.max_bytes:
            _key, (_value, dropped) = self._map.popitem(last=False)
            self.bytes -= dropped
            self.evicted += 1

    def clear(self) -> None:
        with self.lock:
            self._map.clear()
            self.bytes = 0


#: node states by their fields -> their encodings (what the general encoder writes)
ENCODED: NodeMemo[NodeFields, bytes] = NodeMemo(NODE_MEMO_ENTRIES, NODE_MEMO_BYTES, NODE_MEMO_MAX_ONE)
#: encodings -> the fields the general decoder read from them, within the
#: default limits (see :func:`decoded_memo` for others)
DECODED: NodeMemo[bytes, NodeFields] = NodeMemo(NODE_MEMO_ENTRIES, NODE_MEMO_BYTES, NODE_MEMO_MAX_ONE)
#: the decode memos by the limits a node state's decoding depends on (an
#: encoding taken within lax limits is no answer for stricter ones)
_DECODED_BY_LIMITS: dict[tuple[int, int, int], NodeMemo[bytes, NodeFields]] = {
    (Limits().max_string, Limits().max_container, Limits().max_nesting): DECODED}


def decoded_memo(limits: Limits) -> NodeMemo[bytes, NodeFields] | None:
    """The decode memo for ``limits``: one per distinct (max_string,
    max_container, max_nesting), at most :data:`NODE_MEMO_LIMIT_SETS` of
    them; None past that (the general decoder, unremembered)."""
    key = (limits.max_string, limits.max_container, limits.max_nesting)
    memo = _DECODED_BY_LIMITS.get(key)
    if memo is None and len(_DECODED_BY_LIMITS) < NODE_MEMO_LIMIT_SETS:
        memo = _DECODED_BY_LIMITS.setdefault(key, NodeMemo(NODE_MEMO_ENTRIES, NODE_MEMO_BYTES, NODE_MEMO_MAX_ONE))
    return memo


def _fields(node: PushNodeState) -> NodeFields:
    return (node.name, node.addr, node.port, node.meta, node.incarnation, node.state, node.vsn)


def _push_pull_head(join: bool, nodes: int, user_state: bytes) -> bytes:
    header = PushPullHeader(nodes=nodes, user_state_len=len(user_state), join=join)
    return bytes((MessageType.PUSH_PULL,)) + header.encode_body()


def encode_push_pull(state: PushPull) -> bytes:
    """A push/pull as sendLocalState writes it before compression/encryption."""
    parts = [_push_pull_head(state.join, len(state.nodes), state.user_state)]
    parts += [node.encode_body() for node in state.nodes]
    parts.append(state.user_state)
    return b"".join(parts)


def encode_push_pull_fields(join: bool, nodes: Iterable[NodeFields], user_state: bytes) -> bytes:
    """What :func:`encode_push_pull` writes for ``PushPull(join,
    [PushNodeState(*f) for f in nodes], user_state)``, each node state's
    encoding taken from :data:`ENCODED` when its fields were seen before
    (the fields are the whole input of the encoding: a changed node has
    other fields, so nothing needs invalidating). The fields must have the
    types :class:`PushNodeState` declares (a ``bool`` equals an ``int``)."""
    keys = list(nodes)
    head = _push_pull_head(join, len(keys), user_state)
    return b"".join([head, *ENCODED.lookup(keys, _encode_fields), user_state])


def _encode_fields(fields: NodeFields) -> tuple[bytes, int]:
    body = PushNodeState(*fields).encode_body()
    return body, len(body)


def decode_push_pull(buf: bytes, limits: Limits, offset: int = 0) -> tuple[PushPull, int]:
    """A push/pull body (after the type byte) at ``offset``; returns it and the
    offset after the user state. Raises :class:`Truncated` if it is incomplete.

    A node state whose bytes were decoded before is taken from
    the decode memo for ``limits`` (:func:`decoded_memo`); any trouble and the push/pull is decoded again without
    it, so that errors are the general decoder's."""
    try:
        return _decode_push_pull(buf, limits, offset, True)
    except GossipWireError:
        return _decode_push_pull(buf, limits, offset, False)


def _decode_push_pull(buf: bytes, limits: Limits, offset: int, remembered: bool) -> tuple[PushPull, int]:
    reader = msgpack_go.MsgpackReader(buf, limits, offset)
    header = PushPullHeader.read(reader)
    if header.nodes > limits.max_push_nodes:
        raise GossipWireError("too_many", f"push/pull announces {header.nodes} nodes, over {limits.max_push_nodes}")
    if header.user_state_len > limits.max_user_state:
        raise GossipWireError("too_large", f"push/pull user state of {header.user_state_len} bytes is over the limit")
    memo = decoded_memo(limits) if remembered else None
    if memo is not None:
        nodes = _read_nodes_remembered(memo, reader, header.nodes, buf, limits)
    else:
        nodes = [PushNodeState.read(reader) for _ in range(header.nodes)]
    pos = reader.offset
    end = pos + header.user_state_len
    if end > len(buf):
        raise Truncated(f"push/pull user state cut short ({len(buf) - pos} of {header.user_state_len} bytes)")
    return PushPull(join=header.join, nodes=nodes, user_state=bytes(buf[pos:end])), end


def _read_nodes_remembered(memo: NodeMemo[bytes, NodeFields], reader: msgpack_go.MsgpackReader, count: int, buf: bytes,
                           limits: Limits) -> list[PushNodeState]:
    """``count`` node states, each one's bytes looked up in ``memo`` (kept
    for ``limits``) and decoded alone (by the general decoder) only when not found."""
    def decode(raw: bytes) -> tuple[NodeFields, int]:
        node, used = PushNodeState.decode_body(raw, limits)
        if used != len(raw):
            raise GossipWireError("bad_msgpack", "a node state's value ends elsewhere when decoded")
        return _fields(node), used

    return [PushNodeState(*fields) for fields in memo.lookup(reader.raw_values(count, buf), decode)]


def encode_user_stream(payload: bytes) -> bytes:
    """A user message as sendUserMsg writes it on TCP: type, header, payload."""
    return bytes((MessageType.USER,)) + UserMsgHeader(user_msg_len=len(payload)).encode_body() + payload


def decode_user_stream(buf: bytes, limits: Limits, offset: int = 0) -> tuple[bytes, int]:
    """A TCP user message body (after the type byte): its payload and end offset."""
    header, pos = UserMsgHeader.decode_body(buf, limits, offset)
    if header.user_msg_len > limits.max_user_state:
        raise GossipWireError("too_large", f"user message of {header.user_msg_len} bytes is over the limit")
    end = pos + header.user_msg_len
    if end > len(buf):
        raise Truncated("user message cut short")
    return bytes(buf[pos:end]), end


"""Just enough of Java's serialization stream format to answer two Tomcat
messages, without ever building a Java object.

A member that Tomcat lists must answer two kinds of message at once, or a
Tomcat waits on it (see docs/tomcat.md, "Joining a Tomcat cluster"):

- an RPC request (``org.apache.catalina.tribes.group.RpcMessage``, e.g. a
  replicated map's "who runs this map?"), answered as a Tomcat node without
  that RPC channel answers: with a ``NoRpcChannelReply`` carrying the
  request's ids, so the requester stops counting on us;
- a ``DeltaManager``'s request for all sessions (``SessionMessageImpl`` with
  ``EVT_GET_ALL_SESSIONS``), answered with "transfer complete": we hold no
  sessions.

This module reads the stream's class descriptors and a few fixed-size values,
with every length checked against the bytes present; anything it does not
expect makes it give up (returns None). It never resolves a class, never
follows an object graph and never runs anything: the answers are written
from the request's own descriptors and ids, or patched in place.
(Format: the Java Object Serialization Specification, chapter 6.)
"""

from __future__ import annotations

import struct

from . import layout as L

_PRIMITIVE_SIZES = {b"B": 1, b"C": 2, b"D": 8, b"F": 4, b"I": 4, b"J": 8, b"S": 2, b"Z": 1}
# Bounds on the ids an RPC request carries (Tomcat's are 16 bytes and a map name).
MAX_RPC_ID_LEN = 4096
MAX_CLASS_DEPTH = 8


class _Unrecognised(Exception):
    """The stream is not one of the shapes we answer."""


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise _Unrecognised("truncated")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def byte(self) -> int:
        return self.take(1)[0]

    def unpack(self, fmt: str) -> int:
        """One integer of ``fmt`` (every format read here is one integer)."""
        value: int = struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        return value

    def utf(self) -> bytes:
        return self.take(self.unpack(">H"))


class _ClassDesc:
    __slots__ = ("name", "suid", "flags", "fields")

    def __init__(self, name: str, suid: int, flags: int, fields: list[tuple[bytes, str]]) -> None:
        self.name, self.suid, self.flags, self.fields = name, suid, flags, fields


def _string_object(r: _Reader) -> None:
    """Skip a string in a field's type or a String value (or a null / a back
    reference): the only objects the messages we answer carry before the
    values we read."""
    tag = r.byte()
    if tag == L.TC_STRING:
        r.utf()
    elif tag == L.TC_LONGSTRING:
        r.take(r.unpack(">q"))
    elif tag == L.TC_REFERENCE:
        r.take(4)
    elif tag != L.TC_NULL:
        raise _Unrecognised(f"object of kind 0x{tag:02x}")


def _class_chain(r: _Reader) -> list[_ClassDesc]:
    """Read a new class descriptor and its superclasses: [class, super, ...]."""
    chain: list[_ClassDesc] = []
    tag = r.byte()
    while tag == L.TC_CLASSDESC:
        if len(chain) >= MAX_CLASS_DEPTH:
            raise _Unrecognised("class hierarchy too deep")
        name = r.utf().decode("utf-8", "replace")
        suid = r.unpack(">q")
        flags = r.byte()
        fields: list[tuple[bytes, str]] = []
        for _ in range(r.unpack(">H")):
            code = r.take(1)
            field = r.utf().decode("utf-8", "replace")
            if code in (b"L", b"["):
                _string_object(r)
            elif code not in _PRIMITIVE_SIZES:
                raise _Unrecognised("bad field type")
            fields.append((code, field))
        if r.byte() != L.TC_ENDBLOCKDATA:      # class annotations: ObjectOutputStream writes none
            raise _Unrecognised("class annotation")
        chain.append(_ClassDesc(name, suid, flags, fields))
        tag = r.byte()
    if tag != L.TC_NULL or not chain:
        raise _Unrecognised("class descriptor")
    return chain


def _object(data: bytes) -> tuple[_Reader, list[_ClassDesc]]:
    """(reader positioned at the object's values, class chain) of a stream
    holding one new object."""
    if data[:4] != L.JAVA_STREAM_MAGIC:
        raise _Unrecognised("not a Java serialization stream")
    r = _Reader(data, 4)
    if r.byte() != L.TC_OBJECT:
        raise _Unrecognised("not an object")
    return r, _class_chain(r)


class RpcRequest:
    """What a NoRpcChannelReply must echo: RpcMessage's serialVersionUID as
    the sender's JVM has it, and the request's two ids."""

    __slots__ = ("rpc_message_suid", "uuid", "rpc_id")

    def __init__(self, rpc_message_suid: int, uuid: bytes, rpc_id: bytes) -> None:
        self.rpc_message_suid, self.uuid, self.rpc_id = rpc_message_suid, uuid, rpc_id


class _BlockData(_Reader):
    """An Externalizable object's block data, pulled segment by segment
    from the stream as it is read."""

    __slots__ = ("stream",)

    def __init__(self, stream: _Reader) -> None:
        super().__init__(b"")
        self.stream = stream

    def take(self, n: int) -> bytes:
        while self.pos + n > len(self.data) and n <= MAX_RPC_ID_LEN + 8:
            tag = self.stream.byte()
            if tag == L.TC_BLOCKDATA:
                self.data += self.stream.take(self.stream.byte())
            elif tag == L.TC_BLOCKDATALONG:
                self.data += self.stream.take(self.stream.unpack(">i"))
            else:
                raise _Unrecognised("block data")
        return super().take(n)


def rpc_request(data: bytes) -> RpcRequest | None:
    """The ids of an RPC request (an RpcMessage that is not a reply), or None."""
    try:
        r, chain = _object(data)
        desc = chain[0]
        wanted = L.SC_EXTERNALIZABLE | L.SC_BLOCK_DATA
        if (len(chain) != 1 or desc.name != L.RPC_MESSAGE_CLASS or desc.fields
                or desc.flags & wanted != wanted):
            return None
        block = _BlockData(r)
        if block.byte() != 0:     # reply == true: a response to someone's request
            return None
        ids: list[bytes] = []
        for _ in range(2):        # the uuid, then the rpc id
            n = block.unpack(">i")
            if not 0 <= n <= MAX_RPC_ID_LEN:
                return None
            ids.append(bytes(block.take(n)))
        return RpcRequest(desc.suid, ids[0], ids[1])
    except _Unrecognised:
        return None


def _class_descriptor(name: str, suid: int, flags: int, super_written: bytes) -> bytes:
    encoded = name.encode("utf-8")
    return (bytes((L.TC_CLASSDESC,)) + struct.pack(">H", len(encoded)) + encoded
            + struct.pack(">qBH", suid, flags, 0) + bytes((L.TC_ENDBLOCKDATA,)) + super_written)


def no_rpc_reply(request: RpcRequest) -> bytes:
    """The serialized ``RpcMessage.NoRpcChannelReply`` answering ``request``:
    its writeExternal writes the uuid and the rpc id, each int32-prefixed."""
    flags = L.SC_EXTERNALIZABLE | L.SC_BLOCK_DATA
    rpc_message = _class_descriptor(L.RPC_MESSAGE_CLASS, request.rpc_message_suid, flags,
                                    bytes((L.TC_NULL,)))
    reply = _class_descriptor(L.NO_RPC_REPLY_CLASS, L.NO_RPC_REPLY_SUID, flags, rpc_message)
    block = (struct.pack(">i", len(request.uuid)) + request.uuid
             + struct.pack(">i", len(request.rpc_id)) + request.rpc_id)
    if len(block) <= 0xFF:
        framed = bytes((L.TC_BLOCKDATA, len(block))) + block
    else:
        framed = bytes((L.TC_BLOCKDATALONG,)) + struct.pack(">i", len(block)) + block
    return (L.JAVA_STREAM_MAGIC + bytes((L.TC_OBJECT,)) + reply + framed
            + bytes((L.TC_ENDBLOCKDATA,)))


def _session_event_offset(data: bytes) -> int | None:
    """Where the event type of a serialized SessionMessageImpl is, or None.
    The whole stream is walked, so a truncated or extended one is refused."""
    r, chain = _object(data)
    if chain[0].name != L.SESSION_MESSAGE_CLASS:
        return None
    offset = None
    # Values are written from the topmost superclass down; each class's
    # primitives first, then its objects, in its descriptor's field order.
    for desc in reversed(chain):
        if desc.flags != L.SC_SERIALIZABLE:    # custom writeObject or Externalizable
            raise _Unrecognised("class writes its own data")
        for code, name in desc.fields:
            if desc is chain[0] and name == L.SESSION_EVENT_FIELD and code == b"I":
                offset = r.pos
            if code in _PRIMITIVE_SIZES:
                r.take(_PRIMITIVE_SIZES[code])
            else:
                _string_object(r)     # a request for all sessions carries no session bytes
    return offset if r.pos == len(data) else None


def session_state_reply(data: bytes) -> bytes | None:
    """For a DeltaManager's "send me all sessions" request, the same message
    with its event type changed to "transfer complete"; otherwise None.

    Keeping the request's timestamp matters: the requester then applies the
    session changes it queued while waiting (those stamped after it) and
    drops none. The context name, which selects the manager, is kept too."""
    try:
        offset = _session_event_offset(data)
    except _Unrecognised:
        return None
    if offset is None:
        return None
    if struct.unpack_from(">i", data, offset)[0] != L.EVT_GET_ALL_SESSIONS:
        return None
    reply = bytearray(data)
    struct.pack_into(">i", reply, offset, L.EVT_ALL_SESSION_TRANSFERCOMPLETE)
    return bytes(reply)

"""The Tribes 10.1 membership packet declared with construct.

A readable, executable statement of the layout in ``_layout``, used by the
tests as an independent oracle for the hand-written codecs. It is slow (and
construct is slow to import), so nothing on the heartbeat path uses it and
``import mcastmember`` does not import it.

Never ``compile()`` this on network input: compiled construct parsers accept
truncated packets silently.
"""

# construct ships no type information and its field singletons look like
# functions to pyright, which then rejects the "name" / field DSL.
# pyright: reportOperatorIssue=false

from __future__ import annotations

from typing import Any

from construct import (Bytes, Const, Int8sb, Int32sb, Int64sb, Prefixed, GreedyBytes,
                       Struct, Terminated, this)

from . import layout as L

FIELDS = Struct(
    "alive" / Int64sb,
    "port" / Int32sb,
    "secure_port" / Int32sb,
    "udp_port" / Int32sb,
    "host_length" / Int8sb,
    "host" / Bytes(this.host_length),
    "command" / Prefixed(Int32sb, GreedyBytes),
    "domain" / Prefixed(Int32sb, GreedyBytes),
    "unique_id" / Bytes(L.UNIQUE_ID_LEN),
    "payload" / Prefixed(Int32sb, GreedyBytes),
    Terminated,    # the fields fill the body exactly
)

PACKET = Struct(
    "begin" / Const(L.BEGIN_MARKER),
    "body" / Prefixed(Int32sb, FIELDS),
    "end" / Const(L.END_MARKER),
)


def parse(data: bytes) -> Any:
    """Parse with construct; raises construct.ConstructError when malformed.
    Trailing bytes after the end marker are ignored, as Tomcat does."""
    return PACKET.parse(data)


def build(alive: int, port: int, secure_port: int, udp_port: int, host: bytes, command: bytes,
          domain: bytes, unique_id: bytes, payload: bytes) -> bytes:
    data: bytes = PACKET.build(dict(body=dict(
        alive=alive, port=port, secure_port=secure_port, udp_port=udp_port,
        host_length=len(host), host=host, command=command, domain=domain,
        unique_id=unique_id, payload=payload)))
    return data

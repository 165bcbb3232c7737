"""The label header of memberlist >= 0.3 (its public label.go), read, not copied.

A labelled packet starts with type 244, a length byte (1..255) and the label;
no label means no header at all. On a TCP stream only the side that dials
writes the header, once, at the start; the reply on that connection has none.
The label also becomes associated data of the encryption (see :mod:`.crypto`),
on replies too, so a key alone does not let a packet or stream cross between
clusters with different labels. memberlist 0.2.x (Debian's serf 0.9.4) has no
labels: a labelled packet is an unknown type 244 to it.
"""

from __future__ import annotations

import ast
import re

from .errors import GossipWireError, Truncated
from .layout import LABEL_HEADER_SIZE, LABEL_MAX_SIZE, MessageType


def add_label(buf: bytes, label: bytes) -> bytes:
    """``buf`` behind a label header; unchanged for an empty label."""
    if not label:
        return buf
    if len(label) > LABEL_MAX_SIZE:
        raise ValueError(f"a label is at most {LABEL_MAX_SIZE} bytes, not {len(label)}")
    return bytes((MessageType.HAS_LABEL, len(label))) + label + buf


def split_label(buf: bytes) -> tuple[bytes, int]:
    """The label at the start of ``buf`` (``b""`` if none) and where the rest
    starts. :class:`Truncated` if the header is cut (on a stream: read more)."""
    if not buf or buf[0] != MessageType.HAS_LABEL:
        return b"", 0
    if len(buf) < LABEL_HEADER_SIZE:
        raise Truncated("label header cut short")
    size = buf[1]
    if size == 0:
        raise GossipWireError("bad_label", "a label header cannot hold an empty label")
    end = LABEL_HEADER_SIZE + size
    if len(buf) < end:
        raise Truncated("label cut short")
    return bytes(buf[LABEL_HEADER_SIZE:end]), end


_BYTES = r"b'(?:[^'\\]|\\.)*'|b\"(?:[^\"\\]|\\.)*\""
_REFUSAL = re.compile(rf"stream label (?:{_BYTES}) is not the expected ({_BYTES})")


def stream_refusal(got: bytes, expected: bytes) -> str:
    """The error a stream under another label is refused with; it names the
    label expected, since the refusal, a reply, carries no header to tell it
    (:func:`expected_in` reads it back)."""
    return f"stream label {got!r} is not the expected {expected!r}"


def expected_in(error: str) -> bytes | None:
    """The label a :func:`stream_refusal` names as expected; None for any other error."""
    found = _REFUSAL.fullmatch(error)
    if found is None:
        return None
    expected = ast.literal_eval(found.group(1))
    return expected if isinstance(expected, bytes) else None

"""The label header of memberlist >= 0.3 (its public label.go), read, not copied.

A labelled packet or stream starts with type 244, a length byte (1..255) and
the label; no label means no header at all. The label also becomes associated
data of the encryption (see :mod:`.crypto`), so a key alone does not let a
packet cross between clusters with different labels. memberlist 0.2.x (Debian's
serf 0.9.4) has no labels: a labelled packet is an unknown type 244 to it.
"""

from __future__ import annotations

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

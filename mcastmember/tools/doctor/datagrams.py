"""The doctor's own datagrams (``wire/layout.py``, the ``MCDOCTOR`` tag):
what one doctor sends to itself and to the doctors on other hosts.

No member takes them for a heartbeat: Tomcat drops them without a word,
mcastmember counts them as ``doctor_probes`` (the counter's and the metric's
name, which users scrape). Four kinds: L (loop, to itself through the
group), M (by multicast, to the other doctors), U (by unicast, to one peer)
and R (the echo of a U, for the round trip).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from ...tribes.wire import layout as L

if TYPE_CHECKING:
    from typing import Literal

    from typing_extensions import TypeAlias

    # What a peer heard of our datagrams: multicast heard and span, unicast
    # heard and span (the counts a datagram's report carries).
    Counts: TypeAlias = tuple[int, int, int, int]
    # A datagram's kind: L (loop), M (multicast), U (unicast), R (a U's echo).
    DatagramKind: TypeAlias = Literal[b"L", b"M", b"U", b"R"]
    # parse_datagram(): kind, sender's doctor id, sequence, sent_ns, report.
    Datagram: TypeAlias = tuple[bytes, bytes, int, int, Counts | None]

_HEAD = struct.Struct(L.DOCTOR_DATAGRAM_HEAD)
_REPORT = struct.Struct(L.DOCTOR_DATAGRAM_REPORT)
_ENTRY = struct.Struct(L.DOCTOR_DATAGRAM_ENTRY)


def encode_datagram(kind: DatagramKind, sender: bytes, sequence: int, sent_ns: int,
                    report: Counts | dict[bytes, Counts] | None = None) -> bytes:
    """A doctor datagram. ``report``: for a U datagram, the four counts of
    what we heard from its receiver; for an M datagram, ``{doctor id: four
    counts}`` of every doctor heard."""
    data = _HEAD.pack(L.DOCTOR_DATAGRAM_TAG, L.DOCTOR_DATAGRAM_VERSION, kind, sender, sequence,
                      sent_ns)
    if report is None:
        return data
    if isinstance(report, dict):    # an M datagram's (kind b"M")
        return data + b"".join(_ENTRY.pack(ident, *counts) for ident, counts in report.items())
    return data + _REPORT.pack(*report)


def parse_datagram(data: bytes, me: bytes | None = None) -> Datagram | None:
    """(kind, sender, sequence, sent_ns, report or None) of a doctor
    datagram, or None for any other; the report is what its sender heard
    from the doctor whose id is ``me`` (a U datagram's own, or ``me``'s
    entry of an M datagram)."""
    if len(data) < _HEAD.size or not data.startswith(L.DOCTOR_DATAGRAM_TAG):
        return None
    _, version, kind, sender, sequence, sent_ns = _HEAD.unpack_from(data)
    if version != L.DOCTOR_DATAGRAM_VERSION:
        return None
    report: Counts | None = None
    if kind == b"M":
        for offset in range(_HEAD.size, len(data) - _ENTRY.size + 1, _ENTRY.size):
            ident, *counts = _ENTRY.unpack_from(data, offset)
            if ident == me:
                report = tuple(counts)
    elif len(data) >= _HEAD.size + _REPORT.size:
        report = _REPORT.unpack_from(data, _HEAD.size)
    return kind, sender, sequence, sent_ns, report


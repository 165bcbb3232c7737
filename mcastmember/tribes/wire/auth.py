"""Authenticated heartbeats: the key ring, the trailer, sequences and replay.

Tribes' membership packet has no authentication: anyone who hears a
member's heartbeat can forge its shutdown. With a shared key ring each of
our packets carries a trailer after ``TRIBES-E`` (Tomcat ignores bytes
there, so Tomcat still lists us): a key id, a 64-bit sequence that never
repeats for a sender and key, and an HMAC-SHA256 (first 16 bytes) over the
whole packet and the trailer's header. Layout and numbers: ``layout.py``.

This module is the reference (pure Python, ``hmac``): the key file, signing,
checking, the sequence clock and the replay guard. No I/O but reading the
key file; the engine and the hot path build on it.
"""

from __future__ import annotations

import logging
import os
import struct
from typing import TYPE_CHECKING

from . import layout as L
from ..._runtime.errors import ConfigurationError
from ..._runtime.secrets import read_secret_file

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from typing_extensions import Buffer

log = logging.getLogger("mcastmember")

# Verdicts of checking a datagram's trailer (0 = authentic); see _layout.py.
AUTH_OK = L.AUTH_OK
NO_TRAILER = L.AUTH_NO_TRAILER
BAD_TRAILER = L.AUTH_BAD_TRAILER
UNKNOWN_KEY = L.AUTH_UNKNOWN_KEY
BAD_MAC = L.AUTH_BAD_MAC
REPLAY = L.AUTH_REPLAY
SKEW = L.AUTH_SKEW
# A key file is a few lines (255 keys at most): anything larger is not one.
MAX_KEY_FILE_BYTES = 64 * 1024
VERDICTS = L.AUTH_REASONS

_HEADER = struct.Struct(">3sBBQ")
_INT32 = struct.Struct(">i")
_UINT64 = struct.Struct(">Q")


class HeartbeatKeys:
    """Keys by id; the first one signs, every one verifies."""

    def __init__(self, keys: Iterable[tuple[int, bytes | bytearray]]) -> None:
        keys = list(keys)
        if not keys:
            raise ConfigurationError("a key ring needs at least one key")
        self.keys: dict[int, bytes] = {}
        for key_id, secret in keys:
            if isinstance(key_id, bool) or not isinstance(key_id, int) \
                    or key_id not in L.AUTH_KEY_IDS:
                raise ConfigurationError(f"key id {key_id!r} is not 1-255")
            if not isinstance(secret, (bytes, bytearray)) or len(secret) != L.AUTH_KEY_LEN:
                raise ConfigurationError(f"key {key_id} must be {L.AUTH_KEY_LEN} bytes")
            if key_id in self.keys:
                raise ConfigurationError(f"key id {key_id} is listed twice")
            self.keys[key_id] = bytes(secret)
        self.signing_id = keys[0][0]

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> HeartbeatKeys:
        """Read a key file: one key per line, ``<key id 1-255> <64 hex digits>``;
        blank lines and ``#`` comments allowed; the first key signs."""
        text = read_secret_file(path, "key file", MAX_KEY_FILE_BYTES)
        keys: list[tuple[int, bytes]] = []
        seen: dict[int, int] = {}
        for number, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            where = f"key file {path}, line {number}"
            if len(fields) != 2 or not fields[0].isdigit():
                raise ConfigurationError(f"{where}: expected '<key id 1-255> <64 hex digits>'")
            key_id = int(fields[0])
            if key_id not in L.AUTH_KEY_IDS:
                raise ConfigurationError(f"{where}: key id {key_id} is not 1-255")
            if key_id in seen:
                raise ConfigurationError(f"{where}: key id {key_id} already on line {seen[key_id]}")
            try:
                secret = bytes.fromhex(fields[1])
            except ValueError:
                raise ConfigurationError(f"{where}: the key is not hex digits") from None
            if len(secret) != L.AUTH_KEY_LEN:
                raise ConfigurationError(f"{where}: the key has {len(fields[1])} hex digits, "
                                         f"not {2 * L.AUTH_KEY_LEN}")
            seen[key_id] = number
            keys.append((key_id, secret))
        if not keys:
            raise ConfigurationError(f"key file {path}: no keys")
        return cls(keys)


def new_key_line(key_id: int = 1) -> str:
    """A fresh random key as a key file line (for ``mcast-demo keygen``)."""
    return f"{key_id} {os.urandom(L.AUTH_KEY_LEN).hex()}"


def mac(secret: bytes, packet: Buffer, header: Buffer = b"") -> bytes:
    """The trailer's MAC of ``packet`` then ``header`` (the trailer's header)."""
    # imported here: hashing loads OpenSSL, which a member without keys
    # never needs (tests/test_startup.py)
    import hashlib
    import hmac
    if not header:         # (one expression: nothing held while it is hashed)
        return hmac.new(secret, packet, hashlib.sha256).digest()[:L.AUTH_MAC_LEN]
    digest = hmac.new(secret, packet, hashlib.sha256)
    digest.update(header)
    return digest.digest()[:L.AUTH_MAC_LEN]


def trailer(packet: Buffer, ring: HeartbeatKeys, sequence: int) -> bytes:
    """The trailer that authenticates ``packet`` (a whole Tribes packet)."""
    header = _HEADER.pack(L.AUTH_MAGIC, L.AUTH_VERSION, ring.signing_id, sequence)
    return header + mac(ring.keys[ring.signing_id], packet, header)


# Reading a trailer: the one Python copy (the kernel's pure-Python twin calls
# these); the compiled kernel has the same in C (_fast.pyx, same names).
def packet_end(datagram: Buffer, n: int) -> int:
    """Where the packet in ``datagram[:n]`` ends by its body length (it may
    lie past ``n``); -1 when there is no body length to read (``n`` shorter
    than the header, or a negative length)."""
    if n < L.BODY_START:
        return -1
    body_length: int = _INT32.unpack_from(datagram, L.OFF_BODY_LEN)[0]
    return -1 if body_length < 0 else L.BODY_START + body_length + L.MARKER_LEN


def packet_part(datagram: Buffer, n: int) -> int:
    """The bytes of ``datagram[:n]`` the index compares: without the trailer
    when exactly a trailer's length follows the end marker, else all ``n``."""
    end = packet_end(datagram, n)
    return end if end >= 0 and n - end == L.AUTH_TRAILER_LEN else n


def verify(keys: Mapping[int, bytes], datagram: bytes | bytearray | memoryview,
           n: int) -> tuple[int, int, int]:
    """``(verdict, key id, sequence)`` of the trailer of the well-formed
    datagram ``datagram[:n]`` (a memoryview: of bytes), with ``keys``
    secrets by key id; the MAC is compared in constant time. One without a
    packet end has a BAD_TRAILER."""
    end = packet_end(datagram, n)
    if n == end:
        return NO_TRAILER, 0, 0
    if end < 0 or n - end != L.AUTH_TRAILER_LEN:
        return BAD_TRAILER, 0, 0
    at = end + len(L.AUTH_MAGIC)
    if datagram[end:at] != L.AUTH_MAGIC or datagram[at] != L.AUTH_VERSION:
        return BAD_TRAILER, 0, 0
    key_id = datagram[at + 1]
    secret = keys.get(key_id)
    if secret is not None:
        header_end = end + L.AUTH_HEADER_LEN
        import hmac
        verdict = AUTH_OK if hmac.compare_digest(mac(secret, datagram[:header_end]),
                                                 datagram[header_end:n]) else BAD_MAC
    else:
        verdict = UNKNOWN_KEY
    sequence: int = _UINT64.unpack_from(datagram, at + 2)[0]
    return verdict, key_id, sequence


def check(datagram: memoryview | bytes, ring: HeartbeatKeys) -> tuple[int, int, int]:
    """``(verdict, key id, sequence)`` of a whole datagram's trailer (``verify``)."""
    return verify(ring.keys, datagram, len(datagram))


class SequenceClock:
    """Sequences for our own packets: microseconds of the wall clock, and
    always one more than the last, so they never repeat, not even across a
    restart (the wall clock has moved on) or when the clock steps back while
    we run (we keep counting from where we were)."""

    def __init__(self) -> None:
        self.last = 0

    def next(self, wall_us: float) -> int:
        self.last = max(self.last + 1, int(wall_us))
        return self.last


class ReplayGuard:
    """The newest sequence accepted from each sender (by identity bytes).

    A sequence is the sender's wall clock in µs, always above its last
    (SequenceClock). A packet is fresh when its sequence is newer than the
    last one accepted from its sender (else REPLAY). A sender not seen yet
    (or forgotten, below) is believed when its sequence is within
    ``window_us`` of our wall clock, either way (else SKEW): a capture
    replayed long after it was made is refused even after we restarted, and
    a clock far ahead cannot plant a sequence that would refuse its sender
    for as long. Heartbeats reordered on the network lose only the older
    one: the member stays, it was just heard.

    An entry outlives its member (a captured heartbeat replayed just after
    a shutdown must not bring the member back), until the window alone
    refuses every capture of it: one window after its last sequence, or
    after it was last recorded when that sequence was further ahead of our
    clock. So a sender with a fixed identity whose clock was once far ahead
    is admitted again two windows after it was last accepted, not never.
    ``max_senders`` bounds the memory (only key holders get here); the
    oldest entry makes room."""

    def __init__(self, window_us: float, max_senders: int = 4096) -> None:
        self.window_us = int(window_us)
        self.max_senders = int(max_senders)
        # identity -> (last sequence, our wall clock when it was recorded)
        self._last: dict[bytes, tuple[int, int]] = {}

    def _entry(self, identity: bytes, wall_us: int) -> int | None:
        """The last sequence remembered for ``identity``, or None (forgotten)."""
        entry = self._last.get(identity)
        if entry is None:
            return None
        sequence, recorded = entry
        if wall_us > min(max(sequence, recorded), recorded + self.window_us) + self.window_us:
            del self._last[identity]
            return None
        return sequence

    def _record(self, identity: bytes, sequence: int, wall_us: int) -> None:
        if identity not in self._last and len(self._last) >= self.max_senders:
            self._last.pop(next(iter(self._last)))
        self._last[identity] = (sequence, wall_us)

    def judge(self, identity: bytes, sequence: int, wall_us: int) -> int:
        """AUTH_OK (recorded), REPLAY or SKEW for ``sequence`` from ``identity``
        at our wall clock ``wall_us``."""
        last = self._entry(identity, wall_us)
        if last is None:
            if abs(sequence - wall_us) > self.window_us:
                return SKEW
        elif sequence <= last:
            return REPLAY
        self._record(identity, sequence, wall_us)
        return AUTH_OK

    def fresh(self, identity: bytes, sequence: int, wall_us: int) -> bool:
        """``judge`` is AUTH_OK."""
        return self.judge(identity, sequence, wall_us) == AUTH_OK

    def advance(self, identity: bytes, sequence: int, wall_us: int) -> None:
        """``sequence`` was accepted from a sender elsewhere (the index's
        fast path), by ``wall_us`` at the latest: nothing up to it is fresh
        from now on."""
        if sequence <= 0:
            return
        last = self._entry(identity, wall_us)
        if last is None or sequence > last:
            self._record(identity, sequence, wall_us)

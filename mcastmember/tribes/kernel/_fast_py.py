"""Pure-Python twin of ``_fast.pyx``: same names, same verdicts, same results.

It is the reference for behaviour and the fallback where no compiler was
available (or ``MCASTMEMBER_NO_EXTENSIONS=1``). It allocates freely; the
compiled module is the one that keeps the heartbeat path allocation-free.
"""

from __future__ import annotations

import errno
import os
import ipaddress
import select
import socket
import stat
import struct
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

from ..wire import auth
from ..wire import layout as L
from ..wire.errors import MalformedPacket

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from typing_extensions import Buffer

    from ._fast import Peer

    # A recvfrom sender: (host, port) for IPv4, (host, port, flow, scope) for IPv6.
    Source = tuple[str, int] | tuple[str, int, int, int]

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT64 = struct.Struct(">Q")
_SEQUENCE_AT = len(L.AUTH_MAGIC) + 2      # in the trailer
_BEGIN_TAG = L.BEGIN_MARKER[:L.MARKER_TAG_LEN]
_END_TAG = L.END_MARKER[:L.MARKER_TAG_LEN]

IMPLEMENTATION = "python"

# See _fast.pyx mcm_read_shut: how a shut-down socket is told from an empty datagram.
_POLL_SHUT = getattr(select, "POLLRDHUP", select.POLLHUP)


def _errno(error: OSError) -> int:
    """An OSError's errno (EIO for one raised without it)."""
    return error.errno if error.errno is not None else errno.EIO


def _read_shut(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, _POLL_SHUT)
    return any(events & _POLL_SHUT for _, events in poller.poll(0))


def _socket_of(fd: int) -> socket.socket | int:
    """A socket object over ``fd`` (the caller detaches it, never closes it),
    or -errno as the system call would fail: EBADF, ENOTSOCK."""
    if fd < 0:
        return -errno.EBADF
    try:
        return socket.socket(fileno=fd)
    except OSError as error:
        return -_errno(error)


def _length(buf: memoryview, n: int) -> int:
    size = len(buf) if not isinstance(buf, memoryview) else buf.nbytes
    if n < 0 or n > size:
        return size
    return n


def _scan(mv: memoryview, n: int) -> tuple[int, list[int] | None]:
    """Validate ``mv[:n]``; return (verdict, offsets) where offsets are the
    starts of host, command, domain, unique id and payload when well formed."""
    if n > L.MAX_PACKET_LEN:
        return L.OVERSIZED, None
    if n < L.MARKER_TAG_LEN or mv[:L.MARKER_TAG_LEN] != _BEGIN_TAG:
        tag = L.CHANNEL_FRAME_TAG
        if n >= len(tag) and mv[:len(tag)] == tag:
            return L.CHANNEL_FRAME, None
        tag = L.DOCTOR_DATAGRAM_TAG
        if n >= len(tag) and mv[:len(tag)] == tag:
            return L.DOCTOR_PROBE, None
        return L.NOT_MEMBERSHIP, None
    if n < L.MARKER_LEN:
        return L.TRUNCATED, None
    if mv[L.MARKER_TAG_LEN:L.MARKER_LEN] != L.VERSION:
        return L.BAD_VERSION, None
    if n < L.BODY_START:
        return L.TRUNCATED, None
    body_len = _INT32.unpack_from(mv, L.OFF_BODY_LEN)[0]
    if body_len < 0:
        return L.BAD_BODY_LENGTH, None
    end = L.BODY_START + body_len
    if n < end + L.MARKER_LEN:
        return L.TRUNCATED, None
    if mv[end:end + L.MARKER_TAG_LEN] != _END_TAG:
        return L.BAD_END_MARKER, None
    if mv[end + L.MARKER_TAG_LEN:end + L.MARKER_LEN] != L.VERSION:
        return L.BAD_VERSION, None
    if body_len < L.BODY_FIXED_LEN:
        return L.FIELD_OVERRUN, None
    host_len: int = struct.unpack_from(">b", mv, L.OFF_HOST_LEN)[0]
    if host_len != L.HOST_LEN_IPV4 and host_len != L.HOST_LEN_IPV6:
        return L.BAD_HOST_LENGTH, None
    pos = L.OFF_HOST + host_len
    starts = [L.OFF_HOST]
    for _field in ("command", "domain"):
        if pos + 4 > end:
            return L.FIELD_OVERRUN, None
        flen = _INT32.unpack_from(mv, pos)[0]
        pos += 4
        if flen < 0 or flen > end - pos:
            return L.FIELD_OVERRUN, None
        starts.append(pos)
        pos += flen
    if pos + L.UNIQUE_ID_LEN > end:
        return L.FIELD_OVERRUN, None
    starts.append(pos)
    pos += L.UNIQUE_ID_LEN
    if pos + 4 > end:
        return L.FIELD_OVERRUN, None
    flen = _INT32.unpack_from(mv, pos)[0]
    pos += 4
    if flen < 0 or flen > end - pos:
        return L.FIELD_OVERRUN, None
    starts.append(pos)
    pos += flen
    if pos != end:
        return L.LENGTH_MISMATCH, None
    return L.OK, starts


def check(buf: Buffer, n: int = -1) -> int:
    """Verdict for the first ``n`` bytes of ``buf`` (all of it by default):
    ``layout.OK`` or the reason code it is malformed."""
    mv = memoryview(buf).cast("B")
    return _scan(mv, _length(mv, n))[0]


def parse(buf: Buffer, n: int = -1) -> tuple[int, int, int, int, bytes, bytes, bytes, bytes, bytes]:
    """Fields of a well-formed packet as a tuple
    (alive, port, secure_port, udp_port, host, command, domain, unique_id, payload);
    raises MalformedPacket otherwise."""
    mv = memoryview(buf).cast("B")
    verdict, starts = _scan(mv, _length(mv, n))
    if verdict or starts is None:
        raise MalformedPacket(verdict)
    host_at, command_at, domain_at, uid_at, payload_at = starts
    alive, = _INT64.unpack_from(mv, L.OFF_ALIVE)
    port, secure, udp = struct.unpack_from(">iii", mv, L.OFF_PORT)

    def field(at: int) -> bytes:
        flen = _INT32.unpack_from(mv, at - 4)[0]
        return bytes(mv[at:at + flen])

    host = bytes(mv[host_at:host_at + mv[L.OFF_HOST_LEN]])
    return (alive, port, secure, udp, host, field(command_at), field(domain_at),
            bytes(mv[uid_at:uid_at + L.UNIQUE_ID_LEN]), field(payload_at))


def identity(buf: Buffer, n: int = -1) -> bytes:
    """The identity bytes of a well-formed packet (host + port + unique id, as
    ``Member.identity``) without parsing the rest; MalformedPacket otherwise."""
    mv = memoryview(buf).cast("B")
    verdict, starts = _scan(mv, _length(mv, n))
    if verdict or starts is None:
        raise MalformedPacket(verdict)
    host_at, _, _, uid_at, _ = starts
    return (bytes(mv[host_at:host_at + mv[L.OFF_HOST_LEN]]) + bytes(mv[L.OFF_PORT:L.OFF_PORT + 4])
            + bytes(mv[uid_at:uid_at + L.UNIQUE_ID_LEN]))


def _int32(name: str, value: int) -> None:
    if not -2**31 <= value < 2**31:
        raise ValueError(f"{name} {value} does not fit a signed 32-bit field")


def encode(alive: int, port: int, secure_port: int, udp_port: int, host: Buffer,
           command: Buffer, domain: Buffer, unique_id: Buffer, payload: Buffer) -> bytes:
    """The packet bytes for these fields; ValueError when a field cannot be encoded."""
    host, command, domain = bytes(host), bytes(command), bytes(domain)
    unique_id, payload = bytes(unique_id), bytes(payload)
    if len(host) != L.HOST_LEN_IPV4 and len(host) != L.HOST_LEN_IPV6:
        raise ValueError(f"host must be 4 (IPv4) or 16 (IPv6) bytes, not {len(host)}")
    if len(unique_id) != L.UNIQUE_ID_LEN:
        raise ValueError(f"unique_id must be {L.UNIQUE_ID_LEN} bytes, not {len(unique_id)}")
    if not -2**63 <= alive < 2**63:
        raise ValueError(f"alive time {alive} does not fit a signed 64-bit field")
    _int32("port", port)
    _int32("secure_port", secure_port)
    _int32("udp_port", udp_port)
    total = L.EMPTY_PACKET_LEN + len(host) + len(command) + len(domain) + len(payload)
    if total > L.MAX_PACKET_LEN:
        raise ValueError(f"packet would be {total} bytes; the limit is {L.MAX_PACKET_LEN}")
    body_len = total - L.FRAME_OVERHEAD
    return b"".join((
        L.BEGIN_MARKER, _INT32.pack(body_len), _INT64.pack(alive),
        struct.pack(">iiib", port, secure_port, udp_port, len(host)), host,
        _INT32.pack(len(command)), command,
        _INT32.pack(len(domain)), domain,
        unique_id,
        _INT32.pack(len(payload)), payload,
        L.END_MARKER,
    ))


def _source_address(source: object) -> bytes | None:
    """The address bytes of a ``recvfrom`` sender (4 for IPv4, an
    IPv4-mapped one included; 16 for IPv6), or None."""
    if not isinstance(source, tuple) or len(source) < 2:
        return None
    try:
        address = ipaddress.ip_address(source[0].split("%")[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return address.packed


def _from_host(source: object, mv: memoryview) -> bool:
    """Whether ``source`` is the host that the packet in ``mv`` (one that
    matched a stored packet, so well formed) advertises."""
    host = mv[L.OFF_HOST:L.OFF_HOST + mv[L.OFF_HOST_LEN]]
    # (a memoryview equals the bytes it holds)
    return _source_address(source) == host  # type: ignore[comparison-overlap]


class HeartbeatPacket:
    """The twin of ``_fast.HeartbeatPacket`` (``_fast.pyx`` says what
    ``origin_ns``, ``alive_cap`` and ``below_zero`` do): a packet that owns
    its bytes, ``buffer`` a read-only view of them, and only the alive time
    rewritten per send (0 while the origin lies in the future)."""

    _data: bytearray
    buffer: memoryview
    origin_ns: int
    alive_cap: int
    below_zero: bool
    sent: int
    errors: int
    _packet_len: int
    key_id: int
    sequence: int
    _secret: bytes

    # Made whole in __new__, as the compiled one in __cinit__: there is no
    # half-made packet, and calling __init__ again changes nothing.
    def __new__(cls, packet: Buffer, origin_ns: int | None = None, alive_cap: int = -1,
                below_zero: bool = False) -> HeartbeatPacket:
        verdict = check(packet)
        if verdict != L.OK:
            raise MalformedPacket(verdict)
        self = super().__new__(cls)
        self._data = bytearray(packet)
        self.buffer = memoryview(self._data).toreadonly()   # also pins _data's size
        self.origin_ns = time.monotonic_ns() if origin_ns is None else origin_ns
        self.alive_cap = alive_cap
        self.below_zero = bool(below_zero)
        self.sent = 0
        self.errors = 0
        self._packet_len = len(self._data)
        self.key_id = 0
        self.sequence = 0
        return self

    def stamp(self, alive_ms: int) -> None:
        _INT64.pack_into(self._data, L.OFF_ALIVE, alive_ms)
        if self.key_id:
            self._sign_now()

    def set_key(self, key_id: int, secret: Buffer | None = None, after: int = 0) -> None:
        """As ``_fast.HeartbeatPacket.set_key``: sign every stamp from now
        (the trailer after the packet), key id 0: unsigned again."""
        packet = bytes(self._data[:self._packet_len])
        if key_id == 0:
            self.key_id = 0
            self._data = bytearray(packet)
        else:
            if not 1 <= key_id <= 255:
                raise ValueError(f"key id {key_id} is not 1-255")
            if auth.packet_end(packet, len(packet)) != len(packet):
                raise ValueError("the packet has bytes after its end marker: no room for a trailer")
            if secret is None:           # as the compiled one: no buffer to read
                raise TypeError("a key id needs its secret")
            secret = bytes(secret)
            if len(secret) != L.AUTH_KEY_LEN:
                raise ValueError(f"a key is {L.AUTH_KEY_LEN} bytes, not {len(secret)}")
            self._secret = secret
            self.key_id = key_id
            self.sequence = max(self.sequence, after)
            self._data = bytearray(packet + L.AUTH_MAGIC + bytes((L.AUTH_VERSION, key_id))
                                   + bytes(8 + L.AUTH_MAC_LEN))
        self.buffer = memoryview(self._data).toreadonly()
        if self.key_id:
            self._sign_now()

    def _sign_now(self) -> None:
        data, end = self._data, self._packet_len
        self.sequence = max(self.sequence + 1, time.time_ns() // 1000)
        _UINT64.pack_into(data, end + _SEQUENCE_AT, self.sequence)
        header_end = end + L.AUTH_HEADER_LEN
        data[header_end:] = auth.mac(self._secret, data[:header_end])

    def stamp_now(self) -> None:
        alive = max(0, (time.monotonic_ns() - self.origin_ns) // 1_000_000)
        if 0 <= self.alive_cap < alive:
            alive = alive % (self.alive_cap + 1)
        if self.below_zero:
            alive = -1 - alive
        _INT64.pack_into(self._data, L.OFF_ALIVE, alive)
        if self.key_id:
            self._sign_now()

    def send(self, fd: int) -> int:
        """Stamp the alive time and send the packet on the connected socket
        ``fd``. Returns the bytes sent or -errno; counts into ``sent`` and
        ``errors``."""
        self.stamp_now()
        try:
            # send(2) refuses anything but a socket; os.write would not.
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                raise OSError(errno.ENOTSOCK, os.strerror(errno.ENOTSOCK))
            n = os.write(fd, self._data)
        except OSError as error:
            self.errors += 1
            return -_errno(error)
        self.sent += 1
        return n

    def send_to(self, fd: int, targets: Targets) -> int:
        """Stamp the alive time once and send the packet to every peer of
        ``targets`` from the unconnected socket ``fd``: as the compiled
        ``send_to`` (a peer the kernel refuses is skipped, EAGAIN ends the
        round and the next begins where it stopped). Returns the datagrams
        sent when every peer got one, else -errno of the last failure."""
        self.stamp_now()
        sent, failure = targets._fan_out(fd, self._data)
        self.sent += sent
        if failure:
            self.errors += 1
            return failure
        return sent

    @property
    def alive_ms(self) -> int:
        alive: int = _INT64.unpack_from(self._data, L.OFF_ALIVE)[0]
        return alive


_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)


class Targets:
    """The twin of ``_fast.Targets``: peers as socket addresses, made once."""

    def __init__(self, peers: Sequence[Peer], family: int) -> None:
        # tuple() keeps each Peer's shape; the checkers see tuple[object, ...]
        peers = tuple(tuple(peer) for peer in peers)  # type: ignore[misc]
        if family not in (socket.AF_INET, socket.AF_INET6):
            raise ValueError(f"family {family} is neither AF_INET nor AF_INET6")
        self.family = family
        self.peers = peers
        self.count = len(peers)
        self._addresses: list[tuple[str, int] | tuple[str, int, int, int]] = [
            self._address(peer) for peer in peers]
        self._start = 0

    def _address(self, peer: Peer) -> tuple[str, int] | tuple[str, int, int, int]:
        addr, port = bytes(peer[0]), peer[1]
        scope = peer[2] if len(peer) > 2 else 0
        if not 0 < port < 65536:
            raise ValueError(f"peer port {port} is out of range (1-65535)")
        unreachable = ValueError(f"peer address of {len(addr)} bytes cannot be reached "
                                 f"from a socket of family {self.family}")
        if self.family == socket.AF_INET:
            if len(addr) != 4:
                raise unreachable
            return (socket.inet_ntop(socket.AF_INET, addr), port)
        if len(addr) == 4:
            return ("::ffff:" + socket.inet_ntop(socket.AF_INET, addr), port, 0, 0)
        if len(addr) == 16:
            return (socket.inet_ntop(socket.AF_INET6, addr), port, 0, scope)
        raise unreachable

    def __len__(self) -> int:
        return len(self.peers)

    def _fan_out(self, fd: int, data: Buffer) -> tuple[int, int]:
        addresses, count = self._addresses, len(self._addresses)
        sent, failure, at = 0, 0, self._start
        sock = _socket_of(fd)
        if isinstance(sock, int):
            return 0, sock
        try:
            for _ in range(count):
                try:
                    sock.sendto(data, _DONTWAIT, addresses[at])
                    sent += 1
                except OSError as error:
                    failure = -_errno(error)
                    if error.errno == errno.EAGAIN:
                        break
                at = (at + 1) % count
        finally:
            sock.detach()
        self._start = at if count else 0
        return sent, failure


_ADMIT, _DROP, _SLOW = 0, 1, 2     # see _fast.pyx
_KIND_LAST = max(L.KIND_MEMBER, L.KIND_LOCAL, L.KIND_FILTERED)


class MemberIndex:
    """Recognises packets already seen, alive field aside, and keeps entries in
    the order they were last heard so that expiry pops from the front.

    Slots are small integers handed out lowest first and reused last-freed
    first; the caller maps them to its own records. While ``pump`` runs
    (``busy``: it waits in the socket without the GIL), every other call that
    changes the index raises RuntimeError, as in the compiled module.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        # Datagrams recognised (refreshed here), by the kind of their slot.
        self._hits_of = [0] * (_KIND_LAST + 1)
        self.busy = False
        # set_phi()'s arguments (y, pause, min_std, first_mean, window), once it is called
        self._phi: tuple[float, float, float, float, int] | None = None
        self._dropped: dict[int, int] = {}    # verdict -> datagrams pump dropped
        self._auth_mode = L.AUTH_OFF  # see set_keys
        self._ring: dict[int, bytes] | None = None
        self._auth_failures: dict[int, int] = {}      # auth verdict -> count
        self._seqs = [0] * capacity
        self._authed: list[bool | None] = [None] * capacity
        self._reset()

    def _reset(self) -> None:
        capacity = self.capacity
        self._free = list(range(capacity - 1, -1, -1))
        self._key_of: list[bytes | None] = [None] * capacity
        self._slot_of: dict[bytes, int] = {}
        self._heard = [0.0] * capacity
        # Arrival statistics per slot, kept when set_phi() turned them on.
        self._count = [0] * capacity
        self._mean = [0.0] * capacity
        self._var = [0.0] * capacity
        self._alive = [0] * capacity
        self._kind = [L.KIND_FREE] * capacity
        # slot -> None, least recently heard first
        self._order: OrderedDict[int, None] = OrderedDict()
        self._source: object = None   # sender of the datagram pump last returned

    def _writable(self) -> None:
        if self.busy:
            raise RuntimeError("MemberIndex is in use by pump() (on another thread)")

    @staticmethod
    def _key(mv: memoryview, n: int) -> bytes:
        return bytes(mv[:L.OFF_ALIVE]) + bytes(mv[L.OFF_PORT:n])

    def __len__(self) -> int:
        return len(self._order)

    @property
    def hits(self) -> int:
        """Datagrams recognised, whatever their kind (see hits_by_kind)."""
        return sum(self._hits_of)

    def hits_by_kind(self) -> dict[int, int]:
        """{kind: count} of the datagrams recognised (by lookup and pump), by
        the kind their slot was added with; kinds never hit are left out."""
        return {kind: count for kind, count in enumerate(self._hits_of) if count}

    def lookup(self, buf: Buffer, n: int, now: float) -> int:
        """If ``buf[:n]`` equals a stored packet but for the alive time, mark it
        heard at ``now`` and return its kind; otherwise return -1."""
        if self.busy:            # _writable(), inline: this is the twin's receive path
            self._writable()
        mv = memoryview(buf)
        n = _length(mv, n)
        # Cheap refusals first: nothing stored is this short, this long, or
        # without the begin marker (keeps floods of junk cheap here too).
        if n < L.OFF_PORT or n > L.MAX_PACKET_LEN or mv[:L.MARKER_TAG_LEN] != _BEGIN_TAG:
            return -1
        slot = self._slot_of.get(self._key(mv, auth.packet_part(mv, n)))
        if slot is None:
            return -1
        action = self._admit(slot, mv, n)
        if action == _DROP:
            return L.INDEX_DROPPED
        if action == _SLOW:
            return -1
        self._touch(slot, mv, now)
        kind = self._kind[slot]
        self._hits_of[kind] += 1
        return kind

    def _admit(self, slot: int, mv: memoryview, n: int) -> int:
        """See _fast.pyx: ADMIT, DROP or SLOW for a datagram that matched ``slot``."""
        if self._auth_mode == L.AUTH_OFF or self._kind[slot] != L.KIND_MEMBER:
            return _ADMIT
        ring = self._ring
        assert ring is not None          # not AUTH_OFF: set_keys made one
        verdict, _, sequence = auth.verify(ring, mv.cast("B"), n)
        if verdict == L.AUTH_OK and sequence <= self._seqs[slot]:
            verdict = L.AUTH_REPLAY
        failures = self._auth_failures
        if verdict == L.AUTH_REPLAY or (verdict != L.AUTH_OK
                                        and self._auth_mode == L.AUTH_ENFORCE):
            failures[verdict] = failures.get(verdict, 0) + 1
            return _DROP
        ok = verdict == L.AUTH_OK
        if ok is not self._authed[slot]:
            return _SLOW
        if ok:
            self._seqs[slot] = sequence
        else:
            failures[verdict] = failures.get(verdict, 0) + 1
        return _ADMIT

    def set_keys(self, mode: int, keys: Mapping[int, bytes] | None = None) -> None:
        """As ``_fast.MemberIndex.set_keys``: judge members' trailers from now on."""
        self._writable()
        if mode not in L.AUTH_MODES.values():
            raise ValueError(f"unknown authentication mode {mode}")
        ring: dict[int, bytes] | None = None
        if mode != L.AUTH_OFF:
            if not keys:
                raise ValueError("authentication needs at least one key")
            ring = {}
            for key_id, secret in keys.items():
                if not 1 <= key_id <= 255:
                    raise ValueError(f"key id {key_id} is not 1-255")
                if len(secret) != L.AUTH_KEY_LEN:
                    raise ValueError(f"a key is {L.AUTH_KEY_LEN} bytes, not {len(secret)}")
                ring[key_id] = bytes(secret)
        self._ring, self._auth_mode = ring, mode

    def set_auth(self, slot: int, authenticated: bool | None, sequence: int) -> None:
        """What the slow path decided for the member in ``slot`` (see _fast.pyx)."""
        self._writable()
        self._check_slot(slot)
        self._authed[slot] = None if authenticated is None else bool(authenticated)
        self._seqs[slot] = sequence

    def sequence(self, slot: int) -> int:
        """The last sequence accepted for ``slot`` (kept after it is freed, until reused)."""
        if not 0 <= slot < self.capacity:
            raise KeyError(slot)
        return self._seqs[slot]

    def auth_failures(self) -> dict[int, int]:
        """{auth verdict: count} of members' datagrams whose trailer failed here."""
        return dict(sorted(self._auth_failures.items()))

    def _touch(self, slot: int, mv: memoryview, now: float) -> None:
        phi = self._phi
        if phi is not None and self._count[slot]:
            self._arrival(slot, now - self._heard[slot], phi[4])
        self._heard[slot] = now
        self._alive[slot] = _INT64.unpack_from(mv, L.OFF_ALIVE)[0]
        self._order.move_to_end(slot)

    def pump(self, fd: int, buf: Buffer, deadline: float, budget: int = -1,
             sources: bool = False) -> int:
        """Receive datagrams from ``fd`` into ``buf`` and recognise known ones
        until a well-formed unknown one needs the slow path: then return its
        length (its bytes are in ``buf``). ``buf`` must hold
        ``RECV_BUFFER_LEN`` bytes (ValueError otherwise), so that every
        datagram fits. Malformed and foreign datagrams (an empty one too) are
        counted (``dropped()``) and skipped. Return -EAGAIN when the socket
        has nothing (non-blocking or SO_RCVTIMEO), when a datagram arrives at
        or after ``deadline`` (a monotonic time, seconds), or after ``budget``
        datagrams (-1: no limit); -ESHUTDOWN at once when the socket was shut
        down for reading (it would read 0 bytes forever); other failures
        return -errno. With ``sources`` the sender is kept, for ``source()``
        (recvfrom_into, which costs an address tuple per datagram), and a
        known member's datagram from another address than its advertised
        host is returned too, for the caller to admit or refuse."""
        self._writable()
        mv = memoryview(buf).cast("B")
        if mv.nbytes < L.RECV_BUFFER_LEN:
            raise ValueError(f"pump needs a buffer of at least {L.RECV_BUFFER_LEN} bytes, "
                             f"not {mv.nbytes}")
        self.busy = True
        self._source = None
        try:
            return self._pump(fd, buf, mv, deadline, budget, sources)
        finally:
            self.busy = False

    def _pump(self, fd: int, buf: Buffer, mv: memoryview, deadline: float, budget: int,
              sources: bool) -> int:
        # The twin's hottest loop: names bound locally, no method calls per
        # datagram beyond the read, the clock and one dict look-up.
        sock = _socket_of(fd)
        if isinstance(sock, int):
            return sock
        try:
            return self._pump_socket(sock, fd, buf, mv, deadline, budget, sources)
        finally:
            sock.detach()

    def _pump_socket(self, sock: socket.socket, fd: int, buf: Buffer, mv: memoryview,
                     deadline: float, budget: int, sources: bool) -> int:
        receive_from, receive = sock.recvfrom_into, sock.recv_into
        clock, source = time.monotonic, None
        slot_of, dropped, tag = self._slot_of, self._dropped, _BEGIN_TAG
        hits_of, kinds = self._hits_of, self._kind
        while True:
            if budget == 0:
                return -errno.EAGAIN
            try:
                if sources:
                    n, source = receive_from(buf)
                else:
                    n = receive(buf)
            except OSError as error:
                return -_errno(error)
            if n == 0 and _read_shut(fd):
                return -errno.ESHUTDOWN
            if budget > 0:
                budget -= 1
            now = clock()
            slot = None
            if L.OFF_PORT <= n <= L.MAX_PACKET_LEN and mv[:L.MARKER_TAG_LEN] == tag:
                m = auth.packet_part(mv, n)
                slot = slot_of.get(bytes(mv[:L.OFF_ALIVE]) + bytes(mv[L.OFF_PORT:m]))
            if slot is not None and sources and not _from_host(source, mv):
                self._source = source    # a member's bytes from elsewhere: the caller decides
                return n
            if slot is not None:
                action = self._admit(slot, mv, n)
                if action == _ADMIT:
                    self._touch(slot, mv, now)
                    hits_of[kinds[slot]] += 1
                elif action == _SLOW:     # authenticated or not, newly: the caller
                    self._source = source
                    return n
            else:
                verdict = _scan(mv, n)[0]
                if verdict == L.OK:
                    self._source = source
                    return n
                dropped[verdict] = dropped.get(verdict, 0) + 1
            if now >= deadline:
                return -errno.EAGAIN

    def pending(self) -> int:
        """Datagrams already read but not yet handled: always 0 here (one read
        per datagram; the compiled module reads in batches)."""
        return 0

    def source(self) -> tuple[bytes, int] | None:
        """``(address bytes, port)`` of the sender of the datagram ``pump``
        last returned, or None (as the compiled ``source``)."""
        source = self._source
        address = _source_address(source)
        if address is None or not isinstance(source, tuple):
            return None
        port: int = source[1]
        return address, port

    def dropped(self) -> dict[int, int]:
        """{verdict: count} of the datagrams ``pump`` dropped as malformed or foreign."""
        return dict(sorted(self._dropped.items()))

    @staticmethod
    def _packet_key(buf: Buffer, n: int) -> tuple[memoryview, bytes]:
        """The key of the well-formed packet ``buf[:n]`` (n = -1: all of it),
        checked before anything in the index is changed."""
        mv = memoryview(buf).cast("B")
        if n < 0:
            n = mv.nbytes
        elif n > mv.nbytes:
            raise ValueError(f"n = {n} is past the end of a {mv.nbytes}-byte buffer")
        verdict = _scan(mv, n)[0]
        if verdict != L.OK:
            raise MalformedPacket(verdict)
        return mv, MemberIndex._key(mv, n)

    def add(self, buf: Buffer, n: int, now: float, kind: int) -> int:
        """Store the well-formed packet ``buf[:n]`` (n = -1: all of ``buf``);
        return its slot, or -1 when full. MalformedPacket when it is not one
        packet, ValueError when ``n`` is past the end of ``buf`` or ``kind``
        is not KIND_MEMBER, KIND_LOCAL or KIND_FILTERED."""
        self._writable()
        if not L.KIND_MEMBER <= kind <= _KIND_LAST:
            raise ValueError(f"unknown kind {kind}")
        if not self._free:
            return -1
        mv, key = self._packet_key(buf, n)
        slot = self._free.pop()
        self._key_of[slot] = key
        self._slot_of[key] = slot
        self._kind[slot] = kind
        self._seqs[slot] = 0
        self._authed[slot] = None
        self._order[slot] = None
        self._count[slot] = 0
        self._touch(slot, mv, now)
        if self._phi is not None:          # one sample, the expected period, to begin with
            first = self._phi[3]
            self._count[slot], self._mean[slot], self._var[slot] = 1, first, (first / 4) ** 2
        return slot

    def _check_slot(self, slot: int) -> None:
        if not 0 <= slot < self.capacity or self._kind[slot] == L.KIND_FREE:
            raise KeyError(slot)

    def replace(self, slot: int, buf: Buffer, n: int, now: float) -> None:
        """The member in ``slot`` sent a different packet: store it instead
        (checked as ``add`` does, before the old one is let go)."""
        self._writable()
        self._check_slot(slot)
        mv, key = self._packet_key(buf, n)
        del self._slot_of[self._key_of[slot]]  # type: ignore[arg-type]  # a used slot has a key
        self._key_of[slot] = key
        self._slot_of[key] = slot
        self._touch(slot, mv, now)

    def remove(self, slot: int) -> None:
        self._writable()
        if not 0 <= slot < self.capacity or self._kind[slot] == L.KIND_FREE:
            return
        del self._slot_of[self._key_of[slot]]  # type: ignore[arg-type]  # a used slot has a key
        del self._order[slot]
        self._key_of[slot] = None
        self._kind[slot] = L.KIND_FREE
        self._free.append(slot)

    def clear(self) -> None:
        """Forget every entry (there is no batch here to drop; the counters stay)."""
        self._writable()
        self._reset()

    def expire(self, deadline: float) -> Sequence[int]:
        """Remove every entry last heard before ``deadline``, oldest first, and
        return their slots (an empty tuple when none); ValueError for NaN."""
        self._writable()
        if deadline != deadline:
            raise ValueError("expire deadline is NaN")
        expired: list[int] = []
        for slot in self._order:
            if self._heard[slot] >= deadline:
                break
            expired.append(slot)
        for slot in expired:
            self.remove(slot)
        return expired if expired else ()

    # -- adaptive expiry (phi accrual) ------------------------------------------------
    def set_phi(self, y: float, pause: float, min_std: float, first_mean: float,
                window: int) -> None:
        """Arrival statistics per member, as the compiled ``set_phi``."""
        if window < 1:
            raise ValueError("window must be at least 1")
        self._phi = (float(y), float(pause), float(min_std), float(first_mean), int(window))

    def _arrival(self, slot: int, interval: float, window: int) -> None:
        # A running mean and variance over the last ``window`` intervals
        # (exact until then, exponentially weighted after): no history kept.
        n = min(self._count[slot] + 1, window)
        mean = self._mean[slot]
        delta = interval - mean
        mean += delta / n
        self._var[slot] += (delta * (interval - mean) - self._var[slot]) / n
        self._mean[slot] = mean
        self._count[slot] = n

    def phi_deadline(self, slot: int) -> float:
        """When the member in ``slot`` is due under phi (monotonic seconds)."""
        assert self._phi is not None, "set_phi() first"
        y, pause, min_std = self._phi[:3]
        std: float = max(self._var[slot] ** 0.5, min_std)
        return self._heard[slot] + self._mean[slot] + pause + y * std

    def _due(self, slot: int, fallback: float) -> float:
        if self._kind[slot] == L.KIND_MEMBER:
            return self.phi_deadline(slot)
        return self._heard[slot] + fallback

    def expire_phi(self, now: float, fallback: float) -> Sequence[int]:
        """Remove the members due under phi at ``now``, and the other
        entries (our own packets, other domains) silent for ``fallback``
        seconds; return their slots. O(entries)."""
        self._writable()
        if now != now:
            raise ValueError("expire deadline is NaN")
        expired = [slot for slot in self._order if self._due(slot, fallback) <= now]
        for slot in expired:
            self.remove(slot)
        return expired if expired else ()

    def next_phi_expiry(self, fallback: float) -> float | None:
        """The earliest time ``expire_phi`` could remove something, or None."""
        return min((self._due(slot, fallback) for slot in self._order), default=None)

    def oldest_heard(self) -> float | None:
        """When the least recently heard entry was heard, or None when empty."""
        for slot in self._order:
            return self._heard[slot]
        return None

    # A freed slot keeps its last values until it is reused.
    def heard(self, slot: int) -> float:
        if not 0 <= slot < self.capacity:
            raise KeyError(slot)
        return self._heard[slot]

    def alive(self, slot: int) -> int:
        if not 0 <= slot < self.capacity:
            raise KeyError(slot)
        return self._alive[slot]

    def kind(self, slot: int) -> int:
        if not 0 <= slot < self.capacity:
            raise KeyError(slot)
        return self._kind[slot]


def _key_hash(buf: Buffer) -> int:
    """The hash the index files ``buf`` under: Python's own, seeded per process."""
    mv = memoryview(buf).cast("B")
    if mv.nbytes < L.OFF_PORT:
        raise ValueError("shorter than the fixed header")
    return hash(MemberIndex._key(mv, mv.nbytes))


# -- for bench/heartbeat.py: the per-heartbeat work without the socket call.
def _bench_stamp(packet: HeartbeatPacket, rounds: int) -> float:
    """ns per ``stamp_now`` as ``send`` does it."""
    stamp = packet.stamp_now
    t0 = time.perf_counter_ns()
    for _ in range(rounds):
        stamp()
    return (time.perf_counter_ns() - t0) / rounds


def _bench_recognise(index: MemberIndex, buf: Buffer, n: int, rounds: int) -> float:
    """ns per known-member heartbeat as ``pump`` handles it after ``recv``
    (the slot's last sequence reset each round, as in _fast.pyx)."""
    lookup, clock, seqs = index.lookup, time.monotonic, index._seqs
    t0 = time.perf_counter_ns()
    for _ in range(rounds):
        seqs[0] = 0
        lookup(buf, n, clock())
    return (time.perf_counter_ns() - t0) / rounds

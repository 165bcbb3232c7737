"""The Member value type: one heartbeat's fields, with Tribes identity."""

from __future__ import annotations

import ipaddress
import time
from typing import TYPE_CHECKING, Any, NoReturn

from ..wire import layout as L

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from typing_extensions import Buffer

    # What the codec's parse returns and its encode takes, in this order:
    # alive, port, secure port, UDP port, host, command, domain, unique id, payload.
    Fields = tuple[int, int, int, int, bytes, bytes, bytes, bytes, bytes]


class Member:
    """A cluster member as its heartbeat describes it.

    Identity (``==`` and ``hash``) is Tribes' own: the raw host bytes, the
    member port and the 16-byte unique id. Nothing else: a member whose payload
    changed is the same member; one that restarted (a new unique id) is not.
    Immutable (hence hashable): ``replace()`` makes a changed copy.

    ``first_seen`` and ``last_heard`` are ``time.monotonic()`` readings: when
    the table first heard this member and when it last heard it (as of the
    snapshot or event that carries it); None for a member not from a table
    (decoded, or our own). ``silent_for`` is the seconds since ``last_heard``.
    """

    __slots__ = ("host", "port", "secure_port", "udp_port", "unique_id",
                 "domain", "payload", "command", "alive_ms", "authenticated",
                 "first_seen", "last_heard")
    # The fields' types, for the checkers (set once, in __init__).
    host: bytes
    port: int
    secure_port: int
    udp_port: int
    unique_id: bytes
    domain: bytes
    payload: bytes
    command: bytes
    alive_ms: int
    authenticated: bool | None
    first_seen: float | None
    last_heard: float | None

    def __init__(self, host: Buffer, port: int, unique_id: Buffer, *, secure_port: int = -1,
                 udp_port: int = -1, domain: Buffer = b"", payload: Buffer = b"",
                 command: Buffer = b"", alive_ms: int = 0, authenticated: bool | None = None,
                 first_seen: float | None = None, last_heard: float | None = None) -> None:
        init = object.__setattr__
        init(self, "host", bytes(host))
        init(self, "port", port)
        init(self, "unique_id", bytes(unique_id))
        init(self, "secure_port", secure_port)
        init(self, "udp_port", udp_port)
        init(self, "domain", bytes(domain))
        init(self, "payload", bytes(payload))
        init(self, "command", bytes(command))
        init(self, "alive_ms", alive_ms)
        # Whether its latest packet carried a valid trailer (see auth.py):
        # None when we do not authenticate.
        init(self, "authenticated", authenticated)
        init(self, "first_seen", first_seen)
        init(self, "last_heard", last_heard)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Member is immutable: use member.replace({name}=...)")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("Member is immutable")

    def __reduce__(self) -> tuple[Callable[..., Member], tuple[object, ...]]:
        return (_rebuild, tuple(getattr(self, name) for name in Member.__slots__))

    def replace(self, **changes: Any) -> Member:
        """A copy with the given fields changed (``identity`` fields too:
        that makes another member)."""
        unknown = set(changes) - set(Member.__slots__)
        if unknown:
            raise TypeError(f"Member has no field {', '.join(sorted(unknown))}")
        copy = object.__new__(Member)
        for name in Member.__slots__:
            object.__setattr__(copy, name, changes[name] if name in changes
                               else getattr(self, name))
        for name in ("host", "unique_id", "domain", "payload", "command"):
            if name in changes:
                object.__setattr__(copy, name, bytes(changes[name]))
        return copy

    @classmethod
    def from_fields(cls, fields: Fields) -> Member:
        """From the tuple the codec's ``parse`` returns."""
        alive, port, secure, udp, host, command, domain, unique_id, payload = fields
        return cls(host, port, unique_id, secure_port=secure, udp_port=udp,
                   domain=domain, payload=payload, command=command, alive_ms=alive)

    def fields(self) -> Fields:
        """The tuple the codec's ``encode`` takes, in its order."""
        return (self.alive_ms, self.port, self.secure_port, self.udp_port, self.host,
                self.command, self.domain, self.unique_id, self.payload)

    @property
    def identity(self) -> bytes:
        """The bytes that make a member itself: host + port + unique id."""
        return self.host + self.port.to_bytes(4, "big", signed=True) + self.unique_id

    @property
    def address(self) -> str:
        """The host as text ("10.0.0.5", "fe80::1"), built on demand."""
        return str(ipaddress.ip_address(self.host))

    @property
    def is_shutdown(self) -> bool:
        return self.command == L.SHUTDOWN_COMMAND

    def with_alive(self, alive_ms: int) -> Member:
        """A copy with another alive time (snapshots carry the latest one)."""
        return self.replace(alive_ms=alive_ms)

    def with_authenticated(self, authenticated: bool | None) -> Member:
        """A copy with another ``authenticated``."""
        return self.replace(authenticated=authenticated)

    @property
    def silent_for(self) -> float | None:
        """Seconds since this member was last heard (as of now), or None."""
        if self.last_heard is None:
            return None
        return max(0.0, time.monotonic() - self.last_heard)

    def same_state(self, other: Member) -> bool:
        """True when nothing but the alive time differs."""
        return (self.identity == other.identity and self.domain == other.domain
                and self.payload == other.payload and self.command == other.command
                and self.secure_port == other.secure_port and self.udp_port == other.udp_port
                and self.authenticated == other.authenticated)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (the CLI's ``--json`` member object)."""
        return {"host": self.address, "port": self.port, "unique_id": self.unique_id.hex(),
                "domain_hex": self.domain.hex(), "payload_hex": self.payload.hex(),
                "alive_ms": self.alive_ms, "authenticated": self.authenticated}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Member):
            return NotImplemented
        return (self.host == other.host and self.port == other.port
                and self.unique_id == other.unique_id)

    def __hash__(self) -> int:
        return hash((self.host, self.port, self.unique_id))

    def __repr__(self) -> str:
        try:
            address = self.address
        except ValueError:
            address = self.host.hex()
        return (f"Member({address}:{self.port}, id={self.unique_id.hex()[:8]}..., "
                f"domain={self.domain!r}, payload={len(self.payload)} B, alive={self.alive_ms} ms)")


def find_by_unique_id(members: Iterable[Member], unique_id: Buffer) -> Member | None:
    """The first of ``members`` with this 16-byte unique id, or None."""
    unique_id = bytes(unique_id)
    return next((m for m in members if m.unique_id == unique_id), None)


def find_by_address(members: Iterable[Member], host: str | Buffer, port: int) -> Member | None:
    """The first of ``members`` at ``host`` (address text or raw bytes) and
    member ``port``, or None; ValueError for text that is not an address."""
    if isinstance(host, (bytes, bytearray, memoryview)):
        host = bytes(host)
    else:
        try:
            host = ipaddress.ip_address(str(host).split("%")[0]).packed
        except ValueError:
            raise ValueError(f"{host!r} is not an IP address") from None
    return next((m for m in members if m.host == host and m.port == port), None)


def _rebuild(*fields: object) -> Member:
    member = object.__new__(Member)
    for name, value in zip(Member.__slots__, fields):
        object.__setattr__(member, name, value)
    return member


def domain_from_text(text: str) -> bytes:
    """Tomcat's reading of a configured domain string: ``{216,123,12,3}`` is a
    list of signed decimal bytes; anything else is its ISO-8859-1 bytes."""
    if text.startswith("{"):
        if not text.endswith("}"):
            raise ValueError(f"domain {text!r}: a byte list must end with '}}'")
        inner = text[1:-1].strip()
        if not inner:
            return b""
        out = bytearray()
        for item in inner.split(","):
            try:
                value = int(item.strip())
            except ValueError:
                raise ValueError(f"domain {text!r}: {item.strip()!r} is not a number") from None
            if not -128 <= value <= 255:
                raise ValueError(f"domain {text!r}: {value} is not a byte")
            out.append(value & 0xFF)
        return bytes(out)
    try:
        return text.encode("iso-8859-1")
    except UnicodeEncodeError:
        raise ValueError(f"domain {text!r} has characters outside ISO-8859-1") from None

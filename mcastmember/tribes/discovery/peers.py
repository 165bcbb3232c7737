"""Where to send unicast heartbeats: peer addresses from a static list and
from DNS, merged into one set. No I/O here: DNS answers come in through
``PeerSet.on_answer``/``on_failure`` from whoever ran the query
(``resolver.lookup``, on a worker thread), with the time; this module decides when the next query is
due and keeps the last good answer through failures, so a DNS outage never
costs a member.

Discovery says *where to send*; heartbeats say *who is alive*: a peer in
the set that sends nothing is not a member, and a member whose address left
DNS stays while it heartbeats.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import TYPE_CHECKING

import logging

from ..._runtime.errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Literal

    from typing_extensions import TypeAlias

    # Why a lookup gave no answer (LOOKUP_FAILURES).
    LookupFailure: TypeAlias = Literal["nxdomain", "servfail", "timeout", "no_answer", "error"]
    # Where a heartbeat goes: (raw address, 4 or 16 bytes; port).
    Peer: TypeAlias = "tuple[bytes, int]"

log = logging.getLogger("mcastmember")


def parse_peer(spec: str, default_port: int) -> tuple[str, int]:
    """``(host, port)`` from ``"10.0.0.5"``, ``"10.0.0.5:45564"``,
    ``"[fd00::5]:45564"``, ``"fd00::5"``, ``"node-1"`` or ``"node-1:45564"``.
    The host stays text (an address literal or a name to resolve)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigurationError(f"peer {spec!r} is not an address or host name")
    text = spec.strip()
    host, port = text, default_port
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ConfigurationError(f"peer {spec!r}: missing ']' after the IPv6 address")
        host, rest = text[1:end], text[end + 1:]
        if rest:
            if not rest.startswith(":"):
                raise ConfigurationError(f"peer {spec!r}: expected ':PORT' after ']'")
            port = _port(rest[1:], spec)
        if not _is_ipv6(host):
            raise ConfigurationError(f"peer {spec!r}: {host!r} is not an IPv6 address")
    elif text.count(":") == 1:
        host, port_text = text.split(":")
        port = _port(port_text, spec)
    elif text.count(":") > 1 and not _is_ipv6(text):
        raise ConfigurationError(f"peer {spec!r} is not an address; write IPv6 as [ADDR]:PORT")
    if not host:
        raise ConfigurationError(f"peer {spec!r} has no host")
    return host, port


def _is_ipv6(text: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(text.split("%")[0]), ipaddress.IPv6Address)
    except ValueError:
        return False


def _port(text: str, spec: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ConfigurationError(f"peer {spec!r}: port {text!r} is not 1-65535")
    return int(text)


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%")[0])
        return True
    except ValueError:
        return False


# Why a lookup gave no answer (resolver.DnsFailure.reason), counted by each.
LOOKUP_FAILURES: tuple[LookupFailure, ...] = ("nxdomain", "servfail", "timeout", "no_answer",
                                              "error")


class Lookup:
    """One name to resolve again every ``interval`` seconds: a ``dns=`` name
    (``system=False``: asked of DNS with dnspython, A and AAAA, or SRV with
    ``srv``) or a host name from the static list (``system=True``: the
    system resolver, so /etc/hosts works as users of a static list expect).

    ``due(now)`` says a query should be started (at most one at a time);
    ``on_answer(peers, now)`` and ``on_failure(reason, now)`` report how it
    ended. A failure keeps the last good answer and is counted by reason
    (``nxdomain``, ``servfail``, ``timeout``, ``no_answer``, ``error``)."""

    def __init__(self, name: str, port: int, interval: float, srv: bool = False,
                 system: bool = False) -> None:
        self.name = name
        self.port = port
        self.interval = float(interval)
        self.srv = bool(srv)
        self.system = bool(system)
        # {(address bytes, port)} of the last good answer
        self.peers: frozenset[Peer] = frozenset()
        self.answers = 0
        self.failures: dict[str, int] = {}
        self._next = 0.0              # the first query is due at once
        self._in_flight = False

    def __repr__(self) -> str:
        kind = "srv" if self.srv else "system" if self.system else "dns"
        return f"Lookup({self.name!r}, {kind})"

    def due(self, now: float) -> bool:
        if self._in_flight or now < self._next:
            return False
        self._in_flight = True
        return True

    def next_deadline(self) -> float | None:
        return None if self._in_flight else self._next

    def on_answer(self, peers: Iterable[Peer], now: float,
                  failures: Iterable[str] = ()) -> bool:
        """The query ended with ``peers``; True when they changed. ``failures``:
        reasons of the parts of it that failed (an AAAA query refused beside
        an A answer), each counted."""
        self._in_flight = False
        self._next = now + self.interval
        self.answers += 1
        for reason in failures:
            self.failures[reason] = self.failures.get(reason, 0) + 1
        peers = frozenset(peers)
        changed = peers != self.peers
        self.peers = peers
        return changed

    def on_failure(self, reason: str, now: float) -> bool:
        self._in_flight = False
        self._next = now + self.interval
        self.failures[reason] = self.failures.get(reason, 0) + 1
        return False


def packed(host: str) -> bytes:
    """Raw bytes of an address literal (an IPv4-mapped IPv6 address gives its 4)."""
    address = ipaddress.ip_address(host.split("%")[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return address.packed


def cloud_unique_id(address: bytes) -> bytes:
    """Tomcat's cloud membership's unique id for the member at ``address``
    (its 4 or 16 raw bytes): the MD5 of the address as Java writes it
    (InetAddress.getHostAddress(): IPv6 as all eight groups in hex, never
    "::", so fd00:250::2 is "fd00:250:0:0:0:0:0:2")."""
    if len(address) == 4:
        text = ".".join(str(part) for part in address)
    else:
        text = ":".join(f"{group:x}" for group in struct.unpack("!8H", address))
    import hashlib     # only Tomcat's cloud membership needs it (tests/test_startup.py)
    return hashlib.md5(text.encode("ascii")).digest()


class PeerSet:
    """Every address unicast heartbeats go to: the static list's addresses,
    its host names and the ``dns`` name, each resolved every ``interval``
    seconds, as one set of ``(address bytes, port)``, ourselves left out.

    ``specs`` are peer specifications (see ``parse_peer``), ``port`` the
    default port, ``own`` our own ``(address bytes, port)``.

    At most ``max_peers`` (the table's bound): every heartbeat goes to every
    peer, so an answer of thousands of addresses would make us send
    thousands of datagrams a period. Past it the static addresses are kept,
    then the resolved ones in address order (every member keeps the same);
    the others are counted (``peers_refused``, at each answer) and logged
    when the bound is first hit."""

    def __init__(self, specs: Iterable[str] = (), *, port: int, own: Peer, interval: float,
                 dns: str | None = None, srv: bool = False, max_peers: int) -> None:
        self.own = own
        self.max_peers = max_peers
        self.refused = 0
        self._over = False            # the last union was past max_peers (logged)
        self._static: set[Peer] = set()
        self.lookups: list[Lookup] = []
        for spec in specs:
            host, peer_port = parse_peer(spec, port)
            if is_address(host):
                self._static.add((packed(host), peer_port))
            else:
                self.lookups.append(Lookup(host, peer_port, interval, system=True))
        if dns is not None:
            self.dns: Lookup | None = Lookup(dns, port, interval, srv=srv)
            self.lookups.append(self.dns)
        else:
            self.dns = None
        self.peers: frozenset[Peer] = frozenset()
        self.hosts: frozenset[bytes] = frozenset()
        self._update()

    def _update(self) -> bool:
        """Recompute the union; True when it changed."""
        resolved: set[Peer] = set()
        for lookup in self.lookups:
            resolved |= lookup.peers
        resolved -= self._static
        resolved.discard(self.own)
        static = self._static - {self.own}
        room = max(0, self.max_peers - len(static))
        over = len(resolved) - room
        if over > 0:
            self.refused += over
            if not self._over:
                log.warning("%d peer addresses resolved, more than max_members (%d): "
                            "heartbeats go to the first %d only", len(static) + len(resolved),
                            self.max_peers, self.max_peers)
            resolved = set(sorted(resolved)[:room])
        self._over = over > 0
        peers = frozenset(static | resolved)
        changed = peers != self.peers
        self.peers = peers
        self.hosts = frozenset(address for address, _ in peers)
        return changed

    def due(self, now: float) -> list[Lookup]:
        """The lookups to start now (each is marked in flight)."""
        return [lookup for lookup in self.lookups if lookup.due(now)]

    def next_deadline(self) -> float | None:
        deadlines = [d for d in (lookup.next_deadline() for lookup in self.lookups)
                     if d is not None]
        return min(deadlines) if deadlines else None

    def on_answer(self, lookup: Lookup, peers: Iterable[tuple[str, int]], now: float,
                  failures: Iterable[str] = ()) -> bool:
        """``lookup`` answered ``{(address text, port)}`` (``failures``: see
        Lookup.on_answer); True when the set changed."""
        lookup.on_answer({(packed(host), port) for host, port in peers}, now, failures)
        return self._update()

    def on_failure(self, lookup: Lookup, reason: str, now: float) -> None:
        lookup.on_failure(reason, now)

    def stats(self) -> dict[str, int]:
        stats = self.idle_stats()
        stats["peers"] = len(self.peers)
        stats["peers_refused"] = self.refused
        stats["lookups_answered"] = sum(lookup.answers for lookup in self.lookups)
        for lookup in self.lookups:
            for reason, count in lookup.failures.items():
                stats[f"lookups_failed.{reason}"] += count
        return stats

    @staticmethod
    def idle_stats() -> dict[str, int]:
        """The counters with nothing counted (also: no peers configured)."""
        return {"peers": 0, "peers_refused": 0, "lookups_answered": 0,
                **{f"lookups_failed.{reason}": 0 for reason in LOOKUP_FAILURES}}

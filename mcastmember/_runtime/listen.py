"""What every listening socket of the library shares (the TCP listener for
Tomcat on both fronts, the metrics server): who may hold its connections,
and what to do when ``accept`` fails for want of descriptors or memory.
No I/O here: the listeners ask and act.
"""

from __future__ import annotations

import errno
import ipaddress
from collections import Counter
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Iterable

# accept() failures that say the process or the host is out of something:
# the pending connection stays in the backlog, so accepting again at once
# fails again at once (a loop that does so spins). Wait instead.
RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 1.0

ADMIT = True
REFUSE = False


def _nobody() -> Container[str]:
    return ()


class HeldConnection(Protocol):
    """A connection as ``ConnectionShares.place`` sees it: where it comes
    from, and when it was last heard from."""

    @property
    def source(self) -> str: ...

    @property
    def heard(self) -> float: ...


H = TypeVar("H", bound=HeldConnection)


class ConnectionShares:
    """The connections of one listening socket, counted by source (its
    address; an IPv6 source by its /64, see ``source_group``).

    ``admit(source, known)`` decides for a new connection: ``ADMIT``;
    ``REFUSE`` (close the newcomer); or a test on a held connection's source
    address: close the idlest connection that passes it to make room (none
    passes: refuse). ``known()`` gives the hosts (``host_key``) that come
    first, asked only when it matters: the members' hosts for the TCP
    listener (Tomcat connects from its own), the sources that completed a
    request for the metrics server. A source may hold ``per_source``
    connections, ``stranger_share`` when it is not known. At the cap
    (``total``) a known host's newcomer closes a stranger's connection; a
    stranger's closes one of the stranger source holding the most, and only
    when it holds more than the newcomer's source would. So strangers never
    take a known host's connection away, and one stranger source takes no
    other's: at worst they end with a connection each (``total`` sources
    holding one fill it, and then only known hosts get in).
    ``place`` applies the verdict to the connections held. ``add`` and
    ``remove`` follow what the listener opened and closed.
    """

    def __init__(self, total: int, per_source: int, stranger_share: int | None = None) -> None:
        self.total = total
        self.per_source = per_source
        self.stranger_share = per_source if stranger_share is None else stranger_share
        self._held: Counter[str] = Counter()
        self._count = 0

    def admit(self, source: str, known: Callable[[], Container[str]] = _nobody
              ) -> bool | Callable[[str], bool]:
        mine = self._held[source_group(source)]
        hosts: Container[str] | None = None
        if mine >= min(self.per_source, self.stranger_share):
            hosts = known()
            if mine >= (self.per_source if host_key(source) in hosts else self.stranger_share):
                return REFUSE
        if self._count < self.total:
            return ADMIT
        strangers = known() if hosts is None else hosts
        if host_key(source) in strangers:
            return lambda held: host_key(held) not in strangers
        heaviest, most = max(self._held.items(), key=lambda item: item[1])
        if most <= mine + 1:
            return REFUSE
        return lambda held: source_group(held) == heaviest and host_key(held) not in strangers

    def place(self, source: str, held: Iterable[H], known: Callable[[], Container[str]] = _nobody
              ) -> tuple[bool, H | None]:
        """``admit`` applied to ``held`` (the connections that may be closed):
        whether to take the newcomer from ``source``, and which connection to
        close first for it: of those the verdict names, the idlest (heard
        from longest ago); refused when it names none."""
        verdict = self.admit(source, known)
        if verdict is ADMIT:
            return True, None
        victims = [] if isinstance(verdict, bool) else [c for c in held if verdict(c.source)]
        if not victims:
            return False, None
        return True, min(victims, key=lambda c: c.heard)

    def add(self, source: str) -> None:
        self._held[source_group(source)] += 1
        self._count += 1

    def remove(self, source: str) -> None:
        group = source_group(source)
        self._held[group] -= 1
        self._count -= 1
        if not self._held[group]:
            del self._held[group]

    def __len__(self) -> int:
        return self._count


class AcceptBackoff:
    """How long to stop accepting after a failure that says resources ran
    out: ``failed(code)`` returns the seconds to wait (None: not such a
    failure, accept again), doubling from BACKOFF_FIRST_S up to
    BACKOFF_MAX_S while failures follow; ``accepted()`` resets it.
    ``failures`` counts every such failure."""

    def __init__(self) -> None:
        self.failures = 0
        self._next = BACKOFF_FIRST_S

    def failed(self, code: int | None) -> float | None:
        if code not in RESOURCE_ERRORS:
            return None
        self.failures += 1
        delay, self._next = self._next, min(BACKOFF_MAX_S, self._next * 2)
        return delay

    def accepted(self) -> None:
        self._next = BACKOFF_FIRST_S


def source_of(peer: object) -> str:
    """The source address (text) of an accepted socket's peer name."""
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return str(peer)


def same_host(a: str, b: str) -> bool:
    """Whether address texts ``a`` and ``b`` name one host (an IPv4 address
    and its IPv4-mapped IPv6 form are one; a zone index is ignored)."""
    return host_key(a) == host_key(b)


def host_key(text: str) -> str:
    """One text per host: an IPv4-mapped IPv6 address as IPv4, no zone."""
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return text
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


def source_group(source: str) -> str:
    """The key a source's connections are counted under: its address, or for
    IPv6 its /64 (one host can take any address of its subnet)."""
    key = host_key(source)
    if ":" in key:
        return str(ipaddress.IPv6Network((key, 64), strict=False))
    return key


class _Bucket:
    __slots__ = ("count", "bytes", "at")

    def __init__(self, count: float, size: float, now: float) -> None:
        self.count, self.bytes, self.at = count, size, now


class ReplyBudget:
    """Token buckets on replies (the TCP listener's to members, the metrics
    server's answers), in count and in bytes, in all and per destination:
    ``take(destination, size, now)`` says whether a reply of ``size`` bytes
    may go now (and spends it).
    Counts refill at ``rate`` per second up to ``burst``; bytes at
    ``byte_rate`` per second up to one second's worth, and a reply needs only
    some left (it may overdraw, so a reply larger than a second's worth is
    never refused for ever: the debt delays the next). At most
    ``max_destinations`` are followed; full ones are forgotten first."""

    def __init__(self, rate: float, burst: float, byte_rate: float, per_rate: float,
                 per_burst: float, per_byte_rate: float, max_destinations: int = 4096) -> None:
        self._all = (rate, burst, byte_rate)
        self._one = (per_rate, per_burst, per_byte_rate)
        self._total: _Bucket | None = None
        self._each: dict[str, _Bucket] = {}
        self._max = max_destinations

    @staticmethod
    def _refill(bucket: _Bucket, shape: tuple[float, float, float], now: float) -> _Bucket:
        rate, burst, byte_rate = shape
        elapsed = max(0.0, now - bucket.at)
        bucket.count = min(burst, bucket.count + elapsed * rate)
        bucket.bytes = min(byte_rate, bucket.bytes + elapsed * byte_rate)
        bucket.at = now
        return bucket

    def _bucket(self, destination: str, now: float) -> _Bucket | None:
        bucket = self._each.get(destination)
        if bucket is not None:
            return self._refill(bucket, self._one, now)
        if len(self._each) >= self._max:
            for key, old in list(self._each.items()):
                self._refill(old, self._one, now)
                if old.count >= self._one[1] and old.bytes >= self._one[2]:
                    del self._each[key]
            if len(self._each) >= self._max:
                return None
        bucket = self._each[destination] = _Bucket(self._one[1], self._one[2], now)
        return bucket

    def take(self, destination: str, size: int, now: float) -> bool:
        if self._total is None:
            self._total = _Bucket(self._all[1], self._all[2], now)
        total = self._refill(self._total, self._all, now)
        one = self._bucket(host_key(destination), now)
        if one is None or min(total.count, one.count) < 1 or min(total.bytes, one.bytes) <= 0:
            return False
        for bucket in (total, one):
            bucket.count -= 1
            bucket.bytes -= size
        return True

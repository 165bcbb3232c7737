"""One DNS query for peer discovery, with dnspython (an optional dependency:
``pip install 'mcastmember[dns]'``; never imported by ``import mcastmember``).

dnspython rather than the standard library's ``getaddrinfo``: it reads SRV
records (a port per peer, as Kubernetes publishes for named ports), tells
NXDOMAIN from SERVFAIL from a timeout (so a failure can be counted by its
cause and the last good answer kept), and takes a query timeout, so a
resolver never holds a thread for the system's default of 30 s and more.

``resolve`` blocks: the fronts call it on a worker thread (threaded service)
or in the loop's executor (asyncio), never on the receive path.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..._runtime.errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from types import ModuleType

    from dns.resolver import Resolver

    from .peers import Lookup

QUERY_TIMEOUT_S = 2.0


class DnsFailure(Exception):
    """A query that gave no usable answer; ``reason`` is one of nxdomain,
    servfail, timeout, no_answer, error."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class Answer(set[tuple[str, int]]):
    """The ``(address, port)`` pairs a lookup gave, and ``failures``: the
    queries of it that failed while others answered (an AAAA query refused
    beside an A answer, an SRV target that does not resolve), each a
    DnsFailure, to be counted and reported; the pairs are used all the same."""

    def __init__(self, peers: Iterable[tuple[str, int]] = (),
                 failures: Iterable[DnsFailure] = ()) -> None:
        super().__init__(peers)
        self.failures = tuple(failures)


def _dnspython() -> ModuleType:
    try:
        import dns.exception
        import dns.resolver
    except ImportError:
        raise ConfigurationError("DNS discovery needs dnspython: "
                                 "pip install 'mcastmember[dns]'") from None
    return dns


def require_dnspython() -> None:
    """ConfigurationError now, at configuration, when dnspython is missing."""
    _dnspython()


def make_resolver(nameservers: Sequence[str] | None = None,
                  timeout: float = QUERY_TIMEOUT_S) -> Resolver:
    """A resolver using the system's configuration, or ``nameservers``
    (addresses, ``"ADDR"`` or ``"ADDR:PORT"``, IPv6 as ``[ADDR]:PORT``)."""
    dns = _dnspython()
    from .peers import parse_peer
    if nameservers:
        resolver: Resolver = dns.resolver.Resolver(configure=False)
        servers = [parse_peer(server, 53) for server in nameservers]
        if len({port for _, port in servers}) != 1:
            raise ConfigurationError("all DNS servers must use the same port")
        resolver.nameservers = [host for host, _ in servers]
        resolver.port = servers[0][1]
    else:
        resolver = dns.resolver.Resolver()
    resolver.lifetime = resolver.timeout = timeout
    resolver.cache = None          # every refresh asks the server: changes show at once
    return resolver


def resolve(resolver: Resolver, name: str, port: int, srv: bool = False) -> Answer:
    """The ``(address, port)`` pairs that ``name`` gives now: its A and AAAA
    records with ``port``, or with ``srv``, each SRV target's addresses with
    the record's port. A and AAAA are asked apart, both within a name's one
    timeout (the resolver's lifetime), and count apart: when one answers, the other's failure (and an SRV
    target's) is in the Answer's ``failures``. Raises DnsFailure when
    nothing answered: the first failure, or no_answer."""
    dns = _dnspython()
    failures: list[DnsFailure] = []
    peers: set[tuple[str, int]] = set()
    if not srv:
        peers = {(address, port) for address in _addresses(dns, resolver, name, failures)}
    else:
        try:
            records = resolver.resolve(name, "SRV")
        except dns.exception.DNSException as error:
            raise _failure(dns, error, name) from None
        for record in records:
            target = record.target.to_text().rstrip(".")
            peers |= {(address, record.port)
                      for address in _addresses(dns, resolver, target, failures)}
    if not peers:
        raise failures[0] if failures else DnsFailure("no_answer", name)
    return Answer(peers, failures)


def _addresses(dns: ModuleType, resolver: Resolver, name: str,
               failures: list[DnsFailure]) -> list[str]:
    """A and AAAA addresses of ``name``, each kind asked apart: a kind's
    failure (not its having no records) is added to ``failures``, and so is
    no_answer when neither kind has a record."""
    found: list[str] = []
    failed = len(failures)
    # One timeout for both: a server gone away is a failure after one timeout, not two.
    deadline = time.monotonic() + resolver.lifetime
    for kind in ("A", "AAAA"):
        left = deadline - time.monotonic()
        if left <= 0:
            failures.append(DnsFailure("timeout", f"{name} {kind}"))
            continue
        try:
            found += [record.address for record in resolver.resolve(name, kind, lifetime=left)]
        except dns.resolver.NoAnswer:
            pass
        except dns.exception.DNSException as error:
            failures.append(_failure(dns, error, name, kind))
            if isinstance(error, dns.resolver.NXDOMAIN):
                break                   # the name has no records of any kind
    if not found and len(failures) == failed:
        failures.append(DnsFailure("no_answer", name))
    return found


def _failure(dns: ModuleType, error: BaseException, name: str, kind: str = "") -> DnsFailure:
    """The DnsFailure that dnspython's ``error`` for ``name`` (records of
    ``kind``) stands for."""
    query = f"{name} {kind}" if kind else name
    if isinstance(error, dns.resolver.NXDOMAIN):
        return DnsFailure("nxdomain", name)     # no records of any kind
    if isinstance(error, dns.resolver.NoAnswer):
        return DnsFailure("no_answer", query)
    if isinstance(error, dns.resolver.NoNameservers):
        return DnsFailure("servfail", str(error))
    if isinstance(error, dns.exception.Timeout):
        return DnsFailure("timeout", query)
    return DnsFailure("error", str(error))


def lookup(query: Lookup, resolver: Resolver | None = None) -> set[tuple[str, int]]:
    """Run one ``peers.Lookup``: the set of ``(address text, port)`` it gives
    now, or DnsFailure. DNS names go to ``resolver`` (``make_resolver``);
    static host names to the system resolver (getaddrinfo, /etc/hosts
    included)."""
    if not query.system:
        assert resolver is not None     # a DNS name's lookup exists with dns=, which makes one
        return resolve(resolver, query.name, query.port, srv=query.srv)
    import socket
    try:
        answers = socket.getaddrinfo(query.name, query.port, type=socket.SOCK_DGRAM)
    except socket.gaierror as error:
        reason = {socket.EAI_NONAME: "nxdomain", socket.EAI_AGAIN: "timeout",
                  getattr(socket, "EAI_NODATA", socket.EAI_NONAME): "no_answer",
                  socket.EAI_FAIL: "servfail"}.get(error.errno, "error")
        raise DnsFailure(reason, f"{query.name}: {error.strerror}") from None
    except (OSError, UnicodeError) as error:
        raise DnsFailure("error", f"{query.name}: {error}") from None
    # str(): the checkers cannot tell an IP family's address (text) from
    # another family's (an int), which the condition leaves out.
    return {(str(info[4][0]).split("%")[0], query.port) for info in answers
            if info[0] in (socket.AF_INET, socket.AF_INET6)}

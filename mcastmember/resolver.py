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

from typing import TYPE_CHECKING

from .errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Sequence
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


def resolve(resolver: Resolver, name: str, port: int,
            srv: bool = False) -> set[tuple[str, int]]:
    """The set of ``(address, port)`` that ``name`` gives now: its A and AAAA
    records with ``port``, or with ``srv``, each SRV target's addresses with
    the record's port. Raises DnsFailure."""
    dns = _dnspython()
    try:
        if not srv:
            return {(address, port) for address in _addresses(dns, resolver, name)}
        answer = resolver.resolve(name, "SRV")
        peers: set[tuple[str, int]] = set()
        for record in answer:
            target = record.target.to_text().rstrip(".")
            for address in _addresses(dns, resolver, target):
                peers.add((address, record.port))
        return peers
    except dns.resolver.NXDOMAIN:
        raise DnsFailure("nxdomain", name) from None
    except dns.resolver.NoAnswer:
        raise DnsFailure("no_answer", name) from None
    except dns.resolver.NoNameservers as error:
        raise DnsFailure("servfail", str(error)) from None
    except dns.exception.Timeout:
        raise DnsFailure("timeout", name) from None
    except dns.exception.DNSException as error:
        raise DnsFailure("error", str(error)) from None


def _addresses(dns: ModuleType, resolver: Resolver, name: str) -> list[str]:
    """A and AAAA addresses of ``name``; no answer of either kind is an error."""
    found: list[str] = []
    for kind in ("A", "AAAA"):
        try:
            found += [record.address for record in resolver.resolve(name, kind)]
        except dns.resolver.NoAnswer:
            pass
    if not found:
        raise dns.resolver.NoAnswer()
    return found


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

"""Where to send unicast heartbeats: peer addresses from a static list and
from DNS, merged into one set. No I/O here: DNS answers come in through
``DnsPeers.on_answer``/``on_failure`` from whoever ran the query
(``dns.py``), with the time; this module decides when the next query is
due and keeps the last good answer through failures, so a DNS outage never
costs a member.

Discovery says *where to send*; heartbeats say *who is alive*: a peer in
the set that sends nothing is not a member, and a member whose address left
DNS stays while it heartbeats.
"""

import ipaddress

from .errors import ConfigurationError


def parse_peer(spec, default_port):
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


def _is_ipv6(text):
    try:
        return isinstance(ipaddress.ip_address(text.split("%")[0]), ipaddress.IPv6Address)
    except ValueError:
        return False


def _port(text, spec):
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ConfigurationError(f"peer {spec!r}: port {text!r} is not 1-65535")
    return int(text)


def is_address(host):
    try:
        ipaddress.ip_address(host.split("%")[0])
        return True
    except ValueError:
        return False


class DnsPeers:
    """The addresses one DNS name gives, refreshed every ``interval`` seconds.

    ``due(now)`` says a query should be started (at most one at a time);
    ``on_answer(peers, now)`` and ``on_failure(reason, now)`` report how it
    ended. A failure keeps the last good answer and is counted by reason
    (``nxdomain``, ``servfail``, ``timeout``, ``no_answer``, ``error``)."""

    def __init__(self, name, interval, srv=False):
        self.name = name
        self.interval = float(interval)
        self.srv = bool(srv)
        self.peers = frozenset()      # {(address text, port)} of the last good answer
        self.answers = 0
        self.failures = {}
        self._next = 0.0              # the first query is due at once
        self._in_flight = False

    def due(self, now):
        if self._in_flight or now < self._next:
            return False
        self._in_flight = True
        return True

    def next_deadline(self):
        return None if self._in_flight else self._next

    def on_answer(self, peers, now):
        self._in_flight = False
        self._next = now + self.interval
        self.answers += 1
        changed = frozenset(peers) != self.peers
        self.peers = frozenset(peers)
        return changed

    def on_failure(self, reason, now):
        self._in_flight = False
        self._next = now + self.interval
        self.failures[reason] = self.failures.get(reason, 0) + 1
        return False

    def stats(self):
        stats = {"dns_answers": self.answers, "dns_peers": len(self.peers)}
        for reason, count in self.failures.items():
            stats[f"dns_failures.{reason}"] = count
        return stats

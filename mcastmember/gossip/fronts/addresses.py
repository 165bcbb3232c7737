"""The addresses a gossip front is given: ``ADDR[:PORT]`` texts (the
``advertise`` and ``retry_join`` settings) and the address it advertises.

Serf's agent binds ``-bind`` and tells the others ``-advertise`` (behind NAT,
in a container, on a host with several addresses the two differ). Without
``-advertise`` memberlist advertises the bound address, or, bound to every
address (0.0.0.0), one it picks: a private address of the host, and it
refuses to start if there is none (net_transport.go FinalAdvertiseAddr).
Here the pick is the address the host's routes send from to a public
destination, when that address is private: the kernel answers from its
routing table (a UDP ``connect`` sends nothing).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable

from ..._runtime.errors import ConfigurationError
from ..memberlist.state import Addr

__all__ = ["choose_advertise", "parse_address", "parse_seeds", "route_source"]

# Documentation addresses (RFC 5737, RFC 3849): never anyone's, and a UDP
# connect to them only asks the routing table which source it would use.
_PROBE = {4: "192.0.2.1", 6: "2001:db8::1"}


def parse_address(text: object, default_port: int, what: str) -> Addr:
    """``(ip, port)`` from ``"10.0.0.5"``, ``"10.0.0.5:7946"``, ``"fd00::5"``
    or ``"[fd00::5]:7946"``; a ConfigurationError naming ``what`` else."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigurationError(f"{what} {text!r} is not an address")
    spec = host = text.strip()
    port = str(default_port)
    if spec.startswith("["):
        host, bracket, rest = spec[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ConfigurationError(f"{what} {spec!r}: write an IPv6 address as [ADDR]:PORT")
        port = rest[1:] or port
    elif spec.count(":") == 1:
        host, _, port = spec.partition(":")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise ConfigurationError(f"{what} {spec!r}: {host!r} is not an IP address") from None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigurationError(f"{what} {spec!r}: port {port!r} is not between 1 and 65535")
    if ip.is_unspecified:
        raise ConfigurationError(f"{what} {spec!r} is not a specific address")
    return str(ip), int(port)


def parse_seeds(specs: Iterable[str], default_port: int, what: str = "retry_join") -> tuple[Addr, ...]:
    """Each seed's ``(ip, port)``, ``default_port`` (Serf's) where none is given."""
    return tuple(parse_address(spec, default_port, what) for spec in specs)


def route_source(version: int) -> str | None:
    """The address this host's routes send from toward a public destination
    (None: no route), asked of the kernel without sending anything."""
    family = socket.AF_INET6 if version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((_PROBE[version], 9))
        except OSError:
            return None
        return str(probe.getsockname()[0])


def choose_advertise(bind_addr: str, port: int, advertise: str | None,
                     route: Callable[[int], str | None] = route_source) -> Addr:
    """What the others list and reach us at: ``advertise`` (its port, or
    ``port``), else ``bind_addr``, else (bound to every address) the private
    address ``route`` gives; a ConfigurationError when none fits."""
    bind = ipaddress.ip_address(bind_addr)
    if advertise is not None:
        addr = parse_address(advertise, port, "advertise")
        if ipaddress.ip_address(addr[0]).version != bind.version:
            raise ConfigurationError(f"advertise {advertise!r} is not of the bind address's family "
                                     f"(IPv{bind.version}): others could not reach us there")
        return addr
    if not bind.is_unspecified:
        return bind_addr, port
    picked = route(bind.version)
    ip = None if picked is None else ipaddress.ip_address(picked.split("%")[0])
    if ip is None or not ip.is_private or ip.is_loopback or ip.is_link_local:
        found = "this host has no route" if ip is None else f"the host's routes send from {ip}, not a private address"
        raise ConfigurationError(f"bound to {bind_addr}, no address to advertise can be chosen ({found}): "
                                 "give advertise (--advertise) the address the others reach this member at")
    return str(ip), port

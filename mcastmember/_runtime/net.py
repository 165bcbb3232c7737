"""Socket setup and checking of network settings (group, port, interface).

One socket receives (bound to the group and port, joined on one interface);
another sends (connected to the group, so each heartbeat is a single
``send`` with no address to convert). Receive timeouts use SO_RCVTIMEO on a
blocking socket rather than Python's ``settimeout``, which would add a
``poll`` before every ``recv``: one system call per heartbeat, not two.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import struct
import sys
from typing import TYPE_CHECKING

from .errors import ConfigurationError

if TYPE_CHECKING:
    import selectors
    from collections.abc import Sequence
    from typing import Literal

# Linux: deliver only the groups this socket joined (the default, 1, delivers
# every group joined by any socket on the host to a socket bound to the port).
# Older Pythons lack the name; 49 is its number in Linux's <linux/in.h> only
# (elsewhere 49 may be another option, so there it is not set at all).
IP_MULTICAST_ALL: int | None = getattr(socket, "IP_MULTICAST_ALL",
                                       49 if sys.platform.startswith("linux") else None)


# Linux's IPV6_MULTICAST_ALL (<linux/in6.h>), as IP_MULTICAST_ALL for IPv4.
IPV6_MULTICAST_ALL: int | None = getattr(socket, "IPV6_MULTICAST_ALL",
                                         29 if sys.platform.startswith("linux") else None)


def check_group(address: object) -> str:
    """The group as text; ConfigurationError unless it is an IPv4 or IPv6
    multicast address."""
    try:
        group = ipaddress.ip_address(str(address))
    except ValueError:
        raise ConfigurationError(f"{address!r} is not an IPv4 or IPv6 address") from None
    if not group.is_multicast:
        raise ConfigurationError(f"{address} is not a multicast group "
                                 f"(224.0.0.0/4 for IPv4, ff00::/8 for IPv6)")
    return str(group)


def family_of(address: str) -> Literal[4, 6]:
    """4 or 6: the IP version of an address in text."""
    return ipaddress.ip_address(address.split("%")[0]).version


def unscoped(address: str | ipaddress.IPv4Address | ipaddress.IPv6Address
             ) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address without its scope (``fe80::1%eth0``: ``fe80::1``), an
    IPv4-mapped IPv6 address as the IPv4 one (what a dual-stack socket
    reports for an IPv4 sender). ValueError for what is not an address."""
    value = ipaddress.ip_address(str(address).split("%")[0])
    if isinstance(value, ipaddress.IPv6Address) and value.ipv4_mapped:
        return value.ipv4_mapped
    return value


def socket_family(address: str) -> socket.AddressFamily:
    """The socket family for an address's text: AF_INET6 if it has a colon."""
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def link_scoped(group: str) -> bool:
    """True for an IPv6 group that exists only on one link (ff01::/16 and
    ff02::/16): it means nothing without the interface it is on."""
    address = ipaddress.ip_address(group)
    return address.version == 6 and (address.packed[1] & 0x0F) in (1, 2)


def check_port(port: object, name: str = "port", allow_zero: bool = False,
               allow_unused: bool = False) -> int:
    """A port number as int; ConfigurationError when out of range."""
    if isinstance(port, bool) or not isinstance(port, int):
        raise ConfigurationError(f"{name} must be a whole number, not {port!r}")
    if allow_unused and port == -1:
        return port
    low = 0 if allow_zero else 1
    if not low <= port <= 65535:
        raise ConfigurationError(f"{name} {port} is out of range ({low}-65535)")
    return port


def host_bytes(host: object) -> bytes:
    """Raw address bytes of an IPv4 or IPv6 literal (4 or 16 bytes)."""
    if isinstance(host, (bytes, bytearray)):
        if len(host) not in (4, 16):
            raise ConfigurationError("host bytes must be 4 (IPv4) or 16 (IPv6) long")
        return bytes(host)
    try:
        address = ipaddress.ip_address(str(host))
    except ValueError:
        raise ConfigurationError(f"host {host!r} is not an IPv4 or IPv6 address") from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped   # Tribes sends 4 bytes for an IPv4 host
    return address.packed


def default_source_address(group: str, port: int) -> str:
    """The address the kernel would send the group's traffic from (nothing is sent)."""
    probe = socket.socket(socket.AF_INET6 if family_of(group) == 6 else socket.AF_INET,
                          socket.SOCK_DGRAM)
    try:
        probe.connect((group, port))
        return str(probe.getsockname()[0])     # the address part of (address, port, ...)
    except OSError as error:
        raise ConfigurationError(
            f"cannot tell which address reaches {group}; set interface= or host= ({error})") from None
    finally:
        probe.close()


def socket_address(address: str, port: int) -> tuple[str, int] | tuple[str, int, int, int]:
    """The address tuple to bind: an IPv6 address's scope (``fe80::1%2`` or
    ``%eth0``) goes in the tuple, where Python's socket looks for it (it
    does not read it from the text)."""
    text, _, scope = address.partition("%")
    if not scope:
        return (address, port)
    return (text, port, 0, int(scope) if scope.isdigit() else socket.if_nametoindex(scope))



def open_listener(address: str, port: int, backlog: int = 64) -> socket.socket:
    """A non-blocking TCP socket listening on ``address`` (a link-local IPv6
    address's card in the bind tuple) and ``port`` (0: the kernel's choice),
    for the Tribes listeners and the metrics server. Closed again if binding
    or listening fails; the OSError goes on to the caller."""
    sock = socket.socket(socket_family(address), socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(socket_address(address, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock

def open_datagram(address: str, port: int) -> socket.socket:
    """A non-blocking UDP socket bound to ``address`` (a link-local IPv6
    address's card in the bind tuple) and ``port``, for unicast datagrams
    (the gossip fronts). Closed again if binding fails."""
    sock = socket.socket(socket_family(address), socket.SOCK_DGRAM)
    try:
        sock.bind(socket_address(address, port))
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def open_connection(source: str, peer: tuple[str, int]) -> socket.socket:
    """A non-blocking TCP socket bound to ``source`` (any port: a connection
    leaves from the address given, never another) and connecting to
    ``peer``: writable once connected, SO_ERROR says why not. Closed again
    if it cannot even start; the OSError goes on to the caller."""
    sock = socket.socket(socket_family(source), socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.bind(socket_address(source, 0))
        sock.connect_ex(peer)
    except OSError:
        sock.close()
        raise
    return sock


def _set_receive_timeout(sock: socket.socket, seconds: float) -> None:
    micros = int(seconds * 1_000_000)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                    struct.pack("@ll", micros // 1_000_000, micros % 1_000_000))


def _set_receive_buffer(sock: socket.socket, size: int) -> None:
    """A large receive buffer absorbs bursts (and floods) without losing
    heartbeats. SO_RCVBUFFORCE passes the system cap where we may (root);
    otherwise SO_RCVBUF gets what the cap allows."""
    force = getattr(socket, "SO_RCVBUFFORCE", None)
    if force is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, size)
            return
        except OSError:
            pass
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
    except OSError:
        pass   # keep the system default


def open_receiver(group: str, port: int, interface: str | list[str] | None, timeout: float,
                  buffer_bytes: int = 4 << 20) -> socket.socket:
    """A blocking UDP socket that hears the IPv4 ``group:port`` on
    ``interface`` (an address, a list of them to join on each, or None: the
    kernel's choice) and wakes at least every ``timeout`` seconds."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        _set_receive_buffer(sock, buffer_bytes)
        # Binding to the group address (Linux) keeps other traffic to the port out.
        sock.bind((group, port))
        for address in interface if isinstance(interface, list) else [interface]:
            membership = socket.inet_aton(group) + socket.inet_aton(address or "0.0.0.0")
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
        if IP_MULTICAST_ALL is not None:
            try:
                sock.setsockopt(socket.IPPROTO_IP, IP_MULTICAST_ALL, 0)
            except OSError:
                pass   # a kernel (or sandbox) without the option
        _set_receive_timeout(sock, timeout)
    except BaseException:
        sock.close()
        raise
    return sock


def open_sender(group: str, port: int, interface: str | None, ttl: int | None,
                loopback: bool) -> socket.socket:
    """A UDP socket connected to ``group:port`` that sends on ``interface``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        if interface is not None:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(interface))
            sock.bind((interface, 0))
        if ttl is not None:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, ttl)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1 if loopback else 0)
        sock.connect((group, port))
    except BaseException:
        sock.close()
        raise
    return sock


def open_unicast(address: str, port: int, buffer_bytes: int = 4 << 20) -> socket.socket:
    """A non-blocking UDP socket bound to ``address:port`` that sends unicast
    heartbeats (unconnected: one ``sendmmsg`` reaches every peer) and hears
    them. Never SO_REUSEADDR: a second member on the same address and port
    would take half of the datagrams, so it gets a clear error instead."""
    family = socket_family(address)
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        _set_receive_buffer(sock, buffer_bytes)
        # Room for one round of heartbeats to every peer at once.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer_bytes)
        try:
            sock.bind(socket_address(address, port))
        except OSError as error:
            raise OSError(error.errno, f"cannot hear unicast heartbeats on {address} port "
                                       f"{port}: {error.strerror}") from None
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class Link:
    """One interface a multicast socket uses: its address (text, no scope)
    and index (0: the kernel's choice)."""

    __slots__ = ("address", "index")

    def __init__(self, address: str, index: int = 0) -> None:
        self.address, self.index = address, index

    def __repr__(self) -> str:
        return f"Link({self.address}, index {self.index})"


def open_receivers(group: str, port: int, links: Sequence[Link], timeout: float,
                   buffer_bytes: int = 4 << 20) -> list[socket.socket]:
    """The sockets that hear ``group:port`` on every link of ``links`` (an
    empty list: the kernel's choice of interface). IPv4, or a global IPv6
    group: one socket joined on each link. A link-scoped IPv6 group (ff02::)
    is bound to its interface: one socket per link."""
    if family_of(group) == 4:
        return [open_receiver(group, port, [link.address for link in links] or None, timeout,
                              buffer_bytes)]
    if link_scoped(group) and len(links) > 1:
        return [_open_receiver6(group, port, [link], timeout, buffer_bytes) for link in links]
    return [_open_receiver6(group, port, links, timeout, buffer_bytes)]


def open_senders(group: str, port: int, links: Sequence[Link | None], ttl: int | None,
                 loopback: bool) -> list[socket.socket]:
    """One connected socket per link (one on the kernel's choice when
    ``links`` is empty): each heartbeat goes out on every card."""
    if family_of(group) == 4:
        return [open_sender(group, port, link.address if link else None, ttl, loopback)
                for link in (links or [None])]
    return [_open_sender6(group, port, link, ttl, loopback) for link in (links or [None])]


def _open_receiver6(group: str, port: int, links: Sequence[Link], timeout: float,
                    buffer_bytes: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        _set_receive_buffer(sock, buffer_bytes)
        # Bound to the group, as for IPv4; a link-scoped group only exists
        # with its interface, so binding names it (and hears only that card).
        scope = links[0].index if links and link_scoped(group) else 0
        sock.bind((group, port, 0, scope))
        packed = socket.inet_pton(socket.AF_INET6, group)
        for link in links or [Link("::", 0)]:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP,
                            packed + struct.pack("@I", link.index))
        if IPV6_MULTICAST_ALL is not None:
            try:
                sock.setsockopt(socket.IPPROTO_IPV6, IPV6_MULTICAST_ALL, 0)
            except OSError:
                pass   # a kernel without the option
        _set_receive_timeout(sock, timeout)
    except BaseException:
        sock.close()
        raise
    return sock


def _open_sender6(group: str, port: int, link: Link | None, ttl: int | None,
                  loopback: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    try:
        index = link.index if link else 0
        if index:
            assert link is not None         # an index is a link's
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF,
                            struct.pack("@I", index))
            local = ipaddress.IPv6Address(link.address)
            try:
                sock.bind((link.address, 0, 0, index if local.is_link_local else 0))
            except OSError as error:
                if error.errno != errno.EADDRNOTAVAIL:
                    raise
                raise OSError(error.errno, f"cannot send from {link.address}: it is not usable "
                              f"yet (duplicate address detection keeps a new IPv6 address, or "
                              f"one on a card just up, tentative for a second or two) or no "
                              f"longer there") from None
        if ttl is not None:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, ttl)
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 1 if loopback else 0)
        sock.connect((group, port, 0, index if link_scoped(group) else 0))
    except BaseException:
        sock.close()
        raise
    return sock


def unregister_and_close(sel: selectors.BaseSelector, sock: socket.socket) -> None:
    """Take ``sock`` off the selector (if it is on it) and close it."""
    try:
        sel.unregister(sock)
    except (KeyError, ValueError):
        pass
    sock.close()

"""The host's network interfaces, and choosing one from what a user wrote.

``interface`` may name a card (``"eth0"``), give its index (``2``) or one of
its addresses (IPv4 or IPv6). ``choose`` finds it, picks the address we
advertise for the group's family, and says why; when nothing matches, the
error lists what this host has, so the fix is one read away. Multicast
users trip over this more than anything else (a Docker bridge or a VPN
picked instead of the LAN), so the choice is explicit and never "all".

The list comes from the C library's ``getifaddrs`` (Linux and the BSDs,
macOS included), read with ctypes: no dependency, no subprocess.
"""

from __future__ import annotations

import ctypes
import ipaddress
import socket
import sys
from typing import TYPE_CHECKING

from ..._runtime.errors import ConfigurationError
from ..._runtime.net import unscoped

if TYPE_CHECKING:
    from collections.abc import Sequence

    from typing_extensions import TypeAlias

    IPAddress: TypeAlias = "ipaddress.IPv4Address | ipaddress.IPv6Address"

IFF_UP = 0x1
IFF_LOOPBACK = 0x8
IFF_MULTICAST = 0x1000 if sys.platform.startswith("linux") else 0x8000


class Interface:
    """One network card: ``name``, ``index``, ``flags`` and its addresses
    (``ipaddress`` objects; IPv6 link-local ones carry their scope)."""

    __slots__ = ("name", "index", "flags", "addresses")

    def __init__(self, name: str, index: int, flags: int, addresses: list[IPAddress]) -> None:
        self.name, self.index, self.flags, self.addresses = name, index, flags, addresses

    @property
    def up(self) -> bool:
        return bool(self.flags & IFF_UP)

    @property
    def multicast(self) -> bool:
        return bool(self.flags & IFF_MULTICAST)

    @property
    def loopback(self) -> bool:
        return bool(self.flags & IFF_LOOPBACK)

    def describe(self) -> str:
        state = "up" if self.up else "down"
        extra = "" if self.multicast or self.loopback else ", no multicast"
        addresses = ", ".join(str(a) for a in self.addresses) or "no address"
        return f"{self.name} (index {self.index}, {state}{extra}): {addresses}"

    def __repr__(self) -> str:
        return f"Interface({self.describe()})"


class _IfAddrs(ctypes.Structure):
    pass


_IfAddrs._fields_ = [("ifa_next", ctypes.POINTER(_IfAddrs)), ("ifa_name", ctypes.c_char_p),
                     ("ifa_flags", ctypes.c_uint), ("ifa_addr", ctypes.c_void_p),
                     ("ifa_netmask", ctypes.c_void_p), ("ifa_ifu", ctypes.c_void_p),
                     ("ifa_data", ctypes.c_void_p)]


def _family_of(raw: bytes) -> int:
    """sa_family of a struct sockaddr: a u16 on Linux, the second byte on the BSDs."""
    if sys.platform.startswith("linux"):
        return int.from_bytes(raw[0:2], sys.byteorder)
    return raw[1]


def _address_of(pointer: int | None) -> IPAddress | None:
    if not pointer:
        return None
    raw = ctypes.string_at(pointer, 28)
    family = _family_of(raw)
    if family == socket.AF_INET:
        return ipaddress.IPv4Address(raw[4:8])
    if family == socket.AF_INET6:
        address = ipaddress.IPv6Address(raw[8:24])
        scope = int.from_bytes(raw[24:28], sys.byteorder)
        if address.is_link_local and scope:
            return ipaddress.IPv6Address(f"{address}%{scope}")
        return address
    return None


_libc: ctypes.CDLL | None = None


def _c_library() -> ctypes.CDLL:
    """The C library, as already loaded into this process: dlopen(NULL)
    sees the symbols of the interpreter and of every library it loaded,
    getifaddrs among them. (ctypes.util.find_library would run
    ``/sbin/ldconfig -p`` in a subprocess to find a file we already have.)"""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def list_interfaces() -> list[Interface]:
    """Every interface of this host, in index order."""
    libc = _c_library()
    head = ctypes.POINTER(_IfAddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        raise OSError(ctypes.get_errno(), "getifaddrs failed")
    found: dict[str, Interface] = {}
    try:
        entry = head
        while entry:
            item = entry.contents
            name = item.ifa_name.decode("utf-8", "replace")
            card = found.get(name)
            if card is None:
                card = found[name] = Interface(name, socket.if_nametoindex(name),
                                               item.ifa_flags, [])
            address = _address_of(item.ifa_addr)
            if address is not None and address not in card.addresses:
                card.addresses.append(address)
            entry = item.ifa_next
    finally:
        libc.freeifaddrs(head)
    return sorted(found.values(), key=lambda card: card.index)


def _preference(address: IPAddress) -> tuple[bool, bool, bool]:
    """Lower is better: a global address before a link-local one."""
    return (address.is_link_local, address.is_loopback, address.version == 6 and address.is_private)


class Choice:
    """The outcome of ``choose``: the interface, the address we advertise
    and bind to (None when the card has none of the family), and why."""

    __slots__ = ("interface", "address", "reason")

    def __init__(self, interface: Interface, address: IPAddress, reason: str) -> None:
        self.interface, self.address, self.reason = interface, address, reason


def choose(spec: str | int, family: int = 4,
           interfaces: Sequence[Interface] | None = None) -> Choice:
    """Find the interface ``spec`` names (a name, an index, or an address)
    and the address of IP ``family`` (4 or 6) to use on it."""
    cards = list_interfaces() if interfaces is None else interfaces
    card, given = _find(spec, cards)
    if card is None:
        card, given = _loopback(spec, cards)
    if card is None:
        known = "; ".join(c.describe() for c in cards) or "none"
        raise ConfigurationError(f"no network interface {spec!r} on this host "
                                 f"(this host has: {known})")
    if given is not None:
        if given.version != family:
            raise ConfigurationError(f"interface address {given} is IPv{given.version}, "
                                     f"the group is IPv{family}")
        return Choice(card, given, f"{given} was given")
    candidates = sorted((a for a in card.addresses if a.version == family), key=_preference)
    if not candidates:
        raise ConfigurationError(f"interface {card.name} has no IPv{family} address "
                                 f"({card.describe()})")
    picked = candidates[0]
    if len(candidates) == 1:
        reason = f"{picked} is {card.name}'s only IPv{family} address"
    elif family == 6 and not picked.is_link_local:
        reason = f"{picked} is {card.name}'s first global IPv6 address (preferred to link-local)"
    else:
        reason = f"{picked} is the first of {card.name}'s {len(candidates)} IPv{family} addresses"
    return Choice(card, picked, reason)


def _find(spec: str | int,
          cards: Sequence[Interface]) -> tuple[Interface | None, IPAddress | None]:
    """(interface, the address given or None) for a name, index or address."""
    if isinstance(spec, bool):
        return None, None
    if isinstance(spec, int):
        return next((c for c in cards if c.index == spec), None), None
    text = str(spec).strip()
    if text.isdigit():
        return next((c for c in cards if c.index == int(text)), None), None
    by_name = next((c for c in cards if c.name == text), None)
    if by_name is not None:
        return by_name, None
    try:
        wanted = unscoped(text)
    except ValueError:
        return None, None
    for card in cards:
        for address in card.addresses:
            if unscoped(address) == wanted:
                return card, address
    return None, None


def _loopback(spec: str | int,
              cards: Sequence[Interface]) -> tuple[Interface | None, IPAddress | None]:
    """127.0.0.2 and the rest of 127.0.0.0/8 belong to the loopback card
    without being listed on it (tests give each node its own)."""
    try:
        address = unscoped(str(spec).strip())
    except ValueError:
        return None, None
    if not address.is_loopback:
        return None, None
    return next(((c, address) for c in cards if c.loopback), (None, None))


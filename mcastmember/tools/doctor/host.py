"""What the host's kernel says, sending nothing: the card it routes a group
through, the groups it lists as joined, who holds a UDP port, and its
reverse-path filter (``/proc`` on Linux; where a file cannot be read, the
answer is "unknown", never an error)."""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from typing import TYPE_CHECKING

from ..._runtime import net

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ...tribes.net.interfaces import Interface

# The multicast range of each IP version, as a route names it.
MULTICAST_ROUTE = {4: "224.0.0.0/4", 6: "ff00::/8"}


def route_card(group: str, cards: Sequence[Interface]) -> Interface | None:
    """The card the kernel would send ``group`` through when nobody names
    one, or None when it has no route. The kernel's own lookup decides
    (``connect`` sends nothing); the card is that of the source address it
    picks (IPv4: the main table's longest match first, as that is the card)."""
    family = net.family_of(group)
    sock = socket.socket(socket.AF_INET6 if family == 6 else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.connect((group, 9))
        source = sock.getsockname()
    except OSError:
        return None
    finally:
        sock.close()
    if family == 4:
        name = ipv4_route_card(group)
        if name is not None:
            return next((c for c in cards if c.name == name), None)
    if family == 6 and len(source) > 3 and source[3]:
        return next((c for c in cards if c.index == source[3]), None)
    address = net.unscoped(source[0])
    for card in cards:
        if any(net.unscoped(a) == address for a in card.addresses):
            return card
    return next((c for c in cards if c.loopback), None) if address.is_loopback else None


def ipv4_route_card(destination: str) -> str | None:
    """The card of the main table's longest-prefix, lowest-metric route
    (/proc/net/route), or None."""
    wanted = ipaddress.IPv4Address(destination)
    best: tuple[tuple[int, int], str] | None = None    # ((-prefix length, metric), card)
    try:
        with open("/proc/net/route") as f:
            rows = [line.split() for line in f.readlines()[1:]]
    except OSError:
        return None
    for row in rows:
        try:
            flags, metric = int(row[3], 16), int(row[6])
            network = ipaddress.IPv4Network(
                (_u32_address(row[1]), bin(int(row[7], 16)).count("1")), strict=False)
        except (ValueError, IndexError):
            continue
        if flags & 1 and wanted in network:          # RTF_UP
            key = (-network.prefixlen, metric)
            if best is None or key < best[0]:
                best = (key, row[0])
    return best[1] if best else None


def _u32_address(text: str) -> str:
    """An IPv4 address /proc prints as one 32-bit hex number in host order."""
    return socket.inet_ntoa(struct.pack("=I", int(text, 16)))


def kernel_groups(family: int) -> dict[str, set[str]]:
    """{card name: {groups joined on it}} (/proc/net/igmp or igmp6)."""
    joined: dict[str, set[str]] = {}
    try:
        if family == 4:
            with open("/proc/net/igmp") as f:
                card = None
                for line in f.readlines()[1:]:
                    fields = line.split()
                    if not line[:1].isspace():
                        card = fields[1]
                    elif fields and card is not None:
                        joined.setdefault(card, set()).add(_u32_address(fields[0]))
        else:
            with open("/proc/net/igmp6") as f:
                for fields in (line.split() for line in f):
                    group = str(ipaddress.IPv6Address(bytes.fromhex(fields[2])))
                    joined.setdefault(fields[1], set()).add(group)
    except (OSError, ValueError, IndexError):
        pass
    return joined


def port_holders(port: int) -> list[tuple[str, str]]:
    """[(local address, who)] of the UDP sockets of this host bound to ``port``;
    who is "name (pid N)" where /proc tells, else "another process"."""
    found: list[tuple[str, str]] = []      # (local address, socket inode)
    for path, family in (("/proc/net/udp", 4), ("/proc/net/udp6", 6)):
        try:
            with open(path) as f:
                rows = [line.split() for line in f.readlines()[1:]]
        except OSError:
            continue
        for row in rows:
            try:
                address, hexport = row[1].split(":")
                if int(hexport, 16) != port:
                    continue
                raw = bytes.fromhex(address)
                if family == 4:
                    text = socket.inet_ntoa(struct.pack("=I", int(address, 16)))
                else:
                    words = struct.unpack("=4I", raw)
                    text = str(ipaddress.IPv6Address(struct.pack("!4I", *words)))
                found.append((text, row[9]))
            except (ValueError, IndexError):
                continue
    owners = _socket_owners({inode for _, inode in found}) if found else {}
    return [(text, owners.get(inode, "another process")) for text, inode in found]


def _socket_owners(inodes: Iterable[str]) -> dict[str, str]:
    """{socket inode: "name (pid N)"} of the processes holding them."""
    owners, wanted = {}, {f"socket:[{inode}]": inode for inode in inodes}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                inode = wanted.get(os.readlink(f"/proc/{pid}/fd/{fd}"))
                if inode is not None and inode not in owners:
                    with open(f"/proc/{pid}/comm") as f:
                        owners[inode] = f"{f.read().strip()} (pid {pid})"
        except OSError:
            continue
    return owners


def rp_filter(card: str) -> int | None:
    """The reverse-path filter mode the kernel applies on ``card`` (the
    larger of 'all' and the card's), or None where it cannot be read."""
    values = [v for v in (rp_filter_setting("all"), rp_filter_setting(card)) if v is not None]
    return max(values) if values else None


def rp_filter_setting(name: str) -> int | None:
    """net.ipv4.conf.NAME.rp_filter, or None where it cannot be read."""
    try:
        with open(f"/proc/sys/net/ipv4/conf/{name}/rp_filter") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


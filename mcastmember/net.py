"""Socket setup and checking of network settings (group, port, interface).

One socket receives (bound to the group and port, joined on one interface);
another sends (connected to the group, so each heartbeat is a single
``send`` with no address to convert). Receive timeouts use SO_RCVTIMEO on a
blocking socket rather than Python's ``settimeout``, which would add a
``poll`` before every ``recv``: one system call per heartbeat, not two.
"""

import errno
import ipaddress
import socket
import struct
import sys

from .errors import ConfigurationError

# Linux: deliver only the groups this socket joined (the default, 1, delivers
# every group joined by any socket on the host to a socket bound to the port).
# Older Pythons lack the name; 49 is its number in Linux's <linux/in.h> only
# (elsewhere 49 may be another option, so there it is not set at all).
IP_MULTICAST_ALL = getattr(socket, "IP_MULTICAST_ALL",
                           49 if sys.platform.startswith("linux") else None)


def check_group(address):
    """The group as text; ConfigurationError unless it is an IPv4 multicast address."""
    try:
        group = ipaddress.IPv4Address(str(address))
    except ValueError:
        raise ConfigurationError(f"{address!r} is not an IPv4 address") from None
    if not group.is_multicast:
        raise ConfigurationError(f"{address} is not a multicast group (224.0.0.0/4)")
    return str(group)


def check_port(port, name="port", allow_zero=False, allow_unused=False):
    """A port number as int; ConfigurationError when out of range."""
    if isinstance(port, bool) or not isinstance(port, int):
        raise ConfigurationError(f"{name} must be a whole number, not {port!r}")
    if allow_unused and port == -1:
        return port
    low = 0 if allow_zero else 1
    if not low <= port <= 65535:
        raise ConfigurationError(f"{name} {port} is out of range ({low}-65535)")
    return port


def check_interface(interface):
    """The interface address as text, checked to be assigned on this host."""
    try:
        address = str(ipaddress.IPv4Address(str(interface)))
    except ValueError:
        raise ConfigurationError(f"interface {interface!r} is not an IPv4 address") from None
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.bind((address, 0))
    except OSError as error:
        if error.errno == errno.EADDRNOTAVAIL:
            raise ConfigurationError(
                f"no network interface on this host has the address {address}") from None
        raise
    finally:
        probe.close()
    return address


def host_bytes(host):
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


def default_source_address(group, port):
    """The address the kernel would send the group's traffic from (nothing is sent)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((group, port))
        return probe.getsockname()[0]
    except OSError as error:
        raise ConfigurationError(
            f"cannot tell which address reaches {group}; set interface or host ({error})") from None
    finally:
        probe.close()


def _set_receive_timeout(sock, seconds):
    micros = int(seconds * 1_000_000)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                    struct.pack("@ll", micros // 1_000_000, micros % 1_000_000))


def _set_receive_buffer(sock, size):
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


def open_receiver(group, port, interface, timeout, buffer_bytes=4 << 20):
    """A blocking UDP socket that hears ``group:port`` on ``interface`` (None:
    the kernel's choice) and wakes at least every ``timeout`` seconds."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        _set_receive_buffer(sock, buffer_bytes)
        # Binding to the group address (Linux) keeps other traffic to the port out.
        sock.bind((group, port))
        membership = socket.inet_aton(group) + socket.inet_aton(interface or "0.0.0.0")
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


def open_sender(group, port, interface, ttl, loopback):
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


def open_unicast(address, port, buffer_bytes=4 << 20):
    """A non-blocking UDP socket bound to ``address:port`` that sends unicast
    heartbeats (unconnected: one ``sendmmsg`` reaches every peer) and hears
    them. Never SO_REUSEADDR: a second member on the same address and port
    would take half of the datagrams, so it gets a clear error instead."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        _set_receive_buffer(sock, buffer_bytes)
        # Room for one round of heartbeats to every peer at once.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer_bytes)
        try:
            sock.bind((address, port))
        except OSError as error:
            raise OSError(error.errno, f"cannot hear unicast heartbeats on {address} port "
                                       f"{port}: {error.strerror}") from None
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock

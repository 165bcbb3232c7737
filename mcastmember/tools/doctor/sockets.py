"""The doctor's socket helpers: whether the kernel would send a group on a
card, whether a member could bind the port, and reading every datagram that
is ready. Binding and connecting send nothing."""

from __future__ import annotations

import errno
import selectors
import socket
from typing import TYPE_CHECKING, cast

from ...tribes.wire import layout as L
from ..._runtime import net

if TYPE_CHECKING:
    from collections.abc import Iterable

    from typing_extensions import TypeAlias

    from ...tribes.net.interfaces import Choice

    # A socket address as recvfrom gives it: (host, port), IPv6 with flow
    # info and scope id.
    SockAddress: TypeAlias = tuple[str, int] | tuple[str, int, int, int]


def cannot_send(group: str, choice: Choice) -> str | None:
    """Why the kernel would refuse to send ``group`` on the card of
    ``choice`` (its error text), or None. Connecting sends nothing."""
    link = net.Link(str(choice.address).split("%")[0], choice.interface.index)
    try:
        for sock in net.open_senders(group, 9, [link], None, True):
            sock.close()
    except OSError as error:
        return error.strerror or str(error)
    return None


def taken(address: str, port: int, group: bool, index: int = 0) -> bool:
    """True when ``address:port`` cannot be bound as a member binds it: the
    group with SO_REUSEADDR (and SO_REUSEPORT), unicast without."""
    text, _, scope = address.partition("%")
    six = ":" in text
    sock = socket.socket(socket.AF_INET6 if six else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        if group:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if hasattr(socket, "SO_REUSEPORT"):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if six:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if group and not net.link_scoped(text):
                index = 0
            sock.bind(net.socket_address(address, port) if scope else (text, port, 0, index))
        else:
            sock.bind((text, port))
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            return True
        raise
    finally:
        sock.close()
    return False


def receive(sockets: Iterable[socket.socket],
             timeout: float) -> list[tuple[bytes, SockAddress, socket.socket]]:
    """(data, source, socket) of every datagram readable within ``timeout``."""
    with selectors.DefaultSelector() as selector:
        for sock in sockets:
            selector.register(sock, selectors.EVENT_READ)
        ready = selector.select(timeout)
    out = []
    for key, _ in ready:
        sock = cast("socket.socket", key.fileobj)     # what was registered above
        while True:
            try:
                data, source = sock.recvfrom(L.RECV_BUFFER_LEN)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                break                  # an ICMP error queued on the unicast socket
            out.append((data, source, sock))
    return out


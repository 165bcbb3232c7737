"""The ``advertise`` check: whether the address a member advertises
(``--advertise``, what the others list and dial) leads to the member bound
at ``--bind``.

An address of this host that is not the one bound leads nowhere (nothing
listens there); an address of another host is right only behind a NAT or a
port forward that sends it to ``--bind``: the doctor dials it from here, by
TCP and UDP, with its own sockets bound where the member will be, and says
whether that arrives. A NAT that does not turn traffic back to the host it
came from (no hairpin) leaves that unknown from here: a warning, not a
failure."""

from __future__ import annotations

import errno
import ipaddress
import socket
import time
from typing import TYPE_CHECKING

from .reach import NO_ROUTE, REFUSED, SILENT, kind, seeds
from .report import FAIL, PASS, WARN, hostport

if TYPE_CHECKING:
    from ..gossip_cli import Options
    from .report import Report, Status

PROBE = b"mcast-demo doctor: advertise probe"      # no memberlist message starts so


def advertised(opts: Options) -> tuple[str, int] | None:
    """``--advertise``'s address and port, or the one chosen for a member
    bound to every address; None when the bound address is advertised."""
    if opts.given.get("advertise") is None and not ipaddress.ip_address(opts.bind).is_unspecified:
        return None
    return opts.advertise


def check(report: Report, opts: Options, wait: float) -> None:
    """advertise: one verdict, none without ``--advertise``."""
    target = advertised(opts)
    if target is None:
        return
    addr, port = target
    where, bound = hostport(addr, port), hostport(opts.bind, opts.port)
    ip = ipaddress.ip_address(addr)
    far = [s for s in seeds(opts) if not ipaddress.ip_address(s[0]).is_loopback]
    if ip.is_loopback and far:
        report.add("advertise", FAIL, f"--advertise {addr} is loopback: {hostport(*far[0])} cannot reach "
                   "this node there", "--advertise an address the seeds can reach (this host's, or its NAT's)")
        return
    if ip.version != ipaddress.ip_address(opts.bind).version:
        report.add("advertise", FAIL, f"--advertise {addr} and --bind {opts.bind} are of two IP families: "
                   "members dial the advertised one", "--advertise an address of --bind's family")
        return
    if _local(addr):
        if port == opts.port and addr == opts.bind:
            report.add("advertise", PASS, f"{where} is the address and port bound")
        elif port == opts.port and ipaddress.ip_address(opts.bind).is_unspecified:
            report.add("advertise", PASS, f"{where} is this host's, and the member binds every address "
                       f"({bound})" + ("" if opts.given.get("advertise") else ": the address chosen to advertise"))
        else:
            report.add("advertise", FAIL, f"--advertise {where} is this host's, but the member binds {bound}: "
                       f"members dial {where}, where it does not listen",
                       f"--advertise {bound}, or --bind {where}")
        return
    report.add("advertise", *_dial(opts, addr, port, wait))


def _local(addr: str) -> bool:
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        try:
            sock.bind((addr, 0))
        except OSError as error:
            if error.errno == errno.EADDRNOTAVAIL:
                return False
            raise
    return True


def _dial(opts: Options, addr: str, port: int, wait: float) -> tuple[Status, str, str | None]:
    """Dial ``addr:port`` from here, listening where the member binds."""
    where, bound = hostport(addr, port), hostport(opts.bind, opts.port)
    family = socket.AF_INET6 if ":" in opts.bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as listener, \
            socket.socket(family, socket.SOCK_DGRAM) as udp:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)     # our own accepted dial's TIME_WAIT
        try:
            listener.bind((opts.bind, opts.port))
            listener.listen(4)
            udp.bind((opts.bind, opts.port))
        except OSError:
            return (WARN, f"--advertise {where} is not an address of this host; whether it leads here "
                    f"cannot be told while {bound} is taken", "run the doctor while the member is stopped")
        tcp_how = _tcp(listener, addr, port, wait)
        udp_ok = _udp(udp, opts.bind, addr, port, wait)
    if tcp_how == PASS and udp_ok:
        return (PASS, f"--advertise {where} (another host's address) leads to {bound} here, by TCP and UDP", None)
    forward = f"forward TCP and UDP port {port} of {addr} to {bound}, or --advertise an address of this host"
    if tcp_how == PASS:
        return (FAIL, f"--advertise {where} leads to {bound} by TCP but not by UDP: members probe by UDP", forward)
    if tcp_how == "elsewhere":
        return (FAIL, f"--advertise {where} is not this host's, and it answers from elsewhere: a connection to it "
                f"reached another listener, not {bound} (another member's address?)",
                f"--advertise this host's address (or its NAT's) instead of {addr}")
    said = {REFUSED: "refuses connections", SILENT: f"does not answer in {wait:g} s",
            NO_ROUTE: "has no route from here"}.get(tcp_how, f"cannot be reached ({tcp_how})")
    return (WARN, f"--advertise {where} is not an address of this host, and from here it {said}: members reach "
            f"this node only if a NAT or port forward on their way sends it to {bound}", forward)


def _tcp(listener: socket.socket, addr: str, port: int, wait: float) -> str:
    """PASS when a connection to ``addr:port`` arrives at ``listener``;
    "elsewhere" when it connects but not to us; else how it failed."""
    try:
        with socket.create_connection((addr, port), timeout=wait) as conn:
            listener.settimeout(min(wait, 1.0))
            try:
                listener.accept()[0].close()    # only the doctor dials it now: ours
            except OSError:
                return "elsewhere"
            return PASS
    except OSError as error:
        return kind(error)


def _udp(udp: socket.socket, source: str, addr: str, port: int, wait: float) -> bool:
    """True when a datagram sent to ``addr:port`` arrives at ``udp``."""
    family = socket.AF_INET6 if ":" in source else socket.AF_INET
    deadline = time.monotonic() + min(wait, 1.0)
    with socket.socket(family, socket.SOCK_DGRAM) as sender:
        sender.bind((source, 0))
        try:
            sender.sendto(PROBE, (addr, port))
        except OSError:
            return False
        while (left := deadline - time.monotonic()) > 0:
            udp.settimeout(left)
            try:
                data = udp.recv(65536)
            except OSError:
                return False
            if data == PROBE:
                return True
    return False


__all__ = ["advertised", "check"]

"""Why a seed cannot be reached, told as what to do: a refused connection
(nothing listens there: the seed is not up), no answer (the host is down, or
a firewall drops the port), no route; for each, what a member with these
flags does about it (``--join`` gives up at once, ``--retry-join`` keeps
trying).

The seeds a member joins come from ``--join`` and ``--retry-join``; the
doctor checks both kinds alike, and only the advice differs."""

from __future__ import annotations

import errno
import socket
from typing import TYPE_CHECKING

from .report import FAIL, hostport

if TYPE_CHECKING:
    from ..gossip_cli import Options
    from .report import CheckName, Status

    Verdict = tuple[CheckName, Status, str, "str | None"]

# What an error to connect or to send says about the seed, in a few words.
REFUSED = "refused"
SILENT = "no answer"
NO_ROUTE = "no route"


def retry_seeds(opts: Options) -> list[tuple[str, int]]:
    """The ``--retry-join`` seeds (none when the flag is not given)."""
    from ...gossip.fronts.addresses import parse_address
    from ..gossip_cli import DEFAULT_PORT

    return [parse_address(spec, DEFAULT_PORT, "--retry-join") for spec in opts.given.get("retry_join", ())]


def seeds(opts: Options) -> list[tuple[str, int]]:
    """Every seed the member would join, each once: ``--join``'s, then ``--retry-join``'s."""
    found: list[tuple[str, int]] = []
    for seed in [*opts.seeds, *retry_seeds(opts)]:
        if seed not in found:
            found.append(seed)
    return found


def kind(error: OSError) -> str:
    """REFUSED, SILENT or NO_ROUTE, or the error's own text."""
    if isinstance(error, ConnectionRefusedError):
        return REFUSED
    if isinstance(error, socket.timeout):
        return SILENT
    if error.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return NO_ROUTE
    return (error.strerror or str(error)).lower()


def tcp_unreachable(opts: Options, seed: tuple[str, int], error: OSError, wait: float) -> Verdict:
    """seed_tcp when the connection to ``seed`` failed."""
    where = hostport(*seed)
    how = kind(error)
    if how == REFUSED:
        detail = f"{where} refuses TCP connections: nothing listens on port {seed[1]} there (the seed is not up?)"
        fix = f"start the seed's agent (serf agent -bind {where}), or join the port it binds"
    elif how == SILENT:
        detail = f"{where} does not answer by TCP (nothing in {wait:g} s): the host is down, or a firewall " \
            f"drops TCP port {seed[1]}"
        fix = f"check the seed's host is up, and let TCP port {seed[1]} through the firewalls between"
    elif how == NO_ROUTE:
        detail = f"no route to {where} by TCP (host or network unreachable)"
        fix = f"check the address, and this host's routes (ip route get {seed[0]})"
    else:
        detail = f"cannot reach {where} by TCP: {how}"
        fix = f"start the agent there (serf agent -bind {where}), or let TCP port {seed[1]} through the " \
            "firewalls between"
    return ("seed_tcp", FAIL, detail, f"{fix}; {join_advice(opts, seed)}")


def udp_unanswered(seed: tuple[str, int], pings: int, refused: bool, tcp_ok: bool) -> Verdict:
    """seed_udp when no ping was acked; ``refused``: the kernel said the port
    is closed (an ICMP port unreachable came back)."""
    where = hostport(*seed)
    if refused and tcp_ok:
        return ("seed_udp", FAIL, f"{where} answers by TCP but refuses UDP: nothing listens on UDP port "
                f"{seed[1]} there (a TCP-only port forward or proxy?)",
                f"forward UDP port {seed[1]} too, both ways (a container: -p {seed[1]}:{seed[1]}/udp)")
    if refused:
        return ("seed_udp", FAIL, f"{where} refuses UDP too: nothing listens on UDP port {seed[1]} there",
                "start the seed's agent there (serf members on it tells whether it runs)")
    if tcp_ok:
        return ("seed_udp", FAIL, f"{where} answers by TCP but not by UDP: no ack to {pings} pings",
                f"let UDP port {seed[1]} through the firewalls between, both ways (members probe by UDP)")
    return ("seed_udp", FAIL, f"no ack from {where} by UDP either ({pings} pings)",
            "check the seed runs (serf members on it) and the address and port")


def join_advice(opts: Options, seed: tuple[str, int]) -> str:
    """What this member does about a seed that is not up, by the flag that names it."""
    if seed in retry_seeds(opts):
        from ...gossip.serf.retry_join import DEFAULT_RETRY_INTERVAL

        every = f"every {opts.given.get('retry_interval', DEFAULT_RETRY_INTERVAL):g} s"
        most = opts.given.get("retry_max", 0)
        until = f"{most} more times at most (--retry-max), then exits 1" if most else \
            "for as long as it runs (--retry-max 0)"
        return f"with --retry-join this member tries again {every}, {until}: it joins once the seed is up"
    return ("mcast-demo gossip --join gives up at once when no seed answers: --retry-join keeps trying "
            "until the seed is up, as serf agent -retry-join does")


__all__ = ["join_advice", "kind", "retry_seeds", "seeds", "tcp_unreachable", "udp_unanswered"]

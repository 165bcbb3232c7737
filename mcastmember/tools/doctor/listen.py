"""After the local checks: join the group, send to itself (``loop``), ask the
kernel what it joined (``joined``), then listen ``wait`` seconds for members
and, with ``pair``, exchange numbered doctor datagrams with the peers."""

from __future__ import annotations

import ipaddress
import time
from typing import TYPE_CHECKING

from ...tribes.engine.packet import decode
from ..._runtime import net
from ...tribes.wire.errors import MalformedPacket
from . import datagrams
from .host import MULTICAST_ROUTE, kernel_groups
from .measure import span
from .report import FAIL, PASS, WARN
from .sockets import receive

if TYPE_CHECKING:
    import socket

    from .context import DoctorContext, Way
    from .datagrams import Datagram
    from .sockets import SockAddress

LOOP_DATAGRAMS = 3
LOOP_WAIT_S = 0.5             # how long the loop datagrams may take to come back
PAIR_INTERVAL_S = 0.1         # one multicast and one unicast datagram per peer this often


def open_sockets(doctor: DoctorContext
                 ) -> tuple[list[socket.socket], list[socket.socket], socket.socket | None]:
    """The receivers and senders of the group (multicast) and the unicast
    socket (with peers or ``pair``, when the port is ours to bind)."""
    receivers: list[socket.socket]
    senders: list[socket.socket]
    unicast: socket.socket | None
    config, receivers, senders, unicast = doctor.config, [], [], None
    assert config is not None
    try:
        if config.multicast:
            assert config.address is not None
            receivers = net.open_receivers(config.address, doctor.port, config.links, 0.05)
            senders = net.open_senders(config.address, doctor.port, config.links,
                                       config.ttl, True)
        if config.unicast or doctor.pair:
            try:
                unicast = net.open_unicast(doctor.unicast_address(), doctor.port)
            except OSError:
                unicast = None        # the port check said why
    except OSError as error:
        for sock in receivers + senders:
            sock.close()
        doctor.report.add("loop", FAIL, f"cannot join {config.address}:{doctor.port}: "
                                        f"{error.strerror or error}",
                          "see the interface and route checks; name a card that carries "
                          "multicast with --interface")
        return [], [], None
    for sock in receivers + senders:
        sock.setblocking(False)
    return receivers, senders, unicast


def loop(doctor: DoctorContext, receivers: list[socket.socket], senders: list[socket.socket]) -> None:
    back: set[int]                    # the sequences of our L datagrams heard back
    failed: list[str]                 # why a send failed, each time one did
    config, back, failed = doctor.config, set(), []
    assert config is not None and doctor.family is not None     # multicast only
    for sequence in range(LOOP_DATAGRAMS):
        for number, sock in enumerate(senders):
            try:
                sock.send(datagrams.encode_datagram(b"L", doctor.ident, number << 16 | sequence,
                                                    time.monotonic_ns()))
            except OSError as error:
                failed.append(error.strerror or str(error))
    deadline = time.monotonic() + LOOP_WAIT_S
    while time.monotonic() < deadline and len(back) < LOOP_DATAGRAMS * len(senders):
        for data, source, _ in receive(receivers, 0.02):
            got = datagrams.parse_datagram(data)
            if got is None:
                _heard_datagram(doctor, data, source)
            elif got[0] == b"L" and got[1] == doctor.ident:
                back.add(got[2])
    where = f"{config.address}:{doctor.port}"
    silent = [n for n in range(len(senders))
              if not any(s >> 16 == n for s in back)]
    if failed and len(failed) == LOOP_DATAGRAMS * len(senders):
        doctor.report.add("loop", FAIL, f"cannot send to {where}: {failed[0]}",
                          f"name a card that carries multicast with --interface, or ip route "
                          f"add {MULTICAST_ROUTE[doctor.family]} dev CARD")
    elif not silent:
        doctor.report.add("loop", PASS, f"{len(back)} of {LOOP_DATAGRAMS * len(senders)} probes "
                                        f"to {where} came back: this host sends and hears "
                                        f"the group")
    else:
        cards = ", ".join(_link_name(doctor, n) for n in silent)
        doctor.report.add("loop", FAIL, f"no probe sent to {where} on {cards} came back: "
                                        f"this host drops the group's datagrams (a firewall, "
                                        f"most often)",
                          f"allow the group in, e.g. nft insert rule inet filter input "
                          f"{'ip' if doctor.family == 4 else 'ip6'} daddr {config.address} "
                          f"udp dport {doctor.port} accept")


def _link_name(doctor: DoctorContext, number: int) -> str:
    cards = doctor.cards_used()
    return cards[number].name if number < len(cards) else "the kernel's card"


def joined(doctor: DoctorContext) -> None:
    config = doctor.config
    assert config is not None and doctor.family is not None     # multicast only
    joined = kernel_groups(doctor.family)
    cards = [name for name, groups in joined.items() if config.address in groups]
    wanted = [card.name for card in doctor.cards_used()]
    missing = [name for name in wanted if name not in cards]
    if cards and not missing:
        doctor.report.add("joined", PASS, f"the kernel lists {config.address} as joined on "
                                          f"{', '.join(sorted(cards))}")
    else:
        where = ", ".join(missing) or "any card"
        doctor.report.add("joined", WARN, f"the kernel does not list {config.address} as "
                                          f"joined on {where}: switches will not forward it "
                                          f"here", f"name the card the other members are on "
                                                   f"with --interface")


def listen(doctor: DoctorContext, sockets: list[socket.socket], senders: list[socket.socket],
           unicast: socket.socket | None) -> None:
    peers = _peer_addresses(doctor) if doctor.pair else []
    for peer in peers:
        doctor.peers[peer] = {"m_in": set(), "u_in": set(), "rtt": [], "report": None,
                              "report_at": -1, "ident": None}
    sequence, next_round = 0, time.monotonic()
    deadline = time.monotonic() + doctor.wait
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        if peers and now >= next_round:
            _send_pair_datagrams(doctor, sequence, senders, unicast)
            sequence += 1
            next_round += PAIR_INTERVAL_S
        wake = min(deadline, next_round) if peers else deadline
        for data, source, sock in receive(sockets, max(0.0, min(wake - now, 0.05))):
            got = datagrams.parse_datagram(data, doctor.ident)
            if got is None:
                _heard_datagram(doctor, data, source,
                                "unicast" if sock is unicast else "multicast")
            elif peers and got[1] != doctor.ident:
                _on_datagram(doctor, got, source, sock is unicast, unicast)


def _peer_addresses(doctor: DoctorContext) -> list[str]:
    """The peers' addresses (text), names resolved once."""
    assert doctor.config is not None
    peer_set = doctor.config.peer_set()
    resolver = None
    for lookup in peer_set.due(time.monotonic()):
        from ...tribes.discovery import resolver as dns
        try:
            if not lookup.system and resolver is None:
                resolver = dns.make_resolver(doctor.config.dns_servers)
            peer_set.on_answer(lookup, dns.lookup(lookup, resolver), time.monotonic())
        except dns.DnsFailure as failure:
            peer_set.on_failure(lookup, failure.reason, time.monotonic())
            doctor.unresolved.append(f"{lookup.name} does not resolve ({failure.reason})")
    own = {str(net.unscoped(a)) for card in doctor.cards for a in card.addresses}
    return sorted({str(ipaddress.ip_address(address)) for address, _ in peer_set.peers}
                  - own)


def _send_pair_datagrams(doctor: DoctorContext, sequence: int, senders: list[socket.socket],
                         unicast: socket.socket | None) -> None:
    now = time.monotonic_ns()
    reports = {peer: (len(state["m_in"]), span(state["m_in"]), len(state["u_in"]),
                      span(state["u_in"])) for peer, state in doctor.peers.items()}
    # By multicast too, to the doctors heard: the way back from a peer
    # whose unicast to us is dropped, so that it knows what we heard.
    heard = {state["ident"]: reports[peer] for peer, state in doctor.peers.items()
             if state["ident"] is not None}
    for sock in senders:
        try:
            sock.send(datagrams.encode_datagram(b"M", doctor.ident, sequence, now, heard))
        except OSError:
            pass                     # counted as loss by the other side
    if unicast is None:
        return
    for peer, report in reports.items():
        try:
            unicast.sendto(datagrams.encode_datagram(b"U", doctor.ident, sequence, now, report),
                           (peer, doctor.port))
        except OSError:
            pass


def _on_datagram(doctor: DoctorContext, got: Datagram, source: SockAddress, by_unicast: bool,
                 unicast: socket.socket | None) -> None:
    kind, sender, sequence, sent_ns, report = got
    state = doctor.peers.get(str(net.unscoped(source[0])))
    if state is None:          # another card of a peer: known by its id
        state = next((s for s in doctor.peers.values() if s["ident"] == sender), None)
    if state is None:
        return
    state["ident"] = sender
    # The newest report wins (an M and a U datagram of one round carry the same).
    if report is not None and kind in (b"M", b"U") and sequence >= state["report_at"]:
        state["report"], state["report_at"] = report, sequence
    if kind == b"M" and not by_unicast:
        state["m_in"].add(sequence)
    elif kind == b"U" and by_unicast:
        state["u_in"].add(sequence)
        assert unicast is not None            # it heard the U datagram
        try:
            unicast.sendto(datagrams.encode_datagram(b"R", doctor.ident, sequence, sent_ns), source)
        except OSError:
            pass
    elif kind == b"R" and by_unicast and sender == state["ident"]:
        state["rtt"].append((time.monotonic_ns() - sent_ns) / 1e6)


def _heard_datagram(doctor: DoctorContext, data: bytes, source: SockAddress,
                    way: Way = "multicast") -> None:
    try:
        member = decode(data)
    except MalformedPacket:
        return                     # a channel frame, or not Tribes at all
    key = (member.unique_id, member.host, member.port, str(net.unscoped(source[0])))
    _, ways = doctor.heard.setdefault(key, (member, {}))
    if member.is_shutdown:
        return                     # leaving: its alive time says nothing
    doctor.heard[key] = (member, ways)
    ways.setdefault(way, []).append((time.monotonic(), member.alive_ms))

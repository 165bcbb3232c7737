"""The ``pair`` verdicts: what went between this host and each peer, by
multicast and by unicast, each way, from the numbered doctor datagrams (the
peer's reports tell what our own datagrams did)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from ...tribes.engine.settings import DEFAULT_PORT, default
from .measure import LOSSY, sequence_loss
from .report import FAIL, PASS, WARN, domain_flag, ms, pct

if TYPE_CHECKING:
    from .context import DoctorContext


def judge(doctor: DoctorContext) -> None:
    add = doctor.report.add
    unresolved = "; ".join(doctor.unresolved)
    fix = "give the peers' addresses in --peers, or make their names resolve on this host"
    if not doctor.peers:
        if unresolved:
            add("pair", FAIL, f"no peer to probe: {unresolved}", fix)
        else:
            add("pair", FAIL, "no peer to probe: --peers and --dns name only this host",
                "name the other hosts with --peers and run the doctor --pair there at "
                "once")
        return
    if unresolved:
        add("pair", WARN, unresolved, fix)
    assert doctor.config is not None
    for peer, state in doctor.peers.items():
        m_in = sequence_loss(state["m_in"]) if doctor.config.multicast else None
        u_in = sequence_loss(state["u_in"])
        m_out = u_out = None
        if state["report"] is not None:
            heard, span, u_heard, u_span = state["report"]
            m_out = round(1 - heard / span, 4) if span else 1.0
            u_out = round(1 - u_heard / u_span, 4) if u_span else 1.0
        if not doctor.config.multicast:
            m_out = None
        rtts = sorted(state["rtt"])
        rtt = round(rtts[len(rtts) // 2], 3) if rtts else None
        doctor.report.pairs.append({"host": peer, "multicast_loss": m_in,
                                    "multicast_loss_out": m_out, "unicast_loss": u_in,
                                    "unicast_loss_out": u_out, "rtt_ms": rtt})
        _pair_verdict(doctor, peer, m_in, m_out, u_in, u_out, rtt)


def _pair_verdict(doctor: DoctorContext, peer: str, m_in: float | None, m_out: float | None, u_in: float,
                  u_out: float | None, rtt: float | None) -> None:
    assert doctor.config is not None
    add, port, group = doctor.report.add, doctor.port, doctor.config.address
    kinds = ("multicast", "unicast") if m_in is not None else ("unicast",)
    # What no datagram got through of, each way (a way with no report: unknown).
    lost_in = {k for k, v in (("multicast", m_in), ("unicast", u_in)) if v is not None and
               v >= 1.0}
    lost_out = {k for k, v in (("multicast", m_out), ("unicast", u_out)) if v is not None
                and v >= 1.0}
    join = (f"join with {_join_command(doctor)} (and the same, naming the others, on every "
            f"host)")
    if len(lost_in) == len(kinds):
        what = "neither multicast nor unicast probes arrive" if m_in is not None else \
            "no unicast probe arrives"
        add("pair", FAIL, f"{peer}: {what} from it: a firewall or routing problem, or no "
                          f"doctor runs there",
            f"run mcast-demo doctor --pair there at the same time; then allow UDP port "
            f"{port} between the hosts (and the group), both ways")
    elif lost_in == lost_out == {"multicast"}:
        add("pair", FAIL, f"{peer}: multicast is blocked both ways, unicast passes "
                          f"(both ways)",
            f"the network drops multicast between these hosts: {join}")
    elif lost_in or lost_out:
        parts, fixes = [], []
        for kind in kinds:
            if kind in lost_in and kind in lost_out:
                parts.append(f"{kind} is blocked both ways")
                if kind == "unicast":
                    fixes.append(f"allow UDP port {port} between the hosts, both ways")
        for lost, other, sender, receiver, way in (
                (lost_out, lost_in, doctor.me(), peer, f"from this host to {peer}"),
                (lost_in, lost_out, peer, "this host", f"from {peer} to this host")):
            one_way = [kind for kind in kinds if kind in lost and kind not in other]
            if not one_way:
                continue
            parts.append(f"{' and '.join(one_way)} {'are' if len(one_way) > 1 else 'is'} "
                         f"lost {way} only")
            if "unicast" in one_way:
                fixes.append(f"allow UDP port {port} in from {sender} on the firewall of "
                             f"{receiver}" + (f" (the group {group} too)"
                                              if "multicast" in one_way else ""))
            else:
                fixes.append(f"look at the input firewall of {receiver} and at IGMP "
                             f"snooping on the switches between the hosts for {group}")
        if "multicast" in lost_in and "multicast" in lost_out:
            fixes.append(f"then, or if multicast stays blocked, {join}")
        add("pair", FAIL, f"{peer}: " + ", and ".join(parts), "; ".join(fixes))
    else:
        losses = [v for v in (m_in, m_out, u_in, u_out) if v is not None]
        if max(losses) > LOSSY:
            add("pair", WARN, f"{peer}: probes lost, multicast {pct(m_in)} in, "
                              f"{pct(m_out)} out, unicast {pct(u_in)} in, "
                              f"{pct(u_out)} out",
                "find the lossy link or switch; meanwhile raise --drop-time or use "
                "--detector phi")
        else:
            add("pair", PASS, f"{peer}: multicast and unicast pass both ways, rtt "
                              f"{ms(rtt, 2)}")


def _join_command(doctor: DoctorContext) -> str:
    """The join command line for this host without multicast."""
    config = doctor.config
    assert config is not None
    words = ["mcast-demo", "join", "--no-multicast"]
    if config.peers:
        words += ["--peers", ",".join(config.peers)]
    if config.dns:
        words += ["--dns", config.dns]
    words += ["--interface", config.unicast_address]
    if doctor.port != DEFAULT_PORT:
        words += ["--port", str(doctor.port)]
    command = " ".join(shlex.quote(word) for word in words)
    if config.domain:
        command += " " + domain_flag(config.domain)
    for flag, name, value in (("--frequency", "frequency", config.frequency),
                              ("--drop-time", "drop_time", config.drop_time)):
        if value != default(name):
            command += f" {flag} {value}"
    return command

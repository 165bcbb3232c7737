"""The verdicts on the members heard while listening: ``heard``, ``domain``,
``drop_time``, ``loss`` and ``identity``, and each member's line in the
report (its period and loss measured from its heartbeats)."""

from __future__ import annotations

import ipaddress
import shlex
from typing import TYPE_CHECKING

from ...tribes.engine.config import DEFAULT_PORT
from ..._runtime import net
from .measure import LOSSY, estimate
from .report import PASS, WARN, count, domain_flag, hostport, ms, pct, periods, round_period, \
    show_domain

if TYPE_CHECKING:
    from .report import MemberJson
    from .context import DoctorContext

SAFE_PERIODS = 3              # a drop time under this many periods flaps
SUGGESTED_PERIODS = 6         # the drop time we suggest (Tomcat's 3000 ms for 500 ms)


def judge(doctor: DoctorContext) -> None:
    for (_, _, _, source), (member, ways) in doctor.heard.items():
        # Each way apart: a member stamps its multicast and its unicast
        # copy of one beat each with its own alive time, often a
        # millisecond apart. The way heard better is the member's loss.
        measures = [m for m in map(estimate, ways.values()) if m[0] is not None]
        period, loss = min(measures, key=lambda m: m[1], default=(None, None))
        doctor.report.members.append({
            "host": member.address, "port": member.port,
            "unique_id": member.unique_id.hex(),
            "domain": member.domain.decode("iso-8859-1"), "domain_hex": member.domain.hex(),
            "period_ms": period, "loss": loss,
            "heard": sum(len(samples) for samples in ways.values()), "source": source})
    members, add = doctor.report.members, doctor.report.add
    assert doctor.config is not None
    where = doctor.config.describe()
    if members:
        add("heard", PASS, f"{count(len(members), 'member')} heard on {where} in "
                           f"{doctor.wait:g} s")
    else:
        add("heard", WARN, f"nobody heard on {where} in {doctor.wait:g} s",
            _nobody_heard_fix(doctor))
    _domains(doctor, members)
    _drop_time(doctor, members)
    _loss(doctor, members)
    _identity(doctor, members)


def _nobody_heard_fix(doctor: DoctorContext) -> str:
    if _on_loopback(doctor):
        # Loopback reaches no other host: a member here is the test.
        command = _loopback_member_command(doctor)
        elsewhere = "loopback reaches no other host (to hear members elsewhere, give " \
                    "--interface their card)"
        return (f"start a member on this host while the doctor listens: {command}; "
                f"{elsewhere}" if command else elsewhere)
    if doctor.pair:
        return "start a member on another host (the pair check tests the path to the peers)"
    return (f"start a member, or run mcast-demo doctor --pair --peers {doctor.me()} on "
            f"another host while this one runs --pair --peers THAT_HOST; where multicast "
            f"is blocked, join with --peers or --dns")


def _on_loopback(doctor: DoctorContext) -> bool:
    """Whether the doctor hears on loopback only (the group's cards, or
    the unicast address without multicast)."""
    if doctor.multicast:
        cards = doctor.cards_used()
        return bool(cards) and all(card.loopback for card in cards)
    return ipaddress.ip_address(doctor.me()).is_loopback


def _loopback_member_command(doctor: DoctorContext) -> str | None:
    """A join command line for a member on this host that the doctor,
    listening on loopback, hears (None for unicast on ::1, which has no
    second address to send from)."""
    config = doctor.config
    assert config is not None
    port = [] if doctor.port == DEFAULT_PORT else ["--port", str(doctor.port)]
    if config.multicast:
        assert config.address is not None
        spec = doctor.settings.get("interface")
        card = ",".join(map(str, spec)) if isinstance(spec, (list, tuple)) else \
            str(spec if spec is not None else doctor.me())
        words = ["mcast-demo", "join", config.address, *port, "--interface", card,
                 "--ttl", "0"]
    elif net.family_of(doctor.me()) == 4:
        other = "127.0.0.2" if doctor.me() != "127.0.0.2" else "127.0.0.3"
        words = ["mcast-demo", "join", "--no-multicast", *port, "--interface", other,
                 "--peers", doctor.me()]
    else:
        return None
    command = " ".join(shlex.quote(word) for word in words)
    return command + (" " + domain_flag(config.domain) if config.domain else "")


def _domains(doctor: DoctorContext, members: list[MemberJson]) -> None:
    assert doctor.config is not None
    ours = doctor.config.domain
    others = [m for m in members if bytes.fromhex(m["domain_hex"]) != ours]
    mine = show_domain(ours.hex())
    if not members:
        doctor.report.add("domain", PASS, f"this host is in domain {mine} (nobody heard)")
    elif others:
        domains = list(dict.fromkeys(m["domain_hex"] for m in others))
        listed = "; ".join(
            ", ".join(hostport(m["host"], m["port"]) for m in others
                      if m["domain_hex"] == d) + f" in {show_domain(d)}" for d in domains)
        flag = domain_flag(bytes.fromhex(domains[0]))
        doctor.report.add("domain", WARN, f"{count(len(others), 'member')} in another "
                                          f"domain: {listed}; this host is in {mine}",
                          f"use one domain on every node: {flag} here, or {mine} there")
    else:
        doctor.report.add("domain", PASS, f"every member is in this host's domain {mine}")


def _drop_time(doctor: DoctorContext, members: list[MemberJson]) -> None:
    assert doctor.config is not None
    drop = doctor.config.drop_time
    own = doctor.config.frequency
    timed = [m for m in members if m["period_ms"]]
    slow = [m for m in timed if drop < SAFE_PERIODS * (m["period_ms"] or 0.0)]
    if slow:
        longest = max(m["period_ms"] or 0.0 for m in slow)      # all measured
        wanted = SUGGESTED_PERIODS * round_period(longest)
        under = "one period" if drop < longest else f"{SAFE_PERIODS} periods"
        who = ", ".join(f"{hostport(m['host'], m['port'])} ({ms(m['period_ms'])})"
                        for m in slow)
        doctor.report.add("drop_time", WARN, f"drop time {drop} ms is under {under} of {who}: "
                                             f"members will be dropped and added again",
                          f"--drop-time {wanted} on every node ({SUGGESTED_PERIODS} "
                          f"periods)")
    elif drop < SAFE_PERIODS * own:
        wanted = SUGGESTED_PERIODS * own
        doctor.report.add("drop_time", WARN, f"drop time {drop} ms is under {SAFE_PERIODS} "
                                             f"periods of this host's own --frequency {own}",
                          f"--drop-time {wanted} on every node ({SUGGESTED_PERIODS} "
                          f"periods)")
    elif timed:
        slowest = max(timed, key=lambda m: m["period_ms"] or 0.0)
        period = round_period(slowest["period_ms"] or 0.0)
        doctor.report.add("drop_time", PASS,
                          f"drop time {drop} ms covers {periods(drop, period)} of "
                          f"{hostport(slowest['host'], slowest['port'])} ({period} ms), the "
                          f"slowest member heard")
    else:
        heard = "no period measured" if members else "nobody heard"
        doctor.report.add("drop_time", PASS, f"drop time {drop} ms covers "
                                             f"{periods(drop, own)} of --frequency {own} "
                                             f"({heard})")


def _loss(doctor: DoctorContext, members: list[MemberJson]) -> None:
    lossy = [m for m in members if m["loss"] is not None and m["loss"] > LOSSY]
    if lossy:
        who = ", ".join(f"{hostport(m['host'], m['port'])} {pct(m['loss'])}"
                        for m in lossy)
        doctor.report.add("loss", WARN, f"heartbeats lost: {who}",
                          f"find the lossy link (mcast-demo doctor --pair --peers "
                          f"{lossy[0]['source']} here and --pair --peers {doctor.me()} "
                          f"there); meanwhile raise --drop-time or use --detector phi")
    elif members:
        measured = [m for m in members if m["loss"] is not None]
        doctor.report.add("loss", PASS, f"no heartbeat lost ({len(measured)} of "
                                        f"{count(len(members), 'member')} measured)"
                          if not [m for m in measured if m["loss"]] else
                          f"loss at most {pct(max(m['loss'] or 0.0 for m in measured))}")
    else:
        doctor.report.add("loss", PASS, "nothing to measure (nobody heard)")


def _identity(doctor: DoctorContext, members: list[MemberJson]) -> None:
    problems, fixes = [], []
    by_address: dict[tuple[str, int], set[str]]     # (host, port) -> unique ids
    by_id: dict[str, dict[str, str]]                # unique id -> {source: host}
    by_address, by_id = {}, {}
    for m in members:
        by_address.setdefault((m["host"], m["port"]), set()).add(m["unique_id"])
        by_id.setdefault(m["unique_id"], {})[m["source"]] = m["host"]
    for (host, port), ids in by_address.items():
        if len(ids) > 1:
            problems.append(f"{len(ids)} members advertise {hostport(host, port)}")
            fixes.append("give each node on a host its own --member-port (Tomcat: the "
                         "Receiver's port)")
    for uid, sources in by_id.items():
        if len(sources) > 1:
            host = next(iter(sources.values()))
            problems.append(f"unique id {uid[:12]} comes from {', '.join(sorted(sources))}")
            fixes.append(f"that node sends on two cards or its traffic is mirrored: give it "
                         f"one --interface, the card of {host} (the address it advertises)")
    for m in members:
        # Heard from its own address too: the two cards above, not NAT.
        if m["host"] != m["source"] and m["host"] not in by_id[m["unique_id"]]:
            problems.append(f"{hostport(m['host'], m['port'])} sends from {m['source']}")
            fixes.append(f"on that node, --interface {m['source']} or --host "
                         f"{m['source']}, unless NAT rewrites its address")
    if problems:
        doctor.report.add("identity", WARN, "; ".join(problems),
                          "; ".join(dict.fromkeys(fixes)))
    elif members:
        doctor.report.add("identity", PASS, "every member has its own address and id, and "
                                            "sends from the host it advertises")
    else:
        doctor.report.add("identity", PASS, "nothing to compare (nobody heard)")

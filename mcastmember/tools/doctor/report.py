"""The doctor's report: the checks in the order they ran, the members heard,
what went between this host and each peer, and the English they are told in.

``Check.name`` is stable (scripts read it from ``--json``; docs/doctor.md
documents the names and the JSON).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from ..view import paint

if TYPE_CHECKING:
    from typing import Final, Literal, TypedDict

    from typing_extensions import TypeAlias

    # A check's verdict, and the names of the checks (docs/doctor.md;
    # scripts read them from --json).
    Status: TypeAlias = Literal["pass", "warn", "fail"]
    CheckName: TypeAlias = Literal["interface", "route", "group", "port", "rp_filter", "loop",
                                   "joined", "heard", "domain", "drop_time", "loss",
                                   "identity", "pair", "gossip_bind", "advertise", "seed_tcp", "label", "key",
                                   "protocol", "name", "seed_udp"]

    class CheckJson(TypedDict):
        """A check in ``--json``."""
        name: CheckName
        status: Status
        detail: str
        fix: str | None

    class MemberJson(TypedDict):
        """A member heard, in ``--json``."""
        host: str
        port: int
        unique_id: str
        domain: str
        domain_hex: str
        period_ms: float | None
        loss: float | None
        heard: int
        source: str

    class PairJson(TypedDict):
        """What went between this host and one peer, in ``--json``."""
        host: str
        multicast_loss: float | None
        multicast_loss_out: float | None
        unicast_loss: float
        unicast_loss_out: float | None
        rtt_ms: float | None

    class ReportJson(TypedDict):
        """``mcast-demo doctor --json``: the documented contract."""
        ok: bool
        checks: list[CheckJson]
        members: list[MemberJson]
        pairs: list[PairJson]

PASS: Final = "pass"
WARN: Final = "warn"
FAIL: Final = "fail"


class Check:
    __slots__ = ("name", "status", "detail", "fix")
    name: CheckName
    status: Status
    detail: str
    fix: str | None

    def __init__(self, name: CheckName, status: Status, detail: str,
                 fix: str | None = None) -> None:
        self.name, self.status, self.detail, self.fix = name, status, detail, fix

    def to_dict(self) -> CheckJson:
        return {"name": self.name, "status": self.status, "detail": self.detail,
                "fix": self.fix}

    def line(self, colour: bool = False) -> str:
        text = f"{paint(self.status, self.status.upper(), colour)} {self.name:<10} {self.detail}"
        return text + (f"  fix: {self.fix}" if self.fix else "")


class Report:
    """The checks in the order they ran, the members heard and, with
    ``pair``, what went between this host and each peer."""

    checks: list[Check]
    members: list[MemberJson]
    pairs: list[PairJson]

    def __init__(self) -> None:
        self.checks, self.members, self.pairs = [], [], []

    def add(self, name: CheckName, status: Status, detail: str, fix: str | None = None) -> None:
        self.checks.append(Check(name, status, detail, None if status == PASS else fix))

    @property
    def ok(self) -> bool:
        return all(check.status != FAIL for check in self.checks)

    def failed(self) -> bool:
        return not self.ok

    def to_dict(self) -> ReportJson:
        return {"ok": self.ok, "checks": [check.to_dict() for check in self.checks],
                "members": self.members, "pairs": self.pairs}

    def lines(self, colour: bool = False) -> list[str]:
        """The report as text; ``colour``: verdicts coloured as the live view
        colours (the CLI passes view.colour_wanted)."""
        from ...tribes.kernel.codec import FALLBACK
        # Not a check (the --json contract lists those): a note on the install.
        out = [] if FALLBACK is None else [f"NOTE {FALLBACK}"]
        out += [check.line(colour) for check in self.checks]
        for m in self.members:
            out.append(f"member  {hostport(m['host'], m['port'])} from {m['source']}: id "
                       f"{m['unique_id'][:12]}, domain {show_domain(m['domain_hex'])}, period "
                       f"{ms(m['period_ms'])}, loss {pct(m['loss'])}, heard {m['heard']}")
        for p in self.pairs:
            out.append(f"pair    {p['host']}: multicast loss {pct(p['multicast_loss'])} in, "
                       f"{pct(p['multicast_loss_out'])} out; unicast loss "
                       f"{pct(p['unicast_loss'])} in, {pct(p['unicast_loss_out'])} out; "
                       f"rtt {ms(p['rtt_ms'], 2)}")
        counts = {status: sum(c.status == status for c in self.checks)
                  for status in (PASS, WARN, FAIL)}
        verdict = paint(PASS, "ok", colour) if self.ok else paint(FAIL, "FAILED", colour)
        out.append(f"{verdict}: {counts[PASS]} passed, {counts[WARN]} warned, {counts[FAIL]} "
                   f"failed")
        return out


def round_period(period_ms: float) -> int:
    """A measured period as it was set: in round numbers (200 ms, not 201.3)."""
    return max(10, round(period_ms / 10) * 10)


def periods(drop_ms: int, period_ms: int) -> str:
    """How many periods a drop time is: "6 periods", "2.5 periods"."""
    return f"{round(drop_ms / period_ms, 1):g} periods"


def ms(value: float | None, digits: int = 0) -> str:
    return "?" if value is None else f"{value:.{digits}f} ms"


def pct(value: float | None) -> str:
    return "?" if value is None else f"{value:.0%}"


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def show_domain(domain_hex: str) -> str:
    """A domain as an operator writes it: 'shop', '' or Tomcat's {1,-2,3}."""
    raw = bytes.fromhex(domain_hex)
    text = raw.decode("iso-8859-1")
    if text.isprintable() and not text.startswith("{"):
        return repr(text) if text else "'' (empty)"
    return "{" + ",".join(str(b - 256 if b > 127 else b) for b in raw) + "}"


def domain_flag(domain: bytes) -> str:
    """The --domain argument that gives these bytes, quoted for a shell."""
    text = domain.decode("iso-8859-1")
    if not (text.isprintable() and not text.startswith("{")):
        text = "{" + ",".join(str(b - 256 if b > 127 else b) for b in domain) + "}"
    return f"--domain {shlex.quote(text)}"

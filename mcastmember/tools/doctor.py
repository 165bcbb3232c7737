"""``mcast-demo doctor``: why members don't see each other, and what to change.

A check is ``Check(name, status, detail, fix)``, appended to a ``Report`` in
the order it ran; names are stable (scripts read them from ``--json``;
docs/doctor.md documents them). In order:

- local, sending nothing: ``interface`` (exists, up, MULTICAST, an address of
  the group's family), ``route`` (the card the kernel routes the group
  through, against the chosen one), ``group`` (a multicast address; its scope
  against the TTL), ``port`` (no socket that would keep a member from it),
  ``rp_filter`` (reverse-path filtering that would drop heartbeats);
- after joining: ``loop`` (probes sent to the group come back) and
  ``joined`` (the kernel lists the group on the card);
- after listening ``wait`` seconds, sending nothing: ``heard``, ``domain``,
  ``drop_time``, ``loss``, ``identity``, about the members heard;
- with ``pair``: ``pair``, numbered probes to and from the peers, by
  multicast and by unicast, for the same ``wait`` seconds.

A failing local check ends the run: nothing is sent then. Probes are
datagrams that no member takes for one (``layout.DOCTOR_PROBE_TAG``: Tomcat
ignores them without a word, mcastmember counts them as ``doctor_probes``).
"""

from __future__ import annotations

import errno
import ipaddress
import math
import os
import selectors
import shlex
import socket
import struct
import time
from typing import TYPE_CHECKING, cast

from ..wire import layout as L
from ..transport import net
from .view import paint
from ..engine.config import ServiceConfig
from ..wire.errors import ConfigurationError, MalformedPacket
from ..transport.interfaces import choose, list_interfaces
from ..engine.packet import decode

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Sequence
    from typing import Final, Literal, TypedDict

    from typing_extensions import TypeAlias

    from ..engine.config import Settings
    from ..transport.interfaces import Choice, Interface
    from ..engine.member import Member

    # A check's verdict, and the names of the checks (docs/doctor.md;
    # scripts read them from --json).
    Status: TypeAlias = Literal["pass", "warn", "fail"]
    CheckName: TypeAlias = Literal["interface", "route", "group", "port", "rp_filter", "loop",
                                   "joined", "heard", "domain", "drop_time", "loss",
                                   "identity", "pair"]
    # What a peer heard of our probes: multicast heard and span, unicast
    # heard and span (the counts a probe's report carries).
    Counts: TypeAlias = tuple[int, int, int, int]
    # A probe's kind: L (loop), M (multicast), U (unicast), R (a U's answer).
    ProbeKind: TypeAlias = Literal[b"L", b"M", b"U", b"R"]
    # parse_probe: kind, sender's doctor id, sequence, sent_ns, report.
    Probe: TypeAlias = tuple[bytes, bytes, int, int, Counts | None]
    # A socket address as recvfrom gives it: (host, port), IPv6 with flow
    # info and scope id.
    SockAddress: TypeAlias = tuple[str, int] | tuple[str, int, int, int]
    # Which socket heard a member: the group's or the unicast one.
    Way: TypeAlias = Literal["multicast", "unicast"]

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

    class _PeerState(TypedDict):
        """The probe counters of one peer (Doctor.peers)."""
        m_in: set[int]                # sequences of its multicast probes heard
        u_in: set[int]                # sequences of its unicast probes heard
        rtt: list[float]              # round trips of our unicast probes, ms
        report: Counts | None         # the newest report of what it heard of ours
        report_at: int                # the sequence of the probe that carried it
        ident: bytes | None           # its doctor id, once heard

PASS: Final = "pass"
WARN: Final = "warn"
FAIL: Final = "fail"
LOOP_PROBES = 3
LOOP_WAIT_S = 0.5             # how long the loop probes may take to come back
PAIR_INTERVAL_S = 0.1         # one multicast and one unicast probe per peer this often
LOSSY = 0.01                  # loss above this is worth a warning
SAFE_PERIODS = 3              # a drop time under this many periods flaps
SUGGESTED_PERIODS = 6         # the drop time we suggest (Tomcat's 3000 ms for 500 ms)
DEFAULT_GROUP = {4: "228.0.0.4", 6: "ff05::4"}
_HEAD = struct.Struct(L.DOCTOR_PROBE_HEAD)
_REPORT = struct.Struct(L.DOCTOR_PROBE_REPORT)
_ENTRY = struct.Struct(L.DOCTOR_PROBE_ENTRY)
_ROUTE_PREFIX = {4: "224.0.0.0/4", 6: "ff00::/8"}


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
        from .._codec import FALLBACK
        # Not a check (the --json contract lists those): a note on the install.
        out = [] if FALLBACK is None else [f"NOTE {FALLBACK}"]
        out += [check.line(colour) for check in self.checks]
        for m in self.members:
            out.append(f"member  {_hostport(m['host'], m['port'])} from {m['source']}: id "
                       f"{m['unique_id'][:12]}, domain {_show_domain(m['domain_hex'])}, period "
                       f"{_ms(m['period_ms'])}, loss {_pct(m['loss'])}, heard {m['heard']}")
        for p in self.pairs:
            out.append(f"pair    {p['host']}: multicast loss {_pct(p['multicast_loss'])} in, "
                       f"{_pct(p['multicast_loss_out'])} out; unicast loss "
                       f"{_pct(p['unicast_loss'])} in, {_pct(p['unicast_loss_out'])} out; "
                       f"rtt {_ms(p['rtt_ms'], 2)}")
        counts = {status: sum(c.status == status for c in self.checks)
                  for status in (PASS, WARN, FAIL)}
        verdict = paint(PASS, "ok", colour) if self.ok else paint(FAIL, "FAILED", colour)
        out.append(f"{verdict}: {counts[PASS]} passed, {counts[WARN]} warned, {counts[FAIL]} "
                   f"failed")
        return out


def _round_period(period_ms: float) -> int:
    """A measured period as it was set: in round numbers (200 ms, not 201.3)."""
    return max(10, round(period_ms / 10) * 10)


def _periods(drop_ms: int, period_ms: int) -> str:
    """How many periods a drop time is: "6 periods", "2.5 periods"."""
    return f"{round(drop_ms / period_ms, 1):g} periods"


def _ms(value: float | None, digits: int = 0) -> str:
    return "?" if value is None else f"{value:.{digits}f} ms"


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{value:.0%}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _show_domain(domain_hex: str) -> str:
    """A domain as an operator writes it: 'shop', '' or Tomcat's {1,-2,3}."""
    raw = bytes.fromhex(domain_hex)
    text = raw.decode("iso-8859-1")
    if text.isprintable() and not text.startswith("{"):
        return repr(text) if text else "'' (empty)"
    return "{" + ",".join(str(b - 256 if b > 127 else b) for b in raw) + "}"


def _domain_flag(domain: bytes) -> str:
    """The --domain argument that gives these bytes, quoted for a shell."""
    text = domain.decode("iso-8859-1")
    if not (text.isprintable() and not text.startswith("{")):
        text = "{" + ",".join(str(b - 256 if b > 127 else b) for b in domain) + "}"
    return f"--domain {shlex.quote(text)}"


def _unscoped(address: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """An address as text without its scope, IPv4-mapped IPv6 as IPv4."""
    value = ipaddress.ip_address(str(address).split("%")[0])
    if value.version == 6 and value.ipv4_mapped:
        value = value.ipv4_mapped
    return str(value)


# -- the kernel's view (nothing is sent) ----------------------------------------------
def route_card(group: str, cards: Sequence[Interface]) -> Interface | None:
    """The card the kernel would send ``group`` through when nobody names
    one, or None when it has no route. The kernel's own lookup decides
    (``connect`` sends nothing); the card is that of the source address it
    picks (IPv4: the main table's longest match first, as that is the card)."""
    family = net.family_of(group)
    probe = socket.socket(socket.AF_INET6 if family == 6 else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((group, 9))
        source = probe.getsockname()
    except OSError:
        return None
    finally:
        probe.close()
    if family == 4:
        name = _ipv4_route_card(group)
        if name is not None:
            return next((c for c in cards if c.name == name), None)
    if family == 6 and len(source) > 3 and source[3]:
        return next((c for c in cards if c.index == source[3]), None)
    address = _unscoped(source[0])
    for card in cards:
        if any(_unscoped(a) == address for a in card.addresses):
            return card
    return next((c for c in cards if c.loopback), None) if \
        ipaddress.ip_address(address).is_loopback else None


def _ipv4_route_card(destination: str) -> str | None:
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
    values = [v for v in (_rp_filter_setting("all"), _rp_filter_setting(card)) if v is not None]
    return max(values) if values else None


def _rp_filter_setting(name: str) -> int | None:
    """net.ipv4.conf.NAME.rp_filter, or None where it cannot be read."""
    try:
        with open(f"/proc/sys/net/ipv4/conf/{name}/rp_filter") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


# -- probes -------------------------------------------------------------------------
def probe(kind: ProbeKind, sender: bytes, sequence: int, sent_ns: int,
          report: Counts | dict[bytes, Counts] | None = None) -> bytes:
    """A probe datagram (see layout.DOCTOR_PROBE_TAG). ``report``: for a U
    probe, the four counts of what we heard from its receiver; for an M
    probe, ``{doctor id: four counts}`` of every doctor heard."""
    data = _HEAD.pack(L.DOCTOR_PROBE_TAG, L.DOCTOR_PROBE_VERSION, kind, sender, sequence,
                      sent_ns)
    if report is None:
        return data
    if isinstance(report, dict):    # an M probe's (kind b"M")
        return data + b"".join(_ENTRY.pack(ident, *counts) for ident, counts in report.items())
    return data + _REPORT.pack(*report)


def parse_probe(data: bytes, me: bytes | None = None) -> Probe | None:
    """(kind, sender, sequence, sent_ns, report or None) of a probe, or None;
    the report is what its sender heard from the doctor whose id is ``me``
    (a U probe's own, or ``me``'s entry of an M probe)."""
    if len(data) < _HEAD.size or not data.startswith(L.DOCTOR_PROBE_TAG):
        return None
    _, version, kind, sender, sequence, sent_ns = _HEAD.unpack_from(data)
    if version != L.DOCTOR_PROBE_VERSION:
        return None
    report: Counts | None = None
    if kind == b"M":
        for offset in range(_HEAD.size, len(data) - _ENTRY.size + 1, _ENTRY.size):
            ident, *counts = _ENTRY.unpack_from(data, offset)
            if ident == me:
                report = tuple(counts)
    elif len(data) >= _HEAD.size + _REPORT.size:
        report = _REPORT.unpack_from(data, _HEAD.size)
    return kind, sender, sequence, sent_ns, report


# -- measures -------------------------------------------------------------------------
def estimate(samples: Iterable[tuple[float, int]]) -> tuple[float, float] | tuple[None, None]:
    """(period in ms, loss fraction) of one member from its heartbeats, as
    ``[(arrival in s, alive ms)]``, or (None, None) from fewer than two.

    Tribes heartbeats carry no sequence number, but the alive time advances
    by one period per beat. A first guess of the period comes from the steps
    near the lower quartile (lost beats make longer steps, never shorter);
    each step then counts its beats, and the period is the slope of the
    alive times over the beat numbers: jitter in single beats does not bias
    it, and a sender that sleeps a fixed delay (Tomcat: each period a little
    longer than set) gets its own. The beats sent while it was heard are its
    alive-time span over that period. A step backwards (a capped alive time
    wrapping round) is measured by the receiver's clock."""
    beats: list[tuple[float, int]] = []
    for arrival, alive in samples:
        if not beats or alive != beats[-1][1]:    # one datagram heard twice (two cards)
            beats.append((arrival, alive))
    if len(beats) < 2:
        return None, None
    if all(alive < 0 for _, alive in beats):    # advertised below zero: -1 - elapsed
        beats = [(arrival, -1 - alive) for arrival, alive in beats]
    steps = [b[1] - a[1] if b[1] > a[1] else (b[0] - a[0]) * 1000.0
             for a, b in zip(beats, beats[1:])]
    forward = sorted(step for step in steps if step > 0)
    if not forward:
        return None, None
    quartile = forward[len(forward) // 4]
    single = [step for step in forward if 0.5 * quartile <= step <= 1.5 * quartile]
    guess = single[len(single) // 2]
    numbers, times = [0], [0.0]
    for step in steps:
        numbers.append(numbers[-1] + max(1, round(step / guess)))
        times.append(times[-1] + step)
    mean_n, mean_t = sum(numbers) / len(numbers), sum(times) / len(times)
    spread = sum((n - mean_n) ** 2 for n in numbers)
    period = sum((n - mean_n) * (t - mean_t) for n, t in zip(numbers, times)) / spread
    if period <= 0:
        return None, None
    sent = max(len(beats), round(times[-1] / period) + 1)
    return round(period, 1), round(1 - len(beats) / sent, 4)


def sequence_loss(sequences: Collection[int]) -> float:
    """The fraction of probes lost between the first and the last heard (1.0
    when none came)."""
    if not sequences:
        return 1.0
    return round(1 - len(sequences) / (max(sequences) - min(sequences) + 1), 4)


def _span(sequences: Collection[int]) -> int:
    return max(sequences) - min(sequences) + 1 if sequences else 0


# -- the doctor -------------------------------------------------------------------------
class Doctor:
    """The checks for ``join``'s settings (``settings``: ServiceConfig's
    keyword arguments), run by ``run()`` into a Report. ConfigurationError
    for settings that join would refuse (a usage error), but for the card
    and the group: what is wrong with those is a failing check."""

    family: Literal[4, 6] | None      # the group's IP version (None: unicast only)

    def __init__(self, group: str | None, port: int, settings: Settings,
                 wait: float = 5.0, pair: bool = False) -> None:
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0 \
                or math.isinf(wait):
            raise ConfigurationError("wait must be a positive number of seconds")
        self.group, self.port = group, port
        self.settings: Settings = {**settings}     # a dict display: the checkers keep its type
        self.wait, self.pair = float(wait), pair
        self.multicast: bool = self.settings.get("multicast", True)
        self.report = Report()
        # Set by the local checks: what runs after them asserts it is there.
        self.config: ServiceConfig | None = None
        self.cards: list[Interface] = []
        self.chosen: list[Choice] = []    # the interfaces.Choice of each card given
        self.via: Interface | None = None   # the card the kernel routes the group through
        self.ident = os.urandom(8)
        # (uid, host, port, source) -> (member, {way: [(t, alive)]})
        self.heard: dict[tuple[bytes, bytes, int, str],
                         tuple[Member, dict[Way, list[tuple[float, int]]]]] = {}
        self.peers: dict[str, _PeerState] = {}   # peer address text -> its probe counters
        self.unresolved: list[str] = []   # why each peer name gave no address
        self._validate()

    # settings ----------------------------------------------------------------------
    def _validate(self) -> None:
        """Refuse now what join would refuse, the card and the group aside."""
        if self.multicast:
            try:
                self.family = ipaddress.ip_address(str(self.group)).version
            except ValueError:
                raise ConfigurationError(f"{self.group!r} is not an IPv4 or IPv6 "
                                         f"address") from None
        # Dict displays, not dict(...): the checkers take those for a Settings.
        trial: Settings = {**self.settings, "interface": None}
        if self.multicast:
            assert self.family is not None
            group = DEFAULT_GROUP[self.family]
            if trial.get("host") is None:
                trial["host"] = "::1" if self.family == 6 else "127.0.0.1"
        else:
            group = None
            self.family = None
            if self.settings.get("interface") is not None and trial.get("host") is None:
                trial["host"] = "127.0.0.1"
        ServiceConfig(group, self.port, **trial)
        if self.pair and not (self.settings.get("peers") or self.settings.get("dns")):
            raise ConfigurationError("--pair probes the peers: name the other hosts with "
                                     "--peers (or --dns), and run the doctor there too")

    # the run -----------------------------------------------------------------------
    def run(self) -> Report:
        if not self._local_checks():
            return self.report
        receivers, senders, unicast = self._open()
        sockets = receivers + senders + ([unicast] if unicast else [])
        try:
            if self.multicast:
                if not receivers:
                    return self.report
                self._loop(receivers, senders)
                self._joined()
            self._listen(receivers + ([unicast] if unicast else []), senders, unicast)
        finally:
            for sock in sockets:
                sock.close()
        self._judge_members()
        if self.pair:
            self._judge_pairs()
        return self.report

    # local checks --------------------------------------------------------------------
    def _local_checks(self) -> bool:
        self.cards = list_interfaces()
        if self.multicast and not self._group_is_multicast():
            return False
        if not self._interfaces():
            return False
        if self.multicast:
            self._route()
            if self.report.failed():
                return False
        self.config = ServiceConfig(self.group, self.port, **self.settings)
        if self.multicast:
            self._group_scope()
        self._port()
        if self.multicast:
            self._rp_filter()
        return self.report.ok

    def _group_is_multicast(self) -> bool:
        group = ipaddress.ip_address(str(self.group))
        if group.is_multicast:
            return True
        self.report.add("group", FAIL, f"{group} is not a multicast group",
                        f"use a group in {_ROUTE_PREFIX[group.version]}, the same on every "
                        f"node, such as Tomcat's default {DEFAULT_GROUP[group.version]}")
        return False

    def _interfaces(self) -> bool:
        spec = self.settings.get("interface")
        if spec is None:
            if self.multicast:
                self.report.add("interface", PASS, "none given: the kernel chooses the card "
                                                   "(see route)")
            else:
                self.report.add("interface", PASS, "none given: unicast from --host")
            return True
        family = self.family or 4
        usable = ", ".join(c.name for c in self.cards if c.up and (c.multicast or c.loopback)
                           and any(a.version == family for a in c.addresses)) or "none"
        found, problems = [], []
        for one in spec if isinstance(spec, (list, tuple)) else [spec]:
            try:
                choice = self._choose(one, family)
            except ConfigurationError as error:
                problems.append((str(error), f"give --interface one of this host's cards "
                                             f"with IPv{family}: {usable}"))
                continue
            card = choice.interface
            if not card.up:
                # Loopback is no way to other hosts: not offered for a real card.
                others = ", ".join(self._multicast_cards(family))
                problems.append((f"{card.name} is down",
                                 f"ip link set dev {card.name} up" +
                                 (f" (or another --interface: {others})" if others else "")))
            elif self.multicast and not (card.multicast or card.loopback):
                problems.append((f"{card.name} has no MULTICAST flag: the kernel neither sends "
                                 f"nor joins groups on it",
                                 f"ip link set dev {card.name} multicast on, or use --peers or "
                                 f"--dns instead of multicast"))
            else:
                self.chosen.append(choice)
                found.append(f"{card.name} is up, "
                             f"{'loopback' if card.loopback else 'multicast'}, with "
                             f"{choice.address} ({choice.reason})")
        if problems:
            self.report.add("interface", FAIL, "; ".join(p for p, _ in problems),
                            "; ".join(dict.fromkeys(f for _, f in problems)))
            return False
        self.report.add("interface", PASS, "; ".join(found))
        return True

    def _multicast_cards(self, family: int) -> list[str]:
        """The names of the cards, loopback aside, that carry IPv``family`` multicast."""
        return [c.name for c in self.cards if c.up and c.multicast and not c.loopback
                and any(a.version == family for a in c.addresses)]

    def _choose(self, spec: str | int, family: int) -> Choice:
        if self.multicast:
            return choose(spec, family, self.cards)
        try:
            return choose(spec, 4, self.cards)
        except ConfigurationError:
            return choose(spec, 6, self.cards)

    def _route(self) -> None:
        add, group, family = self.report.add, str(self.group), self.family
        assert family is not None          # the route of a group: multicast only
        self.via = via = route_card(group, self.cards)
        others = self._multicast_cards(family)
        prefix = _ROUTE_PREFIX[family]
        if not self.chosen:
            if net.link_scoped(group):
                add("route", FAIL, f"{group} exists on one link only: the kernel cannot "
                                   f"choose its card",
                    f"name the card: --interface {others[0] if len(others) == 1 else 'CARD'}"
                    f" (this host's multicast cards: {', '.join(others) or 'none'})")
            elif via is None:
                card = others[0] if len(others) == 1 else "CARD"
                add("route", FAIL, f"no multicast route: the kernel has no route for {group}",
                    f"ip route add {prefix} dev {card} (this host's multicast cards: "
                    f"{', '.join(others) or 'none'}), or name the card with --interface "
                    f"{card}; where the network carries no multicast, use --peers or --dns")
            elif [n for n in others if n != via.name]:
                rest = [n for n in others if n != via.name]
                add("route", WARN, f"the kernel sends {group} through {via.name}; this host "
                                   f"also has {', '.join(rest)}",
                    f"name the card the other members are on: --interface {via.name} (or "
                    f"{' or '.join(rest)})")
            else:
                add("route", PASS, f"the kernel sends {group} through {via.name}")
            return
        names = [choice.interface.name for choice in self.chosen]
        refused = [(choice.interface, error) for choice, error in
                   ((c, _cannot_send(group, c)) for c in self.chosen) if error]
        if refused:
            loopback = family == 6 and any(card.loopback for card, _ in refused)
            add("route", FAIL, "; ".join(f"the kernel cannot send {group} on {card.name}: "
                                         f"{error}" for card, error in refused)
                + (" (Linux carries no IPv6 multicast on loopback)" if loopback else ""),
                f"name a card that carries IPv{family} multicast with --interface "
                f"({', '.join(others) or 'this host has none'})"
                + ("; on loopback, test with an IPv4 group such as 228.0.0.4" if loopback
                   else ""))
        elif net.link_scoped(group):
            add("route", PASS, f"{group} is link-scoped: it goes on the card given, "
                               f"{', '.join(names)}, and no route applies")
        elif all(choice.interface.loopback for choice in self.chosen):
            add("route", PASS, f"{', '.join(names)} (loopback): this host only")
        elif via is None:
            add("route", WARN, f"no multicast route for {group}: members given --interface "
                               f"{names[0]} work, those left to the kernel (Tomcat without "
                               f"mcastBindAddress) cannot send",
                f"ip route add {prefix} dev {names[0]}")
        elif via.name not in names:
            add("route", WARN, f"the kernel routes {group} through {via.name}, not "
                               f"{', '.join(names)}: members on this host left to the kernel's "
                               f"choice use {via.name}",
                f"keep --interface {names[0]} and ip route replace {prefix} dev {names[0]}, "
                f"or use --interface {via.name} if the other members are there")
        else:
            add("route", PASS, f"the kernel routes {group} through {via.name}, the card given")

    def _cards_used(self) -> list[Interface]:
        """The cards the group's traffic uses: those given, else the route's."""
        if self.chosen:
            return [choice.interface for choice in self.chosen]
        return [self.via] if self.via is not None else []

    def _group_scope(self) -> None:
        assert self.config is not None and self.config.address is not None   # multicast only
        group, ttl = ipaddress.ip_address(self.config.address), self.config.ttl
        loopback = all(card.loopback for card in self._cards_used())
        hops = 1 if ttl is None else ttl
        if group.version == 4 and group in ipaddress.IPv4Network("232.0.0.0/8"):
            self.report.add("group", WARN, f"{group} is in 232.0.0.0/8, source-specific "
                                           f"multicast: routers and snooping switches do not "
                                           f"forward it to members that join it any-source",
                            "use 228.0.0.4 (Tomcat's default) or a group in 239.0.0.0/8, the "
                            "same on every node")
        elif hops == 0 and not loopback:
            self.report.add("group", WARN, f"{group} with TTL 0: heartbeats never leave this "
                                           f"host", "--ttl 1 for this subnet (more to cross "
                                                    "routers)")
        elif group.version == 6 and (group.packed[1] & 0x0F) == 1 and not loopback:
            self.report.add("group", WARN, f"{group} is interface-local (ff01::/16): it never "
                                           f"leaves this host",
                            "use a link-local group (ff02::4) or a site-local one (ff05::4)")
        elif loopback:
            self.report.add("group", PASS, f"{group}, TTL {hops}, on loopback: this host only")
        elif (group.version == 4 and group in ipaddress.IPv4Network("224.0.0.0/24")) or \
                net.link_scoped(str(group)):
            self.report.add("group", PASS, f"{group} is link-local: this subnet only, "
                                           f"whatever the TTL")
        else:
            reach = ("this subnet only (routers need --ttl 2 or more)" if hops == 1
                     else f"{hops - 1} router(s) away")
            self.report.add("group", PASS, f"{group} is a multicast group; TTL {hops}"
                                           f"{' (the default)' if ttl is None else ''} "
                                           f"reaches {reach}")

    def _port(self) -> None:
        config, add = self.config, self.report.add
        assert config is not None
        holders = port_holders(self.port)
        blocked: list[tuple[str, bool]] = []     # (what cannot bind, whether that fails)
        # Binding sends nothing (joining would: an IGMP or MLD report).
        if config.multicast and config.address is not None and \
                _taken(config.address, self.port, True,
                       config.links[0].index if config.links else 0):
            blocked.append(("a member", True))
        address = self._unicast_address()
        if (config.unicast or self.pair) and _taken(address, self.port, False):
            blocked.append((f"unicast heartbeats on {address}", self.pair or not
                            config.multicast))
        if not blocked:
            if holders:
                who = "; ".join(f"{w} on {a}" for a, w in holders)
                add("port", PASS, f"UDP port {self.port} is also bound by {who}: every socket "
                                  f"gets its own copy of the group's datagrams")
            else:
                add("port", PASS, f"UDP port {self.port} is free")
            return
        who = "; ".join(f"{w} on {a}" for a, w in holders) or "another process"
        owners = " and ".join(dict.fromkeys(w for _, w in holders)) or "it"
        what = " and ".join(what for what, _ in blocked)
        fatal = any(fatal for _, fatal in blocked)
        add("port", FAIL if fatal else WARN,
            f"UDP port {self.port} is held by {who}: {what} cannot bind it"
            + ("" if fatal else "; the doctor hears only multicast"),
            f"stop {owners} (unless it is this host's member; then stop it while the doctor "
            f"runs), or use another --port on every node")

    def _unicast_address(self) -> str:
        """Where a member binds its unicast socket (config.unicast_address,
        which the route check made sure can be computed)."""
        assert self.config is not None
        return self.config.unicast_address

    def _rp_filter(self) -> None:
        cards = [card for card in self._cards_used() if not card.loopback]
        if self.family != 4 or not cards:
            self.report.add("rp_filter", PASS, "no reverse-path filtering applies "
                                               f"({'IPv6' if self.family == 6 else 'loopback'})")
            return
        default = _ipv4_route_card("0.0.0.0")
        strict = [card.name for card in cards if rp_filter(card.name) == 1
                  and card.name != default]
        # Loose filtering (2) wants a route back to the sender too: without a
        # default route, subnets not routed here have none, whatever the card.
        unrouted = [card.name for card in cards if rp_filter(card.name) in (1, 2)] \
            if default is None else []
        if unrouted:
            names = ", ".join(unrouted)
            modes = " and ".join(sorted({"strict" if rp_filter(name) == 1 else "loose"
                                         for name in unrouted}, reverse=True))
            off = [name for name in ["all"] + unrouted if _rp_filter_setting(name)]
            self.report.add("rp_filter", WARN,
                            f"{modes} reverse-path filtering on {names}, and this host has no "
                            f"default route: heartbeats from subnets it has no route to are "
                            f"dropped",
                            " and ".join(f"sysctl -w net.ipv4.conf.{name}.rp_filter=0"
                                         for name in off)
                            + f", or route the members' subnets through {unrouted[0]} (ip "
                              f"route add SUBNET dev {unrouted[0]})")
        elif strict:
            self.report.add("rp_filter", WARN,
                            f"strict reverse-path filtering on {', '.join(strict)}, and the "
                            f"default route is not there: heartbeats from outside "
                            f"{', '.join(strict)}'s subnets are dropped",
                            " and ".join(f"sysctl -w net.ipv4.conf.{name}.rp_filter=2"
                                         for name in strict))
        else:
            modes = ", ".join(f"{card.name} {rp_filter(card.name)}" for card in cards)
            self.report.add("rp_filter", PASS, f"rp_filter {modes}: it drops no heartbeat "
                                               f"that can reach this host")

    # sockets -----------------------------------------------------------------------
    def _open(self) -> tuple[list[socket.socket], list[socket.socket], socket.socket | None]:
        """The receivers and senders of the group (multicast) and the unicast
        socket (with peers or ``pair``, when the port is ours to bind)."""
        receivers: list[socket.socket]
        senders: list[socket.socket]
        unicast: socket.socket | None
        config, receivers, senders, unicast = self.config, [], [], None
        assert config is not None
        try:
            if config.multicast:
                assert config.address is not None
                receivers = net.open_receivers(config.address, self.port, config.links, 0.05)
                senders = net.open_senders(config.address, self.port, config.links,
                                           config.ttl, True)
            if config.unicast or self.pair:
                try:
                    unicast = net.open_unicast(self._unicast_address(), self.port)
                except OSError:
                    unicast = None        # the port check said why
        except OSError as error:
            for sock in receivers + senders:
                sock.close()
            self.report.add("loop", FAIL, f"cannot join {config.address}:{self.port}: "
                                          f"{error.strerror or error}",
                            "see the interface and route checks; name a card that carries "
                            "multicast with --interface")
            return [], [], None
        for sock in receivers + senders:
            sock.setblocking(False)
        return receivers, senders, unicast

    def _loop(self, receivers: list[socket.socket], senders: list[socket.socket]) -> None:
        back: set[int]                    # the sequences of our probes heard back
        failed: list[str]                 # why a send failed, each time one did
        config, back, failed = self.config, set(), []
        assert config is not None and self.family is not None     # multicast only
        for sequence in range(LOOP_PROBES):
            for number, sock in enumerate(senders):
                try:
                    sock.send(probe(b"L", self.ident, number << 16 | sequence,
                                    time.monotonic_ns()))
                except OSError as error:
                    failed.append(error.strerror or str(error))
        deadline = time.monotonic() + LOOP_WAIT_S
        while time.monotonic() < deadline and len(back) < LOOP_PROBES * len(senders):
            for data, source, _ in _receive(receivers, 0.02):
                got = parse_probe(data)
                if got is None:
                    self._heard_datagram(data, source)
                elif got[0] == b"L" and got[1] == self.ident:
                    back.add(got[2])
        where = f"{config.address}:{self.port}"
        silent = [n for n in range(len(senders))
                  if not any(s >> 16 == n for s in back)]
        if failed and len(failed) == LOOP_PROBES * len(senders):
            self.report.add("loop", FAIL, f"cannot send to {where}: {failed[0]}",
                            f"name a card that carries multicast with --interface, or ip route "
                            f"add {_ROUTE_PREFIX[self.family]} dev CARD")
        elif not silent:
            self.report.add("loop", PASS, f"{len(back)} of {LOOP_PROBES * len(senders)} probes "
                                          f"to {where} came back: this host sends and hears "
                                          f"the group")
        else:
            cards = ", ".join(self._link_name(n) for n in silent)
            self.report.add("loop", FAIL, f"no probe sent to {where} on {cards} came back: "
                                          f"this host drops the group's datagrams (a firewall, "
                                          f"most often)",
                            f"allow the group in, e.g. nft insert rule inet filter input "
                            f"{'ip' if self.family == 4 else 'ip6'} daddr {config.address} "
                            f"udp dport {self.port} accept")

    def _link_name(self, number: int) -> str:
        cards = self._cards_used()
        return cards[number].name if number < len(cards) else "the kernel's card"

    def _joined(self) -> None:
        config = self.config
        assert config is not None and self.family is not None     # multicast only
        joined = kernel_groups(self.family)
        cards = [name for name, groups in joined.items() if config.address in groups]
        wanted = [card.name for card in self._cards_used()]
        missing = [name for name in wanted if name not in cards]
        if cards and not missing:
            self.report.add("joined", PASS, f"the kernel lists {config.address} as joined on "
                                            f"{', '.join(sorted(cards))}")
        else:
            where = ", ".join(missing) or "any card"
            self.report.add("joined", WARN, f"the kernel does not list {config.address} as "
                                            f"joined on {where}: switches will not forward it "
                                            f"here", f"name the card the other members are on "
                                                     f"with --interface")

    # listening and the pair probes -----------------------------------------------------------
    def _listen(self, sockets: list[socket.socket], senders: list[socket.socket],
                unicast: socket.socket | None) -> None:
        peers = self._peer_addresses() if self.pair else []
        for peer in peers:
            self.peers[peer] = {"m_in": set(), "u_in": set(), "rtt": [], "report": None,
                                "report_at": -1, "ident": None}
        sequence, next_probe = 0, time.monotonic()
        deadline = time.monotonic() + self.wait
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            if peers and now >= next_probe:
                self._send_pair_probes(sequence, senders, unicast)
                sequence += 1
                next_probe += PAIR_INTERVAL_S
            wake = min(deadline, next_probe) if peers else deadline
            for data, source, sock in _receive(sockets, max(0.0, min(wake - now, 0.05))):
                got = parse_probe(data, self.ident)
                if got is None:
                    self._heard_datagram(data, source,
                                         "unicast" if sock is unicast else "multicast")
                elif peers and got[1] != self.ident:
                    self._on_probe(got, source, sock is unicast, unicast)

    def _peer_addresses(self) -> list[str]:
        """The peers' addresses (text), names resolved once."""
        assert self.config is not None
        peer_set = self.config.peer_set()
        resolver = None
        for lookup in peer_set.due(time.monotonic()):
            from ..discovery import resolver as dns
            try:
                if not lookup.system and resolver is None:
                    resolver = dns.make_resolver(self.config.dns_servers)
                peer_set.on_answer(lookup, dns.lookup(lookup, resolver), time.monotonic())
            except dns.DnsFailure as failure:
                peer_set.on_failure(lookup, failure.reason, time.monotonic())
                self.unresolved.append(f"{lookup.name} does not resolve ({failure.reason})")
        own = {_unscoped(a) for card in self.cards for a in card.addresses}
        return sorted({str(ipaddress.ip_address(address)) for address, _ in peer_set.peers}
                      - own)

    def _send_pair_probes(self, sequence: int, senders: list[socket.socket],
                          unicast: socket.socket | None) -> None:
        now = time.monotonic_ns()
        reports = {peer: (len(state["m_in"]), _span(state["m_in"]), len(state["u_in"]),
                          _span(state["u_in"])) for peer, state in self.peers.items()}
        # By multicast too, to the doctors heard: the way back from a peer
        # whose unicast to us is dropped, so that it knows what we heard.
        heard = {state["ident"]: reports[peer] for peer, state in self.peers.items()
                 if state["ident"] is not None}
        for sock in senders:
            try:
                sock.send(probe(b"M", self.ident, sequence, now, heard))
            except OSError:
                pass                     # counted as loss by the other side
        if unicast is None:
            return
        for peer, report in reports.items():
            try:
                unicast.sendto(probe(b"U", self.ident, sequence, now, report),
                               (peer, self.port))
            except OSError:
                pass

    def _on_probe(self, got: Probe, source: SockAddress, by_unicast: bool,
                  unicast: socket.socket | None) -> None:
        kind, sender, sequence, sent_ns, report = got
        state = self.peers.get(_unscoped(source[0]))
        if state is None:          # another card of a peer: known by its id
            state = next((s for s in self.peers.values() if s["ident"] == sender), None)
        if state is None:
            return
        state["ident"] = sender
        # The newest report wins (an M and a U probe of one round carry the same).
        if report is not None and kind in (b"M", b"U") and sequence >= state["report_at"]:
            state["report"], state["report_at"] = report, sequence
        if kind == b"M" and not by_unicast:
            state["m_in"].add(sequence)
        elif kind == b"U" and by_unicast:
            state["u_in"].add(sequence)
            assert unicast is not None            # it heard the probe
            try:
                unicast.sendto(probe(b"R", self.ident, sequence, sent_ns), source)
            except OSError:
                pass
        elif kind == b"R" and by_unicast and sender == state["ident"]:
            state["rtt"].append((time.monotonic_ns() - sent_ns) / 1e6)

    def _judge_pairs(self) -> None:
        add = self.report.add
        unresolved = "; ".join(self.unresolved)
        fix = "give the peers' addresses in --peers, or make their names resolve on this host"
        if not self.peers:
            if unresolved:
                add("pair", FAIL, f"no peer to probe: {unresolved}", fix)
            else:
                add("pair", FAIL, "no peer to probe: --peers and --dns name only this host",
                    "name the other hosts with --peers and run the doctor --pair there at "
                    "once")
            return
        if unresolved:
            add("pair", WARN, unresolved, fix)
        assert self.config is not None
        for peer, state in self.peers.items():
            m_in = sequence_loss(state["m_in"]) if self.config.multicast else None
            u_in = sequence_loss(state["u_in"])
            m_out = u_out = None
            if state["report"] is not None:
                heard, span, u_heard, u_span = state["report"]
                m_out = round(1 - heard / span, 4) if span else 1.0
                u_out = round(1 - u_heard / u_span, 4) if u_span else 1.0
            if not self.config.multicast:
                m_out = None
            rtts = sorted(state["rtt"])
            rtt = round(rtts[len(rtts) // 2], 3) if rtts else None
            self.report.pairs.append({"host": peer, "multicast_loss": m_in,
                                      "multicast_loss_out": m_out, "unicast_loss": u_in,
                                      "unicast_loss_out": u_out, "rtt_ms": rtt})
            self._pair_verdict(peer, m_in, m_out, u_in, u_out, rtt)

    def _pair_verdict(self, peer: str, m_in: float | None, m_out: float | None, u_in: float,
                      u_out: float | None, rtt: float | None) -> None:
        assert self.config is not None
        add, port, group = self.report.add, self.port, self.config.address
        kinds = ("multicast", "unicast") if m_in is not None else ("unicast",)
        # What no probe got through of, each way (a way with no report: unknown).
        lost_in = {k for k, v in (("multicast", m_in), ("unicast", u_in)) if v is not None and
                   v >= 1.0}
        lost_out = {k for k, v in (("multicast", m_out), ("unicast", u_out)) if v is not None
                    and v >= 1.0}
        join = (f"join with {self._join_command()} (and the same, naming the others, on every "
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
                    (lost_out, lost_in, self._me(), peer, f"from this host to {peer}"),
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
                add("pair", WARN, f"{peer}: probes lost, multicast {_pct(m_in)} in, "
                                  f"{_pct(m_out)} out, unicast {_pct(u_in)} in, "
                                  f"{_pct(u_out)} out",
                    "find the lossy link or switch; meanwhile raise --drop-time or use "
                    "--detector phi")
            else:
                add("pair", PASS, f"{peer}: multicast and unicast pass both ways, rtt "
                                  f"{_ms(rtt, 2)}")

    def _join_command(self) -> str:
        """The join command line for this host without multicast."""
        config = self.config
        assert config is not None
        words = ["mcast-demo", "join", "--no-multicast"]
        if config.peers:
            words += ["--peers", ",".join(config.peers)]
        if config.dns:
            words += ["--dns", config.dns]
        words += ["--interface", config.unicast_address]
        if self.port != 45564:
            words += ["--port", str(self.port)]
        command = " ".join(shlex.quote(word) for word in words)
        if config.domain:
            command += " " + _domain_flag(config.domain)
        for flag, value, default in (("--frequency", config.frequency, 500),
                                     ("--drop-time", config.drop_time, 3000)):
            if value != default:
                command += f" {flag} {value}"
        return command

    # members ------------------------------------------------------------------------
    def _heard_datagram(self, data: bytes, source: SockAddress, way: Way = "multicast") -> None:
        try:
            member = decode(data)
        except MalformedPacket:
            return                     # a channel frame, or not Tribes at all
        key = (member.unique_id, member.host, member.port, _unscoped(source[0]))
        _, ways = self.heard.setdefault(key, (member, {}))
        if member.is_shutdown:
            return                     # leaving: its alive time says nothing
        self.heard[key] = (member, ways)
        ways.setdefault(way, []).append((time.monotonic(), member.alive_ms))

    def _judge_members(self) -> None:
        for (_, _, _, source), (member, ways) in self.heard.items():
            # Each way apart: a member stamps its multicast and its unicast
            # copy of one beat each with its own alive time, often a
            # millisecond apart. The way heard better is the member's loss.
            measures = [m for m in map(estimate, ways.values()) if m[0] is not None]
            period, loss = min(measures, key=lambda m: m[1], default=(None, None))
            self.report.members.append({
                "host": member.address, "port": member.port,
                "unique_id": member.unique_id.hex(),
                "domain": member.domain.decode("iso-8859-1"), "domain_hex": member.domain.hex(),
                "period_ms": period, "loss": loss,
                "heard": sum(len(samples) for samples in ways.values()), "source": source})
        members, add = self.report.members, self.report.add
        assert self.config is not None
        where = self.config.describe()
        if members:
            add("heard", PASS, f"{_count(len(members), 'member')} heard on {where} in "
                               f"{self.wait:g} s")
        else:
            add("heard", WARN, f"nobody heard on {where} in {self.wait:g} s",
                self._nobody_heard_fix())
        self._domains(members)
        self._drop_time(members)
        self._loss(members)
        self._identity(members)

    def _nobody_heard_fix(self) -> str:
        if self._on_loopback():
            # Loopback reaches no other host: a member here is the test.
            command = self._loopback_member_command()
            elsewhere = "loopback reaches no other host (to hear members elsewhere, give " \
                        "--interface their card)"
            return (f"start a member on this host while the doctor listens: {command}; "
                    f"{elsewhere}" if command else elsewhere)
        if self.pair:
            return "start a member on another host (the pair check tests the path to the peers)"
        return (f"start a member, or run mcast-demo doctor --pair --peers {self._me()} on "
                f"another host while this one runs --pair --peers THAT_HOST; where multicast "
                f"is blocked, join with --peers or --dns")

    def _on_loopback(self) -> bool:
        """Whether the doctor hears on loopback only (the group's cards, or
        the unicast address without multicast)."""
        if self.multicast:
            cards = self._cards_used()
            return bool(cards) and all(card.loopback for card in cards)
        return ipaddress.ip_address(self._me()).is_loopback

    def _loopback_member_command(self) -> str | None:
        """A join command line for a member on this host that the doctor,
        listening on loopback, hears (None for unicast on ::1, which has no
        second address to send from)."""
        config = self.config
        assert config is not None
        port = [] if self.port == 45564 else ["--port", str(self.port)]
        if config.multicast:
            assert config.address is not None
            spec = self.settings.get("interface")
            card = ",".join(map(str, spec)) if isinstance(spec, (list, tuple)) else \
                str(spec if spec is not None else self._me())
            words = ["mcast-demo", "join", config.address, *port, "--interface", card,
                     "--ttl", "0"]
        elif net.family_of(self._me()) == 4:
            other = "127.0.0.2" if self._me() != "127.0.0.2" else "127.0.0.3"
            words = ["mcast-demo", "join", "--no-multicast", *port, "--interface", other,
                     "--peers", self._me()]
        else:
            return None
        command = " ".join(shlex.quote(word) for word in words)
        return command + (" " + _domain_flag(config.domain) if config.domain else "")

    def _me(self) -> str:
        assert self.config is not None
        return _unscoped(self.config.unicast_address)

    def _domains(self, members: list[MemberJson]) -> None:
        assert self.config is not None
        ours = self.config.domain
        others = [m for m in members if bytes.fromhex(m["domain_hex"]) != ours]
        mine = _show_domain(ours.hex())
        if not members:
            self.report.add("domain", PASS, f"this host is in domain {mine} (nobody heard)")
        elif others:
            domains = list(dict.fromkeys(m["domain_hex"] for m in others))
            listed = "; ".join(
                ", ".join(_hostport(m["host"], m["port"]) for m in others
                          if m["domain_hex"] == d) + f" in {_show_domain(d)}" for d in domains)
            flag = _domain_flag(bytes.fromhex(domains[0]))
            self.report.add("domain", WARN, f"{_count(len(others), 'member')} in another "
                                            f"domain: {listed}; this host is in {mine}",
                            f"use one domain on every node: {flag} here, or {mine} there")
        else:
            self.report.add("domain", PASS, f"every member is in this host's domain {mine}")

    def _drop_time(self, members: list[MemberJson]) -> None:
        assert self.config is not None
        drop = self.config.drop_time
        own = self.config.frequency
        timed = [m for m in members if m["period_ms"]]
        slow = [m for m in timed if drop < SAFE_PERIODS * (m["period_ms"] or 0.0)]
        if slow:
            longest = max(m["period_ms"] or 0.0 for m in slow)      # all measured
            wanted = SUGGESTED_PERIODS * _round_period(longest)
            under = "one period" if drop < longest else f"{SAFE_PERIODS} periods"
            who = ", ".join(f"{_hostport(m['host'], m['port'])} ({_ms(m['period_ms'])})"
                            for m in slow)
            self.report.add("drop_time", WARN, f"drop time {drop} ms is under {under} of {who}: "
                                               f"members will be dropped and added again",
                            f"--drop-time {wanted} on every node ({SUGGESTED_PERIODS} "
                            f"periods)")
        elif drop < SAFE_PERIODS * own:
            wanted = SUGGESTED_PERIODS * own
            self.report.add("drop_time", WARN, f"drop time {drop} ms is under {SAFE_PERIODS} "
                                               f"periods of this host's own --frequency {own}",
                            f"--drop-time {wanted} on every node ({SUGGESTED_PERIODS} "
                            f"periods)")
        elif timed:
            slowest = max(timed, key=lambda m: m["period_ms"] or 0.0)
            period = _round_period(slowest["period_ms"] or 0.0)
            self.report.add("drop_time", PASS,
                            f"drop time {drop} ms covers {_periods(drop, period)} of "
                            f"{_hostport(slowest['host'], slowest['port'])} ({period} ms), the "
                            f"slowest member heard")
        else:
            heard = "no period measured" if members else "nobody heard"
            self.report.add("drop_time", PASS, f"drop time {drop} ms covers "
                                               f"{_periods(drop, own)} of --frequency {own} "
                                               f"({heard})")

    def _loss(self, members: list[MemberJson]) -> None:
        lossy = [m for m in members if m["loss"] is not None and m["loss"] > LOSSY]
        if lossy:
            who = ", ".join(f"{_hostport(m['host'], m['port'])} {_pct(m['loss'])}"
                            for m in lossy)
            self.report.add("loss", WARN, f"heartbeats lost: {who}",
                            f"find the lossy link (mcast-demo doctor --pair --peers "
                            f"{lossy[0]['source']} here and --pair --peers {self._me()} "
                            f"there); meanwhile raise --drop-time or use --detector phi")
        elif members:
            measured = [m for m in members if m["loss"] is not None]
            self.report.add("loss", PASS, f"no heartbeat lost ({len(measured)} of "
                                          f"{_count(len(members), 'member')} measured)"
                            if not [m for m in measured if m["loss"]] else
                            f"loss at most {_pct(max(m['loss'] or 0.0 for m in measured))}")
        else:
            self.report.add("loss", PASS, "nothing to measure (nobody heard)")

    def _identity(self, members: list[MemberJson]) -> None:
        problems, fixes = [], []
        by_address: dict[tuple[str, int], set[str]]     # (host, port) -> unique ids
        by_id: dict[str, dict[str, str]]                # unique id -> {source: host}
        by_address, by_id = {}, {}
        for m in members:
            by_address.setdefault((m["host"], m["port"]), set()).add(m["unique_id"])
            by_id.setdefault(m["unique_id"], {})[m["source"]] = m["host"]
        for (host, port), ids in by_address.items():
            if len(ids) > 1:
                problems.append(f"{len(ids)} members advertise {_hostport(host, port)}")
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
                problems.append(f"{_hostport(m['host'], m['port'])} sends from {m['source']}")
                fixes.append(f"on that node, --interface {m['source']} or --host "
                             f"{m['source']}, unless NAT rewrites its address")
        if problems:
            self.report.add("identity", WARN, "; ".join(problems),
                            "; ".join(dict.fromkeys(fixes)))
        elif members:
            self.report.add("identity", PASS, "every member has its own address and id, and "
                                              "sends from the host it advertises")
        else:
            self.report.add("identity", PASS, "nothing to compare (nobody heard)")


def _cannot_send(group: str, choice: Choice) -> str | None:
    """Why the kernel would refuse to send ``group`` on the card of
    ``choice`` (its error text), or None. Connecting sends nothing."""
    link = net.Link(str(choice.address).split("%")[0], choice.interface.index)
    try:
        for sock in net.open_senders(group, 9, [link], None, True):
            sock.close()
    except OSError as error:
        return error.strerror or str(error)
    return None


def _taken(address: str, port: int, group: bool, index: int = 0) -> bool:
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


def _receive(sockets: Iterable[socket.socket],
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


def run(group: str | None, port: int, settings: Settings, wait: float = 5.0,
        pair: bool = False) -> Report:
    """The Report of every check for ``join``'s settings (ConfigurationError
    for settings join would refuse)."""
    return Doctor(group, port, settings, wait, pair).run()

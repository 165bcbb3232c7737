"""What mcast-demo join and watch show: JSON lines, a line per event (pipes
and logs), or a live table on a terminal.

The table is drawn in place: the first frame clears the screen, later ones
move the cursor to the lines that changed and rewrite those only (no clear,
no flicker), at most ``1 / FRAME_S`` times a second however busy the group.
It fits the terminal (columns dropped, then cut, as it narrows; rows as it
shortens) and follows a resize. Colours only on a terminal, never with
NO_COLOR set or TERM=dumb."""

from __future__ import annotations

import collections
import json
import math
import os
import sys
import threading
import time

from .._runtime.units import seconds

# typing.TYPE_CHECKING without importing typing (mcast-demo decode and keygen
# never load it): both checkers take this name for it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TextIO

    from typing_extensions import TypeAlias

    from .._runtime.events import EventsLost
    from ..tribes.engine.events import MemberEvent
    from ..tribes.engine.member import Member
    from ..metrics import MetricsServer
    from ..tribes.fronts.service import McastService

    # A column of the table: title, width (None: the widest value; 0: what
    # is left) and the text of a member's value (None: computed apart).
    Column: TypeAlias = "tuple[str, int | None, Callable[[Member], str] | None]"

# At most one frame per FRAME_S (the refresh floor), and one at least every
# AGE_S while nothing happens, for the "last heard" ages.
FRAME_S = 0.1
AGE_S = 0.5
CHANGES_SHOWN = 5       # the last few changes, under the table
HIGHLIGHT_S = 3.0       # a row added or updated this recently is coloured

# Green for what is well, yellow for a change or a warning, red for a loss
# (the doctor's verdicts too).
_SGR = {"added": "32", "updated": "33", "removed": "31", "suspect": "35", "lost": "31",
        "header": "1", "pass": "32", "warn": "33", "fail": "31"}
_CSI = "\x1b["
# Synchronized output (DEC mode 2026): a terminal that knows it shows the
# frame whole; the others ignore it.
_BEGIN, _END = _CSI + "?2026h", _CSI + "?2026l"


def host_port(address: str, port: int) -> str:
    """``10.0.0.5:4000``, ``[fe80::1]:4000``."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def member_address(member: Member) -> str:
    try:
        return host_port(member.address, member.port)
    except ValueError:          # a host of neither 4 nor 16 bytes
        return f"{member.host.hex()}:{member.port}"


def show_bytes(value: bytes) -> str:
    if not value:
        return "(empty)"
    try:
        text = value.decode("ascii")
        if text.isprintable():
            return f"{text!r} ({len(value)} B)"
    except UnicodeDecodeError:
        pass
    return f"{value.hex()} ({len(value)} B)"


def show_auth(member: Member, prefix: str = "") -> str:
    """yes/no for a member judged by its trailer; "" when we do not authenticate."""
    if member.authenticated is None:
        return ""
    return prefix + ("yes" if member.authenticated else "no")


def colour_wanted(stream: TextIO) -> bool:
    """Colours on a terminal, unless NO_COLOR is set (no-color.org) or TERM=dumb."""
    return (stream.isatty() and not os.environ.get("NO_COLOR")
            and os.environ.get("TERM") != "dumb")


def paint(kind: str | None, text: str, colour: bool) -> str:
    """``text`` in the colour of ``kind`` (an event kind, "header", or a
    doctor's "pass", "warn" or "fail") when ``colour`` (colour_wanted)."""
    return f"{_CSI}{_SGR[kind]}m{text}{_CSI}0m" if colour and kind in _SGR else text


def fallback_note() -> str | None:
    """"note: the pure-Python implementation runs: why", when it runs though
    nobody asked for it (MCASTMEMBER_NO_EXTENSIONS=1), else None."""
    from ..tribes.kernel.codec import FALLBACK
    return None if FALLBACK is None else f"note: {FALLBACK}"


def reason_text(event: MemberEvent) -> str:
    """`` (shutdown)``, the reason in brackets after the kind; "stopped" is
    ours (we stopped: every member leaves our table), not the member's."""
    if not event.reason:
        return ""
    return " (we stopped)" if event.reason == "stopped" else f" ({event.reason})"


def choose_view(service: McastService, json_lines: bool,
                stream: TextIO | None = None) -> JsonView:
    stream = stream or sys.stdout
    assert stream is not None       # (typed so: no console, as under pythonw)
    if json_lines:
        return JsonView(stream)
    return TableView(service, stream) if stream.isatty() else LineView(stream)


class JsonView:
    """One JSON object per event per line; nothing else on stdout."""
    refresh = 1.0

    def __init__(self, stream: TextIO) -> None:
        self._out = stream
        self._lock = threading.Lock()

    def on_event(self, event: MemberEvent | EventsLost) -> None:
        if event.member is None:     # EventsLost: we fell behind
            line = json.dumps({"event": event.kind, "count": event.count})
        else:
            line = json.dumps(event.to_dict())
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()

    def started(self, service: McastService, metrics: MetricsServer | None = None) -> None:
        note = fallback_note()
        if note:     # on stderr: stdout is the JSON lines, nothing else
            print(f"mcast-demo: {note}", file=sys.stderr, flush=True)

    def tick(self, service: McastService) -> None:
        pass

    def stopped(self, service: McastService) -> None:
        pass

    def close(self) -> None:
        pass


class LineView(JsonView):
    """A line per event, for logs and pipes."""

    def _say(self, text: str) -> None:
        with self._lock:
            self._out.write(time.strftime("%H:%M:%S ") + text + "\n")
            self._out.flush()

    def on_event(self, event: MemberEvent | EventsLost) -> None:
        if event.member is None:
            self._say(f"{event.count} events lost: the listener fell behind")
            return
        m = event.member
        self._say(f"{event.kind}{reason_text(event)}: {member_address(m)} id={m.unique_id.hex()} "
                  f"domain={show_bytes(m.domain)} payload={show_bytes(m.payload)}"
                  f"{show_auth(m, ' authenticated=')}")

    def started(self, service: McastService, metrics: MetricsServer | None = None) -> None:
        cfg = service.config
        codec = service.stats()["implementation"]
        if cfg.listen_only:
            text = f"watching {cfg.describe()} (listen-only: nothing sent)"
        else:
            me = service.local_member
            text = f"joined {cfg.describe()} as {member_address(me)} id={me.unique_id.hex()}"
        self._say(f"{text} ({codec} codec, auth {cfg.auth})")
        note = fallback_note()
        if note:
            self._say(note)
        if metrics is not None:
            self._say(f"metrics on {metrics.url}")

    def stopped(self, service: McastService) -> None:
        self._say("stopped watching (nothing was sent)" if service.config.listen_only
                  else "left the group (shutdown packet sent)")


class TableView(LineView):
    """The live table (see the module docstring)."""

    refresh = FRAME_S / 2   # how often the caller ticks us; we draw at most every FRAME_S

    def __init__(self, service: McastService, stream: TextIO,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(stream)
        self._clock = clock
        self._colour = colour_wanted(stream)
        self._changes: collections.deque[tuple[str, str]] = collections.deque(
            maxlen=CHANGES_SHOWN)
        # member identity -> (kind, when), for the row colour
        self._recent: dict[bytes, tuple[str, float]] = {}
        self._dirty = True
        self._drawn: list[str] | None = None  # the lines on the screen (None: nothing drawn yet)
        self._size: os.terminal_size | None = None
        self._last_frame = -math.inf
        self._metrics: MetricsServer | None = None
        self._fallback = False      # the pure-Python implementation runs unasked (started)
        utf8 = (getattr(stream, "encoding", None) or "").lower().replace("-", "") == "utf8"
        self._ellipsis = "…" if utf8 else "~"

    # -- events (the dispatcher's thread) -------------------------------------------------
    def on_event(self, event: MemberEvent | EventsLost) -> None:
        now, stamp = self._clock(), time.strftime("%H:%M:%S")
        with self._lock:
            if event.member is None:
                self._changes.append(("lost", f"{stamp} {event.count} events lost"))
            else:
                m = event.member
                self._changes.append((event.kind, f"{stamp} {event.kind}{reason_text(event)} "
                                      f"{member_address(m)} id {m.unique_id.hex()[:12]}"))
                self._recent[m.identity] = (event.kind, now)
            self._dirty = True

    # -- frames (the main thread) ------------------------------------------------------------
    def started(self, service: McastService, metrics: MetricsServer | None = None) -> None:
        self._metrics = metrics
        self._fallback = fallback_note() is not None
        self._write(_CSI + "?25l")              # no cursor jumping about the table
        self.tick(service)

    def tick(self, service: McastService) -> None:
        now = self._clock()
        size = self._terminal_size()
        if now - self._last_frame < FRAME_S:
            return
        if not self._dirty and size == self._size and now - self._last_frame < AGE_S:
            return
        with self._lock:
            self._dirty = False
            changes = list(self._changes)
            recent = {k: kind for k, (kind, when) in self._recent.items()
                      if now - when < HIGHLIGHT_S}
            self._recent = {k: v for k, v in self._recent.items() if k in recent}
        lines = self._frame(service, size, changes, recent)
        self._draw(lines, size)
        self._last_frame = now

    def _terminal_size(self) -> os.terminal_size:
        # The terminal's own size, as it is now: COLUMNS and LINES in the
        # environment (shutil's first choice) do not follow a resize.
        try:
            return os.get_terminal_size(self._out.fileno())
        except (AttributeError, ValueError, OSError):
            import shutil    # not at start: it imports the compression modules
            return shutil.get_terminal_size()

    def stopped(self, service: McastService) -> None:
        rows = len(self._drawn or ())
        self._write(_CSI + f"{rows + 1};1H" + _CSI + "J" + _CSI + "?25h")
        super().stopped(service)

    def close(self) -> None:
        self._write(_CSI + "?25h")               # whatever happened, the cursor comes back

    def _write(self, text: str) -> None:
        with self._lock:
            self._out.write(text)
            self._out.flush()

    def _draw(self, lines: list[str], size: os.terminal_size) -> None:
        """Rewrite the lines that changed (all after a resize), in one write."""
        parts: list[str] = []
        if self._drawn is None or size != self._size:
            parts.append(_CSI + "H" + _CSI + "2J")
            self._drawn = []
        for row, line in enumerate(lines):
            if row >= len(self._drawn) or self._drawn[row] != line:
                parts.append(f"{_CSI}{row + 1};1H{line}{_CSI}K")
        if len(lines) < len(self._drawn):
            parts.append(f"{_CSI}{len(lines) + 1};1H{_CSI}J")
        self._drawn, self._size = lines, size
        if parts:
            # The cursor waits under the table, where a ^C echoes (and is cleared).
            parts.append(f"{_CSI}{len(lines) + 1};1H")
            self._write(_BEGIN + "".join(parts) + _END)

    def _paint(self, kind: str | None, text: str) -> str:
        return paint(kind, text, self._colour)

    def _frame(self, service: McastService, size: os.terminal_size,
               changes: list[tuple[str, str]], recent: dict[bytes, str]) -> list[str]:
        # One column short of the width: a character in the last column
        # leaves some terminals waiting to wrap, and the line erase then eats it.
        width, height = max(20, size.columns - 1), max(8, size.lines)
        cfg = service.config
        stats = service.stats()
        members = sorted(service.members(), key=_order)
        heard = _silence(service, members)
        if cfg.listen_only:
            title = f"mcast-demo watch  {cfg.describe()}  listen-only: nothing sent"
        else:
            me = service.local_member
            title = (f"mcast-demo  {cfg.describe()}  me {member_address(me)} "
                     f"id {me.unique_id.hex()[:12]}")
        title += f"  ({stats['implementation']} codec, auth {cfg.auth})"
        if self._fallback:
            title += "  NOTE: pure Python, the compiled extension is not in use"
        # isinstance: the counters, of stats' values (with healthy and the codec's name)
        malformed = sum(v for k, v in stats.items() if k.startswith("malformed.")
                        and isinstance(v, int))
        failed = sum(v for k, v in stats.items() if k.startswith("auth.") and isinstance(v, int))
        refused = stats["refused"] + stats["refused_unlisted"]
        summary = (f"{len(members)} member(s)  received {stats['received']}  "
                   f"sent {stats['sent']}  malformed {malformed}  not authentic {failed}  "
                   f"refused {refused}")
        if self._metrics is not None:
            summary += f"  metrics {self._metrics.url}"
        summary += "  Ctrl-C " + ("stops" if cfg.listen_only else "leaves")
        header, rows = _table(members, heard, width, cfg.auth != "off")
        tail = changes
        # title, summary, a blank line and the header; a blank line and the label
        room = height - 6 - len(tail)
        if len(rows) > room and tail:          # fewer changes first, down to the last one
            tail = tail[-max(1, len(tail) - (len(rows) - room)):]
            room = height - 6 - len(tail)
        if len(rows) > room:
            kept = max(0, room - 1)
            rows = rows[:kept] + [(None, f"... and {len(rows) - kept} more (a taller "
                                         f"terminal shows them)")]
        cut = self._cut
        lines = [cut(title, width), cut(summary, width), "",
                 self._paint("header", cut(header, width))]
        lines += [self._paint(recent.get(m.identity) if m is not None else None, cut(text, width))
                  for m, text in rows]
        lines += ["", "recent changes:" if tail else "no change yet"]
        lines += [self._paint(kind, cut(text, width)) for kind, text in tail]
        return lines[:size.lines]         # a tiny terminal: what fits

    def _cut(self, text: str, width: int) -> str:
        return text if len(text) <= width else text[:width - 1] + self._ellipsis


def _order(member: Member) -> tuple[int, bytes, int, bytes]:
    """Rows by address, then port, then id: a row never moves as members come
    and go or as their heartbeats arrive."""
    return (len(member.host), member.host, member.port, member.unique_id)


def _silence(service: McastService, members: list[Member]) -> list[float | None]:
    """Seconds since each member of the snapshot ``members`` was last heard
    (None: not heard by us, as a member listed by DNS)."""
    now = service.clock()
    return [None if m.last_heard is None else max(0.0, now - m.last_heard) for m in members]


def _age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def _uptime(member: Member) -> str:
    # Below zero: a member Tomcat must sort last (tcp_listener), not an age.
    return _age(seconds(member.alive_ms)) if member.alive_ms >= 0 else "-"


# The columns, most wanted first: (title, width or None for the rest, value).
# As the terminal narrows the last ones go first; the first is always shown.
def _columns(auth: bool) -> list[Column]:
    columns: list[Column] = [("host:port", None, member_address),
               ("last heard", 10, None),
               ("uptime", 8, _uptime),
               ("unique id", 12, lambda m: m.unique_id.hex()[:12])]
    if auth:
        columns.append(("auth", 4, lambda m: show_auth(m) or "-"))
    columns.append(("domain / payload", 0, lambda m: f"{show_bytes(m.domain)} / "
                                                    f"{show_bytes(m.payload)}"))
    return columns


MIN_REST = 16           # the domain / payload column is shown only this wide at least


def _table(members: list[Member], heard: list[float | None], width: int,
           auth: bool) -> tuple[str, list[tuple[Member | None, str]]]:
    """The header and one (member, text) per row, fitted to ``width``: the
    least wanted columns go first; the last, when shown, takes what is left."""
    columns = _columns(auth)
    widths = [max([len("host:port")] + [len(member_address(m)) for m in members])]
    widths += [w for _, w, _ in columns[1:] if w is not None]     # the first's only
    while len(widths) > 1:
        rest = MIN_REST if widths[-1] == 0 else 0
        if sum(widths) + 2 * (len(widths) - 1) + rest <= width:
            break
        widths.pop()
    columns = columns[:len(widths)]

    def row(values: list[str]) -> str:
        cells: list[str] = []
        for (title, _, _), text, w in zip(columns, values, widths):
            if w:
                text = text.rjust(w) if title in ("last heard", "uptime") else text.ljust(w)
            cells.append(text)
        return "  ".join(cells).rstrip()

    def values(member: Member, silence: float | None) -> list[str]:
        age = "-" if silence is None else _age(silence) + " ago"
        return [member_address(member), age] + [value(member) for _, _, value in columns[2:]
                                                if value is not None]    # the second's only

    return (row([title for title, _, _ in columns]),
            [(m, row(values(m, h))) for m, h in zip(members, heard)])

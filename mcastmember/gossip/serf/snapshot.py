"""Serf's snapshot file, sans-IO: what to write for which event, how a
file's text reads back, when to compact, and whom to rejoin at start.

The format is serf/snapshot.go's (read, never copied), so a file written
by ``serf agent -snapshot`` is read here and ours is read by the agent: one
record a line, appended as membership changes and clocks move::

    alive: NAME ADDR:PORT       a member joined (the last word is the address)
    not-alive: NAME             it left or failed
    clock: N                    the member clock's last value seen
    event-clock: N              the last user event's time
    query-clock: N              the last query's time
    coordinate: JSON            (old agents) ignored, as Serf does: coordinates re-converge
    leave                       we left gracefully: what came before is forgotten
    # ...                       a comment

Serf's ``not-alive`` does not say whether the member left or failed, and
the agent rejoins only members last seen alive: a cluster whose members
failed one after another, then restarted whole, cannot form again from
the snapshots. A failure is therefore also written as a comment line,
``# mcastmember-failed: NAME ADDR:PORT`` (and ``# mcastmember-reaped: NAME``
once Serf forgets that member): the agent skips comments, so the file
stays Serf's, and we rejoin those members after the alive ones.

What the front does is the I/O (fronts/snapshot_file.py): read the file,
append what :meth:`Snapshotter.take` gives, rewrite it with
:meth:`Snapshotter.compacted` when :meth:`Snapshotter.compaction_due`.
"""

from __future__ import annotations

import ipaddress
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .events import QueryReceived, SerfMemberEvent, SerfNodeEvent, UserEventReceived
from .layout import LAMPORT_MASK
from .members import SerfCore

#: Serf's least size before a compaction (snapshotSizeLimit), bytes
MIN_COMPACT_SIZE = 128 * 1024
#: Serf's estimate of a member's bytes in the file, and the factor over it past which it is compacted
BYTES_PER_MEMBER = 128
COMPACT_FACTOR = 2
#: how often what was recorded is written out and the member clock read (Serf's flush and clock intervals), s
FLUSH_INTERVAL = 0.5
#: after a failed write, how long before a compaction tries to recover (Serf's), s
ERROR_RECOVERY_INTERVAL = 30.0
#: how many previous members one rejoin attempt tries at once (push/pulls in parallel)
REJOIN_BATCH = 4

FAILED_COMMENT = "# mcastmember-failed: "
REAPED_COMMENT = "# mcastmember-reaped: "
_NUMBER = re.compile(r"[0-9]{1,20}\Z")
_CLOCKS = {"clock: ": "clock", "event-clock: ": "event_clock", "query-clock: ": "query_clock"}


def format_addr(host: str, port: int) -> str:
    """An address as Go's net.TCPAddr prints it: ``1.2.3.4:7946``, ``[::1]:7946``."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_addr(text: str) -> tuple[str, int] | None:
    """``ADDR:PORT`` (brackets around IPv6) as (address, port); None if it is not one."""
    host, colon, port = text.rpartition(":")
    if not colon or not _NUMBER.match(port) or not 0 < int(port) < 65536:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return str(ipaddress.ip_address(host)), int(port)
    except ValueError:
        return None


@dataclass
class Restored:
    """What a snapshot file says: the members to rejoin (name -> ``ADDR:PORT``,
    in the order last written), the three clocks, and what could not be read."""

    alive: dict[str, str] = field(default_factory=dict)
    #: members that failed (not those that left), from our comment lines
    failed: dict[str, str] = field(default_factory=dict)
    clock: int = 0
    event_clock: int = 0
    query_clock: int = 0
    #: lines that are no record (skipped, as Serf skips them)
    bad_lines: int = 0
    #: the last line had no end: a write cut short (the process killed), skipped
    truncated: bool = False


def read_snapshot(text: str, rejoin_after_leave: bool = False) -> Restored:
    """A snapshot file's text (decoded with ``surrogateescape``) read as Serf's
    replay reads it: records in order, a ``leave`` forgetting what came
    before unless ``rejoin_after_leave`` (Serf's ``-rejoin``). A line that
    is no record is counted and skipped; a last line without its newline is
    skipped (a write the process did not finish)."""
    out = Restored()
    lines = text.split("\n")
    if lines[-1]:
        out.truncated = True
    for line in lines[:-1]:
        if not _read_line(out, line, rejoin_after_leave):
            out.bad_lines += 1
    return out


def _read_line(out: Restored, line: str, rejoin_after_leave: bool) -> bool:
    """One record into ``out``; False if the line is none."""
    if line.startswith("alive: "):
        name, _, addr = line[7:].rpartition(" ")
        if not name or parse_addr(addr) is None:
            return False
        out.alive[name] = addr
        out.failed.pop(name, None)
    elif line.startswith("not-alive: "):
        name = line[11:]
        out.alive.pop(name, None)
        out.failed.pop(name, None)
    elif line.startswith(FAILED_COMMENT):
        name, _, addr = line[len(FAILED_COMMENT):].rpartition(" ")
        if not name or parse_addr(addr) is None:
            return False
        out.failed[name] = addr
    elif line.startswith(REAPED_COMMENT):
        out.failed.pop(line[len(REAPED_COMMENT):], None)
    elif line.startswith(("clock: ", "event-clock: ", "query-clock: ")):
        prefix, _, number = line.partition(" ")
        if not _NUMBER.match(number) or int(number) > LAMPORT_MASK:
            return False
        setattr(out, _CLOCKS[prefix + " "], int(number))
    elif line == "leave":
        if not rejoin_after_leave:
            out.alive.clear()
            out.failed.clear()
            out.clock = out.event_clock = out.query_clock = 0
    elif not line.startswith(("#", "coordinate: ")):
        return False
    return True


def restore_clocks(core: SerfCore, restored: Restored) -> None:
    """The snapshot's clocks into a node's Serf layer, as serf.Create does:
    each clock moves past its value, and user events and queries up to
    theirs are old (ignored when a push/pull or gossip brings them again).
    Done before the node's sockets take anything, so a push/pull that comes
    at once cannot replay them."""
    core.members.clock.witness(restored.clock)
    for buffer, last in ((core.event_buffer, restored.event_clock), (core.query_buffer, restored.query_clock)):
        buffer.clock.witness(last)
        buffer.min_time = max(buffer.min_time, last + 1)


class Snapshotter:
    """What to append to the snapshot file, from the node's events and clocks
    (serf/snapshot.go's stream, without its goroutines): a front hands it
    the node's events (:meth:`record`), the clocks every FLUSH_INTERVAL
    (:meth:`clocks`), our leave (:meth:`leave`); takes the lines to append
    (:meth:`take`); rewrites the file with :meth:`compacted` when
    :meth:`compaction_due` says so."""

    def __init__(self, restored: Restored, size: int, rejoin_after_leave: bool = False,
                 min_compact_size: int = MIN_COMPACT_SIZE):
        self.alive = dict(restored.alive)
        self.failed = dict(restored.failed)
        self.last_clock = restored.clock
        self.last_event_clock = restored.event_clock
        self.last_query_clock = restored.query_clock
        #: bytes in the file (its size when opened, then what was appended)
        self.size = size
        self.min_compact_size = min_compact_size
        self.rejoin_after_leave = rejoin_after_leave
        self.leaving = False
        #: member names not written: a line break in one would forge records
        self.names_refused = 0
        self._pending: list[str] = []

    def record(self, events: Iterable[SerfNodeEvent]) -> None:
        """The node's events: members joined, left, failed and reaped; user
        events and queries delivered. Nothing after our leave (as Serf)."""
        for event in events:
            if self.leaving:
                return
            if isinstance(event, SerfMemberEvent):
                self._member(event)
            elif isinstance(event, UserEventReceived) and event.ltime > self.last_event_clock:
                self.last_event_clock = event.ltime
                self._pending.append(f"event-clock: {event.ltime}\n")
            elif isinstance(event, QueryReceived) and event.query.ltime > self.last_query_clock:
                self.last_query_clock = event.query.ltime
                self._pending.append(f"query-clock: {event.query.ltime}\n")

    def _member(self, event: SerfMemberEvent) -> None:
        name = event.member.name
        if "\n" in name:
            self.names_refused += 1
            return
        if event.kind == "joined":
            addr = format_addr(event.member.addr, event.member.port)
            self.alive[name] = addr
            self.failed.pop(name, None)
            self._pending.append(f"alive: {name} {addr}\n")
        elif event.kind in ("left", "failed"):
            self.alive.pop(name, None)
            self.failed.pop(name, None)
            self._pending.append(f"not-alive: {name}\n")
            if event.kind == "failed":
                addr = format_addr(event.member.addr, event.member.port)
                self.failed[name] = addr
                self._pending.append(f"{FAILED_COMMENT}{name} {addr}\n")
        elif event.kind == "reaped" and self.failed.pop(name, None) is not None:
            self._pending.append(f"{REAPED_COMMENT}{name}\n")

    def clocks(self, core: SerfCore) -> None:
        """The member clock's last value seen (Serf's updateClock); and the
        event clock up to the times a join chose to ignore (they are old for
        a restart too)."""
        seen = core.members.clock.time() - 1
        if seen > self.last_clock:
            self.last_clock = seen
            self._pending.append(f"clock: {seen}\n")
        ignored = core.event_buffer.min_time - 1
        if ignored > self.last_event_clock:
            self.last_event_clock = ignored
            self._pending.append(f"event-clock: {ignored}\n")

    def leave(self) -> str:
        """Our graceful leave: the ``leave`` record (write it at once), and
        nothing recorded after it; the members are forgotten unless we are to
        rejoin after a leave (Serf's ``-rejoin``)."""
        self.leaving = True
        if not self.rejoin_after_leave:
            self.alive.clear()
            self.failed.clear()
        return self.take() + "leave\n"

    def take(self) -> str:
        """The lines recorded since the last call, to append."""
        text = "".join(self._pending)
        self._pending.clear()
        return text

    def wrote(self, count: int) -> None:
        """``count`` bytes were appended."""
        self.size += count

    def compaction_due(self) -> bool:
        """Past Serf's bound: twice its estimate of the members' bytes, at
        least ``min_compact_size``."""
        members = len(self.alive) + len(self.failed)
        return self.size > max(self.min_compact_size, members * BYTES_PER_MEMBER * COMPACT_FACTOR)

    def compacted(self) -> str:
        """The whole file anew: the members to rejoin and the clocks (what
        was recorded and not yet taken is in it)."""
        self._pending.clear()
        lines = [f"alive: {name} {addr}\n" for name, addr in self.alive.items()]
        lines += [f"{FAILED_COMMENT}{name} {addr}\n" for name, addr in self.failed.items()]
        lines += [f"clock: {self.last_clock}\n", f"event-clock: {self.last_event_clock}\n",
                  f"query-clock: {self.last_query_clock}\n"]
        return "".join(lines)


class Rejoin:
    """Whom to join at start, from the snapshot (serf.go handleRejoin, which
    tries its alive members one at a time until one answers): the members
    last seen alive, in random order, then those that had failed (the agent
    forgets them), REJOIN_BATCH at a time until an attempt joins one.
    Ourselves (by name or address) excepted."""

    def __init__(self, restored: Restored, name: str, own: tuple[str, int], rng: random.Random,
                 batch: int = REJOIN_BATCH):
        self.batch = batch
        self.tried = 0
        self.joined = 0
        self.active = False
        seen: set[tuple[str, int]] = set()
        #: the addresses still to try, alive ones then failed ones: no attempt mixes the two
        self._groups: list[list[tuple[str, int]]] = []
        for members in (restored.alive, restored.failed):
            group = []
            for member, text in members.items():
                addr = parse_addr(text)
                if member != name and addr is not None and addr != own and addr not in seen:
                    seen.add(addr)
                    group.append(addr)
            rng.shuffle(group)
            self._groups.append(group)

    @property
    def planned(self) -> list[tuple[str, int]]:
        """The addresses still to try, in order."""
        return [addr for group in self._groups for addr in group]

    def next_batch(self) -> list[tuple[str, int]]:
        """The next addresses to join; none when done."""
        while self._groups and not self._groups[0]:
            del self._groups[0]
        if not self._groups:
            batch = []
        else:
            batch, self._groups[0] = self._groups[0][:self.batch], self._groups[0][self.batch:]
        self.tried += len(batch)
        self.active = bool(batch)
        return batch

    def finished(self, joined: int) -> bool:
        """An attempt ended with ``joined`` members answering: True if the
        rejoin is over (one answered, or nobody is left to try)."""
        self.active = False
        self.joined += joined
        if joined:
            self._groups = []
        return not self.planned


__all__ = ["BYTES_PER_MEMBER", "COMPACT_FACTOR", "ERROR_RECOVERY_INTERVAL", "FLUSH_INTERVAL", "MIN_COMPACT_SIZE",
           "REJOIN_BATCH", "Rejoin", "Restored", "Snapshotter", "format_addr", "parse_addr", "read_snapshot",
           "restore_clocks"]

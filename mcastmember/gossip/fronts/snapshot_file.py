"""The snapshot file's I/O for a gossip front (Serf's ``-snapshot`` and
``-rejoin``; what to write and whom to rejoin is the sans-IO
:mod:`mcastmember.gossip.serf.snapshot`).

Read once when the front is made, so the node's clocks are restored before
its sockets exist; then appended every FLUSH_INTERVAL at most, from the
front's timer, never per packet or per line (Serf's flush policy: a write
to the kernel, which a killed process does not lose, and an fsync only at
a leave, a compaction and a stop); rewritten through a temporary file and
a rename when it grows past its bound, so a crash leaves the old file or
the new one, never half of one.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ..._runtime.errors import ConfigurationError
from ..memberlist.telemetry import Samples
from ..serf.events import JoinDone, SerfNodeEvent
from ..serf.node import SerfNode
from ..serf.snapshot import (ERROR_RECOVERY_INTERVAL, FLUSH_INTERVAL, MIN_COMPACT_SIZE, Rejoin, Snapshotter,
                             read_snapshot, restore_clocks)

log = logging.getLogger("mcastmember")

#: the temporary file of a compaction, beside the snapshot (Serf's name)
COMPACT_SUFFIX = ".compact"
#: the counters a front's stats() has, with or without a snapshot
SNAPSHOT_COUNTERS = ("snapshot_lines_bad", "snapshot_names_refused", "snapshot_write_errors",
                     "snapshot_compactions", "rejoin_tried", "rejoin_joined")


class SnapshotFile:
    """One front's snapshot file: read (and the node's clocks restored) when
    made, appended and compacted as the node goes, closed at stop."""

    def __init__(self, path: str | os.PathLike[str], node: SerfNode, own: tuple[str, int],
                 rejoin_after_leave: bool = False, min_compact_size: int = MIN_COMPACT_SIZE):
        self.path = os.fspath(path)
        self.node = node
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise ConfigurationError(f"cannot open the snapshot file {self.path}: "
                                     f"{error.strerror or error}") from None
        try:
            data = self._read()
        except ConfigurationError:
            os.close(self._fd)
            raise
        restored = read_snapshot(data.decode("utf-8", "surrogateescape"), rejoin_after_leave)
        restore_clocks(node.core, restored)
        self.restored = restored
        self.snapshot = Snapshotter(restored, len(data), rejoin_after_leave, min_compact_size)
        self.rejoin = Rejoin(restored, node.name, own, node.engine.rng)
        #: a write cut short left a line without its end: the next write ends it first
        self._cut = bool(data) and not data.endswith(b"\n")
        self._counts: dict[str, int] = dict.fromkeys(SNAPSHOT_COUNTERS, 0)
        self._counts["snapshot_lines_bad"] = restored.bad_lines
        self._next_flush = 0.0
        self._recover_at: float | None = None
        # Serf times its snapshot's writes (serf.snapshot.appendLine, serf.snapshot.compact)
        node.telemetry.snapshot = self._timings = {"appendLine": Samples(), "compact": Samples()}
        if restored.bad_lines or restored.truncated:
            log.warning("serf front: the snapshot file %s had %d unreadable line(s)%s; skipped", self.path,
                        restored.bad_lines, " and a last line cut short" if restored.truncated else "")

    # ---------------------------------------------------------- the front's calls

    def start(self, now: float) -> None:
        """At start, once the node runs: the first rejoin attempt (Serf's agent
        rejoins whenever its snapshot names members, with or without -rejoin)."""
        self._next_flush = now + FLUSH_INTERVAL
        if self.rejoin.planned:
            self._rejoin_next(now)

    def events(self, events: Iterable[SerfNodeEvent], now: float) -> bool:
        """The node's events, recorded; a rejoin attempt's end leads to the
        next. True if a new attempt started (its streams are to be opened)."""
        events = list(events)
        self.snapshot.record(events)
        if self.rejoin.active:
            for event in events:
                if isinstance(event, JoinDone):
                    done = self.rejoin.finished(event.joined)
                    self._counts["rejoin_joined"] = self.rejoin.joined
                    return not done and self._rejoin_next(now)
        return False

    def next_time(self) -> float:
        return self._next_flush

    def tick(self, now: float) -> None:
        """At the flush time: the clocks read, what was recorded appended, the
        file compacted past its bound (or to recover from a failed write)."""
        if now < self._next_flush:
            return
        self._next_flush = now + FLUSH_INTERVAL
        self.snapshot.clocks(self.node.core)
        if self._recover_at is not None:
            if now >= self._recover_at:
                self._compact(now)
            else:
                self.snapshot.take()        # the compaction to come writes the state whole
            return
        self._append(self.snapshot.take(), now)
        if self.snapshot.compaction_due():
            self._compact(now)

    def leave(self) -> None:
        """Our graceful leave, written and synced at once (no rejoin from it
        at the next start, unless ``rejoin``)."""
        self._append(self.snapshot.leave(), time.monotonic(), sync=True)

    def close(self) -> None:
        """At stop: the clocks and what is left written, synced, closed."""
        if self._fd < 0:
            return
        self.snapshot.clocks(self.node.core)
        self._append(self.snapshot.take(), time.monotonic(), sync=True)
        _close_quietly(self._fd)
        self._fd = -1

    def stats(self) -> dict[str, int]:
        self._counts["snapshot_names_refused"] = self.snapshot.names_refused
        self._counts["rejoin_tried"] = self.rejoin.tried
        return dict(self._counts)

    # ---------------------------------------------------------- inside

    def _read(self) -> bytes:
        """The whole file (a ConfigurationError if it cannot be read)."""
        try:
            if not stat.S_ISREG(os.fstat(self._fd).st_mode):
                # (a device such as /dev/zero would be read for ever)
                raise ConfigurationError(f"the snapshot file {self.path} is not a regular file")
            return _read_all(self._fd)
        except OSError as error:
            raise ConfigurationError(f"cannot read the snapshot file {self.path}: "
                                     f"{error.strerror or error}") from None

    def _rejoin_next(self, now: float) -> bool:
        batch = self.rejoin.next_batch()
        if not batch:
            log.warning("serf front: could not rejoin any member the snapshot names")
            return False
        log.info("serf front: rejoining previously known members: %s",
                 ", ".join(f"{host}:{port}" for host, port in batch))
        # Serf's rejoin does not ignore old events: those after the
        # snapshot's event clock happened while we were down.
        self.node.join(batch, now, ignore_old=False)
        return True

    def _append(self, text: str, now: float, sync: bool = False) -> None:
        if not text or self._fd < 0:
            return
        began = time.perf_counter()
        data = text.encode("utf-8", "surrogateescape")
        if self._cut:
            data = b"\n" + data
        try:
            _write_all(self._fd, data)
            if sync:
                os.fsync(self._fd)
        except OSError as error:
            self._failed(error, now)
            return
        self._cut = False
        self.snapshot.wrote(len(data))
        self._timings["appendLine"].add((time.perf_counter() - began) * 1e3, now)

    def _compact(self, now: float) -> None:
        """The file rewritten whole: a temporary file beside it, synced, then
        renamed over it (atomic), then appended to again."""
        temp = self.path + COMPACT_SUFFIX
        began = time.perf_counter()
        data = self.snapshot.compacted().encode("utf-8", "surrogateescape")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, self.path)
            new = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        except OSError as error:
            self._failed(error, now)
            return
        _close_quietly(self._fd)
        self._fd = new
        self._cut = False
        self.snapshot.size = len(data)
        self._recover_at = None
        self._counts["snapshot_compactions"] += 1
        self._timings["compact"].add((time.perf_counter() - began) * 1e3, now)

    def _failed(self, error: OSError, now: float) -> None:
        """A write failed (a full disk...): counted; a compaction tries again
        after ERROR_RECOVERY_INTERVAL, writing the state whole (Serf's)."""
        self._counts["snapshot_write_errors"] += 1
        if self._recover_at is None:
            log.warning("serf front: cannot write the snapshot file %s: %s; trying again in %.0f s", self.path,
                        error.strerror or error, ERROR_RECOVERY_INTERVAL)
        self._recover_at = now + ERROR_RECOVERY_INTERVAL


def _read_all(fd: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _close_quietly(fd: int) -> None:
    """Close a descriptor whose last writes were already checked (a close
    that fails has nothing more to lose)."""
    try:
        os.close(fd)
    except OSError:
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]




def open_snapshot(settings: Mapping[str, Any], node: SerfNode) -> SnapshotFile | None:
    """The front's snapshot file, from its settings ``snapshot_path`` and
    ``rejoin`` (already checked for their types), read and the node's clocks
    restored; None without one. A ConfigurationError for ``rejoin``
    without a snapshot (the agent ignores it silently) or a file that
    cannot be opened."""
    path = settings.get("snapshot_path")
    if path is None:
        if settings.get("rejoin"):
            raise ConfigurationError("rejoin needs snapshot_path: the members to rejoin are the snapshot's")
        return None
    own = (node.engine.settings.advertise_addr, node.engine.settings.advertise_port)
    return SnapshotFile(path, node, own, bool(settings.get("rejoin")))


def snapshot_stats(snapshot: SnapshotFile | None) -> dict[str, int]:
    """The snapshot's counters, zeros without one (every front has them)."""
    if snapshot is None:
        return {key: 0 for key in SNAPSHOT_COUNTERS}
    return snapshot.stats()


__all__ = ["COMPACT_SUFFIX", "SNAPSHOT_COUNTERS", "SnapshotFile", "open_snapshot", "snapshot_stats"]

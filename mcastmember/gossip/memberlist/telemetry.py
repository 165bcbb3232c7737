"""What memberlist gives go-metrics beyond our counters, kept sans-IO for the
metrics of a gossip front under memberlist's and Serf's own names: the
summaries (probe, push/pull and gossip durations; Serf's message sizes,
queue depths and coordinate adjustments use :class:`Samples` too) and the
counts of state changes memberlist makes under its names.

A :class:`Samples` is what go-metrics' Prometheus sink makes of a series fed
by ``MeasureSince`` or ``AddSample``: a count and a sum since the start, and
quantiles over the recent values (that sink's summaries look back 10 s).
Recording one stores two floats the caller already holds in fixed arrays and
bumps a small index: no clock call (the caller's ``now`` dates it) and no
object kept per sample, so the paths that record (a probe's end, a push/pull's
end) hold no more memory than before. The collector reads them at a scrape.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable

__all__ = ["MAX_AGE_S", "QUANTILES", "WINDOW", "EngineTelemetry", "Samples"]

#: the recent values kept for quantiles (a small int, so the ring's index is
#: one of the interpreter's cached ints)
WINDOW = 256
#: how far back the quantiles look, as go-metrics' Prometheus summaries do
MAX_AGE_S = 10.0
#: the quantiles go-metrics' Prometheus summaries give
QUANTILES = (0.5, 0.9, 0.99)


class Samples:
    """One summary: :attr:`count` and :attr:`total` of every value added, and
    the last :data:`WINDOW` values with the times they were added at."""

    __slots__ = ("total", "_values", "_times", "_next", "_laps")

    def __init__(self) -> None:
        self.total = 0.0
        self._values = array("d", bytes(8 * WINDOW))
        self._times = array("d", bytes(8 * WINDOW))
        self._next = 0
        # the times the ring went round: with _next, the count, kept so
        # that adding a value makes no new int (a count past 256 would)
        self._laps = 0

    @property
    def count(self) -> int:
        return self._laps * WINDOW + self._next

    def add(self, value: float, now: float) -> None:
        i = self._next
        self._values[i] = value
        self._times[i] = now
        if i + 1 < WINDOW:
            self._next = i + 1
        else:
            self._next = 0
            self._laps += 1
        self.total += value

    def recent(self, now: float) -> list[float]:
        """The values kept that were added at most :data:`MAX_AGE_S` before ``now``."""
        kept = min(self.count, WINDOW)
        since = now - MAX_AGE_S
        return [self._values[i] for i in range(kept) if self._times[i] >= since]

    def quantiles(self, now: float) -> dict[float, float]:
        """Each of :data:`QUANTILES` over :meth:`recent` (NaN when there is
        none, as the Go sink's summary gives then)."""
        values = sorted(self.recent(now))
        if not values:
            return dict.fromkeys(QUANTILES, math.nan)
        return {q: values[min(len(values) - 1, math.ceil(q * len(values)) - 1)] for q in QUANTILES}


class EngineTelemetry:
    """What memberlist times, in milliseconds: ``probe_node`` (probeNode: a
    probe from its ping to its end, the ack or the probe interval run out),
    ``push_pull_node`` (pushPullNode: one of our push/pulls, from the
    connection asked for to its merge or failure) and ``gossip`` (one gossip
    round's work). ``clock`` (seconds; None: gossip rounds go untimed) is
    the front's timer for the gossip round, which no ``now`` an entry point
    is given can measure. And what it counts where it changes a node's
    state (msg.alive: an alive taken, ours included; msg.dead: a node marked
    dead or left; degraded.timeout: a suspicion that ran out with fewer
    confirmations than it expected)."""

    __slots__ = ("probe_node", "push_pull_node", "gossip", "clock", "msg_alive", "msg_dead", "degraded_timeouts")

    def __init__(self) -> None:
        self.probe_node = Samples()
        self.push_pull_node = Samples()
        self.gossip = Samples()
        self.clock: Callable[[], float] | None = None
        self.msg_alive = 0
        self.msg_dead = 0
        self.degraded_timeouts = 0

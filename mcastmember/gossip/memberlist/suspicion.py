"""Lifeguard's suspicion timer (memberlist suspicion.go and util.go, read, not copied).

A suspect is declared dead after a timeout that starts at ``max`` and shrinks
toward ``min`` as independent peers confirm the suspicion: after ``n`` of the
``k`` wanted confirmations the timeout is
``max - log(n + 1) / log(k + 1) * (max - min)`` (never below ``min``), counted
from when the suspicion began. With ``k < 1`` it is ``min`` from the start.
"""

from __future__ import annotations

import heapq
import math


def suspicion_timeout(mult: int, n: int, interval: float) -> float:
    """util.go suspicionTimeout: mult x max(1, log10(n)) x interval; the node
    scale is kept to Go's millisecond precision (it multiplies by 1000)."""
    scale = max(1.0, math.log10(max(1.0, float(n))))
    return mult * int(scale * 1000) * interval / 1000


def remaining(n: int, k: int, elapsed: float, low: float, high: float) -> float:
    """remainingSuspicionTime: what is left of the timeout after ``n``
    confirmations and ``elapsed`` seconds (negative: already over). Go floors
    the raw timeout to whole milliseconds; so does this."""
    frac = math.log(n + 1.0) / math.log(k + 1.0)
    raw = high - frac * (high - low)
    timeout = max(math.floor(1000.0 * raw) / 1000.0, low)
    return timeout - elapsed


class Suspicion:
    """One suspect's timer: its deadline moves closer with each new confirmer."""

    def __init__(self, from_: str, k: int, low: float, high: float, start: float):
        self.k = k
        self.n = 0
        self.low = low
        self.high = high
        self.start = start
        # The accuser itself is no independent confirmation (our own
        # suspicion may come back to us by gossip).
        self.confirmations = {from_}
        self.deadline = start + (high if k >= 1 else low)
        self.told = False       # we sent it straight to the accused

    def confirm(self, from_: str, now: float) -> bool:
        """A peer also suspects the node: True when this is new information
        (to be gossiped on); the deadline moves accordingly."""
        if self.n >= self.k or from_ in self.confirmations:
            return False
        self.confirmations.add(from_)
        self.n += 1
        left = remaining(self.n, self.k, now - self.start, self.low, self.high)
        self.deadline = now + max(left, 0.0)
        return True


class SuspicionTimers(dict[str, tuple[Suspicion, float]]):
    """The open suspicions by node name, each with the state change it began
    at (a dict, in the order they began), that also knows the soonest
    deadline without a scan: a member of a churning cluster holds hundreds,
    and the engine asks for its next deadline after every packet.

    A heap holds (deadline, order, name, timer) for every timer as it is
    set and each time :meth:`confirm` moves its deadline; entries whose timer
    was removed, replaced or moved since are skipped when they reach the top
    (so removing needs nothing but the dict's own ``pop`` and ``del``). The
    heap is rebuilt when it grows past twice the timers (plus a little), so
    it stays bounded by the dict, itself bounded by the node table. Only
    ``timers[name] = ...``, ``pop``, ``del`` and :meth:`confirm` may change
    it (not ``update`` nor ``setdefault``), and a timer's deadline only
    through :meth:`confirm`."""

    def __init__(self) -> None:
        super().__init__()
        self._heap: list[tuple[float, int, str, Suspicion]] = []
        self._order = 0

    def __setitem__(self, name: str, value: tuple[Suspicion, float]) -> None:
        super().__setitem__(name, value)
        self._push(name, value[0])

    def confirm(self, name: str, from_: str, now: float) -> bool:
        """:meth:`Suspicion.confirm` on ``name``'s timer (which must be open)."""
        timer = self[name][0]
        if not timer.confirm(from_, now):
            return False
        self._push(name, timer)
        return True

    def soonest(self) -> float:
        """The earliest deadline of the open timers (inf with none)."""
        heap = self._heap
        while heap:
            deadline, _order, name, timer = heap[0]
            current = self.get(name)
            if current is not None and current[0] is timer and timer.deadline == deadline:
                return deadline
            heapq.heappop(heap)
        return math.inf

    def _push(self, name: str, timer: Suspicion) -> None:
        self._order += 1
        heapq.heappush(self._heap, (timer.deadline, self._order, name, timer))
        if len(self._heap) > 2 * len(self) + _HEAP_SLACK:
            self._heap = [(sus.deadline, order, key, sus) for order, (key, (sus, _change)) in enumerate(self.items())]
            heapq.heapify(self._heap)
            self._order = len(self._heap)


#: stale heap entries allowed beyond twice the open timers before a rebuild
_HEAP_SLACK = 64

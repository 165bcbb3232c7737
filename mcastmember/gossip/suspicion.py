"""Lifeguard's suspicion timer (memberlist suspicion.go and util.go, read, not copied).

A suspect is declared dead after a timeout that starts at ``max`` and shrinks
toward ``min`` as independent peers confirm the suspicion: after ``n`` of the
``k`` wanted confirmations the timeout is
``max - log(n + 1) / log(k + 1) * (max - min)`` (never below ``min``), counted
from when the suspicion began. With ``k < 1`` it is ``min`` from the start.
"""

from __future__ import annotations

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

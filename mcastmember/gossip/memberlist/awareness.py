"""Lifeguard's local health awareness (memberlist awareness.go, read, not copied).

A score from 0 (healthy) to ``max - 1``: failed probes without nacks,
missing nacks and refutations raise it, successful probes lower it. The probe
interval is multiplied by ``score + 1``, so an overloaded node probes (and
accuses) less often.
"""

from __future__ import annotations


class Awareness:
    """The health score, kept within [0, max_multiplier - 1]."""

    def __init__(self, max_multiplier: int):
        self.max = max_multiplier
        self.score = 0

    def apply_delta(self, delta: int) -> None:
        self.score = min(max(self.score + delta, 0), self.max - 1)

    def scale(self, timeout: float) -> float:
        """``timeout`` stretched by the score (ScaleTimeout)."""
        return timeout * (self.score + 1)

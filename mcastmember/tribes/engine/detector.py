"""Adaptive expiry: the phi-accrual failure detector (Hayashibara et al.,
2004), as Akka and Cassandra use it.

Instead of one drop time for everyone, each member's heartbeat intervals are
summed up (a running mean and standard deviation over its last ``window``
intervals, kept by the member index without allocation), and ``phi`` says
how unlikely the silence so far is: phi = -log10(1 - F(silence)), F the
normal distribution of its intervals (Akka's logistic approximation of it).
A member whose phi passes ``threshold`` is removed. phi grows with silence
smoothly, so one threshold means "1 in 10^threshold chance this is a
delay" on a steady network and on a jittery one alike: the detector waits
longer for a member whose heartbeats come irregularly, and less for one
that is like a clock.

phi passes the threshold when the silence exceeds
mean + pause + y * std, with y solving the threshold once: so the index
compares a time, never computes a logarithm per member.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..._runtime.units import seconds

if TYPE_CHECKING:
    from ..kernel._fast import MemberIndex

# Akka's defaults (akka.cluster.failure-detector), ms where a time.
DEFAULT_THRESHOLD = 8.0
DEFAULT_WINDOW = 1000
DEFAULT_MIN_STD_MS = 100


def _logistic_cdf(y: float) -> float:
    """Akka's approximation of the standard normal distribution."""
    return 1.0 / (1.0 + math.exp(-y * (1.5976 + 0.070566 * y * y)))


def phi(silence: float, mean: float, std: float) -> float:
    """phi of a ``silence`` (seconds) for a member whose intervals have this
    ``mean`` and ``std`` (acceptable pause included in ``mean``)."""
    y = (silence - mean) / std
    tail = 1.0 - _logistic_cdf(y)
    return -math.log10(tail) if tail > 0 else math.inf


def threshold_y(threshold: float) -> float:
    """The y (standard deviations past the mean) at which phi reaches
    ``threshold``: the logistic's exponent is cubic in y, increasing, so
    bisection finds it."""
    if not threshold > 0:
        raise ValueError("the phi threshold must be positive")
    target = math.log((1.0 - 10.0 ** -threshold) / 10.0 ** -threshold)
    low, high = -10.0, 100.0
    for _ in range(200):
        middle = (low + high) / 2
        if middle * (1.5976 + 0.070566 * middle * middle) < target:
            low = middle
        else:
            high = middle
    return high


class PhiAccrual:
    """The detector's settings, seconds: ``pause`` is an acceptable pause
    added to every member's mean (Akka's acceptable-heartbeat-pause),
    ``first_mean`` the interval a new member is assumed to keep (the
    ``frequency`` setting: no default here, the settings have it)."""

    def __init__(self, threshold: float = DEFAULT_THRESHOLD,
                 min_std: float = seconds(DEFAULT_MIN_STD_MS), pause: float = 0.0, *,
                 first_mean: float, window: int = DEFAULT_WINDOW) -> None:
        self.threshold = float(threshold)
        self.y = threshold_y(self.threshold)
        self.min_std, self.pause = float(min_std), float(pause)
        self.first_mean, self.window = float(first_mean), int(window)

    def arm(self, index: MemberIndex) -> None:
        """Turn on arrival statistics in a member index."""
        index.set_phi(self.y, self.pause, self.min_std, self.first_mean, self.window)

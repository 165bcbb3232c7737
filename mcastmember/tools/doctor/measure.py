"""The doctor's statistics: a member's period and loss from its heartbeats
(which carry no sequence number), and the loss of numbered doctor
datagrams."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

LOSSY = 0.01                  # loss above this is worth a warning

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
    """The fraction of datagrams lost between the first and the last heard (1.0
    when none came)."""
    if not sequences:
        return 1.0
    return round(1 - len(sequences) / (max(sequences) - min(sequences) + 1), 4)


def span(sequences: Collection[int]) -> int:
    return max(sequences) - min(sequences) + 1 if sequences else 0


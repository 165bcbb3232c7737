"""Serf's network coordinates (Vivaldi with height), sans-IO.

Every Serf agent keeps an estimate of where it sits in an 8-dimension space
whose distances are round-trip times: each direct probe it completes
(memberlist's ``NotifyPingComplete``) gives the RTT to the probed node and
that node's coordinate (from the ack's payload), and moves our coordinate a
little. ``serf rtt a b`` then estimates the RTT between two nodes from their
coordinates alone. :class:`CoordinateClient` is that estimate for one node:
no clock (the RTT is given) and no randomness of its own (the caller's
``random.Random``, used only when two coordinates coincide).

What follows which serf 0.9.4 code (Debian's source, read, never copied):
``coordinate/client.go`` (``Update``: the sanity checks, the latency filter,
``updateVivaldi``, ``updateAdjustment``, ``updateGravity``, the reset of an
invalid coordinate), ``coordinate/coordinate.go`` (``DistanceTo``,
``ApplyForce``, ``IsValid``), ``coordinate/config.go`` (the defaults, in
:mod:`.layout`). Arithmetic is done in the same order as Go's, so results are
the same to the last bit (``tests/interop/gossip_vectors/coord_gen.go``), Go's
``time.Duration`` truncations to whole nanoseconds included.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ..._runtime.errors import ConfigurationError
from .layout import (ADJUSTMENT_WINDOW_SIZE, COORDINATE_DIMENSIONALITY, COORDINATE_ZERO_THRESHOLD, GRAVITY_RHO,
                     HEIGHT_MIN, LATENCY_FILTER_SIZE, MAX_RTT_NS, VIVALDI_CC, VIVALDI_CE, VIVALDI_ERROR_MAX)
from .messages import Coordinate

__all__ = ["CoordinateClient", "CoordinateConfig", "CoordinateRefused", "estimate_rtt", "new_coordinate"]

_NS_PER_S = 1_000_000_000
_INT64_MIN = -(1 << 63)


class CoordinateRefused(ValueError):
    """A coordinate or an RTT Serf's client refuses (client.go Update's errors)."""


@dataclass(frozen=True)
class CoordinateConfig:
    """coordinate.Config (Serf uses the defaults: ``DefaultConfig``)."""

    dimensionality: int = COORDINATE_DIMENSIONALITY
    vivaldi_error_max: float = VIVALDI_ERROR_MAX
    vivaldi_ce: float = VIVALDI_CE
    vivaldi_cc: float = VIVALDI_CC
    adjustment_window_size: int = ADJUSTMENT_WINDOW_SIZE
    height_min: float = HEIGHT_MIN
    latency_filter_size: int = LATENCY_FILTER_SIZE
    gravity_rho: float = GRAVITY_RHO

    def __post_init__(self) -> None:
        if self.dimensionality < 1:
            raise ConfigurationError("a coordinate needs at least 1 dimension")
        if self.latency_filter_size < 1:
            raise ConfigurationError("latency_filter_size must be at least 1")
        if self.adjustment_window_size < 0:
            raise ConfigurationError("adjustment_window_size cannot be negative")


def new_coordinate(config: CoordinateConfig | None = None) -> Coordinate:
    """A node's coordinate before any sample (NewCoordinate): the origin, the
    largest error, the least height."""
    config = config or CoordinateConfig()
    return Coordinate(vec=[0.0] * config.dimensionality, error=config.vivaldi_error_max, adjustment=0.0,
                      height=config.height_min)


def estimate_rtt(a: Coordinate, b: Coordinate) -> float:
    """The RTT, in seconds, that two coordinates predict (Coordinate.DistanceTo,
    what ``serf rtt`` prints), in whole nanoseconds as Go's Duration. Raises
    :class:`CoordinateRefused` if their dimensions differ."""
    if len(a.vec) != len(b.vec):
        raise CoordinateRefused(f"coordinates of {len(a.vec)} and {len(b.vec)} dimensions cannot be compared")
    return _seconds(_distance_ns(a, b))


def _valid(c: Coordinate) -> bool:
    return all(math.isfinite(x) for x in c.vec) and all(
        math.isfinite(x) for x in (c.error, c.adjustment, c.height))


def _magnitude(vec: list[float]) -> float:
    total = 0.0
    for x in vec:           # in order, as Go (not sum(), which compensates)
        total += x * x
    return math.sqrt(total)


def _raw_distance(a: Coordinate, b: Coordinate) -> float:
    return _magnitude([x - y for x, y in zip(a.vec, b.vec)]) + a.height + b.height


def _distance_ns(a: Coordinate, b: Coordinate) -> int:
    dist = _raw_distance(a, b)
    adjusted = dist + a.adjustment + b.adjustment
    if adjusted > 0.0:
        dist = adjusted
    return _duration(dist * 1.0e9)


def _duration(ns: float) -> int:
    """Go's time.Duration(float64): truncated; NaN and out of range give
    the lowest int64, as Go's conversion does on amd64."""
    if not -9.223372036854775808e18 <= ns < 9.223372036854775808e18:
        return _INT64_MIN
    return int(ns)


def _seconds(ns: int) -> float:
    """Go's Duration.Seconds: whole seconds plus the rest, each as a float."""
    whole, rest = divmod(abs(ns), _NS_PER_S)
    if ns < 0:
        whole, rest = -whole, -rest
    return float(whole) + float(rest) / 1e9


class CoordinateClient:
    """One node's network coordinate, updated from completed probes
    (coordinate.Client). ``rng`` picks a direction when two coordinates
    coincide."""

    def __init__(self, config: CoordinateConfig | None = None, rng: random.Random | None = None):
        self.config = config = config or CoordinateConfig()
        self._rng = rng or random.Random()
        self._coord = new_coordinate(config)
        self._origin = new_coordinate(config)
        self._adjustment_index = 0
        self._adjustment_samples = [0.0] * config.adjustment_window_size
        self._latency: dict[str, list[float]] = {}
        #: how often our coordinate went invalid and started again (Serf's coordinate_resets)
        self.resets = 0

    @property
    def coordinate(self) -> Coordinate:
        """Our coordinate (a copy)."""
        return _copy(self._coord)

    def __len__(self) -> int:
        """The nodes whose RTT samples are kept."""
        return len(self._latency)

    def forget(self, node: str) -> None:
        """ForgetNode: drop a node's RTT samples (it was reaped)."""
        self._latency.pop(node, None)

    def check(self, other: Coordinate) -> None:
        """checkCoordinate: a coordinate we can compare with ours, all finite."""
        if len(other.vec) != len(self._coord.vec):
            raise CoordinateRefused(f"coordinate has {len(other.vec)} dimensions, not {len(self._coord.vec)}")
        if not _valid(other):
            raise CoordinateRefused("coordinate is not finite")

    def update(self, node: str, other: Coordinate, rtt: float) -> Coordinate:
        """Update: ``node``, at ``other``, answered in ``rtt`` seconds (taken
        to the nearest nanosecond, as Go's Duration). Returns our new coordinate;
        raises :class:`CoordinateRefused` for a coordinate of other
        dimensions or not finite, or an RTT outside 0-10 s (nothing changes)."""
        self.check(other)
        rtt_ns = round(rtt * 1e9) if math.isfinite(rtt) else -1    # (the nearest: 0.004003 s is 4003000 ns)
        if rtt_ns < 0 or rtt_ns > MAX_RTT_NS:
            raise CoordinateRefused(f"round trip time {rtt!r} s is not between 0 and 10 s")
        rtt_s = self._latency_filter(node, _seconds(rtt_ns))
        self._update_vivaldi(other, rtt_s)
        self._update_adjustment(other, rtt_s)
        self._update_gravity()
        if not _valid(self._coord):
            self.resets += 1
            self._coord = new_coordinate(self.config)
        return _copy(self._coord)

    # -------------------------------------------------------------- inside

    def _latency_filter(self, node: str, rtt: float) -> float:
        """The median of the node's last few RTTs (the upper one of an even count)."""
        samples = self._latency.setdefault(node, [])
        samples.append(rtt)
        if len(samples) > self.config.latency_filter_size:
            del samples[0]
        return sorted(samples)[len(samples) // 2]

    def _update_vivaldi(self, other: Coordinate, rtt: float) -> None:
        cfg, coord = self.config, self._coord
        zero = COORDINATE_ZERO_THRESHOLD
        dist = _seconds(_distance_ns(coord, other))
        if rtt < zero:
            rtt = zero
        wrongness = abs(dist - rtt) / rtt
        total_error = coord.error + other.error
        if total_error < zero:
            total_error = zero
        weight = coord.error / total_error
        coord.error = cfg.vivaldi_ce * weight * wrongness + coord.error * (1.0 - cfg.vivaldi_ce * weight)
        if coord.error > cfg.vivaldi_error_max:
            coord.error = cfg.vivaldi_error_max
        delta = cfg.vivaldi_cc * weight
        self._apply_force(delta * (rtt - dist), other)

    def _update_adjustment(self, other: Coordinate, rtt: float) -> None:
        window = self.config.adjustment_window_size
        if window == 0:
            return
        self._adjustment_samples[self._adjustment_index] = rtt - _raw_distance(self._coord, other)
        self._adjustment_index = (self._adjustment_index + 1) % window
        total = 0.0
        for sample in self._adjustment_samples:
            total += sample
        self._coord.adjustment = total / (2.0 * float(window))

    def _update_gravity(self) -> None:
        dist = _seconds(_distance_ns(self._origin, self._coord))
        ratio = dist / self.config.gravity_rho
        self._apply_force(-1.0 * (ratio * ratio), self._origin)

    def _apply_force(self, force: float, other: Coordinate) -> None:
        """ApplyForce: move along the unit vector from ``other`` to us; the
        height grows or shrinks in proportion."""
        coord = self._coord
        unit, mag = self._unit_vector_at(coord.vec, other.vec)
        coord.vec = [x + u * force for x, u in zip(coord.vec, unit)]
        if mag > COORDINATE_ZERO_THRESHOLD:
            coord.height = max((coord.height + other.height) * force / mag + coord.height, self.config.height_min)

    def _unit_vector_at(self, a: list[float], b: list[float]) -> tuple[list[float], float]:
        """unitVectorAt: the unit vector from b to a and the distance; where
        they coincide, a random direction (and distance 0)."""
        diff = [x - y for x, y in zip(a, b)]
        mag = _magnitude(diff)
        if mag > COORDINATE_ZERO_THRESHOLD:
            inverse = 1.0 / mag
            return [x * inverse for x in diff], mag
        diff = [self._rng.random() - 0.5 for _ in diff]
        mag = _magnitude(diff)
        if mag > COORDINATE_ZERO_THRESHOLD:
            inverse = 1.0 / mag
            return [x * inverse for x in diff], 0.0
        return [1.0] + [0.0] * (len(diff) - 1), 0.0


def _copy(c: Coordinate) -> Coordinate:
    return Coordinate(vec=list(c.vec), error=c.error, adjustment=c.adjustment, height=c.height)

"""The conversions of times, each done once where a value enters. Settings
of the heartbeat are milliseconds (Tomcat's unit, and the alive time on the
wire), the engines and their clocks work in seconds; the gossip flags take
durations as Serf's agent does ("30s", "24h", "1m30s": Go's syntax)."""

from __future__ import annotations

from fractions import Fraction

MS_PER_S = 1000.0

#: Go's duration units (time.ParseDuration), in nanoseconds
_UNIT_NS = {"ns": 1, "us": 1_000, "\u00b5s": 1_000, "\u03bcs": 1_000, "ms": 1_000_000,
            "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000}
#: Go's durations are int64 nanoseconds: a longer one is refused, as Go refuses it
_MAX_NS = (1 << 63) - 1
_DIGITS = "0123456789"


def seconds(ms: float) -> float:
    """``ms`` milliseconds in seconds."""
    return ms / MS_PER_S


def go_duration(text: str) -> float:
    """A duration written as Go's ``time.ParseDuration`` reads it (what
    Serf's agent takes: "30s", "1m30s", "1.5h", "250ms", "-2s", "0"), in
    seconds, to the nanosecond as Go keeps it. ValueError saying what is
    wrong for anything Go refuses: no unit ("30"), an unknown one ("3d"),
    a space, an empty text, or more than Go's int64 nanoseconds."""
    rest = text
    sign = -1 if rest[:1] == "-" else 1
    if rest[:1] in ("-", "+"):
        rest = rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise ValueError(f"{text!r} is not a duration (give a number and a unit: 30s, 5m, 1h30m)")
    total = Fraction(0)
    while rest:
        number_end = 0
        while number_end < len(rest) and (rest[number_end] in _DIGITS or rest[number_end] == "."):
            number_end += 1
        number = rest[:number_end]
        if number.count(".") > 1 or not number.strip("."):
            raise ValueError(f"{text!r} is not a duration (give a number and a unit: 30s, 5m, 1h30m)")
        unit_end = number_end
        while unit_end < len(rest) and rest[unit_end] not in _DIGITS and rest[unit_end] != ".":
            unit_end += 1
        unit = rest[number_end:unit_end]
        if not unit:
            raise ValueError(f"{text!r} has no unit (give one of ns, us, ms, s, m, h: 30s, 5m)")
        if unit not in _UNIT_NS:
            raise ValueError(f"{text!r} has an unknown unit {unit!r} (give one of ns, us, ms, s, m, h)")
        whole, _dot, fraction = number.partition(".")
        value = Fraction(int(whole or "0")) + (Fraction(int(fraction), 10 ** len(fraction)) if fraction else 0)
        total += value * _UNIT_NS[unit]
        if total > _MAX_NS:
            raise ValueError(f"{text!r} is longer than a duration may be (about 292 years)")
        rest = rest[unit_end:]
    return sign * int(total) / 1e9


__all__ = ["MS_PER_S", "go_duration", "seconds"]

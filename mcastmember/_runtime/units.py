"""The one conversion of times: settings are milliseconds (Tomcat's unit,
and the alive time on the wire), the engine and its clock work in seconds.
Converted here, once, where a setting enters the engine."""

from __future__ import annotations

MS_PER_S = 1000.0


def seconds(ms: float) -> float:
    """``ms`` milliseconds in seconds."""
    return ms / MS_PER_S

"""Serf's Lamport clock (serf/lamport.go), without the atomics: sans-IO
callers own it from one thread."""

from __future__ import annotations

from .layout import LAMPORT_MASK


class LamportClock:
    """A Lamport clock. Serf keeps three: member status, user events, queries.

    Values are Go uint64s: witnessing the largest one wraps to 0, as Go does
    (no Serf node sends such a time; it is kept so both sides agree).
    """

    __slots__ = ("_counter",)

    def __init__(self, start: int = 0):
        self._counter = start & LAMPORT_MASK

    def time(self) -> int:
        """The current value."""
        return self._counter

    def increment(self) -> int:
        """Advance by one and return the new value."""
        self._counter = (self._counter + 1) & LAMPORT_MASK
        return self._counter

    def witness(self, other: int) -> None:
        """A time seen from another node: unless older than ours, move one past it."""
        if other < self._counter:
            return
        self._counter = (other + 1) & LAMPORT_MASK

    def __repr__(self) -> str:
        return f"LamportClock({self._counter})"

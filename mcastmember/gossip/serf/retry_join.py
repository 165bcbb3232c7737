"""Retry-join, sans-IO: the Serf agent's ``-retry-join``, ``-retry-interval``
and ``-retry-max`` as a timer and a decision a :class:`~.node.SerfNode` holds.

The agent (command.go ``retryJoin``, read, never copied) tries to join its
seeds at once, and after each attempt that joined nobody waits the interval
and tries again, until one attempt joins; with ``-retry-max`` N it gives up
after the first attempt and N more failed (0: it never gives up). A member
that starts before its seeds therefore comes up alone and joins them when
they come up.

One thing is stricter than the agent: an attempt counts as joined only if,
when it ends, another member is alive in our table. A seed list that holds
our own address (or a seed that is ourselves behind another address) makes
a push/pull with ourselves succeed, and the agent (and Consul, which copied
it) then stops retrying and stays a cluster of one for good.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..memberlist.state import Addr

#: Serf's agent's default ``-retry-interval``, s
DEFAULT_RETRY_INTERVAL = 30.0

__all__ = ["DEFAULT_RETRY_INTERVAL", "RetryJoin", "RetryJoinFailed", "RetryJoined"]


@dataclass(frozen=True)
class RetryJoinFailed:
    """A retry-join attempt ended without joining anyone (``errors``: each
    seed's reason; none when the seeds answered but were only ourselves).
    ``retry_in`` seconds until the next attempt, or None: it was the last
    (``retry_max`` reached), the member stays up alone."""

    attempt: int
    errors: tuple[str, ...]
    retry_in: float | None

    @property
    def gave_up(self) -> bool:
        return self.retry_in is None


@dataclass(frozen=True)
class RetryJoined:
    """A retry-join attempt joined: ``joined`` seeds answered; no more attempts."""

    attempt: int
    joined: int


class RetryJoin:
    """When the next join attempt is due and what ends the retrying.

    The node calls :meth:`take_due` at each timer (the seeds to join now, if
    an attempt is due), and :meth:`finished` with the end of each join it
    made (how many seeds answered, their errors, whether another member is
    alive now); :attr:`due` is the deadline the node waits for."""

    def __init__(self, seeds: Iterable[Addr], interval: float = DEFAULT_RETRY_INTERVAL, max_retries: int = 0):
        self.seeds = tuple(seeds)
        self.interval = interval
        self.max_retries = max_retries
        #: attempts made so far
        self.attempts = 0
        #: when the next attempt starts (None: none is waiting)
        self.due: float | None = None
        #: an attempt is running: its join's end has not come yet
        self.trying = False
        #: "waiting", "joined" or "gave up"
        self.outcome = "waiting"

    def start(self, now: float) -> None:
        """The member started: the first attempt is due at once."""
        if self.seeds and self.outcome == "waiting":
            self.due = now

    def take_due(self, now: float) -> tuple[Addr, ...]:
        """The seeds to join now if an attempt is due (it is then running), else none."""
        if self.due is None or self.due > now or self.trying:
            return ()
        self.due = None
        self.trying = True
        self.attempts += 1
        return self.seeds

    def finished(self, joined: int, errors: tuple[str, ...], others_alive: bool,
                 now: float) -> RetryJoinFailed | RetryJoined | None:
        """A join ended (None if it was not an attempt of ours): joined when a
        seed answered and another member is alive; else retried after the
        interval, or given up past ``max_retries`` retries."""
        if not self.trying:
            return None
        self.trying = False
        if joined > 0 and others_alive:
            self.outcome = "joined"
            return RetryJoined(self.attempts, joined)
        if self.max_retries and self.attempts > self.max_retries:
            self.outcome = "gave up"
            return RetryJoinFailed(self.attempts, errors, None)
        self.due = now + self.interval
        return RetryJoinFailed(self.attempts, errors, self.interval)

    def cancel(self) -> None:
        """No more attempts (the member leaves)."""
        self.due = None
        self.trying = False

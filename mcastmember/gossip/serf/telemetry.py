"""What Serf gives go-metrics beyond our counters, kept sans-IO for the
metrics of a gossip front under Serf's own names: members joining, leaving,
failing, updating and flapping; user events and queries, in all and by name;
query acks and responses; the sizes of Serf's messages received and sent;
its broadcast queues' depths, sampled as Serf samples them.

serf 0.8.2, read, never copied: serf.go handleNodeJoin, handleNodeLeave,
handleNodeUpdate, handleUserEvent, handleQuery, handleQueryResponse,
checkQueueDepth; delegate.go NotifyMsg, GetBroadcasts.
"""

from __future__ import annotations

from collections.abc import Sized

from ..memberlist.telemetry import Samples

__all__ = ["FLAP_TIMEOUT_S", "MAX_FAILED", "MAX_NAMES", "QUEUE_CHECK_INTERVAL_S", "NamedCounts", "SerfTelemetry"]

#: Serf's QueueCheckInterval: how often each broadcast queue's depth is sampled
QUEUE_CHECK_INTERVAL_S = 30.0
#: Serf's FlapTimeout: a failed member back within this long is a flap
FLAP_TIMEOUT_S = 60.0
#: the event and query names counted each under its own name (Serf counts
#: every name it sees; names come from the network, so a sender inventing
#: one per message would grow the metrics without end): past these, a name
#: is counted in the total alone, and in :attr:`NamedCounts.untracked`
MAX_NAMES = 128
#: the failed members whose failure time is kept for flaps (the table's own
#: bounds keep it far below; this holds it whatever the events)
MAX_FAILED = 4096


class NamedCounts:
    """Counts by name, at most :data:`MAX_NAMES` names."""

    __slots__ = ("counts", "untracked")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.untracked = 0

    def add(self, name: str) -> None:
        counts = self.counts
        if name in counts:
            counts[name] += 1
        elif len(counts) < MAX_NAMES:
            counts[name] = 1
        else:
            self.untracked += 1


class SerfTelemetry:
    """Serf's counts under its metric names (``counts``: "member.join",
    "member.left", "member.failed", "member.update", "member.flap",
    "events", "queries", "query_acks", "query_responses"), by name
    (``events``, ``queries``), and its samples (``msgs_received``,
    ``msgs_sent``: message sizes in bytes; ``queues``: the depth of each
    queue, by Serf's name for it: Intent, Event, Query; ``snapshot``)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(
            ("member.join", "member.left", "member.failed", "member.update", "member.flap", "events",
             "queries", "query_acks", "query_responses"), 0)
        self.events = NamedCounts()
        self.queries = NamedCounts()
        self.msgs_received = Samples()
        self.msgs_sent = Samples()
        self.queues = {name: Samples() for name in ("Intent", "Event", "Query")}
        #: the snapshot file's write times in ms, by Serf's name for them
        #: (appendLine, compact); None without a snapshot (the front's file
        #: writes them)
        self.snapshot: dict[str, Samples] | None = None
        self._next_check = 0.0
        # when each member failed, for flaps (a failed member is in Serf's
        # table, whose size is bounded; reaped ones are forgotten)
        self._failed_at: dict[str, float] = {}

    def event(self, kind: str, name: str, now: float) -> None:
        """An event Serf sends out: a user event new to us (``kind`` "user",
        ours included), or a member's: "member-join", "member-leave",
        "member-failed", "member-update" or "member-reap"."""
        counts = self.counts
        if kind == "user":
            counts["events"] += 1
            self.events.add(name)
        elif kind == "member-join":
            counts["member.join"] += 1
            failed = self._failed_at.pop(name, None)
            if failed is not None and now - failed < FLAP_TIMEOUT_S:
                counts["member.flap"] += 1
        elif kind == "member-leave":
            counts["member.left"] += 1
        elif kind == "member-failed":
            counts["member.failed"] += 1
            failed_at = self._failed_at
            failed_at.pop(name, None)
            failed_at[name] = now
            if len(failed_at) > MAX_FAILED:
                del failed_at[next(iter(failed_at))]        # the one failed longest ago
        elif kind == "member-update":
            counts["member.update"] += 1
        elif kind == "member-reap":
            self._failed_at.pop(name, None)

    def query(self, name: str) -> None:
        """A query new to us (ours and Serf's internal ones included)."""
        self.counts["queries"] += 1
        self.queries.add(name)

    def response(self, kind: str) -> None:
        """An ack ("ack") or an answer to one of our open queries."""
        self.counts["query_acks" if kind == "ack" else "query_responses"] += 1

    def tick(self, now: float, intents: Sized, events: Sized, queries: Sized) -> None:
        """Sample the queues' depths when :data:`QUEUE_CHECK_INTERVAL_S` has
        passed since the last samples (the first time at once)."""
        if now < self._next_check:
            return
        self._next_check = now + QUEUE_CHECK_INTERVAL_S
        queues = self.queues
        queues["Intent"].add(len(intents), now)
        queues["Event"].add(len(events), now)
        queues["Query"].add(len(queries), now)

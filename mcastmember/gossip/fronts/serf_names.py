"""A gossip front's metrics under memberlist's and Serf's own names, as
go-metrics' Prometheus sink exposes them (what Consul serves, and what the
dashboards and alerts written for Serf and Consul read): the key's parts
joined with ``_`` (``memberlist.probeNode`` is ``memberlist_probeNode``, a
character Prometheus refuses becomes ``_``: ``serf.coordinate.adjustment-ms``
is ``serf_coordinate_adjustment_ms``), behind a prefix if given (Consul's
``consul``: ``consul_memberlist_probeNode``).

As the Go sink makes them: a timing or a sample (``MeasureSince``,
``AddSample``) is a summary (quantiles 0.5, 0.9 and 0.99 over the last
10 s, NaN when there was none; ``_sum`` and ``_count`` since the start),
timings in milliseconds; a gauge is a gauge; a counter is a series of the
key's own name, with no ``_total`` (prometheus_client would add one to a
counter's name, so it is typed ``untyped``, which Prometheus stores and
``rate()`` reads the same). Every series carries the ``node`` label, as the
front's other series do. Every fixed series is there from the first scrape.

Needs prometheus_client; ``mcastmember.metrics.serve`` registers it beside
``GossipCollector`` for a gossip front.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, SummaryMetricFamily, UnknownMetricFamily
from prometheus_client.registry import Collector

from ..._runtime.scrape import check_prefix, get_int, metric_name, read_stats

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from prometheus_client.metrics_core import Metric

    from ..memberlist.telemetry import Samples
    from ..serf.node import SerfNode
    from .driver import GossipFront

__all__ = ["COUNTERS", "GAUGES", "SUMMARIES", "SerfNamesCollector"]

# Counters whose value is one of the front's stats() keys: (go-metrics key, key).
STATS_COUNTERS = (
    ("memberlist.msg.suspect", "suspects"),
    ("memberlist.degraded.probe", "probes_degraded"),
    ("memberlist.udp.sent", "bytes_sent.udp"),
    ("memberlist.udp.received", "bytes_received.udp"),
    ("memberlist.tcp.sent", "bytes_sent.tcp"),
    ("memberlist.tcp.accept", "connections_accepted"),
    ("memberlist.tcp.connect", "connections_opened"),
    ("serf.coordinate.rejected", "coordinates_refused"),
)
# Counters the engines keep under memberlist's and Serf's names.
MEMBERLIST_COUNTERS = (
    ("memberlist.msg.alive", "msg_alive"),
    ("memberlist.msg.dead", "msg_dead"),
    ("memberlist.degraded.timeout", "degraded_timeouts"),
)
SERF_COUNTERS = ("serf.member.join", "serf.member.left", "serf.member.failed", "serf.member.update",
                 "serf.member.flap", "serf.events", "serf.queries", "serf.query_acks", "serf.query_responses",
                 "serf.query_duplicate_acks", "serf.query_duplicate_responses")
#: every fixed counter's go-metrics key
COUNTERS = tuple(k for k, _ in STATS_COUNTERS) + tuple(k for k, _ in MEMBERLIST_COUNTERS) + SERF_COUNTERS
#: every summary's go-metrics key (timings in ms; sizes in bytes; depths)
SUMMARIES = ("memberlist.probeNode", "memberlist.pushPullNode", "memberlist.gossip", "serf.msgs.received",
             "serf.msgs.sent", "serf.queue.Intent", "serf.queue.Event", "serf.queue.Query",
             "serf.coordinate.adjustment-ms")
GAUGES = ("memberlist.health.score",)

@dataclass(frozen=True)
class Summary:
    count: int
    total: float
    quantiles: Mapping[float, float]


@dataclass(frozen=True)
class Reading:
    """What the node records under memberlist's and Serf's names, read at once."""

    counts: Mapping[str, int]                  # go-metrics key -> count
    summaries: Mapping[str, Summary]           # go-metrics key -> summary
    health_score: int
    events: Mapping[str, int]                  # user event name -> count
    queries: Mapping[str, int]                 # query name -> count


def _summary(samples: Samples, now: float) -> Summary:
    return Summary(samples.count, samples.total, samples.quantiles(now))


def read_node(node: SerfNode) -> Reading:
    """A :class:`Reading` of ``node`` (called while it is still)."""
    now = time.monotonic()          # the clock the fronts give the node
    engine = node.engine.shared.telemetry
    serf = node.telemetry
    counts = {key: getattr(engine, attr) for key, attr in MEMBERLIST_COUNTERS}
    counts.update((f"serf.{key}", value) for key, value in serf.counts.items())
    counts["serf.query_duplicate_acks"] = node.tracker.duplicate_acks
    counts["serf.query_duplicate_responses"] = node.tracker.duplicate_responses
    sources = (engine.probe_node, engine.push_pull_node, engine.gossip, serf.msgs_received, serf.msgs_sent,
               serf.queues["Intent"], serf.queues["Event"], serf.queues["Query"], node.pings.adjustments)
    summaries = {key: _summary(samples, now) for key, samples in zip(SUMMARIES, sources)}
    for name, samples in (serf.snapshot or {}).items():      # (only with a snapshot file)
        summaries[f"serf.snapshot.{name}"] = _summary(samples, now)
    return Reading(counts, summaries, node.engine.awareness.score, dict(serf.events.counts),
                   dict(serf.queries.counts))


class SerfNamesCollector(Collector):
    """The series of a gossip front (a SerfService or an AsyncSerfService)
    under memberlist's and Serf's names, behind ``prefix`` (``"consul"``
    gives Consul's names), read at every scrape (the asyncio front's on its
    loop). Every series carries ``node``: the node's name unless ``node=``
    says otherwise."""

    def __init__(self, front: GossipFront, *, node: str | None = None, prefix: str | None = None) -> None:
        self._front = front
        self.node = front.node.name if node is None else str(node)
        self.prefix = check_prefix(prefix)

    def describe(self) -> list[Metric]:
        return self._families(None, {})

    def collect(self) -> list[Metric]:
        front = self._front
        loop = getattr(front, "loop", None)
        stats = read_stats(front.stats, loop)
        reading = read_stats(lambda: front.read_node(read_node), loop)
        return self._families(reading, stats)

    def _families(self, reading: Reading | None, stats: Mapping[str, int]) -> list[Metric]:
        node, name = [self.node], self._name
        out: list[Metric] = []

        def counter(key: str, value: float | None, doc: str) -> None:
            family = UnknownMetricFamily(name(key), doc, labels=["node"])
            if value is not None:
                family.add_metric(node, value)
            out.append(family)

        for key, stat in STATS_COUNTERS:
            counter(key, get_int(stats, stat) if reading is not None else None, f"{key} (counter)")
        for key in COUNTERS[len(STATS_COUNTERS):]:
            counter(key, reading.counts.get(key, 0) if reading is not None else None, f"{key} (counter)")
        gauge = GaugeMetricFamily(name(GAUGES[0]), f"{GAUGES[0]} (gauge)", labels=["node"])
        if reading is not None:
            gauge.add_metric(node, reading.health_score)
        out.append(gauge)
        # the fixed ones (described), and the snapshot's when the front has one
        keys = list(SUMMARIES) if reading is None else [*SUMMARIES, *sorted(set(reading.summaries) - set(SUMMARIES))]
        for key in keys:
            family = SummaryMetricFamily(name(key), f"{key} (summary)", labels=["node"])
            if reading is not None:
                self._add_summary(family, reading.summaries[key])
            out.append(family)
        if reading is not None:
            out += self._named("serf.events", reading.events)
            out += self._named("serf.queries", reading.queries)
        return out

    def _name(self, key: str) -> str:
        return metric_name(key, self.prefix)

    def _add_summary(self, family: SummaryMetricFamily, summary: Summary) -> None:
        family.add_metric([self.node], summary.count, summary.total)
        for q, value in summary.quantiles.items():
            family.add_sample(family.name, {"node": self.node, "quantile": str(q)}, value)

    def _named(self, key: str, counts: Mapping[str, int]) -> Iterable[Metric]:
        """``key.NAME`` for each name counted (names that give the same
        Prometheus name add up in one series)."""
        totals: dict[str, int] = {}
        for event, count in counts.items():
            series = self._name(f"{key}.{event}")
            totals[series] = totals.get(series, 0) + count
        for series, count in sorted(totals.items()):
            family = UnknownMetricFamily(series, f"{key}.NAME (counter)", labels=["node"])
            family.add_metric([self.node], count)
            yield family

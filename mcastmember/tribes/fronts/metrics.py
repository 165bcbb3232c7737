"""Prometheus metrics of a Tribes front (McastService, AsyncMcastService):
``MembershipCollector`` reads the front's ``stats()`` when Prometheus
scrapes, so the metrics cost nothing per heartbeat. Served by
``mcastmember.metrics.serve``, or registered by hand::

    from prometheus_client import REGISTRY
    from mcastmember.metrics import MembershipCollector
    REGISTRY.register(MembershipCollector(service))

Needs prometheus_client (``pip install 'mcastmember[prometheus]'``); the
package imports this module only when asked for metrics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..._runtime.scrape import get_int, read_stats
from ..engine.events import Reason
from ..wire import layout as L

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from prometheus_client.metrics_core import Metric

    from ..engine.stats import Stats
    from .driver import MembershipFront


# The label values a series exists for from the first scrape (zero until
# counted), as Prometheus practice asks, so a rate() over them never starts
# from a missing series. Channel frames and doctor probes have series of
# their own: they are not malformed.
_MALFORMED = sorted(v for k, v in L.REASONS.items()
                    if k not in (L.OK, L.CHANNEL_FRAME, L.DOCTOR_PROBE))
_AUTH = sorted(v for k, v in L.AUTH_REASONS.items() if k != L.AUTH_OK)
_REMOVED = sorted(str(reason) for reason in Reason)


class MembershipCollector(Collector):
    """The metrics of ``front`` (a McastService or an AsyncMcastService),
    read from its ``stats()`` at every scrape. Safe to scrape from any
    thread: the asyncio front's stats are read on its loop."""

    def __init__(self, front: MembershipFront, *, group: str | None = None,
                 namespace: str = "mcastmember") -> None:
        self._front = front
        # The label every series carries, and its value: what the front joined.
        self.label = "group"
        self.group = front.config.describe() if group is None else str(group)
        self.label_value = self.group
        self.namespace = namespace

    def describe(self) -> list[Metric]:
        # The names, without reading stats: registering checks them only.
        return self._families({})

    def collect(self) -> list[Metric]:
        # The counters it reads are ints (bools for healthy); the one text,
        # "implementation", is not read.
        return self._families(cast("Mapping[str, int]", self._stats()))

    def _stats(self) -> Stats:
        from .aio import AsyncMcastService
        front = self._front
        return read_stats(front.stats, front._loop if isinstance(front, AsyncMcastService) else None)

    def _families(self, stats: Mapping[str, int]) -> list[Metric]:
        group, ns = self.group, self.namespace

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(f"{ns}_{name}", doc, labels=["group"])
            if stats:
                family.add_metric([group], value)
            return family

        def counter(name: str, doc: str, label: str | None = None,
                    values: float | Mapping[str, float] = 0) -> CounterMetricFamily:
            family = CounterMetricFamily(f"{ns}_{name}", doc,
                                         labels=["group"] + ([label] if label else []))
            if stats:
                if isinstance(values, (int, float)):    # no label: one value
                    family.add_metric([group], values)
                else:                                   # one per value of the label
                    for key, value in values.items():
                        family.add_metric([group, key], value)
            return family

        families: list[Metric] = [
            gauge("members", "Members in the table (suspects included).",
                  get_int(stats, "members")),
            gauge("healthy", "1 while the driver's loop has caught no unexpected error.",
                  1 if stats.get("healthy", True) else 0),
            gauge("peers", "Unicast peers now (static and resolved).", get_int(stats, "peers")),
            gauge("subscribers", "Listeners and event streams now.",
                  get_int(stats, "subscribers")),
        ]
        info = GaugeMetricFamily(f"{ns}_implementation", "1, labelled with the codec that "
                                 "runs (compiled or python).", labels=["group", "implementation"])
        if stats:
            info.add_metric([group, str(stats.get("implementation", ""))], 1)
        families.append(info)
        for name, doc, label, keys in COUNTERS:
            if label is None:
                families.append(counter(name, doc, values=get_int(stats, keys[0][0])))
            else:
                values = {value: get_int(stats, key) for key, value in keys}
                families.append(counter(name, doc, label, values))
        return families


def _labelled(prefix: str, values: Iterable[str]) -> tuple[tuple[str, str], ...]:
    return tuple((prefix + value, value) for value in values)


# The stats() keys exported as gauges (with "healthy" and "implementation").
GAUGES = ("members", "healthy", "peers", "subscribers", "implementation")
# Every other stats() key is a counter: (family name without the namespace
# and _total, help, label name or None, ((stats key, label value), ...)).
# A test checks that every key of stats.Stats is exported once.
COUNTERS: tuple[tuple[str, str, str | None, tuple[tuple[str, str], ...]], ...] = (
    ("heartbeats_sent", "Heartbeats sent: multicast, one per card; unicast, one per peer.",
     "transport", (("sent", "multicast"), ("unicast_sent", "unicast"))),
    ("datagrams_received", "Datagrams received on the membership sockets, valid or not, "
     "but for our own heartbeats heard back.", None, (("received", ""),)),
    ("fast_path", "Heartbeats of known members recognised without parsing.", None,
     (("fast_path", ""),)),
    ("slow_path", "Heartbeats parsed in full.", None, (("slow_path", ""),)),
    ("refreshed_slow", "Parsed heartbeats that changed nothing.", None,
     (("refreshed_slow", ""),)),
    ("local", "Our own heartbeats heard back.", None, (("local", ""),)),
    ("filtered", "Heartbeats of another domain under filter_domain.", None,
     (("filtered", ""),)),
    ("shutdown_unknown", "Goodbyes from members we did not have.", None,
     (("shutdown_unknown", ""),)),
    ("malformed", "Datagrams dropped as malformed, by verdict.", "verdict",
     _labelled("malformed.", _MALFORMED)),
    ("channel_frames", "Tribes channel frames on the membership port, dropped.", None,
     (("channel_frames", ""),)),
    ("doctor_probes", "mcast-demo doctor's probes heard on the membership port, dropped "
     "(not malformed).", None, (("doctor_probes", ""),)),
    ("refused", "Datagrams refused: a new member, the table being full (full); a unicast "
     "sender that is not a peer (unlisted); unauthenticated, in an authenticated member's "
     "name (unauthenticated).", "reason",
     (("refused", "full"), ("refused_unlisted", "unlisted"),
      ("refused_unauthenticated", "unauthenticated"))),
    ("auth_failures", "Datagrams that failed authentication, by reason (dropped under "
     "enforce, admitted unauthenticated when permissive).", "reason", _labelled("auth.", _AUTH)),
    ("added", "Members added.", None, (("added", ""),)),
    ("updated", "Members whose packet changed.", None, (("updated", ""),)),
    ("removed", "Members removed, by reason.", "reason", _labelled("removed.", _REMOVED)),
    ("suspected", "Members past their drop time under verify.", None, (("suspected", ""),)),
    ("suspects_heard", "Suspects heard again.", None, (("suspects_heard", ""),)),
    ("verify_probes", "Verify probes by outcome: a connect accepted (kept), refused "
     "(failed), unanswered (timed_out).", "outcome",
     _labelled("verify.", ("kept", "failed", "timed_out"))),
    ("verify_exhausted", "Suspects removed though their port answered (their probes used).",
     None, (("verify.exhausted", ""),)),
    ("verify_deferred", "Probes that waited for the probe rate.", None,
     (("verify.deferred", ""),)),
    ("unprobed", "Unauthenticated members removed at their drop time without a probe.",
     None, (("unprobed", ""),)),
    ("send_errors", "Heartbeats the kernel refused to send.", "transport",
     (("send_errors", "multicast"), ("unicast_send_errors", "unicast"))),
    ("receive_errors", "Failed receives on the membership sockets.", None,
     (("receive_errors", ""),)),
    ("socket_reopened", "Sockets opened again after repeated errors.", None,
     (("socket_reopened", ""),)),
    ("pauses", "The driver held up for more than half a drop time.", None,
     (("pauses", ""),)),
    ("internal_errors", "Unexpected exceptions survived by the driver.", None,
     (("internal_errors", ""),)),
    ("peers_refused", "Resolved peer addresses left out, past max_members.", None,
     (("peers_refused", ""),)),
    ("lookups", "DNS and host-name lookups by outcome.", "outcome",
     (("lookups_answered", "answered"),)
     + _labelled("lookups_failed.", ("nxdomain", "servfail", "timeout", "no_answer", "error"))),
    ("events_dropped", "Events dropped for slow readers.", None, (("events_dropped", ""),)),
    ("listener_errors", "Listeners that raised.", None, (("listener_errors", ""),)),
    ("tomcat_listener_connections", "Connections to the TCP listener for Tomcat: accepted "
     "(every one), and of those closed to make room (evicted) or at once (refused).",
     "outcome", (("probe_connections", "accepted"), ("probe_evicted", "evicted"),
                 ("probe_refused", "refused"))),
    ("tomcat_listener_accept_errors", "Failed accepts on the TCP listener, each followed "
     "by a wait.", None, (("probe_accept_errors", ""),)),
    ("tomcat_listener_frames", "Tribes frames received by the TCP listener.", None,
     (("probe_frames", ""),)),
    ("tomcat_listener_acks", "Acknowledgements the TCP listener sent.", None,
     (("probe_acks", ""),)),
    ("tomcat_listener_malformed", "Streams to the TCP listener that were not Tribes "
     "framing.", None, (("probe_malformed", ""),)),
    ("tomcat_listener_replies_sent", "Replies the TCP listener sent, by kind.", "kind",
     (("probe_rpc_replies", "rpc"), ("probe_state_replies", "state"))),
    ("tomcat_listener_replies_dropped", "Replies not sent: failed, refused (not a member "
     "we accept, or asked from another host), limited (over the reply rates).", "reason",
     (("probe_replies_failed", "failed"), ("probe_replies_refused", "refused"),
      ("probe_replies_limited", "limited"))),
)

"""Prometheus metrics of a membership front (optional: ``pip install
'mcastmember[prometheus]'``; ``import mcastmember`` never imports this).

A custom collector reads the front's ``stats()`` when Prometheus scrapes, so
the metrics cost nothing per heartbeat::

    from prometheus_client import REGISTRY
    from mcastmember.metrics import MembershipCollector
    REGISTRY.register(MembershipCollector(service))

or serve them on a port of their own (what ``mcast-demo join --metrics-port``
does)::

    from mcastmember.metrics import serve
    server = serve(service, 9464, "127.0.0.1")    # http://127.0.0.1:9464/metrics
    ...
    server.close()

Every series carries the ``group`` label: what the front joined, in the words
of ``config.describe()`` (``228.0.0.4:45564``), unless ``group=`` says
otherwise.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, TypeVar, cast

try:
    from prometheus_client import CollectorRegistry, make_wsgi_app
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.registry import Collector
except ImportError as error:
    if not (error.name or "").startswith("prometheus_client"):
        raise                           # installed, but broken: its own error says more
    raise ModuleNotFoundError("mcastmember.metrics needs prometheus_client: "
                              "pip install 'mcastmember[prometheus]'",
                              name="prometheus_client") from None

from .tribes.wire import layout as L
from ._runtime.metrics_http import MetricsHTTPServer, ServerCollector
from .tribes.engine.events import Reason

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from prometheus_client.metrics_core import Metric
    from typing_extensions import Self

    from .tribes.fronts.driver import MembershipFront
    from .gossip.fronts.driver import GossipFront
    from .tribes.engine.stats import Stats

T = TypeVar("T")

# How long a scrape waits for the asyncio front's loop to read its stats.
LOOP_TIMEOUT_S = 5.0

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
        self._group = front.config.describe() if group is None else str(group)
        self._ns = namespace

    def describe(self) -> list[Metric]:
        # The names, without reading stats: registering checks them only.
        return self._families({})

    def collect(self) -> list[Metric]:
        # The counters it reads are ints (bools for healthy); the one text,
        # "implementation", is not read.
        return self._families(cast("Mapping[str, int]", self._stats()))

    def _stats(self) -> Stats:
        from .tribes.fronts.aio import AsyncMcastService
        front = self._front
        return read_stats(front.stats, front._loop if isinstance(front, AsyncMcastService) else None)

    def _families(self, stats: Mapping[str, int]) -> list[Metric]:
        group, ns = self._group, self._ns

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


def get_int(stats: Mapping[str, int], key: str) -> int:
    return int(stats.get(key, 0))


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


def read_stats(stats: Callable[[], T], loop: asyncio.AbstractEventLoop | None) -> T:
    """``stats()``, called on ``loop`` when an asyncio front runs there and
    we are on another thread (a scrape), else here."""
    if loop is None or not loop.is_running() or _running_loop() is loop:
        return stats()

    async def read() -> T:
        return stats()
    return asyncio.run_coroutine_threadsafe(read(), loop).result(LOOP_TIMEOUT_S)


# -- gossip (SerfService, AsyncSerfService) -------------------------------------

# Every reason the gossip wire and engine count bad input by (stats()
# "bad_input.<reason>"): each has its series from the first scrape; a
# reason not listed here still gets one when counted. A test keeps the list
# in step with the code.
BAD_INPUT_REASONS = ("bad_address", "bad_compression", "bad_crc", "bad_encryption", "bad_field", "bad_label",
                     "bad_lzw", "bad_message", "bad_msgpack", "bad_type", "bad_version", "no_key", "stream_memory",
                     "too_deep", "too_large", "too_many", "trailing_bytes", "truncated")

Spec = tuple[str, str, tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]


def _one(key: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return ((key, ()),)


def _by(values: Mapping[str, str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """{stats key: label value} as a spec's samples."""
    return tuple((key, (value,)) for key, value in values.items())


# (family name without the namespace and _total, help, label names, ((stats
# key, label values), ...)). A test checks that every key of a gossip
# front's stats() is exported once ("bad_input" is the sum of its reasons).
GOSSIP_GAUGES: tuple[Spec, ...] = (
    ("members", "Members by Serf status, ourselves included (left and failed ones until reaped).",
     ("status",), _by({f"members.{s}": s for s in ("alive", "leaving", "left", "failed")})),
    ("serf_members", "Members in Serf's table, every status.", (), _one("serf_members")),
    ("nodes", "Nodes in memberlist's table, dead and left ones included.", (), _one("nodes")),
    ("memberlist_members", "Nodes neither dead nor left in memberlist's table.", (), _one("members")),
    ("health_score", "Lifeguard's local health score (0 healthy; probes slow down as it grows).", (),
     _one("health_score")),
    ("queued", "Broadcasts waiting to be piggybacked, by queue.", ("queue",),
     _by({"broadcasts_queued": "memberlist", "user_broadcasts_queued": "user", "intents_queued": "intents",
          "events_queued": "events", "queries_queued": "queries"})),
    ("coordinates_cached", "Network coordinates cached: ours and those of members that acked our probes.", (),
     _one("coordinates_cached")),
    ("connections_open", "TCP connections open now.", (), _one("connections_open")),
    ("subscribers", "Listeners and event streams now.", (), _one("subscribers")),
)
GOSSIP_COUNTERS: tuple[Spec, ...] = (
    ("bytes", "Bytes on the sockets, by transport and direction.", ("transport", "direction"),
     tuple((f"bytes_{d}.{t}", (t, d)) for t in ("udp", "tcp") for d in ("received", "sent"))),
    ("datagrams", "Datagrams on the UDP socket, by direction.", ("direction",),
     _by({"datagrams_received": "received", "datagrams_sent": "sent"})),
    ("packets", "Packets the node took in and gave out.", ("direction",),
     _by({"packets_received": "received", "packets_sent": "sent"})),
    ("messages_received", "Messages in the packets and streams received (a compound's parts each).", (),
     _one("messages_received")),
    ("messages_bad", "Messages that decoded but made no sense.", (), _one("messages_bad")),
    ("user_messages_received", "User messages (Serf's) received.", (), _one("user_messages_received")),
    ("dropped", "What was dropped at a bound, by queue: datagrams to send, memberlist's and the user "
     "broadcasts, Serf's broadcasts, the node's and Serf's events, the listeners' queue, event streams.",
     ("queue",), _by({"datagrams_dropped": "datagrams", "broadcasts_dropped": "broadcasts",
                      "user_broadcasts_dropped": "user_broadcasts", "serf_broadcasts_dropped": "serf_broadcasts",
                      "events_dropped": "events", "serf_events_dropped": "serf_events",
                      "listener_events_dropped": "listeners", "stream_events_dropped": "streams"})),
    ("refused", "What was refused at a bound, by what: acks waited for, alive messages, nodes in the "
     "table, streams, push/pulls, members in Serf's table; and suspicions' confirmations from "
     "unknown nodes.", ("what",),
     _by({"acks_refused": "acks", "alive_refused": "alive", "nodes_refused": "nodes",
          "streams_refused": "streams", "push_pulls_refused": "push_pulls",
          "serf_members_refused": "serf_members", "confirmations_refused": "confirmations"})),
    ("serf_buffers", "Serf's recent-message buffers at their bounds, by what: user events refused (a full "
     "event time, or bigger than Serf sends), event times forgotten to keep the buffer within its bytes, "
     "queries refused (a full query time), intents pushed out.", ("what",),
     _by({"user_events_refused": "user_events_refused", "user_events_forgotten": "user_events_forgotten",
          "queries_refused": "queries_refused", "intents_evicted": "intents_evicted"})),
    ("tag_filters", "Query tag filters looked at anew, by outcome: patterns compiled, filters refused (a "
     "pattern RE2 or Go rejects, or over the bound), refused for the compile budget, refused for want of "
     "google-re2 (the process's, shared by its members).", ("outcome",),
     _by({"tag_filters_compiled": "compiled", "tag_filters_refused": "refused",
          "tag_filters_over_budget": "over_budget", "tag_filters_unavailable": "unavailable"})),
    ("sends_refused", "Sends a packet asked for to an address that is no member's, refused: indirect "
     "pings' targets, query answers' askers, relays' destinations.", ("what",),
     _by({"sends_refused": "indirect_pings", "answers_refused": "answers", "relays_refused": "relays"})),
    ("evicted", "Dead, left or failed members forgotten before their reaping, by what: memberlist's nodes "
     "to make room for a newcomer in a full table, or past max_dead_nodes; Serf's members to make room, "
     "or past max_failed_members or max_left_members.", ("what",),
     _by({"nodes_evicted": "nodes", "dead_nodes_evicted": "dead_nodes", "serf_members_evicted": "serf_members",
          "serf_failed_evicted": "serf_failed", "serf_left_evicted": "serf_left"})),
    ("probes", "Probes of a member (one per probe interval).", (), _one("probes")),
    ("probes_failed", "Probes neither acked directly nor indirectly.", (), _one("probes_failed")),
    ("probes_degraded", "Probes whose timeout health scaled.", (), _one("probes_degraded")),
    ("pings_misdirected", "Pings meant for another node name.", (), _one("pings_misdirected")),
    ("indirect_pings", "Indirect pings, asked of others (sent) or done for others (relayed).", ("role",),
     _by({"indirect_pings_sent": "sent", "indirect_pings_relayed": "relayed"})),
    ("acks_received", "Acks received.", (), _one("acks_received")),
    ("nacks_received", "Nacks received (an indirect prober got no answer).", (), _one("nacks_received")),
    ("suspicions", "Members suspected.", (), _one("suspects")),
    ("suspicions_told", "Suspicions we also sent straight to the accused (see tell_accused).", (),
     _one("suspects_told")),
    ("refutations", "Suspicions or deaths about ourselves refuted.", (), _one("refutes")),
    ("nodes_reaped", "Dead and left nodes removed from memberlist's table.", (), _one("nodes_reaped")),
    ("name_conflicts", "Nodes claiming a known name from another address.", (), _one("name_conflicts")),
    ("streams", "Node streams by outcome: ours opened and failed, others' received, bad, and dropped unfinished "
     "(past the engine's bound on the streams it works on).", ("outcome",),
     _by({"streams_opened": "opened", "streams_failed": "failed", "streams_received": "received",
          "streams_bad": "bad", "streams_dropped": "dropped"})),
    ("push_pulls", "Push/pull state exchanges done.", (), _one("push_pulls")),
    ("serf_messages", "Serf messages received.", (), _one("serf_messages")),
    ("serf_messages_bad", "Serf messages that did not decode.", (), _one("serf_messages_bad")),
    ("serf_states_refused", "Serf push/pull user states refused whole, a list over its bound.", (),
     _one("serf_states_refused")),
    ("rebroadcasts", "Serf messages gossiped on, by kind.", ("kind",),
     _by({"intents_rebroadcast": "intents", "events_rebroadcast": "events", "queries_rebroadcast": "queries"})),
    ("queries_answered", "Serf's internal queries answered.", (), _one("queries_answered")),
    ("relays_forwarded", "Query answers relayed for others.", (), _one("relays_forwarded")),
    ("responses_received", "Acks and answers to our queries.", (), _one("responses_received")),
    ("keyring_changes", "Keyring changes made by key queries.", (), _one("keyring_changes")),
    ("keyring_file_errors", "Keyring file rewrites that failed (the keyring changed, the file did not).", (),
     _one("keyring_file_errors")),
    ("reconnects", "Tries to reach a failed member again, by outcome.", ("outcome",),
     _by({"reconnects_ok": "ok", "reconnects_failed": "failed"})),
    ("coordinate_updates", "Probes acked with a coordinate that moved ours.", (), _one("coordinate_updates")),
    ("coordinates_ignored", "Coordinates in acks not taken, by reason: bad (did not decode), refused (not "
     "finite, other dimensions, or an RTT out of range), unknown_node (not in Serf's table).", ("reason",),
     _by({"coordinates_bad": "bad", "coordinates_refused": "refused", "coordinates_unknown_node": "unknown_node"})),
    ("coordinate_resets", "Times our coordinate went invalid and started again.", (), _one("coordinate_resets")),
    ("send_errors", "Datagrams the kernel refused to send.", (), _one("send_errors")),
    ("connections", "TCP connections by outcome: others' accepted or refused (over their source's share "
     "of max_streams), ours opened or failed.", ("outcome",),
     _by({"connections_accepted": "accepted", "connections_refused": "refused",
          "connections_opened": "opened", "connections_failed": "failed"})),
    ("connections_closed", "TCP connections closed at a bound: too_big (limits.max_stream), timed_out "
     "(tcp_timeout), evicted (the idlest of a stranger's, for another source's within max_streams).",
     ("reason",),
     _by({"connections_too_big": "too_big", "connections_timed_out": "timed_out",
          "connections_evicted": "evicted"})),
    ("accept_errors", "Failed accepts on the TCP port for want of descriptors or memory, each followed "
     "by a wait.", (), _one("accept_errors")),
    ("listener_errors", "Listeners that raised.", (), _one("listener_errors")),
)


class GossipCollector(Collector):
    """The metrics of a gossip front (a SerfService or an AsyncSerfService),
    read from its ``stats()`` at every scrape (the asyncio front's on its
    loop). Every series carries the ``node`` label: the node's name unless
    ``node=`` says otherwise."""

    def __init__(self, front: GossipFront, *, node: str | None = None,
                 namespace: str = "mcastmember_gossip") -> None:
        self._front = front
        self.node = front.node.name if node is None else str(node)
        self.namespace = namespace

    def describe(self) -> list[Metric]:
        return self._families({})

    def collect(self) -> list[Metric]:
        front = self._front
        return self._families(read_stats(front.stats, getattr(front, "loop", None)))

    def _families(self, stats: Mapping[str, int]) -> list[Metric]:
        reasons = sorted(set(BAD_INPUT_REASONS) | {k.partition(".")[2] for k in stats if k.startswith("bad_input.")})
        bad: Spec = ("bad_input", "Packets and streams dropped as bad input, by reason.", ("reason",),
                     tuple((f"bad_input.{r}", (r,)) for r in reasons))
        out: list[Metric] = []
        for kind, specs in ((GaugeMetricFamily, GOSSIP_GAUGES), (CounterMetricFamily, (*GOSSIP_COUNTERS, bad))):
            for name, doc, labels, samples in specs:
                family = kind(f"{self.namespace}_{name}", doc, labels=["node", *labels])
                if stats:
                    for key, values in samples:
                        family.add_metric([self.node, *values], get_int(stats, key))
                out.append(family)
        return out


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class MetricsServer:
    """An HTTP server of one front's metrics on ``address``:``port``
    (``/metrics``, or any path), on one daemon thread; ``close()`` stops it.
    ``port`` 0 takes a free port (see ``.port``). OSError when the port is
    taken or the address is not ours. Bounded in connections (in all and per
    source), request size and time (see ``metrics_http``); ``stats()``
    counts what the bounds refused, also served as
    ``mcastmember_metrics_server_*``."""

    def __init__(self, front: MembershipFront | GossipFront, port: int, address: str = "127.0.0.1", *,
                 group: str | None = None) -> None:
        from .tribes.fronts.driver import MembershipFront
        registry = CollectorRegistry(auto_describe=True)
        collector: MembershipCollector | GossipCollector
        if isinstance(front, MembershipFront):
            collector = MembershipCollector(front, group=group)
            server_labels = (collector._group, collector._ns, "group")
        else:
            collector = GossipCollector(front, node=group)
            server_labels = (collector.node, collector.namespace, "node")
        registry.register(collector)
        self._httpd = MetricsHTTPServer(address, port, make_wsgi_app(registry))
        registry.register(ServerCollector(self._httpd, *server_labels))
        self.address = address
        self.port = self._httpd.server_port
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        name="mcastmember-metrics", daemon=True)
        self._thread.start()

    def stats(self) -> dict[str, int]:
        """Connections by outcome (served, refused, evicted, timed_out,
        too_large, bad_request) and failed accepts (accept_errors)."""
        return self._httpd.stats()

    @property
    def url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._httpd.shutdown()
        self._thread.join()
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(front: MembershipFront | GossipFront, port: int, address: str = "127.0.0.1", *,
          group: str | None = None) -> MetricsServer:
    """Serve ``front``'s metrics over HTTP (see MetricsServer); returns the
    running server. A gossip front's series carry ``node`` (its name, or
    ``group`` given here) in place of ``group``."""
    return MetricsServer(front, port, address, group=group)

"""Prometheus metrics of a gossip front (SerfService, AsyncSerfService):
``GossipCollector`` reads the front's ``stats()`` when Prometheus scrapes (the
asyncio front's on its loop). Served by ``mcastmember.metrics.serve``, or
registered by hand as ``mcastmember.metrics.GossipCollector(service)``.

Needs prometheus_client (``pip install 'mcastmember[prometheus]'``); the
package imports this module only when asked for metrics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..._runtime.scrape import get_int, read_stats

if TYPE_CHECKING:
    from collections.abc import Mapping

    from prometheus_client.metrics_core import Metric

    from .driver import GossipFront


# Every reason the gossip wire and engine count bad input by (stats()
# "bad_input.<reason>"): each has its series from the first scrape; a
# reason not listed here still gets one when counted. A test keeps the list
# in step with the code.
BAD_INPUT_REASONS = ("bad_address", "bad_compression", "bad_crc", "bad_encryption", "bad_field", "bad_label",
                     "bad_lzw", "bad_message", "bad_msgpack", "bad_type", "bad_version", "no_key", "stream_memory",
                     "too_deep", "too_large", "too_many", "trailing_bytes", "truncated")

# A family: (name without the namespace and _total, help, label names,
# ((stats key, label values), ...)).
SeriesSpec = tuple[str, str, tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]


def _one(key: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return ((key, ()),)


def _by(values: Mapping[str, str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """{stats key: label value} as a spec's samples."""
    return tuple((key, (value,)) for key, value in values.items())


# (family name without the namespace and _total, help, label names, ((stats
# key, label values), ...)). A test checks that every key of a gossip
# front's stats() is exported once ("bad_input" is the sum of its reasons).
GOSSIP_GAUGES: tuple[SeriesSpec, ...] = (
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
    ("handlers", "Event handler runs going on, and waiting for a slot (handler_concurrency).", ("state",),
     _by({"handlers_running": "running", "handlers_waiting": "waiting"})),
    ("rpc_connections_open", "Agent RPC connections open now.", (), _one("rpc_connections_open")),
    ("rpc_streams_open", "Agent RPC streams open now: event streams, monitors, queries in progress.", (),
     _one("rpc_streams_open")),
)
GOSSIP_COUNTERS: tuple[SeriesSpec, ...] = (
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
    ("snapshot", "The snapshot file (snapshot_path), by what: lines unreadable at start (skipped), member "
     "names not written (a line break would forge records), writes that failed, compactions.", ("what",),
     _by({"snapshot_lines_bad": "lines_bad", "snapshot_names_refused": "names_refused",
          "snapshot_write_errors": "write_errors", "snapshot_compactions": "compactions"})),
    ("rejoin", "Rejoin from the snapshot at start: previous members tried, and those that answered.",
     ("outcome",), _by({"rejoin_tried": "tried", "rejoin_joined": "joined"})),
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
    ("handler_runs", "Event handler runs by outcome: ok, failed (another exit status, or a Python handler "
     "raised), timed_out (killed at handler_timeout), not_started, dropped (past handler_queue).",
     ("outcome",), _by({"handlers_ok": "ok", "handlers_failed": "failed", "handlers_timed_out": "timed_out",
                        "handlers_not_started": "not_started", "handlers_dropped": "dropped"})),
    ("handler_responses", "Answers to queries from event handlers: sent, truncated (cut to "
     "query_response_size_limit), refused (too late).", ("outcome",),
     _by({"handler_responses": "sent", "handler_responses_truncated": "truncated",
          "handler_responses_refused": "refused"})),
    ("rpc_connections", "Agent RPC connections by outcome: accepted, refused (over their source's share of "
     "rpc_max_connections).", ("outcome",),
     _by({"rpc_connections_accepted": "accepted", "rpc_connections_refused": "refused"})),
    ("rpc_requests", "Agent RPC requests handled.", (), _one("rpc_requests")),
    ("rpc_requests_refused", "Agent RPC requests refused, by reason: too_big (over rpc_max_request, its "
     "connection closed), bad (no request, its connection closed), auth (no or a wrong token).", ("reason",),
     _by({"rpc_requests_too_big": "too_big", "rpc_requests_bad": "bad", "rpc_auth_failures": "auth"})),
    ("rpc_streams_refused", "Agent RPC streams refused at rpc_max_streams.", (), _one("rpc_streams_refused")),
    ("rpc_records_dropped", "Stream records a slow RPC subscriber lost (rpc_stream_queue).", (),
     _one("rpc_records_dropped")),
    ("rpc_pending_full", "Times an RPC connection reached rpc_max_pending requests in progress and was read "
     "no further until one ended.", (), _one("rpc_pending_full")),
)


class GossipCollector(Collector):
    """The metrics of a gossip front (a SerfService or an AsyncSerfService),
    read from its ``stats()`` at every scrape (the asyncio front's on its
    loop). Every series carries the ``node`` label: the node's name unless
    ``node=`` says otherwise."""

    def __init__(self, front: GossipFront, *, node: str | None = None,
                 namespace: str = "mcastmember_gossip") -> None:
        self._front = front
        # The label every series carries, and its value: the node's name.
        self.label = "node"
        self.node = front.node.name if node is None else str(node)
        self.label_value = self.node
        self.namespace = namespace

    def describe(self) -> list[Metric]:
        return self._families({})

    def collect(self) -> list[Metric]:
        front = self._front
        return self._families(read_stats(front.stats, getattr(front, "loop", None)))

    def _families(self, stats: Mapping[str, int]) -> list[Metric]:
        reasons = sorted(set(BAD_INPUT_REASONS) | {k.partition(".")[2] for k in stats if k.startswith("bad_input.")})
        bad: SeriesSpec = ("bad_input", "Packets and streams dropped as bad input, by reason.", ("reason",),
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

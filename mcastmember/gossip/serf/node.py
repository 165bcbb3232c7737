"""SerfNode: a Serf 0.9.4 agent's core, sans-IO: Serf's layer wired into the gossip engine.

One object that behaves as serf.Serf on memberlist does, with no sockets,
threads or clock: every call takes ``now`` (monotonic seconds) and the
engine's entry points pass through, so a front drives a :class:`SerfNode`
exactly as it drives a :class:`~mcastmember.gossip.memberlist.engine.GossipEngine`
(``receive``, ``receive_stream``, ``streams_to_open``,
``stream_response``, ``stream_failed``, ``stream_working``, ``stream_turn``,
``stream_closed``, ``outgoing``, ``next_deadline``,
``on_timer``, ``events``).

What follows which Serf 0.9.4 code (Debian's ``golang-github-hashicorp-serf-dev``,
read, never copied):

- serf.go ``Create``: memberlist's protocol from ``ProtocolVersionMap``, the
  delegate versions (min 2, max 5, current = Serf's protocol), tags in the
  node meta, three transmit-limited queues (intents, events, queries);
- delegate.go ``NotifyMsg`` (each Serf message handled, rebroadcast on the
  queue of its kind, relays forwarded), ``GetBroadcasts`` (intents, then
  queries, then events), ``LocalState``/``MergeRemoteState``;
- event_delegate.go: memberlist's join/leave/update to ``handleNodeJoin``,
  ``handleNodeLeave``, ``handleNodeUpdate``;
- serf.go ``Join`` (``ignoreOld`` sets eventJoinIgnore, then broadcastJoin),
  ``Leave`` (the leave intent first, then memberlist's leave, then
  ``LeavePropagateDelay``), ``UserEvent``, ``Query``, ``handleQuery`` (ack
  and answer by UDP to the asker), ``handleQueryResponse``, ``SetTags``,
  ``handleReap``; internal_query.go and keymanager.go (``streamKeyResp``).
"""

from __future__ import annotations

import base64
import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..memberlist.engine import GossipEngine, OutgoingStream
from ..memberlist.errors import GossipWireError
from ..memberlist.events import Event, JoinResult, MemberFailed, MemberJoined, MemberLeft, MemberUpdated, \
    NameConflict, PingCompleted, RemoteState, UserMessage
from ..memberlist.settings import GossipSettings
from ..memberlist.state import Addr, NodeInfo, ip_bytes, ip_text
from . import messages
from .broadcasts import SerfBroadcasts
from .buffers import TAG_REGEXPS, should_process_query
from .codec import SerfLimits, read_push_pull
from .coordinates import CoordinateClient
from .layout import (INTERNAL_QUERY_PREFIX, MEMBERLIST_PROTOCOL_FOR, PROTOCOL_VERSION_MAX, PROTOCOL_VERSION_MIN,
                     QUERY_CONFLICT, QUERY_INSTALL_KEY, QUERY_LIST_KEYS, QUERY_MIN_PROTOCOL, QUERY_REMOVE_KEY,
                     QUERY_USE_KEY, MemberStatus, SerfMessageType)
from .events import (ConflictResolved, GossipMember, JoinDone, KeyResult, KeyringChanged, LeaveDone,
                     SerfMemberEvent, QueryAnswer, QueryFinished, QueryReceived, SerfNodeEvent, Tags,
                     UserEventReceived)
from .members import SerfCore, SerfEvent, SerfMembers
from .ping_delegate import PingDelegate
from .settings import SerfSettings
from .retry_join import RetryJoin
from .queries import (QueryTracker, answer_internal_query, count_key_response, default_query_timeout, make_ack,
                      make_response, new_query)
from .tags import decode_tags, encode_tags
from .telemetry import SerfTelemetry

# The records the node reports live in .events; importers may take them from here.
__all__ = ["COUNTERS", "ConflictResolved", "GossipMember", "JoinDone", "KeyResult", "KeyringChanged", "LeaveDone",
           "SerfMemberEvent", "QueryAnswer", "QueryFinished", "QueryReceived", "SerfNode", "SerfNodeEvent",
           "SerfSettings", "Tags", "UserEventReceived", "b64"]

#: every counter, present from the start
COUNTERS = ("serf_messages", "serf_messages_bad", "intents_rebroadcast", "events_rebroadcast",
            "queries_rebroadcast", "queries_answered", "relays_forwarded", "relays_refused", "answers_refused",
            "responses_received",
            "keyring_changes", "serf_broadcasts_dropped", "serf_events_dropped", "reconnects_ok",
            "reconnects_failed", "coordinate_updates", "coordinates_bad", "coordinates_refused",
            "coordinates_unknown_node", "serf_states_refused")

_KEY_OPS = {QUERY_INSTALL_KEY: "install", QUERY_USE_KEY: "use", QUERY_REMOVE_KEY: "remove",
            QUERY_LIST_KEYS: "list"}


@dataclass(eq=False)
class _OpenQuery:
    query: messages.Query
    deadline: float
    num_nodes: int
    answers: list[tuple[str, bytes]] = field(default_factory=list)
    acks: list[str] = field(default_factory=list)


@dataclass(eq=False)
class _Leaving:
    phase: str            # "intent", "memberlist", "propagate"
    deadline: float
    token: object = field(default_factory=object)


class SerfNode:
    """One Serf member: a :class:`GossipEngine` with Serf's layer on top.

    ``gossip`` is memberlist's settings (its ``protocol_version`` and delegate
    versions are replaced by what ``serf.protocol_version`` implies, as
    serf.Create does); ``tags`` go in the node meta. ``seed`` seeds every
    random choice.
    """

    def __init__(self, gossip: GossipSettings, tags: Mapping[str, str] | None = None,
                 serf: SerfSettings | None = None, *, seed: int | None = None):
        self.serf_settings = serf = serf or SerfSettings()
        settings = dataclasses.replace(
            gossip, protocol_version=MEMBERLIST_PROTOCOL_FOR[serf.protocol_version],
            delegate_protocol_min=PROTOCOL_VERSION_MIN, delegate_protocol_max=PROTOCOL_VERSION_MAX,
            delegate_protocol_version=serf.protocol_version,
            ping_events=gossip.ping_events or not serf.disable_coordinates)
        self.name = settings.name
        self._tags = dict(tags or {})
        self.engine = GossipEngine(settings, meta=encode_tags(self._tags, serf.protocol_version), seed=seed,
                                   user_state=self._local_state, get_broadcasts=self._get_broadcasts,
                                   broadcasts_sent=self._broadcasts_sent)
        members = SerfMembers(self.name, reconnect_timeout=serf.reconnect_timeout,
                              tombstone_timeout=serf.tombstone_timeout, max_members=settings.max_nodes,
                              max_failed_members=serf.max_failed_members, max_left_members=serf.max_left_members)
        self.core = SerfCore(self.name, members)
        for clock in (members.clock, self.core.event_buffer.clock, self.core.query_buffer.clock):
            clock.increment()   # serf.Create starts the clocks at 1
        self.tracker = QueryTracker()
        self._open: dict[int, _OpenQuery] = {}
        self._known: dict[str, NodeInfo] = {}
        self._events: deque[SerfNodeEvent] = deque()
        self._counts: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.telemetry = SerfTelemetry()        # what Serf counts and samples under its metric names
        # delegate.go: intents, queries and events, each transmit-limited;
        # none takes a message longer than a gossip packet carries
        self.broadcasts = SerfBroadcasts(settings, self.engine.user_broadcast_budget, self._counts)
        self.intents, self.queries, self.user_events = (
            self.broadcasts.intents, self.broadcasts.queries, self.broadcasts.user_events)
        self._joining = 0
        self._join_ok = 0
        #: the limits a push/pull's user state is read with (see _merge_remote)
        self._state_limits: SerfLimits | None = None
        self._join_errors: list[str] = []
        self._leaving: _Leaving | None = None
        #: the time of the call we are in (memberlist's leave may start inside the engine's
        #: call, which gives none)
        self._now = 0.0
        self._next_reap = float("inf")
        self._next_reconnect = float("inf")
        self._reconnecting: list[Addr] = []
        #: the agent's -retry-join (set before start): its attempts are this node's joins
        self.retry: RetryJoin | None = None
        #: our network coordinate (None: disabled), and the last one each member acked with (``pings.cache``)
        self.coordinates = None if serf.disable_coordinates else CoordinateClient(rng=self.engine.rng)
        self.pings = PingDelegate(self.name, self.coordinates, self.engine, serf.limits, self._counts)
        #: what each of the engine's events does here, by its type
        self._on_event: dict[type[Event], Callable[[Any, float], None]] = {
            MemberJoined: self._member_joined, MemberUpdated: self._member_updated, MemberLeft: self._member_gone,
            MemberFailed: self._member_gone, UserMessage: self._user_message_event, RemoteState: self._merge_remote,
            JoinResult: self._join_result, PingCompleted: self._ping_completed, NameConflict: self._name_conflict}
        #: what each Serf message a user message carries does here, by its type (NotifyMsg)
        self._on_message: dict[type[messages.SerfMessage], Callable[[Any, bytes, float], None]] = {
            messages.Leave: self._leave_intent, messages.Join: self._join_intent,
            messages.UserEvent: self._user_event_message, messages.Query: self._query_message,
            messages.QueryResponse: self._response_message}

    # ----------------------------------------------------------- lifecycle

    def start(self, now: float) -> None:
        self._now = now
        self.engine.start(now)
        self._next_reap = now + self.serf_settings.reap_interval
        self._next_reconnect = now + self.serf_settings.reconnect_interval
        if self.retry is not None:
            self.retry.start(now)
        self._pump(now)

    def join(self, seeds: Iterable[Addr], now: float, ignore_old: bool | None = None) -> int:
        """Serf.Join: a push/pull with each seed; ``ignore_old`` (``serf join``'s
        default; ``-replay`` turns it off; None: unless the setting
        ``replay_on_join``) ignores the user events the seeds carry. When
        every seed has answered, our join intent is gossiped if one
        succeeded, and a :class:`JoinDone` event follows."""
        if self.core.members.state != MemberStatus.ALIVE:
            raise RuntimeError("Serf can't join after a leave")
        if ignore_old is None:
            ignore_old = not self.serf_settings.replay_on_join
        seeds = list(seeds)
        self._joining += len(seeds)
        if ignore_old:
            self.core.event_join_ignore = True
        started = self.engine.join(seeds, now)
        self._pump(now)
        if not seeds:
            self._join_finished(now)
        return started

    def leave(self, now: float) -> None:
        """Serf.Leave: our leave intent is gossiped first (so others show us
        ``left``, not ``failed``), then memberlist's leave, then we stay up
        ``leave_propagate_delay``; a :class:`LeaveDone` event ends it."""
        if self._leaving is not None or self.core.members.state != MemberStatus.ALIVE:
            raise RuntimeError("a leave is already in progress or done")
        if self.retry is not None:
            self.retry.cancel()         # (joining after a leave is refused)
        msg = self.core.members.local_leave(now)
        deadline = now + self.serf_settings.broadcast_timeout
        if self.core.members.has_alive_members():
            self._leaving = _Leaving("intent", deadline)
            self.broadcasts.queue(self.intents, messages.encode(msg), self._leaving.token, own=True)
        else:
            self._leaving = _Leaving("memberlist", deadline)
            self.engine.leave(now)
        self._pump(now)

    def set_tags(self, tags: Mapping[str, str], now: float) -> None:
        """SetTags: new tags in our meta, announced by memberlist."""
        meta = encode_tags(tags, self.serf_settings.protocol_version)
        self._tags = dict(tags)
        self.engine.set_meta(meta, now)
        self._pump(now)

    def user_event(self, name: str, payload: bytes, now: float, coalesce: bool = True) -> None:
        """Serf.UserEvent (``serf event``'s coalesce defaults to true): delivered
        here too, and gossiped. Raises ValueError over Serf's size limits."""
        msg, raw = self.core.event_buffer.new_event(name, payload, coalesce,
                                                    self.serf_settings.user_event_size_limit)
        self.core.members.events.append(SerfEvent("user", msg.name, msg.payload, msg.ltime, msg.cc))
        self.broadcasts.queue(self.user_events, raw, own=True)
        self._pump(now)

    def query(self, name: str, payload: bytes, now: float, *, filters: Iterable[bytes] = (),
              request_ack: bool = False, timeout: float | None = None, relay_factor: int = 0) -> messages.Query:
        """Serf.Query: processed here too, gossiped, answers collected until its
        timeout (Serf's default: gossip interval x 16 x ceil(log10(N + 1))) as
        :class:`QueryAnswer` events, then :class:`QueryFinished`. Raises
        ValueError over the query size limit, RuntimeError below protocol 4."""
        if self.serf_settings.protocol_version < QUERY_MIN_PROTOCOL:
            raise RuntimeError("queries need Serf protocol 4 or newer")
        members = len(self.engine.members())
        if timeout is None:
            timeout = default_query_timeout(members, self.engine.settings.gossip_interval,
                                            self.serf_settings.query_timeout_mult)
        s = self.engine.settings
        query, raw = new_query(self.core.query_buffer, self.engine.rng.getrandbits(31), name, payload, self.name,
                               ip_bytes(s.advertise_addr), s.advertise_port, timeout, filters=list(filters),
                               request_ack=request_ack, relay_factor=relay_factor,
                               size_limit=self.serf_settings.query_size_limit)
        self.tracker.open(query, now)
        self._open[query.ltime] = _OpenQuery(query, now + timeout, members)
        self._process_query(query, now)
        self.broadcasts.queue(self.queries, raw, own=True)
        self._pump(now)
        return query

    def force_leave(self, name: str, now: float, prune: bool = False) -> None:
        """Serf.RemoveFailedNode (``serf force-leave``): a leave intent for
        ``name``, applied here and gossiped when another member is alive;
        a failed member is then left (``prune``: erased at once)."""
        msg, _outcome = self.core.members.force_leave(name, now, prune)
        state = self.core.members.members.get(name)
        if prune and state is not None and state.status == MemberStatus.LEFT:
            self.core.members.erase(name)
        if self.core.members.has_alive_members():
            self.broadcasts.queue(self.intents, messages.encode(msg), own=True)
        self._pump(now)

    def key_operation(self, op: str, key: bytes, now: float) -> messages.Query:
        """``serf keys -install/-use/-remove/-list`` (op: install, use, remove,
        list; ``key`` empty for list): the internal query to every node; a
        :class:`KeyResult` event when all answered or at the deadline."""
        names = {v: k for k, v in _KEY_OPS.items()}
        if op not in names:
            raise ValueError(f"unknown key operation {op!r} (install, use, remove or list)")
        return self.query(names[op], messages.encode(messages.KeyRequest(key=key)), now)

    def respond(self, received: QueryReceived, payload: bytes, now: float) -> None:
        """Answer a :class:`QueryReceived` (Query.Respond): by UDP to the asker,
        and through ``relay_factor`` other members if it asked. Raises
        ValueError past the deadline or over the response size limit."""
        if now > received.deadline:
            raise ValueError("response is past the deadline")
        query = received.query
        raw = make_response(query, self.name, payload, self.serf_settings.query_response_size_limit)
        self._send_to_asker(query, raw, now)

    # ---------------------------------------------------- what it knows

    @property
    def tags(self) -> dict[str, str]:
        return dict(self._tags)

    def members(self) -> list[GossipMember]:
        """Every member Serf knows (Members): alive, leaving, left and failed
        until reaped, ourselves included, by name."""
        out = []
        for name, state in sorted(self.core.members.members.items()):
            info = self._known.get(name)
            if info is not None:
                out.append(self._member(info, state.status))
        return out

    def member(self, name: str) -> GossipMember | None:
        state = self.core.members.members.get(name)
        info = self._known.get(name)
        return self._member(info, state.status) if state is not None and info is not None else None

    def coordinate(self) -> messages.Coordinate:
        """Our network coordinate (Serf.GetCoordinate); RuntimeError if
        coordinates are disabled."""
        if self.coordinates is None:
            raise RuntimeError("network coordinates are disabled")
        return self.coordinates.coordinate

    def cached_coordinate(self, name: str) -> messages.Coordinate | None:
        """The coordinate ``name`` last acked our probe with, ours for our
        name (Serf.GetCachedCoordinate); None if there is none or
        coordinates are disabled."""
        found = self.pings.cache.get(name)
        return None if found is None else dataclasses.replace(found, vec=list(found.vec))

    def stats(self) -> dict[str, int]:
        out = self.engine.stats()
        out.update(self._counts)
        out["serf_members"] = len(self.core.members.members)
        listed = [m.status for m in self.members()]
        for status in (MemberStatus.ALIVE, MemberStatus.LEAVING, MemberStatus.LEFT, MemberStatus.FAILED):
            out[f"members.{status.name.lower()}"] = listed.count(status)
        out["serf_members_refused"] = self.core.members.refused
        out["serf_members_evicted"] = self.core.members.evicted
        out["serf_failed_evicted"] = self.core.members.failed_evicted
        out["serf_left_evicted"] = self.core.members.left_evicted
        out["intents_queued"] = len(self.intents)
        out["events_queued"] = len(self.user_events)
        out["queries_queued"] = len(self.queries)
        out["coordinates_cached"] = len(self.pings.cache)
        out["coordinate_resets"] = self.coordinates.resets if self.coordinates is not None else 0
        # Serf's recent-message buffers at their bounds
        core = self.core
        out["user_events_refused"] = core.event_buffer.dropped
        out["user_events_forgotten"] = core.event_buffer.evicted
        out["queries_refused"] = core.query_buffer.dropped
        out["intents_evicted"] = core.members.intents.evicted
        # the process's query tag filters (shared by its nodes), by outcome
        for outcome in ("compiled", "refused", "over_budget", "unavailable"):
            out[f"tag_filters_{outcome}"] = getattr(TAG_REGEXPS, outcome)
        return out

    @property
    def leave_done(self) -> bool:
        return self._leaving is None and self.core.members.state == MemberStatus.LEFT

    # ---------------------------------------------------- the engine's surface

    def receive(self, data: bytes, addr: Addr, now: float) -> None:
        self._now = now
        self.engine.receive(data, addr, now)
        self._pump(now)

    def receive_stream(self, data: bytes, addr: Addr, now: float) -> bytes | None:
        self._now = now
        reply = self.engine.receive_stream(data, addr, now)
        self._pump(now)
        return reply

    def stream_response(self, stream_id: int, data: bytes, now: float) -> bool:
        self._now = now
        done = self.engine.stream_response(stream_id, data, now)
        self._pump(now)
        return done

    def stream_failed(self, stream_id: int, now: float, error: str = "connection failed") -> None:
        self._now = now
        self.engine.stream_failed(stream_id, now, error)
        self._pump(now)

    def stream_working(self, key: Addr | int) -> bool:
        return self.engine.stream_working(key)

    def stream_turn(self, key: Addr | int, now: float) -> bytes | None:
        self._now = now
        reply = self.engine.stream_turn(key, now)
        self._pump(now)
        return reply

    def stream_closed(self, addr: Addr) -> None:
        self.engine.stream_closed(addr)

    def streams_to_open(self, now: float) -> list[OutgoingStream]:
        return self.engine.streams_to_open(now)

    def outgoing(self, now: float) -> list[tuple[bytes, Addr]]:
        return self.engine.outgoing(now)

    def events(self) -> list[SerfNodeEvent]:
        out = list(self._events)
        self._events.clear()
        return out

    def next_deadline(self) -> float | None:
        times = [self._next_reap, self._next_reconnect, *(q.deadline for q in self._open.values())]
        if self._leaving is not None:
            times.append(self._leaving.deadline)
        if self.retry is not None and self.retry.due is not None:
            times.append(self.retry.due)
        engine = self.engine.next_deadline()
        if engine is not None:
            times.append(engine)
        soonest = min(times)
        return None if soonest == float("inf") else soonest

    def on_timer(self, now: float) -> None:
        self._now = now
        self.engine.on_timer(now)
        self.telemetry.tick(now, self.intents, self.user_events, self.queries)
        if self._next_reap <= now:
            self._next_reap = now + self.serf_settings.reap_interval
            self.core.members.reap(now)
        if self._next_reconnect <= now:
            self._next_reconnect = now + self.serf_settings.reconnect_interval
            self._reconnect(now)
        seeds = self.retry.take_due(now) if self.retry is not None else ()
        if seeds:
            self.join(seeds, now)
        for ltime, open_query in list(self._open.items()):
            if open_query.deadline <= now:
                self._finish_query(ltime, now)
        self.tracker.expire(now)
        self._pump(now)

    # ------------------------------------------------------------- inside

    def _pump(self, now: float) -> None:
        """Hand the engine's events to Serf's layer, each to its handler by
        type (``_on_event``), then Serf's events out."""
        on_event = self._on_event
        for event in self.engine.events():
            on_event[type(event)](event, now)
            self._take_core_events()
        self._take_core_events()
        self._advance_leave(now)

    def _member_joined(self, event: MemberJoined, now: float) -> None:
        self._known[event.node.name] = event.node
        self.core.members.node_join(event.node.name, now)
        if event.node.name not in self.core.members.members:
            del self._known[event.node.name]     # over max_members: refused and counted

    def _member_updated(self, event: MemberUpdated, now: float) -> None:
        self._known[event.node.name] = event.node
        self.core.members.node_update(event.node.name)

    def _member_gone(self, event: MemberLeft | MemberFailed, now: float) -> None:
        self._known[event.node.name] = event.node
        self.core.members.node_leave(event.node.name, now)

    def _user_message_event(self, event: UserMessage, now: float) -> None:
        self._user_message(event.payload, now)

    def _join_result(self, event: JoinResult, now: float) -> None:
        if event.addr in self._reconnecting:
            self._reconnecting.remove(event.addr)
            self._counts["reconnects_ok" if event.ok else "reconnects_failed"] += 1
            return
        self._joining -= 1
        if event.ok:
            self._join_ok += 1
        else:
            self._join_errors.append(f"{event.addr[0]}:{event.addr[1]}: {event.error}")
        if self._joining <= 0:
            self._join_finished(now)

    def _name_conflict(self, event: NameConflict, now: float) -> None:
        self._event(event)
        if (event.existing.name == self.name and self.serf_settings.protocol_version >= QUERY_MIN_PROTOCOL
                and not any(q.query.name == QUERY_CONFLICT for q in self._open.values())):
            # handleNodeConflict: ask the cluster who it knows by our name
            self.query(QUERY_CONFLICT, self.name.encode("utf-8", "surrogateescape"), now)

    def _ping_completed(self, event: PingCompleted, now: float) -> None:
        self.pings.completed(event, self.core.members.members, now)

    def _reconnect(self, now: float) -> None:
        """serf.go reconnect: with probability failed / alive, a memberlist join
        with one failed member picked at random (no join intent follows)."""
        members = self.core.members
        failed = [name for name in members.failed_members if name in self._known]
        if not failed or self.core.members.state != MemberStatus.ALIVE:
            return
        alive = len(members.members) - len(members.failed_members) - len(members.left_members)
        if self.engine.rng.random() > len(failed) / max(alive, 1):
            return
        info = self._known[failed[self.engine.rng.randrange(len(failed))]]
        addr = (info.addr, info.port)
        if len(self._reconnecting) < self.engine.settings.max_streams:
            self._reconnecting.append(addr)
            self.engine.join([addr], now)

    def _take_core_events(self) -> None:
        """Serf's events, in the order they happened among ours."""
        for serf_event in self.core.take_events():
            self._serf_event(serf_event)

    def _serf_event(self, event: SerfEvent) -> None:
        self.telemetry.event(event.kind, event.name, self._now)
        if event.kind == "user":
            self._event(UserEventReceived(event.name, event.payload, event.ltime, event.coalesce))
            return
        kind = {"member-join": "joined", "member-update": "updated", "member-leave": "left",
                "member-failed": "failed", "member-reap": "reaped"}[event.kind]
        info = self._known.get(event.name)
        if info is None:
            return
        state = self.core.members.members.get(event.name)
        status = state.status if state is not None else MemberStatus.LEFT
        self._event(SerfMemberEvent(kind, self._member(info, status)))
        if kind == "reaped":
            del self._known[event.name]
            self.pings.forget(event.name)

    def _member(self, info: NodeInfo, status: MemberStatus) -> GossipMember:
        try:
            tags = decode_tags(info.meta, self.serf_settings.limits)
        except GossipWireError:
            tags = {}
        return GossipMember(info.name, info.addr, info.port, Tags(tags), status, info.vsn)

    def _join_finished(self, now: float) -> None:
        self._joining = 0
        self.core.event_join_ignore = False
        joined, errors = self._join_ok, tuple(self._join_errors)
        self._join_ok, self._join_errors = 0, []
        if joined > 0 and self.core.members.state == MemberStatus.ALIVE:
            self._broadcast_join(now)
        self._event(JoinDone(joined, errors))
        retry = self.retry and self.retry.finished(joined, errors, self.core.members.has_alive_members(), now)
        if retry:
            self._event(retry)

    def _broadcast_join(self, now: float) -> None:
        self.broadcasts.queue(self.intents, messages.encode(self.core.members.local_join(now)), own=True)

    def _local_state(self, join: bool) -> bytes:
        return messages.encode(self.core.local_state())

    def _merge_remote(self, event: RemoteState, now: float) -> None:
        """delegate.go MergeRemoteState. The state is read on the thread that
        answers the pings: each of its lists is counted against its bound
        before its entries are built (read_push_pull), the members' against
        our table's (no peer knows more members than it holds), and a state
        over a bound is refused whole (``serf_states_refused``)."""
        buf = event.user_state
        if buf[:1] != bytes((SerfMessageType.PUSH_PULL,)):
            self._counts["serf_messages_bad"] += 1
            return
        limits = self._state_limits
        if limits is None:
            limits = self.serf_settings.limits
            limits = self._state_limits = dataclasses.replace(
                limits, max_members=min(limits.max_members, self.engine.settings.max_nodes))
        try:
            state = messages.SerfPushPull.from_go(read_push_pull(buf, limits, 1), limits) or messages.SerfPushPull()
        except GossipWireError as exc:
            self._counts["serf_messages_bad"] += 1
            if exc.reason == "too_many":
                self._counts["serf_states_refused"] += 1
            return
        if self.core.merge_remote_state(state, event.join, now):
            self._broadcast_join(now)

    def _user_message(self, buf: bytes, now: float) -> None:
        """delegate.go NotifyMsg."""
        self._counts["serf_messages"] += 1
        self.telemetry.msgs_received.add(len(buf), now)
        limits = self.serf_settings.limits
        try:
            if buf[:1] == bytes((SerfMessageType.RELAY,)):
                header, inner = messages.decode_relay(buf, limits)
                destination = messages.relay_address(header)
                if not self.engine.is_member_at(header.dest_name, destination):
                    # Serf forwards to whatever address the relay names
                    self._counts["relays_refused"] += 1
                    return
                self._counts["relays_forwarded"] += 1
                self.engine.send_user(destination, inner, now)
                return
            msg = messages.decode(buf, limits)
        except GossipWireError:
            self._counts["serf_messages_bad"] += 1
            return
        handler = self._on_message.get(type(msg))
        if handler is None:
            self._counts["serf_messages_bad"] += 1
            return
        handler(msg, buf, now)

    def _leave_intent(self, msg: messages.Leave, buf: bytes, now: float) -> None:
        members = self.core.members
        leave = members.leave_intent(msg, now)
        if leave.refute:
            self._broadcast_join(now)
        if leave.rebroadcast:
            self._counts["intents_rebroadcast"] += 1
            self.broadcasts.queue(self.intents, buf)
        state = members.members.get(msg.node)
        if leave.prune and state is not None and state.status == MemberStatus.LEFT:
            members.erase(msg.node)

    def _join_intent(self, msg: messages.Join, buf: bytes, now: float) -> None:
        if self.core.members.join_intent(msg, now):
            self._counts["intents_rebroadcast"] += 1
            self.broadcasts.queue(self.intents, buf)

    def _user_event_message(self, msg: messages.UserEvent, buf: bytes, now: float) -> None:
        if self.core.user_event(msg):
            self._counts["events_rebroadcast"] += 1
            self.broadcasts.queue(self.user_events, buf)

    def _query_message(self, msg: messages.Query, buf: bytes, now: float) -> None:
        outcome = self.core.query_buffer.handle(msg)
        if outcome.new:
            self._process_query(msg, now)
        if outcome.rebroadcast:
            self._counts["queries_rebroadcast"] += 1
            self.broadcasts.queue(self.queries, buf)

    def _response_message(self, msg: messages.QueryResponse, buf: bytes, now: float) -> None:
        self._query_response(msg, now)

    def _process_query(self, query: messages.Query, now: float) -> None:
        """The rest of handleQuery once the buffer took it: filters, ack,
        then Serf's own answer (internal queries) or the application's."""
        self.telemetry.query(query.name)
        if not should_process_query(query.filters, self.name, self._tags, self.serf_settings.limits, now=now):
            return
        if query.ack:
            self._send_to_asker(query, make_ack(query, self.name), now)
        if not query.name.startswith(INTERNAL_QUERY_PREFIX):
            self._event(QueryReceived(query, now + query.timeout / 1e9))
            return
        keyring = self.engine.keyring
        answer = answer_internal_query(query, self.name, keyring, self._serf_member, self.serf_settings.limits,
                                       self.serf_settings.query_response_size_limit)
        if answer.response is not None:
            self._counts["queries_answered"] += 1
            self._send_to_asker(query, answer.response, now)
        if answer.keyring_changed and keyring is not None:
            self._counts["keyring_changes"] += 1
            self._event(KeyringChanged(keyring.keys))

    def _send_to_asker(self, query: messages.Query, raw: bytes, now: float) -> None:
        if len(query.addr) not in (4, 16) or not 0 < query.port < 65536:
            self._counts["serf_messages_bad"] += 1
            return
        asker = (ip_text(query.addr), query.port)
        if not self.engine.is_member_at(query.source_node, asker):
            # Serf answers the address the query names, whoever it is: a
            # forged query with relays would send each answer several times
            # to a third party
            self._counts["answers_refused"] += 1
            return
        self.engine.send_user(asker, raw, now)
        self._relay(query, raw, now)

    def _relay(self, query: messages.Query, raw: bytes, now: float) -> None:
        """query.go relayResponse: the same answer through ``relay_factor``
        random alive members that speak memberlist 5, ourselves excepted."""
        members = self.members()
        if query.relay_factor == 0 or len(members) < query.relay_factor + 1:
            return
        wrapped = messages.encode_relay(query.addr, query.port, query.source_node, raw)
        if len(wrapped) > self.serf_settings.query_response_size_limit:
            return
        relays = [m for m in members if m.status == MemberStatus.ALIVE and m.name != self.name
                  and len(m.vsn) > 1 and m.vsn[1] >= 5]
        for m in self.engine.rng.sample(relays, min(query.relay_factor, len(relays))):
            self.engine.send_user((m.addr, m.port), wrapped, now)

    def _serf_member(self, name: str) -> messages.SerfMember | None:
        """The conflict query's answer: the member we know by that name."""
        member = self.member(name)
        if member is None:
            return None
        vsn = member.vsn.ljust(6, b"\0")
        return messages.SerfMember(name=member.name, addr=ip_bytes(member.addr), port=member.port,
                                   tags=dict(member.tags), status=member.status, protocol_min=vsn[0],
                                   protocol_max=vsn[1], protocol_cur=vsn[2], delegate_min=vsn[3],
                                   delegate_max=vsn[4], delegate_cur=vsn[5])

    def _query_response(self, response: messages.QueryResponse, now: float) -> None:
        kind = self.tracker.handle(response, now)
        open_query = self._open.get(response.ltime)
        if kind is None or open_query is None or open_query.query.id != response.id:
            return
        self._counts["responses_received"] += 1
        self.telemetry.response(kind)
        if kind == "ack":
            open_query.acks.append(response.from_)
        else:
            open_query.answers.append((response.from_, response.payload))
        if open_query.query.name in _KEY_OPS:
            # streamKeyResp stops when every node answered
            if len(open_query.answers) >= open_query.num_nodes:
                self._finish_query(response.ltime, now)
        else:
            self._event(QueryAnswer(response.id, response.from_, response.payload, kind == "ack"))

    def _finish_query(self, ltime: int, now: float) -> None:
        open_query = self._open.pop(ltime)
        query = open_query.query
        op = _KEY_OPS.get(query.name)
        if query.name == QUERY_CONFLICT:
            self._event(self._count_conflict(open_query.answers))
            return
        if op is None:
            self._event(QueryFinished(query.id, query.name, tuple(open_query.acks),
                                      tuple(name for name, _payload in open_query.answers)))
            return
        result = KeyResult(op, open_query.num_nodes, 0, 0, {}, {}, {})
        for node, payload in open_query.answers:
            result = count_key_response(result, node, payload, self.serf_settings.limits)
        self._event(result)

    def _count_conflict(self, answers: list[tuple[str, bytes]]) -> ConflictResolved:
        """resolveNodeConflict: how many answers name our address and port."""
        s = self.engine.settings
        responses = matching = 0
        for _node, payload in answers:
            try:
                member = messages.decode_conflict_response(payload, self.serf_settings.limits)
            except GossipWireError:
                continue
            responses += 1
            if member is not None and (member.addr, member.port) == (ip_bytes(s.advertise_addr),
                                                                     s.advertise_port):
                matching += 1
        return ConflictResolved(matching, responses)

    def _advance_leave(self, now: float) -> None:
        leaving = self._leaving
        if leaving is None:
            return
        s = self.serf_settings
        if leaving.phase == "intent":
            if leaving.token in self.intents.finished:
                self._memberlist_leave(leaving, now)
            elif leaving.deadline <= now:
                self._end_leave(False, "timeout while waiting for graceful leave")
                return
        if leaving.phase == "memberlist":
            if self.engine.leave_done:
                leaving.phase, leaving.deadline = "propagate", now + s.leave_propagate_delay
            elif leaving.deadline <= now:
                self._end_leave(False, "timeout waiting for leave broadcast")
                return
        if leaving.phase == "propagate" and leaving.deadline <= now:
            self._end_leave(True)

    def _memberlist_leave(self, leaving: _Leaving, now: float) -> None:
        """The intent is done: memberlist's leave, which queues its dead
        message about us."""
        self.intents.finished.remove(leaving.token)
        leaving.phase, leaving.deadline = "memberlist", now + self.serf_settings.broadcast_timeout
        self.engine.leave(now)

    def _end_leave(self, ok: bool, error: str = "") -> None:
        self._leaving = None
        self.core.members.left()
        self._event(LeaveDone(ok, error))

    def _get_broadcasts(self, overhead: int, limit: int, max_items: int) -> list[bytes]:
        """delegate.go GetBroadcasts, for the engine's packets."""
        taken = self.broadcasts.take(overhead, limit, max_items, len(self.core.members.members))
        for raw in taken:
            self.telemetry.msgs_sent.add(len(raw), self._now)
        return taken

    def _broadcasts_sent(self) -> None:
        """Serf's Leave waits on the intent's notify channel, which the queue
        closes as it hands out the last transmission; memberlist's leave
        follows on that goroutine, in practice once the send in hand is out.
        So it starts here, after the gossip round or the message that carried
        the intent for the last time, and its dead message goes out on our
        next packet (the gossip round of the same tick after our probe's
        ping, the next ack), not a tick later."""
        leaving = self._leaving
        if leaving is not None and leaving.phase == "intent" and leaving.token in self.intents.finished:
            self._memberlist_leave(leaving, self._now)

    def _event(self, event: SerfNodeEvent) -> None:
        if len(self._events) >= self.engine.settings.max_events:
            self._counts["serf_events_dropped"] += 1
            return
        self._events.append(event)


def b64(key: bytes) -> str:
    """A key as Serf prints and sends it (standard base64)."""
    return base64.b64encode(key).decode()

"""GossipEngine: memberlist's SWIM with Lifeguard as a sans-IO state machine.

No sockets, threads or clocks: every entry point takes ``now`` (monotonic
seconds) and the engine hands back what to send. A front drives it::

    engine.start(now); engine.join([(host, port)], now)
    loop:
        wait until engine.next_deadline(), a datagram, or stream bytes
        datagram:          engine.receive_packet(data, addr, now)
        accepted stream:   reply = engine.receive_stream(buffered bytes, addr, now)
                           None: read more; bytes: write them (maybe none), close
        our stream's bytes: done = engine.stream_response(id, buffered, now)
        our stream broke:  engine.stream_failed(id, now, why)
        engine.handle_timer(now)
        send engine.datagrams_to_send(now) (UDP); open engine.streams_to_open(now)
            (TCP: connect, write its data, read the reply into stream_response)
        deliver engine.events()

What follows which memberlist 0.2.2 function (read, never copied): probing
(state.go probe, probeNode: direct ping, then indirect pings with nacks and a
TCP ping, Lifeguard awareness deltas), the node-state rules (aliveNode,
suspectNode, deadNode, refute, mergeState), gossip and push/pull (gossip,
pushPull, pushPullScale), packet handling (net.go handleCommand, handlePing,
handleIndirectPing, sendMsg, rawSendMsgPacket), streams (handleConn,
sendLocalState, readRemoteState, mergeRemoteState, verifyProtocol), join and
leave (memberlist.go Join, Leave, setAlive, UpdateNode).

The engine is one class built in five files, each owning one concern:
:mod:`.core` (the node's state, sending, gossip), :mod:`.streams` (push/pull
over TCP), :mod:`.probing` (the probe cycle), :mod:`.hotpath` (the frequent
messages without the general decode) and this module (the entry points,
timers, packet dispatch and the node-state rules).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from . import framing
from . import messages
from .core import COUNTERS, UINT32_MASK, LeaveIntent, OutgoingStream
from .errors import GossipWireError
from .events import Event, MemberFailed, MemberJoined, MemberLeft, MemberUpdated, NameConflict, UserMessage
from .layout import META_MAX_SIZE, MessageType, NodeState
from .fast_path import HotPath
from .state import Addr, Node, NodeInfo, ip_text
from .suspicion import Suspicion, suspicion_timeout

__all__ = ["COUNTERS", "GossipEngine", "OutgoingStream", "push_pull_scale"]

#: util.go pushPullScaleThreshold: push/pull slows down above this many nodes
PUSH_PULL_SCALE_THRESHOLD = 32


def push_pull_scale(interval: float, n: int) -> float:
    """util.go pushPullScale: the interval times ceil(log2(n) - log2(32)) + 1
    above 32 nodes."""
    if n <= PUSH_PULL_SCALE_THRESHOLD:
        return interval
    return (math.ceil(math.log2(n) - math.log2(PUSH_PULL_SCALE_THRESHOLD)) + 1.0) * interval


class GossipEngine(HotPath):
    """One memberlist node, sans-IO. ``meta`` is our node meta (Serf's tags,
    at most 512 bytes); ``seed`` seeds every random choice; ``user_state``
    gives the push/pull user state (Delegate.LocalState, given the join flag);
    ``get_broadcasts`` (Delegate.GetBroadcasts), if given, is asked for the
    user messages to piggyback instead of :attr:`user_broadcasts`: called with
    the overhead each message costs, the bytes left and the most messages
    that fit, it returns message bodies (the engine adds the type-8 byte).
    ``broadcasts_sent``, if given, is called after each gossip round and each
    message sent with broadcasts piggybacked (to act on what the queues
    finished, as memberlist's notified waiters do once the send is out).
    """



    def start(self, now: float) -> None:
        """setAlive and schedule: our alive (incarnation 1) is queued for
        gossip; probes and gossip tick every interval from ``now`` (Go's
        tickers start their grid before the random stagger, so the stagger
        does not move them); push/pull starts after a random stagger."""
        if self._started:
            raise RuntimeError("the gossip engine is already started")
        self._started = True
        alive = messages.Alive(incarnation=self._next_incarnation(), node=self.name, addr=self._addr,
                               port=self._port, meta=self._meta, vsn=self.settings.vsn())
        self._alive_node(alive, now, bootstrap=True)
        s = self.settings
        self._next_probe = now + s.probe_interval
        if s.gossip_nodes > 0:
            self._next_gossip = now + s.gossip_interval
        if s.push_pull_interval > 0:
            self._next_push_pull = now + self.rng.random() * s.push_pull_interval + push_pull_scale(
                s.push_pull_interval, len(self.table))

    def join(self, seeds: Iterable[Addr], now: float) -> int:
        """Join: a push/pull (join flag set) with each seed; each ends in a
        :class:`JoinResult` event. Returns how many were started."""
        if not self._started:
            raise RuntimeError("start the gossip engine before it joins")
        started = 0
        for addr in seeds:
            if self._open_push_pull(addr, True, now):
                started += 1
        return started

    def leave(self, now: float) -> None:
        """Leave gracefully (memberlist's Leave): a dead message about
        ourselves from ourselves, so others mark us left. Keep driving the
        engine until :attr:`leave_done` (the message went out to its
        retransmit limit), or a timeout of the front's choosing."""
        if self._leave is not None:
            return
        self._leave = LeaveIntent()
        me = self.table.get(self.name)
        if me is None:
            self._leave.done = True
            return
        self._dead_node(messages.Dead(incarnation=me.incarnation, node=self.name, from_=self.name), now)
        if not any(not n.dead_or_left() and n.name != self.name for n in self.table.nodes):
            self._leave.done = True

    @property
    def leave_done(self) -> bool:
        return self._leave is not None and self._leave.done

    def set_meta(self, meta: bytes, now: float) -> None:
        """UpdateNode: new meta, announced with a new incarnation."""
        if len(meta) > META_MAX_SIZE:
            raise ValueError(f"node meta is at most {META_MAX_SIZE} bytes, not {len(meta)}")
        self._meta = meta
        if not self._started:
            return      # start() announces it
        alive = messages.Alive(incarnation=self._next_incarnation(), node=self.name, addr=self._addr,
                               port=self._port, meta=meta, vsn=self.settings.vsn())
        self._alive_node(alive, now, bootstrap=True)

    def broadcast_user(self, payload: bytes, name: str | None = None) -> None:
        """Piggyback a user message on our packets up to the retransmit
        limit; a named one replaces a queued one of the same name. One
        longer than :attr:`user_broadcast_budget` is refused (no packet can
        carry it), counted in ``user_broadcasts_dropped``."""
        queue = self.user_broadcasts
        before = queue.dropped + queue.oversize
        queue.queue(payload, name, own=True)
        self._counts["user_broadcasts_dropped"] += queue.dropped + queue.oversize - before

    def send_user(self, addr: Addr, payload: bytes, now: float) -> None:
        """A user message to one address by UDP (SendToAddress: rawSendMsgPacket,
        nothing piggybacked, so answers to a query never spend the
        transmissions its rebroadcast needs on the node that asked)."""
        self._send_raw(addr, bytes((MessageType.USER,)) + payload, None)

    # ----------------------------------------------------------- the outside

    def datagrams_to_send(self, now: float) -> list[tuple[bytes, Addr]]:
        out, self._datagrams = self._datagrams, []
        return out

    def streams_to_open(self, now: float) -> list[OutgoingStream]:
        out, self._to_open = self._to_open, []
        return out

    def events(self) -> list[Event]:
        out = list(self._events)
        self._events.clear()
        return out

    def members(self) -> list[NodeInfo]:
        """Every node neither dead nor left, ourselves included (Members)."""
        return [n.info() for n in self.table.nodes if not n.dead_or_left()]

    def node(self, name: str) -> NodeInfo | None:
        found = self.table.get(name)
        return found.info() if found is not None else None

    @property
    def health_score(self) -> int:
        return self.awareness.score

    @property
    def incarnation(self) -> int:
        return self._incarnation

    def stats(self) -> dict[str, int]:
        out = dict(self._counts)
        for reason, count in sorted(self._bad_reasons.items()):
            out[f"bad_input.{reason}"] = count
        out["nodes"] = len(self.table)
        out["members"] = len(self.members())
        out["health_score"] = self.awareness.score
        out["broadcasts_queued"] = len(self.broadcasts)
        out["user_broadcasts_queued"] = len(self.user_broadcasts)
        return out

    def next_deadline(self) -> float | None:
        # the suspicions (hundreds while a large cluster churns) keep their
        # soonest; the pending acks and streams are few
        soonest = min(self._next_probe, self._next_gossip, self._next_push_pull, self._suspicions.soonest())
        for handler in self._acks.values():
            if handler.deadline < soonest:
                soonest = handler.deadline
        for stream in self._streams.values():
            if stream.deadline < soonest:
                soonest = stream.deadline
        return None if soonest == math.inf else soonest

    def handle_timer(self, now: float) -> None:
        for seq, handler in list(self._acks.items()):
            if handler.deadline <= now and self._acks.get(seq) is handler:
                self._expire_handler(seq, handler, now)
        if self._suspicions.soonest() <= now:       # (else none is due: no need to look at each)
            for name, (sus, change) in list(self._suspicions.items()):
                if sus.deadline <= now:
                    self._suspicion_expired(name, sus, change, now)
        for sid, stream in list(self._streams.items()):
            if stream.deadline <= now:
                del self._streams[sid]
                self._stream_ended(stream, "timed out", now)
        s = self.settings
        if self._next_probe <= now:
            # Go's ticker drops the ticks a slow receiver misses, and keeps one.
            self._next_probe += s.probe_interval * (math.floor((now - self._next_probe) / s.probe_interval) + 1)
            if self._probe is None:
                self._probe_tick(now)
            else:
                self._probe_buffered = True
        if self._next_gossip <= now:
            self._next_gossip += s.gossip_interval * (math.floor((now - self._next_gossip) / s.gossip_interval) + 1)
            self._gossip(now)
        if self._next_push_pull <= now:
            self._next_push_pull = now + push_pull_scale(s.push_pull_interval, len(self.table))
            peers = self.table.k_random(1, lambda n: n.name == self.name or n.state != NodeState.ALIVE)
            if peers:
                self._open_push_pull(peers[0].address, False, now)

    # ------------------------------------------------------------- packets

    def receive_packet(self, data: bytes, addr: Addr, now: float) -> None:
        """One UDP datagram from ``addr`` (ingestPacket, handleCommand)."""
        self._counts["packets_received"] += 1
        s = self.settings
        if self._hot_packet(data, addr, now):
            return
        try:
            buf = framing.open_packet(data, s.limits, keys=self.keyring.keys if self.keyring else (),
                                      label=s.label, verify_incoming=s.gossip_verify_incoming)
            parts, _cut = framing.split_messages(buf, s.limits)
        except GossipWireError as exc:
            self._bad(exc.reason)
            return
        for part in parts:
            self._handle_message(part, addr, now)

    def _handle_message(self, part: bytes, addr: Addr, now: float) -> None:
        self._counts["messages_received"] += 1
        if part[0] == MessageType.USER:
            self._counts["user_messages_received"] += 1
            self._event(UserMessage(part[1:], addr))
            return
        if self._hot_message(part, addr, now):
            return
        try:
            msg = messages.decode(part, self.settings.limits)
        except GossipWireError as exc:
            self._counts["messages_bad"] += 1
            self._bad(exc.reason)
            return
        if isinstance(msg, messages.Ping):
            self._handle_ping(msg, addr)
        elif isinstance(msg, messages.IndirectPing):
            self._handle_indirect_ping(msg, addr, now)
        elif isinstance(msg, messages.Ack):
            self._handle_ack(msg, now)
        elif isinstance(msg, messages.Nack):
            self._handle_nack(msg)
        elif isinstance(msg, messages.Suspect):
            self._suspect_node(msg, now, sender=addr)
        elif isinstance(msg, messages.Alive):
            if self.settings.protocol_version < 2 or msg.port == 0:
                msg.port = self._port
            self._alive_node(msg, now, bootstrap=False)
        elif isinstance(msg, messages.Dead):
            self._dead_node(msg, now, sender=addr)
        else:
            self._counts["messages_bad"] += 1
            self._bad("bad_type")


    # ----------------------------------------------------------- node states

    def _alive_node(self, a: messages.Alive, now: float, bootstrap: bool) -> None:
        s = self.settings
        if self._leave is not None and a.node == self.name:
            return
        if len(a.vsn) >= 3 and (a.vsn[0] == 0 or a.vsn[1] == 0 or a.vsn[0] > a.vsn[1]):
            self._counts["alive_refused"] += 1
            return
        if len(a.addr) not in (4, 16):
            self._counts["alive_refused"] += 1
            self._bad("bad_address")
            return
        state = self.table.get(a.node)
        updates_node = False
        new = state is None
        if state is None:
            if len(self.table) >= s.max_nodes and not self._room_for(a):
                self._counts["nodes_refused"] += 1
                return
            state = Node(a.node, a.addr, a.port, a.meta, state=NodeState.DEAD, state_change=now)
            if len(a.vsn) > 5:
                state.vsn = a.vsn
            self.table.add(state)
        elif state.addr != a.addr or state.port != a.port:
            reclaim = s.dead_node_reclaim_time > 0 and now - state.state_change > s.dead_node_reclaim_time
            if state.state == NodeState.LEFT or (state.state == NodeState.DEAD and reclaim):
                updates_node = True
            else:
                self._counts["name_conflicts"] += 1
                other = NodeInfo(a.node, ip_text(a.addr), a.port, a.meta, a.incarnation, NodeState.ALIVE, a.vsn)
                self._event(NameConflict(state.info(), other))
                return
        local = state.name == self.name
        if a.incarnation <= state.incarnation and not local and not updates_node:
            if new:
                self._node_gone(state)      # first heard of at incarnation 0: kept, dead, as memberlist does
            return
        if a.incarnation < state.incarnation and local:
            return
        self._suspicions.pop(a.node, None)
        old_state, old_meta = state.state, state.meta
        if not bootstrap and local:
            if a.incarnation == state.incarnation and a.meta == state.meta and a.vsn == state.vsn:
                return
            self._refute(state, a.incarnation)
        else:
            self._broadcast(a.node, messages.encode(a))
            # Fields that did not change keep the objects the table holds:
            # a refutation changes only the incarnation, and the simulator's
            # tables share one copy of each member's address and versions
            # among 10^8 entries (a fresh copy each would be gigabytes).
            if a.vsn and a.vsn != state.vsn:
                state.vsn = a.vsn
            state.incarnation = a.incarnation
            if a.meta != state.meta:
                state.meta = a.meta
            if a.addr != state.addr:
                state.addr = a.addr
            state.port = a.port
            if state.state != NodeState.ALIVE:
                state.state = NodeState.ALIVE
                state.state_change = now
                self.table.back(state)
        if old_state in (NodeState.DEAD, NodeState.LEFT):
            self._event(MemberJoined(state.info()))
        elif old_meta != state.meta:
            self._event(MemberUpdated(state.info()))

    def _room_for(self, a: messages.Alive) -> bool:
        """Beyond memberlist: a full table makes room for a newcomer that
        will be alive by evicting the node that became dead or left longest
        ago, if there is one (counted). Without it, forged deaths of
        invented members would keep every real newcomer out until the
        reaping (gossip_to_the_dead_time); a table full of live nodes still
        refuses."""
        oldest = self.table.oldest_gone()
        if oldest is None or (a.incarnation == 0 and a.node != self.name):
            return False
        self._evict(oldest)
        self._counts["nodes_evicted"] += 1
        return True

    def _node_gone(self, state: Node) -> None:
        """``state`` (not ours) just became dead or left: the newest of the
        table's gone nodes; past ``max_dead_nodes`` the oldest is forgotten
        before its reaping (counted), so invented members killed by forged
        deaths do not hold the table for gossip_to_the_dead_time."""
        if state.name == self.name:
            return
        table = self.table
        table.went(state)
        while len(table.gone) > self.settings.max_dead_nodes:
            oldest = table.oldest_gone()
            assert oldest is not None
            self._evict(oldest)
            self._counts["dead_nodes_evicted"] += 1

    def _evict(self, node: Node) -> None:
        self.table.evict(node)
        self._suspicions.pop(node.name, None)

    def _suspect_node(self, sus: messages.Suspect, now: float, sender: Addr | None = None) -> None:
        state = self.table.get(sus.node)
        if state is None or sus.incarnation < state.incarnation:
            return
        self._suspect_known(state, sus.incarnation, sus.from_, now, sender, None)

    def _suspect_known(self, state: Node, incarnation: int, from_: str, now: float, sender: Addr | None,
                       received: bytes | None) -> None:
        """:meth:`_suspect_node` past its first test (``state`` is the
        accused's, at most ``incarnation``); ``received``: the suspect as
        the hot path took it, or None (see :meth:`_suspect_bytes`)."""
        node = state.name
        if node in self._suspicions:
            # Unlike memberlist, only a member we know confirms: a forger
            # inventing a name per message would otherwise cut every
            # suspicion to its minimum at once.
            confirmer = self.table.get(from_)
            if confirmer is None or confirmer.dead_or_left():
                self._counts["confirmations_refused"] += 1
                return
            if self._suspicions.confirm(node, from_, now):
                self._broadcast(node, self._suspect_bytes(received, incarnation, node, from_))
            return
        if state.state != NodeState.ALIVE:
            return
        if node == self.name:
            self._refute(state, incarnation, sender)
            return
        accusation = self._suspect_bytes(received, incarnation, node, from_)
        self._broadcast(node, accusation)
        self._counts["suspects"] += 1
        state.incarnation = incarnation
        state.state = NodeState.SUSPECT
        state.state_change = now
        s = self.settings
        # k confirmations drive the timer to its minimum; none expected when
        # the cluster has too few other nodes to give them.
        k = s.suspicion_mult - 2
        n = len(self.table)
        if n - 2 < k:
            k = 0
        low = suspicion_timeout(s.suspicion_mult, n, s.probe_interval)
        high = s.suspicion_max_timeout_mult * low
        timer = Suspicion(from_, k, low, high, now)
        self._suspicions[node] = (timer, now)
        if self._tell_every or from_ == self.name or self._gossip_in_doubt():
            self._tell_accused(state, timer, accusation)

    def _tell_accused(self, state: Node, timer: Suspicion, accusation: bytes) -> None:
        """Beyond memberlist: our suspicion of ``state`` straight to it, once
        (one datagram, to a member we already have, with broadcasts
        piggybacked). With ``tell_accused="every"`` whenever we start one;
        with "prober" only when we accuse in our own name (our probe failed:
        a healthy member that lost a ping refutes at once; or a push/pull
        listed it suspect or dead, see StreamSync), or while our own probes
        say our gossip is not reaching members. In both, a table an
        attacker filled with invented nodes, which our gossip would seldom
        carry to the accused before the timeout, cannot get a live node
        declared dead unheard. Counted whether or not the datagram queue
        (``max_datagrams``) had room; a full queue counts its drops."""
        timer.told = True
        self._counts["suspects_told"] += 1
        self._send_msg(state.address, accusation)

    def _doubt_began(self) -> None:
        """Our gossip just came into doubt: tell the accused of the open
        suspicions not told yet (each at most once; with "every", all were)."""
        if self._tell_every:
            return
        for name, (timer, change) in list(self._suspicions.items()):
            state = self.table.get(name)
            if (not timer.told and state is not None and state.state == NodeState.SUSPECT
                    and state.state_change == change):
                self._tell_accused(state, timer, messages.encode(messages.Suspect(
                    incarnation=state.incarnation, node=name, from_=self.name)))

    def _suspicion_expired(self, name: str, sus: Suspicion, change: float, now: float) -> None:
        del self._suspicions[name]
        state = self.table.get(name)
        if state is not None and state.state == NodeState.SUSPECT and state.state_change == change:
            self._dead_node(messages.Dead(incarnation=state.incarnation, node=name, from_=self.name), now)

    def _dead_node(self, d: messages.Dead, now: float, sender: Addr | None = None) -> None:
        state = self.table.get(d.node)
        if state is None or d.incarnation < state.incarnation:
            return
        self._suspicions.pop(d.node, None)
        if state.dead_or_left():
            return
        token = None
        if state.name == self.name:
            if self._leave is None:
                self._refute(state, d.incarnation, sender)
                return
            token = self._leave.token
        self._broadcast(d.node, messages.encode(d), token)
        state.incarnation = d.incarnation
        state.state = NodeState.LEFT if d.node == d.from_ else NodeState.DEAD
        state.state_change = now
        self._node_gone(state)
        info = state.info()
        self._event(MemberLeft(info) if state.state == NodeState.LEFT else MemberFailed(info))

    def _refute(self, me: Node, accused: int, sender: Addr | None = None) -> None:
        """Beat the accusation's incarnation and gossip that we are alive;
        also straight back to ``sender``, the member that told us."""
        self._counts["refutes"] += 1
        inc = self._next_incarnation()
        if accused >= inc:
            self._incarnation = inc = (self._incarnation + accused - inc + 1) & UINT32_MASK
        me.incarnation = inc
        self.awareness.apply_delta(1)
        alive = messages.Alive(incarnation=inc, node=me.name, addr=me.addr, port=me.port, meta=me.meta,
                               vsn=me.vsn)
        # memberlist names this broadcast by our address, not our name.
        self._broadcast(ip_text(me.addr), messages.encode(alive))
        # Beyond memberlist: the one that accused us may be the only one
        # that believes it, and our gossip (k random nodes) may miss it until
        # its timeout. Answered only to a member's address, never to
        # whatever source a datagram claims.
        if sender is not None and any(n.address == sender and n.name != me.name and not n.dead_or_left()
                                      for n in self.table.nodes):
            self._send_msg(sender, messages.encode(alive))


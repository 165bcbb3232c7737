"""The node-state rules of the gossip engine: alive, suspect, dead and the
refutation, which every way news of a node arrives goes through (a packet,
the fast path, a push/pull's merge, our own probes and timers).

memberlist 0.2.2, read, never copied: state.go aliveNode, suspectNode,
deadNode, refute; with the bounds memberlist does not have (a full table
evicting the longest gone, the dead nodes kept at most ``max_dead_nodes``,
confirmations only from members, the accused told).
"""

from __future__ import annotations

from . import messages
from . import msgpack_go
from .core import UINT32_MASK, EngineState
from .events import MemberFailed, MemberJoined, MemberLeft, MemberUpdated, NameConflict
from .layout import NodeState
from .outbox import Outbox
from .state import Addr, Node, NodeInfo, ip_text
from .suspicion import Suspicion, suspicion_timeout


class NodeRules:
    """The node-state rules over the engine's shared state; what they
    gossip goes to ``outbox``."""

    def __init__(self, shared: EngineState, outbox: Outbox):
        self.shared, self.name, self.settings, self.table, self.counts = shared.held()
        self.outbox = outbox
        self.suspicions = shared.suspicions

    def alive(self, a: messages.Alive, now: float, bootstrap: bool) -> None:
        s = self.settings
        if self.shared.leave is not None and a.node == self.name:
            return
        if len(a.vsn) >= 3 and (a.vsn[0] == 0 or a.vsn[1] == 0 or a.vsn[0] > a.vsn[1]):
            self.counts["alive_refused"] += 1
            return
        if len(a.addr) not in (4, 16):
            self.counts["alive_refused"] += 1
            self.shared.bad("bad_address")
            return
        state = self.table.get(a.node)
        updates_node = False
        new = state is None
        if state is None:
            if len(self.table) >= s.max_nodes and not self._room_for(a):
                self.counts["nodes_refused"] += 1
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
                self.counts["name_conflicts"] += 1
                other = NodeInfo(a.node, ip_text(a.addr), a.port, a.meta, a.incarnation, NodeState.ALIVE, a.vsn)
                self.shared.event(NameConflict(state.info(), other))
                return
        local = state.name == self.name
        if a.incarnation <= state.incarnation and not local and not updates_node:
            if new:
                self._node_gone(state)      # first heard of at incarnation 0: kept, dead, as memberlist does
            return
        if a.incarnation < state.incarnation and local:
            return
        self.suspicions.pop(a.node, None)
        old_state, old_meta = state.state, state.meta
        if not bootstrap and local:
            if a.incarnation == state.incarnation and a.meta == state.meta and a.vsn == state.vsn:
                return
            self._refute(state, a.incarnation)
        else:
            self.outbox.broadcast(a.node, messages.encode(a))
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
        self.shared.telemetry.msg_alive += 1
        if old_state in (NodeState.DEAD, NodeState.LEFT):
            self.shared.event(MemberJoined(state.info()))
        elif old_meta != state.meta:
            self.shared.event(MemberUpdated(state.info()))

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
        self.counts["nodes_evicted"] += 1
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
            self.counts["dead_nodes_evicted"] += 1

    def _evict(self, node: Node) -> None:
        self.table.evict(node)
        self.suspicions.pop(node.name, None)

    def suspect(self, sus: messages.Suspect, now: float, sender: Addr | None = None) -> None:
        state = self.table.get(sus.node)
        if state is None or sus.incarnation < state.incarnation:
            return
        self.suspect_known(state, sus.incarnation, sus.from_, now, sender, None)

    def suspect_known(self, state: Node, incarnation: int, from_: str, now: float, sender: Addr | None,
                      received: bytes | None) -> None:
        """:meth:`suspect` past its first test (``state`` is the
        accused's, at most ``incarnation``); ``received``: the suspect as
        the hot path took it, or None (see :meth:`suspect_bytes`)."""
        node = state.name
        if node in self.suspicions:
            # Unlike memberlist, only a member we know confirms: a forger
            # inventing a name per message would otherwise cut every
            # suspicion to its minimum at once.
            confirmer = self.table.get(from_)
            if confirmer is None or confirmer.dead_or_left():
                self.counts["confirmations_refused"] += 1
                return
            if self.suspicions.confirm(node, from_, now):
                self.outbox.broadcast(node, self.suspect_bytes(received, incarnation, node, from_))
            return
        if state.state != NodeState.ALIVE:
            return
        if node == self.name:
            self._refute(state, incarnation, sender)
            return
        accusation = self.suspect_bytes(received, incarnation, node, from_)
        self.outbox.broadcast(node, accusation)
        self.counts["suspects"] += 1
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
        self.suspicions[node] = (timer, now)
        if self.shared.tell_every or from_ == self.name or self.shared.gossip_in_doubt():
            self.tell_accused(state, timer, accusation)

    def tell_accused(self, state: Node, timer: Suspicion, accusation: bytes) -> None:
        """Beyond memberlist: our suspicion of ``state`` straight to it, once
        (one datagram, to a member we already have, with broadcasts
        piggybacked). With ``tell_accused="every"`` whenever we start one;
        with "prober" only when we accuse in our own name (our probe failed:
        a healthy member that lost a ping refutes at once; or a push/pull
        listed it suspect or dead, see :mod:`.streams`), or while our own probes
        say our gossip is not reaching members. In both, a table an
        attacker filled with invented nodes, which our gossip would seldom
        carry to the accused before the timeout, cannot get a live node
        declared dead unheard. Counted whether or not the datagram queue
        (``max_datagrams``) had room; a full queue counts its drops."""
        timer.told = True
        self.counts["suspects_told"] += 1
        self.outbox.send_msg(state.address, accusation)

    def doubt_began(self) -> None:
        """Our gossip just came into doubt: tell the accused of the open
        suspicions not told yet (each at most once; with "every", all were)."""
        if self.shared.tell_every:
            return
        for name, (timer, change) in list(self.suspicions.items()):
            state = self.table.get(name)
            if (not timer.told and state is not None and state.state == NodeState.SUSPECT
                    and state.state_change == change):
                self.tell_accused(state, timer, messages.encode(messages.Suspect(
                    incarnation=state.incarnation, node=name, from_=self.name)))

    def suspicion_expired(self, name: str, sus: Suspicion, change: float, now: float) -> None:
        del self.suspicions[name]
        state = self.table.get(name)
        if state is not None and state.state == NodeState.SUSPECT and state.state_change == change:
            if 0 < sus.k and sus.n < sus.k:
                self.shared.telemetry.degraded_timeouts += 1
            self.dead(messages.Dead(incarnation=state.incarnation, node=name, from_=self.name), now)

    def dead(self, d: messages.Dead, now: float, sender: Addr | None = None) -> None:
        state = self.table.get(d.node)
        if state is None or d.incarnation < state.incarnation:
            return
        self.suspicions.pop(d.node, None)
        if state.dead_or_left():
            return
        token = None
        if state.name == self.name:
            if self.shared.leave is None:
                self._refute(state, d.incarnation, sender)
                return
            token = self.shared.leave.token
        self.outbox.broadcast(d.node, messages.encode(d), token)
        self.shared.telemetry.msg_dead += 1
        state.incarnation = d.incarnation
        state.state = NodeState.LEFT if d.node == d.from_ else NodeState.DEAD
        state.state_change = now
        self._node_gone(state)
        info = state.info()
        self.shared.event(MemberLeft(info) if state.state == NodeState.LEFT else MemberFailed(info))

    def _refute(self, me: Node, accused: int, sender: Addr | None = None) -> None:
        """Beat the accusation's incarnation and gossip that we are alive;
        also straight back to ``sender``, the member that told us."""
        self.counts["refutes"] += 1
        inc = self.shared.next_incarnation()
        if accused >= inc:
            self.shared.incarnation = inc = (self.shared.incarnation + accused - inc + 1) & UINT32_MASK
        me.incarnation = inc
        self.shared.awareness.apply_delta(1)
        alive = messages.Alive(incarnation=inc, node=me.name, addr=me.addr, port=me.port, meta=me.meta,
                               vsn=me.vsn)
        # memberlist names this broadcast by our address, not our name.
        self.outbox.broadcast(ip_text(me.addr), messages.encode(alive))
        # Beyond memberlist: the one that accused us may be the only one
        # that believes it, and our gossip (k random nodes) may miss it until
        # its timeout. Answered only to a member's address, never to
        # whatever source a datagram claims.
        if sender is not None and any(n.address == sender and n.name != me.name and not n.dead_or_left()
                                      for n in self.table.nodes):
            self.outbox.send_msg(sender, messages.encode(alive))

    def suspect_bytes(self, received: bytes | None, incarnation: int, node: str, from_: str) -> bytes:
        """A suspect to gossip: ``received`` (what the matcher took, or
        None) when it is byte for byte what encoding it writes, else encoded.
        The matcher takes only the layout encoding writes (type, a map of
        From, Incarnation and Node, each key as written) and names come back
        to the same bytes through the surrogate escapes; it also takes an
        integer or a name header wider than the smallest, which encoding
        writes, each making the message longer. So one of encoding's length
        is its encoding."""
        if received is not None:
            size = _ACCUSATION_KEYS + msgpack_go.uint_size(incarnation) + msgpack_go.raw_size(
                len(node.encode("utf-8", "surrogateescape"))) + msgpack_go.raw_size(
                len(from_.encode("utf-8", "surrogateescape")))
            if len(received) == size:
                return received
        return messages.encode(messages.Suspect(incarnation=incarnation, node=node, from_=from_))

    def alive_ignored(self, name: str, inc: int, addr: bytes, port: int, vsn: bytes) -> bool:
        """An alive the rules of :meth:`alive` (bootstrap off) ignore
        without a trace: ours while we leave, or a known node's at its
        address and at most its incarnation. Anything else: False."""
        if self.shared.leave is not None and name == self.name:
            return True
        if len(vsn) >= 3 and (vsn[0] == 0 or vsn[1] == 0 or vsn[0] > vsn[1]):
            return False
        if self.settings.protocol_version < 2 or port == 0:
            port = self.shared.port
        state = self.table.get(name)
        return (state is not None and name != self.name and state.addr == addr and state.port == port
                and inc <= state.incarnation and len(addr) in (4, 16))


#: an accusation's type byte, map header and keys
_ACCUSATION_KEYS = 2 + sum(msgpack_go.raw_size(len(go_name.encode())) for go_name, *_ in messages.Suspect._FIELDS)

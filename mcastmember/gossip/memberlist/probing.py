"""The SWIM probe cycle with Lifeguard, and answering others' probes.

Each probe interval (scaled by our health, Lifeguard's awareness) we ping the
next node of a shuffled round-robin; without an ack in time we ask k others
to ping it (indirect pings, with nacks from those that speak protocol 4) and
try a TCP ping; with no ack by the end of the interval the node is
suspected, and missing nacks count against our own health.

memberlist 0.2.2, read, never copied: state.go probe, probeNode, resetNodes;
net.go handlePing, handleIndirectPing, handleAck, handleNack.
"""

from __future__ import annotations

from . import framing
from . import messages
from .core import DOUBT_FAILURES, Handler, Probe, Relay
from .events import PingCompleted
from .layout import NodeState
from .state import Addr, Node, ip_text
from .streams import StreamSync

#: the lowest protocol max that answers a TCP ping (probeNode) and sends nacks
TCP_PING_MIN_PROTOCOL = 3
NACK_MIN_PROTOCOL = 4


class Probing(StreamSync):
    """The probing part of :class:`~mcastmember.gossip.memberlist.engine.GossipEngine`."""

    def _handle_ping(self, ping: messages.Ping, addr: Addr) -> None:
        if ping.node and ping.node != self.name:
            self._counts["pings_misdirected"] += 1
            return
        dest = reply_address(ping.source_addr, ping.source_port, addr)
        _prefix, compressible = self._ack_prefix()
        self._send_msg(dest, messages.encode(messages.Ack(seq_no=ping.seq_no, payload=self.ack_payload)),
                       compressible)

    def _handle_indirect_ping(self, ind: messages.IndirectPing, addr: Addr, now: float) -> None:
        if len(ind.target) not in (4, 16):
            self._bad("bad_address")
            return
        port = ind.port if ind.port and self.settings.protocol_version >= 2 else self._port
        if not self.is_member_at(ind.node, (ip_text(ind.target), port)):
            # memberlist pings whatever address it is asked to: a datagram
            # of 50 bytes then sends a ping to a third party and an ack back.
            # A requester that asked for a nack gets one at once, where the
            # request came from (one small datagram for one): no ack will
            # come, and memberlist counts a missing nack against its own
            # health (a node we list dead or do not know yet is asked for
            # in normal operation).
            self._counts["sends_refused"] += 1
            if ind.nack:
                self._send_msg(addr, messages.encode(messages.Nack(seq_no=ind.seq_no)))
            return
        if len(self._acks) >= self.settings.max_pending_acks:
            self._counts["acks_refused"] += 1
            return
        seq = self._next_seq()
        self._acks[seq] = Relay(ind.seq_no, reply_address(ind.source_addr, ind.source_port, addr), ind.nack,
                                 now + self.settings.probe_timeout)
        self._counts["indirect_pings_relayed"] += 1
        ping = messages.Ping(seq_no=seq, node=ind.node, source_addr=self._addr, source_port=self._port,
                             source_node=self.name)
        self._send_msg((ip_text(ind.target), port), messages.encode(ping))

    def _handle_ack(self, ack: messages.Ack, now: float) -> None:
        self._ack_received(ack.seq_no, ack.payload, now)

    def _ack_received(self, seq: int, payload: bytes, now: float) -> None:
        self._counts["acks_received"] += 1
        handler = self._acks.pop(seq, None)
        if isinstance(handler, Relay):
            self._send_msg(handler.addr, messages.encode(messages.Ack(seq_no=handler.seq)))
        elif isinstance(handler, Probe):
            if not handler.indirect and self.settings.ping_events:
                self._event(PingCompleted(handler.node.info(), now - handler.start, payload))
            self._finish_probe(handler, -1, now)


    def _handle_nack(self, nack: messages.Nack) -> None:
        self._counts["nacks_received"] += 1
        handler = self._acks.get(nack.seq_no)
        if isinstance(handler, Probe):
            # Go's nack channel holds IndirectChecks + 1.
            handler.nacks = min(handler.nacks + 1, self.settings.indirect_checks + 1)

    # ---------------------------------------------------------------- probes

    def _probe_tick(self, now: float) -> None:
        """probe: the next node in the shuffled round-robin that is neither
        us nor dead or left; a wrap reaps and reshuffles."""
        checked = 0
        while True:
            nodes = self.table.nodes
            if checked >= len(nodes):
                return
            if self._probe_index >= len(nodes):
                self._reset_nodes(now)
                self._probe_index = 0
                checked += 1
                continue
            node = nodes[self._probe_index]
            self._probe_index += 1
            if node.name == self.name or node.dead_or_left():
                checked += 1
                continue
            self._probe_node(node, now)
            return

    def _reset_nodes(self, now: float) -> None:
        for gone in self.table.reap_and_shuffle(now, self.settings.gossip_to_the_dead_time):
            self._counts["nodes_reaped"] += 1
            self._suspicions.pop(gone.name, None)

    def _probe_node(self, node: Node, now: float) -> None:
        s = self.settings
        interval = self.awareness.scale(s.probe_interval)
        if interval > s.probe_interval:
            self._counts["probes_degraded"] += 1
        self._counts["probes"] += 1
        seq = self._next_seq()
        copy = Node(node.name, node.addr, node.port, node.meta, node.incarnation, node.state,
                    node.state_change, node.vsn)
        probe = Probe(copy, seq, now, now + s.probe_timeout, now + interval)
        self._probe = probe
        self._acks[seq] = probe
        ping = messages.encode(messages.Ping(seq_no=seq, node=node.name, source_addr=self._addr,
                                             source_port=self._port, source_node=self.name))
        if node.state == NodeState.ALIVE:
            self._send_msg(node.address, ping)
        else:
            # A suspect gets the accusation with the ping, to refute at once.
            suspect = messages.encode(messages.Suspect(incarnation=node.incarnation, node=node.name,
                                                       from_=self.name))
            self._send_raw(node.address, framing.make_compound([ping, suspect]), node)

    def _expire_handler(self, seq: int, handler: Handler, now: float) -> None:
        if isinstance(handler, Relay):
            del self._acks[seq]
            if handler.nack:
                self._send_msg(handler.addr, messages.encode(messages.Nack(seq_no=handler.seq)))
            return
        if not handler.indirect:
            self._go_indirect(handler, now)
        if handler.end_at <= now:
            self._probe_failed(handler, now)

    def _go_indirect(self, probe: Probe, now: float) -> None:
        """No ack in time: ask k others, and try TCP."""
        probe.indirect = True
        target = probe.node
        peers = self.table.k_random(self.settings.indirect_checks, lambda n: n.name in (self.name, target.name)
                                    or n.state != NodeState.ALIVE)
        for peer in peers:
            nack = self.settings.nacks and peer.pmax >= NACK_MIN_PROTOCOL
            probe.expected_nacks += nack
            ind = messages.IndirectPing(seq_no=probe.seq, target=target.addr, port=target.port, node=target.name,
                                        nack=nack, source_addr=self._addr, source_port=self._port,
                                        source_node=self.name)
            self._counts["indirect_pings_sent"] += 1
            self._send_msg(peer.address, messages.encode(ind))
        if not self.settings.disable_tcp_pings and target.pmax >= TCP_PING_MIN_PROTOCOL:
            ping = messages.Ping(seq_no=probe.seq, node=target.name, source_addr=self._addr,
                                 source_port=self._port, source_node=self.name)
            self._open_stream(target.address, "ping", self._stream_bytes(messages.encode(ping)), probe.end_at,
                              seq=probe.seq)

    def _probe_failed(self, probe: Probe, now: float) -> None:
        if probe.tcp_ok:
            # Reached over TCP only: the network is odd, the node is not dead.
            self._finish_probe(probe, -1, now)
            return
        self._counts["probes_failed"] += 1
        # Lifeguard: missing nacks mean we may be the slow one.
        if probe.expected_nacks > 0:
            delta = max(probe.expected_nacks - probe.nacks, 0)
        else:
            delta = 1
        target = probe.node
        self._suspect_node(messages.Suspect(incarnation=target.incarnation, node=target.name, from_=self.name),
                           now)
        self._finish_probe(probe, delta, now, failed=True)

    def _gossip_in_doubt(self) -> bool:
        """Whether enough of our latest probes failed to doubt our own
        gossip, which goes to random nodes of the same table: a table an
        attacker filled with invented nodes, or a network cut around us.
        One failure is the target's (a node that crashed or stalls); two
        within a few probes seldom are in a working cluster. Not Lifeguard's
        missing nacks: the members asked to help nack only after their own
        probe timeout, so at memberlist's timings the nacks for a dead
        target arrive just after our probe ends, and every failed probe
        misses them."""
        return sum(self._probe_failures) >= DOUBT_FAILURES

    def _finish_probe(self, probe: Probe, delta: int, now: float, failed: bool = False) -> None:
        self._acks.pop(probe.seq, None)
        if self._probe is probe:
            self._probe = None
        self.awareness.apply_delta(delta)
        doubted = self._gossip_in_doubt()
        self._probe_failures.append(failed)
        if not doubted and self._gossip_in_doubt():
            self._doubt_began()
        if self._probe_buffered and self._probe is None:
            self._probe_buffered = False
            self._probe_tick(now)


def reply_address(addr: bytes, port: int, sender: Addr) -> Addr:
    """Where a reply goes: the datagram's sender, whatever source address the
    message names. memberlist replies to the named one, so one forged ping
    makes it send to a third party; the sender is where the ping came from
    (a peer behind NAT included: its NAT maps the reply back), and the
    only address that reply can reach without being asked by it."""
    del addr, port
    return sender


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
from . import matcher as hot_path
from . import messages
from .core import EngineState, Handler, Probe, Relay
from .events import PingCompleted
from .layout import ACK_SEQ_MAX_SIZE, NodeState
from .outbox import Outbox
from .rules import NodeRules
from .state import Addr, Node, ip_text
from .streams import StreamSync

#: the lowest protocol max that answers a TCP ping (probeNode) and sends nacks
TCP_PING_MIN_PROTOCOL = 3
NACK_MIN_PROTOCOL = 4


class Probing:
    """The engine's probe cycle and its answers to others' probes, over its
    shared state: what it sends goes to ``outbox``, a failed probe's
    suspicion to the node-state ``rules``, a TCP ping to ``streams``."""

    def __init__(self, shared: EngineState, outbox: Outbox, rules: NodeRules, streams: StreamSync):
        self.shared, self.name, self.settings, self.table, self.counts = shared.held()
        self.outbox = outbox
        self.rules = rules
        self.streams = streams
        self.acks = shared.acks
        #: the payload of our acks (PingDelegate.AckPayload)
        self.ack_payload = b""
        #: our ack's prefix for ack_payload (the matcher's ack adds the sequence
        #: number), and whether compressing an ack made from it is never worth trying
        empty = hot_path.ack_prefix(b"")
        self._ack_template = (b"", empty, framing.never_shorter(empty, ACK_SEQ_MAX_SIZE))
        #: the probe under way, the next node's index, and whether a tick came meanwhile
        self._probe: Probe | None = None
        self._probe_index = 0
        self._probe_buffered = False

    def ack_prefix(self) -> tuple[bytes, bool]:
        """Our ack's prefix for :attr:`ack_payload` (remade when it changes),
        and False if no ack made from it can compress smaller."""
        payload, prefix, plain = self._ack_template
        if payload is not self.ack_payload and payload != self.ack_payload:
            payload, prefix = self.ack_payload, hot_path.ack_prefix(self.ack_payload)
            plain = framing.never_shorter(prefix, ACK_SEQ_MAX_SIZE)
            self._ack_template = (payload, prefix, plain)
        return prefix, not plain

    def handle_ping(self, ping: messages.Ping, addr: Addr, now: float) -> None:
        if ping.node and ping.node != self.name:
            self.counts["pings_misdirected"] += 1
            return
        dest = reply_address(ping.source_addr, ping.source_port, addr)
        _prefix, compressible = self.ack_prefix()
        self.outbox.send_msg(dest, messages.encode(messages.Ack(seq_no=ping.seq_no, payload=self.ack_payload)),
                             compressible)

    def handle_indirect_ping(self, ind: messages.IndirectPing, addr: Addr, now: float) -> None:
        if len(ind.target) not in (4, 16):
            self.shared.bad("bad_address")
            return
        port = ind.port if ind.port and self.settings.protocol_version >= 2 else self.shared.port
        if not self.shared.is_member_at(ind.node, (ip_text(ind.target), port)):
            # memberlist pings whatever address it is asked to: a datagram
            # of 50 bytes then sends a ping to a third party and an ack back.
            # A requester that asked for a nack gets one at once, where the
            # request came from (one small datagram for one): no ack will
            # come, and memberlist counts a missing nack against its own
            # health (a node we list dead or do not know yet is asked for
            # in normal operation).
            self.counts["sends_refused"] += 1
            if ind.nack:
                self.outbox.send_msg(addr, messages.encode(messages.Nack(seq_no=ind.seq_no)))
            return
        if len(self.acks) >= self.settings.max_pending_acks:
            self.counts["acks_refused"] += 1
            return
        seq = self.shared.next_seq()
        self.acks[seq] = Relay(ind.seq_no, reply_address(ind.source_addr, ind.source_port, addr), ind.nack,
                               now + self.settings.probe_timeout)
        self.counts["indirect_pings_relayed"] += 1
        ping = messages.Ping(seq_no=seq, node=ind.node, source_addr=self.shared.addr, source_port=self.shared.port,
                             source_node=self.name)
        self.outbox.send_msg((ip_text(ind.target), port), messages.encode(ping))

    def handle_ack(self, ack: messages.Ack, addr: Addr, now: float) -> None:
        self.ack_received(ack.seq_no, ack.payload, now)

    def ack_received(self, seq: int, payload: bytes, now: float) -> None:
        self.counts["acks_received"] += 1
        handler = self.acks.pop(seq, None)
        if isinstance(handler, Relay):
            self.outbox.send_msg(handler.addr, messages.encode(messages.Ack(seq_no=handler.seq)))
        elif isinstance(handler, Probe):
            if not handler.indirect and self.settings.ping_events:
                self.shared.event(PingCompleted(handler.node.info(), now - handler.start, payload))
            self._finish_probe(handler, -1, now)

    def handle_nack(self, nack: messages.Nack, addr: Addr, now: float) -> None:
        self.counts["nacks_received"] += 1
        handler = self.acks.get(nack.seq_no)
        if isinstance(handler, Probe):
            # Go's nack channel holds IndirectChecks + 1.
            handler.nacks = min(handler.nacks + 1, self.settings.indirect_checks + 1)

    # ---------------------------------------------------------------- probes

    def ticker(self, now: float) -> None:
        """The probe interval came round: the next probe, or, while one is
        under way, the next once it ends (Go's ticker keeps one tick)."""
        if self._probe is None:
            self._tick(now)
        else:
            self._probe_buffered = True

    def expire(self, now: float) -> None:
        """The pending acks whose time is up: a probe goes indirect or
        fails, a relay for a peer sends its nack."""
        acks = self.acks
        for seq, handler in list(acks.items()):
            if handler.deadline <= now and acks.get(seq) is handler:
                self._expire_handler(seq, handler, now)

    def _tick(self, now: float) -> None:
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
            self.counts["nodes_reaped"] += 1
            self.shared.suspicions.pop(gone.name, None)

    def _probe_node(self, node: Node, now: float) -> None:
        s = self.settings
        interval = self.shared.awareness.scale(s.probe_interval)
        if interval > s.probe_interval:
            self.counts["probes_degraded"] += 1
        self.counts["probes"] += 1
        seq = self.shared.next_seq()
        copy = Node(node.name, node.addr, node.port, node.meta, node.incarnation, node.state,
                    node.state_change, node.vsn)
        probe = Probe(copy, seq, now, now + s.probe_timeout, now + interval)
        self._probe = probe
        self.acks[seq] = probe
        ping = messages.encode(messages.Ping(seq_no=seq, node=node.name, source_addr=self.shared.addr,
                                             source_port=self.shared.port, source_node=self.name))
        if node.state == NodeState.ALIVE:
            self.outbox.send_msg(node.address, ping)
        else:
            # A suspect gets the accusation with the ping, to refute at once.
            suspect = messages.encode(messages.Suspect(incarnation=node.incarnation, node=node.name,
                                                       from_=self.name))
            self.outbox.send_raw(node.address, framing.make_compound([ping, suspect]), node)

    def _expire_handler(self, seq: int, handler: Handler, now: float) -> None:
        if isinstance(handler, Relay):
            del self.acks[seq]
            if handler.nack:
                self.outbox.send_msg(handler.addr, messages.encode(messages.Nack(seq_no=handler.seq)))
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
                                        nack=nack, source_addr=self.shared.addr, source_port=self.shared.port,
                                        source_node=self.name)
            self.counts["indirect_pings_sent"] += 1
            self.outbox.send_msg(peer.address, messages.encode(ind))
        if not self.settings.disable_tcp_pings and target.pmax >= TCP_PING_MIN_PROTOCOL:
            ping = messages.Ping(seq_no=probe.seq, node=target.name, source_addr=self.shared.addr,
                                 source_port=self.shared.port, source_node=self.name)
            streams = self.streams
            streams.open_stream(target.address, "ping", streams.stream_bytes(messages.encode(ping), header=True),
                                probe.end_at, seq=probe.seq)

    def _probe_failed(self, probe: Probe, now: float) -> None:
        if probe.tcp_ok:
            # Reached over TCP only: the network is odd, the node is not dead.
            self._finish_probe(probe, -1, now)
            return
        self.counts["probes_failed"] += 1
        # Lifeguard: missing nacks mean we may be the slow one.
        if probe.expected_nacks > 0:
            delta = max(probe.expected_nacks - probe.nacks, 0)
        else:
            delta = 1
        target = probe.node
        self.rules.suspect(messages.Suspect(incarnation=target.incarnation, node=target.name, from_=self.name),
                           now)
        self._finish_probe(probe, delta, now, failed=True)

    def _finish_probe(self, probe: Probe, delta: int, now: float, failed: bool = False) -> None:
        self.shared.telemetry.probe_node.add((now - probe.start) * 1e3, now)
        self.acks.pop(probe.seq, None)
        if self._probe is probe:
            self._probe = None
        self.shared.awareness.apply_delta(delta)
        doubted = self.shared.gossip_in_doubt()
        self.shared.probe_failures.append(failed)
        if not doubted and self.shared.gossip_in_doubt():
            self.rules.doubt_began()
        if self._probe_buffered and self._probe is None:
            self._probe_buffered = False
            self._tick(now)


def reply_address(addr: bytes, port: int, sender: Addr) -> Addr:
    """Where a reply goes: the datagram's sender, whatever source address the
    message names. memberlist replies to the named one, so one forged ping
    makes it send to a third party; the sender is where the ping came from
    (a peer behind NAT included: its NAT maps the reply back), and the
    only address that reply can reach without being asked by it."""
    del addr, port
    return sender

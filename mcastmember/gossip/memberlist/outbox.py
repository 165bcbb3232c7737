"""What the gossip engine sends by UDP: the broadcast queues, piggybacking
them on a message, the gossip round, and wrapping a datagram.

memberlist 0.2.2, read, never copied: net.go sendMsg, rawSendMsgPacket;
state.go gossip; delegate.go GetBroadcasts (the user messages, type 8).
"""

from __future__ import annotations

from collections.abc import Callable

from . import framing
from .broadcasts import BroadcastQueue
from .core import EngineState
from .layout import (COMPOUND_HEADER_OVERHEAD, COMPOUND_MAX_PARTS, COMPOUND_OVERHEAD, CRC_MIN_PROTOCOL,
                     ENCRYPT_OVERHEAD, LABEL_HEADER_SIZE, USER_MSG_OVERHEAD, MessageType, NodeState)
from .state import Addr, Node


class Outbox:
    """The engine's UDP sending and its two transmit-limited queues:
    memberlist's own broadcasts (:attr:`broadcasts`) and user messages to
    piggyback (:attr:`user_broadcasts`, Delegate.GetBroadcasts). ``get_broadcasts``
    (Delegate.GetBroadcasts), if given, is asked for the user messages
    instead of :attr:`user_broadcasts`; ``broadcasts_sent``, if given, is
    told after each gossip round and each message sent with broadcasts
    piggybacked (see :meth:`_sent`)."""

    def __init__(self, shared: EngineState, get_broadcasts: Callable[[int, int, int], list[bytes]] | None = None,
                 broadcasts_sent: Callable[[], None] | None = None):
        self.shared, self.name, settings, self.table, self.counts = shared.held()
        self.settings = settings
        self.datagrams = shared.datagrams
        self.broadcasts = BroadcastQueue(settings.retransmit_mult, settings.max_broadcasts,
                                         settings.max_broadcast_bytes)
        #: user messages to piggyback (Delegate.GetBroadcasts), framed as type 8
        self.user_broadcasts = BroadcastQueue(settings.retransmit_mult, settings.max_broadcasts,
                                              settings.max_broadcast_bytes)
        # No queued message may be longer than a gossip packet carries: one
        # that is could never be sent, nor retire, and would pin the queue.
        self.broadcasts.max_message = self.broadcast_budget
        self.user_broadcasts.max_message = self.user_broadcast_budget
        self.get_broadcasts = get_broadcasts
        self.broadcasts_sent = broadcasts_sent

    # ------------------------------------------------------------ budgets

    def _wrap_overhead(self, outgoing_only: bool = True) -> int:
        s = self.settings
        extra = LABEL_HEADER_SIZE + len(s.label) if s.label else 0
        if self.shared.keyring is not None and (s.gossip_verify_outgoing or not outgoing_only):
            extra += ENCRYPT_OVERHEAD[s.encryption_version]
        return extra

    @property
    def broadcast_budget(self) -> int:
        """The longest broadcast one gossip packet can carry: what
        :meth:`gossip` has room for, less one compound part's length.
        GetBroadcasts could never pick a longer one, so the queues refuse it."""
        s = self.settings
        return max(0, s.udp_buffer_size - COMPOUND_HEADER_OVERHEAD - self._wrap_overhead(outgoing_only=False)
                   - COMPOUND_OVERHEAD)

    @property
    def user_broadcast_budget(self) -> int:
        """:attr:`broadcast_budget` for a user message (Serf's), which costs
        its type byte more."""
        return max(0, self.broadcast_budget - USER_MSG_OVERHEAD)

    # --------------------------------------------------------- the queues

    def broadcast(self, name: str, msg: bytes, token: object | None = None) -> None:
        queue = self.broadcasts
        before = queue.dropped + queue.oversize
        # Our own news (named by our name, or by our address for a
        # refutation): a full queue drops every relayed message before it.
        queue.queue(msg, name, token, own=name == self.name or name == self.shared.own_address)
        self.counts["broadcasts_dropped"] += queue.dropped + queue.oversize - before
        self._check_leave()

    def broadcast_user(self, payload: bytes, name: str | None = None) -> None:
        queue = self.user_broadcasts
        before = queue.dropped + queue.oversize
        queue.queue(payload, name, own=True)
        self.counts["user_broadcasts_dropped"] += queue.dropped + queue.oversize - before

    def _take_broadcasts(self, overhead: int, limit: int, max_parts: int) -> list[bytes]:
        """GetBroadcasts: memberlist's own broadcasts that fit, then user messages."""
        n = len(self.table)
        out = self.broadcasts.get(overhead, limit, n, max_parts)
        self._check_leave()
        avail = limit - sum(len(m) + overhead for m in out)
        if avail > overhead + USER_MSG_OVERHEAD and len(out) < max_parts:
            if self.get_broadcasts is not None:
                user = self.get_broadcasts(overhead + USER_MSG_OVERHEAD, avail, max_parts - len(out))
            else:
                user = self.user_broadcasts.get(overhead + USER_MSG_OVERHEAD, avail, n, max_parts - len(out))
            out += [bytes((MessageType.USER,)) + m for m in user]
        self.user_broadcasts.finished.clear()
        return out

    def _check_leave(self) -> None:
        """Our leave is done once its dead message went out to its limit."""
        finished = self.broadcasts.finished
        leave = self.shared.leave
        if leave is not None and leave.token in finished:
            leave.done = True
        finished.clear()

    # -------------------------------------------------------------- gossip

    def gossip(self, now: float) -> None:
        """state.go gossip: the queued broadcasts to ``gossip_nodes`` random nodes."""
        s = self.settings
        name = self.name

        def skip(n: Node) -> bool:
            if n.name == name:
                return True
            if n.state in (NodeState.ALIVE, NodeState.SUSPECT):
                return False
            return n.state != NodeState.DEAD or now - n.state_change > s.gossip_to_the_dead_time

        avail = s.udp_buffer_size - COMPOUND_HEADER_OVERHEAD - self._wrap_overhead(outgoing_only=False)
        for node in self.table.k_random(s.gossip_nodes, skip):
            msgs = self._take_broadcasts(COMPOUND_OVERHEAD, avail, COMPOUND_MAX_PARTS)
            if not msgs:
                break
            self.send_raw(node.address, msgs[0] if len(msgs) == 1 else framing.make_compound(msgs), node)
        self._sent()

    # ------------------------------------------------------------- sending

    def send_msg(self, addr: Addr, msg: bytes, compressible: bool = True) -> None:
        """sendMsg: piggyback what broadcasts fit, as a compound
        (``compressible`` False: ``msg`` alone would never compress smaller)."""
        avail = self.settings.udp_buffer_size - len(msg) - COMPOUND_HEADER_OVERHEAD - self._wrap_overhead()
        extra = self._take_broadcasts(COMPOUND_OVERHEAD, avail, COMPOUND_MAX_PARTS - 1)
        if extra:
            self.send_raw(addr, framing.make_compound([msg, *extra]), None)
        else:
            self.send_raw(addr, msg, None, compressible)
        self._sent()

    def _sent(self) -> None:
        """A gossip round or a message with broadcasts piggybacked is out:
        tell ``broadcasts_sent``. memberlist calls a broadcast's Finished as
        GetBroadcasts takes its last transmission, but whoever waits on it
        runs on another goroutine, and in practice acts after the send in
        hand: Serf's leave puts memberlist's dead message on the next
        packet, seldom on the rest of that gossip round (seen on the wire)."""
        if self.broadcasts_sent is not None:
            self.broadcasts_sent()

    def send_raw(self, addr: Addr, msg: bytes, node: Node | None, compressible: bool = True) -> None:
        """rawSendMsgPacket: compress if smaller, the CRC header for nodes
        that speak protocol 5, encryption, the label."""
        s = self.settings
        if node is None:
            node = self.table.get(addr[0])   # as memberlist: found only if named by its IP
        keyring = self.shared.keyring if s.gossip_verify_outgoing else None
        packet = framing.encode_packet(msg, compress=s.enable_compression and compressible,
                                       crc=node is not None and node.pmax >= CRC_MIN_PROTOCOL, keyring=keyring,
                                       encryption_version=s.encryption_version, label=s.label)
        if len(self.datagrams) >= s.max_datagrams:
            self.counts["datagrams_dropped"] += 1
            return
        self.counts["packets_sent"] += 1
        self.datagrams.append((packet, addr))

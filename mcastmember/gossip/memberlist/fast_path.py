"""The gossip engine's fast path: the messages a member receives most, handled
without the general msgpack decode (see :mod:`.matcher` for the matcher).

A packet, plain or compressed in Go's layout (memberlist sends nearly
every compound of broadcasts compressed), is split by the matcher's
``unwrap``; ping, ack, alive, suspect and dead in Go's layout are taken
apart by ``match``. A ping to us
is answered with an ack from a template; an ack goes to its probe; an
alive, suspect or dead that the node-state rules would ignore stops here,
and one they would act on goes to the same rules as before. Everything
else goes back to the general path, which decodes or refuses it as ever.
"""

from __future__ import annotations

from . import messages
from .core import EngineState
from .outbox import Outbox
from .layout import MessageType
from .probing import Probing, reply_address
from .rules import NodeRules
from .state import Addr


class FastPath:
    """The fast path over the engine's shared state (only where
    ``shared.hot``, the chosen matcher, is set): acks to ``probing``, news
    of nodes to the node-state ``rules``, our answers to ``outbox``."""

    def __init__(self, shared: EngineState, outbox: Outbox, probing: Probing, rules: NodeRules):
        self.shared, _name, settings, self.table, self.counts = shared.held()
        self.outbox = outbox
        self.probing = probing
        self.rules = rules
        self.hot = shared.hot
        self.me = shared.me
        self.limits = settings.limits

    def unwrap(self, data: bytes) -> list[bytes] | None:
        """A packet's messages (a plain one, or one compressed as Go writes
        it); None (nothing done) for what the general framing must open."""
        hot = self.hot
        if hot is None or self.shared.keyring is not None or type(data) is not bytes:   # (the matchers read bytes)
            return None
        limits = self.limits
        found: list[bytes] | None = hot.unwrap(data, self.shared.label_header, limits.max_packet,
                                               limits.max_messages, limits.max_nesting,
                                               limits.max_packet_decompressed)
        return found

    def message(self, part: bytes, addr: Addr, now: float) -> bool:
        """One message the matcher takes apart (see :mod:`.matcher`): True
        if done, False to decode it in full (one it does not take, or an
        alive that changes something: the general rules say how)."""
        hot = self.hot
        if hot is None or type(part) is not bytes:     # (the matchers read bytes)
            return False
        found = hot.match(part, self.me)
        if found is None:
            return False
        kind = found[0]
        if kind == MessageType.PING:
            self._ping(found[1], found[2], found[3], found[4], addr)
            return True
        if kind == MessageType.ACK:
            self.probing.ack_received(found[1], found[2], now)
            return True
        if kind == MessageType.ALIVE:
            _kind, inc, raw_name, node_addr, port, _meta, vsn = found
            return self.rules.alive_ignored(raw_name.decode("utf-8", "surrogateescape"), inc, node_addr, port, vsn)
        # suspect or dead: the early returns of the suspect and dead rules
        # without a message object, else the rule itself
        inc, node = found[1], found[2].decode("utf-8", "surrogateescape")
        state = self.table.get(node)
        if state is None or inc < state.incarnation:
            return True
        from_ = found[3].decode("utf-8", "surrogateescape")
        if kind == MessageType.SUSPECT:
            self.rules.suspect_known(state, inc, from_, now, addr, part)
        else:
            self.rules.dead(messages.Dead(incarnation=inc, node=node, from_=from_), now, sender=addr)
        return True

    def _ping(self, seq: int, to_me: bool, source_addr: bytes, source_port: int, addr: Addr) -> None:
        """:meth:`Probing.handle_ping` on the matcher's fields, the ack from its template."""
        if not to_me:
            self.counts["pings_misdirected"] += 1
            return
        prefix, compressible = self.probing.ack_prefix()
        assert self.hot is not None
        ack: bytes = self.hot.ack(prefix, seq)
        self.outbox.send_msg(reply_address(source_addr, source_port, addr), ack, compressible)

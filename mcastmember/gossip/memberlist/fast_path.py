"""The gossip engine's hot path: the messages a member receives most, handled
without the general msgpack decode (see :mod:`.hot` for the matcher).

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

from typing import Any

from . import messages
from . import msgpack_go
from .layout import MessageType
from .probing import Probing, reply_address
from .state import Addr, Node


class HotPath(Probing):
    """The hot path of :class:`~mcastmember.gossip.memberlist.engine.GossipEngine`
    (only where ``self._hot``, the chosen matcher, is set)."""

    def _handle_message(self, part: bytes, addr: Addr, now: float) -> None:
        raise NotImplementedError     # written in engine.py

    def _hot_packet(self, data: bytes, addr: Addr, now: float) -> bool:
        """A packet's messages (a plain one, or one compressed as Go writes
        it), each to :meth:`_handle_message`; False (nothing done) for what
        the general framing must open."""
        hot = self._hot
        if hot is None or self.keyring is not None or type(data) is not bytes:   # (the matchers read bytes)
            return False
        limits = self.settings.limits
        found = hot.unwrap(data, self._label_header, limits.max_packet, limits.max_messages, limits.max_nesting,
                           limits.max_packet_decompressed)
        if found is None:
            return False
        for part in found:
            self._handle_message(part, addr, now)
        return True

    def _hot_message(self, part: bytes, addr: Addr, now: float) -> bool:
        """What :meth:`_handle_message` does with a message the matcher
        takes apart (see :mod:`.hot`): True if done, False to decode it in
        full (one it does not take, or an alive that changes something: the
        general rules say how)."""
        hot = self._hot
        if hot is None or type(part) is not bytes:     # (the matchers read bytes)
            return False
        found = hot.match(part, self._me)
        if found is None:
            return False
        kind = found[0]
        if kind == MessageType.PING:
            self._hot_ping(found[1], found[2], found[3], found[4], addr)
            return True
        if kind == MessageType.ACK:
            self._ack_received(found[1], found[2], now)
            return True
        if kind == MessageType.ALIVE:
            return self._alive_unchanged(found)
        # suspect or dead: the early returns of _suspect_node and _dead_node
        # without a message object, else the rule itself
        inc, node = found[1], found[2].decode("utf-8", "surrogateescape")
        state = self.table.get(node)
        if state is None or inc < state.incarnation:
            return True
        from_ = found[3].decode("utf-8", "surrogateescape")
        if kind == MessageType.SUSPECT:
            self._suspect_known(state, inc, from_, now, addr, part)
        else:
            self._dead_node(messages.Dead(incarnation=inc, node=node, from_=from_), now, sender=addr)
        return True

    def _suspect_known(self, state: Node, incarnation: int, from_: str, now: float, sender: Addr | None,
                       received: bytes | None) -> None:
        raise NotImplementedError     # written in engine.py

    def _suspect_bytes(self, received: bytes | None, incarnation: int, node: str, from_: str) -> bytes:
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

    def _alive_unchanged(self, found: tuple[Any, ...]) -> bool:
        """:meth:`_alive_ignored` on the matcher's fields of an alive."""
        _kind, inc, raw_name, addr, port, _meta, vsn = found
        return self._alive_ignored(raw_name.decode("utf-8", "surrogateescape"), inc, addr, port, vsn)

    def _alive_ignored(self, name: str, inc: int, addr: bytes, port: int, vsn: bytes) -> bool:
        """An alive the rules of :meth:`_alive_node` (bootstrap off) ignore
        without a trace: ours while we leave, or a known node's at its
        address and at most its incarnation. Anything else: False."""
        if self._leave is not None and name == self.name:
            return True
        if len(vsn) >= 3 and (vsn[0] == 0 or vsn[1] == 0 or vsn[0] > vsn[1]):
            return False
        if self.settings.protocol_version < 2 or port == 0:
            port = self._port
        state = self.table.get(name)
        return (state is not None and name != self.name and state.addr == addr and state.port == port
                and inc <= state.incarnation and len(addr) in (4, 16))

    def _hot_ping(self, seq: int, to_me: bool, source_addr: bytes, source_port: int, addr: Addr) -> None:
        """:meth:`_handle_ping` on the matcher's fields, the ack from its template."""
        if not to_me:
            self._counts["pings_misdirected"] += 1
            return
        prefix, compressible = self._ack_prefix()
        assert self._hot is not None
        ack: bytes = self._hot.ack(prefix, seq)
        self._send_msg(reply_address(source_addr, source_port, addr), ack, compressible)


#: an accusation's type byte, map header and keys
_ACCUSATION_KEYS = 2 + sum(msgpack_go.raw_size(len(go_name.encode())) for go_name, *_ in messages.Suspect._FIELDS)

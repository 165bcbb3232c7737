"""A member under decoding load keeps answering its pings: LZW bombs in
datagrams stop at the datagram's bound (far below a stream's), a push/pull
announcing more nodes than the table can hold is refused at its header, and
a big push/pull is decoded and merged a bounded turn at a time, pings
answered between the turns. The full-size soak is bench/gossip_starvation.py."""

from __future__ import annotations

import pytest

pytest.importorskip("msgpack")

from mcastmember.gossip import framing, hot  # noqa: E402
from mcastmember.gossip.engine import GossipEngine  # noqa: E402
from mcastmember.gossip.events import UserMessage  # noqa: E402
from mcastmember.gossip.layout import MessageType  # noqa: E402
from mcastmember.gossip.limits import Limits  # noqa: E402
from mcastmember.gossip.settings import GossipSettings  # noqa: E402

#: every way a datagram is opened: each matcher of the hot path, and the general framing alone
PATHS = [pytest.param(module, id=f"hot-{name}") for name, module in hot.IMPLEMENTATIONS.items()
         if module is not None] + [pytest.param(None, id="general")]
ATTACKER = ("127.0.0.3", 40000)
#: the datagram bound by default
CAP = Limits().max_packet_decompressed


def _engine(hot_module=None, **settings):
    engine = GossipEngine(GossipSettings(name="victim", advertise_addr="127.0.0.1", **settings), seed=1,
                          hot=hot_module)
    engine.start(0.0)
    engine.events()            # our own join
    return engine


def _user_datagram(size):
    """A compressed datagram holding one user message of ``size`` bytes in all (type byte included)."""
    message = bytes((MessageType.USER,)) + bytes(i % 7 for i in range(size - 1))
    return message, framing.compress_message(message)


# ---------------------------------------------------------------- datagrams


@pytest.mark.parametrize("hot_module", PATHS)
def test_a_datagram_inflating_past_the_datagram_bound_is_refused_and_counted(hot_module):
    engine = _engine(hot_module)
    _message, packet = _user_datagram(CAP + 1)
    assert len(packet) < 2000                 # a few hundred bytes on the wire
    engine.receive_packet(packet, ATTACKER, 1.0)
    stats = engine.stats()
    assert (stats["packets_received"], stats["bad_input"], stats.get("bad_input.too_large"),
            stats["user_messages_received"]) == (1, 1, 1, 0)
    assert engine.events() == []


@pytest.mark.parametrize("hot_module", PATHS)
def test_a_datagram_inflating_to_the_datagram_bound_is_taken(hot_module):
    engine = _engine(hot_module)
    message, packet = _user_datagram(CAP)
    engine.receive_packet(packet, ATTACKER, 1.0)
    assert engine.events() == [UserMessage(message[1:], ATTACKER)]
    assert (engine.stats()["bad_input"], engine.stats()["user_messages_received"]) == (0, 1)


@pytest.mark.parametrize("hot_module", PATHS)
def test_the_datagram_bound_counts_every_compressed_part_of_a_compound(hot_module):
    """Two compressed halves, each under the bound, together over it."""
    engine = _engine(hot_module)
    half = bytes((MessageType.USER,)) + bytes(CAP // 2)
    packet = framing.make_compound([framing.compress_message(half), framing.compress_message(half + b"x")])
    engine.receive_packet(packet, ATTACKER, 1.0)
    assert (engine.stats()["bad_input"], engine.stats().get("bad_input.too_large")) == (1, 1)
    assert engine.events() == []


def test_the_stream_bound_stays_the_push_pull_bound():
    limits = Limits()
    assert (limits.max_packet_decompressed, limits.max_decompressed) == (65536, 20 * 1024 * 1024)

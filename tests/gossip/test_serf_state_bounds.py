"""Serf's user state in a push/pull (its members' status times, the left
members, the recent events) is decoded on the thread that answers the pings:
each list is counted against its bound from its header, before its entries
are built, so a stranger's state of hundreds of thousands of empty events
(megabytes from a compressed push/pull of kilobytes) is refused in
milliseconds and counted, while what a Serf peer sends (its event buffer of
512 slots, a status time per member) is merged whole, as before."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("msgpack")

from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import msgpack_go  # noqa: E402
from mcastmember.gossip.memberlist import messages as wire  # noqa: E402
from mcastmember.gossip.serf import SerfLimits
from mcastmember.gossip.serf import messages  # noqa: E402
from mcastmember.gossip.serf.node import SerfNode, UserEventReceived  # noqa: E402
from mcastmember.gossip.memberlist.settings import GossipSettings  # noqa: E402
from mcastmember.gossip.memberlist.streams import STREAM_TURN  # noqa: E402

STRANGER = ("127.0.0.3", 40000)
#: the longest call the attack may take: a stream turn is about 10 ms
#: (streams.STREAM_TURN); the attack took 460 ms before the bounds (2.1 MB
#: of events, compiled), so this is a generous margin on a noisy machine
TURN_BOUND = 0.1
LIMITS = SerfLimits()


def _node(**settings):
    node = SerfNode(GossipSettings(name="victim", advertise_addr="127.0.0.1", **settings), seed=1)
    node.start(0.0)
    node.engine.stream_turn_size = STREAM_TURN
    node.events()
    return node


def _state(slots=0, per_slot=0, members=0, base=1000, named=True):
    """A Serf push/pull user state; ``named``: each event its own name (else empty, as the attack's)."""
    return messages.encode(messages.SerfPushPull(
        ltime=5, status_ltimes={f"n{i}": 3 for i in range(members)},
        left_members=[f"n{i}" for i in range(0, members, 2)], event_ltime=base + slots,
        events=[messages.EventSlot(ltime=base + s, events=[messages.EventEntry(name=f"e{s}.{i}" if named else "")
                                                           for i in range(per_slot)])
                for s in range(slots)], query_ltime=1))


def _stream(user_state):
    """A stranger's compressed push/pull of no nodes carrying ``user_state``."""
    return framing.encode_stream(wire.encode_push_pull(wire.PushPull(nodes=[], user_state=user_state)),
                                 compress=True)


def _received(node, stream):
    """The stream handed over, then its turns: the reply and the longest call, in seconds."""
    start = time.perf_counter()
    reply = node.receive_stream(stream, STRANGER, 1.0)
    longest = time.perf_counter() - start
    while reply is None and node.stream_working(STRANGER):
        start = time.perf_counter()
        reply = node.stream_turn(STRANGER, 1.0)
        longest = max(longest, time.perf_counter() - start)
    assert reply is not None
    return reply, longest


def _user_events(node):
    return [(e.name, e.ltime) for e in node.events() if isinstance(e, UserEventReceived)]


@pytest.mark.parametrize("slots, per_slot", [(512, 256), (2048, 1)])
def test_a_strangers_push_pull_of_empty_events_is_refused_in_milliseconds_and_counted(slots, per_slot):
    user_state = _state(slots, per_slot, named=False)
    stream = _stream(user_state)
    assert len(stream) * 5 < len(user_state)     # kilobytes on the wire
    node = _node()
    _reply, longest = _received(node, stream)
    assert longest < TURN_BOUND
    stats = node.stats()
    assert (stats["serf_states_refused"], stats["serf_messages_bad"]) == (1, 1)
    assert _user_events(node) == []


def test_a_serf_peers_whole_event_buffer_is_merged_as_one_call_merges_it():
    """A Go peer sends its whole buffer, 512 slots; 8 events a slot is the bound on average."""
    user_state = _state(LIMITS.max_event_slots, LIMITS.max_push_events // LIMITS.max_event_slots, members=200)
    node = _node()
    _received(node, _stream(user_state))
    whole = _node()
    whole.core.merge_remote_state(messages.decode(user_state, LIMITS), False, 1.0)
    expected = [(e.name, e.ltime) for e in whole.core.take_events() if e.kind == "user"]
    assert len(expected) == LIMITS.max_push_events
    assert _user_events(node) == expected
    assert node.stats()["serf_states_refused"] == 0
    assert node.core.members.intents.items() == whole.core.members.intents.items()
    assert len(node.core.members.intents) == 200


def test_one_event_over_the_push_pulls_bound_refuses_the_state():
    slots = [messages.EventSlot(ltime=1000 + s, events=[messages.EventEntry(name="e")] * 8) for s in range(512)]
    slots[0].events = slots[0].events + [messages.EventEntry(name="more")]
    user_state = messages.encode(messages.SerfPushPull(event_ltime=1512, events=slots))
    node = _node()
    _received(node, _stream(user_state))
    assert node.stats()["serf_states_refused"] == 1
    assert _user_events(node) == []


def test_status_times_past_the_member_tables_bound_are_refused():
    """No peer knows more members than our table holds (``max_nodes``)."""
    node = _node(max_nodes=100)
    _received(node, _stream(_state(members=101)))
    assert (node.stats()["serf_states_refused"], len(node.core.members.intents)) == (1, 0)
    node = _node(max_nodes=100)
    _received(node, _stream(_state(members=100)))
    assert (node.stats()["serf_states_refused"], len(node.core.members.intents)) == (0, 100)


def test_fields_serf_does_not_send_are_passed_over_unbuilt():
    """go-msgpack ignores a key it does not know: so do we, without building its value."""
    body = messages.SerfPushPull(ltime=5, status_ltimes={"a": 3}, event_ltime=1001,
                             events=[messages.EventSlot(ltime=1000, events=[messages.EventEntry(name="x")])]).to_go()
    body[b"Future"] = [[None] * 100_000] * 4
    body[b"Events"][0][b"Future"] = {b"k": [1, 2, 3]}
    node = _node()
    _received(node, _stream(bytes((messages.SerfMessageType.PUSH_PULL,)) + msgpack_go.pack(body)))
    assert node.stats()["serf_states_refused"] == 0
    assert _user_events(node) == [("x", 1000)]
    assert "a" in node.core.members.intents

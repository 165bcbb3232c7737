"""Broadcast-queue pinning: a member must keep gossiping its own news when
the network fills its queues. A few LZW datagrams decompress to 4 MiB of
Serf user events (or join intents), each too long for any gossip packet:
queued, they could never be sent nor retire, and they would hold the
queue's byte bound while the member's own event (or leave intent) was
dropped. A message no gossip packet can carry is refused (counted; a
relayed event is still delivered here, and push/pull carries it by stream,
as Serf's event buffer does), and a full queue drops what was sent the
most, never the message being queued nor, while another is left, the
member's own."""

import asyncio
import socket

import pytest

pytest.importorskip("msgpack")

from gossipnet import Net  # noqa: E402
from mcastmember.gossip.fronts.aio import AsyncSerfService  # noqa: E402
from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.memberlist import framing  # noqa: E402
from mcastmember.gossip.memberlist.broadcasts import BroadcastQueue  # noqa: E402
from mcastmember.gossip.memberlist.layout import MessageType  # noqa: E402
from mcastmember.gossip.memberlist.limits import Limits  # noqa: E402
from mcastmember.gossip.serf import MemberStatus
from mcastmember.gossip.serf import messages  # noqa: E402
from mcastmember.gossip.serf.node import LeaveDone, SerfNode, UserEventReceived  # noqa: E402
from support import free_gossip_port, wait_until  # noqa: E402

#: the attack: this many Serf messages (a packet's whole message bound), each
#: this long, 4 MiB in all: the default max_broadcast_bytes to the byte
EVENTS, EVENT_SIZE = 1024, 4096
#: user messages in a datagram (Limits.max_packet_decompressed: 64 KiB)
PER_DATAGRAM = 15


def _padded(make):
    """``make(padding)``'s message, grown to exactly EVENT_SIZE bytes."""
    return messages.encode(make(EVENT_SIZE - len(messages.encode(make(0))) - 2))  # str/bin 16 from 256 on


def user_event(i):
    """A user event, each one new to the event buffer (256 names per event
    time, a slot's bound)."""
    return _padded(lambda pad: messages.UserEvent(ltime=1 + i // 256, name=f"x{i:05d}", payload=bytes(pad)))


def join_intent(i):
    """A join intent for a node nobody knows (kept, and gossiped on)."""
    return _padded(lambda pad: messages.Join(ltime=5, node=f"g{i:05d}" + "x" * pad))


def attack_datagrams(make):
    """LZW-compressed compounds of the EVENTS user messages ``make(i)``, as
    many to a datagram as the 64 KiB it may decompress to hold: 69 of
    about 1 KB."""
    users = [bytes((MessageType.USER,)) + make(i) for i in range(EVENTS)]
    return [framing.compress_message(framing.make_compound(users[i:i + PER_DATAGRAM]))
            for i in range(0, EVENTS, PER_DATAGRAM)]


# ------------------------------------------------------------ the queue


def test_a_message_no_packet_can_carry_is_refused_and_counted():
    q = BroadcastQueue(retransmit_mult=4, max_count=10, max_bytes=1000, max_message=100)
    token = object()
    assert q.queue(b"x" * 101, token=token) is False
    assert q.queue(b"y" * 100) is True
    # refused, never queued; whoever waits on it is told it is done
    assert (q.messages(), q.oversize, q.dropped, q.finished) == ([b"y" * 100], 1, 0, [token])
    # without a bound of its own, a message is at most max_bytes
    assert BroadcastQueue(retransmit_mult=4, max_count=10, max_bytes=1000).max_message == 1000


def test_a_full_queue_drops_the_most_sent_never_the_message_being_queued():
    q = BroadcastQueue(retransmit_mult=4, max_count=3, max_bytes=1000)
    q.queue(b"a" * 10)
    q.queue(b"b" * 10)
    assert q.get(0, 1000, num_nodes=1) == [b"b" * 10, b"a" * 10]
    q.queue(b"c" * 10)
    q.queue(b"d" * 5)                 # over the count: the most sent, the oldest of those (a)
    assert (q.messages(), q.dropped) == ([b"c" * 10, b"d" * 5, b"b" * 10], 1)
    q.queue(b"e" * 3)                 # b was sent: it goes, not the newer, unsent ones
    assert (q.messages(), q.dropped) == ([b"c" * 10, b"d" * 5, b"e" * 3], 2)
    q.queue(b"f" * 2)                 # all unsent: memberlist's Prune drops the shortest, but not f
    assert (q.messages(), q.dropped) == ([b"c" * 10, b"d" * 5, b"f" * 2], 3)


def test_the_members_own_messages_always_get_in_and_go_last():
    q = BroadcastQueue(retransmit_mult=4, max_count=2, max_bytes=1000)
    q.queue(b"mine-1", own=True)
    q.queue(b"relayed-1")
    q.queue(b"relayed-2")             # relayed-1 goes, though mine-1 is shorter and older
    assert (q.messages(), q.dropped) == ([b"relayed-2", b"mine-1"], 1)
    assert q.queue(b"mine-2", own=True) is True                 # relayed-2 goes
    assert q.queue(b"relayed-3") is False                       # only ours to drop: the relayed is
    assert q.queue(b"mine-3", own=True) is True                 # ours drop ours, the oldest first
    assert (q.messages(), q.dropped) == ([b"mine-3", b"mine-2"], 4)


# ------------------------------------------------------------ a node


def test_a_pinned_node_still_gossips_its_own_event_and_leave():
    """Sans-IO, four Serf nodes: a takes the attack (user events, then
    join intents), delivers the events here, queues nothing; its own event
    then reaches b, c and d by gossip, and its leave shows ``left`` (before:
    the event reached none, and the leave intent was dropped for the pinned
    intents, so memberlist's dead message made a ``failed`` everywhere)."""
    net = Net(factory=lambda settings, seed: SerfNode(settings, {}, seed=seed))
    net.cluster(list("abcd"))
    a = net["a"]
    before = a.stats()["serf_messages"]
    for make in (user_event, join_intent):
        for data in attack_datagrams(make):
            a.receive(data, ("127.0.0.9", 7946), net.now)
    stats = a.stats()
    assert [stats[k] for k in ("serf_messages", "events_queued", "intents_queued", "serf_broadcasts_dropped")] \
        == [before + 2 * EVENTS, 0, 0, 2 * EVENTS]
    a.user_event("mine", b"hello", net.now)
    net.run(net.now + 5.0)
    # the attack's events were delivered here all the same, ours too
    assert len([e for _t, e in net.events["a"] if isinstance(e, UserEventReceived)]) == EVENTS + 1
    for name in "bcd":
        assert [e.payload for _t, e in net.events[name] if isinstance(e, UserEventReceived)] == [b"hello"]
    a.leave(net.now)
    net.run(net.now + 10.0)
    assert [e for _t, e in net.events["a"] if isinstance(e, LeaveDone)] == [LeaveDone(True)]
    for name in "bcd":
        assert net[name].member("a").status == MemberStatus.LEFT


# ------------------------------------------------------------ running fronts


def _with_front(front, port, work):
    """``work(a, call)`` in a thread beside member a on ``front``; ``call(f)``
    runs ``f`` where a lives (on its loop for asyncio, awaiting what it returns)."""
    if front == "threads":
        with SerfService("a", "127.0.0.1", port, seed=1) as a:
            return work(a, lambda f: f())

    async def main():
        async with AsyncSerfService("a", "127.0.0.1", port, seed=1) as a:
            loop = asyncio.get_running_loop()

            async def on_loop(f):
                got = f()
                return await got if asyncio.iscoroutine(got) else got
            return await asyncio.to_thread(
                work, a, lambda f: asyncio.run_coroutine_threadsafe(on_loop(f), loop).result(30))
    return asyncio.run(asyncio.wait_for(main(), 60))


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_running_member_under_the_pinning_attack_reaches_its_peers_and_leaves(front):
    port = free_gossip_port("127.0.0.1")
    peers = [SerfService(n, f"127.0.0.{i}", free_gossip_port(f"127.0.0.{i}"), seed=i)
             for i, n in ((2, "b"), (3, "c"), (4, "d"))]
    got = {p.node.name: [] for p in peers}
    for p in peers:
        p.start()
        p.add_listener(lambda e, seen=got[p.node.name]: seen.append(e.payload)
                       if isinstance(e, UserEventReceived) else None)

    def work(a, call):
        for p in peers:
            assert p.join([("127.0.0.1", port)]).joined == 1
        wait_until(lambda: all(len([m for m in p.members() if m.status == MemberStatus.ALIVE]) == 4
                               for p in peers))
        # what a took as new, to deliver and gossip on (so sent again until
        # counted: loopback drops datagrams when a receive buffer is full)
        taken = lambda: sum(call(a.stats)[k] for k in ("events_rebroadcast", "intents_rebroadcast"))  # noqa: E731
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as evil:
            evil.bind(("127.0.0.9", 0))
            for make in (user_event, join_intent):
                want = taken()
                for data in attack_datagrams(make):
                    want += len(framing.split_messages(framing.open_packet(data, Limits()), Limits())[0])
                    wait_until(lambda: taken() >= want or evil.sendto(data, ("127.0.0.1", port)) < 0)
        call(lambda: a.user_event("mine", b"hello"))
        wait_until(lambda: all(seen == [b"hello"] for seen in got.values()), timeout=5.0)
        assert call(a.leave).ok
        wait_until(lambda: all({m.name: m.status for m in p.members()}["a"] == MemberStatus.LEFT for p in peers))
        return call(a.stats)

    try:
        stats = _with_front(front, port, work)
    finally:
        for p in peers:
            p.stop()
    assert stats["serf_broadcasts_dropped"] == 2 * EVENTS

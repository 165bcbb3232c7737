"""A join storm with forged deaths: invented members fill a member's table,
then a dead message for each leaves it full of failed entries. Failed and
left entries never keep a real newcomer out: a newcomer that finds the table
full takes the place of the entry that failed or left longest ago, in
memberlist's table (GossipEngine) and in Serf's (SerfMembers), and both
keep their failed and left entries within bounds of their own, oldest out,
each counted. Sans-IO at a reduced scale, then both fronts on loopback. The
full scale's CPU, before and after: bench/gossip_storm.py."""

import asyncio
import socket

import pytest

pytest.importorskip("msgpack")

from mcastmember.gossip.fronts.aio import AsyncSerfService  # noqa: E402
from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import messages  # noqa: E402
from mcastmember.gossip.memberlist.engine import GossipEngine  # noqa: E402
from mcastmember.gossip.memberlist.events import MemberJoined  # noqa: E402
from mcastmember.gossip.memberlist.layout import NodeState  # noqa: E402
from mcastmember.gossip.serf import MemberStatus  # noqa: E402
from mcastmember.gossip.serf import messages as serf_messages  # noqa: E402
from mcastmember.gossip.serf.members import SerfCore, SerfMembers  # noqa: E402
from mcastmember.gossip.serf.node import SerfMemberEvent, SerfNode, SerfSettings  # noqa: E402
from mcastmember.gossip.memberlist.settings import GossipSettings  # noqa: E402
from mcastmember._runtime.errors import ConfigurationError  # noqa: E402
from support import free_gossip_port  # noqa: E402

VSN = bytes((1, 5, 2, 2, 5, 5))
ATTACKER = ("127.0.0.3", 7946)
#: where the invented members claim to be: a closed port nobody answers on
GHOST_ADDR = bytes((127, 0, 0, 3))
GHOST_PORT = 9


def _alive(name, incarnation=1, addr=GHOST_ADDR, port=GHOST_PORT):
    return messages.encode(messages.Alive(incarnation=incarnation, node=name, addr=addr, port=port, vsn=VSN))


def _dead(name, incarnation=1, from_="liar"):
    return messages.encode(messages.Dead(incarnation=incarnation, node=name, from_=from_))


def _engine(**settings):
    engine = GossipEngine(GossipSettings(name="a", advertise_addr="127.0.0.1", **settings), seed=1)
    engine.start(0.0)
    engine.events()
    return engine


def _counts(stats, *keys):
    return {key: stats[key] for key in keys}


# ------------------------------------------------------- memberlist's table


def test_a_newcomer_takes_the_place_of_the_node_that_died_or_left_longest_ago():
    """max_nodes 256: 255 invented alives fill the table (10 more are
    refused), one leaves, the rest are killed (last first), and the first
    killed comes back alive. Each real newcomer is listed alive at once, in
    the place of the dead or left node whose state changed longest ago
    and is still dead or left: the one that left, then the first killed
    that stayed dead."""
    e = _engine(max_nodes=256)
    now = 0.0
    ghosts = [f"ghost-{i}" for i in range(265)]
    for name in ghosts:
        now += 0.001
        e.receive(_alive(name), ATTACKER, now)
    assert (len(e.table), e.stats()["nodes_refused"]) == (256, 10)
    now += 0.001
    e.receive(_dead("ghost-0", from_="ghost-0"), ATTACKER, now)        # a leave
    for name in reversed(ghosts[1:255]):
        now += 0.001
        e.receive(_dead(name), ATTACKER, now)
    now += 0.001
    e.receive(_alive("ghost-254", incarnation=2), ATTACKER, now)      # back: not dead any more
    assert (e.node("ghost-0").state, e.node("ghost-253").state, e.node("ghost-254").state) == (
        NodeState.LEFT, NodeState.DEAD, NodeState.ALIVE)
    e.events()

    e.receive(_alive("real-1", addr=bytes((127, 0, 0, 2)), port=7946), ("127.0.0.2", 7946), now)
    assert e.node("real-1").state == NodeState.ALIVE and e.node("ghost-0") is None
    e.receive(_alive("real-2", addr=bytes((127, 0, 0, 4)), port=7946), ("127.0.0.4", 7946), now)
    assert e.node("real-2").state == NodeState.ALIVE and e.node("ghost-253") is None
    assert e.node("ghost-252").state == NodeState.DEAD
    assert [ev.node.name for ev in e.events() if isinstance(ev, MemberJoined)] == ["real-1", "real-2"]
    assert sorted(m.name for m in e.members()) == ["a", "ghost-254", "real-1", "real-2"]
    assert len(e.table) == len(e.table.nodes) == len(e.table.by_name) == 256
    assert _counts(e.stats(), "nodes", "nodes_refused", "nodes_evicted", "dead_nodes_evicted") == {
        "nodes": 256, "nodes_refused": 10, "nodes_evicted": 2, "dead_nodes_evicted": 0}


def test_a_table_full_of_live_nodes_still_refuses_a_newcomer():
    e = _engine(max_nodes=8)
    for i in range(8):
        e.receive(_alive(f"ghost-{i}"), ATTACKER, 0.1)
    assert (len(e.table), e.node("ghost-7")) == (8, None)
    assert _counts(e.stats(), "nodes_refused", "nodes_evicted") == {"nodes_refused": 1, "nodes_evicted": 0}


def test_dead_and_left_nodes_are_bounded_on_their_own_oldest_out():
    """max_dead_nodes 16: of 100 nodes killed one after another, the last
    16 stay (until gossip_to_the_dead_time reaps them); the other 84 are
    dropped as they die, counted. Our own left entry is never dropped."""
    e = _engine(max_nodes=256, max_dead_nodes=16)
    for i in range(100):
        e.receive(_alive(f"ghost-{i}"), ATTACKER, 0.1)
    for i in range(100):
        e.receive(_dead(f"ghost-{i}"), ATTACKER, 0.2 + i * 0.001)
    assert sorted(n.name for n in e.table.nodes if n.state == NodeState.DEAD) == sorted(
        f"ghost-{i}" for i in range(84, 100))
    assert len(e.table) == 17
    assert _counts(e.stats(), "nodes_evicted", "dead_nodes_evicted") == {"nodes_evicted": 0,
                                                                         "dead_nodes_evicted": 84}
    e.leave(1.0)
    for i in range(100, 120):
        e.receive(_alive(f"ghost-{i}"), ATTACKER, 1.1)
        e.receive(_dead(f"ghost-{i}"), ATTACKER, 1.2)
    assert e.node("a").state == NodeState.LEFT and len(e.table) == 17
    assert e.stats()["dead_nodes_evicted"] == 104


def test_a_node_first_heard_of_at_incarnation_zero_is_dead_bounded_and_takes_no_place():
    """memberlist keeps a node first heard of at incarnation 0, dead: it
    counts as dead (bounded, evictable) and, never alive, evicts nothing."""
    e = _engine(max_nodes=4, max_dead_nodes=2)
    for i in range(3):
        e.receive(_alive(f"zero-{i}", incarnation=0), ATTACKER, 0.1 + i)
    assert sorted(n.name for n in e.table.nodes) == ["a", "zero-1", "zero-2"]
    e.receive(_alive("ghost", incarnation=1), ATTACKER, 5.0)
    e.receive(_alive("zero-3", incarnation=0), ATTACKER, 6.0)
    assert sorted(n.name for n in e.table.nodes) == ["a", "ghost", "zero-1", "zero-2"]
    e.receive(_alive("real", incarnation=1), ATTACKER, 7.0)
    assert sorted(n.name for n in e.table.nodes) == ["a", "ghost", "real", "zero-2"]
    assert _counts(e.stats(), "nodes_refused", "nodes_evicted", "dead_nodes_evicted") == {
        "nodes_refused": 1, "nodes_evicted": 1, "dead_nodes_evicted": 1}


def test_reaping_and_eviction_keep_the_table_consistent():
    """Dead nodes reaped after gossip_to_the_dead_time leave the ordering
    too: a later newcomer evicts none of them twice, and the probe order,
    the names and the count agree throughout."""
    e = _engine(max_nodes=32, gossip_to_the_dead_time=5.0, probe_interval=1.0)
    for i in range(31):
        e.receive(_alive(f"ghost-{i}"), ATTACKER, 0.1)
        e.receive(_dead(f"ghost-{i}"), ATTACKER, 0.2)
    e.receive(_alive("early"), ATTACKER, 0.3)                 # evicts ghost-0
    now = 0.3
    while now < 15.0:                                                 # the probe round wraps: reaped
        now += 0.05
        e.on_timer(now)
        e.outgoing(now)
        for stream in e.streams_to_open(now):
            e.stream_failed(stream.id, now, "connection refused")
    names = sorted(n.name for n in e.table.nodes)
    assert sorted(e.table.by_name) == names
    assert "ghost-5" not in names and e.stats()["nodes_reaped"] == 30
    for i in range(40):
        e.receive(_alive(f"late-{i}"), ATTACKER, now)
    assert len(e.table) == len(e.table.by_name) == 32
    assert _counts(e.stats(), "nodes_evicted", "nodes_refused") == {"nodes_evicted": 1, "nodes_refused": 10}


@pytest.mark.parametrize("name, value", [("max_dead_nodes", 0), ("max_dead_nodes", -1)])
def test_the_dead_node_bound_must_be_at_least_one(name, value):
    with pytest.raises(ConfigurationError, match=name):
        GossipSettings(name="a", **{name: value})


# ------------------------------------------------------------- Serf's table


def _serf_members(**bounds):
    members = SerfMembers("self", **bounds)
    members.node_join("self", 0)
    return members


def test_serf_keeps_failed_and_left_members_within_their_bounds_oldest_out():
    members = _serf_members(max_failed_members=3, max_left_members=2)
    for i in range(5):
        members.node_join(f"f{i}", 0)
        members.node_join(f"l{i}", 0)
    members.take_events()
    for i in range(5):
        members.node_leave(f"f{i}", 1 + i)
        members.clock.witness(10 + i)
        members.leave_intent(serf_messages.Leave(ltime=11 + i, node=f"l{i}"), 1 + i)
        members.node_leave(f"l{i}", 1 + i)
    assert (members.failed_members, members.left_members) == (["f2", "f3", "f4"], ["l3", "l4"])
    assert (members.failed_evicted, members.left_evicted, members.evicted) == (2, 3, 0)
    reaped = [e.name for e in members.take_events() if e.kind == "member-reap"]
    assert reaped == ["l0", "f0", "l1", "f1", "l2"]
    assert sorted(members.members) == ["f2", "f3", "f4", "l3", "l4", "self"]
    # a failed member that leaves moves to the end of the left ones, as Serf's list
    members.clock.witness(30)
    members.leave_intent(serf_messages.Leave(ltime=31, node="f2"), 7)
    assert (members.failed_members, members.left_members) == (["f3", "f4"], ["l4", "f2"])
    assert members.left_evicted == 4
    core = SerfCore("self", members)
    assert core.local_state().left_members == ["l4", "f2"]
    # back alive: neither failed nor left any more
    members.node_join("f3", 8)
    assert (members.failed_members, members.members["f3"].status) == (["f4"], MemberStatus.ALIVE)


def test_a_newcomer_to_a_full_serf_table_takes_the_place_of_the_oldest_failed_or_left():
    members = _serf_members(max_members=5)
    for name in ("a", "b", "c", "d"):
        members.node_join(name, 0)
    members.clock.witness(5)
    members.leave_intent(serf_messages.Leave(ltime=6, node="b"), 1)
    members.node_leave("b", 1)                           # left at 1
    members.node_leave("a", 2)                           # failed at 2
    members.take_events()
    members.node_join("n1", 3)                           # b left longest ago
    members.node_join("n2", 3)                           # then a
    members.node_join("n3", 3)                           # nobody failed or left: refused
    assert sorted(members.members) == ["c", "d", "n1", "n2", "self"]
    assert (members.evicted, members.refused) == (2, 1)
    assert [(e.kind, e.name) for e in members.take_events()] == [
        ("member-reap", "b"), ("member-join", "n1"), ("member-reap", "a"), ("member-join", "n2")]
    assert (members.failed_members, members.left_members) == ([], [])


def test_serf_never_evicts_itself():
    members = _serf_members(max_members=2, max_left_members=1)
    members.clock.witness(3)                             # our leave must be newer than our status time (0)
    members.local_leave(0)
    members.node_leave("self", 1)
    members.left()
    members.node_join("x", 2)
    members.node_join("y", 2)
    assert (sorted(members.members), members.left_members, members.refused) == (["self", "x"], ["self"], 1)


@pytest.mark.parametrize("name", ["max_failed_members", "max_left_members"])
def test_serfs_failed_and_left_bounds_must_be_at_least_one(name):
    with pytest.raises(ConfigurationError, match=name):
        SerfSettings(**{name: 0})


def test_a_serf_node_after_the_storm_lists_a_real_member_at_once():
    """The storm at max_nodes 64 through a SerfNode: 63 invented members,
    then a death for each; a real member's join (its push/pull) is listed
    alive at once by memberlist and Serf, each having dropped the invented
    member that died first."""
    victim = SerfNode(GossipSettings(name="victim", advertise_addr="127.0.0.1", max_nodes=64), seed=1)
    real = SerfNode(GossipSettings(name="real", advertise_addr="127.0.0.2"), seed=2)
    victim.start(0.0)
    for i in range(63):
        victim.receive(_alive(f"ghost-{i}"), ATTACKER, 0.1)
    for i in range(63):
        victim.receive(_dead(f"ghost-{i}"), ATTACKER, 0.2 + i * 0.001)
    victim.events()
    stats = victim.stats()
    assert (stats["nodes"], stats["serf_members"], stats["members.failed"]) == (64, 64, 63)
    real.start(1.0)
    real.join([("127.0.0.1", 7946)], 1.0)
    (stream,) = real.streams_to_open(1.0)
    real.stream_response(stream.id, victim.receive_stream(stream.data, ("127.0.0.2", 7946), 1.0), 1.0)
    assert victim.engine.node("real").state == NodeState.ALIVE
    assert victim.member("real").status == MemberStatus.ALIVE
    assert victim.engine.node("ghost-0") is None and victim.member("ghost-0") is None
    assert [(e.kind, e.member.name) for e in victim.events() if isinstance(e, SerfMemberEvent)] == [
        ("reaped", "ghost-0"), ("joined", "real")]
    assert _counts(victim.stats(), "nodes", "nodes_refused", "nodes_evicted", "serf_members", "members.failed",
                   "serf_members_refused", "serf_members_evicted", "serf_failed_evicted") == {
        "nodes": 64, "nodes_refused": 0, "nodes_evicted": 1, "serf_members": 64, "members.failed": 62,
        "serf_members_refused": 0, "serf_members_evicted": 1, "serf_failed_evicted": 0}


# ------------------------------------------------------------ both fronts

MAX_NODES = 16


GHOSTS = [f"ghost-{i}" for i in range(MAX_NODES - 1)]


def _send(port, parts):
    """One datagram of ``parts`` to the member at ``port``, from the attacker's address."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as evil:
        evil.bind((ATTACKER[0], 0))
        evil.sendto(framing.make_compound(parts), ("127.0.0.1", port))


def _statuses(members):
    return {m.name: m.status for m in members}


def _filled(members):
    return len(members) == MAX_NODES


def _killed(members):
    return list(_statuses(members).values()).count(MemberStatus.FAILED) == MAX_NODES - 1


def _both_listed(members):
    statuses = _statuses(members)
    return statuses.get("a") == statuses.get("b") == MemberStatus.ALIVE


def _front_stats(a):
    return _counts(a.stats(), "nodes", "members", "nodes_refused", "nodes_evicted", "serf_members",
                   "serf_members_evicted", "serf_members_refused")


AFTER = {"nodes": MAX_NODES, "members": 2, "nodes_refused": 0, "nodes_evicted": 1, "serf_members": MAX_NODES,
         "serf_members_evicted": 1, "serf_members_refused": 0}


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_after_a_storm_of_invented_members_killed_a_real_member_joins_at_once(front):
    """A third socket fills a's table (max_nodes 16) with invented members
    and kills them; b then joins a, and both list each other alive within
    seconds (before: a refused b while the failed entries lasted, a day in
    Serf's table)."""
    pa, pb = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")
    gossip = {"max_nodes": MAX_NODES}
    if front == "threads":
        with SerfService("a", "127.0.0.1", pa, seed=1, **gossip) as a, \
                SerfService("b", "127.0.0.2", pb, seed=2, **gossip) as b:
            _send(pa, [_alive(name) for name in GHOSTS])
            a.wait_for(_filled, 5)
            _send(pa, [_dead(name) for name in GHOSTS])
            a.wait_for(_killed, 5)
            assert b.join([("127.0.0.1", pa)]).joined == 1
            a.wait_for(_both_listed, 5)
            b.wait_for(_both_listed, 5)
            stats = _front_stats(a)
    else:
        async def main():
            async with AsyncSerfService("a", "127.0.0.1", pa, seed=1, **gossip) as a, \
                    AsyncSerfService("b", "127.0.0.2", pb, seed=2, **gossip) as b:
                _send(pa, [_alive(name) for name in GHOSTS])
                await a.wait_for(_filled, 5)
                _send(pa, [_dead(name) for name in GHOSTS])
                await a.wait_for(_killed, 5)
                assert (await b.join([("127.0.0.1", pa)])).joined == 1
                await a.wait_for(_both_listed, 5)
                await b.wait_for(_both_listed, 5)
                return _front_stats(a)
        stats = asyncio.run(asyncio.wait_for(main(), 60))
    assert stats == AFTER

"""The sans-IO gossip engine (mcastmember.gossip.memberlist.engine): several engines wired
through tests/gossipnet.py's deterministic network on a fake clock. No sockets,
no real time; pure Python (one implementation)."""

import math
import tracemalloc

import pytest
from hypothesis import given, settings, strategies as st

from gossipnet import Net, NodeState
from mcastmember._runtime.errors import ConfigurationError
from mcastmember.gossip import Limits
from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import messages
from mcastmember.gossip.memberlist.broadcasts import BroadcastQueue, retransmit_limit
from mcastmember.gossip.memberlist.engine import GossipEngine, push_pull_scale
from mcastmember.gossip.memberlist.events import JoinResult, MemberFailed, MemberJoined, MemberLeft, UserMessage
from mcastmember.gossip.memberlist.layout import MessageType
from mcastmember.gossip.memberlist.settings import GossipSettings
from mcastmember.gossip.memberlist.suspicion import Suspicion, SuspicionTimers, suspicion_timeout

LIMITS = Limits()


def _parts(packet, keys=()):
    """Every memberlist message in a datagram, decoded with the wire layer."""
    parts, cut = framing.split_messages(framing.open_packet(packet, LIMITS, keys=keys), LIMITS)
    assert cut == 0
    return [p[1:] if p[0] == MessageType.USER else messages.decode(p, LIMITS) for p in parts]


def _kinds(net, name):
    return [type(e).__name__ for _t, e in net.events[name]]


# ---------------------------------------------------------------- join


def test_join_of_five_nodes_converges_everyone_alive_at_incarnation_1():
    net = Net()
    names = ["a", "b", "c", "d", "e"]
    net.cluster(names, settle=3.0)
    for name in names:
        assert net.members(name) == names
        assert {n.name: (n.state, n.incarnation) for n in net[name].members()} == {
            n: (NodeState.ALIVE, 1) for n in names}
        joined = sorted(e.node.name for _t, e in net.events[name] if isinstance(e, MemberJoined))
        assert joined == names      # each once, ourselves included (memberlist's NotifyJoin)
    for name in names[1:]:
        assert [e for _t, e in net.events[name] if isinstance(e, JoinResult)] == [
            JoinResult(net.names["a"], True)]
    assert all(net[n].stats()["bad_input"] == 0 for n in names)


def test_join_to_an_unreachable_seed_reports_it():
    net = Net()
    a = net.add("a")
    assert a.join([("127.0.0.99", 7946)], 0.0) == 1
    net.run(1.0)
    assert [e for _t, e in net.events["a"] if isinstance(e, JoinResult)] == [
        JoinResult(("127.0.0.99", 7946), False, "connection failed")]
    assert net.members("a") == ["a"]


# ----------------------------------------------------- failure detection


def test_silent_node_goes_suspect_then_dead_after_lifeguards_timeout():
    """3 nodes: k = SuspicionMult - 2 = 2 confirmations wanted, but only
    n - 2 = 1 other could give one, so k = 0 and the timer is the minimum,
    4 x max(1, log10(3)) x 1 s = 4 s, from the first suspicion."""
    net = Net()
    net.cluster(["a", "b", "c"], settle=3.0)
    net.silence("c")
    net.run(30.0)
    suspected = {o: net.first(o, "c", NodeState.SUSPECT) for o in "ab"}
    dead = {o: net.first(o, "c", NodeState.DEAD) for o in "ab"}
    first = min(suspected, key=lambda o: suspected[o])
    assert dead[first] == pytest.approx(suspected[first] + 4.0, abs=1e-9)
    for o in "ab":
        assert [s for _t, s in net.states_seen(o, "c")] == [NodeState.ALIVE, NodeState.SUSPECT, NodeState.DEAD]
        assert [e.node.name for _t, e in net.events[o] if isinstance(e, MemberFailed)] == ["c"]
        assert net.members(o) == ["a", "b"]
    # A probe takes one interval: silence at 3 s, the direct ping times out,
    # the indirect one too, suspicion at the end of a probe of c.
    assert 3.0 < suspected[first] <= 6.0


def test_suspicion_shrinks_with_independent_confirmations():
    """5 nodes: k = 2, min 4 s, max 6 x 4 = 24 s; the accuser is no
    confirmation, each other accuser one; two reach the minimum."""
    assert suspicion_timeout(4, 5, 1.0) == 4.0
    assert suspicion_timeout(4, 100, 1.0) == 8.0
    sus = Suspicion("a", 2, 4.0, 24.0, start=10.0)
    assert sus.deadline == 34.0
    assert sus.confirm("a", 11.0) is False and sus.deadline == 34.0
    assert sus.confirm("b", 11.0) is True
    # log(2)/log(3) of the way from 24 to 4, floored to ms: 11.381 s after the start
    assert sus.deadline == pytest.approx(10.0 + 11.381, abs=1e-9)
    assert sus.confirm("b", 12.0) is False
    assert sus.confirm("c", 12.0) is True and sus.deadline == pytest.approx(14.0)
    assert sus.confirm("d", 12.0) is False      # enough: no more news to gossip
    assert Suspicion("a", 0, 4.0, 24.0, start=1.0).deadline == 5.0


def _unstarted_with(names):
    """An engine that has not started (so no probe, gossip nor push/pull
    tick: its next deadline is its timers' alone) knowing ``names`` alive."""
    e = GossipEngine(GossipSettings(name="me", advertise_addr="127.0.0.1"), seed=1)
    for i, name in enumerate(names):
        e.receive(messages.encode(messages.Alive(incarnation=1, node=name, addr=bytes([127, 0, 0, 2 + i]),
                                                        port=7946, vsn=e.settings.vsn())), ("127.0.0.2", 7946), 0.0)
    return e


def _suspect(e, node, by, now, incarnation=1):
    e.receive(messages.encode(messages.Suspect(incarnation=incarnation, node=node, from_=by)),
                     ("127.0.0.2", 7946), now)


def test_the_next_deadline_follows_suspicions_as_they_begin_move_end_and_expire():
    """4 nodes: k = 2, min 4 s, max 24 s. The soonest open suspicion (or
    relay) is the next deadline: after a confirmation moves one closer, a
    refutation ends one, one expires, and a relay's ack ends it."""
    e = _unstarted_with(["b", "c", "d", "e"])
    assert e.next_deadline() is None
    _suspect(e, "b", "c", 1.0)
    assert e.next_deadline() == 25.0
    _suspect(e, "d", "c", 2.0)
    _suspect(e, "d", "c", 2.5)                # the accuser again: no confirmation
    assert e.next_deadline() == 25.0
    _suspect(e, "d", "b", 3.0)                # confirmed once: 11.381 s from its start
    assert e.next_deadline() == pytest.approx(2.0 + 11.381, abs=1e-9)
    _suspect(e, "d", "e", 4.0)                # twice: the minimum
    assert e.next_deadline() == pytest.approx(6.0, abs=1e-9)
    _suspect(e, "d", "nobody", 4.5)           # refused: changes nothing
    assert e.next_deadline() == pytest.approx(6.0, abs=1e-9)
    e.receive(messages.encode(messages.Alive(incarnation=2, node="d", addr=bytes([127, 0, 0, 4]), port=7946,
                                                    vsn=e.settings.vsn())), ("127.0.0.4", 7946), 5.0)
    assert e.next_deadline() == 25.0          # d refuted: b's is the soonest again
    _suspect(e, "c", "e", 6.0)
    e.on_timer(24.9)
    assert e.next_deadline() == 25.0 and e.node("b").state == NodeState.SUSPECT
    e.on_timer(25.0)
    assert e.node("b").state == NodeState.DEAD and e.next_deadline() == 30.0
    relay = messages.IndirectPing(seq_no=77, target=bytes([127, 0, 0, 5]), port=7946, node="e", nack=True)
    e.receive(messages.encode(relay), ("127.0.0.3", 7946), 26.0)
    assert e.next_deadline() == 26.5          # the relay's probe timeout
    ((ping, _addr),) = [(d, a) for d, a in e.outgoing(26.0) if a == ("127.0.0.5", 7946)]
    seq = _parts(ping)[0].seq_no
    e.receive(messages.encode(messages.Ack(seq_no=seq)), ("127.0.0.5", 7946), 26.1)
    assert e.next_deadline() == 30.0
    e.on_timer(30.0)
    assert e.node("c").state == NodeState.DEAD and e.next_deadline() is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["begin", "confirm", "pop", "del"]), st.sampled_from("abcdefgh"),
                          st.sampled_from("pqrs"), st.integers(0, 3), st.booleans()), max_size=300))
def test_suspicion_timers_know_the_soonest_deadline_and_stay_bounded(ops):
    """The soonest deadline is the minimum over the open timers (the plain
    rule, a scan), after any mix of new, confirmed, replaced and removed
    ones; the heap behind it never holds over twice the timers plus 64."""
    timers, now = SuspicionTimers(), 0.0
    for op, name, by, k, look in ops:
        now += 0.25
        if op == "begin":
            timers[name] = (Suspicion(by, k, 4.0, 24.0, now), now)
        elif op == "confirm" and name in timers:
            timers.confirm(name, by, now)
        elif op == "pop":
            timers.pop(name, None)
        elif op == "del" and name in timers:
            del timers[name]
        if look:        # (not always: stale entries pile up between looks)
            assert timers.soonest() == min((sus.deadline for sus, _change in timers.values()), default=math.inf)
        assert len(timers._heap) <= 2 * len(timers) + 64


def test_in_a_five_node_cluster_confirmations_bring_death_to_the_minimum():
    net = Net()
    net.cluster(["a", "b", "c", "d", "e"], settle=3.0)
    net.silence("e")
    net.run(40.0)
    suspected = [net.first(o, "e", NodeState.SUSPECT) for o in "abcd"]
    dead = [net.first(o, "e", NodeState.DEAD) for o in "abcd"]
    # without confirmations the first would wait 24 s; they come, so 4 s plus
    # the time the second confirmation took to arrive, well under 24
    assert all(d is not None for d in dead)
    assert min(dead) - min(suspected) < 10.0


def test_suspected_live_node_refutes_with_a_higher_incarnation():
    net = Net()
    net.cluster(["a", "b", "c"], settle=3.0)
    b = net.names["b"]
    net.cut |= {(net.names["a"], b), (net.names["c"], b)}
    net.run(30.0, stop=lambda: net.first("a", "b", NodeState.SUSPECT) or net.first("c", "b", NodeState.SUSPECT))
    net.cut.clear()
    net.run(net.now + 10.0)
    assert net["b"].stats()["refutes"] == 1
    assert net["b"].incarnation == 2
    for o in "ac":
        assert net[o].node("b").incarnation == 2 and net[o].node("b").state == NodeState.ALIVE
        assert [s for _t, s in net.states_seen(o, "b")][-1] == NodeState.ALIVE
        assert not [e for _t, e in net.events[o] if isinstance(e, MemberFailed)]
    # refuting costs health (Lifeguard), successful probes earn it back
    assert net["b"].health_score == 0


def test_a_refutation_beats_the_accusations_incarnation():
    net = Net()
    a = net.add("a")
    accusation = messages.encode(messages.Suspect(incarnation=7, node="a", from_="z"))
    a.receive(accusation, ("127.0.0.9", 7946), 1.0)
    assert a.incarnation == 8 and a.health_score == 1
    queued = [messages.decode(m, LIMITS) for m in a.broadcasts.messages()]
    assert messages.Alive(incarnation=8, node="a", addr=bytes([127, 0, 0, 1]), port=7946,
                          vsn=bytes([1, 5, 2, 0, 0, 0])) in queued
    # an older accusation is ignored, a dead one refuted too
    a.receive(messages.encode(messages.Suspect(incarnation=7, node="a", from_="z")), ("127.0.0.9", 7946), 2.0)
    assert a.incarnation == 8
    a.receive(messages.encode(messages.Dead(incarnation=8, node="a", from_="z")), ("127.0.0.9", 7946), 3.0)
    assert a.incarnation == 9 and a.stats()["refutes"] == 2


def test_indirect_probe_saves_a_node_whose_direct_link_drops():
    """a and b cannot reach each other (UDP nor TCP): their probes of each
    other fail directly and succeed through the indirect pings of the others.
    (5 nodes: kRandomNodes draws 3n times at random, so with 3 nodes it
    finds no relay now and then, in memberlist as here.)"""
    net = Net()
    names = ["a", "b", "c", "d", "e"]
    net.cluster(names, settle=3.0)
    net.cut_both("a", "b")
    net.run(30.0)
    for o in names:
        for n in names:
            if n != o:
                assert [s for _t, s in net.states_seen(o, n)] == [NodeState.ALIVE], (o, n)
    a = net["a"].stats()
    assert a["indirect_pings_sent"] > 0 and a["probes_failed"] == 0
    assert a["streams_failed"] > 0                      # the TCP ping was cut too
    assert sum(net[n].stats()["indirect_pings_relayed"] for n in "cde") >= a["indirect_pings_sent"]


def _nack(src, dst, data):
    return any(isinstance(m, messages.Nack) for m in _parts(data))


def _first_failure(drop_nacks, score):
    net = Net()
    net.cluster(["a", "b", "c", "d", "e"], settle=3.0)
    net.drop = _nack if drop_nacks else None
    net["a"].awareness.score = score
    net.silence("e")
    net.run(60.0, stop=lambda: net["a"].stats()["probes_failed"] == 1)
    return net


def test_nacks_spare_an_unhealthy_prober_the_awareness_penalty():
    """a probes a dead node through 3 live relays that speak protocol >= 4.
    Each nack that comes back says a's own network is fine: with all 3 back
    the failed probe costs nothing, with none +3 (expected minus received),
    as probeNode does. The runs are identical until the nacks."""
    with_nacks, without = _first_failure(False, 4)["a"], _first_failure(True, 4)["a"]
    assert with_nacks.stats()["nacks_received"] == 3 and without.stats()["nacks_received"] == 0
    assert with_nacks.stats()["probes"] == without.stats()["probes"]
    assert without.health_score == with_nacks.health_score + 3
    assert with_nacks.health_score > 0                  # still slowed: nacks came in time


def test_at_full_health_nacks_come_too_late_as_in_memberlist():
    """A relay waits ProbeTimeout (0.5 s) after the prober's own 0.5 s, so at
    score 0 (probe interval 1 s) its nack lands just after the probe ended:
    memberlist 0.2.2 counts none and adds 3. Kept, to behave as the Go nodes."""
    net = _first_failure(False, 0)
    assert net["a"].health_score == 3 and net["a"].stats()["nacks_received"] == 0
    net.run(net.now + 0.0025)
    assert net["a"].stats()["nacks_received"] == 3


def test_without_nacks_indirect_pings_ask_for_none_and_relays_send_none():
    """nacks=False (plain SWIM, memberlist always asks peers of protocol >= 4):
    the indirect pings carry Nack false, so the relays never answer a nack,
    and a failed probe costs the prober 1 (no nacks were expected)."""
    net = Net()
    net.cluster(["a", "b", "c", "d", "e"], settle=3.0, nacks=False)
    net.silence("e")
    net.run(60.0, stop=lambda: net["a"].stats()["probes_failed"] == 1)
    assert net["a"].health_score == 1
    net.run(net.now + 1.0)                  # past when the nacks would come
    sent = [m for _t, src, _d, data in net.sent if src == net.names["a"] for m in _parts(data)]
    asked = [m for m in sent if isinstance(m, messages.IndirectPing)]
    assert len(asked) == 3 and all(m.nack is False for m in asked)
    assert not any(isinstance(m, messages.Nack) for _t, _s, _d, data in net.sent for m in _parts(data))
    assert net["a"].stats()["nacks_received"] == 0


def test_suspicion_confirmations_count_only_from_known_members():
    """Lifeguard shrinks a suspicion's timeout with each independent
    confirmation. A forger that signs each suspect with a new made-up name
    would drive every timeout to its minimum at once; only a member we know
    (and think alive or suspect) confirms. 5 nodes: k = 2, minimum 4 s,
    maximum 24 s; a's own failed probe of e is one real confirmation
    (11.4 s). memberlist counts any name."""
    a = GossipEngine(GossipSettings(name="a", advertise_addr="127.0.0.1"), seed=1)
    a.start(0.0)
    vsn = a.settings.vsn()
    src = ("127.0.0.9", 7946)
    for i, name in enumerate("bcde", 2):
        alive = messages.Alive(incarnation=1, node=name, addr=bytes([127, 0, 0, i]), port=7946, vsn=vsn)
        a.receive(framing.encode_packet(messages.encode(alive)), src, 0.0)
    for ghost in ("ghost1", "ghost2", "ghost3"):
        suspect = messages.Suspect(incarnation=1, node="e", from_=ghost)
        a.receive(framing.encode_packet(messages.encode(suspect)), src, 0.1)
    now = 0.1
    while now < 5.1:
        a.on_timer(now)
        a.outgoing(now)
        a.streams_to_open(now)
        now = min(a.next_deadline(), 5.1)
    assert a.node("e").state == NodeState.SUSPECT
    assert a.stats()["confirmations_refused"] == 2


def test_awareness_scales_the_probe_interval():
    net = Net()
    a = net.add("a")
    a.awareness.apply_delta(100)
    assert a.health_score == 7      # AwarenessMaxMultiplier 8: at most 7
    a.awareness.apply_delta(-2)
    assert a.awareness.scale(1.0) == 6.0


# ---------------------------------------------------------------- leave


def test_graceful_leave_propagates_as_left_not_failed():
    net = Net()
    net.cluster(["a", "b", "c"], settle=3.0)
    net["c"].leave(net.now)
    assert _kinds(net, "c")[-1:] != ["MemberLeft"]      # recorded on the next step
    net.run(net.now + 5.0)
    assert net["c"].leave_done
    for o in "abc":
        left = [e.node for _t, e in net.events[o] if isinstance(e, MemberLeft)]
        assert [(n.name, n.state, n.incarnation) for n in left] == [("c", NodeState.LEFT, 1)]
        assert not [e for _t, e in net.events[o] if isinstance(e, MemberFailed)]
    for o in "ab":
        assert net.members(o) == ["a", "b"]
    # the leave was a dead message about c from c, at its incarnation
    leaves = [m for _t, src, _dst, data in net.sent if src == net.names["c"] for m in _parts(data)
              if isinstance(m, messages.Dead)]
    assert leaves and set(map(repr, leaves)) == {repr(messages.Dead(incarnation=1, node="c", from_="c"))}


def test_broadcasts_sent_is_told_after_each_gossip_round_and_each_piggybacking_send():
    """The hook a layer above acts on finished broadcasts with (Serf's leave
    waits on its intent): called once a gossip round's datagrams or a
    message's datagram are out, never in the middle of a round."""
    calls = []

    def engine(settings, seed):
        def sent():
            calls.append((round(net.now, 3), made.stats()["packets_sent"]))
        made = GossipEngine(settings, seed=seed, broadcasts_sent=sent if settings.name == "a" else None)
        return made

    net = Net()
    net.factory = engine
    net.cluster(["a", "b", "c"], settle=3.1)
    calls.clear()
    before = net["a"].stats()["packets_sent"]
    net["a"].broadcast_user(b"x" * 40)
    net.run(4.05)
    # (time, a's datagrams since the message was queued) at each call: the
    # gossip rounds every 0.2 s (the message to b and c in the first two,
    # 4 = 4 x ceil(log10(4)) transmissions; then nothing to send), at 4.0 s
    # the probe's ping and that tick's round, then a's acks to b's and c's pings
    assert [(at, sent - before) for at, sent in calls] == [
        (3.2, 2), (3.4, 4), (3.6, 4), (3.8, 4), (4.0, 5), (4.0, 5), (4.001, 6), (4.001, 7)]


def test_left_and_dead_nodes_are_reaped_after_gossip_to_the_dead_time():
    net = Net()
    net.cluster(["a", "b", "c"], settle=3.0, gossip_to_the_dead_time=5.0)
    net["c"].leave(net.now)
    net.run(net.now + 2.0)
    net.silence("c")
    assert net["a"].node("c").state == NodeState.LEFT
    net.run(net.now + 10.0)
    assert net["a"].node("c") is None and net["a"].stats()["nodes_reaped"] == 1


def test_leave_alone_is_done_at_once():
    net = Net()
    a = net.add("a")
    a.leave(0.0)
    assert a.leave_done and a.node("a").state == NodeState.LEFT


# ----------------------------------------------------------- broadcasts


def test_retransmit_limit_scales_with_log_n():
    assert [retransmit_limit(4, n) for n in (1, 3, 9, 10, 99, 100)] == [4, 4, 4, 8, 8, 12]
    assert push_pull_scale(30.0, 32) == 30.0
    assert push_pull_scale(30.0, 64) == 60.0
    assert push_pull_scale(30.0, 65) == 90.0


def test_a_full_broadcast_queue_costs_little_beyond_its_messages():
    """A member of a large churning cluster holds its queue at the bound
    (4,096 messages; 10,000 simulated members hold 4 x 10^7): the queue's
    own bookkeeping per message stays under 160 bytes (142 on Python 3.11 to
    3.13, 153 on 3.10; 232-287 as a dict-backed record with a sort-key tuple
    each)."""
    msgs = [bytes(60 + i % 30) + i.to_bytes(4, "big") for i in range(4096)]
    names = [f"n{i}" for i in range(4096)]
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        q = BroadcastQueue(retransmit_mult=4, max_count=4096, max_bytes=4 * 1024 * 1024)
        for msg, name in zip(msgs, names):
            q.queue(msg, name)
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        if not tracing:
            tracemalloc.stop()
    assert len(q) == 4096
    assert held / 4096 < 160


def test_broadcast_queue_order_limits_and_invalidation():
    q = BroadcastQueue(retransmit_mult=2, max_count=10, max_bytes=1000)
    q.queue(b"x" * 10, "n1")
    q.queue(b"y" * 20, "n2")
    q.queue(b"z" * 10, "n3")
    # fewest transmits first, then the longest, then the newest
    assert q.messages() == [b"y" * 20, b"z" * 10, b"x" * 10]
    # room for two after the overhead: the longest and the newest
    assert q.get(2, 34, num_nodes=1) == [b"y" * 20, b"z" * 10]
    assert q.messages() == [b"x" * 10, b"y" * 20, b"z" * 10]
    q.queue(b"w" * 5, "n1")                          # news about n1 replaces the old
    assert q.messages() == [b"w" * 5, b"y" * 20, b"z" * 10]
    # limit 2 x ceil(log10(2)) = 2: sent twice, then gone
    assert q.get(2, 1000, num_nodes=1) == [b"w" * 5, b"y" * 20, b"z" * 10]
    assert q.messages() == [b"w" * 5]
    assert q.get(2, 1000, num_nodes=1) == [b"w" * 5]
    assert len(q) == 0


class _ScanQueue:
    """The queue's rules, stated the plain way (sort everything, take what
    fits in one pass): the reference the tiered queue must agree with."""

    def __init__(self, mult, max_count, max_bytes):
        self.mult, self.max_count, self.max_bytes = mult, max_count, max_bytes
        self.items, self.finished, self.dropped, self.next_id = [], [], 0, 0

    def order(self, item):
        return (item["transmits"], -len(item["msg"]), -item["id"])

    def remove(self, item):
        self.items.remove(item)
        if item["token"] is not None:
            self.finished.append(item["token"])
        if not self.items:
            self.next_id = 0

    def queue(self, msg, name, token):
        for old in [i for i in self.items if name is not None and i["name"] == name]:
            self.remove(old)
        self.next_id += 1
        new = {"msg": msg, "name": name, "id": self.next_id, "transmits": 0, "token": token}
        self.items.append(new)
        while len(self.items) > self.max_count or sum(len(i["msg"]) for i in self.items) > self.max_bytes:
            self.remove(max((i for i in self.items if i is not new), key=self.order))   # never the new one
            self.dropped += 1

    def get(self, overhead, limit, num_nodes, max_items):
        most, used, out = retransmit_limit(self.mult, num_nodes), 0, []
        for item in sorted(self.items, key=self.order):
            free = limit - used - overhead
            if free <= 0 or len(out) >= max_items:
                break
            if len(item["msg"]) <= free:
                used += overhead + len(item["msg"])
                out.append(item["msg"])
                if item["transmits"] + 1 >= most:
                    self.remove(item)
                else:
                    item["transmits"] += 1
        return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("queue"), st.integers(1, 60), st.sampled_from([None, "a", "b", "c", "d"]), st.booleans()),
    st.tuples(st.just("get"), st.integers(0, 6), st.integers(0, 150), st.sampled_from([1, 3, 9, 10, 99, 100]),
              st.integers(1, 6))), max_size=120),
    st.integers(2, 12), st.integers(60, 600))
def test_the_broadcast_queue_takes_what_sorting_everything_would(ops, max_count, max_bytes):
    """Its tiers give, call for call, the messages (and their order), the
    finished tokens, the drops, the count and the bytes of the plain rules."""
    q, ref = BroadcastQueue(retransmit_mult=1, max_count=max_count, max_bytes=max_bytes), _ScanQueue(1, max_count, max_bytes)
    for n, op in enumerate(ops):
        if op[0] == "queue":
            _, size, name, tokened = op
            msg = bytes([n % 256]) * size
            q.queue(msg, name, n if tokened else None)
            ref.queue(msg, name, n if tokened else None)
        else:
            _, overhead, limit, nodes, most = op
            assert q.get(overhead, limit, nodes, most) == ref.get(overhead, limit, nodes, most)
        assert q.messages() == [i["msg"] for i in sorted(ref.items, key=ref.order)]
        assert (q.finished, q.dropped, len(q), q.size) == (ref.finished, ref.dropped, len(ref.items),
                                                            sum(len(i["msg"]) for i in ref.items))


def test_a_user_broadcast_goes_out_exactly_the_retransmit_limit():
    """3 nodes: 4 x ceil(log10(3 + 1)) = 4 transmissions, piggybacked."""
    net = Net()
    net.cluster(["a", "b", "c"], settle=3.0)
    start = len(net.sent)
    net["a"].broadcast_user(b"hello")
    net.run(net.now + 5.0)
    carrying = [(src, dst) for _t, src, dst, data in net.sent[start:] if b"hello" in _parts(data)]
    assert len(carrying) == 4 and {src for src, _dst in carrying} == {net.names["a"]}
    for o in "bc":
        got = [e for _t, e in net.events[o] if isinstance(e, UserMessage)]
        assert got and {e.payload for e in got} == {b"hello"}
    assert len(net["a"].user_broadcasts) == 0


def test_get_broadcasts_hook_replaces_the_user_queue_and_gets_what_is_left():
    """Delegate.GetBroadcasts: asked with the per-message overhead (compound
    2 + user byte 1), the bytes left and the parts left; its bodies go out as
    type-8 messages after memberlist's own broadcasts."""
    asked = []

    def hook(overhead, limit, max_items):
        asked.append((overhead, limit, max_items))
        return [b"serf-1", b"serf-2"] if len(asked) == 1 else []

    a = GossipEngine(GossipSettings(name="a", advertise_addr="127.0.0.1"), seed=1, get_broadcasts=hook)
    a.start(0.0)
    a.broadcast_user(b"ignored")                  # the hook replaces user_broadcasts
    ping = messages.Ping(seq_no=7, node="a", source_addr=bytes([127, 0, 0, 2]), source_port=7946, source_node="b")
    a.receive(messages.encode(ping), ("127.0.0.2", 7946), 0.0)
    ((packet, _addr),) = a.outgoing(0.0)
    ack = messages.encode(messages.Ack(seq_no=7))
    alive = messages.encode(messages.Alive(incarnation=1, node="a", addr=bytes([127, 0, 0, 1]), port=7946,
                                           vsn=a.settings.vsn()))
    # udp 1400 - the ack - compound header 2; the alive took its size + 2
    assert asked == [(3, 1400 - len(ack) - 2 - (len(alive) + 2), 253)]
    assert _parts(packet)[0] == messages.Ack(seq_no=7) and _parts(packet)[2:] == [b"serf-1", b"serf-2"]
    assert len(a.user_broadcasts) == 1


def test_send_user_sends_the_message_alone():
    """SendToAddress (Serf's query acks, responses and relays) is
    rawSendMsgPacket: nothing piggybacked, so the answers to a query do not
    spend the transmissions its rebroadcast needs on the node that asked."""
    asked = []
    a = GossipEngine(GossipSettings(name="a", advertise_addr="127.0.0.1"), seed=1,
                     get_broadcasts=lambda *args: asked.append(args) or [b"serf-1"])
    a.start(0.0)
    queued = len(a.broadcasts)
    assert queued == 1                              # our alive
    a.send_user(("127.0.0.2", 7946), b"direct", 0.0)
    ((packet, addr),) = a.outgoing(0.0)
    assert (_parts(packet), addr, asked, len(a.broadcasts)) == ([b"direct"], ("127.0.0.2", 7946), [], queued)


# ---------------------------------------------------------------- bounds


def test_bounds_are_kept_and_counted():
    net = Net()
    net.cluster(["a", "b", "c", "d", "e"], settle=3.0)
    small = net.add("f", max_nodes=3, max_broadcasts=2, max_pending_acks=1, max_streams=1)
    small.join([net.names["a"]], net.now)
    net.run(net.now + 0.01)
    assert len(small.table) == 3 and small.stats()["nodes_refused"] >= 3
    for n in range(3):
        small.broadcast_user(b"m%d" % n, name=str(n))
    assert len(small.user_broadcasts) == 2 and small.stats()["user_broadcasts_dropped"] == 1
    known = next(n for n in small.table.nodes if n.name != "f")
    ind = messages.IndirectPing(seq_no=1, target=known.addr, port=known.port, node=known.name)
    for _ in range(3):
        small.receive(messages.encode(ind), ("127.0.0.1", 7946), net.now)
    assert small.stats()["acks_refused"] >= 2
    assert small.join([("127.0.0.50", 7946), ("127.0.0.51", 7946)], net.now) == 1
    assert small.stats()["streams_refused"] == 1


VICTIM = ("127.0.0.99", 7946)      # no member's address: a third party


def _to_victim(net, start):
    return [data for _t, _src, dst, data in net.sent[start:] if dst == VICTIM]


def test_a_forged_indirect_ping_sends_nothing_to_an_address_no_member_has():
    """memberlist pings whatever target an indirect ping names: one forged
    datagram sends a ping to a third party. Only a member at its own
    address is pinged for someone else."""
    net = Net()
    net.cluster(["a", "b", "c"], settle=3.0)
    a, start = net["a"], len(net.sent)
    forged = [messages.IndirectPing(seq_no=1, target=bytes([127, 0, 0, 99]), port=7946, node="x", nack=True),
              # a member's name at another address
              messages.IndirectPing(seq_no=2, target=bytes([127, 0, 0, 99]), port=7946, node="b", nack=True),
              # a member's address under another name
              messages.IndirectPing(seq_no=3, target=bytes([127, 0, 0, 2]), port=7946, node="x", nack=True)]
    for ind in forged:
        a.receive(messages.encode(ind), ("127.0.0.3", 7946), net.now)
    net.run(net.now + 1.0)
    assert _to_victim(net, start) == []
    assert (a.stats()["sends_refused"], a.stats()["indirect_pings_relayed"]) == (3, 0)
    # each asked for a nack: it goes at once to the requester, as no ack will come
    nacks = [m.seq_no for _t, src, dst, data in net.sent[start:] if src == net.names["a"]
             and dst == ("127.0.0.3", 7946) for m in _parts(data) if isinstance(m, messages.Nack)]
    assert nacks == [1, 2, 3]
    real = messages.IndirectPing(seq_no=4, target=bytes([127, 0, 0, 2]), port=7946, node="b")
    a.receive(messages.encode(real), ("127.0.0.3", 7946), net.now)
    assert (a.stats()["sends_refused"], a.stats()["indirect_pings_relayed"]) == (3, 1)


def test_a_ping_is_answered_at_its_sender_not_at_the_address_it_names():
    net = Net()
    net.cluster(["a", "b"], settle=3.0)
    a, start = net["a"], len(net.sent)
    ping = messages.Ping(seq_no=5, node="a", source_addr=bytes([127, 0, 0, 99]), source_port=7946, source_node="b")
    a.receive(messages.encode(ping), net.names["b"], net.now)
    net.run(net.now + 0.01)
    assert _to_victim(net, start) == []
    acks = [m for _t, src, dst, data in net.sent[start:] if src == net.names["a"] and dst == net.names["b"]
            for m in _parts(data) if isinstance(m, messages.Ack) and m.seq_no == 5]
    assert len(acks) == 1


def test_bad_packets_are_counted_by_reason():
    net = Net()
    a = net.add("a")
    a.receive(b"\x63garbage", ("127.0.0.9", 1), 0.0)
    a.receive(b"", ("127.0.0.9", 1), 0.0)
    stats = a.stats()
    assert stats["bad_input"] == 2 and stats["bad_input.bad_type"] == 1 and stats["bad_input.truncated"] == 1


def test_encrypted_cluster_joins_and_a_wrong_key_joins_nobody():
    key, wrong = bytes(range(16)), bytes(16)
    net = Net()
    net.cluster(["a", "b"], settle=3.0, keys=(key,))
    intruder = net.add("x", keys=(wrong,))
    intruder.join([net.names["a"]], net.now)
    net.run(net.now + 3.0)
    assert net.members("a") == ["a", "b"] and net.members("x") == ["x"]
    assert net["a"].stats()["streams_bad"] == 1
    assert [e.ok for _t, e in net.events["x"] if isinstance(e, JoinResult)] == [False]
    # what a sends is memberlist's encrypted packet: b's key opens it
    _t, src, _dst, data = next(s for s in net.sent if s[1] == net.names["a"])
    assert _parts(data, keys=(key,))


def test_settings_refuse_bad_values_in_one_sentence():
    with pytest.raises(ConfigurationError, match="needs a name"):
        GossipSettings(name="")
    with pytest.raises(ConfigurationError, match="not an IP address"):
        GossipSettings(name="a", advertise_addr="host")
    with pytest.raises(ConfigurationError, match="16, 24 or 32 bytes"):
        GossipSettings(name="a", keys=(b"short",))
    with pytest.raises(ConfigurationError, match="^tell_accused must be one of every, prober, not 'some'$"):
        GossipSettings(name="a", tell_accused="some")


# ------------------------------------------------------------------ wire


def test_outgoing_bytes_are_valid_memberlist_messages():
    net = Net()
    a = net.add("a", seed=1)
    b = net.add("b", start=False)
    a.join([net.names["b"]], 0.0)
    (stream,) = a.streams_to_open(0.0)
    (kind, pushed), used = framing.decode_stream(stream.data, LIMITS)
    assert kind == MessageType.PUSH_PULL and used == len(stream.data)
    assert pushed.join is True and pushed.user_state == b""
    assert [(n.name, n.addr, n.port, n.incarnation, n.state, n.vsn) for n in pushed.nodes] == [
        ("a", bytes([127, 0, 0, 1]), 7946, 1, NodeState.ALIVE, bytes([1, 5, 2, 0, 0, 0]))]
    b.start(0.0)
    reply = b.receive_stream(stream.data, net.names["a"], 0.0)
    assert a.stream_response(stream.id, reply, 0.0) is True
    a.outgoing(0.0)
    a.on_timer(1.0)                  # the first probe tick: b is the only one to probe
    packets = [p for p in a.outgoing(1.0) if isinstance(_parts(p[0])[0], messages.Ping)]
    assert [dst for _data, dst in packets] == [net.names["b"]]
    parts = _parts(packets[0][0])
    assert parts[0] == messages.Ping(seq_no=1, node="b", source_addr=bytes([127, 0, 0, 1]), source_port=7946,
                                     source_node="a")
    # what rides along is gossip: a's and b's alive messages
    assert {(m.node, m.incarnation) for m in parts[1:]} <= {("a", 1), ("b", 1)}
    # b answers with an ack of the same sequence number
    b.receive(packets[0][0], net.names["a"], 1.001)
    (ack_packet, dst), *_ = b.outgoing(1.001)
    assert dst == net.names["a"] and _parts(ack_packet)[0] == messages.Ack(seq_no=1)


def test_engine_schedules_from_the_time_it_is_given():
    engine = GossipEngine(GossipSettings(name="solo"), seed=3)
    assert engine.next_deadline() is None    # nothing scheduled before start
    with pytest.raises(RuntimeError, match="before it joins"):
        engine.join([("127.0.0.2", 7946)], 99.0)
    engine.set_meta(b"early", 99.0)
    engine.start(100.0)
    assert engine.next_deadline() == pytest.approx(100.2)   # the first gossip tick
    assert (engine.node("solo").meta, engine.incarnation) == (b"early", 1)


def test_tcp_ping_keeps_a_node_whose_udp_is_blocked_alive():
    """No datagram reaches or leaves b, TCP still works: every probe of b
    fails by UDP, directly and indirectly, and the TCP ping (protocol >= 3)
    reaches it, so nobody is suspected (memberlist logs the odd network)."""
    net = Net()
    net.cluster(["a", "b", "c", "d"], settle=3.0)
    b = net.names["b"]
    net.drop = lambda src, dst, data: b in (src, dst)
    net.run(20.0)
    assert [s for _t, o, n, s in net.history if _t > 3.0] == []
    assert net["a"].stats()["probes_failed"] == 0 and net["b"].stats()["probes_failed"] == 0
    assert net["a"].stats()["indirect_pings_sent"] > 0


def test_meta_change_is_an_update_with_a_new_incarnation():
    net = Net()
    net.cluster(["a", "b", "c"], settle=3.0)
    net["c"].set_meta(b"role=db", net.now)
    net.run(net.now + 2.0)
    for o in "ab":
        updates = [e.node for _t, e in net.events[o] if type(e).__name__ == "MemberUpdated"]
        assert [(n.name, n.meta, n.incarnation) for n in updates] == [("c", b"role=db", 2)]


def test_a_second_node_under_a_known_name_is_a_conflict_and_changes_nothing():
    net = Net()
    net.cluster(["a", "b"], settle=3.0)
    impostor = net.add("b")          # same name, address 127.0.0.3
    impostor.join([net.names["a"]], net.now)
    net.run(net.now + 3.0)
    assert net["a"].node("b").addr == "127.0.0.2" and net["a"].stats()["name_conflicts"] >= 1
    conflicts = [e for _t, e in net.events["a"] if type(e).__name__ == "NameConflict"]
    assert conflicts and (conflicts[0].existing.addr, conflicts[0].other.addr) == ("127.0.0.2", "127.0.0.3")


def test_push_pull_runs_once_per_interval_after_a_random_stagger():
    """The first periodic push/pull comes after a stagger under the interval
    plus the interval (pushPullTrigger), so each node makes exactly one in
    its first 2 intervals; below 33 nodes the interval is not stretched."""
    net = Net()
    net.cluster(["a", "b", "c"], settle=0.5, push_pull_interval=10.0)
    joins = {n: net[n].stats()["push_pulls"] for n in "abc"}
    net.run(19.999)
    assert {n: net[n].stats()["push_pulls"] - joins[n] for n in "abc"} == {"a": 1, "b": 1, "c": 1}


def test_failed_nodes_are_reaped_after_gossip_to_the_dead_time_and_not_before():
    net = Net()
    net.cluster(["a", "b", "c"], settle=3.0, gossip_to_the_dead_time=5.0)
    net.silence("c")
    net.run(40.0)
    dead_at = net.first("a", "c", NodeState.DEAD)
    assert net["a"].node("c") is None and net["a"].stats()["nodes_reaped"] == 1
    # reaped at a wrap of the probe round-robin more than 5 s after death
    assert len(net["a"].table) == 2 and dead_at is not None


def test_a_labelled_cluster_refuses_unlabelled_packets_and_streams():
    net = Net()
    net.cluster(["a", "b"], settle=3.0, label=b"dc1")
    outsider = net.add("x")
    outsider.join([net.names["a"]], net.now)
    net.run(net.now + 3.0)
    assert net.members("a") == ["a", "b"] and net.members("x") == ["x"]
    assert net["a"].stats()["bad_input.bad_label"] >= 1
    assert [e.ok for _t, e in net.events["x"] if isinstance(e, JoinResult)] == [False]

"""The gossip engine at scale, in the deterministic network simulator
(tests/gossipsim.py): 1,000 real engines on a virtual clock, with and without
Lifeguard. Virtual time only; pure Python (the gossip engine has one
implementation)."""

import pytest

from gossipsim import PLAIN_SWIM, Link, Sim, gossip_cluster

N = 1000


def _window(sim, start, end):
    sim.run(start)
    sim.reset_counters()
    sim.run(end)
    return sum(sim.datagrams)


def _failed(sim, subject):
    return sorted(o for _t, o, s, kind in sim.marks if s == subject and kind == "failed")


@pytest.mark.parametrize("lifeguard", [True, False], ids=["lifeguard", "swim"])
def test_a_crash_reaches_all_1000_members_and_the_quiet_traffic_is_one_probe_each(lifeguard):
    """No delay, no loss: a quiet second is one ping and one ack per member,
    exactly (the start-up gossip of our own alive is over by 2 s), as at 100
    members below: flat in N. A crash is then suspected, confirmed and
    gossiped dead to every other member, each marking it failed once and
    nobody else; never before memberlist's minimum suspicion timeout,
    4 x log10(1000) x 1 s = 12 s."""
    sim = gossip_cluster(N, seed=7, link=Link(delay=0.0), lifeguard=lifeguard)
    assert _window(sim, 2.0, 3.0) == 2 * N
    victim = "n123"
    sim.crash(sim.by_name[victim])
    for until in range(15, 60):
        sim.run(float(until))
        if len(_failed(sim, victim)) == N - 1:
            break
    assert _failed(sim, victim) == sorted(f"n{i}" for i in range(N) if i != 123)
    assert {s for _t, _o, s, _k in sim.marks} == {victim}
    first = min(t for t, _o, _s, _k in sim.marks)
    assert first >= 3.0 + 12.0
    engines = [node.engine for node in sim.nodes]
    assert sum(e.stats()["refutes"] for e in engines) == 0
    nacks = sum(e.stats()["nacks_received"] for e in engines)
    if lifeguard:
        assert nacks > 0                    # the relays answered the indirect probes of the dead
    else:
        assert nacks == 0 and all(e.health_score == 0 for e in engines)


def test_quiet_datagrams_at_100_members_are_one_probe_each_too():
    small = gossip_cluster(100, seed=7, link=Link(delay=0.0))
    assert _window(small, 2.0, 3.0) == 2 * 100


def test_the_same_seed_gives_the_same_run():
    """Loss, jitter and pauses draw from the seed: two runs, one history."""
    def run():
        sim = gossip_cluster(50, seed=3, link=Link(loss=0.2, delay=0.002, jitter=0.003))
        sim.at(2.0, sim.pause, 5, 3.0)
        sim.at(2.0, sim.crash, 9)
        sim.run(30.0)
        return sim.marks, sim.datagram_bytes, sim.stream_bytes, [n.engine.stats() for n in sim.nodes]
    assert run() == run()


def test_a_paused_member_hears_what_came_meanwhile_and_refutes():
    """A 4 s stall at 100 members: the others probe it, suspect it and tell
    it; on resume it reads its queued datagrams, refutes (a new incarnation)
    and nobody marks it failed: the suspicion timeout (8 s) outlasts the
    stall."""
    sim = gossip_cluster(100, seed=5)
    sim.run(3.0)
    sim.pause(42, 4.0)
    sim.run(30.0)
    engine = sim.nodes[42].engine
    assert engine.stats()["refutes"] >= 1 and engine.incarnation >= 2
    assert sim.marks == []
    assert all(n.engine.node("n42").incarnation == engine.incarnation for n in sim.nodes)


def test_a_partition_is_healed_by_one_join_across_it():
    """Two halves of 20 cut apart for 30 s mark each other failed. memberlist
    alone never probes the dead again; Serf's reconnect joins across, as
    here: the push/pull tells each side it was thought dead, each refutes,
    and the gossip brings all 40 back alive everywhere."""
    sim = gossip_cluster(40, seed=2)
    sim.run(2.0)
    sim.partition(set(range(20)))
    sim.run(32.0)
    assert all(len(n.engine.members()) == 20 for n in sim.nodes)
    sim.heal()
    sim.nodes[30].engine.join([sim.nodes[3].addr], sim.now)
    sim.touched(30)
    sim.run(60.0)
    assert all(len(n.engine.members()) == 40 for n in sim.nodes)
    assert all(n.engine.incarnation == 2 for n in sim.nodes)


def test_plain_swim_is_lifeguards_three_parts_off():
    assert PLAIN_SWIM == {"awareness_max_multiplier": 1, "suspicion_max_timeout_mult": 1, "nacks": False}
    assert isinstance(Sim(), Sim)

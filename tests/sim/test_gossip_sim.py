"""The gossip engine at scale, in the deterministic network simulator
(tests/sim/gossipsim.py): 1,000 real engines on a virtual clock, with and without
Lifeguard. Virtual time only; pure Python (the gossip engine has one
implementation; its hot path's two, compiled and pure, are held equal by
test_memberlist_matcher and the fuzzer), so CI runs these once, in its compiled pass."""

import json
import pathlib
import subprocess
import sys

import pytest

from gossipsim import PLAIN_SWIM, Link, Sim, gossip_cluster, tallies
from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import messages
from mcastmember.gossip.memberlist.layout import NodeState

pytestmark = pytest.mark.single_pass

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
    4 x log10(1000) x 1 s = 12 s. (Compression and push/pull off: LZW and
    merging 1,000-node states are most of the engines' time, and neither
    changes what is checked here.)"""
    sim = gossip_cluster(N, seed=7, link=Link(delay=0.0), lifeguard=lifeguard, enable_compression=False,
                         push_pull_interval=0.0)
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


def test_by_type_counts_each_datagram_by_its_messages():
    """A quiet second at 100 members is one probe each: 100 pings and 100
    acks, each alone in its datagram; under loss every datagram and every
    byte sent is counted once, by its first message, and the broadcasts
    piggybacked inside are counted as parts."""
    sim = gossip_cluster(100, seed=7, link=Link(delay=0.0), enable_compression=False, push_pull_interval=0.0)
    sim.run(2.0)
    sim.by_type = tallies()
    _window(sim, 2.0, 3.0)
    sent = sum(sim.datagram_bytes)
    assert sim.by_type["datagrams"] == sim.by_type["parts"]
    assert {k: v[0] for k, v in sim.by_type["datagrams"].items()} == {"ping": 100, "ack": 100}
    assert sum(v[1] for v in sim.by_type["datagrams"].values()) == sent
    assert sim.by_type["streams"] == {}

    lossy = gossip_cluster(50, seed=3, link=Link(loss=0.2, delay=0.002, jitter=0.003))
    lossy.by_type = tallies()
    _window(lossy, 3.0, 13.0)
    datagrams, parts = lossy.by_type["datagrams"], lossy.by_type["parts"]
    assert sum(v[0] for v in datagrams.values()) == sum(lossy.datagrams)
    assert sum(v[1] for v in datagrams.values()) == sum(lossy.datagram_bytes)
    assert sum(v[1] for v in lossy.by_type["streams"].values()) == sum(lossy.stream_bytes)
    assert parts["alive"][0] > datagrams["alive"][0] and parts["nack"][0] == datagrams["nack"][0]
    assert set(lossy.by_type["streams"]) <= {"push_pull", "ping", "ack"}


def _bench_table_in_docs(rows: str, *options: str) -> str:
    """bench/gossip.py's table of bench/``rows``, checked to be in
    bench/README.md (where the figures' method is) as printed; returns it."""
    root = pathlib.Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, str(root / "bench" / "gossip.py"), "--table",
                          str(root / "bench" / rows), *options],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() in (root / "bench" / "README.md").read_text()
    return out


def test_the_docs_breakdown_is_the_bench_table_of_its_rows():
    """bench/README.md's by-type breakdown is what bench/gossip.py prints
    from bench/gossip-by-type.json, the rows whose figures the text quotes."""
    out = _bench_table_in_docs("gossip-by-type.json", "--by-type")
    assert "| refutations in the window | 21, 14, 15, 22, 15 | 14, 15, 12, 17, 14 |" in out


def test_the_docs_table_is_the_bench_table_of_its_rows():
    """bench/README.md's scale table is what bench/gossip.py prints from
    bench/gossip-results.json (the 10,000-member rows included)."""
    out = _bench_table_in_docs("gossip-results.json")
    assert "| 10,000 | lifeguard | 0% | 0% | 0% | 18.0 / 18.3 / 18.5 |" in out


def test_the_docs_tell_accused_table_is_the_bench_table_of_its_rows():
    """bench/README.md's comparison of the two tell_accused settings is what
    bench/gossip.py prints from bench/gossip-tell-accused.json (a 10,000-member
    row included)."""
    out = _bench_table_in_docs("gossip-tell-accused.json")
    assert "| 1,000 | lifeguard, prober tells | 30% | 0% | 0% | 15.5 / 16.0 / 17.3 | 523 |" in out
    assert "| 10,000 | lifeguard, prober tells | 0% | 5% | 0% | 18.0 / 19.2 / 23.0 | 0 | 3.5 / 7.7 | 12 |" in out


def test_the_breakdowns_short_run_ends_before_the_leave_and_says_so(tmp_path):
    """The docs' by-type command follows the crashes for 1 s only, so the
    leave (at 3 s) never happens: its spread is None, not an error, and the
    row carries the counters behind the traffic."""
    root = pathlib.Path(__file__).resolve().parents[2]
    out = tmp_path / "rows.json"
    subprocess.run([sys.executable, str(root / "bench" / "gossip.py"), "--sizes", "30", "--conditions", "0.1:0",
                    "--protocols", "lifeguard", "--traffic", "2", "--seconds", "1", "--by-type", "--model-sizes=",
                    "--json", str(out)], capture_output=True, text=True, check=True)
    (row,) = json.loads(out.read_text())
    assert row["leave_99_s"] is None and row["traffic_seconds"] == 2.0 and row["seconds"] == 1.0
    causes = row["causes_per_member_s"]
    assert set(causes) == {"probes", "probes_failed", "probes_degraded", "indirect_pings_sent", "nacks_received",
                           "suspects", "suspects_told", "refutes"}
    assert causes["suspects_told"] == causes["suspects"]        # tell_accused="every"


def test_a_table_record_is_slotted():
    """Every member keeps a record of every other (10^8 of them when 10,000
    members are simulated in one process): no dict per record, and the
    converged tables share one name and address object per member."""
    sim = gossip_cluster(3)
    records = [n.engine.table.get("n0") for n in sim.nodes[1:]]
    assert not hasattr(records[0], "__dict__")
    assert records[0].name is records[1].name and records[0].addr is records[1].addr


def test_refutations_under_loss_keep_one_copy_of_each_address_and_queued_message():
    """Under 30% loss members refute again and again; each refutation reaches
    every table and most queues. The tables keep the address and versions
    objects they share (only the incarnation changed) and the queues hold
    one copy of each message: 10,000 members at this loss need both to fit
    in memory (a copy per record and per queue would be 7 and 4 GB more)."""
    sim = gossip_cluster(200, seed=2, link=Link(loss=0.3))
    sim.run(6.0)
    assert sum(n.engine.stats()["refutes"] for n in sim.nodes) == 70
    records = [r for n in sim.nodes for r in n.engine.table.nodes]
    assert sum(r.incarnation > 1 for r in records) == 12_274         # records a refutation reached
    # one shared address per member plus each member's own record (before: 12,572)
    assert len({id(r.addr) for r in records}) == 400
    assert len({id(r.vsn) for r in records}) == 201                # (before: 12,407)
    queued = [m for n in sim.nodes for m in n.engine.broadcasts.messages()]
    assert len(queued) == 1_710 and len(set(queued)) == len({id(m) for m in queued}) == 31


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
    """A 6 s stall at 100 members: the others probe it, suspect it and tell
    it; on resume it reads its queued datagrams, refutes (a new incarnation)
    and nobody marks it failed: the suspicion timeout (8 s) outlasts the
    stall."""
    sim = gossip_cluster(100, seed=5)
    sim.run(3.0)
    sim.pause(42, 6.0)
    sim.run(30.0)
    engine = sim.nodes[42].engine
    assert engine.stats()["refutes"] == 1 and engine.incarnation == 2
    assert sum(n.engine.stats()["suspects"] for n in sim.nodes) == 99      # each other member, once
    assert sim.marks == []
    assert all(n.engine.node("n42").incarnation == engine.incarnation for n in sim.nodes)


@pytest.mark.parametrize("tell, tellers, heard", [("every", 99, 178), ("prober", 1, 81)])
def test_who_tells_a_stalled_member_of_its_suspicion(tell, tellers, heard):
    """The same 6 s stall. Gossip carries the suspicion to n42 in both
    settings, and whoever probes it sends it with the ping (Lifeguard's
    buddy system), as memberlist does. Beyond memberlist, with "every" each
    of the 99 members that starts suspecting n42 also sends it straight (N
    datagrams at the accused, each with broadcasts piggybacked); with
    "prober" only the one whose own probe failed (n16) does, and n42 hears
    fewer than half the packets from the stall's start on."""
    sim = gossip_cluster(100, seed=5, tell_accused=tell)
    sim.run(3.0)
    engine = sim.nodes[42].engine
    before = engine.stats()["packets_received"]
    sim.pause(42, 6.0)
    sim.run(30.0)
    assert engine.stats()["refutes"] == 1 and sim.marks == []
    told = [(n.name, n.engine.stats()["suspects_told"]) for n in sim.nodes if n.engine.stats()["suspects_told"]]
    assert len(told) == tellers and {count for _name, count in told} == {1}
    if tell == "prober":
        assert told == [("n16", 1)]
    assert engine.stats()["packets_received"] - before == heard


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


# ------------------------------------------------------------------ abuse
# An attacker without a member's engine: crafted datagrams and streams from
# an address no member knows, into a running simulated cluster.

ATTACKER = ("10.255.0.1", 7946)


def _packet(*msgs):
    parts = [messages.encode(m) for m in msgs]
    return framing.encode_packet(parts[0] if len(parts) == 1 else framing.make_compound(parts))


def _flood(sim, make, every, until, targets):
    """Every ``every`` s until ``until``: ``make()``'s packet to each
    target; returns how many rounds were sent."""
    rounds = 0
    while sim.now + every <= until:
        sim.run(sim.now + every)
        data = make()
        for j in targets:
            sim.inject(data, ATTACKER, j)
        rounds += 1
    return rounds


@pytest.mark.parametrize("tell, told_of_hearsay", [("every", 1), ("prober", 0)])
def test_who_accuses_in_its_own_name_tells_the_accused_under_either_setting(tell, told_of_hearsay):
    """n5 hears a suspicion of n1 accused by n2 (hearsay): only "every"
    tells n1. Then a push/pull lists n3 suspect and n4 dead, which makes n5
    their accuser (memberlist's mergeState): both settings tell them, one
    datagram each, and they refute within a round trip."""
    sim = gossip_cluster(20, seed=4, tell_accused=tell)
    sim.run(2.0)
    n5 = sim.nodes[5].engine
    sim.inject(_packet(messages.Suspect(incarnation=1, node="n1", from_="n2")), ATTACKER, 5)
    sim.run(sim.now + 0.01)
    assert (n5.stats()["suspects"], n5.stats()["suspects_told"]) == (1, told_of_hearsay)
    vsn = n5.settings.vsn()
    listed = [messages.PushNodeState(name=f"n{i}", addr=bytes([10, 0, 0, i + 1]), port=7946, incarnation=1,
                                     state=state, vsn=vsn) for i, state in ((3, NodeState.SUSPECT),
                                                                             (4, NodeState.DEAD))]
    n5.receive_stream(framing.encode_stream(messages.encode_push_pull(messages.PushPull(False, listed, b""))),
                      ATTACKER, sim.now)
    assert (n5.stats()["suspects"], n5.stats()["suspects_told"]) == (3, told_of_hearsay + 2)
    assert [n5.node(f"n{i}").state for i in (3, 4)] == [NodeState.SUSPECT] * 2
    sim.touched(5)
    sim.run(sim.now + 0.01)     # a round trip
    assert [sim.nodes[i].engine.stats()["refutes"] for i in (3, 4)] == [1, 1]
    assert [n5.node(f"n{i}").state for i in (3, 4)] == [NodeState.ALIVE] * 2


def _bounded(sim):
    for node in sim.nodes:
        e, s = node.engine, node.engine.settings
        assert len(e.table) <= s.max_nodes and len(e.broadcasts) <= s.max_broadcasts
        assert e.broadcasts.size <= s.max_broadcast_bytes and e.stats()["suspects"] >= 0


def test_a_flood_of_suspicions_about_everyone_removes_nobody():
    """Suspect messages about each of 50 members, at the incarnation they
    have, each signed with a new made-up name, to every member ten times a
    second for 5 s: each accused hears of it and refutes once (incarnation
    2), the rest are stale; the made-up confirmations are refused (they
    would cut the suspicion timeout to its minimum, and the one member in
    a thousand the refutation's gossip misses would mark its node failed).
    Nobody is marked failed, and every queue stays within its bound."""
    sim = gossip_cluster(50, seed=4)
    sim.run(2.0)
    victims = [f"n{i}" for i in range(50)]
    lies = iter(range(10**9))

    def make():
        k = next(lies)
        return _packet(*(messages.Suspect(incarnation=1, node=v, from_=f"liar{k}") for v in victims[:25]),
                       *(messages.Suspect(incarnation=1, node=v, from_=f"liar{k}") for v in victims[25:]))
    _flood(sim, make, 0.1, 7.0, range(50))
    sim.run(50.0)
    assert sim.marks == []
    assert sum(n.engine.stats()["confirmations_refused"] for n in sim.nodes) > 50 * 49
    assert all(n.engine.incarnation == 2 for n in sim.nodes)
    assert all(len(n.engine.members()) == 50 for n in sim.nodes)
    assert sum(n.engine.stats()["refutes"] for n in sim.nodes) == 50
    _bounded(sim)


def test_replayed_old_incarnations_change_nothing_and_a_stranger_cannot_take_a_name():
    """After every member refuted once (incarnation 2), replays of their
    incarnation-1 dead, suspect and alive messages are stale: nobody is
    marked failed or moves. An alive at a new incarnation from another
    address is a name conflict, counted and refused."""
    sim = gossip_cluster(30, seed=6)
    sim.run(2.0)
    for j in range(30):
        sim.inject(_packet(messages.Suspect(incarnation=1, node=f"n{j}", from_="x")), ATTACKER, j)
    sim.run(10.0)
    assert all(n.engine.incarnation == 2 for n in sim.nodes)
    vsn = sim.nodes[0].engine.settings.vsn()

    def make():
        return _packet(*(messages.Dead(incarnation=1, node=f"n{v}", from_="x") for v in range(30)),
                       *(messages.Suspect(incarnation=1, node=f"n{v}", from_="x") for v in range(30)),
                       messages.Alive(incarnation=9, node="n7", addr=bytes([10, 255, 0, 1]), port=7946, vsn=vsn))
    _flood(sim, make, 0.2, 20.0, range(30))
    sim.run(30.0)
    assert sim.marks == []
    assert all(n.engine.node("n7").addr == "10.0.0.8" for n in sim.nodes)
    assert sum(n.engine.stats()["name_conflicts"] for n in sim.nodes) == 30 * 50     # n7 too
    assert all(n.engine.incarnation == 2 for n in sim.nodes)


def test_a_storm_of_joins_and_a_huge_push_pull_stay_within_the_table_bound():
    """An alive storm with 100 new names a second, then a push/pull of 20,000
    invented nodes (refused at its header: more than a table holds), into 30
    members whose tables hold 200: the tables stop at 200 (refusals
    counted), the queues at their bounds, the invented
    nodes are probed, found dead and reaped, and no live member is ever
    marked failed; afterwards the tables are back to the 30 real members."""
    sim = gossip_cluster(30, seed=8, max_nodes=200, max_broadcasts=512)
    sim.run(2.0)
    vsn = sim.nodes[0].engine.settings.vsn()
    names = iter(range(10**9))

    def fake(k):
        return dict(incarnation=1, addr=bytes([10, 200 + (k >> 16), k >> 8 & 255, k & 255]), port=7946, vsn=vsn)

    def make():
        return _packet(*(messages.Alive(node=f"fake{k}", **fake(k)) for k in [next(names) for _ in range(10)]))
    _flood(sim, make, 0.1, 12.0, [0, 1, 2])
    huge = messages.PushPull(False, [messages.PushNodeState(name=f"fake{k}", state=NodeState.ALIVE, **fake(k))
                                     for k in range(20_000, 40_000)], b"")
    reply = sim.nodes[5].engine.receive_stream(framing.encode_stream(messages.encode_push_pull(huge)), ATTACKER,
                                              sim.now)
    # more nodes than the table can hold: refused at its header, none of them read
    (_kind, refusal), _used = framing.decode_stream(reply, sim.nodes[5].engine.settings.limits)
    assert refusal.error == "push/pull announces 20000 nodes, over 200"
    assert sim.nodes[5].engine.stats()["bad_input.too_many"] == 1
    sim.touched(5)
    _bounded(sim)
    assert len(sim.nodes[5].engine.table) <= 200
    sim.run(30.0)
    _bounded(sim)
    assert max(len(n.engine.table) for n in sim.nodes) == 200
    sim.run(300.0)
    _bounded(sim)
    assert [m for m in sim.marks if m[3] == "failed" and not m[2].startswith("fake")] == []
    assert all(sorted(m.name for m in n.engine.members()) == sorted(f"n{i}" for i in range(30))
               for n in sim.nodes)
    assert all(len(n.engine.table) == 30 for n in sim.nodes)


def test_with_a_key_an_outsiders_dead_messages_are_dropped_and_counted():
    """A dead message at a member's current incarnation marks it failed at
    once (memberlist's rule: the member refutes when it hears). With
    encryption on, an outsider without the key gets nothing in: every
    datagram is refused and counted."""
    sim = gossip_cluster(30, seed=9, keys=(bytes(range(16)),))
    sim.run(2.0)

    def make():
        return _packet(*(messages.Dead(incarnation=1, node=f"n{v}", from_="x") for v in range(30)))
    rounds = _flood(sim, make, 0.2, 6.0, range(30))
    sim.run(10.0)
    assert sim.marks == []
    assert all(n.engine.stats()["bad_input.bad_encryption"] == rounds == 19 for n in sim.nodes)


@pytest.mark.parametrize("tell", ["every", "prober"])
@pytest.mark.parametrize("lifeguard", [True, False], ids=["lifeguard", "swim"])
def test_suspicions_during_a_join_storm_reach_the_accused_who_refutes(lifeguard, tell):
    """Two real members; an attacker fills a's table with 250 invented nodes
    (a join storm, so its gossip reaches b about once in 80 tries) and keeps
    accusing b at b's current incarnation, signed by invented names a now
    knows (confirmations that cut the timeout to its minimum). b must hear
    each accusation in time to refute: a tells the accused directly (one
    datagram, to a member it already has). With tell_accused="every" it
    does for every suspicion it starts; with "prober", once its probes of
    invented nodes fail (two of its latest eight) its own gossip is in
    doubt, and it tells b of the open suspicion then and of each new one.
    b is never marked failed and stays in a's table."""
    sim = gossip_cluster(2, seed=11, max_nodes=256, lifeguard=lifeguard, tell_accused=tell)
    sim.run(2.0)
    a, b = sim.nodes[0].engine, sim.nodes[1].engine
    vsn = a.settings.vsn()
    names = iter(range(10**9))

    def join_storm():
        return _packet(*(messages.Alive(node=f"fake{k}", incarnation=1, port=7946, vsn=vsn,
                                        addr=bytes([10, 200, k >> 8 & 255, k & 255]))
                         for k in [next(names) for _ in range(25)]))
    _flood(sim, join_storm, 0.1, 3.5, [0])
    assert len(a.table) == 256
    liars = iter(range(10**9))

    def accuse():
        return _packet(*(messages.Suspect(incarnation=b.incarnation, node="n1", from_=f"fake{next(liars) % 250}")
                         for _ in range(4)))
    _flood(sim, accuse, 0.1, 40.0, [0])
    sim.run(60.0)
    assert _failed(sim, "n1") == []
    assert a.node("n1").state == NodeState.ALIVE
    assert b.stats()["refutes"] >= 1 and a.stats()["suspects_told"] >= b.stats()["refutes"]

#!/usr/bin/env python3
"""A join storm with forged deaths against one Serf member, then a real join.

    python bench/gossip_storm.py [--alive 10000] [--more 8000] [--revive 0] [--rate 2000] [--settle 60]
                                 [--json out.json]

One sans-IO SerfNode (default settings: a table of 16,384 nodes) on a fake
clock. An outsider sends it, one message a datagram at ``--rate`` datagrams
a second: alives of ``--alive`` invented names, ``--more`` further ones,
then a dead message for every invented name (a forged death at the
incarnation the alive gave). The node runs its timers all along (probes of
the invented nodes, gossip, push/pull; streams to the invented addresses
fail at once). Then a real second member joins by push/pull, and the bench
reports whether the victim lists it alive at once, in memberlist's table and
in Serf's members, with the tables' sizes and the counters of the bounds
(``--revive N`` first brings N of the dead back alive at a higher
incarnation).

CPU: time.process_time() over the storm (the victim's work, the bench's
packet making excluded: the datagrams are made beforehand), and per
datagram. Nothing touches the network (the node is sans-IO), so the run is
the same on any machine but for the timings; compare figures within one
run or one machine.

``--settle`` seconds of the victim's timers follow (probe rounds over what
its table kept, gossip, push/pull, Serf's reaping), their CPU reported apart.

What it shows (2 noisy cores shared with other work; the full scale, 10,000
+ 8,000 alives and 18,000 deaths at 2,000 datagrams a second, 60 s after;
the same tree with and without the bounds, the best of 3-5 runs each):

- before failed and left entries could make room: 16,383 dead invented
  nodes filled memberlist's table (1,617 alives refused) and Serf kept
  16,383 of them failed, for the 24 h reconnect timeout; the real member was
  refused by both (memberlist until its 30 s reaping, Serf for a day).
  CPU: 1.04 s for the storm (29 us a datagram), 0.67 s for the 60 s after
  (pure Python: 1.05 s and 0.83 s).
- now: dead and left nodes beyond ``max_dead_nodes`` (4,096), and failed
  members beyond ``max_failed_members`` (4,096), are dropped oldest first as
  they die, counted (12,287 in each table, each a ``reaped`` event in
  Serf's); an alive newcomer that finds a table full takes the place of its
  oldest dead or left entry. The real member is listed alive at once by
  both. CPU: 1.19 s for the storm (+15 %: the early drops and their events),
  0.38 s for the 60 s after (-45 %: a table of 4,097, not 16,384) (pure
  Python: 1.18 s and 0.47 s).

A comparison with Debian's ``serf`` agent under the same storm needs it in a
network namespace; that belongs to the attack harness (bench/gossip_attacks.py).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

from mcastmember.gossip.memberlist import messages
from mcastmember.gossip.memberlist.layout import NodeState
from mcastmember.gossip.serf.layout import MemberStatus
from mcastmember.gossip.serf.node import SerfNode
from mcastmember.gossip.memberlist.settings import GossipSettings

VICTIM = ("127.0.0.1", 7946)
REAL = ("127.0.0.2", 7946)
ATTACKER = ("127.0.0.3", 7946)
VSN = bytes((1, 5, 2, 2, 5, 5))
#: how often the fake clock runs the victim's timers
TICK = 0.01


def storm_datagrams(alive: int, more: int, revive: int) -> list[bytes]:
    """One message a datagram: alives of ``alive + more`` invented names,
    then a dead message for each (at the alive's incarnation, 1), then
    alives at incarnation 2 for the first ``revive`` of them (the dead
    come back: each leaves Serf's failed members)."""
    names = [f"ghost-{i}" for i in range(alive + more)]

    def alive_of(i: int, incarnation: int) -> bytes:
        return messages.encode(messages.Alive(incarnation=incarnation, node=names[i], port=7946, vsn=VSN,
                                              addr=bytes((10, 9, i >> 8 & 255, i & 255))))
    out = [alive_of(i, 1) for i in range(len(names))]
    out += [messages.encode(messages.Dead(incarnation=1, node=name, from_="liar")) for name in names]
    out += [alive_of(i, 2) for i in range(min(revive, len(names)))]
    return out


def drain(node: SerfNode, now: float) -> None:
    """What a front would do with the node's output here: datagrams go
    nowhere, streams to anyone fail at once (nobody answers)."""
    node.outgoing(now)
    for stream in node.streams_to_open(now):
        node.stream_failed(stream.id, now, "connection refused")
    node.events()


def tick(node: SerfNode, now: float) -> None:
    deadline = node.next_deadline()
    if deadline is not None and deadline <= now:
        node.on_timer(now)
    drain(node, now)


def listed(victim: SerfNode, name: str) -> tuple[bool, bool]:
    """Whether ``victim`` lists ``name`` alive in memberlist's table, in Serf's members."""
    node, member = victim.engine.node(name), victim.member(name)
    return (node is not None and node.state == NodeState.ALIVE,
            member is not None and member.status == MemberStatus.ALIVE)


def run(alive: int, more: int, rate: float, revive: int = 0, settle: float = 60.0) -> dict[str, object]:
    victim = SerfNode(GossipSettings(name="victim", advertise_addr=VICTIM[0], advertise_port=VICTIM[1]), seed=1)
    real = SerfNode(GossipSettings(name="real", advertise_addr=REAL[0], advertise_port=REAL[1]), seed=2)
    victim.start(0.0)
    drain(victim, 0.0)
    datagrams = storm_datagrams(alive, more, revive)
    now, sent = 0.0, 0
    start = time.process_time()
    while sent < len(datagrams):
        due = min(len(datagrams), int(now * rate) + 1)
        while sent < due:
            victim.receive(datagrams[sent], ATTACKER, now)
            sent += 1
        tick(victim, now)
        now += TICK
    cpu = time.process_time() - start
    after_storm = victim.stats()

    # The real member joins at once: its push/pull with the victim, answered there and then.
    real.start(now)
    drain(real, now)
    real.join([VICTIM], now)
    for stream in real.streams_to_open(now):
        reply = victim.receive_stream(stream.data, REAL, now)
        assert reply is not None
        real.stream_response(stream.id, reply, now)
    drain(victim, now)
    at_once = listed(victim, "real")
    joined = victim.stats()

    # Then the victim's timers alone for ``settle`` seconds (probe rounds
    # over what its table kept, gossip, push/pull, Serf's reaping; the real
    # member, not driven here, goes unanswered).
    start = time.process_time()
    end = now + settle
    while now < end:
        now += TICK
        tick(victim, now)
    settle_cpu = time.process_time() - start
    return dict(
        alive=alive, more=more, deaths=alive + more, revived=revive, rate=rate, datagrams=len(datagrams),
        storm_seconds=round(len(datagrams) / rate, 2), cpu_seconds=round(cpu, 3),
        cpu_us_per_datagram=round(cpu / len(datagrams) * 1e6, 1),
        cpu_share_of_storm=round(cpu / (len(datagrams) / rate), 3),
        settle_seconds=settle, settle_cpu_seconds=round(settle_cpu, 3),
        nodes=after_storm["nodes"], nodes_refused=after_storm["nodes_refused"],
        nodes_evicted=joined.get("nodes_evicted"), dead_nodes_evicted=joined.get("dead_nodes_evicted"),
        serf_members=after_storm["serf_members"], serf_failed=after_storm["members.failed"],
        serf_members_refused=joined["serf_members_refused"], serf_members_evicted=joined.get("serf_members_evicted"),
        serf_failed_evicted=joined.get("serf_failed_evicted"),
        real_in_memberlist=at_once[0], real_in_serf=at_once[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--alive", type=int, default=10_000, help="invented names in the first wave")
    parser.add_argument("--more", type=int, default=8_000, help="invented names in the second wave")
    parser.add_argument("--revive", type=int, default=0,
                        help="then alives at a higher incarnation for this many of the dead")
    parser.add_argument("--settle", type=float, default=60.0,
                        help="then the victim's timers alone for this many seconds (fake clock)")
    parser.add_argument("--rate", type=float, default=2_000.0, help="datagrams a second (fake clock)")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    result = run(args.alive, args.more, args.rate, args.revive, args.settle)
    print(json.dumps(result))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["real_in_memberlist"] and result["real_in_serf"] else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Gossip at scale, measured in the deterministic network simulator
(tests/sim/gossipsim.py: the real engines' bytes on a virtual clock).

    python bench/gossip.py [--json FILE] [--sizes 100,1000] [--seconds 60]
                           [--traffic 20] [--conditions 0:0,0:0.05,0.1:0,0.3:0,0:0:0.05]
                           [--seed 0[,1...]] [--heartbeat-sim-max 100]
                           [--real PYTHON,PURE,AGENTS] [--real-seconds 120] [--hot]
                           [--by-type] [--tell-accused every|prober]

For each size N and each condition LOSS:PAUSED[:SLOW] (a share of datagrams
lost on every link; a share of members stalling 2-5 s every 5-15 s; a share
of members reading their input 2-15 s late, timers on time), for plain SWIM
and for Lifeguard: N converged members, traffic counted over ``--traffic`` s
of steady state, then 3 crashes, a join and a leave, followed for
``--seconds`` s (see ``gossipsim.scenario``). All-to-all unicast heartbeats
(mcastmember.tribes.engine, 500 ms period, 3 s drop time) are simulated up to
``--heartbeat-sim-max`` members and computed above it from the real
heartbeat's size (N - 1 datagrams per member per period): ``method`` says
which. Rows carry ``source`` "sim" (a real cluster's, the same fields, "real"); the JSON is
written after every row, so a long run can be cut short.

``--tell-accused prober`` runs the simulated gossip members with that
setting (who also sends a suspicion straight to the accused; rows then say
so); the default is the setting's default, "every". The real cluster
(``--real``) and the computed rows do not take it.

``--by-type`` also counts what the traffic window sent by message type
(every datagram and stream message decoded: slower) and the engine counters
behind it (probes, failed probes, suspicions, refutations, nacks), in each
row's ``by_type`` and ``causes_per_member_s``; with ``--table`` it prints
those rows' breakdown instead, one column a row.

CPU (one core): a quiet row of 1,000 members about 25 s; faults cost more
as N grows (every member's failed probes make news for every member): at
100 members 1-13 s a row, at 1,000 50-310 s (30% loss and slow members the
most), at 10,000 and 10% loss (``--traffic 5 --seconds 30``) 30-35 minutes,
with 5% pausing 71 minutes (plain SWIM) and 96 (Lifeguard; before compressed
packets took the hot path and push/pull its node-state memos, which cut a
1,000-member row's CPU by 17-29%), at 30% loss 108 (plain SWIM) and 114
minutes (Lifeguard).

Memory: every member keeps a table of every other, N^2 node records of about
126 bytes each (the slotted node, its probe-order slot and its by-name
entry): 12.6 GB at 10,000 members. A quiet 10,000-member row, shortened
(``--sizes 10000 --conditions 0:0 --traffic 10 --seconds 35``), costs about
20 minutes of CPU: 2.5 to build the tables, the rest mostly push/pull (33
exchanges of the whole state a second, each about 0.3 s of CPU before the
node-state memos, 65 ms with them); with 5% pausing the queues grow it to
16 GB, at 30% loss to about 25 GiB, more than this machine's 23.5 GiB of RAM
(run with a swap file). The rows of
one run follow each other (a finished simulation is freed before the next is
built); two such runs at once do not fit in 23.5 GiB. ``--model-sizes`` prints the figures memberlist's formulas
and the real message sizes predict (not rows).

The same run can add the real cluster's rows and the hot messages' table: ``--real 30,15,3`` appends
the rows of a real mixed cluster (that many Python members, of them pure
Python, and Serf agents, in network namespaces: bench/gossip_real.py; root,
``serf`` and ``nft`` needed) with ``source`` "real", and ``--hot`` prints the
hot messages' CPU and allocation table (bench/gossip_hot.py) at the end.
"""

import argparse
import json
import pathlib
import random
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "sim"))

from gossipsim import HeartbeatNode, address, scenario  # noqa: E402

from mcastmember.gossip.memberlist import messages  # noqa: E402
from mcastmember.gossip.memberlist.broadcasts import retransmit_limit  # noqa: E402
from mcastmember.gossip.memberlist.engine import push_pull_scale  # noqa: E402
from mcastmember.gossip.memberlist.framing import encode_stream  # noqa: E402
from mcastmember.gossip.memberlist.layout import NodeState  # noqa: E402
from mcastmember.gossip.memberlist.settings import TELL_ACCUSED, GossipSettings  # noqa: E402
from mcastmember.gossip.memberlist.state import ip_bytes  # noqa: E402
from mcastmember.gossip.memberlist.suspicion import suspicion_timeout  # noqa: E402

COLUMNS = ("protocol", "members", "loss", "paused_fraction", "slow_fraction", "detect_median_s", "detect_p99_s", "detect_max_s",
           "false_failed_per_member_hour", "join_99_s", "leave_99_s", "datagrams_per_member_s",
           "datagram_bytes_per_member_s", "bytes_per_member_s")


def heartbeat_model(n: int, loss: float, paused: float, slow: float) -> dict:
    """All-to-all unicast heartbeats computed from the real packet size."""
    node = HeartbeatNode(0, 2)
    node.engine.start(0.0)
    size = len(bytes(node.engine.outgoing(0.0).buffer))
    period = node.engine.config.frequency_s
    per_s = (n - 1) / period
    return {"source": "sim", "method": "analytic", "protocol": "unicast-heartbeat", "members": n, "loss": loss,
            "paused_fraction": paused, "slow_fraction": slow, "detect_median_s": None, "detect_p99_s": None, "detect_max_s": None,
            "false_failed_per_member_hour": None, "join_99_s": None, "leave_99_s": None,
            "datagrams_per_member_s": round(per_s, 3), "datagram_bytes_per_member_s": round(per_s * size, 1),
            "bytes_per_member_s": round(per_s * size, 1), "heartbeat_bytes": size}


def push_pull_bytes(n: int) -> int:
    """One push/pull message of ``n`` converged members (names n0.., meta
    empty), as the engine's stream encoding writes it (compressed). The
    nodes go in probe order, shuffled, as the engine and memberlist send
    them: LZW shrinks names in counting order far better (66,322 bytes
    instead of 96,705 at 10,000)."""
    settings = GossipSettings(name="n0")
    nodes = [messages.PushNodeState(name=f"n{i}", addr=ip_bytes(address(i)[0]), port=7946, meta=b"",
                                    incarnation=1, state=NodeState.ALIVE, vsn=settings.vsn()) for i in range(n)]
    random.Random(0).shuffle(nodes)
    msg = messages.encode_push_pull(messages.PushPull(False, nodes, b""))
    return len(encode_stream(msg, compress=True))


def model(n: int) -> dict:
    """memberlist's formulas at ``n`` members, with the real sizes."""
    s = GossipSettings(name="n0")
    every = push_pull_scale(s.push_pull_interval, n)
    size = push_pull_bytes(n)
    low = suspicion_timeout(s.suspicion_mult, n, s.probe_interval)
    return {"members": n, "suspicion_min_s": low, "suspicion_max_s": s.suspicion_max_timeout_mult * low,
            "retransmit_limit": retransmit_limit(s.retransmit_mult, n), "push_pull_interval_s": every,
            "push_pull_message_bytes": size,
            # each push/pull: our state out, theirs back; we open one per interval and answer as many
            "stream_bytes_per_member_s": round(2 * size / every, 1)}


def markdown(rows: list) -> str:
    """The rows as the table bench/README.md shows."""
    def cell(value, form="g"):
        if value is None:
            return "–"
        return format(value, ",.0f" if form == ".3g" and value >= 1000 else form)
    lines = ["| N | protocol | loss | paused | slow | detect median / p99 / max (s) | false failed per member-hour "
             "| join / leave to 99% (s) | datagrams per member-s | UDP B per member-s | all B per member-s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        detect = " / ".join(cell(r.get(k), ".1f") for k in ("detect_median_s", "detect_p99_s", "detect_max_s"))
        spread = " / ".join(cell(r.get(k), ".1f") for k in ("join_99_s", "leave_99_s"))
        proto = r["protocol"] + (" (computed)" if r.get("method") == "analytic" else "") \
            + (f", {r['tell_accused']} tells" if r.get("tell_accused") else "")
        lines.append(f"| {r['members']:,} | {proto} | {r['loss']:.0%} | {r['paused_fraction']:.0%} "
                     f"| {r.get('slow_fraction', 0):.0%} | {detect} | {cell(r.get('false_failed_per_member_hour'), '.3g')} "
                     f"| {spread} | {cell(r.get('datagrams_per_member_s'), '.3g')} "
                     f"| {cell(r.get('datagram_bytes_per_member_s'), ',.0f')} "
                     f"| {cell(r.get('bytes_per_member_s'), ',.0f')} |")
    return "\n".join(lines)


#: the breakdown's rows: each message type (as sent inside datagrams), then the totals and causes
KINDS = ("ping", "indirect_ping", "ack", "nack", "suspect", "alive", "dead", "user")
GOSSIP_KINDS = ("suspect", "alive", "dead")
CAUSE_ROWS = (("probes_failed", "failed probes"), ("suspects", "suspicions started (each member's)"),
              ("suspects_told", "of them sent straight to the accused"), ("refutes", "refutations"),
              ("nacks_received", "nacks received"), ("probes_degraded", "probes stretched by the health score"))


def breakdown(rows: list) -> str:
    """What the rows' traffic windows sent, by message type, per member per
    second: messages (bytes). One column per size, protocol and condition
    (those run with --by-type), the mean over its seeds, and each seed's
    count of refutations in the window (each false suspicion refuted once)."""
    groups: dict = {}
    for r in rows:
        if r.get("by_type"):
            key = (r["members"], r["protocol"], r["loss"], r["paused_fraction"], r.get("slow_fraction", 0))
            groups.setdefault(key, []).append(r)

    def mean(entries):
        """The mean [count, bytes] over the seeds (a seed without any: 0)."""
        runs, entries = len(entries), [e for e in entries if e]
        return [sum(e[0] for e in entries) / runs, sum(e[1] for e in entries) / runs] if entries else None

    def pair(entry):
        return "–" if not entry else f"{entry[0]:.3g} ({entry[1]:,.0f} B)"

    def summed(r, what, kinds=None):
        picked = [v for k, v in r["by_type"][what].items() if kinds is None or k in kinds]
        return [sum(v[0] for v in picked), sum(v[1] for v in picked)] if picked else None

    head, cells = "| per member-s |", {}
    for (n, protocol, loss, paused, slow), group in groups.items():
        seeds = ", ".join(str(r["seed"]) for r in group)
        head += f" {n:,} {protocol}, {loss:.0%} loss{f', {paused:.0%} paused' if paused else ''}" \
                f"{f', {slow:.0%} slow' if slow else ''} (seed {seeds}) |"
        col = cells[(n, protocol, loss, paused, slow)] = {}
        for kind in KINDS:
            col[f"{kind} messages"] = mean([r["by_type"]["parts"].get(kind) for r in group])
        col["datagrams"] = mean([summed(r, "datagrams") for r in group])
        col["of them led by a suspect, alive or dead"] = mean([summed(r, "datagrams", GOSSIP_KINDS) for r in group])
        col["push/pull streams"] = mean([r["by_type"]["streams"].get("push_pull") for r in group])
        col["TCP pings and acks"] = mean([summed(r, "streams", ("ping", "ack")) for r in group])
        for name, text in CAUSE_ROWS:
            col[text] = f"{sum(r['causes_per_member_s'][name] for r in group) / len(group):.3g}"
        col["refutations in the window"] = ", ".join(
            f"{r['causes_per_member_s']['refutes'] * n * r['traffic_seconds']:.0f}" for r in group)
    lines = [head, "|---|" + "---|" * len(cells)]
    for label in next(iter(cells.values()), {}):
        values = [col[label] for col in cells.values()]
        if label.endswith(" messages") and not any(values):
            continue
        lines.append(f"| {label} | " + " | ".join(v if isinstance(v, str) else pair(v) for v in values) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json")
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--traffic", type=float, default=20.0)
    parser.add_argument("--conditions", default="0:0,0:0.05,0.1:0,0.3:0,0:0:0.05")
    parser.add_argument("--protocols", default="swim,lifeguard,unicast-heartbeat")
    parser.add_argument("--seed", default="0", help="a seed, or several (0,1,2): each row run with each")
    parser.add_argument("--heartbeat-sim-max", type=int, default=100)
    parser.add_argument("--model-sizes", default="100,1000,10000")
    parser.add_argument("--table", nargs="+", metavar="JSON", help="print these files' rows as a markdown table")
    parser.add_argument("--real", metavar="PYTHON,PURE,AGENTS",
                        help="also a real mixed cluster (bench/gossip_real.py), e.g. 30,15,3")
    parser.add_argument("--real-seconds", type=float, default=120.0)
    parser.add_argument("--hot", action="store_true", help="also the hot messages' table (bench/gossip_hot.py)")
    parser.add_argument("--tell-accused", choices=TELL_ACCUSED, default=TELL_ACCUSED[0],
                        help="the gossip members' tell_accused setting (who sends a suspicion straight to the "
                             "accused); rows say it when it is not the default")
    parser.add_argument("--by-type", action="store_true",
                        help="count the traffic by message type (slower); with --table, print that breakdown")
    args = parser.parse_args()
    if args.table:
        rows = [row for name in args.table for row in json.loads(pathlib.Path(name).read_text())]
        print(breakdown(rows) if args.by_type else markdown(rows))
        return
    conditions = [(tuple(float(x) for x in c.split(":")) + (0.0, 0.0))[:3] for c in args.conditions.split(",")]
    rows = []
    print(" ".join(f"{c[:14]:>14}" for c in COLUMNS + ("cpu_s",)), flush=True)
    for n in (int(x) for x in args.sizes.split(",")):
        for loss, paused, slow in conditions:
            for seed, protocol in ((int(x), p) for x in args.seed.split(",") for p in args.protocols.split(",")):
                cpu = time.process_time()
                if protocol == "unicast-heartbeat" and n > args.heartbeat_sim_max:
                    row = heartbeat_model(n, loss, paused, slow)
                else:
                    row = scenario(n, protocol, loss=loss, paused_fraction=paused, slow_fraction=slow,
                                   seconds=args.seconds, traffic=args.traffic, seed=seed,
                                   by_type=args.by_type, tell_accused=args.tell_accused)
                    row["method"] = "simulated"
                row["cpu_s"] = round(time.process_time() - cpu, 1)
                rows.append(row)
                print(" ".join(f"{str(row.get(c)):>14}" for c in COLUMNS + ("cpu_s",)), flush=True)
                if row.get("by_type"):
                    print(breakdown([row]), flush=True)
                if args.json:
                    pathlib.Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    if args.model_sizes:
        print("memberlist's formulas with the real message sizes:")
        for n in (int(x) for x in args.model_sizes.split(",")):
            print(model(n), flush=True)
    if args.real:
        import gossip_real
        python, pure, agents = (int(x) for x in args.real.split(","))
        for row in gossip_real.real_rows(python=python, pure=pure, agents=agents, seconds=args.real_seconds):
            rows.append(row)
            print(" ".join(f"{str(row.get(c)):>14}" for c in COLUMNS), flush=True)
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    if args.hot:
        import gossip_hot
        gossip_hot.main(["--quick", "--no-go"])


if __name__ == "__main__":
    main()

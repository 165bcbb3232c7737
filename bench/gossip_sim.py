#!/usr/bin/env python3
"""The gossip engine's traffic and CPU per member as the cluster grows, on the
tests' simulated network (tests/gossipnet.py: fake clock, no sockets).

    python bench/gossip_sim.py [--sizes 10,50,100] [--seconds 30] [--json out.json]

For each size N: N engines join one seed and settle for 10 simulated seconds;
then, over ``seconds`` simulated seconds of a quiet cluster, it counts the UDP
datagrams and bytes each member sends per second (SWIM's promise: flat in N)
and the CPU the engines take per member per simulated second (the network
simulation's own work included, so an upper bound). Measured on 2026-12-04,
2 shared cores, 30 s: 2.0 datagrams and 79-81 bytes per member per second at
10, 50 and 100 members; see the report of the branch for the CPU figures.
"""

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))

from gossipnet import Net  # noqa: E402


def measure(n, seconds):
    net = Net(track=False)
    net.cluster([f"n{i}" for i in range(n)], settle=10.0)
    converged = all(len(net[f"n{i}"].members()) == n for i in range(n))
    start_sent, start_at = len(net.sent), net.now
    cpu = time.process_time()
    net.run(start_at + seconds)
    cpu = time.process_time() - cpu
    sent = net.sent[start_sent:]
    member_seconds = n * seconds
    return {"members": n, "converged": converged,
            "datagrams_per_member_s": round(len(sent) / member_seconds, 2),
            "bytes_per_member_s": round(sum(len(d) for _t, _s, _d, d in sent) / member_seconds, 1),
            "cpu_ms_per_member_s": round(1000 * cpu / member_seconds, 3)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,50,100")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = [measure(int(n), args.seconds) for n in args.sizes.split(",")]
    for row in rows:
        print(row)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Soak: a Serf member flooded with decoding work keeps answering its pings.

    python bench/gossip_starvation.py [--front threads|asyncio|both] [--seconds 20]
        [--bombs 15] [--push-pulls 4] [--push-nodes 100000] [--max-nodes N] [--compress]
        [--json out.json]

Three processes on loopback, nothing else: the victim ``a`` (127.0.0.1, a
SerfService or an AsyncSerfService, alone in its process as a real member
is), the observer ``b`` (127.0.0.2, joined to a: it probes a every second
and marks it failed if a stops answering) with a pinger beside it
(127.0.0.4: a memberlist ping to a every 50 ms, the RTT of each ack), and
the attacker (127.0.0.3), which sends a for ``--seconds``:

- ``--bombs`` LZW bombs a second: datagrams of 16 KB whose compressed user
  message inflates to 20 MiB (the per-datagram bound before it became
  64 KiB);
- ``--push-pulls`` concurrent push/pull streams, each over and over, of
  ``--push-nodes`` invented nodes (new names every time: 8 MB plain,
  ``--compress``: LZW-compressed, as memberlist sends them).

Reported: the pings' RTT (max, 99th percentile, how many took longer than
half the probe timeout, how many went unanswered within 2 s), b's failed
marks of a and how long it held a suspect (its failed probes count the
invented nodes it probes too), a's counters (the bombs and push/pulls it
refused, the streams it took) and its CPU seconds. Passes when a was never
marked failed and every ping was answered within half the probe timeout.

``--max-nodes`` is a's table bound (16,384 by default, which refuses a
100,000-node push/pull at its header); raise it (131072) to have a decode
and merge every push/pull, a turn at a time. To compare with an older tree,
run this file with ``PYTHONPATH`` pointing at it (only interfaces that
existed before are used). Figures are for one noisy 2-core machine: compare
runs made together.

What it shows (20 s, both fronts, one run each, before the datagram bound and
the stream turns -> now):

- the defaults (15 bombs/s, four 100,000-node push/pulls): slowest ping
  6,574 -> 5.1 ms (threads), 5,382 -> 8.3 ms (asyncio); pings unanswered 98
  and 58 -> 0; a marked failed once on each front -> never; a's CPU 27 s ->
  0.6 s (the bombs refused after 64 KiB, the push/pulls at their header);
- ``--push-nodes 16000`` (taken and merged, in turns): slowest ping 2,361 ->
  96 ms (threads), 2,456 -> 127 ms (asyncio), 99th percentile 2,241 -> 55
  and 75 ms, median 1,007 -> 4.5 ms;
- ``--push-pulls 0`` (bombs alone, threads): slowest ping 176 -> 4.8 ms,
  a's CPU 13.7 -> 0.5 s;
- ``--max-nodes 131072`` (now only): slowest ping 1.2 s (threads), 1.8 s
  (asyncio), 54-59 over half the probe timeout, never marked failed: each
  reply encodes a's own 100,000-node table in one piece (0.8 s) and Python
  collects a heap that size in 0.1-0.2 s pauses.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import pathlib
import resource
import socket
import statistics
import sys
import threading
import time
from typing import Any

#: memberlist's default probe timeout; the pings' bound is half of it
PROBE_TIMEOUT = 0.5
PING_EVERY = 0.05
#: how often b's view of a is looked at
WATCH_EVERY = 0.05
#: a ping unanswered this long counts as lost
PING_LOST_AFTER = 2.0
VSN = bytes((1, 5, 2, 2, 5, 4))
HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support import free_gossip_port as free_port  # noqa: E402


# ------------------------------------------------------------------ the victim

def victim(front: str, port: int, max_nodes: int, ready: "multiprocessing.Queue[object]",
           done: "multiprocessing.Queue[object]", stop: "multiprocessing.synchronize.Event") -> None:
    """Member a, in its own process: started, then kept until ``stop``; its counters and CPU then."""
    from mcastmember.gossip.fronts.aio import AsyncSerfService
    from mcastmember.gossip.fronts.service import SerfService
    options = {"max_nodes": max_nodes, "seed": 1}

    def report(stats: dict[str, int]) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        done.put({"cpu_s": round(usage.ru_utime + usage.ru_stime, 1), **{k: stats.get(k, 0) for k in (
            "datagrams_received", "bad_input", "bad_input.too_large", "bad_input.too_many", "streams_received",
            "streams_bad", "push_pulls_refused", "nodes", "nodes_refused", "connections_accepted",
            "connections_refused", "connections_timed_out", "connections_too_big")}})

    if front == "threads":
        with SerfService("a", "127.0.0.1", port, **options) as a:
            ready.put(True)
            stop.wait()
            report(a.stats())
        return

    async def main() -> None:
        async with AsyncSerfService("a", "127.0.0.1", port, **options) as a:
            ready.put(True)
            while not stop.is_set():
                await asyncio.sleep(0.1)
            report(a.stats())
    asyncio.run(main())


# ---------------------------------------------------------------- the attacker

def attacker(port: int, seconds: float, bombs: int, push_pulls: int, push_nodes: int, compress: bool,
             done: "multiprocessing.Queue[object]") -> None:
    """LZW bombs and push/pulls to a from 127.0.0.3, in its own process; what it sent."""
    from mcastmember.gossip.memberlist import framing
    from mcastmember.gossip.memberlist import messages
    bomb = framing.compress_message(b"\x08" + bytes((20 << 20) - 1))
    deadline = time.monotonic() + seconds
    sent = {"bombs": 0, "push_pulls": 0, "push_pull_replies": 0, "push_pull_bytes": 0}
    lock = threading.Lock()

    def push_pull_loop(which: int) -> None:
        round_ = 0
        while time.monotonic() < deadline:
            nodes = [messages.PushNodeState(name=f"ghost-{which}-{round_}-{i}", addr=bytes((127, 0, 0, 3)), port=9,
                                            incarnation=1, vsn=VSN) for i in range(push_nodes)]
            data = framing.encode_stream(messages.encode_push_pull(messages.PushPull(nodes=nodes)), compress=compress)
            round_ += 1
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=15,
                                              source_address=("127.0.0.3", 0)) as tcp:
                    tcp.sendall(data)
                    got = b""
                    while chunk := tcp.recv(65536):
                        got += chunk
            except OSError:
                got = b""
            with lock:
                sent["push_pulls"] += 1
                sent["push_pull_bytes"] += len(data)
                sent["push_pull_replies"] += bool(got)

    threads = [threading.Thread(target=push_pull_loop, args=(i,), daemon=True) for i in range(push_pulls)]
    for thread in threads:
        thread.start()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind(("127.0.0.3", 0))
        start = time.monotonic()
        while (now := time.monotonic()) < deadline:
            while bombs and sent["bombs"] < (now - start) * bombs:
                udp.sendto(bomb, ("127.0.0.1", port))
                sent["bombs"] += 1
            time.sleep(0.005)
    for thread in threads:
        thread.join(30)
    done.put(sent)


# ------------------------------------------------------ the observer, the pinger

def pinger(port: int, stop: threading.Event, rtts: list[float], lost: list[int]) -> None:
    """A memberlist ping to a every PING_EVERY from 127.0.0.4; the RTT of each ack."""
    from mcastmember.gossip.memberlist import framing
    from mcastmember.gossip.memberlist import messages
    from mcastmember.gossip.memberlist.layout import MessageType
    from mcastmember.gossip.memberlist.limits import Limits
    sent: dict[int, float] = {}
    seq = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind(("127.0.0.4", 0))
        udp.settimeout(0.005)
        next_ping = time.monotonic()
        while not stop.is_set():
            now = time.monotonic()
            if now >= next_ping:
                seq += 1
                sent[seq] = now
                udp.sendto(messages.encode(messages.Ping(seq_no=seq, node="a")), ("127.0.0.1", port))
                next_ping += PING_EVERY
            try:
                data = udp.recv(65536)
            except OSError:
                continue
            try:       # an ack, maybe in a compound of broadcasts, maybe compressed
                parts, _cut = framing.split_messages(framing.open_packet(data, Limits()), Limits())
                acks = [messages.decode(part, Limits()) for part in parts if part[0] == MessageType.ACK]
            except ValueError:
                continue
            for ack in acks:
                if isinstance(ack, messages.Ack) and ack.seq_no in sent:
                    rtts.append(time.monotonic() - sent.pop(ack.seq_no))
        lost.append(sum(1 for at in sent.values() if time.monotonic() - at > PING_LOST_AFTER))


def watch(b: Any, stop: threading.Event, suspected: list[int]) -> None:
    """How b sees a, every WATCH_EVERY: 1 for each look that finds it suspect."""
    from mcastmember.gossip.memberlist.layout import NodeState
    while not stop.wait(WATCH_EVERY):
        with b._lock:
            node = b.node.engine.node("a")
            suspected.append(node is not None and node.state == NodeState.SUSPECT)


def run(front: str, args: argparse.Namespace) -> dict[str, object]:
    from mcastmember.gossip.fronts.service import SerfService
    from mcastmember.gossip.serf.node import SerfMemberEvent
    ctx = multiprocessing.get_context("spawn")
    pa, pb = free_port("127.0.0.1"), free_port("127.0.0.2")
    ready, victim_done, attack_done = ctx.Queue(), ctx.Queue(), ctx.Queue()
    stop = ctx.Event()
    a = ctx.Process(target=victim, args=(front, pa, args.max_nodes, ready, victim_done, stop))
    a.start()
    ready.get(timeout=30)
    marks: list[str] = []
    rtts: list[float] = []
    lost: list[int] = []
    with SerfService("b", "127.0.0.2", pb, seed=2) as b:
        b.add_listener(lambda e: marks.append(e.kind) if isinstance(e, SerfMemberEvent) and e.member.name == "a"
                       and e.kind in ("failed", "left") else None)
        if b.join([("127.0.0.1", pa)]).joined != 1:
            raise SystemExit("b could not join a")
        pinging = threading.Event()
        ping_thread = threading.Thread(target=pinger, args=(pa, pinging, rtts, lost), daemon=True)
        ping_thread.start()
        suspected: list[int] = []
        watch_thread = threading.Thread(target=watch, args=(b, pinging, suspected), daemon=True)
        watch_thread.start()
        time.sleep(1.0)
        start = time.monotonic()
        attack = ctx.Process(target=attacker, args=(pa, args.seconds, args.bombs, args.push_pulls, args.push_nodes,
                                                    args.compress, attack_done))
        attack.start()
        sent = attack_done.get(timeout=args.seconds + 60)
        attack.join()
        time.sleep(1.0)
        pinging.set()
        ping_thread.join(5)
        watch_thread.join(5)
        elapsed = time.monotonic() - start
        b_stats = b.stats()
        a_seen = {m.name: m.status.name.lower() for m in b.members()}.get("a")
    stop.set()
    a_stats = victim_done.get(timeout=30)
    a.join(30)
    ordered = sorted(rtts)
    late = sum(1 for rtt in rtts if rtt > PROBE_TIMEOUT / 2)
    result = {
        "front": front, "seconds": round(elapsed, 1), "attack": sent,
        "pings": len(rtts), "ping_rtt_max_ms": round(1000 * ordered[-1], 1) if ordered else None,
        "ping_rtt_p99_ms": round(1000 * ordered[int(0.99 * (len(ordered) - 1))], 1) if ordered else None,
        "ping_rtt_median_ms": round(1000 * statistics.median(ordered), 2) if ordered else None,
        "pings_over_half_probe_timeout": late, "pings_lost": lost[0] if lost else None,
        "a_failed_marks": marks.count("failed"), "a_suspected_s": round(sum(suspected) * WATCH_EVERY, 1),
        "b_probes_failed": b_stats["probes_failed"], "a_at_end": a_seen, "a": a_stats}
    result["ok"] = not marks and late == 0 and not (lost and lost[0])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--front", choices=("threads", "asyncio", "both"), default="both")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--bombs", type=int, default=15, help="LZW bombs a second")
    parser.add_argument("--push-pulls", type=int, default=4, help="concurrent push/pull streams")
    parser.add_argument("--push-nodes", type=int, default=100_000, help="invented nodes in each push/pull")
    parser.add_argument("--max-nodes", type=int, default=16_384, help="a's table bound")
    parser.add_argument("--compress", action="store_true", help="push/pulls LZW-compressed")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    results = []
    for front in (("threads", "asyncio") if args.front == "both" else (args.front,)):
        results.append(run(front, args))
        print(json.dumps(results[-1]), flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

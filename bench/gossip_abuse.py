#!/usr/bin/env python3
"""Soak: a running Serf member under abuse, its memory and tables over time.

    python bench/gossip_abuse.py [--seconds 60] [--rate 2000] [--json out.json]

Two SerfService members on loopback (127.0.0.1 and 127.0.0.2) joined; a
third socket (127.0.0.3) sends member a, at ``--rate`` packets a second, a
mix of what a hostile or broken peer can send: suspects of b from made-up
accusers at b's current incarnation, b's death and alive replayed at
incarnations below b's, alives of ever new names (a join storm), random bytes; and
every second a push/pull stream, in turn one announcing ten million nodes and
a real one of ``--push-nodes`` new nodes (20,000: about 1.5 MB). Every few seconds it
samples the process's RSS, a's node count, broadcast queue and counters.

Passes when b stayed alive in a's view the whole time (never failed),
a's table stayed within ``max_nodes`` and the RSS stopped growing (the last
third of the samples within 10 % of the middle third's highest). Everything
stays on loopback.

What it shows today (40 s at 500 packets/s, --max-nodes 256, all four kinds
together): b stays alive in a's view throughout (0 failed events, 0 samples
not alive), a's table at its bound (281,252 nodes refused), RSS flat at
38.8 MB. b is accused 630 times and refutes each time: a tells the accused
directly when it starts suspecting it, and b answers its refutation straight
back to a. Before those two steps, suspects together with the join storm got
b declared dead within 5 s: a's gossip went to 3 of 256 mostly made-up nodes,
so b rarely heard the accusation in time, and once reaped it could not come
back while ghosts filled a's table (memberlist behaves that way: any peer may
accuse at the current incarnation; only keys keep such a peer out).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import socket
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.memberlist import framing  # noqa: E402
from mcastmember.gossip.memberlist import messages  # noqa: E402
from mcastmember.gossip.serf.node import SerfMemberEvent  # noqa: E402

VSN = bytes((1, 5, 2, 2, 5, 4))


def free_port(host: str) -> int:
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind((host, 0))
        port = tcp.getsockname()[1]
        udp.bind((host, port))
        return port


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


KINDS = ("suspect", "replay", "join", "garbage")


def abuse(rng: random.Random, n: int, inc: int, pb: int, kinds: list[str]) -> bytes:
    kind = KINDS.index(kinds[n % len(kinds)])
    if kind == 0:
        msg = messages.encode(messages.Suspect(incarnation=inc, node="b", from_=f"liar-{n}"))
    elif kind == 1:
        old = rng.randrange(inc)            # below b's incarnation: a replay
        msg = framing.make_compound([
            messages.encode(messages.Dead(incarnation=old, node="b", from_="liar")),
            messages.encode(messages.Alive(incarnation=old, node="b", addr=bytes((127, 0, 0, 2)), port=pb, vsn=VSN))])
    elif kind == 2:
        msg = messages.encode(messages.Alive(incarnation=1, node=f"ghost-{n}", addr=bytes((127, 0, 0, 3)), port=9,
                                             vsn=VSN))
    else:
        return rng.randbytes(rng.randrange(1, 200))
    return framing.add_crc(msg)


def push(port: int, data: bytes) -> None:
    """One push/pull stream to a: write it, read the answer, close."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as tcp:
            tcp.sendall(data)
            tcp.shutdown(socket.SHUT_WR)
            while tcp.recv(65536):
                pass
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=2000, help="abusive packets a second")
    parser.add_argument("--max-nodes", type=int, default=256)
    parser.add_argument("--push-nodes", type=int, default=20000,
                        help="node states in the big push/pull sent every other second")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"which abuse to mix, comma-separated, of {', '.join(KINDS)}")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    kinds = args.kinds.split(",")
    if not kinds or set(kinds) - set(KINDS):
        parser.error(f"--kinds takes some of {', '.join(KINDS)}")
    rng = random.Random(1)
    pa, pb = free_port("127.0.0.1"), free_port("127.0.0.2")
    gossip = {"max_nodes": args.max_nodes}
    samples = []
    failed = []
    with SerfService("a", "127.0.0.1", pa, seed=1, **gossip) as a, \
            SerfService("b", "127.0.0.2", pb, seed=2, **gossip) as b, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as evil:
        evil.bind(("127.0.0.3", 0))
        a.add_listener(lambda e: failed.append(e.kind) if isinstance(e, SerfMemberEvent) and e.member.name == "b"
                       and e.kind in ("failed", "left", "reaped") else None)
        if b.join([("127.0.0.1", pa)]).joined != 1:
            raise SystemExit("b could not join a")
        oversized = bytes((messages.PushPullHeader.TYPE,)) + messages.PushPullHeader(
            nodes=10**7, user_state_len=0, join=False).encode_body()
        big_push = messages.encode_push_pull(messages.PushPull(nodes=[
            messages.PushNodeState(name=f"pushed-{i}", addr=bytes((127, 0, 0, 3)), port=9, incarnation=1, vsn=VSN)
            for i in range(args.push_nodes)]))
        start = time.monotonic()
        next_sample = next_stream = start
        sent = 0
        b_down = 0
        while (now := time.monotonic()) - start < args.seconds:
            due = int((now - start) * args.rate)
            node_b = a.node.engine.node("b")
            inc = node_b.incarnation if node_b else 1
            while sent < due:
                evil.sendto(abuse(rng, sent, inc, pb, kinds), ("127.0.0.1", pa))
                sent += 1
            if now >= next_stream:
                next_stream += 1.0
                push(pa, big_push if (now - start) % 2 < 1 else oversized)
            if now >= next_sample:
                next_sample += max(args.seconds / 20, 1.0)
                stats = a.stats()
                view = {m.name: m.status.name.lower() for m in a.members()}
                b_down += view.get("b") != "alive"
                samples.append(dict(t=round(now - start, 1), rss_mb=round(rss_bytes() / 2**20, 1), sent=sent,
                                    received=stats["datagrams_received"], nodes=stats["nodes"],
                                    serf_members=stats["serf_members"], broadcasts=stats["broadcasts_queued"],
                                    nodes_refused=stats["nodes_refused"], suspects=stats["suspects"],
                                    streams_bad=stats["streams_bad"], b=view.get("b"), b_refutes=b.stats()["refutes"]))
                print(json.dumps(samples[-1]), flush=True)
            time.sleep(0.002)
    third = max(len(samples) // 3, 1)
    middle = max(s["rss_mb"] for s in samples[third:2 * third] or samples)
    last = max(s["rss_mb"] for s in samples[2 * third:] or samples)
    verdict = dict(b_failed_events=len(failed), b_not_alive_samples=b_down,
                   max_nodes_seen=max(s["nodes"] for s in samples), max_nodes=args.max_nodes,
                   rss_mb_middle_third=middle, rss_mb_last_third=last)
    ok = not failed and verdict["max_nodes_seen"] <= args.max_nodes and last <= middle * 1.1
    verdict["ok"] = ok
    print(json.dumps(verdict))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"samples": samples, "verdict": verdict}, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

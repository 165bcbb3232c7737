#!/usr/bin/env python3
"""A gossip member's TCP port under connections that hold its stream slots.

    python bench/gossip_stream_shares.py [--front threads|asyncio|both] [--json out.json]

The member (``a``, 127.0.0.1) runs in a subprocess, on the front asked for.
Each scenario opens connections to its port that send nothing, keeps them
open, then has five real members (SerfService, 127.0.0.21 to .25) join it at
once, each within memberlist's TCP timeout (10 s), and counts the joins that
succeeded:

- ``slowloris``: 40 connections from one source (127.0.0.5);
- ``flood_one``: 2,000 connections at once from one source;
- ``flood_spread``: 2,000 connections at once from three sources (127.0.0.5 to .7);
- ``flood_many``: 2,000 connections at once from twenty sources (127.0.0.30 to .49),
  enough to fill every slot: each join closes a connection of theirs.

Then the accept loop under descriptor exhaustion: the member with
``RLIMIT_NOFILE`` 40, and 300 connections to its port, from one source
(``nofile_one``) and from 100 sources (127.0.0.100 on, three each:
``nofile_spread``, which holds every slot); the member's CPU over 3 s as a
share of one core. Everything stays on loopback.

What it shows (one run, both fronts alike): before the slots were shared per
source, every scenario let 0 of the 5 joins through (32 silent connections
held every slot; the joins were refused at once), and the member spun at
0.97 to 1.0 of a core under RLIMIT_NOFILE 40 (accept failed with EMFILE,
the port stayed readable). Now 5 of 5 join in each scenario (in 0.02 to
0.03 s): the stranger sources hold 4 slots each (36 of the slowloris's 40
connections refused; under ``flood_many`` each join closes the idlest
connection of the source holding the most), and under RLIMIT_NOFILE 40 the
member uses 0.001 to 0.002 of a core (6 waits in 3.5 s, ``accept_errors``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import resource
import socket
import subprocess
import sys
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from mcastmember.gossip.fronts.aio import AsyncSerfService  # noqa: E402
from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from support import free_gossip_port  # noqa: E402

JOINERS = [f"127.0.0.{21 + i}" for i in range(5)]
CPU_WINDOW_S = 3.0


# ------------------------------------------------------------------ the member (subprocess)

def serve(front: str, port: int, nofile: int | None) -> None:
    """Run member ``a`` on 127.0.0.1:``port``; answer each line on stdin
    with its stats and CPU seconds (JSON); stop at end of input."""
    if nofile is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    def report(stats: dict[str, int]) -> None:
        print(json.dumps({"stats": stats, "cpu": time.process_time()}), flush=True)

    if front == "threads":
        with SerfService("a", "127.0.0.1", port) as svc:
            print("ready", flush=True)
            for _ in sys.stdin:
                report(svc.stats())
        return

    async def main() -> None:
        async with AsyncSerfService("a", "127.0.0.1", port) as svc:
            print("ready", flush=True)
            loop = asyncio.get_running_loop()
            while await loop.run_in_executor(None, sys.stdin.readline):
                report(svc.stats())
    asyncio.run(main())


class Member:
    def __init__(self, front: str, nofile: int | None = None) -> None:
        self.port = free_gossip_port("127.0.0.1")
        args = [sys.executable, __file__, "--serve", front, "--port", str(self.port)]
        if nofile is not None:
            args += ["--nofile", str(nofile)]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "ready\n"

    def sample(self) -> dict[str, object]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        result: dict[str, object] = json.loads(self.proc.stdout.readline())
        return result

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(15)


# ------------------------------------------------------------------ the other side

def hold(port: int, sources: list[str], count: int) -> list[socket.socket]:
    """``count`` connections to 127.0.0.1:``port``, from ``sources`` in
    turn, all started at once (non-blocking), never written to."""
    socks = []
    for i in range(count):
        sock = socket.socket()
        sock.setblocking(False)
        sock.bind((sources[i % len(sources)], 0))
        sock.connect_ex(("127.0.0.1", port))
        socks.append(sock)
    return socks


def joins(port: int) -> tuple[int, list[str]]:
    """Five members joining the member at once: how many joined, and why the others did not."""
    results: list[tuple[int, str]] = []

    def one(host: str) -> None:
        with SerfService(f"j{host.rsplit('.', 1)[1]}", host, free_gossip_port(host)) as joiner:
            try:
                done = joiner.join([("127.0.0.1", port)], timeout=15)
                results.append((done.joined, "; ".join(done.errors)))
            except TimeoutError as error:
                results.append((0, str(error)))

    threads = [threading.Thread(target=one, args=(host,)) for host in JOINERS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(joined for joined, _ in results), [why for joined, why in results if not joined]


def scenario(front: str, sources: list[str], count: int) -> dict[str, object]:
    member = Member(front)
    socks = hold(member.port, sources, count)
    try:
        time.sleep(1.0)        # the member has seen them all
        started = time.monotonic()
        joined, errors = joins(member.port)
        seconds = time.monotonic() - started
        stats = member.sample()["stats"]
        assert isinstance(stats, dict)
    finally:
        for sock in socks:
            sock.close()
        member.stop()
    counters = {k: stats.get(k) for k in ("connections_accepted", "connections_refused", "connections_evicted",
                                          "connections_timed_out", "accept_errors")}
    return {"joined_of_5": joined, "join_seconds": round(seconds, 2), "errors": errors[:2], **counters}


def exhausted(front: str, sources: list[str], count: int) -> dict[str, object]:
    member = Member(front, nofile=40)
    socks = hold(member.port, sources, count)
    try:
        time.sleep(0.5)
        first = member.sample()
        time.sleep(CPU_WINDOW_S)
        last = member.sample()
    finally:
        for sock in socks:
            sock.close()
        member.stop()
    cpu = float(last["cpu"]) - float(first["cpu"])       # type: ignore[arg-type]
    stats = last["stats"]
    assert isinstance(stats, dict)
    return {"cpu_share_of_a_core": round(cpu / CPU_WINDOW_S, 3), "accept_errors": stats.get("accept_errors"),
            "connections_open": stats.get("connections_open")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--front", choices=["threads", "asyncio", "both"], default="both")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--serve", choices=["threads", "asyncio"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--nofile", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.port, args.nofile)
        return 0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))    # 2,000 sockets held
    rows = {}
    for front in (["threads", "asyncio"] if args.front == "both" else [args.front]):
        one = ["127.0.0.5"]
        rows[front] = {
            "slowloris": scenario(front, one, 40),
            "flood_one": scenario(front, one, 2000),
            "flood_spread": scenario(front, ["127.0.0.5", "127.0.0.6", "127.0.0.7"], 2000),
            "flood_many": scenario(front, [f"127.0.0.{30 + i}" for i in range(20)], 2000),
            "nofile_one": exhausted(front, one, 300),
            "nofile_spread": exhausted(front, [f"127.0.0.{100 + i}" for i in range(100)], 300),
        }
        print(json.dumps({front: rows[front]}, indent=1), flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""RPC ``members`` on a 100-member cluster: a Python member's agent RPC
beside Debian's agent's, both listing the same 100 members.

One Serf agent (go1), one Python member with its RPC (py1, threaded, as
``mcast-demo gossip`` runs), and the other members simulated cheaply: N - 2
``AsyncSerfService`` members on one asyncio loop in another process (so
they take no time from py1's interpreter), each on its own loopback
address, all joined. Once the agent and py1 each list N
members alive, for each RPC:

- ``serf members -rpc-addr=...`` run ``--runs`` times: the wall time of the
  whole command (process start, handshake, the call, the table), as
  ``time serf members`` shows it;
- the ``members`` call alone, ``--calls`` times on one connection (a raw
  client: the request out, the whole answer in), and the answer's bytes.

    python bench/rpc_members.py [--members 100] [--runs 30] [--calls 300] [--json FILE]

Needs ``serf`` (Debian's) and the gossip extra; loopback only (127.0.0.0/8).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import msgpack

from mcastmember.gossip.fronts.aio import AsyncSerfService
from mcastmember.gossip.fronts.service import SerfService

QUIET = {"push_pull_interval": 5.0}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind((host, 0))
        port = tcp.getsockname()[1]
        udp.bind((host, port))
        return port


def alive(rpc: str) -> int:
    done = subprocess.run(["serf", "members", "-rpc-addr", rpc, "-status", "alive"], capture_output=True,
                          text=True, timeout=20)
    return len(done.stdout.splitlines()) if done.returncode == 0 else 0


def wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"rpc_members: {what} not within {timeout} s")
        time.sleep(0.2)


class Crowd:
    """The simulated members: AsyncSerfService on one loop, in a thread."""

    def __init__(self, count: int, seed: tuple[str, int]) -> None:
        self.count, self.seed = count, seed
        self.loop = asyncio.new_event_loop()
        self.members: list[AsyncSerfService] = []
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> None:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(120)

    async def _start(self) -> None:
        for n in range(self.count):
            host = f"127.0.{1 + (n + 3) // 250}.{1 + (n + 3) % 250}"
            member = AsyncSerfService(f"sim{n:03d}", host, free_port(host), **QUIET)
            await member.start()
            self.members.append(member)
        # eight at a time: the seed takes 32 streams at once (max_streams)
        for first in range(0, len(self.members), 8):
            await asyncio.gather(*(m.join([self.seed]) for m in self.members[first:first + 8]))

    def stop(self) -> None:
        async def stop_all() -> None:
            for member in self.members:
                await member.stop()
        asyncio.run_coroutine_threadsafe(stop_all(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def run_crowd(count: int, seed: str) -> None:
    """The other process: the simulated members, until stdin closes."""
    host, port = seed.rsplit(":", 1)
    crowd = Crowd(count, (host, int(port)))
    crowd.start()
    print("joined", flush=True)
    sys.stdin.read()
    crowd.stop()


def cli_times(rpc: str, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(["serf", "members", "-rpc-addr", rpc], capture_output=True, timeout=20)
        out.append(time.perf_counter() - start)
        assert done.returncode == 0, done.stderr
    return out


def call_times(rpc: str, calls: int) -> tuple[list[float], int]:
    host, port = rpc.rsplit(":", 1)
    with socket.create_connection((host, int(port)), 10) as sock:
        unpacker = msgpack.Unpacker(raw=False)

        def read() -> object:
            while True:
                for obj in unpacker:
                    return obj
                unpacker.feed(sock.recv(1 << 20))

        sock.sendall(msgpack.packb({"Command": "handshake", "Seq": 0}) + msgpack.packb({"Version": 1}))
        read()
        out, size = [], 0
        for seq in range(1, calls + 1):
            start = time.perf_counter()
            sock.sendall(msgpack.packb({"Command": "members", "Seq": seq}))
            read()
            body = read()
            out.append(time.perf_counter() - start)
            size = len(msgpack.packb(body))
        return out, size


def summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {"median_ms": round(statistics.median(ms), 3), "p90_ms": round(ms[int(len(ms) * 0.9)], 3),
            "min_ms": round(ms[0], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--crowd", metavar="SEED", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.crowd:
        run_crowd(args.members - 2, args.crowd)
        return
    if shutil.which("serf") is None:
        raise SystemExit("rpc_members: needs Debian's serf (apt-get install serf)")
    agent_port, py_port = free_port(), free_port("127.0.0.2")
    agent_rpc, py_rpc = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory() as tmp:
        agent = subprocess.Popen(["serf", "agent", "-node", "go1", "-bind", f"127.0.0.1:{agent_port}",
                                  "-rpc-addr", agent_rpc, "-log-level", "warn"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
        py1 = SerfService("py1", "127.0.0.2", py_port, rpc_addr=py_rpc, **QUIET)
        crowd: subprocess.Popen[str] | None = None
        try:
            wait(lambda: alive(agent_rpc) == 1, 10, "the agent")
            py1.start()
            py1.join([("127.0.0.1", agent_port)])
            crowd = subprocess.Popen([sys.executable, __file__, "--members", str(args.members), "--crowd",
                                      f"127.0.0.2:{py_port}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
            assert crowd.stdout is not None and crowd.stdout.readline() == "joined\n"
            wait(lambda: alive(agent_rpc) == alive(py_rpc) == args.members, 120,
                 f"{args.members} members alive on both (now {alive(agent_rpc)} and {alive(py_rpc)})")
            rows = {}
            for name, rpc in (("agent (Go)", agent_rpc), ("Python member", py_rpc)):
                calls, size = call_times(rpc, args.calls)
                rows[name] = {"serf members": summary(cli_times(rpc, args.runs)), "members call": summary(calls),
                              "answer bytes": size}
        finally:
            if crowd is not None:
                crowd.communicate("", timeout=60)
            py1.stop()
            agent.kill()
            agent.wait()
    compiled = os.environ.get("MCASTMEMBER_NO_EXTENSIONS") != "1"
    result = {"members": args.members, "runs": args.runs, "calls": args.calls,
              "python": sys.version.split()[0], "compiled": compiled, "rows": rows}
    print(f"RPC members at {args.members} members ({'compiled' if compiled else 'pure Python'}):")
    print("| RPC of | `time serf members`, median / p90 (ms) | members call alone, median / p90 (ms) | answer |")
    print("| --- | --- | --- | --- |")
    for name, row in rows.items():
        cli, call = row["serf members"], row["members call"]
        print(f"| {name} | {cli['median_ms']:.1f} / {cli['p90_ms']:.1f} | {call['median_ms']:.2f} / "
              f"{call['p90_ms']:.2f} | {row['answer bytes']:,} B |")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=1)


if __name__ == "__main__":
    main()

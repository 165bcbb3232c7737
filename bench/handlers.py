"""Event handler latency: from a user event reaching our member (the moment
the front hands the node's events to the handler runner) to its script
running (the script's first command reads the clock), on both fronts,
beside the floor: a bare ``subprocess.Popen`` of the same ``/bin/sh -c``
script from Python, nothing else running.

Rows:

* ``spaced``: one event every 20 ms (no run waits for another), the
  handler one after another (``handler_concurrency`` 1, the default);
* ``burst``: 100 events at once with ``handler_concurrency`` 4 (the last
  ones wait for a slot: the spread is the queue's).

The events are our own user events (``user_event`` on the member itself:
Serf delivers them at once), so no gossip interval is in the figure. Times
are wall clock in ms (the script's ``date +%s%N``, Python's
``time.time_ns()``); ``date`` is a process of its own, so every row,
the floor included, holds one fork and exec of it.

Beside Debian's agent (``--agent``, needs ``serf``): a third member fires a
user event (not coalesced) every 300 ms; a Python member and ``serf agent``
each run the same ``-event-handler user:ping=...``; the time is from the
``user_event()`` call to each script's clock read, so it holds the gossip
round that carries the event (0.2 s, the agents' LAN default, for all three).

    python bench/handlers.py [--events 200] [--agent] [--json FILE]

Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcastmember.gossip.fronts.aio import AsyncSerfService
from mcastmember.gossip.fronts.service import SerfService
from mcastmember.gossip.serf.events import UserEventReceived

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support import free_gossip_port, free_tcp_port, wait_until  # noqa: E402

SCRIPT = 't=$(date +%s%N); read n; echo "$n $t" >> {log}'


def summary(ms: list[float]) -> dict[str, float]:
    ms = sorted(ms)
    return {"runs": len(ms), "median_ms": round(statistics.median(ms), 2),
            "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 2), "max_ms": round(ms[-1], 2)}


def floor(events: int, folder: Path) -> list[float]:
    """Popen of the script, from Python, to its clock read."""
    log = folder / "floor.log"
    out = []
    for n in range(events):
        start = time.time_ns()
        subprocess.run(["/bin/sh", "-c", SCRIPT.format(log=log)], input=f"{n}\n".encode(), check=True)
        out.append((int(log.read_text().splitlines()[-1].split()[1]) - start) / 1e6)
    return out


def offered_at(svc: SerfService | AsyncSerfService, reached: dict[str, int]) -> None:
    """Note when each user event reaches the runner (its name's number)."""
    offer = svc._handlers.offer

    def noting(events):
        now = time.time_ns()
        for event in events:
            if isinstance(event, UserEventReceived):
                reached[event.payload.decode()] = now
        offer(events)
    svc._handlers.offer = noting


def latencies(log: Path, reached: dict[str, int]) -> list[float]:
    started = dict(line.split() for line in log.read_text().splitlines())
    return [(int(started[n]) - reached[n]) / 1e6 for n in reached]


def on_threads(events: int, burst: bool, folder: Path) -> list[float]:
    log = folder / f"threads-{burst}.log"
    reached: dict[str, int] = {}
    settings = {"event_handlers": [f"user={SCRIPT.format(log=log)}"], "handler_concurrency": 4 if burst else 1}
    with SerfService("a", "127.0.0.1", free_gossip_port(), **settings) as svc:
        offered_at(svc, reached)
        for n in range(events):
            svc.user_event(f"e{n}", str(n).encode(), coalesce=False)
            if not burst:
                time.sleep(0.02)
        wait_until(lambda: log.exists() and len(log.read_text().splitlines()) == events, timeout=120)
    return latencies(log, reached)


def on_asyncio(events: int, burst: bool, folder: Path) -> list[float]:
    log = folder / f"asyncio-{burst}.log"
    reached: dict[str, int] = {}
    settings = {"event_handlers": [f"user={SCRIPT.format(log=log)}"], "handler_concurrency": 4 if burst else 1}

    async def main() -> None:
        async with AsyncSerfService("a", "127.0.0.1", free_gossip_port(), **settings) as svc:
            offered_at(svc, reached)
            for n in range(events):
                svc.user_event(f"e{n}", str(n).encode(), coalesce=False)
                if not burst:
                    await asyncio.sleep(0.02)
            while not (log.exists() and len(log.read_text().splitlines()) == events):
                await asyncio.sleep(0.05)
    asyncio.run(asyncio.wait_for(main(), 120))
    return latencies(log, reached)


def beside_agent(events: int, folder: Path) -> tuple[list[float], list[float]]:
    """From a third member's user_event() to the script's start: (on a Python member, on Debian's agent)."""
    logs = {who: folder / f"{who}.log" for who in ("py", "go")}
    script = 't=$(date +%s%N); read n; echo "$n $t" >> {log}'
    gossip, rpc = free_gossip_port(), f"127.0.0.1:{free_tcp_port()}"
    agent = subprocess.Popen(["serf", "agent", "-node", "go1", "-bind", f"127.0.0.1:{gossip}", "-rpc-addr", rpc,
                              "-event-handler", "user:ping=" + script.format(log=logs["go"])],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=folder)
    fired: dict[str, int] = {}
    try:
        with SerfService("py", "127.0.0.1", free_gossip_port(),
                         event_handlers=["user:ping=" + script.format(log=logs["py"])]) as py, \
                SerfService("src", "127.0.0.1", free_gossip_port()) as src:
            wait_until(lambda: py.join([("127.0.0.1", gossip)], timeout=2).joined == 1)
            src.join([("127.0.0.1", gossip)])
            wait_until(lambda: len([m for m in py.members() if m.status.name == "ALIVE"]) == 3)
            for n in range(events):
                fired[str(n)] = time.time_ns()
                src.user_event("ping", str(n).encode(), coalesce=False)
                time.sleep(0.3)
            wait_until(lambda: all(log.exists() and len(log.read_text().splitlines()) == events
                                   for log in logs.values()), timeout=30)
    finally:
        agent.kill()
        agent.wait()
    py_ms, go_ms = (latencies(logs[who], fired) for who in ("py", "go"))
    return py_ms, go_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--agent", action="store_true", help="also beside Debian's serf agent (needs serf)")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rows.append({"row": "floor: Popen from Python", **summary(floor(args.events, folder))})
        for name, run in (("threads", on_threads), ("asyncio", on_asyncio)):
            rows.append({"row": f"{name}, spaced", **summary(run(args.events, False, folder))})
            rows.append({"row": f"{name}, burst of {min(args.events, 100)}",
                         **summary(run(min(args.events, 100), True, folder))})
        if args.agent and shutil.which("serf"):
            py_ms, go_ms = beside_agent(min(args.events, 50), folder)
            rows.append({"row": "fired by a peer: Python member", **summary(py_ms)})
            rows.append({"row": "fired by a peer: serf agent", **summary(go_ms)})
    for row in rows:
        print(f"{row['row']:32} runs {row['runs']:4}  median {row['median_ms']:7.2f} ms  "
              f"p90 {row['p90_ms']:7.2f} ms  max {row['max_ms']:7.2f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A gossip member flooded with large user events while its reader is slow:
how much memory the events waiting for that reader take. Loopback only.

    python bench/gossip_event_flood.py [--front threads|asyncio] [--events 3000] [--payload 60000]

A member on 127.0.0.1 (SerfService or AsyncSerfService, default settings);
a socket on 127.0.0.3 sends it ``--events`` user events of ``--payload``
bytes each, as another member gossips them (memberlist's user message around
Serf's), one datagram at a time, each waited for (the receive buffer holds a
few only). The slow reader is a listener that blocks (threads) or an event
stream never read (asyncio: its listeners run on the loop, so one that
blocks holds the loop and nothing waits). Prints the process's RSS before
and after the flood, the growth, and what the reader's queue dropped.

Measured (3,000 events of 60 KB, one run each, compiled; the pure-Python
twin within 3 MB): before the byte bound the threaded member grew by 176 MB
(every event waiting for the listener, under the count bound of 65,536,
which allows about 3.9 GB) and the asyncio one by 92 MB (its stream's 1,024
events). With ``event_queue_bytes`` (16 MiB by default, the heartbeat
fronts' setting) both grow by 46 MB and the reader gets an EventsLost for
the 2,721 dropped: the queue's 16 MiB (279 events), Serf's recent-event
buffer (one event per Lamport time here: 512 x 60 KB, 30 MB) and the user
broadcast queue (4 MiB).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import socket
import sys
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from mcastmember.gossip.fronts.aio import AsyncSerfService  # noqa: E402
from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.memberlist.layout import MessageType  # noqa: E402
from mcastmember.gossip.serf import messages as serf_messages  # noqa: E402
from support import free_gossip_port  # noqa: E402

MEMBER, ATTACKER = "127.0.0.1", "127.0.0.3"


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def user_event(ltime: int, payload: int) -> bytes:
    event = serf_messages.UserEvent(ltime=ltime, name="flood", payload=bytes([ltime % 251]) * payload)
    return bytes((MessageType.USER,)) + serf_messages.encode(event)


def flood(port: int, events: int, payload: int, received) -> int:
    """Send the events one by one, each waited for (up to 2 s); how many arrived."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((ATTACKER, 0))
        start = received()
        for ltime in range(1, events + 1):
            sock.sendto(user_event(ltime, payload), (MEMBER, port))
            deadline = time.monotonic() + 2
            while received() < start + ltime and time.monotonic() < deadline:
                time.sleep(0.0002)
        return received() - start


def threads(events: int, payload: int) -> dict[str, float]:
    port = free_gossip_port(MEMBER)
    release = threading.Event()
    svc = SerfService("a", MEMBER, port)
    svc.add_listener(lambda event: release.wait())
    with svc:
        before = rss_mb()
        started = time.monotonic()
        arrived = flood(port, events, payload, lambda: svc.stats()["datagrams_received"])
        after = rss_mb()
        stats = svc.stats()
        release.set()
    return {"rss_before_mb": before, "rss_after_mb": after, "seconds": time.monotonic() - started,
            "arrived": arrived, "dropped": stats["listener_events_dropped"]}


def asyncio_front(events: int, payload: int) -> dict[str, float]:
    port = free_gossip_port(MEMBER)

    async def run() -> dict[str, float]:
        async with AsyncSerfService("a", MEMBER, port) as member:
            stream = member.events()           # never read
            loop = asyncio.get_running_loop()

            async def received() -> int:
                return member.stats()["datagrams_received"]

            before = rss_mb()
            started = time.monotonic()
            arrived = await loop.run_in_executor(
                None, flood, port, events, payload,
                lambda: asyncio.run_coroutine_threadsafe(received(), loop).result())
            after = rss_mb()
            stats = member.stats()
            stream.close()
            return {"rss_before_mb": before, "rss_after_mb": after, "seconds": time.monotonic() - started,
                    "arrived": arrived, "dropped": stats["stream_events_dropped"]}
    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--front", choices=("threads", "asyncio"), default="threads")
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--payload", type=int, default=60_000)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    result = (threads if args.front == "threads" else asyncio_front)(args.events, args.payload)
    result["rss_growth_mb"] = result["rss_after_mb"] - result["rss_before_mb"]
    if args.json:
        print(json.dumps({"front": args.front, "events": args.events, "payload": args.payload, **result}))
        return
    print(f"{args.front}: {result['arrived']} of {args.events} events of {args.payload} bytes arrived in "
          f"{result['seconds']:.1f} s; RSS {result['rss_before_mb']:.1f} -> {result['rss_after_mb']:.1f} MB "
          f"(+{result['rss_growth_mb']:.1f} MB); the slow reader's queue dropped {result['dropped']}")


if __name__ == "__main__":
    main()

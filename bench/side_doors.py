#!/usr/bin/env python3
"""Figures for the fronts' side doors (a listener that never reads, stop, the
peers list), on loopback (TTL 0) only.

    python bench/side_doors.py events [--front threads|asyncio] [--updates 4000]
    python bench/side_doors.py stop
    python bench/side_doors.py peers [--records 3984] [--seconds 2]

events: a member whose listener (threads) or event stream (asyncio) never
reads, while 64 strangers with 60 KB payloads change them (one "updated"
event each): the process's RSS before and after, and what was dropped.
stop: how long ``stop()`` takes while a listener blocks (gives up at 30 s).
peers: a unicast member whose DNS name answers ``records`` addresses (all in
127.1.0.0/16, on loopback; the lookup is replaced, no DNS server): the
datagrams it sends per second, and the peers it kept.
"""

import argparse
import asyncio
import socket
import struct
import sys
import threading
import time

from mcastmember import AsyncMembership, McastService
from mcastmember.tribes.kernel import _fast_py

GROUP = "228.0.0.4"
LOOPBACK = {"interface": "127.0.0.1", "ttl": 0}
PAYLOAD = 60_000
STRANGERS = 64


def rss_mb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def sender():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, struct.pack("b", 0))
    return sock


def flood(port, updates, stats):
    """``updates`` heartbeats with a new 60 KB payload, STRANGERS at a time,
    each burst waited for (the receive buffer holds a few only)."""
    sock = sender()
    sent = 0
    while sent < updates:
        target = stats()["updated"] + stats()["added"] + STRANGERS
        for i in range(STRANGERS):
            payload = bytes([sent % 251]) * PAYLOAD
            packet = _fast_py.encode(1, 5000 + i, -1, -1, b"\x7f\x00\x00\x01", b"", b"",
                                     (1000 + i).to_bytes(16, "big"), payload)
            sock.sendto(packet, (GROUP, port))
            sent += 1
        deadline = time.monotonic() + 2
        while stats()["updated"] + stats()["added"] < target and time.monotonic() < deadline:
            time.sleep(0.002)
    sock.close()


def events_threads(updates):
    port = free_port()
    release = threading.Event()
    service = McastService(GROUP, port, member_port=4001, **LOOPBACK)
    service.add_listener(lambda event: release.wait())
    before = rss_mb()
    service.start()
    started = time.monotonic()
    flood(port, updates, service.stats)
    after = rss_mb()
    stats = service.stats()
    release.set()
    service.stop()
    return before, after, time.monotonic() - started, stats


def events_asyncio(updates):
    port = free_port()

    async def run():
        async with AsyncMembership(GROUP, port, member_port=4001, **LOOPBACK) as member:
            stream = member.events()          # never read
            before = rss_mb()
            started = time.monotonic()
            loop = asyncio.get_running_loop()

            def stats():
                return asyncio.run_coroutine_threadsafe(_stats(member), loop).result()
            await loop.run_in_executor(None, flood, port, updates, stats)
            after, counts = rss_mb(), member.stats()
            stream.close()
            return before, after, time.monotonic() - started, counts
    return asyncio.run(run())


async def _stats(member):
    return member.stats()


def stop_time():
    port = free_port()
    release, entered = threading.Event(), threading.Event()
    service = McastService(GROUP, port, member_port=4001, **LOOPBACK)

    def blocked(event):
        entered.set()
        release.wait()
    service.add_listener(blocked)
    service.start()
    sock = sender()
    sock.sendto(_fast_py.encode(1, 5000, -1, -1, b"\x7f\x00\x00\x01", b"", b"",
                                bytes(16), b""), (GROUP, port))
    entered.wait(10)
    stopper = threading.Thread(target=service.stop, daemon=True)
    started = time.monotonic()
    stopper.start()
    stopper.join(30)
    took = time.monotonic() - started
    returned = not stopper.is_alive()
    release.set()
    stopper.join(5)
    return took, returned


def peers(records, seconds):
    from mcastmember.tribes.discovery import resolver
    answer = {(f"127.1.{i // 250}.{i % 250 + 1}", 45999) for i in range(records)}
    resolver.lookup = lambda query, resolver=None: set(answer)
    service = McastService(None, 45999, interface="127.0.0.1", ttl=0, multicast=False,
                           member_port=4001, dns="members.invalid")
    with service:
        deadline = time.monotonic() + 10
        while service.stats()["lookups_answered"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        first = service.stats()["unicast_sent"]
        time.sleep(seconds)
        stats = service.stats()
    return (stats["unicast_sent"] - first) / seconds, stats["peers"], stats


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["events", "stop", "peers"])
    parser.add_argument("--front", choices=["threads", "asyncio"], default="threads")
    parser.add_argument("--updates", type=int, default=4000)
    parser.add_argument("--records", type=int, default=3984)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    if args.what == "events":
        run = events_threads if args.front == "threads" else events_asyncio
        before, after, took, stats = run(args.updates)
        print(f"{args.front}: {args.updates} updates of {PAYLOAD} B in {took:.1f} s: "
              f"RSS {before:.0f} MB -> {after:.0f} MB, events_dropped {stats['events_dropped']}")
    elif args.what == "stop":
        took, returned = stop_time()
        print(f"stop() with a blocked listener: {'returned' if returned else 'still waiting'} "
              f"after {took:.2f} s")
    else:
        rate, kept, stats = peers(args.records, args.seconds)
        print(f"{args.records} addresses in one answer: {kept} peers, {rate:.0f} datagrams/s"
              + (f", peers_refused {stats['peers_refused']}" if "peers_refused" in stats else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

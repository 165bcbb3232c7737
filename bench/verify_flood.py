"""Forged heartbeats against a member with ``verify=True`` (the probes a
forger could make it send), on loopback only: what they make it hold and what they make it connect to.

A "victim" process listens on 127.0.0.9 and counts the connections it
accepts. This process runs a member (threaded front, verify on) and sends
forged heartbeats to the group on 127.0.0.1 with TTL 0, one datagram per
forged member, each naming the victim's address and port: batches of
``max_members`` one drop time apart (each batch expires into suspects before
the next arrives). Reported: the members held, the victim's connections (in
all, and in the second 15 s after the last datagram), and this process's CPU
while it ran, as a share of one core.

    python bench/verify_flood.py [--max-members 16 --batches 12] [--front aio]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import socket
import threading
import time

from mcastmember import AsyncMembership, McastService
from mcastmember.tribes.kernel import codec as _codec

GROUP, VICTIM = "228.0.0.4", "127.0.0.9"


def victim(ready, counts, stop):
    """Accept and close connections on VICTIM, counting them (counts[0])."""
    server = socket.create_server((VICTIM, 0), backlog=1024)
    ready.put(server.getsockname()[1])
    server.settimeout(0.2)
    while not stop.is_set():
        try:
            conn, _ = server.accept()
        except socket.timeout:
            continue
        conn.close()
        with counts.get_lock():
            counts.value += 1


def cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def forge(sock, group_port, victim_port, first, count):
    host = socket.inet_aton(VICTIM)
    for i in range(first, first + count):
        uid = (0xF0F0 << 112 | i).to_bytes(16, "big")
        packet = _codec.impl.encode(1, victim_port, -1, -1, host, b"", b"", uid, b"")
        sock.sendto(packet, (GROUP, group_port))


class Member:
    """The member under attack, on either front, with a thread-safe view."""

    def __init__(self, front, group_port, max_members):
        settings = dict(interface="127.0.0.1", ttl=0, verify=True, max_members=max_members,
                        member_port=0)
        self.front = front
        if front == "threads":
            self.service = McastService(GROUP, group_port, **settings).start()
            self.members = lambda: len(self.service.members())
            self.stats = self.service.stats
            self.stop = self.service.stop
        else:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, daemon=True).start()

            async def start():
                membership = AsyncMembership(GROUP, group_port, **settings)
                await membership.start()
                return membership

            def call(coroutine_or_fn):
                if asyncio.iscoroutine(coroutine_or_fn):
                    return asyncio.run_coroutine_threadsafe(coroutine_or_fn, loop).result()

                async def wrap():
                    return coroutine_or_fn()
                return asyncio.run_coroutine_threadsafe(wrap(), loop).result()

            self.service = call(start())
            self.members = lambda: call(lambda: len(self.service.members()))
            self.stats = lambda: call(self.service.stats)
            self.stop = lambda: call(self.service.stop())


def run(max_members, batches, front, drop_s, after_s):
    ready = multiprocessing.Queue()
    counts = multiprocessing.Value("q", 0)
    stop = multiprocessing.Event()
    proc = multiprocessing.Process(target=victim, args=(ready, counts, stop), daemon=True)
    proc.start()
    victim_port = ready.get(timeout=10)
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.bind(("127.0.0.1", 0))
    group_port = probe.getsockname()[1]
    probe.close()
    member = Member(front, group_port, max_members)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
    sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    time.sleep(0.5)
    cpu0, t0 = cpu_s(), time.monotonic()
    peak = 0
    for b in range(batches):
        forge(sender, group_port, victim_port, b * max_members, max_members)
        end = time.monotonic() + drop_s + 0.5
        while time.monotonic() < end:
            time.sleep(0.25)
            peak = max(peak, member.members())
    last = time.monotonic()
    at_last = counts.value
    sample = {}
    while time.monotonic() < last + after_s:
        time.sleep(0.25)
        now = time.monotonic() - last
        peak = max(peak, member.members())
        if 15.0 <= now and "rate_15s" not in sample:
            before = counts.value
            time.sleep(1.0)
            sample["rate_15s"] = counts.value - before
    cpu = (cpu_s() - cpu0) / (time.monotonic() - t0)
    stats = member.stats()
    result = {
        "front": front, "max_members": max_members, "datagrams": batches * max_members,
        "members_peak": peak, "members_end": member.members(),
        "connections_during_flood": at_last, "connections_total": counts.value,
        "connections_per_s_15s_after": sample.get("rate_15s"),
        "cpu_share_of_one_core": round(cpu, 2), "seconds": round(time.monotonic() - t0, 1),
        "stats": {k: v for k, v in stats.items()
                  if k.startswith(("verify.", "refused", "suspect", "unprobed")) and v},
    }
    member.stop()
    stop.set()
    proc.join(5)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-members", type=int, default=1024)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--front", choices=("threads", "aio"), default="threads")
    parser.add_argument("--after", type=float, default=40.0,
                        help="seconds to watch after the last datagram")
    args = parser.parse_args()
    print(json.dumps(run(args.max_members, args.batches, args.front, 3.0, args.after),
                     indent=1), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()

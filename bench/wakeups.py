#!/usr/bin/env python3
"""Wake-ups per second of an idle member: one McastService at rest with one
peer on loopback (interface 127.0.0.1, TTL 0), counted as the voluntary
context switches of every thread of the member's process over a window.

    python bench/wakeups.py [--seconds 10] [--front threads|asyncio] [--json out.json]

At rest a member should wake for its own heartbeats, for its peer's, and for
an expiry deadline only when one is due: not on a fixed tick.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

MEMBER = r"""
import asyncio, sys, time
from mcastmember import AsyncMembership, McastService
port, front, seconds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
settings = dict(interface="127.0.0.1", ttl=0, member_port=int(sys.argv[4]))
if front == "asyncio":
    async def main():
        async with AsyncMembership("228.0.0.4", port, **settings):
            print("ready", flush=True)
            await asyncio.sleep(seconds)
    asyncio.run(main())
else:
    with McastService("228.0.0.4", port, **settings):
        print("ready", flush=True)
        time.sleep(seconds)
"""


def voluntary_switches(pid):
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as status:
                for line in status:
                    if line.startswith("voluntary_ctxt_switches"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass   # a thread that just ended
    return total


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def measure(front, seconds):
    port = free_udp_port()

    def spawn(member_port, lifetime):
        child = subprocess.Popen([sys.executable, "-c", MEMBER, str(port), front, str(lifetime),
                                  str(member_port)], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        return child

    peer = spawn(4002, seconds + 6)
    member = spawn(4001, seconds + 4)
    try:
        time.sleep(2.0)                       # both heard, the table at rest
        before = voluntary_switches(member.pid)
        time.sleep(seconds)
        after = voluntary_switches(member.pid)
    finally:
        for child in (member, peer):
            child.wait(timeout=30)
    return (after - before) / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--front", choices=("threads", "asyncio", "both"), default="both")
    parser.add_argument("--json")
    args = parser.parse_args()
    fronts = ("threads", "asyncio") if args.front == "both" else (args.front,)
    result = {front: measure(front, args.seconds) for front in fronts}
    for front, rate in result.items():
        print(f"{front}: {rate:.1f} wake-ups/s at rest (one member, one peer, "
              f"heartbeat every 500 ms)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=2)


if __name__ == "__main__":
    main()

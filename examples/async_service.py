"""An asyncio service that follows the group with AsyncMcastService, no threads.

    python examples/async_service.py --member-port 4001
    python examples/async_service.py --member-port 4002 --wait-for 1

Runs on loopback (127.0.0.1, TTL 0) unless told otherwise. It waits until
--wait-for other members are present, then prints every change until Ctrl-C
or --duration, and leaves cleanly (peers drop it at once).
"""

import argparse
import asyncio
import contextlib
import signal

from mcastmember import AsyncMcastService


async def main(args):
    async with AsyncMcastService(args.group, args.port, interface=args.interface, ttl=args.ttl,
                                 member_port=args.member_port, payload=args.role) as m:
        me = m.local_member
        print(f"joined as {me.address}:{me.port} ({args.role})")
        if args.wait_for:
            members = await m.wait_for(lambda ms: len(ms) >= args.wait_for, timeout=30)
            print(f"{len(members)} peer(s) present: ready to serve")

        async def follow():
            async for event in m.events():   # starts with everyone already here
                if event.kind == "events_lost":
                    print("fell behind; resynchronising:", m.members())
                    continue
                who = f"{event.member.address}:{event.member.port}"
                print(event.kind, event.reason or "", who, event.member.payload.decode())

        follower = asyncio.ensure_future(follow())
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), args.duration)
    await follower          # the stream ends when the membership stops
    print("left the group")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", default="228.0.0.4")
    parser.add_argument("--port", type=int, default=45564)
    parser.add_argument("--interface", default="127.0.0.1")
    parser.add_argument("--ttl", type=int, default=0)
    parser.add_argument("--member-port", type=int, default=4001)
    parser.add_argument("--role", default="api")
    parser.add_argument("--wait-for", type=int, default=0)
    parser.add_argument("--duration", type=float)
    asyncio.run(main(parser.parse_args()))

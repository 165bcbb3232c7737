"""A small cluster service: join, react to peers coming and going, leave cleanly.

    python examples/cluster_service.py --member-port 4001 --role web
    python examples/cluster_service.py --member-port 4002 --role worker

Runs on loopback (127.0.0.1, TTL 0) unless told otherwise, so trying it sends
nothing onto a real network. Ctrl-C (or --duration) leaves the group, and the
other instances drop this one at once.
"""

import argparse
import logging
import signal
import threading

from mcastmember import McastService


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group", default="228.0.0.4")
    parser.add_argument("--port", type=int, default=45564)
    parser.add_argument("--interface", default="127.0.0.1")
    parser.add_argument("--ttl", type=int, default=0)
    parser.add_argument("--member-port", type=int, default=4001)
    parser.add_argument("--role", default="web", help="advertised as the payload")
    parser.add_argument("--duration", type=float, help="seconds before leaving")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    log = logging.getLogger("example")

    peers = {}   # Member -> role; touched only on the dispatcher thread

    def on_change(event):
        member = event.member
        role = member.payload.decode("utf-8", "replace")
        if event.kind == "added":
            peers[member] = role
            log.info("peer %s:%d joined as %s", member.address, member.port, role)
        elif event.kind == "updated":
            peers[member] = role
            log.info("peer %s:%d is now %s", member.address, member.port, role)
        else:
            peers.pop(member, None)
            log.info("peer %s:%d left (%s)", member.address, member.port, event.reason)
        workers = sorted(m.port for m, r in peers.items() if r == "worker")
        log.info("workers I can use now: %s", workers or "none")

    leave = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: leave.set())
    signal.signal(signal.SIGTERM, lambda *_: leave.set())

    service = McastService(args.group, args.port, interface=args.interface, ttl=args.ttl,
                           member_port=args.member_port, payload=args.role)
    service.add_listener(on_change)
    with service:
        log.info("joined as %s:%d (%s)", service.local_member.address, args.member_port,
                 args.role)
        leave.wait(args.duration)
    log.info("left the group")


if __name__ == "__main__":
    main()

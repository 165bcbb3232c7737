"""A Python Serf member as its own process (a SerfService), for the tests and
benches that kill one: ``python serf_member.py SETTINGS_JSON``.

SETTINGS_JSON: {"name", "bind", "tags": {}, "keys": [base64...], "join":
[[host, port]...], "reconnect_interval": s}. Prints one JSON object per
line: {"event": "joining"} before it joins, {"event": "ready"} once
started (and joined, if asked: with "joined", how many seeds answered),
each member event as {"event": kind, "name", "status"}, each user event as
{"event": "user", "name", "payload"}; its stats on SIGUSR1 ({"event":
"stats", "stats": {...}}); a graceful leave on SIGTERM.
"""

import base64
import json
import signal
import sys
import threading

from mcastmember.gossip.fronts.service import SerfService
from mcastmember.gossip.serf.node import SerfMemberEvent, UserEventReceived

lock, asked, leave = threading.Lock(), threading.Event(), threading.Event()


def out(item):
    with lock:
        sys.stdout.write(json.dumps(item) + "\n")
        sys.stdout.flush()


def main():
    settings = json.loads(sys.argv[1])
    signal.signal(signal.SIGUSR1, lambda *_: asked.set())
    signal.signal(signal.SIGTERM, lambda *_: leave.set())
    svc = SerfService(settings["name"], settings["bind"], tags=settings.get("tags", {}),
                      keys=tuple(base64.b64decode(k) for k in settings.get("keys", ())),
                      reconnect_interval=settings.get("reconnect_interval", 30.0))

    def listen(event):
        if isinstance(event, SerfMemberEvent):
            out({"event": event.kind, "name": event.member.name, "status": event.member.status.name.lower()})
        elif isinstance(event, UserEventReceived):
            out({"event": "user", "name": event.name, "payload": event.payload.decode("utf-8", "replace")})

    svc.add_listener(listen)
    svc.start()
    ready = {"event": "ready"}
    if settings.get("join"):
        out({"event": "joining"})
        ready["joined"] = svc.join([tuple(seed) for seed in settings["join"]]).joined
    out(ready)
    while not leave.is_set():
        if asked.wait(0.05):
            asked.clear()
            out({"event": "stats", "stats": svc.stats()})
    svc.leave()
    svc.stop()


if __name__ == "__main__":
    main()

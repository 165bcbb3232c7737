#!/usr/bin/env python3
"""Figures for the TCP listener's replies (the amplification a forged sender
could cause), on loopback only: a client sends RPC frames whose sender is a
member's packet (public bytes) for a few seconds; how many connections and bytes reach the
member's receiver, with our packet carrying a 60 KB payload.

    python bench/reply_amplification.py [--source 127.0.0.7] [--seconds 3]

--source is the client's address: another host than the member's (127.0.0.1)
shows the relay, the member's own host shows the rate bound.
"""

import argparse
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support import JAVA_RPC_REQUEST, heartbeat  # noqa: E402

from mcastmember.tribes.kernel import codec as _codec
from mcastmember.tribes.kernel import _fast_py  # noqa: E402
from mcastmember.tribes.engine.channel import ChannelData, frame  # noqa: E402
from mcastmember.tribes.engine.member import Member  # noqa: E402
from mcastmember.tribes.fronts.channel_listener import TribesListener  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", default="127.0.0.7")
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    got = {"connections": 0, "bytes": 0}
    receiver = socket.socket()
    receiver.bind(("127.0.0.1", 0))
    receiver.listen(512)

    def serve(conn):
        with conn:
            while data := conn.recv(65536):
                got["bytes"] += len(data)

    def accept():
        while True:
            try:
                conn, _ = receiver.accept()
            except OSError:
                return
            got["connections"] += 1
            threading.Thread(target=serve, args=(conn,), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    packet = heartbeat(port=receiver.getsockname()[1])          # the member, at 127.0.0.1
    fields = _codec.parse(packet)
    member = Member(fields[4], fields[1], fields[7])
    ours = _fast_py.encode(1, 4100, -1, -1, bytes([127, 0, 0, 1]), b"", b"", b"O" * 16,
                           b"p" * 60_000)
    listener = TribesListener("127.0.0.1", 0, lambda: ours, lambda m: m == member,
                              lambda: {"127.0.0.1"})
    listener.start()
    request = frame(ChannelData(8, 0, b"i" * 16, packet, JAVA_RPC_REQUEST).encode())
    sent, start = 0, time.monotonic()
    with socket.create_connection(("127.0.0.1", listener.port),
                                  source_address=(args.source, 0)) as sock:
        while time.monotonic() - start < args.seconds:
            sock.sendall(request * 8)
            sent += 8
            time.sleep(0.005)
        time.sleep(1.5)
    stats = listener.stats()
    listener.stop()
    receiver.close()
    bytes_in = sent * len(request)
    print(f"from {args.source}: {sent} frames ({bytes_in} B in, {len(request)} B each) -> "
          f"{got['connections']} connections ({got['connections'] / args.seconds:.0f}/s), "
          f"{got['bytes']} B to the member (x{got['bytes'] / bytes_in:.2f}); "
          + ", ".join(f"{k}={stats[k]}" for k in ("probe_rpc_replies", "probe_replies_refused",
                                                   "probe_replies_limited",
                                                   "probe_replies_failed")))


if __name__ == "__main__":
    main()

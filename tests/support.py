"""Test vectors and helpers shared by the tests (importable: tests/ is on the path)."""

import socket
import time

from mcastmember import _fast_py

# WIRE.md §7, produced by Tomcat 10.1.60 (alive normalised to 12345).
UID = bytes(range(16))
LOCALHOST = b"\x7f\x00\x00\x01"
V1 = bytes.fromhex(
    "5452494245532d4201000000003f000000000000303900000fa0ffffffffffffffff047f00000100000000"
    "00000003646f6d000102030405060708090a0b0c0d0e0f000000077061796c6f61645452494245532d450100")
V2 = bytes.fromhex(
    "5452494245532d42010000000035000000000000303900000fa0ffffffffffffffff047f00000100000000"
    "00000000000102030405060708090a0b0c0d0e0f000000005452494245532d450100")
V3 = bytes.fromhex(
    "5452494245532d42010000000048000000000000303900000fa0ffffffffffffffff047f00000100000009"
    "424142592d414c455800000003646f6d000102030405060708090a0b0c0d0e0f000000077061796c6f6164"
    "5452494245532d450100")
V4 = bytes.fromhex(
    "5452494245532d42010000000044000000000000303900000fa0ffffffffffffffff100000000000000000"
    "00000000000000010000000000000003646f6d000102030405060708090a0b0c0d0e0f000000005452494245532d450100")
REAL = bytes.fromhex(
    "5452494245532d4201000000003e000000000000004f00000fa1ffffffffffffffff047f0000010000000000"
    "000004646f6d31a12ddb1dd8ec45639e2411510196acc800000005616c7068615452494245532d450100")

# (packet, expected parse tuple)
VECTORS = {
    "V1": (V1, (12345, 4000, -1, -1, LOCALHOST, b"", b"dom", UID, b"payload")),
    "V2": (V2, (12345, 4000, -1, -1, LOCALHOST, b"", b"", UID, b"")),
    "V3": (V3, (12345, 4000, -1, -1, LOCALHOST, b"BABY-ALEX", b"dom", UID, b"payload")),
    "V4": (V4, (12345, 4000, -1, -1, bytes(15) + b"\x01", b"", b"dom", UID, b"")),
    "REAL": (REAL, (0x4f, 4001, -1, -1, LOCALHOST, b"", b"dom1",
                    bytes.fromhex("a12ddb1dd8ec45639e2411510196acc8"), b"alpha")),
}


def heartbeat(codec=_fast_py, *, port=4001, uid=UID, alive=1, domain=b"", payload=b"",
              command=b"", host=LOCALHOST):
    return codec.encode(alive, port, -1, -1, host, command, domain, uid, payload)


# Every network test uses these: loopback only, never the default interface.
LOOPBACK = {"interface": "127.0.0.1", "ttl": 0}
GROUP = "228.0.0.4"


def loopback_sender():
    """A raw UDP socket that multicasts on loopback only (TTL 0)."""
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
    return sender


def fake_members(group_port, count, payload=b"", junk_first=0):
    """Heartbeats of ``count`` strangers (ports 5000...), sent once each from a
    raw socket, after ``junk_first`` malformed datagrams."""
    with loopback_sender() as sender:
        for _ in range(junk_first):
            sender.sendto(b"junk", (GROUP, group_port))
        for i in range(count):
            packet = _fast_py.encode(1, 5000 + i, -1, -1, LOCALHOST, b"", b"",
                                     (1000 + i).to_bytes(16, "big"), payload)
            sender.sendto(packet, (GROUP, group_port))


def wait_until(condition, timeout=5.0):
    """Poll ``condition`` until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)

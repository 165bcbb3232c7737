"""Test vectors and helpers shared by the tests (importable: tests/ is on the path)."""

import asyncio
import contextlib
import inspect
import os
import re
import select
import shlex
import socket
import time

from mcastmember.tribes.kernel import _fast_py

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


# Java-serialized Tomcat messages, made by Tomcat 10.1.60's own classes
# (tests/interop/TribesVectors.java): an RPC request with uuid a0..af, rpc id
# "map-ctx" and message "hello"; the same with a 300-byte rpc id; Tomcat's
# NoRpcChannelReply to the first; a DeltaManager's "send me all sessions" for
# context "/shop", stamped 1764760000123.
JAVA_RPC_REQUEST = bytes.fromhex(
    "aced00057372002b6f72672e6170616368652e636174616c696e612e7472696265732e67726f75702e527063"
    "4d657373616765712a750ff274e5090c0000787077200000000010a0a1a2a3a4a5a6a7a8a9aaabacadaeaf00"
    "0000076d61702d63747874000568656c6c6f78")
JAVA_RPC_REQUEST_LONG_ID = bytes.fromhex(
    "aced00057372002b6f72672e6170616368652e636174616c696e612e7472696265732e67726f75702e527063"
    "4d657373616765712a750ff274e5090c000078707a000001450000000010a0a1a2a3a4a5a6a7a8a9aaabacad"
    "aeaf0000012c000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425"
    "262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f5051"
    "52535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d"
    "7e7f808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9fa0a1a2a3a4a5a6a7a8a9"
    "aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5"
    "d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff0001"
    "02030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b7400"
    "0568656c6c6f78")
JAVA_NO_RPC_REPLY = bytes.fromhex(
    "aced00057372003d6f72672e6170616368652e636174616c696e612e7472696265732e67726f75702e527063"
    "4d657373616765244e6f5270634368616e6e656c5265706c797bab8fb36a4b5ba60c00007872002b6f72672e"
    "6170616368652e636174616c696e612e7472696265732e67726f75702e5270634d657373616765712a750ff2"
    "74e5090c00007870771f00000010a0a1a2a3a4a5a6a7a8a9aaabacadaeaf000000076d61702d63747878")
JAVA_GET_ALL_SESSIONS = bytes.fromhex(
    "aced0005737200316f72672e6170616368652e636174616c696e612e68612e73657373696f6e2e5365737369"
    "6f6e4d657373616765496d706c00000000000000020200074900086d457674547970654a001673657269616c"
    "697a6174696f6e54696d657374616d705a000c74696d657374616d705365744c000c6d436f6e746578744e61"
    "6d657400124c6a6176612f6c616e672f537472696e673b5b00086d53657373696f6e7400025b424c000a6d53"
    "657373696f6e494471007e00014c0008756e69717565496471007e0001787200296f72672e6170616368652e"
    "636174616c696e612e68612e436c75737465724d6573736167654261736500000000000000010200014a0009"
    "74696d657374616d7078700000000000000000000000040000019ae3e4967b017400052f73686f7070740007"
    "4745542d414c4c74000d4745542d414c4c2d2f73686f70")


def loopback_sender():
    """A raw UDP socket that multicasts on loopback only (TTL 0)."""
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
    return sender


def next_datagram(group_port, timeout=10.0):
    """The next datagram sent to the group on loopback: whoever sends it is up
    (its heartbeats flow). Shares the port as the members' sockets do."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("", group_port))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                        socket.inet_aton(GROUP) + socket.inet_aton("127.0.0.1"))
        sock.settimeout(timeout)
        return sock.recv(65536)


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


@contextlib.contextmanager
def silent_port():
    """A loopback TCP port that never answers a connect: it listens with a
    full backlog, so the kernel drops further SYNs. Yields (address, port)."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(0)
    fillers = []
    try:
        for _ in range(8):
            filler = socket.socket()
            fillers.append(filler)
            filler.setblocking(False)
            filler.connect_ex(silent.getsockname())
        yield silent.getsockname()
    finally:
        for sock in [silent, *fillers]:
            sock.close()


def wait_until(predicate, timeout=10.0, interval=0.01, message=None):
    """Poll ``predicate()`` every ``interval`` seconds until it returns
    something true, and return that value: a test waits for the thing
    itself, never a fixed time. After ``timeout`` seconds it fails with an
    AssertionError naming what it waited for: ``message`` (a string, or a
    callable giving one, for details known only then) beside the
    predicate's source. The timeout only keeps a broken test from hanging."""
    deadline = time.monotonic() + timeout
    while not (value := _polled(predicate, deadline, timeout, message)):
        time.sleep(interval)
    return value


async def async_wait_until(predicate, timeout=10.0, interval=0.01, message=None):
    """wait_until for a coroutine: the event loop runs while it polls."""
    deadline = time.monotonic() + timeout
    while not (value := _polled(predicate, deadline, timeout, message)):
        await asyncio.sleep(interval)
    return value


def _polled(predicate, deadline, timeout, message):
    """``predicate()``'s value; an AssertionError if it is false past the deadline."""
    value = predicate()
    if not value and time.monotonic() >= deadline:
        raise AssertionError(f"waited {timeout}s for {_awaited(predicate, message)}")
    return value


def _awaited(predicate, message):
    """What a wait was for: the predicate's source, and ``message``'s details."""
    try:
        what = inspect.getsource(predicate).strip()
    except (OSError, TypeError):
        what = repr(predicate)
    if message is None:
        return what
    return f"{what}\n{message() if callable(message) else message}"


def child_env():
    """The environment for a child Python that imports these helpers (support,
    netlab...): this folder on its PYTHONPATH."""
    here = os.path.dirname(os.path.abspath(__file__))
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])))


class NoLineInTime(AssertionError):
    """next_line waited its whole timeout: the test fails unless it polls."""


def next_line(proc, timeout=15.0):
    """The next line of ``proc``'s stdout (a str, without its newline),
    read from the pipe itself, what is left of a read kept on ``proc``: a
    buffered readline may take two lines at once and hide the second from
    select. NoLineInTime when none comes within ``timeout`` seconds,
    EOFError when the process closes its stdout first. Read the rest with
    rest_of_stdout, never through ``proc.stdout``: it cannot see what is
    kept here."""
    pending = proc.__dict__.setdefault("unread_stdout", bytearray())
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    while b"\n" not in pending:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise NoLineInTime("no line in time")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise EOFError(f"the process closed its output (after {bytes(pending)!r})")
        pending += chunk
    line, _, rest = bytes(pending).partition(b"\n")
    pending[:] = rest
    return line.decode()      # whole lines only: no character is cut in two


def rest_of_stdout(proc):
    """What ``proc`` writes to stdout after the lines next_line returned,
    until it closes it (a str)."""
    rest = bytearray(proc.__dict__.get("unread_stdout", b""))
    fd = proc.stdout.fileno()
    while chunk := os.read(fd, 65536):
        rest += chunk
    return rest.decode()


def fix_flag(fix, flag):
    """The value a check's ``fix`` text gives ``flag``: ("--drop-time 1200 on
    every node", "--drop-time") -> "1200"."""
    lexer = shlex.shlex(fix[fix.index(flag) + len(flag):], posix=True)
    lexer.whitespace_split = True          # one word, quotes removed; the rest unread
    return lexer.get_token().rstrip(",;")


def fix_command(fix, start):
    """The command a check's ``fix`` text names, from the words ``start`` to
    the next comma, semicolon or parenthesis: ("ip route add 224.0.0.0/4 dev
    eth0 (this host's ...)", "ip route") -> "ip route add 224.0.0.0/4 dev eth0"."""
    return re.search(rf"\b{re.escape(start)} [^,;(]*", fix).group().strip()


def free_tcp_port():
    """A TCP port on 127.0.0.1 nobody listens on now: for a demo whose
    listener must start (verify), where a fixed port may be another run's."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_beside(svc, work, timeout=30):
    """``work(svc, on)`` while gossip front ``svc`` runs: a SerfService, or an
    AsyncSerfService whose loop runs meanwhile (``work`` then on a thread of
    its own); ``on(fn)`` calls ``fn()`` where the front's state may be
    touched (on the loop for asyncio). Returns what ``work`` returns."""
    if not hasattr(svc, "loop"):
        with svc:
            return work(svc, lambda fn: fn())

    async def main():
        async with svc:
            loop = asyncio.get_running_loop()

            async def call(fn):
                return fn()
            return await asyncio.to_thread(
                work, svc, lambda fn: asyncio.run_coroutine_threadsafe(call(fn), loop).result(10))
    return asyncio.run(asyncio.wait_for(main(), timeout))


def free_gossip_port(host="127.0.0.1"):
    """A port free for both TCP and UDP on ``host`` now (racy, but only on
    loopback): what a gossip member binds."""
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind((host, 0))
        port = tcp.getsockname()[1]
        udp.bind((host, port))
        return port

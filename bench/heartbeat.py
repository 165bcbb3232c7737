#!/usr/bin/env python3
"""Per-heartbeat cost of mcastmember, side by side with its peers, in one run.

    python bench/heartbeat.py [--json out.json] [--plot scale.png] [--quick]

Rows: the compiled path, the pure-Python path (each also with authenticated
heartbeats: signing, and checking a trailer and its sequence), a naive baseline that does what
Tomcat 5.5 did (bench/naive.py), Tomcat Tribes 10.1 itself (bench/TribesBench.java,
when Java and Debian's libtomcat10-java are installed) and the bare socket floor.
Also: unicast fan-out to 10, 100 and 1,000 peers (compiled and pure-Python
send_to, a naive sendto loop and a C sendmmsg loop, the floor), the receive
loop against a bare recv_into loop on the same packets, the slowdown of a
CPU-bound thread while 20,000 heartbeats/s arrive, the cost against cluster
size, import time and time to the first heartbeat.

All network traffic stays on this host: UDP to loopback addresses (127.0.0.1;
127.0.x.y for the fan-out's peers, each a bound socket), and multicast only
on interface 127.0.0.1 with TTL 0. Timings are noisy on small machines:
compare figures within one run.
"""

import argparse
import ctypes
import errno
import functools
import gc
import json
import math
import operator
import os
import pathlib
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import naive  # noqa: E402  (bench/naive.py)
from mcastmember.tribes.kernel import codec as _codec  # noqa: E402
from mcastmember.tribes.kernel import _fast_py  # noqa: E402
from mcastmember.tribes.wire import layout as L  # noqa: E402
from mcastmember.tribes.wire import auth  # noqa: E402
from mcastmember.tribes.engine.table import Membership  # noqa: E402
from mcastmember.tribes.engine.engine import MembershipEngine  # noqa: E402

try:
    from mcastmember.tribes.kernel import _fast
except ImportError:
    _fast = None

LOCALHOST = b"\x7f\x00\x00\x01"
GROUP = "228.0.0.4"
KEY = bytes(range(32))


def member_packet(codec, i, alive=1, domain=b"dom", payload=b""):
    return codec.encode(alive, 4000 + i % 20000, -1, -1, LOCALHOST, b"", domain,
                        (i + 1).to_bytes(16, "big"), payload)


# -- measuring one call -------------------------------------------------------------
def per_call_ns(fn, rounds, repeats=5):
    """Best time per call of ``fn`` over ``rounds`` calls, less the bare loop."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        loop = range(rounds)
        best = math.inf
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            for _ in loop:
                fn()
            t1 = time.perf_counter_ns()
            best = min(best, t1 - t0)
        empty = math.inf
        for _ in range(repeats):
            t0 = time.perf_counter_ns()
            for _ in loop:
                pass
            empty = min(empty, time.perf_counter_ns() - t0)
    finally:
        if gc_was:
            gc.enable()
    return max(0.0, (best - empty) / rounds)


def _allocation_raw(fn, rounds, warm=1000, traced=2000):
    for _ in range(warm):
        fn()          # warm caches, free lists, lazy imports
    gc.collect()
    gc.disable()
    try:
        blocks0 = sys.getallocatedblocks()
        for _ in range(rounds):
            fn()
        blocks = (sys.getallocatedblocks() - blocks0) / rounds
        tracemalloc.start()
        worst = 0
        memory = tracemalloc.get_traced_memory
        for _ in range(traced):
            tracemalloc.reset_peak()
            before = memory()[0]
            fn()
            worst = max(worst, memory()[1] - before)
        tracemalloc.stop()
    finally:
        gc.enable()
    return worst, blocks


def allocation(fn, rounds=20000, warm=1000, traced=2000):
    """(bytes, blocks) per call: the most Python heap one call holds beyond what
    was there before it (tracemalloc peak, the worst of ``traced`` single
    calls, less what measuring a call that does nothing shows), and the blocks
    left behind per call (sys.getallocatedblocks over ``rounds`` calls), after
    ``warm`` calls."""
    noise, noise_blocks = _allocation_raw(_nothing, rounds, warm, traced)
    worst, blocks = _allocation_raw(fn, rounds, warm, traced)
    return max(0, worst - noise), max(0.0, blocks - noise_blocks)


def _nothing():
    return None


# -- the implementations, per heartbeat ------------------------------------------------
def library_row(codec, name, rounds, keyed=False):
    """What mcastmember does per heartbeat besides the socket call: stamp the
    alive bytes (HeartbeatPacket.send) and recognise a known member
    (MemberIndex.pump), timed in the implementation's own loop (C for the
    compiled one), and also as one call from Python. ``keyed``: with
    authentication (enforce): sign the packet; check the trailer's MAC and
    sequence (the one-call figure from Python checks a replay: the same MAC
    work, then a drop)."""
    packet = codec.HeartbeatPacket(member_packet(codec, 0))
    index = codec.MemberIndex(16)
    known = member_packet(codec, 1)
    slot = index.add(known, -1, 0.0, L.KIND_MEMBER)
    datagram = member_packet(codec, 1, alive=999)
    if keyed:
        packet.set_key(1, KEY)
        index.set_keys(L.AUTH_ENFORCE, {1: KEY})
        index.set_auth(slot, True, 0)
        datagram += auth.trailer(datagram, auth.HeartbeatKeys([(1, KEY)]), 1)
        name += " + auth"
    buf = bytearray(L.RECV_BUFFER_LEN)
    buf[:len(datagram)] = datagram
    n = len(datagram)
    send_ns = min(codec._bench_stamp(packet, rounds) for _ in range(5))
    recv_ns = min(codec._bench_recognise(index, buf, n, rounds) for _ in range(5))
    send_call, recv_call = packet.stamp_now, functools.partial(index.lookup, buf, n, 1.0)
    send_bytes, send_blocks = allocation(send_call)
    recv_bytes, recv_blocks = allocation(recv_call)
    return dict(impl=name, send_ns=send_ns, send_bytes=send_bytes, send_blocks=send_blocks,
                recv_ns=recv_ns, recv_bytes=recv_bytes, recv_blocks=recv_blocks,
                send_call_ns=per_call_ns(send_call, rounds),
                recv_call_ns=per_call_ns(recv_call, rounds))


def naive_paths():
    sender = naive.NaiveSender("localhost", 4000, "00" * 15 + "01", domain="dom")
    receiver = naive.NaiveReceiver()
    buf = bytearray(L.RECV_BUFFER_LEN)
    data = sender.packet()
    buf[:len(data)] = data
    receiver.receive(buf, len(data))
    return sender.packet, functools.partial(receiver.receive, buf, len(data))


def _receive_buffer(sock, size):
    """Ask for a receive buffer of ``size`` bytes, past rmem_max where allowed."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), size)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)


def loopback_udp_pair(rcvbuf=8 << 20):
    """A receiving UDP socket on 127.0.0.1 with a large buffer, and a sender
    connected to it."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    _receive_buffer(rx, rcvbuf)
    rx.bind(("127.0.0.1", 0))
    rx.setblocking(False)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.connect(rx.getsockname())
    return tx, rx


def floor_paths():
    """The bare socket calls: send of a prebuilt packet, recv_into a buffer."""
    tx, rx = loopback_udp_pair()
    data = member_packet(_fast_py, 0)
    buf = bytearray(L.RECV_BUFFER_LEN)
    send = functools.partial(tx.send, data)
    recv_into = rx.recv_into

    def recv():
        try:
            recv_into(buf)
        except BlockingIOError:
            pass
    # Time recv only over queued datagrams: fill, then drain in timed batches.
    return send, recv, (tx, rx)


def measure_floor(rounds):
    send, _, (tx, rx) = floor_paths()
    send_ns = per_call_ns(send, rounds)
    drain_bare(rx, bytearray(L.RECV_BUFFER_LEN))
    recv_ns = statistics.median(queued_recv_ns(tx, rx, "bare", None) for _ in range(5))
    tx.close()
    rx.close()
    return send_ns, recv_ns


def drain_bare(rx, buf):
    recv_into = rx.recv_into
    count = 0
    while True:
        try:
            recv_into(buf)
        except BlockingIOError:
            return count
        count += 1


def drain_library(rx, buf, table):
    fd = rx.fileno()
    count = 0
    before = table.stats()["fast_path"]
    while True:
        n = table.pump(fd, buf, math.inf)
        if n == -errno.EAGAIN:
            break
        if n < 0:
            raise OSError(-n, os.strerror(-n))
        table.receive(buf, n, time.monotonic())
        count += 1
    return count + table.stats()["fast_path"] - before


def queued_recv_ns(tx, rx, kind, table, batch=4000, packets=None):
    """ns per datagram to drain ``batch`` queued datagrams, bare or through the library."""
    packets = packets or [member_packet(_fast_py, i, alive=7) for i in range(100)]
    buf = bytearray(L.RECV_BUFFER_LEN)
    for i in range(batch):
        tx.send(packets[i % len(packets)])
    gc.disable()
    t0 = time.perf_counter_ns()
    got = drain_bare(rx, buf) if kind == "bare" else drain_library(rx, buf, table)
    elapsed = time.perf_counter_ns() - t0
    gc.enable()
    return elapsed / max(got, 1)


def java_row(rounds):
    if not (shutil.which("javac") and shutil.which("java")):
        return None, "Java is not installed"
    jars = [pathlib.Path("/usr/share/java") / n for n in ("tomcat10-tribes.jar",
                                                          "tomcat10-juli.jar")]
    if not all(j.exists() for j in jars):
        return None, "Debian's libtomcat10-java is not installed"
    classpath = os.pathsep.join(map(str, jars))
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(["javac", "-nowarn", "-d", out, "-cp", classpath,
                        str(HERE / "TribesBench.java")], check=True, capture_output=True)
        result = subprocess.run(["java", "-cp", classpath + os.pathsep + out, "TribesBench",
                                 str(rounds)], check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1]), None


def micro_rows(rounds, notes, micro_only=False):
    rows = []
    impls = [("compiled", _fast), ("python", _fast_py)]
    for name, codec in impls:
        if codec is None:
            notes.append("compiled row skipped: the extension is not built")
            continue
        rows.append(library_row(codec, name, rounds))
        rows.append(library_row(codec, name, rounds, keyed=True))
        plain, keyed = rows[-2], rows[-1]
        notes.append(f"authentication adds ({name}): {keyed['send_ns'] - plain['send_ns']:.0f} ns "
                     f"and {keyed['send_bytes'] - plain['send_bytes']:.0f} B per heartbeat sent, "
                     f"{keyed['recv_ns'] - plain['recv_ns']:.0f} ns and "
                     f"{keyed['recv_bytes'] - plain['recv_bytes']:.0f} B per heartbeat received")
    if micro_only:
        return rows
    send, recv = naive_paths()
    send_bytes, send_blocks = allocation(send)
    recv_bytes, recv_blocks = allocation(recv)
    rows.append(dict(impl="naive", send_ns=per_call_ns(send, rounds // 4),
                     send_bytes=send_bytes, send_blocks=send_blocks,
                     recv_ns=per_call_ns(recv, rounds // 4), recv_bytes=recv_bytes,
                     recv_blocks=recv_blocks))
    java, why = java_row(2_000_000)
    if java:
        rows.append(dict(impl="tomcat-10.1 (java)", **java))
    else:
        notes.append(f"Tomcat row skipped: {why}")
    send_ns, recv_ns = measure_floor(rounds)
    rows.append(dict(impl="socket floor", send_ns=send_ns, send_bytes=0, recv_ns=recv_ns,
                     recv_bytes=0))
    return rows


# -- receive loop against the bare loop ---------------------------------------------------
def receive_loop(rounds=15):
    """Drain the same queued heartbeats of 100 known members: bare recv_into
    loop, then the library's receive loop, alternately; median ns/packet."""
    result = {}
    tx, rx = loopback_udp_pair()
    packets = [member_packet(_fast_py, i, alive=7) for i in range(100)]
    tables = {}
    for name, codec in (("compiled", _fast), ("python", _fast_py)):
        if codec is None:
            continue
        table = Membership(drop_time=1e9, max_members=1000, codec=codec)
        for p in packets:
            table.receive(p, len(p), time.monotonic())
        tables[name] = table
    samples = {"bare": []}
    samples.update({name: [] for name in tables})
    for _ in range(rounds):
        samples["bare"].append(queued_recv_ns(tx, rx, "bare", None, packets=packets))
        for name, table in tables.items():
            samples[name].append(queued_recv_ns(tx, rx, "lib", table, packets=packets))
    tx.close()
    rx.close()
    bare = statistics.median(samples["bare"])
    result["bare_recv_into_ns"] = bare
    for name in tables:
        ns = statistics.median(samples[name])
        result[f"{name}_loop_ns"] = ns
        result[f"{name}_ratio"] = ns / bare
    return result


# -- unicast fan-out ------------------------------------------------------------------------
FAN_OUT_C = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define CHUNK 1024                 /* UIO_MAXIOV, as the library's chunks */

struct fan_out {
    struct mmsghdr *msgs;
    struct sockaddr_in *names;
    struct iovec iov;
    int n;
};

/* The messages of the fan-out, built once: peer i is addrs[4i..4i+3]
   (network order) and ports[i], every message pointing at one copy of the
   packet. */
struct fan_out *fan_out_new(const unsigned char *packet, int length,
                            const unsigned char *addrs, const int *ports, int n) {
    struct fan_out *f = calloc(1, sizeof *f);
    f->msgs = calloc(n ? n : 1, sizeof *f->msgs);
    f->names = calloc(n ? n : 1, sizeof *f->names);
    f->iov.iov_base = malloc(length);
    f->iov.iov_len = length;
    memcpy(f->iov.iov_base, packet, length);
    f->n = n;
    for (int i = 0; i < n; i++) {
        f->names[i].sin_family = AF_INET;
        f->names[i].sin_port = htons((unsigned short)ports[i]);
        memcpy(&f->names[i].sin_addr, addrs + 4 * i, 4);
        f->msgs[i].msg_hdr.msg_name = &f->names[i];
        f->msgs[i].msg_hdr.msg_namelen = sizeof f->names[i];
        f->msgs[i].msg_hdr.msg_iov = &f->iov;
        f->msgs[i].msg_hdr.msg_iovlen = 1;
    }
    return f;
}

/* ``rounds`` heartbeats to every peer, one sendmmsg per 1,024 peers:
   the datagrams sent, or -errno. */
long fan_out_run(struct fan_out *f, int fd, int rounds) {
    long sent = 0;
    for (int r = 0; r < rounds; r++) {
        for (int at = 0; at < f->n;) {
            int chunk = f->n - at < CHUNK ? f->n - at : CHUNK;
            int got = sendmmsg(fd, f->msgs + at, chunk, MSG_DONTWAIT);
            if (got < 0)
                return -errno;
            at += got;
            sent += got;
        }
    }
    return sent;
}

void fan_out_free(struct fan_out *f) {
    free(f->iov.iov_base);
    free(f->msgs);
    free(f->names);
    free(f);
}
"""

FAN_OUT_SINKS = ("every peer is a socket of its own on its own loopback address "
                 "(127.0.x.y, one port), with a receive buffer that holds a whole timed "
                 "batch; the sinks are drained, untimed, between batches and every datagram "
                 "of every timed batch is counted in: each variant pays the same kernel "
                 "delivery, with no drops and no ICMP")


def build_c(source, workdir, name, shared=False):
    """Compile the C text ``source`` with gcc into ``workdir``: the path of
    the program (or, ``shared``, of the library to load with ctypes)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise SystemExit("gcc not found: the C floors are compiled at run time")
    src = pathlib.Path(workdir) / f"{name}.c"
    binary = pathlib.Path(workdir) / (f"{name}.so" if shared else name)
    src.write_text(source)
    flags = ["-shared", "-fPIC"] if shared else []
    subprocess.run([gcc, "-O2", *flags, "-o", str(binary), str(src)], check=True)
    return str(binary)


def load_fan_out_floor(workdir):
    lib = ctypes.CDLL(build_c(FAN_OUT_C, workdir, "fan_out", shared=True))
    lib.fan_out_new.restype = ctypes.c_void_p
    lib.fan_out_new.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    lib.fan_out_run.restype = ctypes.c_long
    lib.fan_out_run.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.fan_out_free.argtypes = [ctypes.c_void_p]
    return lib


DATAGRAM_ROOM = 1024    # what a small datagram takes of a receive buffer: ~830 B here


def sink_room(sink):
    """How many small datagrams ``sink`` holds (the kernel reports twice the
    size asked for, and counts each datagram's buffers against that)."""
    return sink.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // (2 * DATAGRAM_ROOM)


def fan_out_sinks(count, per_sink):
    """``count`` receiving sockets, one per loopback address 127.0.x.y, all on
    one port, each with room for ``per_sink`` small datagrams (as much of it
    as the system allows: see sink_room)."""
    _enough_files(count + 64)
    addresses = [f"127.0.{1 + i // 250}.{1 + i % 250}" for i in range(count)]
    for _ in range(5):
        sinks = []
        try:
            port = 0
            for address in addresses:
                sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                sinks.append(sink)
                _receive_buffer(sink, max(4096, per_sink * DATAGRAM_ROOM))
                sink.bind((address, port))
                port = sink.getsockname()[1]
                sink.setblocking(False)
            return sinks, [(a, port) for a in addresses]
        except OSError as error:
            for sink in sinks:
                sink.close()
            if error.errno != errno.EADDRINUSE:
                raise
    raise OSError(errno.EADDRINUSE, "no port free on every sink address")


def _enough_files(needed):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))


def drain_sinks(sinks, buf):
    return sum(drain_bare(sink, buf) for sink in sinks)


def naive_fan_out(sock, packet, peers):
    """What a user writes: stamp, then one ``sendto`` per peer."""
    packet.stamp_now()
    data = packet.buffer
    for peer in peers:
        sock.sendto(data, peer)


def fan_out_variants(peers, tx, floor, data):
    """name -> (run(beats): ``beats`` heartbeats to every peer; one heartbeat
    as a Python call, for the allocation rows, or None; what frees it)."""
    binary = [(socket.inet_aton(a), p) for a, p in peers]
    fd = tx.fileno()
    variants = {}
    for name, codec in (("compiled", _fast), ("python", _fast_py)):
        if codec is not None:
            one = functools.partial(codec.HeartbeatPacket(data, 0).send_to, fd,
                                    codec.Targets(binary, socket.AF_INET))
            variants[name] = (functools.partial(_repeat, one), one, _nothing)
    one = functools.partial(naive_fan_out, tx, (_fast or _fast_py).HeartbeatPacket(data, 0),
                            list(peers))
    variants["naive sendto loop"] = (functools.partial(_repeat, one), one, _nothing)
    if floor is not None:
        ports = (ctypes.c_int * len(peers))(*(p for _, p in peers))
        handle = floor.fan_out_new(data, len(data), b"".join(a for a, _ in binary), ports,
                                   len(peers))
        variants["C sendmmsg floor"] = (functools.partial(floor.fan_out_run, handle, fd), None,
                                        functools.partial(floor.fan_out_free, handle))
    return variants


def _repeat(fn, times):
    for _ in range(times):
        fn()


def fan_out(sizes=(10, 100, 1000), rounds=11, batch=8192, calls=100_000):
    """CPU of the sending thread per peer per heartbeat, for a fan-out to each
    of ``sizes`` peers: compiled ``send_to``, pure ``send_to``, a naive loop
    of ``sendto`` and a C ``sendmmsg`` loop (the floor), each timed over
    batches of about ``batch`` datagrams, the variants taking turns, median
    of ``rounds`` (the ratio to the floor: the median of each round's); bytes
    allocated per heartbeat from ``allocation`` over about ``calls``
    datagrams."""
    rows, notes = [], []
    data = member_packet(_fast_py, 0)
    buf = bytearray(L.RECV_BUFFER_LEN)
    with tempfile.TemporaryDirectory() as workdir:
        try:
            floor = load_fan_out_floor(workdir)
        except (SystemExit, OSError, subprocess.CalledProcessError) as error:
            floor = None
            notes.append(f"fan-out C floor skipped: {error}")
        for size in sizes:
            sinks, peers = fan_out_sinks(size, max(1, batch // size))
            beats = max(1, min(batch // size, sink_room(sinks[0])))
            tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            tx.bind(("127.0.0.1", 0))
            variants = fan_out_variants(peers, tx, floor, data)
            samples = {name: [] for name in variants}
            lost = 0
            try:
                for _ in range(rounds):
                    for name, (run, _, _) in variants.items():
                        gc.disable()
                        t0 = time.thread_time_ns()
                        run(beats)
                        elapsed = time.thread_time_ns() - t0
                        gc.enable()
                        lost += beats * size - drain_sinks(sinks, buf)
                        samples[name].append(elapsed / (beats * size))
                measured = {}
                for name, (_, one, _) in variants.items():
                    if one is not None:
                        n = max(10, min(2000, calls // size))
                        measured[name] = allocation(one, rounds=n, warm=min(n, 100), traced=n)
                        drain_sinks(sinks, buf)
            finally:
                for _, _, free in variants.values():
                    free()
                tx.close()
                for sink in sinks:
                    sink.close()
            # The ratio is taken round by round (the variants ran side by side,
            # under the same load), then the median of the rounds.
            floor_ns = samples.get("C sendmmsg floor", [math.nan] * rounds)
            for name, ns in samples.items():
                bytes_, blocks = measured.get(name, (None, None))
                rows.append(dict(impl=name, peers=size, ns_per_peer=statistics.median(ns),
                                 floor_ratio=statistics.median(map(operator.truediv, ns,
                                                                   floor_ns)),
                                 bytes=bytes_, blocks=blocks))
            if lost:
                notes.append(f"fan-out to {size} peers: {lost} datagrams not delivered")
    return {"sinks": FAN_OUT_SINKS, "rows": rows, "notes": notes}


def fan_out_text(result):
    lines = ["| fan-out | peers | CPU ns per peer per heartbeat | × C floor | "
             "bytes per heartbeat |", "|---|---:|---:|---:|---:|"]
    for r in result["rows"]:
        held = "–" if r["bytes"] is None else f"{r['bytes']:.0f}"
        lines.append(f"| {r['impl']} | {r['peers']:,} | {r['ns_per_peer']:.0f} | "
                     f"{r['floor_ratio']:.2f} | {held} |")
    return "\n".join(lines) + "\nsinks: " + result["sinks"]


# -- GIL impact ------------------------------------------------------------------------------
SENDER_SCRIPT = r"""
import socket, sys, time
from mcastmember.tribes.kernel import _fast_py
port, members, rate, seconds = map(float, sys.argv[1:5])
members, rate = int(members), int(rate)
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
tx.connect(("228.0.0.4", int(port)))
packets = [_fast_py.encode(7, 4000 + i % 20000, -1, -1, b"\x7f\0\0\x01", b"", b"dom",
                           (i + 1).to_bytes(16, "big"), b"") for i in range(members)]
tick, per_tick = 0.005, max(1, int(rate * 0.005))
start = time.monotonic(); i = 0; next_at = start
while time.monotonic() - start < seconds:
    for _ in range(per_tick):
        tx.send(packets[i % members]); i += 1
    next_at += tick
    delay = next_at - time.monotonic()
    if delay > 0:
        time.sleep(delay)
print(i)
"""


def cpu_work(seconds):
    """Iterations of a pure-Python loop in ``seconds`` (holds the GIL throughout)."""
    deadline = time.perf_counter() + seconds
    count = 0
    while time.perf_counter() < deadline:
        for _ in range(1000):
            count += 1
    return count


def _pin(cpus):
    """Pin the calling thread (Linux: pid 0 is this thread) to ``cpus``; False
    where affinity cannot be set."""
    try:
        os.sched_setaffinity(0, cpus)
        return True
    except (AttributeError, OSError):
        return False


def gil_impact(seconds=3.0, members=10000, rate=20000, rounds=3):
    """Slowdown of a CPU-bound thread while a service receives ``rate``
    heartbeats/s from ``members`` simulated members.

    With 2 or more CPUs the CPU-bound thread runs alone on CPU 0 while the
    receiver thread and the sending process share CPU 1, so what is measured
    is the library's hold on the interpreter (the GIL), not a fight for cores.
    """
    from mcastmember.tribes.fronts.service import McastService
    all_cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    pinned = bool(all_cpus and len(all_cpus) >= 2)
    work_cpu, other_cpu = ({min(all_cpus)}, set(sorted(all_cpus)[1:2])) if pinned else (None, None)
    results = {"pinned": pinned}
    # "sender": the simulated cluster's traffic arrives but no one listens, the
    # control that separates the library's cost from the traffic's.
    runs = {"none": [], "sender": [], "compiled": [], "python": []}
    try:
        for _ in range(rounds):
            for name in runs:
                if name == "compiled" and _fast is None:
                    continue
                if pinned:
                    _pin(other_cpu)
                service = sender = None
                port = free_udp_port()
                if name in ("compiled", "python"):
                    codec = _fast if name == "compiled" else _fast_py
                    service = McastService(GROUP, port, interface="127.0.0.1", ttl=0,
                                           member_port=3999, max_members=members + 10)
                    # Before start(): the engine with this codec (the front's uses the default).
                    service._engine = MembershipEngine(service.config, codec=codec)
                    service.start()
                if name != "none":
                    sender = subprocess.Popen(
                        [sys.executable, "-c", SENDER_SCRIPT, str(port), str(members), str(rate),
                         str(seconds + 2.0)], stdout=subprocess.PIPE, text=True)
                    time.sleep(1.0)           # every member heard once: the table is warm
                    before = service.stats()["received"] if service else 0
                if pinned:
                    _pin(work_cpu)
                count = cpu_work(seconds)
                if service is not None:
                    received = service.stats()["received"] - before
                    sender.wait()
                    stats = service.stats()
                    service.stop()
                    runs[name].append((count, received / seconds, stats))
                else:
                    if sender is not None:
                        sender.wait()
                    runs[name].append((count, 0.0, {}))
    finally:
        if all_cpus:
            _pin(all_cpus)
    base = statistics.median(c for c, _, _ in runs["none"])
    traffic = statistics.median(c for c, _, _ in runs["sender"])
    results["baseline_iterations_per_s"] = base / seconds
    results["traffic_only_slowdown_pct"] = 100.0 * (1 - traffic / base)
    for name in ("compiled", "python"):
        if not runs[name]:
            continue
        count = statistics.median(c for c, _, _ in runs[name])
        results[f"{name}_slowdown_pct"] = 100.0 * (1 - count / base)
        results[f"{name}_slowdown_vs_traffic_pct"] = 100.0 * (1 - count / traffic)
        results[f"{name}_received_per_s"] = statistics.median(r for _, r, _ in runs[name])
        results[f"{name}_members"] = runs[name][-1][2]["members"]
    results["offered_per_s"] = rate
    results["members"] = members
    return results


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- scale ---------------------------------------------------------------------------------------
def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def scale(sizes=(10, 100, 1000, 10000), rounds=100000):
    rows = []
    for size in sizes:
        for name, codec in (("compiled", _fast), ("python", _fast_py)):
            if codec is None:
                continue
            packets = [member_packet(codec, i) for i in range(size)]
            gc.collect()
            rss0 = rss_bytes()
            tracemalloc.start()
            table = Membership(drop_time=3.0, max_members=size, codec=codec)
            for i, p in enumerate(packets):
                table.receive(p, len(p), 0.0)
            traced = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            rss = rss_bytes() - rss0
            buf = bytearray(L.RECV_BUFFER_LEN)
            probe = member_packet(codec, size // 2, alive=5)
            buf[:len(probe)] = probe
            recv_ns = min(codec._bench_recognise(table._index, buf, len(probe), rounds)
                          for _ in range(3))
            call_ns = per_call_ns(functools.partial(table.receive, buf, len(probe), 1.0), rounds)
            idle_sweep_ns = per_call_ns(functools.partial(table.expire, 2.0), rounds // 10)
            t0 = time.perf_counter_ns()
            expired = table.expire(100.0)
            full_sweep_ns = (time.perf_counter_ns() - t0) / max(len(expired), 1)
            rows.append(dict(impl=name, members=size, recv_ns=recv_ns, receive_call_ns=call_ns,
                             traced_bytes_per_member=traced / size,
                             rss_bytes_per_member=max(rss, 0) / size,
                             idle_sweep_ns=idle_sweep_ns,
                             expire_ns_per_member=full_sweep_ns))
    return rows


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install '.[bench]'): no plot"
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in ("compiled", "python"):
        pts = [(r["members"], r["recv_ns"]) for r in rows if r["impl"] == name]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=f"{name}: as the receive loop does it")
        pts = [(r["members"], r["receive_call_ns"]) for r in rows if r["impl"] == name]
        if pts:
            ax.plot(*zip(*pts), marker="x", linestyle="--",
                    label=f"{name}: Membership.receive() called from Python")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("members in the table")
    ax.set_ylabel("ns per known-member heartbeat (beyond recv)")
    ax.set_title("mcastmember receive cost against cluster size")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return None


# -- start-up ------------------------------------------------------------------------------------
def import_time(runs=15):
    """What importing costs, from the interpreter's own -X importtime report
    (the cumulative microseconds of the package's import; best of ``runs``), so
    the noise of starting whole interpreters does not drown it."""
    def cumulative_us(code, module):
        best = math.inf
        for _ in range(runs):
            report = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                                    capture_output=True, text=True, check=True).stderr
            total = 0
            for line in report.splitlines():
                parts = [p.strip() for p in line.split("|")]
                if len(parts) == 3 and parts[2].strip() == module and parts[1].isdigit():
                    total += int(parts[1])
            best = min(best, total)
        return best
    lib = cumulative_us("import mcastmember", "mcastmember")
    service = lib + cumulative_us("import mcastmember.tribes.fronts.service", "mcastmember.tribes.fronts.service")
    return {"import_mcastmember_ms": lib / 1000, "import_service_ms": service / 1000}


def first_heartbeat(runs=5):
    """ms from McastService.start() to its first heartbeat arriving on the group."""
    from mcastmember.tribes.fronts.service import McastService
    times = []
    for _ in range(runs):
        port = free_udp_port()
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        rx.bind((GROUP, port))
        rx.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                      socket.inet_aton(GROUP) + socket.inet_aton("127.0.0.1"))
        rx.settimeout(2)
        service = McastService(GROUP, port, interface="127.0.0.1", ttl=0)
        t0 = time.perf_counter()
        service.start()
        rx.recv(65536)
        times.append((time.perf_counter() - t0) * 1000)
        service.stop()
        rx.close()
    return {"start_to_first_heartbeat_ms": statistics.median(times)}


def departures(runs=5):
    """ms from a member's stop() to its removal on another member (shutdown),
    and ms past the drop time before a silent member is removed (expiry)."""
    import threading as _threading
    from mcastmember.tribes.fronts.service import McastService
    shutdown, expiry = [], []
    for _ in range(runs):
        port = free_udp_port()
        removed = _threading.Event()
        seen = {}

        def listener(event):
            if event.kind == "removed":
                seen["at"] = time.perf_counter()
                removed.set()
        watcher = McastService(GROUP, port, interface="127.0.0.1", ttl=0, member_port=4001,
                               frequency=100, drop_time=400)
        watcher.add_listener(listener)
        with watcher:
            leaving = McastService(GROUP, port, interface="127.0.0.1", ttl=0, member_port=4002,
                                   frequency=100, drop_time=400).start()
            time.sleep(0.3)
            t0 = time.perf_counter()
            leaving.stop()
            removed.wait(2)
            shutdown.append((seen["at"] - t0) * 1000)
            removed.clear()
            tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
            tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
            tx.sendto(member_packet(_fast_py, 77), (GROUP, port))     # heard once, then silent
            t0 = time.perf_counter()
            removed.wait(3)
            expiry.append((seen["at"] - t0) * 1000 - 400)
            tx.close()
    return {"shutdown_to_removed_ms": statistics.median(shutdown),
            "expired_past_drop_time_ms": statistics.median(expiry)}


# -- report -----------------------------------------------------------------------------------------
def table_text(rows):
    lines = ["| implementation | send: ns beyond the socket call | send: bytes | "
             "receive known member: ns beyond the socket call | receive: bytes |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['impl']} | {r['send_ns']:.0f} | {r['send_bytes']:.0f} | "
                     f"{r['recv_ns']:.0f} | {r['recv_bytes']:.0f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--plot", metavar="PNG", default=None,
                        help="plot cost against cluster size (needs matplotlib)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--library-only", action="store_true",
                        help="only the library's rows (with and without authentication)")
    args = parser.parse_args(argv)
    rounds = 20000 if args.quick else 300000
    notes = []
    print(f"mcastmember heartbeat benchmark ({_codec.IMPLEMENTATION} codec selected; "
          f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs)\n", flush=True)

    rows = micro_rows(rounds, notes, args.library_only)
    print(table_text(rows) + "\n", flush=True)
    results = {"rows": rows}
    if args.library_only:
        for note in notes:
            print("note:", note)
        return 0

    results["receive_loop"] = receive_loop(5 if args.quick else 15)
    print("receive loop vs bare recv_into loop:",
          json.dumps({k: round(v, 3) for k, v in results["receive_loop"].items()}), flush=True)

    results["fan_out"] = fan_out(rounds=3 if args.quick else 11,
                                 batch=2048 if args.quick else 8192,
                                 calls=10_000 if args.quick else 100_000)
    notes.extend(results["fan_out"]["notes"])
    print("unicast fan-out, CPU of the sending thread:\n" + fan_out_text(results["fan_out"])
          + "\n", flush=True)

    results["gil"] = gil_impact(seconds=1.0 if args.quick else 2.0,
                                rounds=1 if args.quick else 5)
    print("CPU-bound thread slowdown at 20,000 heartbeats/s:",
          json.dumps({k: round(v, 2) for k, v in results["gil"].items()}), flush=True)

    results["scale"] = scale(rounds=max(rounds // 3, 10000))
    for r in results["scale"]:
        print(f"  scale {r['impl']:<8} {r['members']:>6} members: {r['recv_ns']:6.0f} ns/recv, "
              f"{r['traced_bytes_per_member']:6.0f} B/member traced, "
              f"{r['rss_bytes_per_member']:6.0f} B/member RSS, idle sweep "
              f"{r['idle_sweep_ns']:4.0f} ns, expiry {r['expire_ns_per_member']:5.0f} ns/member",
              flush=True)
    if args.plot:
        problem = plot(results["scale"], args.plot)
        notes.append(problem or f"plot written to {args.plot}")

    results["startup"] = dict(import_time(5 if args.quick else 30),
                              **first_heartbeat(3 if args.quick else 5),
                              **departures(2 if args.quick else 5))
    print("start-up:", json.dumps({k: round(v, 2) for k, v in results["startup"].items()}))
    results["notes"] = notes
    for note in notes:
        print("note:", note)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

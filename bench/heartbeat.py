#!/usr/bin/env python3
"""Per-heartbeat cost of mcastmember, side by side with its peers, in one run.

    python bench/heartbeat.py [--json out.json] [--plot scale.png] [--quick]

Rows: the compiled path, the pure-Python path (each also with authenticated
heartbeats: signing, and checking a trailer and its sequence), a naive baseline that does what
Tomcat 5.5 did (bench/naive.py), Tomcat Tribes 10.1 itself (bench/TribesBench.java,
when Java and Debian's libtomcat10-java are installed) and the bare socket floor.
Also: the receive loop against a bare recv_into loop on the same packets, the
slowdown of a CPU-bound thread while 20,000 heartbeats/s arrive, the cost
against cluster size, import time and time to the first heartbeat.

All network traffic stays on this host: UDP to 127.0.0.1, and multicast only
on interface 127.0.0.1 with TTL 0. Timings are noisy on small machines:
compare figures within one run.
"""

import argparse
import errno
import functools
import gc
import json
import math
import os
import pathlib
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
from mcastmember import _codec, _fast_py, _layout as L, auth  # noqa: E402
from mcastmember.table import Membership  # noqa: E402

try:
    from mcastmember import _fast
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


def _allocation_raw(fn, rounds):
    for _ in range(1000):
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
        traced = tracemalloc.get_traced_memory
        for _ in range(2000):
            tracemalloc.reset_peak()
            before = traced()[0]
            fn()
            worst = max(worst, traced()[1] - before)
        tracemalloc.stop()
    finally:
        gc.enable()
    return worst, blocks


def allocation(fn, rounds=20000):
    """(bytes, blocks) per call: the most Python heap one call holds beyond what
    was there before it (tracemalloc peak, the worst of 2,000 single calls,
    less what measuring a call that does nothing shows), and the blocks left
    behind per call (sys.getallocatedblocks over ``rounds`` calls)."""
    noise, noise_blocks = _allocation_raw(_nothing, rounds)
    worst, blocks = _allocation_raw(fn, rounds)
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
        datagram += auth.trailer(datagram, auth.KeyRing([(1, KEY)]), 1)
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


def loopback_udp_pair(rcvbuf=8 << 20):
    """A receiving UDP socket on 127.0.0.1 with a large buffer, and a sender
    connected to it."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), rcvbuf)
    except OSError:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
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


# -- GIL impact ------------------------------------------------------------------------------
SENDER_SCRIPT = r"""
import socket, sys, time
from mcastmember import _fast_py
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
    from mcastmember.service import McastService
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
                    service.table = Membership(drop_time=3.0, max_members=members + 10,
                                               local=service.config.local_member(), codec=codec)
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
    service = lib + cumulative_us("import mcastmember.service", "mcastmember.service")
    return {"import_mcastmember_ms": lib / 1000, "import_service_ms": service / 1000}


def first_heartbeat(runs=5):
    """ms from McastService.start() to its first heartbeat arriving on the group."""
    from mcastmember.service import McastService
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
    from mcastmember.service import McastService
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

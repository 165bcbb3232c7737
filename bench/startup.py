#!/usr/bin/env python3
"""Start-up of `mcast-demo join`: from exec to its first heartbeat, and the
system calls on the way, on loopback (interface 127.0.0.1, TTL 0).

    python bench/startup.py [--runs 15] [--json out.json] [--compare OTHER_PYTHON]

Rows, each the median (and fastest) of --runs cold starts, timed from just
before the process is spawned to the moment a listener on the group hears
the datagram:

- interpreter + one datagram: `python -c` that opens a socket and sends one
  datagram to the group (the floor: what any Python member pays);
- mcast-demo join: the demo's first heartbeat.

With strace on the PATH, one more run of the demo under `strace -f` counts
the system calls made before its first heartbeat (the first send of a
`TRIBES-B` packet): stat-like calls (and how many failed), opens, and the
processes it spawned (a subprocess at start-up is a fork and an exec). And
`python -X importtime` lists the modules the demo imports that cost most.
--compare times the demo of another install too (the python of another
virtual environment, e.g. one with the code before a change), interleaved
with this one's, so both see the same noise. The figures are reported, never
asserted (machines are noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

GROUP = "228.0.0.4"
LOOPBACK = "127.0.0.1"
MARKER = b"TRIBES-B"

FLOOR = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton('127.0.0.1'))\n"
    "s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)\n"
    "s.sendto(b'TRIBES-B floor', ('228.0.0.4', int(sys.argv[1])))\n"
)

STAT_CALLS = ("stat", "lstat", "fstat", "newfstatat", "statx", "fstatat64", "stat64", "lstat64",
              "fstat64", "access", "faccessat", "faccessat2", "readlink")
OPEN_CALLS = ("open", "openat", "openat2")


def demo_command(python: str = sys.executable) -> list[str]:
    """The console script beside `python` (as a user types it), else the
    same entry point through -c."""
    script = os.path.join(os.path.dirname(python), "mcast-demo")
    if os.path.exists(script):
        return [script]
    return [python, "-c", "import sys; from mcastmember.tools.cli import main; sys.exit(main())"]


def join_args(port: int, member_port: int = 4001) -> list[str]:
    return ["join", GROUP, "--interface", LOOPBACK, "--ttl", "0", "--port", str(port),
            "--member-port", str(member_port), "--json"]


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def group_listener(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((GROUP, port))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                    struct.pack("4s4s", socket.inet_aton(GROUP), socket.inet_aton(LOOPBACK)))
    return sock


def time_to_first_datagram(command: list[str], port: int, timeout: float = 30.0) -> float:
    """Seconds from spawning `command` to hearing its first TRIBES-B datagram
    on the group's port."""
    with group_listener(port) as sock:
        sock.settimeout(timeout)
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while True:
                data = sock.recv(2048)
                if data.startswith(MARKER):
                    return time.perf_counter() - started
        finally:
            if child.poll() is None:
                child.terminate()
            child.wait(timeout=30)


def summary(samples: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(samples) * 1000, 1),
            "fastest_ms": round(min(samples) * 1000, 1)}


def timings(runs: int, compare: str | None = None) -> dict[str, dict[str, float]]:
    commands = {"interpreter + one datagram": lambda port: [sys.executable, "-c", FLOOR, str(port)],
                "mcast-demo join": lambda port: demo_command() + join_args(port)}
    if compare:
        commands["mcast-demo join, --compare's install"] = (
            lambda port: demo_command(compare) + join_args(port))
    rows: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):    # interleaved, so a busy moment costs every row alike
        for name, command in commands.items():
            port = free_udp_port()
            rows[name].append(time_to_first_datagram(command(port), port))
    return {name: summary(samples) for name, samples in rows.items()}


_LINE = re.compile(r"^(\d+)\s+(?:<\.\.\. )?(\w+)\(")


def syscalls(strace: str) -> dict[str, object]:
    """One run of the demo under strace -f: the calls made before its first
    heartbeat."""
    port = free_udp_port()
    with tempfile.TemporaryDirectory() as work:
        trace = os.path.join(work, "trace")
        command = [strace, "-f", "-qq", "-s", "16", "-o", trace] + demo_command() + join_args(port)
        command += ["--duration", "1.5"]
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=60, check=False)
        with open(trace, encoding="utf-8", errors="replace") as lines:
            before = []
            for line in lines:
                if "TRIBES-B" in line and re.search(r"\b(sendto|sendmsg|write|send)\(", line):
                    break
                before.append(line)
    counts: dict[str, int] = {}
    failed: dict[str, int] = {}
    execs: list[str] = []
    for line in before:
        match = _LINE.match(line)
        if match is None:
            continue
        name = match.group(2)
        if "resumed>" in line and line.split()[1] == "<...":
            continue     # the second half of an interrupted call, counted at its start
        counts[name] = counts.get(name, 0) + 1
        if re.search(r"= -1 E", line):
            failed[name] = failed.get(name, 0) + 1
        if name == "execve":
            execs.append(line.split('"')[1] if '"' in line else line)
    stats = sum(counts.get(name, 0) for name in STAT_CALLS)
    return {
        "calls": sum(counts.values()),
        "stat_like": stats,
        "stat_like_failed": sum(failed.get(name, 0) for name in STAT_CALLS),
        "opens": sum(counts.get(name, 0) for name in OPEN_CALLS),
        "opens_failed": sum(failed.get(name, 0) for name in OPEN_CALLS),
        "processes_spawned": max(0, len(execs) - 1),
        "programs_run": execs[1:],
        "reads": counts.get("read", 0),
        "mmap": counts.get("mmap", 0),
    }


def import_costs(top: int = 8) -> dict[str, object]:
    """python -X importtime over the demo's start: the top-level imports that
    cost most (cumulative, µs) and the total."""
    port = free_udp_port()
    done = subprocess.run([sys.executable, "-X", "importtime", "-c",
                           "import sys; from mcastmember.tools.cli import main; sys.exit(main())"]
                          + join_args(port) + ["--duration", "0.2"],
                          capture_output=True, text=True, timeout=60, check=False)
    rows = []
    modules = 0
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative_us, name = line[len("import time:"):].split("|")
        modules += 1
        if not name.startswith("   "):     # top level: no nesting indent
            rows.append((int(cumulative_us), name.strip()))
    rows.sort(reverse=True)
    return {"modules": modules, "total_us": sum(us for us, _ in rows),
            "top": [{"module": name, "cumulative_us": us} for us, name in rows[:top]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--compare", metavar="OTHER_PYTHON",
                        help="also time the demo of the install of this interpreter")
    args = parser.parse_args()

    from mcastmember import implementation
    result: dict[str, object] = {"implementation": implementation(),
                                 "python": sys.version.split()[0]}
    result["startup"] = rows = timings(args.runs, args.compare)
    floor = rows["interpreter + one datagram"]["median_ms"]
    print(f"start-up, median (fastest) of {args.runs} runs, {implementation()} codec:")
    for name, row in rows.items():
        ratio = row["median_ms"] / floor if floor else float("nan")
        print(f"  {name:36} {row['median_ms']:7.1f} ms ({row['fastest_ms']:.1f})  "
              f"{ratio:4.2f}x the floor")
    strace = shutil.which("strace")
    if strace:
        result["syscalls"] = calls = syscalls(strace)
        print(f"before the first heartbeat (strace -f): {calls['calls']} calls, "
              f"{calls['stat_like']} stat-like ({calls['stat_like_failed']} failed), "
              f"{calls['opens']} opens ({calls['opens_failed']} failed), "
              f"{calls['processes_spawned']} processes spawned {calls['programs_run'] or ''}")
    else:
        print("strace not found: no system call counts")
    result["imports"] = costs = import_costs()
    print(f"imports (python -X importtime): {costs['modules']} modules, "
          f"{costs['total_us'] / 1000:.1f} ms; the costliest:")
    for row in costs["top"]:
        print(f"  {row['module']:40} {row['cumulative_us'] / 1000:6.1f} ms")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=2)
            out.write("\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Python Serf members beside Debian's real Serf agents: one run.

    sudo python bench/gossip_serf.py [--seconds S] [--encrypt] [--json PATH]

A LAN of network namespaces (tests/netlab.py), one member per host: three
``serf agent`` processes (go1..go3, Serf 0.9.4, its LAN defaults) and three
Python members, each a SerfService in a process of its own
(tests/serf_member.py, py1..py3). Measured, in this order:

- join, Python to agents: py1 and py2 join go1; seconds from the moment each
  starts its join until each agent's ``serf members`` lists it alive;
- join, agent to Python: go3 (running alone) is told ``serf join`` py1's
  address; seconds until each Python member reports go3 joined;
- traffic in steady state: for ``--seconds`` with all six alive, every host's
  datagrams and bytes (IP bytes, headers included) in and out on its card,
  UDP and TCP apart, per second, counted by nftables counters in its own
  namespace; and each process's CPU seconds and resident memory;
- detection after SIGKILL: py3 killed, seconds until each agent and each
  other Python member lists it failed; then go3 killed, the same. Each beside
  memberlist's bound for the cluster size (tests/serflab.py
  ``detection_bound``).

Needs root, iproute2, nftables and Serf (``apt-get install serf nftables``).
Timings are noisy on a shared machine: compare rows within one run.
"""

import argparse
import json
import os
import pathlib
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from netlab import JsonProcess, Lan, nft_available  # noqa: E402
from serflab import Agent, b64, detection_bound, member_command  # noqa: E402
from support import wait_until  # noqa: E402

AGENTS = ["go1", "go2", "go3"]
PYTHONS = ["py1", "py2", "py3"]
HOST = {name: i for i, name in enumerate(AGENTS + PYTHONS)}
TABLE = "gsbench"
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


def count_traffic(lan, index):
    """nftables counters on host ``index``'s card: UDP and TCP, in and out."""
    text = (f"table inet {TABLE} {{\n"
            "  chain out { type filter hook output priority 0; policy accept;\n"
            '    oifname "eth0" meta l4proto udp counter\n    oifname "eth0" meta l4proto tcp counter\n  }\n'
            "  chain in { type filter hook input priority 0; policy accept;\n"
            '    iifname "eth0" meta l4proto udp counter\n    iifname "eth0" meta l4proto tcp counter\n  }\n'
            "}\n")
    subprocess.run(["ip", "netns", "exec", lan.hosts[index], "nft", "-f", "-"], input=text, text=True,
                   check=True, capture_output=True, timeout=30)


def read_traffic(lan, index):
    out = subprocess.run(["ip", "netns", "exec", lan.hosts[index], "nft", "-j", "list", "table", "inet", TABLE],
                         check=True, capture_output=True, text=True, timeout=30).stdout
    counts = [e["counter"] for item in json.loads(out)["nftables"] for e in item.get("rule", {}).get("expr", [])
              if "counter" in e]
    names = ["udp_out", "tcp_out", "udp_in", "tcp_in"]
    return {name: (c["packets"], c["bytes"]) for name, c in zip(names, counts)}


def process_usage(pid):
    """(CPU seconds, resident bytes) of a process now."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICKS
    with open(f"/proc/{pid}/statm") as f:
        rss = int(f.read().split()[1]) * PAGE
    return cpu, rss


def agent_poll(agents, name, status, since, timeout):
    """Seconds after ``since`` at which each agent first listed ``name`` with ``status``."""
    seen = {}
    end = since + timeout
    while len(seen) < len(agents) and time.monotonic() < end:
        for agent in agents:
            if agent.name not in seen and agent.status(name) == status:
                seen[agent.name] = round(time.monotonic() - since, 2)
        time.sleep(0.02)
    return seen


def python_seen(procs, name, kind, since, timeout):
    """Seconds after ``since`` at which each Python process reported ``kind`` of ``name``."""
    seen = {}
    for proc_name, proc in procs.items():
        try:
            at, _ = proc.wait_for(lambda i: i.get("event") == kind and i.get("name") == name and True,
                                  max(0.1, since + timeout - time.monotonic()))
        except AssertionError:
            continue
        # the earliest such line after ``since``
        times = [t for t, i in proc.lines if i.get("event") == kind and i.get("name") == name and t >= since]
        seen[proc_name] = round((min(times) if times else at) - since, 2)
    return seen


def summary(values):
    values = list(values)
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="steady-state window (default 60: two push/pull intervals)")
    parser.add_argument("--encrypt", action="store_true", help="one AES-256 key on every member")
    parser.add_argument("--json", metavar="PATH", help="write the results here too")
    args = parser.parse_args()
    reason = Lan.available() or nft_available()
    if reason:
        sys.exit(f"gossip_serf: {reason}")
    key = os.urandom(32) if args.encrypt else None
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="gossip-serf-"))
    result = {"machine": platform.node(), "python": platform.python_version(), "encrypted": args.encrypt,
              "seconds": args.seconds}
    agents, procs = {}, {}
    with Lan(hosts=len(HOST), prefix="gsb") as lan:
        try:
            for index in HOST.values():
                count_traffic(lan, index)

            def agent(name, join=()):
                a = Agent(lan, HOST[name], name, tmp / name, encrypt=key, join=join)
                agents[name] = a
                assert wait_until(lambda: a.status(name) == "alive", timeout=20.0, interval=0.1), "".join(a.log)
                return a

            def python(name, seeds):
                procs[name] = JsonProcess(lan, HOST[name], member_command({
                    "name": name, "bind": lan.address(HOST[name]), "tags": {"role": "py"},
                    "keys": [b64(key)] if key else [], "join": [[lan.address(HOST[s]), 7946] for s in seeds]}))
                return procs[name]

            agent("go1")
            agent("go2", join=[lan.address(HOST["go1"])])
            # Python joins the agents
            listed = {}
            for name in ("py1", "py2"):
                proc = python(name, ["go1"])
                started, _ = proc.wait_for(lambda i: i["event"] == "joining", 20)
                listed[name] = agent_poll([agents["go1"], agents["go2"]], name, "alive", started, 20)
            result["python_listed_by_agents_s"] = listed
            # an agent joins a Python seed
            go3 = agent("go3")
            started = time.monotonic()
            assert go3.serf("join", lan.address(HOST["py1"])) is not None
            result["agent_listed_by_python_s"] = python_seen(procs, "go3", "joined", started, 20)
            python("py3", ["go2"]).wait_for(lambda i: i["event"] == "ready", 20)
            everyone = AGENTS + PYTHONS
            assert wait_until(lambda: all(a.status(n) == "alive" for a in agents.values() for n in everyone), timeout=30, interval=0.1)

            # steady state
            time.sleep(2.0)
            pids = {**{n: a.proc.pid for n, a in agents.items()}, **{n: p.proc.pid for n, p in procs.items()}}
            before = {n: read_traffic(lan, HOST[n]) for n in everyone}
            usage_before = {n: process_usage(pid) for n, pid in pids.items()}
            t0 = time.monotonic()
            time.sleep(args.seconds)
            elapsed = time.monotonic() - t0
            after = {n: read_traffic(lan, HOST[n]) for n in everyone}
            usage_after = {n: process_usage(pid) for n, pid in pids.items()}
            traffic = {}
            for n in everyone:
                row = {}
                for what, (packets, octets) in after[n].items():
                    row[f"{what}_datagrams_per_s" if what.startswith("udp") else f"{what}_segments_per_s"] = \
                        round((packets - before[n][what][0]) / elapsed, 2)
                    row[f"{what}_bytes_per_s"] = round((octets - before[n][what][1]) / elapsed, 1)
                row["cpu_percent"] = round(100 * (usage_after[n][0] - usage_before[n][0]) / elapsed, 2)
                row["rss_mib"] = round(usage_after[n][1] / 2**20, 1)
                traffic[n] = row
            result["traffic_per_member"] = traffic
            result["traffic_by_kind"] = {
                kind: {field: round(statistics.mean(traffic[n][field] for n in names), 2)
                       for field in traffic[names[0]]}
                for kind, names in (("serf_agent", AGENTS), ("python", PYTHONS))}

            # SIGKILL of a Python member, then of an agent
            procs["py3"].proc.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            bound = detection_bound(6)
            result["python_killed"] = {
                "bound_s": bound,
                "agents_s": agent_poll(list(agents.values()), "py3", "failed", killed, bound + 5),
                "python_s": python_seen({n: procs[n] for n in ("py1", "py2")}, "py3", "failed", killed, bound + 5)}
            agents["go3"].stop(signal.SIGKILL)
            killed = time.monotonic()
            bound = detection_bound(5)
            result["agent_killed"] = {
                "bound_s": bound,
                "agents_s": agent_poll([agents["go1"], agents["go2"]], "go3", "failed", killed, bound + 5),
                "python_s": python_seen({n: procs[n] for n in ("py1", "py2")}, "go3", "failed", killed, bound + 5)}
        finally:
            for proc in procs.values():
                proc.stop(signal.SIGKILL)
            for a in agents.values():
                a.stop()
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        pathlib.Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()

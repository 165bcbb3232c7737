#!/usr/bin/env python3
"""Python gossip members side by side with Serf's own agents, as real processes.

    python bench/gossip_real.py [--python 30] [--pure 15] [--agents 3] [--seconds 120] [--json out.json]

In network namespaces it creates (tests/netlab.py: one
namespace per member, each with one veth card on a bridge in a "switch"
namespace, 10.250.0.N; never the machine's own interfaces) it starts
``--agents`` Debian ``serf agent``s and ``--python`` Python members, each its
own process (this file run with ``--member``: a ``SerfService`` on 7946), of
which ``--pure`` run without any compiled code (``MCASTMEMBER_NO_EXTENSIONS=1``
and ``MSGPACK_PUREPYTHON=1``); each member says what compiled code it runs
(the rows' ``compiled``) and the run stops if that is not its kind's. The agents join each other, every Python member
joins the agents. Once every member lists every other alive and ``--settle``
seconds passed, over ``--seconds`` it measures per member:

- CPU: utime + stime from ``/proc/PID/stat``, per second of the window;
- RSS at the end (``VmRSS``);
- what the member's namespace sent on its card (nftables counters on the
  output hook, loopback left out): UDP datagrams and their payload bytes
  (IP length less 28), TCP segments and their payload bytes (IP length less
  the IP and TCP headers: 52 bytes, 60 for a SYN, as Linux sends with
  timestamps);
- "failed" marks about live members during the window (false failures).

Then, ``--rounds`` times, one at a time, it kills (SIGKILL) a compiled
Python member, a pure one and an agent (in each of their six orders in
turn: ``victim_order``), each time until every other member
marks it failed (Python members' ``SerfMemberEvent``s; the agents' own log lines
``EventMemberFailed``), and makes one of each leave gracefully (Python:
``SerfService.leave()``; agent: ``serf leave``), until every other member
marks it left. A lost agent is started again (same name) and the next victim
waits until everyone lists it alive; Python members are not (there are
enough). Each time is seen per observer, from the kill (or the leave's start)
to that observer's mark: ``detect_*`` and ``leave_*`` give, per kind of
observer, the median and p99 over every observer and victim;
``victim_detect_all_s`` and ``victim_leave_all_s``, per kind of victim, how
long it took until the last member marked each one, and
``victim_leave_from_start_s`` the same for leaves counted from the leave's
start inside the member (the agent's "requesting graceful leave" log line,
the Python member's own clock: the time ``serf leave`` takes to start and
reach its agent left out); ``leaves_marked_failed``
how many times a member marked a leaver of this kind ``failed`` before
``left`` (Serf 0.9.4 does so when the dead message comes before the leave
intent; push/pull corrects it later).

Rows with bench/gossip.py's fields (``source: "real"``, ``protocol: "lifeguard"``),
one per kind of node (``python-compiled``, ``python-pure``, ``serf``), from
``real_rows(**options)`` too. Needs root, iproute2, nftables and ``serf``.
CPU figures are noisy on a shared machine: compare the kinds within one run
(the load average is in every row).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pathlib
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
PORT = 7946
RPC = "127.0.0.1:7373"
NFT_TABLE = "gossipreal"
CLK_TCK = os.sysconf("SC_CLK_TCK")
#: IPv4 + UDP headers; IPv4 + TCP headers with the timestamp option; a SYN's (MSS, SACK, timestamps, scale)
UDP_HEADERS, TCP_HEADERS, SYN_HEADERS = 28, 52, 60
KINDS = ("python-compiled", "python-pure", "serf")
PURE_ENV = {"MCASTMEMBER_NO_EXTENSIONS": "1", "MSGPACK_PUREPYTHON": "1"}
AGENT_EVENT = re.compile(r"serf: EventMember(Join|Failed|Leave|Update|Reap): (\S+)")
#: what an agent logs as ``serf leave`` reaches it, before Serf's Leave starts
AGENT_LEAVING = "agent: requesting graceful leave"
AGENT_KINDS = {"Join": "joined", "Failed": "failed", "Leave": "left", "Update": "updated", "Reap": "reaped"}


# ----------------------------------------------------------------- a Python member (its own process)

def member_main(spec: dict) -> None:
    """Run one SerfService: events as JSON lines on stdout (with
    time.monotonic(), which every process on the machine shares), stats on
    SIGUSR1, a graceful leave on SIGTERM."""
    from mcastmember.gossip.fronts.service import SerfService
    from mcastmember.gossip.serf.node import SerfMemberEvent

    lock = threading.Lock()

    def out(item):
        with lock:
            sys.stdout.write(json.dumps(item) + "\n")
            sys.stdout.flush()

    # taken with sigwait, not polled: a thread waking 5 times a second costs
    # a fifth of an idle member's CPU; the service's threads inherit the mask
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGTERM})
    svc = SerfService(spec["name"], spec["addr"], PORT, tags={"lang": "python", "kind": spec["kind"]},
                      seed=spec["seed"])

    def listen(event):
        if isinstance(event, SerfMemberEvent):
            out({"e": "member", "t": time.monotonic(), "kind": event.kind, "name": event.member.name})

    svc.add_listener(listen)
    svc.start()
    done = svc.join([(seed, PORT) for seed in spec["seeds"]], timeout=30)
    out({"e": "ready", "joined": done.joined, "errors": list(done.errors), "compiled": compiled_parts()})
    while signal.sigwait({signal.SIGUSR1, signal.SIGTERM}) == signal.SIGUSR1:
        out({"e": "stats", "stats": svc.stats()})
    started = time.monotonic()
    result = svc.leave()
    out({"e": "left", "t0": started, "t": time.monotonic(), "ok": result.ok})
    svc.stop()


def compiled_parts():
    """The compiled code this member runs: msgpack's C extension, the
    gossip hot path's (where the package has one)."""
    import msgpack
    parts = [] if msgpack.Packer.__module__.endswith("fallback") else ["msgpack"]
    try:
        from mcastmember.gossip.memberlist import matcher as hot
    except ImportError:
        return parts
    return parts + ([] if hot.DEFAULT.__name__.endswith("_py") else ["gossip hot path"])


# ----------------------------------------------------------------- the harness

def victim_order(rounds: int, kills: bool, leaves: bool) -> list[tuple[str, str]]:
    """The (mark awaited, kind of victim) of each kill and leave, in turn.
    Round after round the kinds take the six orders there are: over six
    rounds each kind goes first, second and last twice, and within a round
    follows each other kind twice. (What a victim follows matters: an
    agent's restart leaves its join's gossip in the queues.)"""
    orders = list(itertools.permutations(KINDS))
    victims = []
    for r in range(rounds):
        order = orders[r % len(orders)]
        if kills:
            victims += [("failed", kind) for kind in order]
        if leaves:
            victims += [("left", kind) for kind in order]
    return victims


class Proc:
    """A member's process, its output read on a thread: ``events`` is
    [(time, kind, name)] of what it marked."""

    def __init__(self, lan, index, kind, name, argv, env=None):
        self.index, self.kind, self.name = index, kind, name
        self.events: list[tuple[float, str, str]] = []
        self.lines: list[dict] = []
        self.log: list[str] = []
        #: when its graceful leave started inside the member (the agent's log line, the member's own clock)
        self.leave_started: float | None = None
        self.proc = lan.run(index, argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
        self.pid = self.proc.pid
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            now = time.monotonic()
            if self.kind == "serf":
                self.log.append(line)
                del self.log[:-200]
                found = AGENT_EVENT.search(line)
                if found:
                    self.events.append((now, AGENT_KINDS[found.group(1)], found.group(2)))
                elif AGENT_LEAVING in line:
                    self.leave_started = now
                continue
            try:
                item = json.loads(line)
            except ValueError:
                self.log.append(line)
                continue
            if item.get("e") == "member":
                self.events.append((item["t"], item["kind"], item["name"]))
            else:
                if item.get("e") == "left":
                    self.leave_started = item["t0"]
                self.lines.append(item)

    def alive_view(self):
        """The names this member last marked joined (or updated) and not failed or left since."""
        view = {}
        for _t, kind, name in list(self.events):
            if kind in ("joined", "updated"):
                view[name] = True
            elif kind in ("failed", "left", "reaped"):
                view[name] = False
        return {name for name, alive in view.items() if alive}

    def marked(self, kind, name, after):
        return next((t for t, k, n in list(self.events) if k == kind and n == name and t >= after), None)

    def running(self):
        return self.proc.poll() is None

    def cpu_ticks(self):
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])      # utime, stime (fields 14 and 15)

    def rss_kb(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        if self.running():
            self.proc.kill()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass


def nft_counting(lan, index):
    """Count what host ``index`` sends on its card: UDP, TCP SYNs, all TCP."""
    text = (f"table inet {NFT_TABLE} {{\n  chain output {{\n"
            "    type filter hook output priority 0; policy accept;\n"
            '    oifname "eth0" meta l4proto udp counter\n'
            '    oifname "eth0" meta l4proto tcp tcp flags & syn == syn counter\n'
            '    oifname "eth0" meta l4proto tcp counter\n'
            "  }\n}\n")
    done = subprocess.run(["ip", "netns", "exec", lan.hosts[index], "nft", "-f", "-"], input=text, text=True,
                          capture_output=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"nft refused the counters: {done.stderr.strip()}")


def nft_read(lan, index):
    """(udp packets, udp bytes, syn packets, syn bytes, tcp packets, tcp bytes) host ``index`` sent."""
    out = subprocess.run(["ip", "netns", "exec", lan.hosts[index], "nft", "-j", "list", "table", "inet",
                          NFT_TABLE], check=True, capture_output=True, text=True, timeout=30).stdout
    values = []
    for item in json.loads(out)["nftables"]:
        for expression in item.get("rule", {}).get("expr", []):
            if "counter" in expression:
                values += [expression["counter"]["packets"], expression["counter"]["bytes"]]
    return tuple(values)


def snapshot(lan, procs):
    """Per member: (time, CPU ticks, nft counters), read one member after another."""
    snap = {}
    for p in procs:
        if p.running():
            snap[p.name] = (time.monotonic(), p.cpu_ticks(), nft_read(lan, p.index))
    return snap


def wait_until(predicate, timeout, step=0.25):
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > end:
            return value
        time.sleep(step)


def percentile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100 * len(ordered) + 0.5)) - 1))]


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def _say(quiet, *args):
    if not quiet:
        print(*args, file=sys.stderr, flush=True)


def _agent_argv(name, addr, join):
    argv = ["serf", "agent", "-node", name, "-bind", f"{addr}:{PORT}", "-rpc-addr", RPC, "-log-level", "info",
            "-tag", "lang=go"]
    for seed in join:
        argv += ["-join", f"{seed}:{PORT}"]
    return argv


def _serf_cli(lan, index, *args):
    return subprocess.run(["ip", "netns", "exec", lan.hosts[index], "serf", *args, "-rpc-addr", RPC],
                          capture_output=True, text=True, timeout=30)


def _mark_times(procs, victim, kind, since, timeout, quiet):
    """Wait until every live member but ``victim`` marked it ``kind``:
    {observer name: (observer kind, seconds after ``since``)}, observers that
    never did left out (and said), and the kinds of the observers that marked
    it failed first when it left (Serf 0.9.4 shows a leaver ``failed`` to a
    member that had its dead message before its leave intent)."""
    observers = [p for p in procs if p is not victim and p.running()]
    wait_until(lambda: all(p.marked(kind, victim.name, since) is not None for p in observers), timeout)
    times = {}
    for p in observers:
        at = p.marked(kind, victim.name, since)
        if at is not None:
            times[p.name] = (p.kind, at - since)
    failed_first = [p.kind for p in observers if kind == "left" and p.marked("failed", victim.name, since) is not None]
    if failed_first:
        _say(quiet, f"  {len(failed_first)} members marked {victim.name} failed before left")
    missing = [p for p in observers if p.name not in times]
    if missing:
        last = {p.name: [(round(t - since, 2), k) for t, k, n in p.events if n == victim.name][-2:] for p in missing}
        _say(quiet, f"  {len(missing)} members never marked {victim.name} {kind} (their last marks of it): "
                    f"{dict(list(last.items())[:5])}")
    return times, len(missing), failed_first


def real_rows(python=30, pure=15, agents=3, seconds=120.0, settle=10.0, kills=True, leaves=True, rounds=2,
              detect_timeout=90.0, quiet=False, details=None):
    """Run the mixed cluster and return its rows (one per kind of node, bench/gossip.py's fields).
    ``details``, a dict if given, receives every per-member figure and time."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from netlab import Lan
    why = Lan.available() or (None if shutil.which("serf") else "serf is not installed") or \
        (None if shutil.which("nft") else "nftables (nft) is not installed")
    if why:
        raise RuntimeError(why)
    if not 0 <= pure <= python or agents < 1:
        raise ValueError("need 0 <= pure <= python and at least one agent")
    total = python + agents
    compiled_env = {k: v for k, v in os.environ.items() if k not in PURE_ENV}
    pure_env = {**compiled_env, **PURE_ENV}
    procs: list[Proc] = []
    started = time.monotonic()
    with Lan(hosts=total, prefix="gsr") as lan:
        try:
            for i in range(total):
                nft_counting(lan, i)
            seeds = [lan.address(i) for i in range(agents)]
            for i in range(agents):
                procs.append(Proc(lan, i, "serf", f"go{i}", _agent_argv(f"go{i}", seeds[i], seeds[:1] if i else [])))
                if i == 0:
                    wait_until(lambda: "go0" in procs[0].alive_view(), 20)
            wait_until(lambda: all(len(p.alive_view()) == agents for p in procs), 30)
            _say(quiet, f"{agents} agents see each other after {time.monotonic() - started:.1f} s")
            for j in range(python):
                i = agents + j
                kind = "python-pure" if j < pure else "python-compiled"
                spec = {"name": f"py{j}", "addr": lan.address(i), "seeds": seeds, "seed": j, "kind": kind}
                argv = [sys.executable, "-I", str(HERE / "gossip_real.py"), "--member", json.dumps(spec)]
                procs.append(Proc(lan, i, kind, spec["name"], argv, env=pure_env if j < pure else compiled_env))
            names = {p.name for p in procs}
            _say(quiet, f"{total} members started in {time.monotonic() - started:.1f} s; waiting for all to see all")
            if not wait_until(lambda: all((p.alive_view() | {p.name}) >= names for p in procs), 180, 1.0):
                short = {p.name: sorted(names - p.alive_view() - {p.name})[:3] for p in procs
                         if not (p.alive_view() | {p.name}) >= names}
                raise RuntimeError(f"the cluster did not converge: {short}")
            _say(quiet, f"converged {time.monotonic() - started:.1f} s after the start; settling {settle} s")
            compiled = {}
            for p in procs:
                ready = next((line for line in p.lines if line.get("e") == "ready"), None)
                if ready is not None:
                    compiled.setdefault(p.kind, set()).add(tuple(ready["compiled"]))
            if compiled.get("python-pure", {()}) != {()} or () in compiled.get("python-compiled", set()):
                raise RuntimeError(f"the members do not run the code their kind says: {compiled}")
            time.sleep(settle)
            window_start = time.monotonic()
            load_before = load_average()
            first = snapshot(lan, procs)
            time.sleep(seconds)
            last = snapshot(lan, procs)
            load_after = load_average()
            window_end = time.monotonic()
            rss = {p.name: p.rss_kb() for p in procs}
            members = {}
            for p in procs:
                (t0, c0, n0), (t1, c1, n1) = first[p.name], last[p.name]
                span = t1 - t0
                d = [b - a for a, b in zip(n0, n1)]
                udp_packets, udp_bytes, syn_packets, syn_bytes, tcp_packets, tcp_bytes = d
                tcp_payload = tcp_bytes - TCP_HEADERS * tcp_packets - (SYN_HEADERS - TCP_HEADERS) * syn_packets
                false_failed = sum(1 for t, k, _n in p.events if k == "failed" and window_start <= t <= window_end)
                members[p.name] = {
                    "kind": p.kind, "cpu_s": (c1 - c0) / CLK_TCK / span, "rss_mb": rss[p.name] / 1024,
                    "datagrams_s": udp_packets / span, "datagram_bytes_s": (udp_bytes - UDP_HEADERS * udp_packets) / span,
                    "segments_s": tcp_packets / span, "tcp_bytes_s": max(0, tcp_payload) / span,
                    "wire_bytes_s": (udp_bytes + tcp_bytes) / span, "false_failed": false_failed, "span": span}
            _say(quiet, f"window of {seconds} s measured; load average {load_before} -> {load_after}")
            marks = []      # (what, victim kind, observer kind, seconds)
            whole = []      # (what, victim name, victim kind, seconds until the last observer)
            from_start = []     # (victim kind, the same for a leave, from its start inside the member)
            missed = 0
            leaves_failed = []     # (leaver's kind, observer's kind) of each leave first marked failed
            for what, kind in victim_order(rounds, kills, leaves):
                live = [p for p in procs if p.kind == kind and p.running()]
                if kind == "serf":
                    live = [p for p in live if p.index != 0] or live    # go0 stays (the seed, the RPC we ask)
                if not live:
                    continue
                victim = live[-1]
                since = time.monotonic()
                if what == "failed":
                    victim.proc.send_signal(signal.SIGKILL)
                elif kind == "serf":
                    since = time.monotonic()
                    threading.Thread(target=_serf_cli, args=(lan, victim.index, "leave"), daemon=True).start()
                else:
                    victim.proc.send_signal(signal.SIGTERM)
                times, missing, failed_first = _mark_times(procs, victim, what, since, detect_timeout, quiet)
                missed += missing
                leaves_failed += [(kind, observer_kind) for observer_kind in failed_first]
                for observer_kind, seconds_after in times.values():
                    marks.append((what, kind, observer_kind, seconds_after))
                if times and not missing:
                    whole.append((what, victim.name, kind, max(s for _k, s in times.values())))
                _say(quiet, f"{victim.name} ({kind}) {what}: every other member within "
                            f"{max((s for _k, s in times.values()), default=float('nan')):.2f} s "
                            f"(median {statistics.median([s for _k, s in times.values()] or [0]):.2f} s)")
                wait_until(lambda: not victim.running(), 10)
                if what == "left" and times and not missing and \
                        wait_until(lambda: victim.leave_started is not None, 5, 0.05):
                    from_start.append((kind, max(s for _k, s in times.values()) - (victim.leave_started - since)))
                victim.stop()
                if kind == "serf" and victim.index != 0:      # back, so that every round has an agent to lose
                    back = Proc(lan, victim.index, "serf", victim.name,
                                _agent_argv(victim.name, lan.address(victim.index), seeds[:1]))
                    procs[procs.index(victim)] = back
                    running = [p for p in procs if p.running()]
                    if not wait_until(lambda: all(back.name in p.alive_view() for p in running if p is not back)
                                      and back.alive_view() >= {p.name for p in running}, 60, 0.5):
                        _say(quiet, f"  {back.name} did not come back everywhere")
        finally:
            for p in procs:
                p.stop()
    rows = []
    for kind in KINDS:
        mine = [m for m in members.values() if m["kind"] == kind]
        if not mine:
            continue

        def mean(key):
            return sum(m[key] for m in mine) / len(mine)

        detect = [s for what, _vk, ok, s in marks if what == "failed" and ok == kind]
        leave = [s for what, _vk, ok, s in marks if what == "left" and ok == kind]
        # the other way round: how long every member took to learn of a victim of this kind
        detected = [s for what, _n, vk, s in whole if what == "failed" and vk == kind]
        left = [s for what, _n, vk, s in whole if what == "left" and vk == kind]
        hours = sum(m["span"] for m in mine) / 3600
        rows.append({
            "source": "real", "protocol": "lifeguard", "members": total, "node": kind, "count": len(mine),
            "loss": 0.0, "paused_fraction": 0.0,
            "cpu_per_member_s": round(mean("cpu_s"), 5),
            "bytes_per_member_s": round(mean("datagram_bytes_s") + mean("tcp_bytes_s"), 1),
            "datagram_bytes_per_member_s": round(mean("datagram_bytes_s"), 1),
            "tcp_bytes_per_member_s": round(mean("tcp_bytes_s"), 1),
            "datagrams_per_member_s": round(mean("datagrams_s"), 3),
            "segments_per_member_s": round(mean("segments_s"), 3),
            "wire_bytes_per_member_s": round(mean("wire_bytes_s"), 1),
            "rss_mb": round(mean("rss_mb"), 1),
            "detect_median_s": round(statistics.median(detect), 3) if detect else None,
            "detect_p99_s": round(percentile(detect, 99), 3) if detect else None,
            "leave_median_s": round(statistics.median(leave), 3) if leave else None,
            "leave_p99_s": round(percentile(leave, 99), 3) if leave else None,
            "victim_detect_all_s": [round(x, 3) for x in detected], "victim_leave_all_s": [round(x, 3) for x in left],
            # from the leave's start inside the member (the time ``serf leave`` takes to reach its agent left out)
            "victim_leave_from_start_s": [round(s, 3) for vk, s in from_start if vk == kind],
            "compiled": sorted(next(iter(compiled[kind]))) if kind in compiled else None,
            "leaves_marked_failed": sum(1 for vk, _ok in leaves_failed if vk == kind),
            "false_failed_per_member_hour": round(sum(m["false_failed"] for m in mine) / hours, 2),
            "window_s": seconds, "load_average": round((load_before + load_after) / 2, 2),
            "cpus": os.cpu_count(), "marks_missed": missed,
        })
    if details is not None:
        details.update(members=members, marks=marks, whole=whole, from_start=from_start, marks_missed=missed,
                       leaves_marked_failed=leaves_failed)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", type=int, default=30, help="Python members (default 30)")
    parser.add_argument("--pure", type=int, default=15, help="of which pure Python (default 15)")
    parser.add_argument("--agents", type=int, default=3, help="serf agents (default 3)")
    parser.add_argument("--seconds", type=float, default=120.0, help="the steady-state window (default 120)")
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--no-kills", action="store_true", help="skip the crash detection")
    parser.add_argument("--no-leaves", action="store_true", help="skip the graceful leaves")
    parser.add_argument("--rounds", type=int, default=2,
                        help="kills and leaves of each kind (default 2; a lost agent is started again)")
    parser.add_argument("--json", help="write the rows there")
    parser.add_argument("--details", help="write every member's figures and every mark there")
    parser.add_argument("--member", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.member:
        member_main(json.loads(args.member))
        return
    details = {}
    try:
        rows = real_rows(python=args.python, pure=args.pure, agents=args.agents, seconds=args.seconds,
                         settle=args.settle, kills=not args.no_kills, leaves=not args.no_leaves,
                         rounds=args.rounds, details=details)
    except (RuntimeError, ValueError) as exc:
        sys.exit(f"gossip_real: {exc}")
    keys = ("node", "count", "cpu_per_member_s", "rss_mb", "datagrams_per_member_s", "datagram_bytes_per_member_s",
            "tcp_bytes_per_member_s", "detect_median_s", "detect_p99_s", "leave_median_s", "leave_p99_s",
            "false_failed_per_member_hour")
    print(" ".join(f"{k:>14.14}" for k in keys))
    for row in rows:
        print(" ".join(f"{row[k] if row[k] is not None else '-':>14}" for k in keys))
    print(f"members {rows[0]['members']}, window {args.seconds} s, load average {rows[0]['load_average']} "
          f"on {rows[0]['cpus']} CPUs")
    for what, name, kind, s in details.get("whole", []):
        print(f"{name} ({kind}) {what}: marked by every other member within {s:.2f} s")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    if args.details:
        pathlib.Path(args.details).write_text(json.dumps(details, indent=1) + "\n")


if __name__ == "__main__":
    main()

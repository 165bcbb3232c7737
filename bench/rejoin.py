"""How long a member killed with SIGKILL takes to be part of the cluster
again when started with its snapshot and no join: ``mcast-demo gossip
--snapshot F --rejoin`` beside Debian's ``serf agent -snapshot F -rejoin``,
in the same run, with the same timers (``--profile local`` / ``-profile
local``: the agent has no flag for finer ones) and the same peer (a Python
member, PEER_SETTINGS).

A round, for each kind of victim: the victim joins the peer, writes its snapshot,
is killed once its snapshot names the peer, is marked failed by the peer,
and is started again with only its snapshot. The time is from that start
(the process spawned) until the peer lists it alive and it lists the peer
alive (the agent asked through its RPC, ``serf members``, every 50 ms; the
demo read from its ``--json`` lines).

    python bench/rejoin.py [--rounds 10] [--json FILE]

Loopback only (127.0.0.1-127.0.0.4). tests/interop/test_serf_snapshot.py
runs one round of each.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcastmember.gossip.fronts.service import SerfService
from mcastmember.gossip.serf.layout import MemberStatus

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support import free_gossip_port as free_port, free_tcp_port  # noqa: E402

DEMO = [shutil.which("mcast-demo")] if shutil.which("mcast-demo") else [sys.executable, "-m", "mcastmember"]
PEER, PYTHON, AGENT = "127.0.0.1", "127.0.0.3", "127.0.0.4"
#: the peer's timers: the local profile's, but a victim killed is marked
#: failed within a second (its suspicion not stretched while it waits for
#: confirmations no other member can give), so a round is quick; the
#: rejoin measured starts after that, the same for both victims
PEER_SETTINGS = {"profile": "local", "probe_interval": 0.2, "probe_timeout": 0.1, "suspicion_mult": 2,
                 "suspicion_max_timeout_mult": 1}
#: the victims' profile (--profile)
PROFILE = ["local"]
#: how long one step may take before the round fails
STEP_TIMEOUT = 60.0


def wait(predicate, timeout: float = STEP_TIMEOUT, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout} s for {what}")
        time.sleep(0.02)


def status(service: SerfService, name: str) -> MemberStatus | None:
    for m in service.members():
        if m.name == name:
            return m.status
    return None


class Victim:
    """A member that is killed and started again: ``start(join)`` spawns it,
    ``lists_peer()`` says whether it lists the peer alive."""

    name = ""
    #: its address, and how its command line names the join flag
    host = ""
    join_flag = "--join"
    #: where its output goes
    output = subprocess.DEVNULL

    def __init__(self, snapshot: Path, peer: tuple[str, int]):
        self.snapshot, self.peer = snapshot, peer
        self.port = free_port(self.host)
        self.rpc = f"127.0.0.1:{free_tcp_port()}"
        self.proc: subprocess.Popen | None = None

    def argv(self) -> list[str]:
        """Its command, without a join."""
        raise NotImplementedError

    def start(self, join: bool) -> None:
        """Spawned with its snapshot, joining the peer too if ``join``
        (in a session of its own: a terminal's Ctrl-C must not make it
        leave under the bench)."""
        argv = self.argv() + ([self.join_flag, f"{self.peer[0]}:{self.peer[1]}"] if join else [])
        self.proc = subprocess.Popen(argv, stdout=self.output, stderr=subprocess.DEVNULL, cwd="/",
                                     start_new_session=True)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


class PythonVictim(Victim):
    name = "py-victim"
    host = PYTHON
    #: its --json lines, read by lists_peer()
    output = subprocess.PIPE
    _pending = b""
    _sees_peer = False

    def argv(self) -> list[str]:
        return DEMO + ["gossip", "--node", self.name, "--bind", f"{PYTHON}:{self.port}", "--snapshot",
                       str(self.snapshot), "--rejoin", "--profile", PROFILE[0], "--json"]

    def start(self, join: bool) -> None:
        self._pending, self._sees_peer = b"", False
        super().start(join)

    def lists_peer(self) -> bool:
        """From its --json lines: the peer added (and not removed since)."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            event = json.loads(line)
            if event.get("member", {}).get("name") == "peer":
                self._sees_peer = event["event"] == "added"
        return self._sees_peer


class AgentVictim(Victim):
    name = "go-victim"
    host = AGENT
    join_flag = "-join"

    def argv(self) -> list[str]:
        return ["serf", "agent", "-node", self.name, "-bind", f"{AGENT}:{self.port}", "-rpc-addr", self.rpc,
                "-snapshot", str(self.snapshot), "-rejoin", "-profile", PROFILE[0]]

    def lists_peer(self) -> bool:
        done = subprocess.run(["serf", "members", "-rpc-addr", self.rpc, "-format", "json"],
                              capture_output=True, text=True, timeout=10)
        if done.returncode != 0:
            return False
        return any(m["name"] == "peer" and m["status"] == "alive" for m in json.loads(done.stdout)["members"])


def one_round(peer: SerfService, victim: Victim) -> float:
    """Seconds from the victim's restart until it and the peer list each other alive."""
    # the last round's victim, killed at its end, marked failed first: its restart must be a rejoin
    wait(lambda: status(peer, victim.name) in (None, MemberStatus.FAILED), what=f"{victim.name} marked failed")
    try:
        victim.start(join=True)
        wait(lambda: status(peer, victim.name) == MemberStatus.ALIVE, what=f"{victim.name} to join")
        # the victim's snapshot names the peer (the agent flushes on a later write, our member every 0.5 s)
        wait(lambda: victim.snapshot.exists() and "alive: peer " in victim.snapshot.read_text(),
             what=f"{victim.name}'s snapshot to name the peer")
        victim.kill()
        wait(lambda: status(peer, victim.name) == MemberStatus.FAILED, what=f"{victim.name} marked failed")
        started = time.monotonic()
        victim.start(join=False)
        wait(lambda: status(peer, victim.name) == MemberStatus.ALIVE and victim.lists_peer(),
             what=f"{victim.name} to rejoin")
        return time.monotonic() - started
    finally:
        victim.kill()


def measure(rounds: int, workdir: Path) -> dict[str, list[float]]:
    """``rounds`` rounds of each victim beside one peer, alternating."""
    times: dict[str, list[float]] = {"python": [], "agent": []}
    with SerfService("peer", PEER, free_port(PEER), **{**PEER_SETTINGS, "profile": PROFILE[0]}) as peer:
        victims = {"python": PythonVictim(workdir / "python.snapshot", (PEER, peer.port)),
                   "agent": AgentVictim(workdir / "agent.snapshot", (PEER, peer.port))}
        for _ in range(rounds):
            for kind, victim in victims.items():
                times[kind].append(one_round(peer, victim))
    return times


def table(times: dict[str, list[float]]) -> str:
    rows = ["| victim | rounds | median s | min s | max s |", "|---|---|---|---|---|"]
    labels = {"python": "`mcast-demo gossip --snapshot F --rejoin`", "agent": "`serf agent -snapshot F -rejoin`"}
    for kind, values in times.items():
        rows.append(f"| {labels[kind]} | {len(values)} | {statistics.median(values):.2f} | {min(values):.2f} | "
                    f"{max(values):.2f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--profile", choices=("lan", "wan", "local"), default="local",
                        help="the victims' and the peer's profile (the peer's probes stay quick)")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    PROFILE[0] = args.profile
    if shutil.which("serf") is None:
        sys.exit("rejoin.py needs Debian's serf agent (apt-get install serf)")
    with tempfile.TemporaryDirectory() as tmp:
        times = measure(args.rounds, Path(tmp))
    print(table(times))
    if args.json:
        Path(args.json).write_text(json.dumps(times, indent=1) + "\n")


if __name__ == "__main__":
    main()

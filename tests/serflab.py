"""Debian's real ``serf agent`` on a LAN of network namespaces (netlab.Lan),
and memberlist's failure-detection bound: shared by
tests/interop/test_serf_agent.py and bench/gossip_serf.py."""

from __future__ import annotations

import base64
import json
import math
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

#: each agent's RPC address, inside its own host
RPC = "127.0.0.1:7373"
#: a Python Serf member as its own process (see that file)
MEMBER_SCRIPT = Path(__file__).parent / "serf_member.py"

# memberlist.DefaultLANConfig (config.go), which the Serf 0.9.4 agent uses with
# its default profile "lan" (cmd/serf/command/agent/command.go), and our
# GossipSettings' defaults alike.
PROBE_INTERVAL = 1.0
#: push/pull every 30 s (scaled only above 32 members): Serf's push/pull state
#: carries its recent user events, so an event gossip missed arrives then
PUSH_PULL_INTERVAL = 30.0
#: the longest a member waits for its own push/pull to bring what gossip
#: missed: the first comes after a random stagger of up to one interval, then
#: one interval (state.go pushPullTrigger), so up to two after it started;
#: the others' push/pulls with it may come sooner, or not at all
REPAIR_BOUND = 2 * PUSH_PULL_INTERVAL
SUSPICION_MULT = 4
SUSPICION_MAX_TIMEOUT_MULT = 6


def detection_bound(n: int) -> float:
    """memberlist's longest time, in seconds, from a member's death until a
    healthy member of a cluster of ``n`` live members (the dead one included,
    as estNumNodes counts it) marks it dead, by its own probes alone:

    - probe(): each member probes the others in turn over a list it shuffles
      at every round, so the dead one comes up within two rounds, 2 (n - 1)
      probe intervals;
    - probeNode(): the probe (direct, indirect, TCP fallback) ends within one
      probe interval (a healthy member's awareness score is 0: not scaled);
    - suspectNode(): the suspicion timer is util.go suspicionTimeout,
      SuspicionMult x max(1, log10(n)) x ProbeInterval, when fewer than
      SuspicionMult - 2 confirmations are possible (n - 2 < k), else
      SuspicionMaxTimeoutMult times that, shortened by confirmations
      (suspicion.go); the bound takes none.
    A dead message from a member that got there first only comes sooner."""
    minimum = SUSPICION_MULT * max(1.0, math.log10(max(1, n))) * PROBE_INTERVAL
    k = SUSPICION_MULT - 2
    suspicion = minimum if n - 2 < k else SUSPICION_MAX_TIMEOUT_MULT * minimum
    return 2 * (n - 1) * PROBE_INTERVAL + PROBE_INTERVAL + suspicion


class Agent:
    """``serf agent`` on one host of the LAN, queried through its RPC address there.
    Every user event's payload lands in ``received`` (its event handler)."""

    def __init__(self, lan, index, name, received, *, encrypt=None, join=(), config=None, extra=()):
        self.lan, self.index, self.name = lan, index, name
        argv = ["serf", "agent", "-node", name, "-bind", f"{lan.address(index)}:7946", "-rpc-addr", RPC,
                "-tag", "role=go", "-log-level", "debug", "-event-handler", f"user=cat >> {received}"]
        if encrypt is not None:
            argv += ["-encrypt", b64(encrypt)]
        for seed in join:
            argv += ["-join", seed]
        if config is not None:
            argv += ["-config-file", str(config)]
        argv += list(extra)          # any other flag of the agent (-profile, -snapshot...)
        self.received = Path(received)
        # a session of its own: a signal to our process group (a terminal's
        # Ctrl-C) would make it leave gracefully under the test; the test stops it
        self.proc = lan.run(index, argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
        self.log: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def run(self, command, *args):
        """``serf COMMAND -rpc-addr ... ARGS`` on the agent's host: (exit code, output)."""
        done = subprocess.run(["ip", "netns", "exec", self.lan.hosts[self.index], "serf", command,
                               "-rpc-addr", RPC, *args], capture_output=True, text=True, timeout=15)
        return done.returncode, done.stdout + done.stderr

    def serf(self, command, *args):
        """Its output, or None if it failed."""
        code, out = self.run(command, *args)
        return out if code == 0 else None

    def members(self):
        out = self.serf("members", "-format", "json")
        return {m["name"]: m for m in json.loads(out)["members"]} if out else {}

    def status(self, name):
        return self.members().get(name, {}).get("status")

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def netns_skip_reason():
    """Why agents cannot run on a LAN of namespaces here (no root, no
    iproute2, no ``serf``), or None."""
    from netlab import Lan
    return Lan.available() or (None if shutil.which("serf") else
                               "Debian's serf agent is not installed (apt-get install serf)")


def b64(key):
    return base64.b64encode(key).decode()


def member_command(settings):
    """The argv of a Python Serf member process (serf_member.py) with ``settings``."""
    return [sys.executable, str(MEMBER_SCRIPT), json.dumps(settings)]

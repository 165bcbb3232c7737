"""Serf's snapshot file between Debian's ``serf agent`` and a Python member,
on loopback: the file the agent writes (``-snapshot``) is read, with its
clocks and members, and a Python member started on it rejoins them; the
agent reads ours (our comment lines skipped) and rejoins from it; and a
member killed and started again with its snapshot (``mcast-demo gossip
--snapshot F --rejoin``) is back within 5 s, measured beside the agent
doing the same (bench/rejoin.py, one round each). Skipped without
``serf``."""

import json
import pathlib
import re
import shutil
import subprocess
import sys
import threading

import pytest

pytest.importorskip("msgpack")

from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.serf.layout import MemberStatus  # noqa: E402
from mcastmember.gossip.serf.snapshot import Restored, read_snapshot  # noqa: E402
import serflab  # noqa: E402
from support import free_gossip_port, free_tcp_port, wait_until  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))

# It runs the member's processes as installed: CI's pure pass would only repeat it.
pytestmark = [pytest.mark.skipif(shutil.which("serf") is None,
                                 reason="Debian's serf agent is not installed (apt-get install serf)"),
              pytest.mark.both_codecs]
FAST = {"probe_interval": 0.2, "probe_timeout": 0.1, "gossip_interval": 0.05, "tcp_timeout": 1.0}
AGENT = "127.0.0.4"


class Agent(serflab.Agent):
    """``serf agent`` on loopback with a snapshot, its log kept (serflab's
    runs on a LAN of namespaces; its stop() is this one's)."""

    def __init__(self, name, port, snapshot, *extra):
        self.rpc = f"127.0.0.1:{free_tcp_port()}"
        self.proc = subprocess.Popen(["serf", "agent", "-node", name, "-bind", f"{AGENT}:{port}", "-rpc-addr",
                                      self.rpc, "-snapshot", str(snapshot), "-profile", "local", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self.log = []
        threading.Thread(target=lambda: self.log.extend(self.proc.stdout), daemon=True).start()

    def serf(self, *args):
        return subprocess.run(["serf", *args, "-rpc-addr", self.rpc], capture_output=True, text=True, timeout=15)

    def members(self):
        done = self.serf("members", "-format", "json")
        return {m["name"]: m["status"] for m in json.loads(done.stdout)["members"]} if done.returncode == 0 else {}

def statuses(service):
    return {m.name: m.status for m in service.members()}


def test_the_agents_snapshot_is_read_and_a_member_started_on_it_rejoins_its_members(tmp_path):
    path = tmp_path / "agent.snapshot"
    pa, pp, pq = free_gossip_port(AGENT), free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")
    delivered = tmp_path / "delivered"
    agent = Agent("go1", pa, path, "-event-handler", f"user,query=cat >> {delivered}; echo >> {delivered}")
    try:
        with SerfService("py", "127.0.0.1", pp, **FAST) as py, SerfService("py2", "127.0.0.2", pq, **FAST) as py2:
            wait_until(lambda: agent.serf("members").returncode == 0)
            assert py.join([(AGENT, pa)]).joined == 1
            assert py2.join([(AGENT, pa)]).joined == 1
            wait_until(lambda: agent.members() == {"go1": "alive", "py": "alive", "py2": "alive"})
            py.user_event("deploy", b"v1")                         # event time 1
            py.user_event("deploy", b"v2")                         # 2
            py.query("ping", b"", timeout=0.5)                     # query time 1
            assert py2.leave().ok
            wait_until(lambda: agent.members().get("py2") == "left")
            # delivered to the agent (its snapshot records them then; its stop flushes them)
            wait_until(lambda: delivered.exists() and delivered.read_text().count("\n") == 3)
            agent.stop()                                           # SIGTERM: a shutdown without a leave
            text = path.read_text()
            last_clock = int(re.findall(r"^clock: (\d+)$", text, re.M)[-1])
            assert read_snapshot(text) == Restored(
                alive={"go1": f"{AGENT}:{pa}", "py": f"127.0.0.1:{pp}"}, failed={}, clock=last_clock,
                event_clock=2, query_clock=1, bad_lines=0, truncated=False)
            assert "not-alive: py2\n" in text
            # A Python member in the agent's place, on its file: its clocks, and its members rejoined.
            with SerfService("go1", AGENT, pa, snapshot_path=str(path), **FAST) as successor:
                core = successor.node.core
                assert (core.event_buffer.min_time, core.query_buffer.min_time) == (3, 2)
                assert core.members.clock.time() >= last_clock + 1
                wait_until(lambda: statuses(successor).get("py") == MemberStatus.ALIVE
                           and statuses(py).get("go1") == MemberStatus.ALIVE)
                assert successor.stats()["rejoin_joined"] == 1
    finally:
        agent.stop()


def test_the_agent_reads_our_snapshot_and_rejoins_from_it(tmp_path):
    """Our comment lines (the members that failed) are skipped by the agent,
    which rejoins the member our file lists alive."""
    path = tmp_path / "ours.snapshot"
    pa, pp = free_gossip_port(AGENT), free_gossip_port("127.0.0.1")
    with SerfService("py", "127.0.0.1", pp, **FAST) as py:
        path.write_text(f"alive: go1 {AGENT}:{pa}\nalive: py 127.0.0.1:{pp}\nalive: down 127.0.0.9:7946\n"
                        "not-alive: down\n# mcastmember-failed: down 127.0.0.9:7946\nclock: 5\nevent-clock: 3\n"
                        "query-clock: 2\n")
        agent = Agent("go1", pa, path)
        try:
            wait_until(lambda: statuses(py).get("go1") == MemberStatus.ALIVE, timeout=15)
            wait_until(lambda: agent.members().get("py") == "alive")
        finally:
            agent.stop()
        log = "".join(agent.log)
        assert "Unrecognized snapshot line" not in log and "Failed to parse" not in log
        assert f"Re-joined to previously known node: py: 127.0.0.1:{pp}" in log


def test_a_killed_member_is_back_from_its_snapshot_within_5_s_beside_the_agent(tmp_path, capsys):
    """One round of bench/rejoin.py: our member, then the agent, each killed,
    marked failed by the peer, started again with only its snapshot."""
    import rejoin

    times = rejoin.measure(1, tmp_path)
    with capsys.disabled():
        print("\n" + rejoin.table(times))
    assert times["python"][0] < 5.0

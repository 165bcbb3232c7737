"""SerfService against Debian's real Serf 0.9.4 agent, on a LAN of network
namespaces the test creates: the agent on one host, the Python front on the
other. Skips without root or without the ``serf`` binary."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("msgpack")

sys.path.insert(0, str(Path(__file__).parent))
from netlab import Lan, run_in_netns  # noqa: E402

from mcastmember.fronts.gossip_service import SerfService  # noqa: E402
from mcastmember.gossip.serf.node import MemberEvent, QueryReceived, UserEventReceived  # noqa: E402

GO, PY = 0, 1
RPC = "127.0.0.1:7373"
WAIT = 20.0


def _skip_reason():
    reason = Lan.available()
    if reason:
        return reason
    if not shutil.which("serf"):
        return "Serf is not installed (apt-get install serf)"
    return None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


def wait_until(predicate, timeout=WAIT, step=0.1):
    """Poll ``predicate`` until it returns something true; that value, or None at the timeout."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > end:
            return value
        time.sleep(step)


class Agent:
    """``serf agent`` on one host of the LAN, queried through its RPC address there."""

    def __init__(self, lan, index, name, received):
        self.lan, self.index = lan, index
        # the payload of every user event "frompy" the agent receives, appended to ``received``
        self.proc = lan.run(index, ["serf", "agent", "-node", name, "-bind", f"{lan.address(index)}:7946",
                                    "-rpc-addr", RPC, "-tag", "role=go", "-log-level", "debug",
                                    "-event-handler", f"user:frompy=cat >> {received}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.log: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def serf(self, command, *args):
        """``serf COMMAND -rpc-addr ... ARGS`` on the agent's host: its output, or None if it failed."""
        done = subprocess.run(["ip", "netns", "exec", self.lan.hosts[self.index], "serf", command,
                               "-rpc-addr", RPC, *args], capture_output=True, text=True, timeout=10)
        return done.stdout if done.returncode == 0 else None

    def members(self):
        out = self.serf("members", "-format", "json")
        return {m["name"]: m for m in json.loads(out)["members"]} if out else {}

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def lan():
    with Lan(hosts=2, prefix="srf") as lan:
        yield lan


@pytest.fixture
def agent(lan, tmp_path):
    agent = Agent(lan, GO, "go1", tmp_path / "frompy")
    try:
        assert wait_until(lambda: "go1" in agent.members()), "".join(agent.log)
        yield agent
    finally:
        agent.stop()


@pytest.fixture
def front(lan):
    svc = SerfService("py1", lan.address(PY), tags={"role": "py", "lang": "python"}, seed=1)
    events = []
    svc.add_listener(events.append)
    run_in_netns(lan.hosts[PY], svc.start)
    try:
        yield svc, events
    finally:
        svc.stop()


def py_view(svc):
    return {m.name: (m.addr, m.port, m.status.name.lower(), m.tags) for m in svc.members()}


def test_python_joins_a_serf_agent_sees_its_tags_and_events_and_leaves(lan, agent, front, tmp_path):
    svc, events = front
    received = tmp_path / "frompy"
    done = svc.join([(lan.address(GO), 7946)])
    assert (done.joined, done.errors) == (1, ())

    # the agent lists us alive with our tags
    seen = wait_until(lambda: (m := agent.members().get("py1")) and m["status"] == "alive" and m)
    assert seen, "".join(agent.log)
    assert (seen["addr"], seen["status"], seen["tags"]) == (f"{lan.address(PY)}:7946", "alive",
                                                            {"role": "py", "lang": "python"})
    # we list go1 alive with its tags
    assert wait_until(lambda: py_view(svc).get("go1", (0, 0, ""))[2] == "alive")
    assert py_view(svc) == {"go1": (lan.address(GO), 7946, "alive", {"role": "go"}),
                            "py1": (lan.address(PY), 7946, "alive", {"role": "py", "lang": "python"})}
    assert wait_until(lambda: [e for e in events if isinstance(e, MemberEvent) and e.member.name == "go1"])
    assert [e.kind for e in events if isinstance(e, MemberEvent) and e.member.name == "go1"] == ["joined"]

    # `serf event` on the agent reaches our listener
    assert agent.serf("event", "deploy", "v42") is not None
    got = wait_until(lambda: [e for e in events if isinstance(e, UserEventReceived)])
    assert [(e.name, e.payload, e.coalesce) for e in got] == [("deploy", b"v42", True)]

    # our user event reaches the agent's event handler
    svc.user_event("frompy", b"hello from python")
    assert wait_until(lambda: received.exists() and received.read_bytes()), "".join(agent.log)
    assert received.read_bytes() == b"hello from python\n"     # Serf ends a script's payload with a newline

    # `serf query` on the agent: we ack it, and a listener answers it
    def answer(event):
        if isinstance(event, QueryReceived) and event.query.name == "whoami":
            svc.respond(event, b"py1 here: " + event.query.payload)

    svc.add_listener(answer)
    out = json.loads(agent.serf("query", "-format", "json", "-timeout", "1s", "whoami", "x"))
    assert (sorted(out["Acks"]), out["Responses"]) == (["go1", "py1"], {"py1": "py1 here: x"})

    # a graceful leave: the agent shows us left
    assert svc.leave().ok
    assert wait_until(lambda: agent.members().get("py1", {}).get("status") == "left"), "".join(agent.log)
    stats = svc.stats()
    assert [stats[k] for k in ("connections_refused", "connections_too_big", "listener_events_dropped")] \
        == [0, 0, 0]


def test_a_killed_agent_is_failed_on_the_python_side(lan, agent, front):
    svc, events = front
    assert svc.join([(lan.address(GO), 7946)]).joined == 1
    assert wait_until(lambda: py_view(svc).get("go1", (0, 0, ""))[2] == "alive")
    agent.stop(signal.SIGKILL)
    assert wait_until(lambda: py_view(svc)["go1"][2] == "failed")
    assert wait_until(lambda: [e.kind for e in events if isinstance(e, MemberEvent) and e.member.name == "go1"]
                      == ["joined", "failed"])

"""A Python member's event handlers answer the ``serf`` CLI as an agent's do:
``serf query whoami`` (the CLI asks Debian's agent over its RPC; the agent
asks the cluster) lists the Python member under its responses beside the
agent, whose own ``-event-handler query:whoami=...`` answers too. The
Python member is mcast-demo gossip with the same ``--event-handler``, or a
service whose ``on_query`` handler answers (both fronts). On loopback,
about two seconds each; skipped where ``serf`` is not installed."""

import asyncio
import json
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("cryptography")

from mcastmember.gossip.fronts.aio import AsyncSerfService  # noqa: E402
from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from support import free_gossip_port, free_tcp_port, run_beside, wait_until  # noqa: E402

# What a Serf agent adds around a member is written once, above the gossip
# engine; the default implementation (compiled or pure) changes only the hot
# path's matcher beneath it, so CI's compiled pass runs these (single_pass).
pytestmark = [pytest.mark.skipif(shutil.which("serf") is None,
                                 reason="Debian's serf is not installed (apt-get install serf)"),
              pytest.mark.single_pass]

WHOAMI = "query:whoami=echo $SERF_SELF_NAME"
DEMO = [shutil.which("mcast-demo")] if shutil.which("mcast-demo") else [sys.executable, "-m", "mcastmember"]
FAST = {"probe_interval": 0.2, "gossip_interval": 0.05, "push_pull_interval": 2.0}


@pytest.fixture
def agent(tmp_path):
    """Debian's agent "go1" with its own whoami handler: (its gossip address, its RPC address)."""
    bind, rpc = f"127.0.0.1:{free_gossip_port()}", f"127.0.0.1:{free_tcp_port()}"
    proc = subprocess.Popen(["serf", "agent", "-node", "go1", "-bind", bind, "-rpc-addr", rpc,
                             "-event-handler", WHOAMI], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=tmp_path)
    try:
        wait_until(lambda: serf("members", rpc).returncode == 0)
        yield bind, rpc
    finally:
        proc.kill()
        proc.wait()


def serf(verb, rpc, *args):
    return subprocess.run(["serf", verb, "-rpc-addr", rpc, *args], capture_output=True, text=True, timeout=20)


def alive(rpc):
    return sorted(m["name"] for m in json.loads(serf("members", rpc, "-format", "json").stdout)["members"]
                  if m["status"] == "alive")


def whoami(rpc):
    """``serf query whoami`` through the agent: its acks and its responses, by node."""
    done = serf("query", rpc, "-format", "json", "-timeout", "1s", "whoami")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    return sorted(answer["Acks"]), answer["Responses"]


def test_the_demo_member_answers_serf_query_with_its_event_handler(agent):
    bind, rpc = agent
    demo = subprocess.Popen([*DEMO, "gossip", "--node", "py1", "--bind", f"127.0.0.1:{free_gossip_port()}",
                             "--join", bind, "--event-handler", WHOAMI], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, cwd="/")
    try:
        wait_until(lambda: alive(rpc) == ["go1", "py1"])
        assert whoami(rpc) == (["go1", "py1"], {"go1": "go1\n", "py1": "py1\n"})
    finally:
        demo.kill()          # (its leave is another test's)
        demo.wait()


@pytest.mark.parametrize("front", [SerfService, AsyncSerfService])
def test_a_python_query_handler_answers_serf_query(agent, front):
    bind, rpc = agent
    host, port = bind.split(":")
    svc = front("py1", "127.0.0.1", free_gossip_port(), **FAST)

    def work(svc, on):
        on(lambda: svc.on_query("whoami", lambda received: f"{svc.node.name} (Python)"))
        if front is SerfService:
            svc.join([(host, int(port))])
        else:
            asyncio.run_coroutine_threadsafe(svc.join([(host, int(port))]), svc.loop).result(10)
        wait_until(lambda: alive(rpc) == ["go1", "py1"])
        return whoami(rpc)

    assert run_beside(svc, work) == (["go1", "py1"], {"go1": "go1\n", "py1": "py1 (Python)"})

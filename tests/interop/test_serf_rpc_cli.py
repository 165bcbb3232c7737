"""Debian's ``serf`` CLI itself against a Python member's agent RPC, each
verb beside the same verb against Debian's agent in the same cluster:
``members`` (and its filters, JSON), ``info``, ``event``, ``query``,
``reachability``,
``tags``, ``keys`` (list, install, use, remove), ``rtt``, ``monitor``,
``join``, ``force-leave`` and ``leave``, all with ``-rpc-auth``, and the
same refusal without it. The outputs' shapes are compared (the members,
the sections and keys of ``info``, the lines of each answer). On loopback,
a few seconds; skipped where ``serf`` is not installed."""

import base64
import json
import shutil
import subprocess

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("cryptography")

from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from support import free_gossip_port, free_tcp_port, next_line, wait_until  # noqa: E402

# What a Serf agent adds around a member is written once, above the gossip
# engine; the default implementation (compiled or pure) changes only the hot
# path's matcher beneath it, so CI's compiled pass runs these (single_pass).
pytestmark = [pytest.mark.skipif(shutil.which("serf") is None,
                                 reason="Debian's serf is not installed (apt-get install serf)"),
              pytest.mark.single_pass]

TOKEN = "t0ken"
KEY, NEW_KEY = bytes(range(16)), bytes(range(100, 116))
FAST = {"probe_interval": 0.2, "probe_timeout": 0.1, "gossip_interval": 0.05, "push_pull_interval": 2.0,
        "suspicion_mult": 1, "suspicion_max_timeout_mult": 1}


def b64(key):
    return base64.b64encode(key).decode()


def serf(verb, rpc, *args, auth=TOKEN):
    flags = ["-rpc-addr", rpc] + (["-rpc-auth", auth] if auth else [])
    return subprocess.run(["serf", verb, *flags, *args], capture_output=True, text=True, timeout=20)


def ok(verb, rpc, *args):
    done = serf(verb, rpc, *args)
    assert done.returncode == 0, (verb, rpc, done.stdout, done.stderr)
    return done.stdout


def members(rpc, *args):
    return sorted((m["name"], m["status"], m["tags"].get("zone", ""))
                  for m in json.loads(ok("members", rpc, "-format", "json", *args))["members"] or ())


@pytest.fixture
def cluster(tmp_path):
    """Debian's agent go1 and the Python member py1 (its RPC with the
    token), joined by ``serf join`` through py1's RPC; both encrypted with KEY."""
    agent_port = free_gossip_port()
    agent_rpc, py_rpc = f"127.0.0.1:{free_tcp_port()}", f"127.0.0.1:{free_tcp_port()}"
    config = tmp_path / "agent.json"          # (the agent takes its token from a config file only)
    config.write_text(json.dumps({"rpc_auth": TOKEN}))
    agent = subprocess.Popen(["serf", "agent", "-node", "go1", "-bind", f"127.0.0.1:{agent_port}",
                              "-rpc-addr", agent_rpc, "-config-file", str(config), "-encrypt", b64(KEY),
                              "-tag", "role=go"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    py1 = SerfService("py1", "127.0.0.2", free_gossip_port("127.0.0.2"), tags={"role": "py"}, keys=[KEY],
                      rpc_addr=py_rpc, rpc_auth=TOKEN, **FAST)
    try:
        wait_until(lambda: serf("members", agent_rpc).returncode == 0)
        py1.start()
        joined = ok("join", py_rpc, f"127.0.0.1:{agent_port}")
        assert joined == "Successfully joined cluster by contacting 1 nodes.\n"
        wait_until(lambda: members(agent_rpc) == members(py_rpc) == [("go1", "alive", ""), ("py1", "alive", "")])
        yield agent_rpc, py_rpc, py1
    finally:
        py1.stop()
        agent.kill()
        agent.wait()


def test_the_serf_cli_reads_a_python_member_as_it_reads_an_agent(cluster):
    agent, py, py1 = cluster
    both = (agent, py)
    # the same refusal without the token
    refused = [serf("members", rpc, auth="") for rpc in both]
    assert [(r.returncode, r.stdout + r.stderr) for r in refused] == [
        (1, "Error retrieving members: Authentication required\n")] * 2
    # members: the same table (rows in any order), the filters alike
    tables = [sorted(ok("members", rpc).splitlines()) for rpc in both]
    assert tables[0] == tables[1] and len(tables[0]) == 2
    for flags in (["-status", "alive"], ["-tag", "role=py"], ["-name", "go.*"], ["-status", "failed"]):
        assert members(agent, *flags) == members(py, *flags), flags
    detailed = [sorted(ok("members", rpc, "-detailed").splitlines()) for rpc in both]
    assert detailed[0] == detailed[1]
    # info: the same sections and keys in them
    infos = [ok("info", rpc, "-format", "json") for rpc in both]
    shapes = [{section: sorted(values) for section, values in json.loads(text).items()
               if section not in ("tags", "event_handlers")} for text in infos]
    assert shapes[0] == shapes[1]
    assert json.loads(infos[1])["agent"] == {"name": "py1"}
    # event: the same answer
    assert [ok("event", rpc, "deploy", "v1") for rpc in both] == ["Event 'deploy' dispatched! Coalescing "
                                                                  "enabled: true\n"] * 2
    # query: each lists both members' acks, then the totals
    for rpc in both:
        lines = ok("query", rpc, "-timeout", "1s", "whoami").splitlines()
        assert (lines[0], sorted(lines[1:3]), lines[3:]) == (
            "Query 'whoami' dispatched", ["Ack from 'go1'", "Ack from 'py1'"],
            ["Total Acks: 2", "Total Responses: 0"]), rpc
    # reachability: the internal ping query, through the Python member
    assert ok("reachability", py).splitlines() == ["Total members: 2, live members: 2",
                                                   "Starting reachability test...",
                                                   "Successfully contacted all live nodes"]
    # tags: set through the Python member's RPC, seen by the agent
    assert ok("tags", py, "-set", "zone=a") == "Successfully updated agent tags\n"
    wait_until(lambda: members(agent) == [("go1", "alive", ""), ("py1", "alive", "a")])
    # rtt: each estimates its round trip to the other
    wait_until(lambda: serf("rtt", py, "go1").returncode == serf("rtt", agent, "py1").returncode == 0)
    # (the node given first, then the one answering the RPC)
    assert ok("rtt", py, "go1").startswith("Estimated go1 <-> py1 rtt: ")
    assert ok("rtt", agent, "py1").startswith("Estimated py1 <-> go1 rtt: ")


def test_the_serf_cli_rotates_keys_through_a_python_member(cluster):
    agent, py, py1 = cluster
    assert ok("keys", py, "-list").splitlines()[-1].split() == [b64(KEY), "[2/2]"]
    for flag, key, said in (("-install", NEW_KEY, "==> Successfully installed key!"),
                            ("-use", NEW_KEY, "==> Successfully changed primary key!"),
                            ("-remove", KEY, "==> Successfully removed key!")):
        assert ok("keys", py, flag, b64(key)).splitlines()[-1] == said
    listed = [ok("keys", rpc, "-list").splitlines() for rpc in (agent, py)]
    assert listed[0] == listed[1] and listed[0][-1].split() == [b64(NEW_KEY), "[2/2]"]
    assert py1.node.engine.keyring.keys == (NEW_KEY,)


def test_serf_monitor_force_leave_and_leave_through_a_python_member(cluster, tmp_path):
    agent, py, py1 = cluster
    monitors = [subprocess.Popen(["serf", "monitor", "-rpc-addr", rpc, "-rpc-auth", TOKEN, "-log-level", "info"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                for rpc in (agent, py)]
    try:
        wait_until(lambda: py1.stats()["rpc_streams_open"] == 2)      # the monitor's event stream and its logs
        py3 = SerfService("py3", "127.0.0.3", free_gossip_port("127.0.0.3"), keys=[KEY], **FAST).start()
        py3.join([("127.0.0.2", py1.port)])
        for monitor in monitors:
            line = next_line(monitor, 10)
            while "EventMemberJoin: py3" not in line:
                line = next_line(monitor, 10)
            assert line.split(" ", 2)[2] == "[INFO] serf: EventMemberJoin: py3 127.0.0.3"
    finally:
        for monitor in monitors:
            monitor.kill()
            monitor.wait()
    py3.stop()          # no leave: it fails
    wait_until(lambda: ("py3", "failed", "") in members(py))
    assert ok("force-leave", py, "py3") == ""
    assert ("py3", "left", "") in members(py)
    assert ok("leave", py) == "Graceful leave complete\n"
    wait_until(lambda: not py1.running)
    wait_until(lambda: ("py1", "left", "") in members(agent))

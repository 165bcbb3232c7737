"""``mcast-demo gossip`` operated as a Serf agent is, beside Debian's ``serf
agent`` (0.8.2) on a LAN of network namespaces the tests make: two agents
and a Python member, run as an operator runs it, with
``--event-handler``, ``--rpc-addr`` on its LAN address and
``--metrics-port``/``--metrics-address``.

- Its handlers run as the agent's: an agent joining runs the
  ``member-join`` script with Serf's variables and the agent's line on
  stdin; ``serf event deploy`` asked of an agent runs the ``user:deploy``
  script with the payload on stdin, byte for byte what the agent's own
  handler gets; ``serf query whoami`` asked of an agent lists the Python
  member's answer (its ``query:whoami`` script's output) beside theirs.
- Its RPC answers the ``serf`` CLI from another host: ``members`` lists
  the agents and itself alive, ``event`` reaches the agents' handlers,
  ``query`` gets the agents' answers.
- Its metrics, scraped from inside its namespace, count what happened
  under memberlist's and Serf's names.

Every member and agent runs with the ``local`` profile. Skips without
root or without ``serf``. The member runs as the installed process, so
CI's pure pass would only repeat the file (``both_codecs``)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("cryptography")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from netlab import JsonProcess, Lan, demo_command, run_in_netns  # noqa: E402
from serflab import Agent, netns_skip_reason  # noqa: E402
from support import wait_until  # noqa: E402

SKIP = netns_skip_reason()
pytestmark = [pytest.mark.skipif(SKIP is not None, reason=SKIP or ""), pytest.mark.both_codecs]

GO1, GO2, PY = 0, 1, 2
#: how long a step may take before the test fails (each is a second or so)
STEP = 15.0
LOCAL = ("-profile", "local")
WHOAMI = "query:whoami=echo $SERF_SELF_NAME"
RPC_PORT, METRICS_PORT = 7373, 9126


class Cluster:
    """go1 and go2 (Debian's agents, each answering whoami with its name and
    appending its user events' payloads to its file) and py, the Python
    member, which both agents joined. ``sent`` tallies the user events and
    queries asked of the cluster, by name, for the metrics' counts."""

    def __init__(self, lan, tmp):
        self.lan, self.tmp = lan, tmp
        self.joins, self.deploys = tmp / "py.joins", tmp / "py.deploys"
        self.rpc = f"{lan.address(PY)}:{RPC_PORT}"
        self.sent: dict[str, int] = {}
        self.started = []

    def start(self):
        lan = self.lan
        self.py = JsonProcess(lan, PY, ["env", "-C", "/"] + demo_command() + [
            "gossip", "--node", "py", "--json", "--profile", "local", "--bind", lan.address(PY), "--tag", "role=py",
            "--event-handler", f'member-join=sed "s/^/$SERF_EVENT $SERF_SELF_NAME $SERF_SELF_ROLE|/" >> {self.joins}',
            "--event-handler", f'user:deploy={{ echo "$SERF_EVENT $SERF_USER_EVENT"; cat; }} >> {self.deploys}',
            "--event-handler", WHOAMI,
            "--rpc-addr", self.rpc, "--metrics-port", str(METRICS_PORT), "--metrics-address", lan.address(PY)])
        self.started.append(self.py)
        # (the agents' -join gives up at once on a member not yet listening)
        self.py.wait_for(lambda item: item.get("member", {}).get("name") == "py", timeout=STEP)
        self.go1 = self.agent(GO1, "go1")
        self.go2 = self.agent(GO2, "go2")

    def agent(self, index, name):
        agent = Agent(self.lan, index, name, self.tmp / f"{name}.events", join=[self.lan.address(PY)],
                      extra=(*LOCAL, "-event-handler", WHOAMI))
        self.started.append(agent)
        return agent

    def count(self, name):
        self.sent[name] = self.sent.get(name, 0) + 1

    def stop(self):
        for each in self.started:
            each.stop(signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Lan(hosts=3, prefix="sao") as lan:
        made = Cluster(lan, tmp_path_factory.mktemp("operations"))
        try:
            made.start()
            wait_until(lambda: all(alive(a.members()) == ["go1", "go2", "py"] for a in (made.go1, made.go2)),
                       timeout=STEP, interval=0.05,
                       message=lambda: f"all alive; py says {made.py.stderr}; go1 {''.join(made.go1.log)}")
            yield made
        finally:
            made.stop()


def alive(members):
    return sorted(name for name, m in members.items() if m["status"] == "alive")


def text(path):
    return path.read_text() if path.exists() else ""


def serf_at(cluster, host, verb, *args):
    """``serf VERB -rpc-addr=<py's LAN address> ARGS`` run on ``host``: its output (it must succeed)."""
    done = subprocess.run(["ip", "netns", "exec", cluster.lan.hosts[host], "serf", verb, "-rpc-addr", cluster.rpc,
                           *args], capture_output=True, text=True, timeout=15, check=False)
    assert done.returncode == 0, (verb, args, done.stdout, done.stderr)
    return done.stdout


def query(run, *args):
    """``serf query -format json -timeout 1s ARGS`` through ``run``: (acks, responses)."""
    answer = json.loads(run("query", "-format", "json", "-timeout", "1s", *args))
    return sorted(answer["Acks"]), answer["Responses"]


# ------------------------------------------------------------------ handlers


def test_the_members_handlers_run_for_agents_joins_their_events_and_their_queries(cluster):
    lan = cluster.lan
    # member-join: its own start, then each agent, a line each with Serf's variables
    wait_until(lambda: len(text(cluster.joins).splitlines()) == 3, timeout=STEP, interval=0.05,
               message=lambda: f"three joins handled: {text(cluster.joins)!r}; {cluster.py.stderr}")
    assert sorted(text(cluster.joins).splitlines()) == [
        f"member-join py py|go1\t{lan.address(GO1)}\tgo\trole=go",
        f"member-join py py|go2\t{lan.address(GO2)}\tgo\trole=go",
        f"member-join py py|py\t{lan.address(PY)}\tpy\trole=py"]

    # a user event asked of go1: the payload on the script's stdin, as go2's own handler gets it
    assert cluster.go1.serf("event", "deploy", "x") == "Event 'deploy' dispatched! Coalescing enabled: true\n"
    cluster.count("deploy")
    wait_until(lambda: text(cluster.deploys).endswith("x\n"), timeout=STEP, interval=0.05,
               message=lambda: f"the deploy handled: {text(cluster.deploys)!r}; {cluster.py.stderr}")
    wait_until(lambda: text(cluster.go2.received).endswith("x\n"), timeout=STEP, interval=0.05,
               message=lambda: f"go2's handler: {text(cluster.go2.received)!r}")
    assert (text(cluster.deploys), text(cluster.go2.received)) == ("user deploy\nx\n", "x\n")

    # whoami asked of an agent: the member's script answers beside the agents'
    cluster.count("whoami")
    assert query(cluster.go2.serf, "whoami") == (["go1", "go2", "py"], {"go1": "go1\n", "go2": "go2\n",
                                                                         "py": "py\n"})


# ------------------------------------------------------------------ the agent's RPC


def test_the_serf_cli_on_another_host_reads_and_drives_the_member_through_its_rpc(cluster):
    def run(verb, *args):
        return serf_at(cluster, GO1, verb, *args)

    members = json.loads(run("members", "-format", "json"))["members"]
    assert {m["name"]: (m["addr"], m["status"], m["tags"]) for m in members} == {
        "go1": (f"{cluster.lan.address(GO1)}:7946", "alive", {"role": "go"}),
        "go2": (f"{cluster.lan.address(GO2)}:7946", "alive", {"role": "go"}),
        "py": (f"{cluster.lan.address(PY)}:7946", "alive", {"role": "py"})}

    # an event asked of the member reaches both agents' handlers (another
    # name than deploy's: the agents coalesce events of one name)
    assert run("event", "restart", "y") == "Event 'restart' dispatched! Coalescing enabled: true\n"
    cluster.count("restart")
    wait_until(lambda: [text(a.received)[-2:] for a in (cluster.go1, cluster.go2)] == ["y\n", "y\n"],
               timeout=STEP, interval=0.05,
               message=lambda: f"the agents' handlers: {[text(a.received) for a in (cluster.go1, cluster.go2)]}")

    cluster.count("whoami")
    assert query(run, "whoami") == (["go1", "go2", "py"], {"go1": "go1\n", "go2": "go2\n", "py": "py\n"})


# ------------------------------------------------------------------ metrics


def scrape(url):
    with urllib.request.urlopen(url, timeout=5) as answer:
        return answer.read().decode()


def samples(text):
    """{sample name: value} of the samples labelled with the node only."""
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
            if set(s.labels) <= {"node"}}


def test_the_members_metrics_count_what_happened_under_memberlist_and_serf_names(cluster):
    assert cluster.go1.serf("event", "deploy", "z") is not None
    cluster.count("deploy")
    wait_until(lambda: text(cluster.deploys).endswith("z\n"), timeout=STEP, interval=0.05)
    cluster.count("whoami")
    assert query(cluster.go1.serf, "whoami")[0] == ["go1", "go2", "py"]
    url = f"http://{cluster.lan.address(PY)}:{METRICS_PORT}/metrics"
    scraped = samples(run_in_netns(cluster.lan.hosts[PY], scrape, url))
    sent = cluster.sent
    assert {name: scraped.get(name) for name in (
        "serf_member_join", "serf_member_failed", "serf_member_left", "serf_events", "serf_events_deploy",
        "serf_queries", "serf_queries_whoami")} == {
        "serf_member_join": 3, "serf_member_failed": 0, "serf_member_left": 0,
        "serf_events": sent.get("deploy", 0) + sent.get("restart", 0), "serf_events_deploy": sent["deploy"],
        "serf_queries": sent["whoami"], "serf_queries_whoami": sent["whoami"]}
    # each member's alive, at least (a refuted suspicion under load adds one)
    assert scraped["memberlist_msg_alive"] >= 3

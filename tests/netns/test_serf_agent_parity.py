"""``mcast-demo gossip`` where Debian's ``serf agent`` runs (Serf 0.8.2 on
memberlist 0.2.x: no labels), on a LAN of network namespaces the tests make:
label-less members and agents form a cluster whichever side dials, plain and
encrypted, with the compiled and the pure-Python member side by side;
``--retry-join`` started before its seed joins it when it comes up and does
not exit; a member killed and started again on its ``--snapshot`` with
``--rejoin`` and no ``--join`` is listed alive by the agents, and lists them,
within 5 s, measured beside an agent doing the same in the same run (the
agent's time printed beside ours, not asserted); a member reads the snapshot file an
agent wrote and rejoins the members it names; a member bound to 0.0.0.0 is
listed, and reached, at the address it advertises.

Every member and agent runs with the ``local`` profile (the agent has no
finer timers). Skips without root or without ``serf``. The members run as
installed processes, each told its implementation, so CI's pure pass would
only repeat the file (``both_codecs``)."""

from __future__ import annotations

import base64
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("cryptography")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from netlab import JsonProcess, Lan, demo_command  # noqa: E402
from serflab import Agent, netns_skip_reason  # noqa: E402
from support import wait_until  # noqa: E402

from mcastmember.gossip.serf.snapshot import read_snapshot  # noqa: E402

SKIP = netns_skip_reason()
pytestmark = [pytest.mark.skipif(SKIP is not None, reason=SKIP or ""), pytest.mark.both_codecs]

GO1, GO2, PY, PY2 = 0, 1, 2, 3
#: how long a step may take before the test fails (each is a second or so)
STEP = 15.0
#: the rejoin a snapshot must give a member killed and started again
REJOIN_TARGET = 5.0
#: the agent's own timers for members on one host: memberlist's quickest
LOCAL = ("-profile", "local")
IMPLEMENTATIONS = {"compiled": ["env", "-u", "MCASTMEMBER_NO_EXTENSIONS"],
                   "pure": ["env", "MCASTMEMBER_NO_EXTENSIONS=1"]}


@pytest.fixture
def lan():
    with Lan(hosts=4, prefix="prt") as lan:
        yield lan


class Cluster:
    """The agents and members a test started, stopped at its end (SIGKILL:
    the namespaces go with them, nobody is left to tell of a leave)."""

    def __init__(self, lan, tmp_path):
        self.lan, self.tmp = lan, tmp_path
        self.started = []

    def agent(self, index, name, *flags, join=(), encrypt=None):
        agent = Agent(self.lan, index, name, self.tmp / f"{name}.events", join=join, encrypt=encrypt,
                      extra=(*LOCAL, *flags))
        self.started.append(agent)
        return agent

    def member(self, index, name, *flags, implementation="compiled"):
        argv = IMPLEMENTATIONS[implementation] + demo_command() + [
            "gossip", "--node", name, "--json", "--profile", "local", *flags]
        started = time.monotonic()
        member = JsonProcess(self.lan, index, argv)
        member.name, member.started = name, started
        self.started.append(member)
        return member

    def stop(self):
        for each in self.started:
            each.stop(signal.SIGKILL)


@pytest.fixture
def cluster(lan, tmp_path):
    made = Cluster(lan, tmp_path)
    try:
        yield made
    finally:
        made.stop()


def listed(member):
    """{name: (address, status)} as ``member``'s --json lines last told each."""
    seen = {}
    for _, item in list(member.lines):
        if "member" in item:
            m = item["member"]
            seen[m["name"]] = (f"{m['addr']}:{m['port']}", m["status"])
    return seen


def statuses(observer):
    """{name: status} as an agent or a member lists them now."""
    if isinstance(observer, Agent):
        return {name: m["status"] for name, m in observer.members().items()}
    return {name: status for name, (_, status) in listed(observer).items()}


def all_list(observers, names, status="alive"):
    return all(statuses(o).get(n) == status for o in observers for n in names if n != o.name)


def wait_all_list(observers, names, status="alive", timeout=STEP):
    wait_until(lambda: all_list(observers, names, status), timeout=timeout, interval=0.05,
               message=lambda: f"{names} {status} everywhere: {[(o.name, statuses(o)) for o in observers]}; "
                               + " ".join(getattr(o, "stderr", "") for o in observers))


def alive_in_snapshot(path, names):
    """``path`` (a snapshot, ours or an agent's) lists ``names`` alive."""
    return path.exists() and set(names) <= set(read_snapshot(path.read_text()).alive)


# -------------------------------------- label-less members and agents, both ways


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_members_and_agents_without_labels_form_a_cluster_whichever_side_dials(lan, cluster, encrypted):
    """The compiled member dials one agent and the pure one the other; then
    each agent dials the member that did not dial it (``serf join``): a
    member's stream reply reaches memberlist 0.2.x as it expects it."""
    flags, encrypt = ((), None) if not encrypted else (("--encrypt", base64.b64encode(bytes(range(16))).decode()),
                                                       bytes(range(16)))
    go1 = cluster.agent(GO1, "go1", encrypt=encrypt)
    go2 = cluster.agent(GO2, "go2", encrypt=encrypt)
    wait_until(lambda: go1.members() and go2.members(), timeout=STEP, interval=0.05)
    py = cluster.member(PY, "py", "--bind", lan.address(PY), "--join", lan.address(GO1), *flags)
    pyp = cluster.member(PY2, "pyp", "--bind", lan.address(PY2), "--join", lan.address(GO2), *flags,
                         implementation="pure")
    wait_all_list([go1, py], ["go1", "py"])
    wait_all_list([go2, pyp], ["go2", "pyp"])
    assert go1.run("join", lan.address(PY2)) == (0, "Successfully joined cluster by contacting 1 nodes.\n")
    assert go2.run("join", lan.address(PY)) == (0, "Successfully joined cluster by contacting 1 nodes.\n")
    names = ["go1", "go2", "py", "pyp"]
    wait_all_list([go1, go2, py, pyp], names)
    assert {name: (m["addr"], m["status"]) for name, m in go1.members().items()} == {
        name: (f"{lan.address(i)}:7946", "alive") for i, name in enumerate(names)}
    assert (py.proc.poll(), pyp.proc.poll()) == (None, None)


# -------------------------------------------------------------- retry-join


def test_a_member_retry_joining_an_agent_that_starts_3_s_later_joins_it_and_stays_up(lan, cluster):
    py = cluster.member(PY, "py", "--bind", lan.address(PY), "--retry-join", lan.address(GO1),
                        "--retry-interval", "250ms")
    # the scenario, not a wait for a result: the seed comes up 3 s after the member
    time.sleep(max(0.0, 3.0 - (time.monotonic() - py.started)))
    assert py.proc.poll() is None, py.stderr
    assert "go1" not in listed(py)
    agent_started = time.monotonic()
    go1 = cluster.agent(GO1, "go1")
    seen, _ = py.wait_for(lambda i: i.get("member", {}).get("name") == "go1" and i["event"] == "added",
                          timeout=STEP)
    wait_all_list([go1, py], ["go1", "py"])
    assert listed(py)["go1"] == (f"{lan.address(GO1)}:7946", "alive")
    assert go1.members()["py"]["addr"] == f"{lan.address(PY)}:7946"
    assert py.proc.poll() is None, py.stderr
    print(f"\nretry-join: joined {seen - agent_started:.2f} s after the agent was started "
          f"(--retry-interval 250ms)")


# ------------------------------------------------------- snapshot and rejoin


def test_a_killed_member_rejoins_from_its_snapshot_within_5_s_beside_an_agent_doing_the_same(
        lan, cluster, tmp_path):
    """Two agents and a member, each with a snapshot and rejoin. The member,
    then one agent, is killed (SIGKILL), marked failed by the others and
    started again on its snapshot without a join; the time is from that
    start until it lists the others alive and they list it alive. Then a
    member started on a copy of an agent's snapshot rejoins those it names."""
    snap = {name: tmp_path / f"{name}.snapshot" for name in ("go1", "go2", "py", "py2")}
    go1 = cluster.agent(GO1, "go1", "-snapshot", str(snap["go1"]), "-rejoin")
    wait_until(lambda: go1.members(), timeout=STEP, interval=0.05)
    go2_flags = ("-snapshot", str(snap["go2"]), "-rejoin")
    go2 = cluster.agent(GO2, "go2", *go2_flags, join=[lan.address(GO1)])
    py_flags = ("--bind", lan.address(PY), "--snapshot", str(snap["py"]), "--rejoin")
    py = cluster.member(PY, "py", *py_flags, "--join", lan.address(GO1))
    everyone = ["go1", "go2", "py"]
    wait_all_list([go1, go2, py], everyone)
    wait_until(lambda: alive_in_snapshot(snap["py"], ["go1", "go2"]), timeout=STEP, interval=0.05)

    py.stop(signal.SIGKILL)
    wait_all_list([go1, go2], ["py"], "failed")
    started = time.monotonic()
    py = cluster.member(PY, "py", *py_flags)
    wait_all_list([go1, go2, py], everyone, timeout=STEP)
    ours = time.monotonic() - started
    # how much of it the interpreter's start took: until the member listed itself
    up = py.wait_for(lambda i: i.get("member", {}).get("name") == "py")[0] - started

    # The agent writes its snapshot through a buffer it flushes only when a
    # later record comes, so py's return may not be on disk yet (the file can
    # end "not-alive: py" while go2 lists py alive); its rejoin needs go1.
    wait_until(lambda: alive_in_snapshot(snap["go2"], ["go1"]), timeout=STEP, interval=0.05,
               message=lambda: f"go2's snapshot to list go1 alive: it holds {snap['go2'].read_text()!r}")
    go2.stop(signal.SIGKILL)
    wait_all_list([go1, py], ["go2"], "failed")
    started = time.monotonic()
    go2 = cluster.agent(GO2, "go2", *go2_flags)
    wait_all_list([go1, go2, py], everyone, timeout=30.0)
    theirs = time.monotonic() - started
    print(f"\nrejoin from a snapshot after SIGKILL: mcast-demo gossip {ours:.2f} s ({up:.2f} s of it "
          f"its start), serf agent {theirs:.2f} s")
    assert ours <= REJOIN_TARGET

    # A member that never met anyone, on the file the agent wrote: it rejoins whom it names.
    assert {"go1", "go2"} <= set(read_snapshot(snap["go2"].read_text()).alive) <= {"go1", "go2", "py"}
    shutil.copy(snap["go2"], snap["py2"])
    py2 = cluster.member(PY2, "py2", "--bind", lan.address(PY2), "--snapshot", str(snap["py2"]))
    wait_all_list([go1, go2, py, py2], everyone + ["py2"])


# --------------------------------------------------------------- advertise


def test_a_member_bound_to_every_address_is_listed_and_reached_by_agents_at_the_one_it_advertises(lan, cluster):
    """Its host has a second address; the member binds 0.0.0.0 and
    advertises that one, which the agent lists and another agent dials."""
    advertised = "10.250.0.103"
    subprocess.run(["ip", "-n", lan.hosts[PY], "addr", "add", f"{advertised}/24", "dev", "eth0"], check=True)
    go1 = cluster.agent(GO1, "go1")
    go2 = cluster.agent(GO2, "go2")
    wait_until(lambda: go1.members() and go2.members(), timeout=STEP, interval=0.05)
    py = cluster.member(PY, "py", "--bind", "0.0.0.0", "--advertise", advertised, "--join", lan.address(GO1))
    wait_all_list([go1, py], ["go1", "py"])
    assert go1.members()["py"]["addr"] == f"{advertised}:7946"
    assert go2.run("join", advertised) == (0, "Successfully joined cluster by contacting 1 nodes.\n")
    wait_all_list([go1, go2, py], ["go1", "go2", "py"])
    assert {name: m["addr"] for name, m in go2.members().items()} == {
        "go1": f"{lan.address(GO1)}:7946", "go2": f"{lan.address(GO2)}:7946", "py": f"{advertised}:7946"}

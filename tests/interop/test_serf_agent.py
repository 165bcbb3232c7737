"""SerfService against Debian's real Serf 0.9.4 agent, on LANs of network
namespaces the tests create (never the machine's interfaces): mixed clusters
of ``serf agent`` processes and Python members, plain and encrypted. Skips
without root or without the ``serf`` binary (the partition also needs
``nft``).

CI runs them in both of its passes: with the gossip hot path compiled, and
with its pure-Python twin (``MCASTMEMBER_NO_EXTENSIONS=1``, which the
Python member processes inherit).

Failure detection is asserted against memberlist's own bound for the cluster
size (``detection_bound``), never against a timing of ours."""

from __future__ import annotations

import json
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("cryptography")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from netlab import JsonProcess, Lan, nft_available, run_in_netns  # noqa: E402
from serflab import REPAIR_BOUND, Agent, b64, detection_bound, member_command  # noqa: E402
from support import wait_until  # noqa: E402

from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.serf.node import SerfMemberEvent, QueryReceived, UserEventReceived  # noqa: E402

WAIT = 20.0
#: what polling adds on our side: one round of `serf members` or members() after the fact
POLL_SLACK = 1.0
#: what gossip missed (one member in some hundreds misses a broadcast) is
#: repaired by a push/pull: at most this long for a member that just started
REPAIRED = REPAIR_BOUND + WAIT


def _skip_reason():
    reason = Lan.available()
    if reason:
        return reason
    if not shutil.which("serf"):
        return "Serf is not installed (apt-get install serf)"
    return None


pytestmark = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


def start_front(lan, index, name, tags, **kw):
    svc = SerfService(name, lan.address(index), tags=tags, seed=index, **kw)
    events = []
    svc.add_listener(events.append)
    run_in_netns(lan.hosts[index], svc.start)
    return svc, events


def py_view(svc):
    return {m.name: (m.addr, m.port, m.status.name.lower(), m.tags) for m in svc.members()}


def py_status(svc, name):
    return py_view(svc).get(name, (0, 0, None))[2]


def member_kinds(events, name, since=0):
    return [e.kind for e in events[since:] if isinstance(e, SerfMemberEvent) and e.member.name == name]


def wait_status(observers, names, status, timeout=REPAIRED):
    """Every observer (Agent or SerfService) lists every name with ``status``;
    what each listed when it stopped waiting. News spreads by gossip, which
    now and then misses a member (see test_user_events_both_ways); the next
    push/pull, which swaps the whole member list, makes up for it: the
    default waits for that."""
    def seen():
        out = {}
        for observer in observers:
            for name in names:
                if isinstance(observer, Agent):
                    out[(observer.name, name)] = observer.status(name)
                else:
                    out[(observer.node.name, name)] = py_status(observer, name)
        return out
    wait_until(lambda: all(s == status for s in seen().values()), timeout=timeout, interval=0.1,
               message=lambda: f"every observer to list {names} {status}: {seen()}")
    return seen()


# ------------------------------------------------------- a plain cluster


@pytest.fixture
def lan():
    with Lan(hosts=3, prefix="srf") as lan:
        yield lan


GO, GO2, PY = 0, 1, 2


@pytest.fixture
def agents(lan, tmp_path):
    started = []
    try:
        started.append(Agent(lan, GO, "go1", tmp_path / "go1"))
        wait_until(lambda: "go1" in started[0].members(), timeout=WAIT, interval=0.1, message=lambda: "".join(started[0].log))
        started.append(Agent(lan, GO2, "go2", tmp_path / "go2", join=[lan.address(GO)]))
        wait_until(lambda: started[0].status("go2") == "alive", timeout=WAIT, interval=0.1, message=lambda: "".join(started[1].log))
        yield started
    finally:
        for agent in started:
            agent.stop()


@pytest.fixture
def front(lan):
    svc, events = start_front(lan, PY, "py1", {"role": "py", "lang": "python"})
    try:
        yield svc, events
    finally:
        svc.stop()


def test_python_joins_two_serf_agents_sees_their_tags_and_events_and_leaves(lan, agents, front):
    go1, go2 = agents
    svc, events = front
    done = svc.join([(lan.address(GO), 7946)])
    assert (done.joined, done.errors) == (1, ())

    # both agents list us alive with our tags
    for agent in agents:
        seen = wait_until(lambda: (m := agent.members().get("py1")) and m["status"] == "alive" and m, timeout=WAIT, interval=0.1)
        assert seen, "".join(agent.log)
        assert (seen["addr"], seen["status"], seen["tags"]) == (f"{lan.address(PY)}:7946", "alive",
                                                                {"role": "py", "lang": "python"})
    # we list both alive with their tags
    wait_until(lambda: py_status(svc, "go2") == "alive", timeout=WAIT, interval=0.1)
    assert py_view(svc) == {"go1": (lan.address(GO), 7946, "alive", {"role": "go"}),
                            "go2": (lan.address(GO2), 7946, "alive", {"role": "go"}),
                            "py1": (lan.address(PY), 7946, "alive", {"role": "py", "lang": "python"})}
    wait_until(lambda: member_kinds(events, "go2"), timeout=WAIT, interval=0.1)
    assert (member_kinds(events, "go1"), member_kinds(events, "go2")) == (["joined"], ["joined"])

    # `serf event` on an agent reaches our listener
    assert go2.serf("event", "deploy", "v42") is not None
    got = wait_until(lambda: [e for e in events if isinstance(e, UserEventReceived)], timeout=WAIT, interval=0.1)
    assert [(e.name, e.payload, e.coalesce) for e in got] == [("deploy", b"v42", True)]

    # our user event reaches both agents' event handlers (after theirs)
    svc.user_event("frompy", b"hello from python")
    for agent in agents:
        wait_until(lambda: agent.received.exists() and b"hello" in agent.received.read_bytes(), timeout=WAIT,
                   interval=0.1, message=lambda: "".join(agent.log))
        # Serf ends a handler's payload with a newline; handlers run in any order
        assert sorted(agent.received.read_bytes().splitlines(True)) == [b"hello from python\n", b"v42\n"]

    # `serf query` on an agent: we ack it, and a listener answers it
    def answer(event):
        if isinstance(event, QueryReceived) and event.query.name == "whoami":
            svc.respond(event, b"py1 here: " + event.query.payload)

    svc.add_listener(answer)
    out = json.loads(go1.serf("query", "-format", "json", "-timeout", "1s", "whoami", "x"))
    assert (sorted(out["Acks"]), out["Responses"]) == (["go1", "go2", "py1"], {"py1": "py1 here: x"})

    # a graceful leave: both agents show us left
    assert svc.leave().ok
    assert wait_status(agents, ["py1"], "left") == {("go1", "py1"): "left", ("go2", "py1"): "left"}
    stats = svc.stats()
    assert [stats[k] for k in ("connections_refused", "connections_too_big", "listener_events_dropped")] \
        == [0, 0, 0]


def test_an_agent_joins_a_python_seed_and_once_killed_is_failed_within_memberlists_bound(lan, front, tmp_path):
    svc, events = front
    agent = Agent(lan, GO, "go1", tmp_path / "go1", join=[lan.address(PY)])
    try:
        wait_until(lambda: agent.status("py1") == "alive", timeout=WAIT, interval=0.1, message=lambda: "".join(agent.log))
        assert agent.members()["py1"]["tags"] == {"role": "py", "lang": "python"}
        wait_until(lambda: py_status(svc, "go1") == "alive", timeout=WAIT, interval=0.1)
        assert py_view(svc)["go1"] == (lan.address(GO), 7946, "alive", {"role": "go"})
        agent.stop(signal.SIGKILL)
        killed = time.monotonic()
        bound = detection_bound(2)
        wait_until(lambda: py_status(svc, "go1") == "failed", timeout=bound + POLL_SLACK, interval=0.1)
        took = time.monotonic() - killed
        assert took <= bound + POLL_SLACK, (took, bound)
        wait_until(lambda: member_kinds(events, "go1") == ["joined", "failed"], timeout=WAIT, interval=0.1)
    finally:
        agent.stop()


# ------------------------------------------------------ an encrypted mixed cluster

K1, K2, WRONG = bytes(range(32)), bytes(range(100, 132)), bytes(range(200, 232))
GO1, GO2E, GO3, PY1, PY2, PYK, PYW = range(7)
TAGS = {"py1": {"role": "py", "n": "1"}, "py2": {"role": "py", "n": "2"}, "pyk": {"role": "py", "n": "k"}}
PY_HOSTS = {"py1": PY1, "py2": PY2, "pyk": PYK}
GO_HOSTS = {"go1": GO1, "go2": GO2E, "go3": GO3}


class Mixed:
    """The shared encrypted cluster: agents go1, go2 (go3 joins later), Python
    members py1 and py2 in this process, pyk as a process of its own."""

    def __init__(self, lan, tmp):
        self.lan, self.tmp = lan, tmp
        self.config = tmp / "serf.json"
        # Serf's reconnect of failed members (serf.go reconnect) every second, as ours
        self.config.write_text(json.dumps({"reconnect_interval": "1s"}))
        self.agents: dict[str, Agent] = {}
        self.fronts: dict[str, tuple[SerfService, list]] = {}
        self.pyk: JsonProcess | None = None

    def agent(self, name, join=()):
        agent = Agent(self.lan, GO_HOSTS[name], name, self.tmp / name, encrypt=K1, join=join,
                      config=self.config)
        self.agents[name] = agent
        wait_until(lambda: agent.status(name) == "alive", timeout=WAIT, interval=0.1, message=lambda: "".join(agent.log))
        return agent

    def front(self, name, keys=(K1,)):
        svc, events = start_front(self.lan, PY_HOSTS.get(name, PYW), name, TAGS.get(name, {}),
                                  keys=keys, reconnect_interval=1.0)
        self.fronts[name] = (svc, events)
        return svc, events

    def observers(self):
        return [*self.agents.values(), *(svc for svc, _ in self.fronts.values() if svc.node.name != "pyw")]

    def close(self):
        if self.pyk is not None:
            self.pyk.stop(signal.SIGKILL)
        for svc, _ in self.fronts.values():
            svc.stop()
        for agent in self.agents.values():
            agent.stop()
            (self.tmp / f"{agent.name}.log").write_text("".join(agent.log))    # for a failure's post-mortem


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    with Lan(hosts=7, prefix="srg") as lan:
        cluster = Mixed(lan, tmp_path_factory.mktemp("mixed"))
        try:
            cluster.agent("go1")
            cluster.agent("go2", join=[lan.address(GO1)])
            yield cluster
        finally:
            cluster.close()


def agent_view(agent, name):
    m = agent.members().get(name)
    return m and (m["addr"], m["status"], m["tags"])


def test_encrypted_python_members_join_two_agents(mixed):
    lan = mixed.lan
    py1, _ = mixed.front("py1")
    py2, _ = mixed.front("py2")
    assert py1.join([(lan.address(GO1), 7946)]).joined == 1
    assert py2.join([(lan.address(GO2E), 7946)]).joined == 1
    mixed.pyk = JsonProcess(lan, PYK, member_command({
        "name": "pyk", "bind": lan.address(PYK), "tags": TAGS["pyk"], "keys": [b64(K1)],
        "join": [[lan.address(GO1), 7946], [lan.address(GO2E), 7946]], "reconnect_interval": 1.0}))
    assert mixed.pyk.wait_for(lambda i: i["event"] == "ready", WAIT)[1] == {"event": "ready", "joined": 2}

    names = ["go1", "go2", "py1", "py2", "pyk"]
    seen = wait_status(mixed.observers(), names, "alive")
    assert set(seen.values()) == {"alive"}, seen
    for agent in mixed.agents.values():
        assert {name: agent_view(agent, name) for name in PY_HOSTS} == {
            name: (f"{lan.address(PY_HOSTS[name])}:7946", "alive", TAGS[name]) for name in PY_HOSTS}
    for svc, _ in mixed.fronts.values():
        assert {name: py_view(svc)[name] for name in ("go1", "go2")} == {
            name: (lan.address(GO_HOSTS[name]), 7946, "alive", {"role": "go"}) for name in ("go1", "go2")}
    assert mixed.pyk.wait_for(lambda i: i["event"] == "joined" and i["name"] == "py2", REPAIRED)


def test_an_encrypted_agent_joins_python_seeds(mixed):
    lan = mixed.lan
    go3 = mixed.agent("go3", join=[lan.address(PY1), lan.address(PY2)])
    names = ["go1", "go2", "go3", "py1", "py2", "pyk"]
    seen = wait_status(mixed.observers(), names, "alive")
    assert set(seen.values()) == {"alive"}, seen
    assert {name: agent_view(go3, name) for name in PY_HOSTS} == {
        name: (f"{lan.address(PY_HOSTS[name])}:7946", "alive", TAGS[name]) for name in PY_HOSTS}
    assert py_view(mixed.fronts["py1"][0])["go3"] == (lan.address(GO3), 7946, "alive", {"role": "go"})


def test_user_events_both_ways(mixed):
    go3 = mixed.agents["go3"]
    # Gossip is probabilistic (each member passes an event on 4 x
    # ceil(log10(N + 1)) times to random members): one member in some hundreds
    # misses it, and gets it at its next push/pull, as in a cluster of agents
    # (pyk started moments ago: its first may be two intervals away).
    assert go3.serf("event", "deploy", "v7") is not None
    for name, (_svc, events) in mixed.fronts.items():
        got = wait_until(lambda: [e for e in events if isinstance(e, UserEventReceived)], timeout=REPAIRED, interval=0.1)
        assert [(e.name, e.payload) for e in got] == [("deploy", b"v7")], name
    assert mixed.pyk.wait_for(lambda i: i["event"] == "user", REPAIRED)[1] == \
        {"event": "user", "name": "deploy", "payload": "v7"}
    mixed.fronts["py2"][0].user_event("frompy", b"py2 says hi")
    # the agent's handler runs once Serf's coalescing of user events lets them go
    for agent in mixed.agents.values():
        wait_until(lambda: agent.received.exists() and agent.received.read_bytes().count(b"\n") == 2,
                   timeout=REPAIRED, interval=0.1, message=lambda: "".join(agent.log))
        assert sorted(agent.received.read_bytes().splitlines(True)) == [b"py2 says hi\n", b"v7\n"], agent.name


def test_serf_rtt_estimates_round_trips_to_python_members_and_back(mixed):
    """Our acks carry our network coordinate, so an agent that probed a
    Python member can estimate the RTT to it (`serf rtt`), and we cache the
    agents' coordinates from theirs."""
    go1 = mixed.agents["go1"]
    py1 = mixed.fronts["py1"][0]
    # each member probes each other every 6 s or so (one per second, round-robin)
    out = wait_until(lambda: go1.serf("rtt", "py1", "py2"), timeout=WAIT, interval=0.1)
    assert out is not None and out.startswith("Estimated py1 <-> py2 rtt: "), go1.run("rtt", "py1", "py2")
    wait_until(lambda: go1.serf("rtt", "py1"), timeout=WAIT, interval=0.1)
    from mcastmember.gossip.serf import estimate_rtt
    theirs = wait_until(lambda: py1.cached_coordinate("go1"), timeout=WAIT, interval=0.1)
    assert theirs is not None and len(theirs.vec) == 8
    assert 0 < estimate_rtt(py1.coordinate(), theirs) < 1.0
    assert py1.stats()["coordinate_updates"] > 0


def test_serf_keys_rotation_on_a_mixed_cluster_removes_nobody(mixed):
    go1 = mixed.agents["go1"]
    everyone = ["go1", "go2", "go3", "py1", "py2", "pyk"]
    marks = {name: len(events) for name, (_svc, events) in mixed.fronts.items()}

    def keys(*args):
        # A key query reaches the members by gossip too, with no push/pull to
        # make up for a miss: when a member missed it, Serf says "5/6 nodes
        # reported success" and the operator runs the (idempotent) command
        # again. Once, here; any other failure fails the test.
        for _attempt in range(2):
            code, out = go1.run("keys", *args)
            if code == 0 or "nodes reported success" not in out:
                break
        assert code == 0, (args, out, {name: svc.stats() for name, (svc, _) in mixed.fronts.items()},
                           "".join(line for agent in mixed.agents.values() for line in agent.log[-40:]))
        return out

    assert keys("-install", b64(K2)) == "==> Installing key on all members...\n==> Successfully installed key!\n"
    listed = keys("-list")
    assert f"{b64(K1)}  [6/6]" in listed and f"{b64(K2)}  [6/6]" in listed, listed
    assert keys("-use", b64(K2)) == ("==> Changing primary key on all members...\n"
                                     "==> Successfully changed primary key!\n")
    assert keys("-remove", b64(K1)) == "==> Removing key on all members...\n==> Successfully removed key!\n"
    listed = keys("-list")
    assert f"{b64(K2)}  [6/6]" in listed and b64(K1) not in listed, listed
    before = {}
    for name, (svc, _) in mixed.fronts.items():
        assert svc.node.engine.keyring.keys == (K2,)
        before[name] = svc.stats()["messages_received"]
    # still one cluster, now on K2 alone: each Python member hears a probe
    # round's worth more from the others, and could read all of it
    for name, (svc, _) in mixed.fronts.items():
        wait_until(lambda: svc.stats()["messages_received"] >= before[name] + 5, timeout=WAIT, interval=0.1, message=lambda: name)
        assert svc.stats()["bad_input"] == 0, svc.stats()
    seen = wait_status(mixed.observers(), everyone, "alive")
    assert set(seen.values()) == {"alive"}, seen
    for name, (_svc, events) in mixed.fronts.items():     # nobody failed, left or came back meanwhile
        assert [e for e in events[marks[name]:] if isinstance(e, SerfMemberEvent)] == [], name


def test_a_python_member_with_a_wrong_key_joins_nobody_and_counts_what_it_refused(mixed):
    svc, _ = mixed.front("pyw", keys=(WRONG,))
    done = svc.join([(mixed.lan.address(GO1), 7946)], timeout=15)
    assert done.joined == 0
    assert [m.name for m in svc.members()] == ["pyw"]
    assert "pyw" not in mixed.agents["go1"].members()
    print(done)
    # the agent could not read our push/pull and said so in its own key,
    # which we could not read either: refused and counted
    stats = svc.stats()
    assert [stats[k] for k in ("bad_input.no_key", "streams_failed", "push_pulls", "members")] == [1, 1, 0, 1]


def pyk_status(mixed, name):
    """What the pyk process last said of ``name`` (its member events)."""
    kinds = [i["status"] for _, i in mixed.pyk.lines if i.get("name") == name and "status" in i]
    return kinds[-1] if kinds else None


@pytest.mark.skipif(nft_available() is not None, reason=nft_available() or "")
# The failure detector's timing against the agents' (a partition, SIGKILLs)
# is the engine's, one implementation: CI's compiled pass measures it, the
# pure pass does not repeat it (the pure hot path meets the agents in the
# other tests here).
@pytest.mark.single_pass
def test_a_partition_healed_with_nftables_merges_again(mixed):
    lan = mixed.lan
    side_a, side_b = ["go1", "go3", "py1"], ["go2", "py2", "pyk"]
    hosts = {**GO_HOSTS, **PY_HOSTS}
    observers = {o.name if isinstance(o, Agent) else o.node.name: o for o in mixed.observers()}
    marks = {name: len(events) for name, (_svc, events) in mixed.fronts.items()}
    try:
        for mine, theirs in ((side_a, side_b), (side_b, side_a)):
            addresses = ", ".join(lan.address(hosts[name]) for name in theirs)
            for name in mine:
                lan.filter(hosts[name], [f"ip saddr {{ {addresses} }} counter drop"])
        # each side marks the other failed (memberlist's bound for six members
        # is the most this may take: detection_bound(6) = 35 s)
        for mine, theirs in ((side_a, side_b), (side_b, side_a)):
            seen = wait_status([observers[n] for n in mine if n != "pyk"], theirs, "failed", detection_bound(6))
            assert set(seen.values()) == {"failed"}, seen
        wait_until(lambda: all(pyk_status(mixed, n) == "failed" for n in side_a), timeout=WAIT, interval=0.1)
        dropped = [lan.counters(hosts[name]) for name in side_a + side_b]
        assert all(count[0] > 0 for count in dropped), dropped
    finally:
        for name in side_a + side_b:
            lan.filter(hosts[name], [])
    # healed: Serf's reconnect (every second on both kinds of member here)
    # joins a failed member again; everyone is alive everywhere
    everyone = side_a + side_b
    seen = wait_status(list(observers.values()), everyone, "alive")
    assert set(seen.values()) == {"alive"}, seen
    wait_until(lambda: all(pyk_status(mixed, n) == "alive" for n in side_a), timeout=REPAIRED, interval=0.1)
    # py1 and py2 saw each member across the cut fail and come back once. A
    # member on their own side may blip (failed, then joined): the other
    # side's "dead" about it, at its incarnation, can arrive before its own
    # refutation does, as memberlist's deadNode takes it.
    for name, mine, theirs in (("py1", side_a, side_b), ("py2", side_b, side_a)):
        events = mixed.fronts[name][1]
        assert {n: member_kinds(events, n, marks[name]) for n in theirs} == \
            {n: ["failed", "joined"] for n in theirs}, name
        for n in mine:
            assert member_kinds(events, n, marks[name]) in ([], ["failed", "joined"]), (name, n)


def wait_detected(observers, name, killed, bound):
    """When each observer first listed ``name`` failed, in seconds after
    ``killed``; each must within ``bound`` (and our polling's slack)."""
    seen = {}

    def all_detected():
        for observer in observers:
            key = observer.name if isinstance(observer, Agent) else observer.node.name
            status = observer.status(name) if isinstance(observer, Agent) else py_status(observer, name)
            if key not in seen and status == "failed":
                seen[key] = round(time.monotonic() - killed, 1)
        return len(seen) == len(observers)
    wait_until(all_detected, timeout=max(0.0, killed + bound + POLL_SLACK - time.monotonic()), interval=0.05,
               message=lambda: f"every observer to list {name} failed within {bound}s: {seen}")
    return seen


@pytest.mark.single_pass
def test_sigkill_is_failed_within_memberlists_bound_both_ways(mixed):
    everyone = ["go1", "go2", "go3", "py1", "py2", "pyk"]
    seen = wait_status(mixed.observers(), everyone, "alive")
    assert set(seen.values()) == {"alive"}, seen
    marks = {name: len(events) for name, (_svc, events) in mixed.fronts.items()}
    # a Python member killed: every agent (and every Python member) fails it
    mixed.pyk.proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    bound = detection_bound(6)
    seen = wait_detected(mixed.observers(), "pyk", killed, bound)
    print("pyk failed after", seen, "bound", bound)
    assert sorted(seen) == ["go1", "go2", "go3", "py1", "py2"], (seen, bound)
    # an agent killed: every Python member (and every agent) fails it; the
    # cluster has five live members now
    mixed.agents["go3"].stop(signal.SIGKILL)
    killed = time.monotonic()
    bound = detection_bound(5)
    observers = [o for o in mixed.observers() if getattr(o, "name", None) != "go3"]
    seen = wait_detected(observers, "go3", killed, bound)
    print("go3 failed after", seen, "bound", bound)
    assert sorted(seen) == ["go1", "go2", "py1", "py2"], (seen, bound)
    for name in ("py1", "py2"):       # and no one else failed meanwhile
        events = mixed.fronts[name][1]
        assert [(e.kind, e.member.name) for e in events[marks[name]:] if isinstance(e, SerfMemberEvent)] == [
            ("failed", "pyk"), ("failed", "go3")], name


def test_graceful_leave_both_ways_shows_left(mixed):
    py1, py1_events = mixed.fronts["py1"]
    py2, _ = mixed.fronts["py2"]
    go1, go2 = mixed.agents["go1"], mixed.agents["go2"]
    mark = len(py1_events)
    assert py2.leave().ok
    py2.stop()       # what Serf does after a leave (LeaveDone: stop driving the node)
    assert wait_status([go1, go2, py1], ["py2"], "left") == {
        ("go1", "py2"): "left", ("go2", "py2"): "left", ("py1", "py2"): "left"}
    assert go2.serf("leave") is not None
    assert wait_status([go1, py1], ["go2"], "left") == {("go1", "go2"): "left", ("py1", "go2"): "left"}
    # Serf's leave waits until its intent went out (to the transmit limit),
    # then memberlist's leave: where the second overtakes the first, a member
    # is failed before it is left, in Serf as here
    for name in ("py2", "go2"):
        assert member_kinds(py1_events, name, mark) in (["left"], ["failed", "left"]), name

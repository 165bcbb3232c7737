"""Serf's snapshot file and rejoin (the ``snapshot_path`` and ``rejoin``
settings, ``--snapshot`` and ``--rejoin``): the records written as members
join, leave and fail and as the clocks move, in Serf's format; an agent's
file read back; the clocks restored before the sockets take any packet, so
a push/pull at start does not replay old user events; the rejoin of the
members last seen alive, then of those that had failed (not those that
left); no rejoin after our graceful leave unless ``rejoin``; unreadable
lines skipped and counted; and a member killed and started again with its
snapshot listed alive by its peer, and listing it, within 5 s. Both fronts
(threads, asyncio), on loopback. The real agent's files and its rejoin
time are in tests/interop/test_serf_snapshot.py."""

import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("msgpack")

from mcastmember import ConfigurationError  # noqa: E402
from mcastmember.gossip.fronts.aio import AsyncSerfService  # noqa: E402
from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.fronts.snapshot_file import SnapshotFile  # noqa: E402
from mcastmember.gossip.serf.events import GossipMember, JoinDone, QueryReceived, SerfMemberEvent, Tags, \
    UserEventReceived  # noqa: E402
from mcastmember.gossip.serf.layout import MemberStatus  # noqa: E402
from mcastmember.gossip.serf.members import SerfCore  # noqa: E402
from mcastmember.gossip.serf.messages import Query  # noqa: E402
from mcastmember.gossip.serf.snapshot import Rejoin, Restored, Snapshotter, read_snapshot  # noqa: E402
from support import free_gossip_port, next_line, wait_until  # noqa: E402

# What a Serf agent adds around a member is written once, above the gossip
# engine; the default implementation (compiled or pure) changes only the hot
# path's matcher beneath it, so CI's compiled pass runs these (single_pass).
pytestmark = pytest.mark.single_pass

FAST = {"probe_interval": 0.1, "probe_timeout": 0.05, "gossip_interval": 0.02, "push_pull_interval": 0.0,
        "suspicion_mult": 1, "suspicion_max_timeout_mult": 1, "tcp_timeout": 1.0}
DEMO = [shutil.which("mcast-demo")] if shutil.which("mcast-demo") else [sys.executable, "-m", "mcastmember"]
FRONTS = ["threads", "asyncio"]


def member(name, addr="127.0.0.1", port=7946):
    return GossipMember(name, addr, port, Tags({}), MemberStatus.ALIVE, b"")


def not_clock(text):
    """The file's records but the member clock's (whose values depend on timing)."""
    return [line for line in text.splitlines() if not line.startswith("clock: ")]


def alive(front):
    return sorted(m.name for m in front.members() if m.status == MemberStatus.ALIVE)


# ------------------------------------------------------------------ sans-IO

def test_the_records_for_joins_failures_leaves_reaps_events_queries_and_clocks():
    snap = Snapshotter(Restored(), 0)
    snap.record([SerfMemberEvent("joined", member("a")), SerfMemberEvent("joined", member("b", "::1", 7000)),
                 SerfMemberEvent("joined", member("c", "10.0.0.3")), SerfMemberEvent("updated", member("a")),
                 UserEventReceived("deploy", b"v1", 7, True), UserEventReceived("old", b"", 5, True),
                 QueryReceived(Query(ltime=3, id=1, name="q"), 0.0),
                 SerfMemberEvent("failed", member("b", "::1", 7000)), SerfMemberEvent("left", member("c")),
                 SerfMemberEvent("reaped", member("c")), SerfMemberEvent("reaped", member("b", "::1", 7000))])

    core = SerfCore.create("x")
    core.members.clock.witness(11)               # the member clock at 12
    core.event_buffer.min_time = 9               # a join ignored event times up to 8
    snap.clocks(core)
    snap.clocks(core)                            # unchanged: nothing more
    assert snap.take() == ("alive: a 127.0.0.1:7946\n"
                           "alive: b [::1]:7000\n"
                           "alive: c 10.0.0.3:7946\n"
                           "event-clock: 7\n"
                           "query-clock: 3\n"
                           "not-alive: b\n"
                           "# mcastmember-failed: b [::1]:7000\n"
                           "not-alive: c\n"
                           "# mcastmember-reaped: b\n"
                           "clock: 11\n"
                           "event-clock: 8\n")
    assert snap.take() == ""
    assert snap.leave() == "leave\n"
    snap.record([SerfMemberEvent("joined", member("d"))])       # nothing after our leave, as Serf
    assert (snap.take(), snap.alive, snap.failed) == ("", {}, {})


def test_a_member_name_with_a_line_break_is_not_written():
    """It would forge records (a ``leave``, a huge clock) in the file."""
    snap = Snapshotter(Restored(), 0)
    snap.record([SerfMemberEvent("joined", member("x\nleave")), SerfMemberEvent("joined", member("y"))])
    assert (snap.take(), snap.names_refused) == ("alive: y 127.0.0.1:7946\n", 1)


# Lines as ``serf agent -snapshot`` writes them (serf 0.9.4, and an older
# agent's coordinate line), with ours.
AGENT_FILE = """alive: go1 127.0.0.1:7946
alive: go 2 with spaces 127.0.0.2:7946
alive: gone 127.0.0.9:7946
clock: 4
coordinate: {"Vec":[0,0,0,0,0,0,0,0],"Error":1.5,"Adjustment":0,"Height":0.00001}
event-clock: 2
not-alive: gone
# mcastmember-failed: gone 127.0.0.9:7946
query-clock: 1
alive: v6 [::1]:7000
clock: 6
"""


def test_a_file_as_the_agent_writes_it_reads_back():
    assert read_snapshot(AGENT_FILE) == Restored(
        alive={"go1": "127.0.0.1:7946", "go 2 with spaces": "127.0.0.2:7946", "v6": "[::1]:7000"},
        failed={"gone": "127.0.0.9:7946"}, clock=6, event_clock=2, query_clock=1, bad_lines=0, truncated=False)


def test_a_leave_forgets_what_came_before_unless_rejoin_after_leave():
    text = AGENT_FILE + "leave\nclock: 9\n"
    assert read_snapshot(text) == Restored(clock=9)
    assert read_snapshot(text, rejoin_after_leave=True) == Restored(
        alive={"go1": "127.0.0.1:7946", "go 2 with spaces": "127.0.0.2:7946", "v6": "[::1]:7000"},
        failed={"gone": "127.0.0.9:7946"}, clock=9, event_clock=2, query_clock=1)
    # a later start's records count again
    assert read_snapshot("alive: a 127.0.0.1:1\nleave\nalive: b 127.0.0.1:2\n").alive == {"b": "127.0.0.1:2"}


def test_unreadable_lines_are_skipped_and_counted_and_a_cut_last_line_is_skipped():
    text = ("alive: a 127.0.0.1:7946\n"
            "alive: nospace\n"                   # no address
            "alive: b host.example:7946\n"       # not an IP address
            "alive: c 127.0.0.1:70000\n"         # no port
            "clock: -1\n"
            "clock: 18446744073709551616\n"      # past a uint64
            "event-clock: 5x\n"
            "\x00\xff garbage\n"
            "\n"
            "LEAVE\n"
            "# mcastmember-failed: d\n"
            "query-clock: 18446744073709551615\n"
            "clock: 3\n"
            "event-clock: 4")                     # the process killed mid-write
    assert read_snapshot(text) == Restored(alive={"a": "127.0.0.1:7946"}, clock=3,
                                           query_clock=18446744073709551615, bad_lines=10, truncated=True)


def test_compaction_is_due_past_twice_the_members_estimate_and_rewrites_the_state():
    snap = Snapshotter(read_snapshot(AGENT_FILE), size=1000, min_compact_size=1024)
    assert not snap.compaction_due()
    snap.wrote(25)
    assert snap.compaction_due()               # 1025 > max(1024, 4 members x 128 x 2)
    snap.record([SerfMemberEvent("joined", member("n"))])
    assert snap.compacted() == ("alive: go1 127.0.0.1:7946\n"
                                "alive: go 2 with spaces 127.0.0.2:7946\n"
                                "alive: v6 [::1]:7000\n"
                                "alive: n 127.0.0.1:7946\n"
                                "# mcastmember-failed: gone 127.0.0.9:7946\n"
                                "clock: 6\n"
                                "event-clock: 2\n"
                                "query-clock: 1\n")
    assert snap.take() == ""                   # in the compacted file already
    ten = Restored(alive={f"m{i}": "127.0.0.1:1" for i in range(10)})
    assert Snapshotter(ten, size=2561, min_compact_size=10).compaction_due()          # 10 x 128 x 2 = 2560
    assert not Snapshotter(ten, size=2560, min_compact_size=10).compaction_due()


def test_the_rejoin_tries_the_alive_then_the_failed_a_batch_at_a_time_never_ourselves():
    restored = Restored(alive={f"a{i}": f"127.0.0.1:{100 + i}" for i in range(5)} | {"me": "127.0.0.1:1",
                                                                                     "alias": "127.0.0.1:1"},
                        failed={"f0": "127.0.0.2:200", "f1": "127.0.0.2:201", "dup": "127.0.0.1:100"})
    rejoin = Rejoin(restored, "me", ("127.0.0.1", 1), random.Random(3), batch=4)
    plan = rejoin.planned
    assert sorted(plan[:5]) == [("127.0.0.1", 100 + i) for i in range(5)]
    assert sorted(plan[5:]) == [("127.0.0.2", 200), ("127.0.0.2", 201)]
    assert rejoin.next_batch() == plan[:4] and rejoin.active
    assert not rejoin.finished(0)
    assert rejoin.next_batch() == plan[4:5]         # the last alive one: the failed ones come after
    assert not rejoin.finished(0)
    assert rejoin.next_batch() == plan[5:]
    assert rejoin.finished(0) and rejoin.next_batch() == [] and rejoin.tried == 7
    again = Rejoin(restored, "me", ("127.0.0.1", 1), random.Random(3), batch=4)
    again.next_batch()
    assert again.finished(1) and again.next_batch() == [] and (again.tried, again.joined) == (4, 1)


# ------------------------------------------------------------------ both fronts

class Threads:
    """A SerfService, as the tests drive both fronts."""

    def __init__(self, *args, **settings):
        self.svc = SerfService(*args, **settings)
        self.seen = []
        self.svc.add_listener(self.seen.append)

    def start(self):
        self.svc.start()
        return self

    def on(self, fn):
        """``fn()`` where the front's state may be read."""
        with self.svc._lock:
            return fn()

    def __getattr__(self, name):
        return getattr(self.svc, name)


class Loop:
    """An AsyncSerfService on a loop of its own thread, its calls made there."""

    def __init__(self, *args, **settings):
        self.svc = AsyncSerfService(*args, **settings)
        self.seen = []
        self.svc.add_listener(self.seen.append)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def on(self, fn):
        async def call():
            return fn()
        return self._run(call())

    def start(self):
        self._run(self.svc.start())
        return self

    def stop(self):
        if self.loop.is_closed():
            return
        self._run(self.svc.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def join(self, seeds, **kw):
        return self._run(self.svc.join(seeds, **kw))

    def leave(self):
        return self._run(self.svc.leave())

    def members(self):
        return self.on(self.svc.members)

    def stats(self):
        return self.on(self.svc.stats)

    def user_event(self, name, payload):
        return self.on(lambda: self.svc.user_event(name, payload))

    @property
    def node(self):
        return self.svc.node


@pytest.fixture
def fronts():
    """make(front, *args, **settings) -> a started front; all stopped at the end."""
    made = []

    def make(front, *args, start=True, **settings):
        f = (Threads if front == "threads" else Loop)(*args, **settings)
        made.append(f)
        return f.start() if start else f
    yield make
    for f in reversed(made):
        f.stop()


@pytest.mark.parametrize("front", FRONTS)
def test_the_file_records_joins_events_a_failure_a_leave_and_the_last_clock(front, fronts, tmp_path):
    path = tmp_path / "b.snapshot"
    pa, pb, pc = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2"), free_gossip_port("127.0.0.3")
    a = fronts("threads", "a", "127.0.0.1", pa, **FAST)
    b = fronts(front, "b", "127.0.0.2", pb, snapshot_path=str(path), **FAST)
    c = fronts("threads", "c", "127.0.0.3", pc, **FAST)
    assert b.join([("127.0.0.1", pa)]).joined == 1
    assert c.join([("127.0.0.1", pa)]).joined == 1
    wait_until(lambda: alive(b) == ["a", "b", "c"])
    a.user_event("deploy", b"v1")
    wait_until(lambda: any(isinstance(e, UserEventReceived) for e in b.seen))
    c.stop()                                               # no leave: it fails
    wait_until(lambda: [m.status for m in b.members() if m.name == "c"] == [MemberStatus.FAILED])
    assert a.leave().ok
    wait_until(lambda: [m.status for m in b.members() if m.name == "a"] == [MemberStatus.LEFT])
    last_clock = b.on(lambda: b.node.core.members.clock.time()) - 1
    b.stop()
    text = path.read_text()
    assert not_clock(text) == [f"alive: b 127.0.0.2:{pb}", f"alive: a 127.0.0.1:{pa}", f"alive: c 127.0.0.3:{pc}",
                               "event-clock: 1", "not-alive: c", f"# mcastmember-failed: c 127.0.0.3:{pc}",
                               "not-alive: a"]
    assert text.splitlines()[-1] == f"clock: {last_clock}"
    assert read_snapshot(text) == Restored(alive={"b": f"127.0.0.2:{pb}"}, failed={"c": f"127.0.0.3:{pc}"},
                                           clock=last_clock, event_clock=1)


@pytest.mark.parametrize("front", FRONTS)
def test_the_clocks_are_restored_before_any_packet_so_a_push_pull_at_start_replays_no_old_event(
        front, fronts, tmp_path):
    """The member had seen "old" (event time 1) before it stopped. Started
    again, a peer's push/pull that reaches it at once carries "old" in its
    recent events: it is not delivered again; a new event is."""
    pa, pb = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")
    a = fronts("threads", "a", "127.0.0.1", pa, **FAST)
    a.user_event("old", b"")
    path = tmp_path / "b.snapshot"
    path.write_text("clock: 7\nevent-clock: 1\nquery-clock: 4\n")
    b = fronts(front, "b", "127.0.0.2", pb, snapshot_path=str(path), start=False, **FAST)
    # before the sockets exist
    core = b.node.core
    assert (core.members.clock.time(), core.event_buffer.clock.time(), core.event_buffer.min_time,
            core.query_buffer.clock.time(), core.query_buffer.min_time) == (8, 2, 2, 5, 5)
    b.start()
    assert a.join([("127.0.0.2", pb)]).joined == 1         # its push/pull: "old" among its events
    a.user_event("new", b"")
    wait_until(lambda: any(isinstance(e, UserEventReceived) for e in b.seen))
    assert [(e.name, e.ltime) for e in b.seen if isinstance(e, UserEventReceived)] == [("new", 2)]


@pytest.mark.parametrize("front", FRONTS)
def test_the_rejoin_tries_the_members_that_failed_after_those_last_seen_alive(front, fronts, tmp_path):
    """The member last seen alive is down; the one that had failed is up
    again: rejoined, the first attempt's failure then the second's join."""
    pa, pb, down = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2"), free_gossip_port("127.0.0.3")
    a = fronts("threads", "a", "127.0.0.1", pa, **FAST)
    path = tmp_path / "b.snapshot"
    path.write_text(f"alive: b 127.0.0.2:{pb}\nalive: a 127.0.0.1:{pa}\nalive: down 127.0.0.3:{down}\n"
                    f"not-alive: a\n# mcastmember-failed: a 127.0.0.1:{pa}\n"
                    f"alive: gone 127.0.0.4:{down}\nnot-alive: gone\n")        # left: never tried
    b = fronts(front, "b", "127.0.0.2", pb, snapshot_path=str(path), **FAST)
    wait_until(lambda: alive(b) == ["a", "b"] and alive(a) == ["a", "b"])
    wait_until(lambda: len([e for e in b.seen if isinstance(e, JoinDone)]) == 2)
    assert [(e.joined, [err.split(": ")[0] for err in e.errors]) for e in b.seen if isinstance(e, JoinDone)] \
        == [(0, [f"127.0.0.3:{down}"]), (1, [])]
    stats = b.stats()
    assert (stats["rejoin_tried"], stats["rejoin_joined"]) == (2, 1)


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("rejoin, tried", [(False, 0), (True, 1)])
def test_after_our_graceful_leave_no_rejoin_unless_rejoin(front, fronts, tmp_path, rejoin, tried):
    """As Serf's agent: a ``leave`` record forgets the members; ``rejoin``
    (its -rejoin) ignores it. The rejoin's first attempt is made as the
    front starts, so the count is final when start() returns."""
    pa, pb = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")
    path = tmp_path / "b.snapshot"
    path.write_text(f"alive: b 127.0.0.2:{pb}\nalive: a 127.0.0.1:{pa}\nclock: 3\nleave\n")
    b = fronts(front, "b", "127.0.0.2", pb, snapshot_path=str(path), rejoin=rejoin, **FAST)
    assert b.stats()["rejoin_tried"] == tried


@pytest.mark.parametrize("front", FRONTS)
def test_unreadable_lines_are_counted_and_records_after_a_cut_line_start_on_a_line_of_their_own(
        front, fronts, tmp_path):
    pb = free_gossip_port("127.0.0.2")
    path = tmp_path / "b.snapshot"
    path.write_text("junk\nclock: x\nclock: 5\nalive: cut 127.0.")      # killed mid-write
    b = fronts(front, "b", "127.0.0.2", pb, snapshot_path=str(path), **FAST)
    assert b.stats()["snapshot_lines_bad"] == 2
    b.stop()
    assert path.read_text().splitlines()[:5] == ["junk", "clock: x", "clock: 5", "alive: cut 127.0.",
                                                 f"alive: b 127.0.0.2:{pb}"]
    assert read_snapshot(path.read_text()).alive == {"b": f"127.0.0.2:{pb}"}


@pytest.mark.parametrize("front", [SerfService, AsyncSerfService])
def test_rejoin_without_a_snapshot_is_refused_and_an_unopenable_file_named(front, tmp_path):
    with pytest.raises(ConfigurationError) as caught:
        front("b", rejoin=True)
    assert str(caught.value) == "rejoin needs snapshot_path: the members to rejoin are the snapshot's"
    with pytest.raises(ConfigurationError) as caught:
        front("b", snapshot_path=str(tmp_path / "no" / "such"))
    assert str(caught.value) == f"cannot open the snapshot file {tmp_path / 'no' / 'such'}: No such file or directory"


def test_a_compaction_rewrites_the_file_through_a_rename_and_appending_goes_on(tmp_path):
    path = tmp_path / "b.snapshot"
    path.write_text("alive: a 127.0.0.1:1\n" + "clock: 1\n" * 200)
    svc = SerfService("b", "127.0.0.2", 7000, **FAST)
    snap = SnapshotFile(path, svc.node, ("127.0.0.2", 7000), min_compact_size=512)
    snap.snapshot.record([SerfMemberEvent("joined", member("c", port=3))])
    snap.tick(time.monotonic())
    assert snap.stats()["snapshot_compactions"] == 1
    assert path.read_text() == "alive: a 127.0.0.1:1\nalive: c 127.0.0.1:3\nclock: 1\nevent-clock: 0\nquery-clock: 0\n"
    assert not (tmp_path / "b.snapshot.compact").exists()
    snap.snapshot.record([SerfMemberEvent("left", member("a"))])
    snap.close()
    assert path.read_text().endswith("query-clock: 0\nnot-alive: a\n")


# ------------------------------------------------------------------ the target: a killed member's restart

def test_a_killed_member_started_again_with_its_snapshot_rejoins_within_5_s(tmp_path):
    """mcast-demo gossip --snapshot F --rejoin, SIGKILLed once its peer knows
    it, marked failed there, then started again with no --join: it lists
    its peer, and the peer lists it alive, within 5 s of the start."""
    pa, pb = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")
    path = tmp_path / "b.snapshot"
    argv = DEMO + ["gossip", "--node", "b", "--bind", f"127.0.0.2:{pb}", "--snapshot", str(path), "--rejoin",
                   "--json"]
    with SerfService("a", "127.0.0.1", pa, **FAST) as a:
        first = subprocess.Popen(argv + ["--join", f"127.0.0.1:{pa}"], stdout=subprocess.PIPE, cwd="/")
        try:
            wait_until(lambda: "b" in alive(a), timeout=15)
            wait_until(lambda: f"alive: a 127.0.0.1:{pa}" in path.read_text())   # flushed within 0.5 s
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
        wait_until(lambda: "b" not in alive(a))
        started = time.monotonic()
        again = subprocess.Popen(argv, stdout=subprocess.PIPE, cwd="/")
        try:
            wait_until(lambda: json.loads(next_line(again, 5)).get("member", {}).get("name") == "a", timeout=5)
            wait_until(lambda: "b" in alive(a), timeout=5)
            took = time.monotonic() - started
        finally:
            again.send_signal(signal.SIGKILL)
            again.wait()
    assert took < 5.0


def test_the_flags_give_the_settings_and_rejoin_without_a_snapshot_is_refused():
    from mcastmember.tools import cli, gossip_cli

    args = cli._build_parser().parse_args(["gossip", "--node", "a", "--snapshot", "b.snapshot", "--rejoin"])
    assert gossip_cli.options(args).settings() == {"snapshot_path": "b.snapshot", "rejoin": True}
    args = cli._build_parser().parse_args(["gossip", "--node", "a", "--snapshot", "b.snapshot"])
    assert gossip_cli.options(args).settings() == {"snapshot_path": "b.snapshot"}
    done = subprocess.run(DEMO + ["gossip", "--node", "a", "--rejoin"], capture_output=True, text=True, cwd="/",
                          timeout=30)
    assert (done.returncode, done.stderr) == (2, "mcast-demo gossip: error: --rejoin needs --snapshot: the members "
                                                 "to rejoin are the snapshot's\n")


def test_a_failed_write_is_counted_and_a_compaction_writes_the_state_whole_later(tmp_path):
    path = tmp_path / "b.snapshot"
    svc = SerfService("b", "127.0.0.2", 7000, **FAST)
    snap = SnapshotFile(path, svc.node, ("127.0.0.2", 7000))
    snap.snapshot.record([SerfMemberEvent("joined", member("a", port=1))])
    os.close(snap._fd)                       # the next write fails (EBADF), as on a full or lost disk
    now = time.monotonic()
    snap.tick(now)
    snap.snapshot.record([SerfMemberEvent("joined", member("c", port=3))])
    snap.tick(now + 1)                        # not yet: the recovery waits 30 s, as Serf's
    assert (snap.stats()["snapshot_write_errors"], snap.stats()["snapshot_compactions"]) == (1, 0)
    snap.tick(now + 31)
    assert (snap.stats()["snapshot_write_errors"], snap.stats()["snapshot_compactions"]) == (1, 1)
    assert read_snapshot(path.read_text()).alive == {"a": "127.0.0.1:1", "c": "127.0.0.1:3"}
    snap.close()


def test_a_snapshot_path_that_is_no_regular_file_is_refused():
    with pytest.raises(ConfigurationError) as caught:
        SerfService("b", snapshot_path="/dev/zero")
    assert str(caught.value) == "the snapshot file /dev/zero is not a regular file"


@pytest.mark.parametrize("front", FRONTS)
def test_the_snapshot_file_is_opened_once_and_closed_at_stop(front, fronts, tmp_path):
    path = tmp_path / "b.snapshot"

    def open_on_it():
        return sorted(fd for fd in os.listdir("/proc/self/fd")
                      if os.path.realpath(f"/proc/self/fd/{fd}") == str(path.resolve()))
    b = fronts(front, "b", "127.0.0.2", free_gossip_port("127.0.0.2"), snapshot_path=str(path), **FAST)
    assert len(open_on_it()) == 1
    b.stop()
    assert open_on_it() == []


@pytest.mark.parametrize("front", FRONTS)
def test_a_cluster_whose_members_failed_one_after_another_forms_again_when_restarted_whole(
        front, fronts, tmp_path):
    """c fails, then b, then a stops: a's snapshot lists nobody alive but
    itself, b's only a. Started again in the order they failed, c first,
    each rejoins whom it can: b the member that had failed (c), a both.
    Serf's agent, which keeps only the members last seen alive, would leave
    all three alone."""
    hosts = {"a": "127.0.0.1", "b": "127.0.0.2", "c": "127.0.0.3"}
    ports = {name: free_gossip_port(host) for name, host in hosts.items()}

    def start(name, **settings):
        return fronts(front, name, hosts[name], ports[name], snapshot_path=str(tmp_path / name), **FAST, **settings)
    a, b, c = start("a"), start("b"), start("c")
    for joiner in (b, c):
        assert joiner.join([(hosts["a"], ports["a"])]).joined == 1
    wait_until(lambda: all(alive(m) == ["a", "b", "c"] for m in (a, b, c)))
    c.stop()
    wait_until(lambda: alive(a) == alive(b) == ["a", "b"])
    b.stop()
    wait_until(lambda: alive(a) == ["a"])
    a.stop()
    assert {name: (sorted(r.alive), sorted(r.failed)) for name in hosts
            for r in [read_snapshot((tmp_path / name).read_text())]} == {
        "a": (["a"], ["b", "c"]), "b": (["a", "b"], ["c"]), "c": (["a", "b", "c"], [])}
    c = start("c")
    wait_until(lambda: len([e for e in c.seen if isinstance(e, JoinDone)]) == 1)
    b = start("b")
    wait_until(lambda: alive(b) == alive(c) == ["b", "c"])
    a = start("a")
    wait_until(lambda: all(alive(m) == ["a", "b", "c"] for m in (a, b, c)))
    # (b and c may reach a first, through their reconnects: a's own rejoin
    # results are waited for, not read at once)
    wait_until(lambda: [(m.stats()["rejoin_tried"], m.stats()["rejoin_joined"]) for m in (a, b, c)]
               == [(2, 2), (2, 1), (2, 0)])

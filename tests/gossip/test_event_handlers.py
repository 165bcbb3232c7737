"""Event handlers as Serf's agent runs them (event_handlers, --event-handler):
each event kind's SERF_* environment and stdin as the agent gives them, the
filters as it spells them, a query answered by a script's output (cut to
the response size limit) or by a Python handler (on_query), the bounds
(concurrent runs, runs waiting, the time limit) under a flood, failures
counted and logged, bad values refused in one sentence. On both fronts, on
loopback, with short gossip timers."""

import asyncio
import logging
import os
import shutil
import subprocess
import sys
import time

import pytest

pytest.importorskip("msgpack")

from mcastmember import ConfigurationError  # noqa: E402
from mcastmember.gossip.agent import handler_process  # noqa: E402
from mcastmember.gossip.agent.handlers import (EventScript, HandlerCore, HandlerSettings, parse_handler,  # noqa: E402
                                               tag_variable)
from mcastmember.gossip.fronts.aio import AsyncSerfService  # noqa: E402
from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.serf import messages  # noqa: E402
from mcastmember.gossip.serf.messages import encode  # noqa: E402
from mcastmember.gossip.serf.events import (GossipMember, QueryAnswer, QueryFinished, QueryReceived,  # noqa: E402
                                            SerfMemberEvent, UserEventReceived)
from mcastmember.gossip.serf.layout import MemberStatus  # noqa: E402
from support import free_gossip_port, run_beside, wait_until  # noqa: E402

# What a Serf agent adds around a member is written once, above the gossip
# engine; the default implementation (compiled or pure) changes only the hot
# path's matcher beneath it, so CI's compiled pass runs these (single_pass).
pytestmark = pytest.mark.single_pass

FAST = {"probe_interval": 0.2, "probe_timeout": 0.1, "gossip_interval": 0.05, "push_pull_interval": 2.0,
        "tcp_timeout": 1.0, "suspicion_max_timeout_mult": 1, "reap_interval": 0.2, "tombstone_timeout": 0.3,
        "reconnect_timeout": 0.3, "leave_propagate_delay": 0.1}
DEMO = [shutil.which("mcast-demo")] if shutil.which("mcast-demo") else [sys.executable, "-m", "mcastmember"]
FRONTS = ["threads", "asyncio"]
# A handler that keeps what it was given: its SERF_* variables, a line, its stdin, in a file per run.
RECORD = ('f="{dir}/$(date +%s%N)-$$"; {{ env | grep "^SERF_" | LC_ALL=C sort; echo ---; cat; }} > "$f.tmp" '
          '&& mv "$f.tmp" "$f"')


def on_front(front, settings, work, name="a", port=None):
    """``work(svc, on)`` beside member ``name`` on 127.0.0.1 started on ``front``
    (whose loop runs meanwhile); ``on(fn)`` calls ``fn()`` where the front's
    state may be touched (on the loop for asyncio). Returns what ``work`` returns."""
    port = port or free_gossip_port()
    svc = (SerfService if front == "threads" else AsyncSerfService)(name, "127.0.0.1", port, **{**FAST, **settings})
    return run_beside(svc, work)


def records(folder):
    """Each run's record, in the order they ran: (its SERF_* variables, its stdin)."""
    out = []
    for name in sorted(n for n in os.listdir(folder) if not n.endswith(".tmp")):
        env, _, stdin = (folder / name).read_text().partition("---\n")
        out.append((dict(line.split("=", 1) for line in env.splitlines()), stdin))
    return out


def handler_stats(stats):
    return {k: v for k, v in stats.items() if k.startswith("handler")}


def member_env(kind):
    return {"SERF_EVENT": kind, "SERF_SELF_NAME": "a", "SERF_SELF_ROLE": "web", "SERF_TAG_ROLE": "web",
            "SERF_TAG_DC_1": "x"}


@pytest.mark.parametrize("front", FRONTS)
def test_each_event_kind_gets_serfs_environment_and_stdin(front, tmp_path):
    """member-join (ourselves, then another), member-update, user, query (no
    output: no answer), member-leave then member-reap, member-failed then
    member-reap: the agent's variables and stdin lines, exactly."""
    port = free_gossip_port()
    answers = []

    def work(a, on):
        with SerfService("b", "127.0.0.1", free_gossip_port(), tags={"role": "db", "z": "1"}, **FAST) as b, \
                SerfService("c", "127.0.0.1", free_gossip_port(), **FAST) as c:
            b.add_listener(answers.append)
            b.join([("127.0.0.1", port)])
            wait_until(lambda: len(records(tmp_path)) == 2)          # a, then b joined
            c.join([("127.0.0.1", port)])
            wait_until(lambda: len(records(tmp_path)) == 3)
            b.set_tags({"role": "db", "z": "2"})
            wait_until(lambda: len(records(tmp_path)) == 4)
            b.user_event("deploy", b"v1", coalesce=False)
            wait_until(lambda: len(records(tmp_path)) == 5)
            query = b.query("ping", b"are you there", timeout=0.5)
            wait_until(lambda: any(isinstance(e, QueryFinished) for e in answers), timeout=5)
            b.leave()
            wait_until(lambda: len(records(tmp_path)) == 8)          # b left, then was reaped
            c.stop()
            wait_until(lambda: len(records(tmp_path)) == 10)         # c failed, then was reaped
            wait_until(lambda: on(a.stats)["handlers_ok"] == 10)      # the last run's end counted too
            return query, on(a.stats)

    query, stats = on_front(front, {"event_handlers": ["*=" + RECORD.format(dir=tmp_path)],
                                    "tags": {"role": "web", "dc-1": "x"}}, work, port=port)
    got = records(tmp_path)
    b_line = "b\t127.0.0.1\tdb\trole=db,z=1\n"
    assert got[:3] == [(member_env("member-join"), "a\t127.0.0.1\tweb\tdc-1=x,role=web\n"),
                       (member_env("member-join"), b_line),
                       (member_env("member-join"), "c\t127.0.0.1\t\t\n")]
    assert got[3:5] == [(member_env("member-update"), "b\t127.0.0.1\tdb\trole=db,z=2\n"),
                        ({**member_env("user"), "SERF_USER_EVENT": "deploy", "SERF_USER_LTIME": "1"}, "v1\n")]
    assert got[5] == ({**member_env("query"), "SERF_QUERY_NAME": "ping", "SERF_QUERY_LTIME": str(query.ltime)},
                      "are you there\n")
    b_left = "b\t127.0.0.1\tdb\trole=db,z=2\n"
    assert got[6:] == [(member_env("member-leave"), b_left), (member_env("member-reap"), b_left),
                       (member_env("member-failed"), "c\t127.0.0.1\t\t\n"),
                       (member_env("member-reap"), "c\t127.0.0.1\t\t\n")]
    assert [e for e in answers if isinstance(e, QueryAnswer)] == []      # no output, no answer
    assert handler_stats(stats) == {**ZERO, "handlers_ok": 10}


ZERO = {"handlers_ok": 0, "handlers_failed": 0, "handlers_timed_out": 0, "handlers_not_started": 0,
        "handlers_dropped": 0, "handler_responses": 0, "handler_responses_truncated": 0,
        "handler_responses_refused": 0, "handlers_running": 0, "handlers_waiting": 0}


def test_filters_as_serf_spells_them():
    assert parse_handler("echo hi") == (EventScript("*", "", "echo hi"),)
    assert parse_handler("member-join,member-leave=./lb.sh a=b") == (
        EventScript("member-join", "", "./lb.sh a=b"), EventScript("member-leave", "", "./lb.sh a=b"))
    assert parse_handler("user:deploy,query:whoami,user,query,member-failed,member-update,member-reap,*=x") == (
        EventScript("user", "deploy", "x"), EventScript("query", "whoami", "x"), EventScript("user", "", "x"),
        EventScript("query", "", "x"), EventScript("member-failed", "", "x"),
        EventScript("member-update", "", "x"), EventScript("member-reap", "", "x"), EventScript("*", "", "x"))
    assert parse_handler("user:=x") == (EventScript("user", "", "x"),)       # the agent reads it so too
    deploy, whoami, any_user = EventScript("user", "deploy", "x"), EventScript("query", "whoami", "x"), \
        EventScript("user", "", "x")
    assert [deploy.wants("user", n) for n in ("deploy", "other")] == [True, False]
    assert [whoami.wants(t, "whoami") for t in ("query", "user")] == [True, False]
    assert [any_user.wants(t, "n") for t in ("user", "query", "member-join")] == [True, False, False]
    assert tag_variable("dc-1.zone") == "SERF_TAG_DC_1_ZONE"
    assert tag_variable("größe") == "SERF_TAG_GR__E"          # a character each, as Go's runes


def test_only_the_filtered_events_run_and_member_events_together_are_one_run():
    core = HandlerCore(HandlerSettings((EventScript("user", "deploy", "u"), EventScript("member-join", "", "j"),
                                        EventScript("query", "", "q"))))
    m = [GossipMember(n, "10.0.0.1", 7946, {}, MemberStatus.ALIVE) for n in ("x", "y")]
    query = QueryReceived(messages.Query(ltime=3, name="any", payload=b"p"), 0.0)
    runs = core.runs([SerfMemberEvent("joined", m[0]), SerfMemberEvent("joined", m[1]),
                      SerfMemberEvent("left", m[0]), UserEventReceived("deploy", b"", 1, True),
                      UserEventReceived("other", b"", 2, True), query], "a", {}, 0.0)
    assert [(r.script, r.event_type, r.stdin) for r in runs] == [
        ("j", "member-join", b"x\t10.0.0.1\t\t\ny\t10.0.0.1\t\t\n"), ("u", "user", b""), ("q", "query", b"p\n")]


def fits(query, limit=1024):
    """The most bytes member "a"'s answer to ``query`` may hold within ``limit``."""
    return max(n for n in range(limit) if len(encode(messages.QueryResponse(
        ltime=query.ltime, id=query.id, from_="a", payload=b"x" * n))) <= limit)


@pytest.mark.parametrize("front", FRONTS)
def test_a_query_is_answered_by_its_script_cut_to_the_response_limit(front):
    """An exit 0 with output answers (as the agent: stdout; empty output or
    another status answers nothing); an answer over query_response_size_limit
    is cut to the longest that fits, counted."""
    handlers = ["query:whoami=echo $SERF_SELF_NAME", "query:big=head -c 5000 /dev/zero | tr '\\0' x",
                "query:quiet=true", "query:broken=echo no; exit 1"]

    def work(a, on):
        with SerfService("b", "127.0.0.1", free_gossip_port(), **FAST) as b:
            seen = []
            b.add_listener(seen.append)
            b.join([("127.0.0.1", a.port)])
            queries = {name: b.query(name, b"", timeout=0.5) for name in
                       ("whoami", "big", "quiet", "broken")}
            wait_until(lambda: sum(isinstance(e, QueryFinished) for e in seen) == 4, timeout=5)
            answers = {e.query_id: e.payload for e in seen if isinstance(e, QueryAnswer) and not e.ack}
            return {name: answers.get(q.id) for name, q in queries.items()}, queries["big"], on(a.stats)

    answers, big, stats = on_front(front, {"event_handlers": handlers}, work)
    assert answers == {"whoami": b"a\n", "big": b"x" * fits(big), "quiet": None, "broken": None}
    assert handler_stats(stats) == {**ZERO, "handlers_ok": 3, "handlers_failed": 1, "handler_responses": 2,
                                    "handler_responses_truncated": 1}


@pytest.mark.parametrize("front", FRONTS)
def test_python_query_handlers_answer_off_the_io(front):
    """on_query(name, fn): fn(received) answers, bytes or text, cut to the
    limit; None answers nothing; on_query(None, fn) answers the queries no
    other handler is for; on asyncio a coroutine function is awaited. A
    handler that raises is counted and logged."""
    def work(a, on):
        def whoami(received):
            return f"{a.node.name} got {received.query.payload.decode()}"

        async def async_echo(received):
            await asyncio.sleep(0)
            return received.query.payload
        on(lambda: a.on_query("whoami", whoami))
        on(lambda: a.on_query("big", lambda r: b"y" * 5000))
        on(lambda: a.on_query("none", lambda r: None))
        on(lambda: a.on_query("raises", lambda r: 1 / 0))
        on(lambda: a.on_query(None, async_echo if front == "asyncio" else lambda r: r.query.payload))
        with SerfService("b", "127.0.0.1", free_gossip_port(), **FAST) as b:
            seen = []
            b.add_listener(seen.append)
            b.join([("127.0.0.1", a.port)])
            queries = {name: b.query(name, b"hi", timeout=0.5) for name in
                       ("whoami", "big", "none", "raises", "other")}
            wait_until(lambda: sum(isinstance(e, QueryFinished) for e in seen) == 5, timeout=5)
            answers = {e.query_id: e.payload for e in seen if isinstance(e, QueryAnswer) and not e.ack}
            return {name: answers.get(q.id) for name, q in queries.items()}, queries["big"], on(a.stats)

    answers, big, stats = on_front(front, {}, work)
    assert answers == {"whoami": b"a got hi", "big": b"y" * fits(big), "none": None, "raises": None,
                       "other": b"hi"}
    assert handler_stats(stats) == {**ZERO, "handlers_ok": 4, "handlers_failed": 1, "handler_responses": 3,
                                    "handler_responses_truncated": 1}


@pytest.mark.parametrize("front", FRONTS)
def test_a_python_answer_too_late_is_dropped_and_counted(front):
    """Past handler_timeout: timed out, no answer; within it but past the
    query's deadline: refused by the node, counted."""
    def work(a, on):
        on(lambda: a.on_query("slow", lambda r: time.sleep(0.5) or b"late"))
        on(lambda: a.on_query("after", lambda r: time.sleep(0.15) or b"after the deadline"))
        with SerfService("b", "127.0.0.1", free_gossip_port(), **FAST) as b:
            seen = []
            b.add_listener(seen.append)
            b.join([("127.0.0.1", a.port)])
            b.query("slow", b"", timeout=1.0)
            b.query("after", b"", timeout=0.05)
            wait_until(lambda: on(a.stats)["handler_responses_refused"] == 1 and
                       on(a.stats)["handlers_timed_out"] == 1)
            return [e for e in seen if isinstance(e, QueryAnswer) and e.from_ == "a"], on(a.stats)

    answers, stats = on_front(front, {"handler_timeout": 0.3, "handler_concurrency": 2}, work)
    assert answers == []
    assert handler_stats(stats) == {**ZERO, "handlers_ok": 1, "handlers_timed_out": 1,
                                    "handler_responses_refused": 1}


def test_a_query_handler_must_be_callable():
    svc = SerfService("a", "127.0.0.1", 7000)
    with pytest.raises(TypeError, match="a query handler is a callable, not 'x'"):
        svc.on_query("q", "x")


def overlap(log):
    """The most runs a log of "start T"/"end T" lines shows going on at once."""
    marks = sorted((int(t), 1 if what == "start" else -1) for what, t in (line.split() for line in log))
    peak = now = 0
    for _, step in marks:
        now += step
        peak = max(peak, now)
    return peak


@pytest.mark.parametrize("front", FRONTS)
def test_a_flood_of_events_keeps_the_runs_within_their_bounds(front, tmp_path, caplog):
    """20 user events at once, a handler of 0.3 s, 2 runs at once and 3
    waiting: 5 run, never more than 2 together; 15 dropped, counted, logged."""
    caplog.set_level(logging.WARNING, "mcastmember")
    log = tmp_path / "log"
    script = f'echo start $(date +%s%N) >> {log}; sleep 0.3; echo end $(date +%s%N) >> {log}'

    def work(a, on):
        for n in range(20):
            on(lambda n=n: a.user_event(f"e{n}", b"", coalesce=False))
        wait_until(lambda: on(a.stats)["handlers_ok"] == 5, timeout=10)
        return on(a.stats)

    stats = on_front(front, {"event_handlers": [f"user={script}"], "handler_concurrency": 2, "handler_queue": 3},
                     work)
    assert handler_stats(stats) == {**ZERO, "handlers_ok": 5, "handlers_dropped": 15}
    lines = log.read_text().splitlines()
    assert (len(lines), overlap(lines)) == (10, 2)
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert dropped == [f"event handler {script!r} (user) dropped: 2 runs going on (handler_concurrency) and 3 "
                       "waiting (handler_queue)"]


@pytest.fixture
def sleeper(tmp_path, caplog):
    """A script whose child sleeps 30 s, and the file it writes that child's pid to; warnings logged."""
    caplog.set_level(logging.WARNING, "mcastmember")
    pid = tmp_path / "pid"
    return pid, f"sleep 30 & echo $! > {pid}; wait"


@pytest.mark.parametrize("front", FRONTS)
def test_a_run_past_the_time_limit_is_killed_with_its_children(front, sleeper, caplog):
    pid, script = sleeper

    def work(a, on):
        started = time.monotonic()
        on(lambda: a.user_event("slow", b"", coalesce=False))
        wait_until(lambda: on(a.stats)["handlers_timed_out"] == 1, timeout=10)
        return time.monotonic() - started, on(a.stats)

    took, stats = on_front(front, {"event_handlers": [f"user:slow={script}"], "handler_timeout": 0.3}, work)
    assert took < 5
    assert handler_stats(stats) == {**ZERO, "handlers_timed_out": 1}
    child = int(pid.read_text())
    wait_until(lambda: gone(child))
    assert [r.getMessage() for r in caplog.records] == [
        f"event handler {script!r} (user) killed: still running after 0.3 s (handler_timeout)"]


def gone(pid):
    """The process ``pid`` ended (and was reaped, or is a zombie waiting for it)."""
    try:
        return open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("front", FRONTS)
def test_a_stop_kills_the_runs_going_on_and_forgets_those_waiting(front, sleeper, caplog):
    """Nothing a handler started outlives the member: no warning, no count."""
    pid, script = sleeper

    def work(a, on):
        on(lambda: a.user_event("slow", b"", coalesce=False))
        on(lambda: a.user_event("slow", b"", coalesce=False))
        wait_until(lambda: pid.exists() and pid.read_text().endswith("\n"))     # the script's child is running
        return a

    a = on_front(front, {"event_handlers": [f"user:slow={script}"]}, work)
    wait_until(lambda: gone(int(pid.read_text())), timeout=5)
    wait_until(lambda: a.stats()["handlers_running"] == 0)        # (a thread's run ends once its process did)
    assert (handler_stats(a.stats()), caplog.records) == (ZERO, [])


@pytest.mark.parametrize("front", FRONTS)
def test_a_failing_handler_is_counted_and_logged(front, caplog, monkeypatch):
    """Another exit status (its stderr in the log line), and a shell that
    cannot start."""
    caplog.set_level(logging.WARNING, "mcastmember")

    def work(a, on):
        on(lambda: a.user_event("fail", b"", coalesce=False))
        wait_until(lambda: on(a.stats)["handlers_failed"] == 1)
        monkeypatch.setattr(handler_process, "SHELL", "/nonexistent/sh")
        on(lambda: a.user_event("fail", b"", coalesce=False))
        wait_until(lambda: on(a.stats)["handlers_not_started"] == 1)
        return on(a.stats)

    stats = on_front(front, {"event_handlers": ["user:fail=echo boom >&2; exit 3"]}, work)
    assert handler_stats(stats) == {**ZERO, "handlers_failed": 1, "handlers_not_started": 1}
    assert [r.getMessage() for r in caplog.records] == [
        "event handler 'echo boom >&2; exit 3' (user) exited with status 3: boom",
        "event handler 'echo boom >&2; exit 3' (user) could not start: [Errno 2] No such file or directory: "
        "'/nonexistent/sh'"]


@pytest.mark.parametrize("cls", [SerfService, AsyncSerfService])
@pytest.mark.parametrize("settings, message", [
    ({"event_handlers": ["member-jion=x"]}, "event handler 'member-jion=x': 'member-jion' is not an event "
     "filter (give member-join, member-leave, member-failed, member-update, member-reap, user, user:NAME, "
     "query, query:NAME or *, comma-separated)"),
    ({"event_handlers": ["member-join="]}, "event handler 'member-join=' has no script: give [FILTER=]SCRIPT"),
    ({"event_handlers": ["member:x=y"]}, "event handler 'member:x=y': 'member:x' is not an event filter"),
    ({"handler_timeout": 0}, "handler_timeout must be more than 0 seconds, not 0"),
    ({"handler_concurrency": 0}, "handler_concurrency must be at least 1, not 0"),
    ({"handler_queue": -1}, "handler_queue must be 0 (no run waits) or more, not -1"),
])
def test_bad_handler_settings_are_refused_in_one_sentence(cls, settings, message):
    with pytest.raises(ConfigurationError) as caught:
        cls("a", "127.0.0.1", 7000, **settings)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize("flags, message", [
    (["--event-handler", "user:deploy,memberjoin=x"], "--event-handler 'user:deploy,memberjoin=x': 'memberjoin' "
     "is not an event filter"),
    (["--handler-timeout", "0s"], "--handler-timeout 0s: give a duration longer than zero (30s, 0.5)"),
    (["--handler-timeout", "5 parsecs"], "--handler-timeout: "),
    (["--handler-concurrency", "0"], "--handler-concurrency 0: give a whole number, 1 or more"),
    (["--handler-queue", "-1"], "--handler-queue -1: give a whole number, 0 or more"),
])
def test_bad_handler_flags_exit_2_with_one_sentence(flags, message):
    done = subprocess.run([*DEMO, "gossip", "--node", "a", "--duration", "0", *flags], capture_output=True,
                          text=True, timeout=30, cwd="/")
    assert (done.returncode, done.stderr.startswith(f"mcast-demo gossip: error: {message}"),
            done.stderr.count("\n")) == (2, True, 1), done.stderr

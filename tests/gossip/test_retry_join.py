"""Retry-join, as Serf's agent's -retry-join, -retry-interval and -retry-max:
a member started before its seeds comes up alone, tries them in the
background every interval and joins when one comes up, without exiting;
with retry_max it gives up after the first attempt and that many more (an
event, a log line; the service stays up, mcast-demo gossip exits 1). An
attempt that reaches only the member itself (its own address among the
seeds) does not count as joined. On loopback only, with 0.2 s intervals."""

import logging
import shutil
import subprocess
import sys
import time

import pytest

pytest.importorskip("msgpack")

from mcastmember import ConfigurationError  # noqa: E402
from mcastmember.gossip.fronts.aio import AsyncSerfService  # noqa: E402
from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.serf.layout import MemberStatus  # noqa: E402
from mcastmember.gossip.serf.retry_join import RetryJoin, RetryJoined, RetryJoinFailed  # noqa: E402
from support import free_gossip_port, next_line, run_beside, wait_until  # noqa: E402

# What a Serf agent adds around a member is written once, above the gossip
# engine; the default implementation (compiled or pure) changes only the hot
# path's matcher beneath it, so CI's compiled pass runs these (single_pass).
pytestmark = pytest.mark.single_pass

INTERVAL = 0.2
FAST = {"probe_interval": 0.2, "probe_timeout": 0.1, "gossip_interval": 0.05, "push_pull_interval": 2.0,
        "tcp_timeout": 1.0}
DEMO = [shutil.which("mcast-demo")] if shutil.which("mcast-demo") else [sys.executable, "-m", "mcastmember"]
REFUSED = "connect: Connection refused"


def retry_events(events):
    return [e for e in events if isinstance(e, (RetryJoined, RetryJoinFailed))]


def alive_names(members):
    return sorted(m.name for m in members if m.status == MemberStatus.ALIVE)


def on_front(front, port, settings, work, bind="127.0.0.1"):
    """``work(svc, on)`` beside member "a" (on ``bind``) started on ``front`` ("threads" or
    "asyncio", whose loop runs meanwhile), every event of it in
    ``svc.seen``; ``on(fn)`` calls ``fn()`` where the front's state may be
    read (on the loop for asyncio). Returns what ``work`` returns."""
    svc = (SerfService if front == "threads" else AsyncSerfService)("a", bind, port, **FAST, **settings)
    svc.seen = []
    svc.add_listener(svc.seen.append)         # before the start: the first attempt is made there
    return run_beside(svc, work)


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_seed_that_starts_later_is_joined_and_the_member_stays_up(front):
    pa, pb = free_gossip_port(), free_gossip_port()

    def work(a, on):
        wait_until(lambda: len(retry_events(a.seen)) >= 5)        # a second or so of a seed not up
        with SerfService("b", "127.0.0.1", pb, **FAST) as b:
            up = time.monotonic()
            wait_until(lambda: any(isinstance(e, RetryJoined) for e in a.seen))
            joined_in = time.monotonic() - up
            wait_until(lambda: alive_names(on(a.members)) == ["a", "b"])
            wait_until(lambda: alive_names(b.members()) == ["a", "b"])
            print(f"{front}: joined {joined_in:.3f} s after the seed came up")
            return on(lambda: (a.running, a.node.retry.outcome, a.node.retry.due, retry_events(a.seen)))

    running, outcome, due, events = on_front(front, pa, {"retry_join": [f"127.0.0.1:{pb}"],
                                                         "retry_interval": INTERVAL}, work)
    failed, last = events[:-1], events[-1]
    assert (running, outcome, due) == (True, "joined", None)
    assert failed == [RetryJoinFailed(n, (f"127.0.0.1:{pb}: {REFUSED}",), INTERVAL)
                      for n in range(1, len(failed) + 1)]
    assert last == RetryJoined(len(failed) + 1, 1)


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_retry_max_attempts_that_join_nobody_give_up_and_the_service_stays_up(front, caplog):
    pa, pb = free_gossip_port(), free_gossip_port()
    caplog.set_level(logging.INFO, "mcastmember")

    def work(a, on):
        wait_until(lambda: any(isinstance(e, RetryJoinFailed) and e.gave_up for e in a.seen))
        return on(lambda: (a.running, a.node.retry.outcome, a.node.retry.due, a.node.next_deadline() is not None,
                           retry_events(a.seen)))

    running, outcome, due, ticking, events = on_front(
        front, pa, {"retry_join": [f"127.0.0.1:{pb}"], "retry_interval": INTERVAL, "retry_max": 2}, work)
    error = (f"127.0.0.1:{pb}: {REFUSED}",)
    assert events == [RetryJoinFailed(1, error, INTERVAL), RetryJoinFailed(2, error, INTERVAL),
                      RetryJoinFailed(3, error, None)]
    assert (running, outcome, due, ticking) == (True, "gave up", None, True)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
        f"retry-join: attempt 3 joined nobody, the last allowed (retry_max): giving up ({error[0]})"]


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_joining_only_ourselves_is_not_joined_and_keeps_retrying(front):
    """Our own address as the only seed: the push/pull with ourselves is
    answered, but nobody else is alive, so the member keeps trying (the
    agent, and Consul, stop there and stay a cluster of one)."""
    pa = free_gossip_port()

    def work(a, on):
        wait_until(lambda: len(retry_events(a.seen)) >= 3)
        return on(lambda: (a.node.retry.outcome, a.node.retry.due is not None, retry_events(a.seen)[:3]))

    outcome, due, events = on_front(front, pa, {"retry_join": [f"127.0.0.1:{pa}"], "retry_interval": INTERVAL},
                                    work)
    assert (outcome, due) == ("waiting", True)
    assert events == [RetryJoinFailed(n, (), INTERVAL) for n in (1, 2, 3)]


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_our_own_address_among_the_seeds_waits_for_another_seed(front):
    pa, pb = free_gossip_port(), free_gossip_port()

    def work(a, on):
        wait_until(lambda: len(retry_events(a.seen)) >= 2)
        with SerfService("b", "127.0.0.1", pb, **FAST):
            wait_until(lambda: any(isinstance(e, RetryJoined) for e in a.seen))
            return on(lambda: (a.node.retry.outcome, alive_names(a.members())))

    assert on_front(front, pa, {"retry_join": [f"127.0.0.1:{pa}", f"127.0.0.1:{pb}"],
                                "retry_interval": INTERVAL}, work) == ("joined", ["a", "b"])


@pytest.mark.parametrize("cls", [SerfService, AsyncSerfService])
@pytest.mark.parametrize("settings, message", [
    ({"retry_interval": -1.0}, "retry_interval must be more than 0 seconds, not -1.0"),
    ({"retry_interval": 0}, "retry_interval must be more than 0 seconds, not 0"),
    ({"retry_max": -1}, "retry_max must be 0 (never give up) or more, not -1"),
    ({"retry_join": ["db-1"]}, "retry_join 'db-1': 'db-1' is not an IP address"),
    ({"retry_join": ["127.0.0.1:0"]}, "retry_join '127.0.0.1:0': port '0' is not between 1 and 65535"),
    ({"retry_join": ["[::1"]}, "retry_join '[::1': write an IPv6 address as [ADDR]:PORT"),
    ({"retry_join": "127.0.0.1"}, "retry_join must be a list of text, not '127.0.0.1'"),
])
def test_bad_retry_settings_are_refused_naming_the_setting(cls, settings, message):
    with pytest.raises(ConfigurationError) as caught:
        cls("a", "127.0.0.1", 7946, **settings)
    assert str(caught.value) == message


def test_the_attempts_follow_the_agents_count_and_timer():
    """The first attempt at start, the next one interval after the end of
    the last; retry_max N: N retries after the first, then no deadline."""
    plan = RetryJoin([("127.0.0.2", 7946)], interval=5.0, max_retries=1)
    plan.start(100.0)
    assert (plan.due, plan.take_due(99.0), plan.take_due(100.0)) == (100.0, (), (("127.0.0.2", 7946),))
    assert (plan.due, plan.take_due(200.0)) == (None, ())           # one attempt at a time
    assert plan.finished(0, ("refused",), False, 101.0) == RetryJoinFailed(1, ("refused",), 5.0)
    assert (plan.due, plan.take_due(105.9), plan.take_due(106.0)) == (106.0, (), (("127.0.0.2", 7946),))
    assert plan.finished(1, (), False, 107.0) == RetryJoinFailed(2, (), None)    # only ourselves answered
    assert (plan.outcome, plan.due, plan.finished(1, (), True, 108.0)) == ("gave up", None, None)


def _demo(*args):
    return subprocess.Popen(DEMO + ["gossip", "--node", "a", "--json", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd="/")


def test_the_demo_started_before_its_seed_joins_it_when_it_comes_up():
    pa, pb = free_gossip_port(), free_gossip_port()
    demo = _demo("--bind", f"127.0.0.1:{pa}", "--retry-join", f"127.0.0.1:{pb}", "--retry-interval", "0.2")
    try:
        assert next_line(demo).startswith('{"event": "added"')        # itself: it is up
        warned = [demo.stderr.readline() for _ in range(2)]            # still retrying, not exited
        assert [line.split(" (")[0] for line in warned] == [
            f"mcast-demo gossip: warning: retry-join: attempt {n} joined nobody" for n in (1, 2)]
        with SerfService("b", "127.0.0.1", pb, **FAST) as b:
            wait_until(lambda: alive_names(b.members()) == ["a", "b"])
            assert '"name": "b"' in next_line(demo)
            assert demo.poll() is None          # joined and still up (its clean leave is tested elsewhere)
    finally:
        demo.kill()
        demo.wait()


def test_the_demo_exits_1_when_retry_max_attempts_joined_nobody():
    pa, pb = free_gossip_port(), free_gossip_port()
    demo = _demo("--bind", f"127.0.0.1:{pa}", "--retry-join", f"127.0.0.1:{pb}", "--retry-interval", "200ms",
                 "--retry-max", "1")
    try:
        assert demo.wait(20) == 1
        assert demo.stderr.read().splitlines()[-1] == (
            f"mcast-demo gossip: --retry-join: 2 attempts joined nobody (127.0.0.1:{pb}: {REFUSED}), the last "
            "allowed by --retry-max (mcast-demo doctor --gossip with these flags tells why)")
    finally:
        demo.kill()
        demo.wait()


@pytest.mark.parametrize("flags, message", [
    (["--retry-interval", "-1"], "--retry-interval -1: give a duration longer than zero (30s, 0.5)"),
    (["--retry-interval", "5x"], "--retry-interval: '5x' has an unknown unit 'x' (give one of ns, us, ms, s, m, h)"),
    (["--retry-max", "-1"], "--retry-max -1: give 0 (retry for ever) or more"),
    (["--retry-max", "two"], "--retry-max two: give 0 (retry for ever) or more"),
    (["--retry-join", "127.0.0.1:99999"], "--retry-join 127.0.0.1:99999: port '99999' is not 1-65535"),
    (["--retry-join", "10.0.0.1"], "--bind 127.0.0.1 is loopback, so 10.0.0.1:7946 cannot reach this node: give "
                                   "--bind this host's address on that network"),
    (["--advertise", "127.0.0.2", "--retry-join", "10.0.0.1"], "--advertise 127.0.0.2 is loopback, so "
                                                               "10.0.0.1:7946 cannot reach this node: give "
                                                               "--advertise this host's address on that network"),
])
def test_bad_retry_flags_exit_2_with_one_sentence(flags, message):
    done = subprocess.run(DEMO + ["gossip", "--node", "a", *flags], capture_output=True, text=True, cwd="/",
                          timeout=30)
    assert (done.returncode, done.stderr) == (2, f"mcast-demo gossip: error: {message}\n")

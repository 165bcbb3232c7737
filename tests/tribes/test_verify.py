"""The second opinion before an expiry (verify): on a fake clock through the
engine (both implementations), then through both fronts on loopback, where a
member whose heartbeats stopped arriving but whose port answers is kept."""

import socket
import time

import pytest

from mcastmember.tribes.kernel import codec as _codec
from mcastmember.tribes.engine.config import ServiceConfig
from mcastmember.tribes.wire import auth
from mcastmember.tribes.engine.engine import MembershipEngine
from mcastmember.tribes.engine.verify import (LOST_ATTEMPT_S, MAX_PROBE_SOCKETS, MAX_PROBES, PROBE_ATTEMPTS, PROBE_RATE,
                                       PROBES_PER_SILENCE)

from support import GROUP, LOOPBACK, heartbeat, silent_port, wait_until

DROP = 3.0


@pytest.fixture
def make(codec):
    def make(**settings):
        options = dict(LOOPBACK, member_port=4001, frequency=500, drop_time=3000, verify=True)
        options.update(settings)
        return MembershipEngine(ServiceConfig(GROUP, 45564, **options), codec=codec)
    return make


def hear(engine, now, **fields):
    packet = heartbeat(engine._codec, **fields)
    engine.receive(bytearray(packet), len(packet), now)


def kinds(engine):
    return [(e.kind, e.reason, e.member.port) for e in engine.events()]


def uid(i):
    return bytes([i]) * 16


BOUND = 0.3                     # verify_timeout's default
STEP = BOUND / PROBE_ATTEMPTS   # between a probe's attempts


def suspect(engine, now=DROP + 0.01, port=4002, uid_=uid(2)):
    """One member heard at 0, suspected at ``now``: its probe's first attempt."""
    engine.start(0.0)
    hear(engine, 0.0, port=port, uid=uid_)
    engine.on_timer(now)
    assert kinds(engine) == [("added", None, port), ("suspect", None, port)]
    (attempt,) = engine.probes_due(now)
    return attempt


def test_a_member_past_its_drop_time_is_a_suspect_and_probed(make):
    engine = make()
    attempt = suspect(engine)
    assert [m.port for m in engine.members()] == [4002]      # still a member
    assert (attempt.member.port, attempt.timeout) == (4002, pytest.approx(BOUND))
    assert attempt.deadline == pytest.approx(DROP + 0.01 + BOUND)
    assert engine.probes_due(DROP + 0.02) == []              # the next attempt is not due
    engine.outgoing(DROP + 0.02)
    assert engine.next_deadline() == pytest.approx(DROP + 0.01 + STEP)


def test_a_probe_makes_its_attempts_staggered_within_the_bound(make):
    engine = make()
    start = DROP + 0.01
    attempts = [suspect(engine, start)]
    for k in range(1, PROBE_ATTEMPTS):
        assert engine.probes_due(start + k * STEP - 0.001) == []
        engine.outgoing(start + k * STEP - 0.001)
        assert engine.next_deadline() == pytest.approx(start + k * STEP)
        (attempt,) = engine.probes_due(start + k * STEP)
        attempts.append(attempt)
    # Each has what is left of the one bound: they all end with it.
    assert [a.timeout for a in attempts] == pytest.approx(
        [BOUND - k * STEP for k in range(PROBE_ATTEMPTS)])
    assert {a.deadline for a in attempts} == {attempts[0].deadline}
    assert {a.member.port for a in attempts} == {4002}
    assert engine.probes_due(start + BOUND - 0.001) == []   # no seventh
    engine.outgoing(start + BOUND - 0.001)
    assert engine.next_deadline() == pytest.approx(start + BOUND)
    engine.on_timer(start + BOUND)                           # none answered: the bound removes it
    assert kinds(engine) == [("removed", "expired", 4002)]
    stats = engine.stats()
    assert (stats["verify.timed_out"], stats["verify.failed"], stats["verify.kept"]) == (1, 0, 0)


def test_a_late_wake_up_delays_one_attempt_not_the_grid(make):
    engine = make()
    start = DROP + 0.01
    suspect(engine, start)
    (late,) = engine.probes_due(start + 1.5 * STEP)          # due at 1 step, made at 1.5
    assert late.timeout == pytest.approx(BOUND - 1.5 * STEP)
    assert engine.probes_due(start + 1.9 * STEP) == []
    assert len(engine.probes_due(start + 2 * STEP)) == 1     # the third on time


def test_the_first_acceptance_keeps_it_another_drop_time_then_it_is_probed_again(make):
    engine = make()
    start = DROP + 0.01
    first = suspect(engine, start)
    (second,) = engine.probes_due(start + STEP)
    (third,) = engine.probes_due(start + 2 * STEP)
    engine.on_probe(second, True, start + 2 * STEP + 0.001)  # its SYN got through
    assert engine.events() == [] and [m.port for m in engine.members()] == [4002]
    assert engine.probes_due(start + 3 * STEP) == []         # decided: no more attempts
    engine.on_probe(first, None, start + BOUND)              # the others change nothing
    engine.on_probe(third, False, start + BOUND)
    engine.on_timer(start + BOUND + 0.01)
    assert engine.events() == []
    stats = engine.stats()
    assert (stats["verify.kept"], stats["verify.failed"], stats["verify.timed_out"]) == (1, 0, 0)
    kept = start + 2 * STEP + 0.001
    assert engine.probes_due(kept + DROP - 0.01) == []
    (again,) = engine.probes_due(kept + DROP)                # one drop time later
    assert again.timeout == pytest.approx(BOUND)
    engine.on_probe(again, False, kept + DROP + 0.001)
    assert kinds(engine) == [("removed", "expired", 4002)]
    assert engine.stats()["verify.failed"] == 1


def test_a_refusal_removes_it_at_once(make):
    # A reset means nothing listens on the port: no other attempt is awaited.
    engine = make()
    start = DROP + 0.01
    first = suspect(engine, start)
    (second,) = engine.probes_due(start + STEP)
    engine.on_probe(second, False, start + STEP + 0.001)
    assert kinds(engine) == [("removed", "expired", 4002)]
    assert engine.members() == [] and engine.probes_due(start + 2 * STEP) == []
    engine.on_probe(first, True, start + 2 * STEP)           # a late acceptance changes nothing
    assert engine.events() == []
    stats = engine.stats()
    assert (stats["verify.failed"], stats["verify.kept"], stats["removed.expired"]) == (1, 0, 1)


def test_no_answer_from_any_attempt_removes_it_whichever_clock_runs_out(make):
    # The front gives each attempt up at the probe's deadline and may report
    # before the engine's own clock gets there: the last "no answer" decides.
    engine = make()
    start = DROP + 0.01
    attempts = [suspect(engine, start)]
    for k in range(1, PROBE_ATTEMPTS):
        attempts += engine.probes_due(start + k * STEP)
    for attempt in attempts[:-1]:
        engine.on_probe(attempt, None, start + BOUND - 0.002)
        assert engine.events() == []
    engine.on_probe(attempts[-1], None, start + BOUND - 0.001)
    assert kinds(engine) == [("removed", "expired", 4002)]
    stats = engine.stats()
    assert (stats["verify.timed_out"], stats["verify.failed"]) == (1, 0)
    engine.on_timer(start + BOUND)                           # counted once
    assert engine.events() == [] and engine.stats()["verify.timed_out"] == 1


def test_a_suspect_heard_again_mid_probe_stays_a_member_with_no_news(make):
    engine = make()
    start = DROP + 0.01
    first = suspect(engine, start)
    (second,) = engine.probes_due(start + STEP)
    hear(engine, start + 0.06, port=4002, uid=uid(2), alive=3100)
    engine.on_timer(start + 0.07)
    assert engine.events() == [] and engine.stats()["suspects_heard"] == 1
    assert engine.probes_due(start + 2 * STEP) == []         # no more attempts
    engine.on_probe(first, False, start + 0.08)              # changes nothing
    engine.on_probe(second, None, start + BOUND)
    engine.on_timer(start + BOUND + 0.01)
    assert engine.events() == [] and [m.port for m in engine.members()] == [4002]
    stats = engine.stats()
    assert (stats["verify.kept"], stats["verify.failed"], stats["verify.timed_out"]) == (0, 0, 0)
    hear(engine, start + 0.5, port=4002, uid=uid(2), payload=b"new")
    assert kinds(engine) == [("updated", None, 4002)]


def test_a_suspects_goodbye_removes_it_at_once(make):
    engine = make()
    engine.start(0.0)
    hear(engine, 0.0, port=4002, uid=uid(2))
    engine.on_timer(3.01)
    hear(engine, 3.05, port=4002, uid=uid(2), command=b"BABY-ALEX")
    assert kinds(engine)[-1] == ("removed", "shutdown", 4002)
    engine.on_timer(3.4)
    assert engine.events() == [] and engine.probes_due(3.4) == []


def flooded(make, count=40):
    engine = make()
    engine.start(0.0)
    for i in range(count):
        hear(engine, 0.0, port=5000 + i, uid=uid(i + 10))
    engine.on_timer(3.01)
    engine.events()
    return engine


def test_a_probe_starts_only_when_all_its_attempts_fit_in_the_socket_bound(make):
    engine = flooded(make)
    first = engine.probes_due(3.01)
    assert len(first) == MAX_PROBES == MAX_PROBE_SOCKETS // PROBE_ATTEMPTS
    assert [a.member.port for a in first] == list(range(5000, 5000 + MAX_PROBES))
    assert engine.probes_due(3.02) == []
    # Every probe under way makes its next attempt on time; a refusal
    # decides its probe, whose room goes to the next suspect.
    engine.on_probe(first[0], False, 3.02)
    later = engine.probes_due(3.01 + STEP)
    assert sorted(a.member.port for a in later) == list(range(5001, 5001 + MAX_PROBES))
    assert [a.timeout for a in later] == pytest.approx([BOUND - STEP] * (MAX_PROBES - 1) + [BOUND])
    assert engine.probes_due(3.01 + STEP + 0.001) == []


def test_a_decided_probes_attempts_hold_their_sockets_until_reported(make):
    # The front's connects may still hold their sockets when the engine's
    # own bound removes the suspects: new probes start only as they report.
    engine = flooded(make)
    start = 3.01
    handed = []
    for k in range(PROBE_ATTEMPTS):
        handed += engine.probes_due(start + k * STEP)
    assert len(handed) == MAX_PROBE_SOCKETS
    engine.on_timer(start + BOUND)                           # all time out here, none reported
    assert [e.kind for e in engine.events()] == ["removed"] * MAX_PROBES
    assert engine.probes_due(start + BOUND) == []
    for attempt in handed[:PROBE_ATTEMPTS - 1]:              # not yet room for a probe
        engine.on_probe(attempt, None, start + BOUND + 0.001)
    assert engine.probes_due(start + BOUND + 0.001) == []
    engine.on_probe(handed[PROBE_ATTEMPTS - 1], True, start + BOUND + 0.002)   # changes nothing
    assert engine.events() == []
    (next_one,) = engine.probes_due(start + BOUND + 0.002)
    assert next_one.member.port == 5000 + MAX_PROBES
    stats = engine.stats()
    assert (stats["verify.timed_out"], stats["verify.kept"], stats["members"]) == (
        MAX_PROBES, 0, 40 - MAX_PROBES)


def test_suspects_waiting_for_sockets_do_not_wake_the_driver(make):
    # Due, but no room: the report that frees it wakes the front, so the
    # deadline is the probes' next attempt or bound, never the past (the
    # driver would spin).
    engine = flooded(make)
    start = 3.01
    handed = []
    for k in range(PROBE_ATTEMPTS):
        handed += engine.probes_due(start + k * STEP)
        engine.outgoing(start + k * STEP)
        assert engine.next_deadline() == pytest.approx(start + min(k + 1, PROBE_ATTEMPTS) * STEP)
    engine.on_timer(start + BOUND)                           # timed out, not reported
    engine.outgoing(start + BOUND)
    assert engine.next_deadline() == pytest.approx(3.5)     # the next heartbeat
    for attempt in handed[:PROBE_ATTEMPTS]:
        engine.on_probe(attempt, None, start + BOUND + 0.01)
    assert engine.next_deadline() == pytest.approx(start)   # room: due at once


def test_a_flood_of_suspects_keeps_the_socket_bound_and_every_one_is_decided(make):
    # 200 suspects whose ports never answer, and a front that reports each
    # attempt at its deadline: the engine's deadlines drive the clock.
    count = 200
    engine = flooded(make, count)
    in_flight, peak, removed_at = [], 0, {}
    now = 3.01
    while len(removed_at) < count:
        assert now < 3.01 + count * BOUND, "stalled"
        for attempt in [a for a in in_flight if now >= a.deadline]:
            engine.on_probe(attempt, None, now)
            in_flight.remove(attempt)
        engine.on_timer(now)
        in_flight += engine.probes_due(now)
        peak = max(peak, len(in_flight))
        for event in engine.events():
            assert (event.kind, event.reason) == ("removed", "expired")
            removed_at[event.member.port] = now
        engine.outgoing(now)
        now = min([engine.next_deadline()] + [a.deadline for a in in_flight])
    assert peak == MAX_PROBE_SOCKETS
    assert sorted(removed_at) == list(range(5000, 5000 + count))
    stats = engine.stats()
    assert (stats["verify.timed_out"], stats["verify.failed"], stats["members"]) == (count, 0, 0)
    # MAX_PROBES at a time, back to back: the last goes ceil(200 / 8) bounds on.
    rounds = -(-count // MAX_PROBES)
    assert max(removed_at.values()) == pytest.approx(3.01 + rounds * BOUND)
    assert in_flight == [] and engine.probes_due(now) == []


def test_an_attempt_never_reported_is_given_up_after_a_while(make):
    # A front that loses a report (a bug) must not stall verify for good.
    engine = flooded(make)
    start = 3.01
    for k in range(PROBE_ATTEMPTS):
        engine.probes_due(start + k * STEP)
    for now in (start + BOUND, 3.5, 4.0):                    # the heartbeats' wake-ups
        engine.on_timer(now)
        engine.outgoing(now)
    engine.events()
    assert engine.probes_due(4.0) == []
    assert engine.next_deadline() == pytest.approx(start + BOUND + LOST_ATTEMPT_S)
    engine.on_timer(start + BOUND + LOST_ATTEMPT_S)
    assert len(engine.probes_due(start + BOUND + LOST_ATTEMPT_S)) == MAX_PROBES


def test_a_restart_counts_afresh_and_ignores_reports_from_before(make):
    engine = flooded(make)
    before = engine.probes_due(3.01)
    engine.stop(3.1)                                         # those attempts may still run
    engine.start(4.0)
    for i in range(MAX_PROBES + 1):
        hear(engine, 4.0, port=6000 + i, uid=uid(i + 100))
    engine.on_timer(7.01)
    engine.events()
    assert len(engine.probes_due(7.01)) == MAX_PROBES
    for attempt in before:
        engine.on_probe(attempt, False, 7.02)                # not this run's: no slot, no event
    assert engine.probes_due(7.02) == [] and engine.events() == []
    assert engine.stats()["verify.failed"] == 0


def test_stop_removes_suspects_too(make):
    engine = make()
    engine.start(0.0)
    hear(engine, 0.0, port=4002, uid=uid(2))
    engine.on_timer(3.01)
    engine.events()
    engine.stop(3.1)
    assert kinds(engine) == [("removed", "stopped", 4002)]


def test_without_verify_the_drop_time_removes(make):
    engine = make(verify=False)
    engine.start(0.0)
    hear(engine, 0.0, port=4002, uid=uid(2))
    engine.on_timer(3.01)
    assert kinds(engine) == [("added", None, 4002), ("removed", "expired", 4002)]
    assert engine.probes_due(3.01) == []


# -- what the network may make us do: bounded work for forged members ----------------

def test_suspects_count_against_max_members(make):
    # Forged members that expire into suspects whose ports answer must not
    # make room for more: the table holds max_members, suspects included.
    engine = make(max_members=2)
    engine.start(0.0)
    for i in range(2):
        hear(engine, 0.0, port=5000 + i, uid=uid(i + 10))
    engine.on_timer(DROP + 0.01)
    for attempt in engine.probes_due(DROP + 0.01):
        engine.on_probe(attempt, True, DROP + 0.02)          # kept: still suspects
    for i in range(2, 6):
        hear(engine, DROP + 0.1, port=5000 + i, uid=uid(i + 10))
    assert sorted(m.port for m in engine.members()) == [5000, 5001]
    assert kinds(engine) == [("added", None, 5000), ("added", None, 5001),
                             ("suspect", None, 5000), ("suspect", None, 5001)]
    stats = engine.stats()
    assert (stats["refused"], stats["members"], stats["verify.kept"]) == (4, 2, 2)
    hear(engine, DROP + 0.2, port=5000, uid=uid(10))        # a suspect heard again: room for it
    assert [m.port for m in engine.members()] == [5000, 5001]
    assert engine.stats()["suspects_heard"] == 1


def test_a_silent_member_whose_port_answers_is_probed_a_bounded_number_of_times(make):
    engine = make()
    now = DROP + 0.01
    attempt = suspect(engine, now)
    probes = 1
    while probes <= 2 * PROBES_PER_SILENCE:
        answered = now + 0.001
        engine.on_probe(attempt, True, answered)
        if engine.stats()["members"] == 0:
            break
        now = answered + DROP                                # kept one drop time
        engine.on_timer(now)
        (attempt,) = engine.probes_due(now)
        probes += 1
    assert probes == PROBES_PER_SILENCE
    assert kinds(engine) == [("removed", "expired", 4002)]
    stats = engine.stats()
    assert (stats["verify.kept"], stats["verify.exhausted"]) == (PROBES_PER_SILENCE - 1, 1)
    assert now == pytest.approx(DROP + 0.01 + (PROBES_PER_SILENCE - 1) * (DROP + 0.001))


def test_probes_start_at_most_probe_rate_a_second(make):
    # Ports that answer at once free their sockets at once: the rate, not
    # the socket bound, is what holds a flood of them.
    count = 3 * PROBE_RATE
    engine = flooded(make, count)
    now, started = 3.01, []
    while len(started) < count:
        assert now < 3.01 + 5.0, "stalled"
        due = engine.probes_due(now)
        started += [(now, a.member.port) for a in due]
        for attempt in due:
            engine.on_probe(attempt, True, now)
        engine.on_timer(now)
        engine.outgoing(now)
        now = engine.next_deadline()
    times = [t for t, _ in started]
    assert sorted(p for _, p in started) == list(range(5000, 5000 + count))
    # At most PROBE_RATE in any one second (a token bucket started 63 in
    # the first: its burst, then its refill): here PROBE_RATE each second.
    assert times == pytest.approx([3.01] * PROBE_RATE + [4.01] * PROBE_RATE
                                  + [5.01] * PROBE_RATE)
    assert max(sum(1 for u in times if t <= u < t + 1.0) for t in times) == PROBE_RATE
    stats = engine.stats()
    assert (stats["verify.deferred"], stats["verify.kept"]) == (count - PROBE_RATE, count)


def test_permissive_probes_authenticated_suspects_only(make, codec):
    key = (1, bytes(range(32)))
    engine = make(keys=[key], auth="permissive")
    engine.start(0.0)
    plain = heartbeat(codec, port=4002, uid=uid(2))
    keyed = heartbeat(codec, port=4003, uid=uid(3))
    keyed += auth.trailer(keyed, auth.HeartbeatKeys([key]), time.time_ns() // 1000)
    for packet in (plain, keyed):
        engine.receive(bytearray(packet), len(packet), 0.0)
    engine.on_timer(DROP + 0.01)
    assert kinds(engine) == [("added", None, 4002), ("added", None, 4003),
                             ("removed", "expired", 4002), ("suspect", None, 4003)]
    assert [a.member.port for a in engine.probes_due(DROP + 0.01)] == [4003]
    assert (engine.stats()["unprobed"], engine.stats()["suspected"]) == (1, 1)


def test_the_prober_tells_acceptance_refusal_and_no_answer_and_keeps_no_socket():
    import os
    import queue
    from types import SimpleNamespace

    from mcastmember.tribes.fronts.verify_prober import Prober

    def attempt(address, timeout):
        return SimpleNamespace(member=SimpleNamespace(address=address[0], port=address[1]),
                               deadline=time.monotonic() + timeout)

    idle = len(os.listdir("/proc/self/fd"))
    accepting = socket.create_server(("127.0.0.1", 0))   # the kernel accepts; never read
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))                        # bound, never listening: refuses
    reports = queue.SimpleQueue()
    prober = Prober(lambda results: [reports.put(r) for r in results])
    try:
        with silent_port() as silent:
            prober.start()
            with_prober = len(os.listdir("/proc/self/fd"))
            asked = [attempt(accepting.getsockname(), 0.3), attempt(closed.getsockname(), 0.3),
                     attempt(silent, 0.3)]
            prober.submit(asked)
            got = {id(a): answered for a, answered in (reports.get(timeout=2) for _ in asked)}
            assert [got[id(a)] for a in asked] == [True, False, None]
            assert time.monotonic() >= asked[2].deadline   # no answer: given up at its deadline
            assert len(os.listdir("/proc/self/fd")) == with_prober
    finally:
        prober.stop()
        accepting.close()
        closed.close()
    assert len(os.listdir("/proc/self/fd")) == idle


# -- through the fronts, on loopback -------------------------------------------------

FAST = dict(frequency=100, drop_time=400)


@pytest.fixture
def front(running_front):
    return running_front


def one_heartbeat(group_port, member_port, uid):
    """A member we hear once: its later heartbeats are lost on the way."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
    sock.sendto(heartbeat(_codec.impl, port=member_port, uid=uid), (GROUP, group_port))
    sock.close()


def test_a_member_whose_heartbeats_are_lost_but_whose_port_answers_is_kept(front, group_port):
    port_answers = socket.create_server(("127.0.0.1", 0))
    try:
        port = port_answers.getsockname()[1]
        verified = front(4001, verify=True, **FAST)
        plain = front(4002, **FAST)
        one_heartbeat(group_port, port, uid(7))
        wait_until(lambda: port in [m.port for m in verified.members()])
        wait_until(lambda: plain.events.kinds(port) == [("added", None), ("removed", "expired")])
        wait_until(lambda: verified.stats()["verify.kept"] >= 1)     # its port answered a probe
        time.sleep(1.0)                      # on purpose: 2.5 drop times of silence, and it may not be removed
        assert port in [m.port for m in verified.members()]
        assert verified.events.kinds(port)[:2] == [("added", None), ("suspect", None)]
        port_answers.close()                                  # now it is gone for good
        wait_until(lambda: verified.events.kinds(port)[-1] == ("removed", "expired"))
    finally:
        port_answers.close()


def test_a_killed_member_is_removed_within_drop_time_and_the_probe(front, group_port):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]               # nothing listens: refused at once
    verified = front(4001, verify=True, **FAST)
    one_heartbeat(group_port, port, uid(8))
    wait_until(lambda: port in [m.port for m in verified.members()])
    heard = time.monotonic()
    wait_until(lambda: verified.events.kinds(port)[-1:] == [("removed", "expired")])
    took = time.monotonic() - heard
    assert took < 5.0, f"removed {took:.3f} s after it was heard"
    assert verified.stats()["verify.failed"] == 1


def test_a_forged_member_naming_a_port_that_answers_costs_a_bounded_number_of_connects(
        front, group_port):
    # One datagram naming someone else's listening port used to
    # make a member connect there every drop time, for ever.
    victim = socket.create_server(("127.0.0.1", 0))
    victim.settimeout(0.05)
    accepted = 0
    try:
        port = victim.getsockname()[1]
        # A bound of 1.2 s: its second connect (0.2 s on) is never needed on loopback.
        verified = front(4001, verify=True, frequency=50, drop_time=200, verify_timeout=1200)
        one_heartbeat(group_port, port, uid(9))
        wait_until(lambda: verified.events.kinds(port)[-1:] == [("removed", "expired")],
                   timeout=30)
        while True:
            try:
                victim.accept()[0].close()
                accepted += 1
            except socket.timeout:
                break
        stats = verified.stats()
        assert (stats["verify.kept"], stats["verify.exhausted"]) == (PROBES_PER_SILENCE - 1, 1)
        assert accepted == PROBES_PER_SILENCE
    finally:
        victim.close()

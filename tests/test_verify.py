"""The second opinion before an expiry (verify): on a fake clock through the
engine (both implementations), then through both fronts on loopback, where a
member whose heartbeats stopped arriving but whose port answers is kept."""

import socket
import time

import pytest

from mcastmember import _codec
from mcastmember.config import ServiceConfig
from mcastmember.engine import MAX_PROBES, MembershipEngine

from support import GROUP, LOOPBACK, heartbeat, wait_until

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


def test_a_member_past_its_drop_time_is_a_suspect_and_probed(make):
    engine = make()
    engine.start(0.0)
    hear(engine, 0.0, port=4002, uid=uid(2))
    assert kinds(engine) == [("added", None, 4002)]
    engine.on_timer(DROP + 0.01)
    assert kinds(engine) == [("suspect", None, 4002)]
    assert [m.port for m in engine.members()] == [4002]      # still a member
    ((member, timeout),) = engine.probes_due(DROP + 0.01)
    assert (member.port, timeout) == (4002, 0.3)
    assert engine.probes_due(DROP + 0.02) == []              # one probe at a time
    engine.outgoing(DROP + 0.02)
    assert engine.next_deadline() == pytest.approx(DROP + 0.31)   # the probe's bound


def test_an_answering_port_keeps_it_another_drop_time_then_asks_again(make):
    engine = make()
    engine.start(0.0)
    hear(engine, 0.0, port=4002, uid=uid(2))
    engine.on_timer(3.01)
    ((member, _),) = engine.probes_due(3.01)
    engine.on_probe(member, True, 3.02)
    engine.on_timer(5.0)
    assert kinds(engine) == [("added", None, 4002), ("suspect", None, 4002)]
    assert engine.probes_due(5.0) == []
    ((member, _),) = engine.probes_due(6.02)                 # one drop time later
    engine.on_probe(member, False, 6.03)
    assert kinds(engine) == [("removed", "expired", 4002)]
    stats = engine.stats()
    assert (stats["verify.kept"], stats["verify.failed"], stats["removed.expired"],
            stats["members"]) == (1, 1, 1, 0)


def test_a_probe_without_an_answer_within_the_bound_removes_it(make):
    engine = make()
    engine.start(0.0)
    hear(engine, 0.0, port=4002, uid=uid(2))
    engine.on_timer(3.01)
    engine.probes_due(3.01)
    engine.on_timer(3.32)                                    # past 300 ms
    assert kinds(engine)[-1] == ("removed", "expired", 4002)
    assert engine.stats()["verify.timed_out"] == 1
    engine.on_probe(engine.local_member, True, 3.4)          # a late answer changes nothing


def test_a_probe_whose_own_timeout_ends_first_counts_as_timed_out(make):
    # The front's connect has the same bound as the engine's and may give up
    # first (the threaded front's usually does): no answer is a time-out,
    # not a refusal, whichever clock ran out.
    engine = make()
    engine.start(0.0)
    hear(engine, 0.0, port=4002, uid=uid(2))
    engine.on_timer(3.01)
    ((member, _),) = engine.probes_due(3.01)
    engine.on_probe(member, None, 3.30)
    assert kinds(engine)[-1] == ("removed", "expired", 4002)
    stats = engine.stats()
    assert (stats["verify.timed_out"], stats["verify.failed"]) == (1, 0)


def test_the_probe_tells_a_refusal_from_no_answer():
    from mcastmember.probe import connect_probe

    class Target:
        def __init__(self, address, port):
            self.address, self.port = address, port

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))                   # bound, never listening: refuses
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(0)                               # a full backlog: SYNs go unanswered
    fillers = []
    try:
        for _ in range(8):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(silent.getsockname())
            fillers.append(filler)
        assert connect_probe(Target(*closed.getsockname()), 0.3) is False
        assert connect_probe(Target(*silent.getsockname()), 0.3) is None
    finally:
        for sock in [closed, silent, *fillers]:
            sock.close()


def test_a_suspect_heard_again_is_a_member_with_no_news(make):
    engine = make()
    engine.start(0.0)
    hear(engine, 0.0, port=4002, uid=uid(2))
    engine.on_timer(3.01)
    engine.probes_due(3.01)
    hear(engine, 3.1, port=4002, uid=uid(2), alive=3100)
    engine.on_timer(3.5)
    assert kinds(engine) == [("added", None, 4002), ("suspect", None, 4002)]
    assert engine.probes_due(3.5) == [] and engine.stats()["suspects_heard"] == 1
    hear(engine, 3.6, port=4002, uid=uid(2), payload=b"new")
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


def test_a_flood_of_suspects_is_probed_a_bounded_number_at_a_time(make):
    engine = flooded(make)
    first = engine.probes_due(3.01)
    assert len(first) == MAX_PROBES
    assert engine.probes_due(3.02) == []
    for member, _ in first:                                  # those end...
        engine.on_probe(member, None, 3.30)
    assert len(engine.probes_due(3.30)) == MAX_PROBES        # ...and the next ones go


def test_a_probe_the_engine_timed_out_counts_until_the_front_reports_it(make):
    # The front's connect may still hold its socket when the engine's own
    # bound removes the suspect: a new probe starts only once it reports.
    engine = flooded(make)
    first = engine.probes_due(3.01)
    engine.on_timer(3.32)                                    # all time out here
    assert [e.kind for e in engine.events()] == ["removed"] * MAX_PROBES
    assert engine.probes_due(3.32) == []
    engine.on_probe(first[0][0], None, 3.33)                 # one report: one slot
    assert [m.port for m, _ in engine.probes_due(3.33)] == [5000 + MAX_PROBES]
    for member, _ in first[1:]:
        engine.on_probe(member, True, 3.34)                  # a late answer changes nothing
    assert engine.events() == []
    assert len(engine.probes_due(3.34)) == MAX_PROBES - 1
    stats = engine.stats()
    assert (stats["verify.timed_out"], stats["verify.kept"], stats["members"]) == (
        MAX_PROBES, 0, 40 - MAX_PROBES)


def test_suspects_waiting_for_a_slot_do_not_wake_the_driver(make):
    # Due, but no slot free: the report that frees one wakes the front, so
    # the deadline is the probes' bound, not now (the driver would spin).
    engine = flooded(make)
    first = engine.probes_due(3.01)
    engine.outgoing(3.02)
    assert engine.next_deadline() == pytest.approx(3.31)
    engine.on_timer(3.31)                                    # timed out, not reported
    engine.outgoing(3.31)
    assert engine.next_deadline() == pytest.approx(3.5)     # the next heartbeat
    engine.on_probe(first[0][0], None, 3.32)
    assert engine.next_deadline() == pytest.approx(3.01)    # a slot: due at once


def test_a_suspect_heard_during_its_probe_holds_the_slot_until_the_report(make):
    engine = make()
    engine.start(0.0)
    hear(engine, 0.0, port=4002, uid=uid(2))
    for i in range(MAX_PROBES):
        hear(engine, 0.5, port=5000 + i, uid=uid(i + 10))
    engine.on_timer(3.01)
    ((member, _),) = engine.probes_due(3.01)
    hear(engine, 3.1, port=4002, uid=uid(2), alive=3100)     # back: no longer a suspect
    engine.on_timer(3.51)
    assert len(engine.probes_due(3.51)) == MAX_PROBES - 1    # its probe still runs
    engine.on_probe(member, True, 3.52)
    assert len(engine.probes_due(3.52)) == 1


def test_a_restart_counts_afresh_and_ignores_reports_from_before(make):
    engine = flooded(make)
    before = engine.probes_due(3.01)
    engine.stop(3.1)                                         # those probes may still run
    engine.start(4.0)
    for i in range(MAX_PROBES + 1):
        hear(engine, 4.0, port=6000 + i, uid=uid(i + 100))
    engine.on_timer(7.01)
    engine.events()
    assert len(engine.probes_due(7.01)) == MAX_PROBES
    for member, _ in before:
        engine.on_probe(member, False, 7.02)                 # not this run's: no slot, no event
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
        time.sleep(1.0)                                       # 2.5 drop times of silence
        assert port in [m.port for m in verified.members()]
        assert verified.events.kinds(port)[:2] == [("added", None), ("suspect", None)]
        assert verified.stats()["verify.kept"] >= 1
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

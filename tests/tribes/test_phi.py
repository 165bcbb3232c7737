"""Adaptive expiry by phi accrual: the detector's arithmetic, the index's
arrival statistics (both implementations, the same numbers), and the table
and engine expiring by them on a fake clock."""

import math

import pytest

from mcastmember.tribes.wire import layout as L
from mcastmember.tribes.engine import detector
from mcastmember.tribes.engine.config import ServiceConfig
from mcastmember.tribes.engine.engine import MembershipEngine
from mcastmember._runtime.errors import ConfigurationError
from mcastmember.tribes.engine.table import Membership

from support import GROUP, LOOPBACK, heartbeat


def test_the_threshold_is_reached_y_deviations_past_the_mean():
    y = detector.threshold_y(8.0)
    assert y == pytest.approx(5.226, abs=1e-3)
    assert detector.phi(1.0 + y * 0.2, 1.0, 0.2) == pytest.approx(8.0, abs=1e-6)
    assert detector.phi(1.0, 1.0, 0.2) == pytest.approx(math.log10(2))   # at the mean: half
    assert detector.phi(100.0, 1.0, 0.2) == math.inf
    with pytest.raises(ValueError):
        detector.threshold_y(0)


def _index(codec, pause=1.0):
    index = codec.MemberIndex(4)
    index.set_phi(detector.threshold_y(8.0), pause, 0.1, 0.5, 1000)
    return index


def test_arrival_statistics_give_each_member_its_deadline(codec):
    index = _index(codec)
    slot = index.add(heartbeat(codec), -1, 0.0, L.KIND_MEMBER)
    y = detector.threshold_y(8.0)
    # A new member: the expected period, a quarter of it as deviation (below the floor).
    assert index.phi_deadline(slot) == pytest.approx(0.0 + 0.5 + 1.0 + y * 0.125)
    for i, at in enumerate((0.5, 1.0, 1.5, 2.0), 1):
        assert index.lookup(heartbeat(codec, alive=i), -1, at) == L.KIND_MEMBER
    # Intervals of 0.5 exactly: the mean stays, the deviation shrinks to the floor.
    assert index.phi_deadline(slot) == pytest.approx(2.0 + 0.5 + 1.0 + y * 0.1)


def test_both_implementations_keep_the_same_statistics():
    from mcastmember.tribes.kernel import _fast_py
    try:
        from mcastmember.tribes.kernel import _fast
    except ImportError:
        pytest.skip("the compiled extension is not built")
    times = [0.0, 0.4, 1.3, 1.5, 2.9, 3.0, 3.2, 4.8]
    deadlines = []
    for codec in (_fast_py, _fast):
        index = _index(codec, pause=0.0)
        slot = index.add(heartbeat(codec), -1, times[0], L.KIND_MEMBER)
        for i, at in enumerate(times[1:], 1):
            index.lookup(heartbeat(codec, alive=i), -1, at)
        deadlines.append(index.phi_deadline(slot))
    assert deadlines[0] == pytest.approx(deadlines[1], rel=1e-12)


def test_expire_phi_removes_members_by_phi_and_others_by_the_fallback(codec):
    index = _index(codec)
    member = index.add(heartbeat(codec, port=4002), -1, 0.0, L.KIND_MEMBER)
    ours = index.add(heartbeat(codec, port=4003), -1, 0.0, L.KIND_LOCAL)
    due = index.phi_deadline(member)
    assert index.next_phi_expiry(3.0) == pytest.approx(due)
    assert index.expire_phi(due - 0.01, 3.0) == ()
    assert list(index.expire_phi(due, 3.0)) == [member]
    assert index.next_phi_expiry(3.0) == pytest.approx(3.0)
    assert list(index.expire_phi(3.0, 3.0)) == [ours]
    assert index.next_phi_expiry(3.0) is None


def _table(codec, **phi):
    return Membership(drop_time=3.0, codec=codec,
                      phi=detector.PhiAccrual(first_mean=0.5, pause=1.0, **phi))


def test_an_irregular_member_gets_more_time_than_a_regular_one(codec):
    table = _table(codec)
    regular, irregular = heartbeat(codec, port=4002), heartbeat(codec, port=4003, uid=bytes(16))
    table.receive(regular, len(regular), 0.0)
    table.receive(irregular, len(irregular), 0.0)
    at = {4002: 0.0, 4003: 0.0}
    for i in range(1, 40):
        at[4002] = i * 0.5
        table.receive(heartbeat(codec, port=4002, alive=i), -1, at[4002])
        if i % 4 == 0:                  # three in four lost, then one
            at[4003] = i * 0.5
            table.receive(heartbeat(codec, port=4003, uid=bytes(16), alive=i), -1, at[4003])
    removed = {}
    now = 19.5
    while len(removed) < 2:
        now += 0.01
        for event in table.expire(now):
            removed[event.member.port] = round(now - at[event.member.port], 2)
    assert removed[4002] < 2.2 < 3.0 < removed[4003], removed


def test_the_engine_expires_by_phi_when_asked(codec):
    engine = MembershipEngine(ServiceConfig(GROUP, 45564, **LOOPBACK, detector="phi",
                                            frequency=500, drop_time=3000), codec=codec)
    engine.start(0.0)
    engine.receive(bytearray(heartbeat(codec)), len(heartbeat(codec)), 0.0)
    y = detector.threshold_y(8.0)
    due = 0.5 + 1.0 + y * 0.125      # a new member: mean 500 ms, pause 2 periods
    engine.on_timer(due - 0.01)
    assert [e.kind for e in engine.events()] == ["added"]
    engine.on_timer(due + 0.002)
    assert [(e.kind, e.reason) for e in engine.events()] == [("removed", "expired")]


@pytest.mark.parametrize("settings, message", [
    (dict(detector="accrual"), "detector must be 'fixed' or 'phi'"),
    (dict(phi_threshold=8), "^phi_threshold needs detector='phi'$"),
    (dict(phi_min_std=50, phi_pause=0), "^phi_min_std and phi_pause need detector='phi'$"),
    (dict(detector="phi", phi_threshold=0), "phi_threshold must be a number"),
    (dict(detector="phi", phi_threshold="8"), "phi_threshold must be a number"),
    (dict(detector="phi", phi_min_std=0), "phi_min_std 0 is out of range"),
    (dict(detector="phi", phi_pause=-1), "phi_pause -1 is out of range"),
])
def test_bad_detector_settings_say_what_is_wrong(settings, message):
    with pytest.raises(ConfigurationError, match=message):
        ServiceConfig(GROUP, 45564, **LOOPBACK, **settings)

"""The sans-IO engine on a fake clock: every timer, no sleeps, no sockets.
Both implementations (the ``codec`` fixture)."""

import errno
import logging

import pytest

from mcastmember.tribes.wire import layout as L
from mcastmember.tribes.engine.config import ServiceConfig
from mcastmember.tribes.engine.engine import (ERROR_BACKOFF_S, EXPIRY_SLACK_S, MALFORMED_REPORT_S,
                                RECEIVE, RECOVERY_ERRORS, SEND, MembershipEngine)
from mcastmember.tribes.engine.member import Member

from support import GROUP, LOOPBACK, heartbeat

PERIOD, DROP = 0.5, 3.0


@pytest.fixture
def make(codec):
    def make(**settings):
        options = dict(LOOPBACK, member_port=4001, frequency=500, drop_time=3000)
        options.update(settings)
        return MembershipEngine(ServiceConfig(GROUP, 45564, **options), codec=codec)
    return make


@pytest.fixture
def engine(make):
    engine = make()
    engine.start(0.0)
    return engine


def beats(engine, until, stall_at=None, resume_at=None):
    """Drive ``engine`` as a driver does, waking only at its deadlines, and
    return when it sent. ``stall_at``/``resume_at``: the driver is frozen
    in between (it wakes at ``resume_at`` instead)."""
    sent = []
    now = 0.0
    while True:
        now = engine.next_deadline()
        if stall_at is not None and stall_at <= now < resume_at:
            now = resume_at
        if now > until:
            return sent
        engine.on_timer(now)
        if engine.outgoing(now) is not None:
            engine.on_send_result(77, now)
            sent.append(now)


def hear(engine, now, **fields):
    packet = heartbeat(engine._codec, **fields)
    engine.receive(bytearray(packet), len(packet), now)


def kinds(engine):
    return [(e.kind, e.reason, e.member.port) for e in engine.events()]


def test_heartbeats_go_out_on_a_fixed_grid(engine):
    assert engine.outgoing(0.0) is not None        # the first at once
    assert engine.outgoing(0.0) is None
    assert engine.next_deadline() == 0.5
    assert beats(engine, 2.6) == [0.5, 1.0, 1.5, 2.0, 2.5]


def test_an_early_wake_up_sends_nothing(engine):
    engine.outgoing(0.0)
    engine.on_timer(0.3)
    assert engine.outgoing(0.3) is None
    assert engine.next_deadline() == 0.5


def test_a_change_is_sent_at_once_and_leaves_the_grid_alone(engine):
    engine.outgoing(0.0)
    first = engine.outgoing(0.5)
    engine.set_payload(b"new")
    changed = engine.outgoing(0.7)
    assert changed is not None and changed is not first
    assert bytes(changed.buffer).endswith(b"new" + L.END_MARKER)
    assert engine.outgoing(0.7) is None
    assert engine.next_deadline() == 1.0
    assert beats(engine, 2.1) == [1.0, 1.5, 2.0]


def test_a_burst_of_changes_does_not_delay_the_grid(engine):
    """Ten set_payload() calls 20 ms apart: each is sent
    at once and the heartbeats stay on the grid."""
    engine.outgoing(0.0)
    sent = []
    for i in range(10):
        now = 0.1 + 0.02 * i
        engine.set_payload(b"p%d" % i)
        assert engine.outgoing(now) is not None
        sent.append(now)
        assert engine.next_deadline() == 0.5
    assert beats(engine, 1.6) == [0.5, 1.0, 1.5]
    assert len(sent) == 10


def test_a_stall_is_followed_by_one_beat_then_the_grid(engine):
    engine.outgoing(0.0)
    sent = beats(engine, 4.1, stall_at=1.0, resume_at=2.3)
    assert sent == [0.5, 2.3, 2.5, 3.0, 3.5, 4.0]


def test_a_silent_member_expires_at_its_deadline(engine):
    engine.outgoing(0.0)
    hear(engine, 0.1)
    assert kinds(engine) == [("added", None, 4001)]
    beats(engine, 3.0)
    deadline = engine.next_deadline()
    assert deadline == 0.1 + DROP + EXPIRY_SLACK_S
    engine.on_timer(deadline - 0.01)
    assert engine.events() == []
    engine.on_timer(deadline)
    assert kinds(engine) == [("removed", "expired", 4001)]
    assert engine.next_deadline() == 3.5      # only the grid is left


def test_a_heard_member_moves_its_deadline(engine):
    hear(engine, 0.1)
    hear(engine, 1.2, alive=2)
    beats(engine, 4.0)
    assert engine.table.members()[0].port == 4001
    assert engine.next_deadline() == 4.2 + EXPIRY_SLACK_S


def test_waking_long_after_a_deadline_gives_peers_grace(engine):
    """The pause guard: the driver slept through our deadline (SIGSTOP), so
    silence is our deafness: nobody expires for one drop time from waking."""
    engine.outgoing(0.0)
    hear(engine, 0.1)
    engine.events()
    assert engine.next_deadline() == 0.5
    engine.on_timer(5.0)
    assert engine.events() == []
    assert engine.stats()["pauses"] == 1
    assert engine.next_deadline() == 0.5       # the missed beat: due at once
    engine.outgoing(5.0)
    assert beats(engine, 7.9) == [5.5, 6.0, 6.5, 7.0, 7.5]
    assert engine.events() == []               # the grace lasts one drop time
    assert engine.next_deadline() == 8.0       # its end (and a beat)
    engine.on_timer(8.0)
    assert kinds(engine) == [("removed", "expired", 4001)]
    assert engine.stats()["pauses"] == 1


def test_a_pause_is_counted_once_by_the_engine_not_the_table(engine):
    """One pause guard (the engine's): the table keeps no "pauses" of its own
    for the engine's stats to overwrite."""
    engine.outgoing(0.0)
    hear(engine, 0.1)
    engine.next_deadline()
    engine.on_timer(5.0)
    assert "pauses" not in engine.table.stats()
    assert engine.stats()["pauses"] == 1


def test_the_pause_threshold_has_a_floor(make, caplog):
    """drop_time 100 ms: half of it is 50 ms, well within
    a busy host's scheduling noise; a 60 ms late wake-up is no pause, and a
    silent member is removed on time. Such a setting is warned about."""
    with caplog.at_level(logging.WARNING, logger="mcastmember"):
        engine = make(frequency=50, drop_time=100)
    assert "drop_time 100 ms is under 3 heartbeats of 50 ms" in caplog.text
    engine.start(0.0)
    engine.outgoing(0.0)
    hear(engine, 0.01)
    engine.events()
    assert engine.next_deadline() == 0.05
    engine.on_timer(0.112)                      # 62 ms late, past 0.01 + 0.1
    assert engine.stats()["pauses"] == 0
    assert kinds(engine) == [("removed", "expired", 4001)]


def test_sensible_settings_are_not_warned_about(make, caplog):
    with caplog.at_level(logging.WARNING, logger="mcastmember"):
        make(frequency=500, drop_time=1500)
    assert caplog.text == ""


def test_repeated_send_errors_ask_for_a_new_socket(engine):
    for i in range(RECOVERY_ERRORS - 1):
        engine.on_send_result(-errno.ENETUNREACH, 0.1 * i)
    assert engine.reopen_due() == []
    engine.on_send_result(77, 1.0)             # a success starts the count again
    for i in range(RECOVERY_ERRORS):
        engine.on_send_result(-errno.ENETUNREACH, 1.0 + 0.1 * i)
    assert engine.reopen_due() == [SEND]
    assert engine.reopen_due() == []
    engine.on_reopened(SEND)
    stats = engine.stats()
    assert (stats["send_errors"], stats["socket_reopened"]) == (2 * RECOVERY_ERRORS - 1, 1)


def test_receive_errors_back_off_and_then_ask_for_a_new_socket(engine):
    engine.outgoing(0.0)
    engine.on_receive_error(errno.ENOBUFS, 0.1)
    assert not engine.reading(0.1)
    assert engine.next_deadline() == 0.1 + ERROR_BACKOFF_S
    assert engine.reading(0.1 + ERROR_BACKOFF_S)
    for i in range(RECOVERY_ERRORS - 1):
        engine.on_receive_error(errno.ENOBUFS, 0.2 + i * 0.01)
    assert engine.reopen_due() == [RECEIVE]
    engine.on_reopened(RECEIVE, OSError("no"))
    assert engine.stats()["socket_reopened"] == 0
    assert engine.stats()["receive_errors"] == RECOVERY_ERRORS


def test_stop_returns_the_goodbye_and_removes_everyone(engine, codec):
    hear(engine, 0.1)
    engine.events()
    goodbye = engine.stop(1.0)
    assert Member.from_fields(codec.parse(goodbye.buffer, len(goodbye.buffer))).is_shutdown
    assert kinds(engine) == [("removed", "stopped", 4001)]
    assert engine.table.members() == []
    assert engine.next_deadline() is None and engine.outgoing(1.0) is None
    assert engine.stop(1.1) is None
    engine.start(2.0)
    hear(engine, 2.1)
    assert kinds(engine) == [("added", None, 4001)]   # after a removal: alternating
    assert engine.stats()["removed.stopped"] == 1


def test_the_malformed_report_is_rate_limited(engine, caplog):
    junk = bytearray(b"TRIBES-B\x02\x00" + bytes(60))
    with caplog.at_level(logging.WARNING, logger="mcastmember"):
        engine.receive(junk, len(junk), 0.1)
        engine.on_timer(MALFORMED_REPORT_S - 0.1)
        assert caplog.text == ""
        engine.on_timer(MALFORMED_REPORT_S)
        assert "dropped 1 malformed datagrams" in caplog.text and "bad_version 1" in caplog.text
        caplog.clear()
        engine.receive(junk, len(junk), 11.0)
        engine.on_timer(15.0)
        assert caplog.text == ""
        engine.on_timer(2 * MALFORMED_REPORT_S)
        assert "dropped 2 malformed datagrams" in caplog.text


def test_stats_carry_every_counter(engine):
    stats = engine.stats()
    for key in ("sent", "send_errors", "receive_errors", "socket_reopened", "pauses",
                "internal_errors", "received", "fast_path", "members", "healthy",
                "implementation"):
        assert key in stats, key
    assert stats["healthy"] is True
    engine.on_internal_error(1.0)
    assert engine.stats()["healthy"] is False
    assert engine.stats()["internal_errors"] == 1

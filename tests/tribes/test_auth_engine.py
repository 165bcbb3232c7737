"""The engine with keys, on a fake clock, both implementations: what it
sends is signed (heartbeats and the goodbye), sequences only grow across
packet changes, set_keys re-signs at once and is judged by the table; the
report of what failed authentication is rate-limited."""

import logging
import time

import pytest

from mcastmember.tribes.wire import layout as L
from mcastmember.tribes.wire import auth
from mcastmember.tribes.engine.engine import MALFORMED_REPORT_S

from support import heartbeat
from test_engine import make  # noqa: F401 (the fixture: an engine of the codec under test)

OLD, NEW = (1, bytes(range(32))), (2, bytes(range(40, 72)))


def sent(packet):
    packet.stamp_now()
    return bytes(packet.buffer)


def test_heartbeats_and_the_goodbye_are_signed_with_growing_sequences(make, codec):
    engine = make(keys=[OLD])
    engine.start(0.0)
    ring = auth.HeartbeatKeys([OLD])
    first = engine.outgoing(0.0)
    verdict, key_id, seq1 = auth.check(sent(first), ring)
    assert (verdict, key_id) == (auth.AUTH_OK, 1)
    engine.set_payload(b"new")                      # a new packet: its sequences go on
    second = engine.outgoing(0.1)
    assert second is not first
    _, _, seq2 = auth.check(sent(second), ring)
    assert seq2 > first.sequence >= seq1
    goodbye = engine.stop(0.2)
    verdict, _, seq3 = auth.check(sent(goodbye), ring)
    assert verdict == auth.AUTH_OK and seq3 > second.sequence
    assert codec.parse(bytes(goodbye.buffer))[5] == L.SHUTDOWN_COMMAND


def test_set_keys_signs_with_the_new_key_at_once_and_off_sends_plain(make):
    engine = make(keys=[OLD])
    engine.start(0.0)
    packet = engine.outgoing(0.0)
    engine.set_keys([NEW, OLD])
    assert auth.check(sent(packet), auth.HeartbeatKeys([NEW]))[:2] == (auth.AUTH_OK, 2)
    engine.set_keys(None)
    assert engine.auth == "off"
    assert auth.check(sent(packet), auth.HeartbeatKeys([NEW]))[0] == auth.NO_TRAILER


def test_the_engine_judges_what_it_receives_and_reports_failures_rate_limited(make, codec,
                                                                          caplog):
    engine = make(keys=[OLD], auth="permissive")
    engine.start(0.0)
    plain = heartbeat(codec, port=4009)
    caplog.set_level(logging.WARNING, logger="mcastmember")
    for i in range(50):
        engine.receive(bytearray(plain), len(plain), 0.01 * i)
    (added,) = engine.events()
    assert added.member.authenticated is False
    assert engine.stats()["auth.no_trailer"] == 50
    for t in (MALFORMED_REPORT_S + 0.1, MALFORMED_REPORT_S + 0.2):
        engine.on_timer(t)
    lines = [r.getMessage() for r in caplog.records if "authentic" in r.getMessage()]
    assert lines == ["50 datagrams on 228.0.0.4:45564 so far were not authentic and fresh "
                     "(no_trailer 50): admitted as unauthenticated (permissive)"]


def test_a_sender_whose_clock_is_off_is_counted_as_skew_and_the_log_says_so(make, codec,
                                                                          caplog):
    engine = make(keys=[OLD])
    engine.start(0.0)
    packet = heartbeat(codec, port=4009)
    behind = time.time_ns() // 1000 - 120_000_000              # its clock 120 s behind ours
    packet += auth.trailer(packet, auth.HeartbeatKeys([OLD]), behind)
    caplog.set_level(logging.WARNING, logger="mcastmember")
    engine.receive(bytearray(packet), len(packet), 0.0)
    engine.on_timer(MALFORMED_REPORT_S + 0.1)
    assert engine.events() == [] and engine.stats()["auth.skew"] == 1
    lines = [r.getMessage() for r in caplog.records if "authentic" in r.getMessage()]
    assert lines == ["1 datagrams on 228.0.0.4:45564 so far were not authentic and fresh "
                     "(skew 1): dropped; skew: a sender's clock is off from ours by more "
                     "than the replay window (check NTP)"]

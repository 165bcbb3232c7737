"""The membership table (no I/O, time passed in), against both implementations."""

import pytest

from mcastmember.tribes.wire import layout as L
from mcastmember.tribes.engine.member import Member
from mcastmember.tribes.engine.table import MemberEvent, Membership

from support import LOCALHOST, heartbeat


def _uid(i):
    return i.to_bytes(16, "big")


def _member(uid=1, port=4001, **fields):
    return Member(LOCALHOST, port, _uid(uid), **fields)


@pytest.fixture
def table(codec):
    return Membership(drop_time=3.0, max_members=3, local=_member(uid=99, port=4000),
                      codec=codec)


def feed(table, packet, now):
    buf = bytearray(65536)
    buf[:len(packet)] = packet
    return table.receive(buf, len(packet), now)


def hb(codec, uid=1, **kw):
    return heartbeat(codec, uid=_uid(uid), **kw)


def test_first_heartbeat_adds_later_ones_refresh_silently(table, codec):
    events = feed(table, hb(codec, alive=5, payload=b"p"), 0.0)
    assert events == (MemberEvent("added", _member()),)
    assert events[0].member.payload == b"p" and events[0].member.alive_ms == 5
    assert feed(table, hb(codec, alive=505, payload=b"p"), 0.5) == ()
    assert table.members()[0].alive_ms == 505
    stats = table.stats()
    assert (stats["received"], stats["fast_path"], stats["added"]) == (2, 1, 1)


def test_payload_or_domain_change_is_an_update(table, codec):
    feed(table, hb(codec, payload=b"a"), 0.0)
    events = feed(table, hb(codec, payload=b"b"), 0.5)
    assert [(e.kind, e.member.payload) for e in events] == [("updated", b"b")]
    events = feed(table, hb(codec, payload=b"b", domain=b"d"), 1.0)
    assert [(e.kind, e.member.domain) for e in events] == [("updated", b"d")]
    assert feed(table, hb(codec, payload=b"b", domain=b"d", alive=9), 1.5) == ()
    assert table.stats()["updated"] == 2


def test_shutdown_removes_at_once(table, codec):
    feed(table, hb(codec), 0.0)
    events = feed(table, hb(codec, command=L.SHUTDOWN_COMMAND), 0.1)
    assert [(e.kind, e.reason, e.member) for e in events] == [("removed", "shutdown", _member())]
    assert len(table) == 0
    assert feed(table, hb(codec, command=L.SHUTDOWN_COMMAND), 0.2) == ()   # unknown: nothing
    assert table.stats()["shutdown_unknown"] == 1


def test_silent_member_expires_after_drop_time(table, codec):
    feed(table, hb(codec, uid=1), 0.0)
    feed(table, hb(codec, uid=2), 1.0)
    assert table.next_expiry() == 3.0
    assert table.expire(2.99) == ()
    events = table.expire(3.01)
    assert [(e.kind, e.reason, e.member) for e in events] == [("removed", "expired", _member(1))]
    feed(table, hb(codec, uid=2), 3.5)                     # keeps 2 alive
    assert table.expire(6.0) == ()
    assert [e.member for e in table.expire(6.6)] == [_member(2)]
    assert table.next_expiry() is None


def test_expired_member_comes_back_as_added(table, codec):
    feed(table, hb(codec), 0.0)
    table.expire(10.0)
    assert [e.kind for e in feed(table, hb(codec), 10.1)] == ["added"]


def test_our_own_heartbeats_are_ignored_and_counted_as_local_only(table, codec):
    # Every one of our heartbeats heard back counts in local (the first
    # parsed, the later ones recognised); received, fast_path and slow_path
    # count only others' datagrams.
    own = hb(codec, uid=99, port=4000)
    assert feed(table, own, 0.0) == ()
    for alive in (7, 8):
        assert feed(table, hb(codec, uid=99, port=4000, alive=alive), 0.5) == ()
    assert feed(table, hb(codec, uid=1), 0.6)[0].kind == "added"
    assert feed(table, hb(codec, uid=1, alive=9), 0.7) == ()
    stats = table.stats()
    assert ((stats["local"], stats["received"], stats["fast_path"], stats["slow_path"],
             stats["members"]) == (3, 2, 1, 1, 1))


def test_restart_with_new_unique_id_is_a_new_member(table, codec):
    feed(table, hb(codec, uid=1), 0.0)
    events = feed(table, hb(codec, uid=2), 0.5)
    assert [(e.kind, e.member.unique_id) for e in events] == [("added", _uid(2))]
    assert len(table) == 2


def test_bound_refuses_strangers_and_never_evicts_members(table, codec):
    for uid in (1, 2, 3):
        feed(table, hb(codec, uid=uid), 0.0)
    assert feed(table, hb(codec, uid=4), 0.1) == ()
    assert feed(table, hb(codec, uid=5), 0.1) == ()
    assert {m.unique_id for m in table.members()} == {_uid(1), _uid(2), _uid(3)}
    assert table.stats()["refused"] == 2
    feed(table, hb(codec, uid=2, command=L.SHUTDOWN_COMMAND), 0.2)
    assert [e.kind for e in feed(table, hb(codec, uid=4), 0.3)] == ["added"]


def test_malformed_and_foreign_datagrams_are_counted_by_reason(table, codec):
    good = hb(codec)
    feed(table, good[:-1], 0.0)
    feed(table, good[:-1], 0.0)
    feed(table, b"FLT2002" + bytes(30), 0.0)
    feed(table, b"hello", 0.0)
    feed(table, good[:8] + b"\x02\x00" + good[10:], 0.0)
    stats = table.stats()
    assert stats["malformed.truncated"] == 2
    assert stats["channel_frames"] == 1
    assert stats["malformed.not_membership"] == 1
    assert stats["malformed.bad_version"] == 1
    assert stats["received"] == 5 and stats["members"] == 0


def test_doctor_probes_are_counted_apart_never_as_malformed(table, codec):
    # mcast-demo doctor's probes (tools/doctor/datagrams.py) share the group: dropped, counted
    # by name, and kept out of malformed.* (which the engine warns about).
    feed(table, b"MCDOCTOR" + bytes(30), 0.0)
    feed(table, b"MCDOCTOR", 0.0)
    feed(table, b"MCDOCTO", 0.0)
    stats = table.stats()
    assert stats["doctor_probes"] == 2
    assert stats["malformed.not_membership"] == 1
    assert stats["received"] == 3 and stats["members"] == 0


def test_domain_filter_compares_bytes(codec):
    table = Membership(drop_time=3.0, domain=b"prod", codec=codec)
    assert feed(table, hb(codec, uid=1, domain=b"test"), 0.0) == ()
    assert feed(table, hb(codec, uid=1, domain=b"test", alive=3), 0.5) == ()   # fast path
    assert [e.kind for e in feed(table, hb(codec, uid=2, domain=b"prod"), 0.5)] == ["added"]
    events = feed(table, hb(codec, uid=2, domain=b"other"), 1.0)   # moved away
    assert [(e.kind, e.reason) for e in events] == [("removed", "filtered")]
    stats = table.stats()     # filtered: every datagram of another domain, recognised ones too
    assert ((stats["filtered"], stats["fast_path"], stats["slow_path"], stats["received"])
            == (3, 1, 3, 4))


def test_ignored_senders_expire_quietly(codec):
    table = Membership(drop_time=1.0, domain=b"prod", codec=codec)
    feed(table, hb(codec, uid=1, domain=b"x"), 0.0)
    assert table.expire(5.0) == ()
    assert feed(table, hb(codec, uid=1, domain=b"x"), 5.1) == ()
    assert table.stats()["filtered"] == 2     # parsed again: it had been forgotten


def test_members_are_ordered_oldest_first(table, codec):
    feed(table, hb(codec, uid=1, alive=100), 0.0)
    feed(table, hb(codec, uid=2, alive=9000), 0.0)
    feed(table, hb(codec, uid=3, alive=50), 0.0)
    assert [m.unique_id for m in table.members()] == [_uid(2), _uid(1), _uid(3)]


def test_removed_event_carries_the_latest_alive_time(table, codec):
    feed(table, hb(codec, alive=1), 0.0)
    feed(table, hb(codec, alive=2500), 2.5)
    (event,) = table.expire(6.0)
    assert event.member.alive_ms == 2500


def test_settings_are_checked(codec):
    with pytest.raises(ValueError):
        Membership(drop_time=0, codec=codec)
    with pytest.raises(ValueError):
        Membership(max_members=0, codec=codec)


def test_regular_sweeps_expire_on_time(table, codec):
    # (no pause guard here: the engine decides when to expire, test_engine.py)
    feed(table, hb(codec, uid=1), 0.0)
    now, events = 0.0, ()
    while not events:
        now += 0.05
        events = table.expire(now)
    assert 3.0 < now <= 3.05 + 1e-9
    assert "pauses" not in table.stats()


def test_a_domain_change_removes_members_in_the_order_they_were_added(codec):
    """The table's records keep the order members came in: a suspect heard
    again counts as added anew, and suspects themselves stay (only
    ``confirm``, a heartbeat or a goodbye ends them)."""
    table = Membership(drop_time=3.0, max_members=8, codec=codec)
    for uid, now in ((1, 0.0), (2, 0.1), (3, 2.0), (4, 2.1)):
        feed(table, hb(codec, uid=uid, domain=b"a"), now)
    suspects = table.expire(3.15, suspect=True)             # 1 and 2 go silent
    assert [e.member.unique_id for e in suspects] == [_uid(1), _uid(2)]
    feed(table, hb(codec, uid=1, domain=b"a"), 3.2)          # 1 heard again: after 3 and 4
    events = table.set_domain(b"b")
    assert [(e.kind, e.reason, e.member.unique_id) for e in events] == [
        ("removed", "filtered", _uid(3)), ("removed", "filtered", _uid(4)),
        ("removed", "filtered", _uid(1))]
    assert [m.unique_id for m in table.members()] == [_uid(2)] and table.is_suspect(_member(2).identity)
    assert table.get(_member(2)) is None and table.last_heard(_member(2)) is None
    assert table.stats()["members"] == len(table) == 1

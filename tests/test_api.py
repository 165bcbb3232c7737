"""What a user asks of members, events and the table:
immutable, hashable values; first seen and last heard; the previous member
of an update; event times; lookups; len, in and iteration. Table tests on a
fake clock, against both implementations."""

import copy
import json
import pickle
import re

import pytest

from mcastmember import EventKind, Member, MemberEvent, Reason
from mcastmember.tribes.wire import layout as L
from mcastmember.tribes.engine.table import Membership

from support import LOCALHOST, heartbeat
from test_table import _member, _uid, feed, hb


@pytest.fixture
def table(codec):
    return Membership(drop_time=3.0, max_members=8, local=_member(uid=99, port=4000),
                      codec=codec)


def test_a_member_is_immutable_and_replace_makes_a_copy():
    member = _member(payload=b"a")
    with pytest.raises(AttributeError, match="immutable"):
        member.payload = b"b"
    with pytest.raises(AttributeError, match="immutable"):
        del member.port
    changed = member.replace(payload=b"b", alive_ms=7)
    assert (member.payload, changed.payload, changed.alive_ms) == (b"a", b"b", 7)
    assert changed == member and hash(changed) == hash(member)     # same identity
    with pytest.raises(TypeError, match="no field colour"):
        member.replace(colour="red")
    for clone in (pickle.loads(pickle.dumps(changed)), copy.copy(changed),
                  copy.deepcopy(changed)):
        assert [getattr(clone, n) for n in Member.__slots__] == \
            [getattr(changed, n) for n in Member.__slots__]


def test_event_kinds_and_reasons_are_the_strings_they_were():
    event = MemberEvent("removed", _member(), "expired", time=0.0)
    assert event.kind is EventKind.REMOVED and event.reason is Reason.EXPIRED
    assert event.kind == "removed" and event.reason == "expired"
    assert (str(event.kind), f"{event.reason}") == ("removed", "expired")
    assert json.dumps([event.kind, event.reason]) == '["removed", "expired"]'
    with pytest.raises(ValueError):
        MemberEvent("vanished", _member())


def test_events_are_immutable_and_hashable_and_equal_whatever_their_time():
    a = MemberEvent("added", _member(), time=1.0)
    b = MemberEvent("added", _member(), time=2.0)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert MemberEvent("removed", _member(), "shutdown") != MemberEvent("removed", _member(),
                                                                        "expired")
    with pytest.raises(AttributeError):
        a.kind = "removed"
    assert pickle.loads(pickle.dumps(a)).time == 1.0


def test_an_events_json_carries_its_time_and_the_previous_member():
    previous = _member(payload=b"a")
    event = MemberEvent("updated", _member(payload=b"b"), previous=previous,
                        time=1764720000.25)
    line = event.to_dict()
    assert line["time"] == "2025-12-03T00:00:00.250Z"
    assert line["previous"]["payload_hex"] == "61" and line["member"]["payload_hex"] == "62"
    assert set(line) == {"event", "reason", "member", "previous", "time"}
    fresh = MemberEvent("added", _member()).to_dict()
    assert fresh["previous"] is None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", fresh["time"])


def test_first_seen_and_last_heard_follow_the_member(table, codec):
    [added] = feed(table, hb(codec, payload=b"a"), 1.0)
    assert (added.member.first_seen, added.member.last_heard) == (1.0, 1.0)
    assert feed(table, hb(codec, payload=b"a", alive=9), 1.5) == ()      # fast path
    [member] = table.members()
    assert (member.first_seen, member.last_heard) == (1.0, 1.5)
    assert table.get(member).last_heard == 1.5
    [updated] = feed(table, hb(codec, payload=b"b"), 2.0)
    assert updated.kind == "updated" and updated.previous.payload == b"a"
    assert (updated.member.first_seen, updated.member.last_heard) == (1.0, 2.0)
    assert (updated.previous.first_seen, updated.previous.last_heard) == (1.0, 1.5)
    [removed] = table.expire(5.5)
    assert (removed.reason, removed.member.first_seen, removed.member.last_heard) == \
        ("expired", 1.0, 2.0)


def test_a_suspect_heard_again_keeps_its_first_seen(table, codec):
    feed(table, hb(codec, payload=b"a"), 1.0)
    [suspect] = table.expire(4.5, suspect=True)
    assert suspect.kind == "suspect" and suspect.member.last_heard == 1.0
    [updated] = feed(table, hb(codec, payload=b"b"), 4.6)
    assert updated.kind == "updated" and updated.previous.payload == b"a"
    assert (updated.member.first_seen, updated.member.last_heard) == (1.0, 4.6)


def test_a_removal_by_shutdown_carries_when_it_was_last_heard(table, codec):
    feed(table, hb(codec), 1.0)
    feed(table, hb(codec, alive=5), 1.25)
    [removed] = feed(table, hb(codec, command=L.SHUTDOWN_COMMAND), 1.5)
    # The goodbye itself is news, not a heartbeat: last heard stays 1.25.
    assert (removed.reason, removed.member.last_heard) == ("shutdown", 1.25)


def test_silent_for_counts_from_last_heard():
    assert _member().silent_for is None
    import time
    member = _member().replace(last_heard=time.monotonic() - 2.0)
    assert 2.0 <= member.silent_for < 3.0
    assert _member().replace(last_heard=time.monotonic() + 5).silent_for == 0.0


def test_lookups_by_unique_id_and_address_len_in_and_iteration(table, codec):
    feed(table, hb(codec, uid=1, port=4001), 0.0)
    feed(table, hb(codec, uid=2, port=4002), 0.1)
    assert table.by_unique_id(_uid(2)).port == 4002
    assert table.by_unique_id(_uid(7)) is None
    assert table.by_address("127.0.0.1", 4001).unique_id == _uid(1)
    assert table.by_address(LOCALHOST, 4002).unique_id == _uid(2)
    assert table.by_address("127.0.0.1", 4009) is None
    with pytest.raises(ValueError, match="not an IP address"):
        table.by_address("node-1", 4001)
    assert len(table) == 2 and _member(uid=1) in table and _member(uid=3) not in table
    assert sorted(m.port for m in table) == [4001, 4002]


def test_decoded_members_have_no_table_times():
    from mcastmember import decode
    member = decode(heartbeat(port=4005))
    assert (member.first_seen, member.last_heard, member.silent_for) == (None, None, None)


def test_help_shows_every_setting_with_its_default_on_both_fronts():
    import inspect
    import pydoc
    import typing
    from mcastmember import AsyncMembership, McastService, ServiceConfig
    from mcastmember.tribes.engine.config import Settings
    config = {name: p.default for name, p in inspect.signature(ServiceConfig).parameters.items()
              if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(typing.get_type_hints(Settings)) == set(config)      # one list of names
    assert len(config) == 34
    for front in (McastService, AsyncMembership):
        params = inspect.signature(front).parameters
        assert list(params)[:3] == ["address", "port", "event_queue_size"]
        assert {name: p.default for name, p in params.items() if name in config} == config
        text = pydoc.render_doc(front, renderer=pydoc.plaintext)
        for name in config:
            # name=default, or name: 'type' = default with annotations
            assert re.search(rf"\b{name}(: '[^']*' = |=)", text) and f"``{name}``" in text, name

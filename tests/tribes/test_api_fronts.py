"""The fronts' table API on running groups (loopback, TTL 0): lookups,
len/in/iteration, a listener that replays the current members with no gap,
the threaded ``wait_for``, the asyncio front's plain callbacks."""

import threading
import time

import pytest

from mcastmember import McastService

from fronts import FAST, FRONTS, Events
from support import GROUP, LOOPBACK, wait_until

pytestmark = pytest.mark.network


def test_lookups_len_in_and_iteration_on_both_fronts(running_front):
    a, b = running_front(4001), running_front(4002)
    wait_until(lambda: [m.port for m in a.members()] == [4002])
    front, other = a.front, b.front.local_member
    call = getattr(a, "_call", lambda fn, *args: fn(*args))    # the loop's thread for asyncio
    assert call(len, front) == 1 and call(lambda: other in front)
    assert call(lambda: [m.port for m in front]) == [4002]
    assert call(front.by_unique_id, other.unique_id).port == 4002
    assert call(front.by_address, "127.0.0.1", 4002).unique_id == other.unique_id
    assert call(front.by_address, "127.0.0.1", 4003) is None
    assert call(front.by_unique_id, bytes(16)) is None
    assert bool(front) and call(lambda: a.front.local_member not in front)


def test_a_lone_member_counts_its_own_heartbeats_as_local_not_received(running_front):
    # Multicast loopback brings every heartbeat back: each counts in local
    # (the first parsed, the rest recognised on the fast path), none in
    # received, fast_path or slow_path.
    a = running_front(4001)
    wait_until(lambda: a.stats()["local"] >= 3)
    stats = a.stats()
    assert ((stats["received"], stats["fast_path"], stats["slow_path"], stats["members"])
            == (0, 0, 0, 0))
    assert stats["sent"] >= stats["local"] >= 3


def service(group_port, member_port, **settings):
    return McastService(GROUP, group_port, member_port=member_port,
                        **dict(LOOPBACK, **FAST, **settings))


def replayed_members(events):
    """The members a listener believes in, from its events; AssertionError
    on an "added" for a member it already has or a "removed" for one it has not."""
    present = set()
    for event in events:
        key = (event.member.port, event.member.unique_id)
        if event.kind == "added":
            assert key not in present, f"added twice: {event}"
            present.add(key)
        elif event.kind == "removed":
            assert key in present, f"removed unseen: {event}"
            present.discard(key)
    return present


def test_a_replaying_listener_gets_the_members_then_every_change_with_no_gap(group_port):
    """Listeners registered while members come and go: each ends up with
    exactly the table, no member added twice, none removed unseen."""
    observer = service(group_port, 4000)
    observer.start()
    listeners, members = [], []
    try:
        for i in range(6):
            member = service(group_port, 4001 + i)
            member.start()
            members.append(member)
            events = Events()
            observer.add_listener(events, replay=True)
            listeners.append(events)
            if i % 2:
                members.pop(0).stop()
        wait_until(lambda: sorted(m.port for m in observer.members())
                   == sorted(m.local_member.port for m in members))
        expected = {(m.port, m.unique_id) for m in observer.members()}
        for events in listeners:
            wait_until(lambda: replayed_members(events.events) == expected)
        first = listeners[0].events[0]
        assert (first.kind, first.member.port) == ("added", 4001)
    finally:
        for member in members:
            member.stop()
        observer.stop()


def test_wait_for_returns_the_members_times_out_and_ends_with_a_stop(group_port):
    a, b = service(group_port, 4001), service(group_port, 4002)
    with pytest.raises(RuntimeError, match="not running"):
        a.wait_for(lambda members: True is False)
    with a:
        assert a.wait_for(lambda members: True) == []
        with pytest.raises(TimeoutError):
            a.wait_for(lambda members: len(members) == 5, timeout=0.2)
        with b:
            members = a.wait_for(lambda members: [m.port for m in members] == [4002],
                                 timeout=5)
            assert [m.port for m in members] == [4002]
        outcome = []

        def wait():
            try:
                a.wait_for(lambda members: len(members) == 9)
            except RuntimeError as error:
                outcome.append(str(error))
        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.2)      # most likely inside wait_for when the stop comes (before it, the same error)
    waiter.join(5)
    assert outcome == ["McastService is not running"]


def test_the_asyncio_front_takes_plain_callbacks_and_replays_too(group_port):
    a = FRONTS["asyncio"](group_port, 4001)
    b = FRONTS["threads"](group_port, 4002)
    try:
        a.start()
        b.start()
        wait_until(lambda: [m.port for m in a.members()] == [4002])
        plain, replaying = Events(), Events()
        a._call(a.front.add_listener, plain)
        a._call(a.front.add_listener, replaying, True)
        assert [(e.kind, e.member.port) for e in replaying.events] == [("added", 4002)]
        b.stop()
        for events in (plain, replaying):
            events.wait_for(lambda e: e.kind == "removed")
        assert [(e.kind, e.reason, e.member.port) for e in plain.events] == \
            [("removed", "shutdown", 4002)]
        assert plain.threads == {"test-loop"}
        a._call(a.front.remove_listener, plain)
        assert a.stats()["subscribers"] == 2        # the test's stream and one callback
    finally:
        a.close()
        b.close()

"""The threaded service on loopback (interface 127.0.0.1, TTL 0): two members
in one process see each other come, change and go."""

import logging
import socket
import threading
import time

import pytest

from mcastmember import ConfigurationError, McastService

from mcastmember.tribes.wire import layout as L

from fronts import Events as Recorder
from support import GROUP, LOOPBACK, async_wait_until, fake_members, wait_until

pytestmark = pytest.mark.network
FAST = {"frequency": 100, "drop_time": 400}


def service(group_port, member_port, **settings):
    options = dict(LOOPBACK, member_port=member_port, **FAST)
    options.update(settings)
    return McastService(GROUP, group_port, **options)


def test_two_services_see_each_other_and_the_shutdown(group_port):
    a_events, b_events = Recorder(), Recorder()
    a = service(group_port, 4001, payload="alpha", domain="dom")
    a.add_listener(a_events)
    b = service(group_port, 4002, frequency=500, drop_time=3000)
    b.add_listener(b_events)
    with a, b:
        added = a_events.wait_for(lambda e: e.kind == "added" and e.member.port == 4002, 1.0)
        seen = b_events.wait_for(lambda e: e.kind == "added" and e.member.port == 4001, 1.0)
        assert seen.member.payload == b"alpha" and seen.member.domain == b"dom"
        assert seen.member.unique_id == a.local_member.unique_id
        assert added.member.address == "127.0.0.1"
        assert [m.port for m in b.members()] == [4001]
        a.stop()
        stopped_at = time.monotonic()
        gone = b_events.wait_for(lambda e: e.kind == "removed", 1.0)
        assert time.monotonic() - stopped_at < 1.0
        assert (gone.reason, gone.member.port) == ("shutdown", 4001)
        assert b.members() == []
    assert b_events.kinds(4001) == [("added", None), ("removed", "shutdown")]
    assert b_events.threads == {"mcastmember-dispatch"}
    assert b.stats()["sent"] >= 1


def test_silent_member_is_expired(group_port):
    """The driver wakes at the engine's expiry deadline (the timing itself is
    tests/tribes/test_engine.py's, on a fake clock)."""
    events = Recorder()
    listener = service(group_port, 4001)
    listener.add_listener(events)
    with listener:
        fake_members(group_port, 1)
        events.wait_for(lambda e: e.kind == "added", 1.0)
        gone = events.wait_for(lambda e: e.kind == "removed", 2.0)
    assert gone.reason == "expired" and gone.member.port == 5000


def test_payload_change_reaches_the_other_member_at_once(group_port):
    events = Recorder()
    with service(group_port, 4001, frequency=2000, drop_time=6000) as a, \
            service(group_port, 4002) as b:
        b.add_listener(events)
        events.wait_for(lambda e: e.kind == "added", 3.0)
        changed_at = time.monotonic()
        a.set_payload(b"\x00\x01new")
        update = events.wait_for(lambda e: e.kind == "updated", 1.0)
        assert time.monotonic() - changed_at < 1.0   # not after the 2 s period
        assert update.member.payload == b"\x00\x01new"
        assert b.members()[0].payload == b"\x00\x01new"


def test_a_failing_listener_is_logged_and_harms_nothing(group_port, caplog):
    events = Recorder()

    def broken(event):
        raise RuntimeError("listener bug")

    with service(group_port, 4001) as a:
        a.add_listener(broken)
        a.add_listener(events)
        with caplog.at_level(logging.ERROR, logger="mcastmember"):
            with service(group_port, 4002):
                events.wait_for(lambda e: e.kind == "added", 2.0)
            events.wait_for(lambda e: e.kind == "removed", 2.0)
        assert a.stats()["listener_errors"] == 2
    assert "listener bug" in caplog.text


def test_malformed_datagrams_are_counted_not_raised(group_port):
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
    with sender, service(group_port, 4001) as a:
        for junk in (b"TRIBES-B\x01\x00garbage", b"FLT2002" + bytes(40), b"x" * 5):
            sender.sendto(junk, (GROUP, group_port))
        stats = wait_until(lambda: (stats := a.stats()).get("channel_frames")
                           and stats.get("malformed.not_membership") and stats)
        assert stats["malformed.truncated"] == 1
        assert stats["channel_frames"] == 1
        assert stats["malformed.not_membership"] == 1
        assert a.members() == []


def test_lifecycle(group_port):
    a = service(group_port, 4001)
    a.start()
    with pytest.raises(RuntimeError):
        a.start()
    a.stop()
    a.stop()       # stopping twice is harmless
    a.start()      # and it can start again
    assert a.running
    a.stop()
    assert not a.running


@pytest.mark.parametrize("settings, message", [
    (dict(address="10.0.0.1"), "not a multicast group"),
    (dict(address="not-an-address"), "not an IPv4 or IPv6 address"),
    (dict(address="fd00::5"), "not a multicast group"),
    (dict(address="ff02::4", interface=None), 'name the card, e.g. interface="eth0"'),
    (dict(address="ff02::4"), "interface address 127.0.0.1 is IPv4, the group is IPv6"),
    (dict(address="228.0.0.4", interface="::1"), "interface address ::1 is IPv6, the group is IPv4"),
    (dict(interface="nosuch0"), "no network interface 'nosuch0' on this host \\(this host has: lo"),
    (dict(interface=["lo", "127.0.0.1"]), "lists a card twice: lo, lo"),
    (dict(interface=[]), "at least one card"),
    (dict(port=70000), "port 70000 is out of range"),
    (dict(interface="192.0.2.77"), "no network interface"),
    (dict(member_port=-5), "member_port"),
    (dict(frequency=500, drop_time=400), "drop_time"),
    (dict(ttl=300), "ttl 300"),
    (dict(domain="{1,2"), "must end with"),
    (dict(payload=bytes(L.MAX_PACKET_LEN)), "limit is 65507"),
])
def test_bad_settings_are_refused_clearly(settings, message):
    options = dict(LOOPBACK, address=GROUP, port=45564)
    options.update(settings)
    with pytest.raises(ConfigurationError, match=message):
        McastService(options.pop("address"), options.pop("port"), **options)


def test_a_listener_may_stop_the_service(group_port):
    a = service(group_port, 4001)
    stopped = threading.Event()

    def leave_when_someone_joins(event):
        if event.kind == "added":
            a.stop()
            stopped.set()

    a.add_listener(leave_when_someone_joins)
    with a, service(group_port, 4002):
        assert stopped.wait(3)
        assert not a.running


@pytest.mark.parametrize("front", ["threaded", "asyncio"])
def test_set_domain_changes_what_filter_domain_keeps(group_port, front):
    """A member of the other domain, already recognised on the fast path as
    filtered, is added once we move to its domain; ours is then removed."""
    import asyncio
    from mcastmember.tribes.fronts.aio import AsyncMembership
    ours, theirs = Recorder(), Recorder()
    b = service(group_port, 4002, domain="b")
    c = service(group_port, 4003, domain="a")
    settings = dict(LOOPBACK, member_port=4001, domain="a", filter_domain=True, **FAST)

    def check(members_then):
        assert [m.port for m in members_then] == [4003]

    with b, c:
        if front == "threaded":
            a = McastService(GROUP, group_port, **settings)
            a.add_listener(ours)
            with a:
                ours.wait_for(lambda e: e.kind == "added" and e.member.port == 4003)
                wait_until(lambda: a.stats()["filtered"] >= 1)    # b's heartbeats are heard, and filtered
                check(a.members())
                a.set_domain("b")
                ours.wait_for(lambda e: e.kind == "added" and e.member.port == 4002)
                removed = ours.wait_for(lambda e: e.kind == "removed")
                assert (removed.reason, removed.member.port) == ("filtered", 4003)
                assert [m.port for m in a.members()] == [4002]
        else:
            async def run():
                async with AsyncMembership(GROUP, group_port, **settings) as a:
                    stream = a.events()
                    await a.wait_for(lambda ms: [m.port for m in ms] == [4003], timeout=5)
                    await async_wait_until(lambda: a.stats()["filtered"] >= 1)   # b heard, and filtered
                    check(a.members())
                    a.set_domain("b")
                    await a.wait_for(lambda ms: [m.port for m in ms] == [4002], timeout=5)
                    seen = []
                    async for event in stream:
                        seen.append((event.kind, event.reason, event.member.port))
                        if len(seen) == 3:
                            break
                    assert seen == [("added", None, 4003), ("removed", "filtered", 4003),
                                    ("added", None, 4002)]
            asyncio.run(run())

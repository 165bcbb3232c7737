"""What a slow reader costs the fronts, on
loopback (127.0.0.1, TTL 0): waiting events are bounded in bytes as well as
in count, and stop() returns while a listener blocks."""

import asyncio
import logging
import threading
import time

import pytest

from mcastmember import AsyncMembership, EventsLost, McastService
from mcastmember.tribes.kernel import _fast_py

from support import GROUP, LOCALHOST, LOOPBACK, fake_members, loopback_sender, wait_until

pytestmark = pytest.mark.network

PAYLOAD = 60_000
FIT = (16 << 20) // PAYLOAD              # 279 events of 60 KB in the default 16 MiB
LARGE = FIT + 21
SLOW = {"drop_time": 60_000}              # nobody expires during a test
BURST = 16                                # datagrams between waits: the receive buffer holds them


def large_members(group_port, count, heard):
    """Strangers 0..``count - 1`` (ports 6000 + i) with 60 KB payloads, a
    burst at a time, each sent again until ``heard()`` (a count of members)
    has them all: a burst may overflow a busy receiver's buffer. Sent again,
    a heartbeat changes nothing (no event)."""
    with loopback_sender() as sender:
        for start in range(0, count, BURST):
            end = min(start + BURST, count)
            resend_at = [0.0]

            def burst_heard():         # the burst again every half second until heard
                if heard() >= end:
                    return True
                if time.monotonic() >= resend_at[0]:
                    for i in range(start, end):
                        packet = _fast_py.encode(1, 6000 + i, -1, -1, LOCALHOST, b"", b"",
                                                 (2000 + i).to_bytes(16, "big"), bytes(PAYLOAD))
                        sender.sendto(packet, (GROUP, group_port))
                    resend_at[0] = time.monotonic() + 0.5
                return False
            wait_until(burst_heard, interval=0.005, message=lambda: f"members {start}..{end - 1} heard: {heard()}")
            assert heard() == end


def blocked_on_first(seen, release):
    """A listener that keeps its events in ``seen`` and blocks on the first
    until ``release`` is set."""
    def listener(event):
        seen.append(event)
        if len(seen) == 1:
            release.wait(60)
    return listener


# -- events bounded in bytes -----------------------------------------------------------
def test_a_blocked_listener_holds_at_most_the_byte_bound_of_large_events(group_port):
    """60 KB payloads and a listener that blocks: 279 events wait (16 MiB),
    the rest are dropped, counted and reported by one EventsLost."""
    member = McastService(GROUP, group_port, member_port=4001, **LOOPBACK, **SLOW)
    seen, release = [], threading.Event()
    member.add_listener(blocked_on_first(seen, release))
    with member:
        try:
            fake_members(group_port, 1)      # the listener blocks on it: the queue is empty
            wait_until(lambda: len(seen) == 1)
            large_members(group_port, LARGE, lambda: member.stats()["added"] - 1)
            # (counted in the table a moment before they are queued)
            wait_until(lambda: member.stats()["events_dropped"] == LARGE - FIT)
        finally:
            release.set()
        wait_until(lambda: len(seen) == 2 + FIT)
        assert [e.member.port for e in seen[1:1 + FIT]] == list(range(6000, 6000 + FIT))
        assert seen[1 + FIT] == EventsLost(LARGE - FIT)


def test_an_unread_event_stream_holds_at_most_the_byte_bound_of_large_events(group_port):
    async def scenario():
        async with AsyncMembership(GROUP, group_port, member_port=4001, **LOOPBACK,
                                   **SLOW) as member:
            stream = member.events()
            await heard_from(member, group_port, LARGE)
            assert member.stats()["events_dropped"] == LARGE - FIT     # (queued as heard)
            got = [await stream.__anext__() for _ in range(FIT + 1)]
            assert [e.member.port for e in got[:FIT]] == list(range(6000, 6000 + FIT))
            assert got[FIT] == EventsLost(LARGE - FIT)
            stream.close()
    asyncio.run(scenario())


async def heard_from(member, group_port, count):
    """large_members for the asyncio front: sent from a thread, while the
    loop reads them."""
    loop = asyncio.get_running_loop()

    def heard():
        return asyncio.run_coroutine_threadsafe(counted(), loop).result(10)

    async def counted():
        return len(member.members())
    await loop.run_in_executor(None, large_members, group_port, count, heard)


@pytest.mark.parametrize("make", ["threads", "asyncio"])
def test_the_byte_bound_must_be_a_positive_whole_number(make):
    with pytest.raises(ValueError, match="event_queue_bytes must be at least 1"):
        (McastService if make == "threads" else AsyncMembership)(event_queue_bytes=0)


def test_a_stream_smaller_than_one_event_still_delivers_one_at_a_time(group_port):
    async def scenario():
        async with AsyncMembership(GROUP, group_port, member_port=4001, **LOOPBACK,
                                   **SLOW) as member:
            stream = member.events(queue_bytes=1000)
            await heard_from(member, group_port, 3)
            got = [await stream.__anext__() for _ in range(2)]
            assert (got[0].member.port, got[1]) == (6000, EventsLost(2))
            stream.close()
    asyncio.run(scenario())


# -- stop() while a listener blocks ----------------------------------------------------
def test_stop_returns_while_a_listener_blocks_and_the_rest_is_delivered_after(group_port,
                                                                              caplog):
    watcher = McastService(GROUP, group_port, member_port=4002, **LOOPBACK, **SLOW)
    member = McastService(GROUP, group_port, member_port=4001, **LOOPBACK, **SLOW)
    seen, release = [], threading.Event()
    member.add_listener(blocked_on_first(seen, release))
    try:
        with watcher:
            assert dispatchers() == 1
            member.start()
            wait_until(lambda: len(seen) == 1 and len(watcher.members()) == 1)
            fake_members(group_port, 1)
            wait_until(lambda: len(member.members()) == 2)
            stopper = threading.Thread(target=member.stop, kwargs={"timeout": 0.1}, daemon=True)
            with caplog.at_level(logging.WARNING, logger="mcastmember"):
                stopper.start()
                stopper.join(20)
                assert not stopper.is_alive()           # before: it waited for the listener
            assert not member.running
            wait_until(lambda: 4001 not in [m.port for m in watcher.members()])    # its goodbye
            left = [r for r in caplog.records if "left running" in r.getMessage()]
            assert len(left) == 1
            release.set()
            # Then the listener gets what was queued: nothing is lost.
            wait_until(lambda: [(e.kind, e.reason) for e in seen[1:]]
                       == [("added", None), ("removed", "stopped"), ("removed", "stopped")])
            wait_until(lambda: dispatchers() == 1)        # the watcher's: ours has ended
    finally:
        release.set()


def dispatchers():
    return sum(t.name == "mcastmember-dispatch" for t in threading.enumerate())

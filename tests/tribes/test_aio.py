"""AsyncMembership on loopback, under the default loop and uvloop."""

import asyncio
import threading
import time

import pytest

from mcastmember import McastService
from mcastmember.tribes.fronts.aio import AsyncMembership, EventsLost

from support import GROUP, LOOPBACK, async_wait_until, fake_members

pytestmark = pytest.mark.network
FAST = {"frequency": 100, "drop_time": 400}

try:
    import uvloop
except ImportError:
    uvloop = None


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request):
    """Runs a coroutine to completion on a fresh loop of each kind."""
    if request.param == "uvloop":
        if uvloop is None:
            pytest.skip("uvloop is not installed")
        return lambda coro: uvloop.run(asyncio.wait_for(coro, 30))
    return lambda coro: asyncio.run(asyncio.wait_for(coro, 30))


def membership(group_port, member_port, **settings):
    options = dict(LOOPBACK, member_port=member_port, **FAST)
    options.update(settings)
    return AsyncMembership(GROUP, group_port, **options)


async def next_event(stream, timeout=3.0):
    return await asyncio.wait_for(stream.__anext__(), timeout)


def test_join_follow_and_leave(run, group_port):
    async def scenario():
        async with membership(group_port, 4001, payload="a") as b:
            stream = b.events()
            async with membership(group_port, 4002, payload="x") as a:
                members = await b.wait_for(lambda ms: len(ms) == 1, timeout=2)
                assert members[0].port == 4002 and members[0].payload == b"x"
                event = await next_event(stream)
                assert (event.kind, event.member.port) == ("added", 4002)
                a.set_payload(b"y")
                event = await next_event(stream)
                assert (event.kind, event.member.payload) == ("updated", b"y")
                left = time.monotonic()
            event = await next_event(stream)
            assert (event.kind, event.reason, event.member.port) == ("removed", "shutdown", 4002)
            assert time.monotonic() - left < 0.5
            assert b.members() == []
        with pytest.raises(StopAsyncIteration):     # the stream ends with the membership
            await next_event(stream)
    run(scenario())


def test_stream_starts_with_current_members_then_changes(run, group_port):
    async def scenario():
        async with membership(group_port, 4001) as b, membership(group_port, 4002):
            await b.wait_for(lambda ms: len(ms) == 1, timeout=2)
            stream = b.events()
            first = await next_event(stream)
            assert (first.kind, first.member.port) == ("added", 4002)
            fake_members(group_port, 1)
            second = await next_event(stream)
            assert (second.kind, second.member.port) == ("added", 5000)
    run(scenario())


def test_slow_subscriber_gets_events_lost_and_others_get_everything(run, group_port):
    async def scenario():
        async with membership(group_port, 4001, drop_time=5000, frequency=1000) as m:
            slow, fast = m.events(queue_size=2), m.events()
            seen_fast = []

            async def follow():
                async for event in fast:
                    seen_fast.append(event)
                    if len(seen_fast) == 10:
                        return
            follower = asyncio.ensure_future(follow())
            fake_members(group_port, 10)
            await m.wait_for(lambda ms: len(ms) == 10, timeout=3)
            await asyncio.wait_for(follower, 3)
            assert sorted(e.member.port for e in seen_fast) == list(range(5000, 5010))
            got = [await next_event(slow) for _ in range(3)]
            assert [e.kind for e in got] == ["added", "added", "events_lost"]
            assert isinstance(got[2], EventsLost) and got[2].count == 8
            assert len(m.members()) == 10        # the receiver kept everything
            fake_members(group_port, 1, payload=b"new")   # later events flow again
            event = await next_event(slow)
            assert (event.kind, event.member.port) == ("updated", 5000)
    run(scenario())


def test_no_threads_are_started(run, group_port):
    async def scenario():
        before = threading.active_count()
        async with membership(group_port, 0, tomcat=True) as m:
            await asyncio.sleep(0.2)             # on purpose: time for a thread to start, and none may
            assert threading.active_count() == before
            assert m.local_member.port != 0      # the kernel's choice is advertised
            _, writer = await asyncio.open_connection("127.0.0.1", m.local_member.port)
            writer.write(b"probe" * 1000)
            await writer.drain()
            writer.close()
    run(scenario())


def test_wait_for_times_out(run, group_port):
    async def scenario():
        async with membership(group_port, 4001) as m:
            with pytest.raises(asyncio.TimeoutError):
                await m.wait_for(lambda ms: len(ms) == 5, timeout=0.2)
    run(scenario())


def test_sees_and_is_seen_by_the_threaded_service(run, group_port):
    async def scenario():
        with McastService(GROUP, group_port, member_port=4003, **LOOPBACK, **FAST) as threaded:
            async with membership(group_port, 4001) as m:
                members = await m.wait_for(lambda ms: [x.port for x in ms] == [4003], timeout=2)
                assert members[0].unique_id == threaded.local_member.unique_id
                await async_wait_until(lambda: [x.port for x in threaded.members()] == [4001])
            stream = m.events()
        assert [e async for e in stream] == []
    run(scenario())


def test_silent_member_expires(run, group_port):
    async def scenario():
        async with membership(group_port, 4001) as m:
            stream = m.events()
            sent = time.monotonic()            # heard after this, so expired >= 0.4 s after it
            fake_members(group_port, 1)
            assert (await next_event(stream)).kind == "added"
            event = await next_event(stream)
            assert (event.kind, event.reason) == ("removed", "expired")
            assert 0.4 <= time.monotonic() - sent < 0.7
    run(scenario())

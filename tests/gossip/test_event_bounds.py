"""The events waiting for a gossip member's listeners and event streams are
bounded in count and in bytes (``event_queue_size``, ``event_queue_bytes``:
the heartbeat fronts' settings, same default and meaning), whoever floods
the member with large user events: past either bound the reader gets one
``EventsLost`` where the gap is, counted in stats(). On loopback only: user
events of 9 KB (near the 9 KiB Serf sends at most: bigger ones are refused
before any queue) sent as raw datagrams from 127.0.0.3."""

import asyncio
import inspect
import socket
import threading

import pytest

pytest.importorskip("msgpack")

from mcastmember import (AsyncMembership, AsyncSerfService, ConfigurationError, EventsLost,  # noqa: E402
                         McastService, SerfService)
from mcastmember._runtime.events import EVENT_QUEUE_BYTES  # noqa: E402
from mcastmember.gossip.memberlist.layout import MessageType  # noqa: E402
from mcastmember.gossip.serf import messages as serf_messages  # noqa: E402
from mcastmember.gossip.serf.node import SerfMemberEvent, UserEventReceived  # noqa: E402
from mcastmember.tools.gossip_view import event_json, event_text  # noqa: E402
from support import async_wait_until, free_gossip_port, wait_until  # noqa: E402

ATTACKER = "127.0.0.3"
NAME, PAYLOAD = "flood", 9_000
COST = len(NAME) + PAYLOAD          # what a user event weighs in the bound: its name and payload
SENT = 10
# Each case: the front's bound, and how many of the flood fit in it. The
# first event, our own "joined", is in the blocked listener's hands, but
# waits in the stream's buffer (a few bytes, one of its count).
BOUNDS = {"bytes": ({"event_queue_bytes": 4 * COST + 1000}, {"threads": 4, "asyncio": 4}),
          "count": ({"event_queue_size": 3}, {"threads": 3, "asyncio": 2})}
FRONTS = {"threads": SerfService, "asyncio": AsyncSerfService}


def user_event(ltime):
    """A user event as another member gossips it: memberlist's user message
    around Serf's (no keys: the member under attack has none)."""
    event = serf_messages.UserEvent(ltime=ltime, name=NAME, payload=bytes([ltime]) * PAYLOAD)
    return bytes((MessageType.USER,)) + serf_messages.encode(event)


def flooder():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((ATTACKER, 0))
    return sock


def flood_summary(seen):
    """What a reader got: ("joined", name), ("user", ltime) and EventsLost."""
    out = []
    for event in seen:
        if isinstance(event, SerfMemberEvent):
            out.append((event.kind, event.member.name))
        elif isinstance(event, UserEventReceived):
            out.append(("user", event.ltime))
        else:
            out.append(event)
    return out


def expected(fit, lost=None):
    lost = SENT - fit if lost is None else lost
    return [("joined", "a")] + [("user", t) for t in range(1, fit + 1)] + [EventsLost(lost)]


@pytest.mark.parametrize("bound", sorted(BOUNDS))
def test_a_listener_that_blocks_gets_events_lost_past_either_bound_threads(bound):
    settings, fit = BOUNDS[bound][0], BOUNDS[bound][1]["threads"]
    port = free_gossip_port()
    entered, release = threading.Event(), threading.Event()
    seen = []

    def slow(event):
        seen.append(event)
        entered.set()
        release.wait()

    svc = SerfService("a", "127.0.0.1", port, **settings)
    svc.add_listener(slow)
    with svc, flooder() as sock:
        assert entered.wait(5)               # the dispatcher holds our "joined": the rest queue
        for ltime in range(1, SENT + 1):
            sock.sendto(user_event(ltime), ("127.0.0.1", port))
            wait_until(lambda: svc.stats()["datagrams_received"] == ltime)
        assert svc.stats()["listener_events_dropped"] == SENT - fit
        release.set()
        wait_until(lambda: len(seen) == fit + 2)
        assert flood_summary(seen) == expected(fit)


@pytest.mark.parametrize("bound", sorted(BOUNDS))
def test_an_event_stream_that_does_not_read_gets_events_lost_past_either_bound_asyncio(bound):
    """The asyncio front calls its listeners on the loop (a slow one holds
    the loop, and nothing waits): its slow readers are event streams."""
    settings, fit = BOUNDS[bound][0], BOUNDS[bound][1]["asyncio"]
    port = free_gossip_port()

    async def main():
        async with AsyncSerfService("a", "127.0.0.1", port, **settings) as a:
            stream, small = a.events(), a.events(queue_bytes=2 * COST + 1000)
            with flooder() as sock:
                for ltime in range(1, SENT + 1):
                    sock.sendto(user_event(ltime), ("127.0.0.1", port))
                    await async_wait_until(lambda: a.stats()["datagrams_received"] >= ltime, interval=0.002)
            assert a.stats()["stream_events_dropped"] == (SENT - fit) + (SENT - min(fit, 2))
        assert flood_summary([e async for e in stream]) == expected(fit)
        assert flood_summary([e async for e in small]) == expected(min(fit, 2))
    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize("front", sorted(FRONTS))
@pytest.mark.parametrize("value, message", [
    (0, "event_queue_bytes must be at least 1"),
    (True, "event_queue_bytes must be a whole number, not True"),
    ("16M", "event_queue_bytes must be a whole number, not '16M'"),
])
def test_event_queue_bytes_is_checked_by_both_fronts(front, value, message):
    with pytest.raises(ConfigurationError) as caught:
        FRONTS[front]("a", event_queue_bytes=value)
    assert str(caught.value) == message


def test_both_fronts_default_to_the_heartbeat_fronts_bound_and_streams_check_theirs():
    for front in (*FRONTS.values(), McastService, AsyncMembership):
        assert inspect.signature(front).parameters["event_queue_bytes"].default == EVENT_QUEUE_BYTES == 16 << 20
    with pytest.raises(ValueError, match=r"^queue_bytes must be at least 1, not 0$"):
        AsyncSerfService("a").events(queue_bytes=0)


def test_the_gossip_demo_shows_where_its_listener_lost_events():
    line = event_json(EventsLost(6), now=0.0)
    assert line == {"event": "events_lost", "count": 6, "time": "1970-01-01T00:00:00.000Z"}
    assert event_text(line) == "6 events lost: the listener fell behind"

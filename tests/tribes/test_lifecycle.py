"""Lifecycle defects of the fronts once found, on loopback (127.0.0.1, TTL 0):
each test failed before the engine and the drivers were rebuilt."""

import asyncio
import contextlib
import gc
import os
import shutil
import subprocess
import threading
import time
import warnings

import pytest

from mcastmember import AsyncMembership, EventsLost, McastService
from mcastmember._runtime import net

from fronts import FAST, FRONTS, Events
from support import GROUP, LOOPBACK, fake_members, wait_until

pytestmark = pytest.mark.network


@pytest.fixture(params=sorted(FRONTS))
def front(request, group_port):
    """A factory of members of one kind of front; all are closed afterwards."""
    made = []

    def make(member_port, **settings):
        member = FRONTS[request.param](group_port, member_port, **settings)
        made.append(member)
        return member

    yield make
    for member in made:
        member.close()


def malformed(stats):
    return {k: v for k, v in stats.items() if k.startswith("malformed.") and v}


# -- stop() must not shut the socket down to wake the receiver -------------
def test_stop_and_restart_count_no_phantom_datagrams(front):
    """shutdown(SHUT_RDWR) made recvmmsg return 0-byte datagrams until the
    receiver noticed: thousands of "not_membership" drops per stop."""
    member = front(4001, loopback=False)
    for _ in range(3):
        member.start()
        member.stop()
    member.start()
    assert malformed(member.stats()) == {}


# -- a burst of changes must not delay the heartbeats ----------------------------
def test_a_payload_burst_keeps_heartbeats_on_the_grid(front):
    """Ten changes 20 ms apart pushed the threaded front's next heartbeat one
    period later per change (2 s here); the grid must not move."""
    member = front(4001, frequency=200, drop_time=2000)
    member.start()
    for i in range(10):
        member.set_payload(b"p%d" % i)
        time.sleep(0.02)
    after_burst = member.stats()["sent"]
    # two beats within 1.5 s (seven periods): a grid pushed one period per
    # change would send none for 2 s
    wait_until(lambda: member.stats()["sent"] - after_burst >= 2, timeout=1.5)


# -- a small drop time still expires silent members ----------------------------
def test_a_small_drop_time_still_expires_a_silent_member(front):
    """With drop_time 100 ms every sweep gap over 50 ms counted as a pause of
    our own, and silent members were never removed."""
    member = front(4001, frequency=20, drop_time=100)
    member.start()
    fake_members(member.front.config.port, 1)
    member.events.wait_for(lambda e: e.kind == "removed", 3.0)
    assert member.events.kinds(5000) == [("added", None), ("removed", "expired")]
    assert member.stats()["pauses"] == 0


# -- stop() removes the members it still has --------------------------------------
def test_stop_removes_everyone_so_a_restart_never_adds_twice(front):
    member = front(4001)
    peer = front(4002)
    peer.start()
    member.start()
    member.events.wait_for(lambda e: e.kind == "added")
    member.stop()
    member.start()
    wait_until(lambda: len(member.events.kinds(4002)) == 3)
    member.stop()
    assert member.events.kinds(4002) == [("added", None), ("removed", "stopped"),
                                      ("added", None), ("removed", "stopped")]
    assert member.stats()["removed.stopped"] == 2


def test_the_driver_reopens_a_socket_when_the_engine_asks(front, monkeypatch):
    """Wiring only (the count of errors is test_engine's): sends on a dead
    descriptor fail, the engine asks for a new socket, the driver opens one
    and heartbeats flow again."""
    opened = []

    def senders(*args):
        socks = real(*args)
        if not opened:              # the first senders become no sockets: every send fails
            dead = os.open(os.devnull, os.O_RDONLY)
            for sock in socks:
                os.dup2(dead, sock.fileno())
            os.close(dead)
        opened.append(socks)
        return socks

    real = net.open_senders
    monkeypatch.setattr(net, "open_senders", senders)
    member = front(4001, frequency=20, drop_time=200)
    member.start()
    wait_until(lambda: member.stats()["socket_reopened"] == 1)
    assert len(opened) == 2
    sent = member.stats()["sent"]
    wait_until(lambda: member.stats()["sent"] > sent)
    assert member.stats()["send_errors"] >= 10


def test_both_fronts_count_the_same_things(group_port):
    keys = {}
    for name, kind in FRONTS.items():
        member = kind(group_port, 4001 if name == "threads" else 4002)
        try:
            member.start()
            keys[name] = {k for k in member.stats()
                          if not k.startswith(("malformed.", "removed.", "slow_path", "local",
                                               "added", "refreshed_slow"))}
        finally:
            member.close()
    assert keys["threads"] == keys["asyncio"]
    assert {"sent", "send_errors", "receive_errors", "socket_reopened", "pauses", "healthy",
            "internal_errors", "events_dropped", "listener_errors", "subscribers",
            "probe_connections"} <= keys["threads"]


# -- listeners that stop or restart the service ------------------------------------
def service(group_port, member_port, **settings):
    options = dict(LOOPBACK, member_port=member_port, **FAST)
    options.update(settings)
    return McastService(GROUP, group_port, **options)


def test_a_listener_stops_while_another_thread_is_stopping(group_port):
    """stop() from a listener while the main thread is in stop() deadlocked:
    each waited for the other."""
    member = service(group_port, 4001)
    in_listener, stopping = threading.Event(), threading.Event()

    def listener(event):
        if event.kind == "added":
            in_listener.set()
            stopping.wait(5)
            time.sleep(0.05)         # the main thread is inside stop() by now
            member.stop()

    member.add_listener(listener)
    with service(group_port, 4002):
        member.start()
        assert in_listener.wait(5)
        stopper = threading.Thread(target=member.stop)
        stopper.start()
        stopping.set()
        stopper.join(5)
        assert not stopper.is_alive()
    assert not member.running


def test_a_listener_that_restarts_the_service_leaves_one_dispatcher(group_port):
    member = service(group_port, 4001)
    restarted = threading.Event()
    running_listeners = []
    overlap = []

    def listener(event):
        running_listeners.append(1)
        if len(running_listeners) > 1:
            overlap.append(event)
        try:
            if event.kind == "added" and not restarted.is_set():
                restarted.set()
                member.stop()
                member.start()
                time.sleep(0.2)       # on purpose: the new dispatcher must not run meanwhile
        finally:
            running_listeners.pop()

    member.add_listener(listener)
    threads = threading.active_count()
    with service(group_port, 4002):
        member.start()
        assert restarted.wait(5)
        wait_until(lambda: member.running)
        time.sleep(0.3)           # on purpose: events flow, and no two dispatchers may overlap
        stopper = threading.Thread(target=member.stop)
        stopper.start()
        stopper.join(5)
        assert not stopper.is_alive()
    wait_until(lambda: threading.active_count() == threads)
    assert overlap == []


def test_a_listener_on_the_old_dispatcher_may_stop_the_restarted_service(group_port):
    """After a restart from a listener, the old dispatcher still delivers the
    events of the old run ("removed"/"stopped"); a stop() from there must not
    wait for the new dispatcher, which waits for the old one."""
    member = service(group_port, 4001)
    done = []

    def listener(event):
        if event.kind == "added" and not done:
            done.append("restarted")
            member.stop()
            member.start()
        elif event.reason == "stopped" and done == ["restarted"]:
            done.append("stopped")
            member.stop()

    member.add_listener(listener)
    threads = threading.active_count()
    with service(group_port, 4002):
        member.start()
        wait_until(lambda: done == ["restarted", "stopped"] and not member.running)
    wait_until(lambda: threading.active_count() == threads)


def test_stop_from_a_listener_with_a_full_event_queue(group_port):
    member = service(group_port, 4001, event_queue_size=1)
    seen = []

    def listener(event):
        seen.append(event)
        if len(seen) == 1:
            # All five strangers in the table (so "stopped" removes five), and the
            # queue full.
            wait_until(lambda: len(member.members()) == 5
                       and member.stats()["events_dropped"] > 0)
            member.stop()            # the queue is full: this must not block

    member.add_listener(listener)
    member.start()
    fake_members(group_port, 5)
    wait_until(lambda: not member.running)
    wait_until(lambda: isinstance(seen[-1], EventsLost))
    # Five added and five removed ("stopped"): each delivered or counted as lost.
    delivered = [e for e in seen if not isinstance(e, EventsLost)]
    assert [e.kind for e in delivered] == ["added"] * len(delivered)
    assert len(delivered) + seen[-1].count == 10


def test_an_overflowing_queue_gives_listeners_an_events_lost_marker(group_port):
    member = service(group_port, 4001, event_queue_size=2)
    release, seen = threading.Event(), []

    def listener(event):
        seen.append(event)
        release.wait(5)

    member.add_listener(listener)
    with member:
        fake_members(group_port, 6)
        wait_until(lambda: member.stats()["members"] == 6)
        release.set()

        def accounted():       # delivered, or counted as lost: every one of the six
            return sum(e.count if isinstance(e, EventsLost) else 1 for e in seen)
        # The table holds six a moment before the last events are published,
        # and the driver may publish them in more than one step: a marker
        # where each gap is, every event either delivered or counted.
        wait_until(lambda: accounted() == 6)
        delivered = [e for e in seen if not isinstance(e, EventsLost)]
        markers = [e for e in seen if isinstance(e, EventsLost)]
        assert [e.kind for e in delivered] == ["added"] * len(delivered)
        assert len({e.member.port for e in delivered}) == len(delivered)
        assert markers and not isinstance(seen[0], EventsLost)
        assert all(not isinstance(a, EventsLost) or not isinstance(b, EventsLost)
                   for a, b in zip(seen, seen[1:]))      # one marker per gap
        assert 2 <= len(delivered) < 6                   # the queue held 2 at least; some dropped
        assert member.stats()["events_dropped"] == sum(e.count for e in markers)


# -- listeners and loops that fail ---------------------------------------------------
def test_a_listener_raising_systemexit_does_not_end_the_dispatcher(group_port, caplog):
    # On the dispatcher thread a SystemExit or KeyboardInterrupt reaches
    # nobody: it would end the thread and every later event with it.
    member = service(group_port, 4001)
    events = Events()

    def quitter(event):
        raise SystemExit(3)

    member.add_listener(quitter)
    member.add_listener(events)
    with member:
        fake_members(group_port, 2)
        wait_until(lambda: len(events.events) == 2)
        assert member.stats()["listener_errors"] == 2
    assert "membership listener" in caplog.text


def test_an_unexpected_error_in_the_driver_is_logged_flagged_and_survived(front, caplog):
    """One exception in the receive/send loop froze the table while
    ``running`` stayed True; now it is logged, flagged and survived."""
    member = front(4001)
    engine = member.front._engine
    real, failures = engine.on_timer, []

    def failing_once(now):
        if not failures:
            failures.append(now)
            raise RuntimeError("bug")
        real(now)

    member.start()
    engine.on_timer = failing_once
    wait_until(lambda: failures)
    fake_members(member.front.config.port, 1)
    member.events.wait_for(lambda e: e.kind == "added")     # still receiving
    stats = member.stats()
    assert stats["healthy"] is False and stats["internal_errors"] == 1
    assert "membership driver failed" in caplog.text


def test_demo_piped_into_head_exits_cleanly(group_port, tmp_path):
    """``mcast-demo join --json | head -1``: the first write after head left
    raised BrokenPipeError on the dispatcher thread, logged, forever."""
    with service(group_port, 4002):
        demo = subprocess.Popen(
            f"{shutil.which('mcast-demo')} join {GROUP} --port {group_port} --interface "
            f"127.0.0.1 --ttl 0 --member-port 4001 --frequency 100 --drop-time 400 --json "
            f"| head -1", shell=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            cwd=tmp_path)
        fake_members(group_port, 3)
        time.sleep(0.5)           # head takes its line and leaves; what follows writes to no reader
        fake_members(group_port, 3, payload=b"changed")     # more events after head left
        try:
            out, err = demo.communicate(timeout=15)
        finally:
            if demo.poll() is None:
                demo.kill()
    assert out.count("\n") == 1 and '"event": "added"' in out
    assert "Traceback" not in err


# -- a forked child's copy is inert ----------------------------------------------------
def fork_and(action):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)    # fork with threads: on purpose
        pid = os.fork()
    if pid == 0:
        try:
            action()
        finally:
            os._exit(0)
    try:
        wait_until(lambda: os.waitpid(pid, os.WNOHANG)[0], interval=0.02, message="the forked child to end")
    except AssertionError:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise


def test_a_forked_child_leaving_the_service_says_no_goodbye(group_port):
    watcher_events = Events()
    watcher = service(group_port, 4002)
    watcher.add_listener(watcher_events)
    with watcher, service(group_port, 4001) as member:
        watcher_events.wait_for(lambda e: e.kind == "added")
        fork_and(member.stop)
        time.sleep(0.3)          # on purpose: time for a goodbye to arrive, and none may
        assert watcher_events.kinds(4001) == [("added", None)]
        assert malformed(member.stats()) == {}
        watcher.set_payload(b"still here")
        wait_until(lambda: member.members() and member.members()[0].payload == b"still here")


def test_a_forked_child_stopping_the_async_front_leaves_the_parent_alone(group_port, run_loop):
    watcher_events = Events()

    watcher = service(group_port, 4002)
    watcher.add_listener(watcher_events)

    async def scenario():
        with watcher:
            async with AsyncMembership(GROUP, group_port, member_port=4001, **LOOPBACK,
                                       **FAST) as member:
                await member.wait_for(lambda ms: len(ms) == 1, 3)
                fork_and(lambda: asyncio.run(member.stop()))
                await asyncio.sleep(0.3)      # on purpose: time for a goodbye to arrive, and none may
                assert watcher_events.kinds(4001) == [("added", None)]
                watcher.set_payload(b"still here")
                await member.wait_for(lambda ms: ms[0].payload == b"still here", 3)

    run_loop(scenario())


# -- asyncio: cancelled stops, reader callbacks after stop, listeners --------------------
@pytest.fixture
def run_loop():
    return lambda coro: asyncio.run(asyncio.wait_for(coro, 30))


def test_a_cancelled_stop_still_ends_every_event_stream(group_port, run_loop):
    """stop() closed the streams only after awaiting the TCP listener (which
    hangs on 3.12.1+ while a probe connection is open): cancelled there, it
    left every ``async for`` hanging."""
    async def scenario():
        member = AsyncMembership(GROUP, group_port, member_port=0, tcp_listener=True,
                                 **LOOPBACK, **FAST)
        await member.start()
        closing = asyncio.Event()

        async def never_closes():        # a listener whose stop never returns
            closing.set()
            await asyncio.sleep(3600)

        member._probe_server.stop = never_closes
        ended = []

        async def reader():
            async for _ in member.events():
                pass
            ended.append(True)

        task = asyncio.ensure_future(reader())
        await asyncio.sleep(0.05)
        stop = asyncio.ensure_future(member.stop())
        await closing.wait()
        stop.cancel()
        await asyncio.wait_for(task, 2)
        assert ended == [True] and not member.running

    run_loop(scenario())


def test_no_reader_callback_outlives_stop(group_port, run_loop):
    """A reader callback queued with call_soon (for datagrams read ahead in
    pump's batch) ran after stop(): it read the closed socket and fed the
    stale batch into the cleared table."""
    async def scenario():
        member = AsyncMembership(GROUP, group_port, member_port=4001, **LOOPBACK, **FAST)
        await member.start()
        await asyncio.sleep(0.2)
        loop = asyncio.get_running_loop()
        path = member._engine.data_path
        real_pump = path.pump
        stopped, after_stop = loop.create_future(), []

        def stop_now():                  # the synchronous part of stop(): all of it here
            coro = member.stop()
            try:
                coro.send(None)
            except StopIteration:
                stopped.set_result(True)

        def pump(*args):
            if stopped.done():
                after_stop.append(args[0])
            elif not hasattr(pump, "armed"):
                pump.armed = loop.call_soon(stop_now)   # between two reader callbacks
            return real_pump(*args)

        path.pump = pump
        fake_members(group_port, 200, junk_first=1)
        await asyncio.wait_for(stopped, 3)
        await asyncio.sleep(0.2)         # on purpose: a queued reader callback would run by now; none may
        assert after_stop == []
        assert member.members() == [] and member.stats()["receive_errors"] == 0
        await member.start()             # nothing read before the stop comes back
        await asyncio.sleep(0.2)         # on purpose: time for it to come back, and it may not
        assert member.members() == []
        await member.stop()

    run_loop(scenario())


@contextlib.asynccontextmanager
async def joined_with_strangers(group_port, count):
    async with AsyncMembership(GROUP, group_port, member_port=4001, **LOOPBACK,
                               **FAST) as member:
        fake_members(group_port, count)
        await member.wait_for(lambda ms: len(ms) == count, 3)
        yield member


def test_more_current_members_than_queue_room_gives_events_lost(group_port, run_loop):
    async def scenario():
        async with joined_with_strangers(group_port, 5) as member:
            stream = member.events(queue_size=2)
            got = [await stream.__anext__() for _ in range(3)]
            assert [e.kind for e in got] == ["added", "added", "events_lost"]
            assert got[2] == EventsLost(3)
            await stream.aclose()

    run_loop(scenario())


def test_asyncio_listeners_errors_are_counted_and_keyboardinterrupt_goes_on(group_port,
                                                                             run_loop):
    async def scenario():
        async with joined_with_strangers(group_port, 2) as member:
            def broken(event):
                raise ValueError("listener bug")

            def quitter(event):
                raise KeyboardInterrupt

            member.add_listener(broken, replay=True)        # an "added" for each of 2
            assert member.stats()["listener_errors"] == 2
            with pytest.raises(KeyboardInterrupt):
                member.add_listener(quitter, replay=True)
            assert member.stats()["listener_errors"] == 2

    run_loop(scenario())


def test_leaving_a_stream_unsubscribes(group_port, run_loop):
    async def scenario():
        async with joined_with_strangers(group_port, 1) as member:
            async with member.events() as stream:
                async for _ in stream:
                    break
            assert member.stats()["subscribers"] == 0
            async for _ in member.events():      # no close at all: collected
                break
            gc.collect()
            assert member.stats()["subscribers"] == 0

    run_loop(scenario())

"""The runtime behaviour both protocols share, run on each protocol's two
fronts: Tribes heartbeats (McastService, AsyncMcastService) and Serf gossip
(SerfService, AsyncSerfService). Loopback only.

Each scenario is written once against ``Front``, a blocking view of one
service (an asyncio front runs on a loop of its own thread), and a
``Protocol`` that knows how to make one of its events happen: a stranger's
heartbeat (a member "added") for Tribes, a user event of our own for Serf.
"""

import asyncio
import os
import socket
import types
import threading
import time
import traceback
import warnings

import pytest

from mcastmember import AsyncMcastService, McastService
from mcastmember._runtime import net
from mcastmember._runtime.events import EventsLost

from support import GROUP, LOOPBACK, free_gossip_port, free_tcp_port, heartbeat, loopback_sender, wait_until

pytest.importorskip("msgpack")
from mcastmember.gossip.fronts.aio import AsyncSerfService
from mcastmember.gossip.fronts.service import SerfService

TIMEOUT = 10.0


class Loop:
    """An event loop on a thread of its own, for the asyncio fronts."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(TIMEOUT)

    def call(self, function, *args, **kwargs):
        async def on_the_loop():
            return function(*args, **kwargs)
        return self.run(on_the_loop())

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(TIMEOUT)
        self.loop.close()


class Tribes:
    """Heartbeats: an event is a stranger's first heartbeat (an "added")."""

    name = "tribes"
    dropped = "events_dropped"
    # What makes the service listen on TCP too.
    listening = {"tcp_listener": True}

    def __init__(self, group_port):
        self.group_port = group_port
        self.sender = loopback_sender()

    def make(self, cls, **settings):
        # A long drop time: no stranger expires (a "removed") during a test.
        return cls(GROUP, self.group_port, member_port=free_tcp_port(), frequency=100, drop_time=60_000,
                   **LOOPBACK, **settings)

    def cause(self, front, index, payload=b""):
        packet = heartbeat(port=5000 + index, uid=(1000 + index).to_bytes(16, "big"), payload=payload)
        self.sender.sendto(packet, (GROUP, self.group_port))

    @staticmethod
    def key(event):
        """What tells the events of a scenario apart (None: not one of them)."""
        if isinstance(event, EventsLost):
            return event
        return (event.kind, event.member.port)

    def caused(self, index):
        return ("added", 5000 + index)

    def present(self, members):
        """The keys a listener replaying ``members`` is given."""
        return [("added", m.port) for m in members]

    def peer(self):
        """Another member, started, that has heard from ``front``'s service."""
        return self.make(McastService).start()

    def meet(self, peer, front):
        pass    # the group brings them together

    def ident(self, service):
        return service.local_member.port

    def members_of(self, service):
        return {m.port: m.payload for m in service.members()}

    def mark(self, service, value):
        service.set_payload(value)

    def members_of_front(self, front):
        return front.call(self.members_of, front.service)

    def said_goodbye(self, key, ident):
        return key[0] == "removed" and key[1] == ident

    def close(self):
        self.sender.close()


class Serf:
    """Gossip: an event is a user event of our own, delivered to us too."""

    name = "gossip"
    dropped = "listener_events_dropped"
    listening = {}

    def __init__(self, group_port):
        pass

    def make(self, cls, **settings):
        return cls("member", "127.0.0.1", free_gossip_port(), **settings)

    def cause(self, front, index, payload=b""):
        front.call(front.service.user_event, f"e{index}", payload, coalesce=False)

    @staticmethod
    def key(event):
        if isinstance(event, EventsLost):
            return event
        if hasattr(event, "coalesce"):
            return ("user", event.name)
        if hasattr(event, "member"):
            return (event.kind, event.member.name)
        return None

    def caused(self, index):
        return ("user", f"e{index}")

    def present(self, members):
        return [("joined", m.name) for m in members]

    def peer(self):
        peer = SerfService("peer", "127.0.0.1", free_gossip_port())
        peer.start()
        return peer

    def meet(self, peer, front):
        peer.join([("127.0.0.1", front.call(lambda: front.service.port))], timeout=TIMEOUT)

    def ident(self, service):
        return service.node.name

    def members_of(self, service):
        return {m.name: m.tags.get("mark", "").encode() for m in service.members()}

    def mark(self, service, value):
        service.set_tags({"mark": value.decode()})

    def members_of_front(self, front):
        return front.call(self.members_of, front.service)

    def said_goodbye(self, key, ident):
        return key[0] in ("left", "failed") and key[1] == ident

    def close(self):
        pass


class Front:
    """One service, blocking, whichever its front."""

    def __init__(self, protocol, threaded, **settings):
        self.protocol = protocol
        self.threaded = threaded
        self.loop = None if threaded else Loop()
        if threaded:
            cls = McastService if protocol.name == "tribes" else SerfService
            self.service = protocol.make(cls, **settings)
        else:
            cls = AsyncMcastService if protocol.name == "tribes" else AsyncSerfService
            self.service = self.loop.call(protocol.make, cls, **settings)

    def call(self, function, *args, **kwargs):
        """``function`` where the front runs it: the caller's thread, or the loop."""
        if self.threaded:
            return function(*args, **kwargs)
        return self.loop.call(function, *args, **kwargs)

    def start(self):
        return self.service.start() if self.threaded else self.loop.run(self.service.start())

    def stop(self, **kwargs):
        if self.threaded:
            return self.service.stop(**kwargs)
        return self.loop.run(self.service.stop())

    @property
    def running(self):
        return self.call(lambda: self.service.running)

    def members(self):
        return self.call(self.service.members)

    def stats(self):
        return self.call(self.service.stats)

    def add_listener(self, listener, replay=False):
        self.call(self.service.add_listener, listener, replay=replay)

    def remove_listener(self, listener):
        self.call(self.service.remove_listener, listener)

    def wait_for(self, predicate, timeout):
        if self.threaded:
            return self.service.wait_for(predicate, timeout)
        return self.loop.run(self.service.wait_for(predicate, timeout))

    def events(self, **bounds):
        return self.call(self.service.events, **bounds)

    def read(self, stream):
        """The next event of an asyncio front's stream."""
        return self.loop.run(stream.__anext__())

    def close(self):
        if self.running:
            self.stop()
        if self.loop is not None:
            self.loop.close()
        self.protocol.close()


FRONTS = [(Tribes, True), (Tribes, False), (Serf, True), (Serf, False)]
IDS = ["tribes-threads", "tribes-asyncio", "gossip-threads", "gossip-asyncio"]


@pytest.fixture(params=FRONTS, ids=IDS)
def make_front(request, group_port):
    """Makes the fronts of one kind (closed afterwards): make_front(**settings)
    (``listening``: with the protocol's settings for a TCP listener)."""
    protocol_class, threaded = request.param
    made = []

    def make(listening=False, **settings):
        if listening:       # on TCP too
            settings.update(protocol_class.listening)
        front = Front(protocol_class(group_port), threaded, **settings)
        made.append(front)
        return front

    yield make
    for front in made:
        front.close()


class Recorder:
    """A listener: what it was given, by key; it may hold the dispatcher
    on the first event matching ``hold`` until released."""

    def __init__(self, key, hold=None):
        self.key = key
        self.got = []
        self.hold = hold
        self.holding = threading.Event()
        self.release = threading.Event()

    def __call__(self, event):
        key = self.key(event)
        if key is None:
            return
        self.got.append(key)
        if key == self.hold:
            self.holding.set()
            self.release.wait(TIMEOUT)


# -- lifecycle ---------------------------------------------------------------------------------


def test_start_returns_the_service_and_stop_ends_it(make_front):
    front = make_front()
    assert front.start() is front.service
    assert front.running is True
    members = front.members()
    assert front.wait_for(lambda ms: True, TIMEOUT) == members
    with pytest.raises(TimeoutError):
        front.wait_for(lambda ms: False, 0.1)
    front.stop()
    assert front.running is False
    with pytest.raises(RuntimeError):
        front.wait_for(lambda ms: False, 0.1)


@pytest.mark.parametrize("protocol", [Tribes, Serf], ids=["tribes", "gossip"])
def test_a_threaded_service_is_its_own_context(protocol, group_port):
    service = protocol(group_port).make(McastService if protocol is Tribes else SerfService)
    with service as entered:
        assert entered is service
        assert service.running is True
    assert service.running is False


@pytest.mark.parametrize("protocol", [Tribes, Serf], ids=["tribes", "gossip"])
def test_an_asyncio_service_is_its_own_context(protocol, group_port):
    async def scenario():
        service = protocol(group_port).make(AsyncMcastService if protocol is Tribes else AsyncSerfService)
        async with service as entered:
            assert entered is service
            assert service.running is True
        assert service.running is False
    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))


@pytest.mark.parametrize("protocol", [Tribes, Serf], ids=["tribes", "gossip"])
def test_stop_waits_at_most_its_timeout_for_a_listener_that_blocks(protocol, group_port):
    front = Front(protocol(group_port), threaded=True)
    try:
        front.start()
        blocked = Recorder(front.protocol.key, hold=front.protocol.caused(0))
        front.add_listener(blocked)
        front.protocol.cause(front, 0)
        wait_until(blocked.holding.is_set, timeout=TIMEOUT)
        started = time.monotonic()
        front.stop(timeout=0.2)
        took = time.monotonic() - started
        assert front.running is False
        assert took < 2.0, f"stop(timeout=0.2) took {took:.2f} s"
    finally:
        blocked.release.set()
        front.close()


# -- listeners ---------------------------------------------------------------------------------


def test_a_listener_added_with_replay_gets_the_members_then_every_change_once(make_front):
    front = make_front()
    front.start()
    protocol = front.protocol
    protocol.cause(front, 0)
    present = wait_until(lambda: protocol.present(front.members()) if len(front.members()) >= 1 else None,
                         timeout=TIMEOUT)
    listener = Recorder(protocol.key)
    front.add_listener(listener, replay=True)
    protocol.cause(front, 1)
    expected = present + [protocol.caused(1)]
    wait_until(lambda: len(listener.got) >= len(expected), timeout=TIMEOUT)
    assert sorted(listener.got[:len(present)]) == sorted(present)
    assert listener.got == listener.got[:len(present)] + [protocol.caused(1)]
    assert front.stats()["subscribers"] == 1


def test_a_removed_listener_is_called_no_more(make_front):
    front = make_front()
    front.start()
    protocol = front.protocol
    removed, kept = Recorder(protocol.key), Recorder(protocol.key)
    front.add_listener(removed)
    front.add_listener(kept)
    front.remove_listener(removed)
    assert front.stats()["subscribers"] == 1
    protocol.cause(front, 0)
    # Listeners are called in the order added: once the kept one has it,
    # the removed one would have had it too.
    wait_until(lambda: protocol.caused(0) in kept.got, timeout=TIMEOUT)
    assert removed.got == []


# -- events lost -------------------------------------------------------------------------------
CAUSED = 10


def lost_scenario(front, payload):
    """CAUSED events behind a reader that does not read: a listener that
    holds its dispatcher on the first (threads), or a stream nobody reads
    (asyncio). What the reader gets once it reads again."""
    protocol = front.protocol
    if front.threaded:
        listener = Recorder(protocol.key, hold=protocol.caused(0))
        front.add_listener(listener)
        protocol.cause(front, 0, payload)
        wait_until(listener.holding.is_set, timeout=TIMEOUT)
        first, before = [protocol.caused(0)], 0
    else:
        stream = front.events()
        first, before = [], len(front.members())      # the stream starts with the members
        protocol.cause(front, 0, payload)
    for index in range(1, CAUSED):
        protocol.cause(front, index, payload)
    return first, before, (listener if front.threaded else stream)


def read_until_lost(front, reader):
    if front.threaded:
        reader.release.set()
        wait_until(lambda: any(isinstance(k, EventsLost) for k in reader.got), timeout=TIMEOUT)
        return reader.got
    got = []
    while not any(isinstance(k, EventsLost) for k in got):
        key = front.protocol.key(front.read(reader))
        if key is not None:
            got.append(key)
    return got


@pytest.mark.parametrize("bound", ["count", "bytes"])
def test_a_reader_that_falls_behind_is_told_how_many_events_it_lost(make_front, bound):
    """Past the bound in count (4 events) or in bytes (room for two events
    of a 400-byte payload), events are dropped and counted, and the
    reader gets the events that fit, then one EventsLost(dropped)."""
    if bound == "count":
        front, payload, room = make_front(event_queue_size=4), b"", 4
    else:
        front, payload, room = make_front(event_queue_size=1000, event_queue_bytes=1_000), b"x" * 400, 2
    front.start()
    protocol = front.protocol
    if not front.threaded:
        wait_until(lambda: len(front.members()) >= (1 if protocol.name == "gossip" else 0), timeout=TIMEOUT)
    first, before, reader = lost_scenario(front, payload)
    # The members a stream starts with take room too (their events cost
    # no payload bytes).
    fit = room - before if bound == "count" else room
    lost = CAUSED - len(first) - fit
    dropped = "stream_events_dropped" if not front.threaded and protocol.name == "gossip" else protocol.dropped
    wait_until(lambda: front.stats()[dropped] == lost, timeout=TIMEOUT,
               message=lambda: f"{dropped}: {front.stats()[dropped]}, not {lost}")
    got = [k for k in read_until_lost(front, reader) if isinstance(k, EventsLost) or k[0] != "joined"]
    caused = [protocol.caused(i) for i in range(CAUSED)]
    assert got == first + caused[len(first):len(first) + fit] + [EventsLost(lost)]


# -- sockets -----------------------------------------------------------------------------------


def inet_sockets():
    """The process's IPv4 and IPv6 sockets, by inode ("socket:[...]")."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue        # closed meanwhile (or listdir's own descriptor)
        if link.startswith("socket:"):
            with socket.socket(fileno=os.dup(int(name))) as sock:
                if sock.family in (socket.AF_INET, socket.AF_INET6):
                    found.add(link)
    return found


def test_every_socket_a_front_opens_is_made_by_the_runtime(make_front, monkeypatch):
    """The datagram, multicast and listening sockets of both protocols are
    opened by the runtime's net helpers, with the same options for both."""
    made = []

    def recorded(*args, **kwargs):
        sock = socket.socket(*args, **kwargs)
        made.append(sock)
        return sock

    proxy = types.SimpleNamespace(**{name: getattr(socket, name) for name in dir(socket)
                                     if not name.startswith("__")})
    proxy.socket = recorded
    monkeypatch.setattr(net, "socket", proxy)
    front = make_front(listening=True)
    before = inet_sockets()
    front.start()
    opened = inet_sockets() - before
    by_runtime = {os.readlink(f"/proc/self/fd/{sock.fileno()}") for sock in made if sock.fileno() >= 0}
    assert opened
    assert opened - by_runtime == set()


# -- fork safety -------------------------------------------------------------------------------


def fork_and(action):
    """Run ``action`` in a forked child; its exit status (1: it raised)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)    # fork with threads: on purpose
        pid = os.fork()
    if pid == 0:
        status = 1
        try:
            status = action()
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(status)
    try:
        _, status = wait_until(lambda: (ended := os.waitpid(pid, os.WNOHANG))[0] and ended, TIMEOUT,
                               interval=0.02, message="the forked child to end")
    except AssertionError:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise
    return os.waitstatus_to_exitcode(status)


def test_a_forked_childs_copy_of_a_running_service_is_inert(make_front):
    """The child stops its copy at once, sending nothing for the parent
    (no goodbye: a peer still has the parent) and leaving the parent's
    sockets and poller alone (the parent still hears the peer)."""
    front = make_front()
    front.start()
    protocol = front.protocol
    peer = protocol.peer()
    try:
        peer_events = Recorder(protocol.key)
        peer.add_listener(peer_events)
        protocol.meet(peer, front)
        me, them = protocol.ident(front.service), protocol.ident(peer)
        wait_until(lambda: them in protocol.members_of_front(front) and me in protocol.members_of(peer),
                   timeout=TIMEOUT)
        service = front.service

        def in_the_child():
            started = time.monotonic()
            if front.threaded:
                service.stop()
            else:
                asyncio.run(service.stop())
            took = time.monotonic() - started
            return 0 if took < 1.0 and service.running is False else 3

        assert fork_and(in_the_child) == 0
        assert front.running is True
        # The parent marks itself after the child ended: once the peer has the
        # mark, it would have had a goodbye the child sent before it.
        front.call(protocol.mark, service, b"after")
        wait_until(lambda: protocol.members_of(peer).get(me) == b"after", timeout=TIMEOUT)
        assert [k for k in peer_events.got if protocol.said_goodbye(k, me)] == []
        # And the parent still hears.
        protocol.mark(peer, b"heard")
        wait_until(lambda: protocol.members_of_front(front).get(them) == b"heard", timeout=TIMEOUT)
    finally:
        peer.stop()

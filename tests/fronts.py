"""Both fronts behind one blocking interface, so a scenario is written once
and run against the threaded service and the asyncio front (on a loop of
its own thread). Loopback only (support.LOOPBACK)."""

import asyncio
import threading

from mcastmember import AsyncMembership, McastService

from support import GROUP, LOOPBACK, wait_until

FAST = {"frequency": 100, "drop_time": 400}
TIMEOUT = 10.0


class Events:
    """What a front delivered, in order, with a way to wait for one."""

    def __init__(self):
        self.events = []
        self.threads = set()      # names of the threads that delivered them
        self._lock = threading.Lock()

    def __call__(self, event):
        with self._lock:
            self.events.append(event)
            self.threads.add(threading.current_thread().name)

    def wait_for(self, predicate, timeout=5.0):
        """The first event ``predicate`` accepts, once there is one."""
        def found():
            with self._lock:
                return next((e for e in self.events if predicate(e)), None)
        return wait_until(found, timeout, message=lambda: f"a matching event; got {self.events}")

    def kinds(self, port):
        """(kind, reason) of the events about the member on ``port``."""
        return [(e.kind, e.reason) for e in self.events if e.member and e.member.port == port]


def _options(group_port, member_port, settings):
    options = dict(LOOPBACK, member_port=member_port, **FAST)
    options.update(settings)
    return GROUP, group_port, options


class Threaded:
    name = "threads"

    def __init__(self, group_port, member_port, **settings):
        group, port, options = _options(group_port, member_port, settings)
        self.front = McastService(group, port, **options)
        self.events = Events()
        self.front.add_listener(self.events)
        self._stop_on_event = False
        self.front.add_listener(self._maybe_stop)

    def stop_on_next_event(self):
        """The next event's listener stops the service."""
        self._stop_on_event = True

    def _maybe_stop(self, event):
        if self._stop_on_event:
            self._stop_on_event = False
            self.front.stop()

    def start(self):
        self.front.start()

    def stop(self):
        self.front.stop()

    def set_payload(self, payload):
        self.front.set_payload(payload)

    def set_domain(self, domain):
        self.front.set_domain(domain)

    def set_keys(self, keys, auth=None):
        self.front.set_keys(keys, auth)

    def stats(self):
        return self.front.stats()

    def members(self):
        return self.front.members()

    @property
    def running(self):
        return self.front.running

    def settle(self):
        pass

    def close(self):
        self.front.stop()


class Asyncio:
    """AsyncMembership on an event loop in a thread of its own; events are
    read from ``events()`` by a task, as an application does."""

    name = "asyncio"

    def __init__(self, group_port, member_port, **settings):
        group, port, options = _options(group_port, member_port, settings)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="test-loop",
                                        daemon=True)
        self._thread.start()
        self.front = AsyncMembership(group, port, **options)
        self.events = Events()
        self._reader = None
        self._stop_on_event = False

    def stop_on_next_event(self):
        """The reader of the event stream stops the membership on its next event."""
        self._stop_on_event = True

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(TIMEOUT)

    def _call(self, fn, *args):
        async def call():
            return fn(*args)
        return self._run(call())

    async def _read(self, stream):
        async with stream:
            async for event in stream:
                self.events(event)
                if self._stop_on_event:
                    self._stop_on_event = False
                    await self.front.stop()

    def start(self):
        async def start():
            await self.front.start()
            self._reader = asyncio.ensure_future(self._read(self.front.events()))
        self._run(start())

    def stop(self):
        async def stop():
            await self.front.stop()
            if self._reader is not None:
                await self._reader       # the stream ends with the stop
                self._reader = None
        self._run(stop())

    def settle(self):
        """Wait for the event reader to finish after a stop from within it."""
        self._run(asyncio.sleep(0))
        if not self.front.running:
            self.stop()

    def set_payload(self, payload):
        self._call(self.front.set_payload, payload)

    def set_domain(self, domain):
        self._call(self.front.set_domain, domain)

    def set_keys(self, keys, auth=None):
        self._call(self.front.set_keys, keys, auth)

    def stats(self):
        return self._call(self.front.stats)

    def members(self):
        return self._call(self.front.members)

    @property
    def running(self):
        return self.front.running

    def close(self):
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(TIMEOUT)
        self.loop.close()


FRONTS = {"threads": Threaded, "asyncio": Asyncio}

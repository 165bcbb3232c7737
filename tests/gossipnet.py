"""A tiny deterministic network for gossip engines: a fake clock, datagrams
delivered after a fixed latency in send order, streams answered at once,
links that can be cut and nodes that can be silenced. No sockets."""

from __future__ import annotations

import heapq
import itertools

from mcastmember.gossip.memberlist.engine import GossipEngine
from mcastmember.gossip.memberlist.layout import NodeState
from mcastmember.gossip.memberlist.settings import GossipSettings

PORT = 7946


class Net:
    def __init__(self, latency=0.001, track=True, factory=None):
        self.now = 0.0
        # factory(settings, seed) -> a node driven like a GossipEngine (default: one)
        self.factory = factory or (lambda settings, seed: GossipEngine(settings, seed=seed))
        self.track = track                # record every state change seen (O(N^2) a step)
        self.latency = latency
        self.engines = {}                 # addr -> engine
        self.names = {}                   # name -> addr
        self.down = set()                 # addrs that neither send nor hear
        self.cut = set()                  # (src, dst) directed links that drop everything
        self.drop = None                  # optional predicate (src, dst, data) -> drop this datagram
        self.sent = []                    # (time, src, dst, data) of every datagram handed out
        self.events = {}                  # name -> [(time, event)]
        self.history = []                 # (time, observer, node, state) on every change seen
        self._seen = {}
        self._flight = []
        self._order = itertools.count()

    # -- building
    def add(self, name, seed=None, start=True, **overrides):
        addr = (f"127.0.0.{len(self.engines) + 1}", PORT)
        settings = GossipSettings(name=name, advertise_addr=addr[0], advertise_port=PORT, **overrides)
        engine = self.factory(settings, len(self.engines) if seed is None else seed)
        self.engines[addr] = engine
        self.names[name] = addr
        self.events[name] = []
        if start:
            engine.start(self.now)
        return engine

    def __getitem__(self, name):
        return self.engines[self.names[name]]

    def cluster(self, names, settle=5.0, **overrides):
        """Start nodes, each joining the first, and run until ``settle``."""
        for name in names:
            self.add(name, **overrides)
        first = self.names[names[0]]
        for name in names[1:]:
            self[name].join([first], self.now)
        self.run(self.now + settle)

    def cut_both(self, a, b):
        self.cut |= {(self.names[a], self.names[b]), (self.names[b], self.names[a])}

    def silence(self, name):
        self.down.add(self.names[name])

    # -- running
    def _blocked(self, src, dst):
        return src in self.down or dst in self.down or (src, dst) in self.cut

    def _collect(self):
        busy = True
        while busy:
            busy = False
            for addr, engine in self.engines.items():
                if addr in self.down:
                    continue
                for data, dst in engine.outgoing(self.now):
                    busy = True
                    self.sent.append((self.now, addr, dst, data))
                    if self._blocked(addr, dst) or (self.drop and self.drop(addr, dst, data)):
                        continue
                    heapq.heappush(self._flight, (self.now + self.latency, next(self._order), data, addr, dst))
                for stream in engine.streams_to_open(self.now):
                    busy = True
                    target = self.engines.get(stream.addr)
                    if target is None or self._blocked(addr, stream.addr) or self._blocked(stream.addr, addr):
                        engine.stream_failed(stream.id, self.now)
                        continue
                    reply = target.receive_stream(stream.data, addr, self.now)
                    assert reply is not None, "a whole stream message was not enough"
                    if not engine.stream_response(stream.id, reply, self.now):
                        engine.stream_failed(stream.id, self.now, "closed")
            self._record()

    def _record(self):
        for addr, engine in self.engines.items():
            name = engine.name
            for event in engine.events():
                self.events[name].append((self.now, event))
            if not self.track:
                continue
            for node in getattr(engine, "engine", engine).table.nodes:
                key = (name, node.name)
                if self._seen.get(key) != node.state:
                    self._seen[key] = node.state
                    self.history.append((self.now, name, node.name, node.state))

    def run(self, until, stop=None):
        """Advance to ``until`` (or until ``stop()`` is true after a step)."""
        for _ in range(10_000_000):
            self._collect()
            if stop is not None and stop():
                return True
            times = [e.next_deadline() for a, e in self.engines.items() if a not in self.down]
            times = [t for t in times if t is not None]
            if self._flight:
                times.append(self._flight[0][0])
            soonest = min(times, default=until)
            if soonest > until:
                self.now = until
                return False
            self.now = max(self.now, soonest)
            while self._flight and self._flight[0][0] <= self.now:
                _t, _n, data, src, dst = heapq.heappop(self._flight)
                if dst in self.engines and dst not in self.down:
                    self.engines[dst].receive(data, src, self.now)
            for addr, engine in self.engines.items():
                deadline = engine.next_deadline()
                if addr not in self.down and deadline is not None and deadline <= self.now:
                    engine.on_timer(self.now)
        raise AssertionError("the network did not settle")

    # -- looking
    def members(self, name):
        return sorted(n.name for n in self[name].members())

    def states_seen(self, observer, node):
        return [(t, s) for t, o, n, s in self.history if o == observer and n == node]

    def first(self, observer, node, state):
        return next((t for t, s in self.states_seen(observer, node) if s == state), None)


__all__ = ["Net", "NodeState", "PORT"]

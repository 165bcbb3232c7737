"""Random lifecycles against both fronts with a real peer on loopback
(127.0.0.1, TTL 0): start, stop, restart, changes, and a stop from inside a
listener (or a stream's reader), in any order. Invariants: the events about
the peer alternate (added, updated*, removed, added, ...), stop() returns,
and a stopped member holds no thread and no descriptor."""

import os
import threading

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from fronts import FRONTS, Threaded
from support import wait_until

pytestmark = pytest.mark.network

PEER_PORT, MEMBER_PORT = 4002, 4001
_next_group = [40000 + os.getpid() % 10000]


def open_fds():
    return len(os.listdir("/proc/self/fd"))


class Lifecycle(RuleBasedStateMachine):
    front = None     # set by the subclass per front

    def __init__(self):
        super().__init__()
        _next_group[0] += 1
        group_port = _next_group[0]
        self.peer = Threaded(group_port, PEER_PORT)
        self.peer.start()
        self.member = FRONTS[self.front](group_port, MEMBER_PORT)
        self.threads = threading.active_count()
        self.fds = open_fds()

    def teardown(self):
        self.member.close()
        self.peer.close()

    def _start(self):
        self.member.start()
        # Heard within a heartbeat or two: every run sees events flow.
        wait_until(lambda: self.member.events.kinds(PEER_PORT)[-1:] in ([("added", None)],
                                                                       [("updated", None)]))

    @precondition(lambda self: not self.member.running)
    @rule()
    def start(self):
        self._start()

    @precondition(lambda self: self.member.running)
    @rule()
    def stop(self):
        self.member.stop()
        assert not self.member.running

    @precondition(lambda self: self.member.running)
    @rule()
    def restart(self):
        self.member.stop()
        self._start()

    @precondition(lambda self: self.member.running)
    @rule(payload=st.binary(max_size=8))
    def set_payload(self, payload):
        self.member.set_payload(payload)

    @precondition(lambda self: self.member.running)
    @rule(domain=st.sampled_from([b"", b"a", b"bb"]))
    def set_domain(self, domain):
        self.member.set_domain(domain)

    @precondition(lambda self: self.member.running)
    @rule()
    def stop_from_a_listener(self):
        self.member.stop_on_next_event()
        self.peer.set_payload(os.urandom(4))      # an "updated" (or "added") event
        wait_until(lambda: not self.member.running)
        self.member.settle()

    @invariant()
    def events_about_the_peer_alternate(self):
        present = False
        for kind, _ in self.member.events.kinds(PEER_PORT):
            if kind == "added":
                assert not present
                present = True
            elif kind == "removed":
                assert present
                present = False
            else:
                assert present and kind == "updated"

    @invariant()
    def a_stopped_member_holds_nothing(self):
        if not self.member.running:
            wait_until(lambda: threading.active_count() == self.threads)
            assert open_fds() == self.fds


SETTINGS = settings(max_examples=12, stateful_step_count=10, deadline=None,
                    suppress_health_check=list(HealthCheck))


def _machine(front):
    machine = type(f"Lifecycle_{front}", (Lifecycle,), {"front": front})
    case = machine.TestCase
    case.settings = SETTINGS
    return case


TestThreadedLifecycle = _machine("threads")
TestAsyncLifecycle = _machine("asyncio")

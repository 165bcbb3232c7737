"""Three hosts made of network namespaces on one bridge, each running
``mcast-demo join`` on its own interface: all see all, a crash is noticed, a
goodbye is instant, a partition splits and heals, and nothing is lost or
doubled. Needs root (CI runs as root); skipped with the reason otherwise."""

import signal
import sys
import time

import pytest

from netlab import (JsonProcess, Lan, assert_alternating, check_partition_heals,
                    demo_command, event, wait_added, wait_all_see_all)

FREQUENCY, DROP_TIME = 0.1, 0.4
pytestmark = [pytest.mark.network,
              pytest.mark.skipif(Lan.available() is not None, reason=str(Lan.available()))]


def demo_argv(lan, index, *extra):
    return demo_command() + ["join", "228.0.0.4", "--interface", lan.address(index),
                             "--member-port", "4000", "--frequency", str(int(FREQUENCY * 1000)),
                             "--drop-time", str(int(DROP_TIME * 1000)), "--json", *extra]


@pytest.fixture
def lan():
    with Lan(3) as network:
        yield network


@pytest.fixture
def members(lan):
    procs = [JsonProcess(lan, i, demo_argv(lan, i)) for i in range(3)]
    yield procs
    for proc in procs:
        proc.stop(signal.SIGKILL)


def test_all_see_all_and_a_killed_host_is_dropped_in_time(lan, members):
    wait_all_see_all(lan, members)
    victim = members[2]
    killed = time.monotonic()
    victim.stop(signal.SIGKILL)
    for proc in members[:2]:
        seen, item = proc.wait_for(event("removed", lan.address(2)), timeout=3)
        assert item["reason"] == "expired"
        assert seen - killed <= DROP_TIME + FREQUENCY + 0.1   # scheduling slack
    assert_alternating(lan, members)


def test_a_graceful_stop_is_seen_by_all_within_100_ms(lan, members):
    wait_all_see_all(lan, members)
    leaving = members[1]
    stopped = time.monotonic()
    leaving.proc.send_signal(signal.SIGTERM)
    for proc in (members[0], members[2]):
        seen, item = proc.wait_for(event("removed", lan.address(1)), timeout=3)
        assert item["reason"] == "shutdown"
        assert seen - stopped < 0.1
    assert leaving.proc.wait(5) == 0
    assert_alternating(lan, members)


def test_a_partition_splits_and_heals(lan, members):
    wait_all_see_all(lan, members)
    check_partition_heals(lan, members)


SERVICE_SCRIPT = r"""
import json, sys, time
from mcastmember import McastService
address, seconds = sys.argv[1], float(sys.argv[2])
out = lambda obj: (sys.stdout.write(json.dumps(obj) + "\n"), sys.stdout.flush())
s = McastService("228.0.0.4", 45564, interface=address, member_port=4000, frequency=100,
                 drop_time=int(sys.argv[3]))
s.add_listener(lambda e: out(e.to_dict()))
with s:
    out({"event": "started", "reason": None, "member": {"host": address}})
    time.sleep(seconds)
    stats = s.stats()
out({"event": "stats", "reason": None, "member": {"host": address}, "stats": stats})
"""


def service_argv(lan, index, seconds, drop_ms):
    # -I: the installed mcastmember (compiled when built), not the source tree in the cwd
    return [sys.executable, "-I", "-c", SERVICE_SCRIPT, lan.address(index), str(seconds),
            str(drop_ms)]


def test_interface_down_and_up_the_service_recovers_without_flapping(lan):
    """Host 0's own interface goes down for longer than the drop time: every
    side expires the other (they really were silent), the sockets recover by
    themselves, all come back, and host 0 never announces a departure."""
    # host 0 reports its stats while the others are still there
    procs = [JsonProcess(lan, i, service_argv(lan, i, 6.0 if i == 0 else 9.0, 400))
             for i in range(3)]
    try:
        wait_all_see_all(lan, procs)
        lan.link(0, "down")
        for other in (1, 2):
            procs[other].wait_for(event("removed", lan.address(0), "expired"), timeout=3)
        time.sleep(1.5)     # on purpose: >10 failed heartbeats make the sender reopen (no stats to watch here)
        lan.link(0, "up")
        for other in (1, 2):
            procs[0].wait_for(event("removed", lan.address(other), "expired"), timeout=3)
        pairs = [(other, 0) for other in (1, 2)] + [(0, other) for other in (1, 2)]
        for observer, host in pairs:      # everyone back in everyone's table
            wait_added(procs[observer], lan.address(host), 2)
        _, final = procs[0].wait_for(lambda i: i["event"] == "stats", timeout=10)
        stats = final["stats"]
        assert stats["send_errors"] > 0
        assert stats["members"] == 2                 # back to a full table
        for other in (1, 2):
            assert not [i for _, i in procs[other].lines
                        if i["member"]["host"] == lan.address(0) and i["reason"] == "shutdown"
                        and i["event"] == "removed"][:-1]   # no goodbye before the real one
    finally:
        for proc in procs:
            proc.stop(signal.SIGKILL)
    assert_alternating(lan, procs)


def test_a_short_blip_expires_nobody(lan):
    procs = [JsonProcess(lan, i, service_argv(lan, i, 3.0, 1500)) for i in range(3)]
    try:
        wait_all_see_all(lan, procs)
        lan.unplug(0)
        time.sleep(0.5)                           # on purpose: a third of the drop time unplugged
        lan.plug(0)
        time.sleep(1.5)                           # on purpose: a drop time, in which nobody may expire
        for proc in procs:
            assert not [i for _, i in proc.lines if i["event"] == "removed"], proc.lines
    finally:
        for proc in procs:
            proc.stop(signal.SIGKILL)

"""The second opinion on a lossy network (issue 14), in network namespaces
with nftables dropping packets on a host's input hook: a member whose
heartbeats are lost on the way but whose port answers is kept under verify
and removed without it; a SIGKILLed member is removed under both. The
engine-level bound on probes and the kept and refused cases on loopback are
in test_verify.py. bench/lossy.py is the long version. Needs root and nftables; skipped with the reason otherwise."""

import signal
import time

import pytest

from netlab import JsonProcess, Lan, demo_command, event, loss_rules, nft_available
from support import GROUP

FREQUENCY, DROP = 0.1, 0.4
PROBE_BOUND = 0.3                   # ServiceConfig's verify_timeout default
REASON = Lan.available() or nft_available()
pytestmark = [pytest.mark.network, pytest.mark.skipif(REASON is not None, reason=str(REASON))]


def join(lan, index, port, *extra):
    return JsonProcess(lan, index, demo_command() + [
        "join", GROUP, "--port", str(port), "--interface", lan.address(index),
        "--member-port", "4000", "--frequency", str(int(FREQUENCY * 1000)),
        "--drop-time", str(int(DROP * 1000)), "--json", *extra])


def about(proc, host):
    return [(item["event"], item["reason"]) for _, item in proc.lines
            if item.get("member", {}).get("host") == host]


@pytest.fixture
def lan():
    with Lan(2) as network:
        yield network


@pytest.fixture
def cluster(lan, group_port):
    """Host 1 runs a member that answers on its port (--verify turns its
    TCP listener on); host 0 watches it with and without --verify."""
    member = join(lan, 1, group_port, "--verify")
    verified = join(lan, 0, group_port, "--verify")
    plain = join(lan, 0, group_port)
    procs = [member, verified, plain]
    try:
        for proc in (verified, plain):
            proc.wait_for(event("added", lan.address(1)), timeout=10)
        yield member, verified, plain
    finally:
        for proc in procs:
            proc.stop(signal.SIGKILL)


def test_lost_heartbeats_from_a_member_whose_port_answers_keep_it_only_under_verify(
        lan, cluster, group_port):
    member, verified, plain = cluster
    host = lan.address(1)
    # Every heartbeat from host 1 is dropped on its way into host 0.
    lan.filter(0, loss_rules(100, udp=[group_port], source=host))
    plain.wait_for(event("removed", host, "expired"), timeout=3)
    verified.wait_for(event("suspect", host), timeout=3)
    time.sleep(5 * DROP)                         # five drop times of silence
    assert about(verified, host)[-2:] == [("added", None), ("suspect", None)]
    assert about(plain, host) == [("added", None), ("removed", "expired")]
    assert lan.counters(0)[1] > 10               # they really were dropped
    # Now it crashes: its port refuses, and the next probe removes it.
    killed = time.monotonic()
    member.stop(signal.SIGKILL)
    seen, _ = verified.wait_for(event("removed", host, "expired"), timeout=3)
    # Kept for a drop time after a probe that answered, then one more probe.
    assert seen - killed <= DROP + PROBE_BOUND + 0.2
    assert about(verified, host)[-1] == ("removed", "expired")


def test_a_killed_member_is_removed_with_and_without_verify(lan, cluster):
    member, verified, plain = cluster
    host = lan.address(1)
    killed = time.monotonic()
    member.stop(signal.SIGKILL)
    for proc in (verified, plain):
        seen, _ = proc.wait_for(event("removed", host, "expired"), timeout=3)
        assert seen - killed <= DROP + PROBE_BOUND + 0.2
        assert about(proc, host) == ([("added", None), ("suspect", None),
                                      ("removed", "expired")] if proc is verified
                                     else [("added", None), ("removed", "expired")])

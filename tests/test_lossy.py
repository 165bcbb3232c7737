"""The second opinion on a lossy network (issue 14), in network namespaces
with nftables dropping packets on a host's input hook: a member whose
heartbeats are lost on the way but whose port answers is kept under verify
and removed without it; a SIGKILLed member is removed under both; a flood of
suspects whose probes hang (SYNs dropped) or whose ports accept and hold the
connection bounds the probes in flight, leaks no descriptor and does not hold
up the receiver (both fronts). The engine-level bound on probes and the kept
and refused cases on loopback are in test_verify.py. bench/lossy.py is the
long version. Needs root and nftables; skipped with the reason otherwise."""

import json
import os
import signal
import socket
import sys
import threading
import time

import pytest

from mcastmember import _codec
from mcastmember.engine import MAX_PROBES

from fronts import FRONTS
from netlab import JsonProcess, Lan, demo_command, event, loss_rules, nft_available, run_in_netns
from support import GROUP, heartbeat

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


# -- a flood of suspects whose probes hang or hold ------------------------------------

HANG, HOLD, LIVE = 4901, 4902, 4903       # member ports on the one host
FLOOD = 32                                 # suspects of each sort


# A port that accepts and then never says a word, in a process of its own
# (its descriptors are not ours): it reports how many connections were made
# to it and how many of those their prober closed.
HOLDER = r"""
import json, selectors, socket, sys
server = socket.create_server((sys.argv[1], int(sys.argv[2])), backlog=128)
selector = selectors.DefaultSelector()
selector.register(server, selectors.EVENT_READ)
accepted = closed = 0
print(json.dumps({"accepted": 0, "closed": 0}), flush=True)
while True:
    for key, _ in selector.select():
        if key.fileobj is server:
            selector.register(server.accept()[0], selectors.EVENT_READ)
            accepted += 1
        elif not key.fileobj.recv(1):          # the prober hung up
            selector.unregister(key.fileobj)
            key.fileobj.close()
            closed += 1
    print(json.dumps({"accepted": accepted, "closed": closed}), flush=True)
"""


def open_descriptors():
    return len(os.listdir("/proc/self/fd"))


def by_member(node, port):
    """(kind, reason) of the events about each member on ``port``, by unique id."""
    found = {}
    for e in node.events.events:
        if e.member and e.member.port == port:
            found.setdefault(e.member.unique_id, []).append((e.kind, e.reason))
    return found


@pytest.mark.parametrize("front_name", sorted(FRONTS))
def test_a_flood_of_hanging_and_holding_suspects_neither_blocks_nor_leaks(front_name,
                                                                          group_port):
    with Lan(1) as lan:
        address = lan.address(0)
        packed = socket.inet_aton(address)
        # SYNs to HANG are dropped: a probe of it waits out its bound.
        lan.filter(0, ["tcp dport %d counter drop" % HANG])
        holder = JsonProcess(lan, 0, [sys.executable, "-c", HOLDER, address, str(HOLD)])
        holder.wait_for(lambda item: True)
        # The front runs in the namespace: its threads (and the asyncio
        # front's loop thread) inherit it from the one that creates them.
        node = run_in_netns(lan.hosts[0], lambda: FRONTS[front_name](
            group_port, 4900, verify=True, frequency=int(FREQUENCY * 1000),
            drop_time=int(DROP * 1000)))
        sender = run_in_netns(lan.hosts[0], _sender)
        live = {"payload": b"", "run": True}

        def beat():                            # a live member, all along
            alive = 0
            while live["run"]:
                alive += 1
                sender.sendto(heartbeat(_codec.impl, port=LIVE, uid=b"L" * 16, alive=alive,
                                        host=packed, payload=live["payload"]),
                              (GROUP, group_port))
                time.sleep(FREQUENCY)
        beater = threading.Thread(target=beat, daemon=True)
        try:
            run_in_netns(lan.hosts[0], node.start)
            beater.start()
            node.events.wait_for(lambda e: e.member and e.member.port == LIVE)
            baseline = peak = open_descriptors()
            for i in range(FLOOD):             # each heard once: suspects a drop time later
                for port, tag in ((HANG, b"H"), (HOLD, b"K")):
                    sender.sendto(heartbeat(_codec.impl, port=port, uid=tag + bytes([i]) * 15,
                                            host=packed), (GROUP, group_port))
            live["payload"] = b"news"          # must get through while probes hang
            deadline = time.monotonic() + 15
            while (node.stats()["verify.timed_out"] < FLOOD
                   or node.stats()["verify.kept"] < FLOOD):
                assert time.monotonic() < deadline, json.dumps(node.stats())
                peak = max(peak, open_descriptors())
                time.sleep(0.005)
            node.events.wait_for(lambda e: e.member and e.member.port == LIVE
                                 and e.kind == "updated")
            stats = node.stats()
            assert stats["verify.timed_out"] == FLOOD and stats["verify.failed"] == 0
            assert stats["verify.kept"] >= FLOOD
            assert peak - baseline <= MAX_PROBES
            assert node.events.kinds(LIVE) == [("added", None), ("updated", None)]
            hanging, holding = by_member(node, HANG), by_member(node, HOLD)
            assert len(hanging) == len(holding) == FLOOD
            assert {tuple(v) for v in hanging.values()} == {
                (("added", None), ("suspect", None), ("removed", "expired"))}
            assert {tuple(v) for v in holding.values()} == {(("added", None), ("suspect", None))}
            # Every probe connection to the holding port was closed by its prober.
            _, counts = holder.wait_for(lambda c: c["closed"] == c["accepted"] >= FLOOD)
            assert counts["closed"] >= stats["verify.kept"]
        finally:
            live["run"] = False
            if beater.is_alive():
                beater.join(5)
            node.close()
            holder.stop(signal.SIGKILL)
            sender.close()


def _sender():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
    return sock

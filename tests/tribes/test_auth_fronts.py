"""Authenticated heartbeats on running groups (loopback, TTL 0), on both
fronts: enforce lists keyed members only, a flood of forged shutdowns,
forged members and replayed captures changes nothing, keys rotate with no
member removed; bad keys are a ConfigurationError."""

import logging
import os
import socket
import subprocess
import sys
import time

import pytest

from mcastmember import ConfigurationError, McastService
from mcastmember.tribes.kernel import codec as _codec
from mcastmember.tribes.wire import layout as L
from mcastmember.tribes.wire import auth

from test_lifecycle import front  # noqa: F401 (the fixture: a factory of members of one front)
from fronts import FAST
from support import GROUP, LOOPBACK, wait_until

pytestmark = pytest.mark.network

OLD, NEW = (1, bytes(range(32))), (2, bytes(range(50, 82)))
PURE_PYTHON_FLOOD_RATE = 20000     # datagrams/s; the compiled pump takes the full rate


def listed(member):
    return {m.port: m.authenticated for m in member.members()}


def test_enforce_lists_keyed_members_and_rotation_removes_none(front):
    a = front(4001, keys=[OLD])
    b = front(4002, keys=[OLD])
    unkeyed = front(4003)
    for member in (a, b, unkeyed):
        member.start()
    wait_until(lambda: listed(a) == {4002: True} and listed(b) == {4001: True})
    wait_until(lambda: a.stats().get("auth.no_trailer", 0) > 0)
    assert 4001 in listed(unkeyed) and listed(unkeyed)[4001] is None    # Tribes ignores the trailer

    def heard_again():      # a few heartbeats of each keyed member at the other
        marks = [m.stats()["fast_path"] for m in (a, b)]
        wait_until(lambda: all(m.stats()["fast_path"] >= mark + 4
                               for m, mark in zip((a, b), marks)))

    for ring in ([OLD, NEW], [NEW, OLD], [NEW]):    # add, switch signing, remove the old
        for member in (a, b):
            member.set_keys(ring)
            heard_again()
    assert listed(a) == {4002: True} and listed(b) == {4001: True}
    for member, other in ((a, 4002), (b, 4001)):
        assert member.events.kinds(other) == [("added", None)]
    assert all(m.stats().get("auth.unknown_key", 0) == 0 for m in (a, b))
    assert all(m.stats().get("auth.bad_mac", 0) == 0 for m in (a, b))


def test_permissive_lists_unkeyed_members_as_unauthenticated(front):
    a = front(4001, keys=[OLD], auth="permissive")
    b = front(4002, keys=[OLD])
    c = front(4003)
    for member in (a, b, c):
        member.start()
    wait_until(lambda: listed(a) == {4002: True, 4003: False})
    a.set_keys([OLD], "enforce")       # the roll-out's last step
    wait_until(lambda: listed(a) == {4002: True})
    # the table drops it before the dispatcher delivers the event: wait for that
    wait_until(lambda: len(a.events.kinds(4003)) == 2)
    assert a.events.kinds(4003) == [("added", None), ("removed", "expired")]


def test_permissive_refuses_unkeyed_forgeries_in_a_keyed_members_name(front, group_port):
    # A forged payload change and a forged goodbye, without a
    # trailer, used to update and remove the keyed member b at a.
    a = front(4001, keys=[OLD], auth="permissive")
    b = front(4002, keys=[OLD], payload=b"real")
    for member in (a, b):
        member.start()
    wait_until(lambda: listed(a) == {4002: True})
    twin = McastService(GROUP, group_port, member_port=4002, unique_id=b.front.config.unique_id,
                        payload=b"forged", **LOOPBACK).config
    forged = [twin.encode(), twin.encode(L.SHUTDOWN_COMMAND)] * 3
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
        for datagram in forged:
            tx.sendto(datagram, (GROUP, group_port))
    wait_until(lambda: a.stats()["auth.no_trailer"] == len(forged))
    assert [(m.port, m.payload, m.authenticated) for m in a.members()] == [(4002, b"real", True)]
    assert a.events.kinds(4002) == [("added", None)]
    assert a.stats()["refused_unauthenticated"] == len(forged)


FLOODER = r"""
import os, socket, sys, time
port, seconds, rate = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
datagrams = [bytes.fromhex(h) for h in sys.argv[4:]]
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
tx.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
tx.connect(("228.0.0.4", port))
forged_member = bytearray(datagrams[0])   # a stranger whose unique id changes every time
uid_at = forged_member.index(bytes(16))
sent, start = 0, time.monotonic()
while time.monotonic() < start + seconds:
    forged_member[uid_at:uid_at + 8] = os.urandom(8)
    for datagram in [bytes(forged_member)] + datagrams[1:]:
        try:
            tx.send(datagram); sent += 1
        except OSError:
            pass
    if rate:
        ahead = sent / rate - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
print(sent)
"""


def test_floods_of_forgeries_and_replays_change_nothing(group_port, caplog):
    """The attack keys exist for: copies of a member's heartbeat turned into its
    shutdown, at loopback's full rate, with forged members and replayed
    captures: the member stays, nobody is added, drops are counted by
    reason, two log lines at most."""
    ring = auth.HeartbeatKeys([OLD])
    events = []
    # A drop time longer than the flood: on a loaded machine the flood may
    # crowd real heartbeats out of the socket buffer (capacity, not
    # authentication); what must not happen is a forged goodbye's removal.
    timing = {**FAST, "drop_time": 2500}
    a = McastService(GROUP, group_port, member_port=4001, keys=ring, **LOOPBACK, **timing)
    b = McastService(GROUP, group_port, member_port=4002, keys=ring, **LOOPBACK, **timing)
    a.add_listener(events.append)
    with caplog.at_level(logging.INFO, logger="mcastmember"), a, b:
        wait_until(lambda: [m.port for m in a.members()] == [4002])
        goodbye = b.config.encode(L.SHUTDOWN_COMMAND)
        heartbeat = b.config.encode()
        wrong = auth.HeartbeatKeys([(1, os.urandom(32))])
        stranger = McastService(GROUP, group_port, member_port=5000, unique_id=bytes(16),
                                **LOOPBACK).config.encode()
        now_us = time.time_ns() // 1000
        floods = [stranger + auth.trailer(stranger, wrong, now_us),      # forged members
                  goodbye,                                               # no trailer
                  goodbye + auth.trailer(goodbye, wrong, now_us),        # bad MAC
                  goodbye + auth.trailer(goodbye, auth.HeartbeatKeys([(9, OLD[1])]), now_us),
                  goodbye + auth.trailer(goodbye, ring, now_us - 10**6),  # a replay
                  heartbeat + auth.trailer(heartbeat, ring, now_us - 10**6)]
        rate = 0 if _codec.IMPLEMENTATION == "compiled" else PURE_PYTHON_FLOOD_RATE
        flood = subprocess.run([sys.executable, "-c", FLOODER, str(group_port), "2", str(rate)]
                               + [d.hex() for d in floods], capture_output=True, text=True,
                               timeout=60)
        sent = int(flood.stdout)
        stats = wait_until(lambda: (stats := a.stats()) and all(
            stats.get(f"auth.{reason}", 0) > 0 for reason in ("no_trailer", "bad_mac", "unknown_key", "replay"))
            and stats)
        assert [m.port for m in a.members()] == [4002]
        during = [(e.kind, e.reason, e.member.port) for e in events]
    assert during == [("added", None, 4002)]
    for reason in ("no_trailer", "bad_mac", "unknown_key", "replay"):
        assert stats[f"auth.{reason}"] > 0, reason
    assert stats["members"] == 1 and stats.get("pauses", 0) == 0
    print(f"auth flood ({_codec.IMPLEMENTATION}): {sent} sent in 2 s, "
          f"{sum(v for k, v in stats.items() if k.startswith('auth.'))} refused by reason")
    assert len([r for r in caplog.records if "authentic" in r.getMessage()]) <= 2


@pytest.mark.parametrize("settings, message", [
    ({"auth": "enforce"}, "needs keys"),
    ({"keys": [OLD], "auth": "strict"}, "auth must be"),
    ({"keys": [(0, OLD[1])]}, "not 1-255"),
    ({"keys": [(1, b"short")]}, "must be 32 bytes"),
    ({"keys": [OLD, OLD]}, "listed twice"),
    ({"keys": [1, 2]}, "pairs"),
    ({"keys": "/nonexistent/keys"}, "No such file"),
])
def test_bad_keys_are_a_configuration_error(settings, message):
    with pytest.raises(ConfigurationError, match=message):
        McastService(GROUP, 45564, **LOOPBACK, **settings)


def test_set_keys_refuses_bad_keys_and_keeps_the_old(group_port):
    service = McastService(GROUP, group_port, keys=[OLD], **LOOPBACK)
    with pytest.raises(ConfigurationError):
        service.set_keys([(1, b"short")])
    assert service.auth == "enforce" and service._engine.key_ring.keys == {1: OLD[1]}
    assert service.config.auth == "enforce"     # the settings given, never changed
    service.set_keys(None)
    assert (service.auth, service.config.auth) == ("off", "enforce")

"""The engine without multicast, on a fake clock: where unicast heartbeats go,
who may join by unicast, DNS answers and failures, and Tomcat's cloud
membership mode. Both implementations (the ``codec`` fixture); no sockets."""

import hashlib
import logging
import socket

import pytest

from mcastmember.tribes.engine.config import ServiceConfig
from mcastmember.tribes.engine.engine import MembershipEngine
from mcastmember._runtime.errors import ConfigurationError
from mcastmember.tribes.discovery.resolver import Answer, DnsFailure

from support import heartbeat

ME = "127.0.0.1"
A, B = b"\x7f\x00\x00\x02", b"\x7f\x00\x00\x03"
PORT = 45564


@pytest.fixture
def make(codec):
    def make(**settings):
        options = dict(interface=ME, multicast=False, member_port=4001, frequency=500,
                       drop_time=3000)
        options.update(settings)
        group = "228.0.0.4" if options["multicast"] else None
        return MembershipEngine(ServiceConfig(group, PORT, **options), codec=codec)
    return make


def hear(engine, now, source, **fields):
    packet = heartbeat(engine._codec, **fields)
    engine.receive(bytearray(packet), len(packet), now, (source, 40000))


def kinds(engine):
    return [(e.kind, e.reason, e.member.port) for e in engine.events()]


def uid(i):
    return bytes([i]) * 16


def test_static_peers_are_the_targets_ourselves_left_out(make):
    engine = make(peers=["127.0.0.2", "127.0.0.3:5000", f"{ME}:{PORT}", "127.0.0.2"])
    assert engine.targets.peers == ((A, PORT), (B, 5000))
    assert engine.targets.family == socket.AF_INET
    engine.start(0.0)
    assert engine.lookups_due(0.0) == []      # nothing to resolve
    assert engine.next_deadline() == 0.0      # the first heartbeat, at once


def test_a_listed_peer_joins_and_a_stranger_is_refused(make):
    engine = make(peers=["127.0.0.2"])
    engine.start(0.0)
    hear(engine, 0.1, B, port=4003, uid=uid(3), host=B)
    assert kinds(engine) == []
    assert engine.stats()["refused_unlisted"] == 1
    hear(engine, 0.2, A, port=4002, uid=uid(2), host=A)
    assert kinds(engine) == [("added", None, 4002)]
    # Multicast datagrams (no source given) are not filtered.
    engine.receive(*_datagram(engine, port=4004, uid=uid(4)), 0.3)
    assert kinds(engine) == [("added", None, 4004)]


def _datagram(engine, **fields):
    packet = heartbeat(engine._codec, **fields)
    return bytearray(packet), len(packet)


def test_accept_unknown_lets_anyone_join(make):
    engine = make(peers=["127.0.0.2"], accept_unknown=True)
    engine.start(0.0)
    hear(engine, 0.1, B, port=4003, uid=uid(3), host=B)
    assert kinds(engine) == [("added", None, 4003)]
    assert engine.stats()["refused_unlisted"] == 0


def test_a_member_that_left_dns_stays_while_it_heartbeats_but_nobody_speaks_for_it(make):
    engine = make(dns="members.test")
    engine.start(0.0)
    (lookup,) = engine.lookups_due(0.0)
    engine.on_lookup(lookup, {("127.0.0.2", PORT)}, 0.0)
    hear(engine, 0.1, A, port=4002, uid=uid(2), host=A, payload=b"v1")
    assert kinds(engine) == [("added", None, 4002)]
    (lookup,) = engine.lookups_due(5.0)
    engine.on_lookup(lookup, set(), 5.0)           # its address left DNS
    assert engine.targets.peers == ()
    hear(engine, 5.1, A, port=4002, uid=uid(2), host=A, payload=b"v2")
    assert kinds(engine) == [("updated", None, 4002)]
    # Someone else, from elsewhere, in its name: refused.
    hear(engine, 5.2, B, port=4002, uid=uid(2), host=A, command=b"BABY-ALEX")
    assert kinds(engine) == []
    assert engine.stats()["refused_unlisted"] == 1


def test_dns_answers_change_the_targets_and_failures_keep_the_last(make, caplog):
    engine = make(dns="members.test", dns_interval=1000)
    engine.start(0.0)
    (lookup,) = engine.lookups_due(0.0)
    assert engine.lookups_due(0.1) == []               # one query at a time
    engine.on_lookup(lookup, {("127.0.0.2", PORT), ("127.0.0.3", PORT), (ME, PORT)}, 0.2)
    assert engine.targets.peers == ((A, PORT), (B, PORT))
    assert engine.next_deadline() <= 1.2
    with caplog.at_level(logging.WARNING, "mcastmember"):
        for at, reason in ((1.2, "timeout"), (2.2, "servfail"), (3.2, "timeout")):
            (lookup,) = engine.lookups_due(at)
            engine.on_lookup(lookup, DnsFailure(reason, "members.test"), at)
            assert engine.targets.peers == ((A, PORT), (B, PORT))
    stats = engine.stats()
    assert (stats["peers"], stats["lookups_answered"], stats["lookups_failed.timeout"],
            stats["lookups_failed.servfail"]) == (2, 1, 2, 1)
    # Rate-limited: one warning for the run of failures.
    assert sum("cannot resolve members.test" in r.message for r in caplog.records) == 1


def test_an_answer_in_part_is_used_and_its_failed_part_counted(make, caplog):
    # An A answer beside a refused AAAA query: the addresses are peers, the
    # refusal is counted and logged (rate-limited, as failures are).
    engine = make(dns="members.test", dns_interval=1000)
    engine.start(0.0)
    refused = DnsFailure("servfail", "members.test. IN AAAA: answered REFUSED")
    with caplog.at_level(logging.WARNING, "mcastmember"):
        for at in (0.0, 1.0):
            (lookup,) = engine.lookups_due(at)
            engine.on_lookup(lookup, Answer({("127.0.0.2", PORT)}, [refused]), at)
    assert engine.targets.peers == ((A, PORT),)
    stats = engine.stats()
    assert (stats["peers"], stats["lookups_answered"], stats["lookups_failed.servfail"]) == (
        1, 2, 2)
    assert [r.getMessage() for r in caplog.records] == [
        "members.test answered in part (servfail: members.test. IN AAAA: answered REFUSED): "
        "using its 1 address"]


def test_a_lookup_that_raised_a_base_exception_is_a_failure(make):
    # The asyncio front hands on what its executor future holds, which may be
    # any BaseException: the lookup must end (counted, due again), not stay
    # in flight for ever on a TypeError.
    engine = make(dns="members.test", dns_interval=1000)
    engine.start(0.0)
    (lookup,) = engine.lookups_due(0.0)
    engine.on_lookup(lookup, {("127.0.0.2", PORT)}, 0.1)
    (lookup,) = engine.lookups_due(1.1)
    engine.on_lookup(lookup, SystemExit(1), 1.1)
    assert engine.targets.peers == ((A, PORT),)
    assert engine.stats()["lookups_failed.error"] == 1
    assert engine.lookups_due(2.1) == [lookup]


def test_static_host_names_are_looked_up_by_the_system_resolver(make):
    engine = make(peers=["node-1:5000", "127.0.0.2"])
    engine.start(0.0)
    (lookup,) = engine.lookups_due(0.0)
    assert (lookup.name, lookup.port, lookup.system) == ("node-1", 5000, True)
    engine.on_lookup(lookup, {("127.0.0.3", 5000)}, 0.1)
    assert engine.targets.peers == ((A, PORT), (B, 5000))


def test_ipv6_peers_are_skipped_from_an_ipv4_address(make, caplog):
    engine = make(peers=["127.0.0.2", "[fd00::5]:45564"])
    assert engine.targets.peers == ((A, PORT),)


def test_unicast_send_results_are_counted_and_never_reopen(make):
    engine = make(peers=["127.0.0.2"])
    engine.start(0.0)
    for i in range(20):
        engine.on_unicast_result(-101, float(i))     # ENETUNREACH
    engine.on_unicast_result(1, 21.0)
    stats = engine.stats()
    assert (stats["unicast_send_errors"], stats["unicast_sent"]) == (20, 1)
    assert engine.reopen_due() == []


def test_lookups_stop_with_the_engine(make):
    engine = make(dns="members.test")
    engine.start(0.0)
    (lookup,) = engine.lookups_due(0.0)
    engine.stop(0.1)
    engine.on_lookup(lookup, {("127.0.0.2", PORT)}, 0.2)     # an answer after the stop
    assert engine.lookups_due(0.3) == [] and engine.targets.peers == ()


# -- Tomcat's cloud membership: members are the DNS answer ---------------------------

def md5(text):
    return hashlib.md5(text.encode("ascii")).digest()


def test_dns_members_are_the_answer_named_as_tomcat_names_them(make):
    engine = make(dns="tomcat.test", dns_members=True, member_port=4100)
    assert engine.config.unique_id == md5(ME)
    engine.start(0.0)
    assert engine.outgoing(0.0) is None               # no heartbeats in this mode
    (lookup,) = engine.lookups_due(0.0)
    engine.on_lookup(lookup, {("127.0.0.2", PORT), ("127.0.0.3", PORT), (ME, PORT)}, 0.1)
    events = engine.events()
    assert [(e.kind, e.member.host, e.member.port, e.member.unique_id, e.member.alive_ms)
            for e in events] == [("added", A, 4100, md5("127.0.0.2"), -1),
                                 ("added", B, 4100, md5("127.0.0.3"), -1)]
    assert [m.host for m in engine.members()] == [A, B]
    assert engine.stats()["members"] == 2
    # Failures keep them; leaving the answer removes them ("unlisted").
    (lookup,) = engine.lookups_due(5.1)
    engine.on_lookup(lookup, DnsFailure("timeout"), 5.1)
    assert engine.events() == [] and len(engine.members()) == 2
    (lookup,) = engine.lookups_due(10.1)
    engine.on_lookup(lookup, {("127.0.0.3", PORT)}, 10.1)
    assert [(e.kind, e.reason, e.member.host) for e in engine.events()] == [
        ("removed", "unlisted", A)]
    assert engine.stats()["removed.unlisted"] == 1
    engine.stop(11.0)
    assert [(e.kind, e.reason, e.member.host) for e in engine.events()] == [
        ("removed", "stopped", B)]
    assert engine.members() == []


def test_dns_members_name_ipv6_members_by_java_s_text_of_their_address(make):
    # Tomcat digests InetAddress.getHostAddress(), which writes every one of
    # the eight groups and never "::" (found against Tomcat's own jar,
    # tests/interop/test_tomcat_cloud.py): so must we, or each side names the other
    # differently.
    engine = make(interface="::1", dns="tomcat.test", dns_members=True, member_port=4100)
    assert engine.config.unique_id == md5("0:0:0:0:0:0:0:1")
    engine.start(0.0)
    (lookup,) = engine.lookups_due(0.0)
    engine.on_lookup(lookup, {("fd00:250::2", PORT), ("fd00:0:0:0:1:a0:0:bc", PORT),
                              ("::1", PORT)}, 0.1)
    assert sorted((e.kind, e.member.unique_id) for e in engine.events()) == sorted([
        ("added", md5("fd00:250:0:0:0:0:0:2")), ("added", md5("fd00:0:0:0:1:a0:0:bc"))])


@pytest.mark.parametrize("settings, message", [
    (dict(), "nobody to send to: give peers= or dns="),
    (dict(peers=["127.0.0.2"], interface=None), "set interface= \\(or host=\\)"),
    (dict(dns_srv=True), "dns_srv needs dns="),
    (dict(dns_members=True), "dns_members needs dns="),
    (dict(dns="a.test", dns_members=True, peers=["127.0.0.2"]), "from DNS alone"),
    (dict(dns="a.test", dns_members=True, multicast=True), "from DNS alone"),
    (dict(dns="", peers=["127.0.0.2"]), "dns must be a host name"),
    (dict(peers=["127.0.0.2:0"]), "port '0' is not 1-65535"),
    (dict(peers=7), "peers must be a list of addresses"),
    (dict(dns="a.test", dns_servers=["ns.example"]), "dns_servers: 'ns.example' is not an address"),
    (dict(dns="a.test", dns_interval=50), "dns_interval 50 is out of range"),
    (dict(peers=["127.0.0.2"], accept_unknown="yes"), "accept_unknown must be True or False"),
    (dict(peers=["127.0.0.2", "127.0.0.3", "node.test"], max_members=2),
     "^3 peers listed, more than max_members \\(2\\)$"),
])
def test_bad_unicast_settings_say_what_is_wrong(make, settings, message):
    with pytest.raises(ConfigurationError, match=message):
        make(**settings)


def test_peers_may_be_one_comma_separated_string(make):
    engine = make(peers="127.0.0.2, 127.0.0.3:5000")
    assert engine.targets.peers == ((A, PORT), (B, 5000))


def addresses(prefix, count):
    return {(f"{prefix}.{i}", PORT) for i in range(1, count + 1)}


def test_peers_past_max_members_are_left_out_counted_and_logged_when_first_hit(make, caplog):
    """One DNS answer of thousands of addresses made a member send thousands
    of datagrams a period: the peers are bounded by max_members,
    the static address kept, then the resolved ones in address order."""
    engine = make(peers=["127.9.0.1", "static.test"], dns="members.test", max_members=8)
    engine.start(0.0)
    static_name, dns_name = engine.lookups_due(0.0)
    with caplog.at_level(logging.WARNING, "mcastmember"):
        engine.on_lookup(dns_name, addresses("127.1.0", 20), 0.1)
        assert [socket.inet_ntoa(a) for a, _ in engine.targets.peers] == [
            f"127.1.0.{i}" for i in range(1, 8)] + ["127.9.0.1"]
        engine.on_lookup(static_name, addresses("127.2.0", 3), 0.2)      # still past it
        assert (engine.stats()["peers"], engine.stats()["peers_refused"]) == (8, 13 + 16)
        static_name, dns_name = engine.lookups_due(6.0)
        engine.on_lookup(dns_name, addresses("127.1.0", 3), 6.0)       # back under it
        engine.on_lookup(static_name, addresses("127.2.0", 3), 6.0)
        assert (engine.stats()["peers"], engine.stats()["peers_refused"]) == (7, 29)
        static_name, dns_name = engine.lookups_due(12.0)
        engine.on_lookup(dns_name, addresses("127.1.0", 20), 12.0)     # past it again
    assert engine.stats()["peers_refused"] == 29 + 16
    warned = [r.getMessage() for r in caplog.records]
    assert warned == ["21 peer addresses resolved, more than max_members (8): heartbeats go "
                      "to the first 8 only",
                      "24 peer addresses resolved, more than max_members (8): heartbeats go "
                      "to the first 8 only"]


def test_dns_members_past_max_members_are_left_out(make):
    engine = make(dns="tomcat.test", dns_members=True, member_port=4100, max_members=4)
    engine.start(0.0)
    (lookup,) = engine.lookups_due(0.0)
    engine.on_lookup(lookup, addresses("127.1.0", 10), 0.1)
    assert [e.member.address for e in engine.events()] == [f"127.1.0.{i}" for i in range(1, 5)]
    assert engine.stats()["peers_refused"] == 6

"""DNS discovery against a real DNS server (dnsmasq) in a network namespace
the test makes: A/AAAA and SRV answers, changes, and every kind of failure
(peers.py decides, dns.py asks). Skipped without root or dnsmasq."""

import pytest

import time
import types

pytest.importorskip("dns.resolver", reason="dnspython is not installed")
import dns.exception                     # noqa: E402
import dns.name                          # noqa: E402
import dns.resolver                      # noqa: E402

from mcastmember.tribes.discovery import resolver as mdns  # noqa: E402
from mcastmember.tribes.discovery.peers import PeerSet    # noqa: E402

import dnslab                            # noqa: E402
from netlab import Lan, run_in_netns     # noqa: E402

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def lan():
    reason = Lan.available() or dnslab.available()
    if reason:
        pytest.skip(reason)
    with Lan(hosts=1) as lan:
        yield lan


@pytest.fixture
def server(lan, tmp_path):
    dns = dnslab.DnsServer(lan.hosts[0], lan.address(0), tmp_path).start()
    yield dns
    dns.stop()


def ask(lan, name, srv=False, port=45564, timeout=1.0):
    def query():
        resolver = mdns.make_resolver([lan.address(0)], timeout=timeout)
        return mdns.resolve(resolver, name, port, srv=srv)
    return run_in_netns(lan.hosts[0], query)


def failure(lan, name, **kw):
    with pytest.raises(mdns.DnsFailure) as caught:
        ask(lan, name, **kw)
    return caught.value.reason


def test_a_and_aaaa_records_give_peers_on_our_port(lan, server):
    server.set({"members.test": ["10.250.0.5", "10.250.0.6", "fd00::7"]})
    assert ask(lan, "members.test") == {("10.250.0.5", 45564), ("10.250.0.6", 45564),
                                        ("fd00::7", 45564)}


def test_srv_records_give_each_peer_its_port(lan, server):
    server.set({"a.test": ["10.250.0.5"], "b.test": ["10.250.0.6"]},
               srv={"_membership._udp.svc.test": [("a.test", 4001), ("b.test", 4002)]})
    assert ask(lan, "_membership._udp.svc.test", srv=True) == {("10.250.0.5", 4001),
                                                               ("10.250.0.6", 4002)}


def test_a_change_is_seen_by_the_next_query(lan, server):
    server.set({"members.test": ["10.250.0.5"]})
    assert ask(lan, "members.test") == {("10.250.0.5", 45564)}
    server.set({"members.test": ["10.250.0.5", "10.250.0.9"]})
    assert ask(lan, "members.test") == {("10.250.0.5", 45564), ("10.250.0.9", 45564)}


def test_each_failure_has_its_reason(lan, server):
    server.set({"members.test": ["10.250.0.5"]})
    assert failure(lan, "nobody.test") == "nxdomain"
    assert failure(lan, "members.test", srv=True) == "no_answer"
    server.stop()                  # nothing listens on port 53 any more
    assert failure(lan, "members.test", timeout=0.5) == "timeout"


def test_a_refused_aaaa_costs_not_the_a_answer(lan, tmp_path):
    # dnsmasq without upstream answers A from its hosts file and refuses AAAA
    # for the same name: the A records are used, the refusal reported apart.
    dns = dnslab.DnsServer(lan.hosts[0], lan.address(0), tmp_path, authoritative=False)
    dns.records = {"members.test": ["10.250.0.5", "10.250.0.6"]}
    dns.start()
    try:
        answer = ask(lan, "members.test")
        assert answer == {("10.250.0.5", 45564), ("10.250.0.6", 45564)}
        [refused] = answer.failures
        assert refused.reason == "servfail"
        assert "members.test" in str(refused) and "AAAA" in str(refused)
        assert "REFUSED" in str(refused)
        assert failure(lan, "nobody.test") == "servfail"     # refused both ways: a failure
    finally:
        dns.stop()


class FakeResolver:
    """Answers ``resolve(name, kind)`` from ``records[(name, kind)]``: a list
    of records, or an exception to raise; asked queries are kept."""

    lifetime = 2.0

    def __init__(self, records):
        self.records, self.asked = records, []

    def resolve(self, name, kind, lifetime=None):
        assert kind == "SRV" or 0 < lifetime <= self.lifetime
        self.asked.append((name, kind))
        answer = self.records.get((name, kind), dns.resolver.NoAnswer())
        if callable(answer):
            answer = answer()
        if isinstance(answer, BaseException):
            raise answer
        return answer


def a(address):
    return types.SimpleNamespace(address=address)


def srv(target, port):
    return types.SimpleNamespace(target=dns.name.from_text(target), port=port)


def test_a_and_aaaa_count_apart_one_answering_is_enough():
    refused = dns.resolver.NoNameservers()
    fake = FakeResolver({("m.test", "A"): [a("10.0.0.5")], ("m.test", "AAAA"): refused})
    answer = mdns.resolve(fake, "m.test", 4000)
    assert answer == {("10.0.0.5", 4000)}
    assert [(f.reason, str(f)) for f in answer.failures] == [("servfail", f"servfail: {refused}")]
    fake = FakeResolver({("m.test", "A"): dns.exception.Timeout(),
                         ("m.test", "AAAA"): [a("fd00::5")]})
    answer = mdns.resolve(fake, "m.test", 4000)
    assert answer == {("fd00::5", 4000)}
    assert [str(f) for f in answer.failures] == ["timeout: m.test A"]
    fake = FakeResolver({("m.test", "A"): [a("10.0.0.5")]})        # no AAAA record: no failure
    assert mdns.resolve(fake, "m.test", 4000).failures == ()


def test_nothing_answered_is_the_first_failure():
    fake = FakeResolver({("m.test", "A"): dns.exception.Timeout(),
                         ("m.test", "AAAA"): dns.resolver.NoNameservers()})
    with pytest.raises(mdns.DnsFailure, match="^timeout: m.test A$"):
        mdns.resolve(fake, "m.test", 4000)
    with pytest.raises(mdns.DnsFailure, match="^no_answer: m.test$"):
        mdns.resolve(FakeResolver({}), "m.test", 4000)
    fake = FakeResolver({("m.test", "A"): dns.resolver.NXDOMAIN()})
    with pytest.raises(mdns.DnsFailure, match="^nxdomain: m.test$"):
        mdns.resolve(fake, "m.test", 4000)
    assert fake.asked == [("m.test", "A")]      # a name that does not exist has no AAAA either


def test_a_and_aaaa_share_one_timeout():
    # A server gone away costs one timeout, not one per record type.
    def spend_it_all():
        time.sleep(fake.lifetime * 1.5)
        return dns.exception.Timeout()
    fake = FakeResolver({("m.test", "A"): spend_it_all, ("m.test", "AAAA"): [a("fd00::5")]})
    fake.lifetime = 0.05
    with pytest.raises(mdns.DnsFailure, match="^timeout: m.test A$"):
        mdns.resolve(fake, "m.test", 4000)
    assert fake.asked == [("m.test", "A")]


def test_an_srv_target_that_fails_costs_not_the_others():
    fake = FakeResolver({("s.test", "SRV"): [srv("a.test.", 4001), srv("b.test.", 4002)],
                         ("a.test", "A"): dns.resolver.NXDOMAIN(),
                         ("b.test", "AAAA"): [a("fd00::6")]})
    answer = mdns.resolve(fake, "s.test", 4000, srv=True)
    assert answer == {("fd00::6", 4002)}
    assert [str(f) for f in answer.failures] == ["nxdomain: a.test"]


def test_failures_keep_the_last_good_answer():
    own = (bytes([10, 0, 0, 1]), 45564)
    peers = PeerSet(port=45564, own=own, interval=5.0, dns="members.test", max_peers=1024)
    [lookup] = peers.due(0.0)
    assert peers.due(0.1) == []                            # one query at a time
    assert peers.next_deadline() is None                   # in flight: nothing to wait for
    assert peers.on_answer(lookup, {("10.0.0.5", 45564), ("10.0.0.1", 45564)}, 0.2) is True
    assert peers.peers == {(bytes([10, 0, 0, 5]), 45564)}  # ourselves left out
    assert peers.next_deadline() == 5.2 and peers.due(5.1) == []
    assert peers.due(5.2) == [lookup]
    assert peers.on_answer(lookup, {("10.0.0.5", 45564)}, 5.2) is False   # no change
    for at, reason in ((10.2, "timeout"), (15.2, "servfail"), (20.2, "nxdomain")):
        assert peers.due(at) == [lookup]
        peers.on_failure(lookup, reason, at)
        assert peers.peers == {(bytes([10, 0, 0, 5]), 45564)}
    assert peers.stats() == {"peers": 1, "peers_refused": 0, "lookups_answered": 2,
                             "lookups_failed.timeout": 1,
                             "lookups_failed.servfail": 1, "lookups_failed.nxdomain": 1,
                             "lookups_failed.no_answer": 0, "lookups_failed.error": 0}

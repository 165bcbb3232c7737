"""Peer specifications, as users write them in settings and on the command line."""

import pytest

from mcastmember._runtime.errors import ConfigurationError
from mcastmember.tribes.discovery.peers import parse_peer


@pytest.mark.parametrize("spec, expected", [
    ("10.0.0.5", ("10.0.0.5", 45564)),
    ("10.0.0.5:4000", ("10.0.0.5", 4000)),
    (" 10.0.0.5:4000 ", ("10.0.0.5", 4000)),
    ("[fd00::5]:45565", ("fd00::5", 45565)),
    ("[fd00::5]", ("fd00::5", 45564)),
    ("fd00::5", ("fd00::5", 45564)),
    ("fe80::1%eth0", ("fe80::1%eth0", 45564)),
    ("node-1", ("node-1", 45564)),
    ("node-1.cluster.local:7000", ("node-1.cluster.local", 7000)),
])
def test_peer_specs(spec, expected):
    assert parse_peer(spec, 45564) == expected


@pytest.mark.parametrize("spec, message", [
    ("", "is not an address or host name"),
    (None, "is not an address or host name"),
    ("10.0.0.5:0", "port '0' is not 1-65535"),
    ("10.0.0.5:70000", "port '70000' is not 1-65535"),
    ("10.0.0.5:http", "port 'http' is not 1-65535"),
    ("[fd00::5", "missing ']'"),
    ("[fd00::5]45564", "expected ':PORT' after ']'"),
    ("[node-1]:4000", "is not an IPv6 address"),
    ("fd00::5:x:y", "write IPv6 as [ADDR]:PORT"),
    (":4000", "has no host"),
])
def test_bad_peer_specs_say_what_is_wrong(spec, message):
    with pytest.raises(ConfigurationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_peer(spec, 45564)


def test_static_host_names_go_to_the_system_resolver():
    # "localhost" comes from /etc/hosts: nothing is asked of any DNS server.
    from mcastmember.tribes.discovery.peers import Lookup
    from mcastmember.tribes.discovery.resolver import lookup
    answer = lookup(Lookup("localhost", 45570, 5.0, system=True))
    assert ("127.0.0.1", 45570) in answer
    assert {port for _, port in answer} == {45570}


def test_the_peer_set_is_the_union_of_its_sources_without_us():
    from mcastmember.tribes.discovery.peers import PeerSet
    peers = PeerSet(["10.0.0.5", "10.0.0.6:5000", "node-1"], port=45564,
                    own=(bytes([10, 0, 0, 9]), 45564), interval=5.0, dns="members.test",
                    max_peers=1024)
    assert [(lookup.name, lookup.system) for lookup in peers.lookups] == [
        ("node-1", True), ("members.test", False)]
    node, dns = peers.due(0.0)
    assert peers.due(0.0) == []
    assert peers.on_answer(node, {("10.0.0.7", 45564)}, 0.1) is True
    assert peers.on_answer(dns, {("10.0.0.5", 45564), ("10.0.0.9", 45564)}, 0.2) is False
    assert peers.peers == {(bytes([10, 0, 0, 5]), 45564), (bytes([10, 0, 0, 6]), 5000),
                           (bytes([10, 0, 0, 7]), 45564)}
    assert peers.hosts == {bytes([10, 0, 0, i]) for i in (5, 6, 7)}
    assert peers.next_deadline() == 5.1

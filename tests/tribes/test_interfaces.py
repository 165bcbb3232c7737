"""Choosing the network card (interfaces.py): by name, index or address, the
address advertised for the group's family, and errors that list what the
host has. In a network namespace made here: a veth pair with IPv4, a global
IPv6 and a link-local IPv6 address, and a second card without IPv6."""

import subprocess
import uuid

import pytest

from mcastmember.tribes.net import interfaces
from mcastmember._runtime.errors import ConfigurationError

from netlab import Lan, run_in_netns


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def host():
    reason = Lan.available()
    if reason:
        pytest.skip(reason)
    name = f"mcmif{uuid.uuid4().hex[:6]}"
    _ip("netns", "add", name)
    try:
        _ip("-n", name, "link", "set", "lo", "up")
        _ip("-n", name, "link", "add", "lan0", "type", "veth", "peer", "name", "lan0p")
        _ip("-n", name, "link", "add", "vpn0", "type", "veth", "peer", "name", "vpn0p")
        _ip("-n", name, "addr", "add", "10.9.0.2/24", "dev", "lan0")
        _ip("-n", name, "addr", "add", "fd00:9::2/64", "dev", "lan0", "nodad")
        _ip("-n", name, "addr", "add", "fe80::2/64", "dev", "lan0", "nodad")
        _ip("-n", name, "addr", "add", "10.8.0.2/24", "dev", "vpn0")
        subprocess.run(["ip", "netns", "exec", name, "sysctl", "-qw",
                        "net.ipv6.conf.vpn0.disable_ipv6=1"], check=True, timeout=30)
        for card in ("lan0", "lan0p", "vpn0", "vpn0p"):
            _ip("-n", name, "link", "set", card, "up")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def choose(host, spec, family=4):
    return run_in_netns(host, interfaces.choose, spec, family)


def test_by_name_the_address_of_the_groups_family(host):
    choice = choose(host, "lan0")
    assert (choice.interface.name, str(choice.address)) == ("lan0", "10.9.0.2")
    assert choice.reason == "10.9.0.2 is lan0's only IPv4 address"


def test_ipv6_prefers_a_global_address_to_link_local(host):
    choice = choose(host, "lan0", 6)
    assert str(choice.address) == "fd00:9::2"
    assert choice.reason == "fd00:9::2 is lan0's first global IPv6 address (preferred to link-local)"


def test_by_index_and_by_address(host):
    index = choose(host, "vpn0").interface.index
    assert choose(host, index).interface.name == "vpn0"
    assert choose(host, str(index)).interface.name == "vpn0"
    by_address = choose(host, "10.9.0.2")
    assert (by_address.interface.name, by_address.reason) == ("lan0", "10.9.0.2 was given")
    link_local = choose(host, "fe80::2", 6)
    assert link_local.interface.name == "lan0"
    assert str(link_local.address) == f"fe80::2%{link_local.interface.index}"   # scoped


def test_unknown_interface_lists_what_the_host_has(host):
    with pytest.raises(ConfigurationError) as caught:
        choose(host, "eth7")
    message = str(caught.value)
    assert message.startswith("no network interface 'eth7' on this host (this host has: lo (")
    assert "lan0 (index" in message and "10.9.0.2, fd00:9::2" in message
    assert "vpn0 (index" in message and "10.8.0.2" in message


def test_a_card_without_the_family_says_so(host):
    with pytest.raises(ConfigurationError, match=r"interface vpn0 has no IPv6 address"):
        choose(host, "vpn0", 6)
    with pytest.raises(ConfigurationError, match=r"10.9.0.2 is IPv4, the group is IPv6"):
        choose(host, "10.9.0.2", 6)


def test_an_ipv4_mapped_address_names_the_card_of_its_ipv4_address(host):
    # One reading of an address for the whole package (transport.net.unscoped):
    # ::ffff:10.9.0.2 is 10.9.0.2, as in a heartbeat's host bytes.
    choice = choose(host, "::ffff:10.9.0.2")
    assert (choice.interface.name, str(choice.address)) == ("lan0", "10.9.0.2")
    assert choice.reason == "10.9.0.2 was given"
    with pytest.raises(ConfigurationError, match=r"10.9.0.2 is IPv4, the group is IPv6"):
        choose(host, "::ffff:10.9.0.2", 6)

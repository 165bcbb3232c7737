"""Choosing the card by name, index or address, on this host's loopback
card (the namespace tests in test_ipv6.py do real cards and IPv6 groups)."""

import socket

import pytest

from mcastmember import McastService
from mcastmember.tribes.engine.config import ServiceConfig

from support import GROUP, wait_until


@pytest.mark.parametrize("spec", ["lo", socket.if_nametoindex("lo"), "127.0.0.1", ["lo"]])
def test_loopback_by_name_index_or_address(spec):
    config = ServiceConfig(GROUP, 45564, interface=spec, ttl=0)
    assert config.interface == "127.0.0.1"
    assert config.interface_names == ["lo"]
    assert [(link.address, link.index) for link in config.links] == [
        ("127.0.0.1", socket.if_nametoindex("lo"))]
    assert config.local_member().address == "127.0.0.1"


def test_host_overrides_the_cards_address():
    config = ServiceConfig(GROUP, 45564, interface="lo", host="10.9.8.7", ttl=0)
    assert config.local_member().address == "10.9.8.7"
    assert config.interface == "127.0.0.1"


def test_an_ipv6_group_advertises_the_cards_ipv6_address():
    config = ServiceConfig("ff05::4", 45564, interface="lo", ttl=0)
    assert config.interface == "::1"
    assert config.local_member().host == bytes(15) + b"\x01"


@pytest.mark.network
def test_two_members_on_the_card_named_lo_see_each_other(group_port):
    with McastService(GROUP, group_port, interface="lo", ttl=0, member_port=4001,
                      frequency=100, drop_time=400) as a, \
            McastService(GROUP, group_port, interface="lo", ttl=0, member_port=4002,
                         frequency=100, drop_time=400) as b:
        wait_until(lambda: [m.port for m in a.members()] == [4002])
        wait_until(lambda: [m.port for m in b.members()] == [4001])

"""Member identity and Tomcat's domain text."""

import pytest

from mcastmember import Member, decode, domain_from_text, encode

from support import V1, V4


def test_identity_is_host_port_and_unique_id_only():
    a = Member(b"\x7f\0\0\x01", 4000, bytes(16), payload=b"x", alive_ms=5)
    b = Member(b"\x7f\0\0\x01", 4000, bytes(16), payload=b"y", domain=b"d", alive_ms=9)
    assert a == b and hash(a) == hash(b)
    assert a != Member(b"\x7f\0\0\x01", 4001, bytes(16))
    assert a != Member(b"\x7f\0\0\x02", 4000, bytes(16))
    assert a != Member(b"\x7f\0\0\x01", 4000, b"\x01" * 16)
    assert len({a, b}) == 1


def test_host_text_is_built_on_demand():
    assert decode(V1).address == "127.0.0.1"
    assert decode(V4).address == "::1"


def test_decode_and_encode_round_trip():
    member = decode(V1)
    assert (member.port, member.domain, member.payload, member.alive_ms) == (4000, b"dom",
                                                                             b"payload", 12345)
    assert encode(member) == V1


@pytest.mark.parametrize("text, expected", [
    ("", b""),
    ("dom", b"dom"),
    ("caf\u00e9", b"caf\xe9"),
    ("{216,123,12,3}", bytes([216, 123, 12, 3])),
    ("{-1, 0, 127}", b"\xff\x00\x7f"),
    ("{}", b""),
])
def test_domain_text_follows_tomcat(text, expected):
    assert domain_from_text(text) == expected


@pytest.mark.parametrize("text", ["{1,2", "{1,x}", "{300}", "\u20ac"])
def test_bad_domain_text_is_refused(text):
    with pytest.raises(ValueError):
        domain_from_text(text)

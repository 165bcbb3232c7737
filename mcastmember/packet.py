"""Encoding and decoding whole packets to and from Member values."""

from . import _codec
from .member import Member


def decode(data):
    """The Member a packet describes; MalformedPacket (with ``.reason``) otherwise."""
    return Member.from_fields(_codec.parse(data))


def encode(member):
    """The packet bytes of a Member (its alive time included)."""
    return _codec.encode(*member.fields())


def implementation():
    """"compiled" when the Cython extension is in use, else "python"."""
    return _codec.IMPLEMENTATION

"""Encoding and decoding whole packets to and from Member values."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..kernel import codec as _codec
from .member import Member

if TYPE_CHECKING:
    from typing_extensions import Buffer


def decode(data: Buffer) -> Member:
    """The Member a packet describes; MalformedPacket (with ``.reason``) otherwise."""
    return Member.from_fields(_codec.parse(data))


def encode(member: Member) -> bytes:
    """The packet bytes of a Member (its alive time included)."""
    return _codec.encode(*member.fields())


def implementation() -> str:
    """"compiled" when the Cython extension is in use, else "python"."""
    return _codec.IMPLEMENTATION

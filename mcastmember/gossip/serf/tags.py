"""Serf's tags in memberlist's node meta (serf.go encodeTags/decodeTags).

From Serf protocol 3 on, the meta is the magic byte 255 and a msgpack map of
strings to strings; before it, the meta was a bare role, and Serf still reads
any meta that does not start with 255 as ``{"role": meta}`` (an empty meta
too). Go writes the map in random order; this module writes keys sorted, so
the same tags always give the same bytes, and reads any order. The meta must
fit memberlist's 512 bytes: Serf refuses larger tags when created and in
SetTags, and so does :func:`encode_tags`.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..._runtime.errors import ConfigurationError
from ..memberlist import msgpack_go
from ..memberlist.errors import GossipWireError
from ..memberlist.layout import META_MAX_SIZE
from .codec import STR, MapOf, SerfLimits, go_bytes, go_str
from .layout import TAG_MAGIC_BYTE, TAGS_MIN_PROTOCOL

_TAGS = MapOf(STR, "max_tags")


def encode_tags(tags: Mapping[str, str], protocol: int = TAGS_MIN_PROTOCOL) -> bytes:
    """The node meta for ``tags``; below Serf protocol 3, the bare ``role`` tag.

    Raises :class:`~mcastmember._runtime.errors.ConfigurationError` if the result is
    over memberlist's 512-byte meta limit or a tag is not a string.
    """
    for key, value in tags.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ConfigurationError(f"Serf tags must be strings, not {key!r}: {value!r}")
    try:
        if protocol < TAGS_MIN_PROTOCOL:
            meta = go_bytes(tags.get("role", ""))
        else:
            meta = bytes((TAG_MAGIC_BYTE,)) + msgpack_go.pack(_TAGS.encode(tags))
    except UnicodeEncodeError as exc:
        raise ConfigurationError(f"a Serf tag is not encodable as UTF-8: {exc.object!r}") from None
    if len(meta) > META_MAX_SIZE:
        raise ConfigurationError(
            f"the tags take {len(meta)} bytes encoded, over the {META_MAX_SIZE}-byte limit of a node's meta "
            "(use fewer or shorter tags)")
    return meta


def decode_tags(meta: bytes, limits: SerfLimits | None = None) -> dict[str, str]:
    """A node's tags from its meta, as Serf reads them. Raises
    :class:`~mcastmember.gossip.GossipWireError` on a meta over 512 bytes or
    magic-prefixed bytes that are not a map of strings (Serf logs those and
    keeps whatever it decoded)."""
    limits = limits or SerfLimits()
    if len(meta) > META_MAX_SIZE:
        raise GossipWireError("too_large", f"node meta of {len(meta)} bytes is over {META_MAX_SIZE}")
    if not meta or meta[0] != TAG_MAGIC_BYTE:
        return {"role": go_str(bytes(meta))}
    value, end = msgpack_go.unpack(meta, limits.wire(), 1)
    if end != len(meta):
        raise GossipWireError("trailing_bytes", f"{len(meta) - end} trailing bytes after the tags")
    if value is None:
        return {}
    tags: dict[str, str] = _TAGS.decode(value, "tags", limits)
    return tags

"""The error the Tribes codec raises at users, from both implementations."""

from . import layout as L


class MalformedPacket(ValueError):
    """A datagram that is not a well-formed Tribes membership packet.

    ``reason`` is the short machine name (``"truncated"``, ``"bad_end_marker"``
    ...) and ``code`` the number from ``mcastmember.tribes.wire.layout``.
    """

    def __init__(self, code: int):
        self.code = code
        self.reason = L.REASONS.get(code, "unknown")
        super().__init__(f"malformed membership packet ({self.reason}): "
                         f"{L.REASON_TEXT.get(code, 'unknown reason')}")

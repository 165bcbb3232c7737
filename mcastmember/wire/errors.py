"""Exceptions raised at users. Both codec implementations raise these."""

from . import layout as L


class MalformedPacket(ValueError):
    """A datagram that is not a well-formed Tribes membership packet.

    ``reason`` is the short machine name (``"truncated"``, ``"bad_end_marker"``
    ...) and ``code`` the number from ``mcastmember.wire.layout``.
    """

    def __init__(self, code: int):
        self.code = code
        self.reason = L.REASONS.get(code, "unknown")
        super().__init__(f"malformed membership packet ({self.reason}): "
                         f"{L.REASON_TEXT.get(code, 'unknown reason')}")


class ConfigurationError(ValueError):
    """A bad setting: not a multicast group, port out of range, unknown interface..."""


class UnknownSetting(ConfigurationError, TypeError):
    """A keyword no front takes (``McastService(intreface=...)``): a bad
    setting, and the TypeError Python raises for a wrong keyword."""

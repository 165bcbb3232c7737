"""The one error type of the gossip wire codec."""


class GossipWireError(ValueError):
    """Bytes from the network that memberlist's wire does not allow, or that
    exceed a :class:`~mcastmember.gossip.Limits` bound.

    ``reason`` is a short machine name (``"truncated"``, ``"too_large"``,
    ``"bad_msgpack"``...), for counters; the message is one sentence.
    """

    def __init__(self, reason: str, text: str):
        self.reason = reason
        super().__init__(text)


class Truncated(GossipWireError):
    """The bytes end before the message does. On a TCP stream this means "read
    more, then parse again"; on a datagram it is plain bad input."""

    def __init__(self, text: str):
        super().__init__("truncated", text)

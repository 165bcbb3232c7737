"""Serf's ping delegate: network coordinates from the engine's probes.

ping_delegate.go (Serf 0.9.4, read, never copied): ``AckPayload`` (our
coordinate in every ack we send) and ``NotifyPingComplete`` (the acker's
coordinate and the round-trip time move ours; the acker's is cached).
"""

from __future__ import annotations

from collections.abc import Container

from ..memberlist.engine import GossipEngine
from ..memberlist.errors import GossipWireError
from ..memberlist.events import PingCompleted
from ..memberlist.telemetry import Samples
from . import messages
from .codec import SerfLimits
from .coordinates import CoordinateClient, CoordinateRefused, estimate_rtt


class PingDelegate:
    """Our coordinate (``client``; None: coordinates disabled), put in the
    acks ``engine`` sends, and the last coordinate each member acked with
    (:attr:`cache`, ours under our ``name``). Counted in ``counts``."""

    def __init__(self, name: str, client: CoordinateClient | None, engine: GossipEngine, limits: SerfLimits,
                 counts: dict[str, int]):
        self.name = name
        self.client = client
        self.engine = engine
        self.limits = limits
        self.counts = counts
        self.cache: dict[str, messages.Coordinate] = {}
        #: how far each update moved our coordinate, in ms (Serf's coordinate.adjustment-ms)
        self.adjustments = Samples()
        self._own_changed()

    def completed(self, event: PingCompleted, members: Container[str], now: float = 0.0) -> None:
        """NotifyPingComplete, only for ``members`` Serf knows (so the cache
        and the RTT samples hold at most those), at ``now``."""
        client, name = self.client, event.node.name
        if client is None or not event.payload:
            return
        try:
            other = messages.decode_ack_payload(event.payload, self.limits)
        except GossipWireError:
            self.counts["coordinates_bad"] += 1
            return
        if name == self.name or name not in members:
            self.counts["coordinates_unknown_node"] += 1
            return
        before = client.coordinate
        try:
            after = client.update(name, other, event.rtt)
        except CoordinateRefused:
            self.counts["coordinates_refused"] += 1
            return
        self.adjustments.add(estimate_rtt(before, after) * 1e3, now)
        self.counts["coordinate_updates"] += 1
        self.cache[name] = other
        self._own_changed()

    def forget(self, name: str) -> None:
        """A member was reaped: its coordinate and samples go."""
        self.cache.pop(name, None)
        if self.client is not None:
            self.client.forget(name)

    def _own_changed(self) -> None:
        """Our coordinate in the cache and in our acks (AckPayload), encoded once per change."""
        if self.client is None:
            return
        mine = self.client.coordinate
        self.cache[self.name] = mine
        self.engine.ack_payload = messages.encode_ack_payload(mine)

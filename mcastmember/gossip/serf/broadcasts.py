"""Serf's three transmit-limited queues and what it piggybacks on memberlist's
packets (delegate.go ``GetBroadcasts``, read, never copied): its intents
(join and leave), its queries and its user events, each queued in order of
urgency and handed out intents first, then queries, then events.
"""

from __future__ import annotations

from ..memberlist.broadcasts import BroadcastQueue
from ..memberlist.settings import GossipSettings


class SerfBroadcasts:
    """The three queues, none taking a message longer than ``max_message``
    (what a gossip packet carries); what they refuse or drop is counted in
    ``counts["serf_broadcasts_dropped"]``."""

    def __init__(self, settings: GossipSettings, max_message: int, counts: dict[str, int]):
        self.intents, self.queries, self.user_events = (
            BroadcastQueue(settings.retransmit_mult, settings.max_broadcasts, settings.max_broadcast_bytes,
                           max_message)
            for _ in range(3))
        self.counts = counts

    def queue(self, queue: BroadcastQueue, raw: bytes, token: object | None = None, own: bool = False) -> None:
        """Gossip ``raw`` on ``queue`` (``own``: our own event, query or
        intent, which a full queue keeps before any relayed one). One longer
        than a gossip packet carries is refused and counted: Serf would queue
        it, but memberlist would never send it, and it would hold the
        queue's bytes for good. It was handled already; an event reaches the
        others by stream, in push/pull's event buffer, as it does in Serf."""
        before = queue.dropped + queue.oversize
        queue.queue(raw, None, token, own=own)
        self.counts["serf_broadcasts_dropped"] += queue.dropped + queue.oversize - before

    def take(self, overhead: int, limit: int, max_items: int, members: int) -> list[bytes]:
        """GetBroadcasts: intents, then queries, then events, as many as fit
        in ``limit`` bytes at ``overhead`` each, among ``members`` members."""
        out: list[bytes] = []
        for queue in (self.intents, self.queries, self.user_events):
            left = limit - sum(len(m) + overhead for m in out)
            if left <= overhead or len(out) >= max_items:
                break
            out += queue.get(overhead, left, members, max_items - len(out))
        for queue in (self.queries, self.user_events):
            queue.finished.clear()
        return out

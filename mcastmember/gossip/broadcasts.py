"""The transmit-limited broadcast queue (memberlist queue.go and broadcast.go,
read, not copied).

Each queued message is sent piggybacked on packets until it has gone out
``retransmit_mult x ceil(log10(N + 1))`` times. Messages sent fewer times go
first; among those, the largest that still fits, then the newest. A message
with a name (memberlist names its own by the node they are about) replaces the
queued one of the same name: newer news about a node makes the older moot.

Unlike memberlist the queue is bounded in count and bytes: past either bound
the messages memberlist's ``Prune`` would drop first (most sent, then
smallest, then oldest) are dropped and counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def retransmit_limit(mult: int, n: int) -> int:
    """util.go retransmitLimit: mult x ceil(log10(n + 1))."""
    return mult * int(math.ceil(math.log10(n + 1)))


@dataclass(eq=False)
class _Item:
    msg: bytes
    name: str | None
    id: int
    transmits: int = 0
    token: object | None = None

    def order(self) -> tuple[int, int, int]:
        # queue.go's btree order: fewest transmits, then longest, then newest.
        return (self.transmits, -len(self.msg), -self.id)


class BroadcastQueue:
    """A transmit-limited queue; ``finished`` collects the tokens of messages
    that are done (sent to the limit, replaced or dropped), as memberlist's
    ``Finished()`` notifies."""

    def __init__(self, retransmit_mult: int, max_count: int, max_bytes: int):
        self.retransmit_mult = retransmit_mult
        self.max_count = max_count
        self.max_bytes = max_bytes
        self._items: list[_Item] = []
        self._named: dict[str, _Item] = {}
        self._bytes = 0
        self._id = 0
        self.dropped = 0
        self.finished: list[object] = []

    def __len__(self) -> int:
        return len(self._items)

    @property
    def size(self) -> int:
        """Bytes queued."""
        return self._bytes

    def messages(self) -> list[bytes]:
        """The queued messages in sending order (for tests and inspection)."""
        return [item.msg for item in sorted(self._items, key=_Item.order)]

    def queue(self, msg: bytes, name: str | None = None, token: object | None = None) -> None:
        """Queue ``msg``; a named one replaces the queued one of that name."""
        if name is not None and name in self._named:
            self._remove(self._named[name])
        self._id += 1
        item = _Item(msg, name, self._id, token=token)
        self._items.append(item)
        self._bytes += len(msg)
        if name is not None:
            self._named[name] = item
        while len(self._items) > self.max_count or self._bytes > self.max_bytes:
            self._remove(max(self._items, key=_Item.order))
            self.dropped += 1

    def _remove(self, item: _Item) -> None:
        self._items.remove(item)
        self._bytes -= len(item.msg)
        if item.name is not None and self._named.get(item.name) is item:
            del self._named[item.name]
        if item.token is not None:
            self.finished.append(item.token)
        if not self._items:
            self._id = 0

    def get(self, overhead: int, limit: int, num_nodes: int, max_items: int = 255) -> list[bytes]:
        """GetBroadcasts: messages to fill ``limit`` bytes, each costing
        ``overhead`` more, at most ``max_items`` (a compound's count is one
        byte: Go's would wrap past 255); each taken counts a transmission."""
        if not self._items:
            return []
        transmit_limit = retransmit_limit(self.retransmit_mult, num_nodes)
        used = 0
        out: list[bytes] = []
        # One pass in queue order takes, at each transmit count, the largest
        # message that fits what is left, then the next largest that still
        # fits: what memberlist's repeated range scans pick.
        for item in sorted(self._items, key=_Item.order):
            free = limit - used - overhead
            if free <= 0 or len(out) >= max_items:
                break
            if len(item.msg) > free:
                continue
            used += overhead + len(item.msg)
            out.append(item.msg)
            if item.transmits + 1 >= transmit_limit:
                self._remove(item)
            else:
                item.transmits += 1
        return out

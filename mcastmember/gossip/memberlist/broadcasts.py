"""The transmit-limited broadcast queue (memberlist queue.go and broadcast.go,
read, not copied).

Each queued message is sent piggybacked on packets until it has gone out
``retransmit_mult x ceil(log10(N + 1))`` times. Messages sent fewer times go
first; among those, the largest that still fits, then the newest. A message
with a name (memberlist names its own by the node they are about) replaces the
queued one of the same name: newer news about a node makes the older moot.

Unlike memberlist the queue is bounded, and what it drops is counted:

- a message longer than ``max_message`` (what one gossip packet can carry)
  is refused: memberlist's GetBroadcasts could never pick it, so it would
  hold its bytes forever, never sent and never retired (one compressed
  datagram of such messages would fill the queue);
- past the count or the bytes bound, the messages memberlist's ``Prune``
  drops first (most sent, then shortest, then oldest) are dropped, but
  never the message being queued, and the member's own messages (its
  leave, its refutation, its events) only when nothing relayed is left:
  then a relayed message is refused rather than take one of theirs.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from operator import attrgetter


def retransmit_limit(mult: int, n: int) -> int:
    """util.go retransmitLimit: mult x ceil(log10(n + 1))."""
    return mult * int(math.ceil(math.log10(n + 1)))


#: a rank is the message's length above its id: ids never reach 2^64
_ID_BITS = 64


@dataclass(eq=False, slots=True)
class _Item:
    """One queued message. Slotted, with its place in its tier as one int
    (length, then id: ids are unique and grow): a member of a large cluster
    under churn holds thousands, and 10,000 simulated members up to 4 x 10^7."""

    msg: bytes
    name: str | None
    rank: int
    transmits: int = 0
    token: object | None = None


_RANK = attrgetter("rank")


class BroadcastQueue:
    """A transmit-limited queue; ``finished`` collects the tokens of messages
    that are done (sent to the limit, replaced or dropped), as memberlist's
    ``Finished()`` notifies.

    The order is queue.go's btree order: fewest transmits, then longest, then
    newest. It is kept as one tier per transmit count, each a list sorted by
    (length, id) ascending, so that taking the longest message that fits is
    a binary search, as memberlist's range scans are; a full queue (thousands
    of messages while a large cluster churns) is never sorted whole. When
    every message fits the packet (most calls), each tier moves up one
    transmission whole."""

    def __init__(self, retransmit_mult: int, max_count: int, max_bytes: int, max_message: int | None = None):
        self.retransmit_mult = retransmit_mult
        self.max_count = max_count
        self.max_bytes = max_bytes
        #: the longest message taken (the engine sets what a gossip packet carries)
        self.max_message = max_bytes if max_message is None else min(max_message, max_bytes)
        self._tiers: dict[int, list[_Item]] = {}        # by transmits, each sorted by rank
        self._named: dict[str, _Item] = {}
        # The member's own messages, few: a set, so that the relayed
        # thousands of a full queue cost no more memory each.
        self._own: set[_Item] = set()
        self._count = 0
        self._bytes = 0
        self._id = 0
        #: dropped at the count or bytes bound
        self.dropped = 0
        #: refused as longer than max_message
        self.oversize = 0
        self.finished: list[object] = []
        self._limit_nodes = -1           # the node count the transmit limit was worked out for
        self._transmit_limit = 0

    def __len__(self) -> int:
        return self._count

    @property
    def size(self) -> int:
        """Bytes queued."""
        return self._bytes

    def messages(self) -> list[bytes]:
        """The queued messages in sending order (for tests and inspection)."""
        return [item.msg for transmits in sorted(self._tiers) for item in reversed(self._tiers[transmits])]

    def queue(self, msg: bytes, name: str | None = None, token: object | None = None, *,
              own: bool = False) -> bool:
        """Queue ``msg``; a named one replaces the queued one of that name.
        ``own``: the member's own news, dropped only for its own. False if
        refused: longer than :attr:`max_message` (counted in
        :attr:`oversize`), or relayed into a queue full of the member's own
        (in :attr:`dropped`); a refused token is finished at once."""
        if len(msg) > self.max_message:
            self.oversize += 1
            if token is not None:
                self.finished.append(token)
            return False
        if name is not None and name in self._named:
            self._remove(self._named[name])
        self._id += 1
        item = _Item(msg, name, len(msg) << _ID_BITS | self._id, token=token)
        self._place(item)
        self._count += 1
        self._bytes += len(msg)
        if name is not None:
            self._named[name] = item
        if own:
            self._own.add(item)
        while self._count > self.max_count or self._bytes > self.max_bytes:
            victim = self._victim(item, own)
            self._remove(victim)
            self.dropped += 1
            if victim is item:
                return False
        return True

    def _victim(self, new: _Item, own: bool) -> _Item:
        """What a full queue drops: Prune's first (the most sent, then the
        shortest, then the oldest) of the relayed messages, the new one
        aside; with none, the new one if relayed, else Prune's first of our
        own others. (max_message <= max_bytes: the new one alone fits.)"""
        relayed_others = self._count - len(self._own) - (0 if own else 1)
        spare_own = relayed_others == 0
        if spare_own and not own:
            return new
        for transmits in sorted(self._tiers, reverse=True):
            for item in self._tiers[transmits]:
                if item is not new and (spare_own or item not in self._own):
                    return item
        raise AssertionError("a queue over its bound holds more than the new message")

    def _place(self, item: _Item) -> None:
        tier = self._tiers.get(item.transmits)
        if tier is None:
            self._tiers[item.transmits] = [item]
        else:
            bisect.insort(tier, item, key=_RANK)

    def _unplace(self, item: _Item) -> None:
        tier = self._tiers[item.transmits]
        del tier[bisect.bisect_left(tier, item.rank, key=_RANK)]
        if not tier:
            del self._tiers[item.transmits]

    def _remove(self, item: _Item) -> None:
        self._unplace(item)
        self._forget(item)

    def _forget(self, item: _Item) -> None:
        self._count -= 1
        self._bytes -= len(item.msg)
        if self._own:
            self._own.discard(item)
        if item.name is not None and self._named.get(item.name) is item:
            del self._named[item.name]
        if item.token is not None:
            self.finished.append(item.token)
        if not self._count:
            self._id = 0

    def get(self, overhead: int, limit: int, num_nodes: int, max_items: int = 255) -> list[bytes]:
        """GetBroadcasts: messages to fill ``limit`` bytes, each costing
        ``overhead`` more, at most ``max_items`` (a compound's count is one
        byte: Go's would wrap past 255); each taken counts a transmission."""
        if not self._count:
            return []
        if num_nodes != self._limit_nodes:
            self._limit_nodes, self._transmit_limit = num_nodes, retransmit_limit(self.retransmit_mult, num_nodes)
        transmit_limit = self._transmit_limit
        if self._count <= max_items and self._bytes + overhead * self._count < limit:
            return self._take_all(transmit_limit)
        used = 0
        out: list[bytes] = []
        moved: list[tuple[int, list[_Item]]] = []   # sent again: back once this packet is full
        # At each transmit count, fewest first: the longest (then newest)
        # message that fits what is left, then the longest that still fits.
        for transmits in sorted(self._tiers):
            tier = self._tiers[transmits]
            again: list[_Item] = []
            while tier:
                free = limit - used - overhead
                if free <= 0 or len(out) >= max_items:
                    break
                at = bisect.bisect_left(tier, (free + 1) << _ID_BITS, key=_RANK)   # those of length <= free
                if not at:
                    break                      # nothing in this tier fits
                item = tier.pop(at - 1)
                used += overhead + len(item.msg)
                out.append(item.msg)
                if transmits + 1 >= transmit_limit:
                    self._forget(item)
                else:
                    item.transmits = transmits + 1
                    again.append(item)
            if again:
                moved.append((transmits + 1, again))
            if not tier:
                del self._tiers[transmits]
            if limit - used - overhead <= 0 or len(out) >= max_items:
                break
        for transmits, entries in moved:
            # taken longest first: ascending reversed; merged with a tier there (two sorted runs)
            entries.reverse()
            there = self._tiers.get(transmits)
            if there is None:
                self._tiers[transmits] = entries
            else:
                there += entries
                there.sort(key=_RANK)
        return out

    def _take_all(self, transmit_limit: int) -> list[bytes]:
        """:meth:`get` when every message fits: all of them in sending order,
        each tier one transmission up (or done), none re-sorted."""
        out: list[bytes] = []
        shifted: dict[int, list[_Item]] = {}
        for transmits in sorted(self._tiers):
            tier = self._tiers[transmits]
            out += [item.msg for item in reversed(tier)]
            if transmits + 1 >= transmit_limit:
                for item in reversed(tier):
                    self._forget(item)
            else:
                for item in tier:
                    item.transmits = transmits + 1
                shifted[transmits + 1] = tier
        self._tiers = shifted
        return out

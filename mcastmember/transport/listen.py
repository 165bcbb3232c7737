"""What every listening socket of the library shares (the TCP listener for
Tomcat on both fronts, the metrics server): who may hold its connections,
and what to do when ``accept`` fails for want of descriptors or memory.
No I/O here: the listeners ask and act.
"""

from __future__ import annotations

import errno
from collections import Counter

# accept() failures that say the process or the host is out of something:
# the pending connection stays in the backlog, so accepting again at once
# fails again at once (a loop that does so spins). Wait instead.
RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 1.0

ADMIT = True
REFUSE = False


class ConnectionShares:
    """The connections of one listening socket, counted by source address.

    ``admit(source)`` decides for a new connection: ``ADMIT``; ``REFUSE``
    (close the newcomer: its source holds ``per_source`` already, or the
    listener holds ``total`` and no source holds more than the newcomer's
    would); or a source (text) one of whose connections must be closed to
    make room: the source that holds the most, and only when it holds more
    than the newcomer's source would. So one source can never take others'
    connections away however many it opens: at worst it evens out with
    them. ``add`` and ``remove`` follow what the listener opened and closed.
    """

    def __init__(self, total: int, per_source: int) -> None:
        self.total = total
        self.per_source = per_source
        self._held: Counter[str] = Counter()
        self._count = 0

    def admit(self, source: str) -> bool | str:
        mine = self._held[source]
        if mine >= self.per_source:
            return REFUSE
        if self._count < self.total:
            return ADMIT
        heaviest, most = max(self._held.items(), key=lambda item: item[1])
        return heaviest if most > mine + 1 else REFUSE

    def add(self, source: str) -> None:
        self._held[source] += 1
        self._count += 1

    def remove(self, source: str) -> None:
        self._held[source] -= 1
        self._count -= 1
        if not self._held[source]:
            del self._held[source]

    def __len__(self) -> int:
        return self._count


class AcceptBackoff:
    """How long to stop accepting after a failure that says resources ran
    out: ``failed(code)`` returns the seconds to wait (None: not such a
    failure, accept again), doubling from BACKOFF_FIRST_S up to
    BACKOFF_MAX_S while failures follow; ``accepted()`` resets it.
    ``failures`` counts every such failure."""

    def __init__(self) -> None:
        self.failures = 0
        self._next = BACKOFF_FIRST_S

    def failed(self, code: int | None) -> float | None:
        if code not in RESOURCE_ERRORS:
            return None
        self.failures += 1
        delay, self._next = self._next, min(BACKOFF_MAX_S, self._next * 2)
        return delay

    def accepted(self) -> None:
        self._next = BACKOFF_FIRST_S


def source_of(peer: object) -> str:
    """The source address (text) of an accepted socket's peer name."""
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return str(peer)

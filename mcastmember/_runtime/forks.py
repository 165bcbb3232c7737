"""Fork safety, the same for both protocols: a forked child's copy of a
running front is inert.

``os.fork()`` copies a running front into the child without its threads,
but with its sockets, its wake-up pipe and its poller's epoll instance,
which the child shares with the parent. A child that used them would speak
for the parent (a goodbye, a leave) or take the parent's registrations out
of the shared epoll, leaving the parent deaf. Each front registers here;
in the child, before anything else runs, each is told ``_become_inert()``:
from then on it only closes its own copies of the descriptors and returns.
"""

from __future__ import annotations

import os
import weakref
from typing import Protocol


class Disarmable(Protocol):
    def _become_inert(self) -> None: ...


# Every front made in this process (weakly: a front dropped is forgotten).
_fronts: weakref.WeakSet[Disarmable] = weakref.WeakSet()


def disarm_in_child(front: Disarmable) -> None:
    """Have a forked child call ``front._become_inert()`` right after the fork."""
    _fronts.add(front)


def _after_fork_in_child() -> None:
    for front in list(_fronts):
        front._become_inert()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

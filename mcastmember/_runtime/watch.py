"""Waiting for sockets, the two ways the fronts wait: a selector (a thread
of their own) or the running asyncio loop. Both take a socket and the
events wanted (``READ | WRITE``, 0 for none) and follow what changed."""

from __future__ import annotations

import asyncio
import selectors
import socket
from collections.abc import Callable

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE


def watch(sel: selectors.BaseSelector, sock: socket.socket, mask: int) -> None:
    """Wait in ``sel`` for ``mask`` on ``sock`` from now on."""
    try:
        sel.modify(sock, mask)
    except KeyError:
        sel.register(sock, mask)


def unwatch(sel: selectors.BaseSelector, sock: socket.socket) -> None:
    """Stop waiting for ``sock`` (not watched, or closed: nothing to do)."""
    try:
        sel.unregister(sock)
    except (KeyError, ValueError):
        pass


class LoopWatch:
    """The sockets a loop watches for us: ``on_ready(sock, READ or WRITE)``
    is called when one is ready for what was asked."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_ready: Callable[[socket.socket, int], None]) -> None:
        self._loop = loop
        self._on_ready = on_ready
        self._watched: dict[socket.socket, int] = {}

    def watch(self, sock: socket.socket, mask: int) -> None:
        was = self._watched.get(sock, 0)
        for bit, add, remove in ((READ, self._loop.add_reader, self._loop.remove_reader),
                                 (WRITE, self._loop.add_writer, self._loop.remove_writer)):
            if mask & bit and not was & bit:
                add(sock, self._on_ready, sock, bit)
            elif was & bit and not mask & bit:
                remove(sock)
        self._watched[sock] = mask

    def unwatch(self, sock: socket.socket) -> None:
        if self._watched.get(sock):
            self.watch(sock, 0)
        self._watched.pop(sock, None)


class SelectorWatch:
    """``watch`` and ``unwatch`` on one selector, as ``LoopWatch`` offers them."""

    def __init__(self, sel: selectors.BaseSelector) -> None:
        self.sel = sel

    def watch(self, sock: socket.socket, mask: int) -> None:
        watch(self.sel, sock, mask)

    def unwatch(self, sock: socket.socket) -> None:
        unwatch(self.sel, sock)


def drain(sock: socket.socket) -> None:
    """Read a wake-up socket empty (its bytes say only: wake up)."""
    try:
        while sock.recv(4096):
            pass
    except OSError:
        pass

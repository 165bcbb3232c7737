"""The agent RPC of an ``AsyncSerfService``, on its loop, without threads.

The loop watches the listening socket and the connections; the member's
events (its listener is called on the loop) and log lines (from any
thread) reach the server through the inbox, taken at the next turn. A join
or a leave asked by RPC is a task, one at a time in order; after a leave,
once its answer is written, the service stops, as the agent shuts down.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from ..._runtime.watch import LoopWatch
from .rpc_io import RpcSockets, seed_addresses
from .rpc_server import Action, AsyncMember, JoinAction, LeaveAction, RpcConfig, RpcServer

log = logging.getLogger("mcastmember")

#: how long a leave waits for its answer to be written before the member stops
ANSWER_WAIT_S = 2.0


class AsyncRpc(RpcSockets):
    """``AsyncRpc(service, config).start()`` on the running loop; ``stop()``
    (the service's own stop calls it)."""

    def __init__(self, member: AsyncMember, config: RpcConfig) -> None:
        super().__init__(member, config)
        self.member: AsyncMember = member
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheduled = False
        self._jobs: asyncio.Queue[Action] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._running = False

    def start(self) -> AsyncRpc:
        self._loop = asyncio.get_running_loop()
        self._watcher = LoopWatch(self._loop, self._on_ready)
        self._open()
        self._running = True
        self.member.add_listener(self.on_event)
        return self

    def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        self.member.remove_listener(self.on_event)
        if self._worker is not None and self._worker is not asyncio.current_task():
            self._worker.cancel()
        self._close()

    # -- waiting
    def _poke(self) -> None:
        loop = self._loop
        if loop is None or self._scheduled or not self._running:
            return
        self._scheduled = True
        try:
            loop.call_soon_threadsafe(self._on_poke)
        except RuntimeError:       # the loop is closed
            self._scheduled = False

    def _on_poke(self) -> None:
        self._scheduled = False
        if self._running:
            self._turn_safely()

    def _on_ready(self, sock: socket.socket, mask: int) -> None:
        if self._running:
            self._ready(sock, mask)
            self._turn_safely()

    def _turn_safely(self) -> None:
        try:
            self._turn()
        except Exception:       # one bad turn never ends the RPC
            log.exception("agent RPC: unexpected error")

    def on_event(self, event: object) -> None:
        """On the loop: straight to the server, then a turn."""
        if self._running:
            self.server.on_events((event,))
            self._poke()

    # -- joins and leaves, one task at a time
    def _run(self, action: Action) -> None:
        assert self._loop is not None
        if self._jobs is None:
            self._jobs = asyncio.Queue()
            self._worker = self._loop.create_task(self._work())
        self._jobs.put_nowait(action)

    async def _work(self) -> None:
        assert self._jobs is not None
        while True:
            action = await self._jobs.get()
            if isinstance(action, JoinAction):
                await self._join(action)
            elif isinstance(action, LeaveAction):
                await self._leave(action)
                return

    async def _join(self, action: JoinAction) -> None:
        addrs, errors = seed_addresses(action.seeds)
        joined = 0
        if addrs:
            try:
                done = await self.member.join(addrs, ignore_old=not action.replay)
                joined, errors = done.joined, errors + list(done.errors)
            except (TimeoutError, RuntimeError) as failure:
                errors.append(str(failure))
        said = "" if joined else "; ".join(errors) or "no seed given"
        self.post(lambda server: server.join_done(action, joined, said))

    async def _leave(self, action: LeaveAction) -> None:
        log.info("agent RPC: graceful leave asked")
        try:
            error = (await self.member.leave()).error
        except (TimeoutError, RuntimeError) as failure:
            error = str(failure)

        def answer(server: RpcServer) -> None:
            server.leave_done(action, error)

        self.post(answer)
        assert self._loop is not None
        deadline = self._loop.time() + ANSWER_WAIT_S
        while action.conn.wants_write() or self._inbox:
            if self._loop.time() > deadline or action.conn.closing is not None:
                break
            await asyncio.sleep(0.01)
        await self.member.stop()


__all__ = ["AsyncRpc"]

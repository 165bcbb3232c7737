"""AsyncSerfService's event handler runs, as tasks on its loop.

The loop only decides (:class:`~.handlers.HandlerCore`) and waits: a
script runs as :mod:`.handler_process` runs it, on a thread of an executor
of ``handler_concurrency`` threads (not asyncio's subprocesses: on CPython
3.11 a collection at the wrong moment leaves their start waiting for
ever); a Python query handler that is a coroutine function is awaited on
the loop (cancelled at the time limit), any other is called on that
executor, off the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import time
import typing
from typing import TYPE_CHECKING, Any, Protocol

from .handler_process import Processes, run_script
from .handlers import LOGGED_OUTPUT, HandlerCore, HandlerSettings, QueryHandler, Run, respond

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..serf.events import QueryReceived, SerfNodeEvent
    from ..serf.node import SerfNode

__all__ = ["AsyncHandlers"]


class _LoopFront(Protocol):
    """What a runner uses of its front: the services' public API."""

    node: SerfNode
    running: bool

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...

    def respond(self, received: QueryReceived, payload: bytes) -> None: ...


class AsyncHandlers:
    """The runs of AsyncSerfService's handlers (``front``: the service), on its loop."""

    def __init__(self, front: _LoopFront, settings: HandlerSettings) -> None:
        self._front = front
        self.core = HandlerCore(settings)
        self._tasks: set[asyncio.Task[None]] = set()
        self._processes = Processes()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    def set_query_handler(self, name: str | None, handler: QueryHandler | None) -> None:
        self.core.set_query_handler(name, handler)

    def offer(self, events: Sequence[SerfNodeEvent]) -> None:
        """The node's events, on the loop: the runs they ask for started as
        tasks, or waiting, or dropped."""
        if self.core.idle:
            return
        node = self._front.node
        for run in self.core.runs(events, node.name, node.tags, time.monotonic()):
            if self.core.admit(run):
                loop = self._front.loop
                assert loop is not None
                task = loop.create_task(self._work(run))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """The member stops: no run starts from now on, those waiting are
        forgotten, the scripts going on are killed (their process groups:
        nothing a handler started outlives the member), the coroutines
        cancelled."""
        self.core.close()
        self._processes.kill_all()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

    def stats(self) -> dict[str, int]:
        return self.core.stats()

    async def _work(self, run: Run | None) -> None:
        while run is not None:
            try:
                await self._run(run)
            finally:
                run = self.core.next()

    async def _off_loop(self, call: typing.Callable[[], Any]) -> Any:
        """``call()`` on a thread of the runner's executor, awaited."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(self.core.settings.concurrency,
                                                                   "serf-handler")
        loop = self._front.loop
        assert loop is not None
        return await loop.run_in_executor(self._executor, call)

    async def _run(self, run: Run) -> None:
        node = self._front.node
        if run.call is not None:
            output, error, late = await self._call(run.call, run)
            answer = self.core.called(run, output, error, late, node)
        else:
            assert run.script is not None
            keep = node.serf_settings.query_response_size_limit if run.received is not None else LOGGED_OUTPUT
            try:
                status, output, errors = await self._off_loop(functools.partial(
                    run_script, run.script, run.env, run.stdin, self.core.settings.timeout, keep, self._processes))
            except (OSError, ValueError) as exc:     # no shell, no process left, a NUL in a tag
                self.core.not_started(run, exc)
                return
            answer = self.core.ended(run, status, output, errors, node)
        if answer is not None:
            self.core.responded(run, respond(self._front, run, answer))

    async def _call(self, call: QueryHandler, run: Run) -> tuple[Any, BaseException | None, bool]:
        """A Python query handler's answer, what it raised, and whether it was past the time limit."""
        timeout = self.core.settings.timeout
        received = typing.cast("QueryReceived", run.received)
        started = time.monotonic()
        try:
            if inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(getattr(call, "__call__", None)):
                return await asyncio.wait_for(call(received), timeout), None, False
            output = await self._off_loop(functools.partial(call, received))
            if inspect.isawaitable(output):
                output = await asyncio.wait_for(output, max(0.0, timeout - (time.monotonic() - started)))
        except asyncio.TimeoutError:
            return None, None, True
        except Exception as exc:              # counted and logged: never ends the loop
            return None, exc, False
        return output, None, time.monotonic() - started > timeout

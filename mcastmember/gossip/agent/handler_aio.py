"""AsyncSerfService's event handler runs, as tasks on its loop.

The loop only decides (:class:`~.handlers.HandlerCore`) and waits: a script
is an asyncio subprocess (``/bin/sh -c`` in a session of its own, its
process group killed at the time limit or when the task is cancelled, as
at the loop's end); a Python query handler that is a coroutine function is
awaited (cancelled at the time limit), any other runs in the loop's default
executor, off the loop.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import time
import typing
from typing import TYPE_CHECKING, Any, Protocol

from .handler_threads import SHELL
from .handlers import LOGGED_OUTPUT, HandlerCore, HandlerSettings, QueryHandler, Run, respond

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..serf.events import QueryReceived, SerfNodeEvent
    from ..serf.node import SerfNode

READ_CHUNK = 65536

__all__ = ["AsyncHandlers"]


class _LoopFront(Protocol):
    """What a runner uses of its front: the services' public API."""

    node: SerfNode
    running: bool

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...

    def respond(self, received: QueryReceived, payload: bytes) -> None: ...


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def _read(stream: asyncio.StreamReader | None, keep: int) -> tuple[bytes, int]:
    """The first ``keep`` bytes of a pipe, and how many came; the rest read and dropped."""
    assert stream is not None
    kept, total = bytearray(), 0
    while True:
        chunk = await stream.read(READ_CHUNK)
        if not chunk:
            return bytes(kept), total
        total += len(chunk)
        if len(kept) < keep:
            kept += chunk[:keep - len(kept)]


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    try:
        if data:
            proc.stdin.write(data)
            await proc.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):     # it does not read its stdin: fine
        pass
    finally:
        proc.stdin.close()


async def _talk(proc: asyncio.subprocess.Process, data: bytes, keep: int) -> tuple[int, bytes, bytes]:
    """Stdin written, the output read (its first ``keep`` bytes kept, of stderr
    the first LOGGED_OUTPUT), the exit awaited: (status, stdout, stderr)."""
    _, (output, _), (errors, _) = await asyncio.gather(_feed(proc, data), _read(proc.stdout, keep),
                                                      _read(proc.stderr, LOGGED_OUTPUT))
    return await proc.wait(), output, errors


class AsyncHandlers:
    """The runs of AsyncSerfService's handlers (``front``: the service), on its loop."""

    def __init__(self, front: _LoopFront, settings: HandlerSettings) -> None:
        self._front = front
        self.core = HandlerCore(settings)
        self._tasks: set[asyncio.Task[None]] = set()

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

    def close(self) -> None:
        """No run starts from now on (those going on end, by their time limit at the latest)."""
        self.core.close()

    def stats(self) -> dict[str, int]:
        return self.core.stats()

    async def _work(self, run: Run | None) -> None:
        while run is not None:
            try:
                await self._run(run)
            finally:
                run = self.core.next()

    async def _run(self, run: Run) -> None:
        node = self._front.node
        if run.call is not None:
            output, error, late = await self._call(run.call, run)
            answer = self.core.called(run, output, error, late, node)
        else:
            assert run.script is not None
            keep = node.serf_settings.query_response_size_limit if run.received is not None else LOGGED_OUTPUT
            try:
                proc = await asyncio.create_subprocess_exec(
                    SHELL, "-c", run.script, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE, env={**os.environ, **run.env}, start_new_session=True)
            except (OSError, ValueError) as exc:     # no shell, no process left, a NUL in a tag
                self.core.not_started(run, exc)
                return
            status: int | None
            try:
                status, output, errors = await asyncio.wait_for(_talk(proc, run.stdin, keep),
                                                                self.core.settings.timeout)
            except asyncio.TimeoutError:
                status, output, errors = None, b"", b""
            finally:
                if proc.returncode is None:      # the time limit, or the task cancelled (the loop ends)
                    _kill_group(proc)
            if status is None:
                await proc.wait()
            answer = self.core.ended(run, status, output, errors, node)
        if answer is not None:
            self._respond(run, answer)

    async def _call(self, call: QueryHandler, run: Run) -> tuple[Any, BaseException | None, bool]:
        """A Python query handler's answer, what it raised, and whether it was past the time limit."""
        timeout = self.core.settings.timeout
        started = time.monotonic()
        try:
            if inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(getattr(call, "__call__", None)):
                try:
                    return await asyncio.wait_for(call(run.received), timeout), None, False  # type: ignore[arg-type]
                except asyncio.TimeoutError:
                    return None, None, True
            loop = self._front.loop
            assert loop is not None
            output = await loop.run_in_executor(None, call, typing.cast("QueryReceived", run.received))
            if inspect.isawaitable(output):
                output = await asyncio.wait_for(output, max(0.0, timeout - (time.monotonic() - started)))
        except asyncio.TimeoutError:
            return None, None, True
        except Exception as exc:              # counted and logged: never ends the loop
            return None, exc, False
        return output, None, time.monotonic() - started > timeout

    def _respond(self, run: Run, answer: bytes) -> None:
        self.core.responded(run, respond(self._front, run, answer))

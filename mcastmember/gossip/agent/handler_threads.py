"""SerfService's event handler runs, each on a thread of its own.

The I/O thread only decides (:class:`~.handlers.HandlerCore`: which runs,
start now, wait or drop); a run that may start gets a daemon thread, which
then takes the runs waiting until there are none, so at most
``handler_concurrency`` threads exist. A script runs as
:mod:`.handler_process` runs it; a Python query handler is called there.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Protocol

from .handler_process import Processes, run_script
from .handlers import LOGGED_OUTPUT, HandlerCore, HandlerSettings, QueryHandler, Run, respond

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..serf.events import QueryReceived, SerfNodeEvent
    from ..serf.node import SerfNode

__all__ = ["ThreadHandlers"]


class _ThreadedFront(Protocol):
    """What a runner uses of its front: the services' public API."""

    node: SerfNode
    running: bool

    def respond(self, received: QueryReceived, payload: bytes) -> None: ...


class ThreadHandlers:
    """The runs of SerfService's handlers (``front``: the service)."""

    def __init__(self, front: _ThreadedFront, settings: HandlerSettings) -> None:
        self._front = front
        self.core = HandlerCore(settings)
        self._lock = threading.Lock()
        self._processes = Processes()

    def set_query_handler(self, name: str | None, handler: QueryHandler | None) -> None:
        with self._lock:
            self.core.set_query_handler(name, handler)

    def offer(self, events: Sequence[SerfNodeEvent]) -> None:
        """The node's events, on the I/O thread under the front's lock: the
        runs they ask for started on their threads, or waiting, or dropped."""
        if self.core.idle:
            return
        node = self._front.node
        with self._lock:
            runs = self.core.runs(events, node.name, node.tags, time.monotonic())
            start = [run for run in runs if self.core.admit(run)]
        for run in start:
            threading.Thread(target=self._work, args=(run,), name=f"serf-handler-{node.name}", daemon=True).start()

    def close(self) -> None:
        """The member stops: no run starts from now on, those waiting are
        forgotten, the scripts going on are killed (their process groups:
        nothing a handler started outlives the member)."""
        with self._lock:
            self.core.close()
        self._processes.kill_all()

    def stats(self) -> dict[str, int]:
        with self._lock:
            return self.core.stats()

    def _work(self, run: Run | None) -> None:
        while run is not None:
            try:
                self._run(run)
            finally:
                with self._lock:
                    run = self.core.next()

    def _run(self, run: Run) -> None:
        settings = self.core.settings
        node = self._front.node
        if run.call is not None:
            started = time.monotonic()
            try:
                output, error = run.call(run.received), None     # type: ignore[arg-type]
            except Exception as exc:                           # counted and logged: never ends the thread
                output, error = None, exc
            with self._lock:
                answer = self.core.called(run, output, error, time.monotonic() - started > settings.timeout, node)
        else:
            assert run.script is not None
            keep = node.serf_settings.query_response_size_limit if run.received is not None else LOGGED_OUTPUT
            try:
                status, output, errors = run_script(run.script, run.env, run.stdin, settings.timeout, keep,
                                                    self._processes)
            except (OSError, ValueError) as exc:     # no shell, no process left, a NUL in a tag
                with self._lock:
                    self.core.not_started(run, exc)
                return
            with self._lock:
                answer = self.core.ended(run, status, output, errors, node)
        if answer is not None:
            self._respond(run, answer)

    def _respond(self, run: Run, answer: bytes) -> None:
        error = respond(self._front, run, answer)
        with self._lock:
            self.core.responded(run, error)

"""SerfService's event handler runs, each on a thread of its own.

The I/O thread only decides (:class:`~.handlers.HandlerCore`: which runs,
start now, wait or drop); a run that may start gets a daemon thread, which
then takes the runs waiting until there are none, so at most
``handler_concurrency`` threads exist. A script runs as ``/bin/sh -c`` in
a session of its own, so that at the time limit its whole process group is
killed (a shell's children too, which would hold its output open).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from .handlers import LOGGED_OUTPUT, HandlerCore, HandlerSettings, QueryHandler, Run, respond

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..serf.events import QueryReceived, SerfNodeEvent
    from ..serf.node import SerfNode

#: the shell a script runs in, as Serf's agent runs it
SHELL = "/bin/sh"
READ_CHUNK = 65536

__all__ = ["SHELL", "ThreadHandlers", "run_script"]


class _ThreadedFront(Protocol):
    """What a runner uses of its front: the services' public API."""

    node: SerfNode
    running: bool

    def respond(self, received: QueryReceived, payload: bytes) -> None: ...


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """The run's whole process group killed (its session: the shell and
    what it started)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_script(script: str, env: Mapping[str, str], stdin: bytes, timeout: float,
               keep: int) -> tuple[int | None, bytes, int, bytes]:
    """Run ``script`` with ``env`` beside the process's environment, ``stdin``
    written to it; return (exit status, None if killed at ``timeout``; the
    first ``keep`` bytes of its stdout; how many it wrote; the first of its
    stderr). OSError or ValueError if it cannot start. The rest of the
    output is read and dropped, so a chatty script never fills memory."""
    proc = subprocess.Popen([SHELL, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **env}, start_new_session=True)
    deadline = time.monotonic() + timeout
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    kept = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    limit = {proc.stdout: keep, proc.stderr: LOGGED_OUTPUT}
    written = 0
    pending = memoryview(stdin)
    with selectors.DefaultSelector() as sel:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            os.set_blocking(pipe.fileno(), False)
        if pending:
            sel.register(proc.stdin, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        sel.register(proc.stdout, selectors.EVENT_READ)
        sel.register(proc.stderr, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for key, _ in sel.select(left):
                pipe = typing.cast("typing.IO[bytes]", key.fileobj)
                if pipe is proc.stdin:
                    try:
                        pending = pending[os.write(proc.stdin.fileno(), pending):]
                    except BlockingIOError:
                        continue
                    except OSError:           # it does not read its stdin: fine
                        pending = pending[len(pending):]
                    if not pending:
                        sel.unregister(pipe)
                        proc.stdin.close()
                    continue
                chunk = os.read(pipe.fileno(), READ_CHUNK)
                if not chunk:
                    sel.unregister(pipe)
                    continue
                buf = kept[pipe]
                if pipe is proc.stdout:
                    written += len(chunk)
                room = limit[pipe] - len(buf)
                if room > 0:
                    buf += chunk[:room]
        output_open = bool(sel.get_map())      # past the deadline with a pipe still open
    status: int | None = None
    if not output_open:
        try:
            status = proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    if status is None:
        kill_group(proc)
        proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        pipe.close()
    return status, bytes(kept[proc.stdout]), written, bytes(kept[proc.stderr])


class ThreadHandlers:
    """The runs of SerfService's handlers (``front``: the service)."""

    def __init__(self, front: _ThreadedFront, settings: HandlerSettings) -> None:
        self._front = front
        self.core = HandlerCore(settings)
        self._lock = threading.Lock()

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
        """No run starts from now on (those going on end, by their time limit at the latest)."""
        with self._lock:
            self.core.close()

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
                status, output, _, errors = run_script(run.script, run.env, run.stdin, settings.timeout, keep)
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

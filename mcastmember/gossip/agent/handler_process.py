"""Running a handler's script: ``/bin/sh -c SCRIPT`` as Serf's agent runs
it, in a session of its own so that at the time limit (or when the member
stops) its whole process group is killed: a shell's children too, which
would hold its output open. Blocking: each front's runner calls it off its
I/O (SerfService on a thread per run; AsyncSerfService in an executor of
its own, asyncio's subprocesses leaving a run stuck when a collection
comes at the wrong moment on CPython 3.11).
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

from .handlers import LOGGED_OUTPUT

#: the shell a script runs in, as Serf's agent runs it
SHELL = "/bin/sh"
READ_CHUNK = 65536

__all__ = ["SHELL", "Processes", "kill_group", "run_script"]


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """The run's whole process group killed (its session: the shell and
    what it started)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Processes:
    """The scripts' processes going on (any thread adds and removes): when
    the member stops, each is killed, and any started after."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._closed = False

    def add(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.add(proc)
            if self._closed:
                kill_group(proc)

    def discard(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def kill_all(self) -> None:
        """The member stops: nothing a handler started outlives it."""
        with self._lock:
            self._closed = True
            for proc in self._procs:
                kill_group(proc)


def run_script(script: str, env: Mapping[str, str], stdin: bytes, timeout: float, keep: int,
               processes: Processes) -> tuple[int | None, bytes, bytes]:
    """Run ``script`` by ``/bin/sh -c`` in a session of its own, with ``env``
    beside the process's environment, ``stdin`` written to it, among
    ``processes`` while it runs; return (its exit status, None if killed at
    ``timeout``; the first ``keep`` bytes of its stdout; the first of its
    stderr). OSError or ValueError if it cannot start. The rest of the
    output is read and dropped, so a chatty script never fills memory."""
    proc = subprocess.Popen([SHELL, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **env}, start_new_session=True)
    processes.add(proc)
    try:
        return _talk(proc, stdin, timeout, keep)
    finally:
        processes.discard(proc)


def _talk(proc: subprocess.Popen[bytes], stdin: bytes, timeout: float, keep: int) -> tuple[int | None, bytes, bytes]:
    deadline = time.monotonic() + timeout
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    kept = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    limit = {proc.stdout: keep, proc.stderr: LOGGED_OUTPUT}
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
    return status, bytes(kept[proc.stdout]), bytes(kept[proc.stderr])

"""The agent RPC of a ``SerfService``, on a thread of its own.

One thread waits in ``select`` on the listening socket, the connections and
a wake-up socket; the member's events (its listener, on the dispatcher
thread) and log lines reach it through the inbox. A join or a leave asked
by RPC runs on one worker thread, in order (the service's own ``join`` and
``leave`` wait on the network), and reports its end to the inbox; after a
leave, once its answer is written, the service stops, as the agent shuts
down.
"""

from __future__ import annotations

import logging
import queue
import selectors
import socket
import threading
from typing import Any

from ..._runtime.watch import READ, SelectorWatch, drain
from .rpc_io import RpcSockets, seed_addresses
from .rpc_server import Action, JoinAction, LeaveAction, RpcConfig, RpcServer, ThreadMember

log = logging.getLogger("mcastmember")

#: the longest the thread sleeps with nothing to do
IDLE_WAIT_S = 1.0
#: how long a leave waits for its answer to be written before the member stops
ANSWER_WAIT_S = 2.0


class ThreadedRpc(RpcSockets):
    """``ThreadedRpc(service, config).start()``; ``stop()`` (the service's own
    stop calls it)."""

    def __init__(self, member: ThreadMember, config: RpcConfig) -> None:
        super().__init__(member, config)
        self.member: ThreadMember = member
        self._sel = selectors.DefaultSelector()
        self._watcher = SelectorWatch(self._sel)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._running = False
        self._thread: threading.Thread | None = None
        self._worker: threading.Thread | None = None
        self._jobs: queue.SimpleQueue[Action | None] = queue.SimpleQueue()
        self._answered = threading.Event()
        #: an RPC leave is under way: a stop waits for its answer to be written
        self._leaving = False

    def start(self) -> ThreadedRpc:
        self._sel.register(self._wake_r, READ)
        self._open()
        self._running = True
        self.member.add_listener(self.on_event)
        self._thread = threading.Thread(target=self._loop, name=f"serf-rpc-{self.member.node.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        if not self._running:
            return
        if self._leaving and threading.current_thread() is not self._worker:
            # the member stopped by someone who saw our leave end (mcast-demo on its
            # LeaveDone): the leave's answer is written first
            self._answered.wait(ANSWER_WAIT_S)
        self._running = False
        self.member.remove_listener(self.on_event)
        self._poke()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._jobs.put(None)
        self._close()
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    # -- waiting
    def _poke(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass        # full (the thread wakes anyway) or closed (stopped)

    def _loop(self) -> None:
        while self._running:
            try:
                ready = self._sel.select(IDLE_WAIT_S)
            except (OSError, ValueError):
                return
            try:
                for key, mask in ready:
                    if key.fileobj is self._wake_r:
                        drain(self._wake_r)
                    else:
                        self._ready(key.fileobj, mask)     # type: ignore[arg-type]
                self._turn()
                if self._answering is not None and not self._answering.wants_write():
                    self._answering = None
                    self._answered.set()
            except Exception:       # one bad turn never ends the RPC
                log.exception("agent RPC: unexpected error")

    _answering: Any = None

    # -- joins and leaves, on the worker
    def _run(self, action: Action) -> None:
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name=f"serf-rpc-work-{self.member.node.name}",
                                            daemon=True)
            self._worker.start()
        self._jobs.put(action)

    def _work(self) -> None:
        while True:
            action = self._jobs.get()
            if action is None:
                return
            if isinstance(action, JoinAction):
                self._join(action)
            elif isinstance(action, LeaveAction):
                self._leave(action)

    def _join(self, action: JoinAction) -> None:
        addrs, errors = seed_addresses(action.seeds)
        joined = 0
        if addrs:
            try:
                done = self.member.join(addrs, ignore_old=not action.replay)
                joined, errors = done.joined, errors + list(done.errors)
            except (TimeoutError, RuntimeError) as failure:
                errors.append(str(failure))
        said = "" if joined else "; ".join(errors) or "no seed given"
        self.post(lambda server: server.join_done(action, joined, said))

    def _leave(self, action: LeaveAction) -> None:
        log.info("agent RPC: graceful leave asked")
        self._answered.clear()
        self._leaving = True
        try:
            error = self.member.leave().error
        except (TimeoutError, RuntimeError) as failure:
            error = str(failure)

        def answer(server: RpcServer) -> None:
            server.leave_done(action, error)
            self._answering = action.conn

        self.post(answer)
        self._answered.wait(ANSWER_WAIT_S)
        self.member.stop()


def start_threaded_rpc(member: ThreadMember, config: RpcConfig) -> ThreadedRpc:
    return ThreadedRpc(member, config).start()


__all__ = ["ThreadedRpc", "start_threaded_rpc"]

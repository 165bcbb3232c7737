"""The TCP listener for Tomcat on the running asyncio loop (AsyncMcastService):
the same answers and bounds as tribes_listener.TribesListener, without a thread."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import TYPE_CHECKING

from ..._runtime.listen import source_of
from ..engine.channel import ChannelError
from ..._runtime.net import open_listener
from .channel_listener import (HOLD_CHECK_S, MAX_UNSENT, READ_SIZE, REPLY_TIMEOUT_S, SEND_BUFFER,
                              Held, ListenerBase, no_hosts, no_one)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Container

    from ..engine.channel import ChannelConnection, Reply
    from ..engine.member import Member

# Connections taken per wake-up of the listening socket (as asyncio's own
# servers do), so one busy listener does not starve the loop.
ACCEPTS_PER_WAKEUP = 16


class _ChannelConn(Held):
    __slots__ = ("writer",)

    def __init__(self, source: str, channel: ChannelConnection, now: float) -> None:
        super().__init__(source, channel, now)
        self.writer: asyncio.StreamWriter | None = None


class AsyncTribesListener(ListenerBase):
    """The same listener on the running asyncio loop, for AsyncMcastService.
    It accepts on its own (a reader on the listening socket), so it decides
    on each connection before serving it and backs off, counted, when
    ``accept`` fails for want of descriptors."""

    def __init__(self, address: str, port: int, local_packet: Callable[[], bytes],
                 accepts: Callable[[Member], bool] = no_one,
                 member_hosts: Callable[[], Container[str]] = no_hosts) -> None:
        super().__init__(address, port, local_packet, accepts, member_hosts)
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._resume: asyncio.TimerHandle | None = None
        self._hold_check: asyncio.TimerHandle | None = None
        self._conns: set[_ChannelConn] = set()
        self._tasks: set[asyncio.Task[None]] = set()         # every task of ours
        self._deliveries: set[asyncio.Task[None]] = set()    # the replies in flight

    async def start(self) -> None:
        try:
            sock = open_listener(self.address, self.port)
        except OSError as error:
            raise self._bind_error(error) from None
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(sock.fileno(), self._on_acceptable)

    async def stop(self) -> None:
        """Close the listening socket and every connection at once."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        assert self._loop is not None       # started
        if self._hold_check is not None:
            self._hold_check.cancel()
            self._hold_check = None
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        else:
            self._loop.remove_reader(sock.fileno())
        sock.close()
        for conn in list(self._conns):
            self._release(conn)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)

    def _on_acceptable(self) -> None:
        assert self._sock is not None and self._loop is not None    # a reader while started
        for _ in range(ACCEPTS_PER_WAKEUP):
            try:
                sock, peer = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:    # the peer gave up, or no descriptors left
                delay = self._accept_failed(error)
                if delay is not None:   # the connection waits in the backlog: wait too
                    self._loop.remove_reader(self._sock.fileno())
                    self._resume = self._loop.call_later(delay, self._resume_accepting)
                return
            self._backoff.accepted()
            self.accepted += 1
            self._take(sock, source_of(peer))

    def _resume_accepting(self) -> None:
        self._resume = None
        if self._sock is not None and self._loop is not None:
            self._loop.add_reader(self._sock.fileno(), self._on_acceptable)

    def _take(self, sock: socket.socket, source: str) -> None:
        # (a connection still being set up has nothing to close yet)
        admitted, idlest = self._admit(source, [c for c in self._conns if c.writer is not None])
        if not admitted:
            sock.close()
            return
        if idlest is not None:
            assert isinstance(idlest, _ChannelConn)     # one of ours
            self._release(idlest)
        conn = _ChannelConn(source, self._new_connection(), time.monotonic())
        self._conns.add(conn)
        self._shares.add(source)
        self._spawn(self._serve(sock, conn))

    def _release(self, conn: _ChannelConn) -> None:
        """Forget ``conn`` (once) and close it at once."""
        if conn in self._conns:
            self._conns.discard(conn)
            self._shares.remove(conn.source)
        if conn.writer is not None:
            conn.writer.transport.abort()

    def _spawn(self, coro: Awaitable[None], group: set[asyncio.Task[None]] | None = None) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if group is not None:
            group.add(task)
            task.add_done_callback(group.discard)

    async def _serve(self, sock: socket.socket, conn: _ChannelConn) -> None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
            reader, writer = await asyncio.open_connection(sock=sock)
        except OSError:
            self._release(conn)
            sock.close()
            return
        conn.writer = writer
        if conn not in self._conns:          # closed while it was being set up
            writer.transport.abort()
            return
        channel = conn.channel
        graceful = False
        try:
            while True:
                data = await asyncio.wait_for(reader.read(READ_SIZE),
                                              conn.deadline() - time.monotonic())
                if not data or conn not in self._conns:
                    break
                conn.heard = time.monotonic()
                try:
                    back, replies = channel.receive(data)
                except ChannelError as error:   # answer what came whole before the bad bytes
                    back, replies, graceful = error.back, error.replies, True
                if back:
                    writer.write(back)
                    if writer.transport.get_write_buffer_size() > MAX_UNSENT:
                        break
                self._send(self._to_send(replies, conn.source))
                if self._held and self._hold_check is None:
                    self._hold_check = asyncio.get_running_loop().call_later(
                        HOLD_CHECK_S, self._check_held)
                if graceful:
                    break
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            if graceful and conn in self._conns:
                self._conns.discard(conn)
                self._shares.remove(conn.source)
                writer.close()          # after what was written (the acks)
            else:
                self._release(conn)

    def _send(self, replies: list[Reply]) -> None:
        for reply in replies:
            if self._clear_to_send(reply, len(self._deliveries)):
                self._spawn(self._deliver(reply), self._deliveries)

    def _check_held(self) -> None:
        self._hold_check = None
        if self._sock is None or self._loop is None:
            return
        self._send(self._release_held(time.monotonic()))
        if self._held:
            self._hold_check = self._loop.call_later(HOLD_CHECK_S, self._check_held)

    async def _deliver(self, reply: Reply) -> None:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(reply.address, reply.port),
                                               REPLY_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as error:
            self._reply_failed(reply, error or "timed out")
            return
        try:
            writer.write(reply.frame)
            await asyncio.wait_for(writer.drain(), REPLY_TIMEOUT_S)
            self.counters.count_sent(reply.kind)
        except (OSError, asyncio.TimeoutError) as error:
            self._reply_failed(reply, error or "timed out")
        finally:
            writer.close()

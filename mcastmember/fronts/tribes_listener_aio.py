"""The TCP listener for Tomcat on the running asyncio loop (AsyncMembership):
the same answers and bounds as tribes_listener.TribesListener, without a thread."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import TYPE_CHECKING

from ..engine.channel import ChannelError
from ..transport.net import socket_family
from .tribes_listener import (IDLE_TIMEOUT_S, MAX_CONNECTIONS, MAX_REPLIES_IN_FLIGHT, MAX_UNSENT,
                              READ_SIZE, REPLY_TIMEOUT_S, SEND_BUFFER, ListenerBase)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ..engine.channel import Reply


class AsyncTribesListener(ListenerBase):
    """The same listener on the running asyncio loop, for AsyncMembership."""

    def __init__(self, address: str, port: int, local_packet: Callable[[], bytes]) -> None:
        super().__init__(address, port, local_packet)
        self._server: asyncio.Server | None = None
        # StreamWriter -> monotonic time of its last bytes
        self._writers: dict[asyncio.StreamWriter, float] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._serve, self.address, self.port,
                                                      family=socket_family(self.address),
                                                      reuse_address=True)
        except OSError as error:
            raise self._bind_error(error) from None
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Close the server and every connection at once (on Python 3.12.1+
        ``wait_closed`` waits for open connections, which Tomcat keeps)."""
        if self._server is None:
            return
        server, self._server = self._server, None
        server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks)
        await server.wait_closed()

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self._server is None:
            writer.transport.abort()
            return
        if len(self._writers) >= MAX_CONNECTIONS:
            idlest = min(self._writers, key=self._writers.__getitem__)
            self._writers.pop(idlest)
            idlest.transport.abort()
            self.evicted += 1
        self._writers[writer] = time.monotonic()
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        channel = self._new_connection()
        try:
            while True:
                data = await asyncio.wait_for(reader.read(READ_SIZE), IDLE_TIMEOUT_S)
                if not data or writer not in self._writers:
                    break
                self._writers[writer] = time.monotonic()
                back, replies = channel.receive(data)
                if back:
                    writer.write(back)
                    if writer.transport.get_write_buffer_size() > MAX_UNSENT:
                        break
                for reply in replies:
                    if len(self._tasks) >= MAX_REPLIES_IN_FLIGHT:
                        self._reply_failed(reply, "too many replies in flight")
                    else:
                        self._spawn(self._deliver(reply))
        except (OSError, asyncio.TimeoutError, ChannelError):
            pass
        finally:
            self._writers.pop(writer, None)
            writer.transport.abort()

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
        except (OSError, asyncio.TimeoutError) as error:
            self._reply_failed(reply, error or "timed out")
        finally:
            writer.close()

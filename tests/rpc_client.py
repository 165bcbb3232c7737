"""A raw client of Serf's agent RPC (msgpack over TCP), for the tests: each
call sends a request and reads back exactly what the agent writes, so the
tests see the bytes' shapes themselves (headers, bodies, stream records).
And ``on_front``: a gossip member with its RPC, on either front."""

import asyncio
import socket

import msgpack

from mcastmember.gossip.fronts.aio import AsyncSerfService
from mcastmember.gossip.fronts.service import SerfService
from support import free_gossip_port, free_tcp_port

#: the commands whose answer has a body (the others: a header alone)
WITH_ANSWER_BODY = {"members", "members-filtered", "join", "stats", "get-coordinate", "install-key", "use-key",
                    "remove-key", "list-keys"}
#: the refusals the agent sends without a body, whatever the command
NO_BODY_ERRORS = {"Authentication required", "Handshake required", "Unsupported command"}
FRONTS = ["threads", "asyncio"]
#: quick timers: a member probes (so coordinates come) and gossips often
FAST = {"probe_interval": 0.2, "probe_timeout": 0.1, "gossip_interval": 0.05, "push_pull_interval": 5.0}


class RpcClient:
    def __init__(self, addr, source=None, timeout=5.0):
        self.sock = socket.create_connection(addr, timeout, source_address=(source, 0) if source else None)
        self.unpacker = msgpack.Unpacker(raw=False)
        self.seq = 0

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, command, body=None, seq=None):
        """Send a request; returns its Seq."""
        if seq is None:
            self.seq += 1
            seq = self.seq
        data = msgpack.packb({"Command": command, "Seq": seq})
        if body is not None:
            data += msgpack.packb(body)
        self.sock.sendall(data)
        return seq

    def read(self):
        """The next msgpack object the server wrote (socket.timeout if none comes)."""
        while True:
            for obj in self.unpacker:
                return obj
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the server")
            self.unpacker.feed(data)

    def call(self, command, body=None):
        """(header, body or None) of a request answered at once."""
        seq = self.send(command, body)
        head = self.read()
        assert head["Seq"] == seq, head
        if command in WITH_ANSWER_BODY and head["Error"] not in NO_BODY_ERRORS:
            return head, self.read()
        return head, None

    def handshake(self, auth=None):
        assert self.call("handshake", {"Version": 1}) == ({"Error": "", "Seq": self.seq}, None)
        if auth is not None:
            assert self.call("auth", {"AuthKey": auth})[0]["Error"] == ""
        return self

    def record(self, seq):
        """The next stream record (header, body) of ``seq``."""
        head = self.read()
        assert head == {"Error": "", "Seq": seq}, head
        return self.read()

    def closed(self):
        """Whether the server closed the connection (reads to the end)."""
        try:
            while self.sock.recv(65536):
                pass
        except ConnectionResetError:
            pass
        return True


def rpc_settings(**more):
    return {"rpc_addr": f"127.0.0.1:{free_tcp_port()}", **FAST, **more}


def on_front(front, work, name="py1", host="127.0.0.1", **settings):
    """``work(svc, on)`` beside a started member with an RPC on ``front``
    ("threads" or "asyncio", whose loop runs meanwhile; ``on(fn)`` calls
    ``fn()`` on the loop, or at once on threads); returns what it returns."""
    settings = rpc_settings(**settings)
    port = free_gossip_port(host)
    if front == "threads":
        with SerfService(name, host, port, **settings) as svc:
            return work(svc, lambda fn: fn())

    async def main():
        async with AsyncSerfService(name, host, port, **settings) as svc:
            loop = asyncio.get_running_loop()

            async def call(fn):
                result = fn()
                return await result if asyncio.iscoroutine(result) else result
            return await asyncio.to_thread(
                work, svc, lambda fn: asyncio.run_coroutine_threadsafe(call(fn), loop).result(15))
    return asyncio.run(asyncio.wait_for(main(), 60))

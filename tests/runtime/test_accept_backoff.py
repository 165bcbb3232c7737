"""Accept loops back off when descriptors run out, on both protocols' fronts.

A member whose process has no descriptor left (``ulimit -n 40``, the rest
filled) and hundreds of connections waiting on its TCP port fails every
``accept`` with EMFILE; the connection stays in the backlog and the port
stays readable, so accepting again at once would spin a core. Each front
must stop accepting for a while instead (the runtime's AcceptBackoff): the
member's process then uses under a tenth of a core.
"""

import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from support import GROUP, free_gossip_port, free_tcp_port, next_line, wait_until

# The accept loop's backoff is the runtime's, the same over either kernel:
# CI's compiled pass runs it (single_pass).
pytestmark = pytest.mark.single_pass

FRONTS = ["tribes-threads", "tribes-asyncio", "gossip-threads", "gossip-asyncio"]
CONNECTIONS = 300
# Connections that must be waiting (the Tribes listener's backlog holds 64).
MIN_WAITING = 60
DESCRIPTORS = 40
# The window the process's CPU time is measured over, and the share of one
# core it may use in it.
WINDOW_S = 3.0
MAX_CPU_SHARE = 0.1

# The member's process: the front started on PORT under ulimit -n 40, every
# descriptor left filled (so each accept fails for want of one), "ready"
# printed, then running until its stdin closes.
CHILD = textwrap.dedent("""
    import asyncio, os, resource, sys
    front, port, group_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    from mcastmember import McastService, AsyncMcastService
    from mcastmember.gossip.fronts.service import SerfService
    from mcastmember.gossip.fronts.aio import AsyncSerfService
    tribes = dict(interface="127.0.0.1", ttl=0, member_port=port, tcp_listener=True)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, ({descriptors}, hard))

    def fill():
        held = []
        while True:
            try:
                held.append(os.open("/dev/null", os.O_RDONLY))
            except OSError:
                return held

    def wait_for_stdin():
        sys.stdin.read()

    if front == "tribes-threads":
        with McastService("{group}", group_port, **tribes):
            held = fill()
            print("ready", flush=True)
            wait_for_stdin()
    elif front == "gossip-threads":
        with SerfService("m", "127.0.0.1", port):
            held = fill()
            print("ready", flush=True)
            wait_for_stdin()
    else:
        async def main():
            if front == "tribes-asyncio":
                service = AsyncMcastService("{group}", group_port, **tribes)
            else:
                service = AsyncSerfService("m", "127.0.0.1", port)
            async with service:
                held = fill()
                print("ready", flush=True)
                closed = asyncio.Event()
                asyncio.get_running_loop().add_reader(sys.stdin.fileno(), closed.set)
                await closed.wait()
        asyncio.run(main())
""").format(descriptors=DESCRIPTORS, group=GROUP)


def cpu_seconds(pid):
    """User and system CPU time of process ``pid`` so far (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("front", FRONTS)
def test_a_member_out_of_descriptors_backs_off_accepting_instead_of_spinning(front, group_port):
    port = free_gossip_port() if front.startswith("gossip") else free_tcp_port()
    child = subprocess.Popen([sys.executable, "-c", CHILD, front, str(port), str(group_port)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peers = []
    try:
        assert next_line(child, 30) == "ready"
        for _ in range(CONNECTIONS):
            peer = socket.socket()
            peer.setblocking(False)
            peer.connect_ex(("127.0.0.1", port))
            peers.append(peer)
        # Connections made, more than the member could take (in its backlog, as
        # it cannot accept them; past the backlog the kernel drops the rest).
        wait_until(lambda: sum(_connected(p) for p in peers) >= MIN_WAITING, timeout=10)
        before, started = cpu_seconds(child.pid), time.monotonic()
        time.sleep(WINDOW_S)        # the measurement window (nothing is awaited)
        share = (cpu_seconds(child.pid) - before) / (time.monotonic() - started)
        print(f"{front}: {share:.3f} of a core with {CONNECTIONS} connections waiting")
        assert child.poll() is None, child.stderr.read().decode()
        assert share < MAX_CPU_SHARE
    finally:
        for peer in peers:
            peer.close()
        child.stdin.close()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()


def _connected(sock):
    try:
        sock.getpeername()
        return True
    except OSError:
        return False

"""A default member answers on its member port.

A Tomcat whose channel has no TcpFailureDetector lists every member it hears
and may ask any of them for its sessions: a member that cannot answer makes
it wait out its state transfer timeout (tests/interop/test_tomcat_cluster.py starts
such a Tomcat). So the TCP listener is on by default, and a busy member port
does not stop a default member from starting: it runs on without the
listener, as before, and says so. Asked for (tcp_listener, tomcat, verify),
a busy port stops the start. Both fronts, loopback only.
"""

import logging
import shutil
import socket
import subprocess
import sys

import pytest

from mcastmember import McastService

from support import GROUP, LOOPBACK

pytestmark = pytest.mark.network


def _busy_port():
    """A listening TCP socket on a free loopback port (the caller closes it)."""
    holder = socket.create_server(("127.0.0.1", 0))
    return holder, holder.getsockname()[1]


def test_a_default_member_answers_on_its_member_port(running_front):
    node = running_front(0)                 # 0: the kernel's choice, advertised
    port = node.front.local_member.port
    assert port != 0
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    assert node.front.local_member.port == port
    assert node.front.local_member.alive_ms < 0      # Tomcat sorts us after its own nodes


def test_a_default_member_on_a_busy_port_runs_without_the_listener(running_front, caplog):
    holder, port = _busy_port()
    with holder, caplog.at_level(logging.WARNING, logger="mcastmember"):
        node = running_front(port)
        assert node.running
        assert node.stats()["probe_connections"] == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert f"port {port}" in warnings[0]
    assert "running without the TCP listener" in warnings[0]


@pytest.mark.parametrize("asked", [{"tcp_listener": True}, {"tomcat": True}, {"verify": True}],
                         ids=["tcp_listener", "tomcat", "verify"])
def test_a_listener_asked_for_on_a_busy_port_stops_the_start(running_front, asked):
    holder, port = _busy_port()
    with holder, pytest.raises(OSError, match=f"cannot listen on 127.0.0.1 port {port}"):
        running_front(port, **asked)


def _free_tcp_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("flags, listening", [([], True), (["--no-tcp-listener"], False)],
                         ids=["default", "no-tcp-listener"])
def test_mcast_demo_join_listens_unless_told_not_to(group_port, tmp_path, flags, listening):
    demo = [shutil.which("mcast-demo")] if shutil.which("mcast-demo") else \
        [sys.executable, "-m", "mcastmember"]
    port = _free_tcp_port()
    proc = subprocess.Popen(demo + ["join", GROUP, "--port", str(group_port), "--interface",
                                    "127.0.0.1", "--ttl", "0", "--member-port", str(port),
                                    *flags], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        with McastService(GROUP, group_port, member_port=_free_tcp_port(), tcp_listener=False,
                          **LOOPBACK) as watcher:
            members = watcher.wait_for(lambda ms: [m for m in ms if m.port == port], 15.0)
        (member,) = [m for m in members if m.port == port]
        assert (member.alive_ms < 0) is listening       # below zero: Tomcat sorts it last
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            answered = True
        except ConnectionRefusedError:
            answered = False
        assert answered is listening
    finally:
        proc.terminate()
        proc.wait(10)

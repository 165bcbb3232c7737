"""The metric names a Python member serves are those Debian's ``serf agent``
emits: the agent, with a statsd sink on a UDP socket of the test, joins a
Python member; both see a user event and a query; every memberlist and Serf
key the agent sent is a series of the Python member's metrics server, '.'
and '-' made '_' as go-metrics' Prometheus sink makes them. On loopback, a
few seconds; skipped where ``serf`` is not installed."""

import json
import re
import shutil
import socket
import subprocess
import threading
import urllib.request

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from mcastmember._runtime.scrape import metric_name  # noqa: E402
from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.serf.node import QueryReceived  # noqa: E402
from mcastmember.metrics import serve  # noqa: E402
from support import free_gossip_port, free_tcp_port, wait_until  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("serf") is None,
                                reason="Debian's serf is not installed (apt-get install serf)")

# "serf-agent." (the agent's service name), a gauge's host name, then the key
STATSD_LINE = re.compile(r"^serf-agent\.(?:[^:|]*?\.)??((?:memberlist|serf)\.[^:|]+):[^|]*\|(?:ms|c|g)$")
# what the agent must have sent before the names are compared: a join, probes,
# gossip, push/pulls, an event and a query both ways, acked and answered
EXPECTED = {"memberlist.gossip", "memberlist.probeNode", "memberlist.pushPullNode", "memberlist.msg.alive",
            "memberlist.udp.sent", "memberlist.udp.received", "memberlist.tcp.connect", "memberlist.tcp.sent",
            "memberlist.tcp.accept", "serf.member.join", "serf.events", "serf.events.deploy", "serf.queries",
            "serf.queries.whoami", "serf.query_acks", "serf.query_responses", "serf.msgs.sent",
            "serf.msgs.received", "serf.coordinate.adjustment-ms"}
FAST = dict(probe_interval=0.2, probe_timeout=0.1, gossip_interval=0.05, push_pull_interval=0.5, tcp_timeout=1.0)


class StatsdListener:
    """The keys of the statsd lines sent to a UDP socket on loopback."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.keys = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65536)
            except OSError:
                continue
            for line in data.decode("utf-8", "replace").splitlines():
                match = STATSD_LINE.match(line.strip())
                if match:
                    self.keys.add(match.group(1))

    def close(self):
        self._stop.set()
        self._thread.join()
        self.sock.close()


def test_every_name_the_agent_emits_is_a_series_of_a_python_member(tmp_path):
    statsd = StatsdListener()
    config = tmp_path / "agent.json"
    config.write_text(json.dumps({"statsd_addr": f"127.0.0.1:{statsd.sock.getsockname()[1]}"}))
    pa, rpc = free_gossip_port(), f"127.0.0.1:{free_tcp_port()}"
    agent = None
    try:
        with SerfService("py", "127.0.0.1", pa, seed=1, **FAST) as py, serve(py, 0, "127.0.0.1") as server:
            py.add_listener(lambda e: py.respond(e, b"py") if isinstance(e, QueryReceived) else None)
            agent = subprocess.Popen(["serf", "agent", "-node", "go", "-bind", f"127.0.0.1:{free_gossip_port()}",
                                      "-rpc-addr", rpc, "-config-file", str(config), "-join", f"127.0.0.1:{pa}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
            wait_until(lambda: len(py.members()) == 2, 15)
            py.user_event("deploy", b"v1")
            py.query("whoami", b"x", request_ack=True, timeout=1.0)
            serf = ["serf", "query", "-rpc-addr", rpc, "-timeout", "1s", "whoami", "y"]
            wait_until(lambda: subprocess.run(serf, capture_output=True, timeout=10).returncode == 0)
            wait_until(lambda: EXPECTED <= statsd.keys, 20, message=lambda: f"missing {EXPECTED - statsd.keys}")
            wait_until(lambda: py.stats()["coordinate_updates"] >= 1)
            with urllib.request.urlopen(server.url, timeout=5) as answer:
                families = {f.name for f in text_string_to_metric_families(answer.read().decode())}
    finally:
        if agent is not None:
            agent.kill()
            agent.wait()
        statsd.close()
    assert {key for key in statsd.keys if metric_name(key) not in families} == set()

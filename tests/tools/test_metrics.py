"""Prometheus metrics: scraped over HTTP on 127.0.0.1 from
both fronts, the counters move as a second member heartbeats on loopback."""

import json
import signal
import socket
import subprocess
import sys
import threading
import urllib.request

import pytest

from mcastmember import McastService

from fronts import FAST, FRONTS
from support import GROUP, LOOPBACK, child_env, fake_members, wait_until
from test_cli import read_event, run, start_join

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from mcastmember.metrics import serve  # noqa: E402

pytestmark = pytest.mark.network


def scrape(url):
    """{(sample name, frozenset of labels but the group): value}, and the groups seen."""
    with urllib.request.urlopen(url, timeout=5) as answer:
        return parse(answer.read().decode())


def parse(text):
    """As scrape(), from the exposition ``text``."""
    samples, groups = {}, set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = dict(sample.labels)
            groups.add(labels.pop("group"))
            samples[(sample.name, frozenset(labels.items()))] = sample.value
    return samples, groups


def value(samples, name, **labels):
    return samples[(name, frozenset(labels.items()))]


@pytest.mark.parametrize("kind", sorted(FRONTS))
def test_a_scrape_sees_the_counters_move(kind, group_port, monkeypatch):
    from mcastmember._runtime import metrics_http  # (it polls: no rate for this one)
    for name in ("SOURCE_REQUEST_RATE", "SOURCE_REQUEST_BURST", "REQUEST_RATE", "REQUEST_BURST"):
        monkeypatch.setattr(metrics_http, name, 10**6, raising=False)
    front = FRONTS[kind](group_port, 4001, max_members=1)
    other = McastService(GROUP, group_port, member_port=4002, **LOOPBACK, **FAST)
    front.start()
    server = serve(front.front, 0)
    try:
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        first, groups = scrape(server.url)
        assert groups == {f"{GROUP}:{group_port}"}
        assert value(first, "mcastmember_members") == 0
        assert value(first, "mcastmember_added_total") == 0
        assert value(first, "mcastmember_healthy") == 1
        other.start()
        front.events.wait_for(lambda e: e.kind == "added" and e.member.port == 4002)
        fake_members(group_port, 1, junk_first=3)          # the table is full: refused
        wait_until(lambda: value(scrape(server.url)[0], "mcastmember_refused_total",
                                 reason="full") == 1)
        second, _ = scrape(server.url)
        assert value(second, "mcastmember_members") == 1
        assert value(second, "mcastmember_added_total") == 1
        assert value(second, "mcastmember_malformed_total", verdict="not_membership") == 3
        assert value(second, "mcastmember_malformed_total", verdict="truncated") == 0
        assert value(second, "mcastmember_refused_total", reason="unlisted") == 0
        assert value(second, "mcastmember_auth_failures_total", reason="bad_mac") == 0
        # the other's heartbeats, the junk, the stranger; our own are not received
        assert value(second, "mcastmember_datagrams_received_total") >= 1 + 3 + 1
        for name, labels in (("mcastmember_fast_path_total", {}),    # the other's next beats
                             ("mcastmember_heartbeats_sent_total", {"transport": "multicast"})):
            wait_until(lambda: value(scrape(server.url)[0], name, **labels)
                       > value(second, name, **labels))
        other.stop()
        front.events.wait_for(lambda e: e.kind == "removed" and e.member.port == 4002)
        third, _ = scrape(server.url)
        assert value(third, "mcastmember_members") == 0
        assert value(third, "mcastmember_removed_total", reason="shutdown") == 1
        assert value(third, "mcastmember_removed_total", reason="expired") == 0
        assert value(third, "mcastmember_send_errors_total", transport="multicast") == 0
        assert value(third, "mcastmember_receive_errors_total") == 0
        # Every series from the start (stats() has one shape): no peers, 0.
        assert value(third, "mcastmember_heartbeats_sent_total", transport="unicast") == 0
    finally:
        server.close()
        other.stop()
        front.close()


def free_tcp_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_mcast_demo_serves_its_metrics_on_the_interface_address(group_port, tmp_path):
    port = free_tcp_port()
    demo = start_join(group_port, 4000, tmp_path, "--metrics-port", str(port))
    member = McastService(GROUP, group_port, member_port=4001, **LOOPBACK, **FAST)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_until(lambda: _answers(url))
        assert value(scrape(url)[0], "mcastmember_members") == 0
        member.start()
        read_event(demo)
        samples, groups = scrape(url)
        assert groups == {f"{GROUP}:{group_port}"}
        assert value(samples, "mcastmember_members") == 1
        assert value(samples, "mcastmember_added_total") == 1
        with socket.socket() as other:       # bound to 127.0.0.1 alone, not every address
            assert other.connect_ex(("127.0.0.2", port)) != 0
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(5) == 0
        assert not _answers(url)              # closed with the demo
    finally:
        member.stop()
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        demo.stdout.close()
        demo.stderr.close()


def _answers(url):
    try:
        scrape(url)
        return True
    except OSError:
        return False


JOIN = ["join", GROUP, "--interface", "127.0.0.1", "--ttl", "0", "--duration", "5"]


def test_a_taken_metrics_port_is_one_line_and_exit_2(group_port, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(JOIN + ["--port", str(group_port), "--metrics-port", str(port)], tmp_path)
    assert result.returncode == 2
    assert result.stderr == (f"mcast-demo join: error: cannot serve metrics on "
                             f"127.0.0.1:{port}: Address already in use\n")
    assert result.stdout == ""            # stopped before joining


@pytest.mark.parametrize("args, message", [
    (["--metrics-address", "127.0.0.1"], "--metrics-address needs --metrics-port"),
    (["--metrics-port", "0"], "--metrics-port 0 is out of range (1-65535)"),
    (["--metrics-port", "70000"], "--metrics-port 70000 is out of range (1-65535)"),
])
def test_bad_metrics_arguments_are_one_line_and_exit_2(tmp_path, args, message):
    result = run(JOIN + args, tmp_path)
    assert (result.returncode, result.stderr) == (2, f"mcast-demo join: error: {message}\n")


def test_without_prometheus_client_the_metrics_port_says_what_to_install(tmp_path):
    code = ("import sys; sys.modules['prometheus_client'] = None; "   # import fails
            "from mcastmember.tools.cli import main; sys.exit(main(sys.argv[1:]))")
    result = subprocess.run([sys.executable, "-c", code, "watch", GROUP, "--interface",
                             "127.0.0.1", "--metrics-port", "9464"], capture_output=True,
                            text=True, cwd=tmp_path, timeout=30)
    assert result.returncode == 2
    assert result.stderr == ("mcast-demo watch: error: --metrics-port needs prometheus_client: "
                             "pip install 'mcastmember[prometheus]'\n")


# -- the server's bounds: connections, and accept when descriptors run out ------

def _connect(port, source="127.0.0.1"):
    return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))


def _scrape_from(port, source):
    """scrape() from another source address, in plain HTTP."""
    with _connect(port, source) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200 OK\r\n")
    return {(sample.name, frozenset((k, v) for k, v in sample.labels.items() if k != "group")):
            sample.value for family in text_string_to_metric_families(body.decode())
            for sample in family.samples}


@pytest.mark.parametrize("kind", sorted(FRONTS))
def test_half_sent_requests_take_neither_threads_nor_more_than_a_share(kind, group_port):
    """1,014 half-sent requests once held 1,013 threads and every descriptor:
    now one thread serves them all, one source holds at most its share (the
    rest are refused, counted), and another source is still served."""
    from mcastmember._runtime import metrics_http
    front = FRONTS[kind](group_port, 4001)
    front.start()
    server = serve(front.front, 0)
    try:
        threads = threading.active_count()
        share = metrics_http.STRANGER_SHARE     # a source none of whose requests was answered
        held = [_connect(server.port) for _ in range(share + 30)]
        for sock in held:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")      # and never the end
        wait_until(lambda: sum(server.stats().values()) == 30)
        assert threading.active_count() == threads
        assert server.stats() == dict.fromkeys(metrics_http.OUTCOMES, 0) | {"refused": 30,
                                                                               "accept_errors": 0}
        samples = _scrape_from(server.port, "127.0.0.2")     # another source: served
        assert value(samples, "mcastmember_metrics_server_connections_total",
                     outcome="refused") == 30
        assert value(samples, "mcastmember_members") == 0
        for sock in held:
            sock.close()
    finally:
        server.close()
        front.close()


def test_a_scraper_gets_in_past_a_crowd_of_half_sent_requests(monkeypatch, group_port):
    """Sources that never completed a request, one connection each, fill
    the server: a source that was answered before (the scraper) closes the
    oldest of theirs to get in."""
    from mcastmember._runtime import metrics_http
    monkeypatch.setattr(metrics_http, "MAX_CONNECTIONS", 4)
    front = FRONTS["threads"](group_port, 4001)
    server = serve(front.front, 0)
    try:
        _scrape_from(server.port, "127.0.0.1")
        crowd = [_connect(server.port, f"127.0.0.{n}") for n in range(2, 6)]
        for sock in crowd:
            sock.sendall(b"GET /metrics HTTP/1.1\r\n")        # and never the end
        samples = _scrape_from(server.port, "127.0.0.1")
        assert value(samples, "mcastmember_members") == 0
        assert crowd[0].recv(1) == b""                           # the oldest made room
        wait_until(lambda: server.stats()["served"] == 2)
        assert server.stats() == dict.fromkeys(metrics_http.OUTCOMES, 0) | {
            "served": 2, "evicted": 1, "accept_errors": 0}
        for sock in crowd:
            sock.close()
    finally:
        server.close()
        front.close()


def test_requests_from_one_source_are_rate_bounded(monkeypatch, group_port):
    """Six clients once got 18,035 scrapes in 15 s: past a source's rate a
    request gets 429 without the collector being called."""
    from mcastmember._runtime import metrics_http
    monkeypatch.setattr(metrics_http, "SOURCE_REQUEST_BURST", 2, raising=False)
    monkeypatch.setattr(metrics_http, "SOURCE_REQUEST_RATE", 1e-9, raising=False)
    front = FRONTS["threads"](group_port, 4001)
    server = serve(front.front, 0)
    try:
        _scrape_from(server.port, "127.0.0.1")
        _scrape_from(server.port, "127.0.0.1")
        with _connect(server.port) as sock:
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(100).startswith(b"HTTP/1.0 429 ")
        _scrape_from(server.port, "127.0.0.2")                   # another source: served
        assert (server.stats()["served"], server.stats()["limited"]) == (3, 1)
    finally:
        server.close()
        front.close()


def test_a_request_never_finished_is_closed_at_the_timeout(monkeypatch, group_port):
    from mcastmember._runtime import metrics_http
    monkeypatch.setattr(metrics_http, "REQUEST_TIMEOUT_S", 0.5)
    front = FRONTS["threads"](group_port, 4001)
    server = serve(front.front, 0)
    try:
        with _connect(server.port) as slow, _connect(server.port) as big:
            slow.sendall(b"GET /metrics HTTP/1.1\r\n")
            big.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"x" * 9000)
            assert big.recv(100).startswith(b"HTTP/1.0 431 ")
            assert slow.recv(100) == b""             # closed by the server
        assert (server.stats()["timed_out"], server.stats()["too_large"]) == (1, 1)
    finally:
        server.close()
        front.close()


_EXHAUSTED = """
import json, resource, socket, sys, threading, time
from support import wait_until
from mcastmember._runtime.metrics_http import MetricsHTTPServer
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
server = MetricsHTTPServer("127.0.0.1", 0, app)
threading.Thread(target=server.serve_forever, daemon=True).start()
hog = []
try:
    while True:
        hog.append(socket.socket())
except OSError:
    pass
print(server.server_port, flush=True)
sys.stdin.readline()
wait_until(lambda: server.stats()["accept_errors"] > 0)
start = time.monotonic()
time.sleep(1.0)                 # on purpose: the errors in one second are the rate measured
errors, elapsed = server.stats()["accept_errors"], time.monotonic() - start
for sock in hog:
    sock.close()
print(json.dumps([errors, elapsed]), flush=True)
sys.stdin.readline()
"""


def test_accept_backs_off_when_descriptors_run_out():
    from mcastmember._runtime import listen
    child = subprocess.Popen([sys.executable, "-c", _EXHAUSTED], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        port = int(child.stdout.readline())
        with _connect(port) as sock:
            child.stdin.write("go\n")
            child.stdin.flush()
            errors, elapsed = json.loads(child.stdout.readline())
            assert 1 <= errors <= elapsed / listen.BACKOFF_FIRST_S + 2   # not 10^5: no spin
            sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
            assert sock.recv(100).startswith(b"HTTP/1.0 200 OK\r\n")     # served once it can
        child.stdin.write("done\n")
        child.stdin.flush()
        assert child.wait(10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdin.close()
        child.stdout.close()


def test_first_scrape_has_every_removal_reason_and_doctor_probes_apart(group_port):
    # Prometheus practice: every known label value from the first scrape, at 0,
    # so that rate() starts from a series; doctor probes are not malformed.
    with McastService(GROUP, group_port, member_port=4001, **LOOPBACK, **FAST) as front:
        samples, _ = scrape_collector(front)
        assert {labels for name, labels in samples if name == "mcastmember_removed_total"} == {
            frozenset({("reason", r)}) for r in
            ("expired", "filtered", "shutdown", "stopped", "unlisted")}
        assert all(samples[key] == 0 for key in samples if key[0] == "mcastmember_removed_total")
        assert value(samples, "mcastmember_doctor_probes_total") == 0
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
            sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF,
                              socket.inet_aton("127.0.0.1"))
            sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
            for _ in range(2):
                sender.sendto(b"MCDOCTOR" + bytes(30), (GROUP, group_port))
        wait_until(lambda: front.stats()["doctor_probes"] == 2)
        samples, _ = scrape_collector(front)
    assert value(samples, "mcastmember_doctor_probes_total") == 2
    assert not [labels for name, labels in samples if name == "mcastmember_malformed_total"
                and ("verdict", "doctor_probe") in labels]
    assert value(samples, "mcastmember_malformed_total", verdict="not_membership") == 0


def scrape_collector(front):
    """What a scrape of ``front``'s collector shows (as scrape())."""
    from prometheus_client import CollectorRegistry, generate_latest
    from mcastmember.metrics import MembershipCollector
    registry = CollectorRegistry()
    registry.register(MembershipCollector(front))
    return parse(generate_latest(registry).decode())


def test_importing_metrics_without_prometheus_client_says_what_to_install():
    code = ("import sys; sys.modules['prometheus_client'] = None\n"
            "try:\n    import mcastmember.metrics\n"
            "except ImportError as error:\n"
            "    print(type(error).__name__, error.name, error, sep='|')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=30)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == ("ModuleNotFoundError|prometheus_client|mcastmember.metrics needs "
                             "prometheus_client: pip install 'mcastmember[prometheus]'\n")


def test_every_stats_key_is_exported_once_and_listed_in_the_docs():
    """A counter added to stats() cannot be forgotten in /metrics: each key
    of Stats gets a value of its own, and each appears in exactly one sample."""
    import pathlib
    import types

    from mcastmember.metrics import MembershipCollector
    from mcastmember.tribes.engine.stats import Stats
    keys = [k for k in Stats.__annotations__ if k not in ("implementation", "healthy")]
    stats = {key: 1000 + n for n, key in enumerate(keys)}
    stats.update(implementation="compiled", healthy=True)
    front = types.SimpleNamespace(stats=lambda: stats, config=types.SimpleNamespace(
        describe=lambda: "228.0.0.4:45564"))
    samples = [s for family in MembershipCollector(front).collect() for s in family.samples]
    values = sorted(s.value for s in samples if s.value >= 1000)
    assert values == sorted(stats[k] for k in keys)
    assert {s.labels["implementation"] for s in samples if s.name == "mcastmember_implementation"} \
        == {"compiled"}
    docs = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    names = {s.name for s in samples}
    assert {n for n in names if f"`{n}`" not in docs} == set()

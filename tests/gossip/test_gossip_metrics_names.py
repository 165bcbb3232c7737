"""A gossip member's metrics server serves memberlist's and Serf's own series
under the names go-metrics' Prometheus sink gives them (what Serf and Consul
dashboards read): exact counts after a join, a user event and a query, sane
timings, on both fronts; the prefix ("consul": Consul's names); the names
beside those in Debian's memberlist source; the by-name series bounded;
`mcast-demo gossip --metrics-port` serving them."""

import asyncio
import math
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from mcastmember import AsyncSerfService, SerfService  # noqa: E402
from mcastmember.gossip.fronts.serf_names import COUNTERS, GAUGES, SUMMARIES  # noqa: E402
from mcastmember.gossip.memberlist.telemetry import MAX_AGE_S, Samples  # noqa: E402
from mcastmember.gossip.serf import messages  # noqa: E402
from mcastmember.gossip.serf.node import QueryFinished  # noqa: E402
from mcastmember.gossip.serf.queries import QueryTracker  # noqa: E402
from mcastmember.gossip.serf.telemetry import MAX_NAMES, SerfTelemetry  # noqa: E402
from mcastmember.metrics import serve  # noqa: E402
from support import free_gossip_port, free_tcp_port, wait_until  # noqa: E402

FAST = dict(probe_interval=0.2, probe_timeout=0.1, gossip_interval=0.05, push_pull_interval=2.0, tcp_timeout=1.0)
DEMO = [shutil.which("mcast-demo")] if shutil.which("mcast-demo") else [sys.executable, "-m", "mcastmember"]
MEMBERLIST_SRC = pathlib.Path("/usr/share/gocode/src/github.com/hashicorp/memberlist")


def read(url):
    with urllib.request.urlopen(url, timeout=5) as answer:
        return answer.read().decode()


def samples_of(text):
    """{(sample name, labels without node): value} of a scrape, every sample labelled node="a"."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = dict(s.labels)
            assert labels.pop("node") == "a", s
            out[(s.name, frozenset(labels.items()))] = s.value
    return out


def ready(stats):
    """The join, the probes, a coordinate and a push/pull are done (what the scrape's timings need)."""
    return (stats["members.alive"] == 2 and stats["probes"] >= 1 and stats["coordinate_updates"] >= 1
            and stats["push_pulls"] >= 1)


def check(text, finished, prefix=""):
    """The series of member "a" after it joined "b", sent the event "deploy"
    and the query "whoami" (acked by both, answered by none)."""
    samples = samples_of(text)
    p = prefix + "_" if prefix else ""

    def value(name, **labels):
        return samples[(p + name, frozenset(labels.items()))]

    exact = {"serf_member_join": 2, "serf_member_left": 0, "serf_member_failed": 0, "serf_member_update": 0,
             "serf_member_flap": 0, "serf_events": 1, "serf_events_deploy": 1, "serf_queries": 1,
             "serf_queries_whoami": 1, "serf_query_acks": 2, "serf_query_responses": 0,
             "serf_query_duplicate_acks": 0, "serf_query_duplicate_responses": 0,
             # our alive and b's; no suspicion, death or degraded probe on loopback
             "memberlist_msg_alive": 2, "memberlist_msg_suspect": 0, "memberlist_msg_dead": 0,
             "memberlist_degraded_probe": 0, "memberlist_degraded_timeout": 0, "memberlist_health_score": 0,
             "serf_coordinate_rejected": 0,
             # Serf samples its queues every 30 s, the first time at once
             "serf_queue_Intent_count": 1, "serf_queue_Event_count": 1, "serf_queue_Query_count": 1}
    assert {name: value(name) for name in exact} == exact
    assert (sorted(finished.acks), finished.responses) == (["a", "b"], ())
    # bytes as our own series count them (read just before these, so at most these)
    ours = {(t, d): samples[("mcastmember_gossip_bytes_total", frozenset({"transport": t, "direction": d}.items()))]
            for t in ("udp", "tcp") for d in ("sent", "received")}
    assert 0 < ours[("udp", "sent")] <= value("memberlist_udp_sent")
    assert 0 < ours[("udp", "received")] <= value("memberlist_udp_received")
    assert 0 < ours[("tcp", "sent")] <= value("memberlist_tcp_sent")
    assert value("memberlist_tcp_connect") >= 1            # our join's push/pull at least
    for name, most in (("memberlist_probeNode", 1000 * FAST["probe_interval"] * 9),   # (awareness scales it)
                       ("memberlist_pushPullNode", 1000 * FAST["tcp_timeout"]),
                       ("memberlist_gossip", 1000.0), ("serf_coordinate_adjustment_ms", 10_000.0),
                       ("serf_msgs_received", 9 * 1024), ("serf_msgs_sent", 9 * 1024)):
        assert value(name + "_count") >= 1, name
        assert 0 <= value(name + "_sum") <= most * value(name + "_count"), name
        quantiles = [value(name, quantile=q) for q in ("0.5", "0.9", "0.99")]
        assert all(0 <= q <= most for q in quantiles) and quantiles == sorted(quantiles), (name, quantiles)
    # every name go-metrics would give, behind the prefix
    names = {n for (n, _labels) in samples}
    for key in (*COUNTERS, *GAUGES):
        assert p + key.replace(".", "_") in names, key
    for key in SUMMARIES:
        assert p + key.replace(".", "_").replace("-", "_") + "_count" in names, key
    assert not any(n.startswith(("memberlist_", "serf_")) for n in names) if prefix else True


def test_the_threaded_front_serves_memberlist_and_serf_names():
    pa, pb = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")
    with SerfService("a", "127.0.0.1", pa, seed=1, **FAST) as a, SerfService("b", "127.0.0.2", pb, seed=2, **FAST):
        heard = []
        a.add_listener(heard.append)
        assert a.join([("127.0.0.2", pb)]).joined == 1
        a.user_event("deploy", b"v1")
        query = a.query("whoami", b"x", request_ack=True, timeout=0.5)
        wait_until(lambda: any(isinstance(e, QueryFinished) and e.query_id == query.id for e in heard))
        wait_until(lambda: ready(a.stats()))
        with serve(a, 0, "127.0.0.1") as server:
            text = read(server.url)
    check(text, next(e for e in heard if isinstance(e, QueryFinished)))


def test_the_asyncio_front_serves_them_behind_consuls_prefix():
    async def main():
        pa, pb = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")
        with SerfService("b", "127.0.0.2", pb, seed=2, **FAST):
            async with AsyncSerfService("a", "127.0.0.1", pa, seed=1, **FAST) as a:
                heard = []
                a.add_listener(heard.append)
                assert (await a.join([("127.0.0.2", pb)])).joined == 1
                a.user_event("deploy", b"v1")
                query = a.query("whoami", b"x", request_ack=True, timeout=0.5)
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(None, wait_until, lambda: any(
                    isinstance(e, QueryFinished) and e.query_id == query.id for e in heard))
                await loop.run_in_executor(None, wait_until, lambda: ready(a.stats()))
                server = serve(a, 0, "127.0.0.1", prefix="consul")
                try:            # scraped from another thread: the node is read on the loop
                    text = await loop.run_in_executor(None, read, server.url)
                finally:
                    server.close()
                return text, next(e for e in heard if isinstance(e, QueryFinished))
    text, finished = asyncio.run(asyncio.wait_for(main(), 30))
    check(text, finished, prefix="consul")
    assert "# TYPE consul_memberlist_probeNode summary" in text
    assert "# TYPE consul_serf_member_join untyped" in text      # a counter without _total, as Go's sink names it
    assert 'mcastmember_gossip_members{node="a",status="alive"} 2.0' in text     # our own series, unprefixed


def test_a_prefix_that_is_no_prometheus_name_or_on_a_tribes_front_is_refused():
    from mcastmember import McastService

    with SerfService("a", "127.0.0.1", free_gossip_port()) as a:
        with pytest.raises(ValueError, match="'9x' is not a Prometheus name"):
            serve(a, 0, "127.0.0.1", prefix="9x")
    tribes = McastService("228.0.0.4", 45564, interface="127.0.0.1", ttl=0)
    with pytest.raises(TypeError, match="only a gossip front"):
        serve(tribes, 0, "127.0.0.1", prefix="consul")


@pytest.mark.skipif(not MEMBERLIST_SRC.is_dir(), reason="Debian's memberlist source is not installed "
                    "(apt-get install golang-github-hashicorp-memberlist-dev)")
def test_the_memberlist_names_are_those_memberlists_go_code_emits():
    source = "".join(p.read_text() for p in MEMBERLIST_SRC.glob("*.go") if not p.name.endswith("_test.go"))
    emitted = {".".join(re.findall(r'"([^"]+)"', parts)) for parts in re.findall(
        r'metrics\.(?:IncrCounter|SetGauge|AddSample|MeasureSince)\(\[\]string\{([^}]*)\}', source)}
    ours = {k for k in (*COUNTERS, *GAUGES, *SUMMARIES) if k.startswith("memberlist.")}
    assert ours == emitted


def test_samples_give_quantiles_of_the_last_ten_seconds_and_nan_without_any():
    s = Samples()
    assert all(math.isnan(v) for v in s.quantiles(0.0).values())
    for n in range(1, 101):
        s.add(float(n), 100.0)
    assert (s.count, s.total) == (100, 5050.0)
    assert s.quantiles(100.0) == {0.5: 50.0, 0.9: 90.0, 0.99: 99.0}
    assert all(math.isnan(v) for v in s.quantiles(100.0 + MAX_AGE_S + 0.1).values())
    for n in range(1000):          # the window keeps the latest values only
        s.add(1.0, 200.0)
    assert s.quantiles(200.0) == {0.5: 1.0, 0.9: 1.0, 0.99: 1.0} and s.count == 1100


def test_names_from_the_network_are_counted_by_name_up_to_a_bound():
    """A sender inventing an event name per message cannot grow the series
    without end: past MAX_NAMES names, the total alone counts them."""
    t = SerfTelemetry()
    for n in range(MAX_NAMES + 50):
        t.event("user", f"e{n}", 0.0)
        t.query(f"q{n}")
    t.event("user", "e0", 0.0)
    assert (t.counts["events"], t.counts["queries"]) == (MAX_NAMES + 51, MAX_NAMES + 50)
    assert (len(t.events.counts), t.events.untracked, t.events.counts["e0"]) == (MAX_NAMES, 50, 2)
    assert (len(t.queries.counts), t.queries.untracked) == (MAX_NAMES, 50)


def test_a_failed_member_back_within_a_minute_is_a_flap():
    t = SerfTelemetry()
    t.event("member-failed", "b", 10.0)
    t.event("member-join", "b", 30.0)            # back in 20 s: a flap
    t.event("member-failed", "b", 40.0)
    t.event("member-join", "b", 101.0)           # back after 61 s: not one
    assert {k: t.counts[k] for k in ("member.join", "member.failed", "member.flap")} \
        == {"member.join": 2, "member.failed": 2, "member.flap": 1}


def test_a_member_with_a_snapshot_file_times_its_writes_as_serf_does(tmp_path):
    """serf.snapshot.appendLine and serf.snapshot.compact, only with a snapshot file."""
    with SerfService("a", "127.0.0.1", free_gossip_port(), snapshot_path=str(tmp_path / "snap")) as a, \
            serve(a, 0, "127.0.0.1") as server:
        wait_until(lambda: a.read_node(lambda node: node.telemetry.snapshot["appendLine"].count) >= 1)
        samples = samples_of(read(server.url))
    assert samples[("serf_snapshot_appendLine_count", frozenset())] >= 1
    assert 0 <= samples[("serf_snapshot_appendLine", frozenset({("quantile", "0.5")}))] < 10_000
    assert samples[("serf_snapshot_compact_count", frozenset())] == 0
    with SerfService("b", "127.0.0.1", free_gossip_port()) as b, serve(b, 0, "127.0.0.1") as server:
        assert not any(name.startswith("serf_snapshot") for name, _ in samples_of(read(server.url).replace(
            'node="b"', 'node="a"')))


def test_acks_and_answers_again_from_the_same_node_are_counted_apart():
    """Serf's query_duplicate_acks and query_duplicate_responses (a relayed
    answer arrives twice)."""
    tracker = QueryTracker()
    tracker.open(messages.Query(ltime=5, id=9, timeout=2_000_000_000, flags=1), now=10)
    ack = messages.QueryResponse(ltime=5, id=9, from_="a", flags=1)
    answer = messages.QueryResponse(ltime=5, id=9, from_="a", payload=b"x")
    assert [tracker.handle(r, 11) for r in (ack, ack, ack, answer, answer)] == ["ack", None, None, "response", None]
    assert (tracker.duplicate_acks, tracker.duplicate_responses, tracker.duplicates) == (2, 1, 3)


def test_mcast_demo_gossip_serves_them_on_metrics_port():
    port, metrics = free_gossip_port(), free_tcp_port()
    demo = subprocess.Popen([*DEMO, "gossip", "--node", "a", "--bind",
                             f"127.0.0.1:{port}", "--metrics-port", str(metrics), "--metrics-prefix", "consul"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd="/")
    try:
        url = f"http://127.0.0.1:{metrics}/metrics"

        def scraped():
            try:
                return read(url)
            except (urllib.error.URLError, ConnectionError):
                return None
        text = wait_until(scraped)
        samples = samples_of(text)
        assert samples[("consul_serf_member_join", frozenset())] == 1
        assert samples[("consul_memberlist_msg_alive", frozenset())] == 1
        assert ("mcastmember_gossip_members", frozenset({("status", "alive")})) in samples
    finally:
        demo.send_signal(signal.SIGTERM)
        _out, err = demo.communicate(timeout=15)
    assert demo.returncode == 0, err
    assert f"metrics on http://127.0.0.1:{metrics}/metrics" in err


@pytest.mark.parametrize("flags, message", [
    (["--metrics-address", "127.0.0.1"], "--metrics-address needs --metrics-port"),
    (["--metrics-prefix", "consul"], "--metrics-prefix needs --metrics-port"),
    (["--metrics-port", "70000"], "--metrics-port 70000 is out of range (1-65535)"),
    (["--metrics-port", "9464", "--metrics-prefix", "9x"], "--metrics-prefix: '9x' is not a Prometheus name"),
])
def test_bad_metrics_flags_are_one_sentence_and_exit_2(flags, message):
    done = subprocess.run([*DEMO, "gossip", "--node", "a", *flags],
                          capture_output=True, text=True, timeout=30, cwd="/")
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr

"""Prometheus metrics of the gossip fronts (fronts.metrics.GossipCollector):
every stats() key exported once under its exact name, members by status,
bytes by transport and direction, bad input by reason, and a scrape of two
members on loopback."""

import asyncio
import pathlib
import re
import types
import urllib.request

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from mcastmember import AsyncSerfService, SerfService  # noqa: E402
from mcastmember.metrics import BAD_INPUT_REASONS, GossipCollector, serve  # noqa: E402
from support import free_gossip_port, wait_until  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def samples_of(collector):
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in collector.collect() for s in family.samples}


def fake(stats, name="py1"):
    return types.SimpleNamespace(stats=lambda: stats, node=types.SimpleNamespace(name=name), loop=None)


def test_every_stats_key_is_exported_once_and_listed_in_the_docs():
    """A counter added to a gossip front's stats() cannot be forgotten in
    /metrics: each key gets a value of its own, in exactly one sample ("bad_input"
    is the sum of the series by reason)."""
    keys = sorted(k for k in SerfService("a", "127.0.0.1", 7000).stats() if k != "bad_input")
    assert set(keys) == set(AsyncSerfService("a", "127.0.0.1", 7000).stats()) - {"bad_input"}
    stats = {key: 1000 + n for n, key in enumerate(keys)}
    stats["bad_input.some_new_reason"] = 5000
    samples = samples_of(GossipCollector(fake(stats)))
    values = sorted(v for v in samples.values() if v >= 1000)
    assert values == sorted(list(stats.values()))
    assert {labels for (_name, labels) in samples} >= {frozenset({("node", "py1")})}
    assert all(("node", "py1") in labels for (_name, labels) in samples)
    docs = (ROOT / "docs" / "metrics.md").read_text()
    names = {name.removesuffix("_total") for name, _labels in samples}
    assert {n for n in names if f"`{n}" not in docs} == set()


def test_exact_names_and_labels():
    stats = {"members.alive": 3, "members.leaving": 0, "members.left": 1, "members.failed": 2,
             "bytes_received.udp": 10, "bytes_sent.udp": 11, "bytes_received.tcp": 12, "bytes_sent.tcp": 13,
             "bad_input.bad_crc": 4, "probes": 7, "suspects": 8, "refutes": 9, "health_score": 1,
             "datagrams_dropped": 6}
    samples = samples_of(GossipCollector(fake(stats)))

    def value(name, **labels):
        return samples[(name, frozenset({"node": "py1", **labels}.items()))]

    assert [value("mcastmember_gossip_members", status=s) for s in ("alive", "leaving", "left", "failed")] \
        == [3, 0, 1, 2]
    assert [value("mcastmember_gossip_bytes_total", transport=t, direction=d)
            for t in ("udp", "tcp") for d in ("received", "sent")] == [10, 11, 12, 13]
    assert value("mcastmember_gossip_bad_input_total", reason="bad_crc") == 4
    assert value("mcastmember_gossip_bad_input_total", reason="too_large") == 0     # there from the start
    assert value("mcastmember_gossip_probes_total") == 7
    assert value("mcastmember_gossip_suspicions_total") == 8
    assert value("mcastmember_gossip_refutations_total") == 9
    assert value("mcastmember_gossip_health_score") == 1
    assert value("mcastmember_gossip_dropped_total", queue="datagrams") == 6
    assert value("mcastmember_gossip_dropped_total", queue="listeners") == 0


def test_the_fixed_bad_input_reasons_are_every_reason_the_gossip_code_gives():
    gossip = ROOT / "mcastmember" / "gossip"
    source = "".join(p.read_text() for p in [*gossip.rglob("*.py"), *gossip.rglob("*.pyx")])
    given = set(re.findall(r'(?:GossipWireError|_bad|_bad_input)\(\s*"([a-z_]+)"', source)) | {"truncated"}
    assert given <= set(BAD_INPUT_REASONS)


def test_a_scrape_of_an_async_member_with_a_threaded_peer():
    async def main():
        pa, pt = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")
        with SerfService("t", "127.0.0.2", pt, seed=2) as t:
            async with AsyncSerfService("a", "127.0.0.1", pa, seed=1) as a:
                assert (await a.join([("127.0.0.2", pt)])).joined == 1
                await a.wait_for(lambda ms: len(ms) == 2, 5)
                server = serve(a, 0, "127.0.0.1")
                try:                # scraped from another thread: stats() are read on the loop
                    text = await asyncio.get_running_loop().run_in_executor(None, read, server.url)
                finally:
                    server.close()
                return text, t
    text, t = asyncio.run(asyncio.wait_for(main(), 30))
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("mcastmember_gossip_members", frozenset({("node", "a"), ("status", "alive")}))] == 2
    assert samples[("mcastmember_gossip_connections_total",
                    frozenset({("node", "a"), ("outcome", "opened")}))] == 1
    assert samples[("mcastmember_gossip_bytes_total",
                    frozenset({("node", "a"), ("transport", "tcp"), ("direction", "received")}))] > 0
    assert ("mcastmember_gossip_metrics_server_connections_total",
            frozenset({("node", "a"), ("outcome", "served")})) in samples


def test_the_threaded_front_serves_its_metrics_too():
    with SerfService("t", "127.0.0.1", free_gossip_port(), seed=2) as t, serve(t, 0, "127.0.0.1") as server:
        wait_until(lambda: t.stats()["members.alive"] == 1)
        text = read(server.url)
    assert 'mcastmember_gossip_members{node="t",status="alive"} 1.0' in text


def read(url):
    with urllib.request.urlopen(url, timeout=5) as answer:
        return answer.read().decode()

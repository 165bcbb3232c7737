"""Micro benchmarks of the hot paths (pytest-benchmark), both implementations.

In the normal suite they run once each as ordinary tests (timing disabled in
pyproject.toml) and check their results. Timed runs:

    pytest tests/test_bench.py --benchmark-enable --benchmark-only
"""

import importlib
import importlib.util
import pathlib
import shutil
import sys
import tempfile

import pytest

from mcastmember.tribes.wire import layout as L
from mcastmember.tribes.engine.table import Membership

from support import V1, heartbeat

# The benchmarks' short rounds check the scripts run and report; each compares
# the implementations itself where it measures them: CI's compiled pass runs
# these (single_pass).
pytestmark = pytest.mark.single_pass


def test_bench_stamp_alive_time(benchmark, codec):
    packet = codec.HeartbeatPacket(heartbeat(codec), origin_ns=0)
    benchmark(packet.stamp_now)
    assert packet.alive_ms > 0


def test_bench_recognise_known_member(benchmark, codec):
    index = codec.MemberIndex(8)
    index.add(heartbeat(codec, alive=1), -1, 0.0, L.KIND_MEMBER)
    buf = bytearray(L.RECV_BUFFER_LEN)
    later = heartbeat(codec, alive=2)
    buf[:len(later)] = later
    assert benchmark(index.lookup, buf, len(later), 1.0) == L.KIND_MEMBER


def test_bench_table_receive_known_member(benchmark, codec):
    table = Membership(codec=codec)
    first = heartbeat(codec, alive=1)
    table.receive(first, len(first), 0.0)
    later = heartbeat(codec, alive=2)
    assert benchmark(table.receive, later, len(later), 1.0) == ()
    assert table.stats()["fast_path"] >= 1


def test_bench_validate(benchmark, codec):
    assert benchmark(codec.check, V1) == L.OK


def test_bench_parse(benchmark, codec):
    assert benchmark(codec.parse, V1)[6] == b"dom"


def test_bench_encode(benchmark, codec):
    fields = codec.parse(V1)
    assert benchmark(codec.encode, *fields) == V1


def _bench(name):
    """bench/<name>.py, imported; skipped without gcc (its C floor) or the
    compiled extension."""
    if shutil.which("gcc") is None or importlib.util.find_spec("mcastmember.tribes.kernel._fast") is None:
        pytest.skip("needs gcc and the compiled extension")
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "bench"))
    return importlib.import_module(name)


@pytest.mark.network
def test_drain_benchmark_runs_a_small_round():
    """bench/drain.py (library against a C recvmmsg drain, on loopback with
    TTL 0) builds its C program and measures both: one tiny round."""
    drain = _bench("drain")
    with tempfile.TemporaryDirectory() as workdir:
        result = drain.one_round(drain.build_drain(workdir), rate=1000, members=50,
                                 seconds=0.5, warmup=1.0)
    assert result["library"]["members"] == 50
    assert result["library"]["received"] > 0 and result["c"]["received"] > 0
    assert result["ratio"] > 0


@pytest.mark.network
def test_fan_out_benchmark_runs_a_small_round():
    """bench/heartbeat.py's unicast fan-out rows (on loopback, to sockets of
    its own) build their C floor and measure every variant: one tiny round,
    every datagram delivered; the compiled fan-out allocates nothing."""
    result = _bench("heartbeat").fan_out(sizes=(10, 300), rounds=1, batch=600, calls=3000)
    assert result["notes"] == []
    rows = {(r["impl"], r["peers"]): r for r in result["rows"]}
    for peers in (10, 300):
        assert {impl for impl, n in rows if n == peers} == {
            "compiled", "python", "naive sendto loop", "C sendmmsg floor"}
        assert rows["compiled", peers]["bytes"] == 0
    assert all(r["ns_per_peer"] > 0 for r in result["rows"])

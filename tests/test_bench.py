"""Micro benchmarks of the hot paths (pytest-benchmark), both implementations.

In the normal suite they run once each as ordinary tests (timing disabled in
pyproject.toml) and check their results. Timed runs:

    pytest tests/test_bench.py --benchmark-enable --benchmark-only
"""

from mcastmember import _layout as L
from mcastmember.table import Membership

from support import V1, heartbeat


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

"""Replays the fuzz regression corpus and runs a short fuzz in the normal suite
(the long run: python tests/fuzz/fuzz_receive.py --count 1000000, done by CI)."""

import pathlib

import pytest

from mcastmember.tribes.kernel import _fast_py
from mcastmember.tribes.wire.layout import SHUTDOWN_COMMAND
from mcastmember.tribes.wire.errors import MalformedPacket
from mcastmember.tribes.engine.table import Membership

import fuzz_receive

CORPUS = sorted((pathlib.Path(__file__).parent / "corpus").glob("*.hex"))


def test_corpus_is_there():
    assert len(CORPUS) >= 20


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_entry_gets_the_same_verdict_everywhere(codec, path):
    data = bytes.fromhex(path.read_text().strip())
    verdict = codec.check(data)
    assert verdict == _fast_py.check(data)
    try:
        fields = codec.parse(data)
    except MalformedPacket as error:
        assert error.code == verdict
        fields = None
    try:
        expected = _fast_py.parse(data)
    except MalformedPacket:
        expected = None
    assert fields == expected
    table = Membership(codec=codec)
    events = table.receive(data, len(data), 0.0)
    joins = verdict == 0 and fields[5] != SHUTDOWN_COMMAND
    assert len(events) == (1 if joins else 0)


def test_short_fuzz_run_is_clean():
    stats, growth = fuzz_receive.run(20000, seed=7, report=False)
    assert stats["received"] == 20000
    assert stats["members"] <= 64
    assert stats.get("refused", 0) > 0          # the bound was reached and held
    assert growth < 20000       # heap blocks: bounded, whatever arrives


def test_short_pump_fuzz_run_is_clean():
    """pump on loopback sockets, with clear() and socket swaps while a batch
    is pending: both implementations give the same events and counters."""
    stats = fuzz_receive.run_pump(3000, seed=11, report=False)
    assert stats["members"] <= 64
    assert stats["received"] > 0


@pytest.mark.parametrize("mode", ["permissive", "enforce"])
def test_short_keyed_fuzz_runs_are_clean(mode):
    """Trailers valid, replayed, wrongly keyed, forged, cut: the same verdicts,
    events and counters from both implementations, through receive and pump."""
    from mcastmember.tribes.wire import layout as L
    stats, growth = fuzz_receive.run(6000, seed=3, report=False, mode=L.AUTH_MODES[mode])
    assert stats["members"] <= 64 and growth < 20000
    assert stats["auth.bad_mac"] > 0 and stats["auth.replay"] > 0
    assert stats["auth.unknown_key"] > 0 and stats["auth.bad_trailer"] > 0
    assert fuzz_receive.run_pump(1500, seed=4, report=False, mode=L.AUTH_MODES[mode])["received"]
    fuzz_receive.run_packets(100, seed=6, report=False, keyed=True)


def test_short_heartbeat_packet_fuzz_run_is_clean():
    assert fuzz_receive.run_packets(400, seed=5, report=False) > 0   # some templates refused

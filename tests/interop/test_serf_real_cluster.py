"""bench/gossip_real.py in small: Python gossip members (compiled and pure,
each its own process) and a real ``serf agent`` on a LAN of network
namespaces the test creates. They all see each other, each row has the
fields the gossip benches share (CONTRACT), and graceful leaves are marked
``left`` by everyone. No CPU or time is asserted (a shared machine). The
cluster test skips without root, nftables or ``serf``."""

import pathlib
import shutil
import sys

import pytest

pytest.importorskip("msgpack")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from netlab import Lan  # noqa: E402


def _skip_reason():
    return Lan.available() or (None if shutil.which("serf") else "Serf is not installed (apt-get install serf)") \
        or (None if shutil.which("nft") else "nftables (nft) is not installed")


# It runs compiled and pure members itself: CI's pure pass would only repeat it.
pytestmark = pytest.mark.both_codecs
needs_a_lan = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")

CONTRACT = {"source", "protocol", "members", "node", "loss", "paused_fraction", "cpu_per_member_s",
            "bytes_per_member_s", "datagram_bytes_per_member_s", "detect_p99_s", "false_failed_per_member_hour"}


def test_over_six_rounds_each_kind_of_victim_takes_each_place_twice():
    """What a victim follows matters (an agent's restart leaves its join's
    gossip in the queues): the rounds go through the kinds' six orders, so
    no kind always takes the same place."""
    import gossip_real
    c, p, s = "python-compiled", "python-pure", "serf"
    orders = [(c, p, s), (c, s, p), (p, c, s), (p, s, c), (s, c, p), (s, p, c)]
    assert gossip_real.victim_order(7, kills=False, leaves=True) == \
        [("left", kind) for order in orders + orders[:1] for kind in order]
    assert gossip_real.victim_order(2, kills=True, leaves=True) == \
        [("failed", c), ("failed", p), ("failed", s), ("left", c), ("left", p), ("left", s),
         ("failed", c), ("failed", s), ("failed", p), ("left", c), ("left", s), ("left", p)]
    assert gossip_real.victim_order(1, kills=True, leaves=False) == [("failed", c), ("failed", p), ("failed", s)]
    assert gossip_real.victim_order(0, kills=True, leaves=True) == []


@needs_a_lan
def test_eight_python_members_and_an_agent_see_each_other_and_leave():
    import gossip_real
    details = {}
    # real_rows raises unless every member lists every other alive
    rows = gossip_real.real_rows(python=8, pure=4, agents=1, seconds=2.0, settle=0.0, kills=False, rounds=1,
                                 detect_timeout=10.0, quiet=False, details=details)
    assert [(r["source"], r["protocol"], r["members"], r["node"], r["count"], r["loss"], r["paused_fraction"])
            for r in rows] == [("real", "lifeguard", 9, "python-compiled", 4, 0.0, 0.0),
                               ("real", "lifeguard", 9, "python-pure", 4, 0.0, 0.0),
                               ("real", "lifeguard", 9, "serf", 1, 0.0, 0.0)]
    assert all(CONTRACT <= set(r) for r in rows)
    # pure members run no compiled code at all, compiled ones at least msgpack's
    assert (rows[1]["compiled"], "msgpack" in rows[0]["compiled"], rows[2]["compiled"]) == ([], True, None)
    assert [r["detect_p99_s"] for r in rows] == [None, None, None]          # no kills asked
    assert [r["false_failed_per_member_hour"] for r in rows] == [0.0, 0.0, 0.0]
    # every member sent datagrams in the window; the contract's total includes the datagrams
    assert all(m["datagrams_s"] > 0 for m in details["members"].values())
    assert all(r["bytes_per_member_s"] >= r["datagram_bytes_per_member_s"] > 0 for r in rows)
    # a compiled and a pure member left, then the agent: each marked left by the members still there,
    # but for those that had its dead message before its leave intent: those mark it failed (as Serf
    # 0.9.4 does) and left only after a push/pull, later than this test waits
    assert {(what, kind) for what, kind, _observer, _s in details["marks"]} == \
        {("left", "python-compiled"), ("left", "python-pure"), ("left", "serf")}
    # Gossip may also miss a member altogether (each message goes out a few
    # times to random members: about 1 delivery in 100 here, as between Serf's
    # own agents); the next push/pull repairs it, 30 s on, past this test's
    # wait. Allow one such miss per leave; seen once in ten runs.
    assert details["marks_missed"] <= len(details["leaves_marked_failed"]) + 3

"""bench/gossip_attacks.py still runs: its stream-slots attack at a tiny
scale against one Python member (threaded front) and one peer, on a LAN of
network namespaces the harness creates and removes. Skips without root or
iproute2 (the harness needs both)."""

import json
import pathlib
import subprocess
import sys

import pytest

import mcastmember
from netlab import Lan

pytest.importorskip("msgpack")

BENCH = pathlib.Path(__file__).resolve().parent.parent / "bench" / "gossip_attacks.py"

# The attack bench's short round checks the script runs and reports: CI's
# compiled pass runs it (single_pass).
pytestmark = [pytest.mark.skipif(Lan.available() is not None, reason=str(Lan.available())),
              pytest.mark.single_pass]


def test_stream_slots_attack_runs_and_reports(tmp_path):
    out = tmp_path / "attacks.json"
    done = subprocess.run([sys.executable, str(BENCH), "--tiny", "--kinds", "threads", "--attack", "stream_slots",
                           "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())["attacks"]["stream_slots"]["threads"]
    assert "error" not in figures, figures
    # 3 silent connections and 20 at once are all accepted by the kernel;
    # the 2 joins after each are far within any member's stream slots
    assert (figures["slowloris_connected"], figures["slowloris_joins_ok"]) == (3, 2)
    assert (figures["flood_connected"], figures["flood_joins_ok"]) == (20, 2)
    assert figures["slowloris_join_results"] == figures["flood_join_results"] == ["ok"]
    # the member ran the mcastmember these tests import (installed or built in place)
    assert pathlib.Path(figures["member_module"]).resolve() == pathlib.Path(mcastmember.__file__).resolve()
    assert ["stream_slots", "slowloris_joins_ok", "2"] in [line.split() for line in done.stdout.splitlines()]

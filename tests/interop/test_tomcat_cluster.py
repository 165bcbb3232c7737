"""Do no harm to a real Tomcat cluster, the short version.

Two real Tomcat 10.1 servers (Debian's packages) replicating sessions, in a
network namespace of their own (tests/interop/tomcat_cluster.py), once per
manager with channelSendOptions 6 (acks: the configuration where a member that
never answers costs most). Each is run without the Python member and with the
default `mcast-demo join ...` (which answers on its member port, as --tomcat
does: the same member), one after the other, and the run with us is compared
with the run without us. Then one Tomcat whose channel has no
TcpFailureDetector starts alone beside a default member (its TCP listener on).

Behaviour is asserted, not timings (the machine is shared): no replicated write
lost, no request stalled (over 1 s: only an ack or RPC timeout makes a local
session write or read take that long), a lone Tomcat starting within 3 s of the
start without us, no WARNING/SEVERE line the run without us lacks, and Tomcat
lists the Python member. bench/tomcat_cluster.py
measures the full matrix. Skipped when not root or Java/Tomcat are missing.
"""

import pytest

from interop import tomcat_cluster as tc

pytestmark = [pytest.mark.network, pytest.mark.end_to_end]

STACKS = [tc.Stack("delta", 6), tc.Stack("backup", 6)]
# Small, with tight bounds: a stalled cluster fails in seconds, not minutes.
SIZES = tc.Sizes(writes=15, concurrent=40, restart_sessions=3, warmup=3, phase_budget=8.0,
                 read_window=3.0, start_timeout=20.0, listed_timeout=8.0, settle=2.5,
                 request_timeout=4.0)
STALL_MS = 1000.0


@pytest.fixture(scope="module", params=STACKS, ids=lambda s: f"{s.manager}-{s.options}")
def runs(request, tmp_path_factory):
    reason = tc.unavailable()
    if reason:
        pytest.skip(reason)
    results = tc.measure(request.param, members=("none", *MODES), sizes=SIZES,
                         root=tmp_path_factory.mktemp(f"tomcat-{request.param.manager}"))
    by_mode = {r["member"]: r for r in results}
    base = by_mode["none"]
    assert not base.get("error"), f"the cluster without us does not work: {base['error']}"
    assert base["sequential"]["lost"] == 0 and base["concurrent"]["lost"] == 0, \
        "the cluster without us loses writes: the harness is wrong, not the library"
    return by_mode


# --tomcat only turns on the listener the default has (bench/tomcat_cluster.py
# still measures both).
MODES = ["default"]


def _run(runs, mode):
    run = runs[mode]
    assert not run.get("error"), run["error"]
    return run


@pytest.mark.parametrize("mode", MODES)
def test_no_replicated_write_lost(runs, mode):
    run = _run(runs, mode)
    seq, conc, restart = run["sequential"], run["concurrent"], run["restart"]
    assert (seq["done"], seq["failed"], seq["lost"]) == (seq["n"], 0, 0), seq["errors"]
    assert (conc["failed"], conc["lost"]) == (0, 0), conc
    assert restart["written"] == restart["found"] == restart["n"], restart


@pytest.mark.parametrize("mode", MODES)
def test_no_request_stalled(runs, mode):
    run = _run(runs, mode)
    figures = tc.figures(run)
    slow = {k: round(figures[k]) for k in ("write_max", "read_max", "concurrent_max")
            if figures[k] is not None and figures[k] > STALL_MS}
    assert not slow, f"requests over {STALL_MS:.0f} ms: {slow}"


@pytest.mark.parametrize("mode", MODES)
def test_lone_tomcat_starts_as_fast_as_without_us(runs, mode):
    base, run = runs["none"]["lone"], _run(runs, mode)["lone"]
    assert base["http_s"] is not None
    assert run["http_s"] is not None, \
        f"a Tomcat alone with the Python member did not answer within {SIZES.start_timeout} s"
    assert run["http_s"] <= base["http_s"] + 3.0, (run, base)


@pytest.mark.parametrize("mode", MODES)
def test_restarted_tomcat_serves_sessions_as_fast_as_without_us(runs, mode):
    base, run = runs["none"]["restart"], _run(runs, mode)["restart"]
    assert run["serve_s"] is not None, run
    assert run["serve_s"] <= base["serve_s"] + 3.0, (run, base)


# Tomcat's own reaction to a member that does not run a replicated map: a
# BackupManager starting alone with a listed Python member logs this once for
# map init and once for map start (docs/tomcat.md). The
# only way to avoid it would be to claim the map and become a backup holder.
MAP_TIMEOUTS = {"WARNING org.apache.catalina.tribes.tipis.AbstractReplicatedMap.broadcast "
                "broadcast received N replies, probably a timeout.": 2}
KNOWN = {("backup", "tomcat"): MAP_TIMEOUTS, ("backup", "default"): MAP_TIMEOUTS}


@pytest.mark.parametrize("mode", MODES)
def test_no_new_warning_or_severe_line(runs, mode):
    new = tc.new_log_lines(runs["none"], _run(runs, mode))
    known = KNOWN.get((runs["none"]["manager"], mode), {})
    unexplained = {line: n for line, n in new.items() if known.get(line) != n}
    assert not unexplained, "\n".join(f"{n} x {line}" for line, n in unexplained.items())


@pytest.mark.parametrize("mode", MODES)
def test_tomcat_lists_the_python_member(runs, mode):
    listed = _run(runs, mode)["listed_by"]
    assert "t1" in listed and "t2" in listed, \
        f"'Replication member added' for :{tc.MEMBER_PORT} logged only by {listed}"


NO_DETECTOR = tc.Stack("delta", 6, detector=False)


def test_a_lone_tomcat_without_failure_detector_gets_its_answer_from_a_default_member(
        tmp_path):
    """A channel without TcpFailureDetector lists every member it hears, and
    a starting DeltaManager asks the first one for its sessions: alone on the
    group with a default member (no --tomcat), a Tomcat asks us, and must get
    its answer, not wait out its state transfer timeout (60 s) with a
    "No session state" SEVERE and failed sends to our port. One server start."""
    reason = tc.unavailable()
    if reason:
        pytest.skip(reason)
    run = tc.lone_start(NO_DETECTOR, "default", tmp_path, timeout=SIZES.start_timeout)
    assert run["listed"] == [tc.MEMBER_PORT], run
    assert run["asked"] == [tc.MEMBER_PORT], run
    assert (run["received"], run["timed_out"]) == (True, False), run
    ours = f":{tc.MEMBER_PORT}"
    assert not [line for line in run["log_lines"] if ours in line or "session state" in line], \
        run["log_lines"]
    assert run["http_s"] is not None, run

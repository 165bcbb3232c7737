#!/usr/bin/env python3
"""What a Python member does to a real Tomcat 10.1 cluster, side by side.

    sudo python bench/tomcat_cluster.py [--json out.json] [--quick]
    python bench/tomcat_cluster.py --table-from out.json

For DeltaManager and BackupManager with channelSendOptions 8 and 6, and a
DeltaManager stack without TcpFailureDetector, two real Tomcat servers (Debian's
libtomcat10-java + tomcat10-common) replicate sessions with no Python member,
with `mcast-demo join ... --tomcat` and with the default, in a network
namespace (tests/interop/tomcat_cluster.py). One table: writes replicated
(sequential and 40 concurrent), write and read latency, a restarted Tomcat's
time to serve its sessions, a lone Tomcat's startup with only the Python member
on the group, WARNING/SEVERE lines; then, per row, the targets against the run
without us: latency within 1.5x + 3 ms, startups within 3 s, no replicated
write lost, no log line the run without us lacks, listed by Tomcat as
documented. --quick: DeltaManager and BackupManager with options 6 only, fewer
writes. Needs root (network namespaces); timings are noisy on shared machines:
compare rows within one run.
"""

import argparse
import json
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "interop"))

import tomcat_cluster as tc  # noqa: E402  (tests/interop/tomcat_cluster.py)

FULL = [tc.Stack("delta", 8), tc.Stack("delta", 6), tc.Stack("backup", 8),
        tc.Stack("backup", 6), tc.Stack("delta", 8, detector=False)]
QUICK = [tc.Stack("delta", 6), tc.Stack("backup", 6)]
# A lone Tomcat waits 60 s for session state from a member that never sends
# it: 75 s shows that figure instead of a timeout.
FULL_SIZES = tc.Sizes(writes=50, concurrent=40, restart_sessions=10, warmup=5,
                      phase_budget=20.0, start_timeout=75.0, request_timeout=15.0)
QUICK_SIZES = tc.Sizes(writes=20, concurrent=40, restart_sessions=5, warmup=3,
                       phase_budget=10.0, start_timeout=75.0, request_timeout=15.0)


def _ms(value):
    return "-" if value is None else (f"{value:,.0f}" if value >= 100 else f"{value:.1f}")


def _s(value):
    return "timeout" if value is None else f"{value:.1f}"


def row(run, failures):
    if run.get("error"):
        return [run["stack"], run["member"], "-", run["error"], "", "", "", "", "", "", "FAIL"]
    f = tc.figures(run)
    seq, conc, restart, lone = run["sequential"], run["concurrent"], run["restart"], run["lone"]
    seq_ok = seq["done"] - seq["failed"] - seq["lost"]
    lines = run["log_lines"]
    warn = sum(n for line, n in lines.items() if line.startswith("WARNING"))
    severe = sum(n for line, n in lines.items() if line.startswith("SEVERE"))
    listed = "yes" if run.get("listed_by") else "no"
    startup = (f"{_ms(lone['startup_ms'])} ms / {_s(lone['http_s'])} s"
               if lone["startup_ms"] is not None else f"timeout ({_s(lone['http_s'])})")
    return [run["stack"], run["member"], listed,
            f"{seq_ok}/{seq['n']}" + ("*" if seq["truncated"] else "")
            + f", {conc['found']}/{conc['n']}",
            f"{_ms(f['write_median'])} / {_ms(f['write_p99'])}",
            _ms(f["read_median"]),
            f"{_s(restart['serve_s'])} ({restart['found']}/{restart['n']})",
            startup, f"{warn} / {severe}",
            str(len(tc.new_log_lines(run["__base__"], run))) if run["member"] != "none" else "-",
            "-" if run["member"] == "none" else ("met" if not failures else f"FAIL ({len(failures)})")]


HEADER = ["stack", "Python member", "listed", "writes found (seq, 40 conc.)",
          "write ms median / p99", "read ms median", "restarted t2 serves, s",
          "lone Tomcat startup (log / HTTP)", "WARNING / SEVERE", "new lines", "targets"]


def table(results):
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    notes = []
    for runs in results:
        base = next(r for r in runs if r["member"] == "none")
        for run in runs:
            run["__base__"] = base
            failures = [] if run["member"] == "none" else tc.verdict(base, run)
            out.append("| " + " | ".join(row(run, failures)) + " |")
            for failure in failures:
                notes.append(f"- {run['stack']}, {run['member']}: {failure}")
            del run["__base__"]
    return "\n".join(out), notes


def report(results):
    text, notes = table(results)
    print(text)
    print()
    print("* stopped early: the phase ran out of its time budget (stalled requests).")
    print("Targets against the run without us on the same stack: " +
          ("all met." if not notes else f"{len(notes)} miss(es):"))
    print("\n".join(notes))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="write the raw figures as JSON")
    parser.add_argument("--quick", action="store_true",
                        help="DeltaManager and BackupManager with options 6 only, fewer writes")
    parser.add_argument("--table-from", metavar="PATH",
                        help="print the table of an earlier --json file, measure nothing")
    args = parser.parse_args(argv)
    if args.table_from:
        runs = json.loads(pathlib.Path(args.table_from).read_text())["runs"]
        by_stack = {}
        for run in runs:
            by_stack.setdefault(run["stack"], []).append(run)
        report(list(by_stack.values()))
        return 0
    reason = tc.unavailable()
    if reason:
        print(f"tomcat_cluster: {reason}", file=sys.stderr)
        return 2
    stacks, sizes = (QUICK, QUICK_SIZES) if args.quick else (FULL, FULL_SIZES)
    started = time.monotonic()
    results = []
    for stack in stacks:
        results.append(tc.measure(stack, sizes=sizes,
                                  progress=lambda m: print(f"[{time.monotonic() - started:5.0f} s] {m}",
                                                           file=sys.stderr, flush=True)))
    report(results)
    print(f"\n{time.monotonic() - started:.0f} s in all")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            {"sizes": sizes.__dict__, "seconds": time.monotonic() - started,
             "runs": [r for runs in results for r in runs]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

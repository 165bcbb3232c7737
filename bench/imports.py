"""What importing each entry point of the package costs, in a fresh interpreter.

    python bench/imports.py [--runs 30] [--json out.json] [--compare OTHER_PYTHON]

Rows, each the median (and fastest) of --runs fresh interpreters, timed by
the interpreter itself (``time.perf_counter`` around the import statement,
so the interpreter's own start-up is left out):

- ``import mcastmember``: the lazy package (it must stay almost free);
- ``from mcastmember import McastService``: the Tribes threaded service;
- ``from mcastmember import AsyncMcastService``: the Tribes asyncio service;
- ``from mcastmember import SerfService``: the gossip threaded service (the
  ``gossip`` extra: msgpack, cryptography, google-re2);
- ``from mcastmember import AsyncSerfService``: the gossip asyncio service.

Beside each: how many modules of the package, and how many in all, the
import left loaded (what ``sys.modules`` gained). --compare runs the same
rows with another install's python (another virtual environment, e.g. one
with the code before a change), interleaved with this one's, so both see the
same noise. The figures are reported, never asserted (machines are noisy).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

STATEMENTS = {
    "import mcastmember": "import mcastmember",
    "McastService": "from mcastmember import McastService",
    "AsyncMcastService": "from mcastmember import AsyncMembership",
    "SerfService": "from mcastmember import SerfService",
    "AsyncSerfService": "from mcastmember import AsyncSerfService",
}

# Run in the child: the import timed, then what it loaded.
PROBE = (
    "import sys, time, json\n"
    "before = set(sys.modules)\n"
    "started = time.perf_counter()\n"
    "{statement}\n"
    "took = time.perf_counter() - started\n"
    "gained = set(sys.modules) - before\n"
    "print(json.dumps([took, len([m for m in gained if m.startswith('mcastmember')]), len(gained)]))\n"
)


def one(python: str, statement: str) -> tuple[float, int, int]:
    # From the root folder: the installed package, never a source checkout.
    done = subprocess.run([python, "-c", PROBE.format(statement=statement)], capture_output=True,
                          text=True, check=True, cwd="/")
    took, package, total = json.loads(done.stdout)
    return float(took), int(package), int(total)


def measure(runs: int, compare: str | None) -> dict[str, dict[str, float | int]]:
    pythons = {"": sys.executable}
    if compare:
        pythons[" (--compare)"] = compare
    samples: dict[str, list[tuple[float, int, int]]] = {}
    for _ in range(runs):     # interleaved, so a busy moment costs every row alike
        for row, statement in STATEMENTS.items():
            for suffix, python in pythons.items():
                samples.setdefault(row + suffix, []).append(one(python, statement))
    out: dict[str, dict[str, float | int]] = {}
    for row, taken in samples.items():
        times = [t for t, _p, _a in taken]
        out[row] = {"median_ms": round(statistics.median(times) * 1000, 2),
                    "fastest_ms": round(min(times) * 1000, 2),
                    "package_modules": taken[-1][1], "modules": taken[-1][2]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", help="write the rows to this file too")
    parser.add_argument("--compare", metavar="PYTHON", help="another install's python, interleaved")
    args = parser.parse_args()
    rows = measure(args.runs, args.compare)
    width = max(len(row) for row in rows)
    print(f"{'':{width}}  median ms  fastest ms  package modules  modules")
    for row, figures in rows.items():
        print(f"{row:{width}}  {figures['median_ms']:9}  {figures['fastest_ms']:10}  "
              f"{figures['package_modules']:15}  {figures['modules']:7}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"runs": args.runs, "rows": rows}, out, indent=1)


if __name__ == "__main__":
    main()

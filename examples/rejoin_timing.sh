#!/usr/bin/env bash
# How long a member killed (SIGKILL) and started again with its snapshot and
# no join takes to be listed alive again by the seed it knew: a Python
# member (py) or Debian's serf agent (go), each restarted with -snapshot and
# -rejoin after the seed has marked it failed. The seed's --json output says
# when the member came back; the time counts from the restart command (the
# interpreter's start included). Loopback only.
#
#   bash examples/rejoin_timing.sh py      # or: go (needs Debian's serf)
#
# AGENT_LOG=FILE keeps the agent's log (its "Failed to re-join" line says
# when its snapshot named nobody to rejoin).
set -euo pipefail
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait; rm -rf "$out"' EXIT
member() {
  if [ "$1" = go ]; then
    serf agent -node member -bind 127.0.0.2:17946 -rpc-addr 127.0.0.1:17373 \
      -snapshot "$out/member.snap" -rejoin ${2:+-join "$2"} >>"${AGENT_LOG:-/dev/null}" 2>&1 &
  else
    mcast-demo gossip --bind 127.0.0.2:17946 --node member --snapshot "$out/member.snap" --rejoin \
      ${2:+--join "$2"} >/dev/null 2>&1 &
  fi
}
seen() {   # the seed's last event about the member is "$1" (added, or removed for a failure)
  python3 - "$out/seed.jsonl" "$1" <<'PY'
import json, sys
last = None
for line in open(sys.argv[1]):
    event = json.loads(line)
    if event.get("member", {}).get("name") == "member":
        last = event["event"]
sys.exit(0 if last == sys.argv[2] else 1)
PY
}
mcast-demo gossip --bind 127.0.0.1:17946 --node seed --json > "$out/seed.jsonl" 2>/dev/null &
sleep 1
member "${1:-py}" 127.0.0.1:17946
until seen added; do sleep 0.1; done
sleep 2                                  # a few clock and member lines in the snapshot
kill -KILL $!
until seen removed; do sleep 0.1; done   # the seed marked it failed
start=$(date +%s.%N)
member "${1:-py}"
until seen added; do sleep 0.05; done
python3 -c "import sys, time; print(f'listed alive again {time.time() - float(sys.argv[1]):.2f} s after the restart')" "$start"

#!/usr/bin/env bash
# How long after its seed comes up a member started with --retry-join joins
# it: a Python member (py) or Debian's serf agent (go) retry-joins, every 1 s,
# a seed that starts 3 s after it. The seed's --json output says when it was
# up (its own "added") and when the other joined it. Loopback only.
#
#   bash examples/retry_join_timing.sh py      # or: go (needs Debian's serf)
set -euo pipefail
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [ "${1:-py}" = go ]; then
  serf agent -node member -bind 127.0.0.2:17946 -rpc-addr 127.0.0.1:17373 \
    -retry-join 127.0.0.1:17946 -retry-interval 1s >/dev/null 2>&1 &
else
  mcast-demo gossip --bind 127.0.0.2:17946 --node member --retry-join 127.0.0.1:17946 \
    --retry-interval 1s --duration 9 >/dev/null 2>&1 &
fi
member=$!
sleep 3
mcast-demo gossip --bind 127.0.0.1:17946 --node seed --duration 4 --json > "$out/seed.jsonl"
kill "$member" 2>/dev/null || true
wait
python3 - "$out/seed.jsonl" <<'PY'
import datetime, json, sys
added = {}
for line in open(sys.argv[1]):
    event = json.loads(line)
    if event.get("event") == "added":
        when = datetime.datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()
        added.setdefault(event["member"]["name"], when)
print(f"joined {added['member'] - added['seed']:.2f} s after the seed was up" if "member" in added
      else "not joined")
PY

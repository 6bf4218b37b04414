#!/usr/bin/env bash
# A DC cut off from the others for a long outage under a steady write load: the other DCs' resident memory and
# disk, their replication backlog toward the cut DC, and the catch-up after the heal.
#
#   bench/outage.sh [cut_minutes] [rate] [dir]      defaults: 10 minutes, 1000 transactions/s, /tmp/causet-outage
#
# 3 DCs of one node each, 8 partitions, 50 ms one way, fsync periodic. `causet bench` drives every DC with
# single-update transactions (open loop, `rate` per second over all sessions) for the whole run; after one
# minute every link to and from DC 2 is cut through the admin API, and healed `cut_minutes` later. Every 30 s
# (every 5 s after the heal) it prints, per DC: resident memory (MB), data directory size (MB), and the local
# transactions that some peer DC has not acknowledged (`replication_backlog`, summed over partitions, with
# `spilled` once they no longer fit the in-memory window). After the heal it waits until DC 0's and DC 1's
# backlogs are empty and reports the catch-up rate; then, once the load has stopped, that every DC holds the same
# objects. Output: a table on stdout, also written to DIR/outage.md. Not part of the test suite (it takes
# cut_minutes + 3 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
cut_min=${1:-10}
rate=${2:-1000}
dir=${3:-/tmp/causet-outage}
cargo build --release -q -p causet
bin=$PWD/target/release/causet
rm -rf "$dir"
mkdir -p "$dir"
$bin cluster start --dcs 3 --partitions 8 --sync periodic --base-port 0 --dir "$dir/cluster" >"$dir/start.log" 2>&1
trap '$bin cluster stop --dir "$dir/cluster" >/dev/null 2>&1 || true; kill $(jobs -p) 2>/dev/null || true' EXIT
cfg() { grep "^$2 " "$dir/cluster/dc$1.toml" | cut -d'"' -f2; }
admin=("$(cfg 0 admin_bind)" "$(cfg 1 admin_bind)" "$(cfg 2 admin_bind)")
token=$(cfg 0 admin_token)
post() { curl -sf -X POST -H "Authorization: Bearer $token" "http://$1$2" >/dev/null; }
status() { curl -sf "http://${admin[$1]}/status"; }
backlog() {
  status "$1" | python3 -c '
import json, sys
s = json.load(sys.stdin)
ps = [p for sh in s["shard_status"] for p in sh["partitions"]]
print(sum(p["replication_backlog"] for p in ps), "spilled" if any(p["replication_spilled"] for p in ps) else "-",
      sum(p["objects"] for p in ps))'
}
rss_mb() { echo $(( $(ps -o rss= -p "$(pgrep -f "$dir/cluster/dc$1.toml" | head -1)") / 1024 )); }
disk_mb() { echo $(( $(du -sk "$dir/cluster/dc$1" | cut -f1) / 1024 )); }
start=$(date +%s)
row() {
  local line="| $1 | $(( $(date +%s) - start )) s"
  for d in 0 1 2; do
    read -r b s _ < <(backlog "$d")
    line="$line | $(rss_mb "$d") MB, $(disk_mb "$d") MB, $b $s"
  done
  echo "$line |" | tee -a "$dir/outage.md"
}
total=$(( (cut_min + 3) * 60 ))
$bin bench --workload cure --update-ratio 0.99 --rate "$rate" --duration-s "$total" --warmup-s 0 \
  --cluster-dir "$dir/cluster" --out "$dir/bench" >"$dir/bench.log" 2>&1 &
bench=$!
{
  echo "Outage of DC 2 for $cut_min min under $rate txn/s (99% updates); per DC: RSS, data directory, backlog"
  echo
  echo "| phase | time | DC 0 | DC 1 | DC 2 |"
  echo "|---|---:|---|---|---|"
} | tee "$dir/outage.md"
sleep 30; row before; sleep 30; row before
for d in 0 1; do post "${admin[$d]}" /admin/links/2/cut; done
for d in 0 1; do post "${admin[2]}" "/admin/links/$d/cut"; done
cut_at=$(date +%s)
while [ $(( $(date +%s) - cut_at )) -lt $(( cut_min * 60 )) ]; do sleep 30; row cut; done
read -r at_heal _ < <(backlog 0)
for d in 0 1; do post "${admin[$d]}" /admin/links/2/heal; done
for d in 0 1; do post "${admin[2]}" "/admin/links/$d/heal"; done
healed=$(date +%s.%N)
row healed
while true; do
  sleep 5
  read -r b0 _ < <(backlog 0); read -r b1 _ < <(backlog 1)
  row catch-up
  if [ "$b0" -lt 100 ] && [ "$b1" -lt 100 ]; then break; fi
  if [ $(( $(date +%s) - ${healed%.*} )) -gt 600 ]; then echo "no catch-up within 10 minutes" >&2; exit 1; fi
done
took=$(echo "$(date +%s.%N) - $healed" | bc)
echo | tee -a "$dir/outage.md"
echo "DC 0's backlog at the heal: $at_heal transactions; drained (below 100) in ${took} s: $(echo "$at_heal / $took" | bc) txn/s against a write rate of about $(( rate / 3 )) txn/s per DC." | tee -a "$dir/outage.md"
wait "$bench" || true
sleep 5
objects=$(for d in 0 1 2; do read -r _ _ o < <(backlog "$d"); echo -n "$o "; done)
echo "Objects per DC after the load stopped: $objects(a coarse check: every DC holds every object written anywhere)." | tee -a "$dir/outage.md"
python3 -c "
import json; x = json.load(open('$dir/bench/report.json'))['runs'][0]
print('Load: %d committed, %d errors, %d aborted.' % (x['committed'], x['errors'], x['aborted']))" | tee -a "$dir/outage.md"

#!/usr/bin/env bash
# Memory probe, with or without an outage: 3 DCs of one node each, 8 partitions, fsync periodic, `causet bench`
# at RATE transactions/s (99% updates, open loop) for TOTAL_S seconds; DC 2 is cut from the others at 30 s for
# CUT_S seconds (0: no outage). Every 15 s one line per sample: each DC's resident memory and, from /status, its
# unfolded versions, objects, outgoing replication backlog, held inbound transactions, prepared transactions and
# open transactions. Used for bench/RESULTS-outage.md ("the memory growth is not the outage's").
#
#   bench/memprobe.sh CUT_S TOTAL_S RATE       e.g. bench/memprobe.sh 0 1500 1000
#
# Environment: DIR (default /tmp/causet-memprobe), BIN (default: build and use target/release/causet).
# Not part of the test suite.
set -u
cd "$(dirname "$0")/.."
if [ -z "${BIN:-}" ]; then cargo build --release -q -p causet; BIN=$PWD/target/release/causet; fi
CUT=$1; TOTAL=$2; RATE=$3
bin=$BIN
dir=${DIR:-/tmp/causet-memprobe}; rm -rf $dir; mkdir -p $dir
$bin cluster start --dcs 3 --partitions 8 --sync periodic --base-port 0 --dir $dir/cluster >$dir/start.log 2>&1 || { echo start failed; exit 1; }
trap "$bin cluster stop --dir $dir/cluster >/dev/null 2>&1" EXIT
cfg() { grep "^$2 " "$dir/cluster/dc$1.toml" | cut -d'"' -f2; }
admin=("$(cfg 0 admin_bind)" "$(cfg 1 admin_bind)" "$(cfg 2 admin_bind)")
token=$(cfg 0 admin_token)
post() { curl -sf -X POST -H "Authorization: Bearer $token" "http://$1$2" >/dev/null; }
$bin bench --workload cure --update-ratio 0.99 --rate $RATE --duration-s $TOTAL --warmup-s 0 --cluster-dir $dir/cluster --out $dir/bench >$dir/bench.log 2>&1 &
start=$(date +%s); cut=0
while [ $(( $(date +%s) - start )) -lt $TOTAL ]; do
  t=$(( $(date +%s) - start ))
  if [ $cut = 0 ] && [ $t -ge 30 ]; then for d in 0 1; do post ${admin[$d]} /admin/links/2/cut; post ${admin[2]} /admin/links/$d/cut; done; cut=1; echo "--- cut at $t s"; fi
  if [ $cut = 1 ] && [ $t -ge $((30+CUT)) ]; then for d in 0 1; do post ${admin[$d]} /admin/links/2/heal; post ${admin[2]} /admin/links/$d/heal; done; cut=2; echo "--- healed at $t s"; fi
  line="t=$t"
  for d in 0 1 2; do
    pid=$(pgrep -f "$dir/cluster/dc$d.toml" | head -1)
    rss=$(( $(ps -o rss= -p $pid) / 1024 ))
    s=$(curl -sf http://${admin[$d]}/status | python3 -c '
import json,sys
s=json.load(sys.stdin); ps=[p for sh in s["shard_status"] for p in sh["partitions"]]
inb=sum(n for p in ps for _,n in p["inbound_backlog"])
print("ver=%d obj=%d back=%d inb=%d prep=%d wait=%d open=%d" % (sum(p["versions"] for p in ps), sum(p["objects"] for p in ps), sum(p["replication_backlog"] for p in ps), inb, sum(p["prepared"] for p in ps), sum(p["waiting"] for p in ps), s["open_transactions"]))')
    line="$line | dc$d rss=${rss}M $s"
  done
  echo "$line"
  sleep 15
done

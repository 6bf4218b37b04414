#!/usr/bin/env bash
# What one CQL statement of each kind costs Cassandra in CPU (crates/middleware/examples/cql_cost.rs): starts two
# Cassandra nodes as bench/letting-it-be.sh does (one per DC, a 50 ms WAN between them), preloads 100,000 keys into
# each table, warms the JVMs up with every case, then measures each case in turn (the nodes flushed and compactions
# finished before each), --repeat times, and stops the nodes.
#
#   bench/cql-cost.sh [--cases a,b,...] [--seconds 20] [--warmup-s 5] [--jvm-warmup-s 10] [--repeat 2]
#                     [--in-flight 32] [--out DIR]
#
# Prints, per repetition, a table of statements/s, CPU µs per statement and per partition (both nodes' processes);
# the tables are also in DIR/cost.md. Needs Java 17 and Maven (scripts/cassandra).
set -euo pipefail
cd "$(dirname "$0")/.."

CASES="plain-read,plain-write,plain-write-ts,records-write,records1-write,records-read-in,records-read-one,records1-read-in,records-read-many"
SECONDS_PER_CASE=20
WARMUP=5
JVM_WARMUP=10
REPEAT=2
IN_FLIGHT=32
OUT="bench-results/cql-cost-$(date +%s)"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cases) CASES="$2"; shift 2 ;;
    --seconds) SECONDS_PER_CASE="$2"; shift 2 ;;
    --warmup-s) WARMUP="$2"; shift 2 ;;
    --jvm-warmup-s) JVM_WARMUP="$2"; shift 2 ;;
    --repeat) REPEAT="$2"; shift 2 ;;
    --in-flight) IN_FLIGHT="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
CASS_DIR="$OUT/cassandra"
CQL_PORT=29042
log() { echo "[cql-cost] $*" >&2; }
stop() { scripts/cassandra stop --dir "$CASS_DIR" >/dev/null 2>&1 || true; }
trap stop EXIT

cargo build --release -q -p causet-middleware --example cql_cost
COST="${CARGO_TARGET_DIR:-target}/release/examples/cql_cost"

log "starting two Cassandra nodes (dc1, dc2) with a 50 ms WAN between them"
scripts/cassandra start --dir "$CASS_DIR" --nodes 2 --fresh --wan-delay-ms 50 --port "$CQL_PORT" \
  --storage-port 27000 --jmx-port 27199 >"$OUT/cassandra.log" 2>&1
PIDS="$(cat "$CASS_DIR/node1/pid") $(cat "$CASS_DIR/node2/pid")"
run() { "$COST" --node "127.0.0.1:$CQL_PORT" --pids "$PIDS" --in-flight "$IN_FLIGHT" "$@"; }

log "schema and preload"
run --case schema,preload >/dev/null
log "warming the JVMs up: every case for $JVM_WARMUP s (not recorded)"
run --case "$CASES" --seconds "$JVM_WARMUP" --warmup-s 0 >/dev/null
IFS=, read -ra cases <<<"$CASES"
: >"$OUT/cost.md"
for rep in $(seq 1 "$REPEAT"); do
  # Odd repetitions in the order given, even ones reversed.
  order=("${cases[@]}")
  if (( rep % 2 == 0 )); then
    order=(); for (( i=${#cases[@]}-1; i>=0; i-- )); do order+=("${cases[i]}"); done
  fi
  log "repetition $rep: ${order[*]}"
  echo -e "\n### Repetition $rep\n" >>"$OUT/cost.md"
  header=1
  for c in "${order[@]}"; do
    scripts/cassandra quiesce --dir "$CASS_DIR" >>"$OUT/cassandra.log" 2>&1
    run --case "$c" --seconds "$SECONDS_PER_CASE" --warmup-s "$WARMUP" | { if (( header )); then cat; else tail -n +3; fi; } >>"$OUT/cost.md"
    header=0
  done
done
cat "$OUT/cost.md"

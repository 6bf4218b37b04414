#!/usr/bin/env bash
# Throughput of cure against the eventual baseline (and GentleRain) on the same 3-DC cluster shape: a local cluster
# of 3 DCs (one process each), 50 ms one-way between DCs, a fresh cluster per protocol; one load generator per DC
# (each a closed loop of N sessions on its own DC) running the Cure paper's mix of single-operation transactions on
# LWW registers at the given update ratio. Prints each DC's figures and the sum.
# Usage: bench/geo-compare.sh [update_ratio] [duration_s] [warmup_s] [connections_per_dc] [protocols]
set -euo pipefail
cd "$(dirname "$0")/.."
ratio=${1:-0.1}
duration=${2:-20}
warmup=${3:-5}
conns=${4:-16}
protocols=${5:-cure eventual gentlerain}
cargo build --release -q -p causet
bin=target/release/causet
base=$((30000 + RANDOM % 20000))
echo "# machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# 3 DCs, 50 ms one-way, 8 partitions per DC, update ratio $ratio, $conns sessions per DC, ${duration}s after ${warmup}s warm-up"
for protocol in $protocols; do
  dir=$(mktemp -d)
  $bin cluster start --dcs 3 --wan-delay-ms 50 --dir "$dir" --base-port $base --protocol "$protocol" > /dev/null
  pids=()
  for dc in 0 1 2; do
    $bin bench --addr 127.0.0.1:$((base + 10 * dc)) --operation register-mix --update-ratio "$ratio" \
      --connections "$conns" --duration-s "$duration" --warmup-s "$warmup" --keys 10000 --seed $((dc + 1)) \
      --json "$dir/bench$dc.json" > "$dir/bench$dc.txt" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  total=$(python3 -c "import json,sys; print(round(sum(json.load(open(f))['throughput_per_s'] for f in sys.argv[1:])))" "$dir"/bench*.json)
  for dc in 0 1 2; do echo "$protocol DC $dc: $(cat "$dir/bench$dc.txt")"; done
  echo "$protocol total: $total txn/s"
  $bin cluster stop --dir "$dir" > /dev/null
  rm -rf "$dir"
done

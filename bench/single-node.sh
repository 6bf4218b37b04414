#!/usr/bin/env bash
# Single-node throughput and latency over the client protocol (issue 3's benchmark):
# 64 concurrent connections on loopback, static single-key transactions: register_lww reads, register_lww updates,
# counter updates; both sync modes; a fresh server and data directory per run; reads run on keys written first.
# Usage: bench/single-node.sh [duration_s] [warmup_s]   (builds the release binary first)
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-20}
warmup=${2:-5}
cargo build --release -q -p causet
bin=target/release/causet
port=$((30000 + RANDOM % 20000))
admin=$((port + 1))
echo "# machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -sr)"
echo "# $(date -u +%Y-%m-%dT%H:%MZ), ${duration}s measured after ${warmup}s warm-up, 64 connections, 10,000 keys"
for sync in always periodic; do
  for op in register-read register-update counter-update; do
    dir=$(mktemp -d)
    $bin start --data-dir "$dir" --client-bind 127.0.0.1:$port --admin-bind 127.0.0.1:$admin --sync $sync --log warn &
    pid=$!
    for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
    if [ "$op" = register-read ]; then
      $bin bench --addr 127.0.0.1:$port --operation register-update --duration-s 3 --warmup-s 0 --keys 10000 > /dev/null
    fi
    printf "sync=%-8s " $sync
    $bin bench --addr 127.0.0.1:$port --operation $op --duration-s "$duration" --warmup-s "$warmup" --keys 10000
    kill -TERM $pid; wait $pid || true
    rm -rf "$dir"
  done
done

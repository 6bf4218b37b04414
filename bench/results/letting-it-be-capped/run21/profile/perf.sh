#!/usr/bin/env bash
# Run 21: where Cassandra's CPU goes on warm JVMs, Cassandra alone against the middleware, at the write-heavy mix,
# seen from the kernel (perf) rather than from JFR (run 19), so that garbage collection, the JIT compilers and the
# kernel are counted too. Runs bench/letting-it-be.sh (one repetition, 50% updates only, each DC capped, the default
# 120 s JVM warm-up) and records `perf record -a -F 99` (every CPU, no call graphs: recording the nodes' threads
# with -p slowed them 3x, and the middleware's fixed-rate background statements then weighed 7x their share) over
# each target's `causet bench`, with the two nodes' pids in <run>.pids; perf-split.py then keeps the nodes' samples
# of the measured window and splits them by thread name and by where the code lives (kernel, libjvm, JIT-compiled
# Java, other libraries).
#   bench/results/letting-it-be-capped/run21/profile/perf.sh OUT [targets, default
#   cassandra,lib-cassandra,lib-cassandra-uncached: the last target only keeps the nodes up while the one before
#   it is recorded to the end]
set -euo pipefail
cd "$(dirname "$0")/../../../../.."
OUT="$1"; TARGETS="${2:-cassandra,lib-cassandra,lib-cassandra-uncached}"
mkdir -p "$OUT"; OUT="$(cd "$OUT" && pwd)"
bench/letting-it-be.sh --repeat 1 --update-ratio 0.50 --duration-s 30 --warmup-s 5 \
  --dc-cpu-share 0.85 --targets "$TARGETS" --out "$OUT" >"$OUT/bench.log" 2>&1 &
script=$!
recording=""; perf_pid=""
stop_recording() {
  [[ -n "$perf_pid" ]] || return 0
  kill -INT "$perf_pid" 2>/dev/null || true
  wait "$perf_pid" 2>/dev/null || true
  perf_pid=""; recording=""
}
seen=""
while kill -0 "$script" 2>/dev/null; do
  line=$(grep -o 'r1-[a-z-]*: causet bench' "$OUT/bench.log" | tail -1 || true)
  if [[ -n "$line" && "$line" != "$seen" ]]; then
    stop_recording
    seen="$line"; recording="${line%%:*}"
    echo "$(<"$OUT/cassandra/node1/pid") $(<"$OUT/cassandra/node2/pid")" >"$OUT/$recording.pids"
    perf record -a -F 99 -k realtime -o "$OUT/$recording.perf.data" >/dev/null 2>&1 &
    perf_pid=$!
    echo "recording $recording" >&2
  fi
  # A target's bench is over when its proxies' report is written.
  if [[ -n "$recording" && -f "$OUT/$recording.proxy-report.txt" ]]; then stop_recording; fi
  sleep 1
done
stop_recording
wait "$script"

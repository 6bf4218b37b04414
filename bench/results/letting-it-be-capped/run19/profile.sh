#!/usr/bin/env bash
# Run 19: where Cassandra's CPU goes, Cassandra alone against the middleware, at the write-heavy mix. Runs
# bench/letting-it-be.sh (one repetition, 50% updates only, each DC capped) and records a JFR profile of both
# Cassandra nodes over each target's whole `causet bench` (preload included); profile-split.py then keeps the
# samples of the measured window (report.json's window_start_unix_s) and splits them by Cassandra thread pool.
#   bench/results/letting-it-be-capped/run19/profile.sh OUT [targets, default cassandra,lib-cassandra,lib-cassandra-uncached: the
#   last target only keeps the nodes up while the one before it is dumped; its own recording may be lost]
set -euo pipefail
cd "$(dirname "$0")/../../../.."
OUT="$1"; TARGETS="${2:-cassandra,lib-cassandra,lib-cassandra-uncached}"
mkdir -p "$OUT"
bench/letting-it-be.sh --repeat 1 --update-ratio 0.50 --duration-s 30 --warmup-s 5 --jvm-warmup-s 30 \
  --dc-cpu-share 0.85 --targets "$TARGETS" --out "$OUT" >"$OUT/bench.log" 2>&1 &
script=$!
recording=""
stop_recording() {
  [[ -n "$recording" ]] || return 0
  for i in 1 2; do
    pid=$(<"$OUT/cassandra/node$i/pid")
    jcmd "$pid" JFR.stop name=run19 filename="$OUT/$recording.node$i.jfr" >/dev/null 2>&1 || true
  done
  recording=""
}
seen=""
while kill -0 "$script" 2>/dev/null; do
  line=$(grep -o 'r1-[a-z-]*: causet bench' "$OUT/bench.log" | tail -1 || true)
  if [[ -n "$line" && "$line" != "$seen" ]]; then
    stop_recording
    seen="$line"; recording="${line%%:*}"
    for i in 1 2; do
      pid=$(<"$OUT/cassandra/node$i/pid")
      jcmd "$pid" JFR.start name=run19 settings=default >/dev/null
    done
    echo "recording $recording" >&2
  fi
  # A target's bench is over when its proxies' report is written.
  if [[ -n "$recording" && -f "$OUT/$recording.proxy-report.txt" ]]; then stop_recording; fi
  sleep 1
done
stop_recording
wait "$script"

#!/usr/bin/env bash
# The cost of replicated partitions, side by side: the shipped `cure` workload on 3 DCs of 3 nodes (50 ms apart, 6
# partitions per DC) with every partition on one node (`--replicas 1`) and as a Raft group of three
# (`--replicas 3`), on a fresh cluster each, alternating, `repeat` times; then the medians, the ratio of replicas=3
# to replicas=1 (per repetition, and of the medians), and the remote visibility (server side, the stable
# snapshot's age for the other DCs).
# Usage: [IDLE_S=s] bench/replication.sh [repeat] [duration_s] [warmup_s] [update_ratios] [out_dir]
#          defaults: 3 repetitions, 10 s measured, 3 s warm-up, 0.10 updates, bench/results/replication
# IDLE_S=20 also starts each shape with no client at all and reports its servers' CPU over that many seconds (what
# the clusters spend on their own: reports, heartbeats, Raft ticks and clock bounds).
# Reports go to <out_dir>/<ratio>-r<replicas>-<n>/ (the bench's output beside it in .log, the CPU used in the measured window
# in .cores); the summary to <out_dir>/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=${1:-3}
duration=${2:-10}
warmup=${3:-3}
ratios=${4:-0.10}
out=${5:-bench/results/replication}
idle_s=${IDLE_S:-0}
cargo build --release -q -p causet
bin=target/release/causet
rm -rf "$out"
mkdir -p "$out"
shape=(--dcs 3 --nodes-per-dc 3 --partitions 6)

# Sums the user and system CPU ticks of the processes whose command line names the directory.
ticks() {
  local sum=0 pid
  for pid in $(pgrep -f "$1/dc" || true); do
    sum=$((sum + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
  done
  echo "$sum"
}

# The CPU ticks of a run's servers and of its load generator (fails once the load generator has ended).
cpu_ticks() {
  local bench
  bench=$(awk '{print $14 + $15}' "/proc/$2/stat" 2>/dev/null) || return 1
  echo $(( $(ticks "$1/cluster-cure") + bench ))
}

if [ "$idle_s" -gt 0 ]; then
  for replicas in 1 3; do
    echo "== idle, replicas $replicas, ${idle_s} s"
    dir=$(mktemp -d /tmp/causet-idle-XXXXXX)
    "$bin" cluster start "${shape[@]}" --replicas "$replicas" --sync periodic --base-port 0 --dir "$dir" > /dev/null
    sleep 8 # elections, first checkpoints
    before=$(ticks "$dir")
    sleep "$idle_s"
    after=$(ticks "$dir")
    "$bin" cluster stop --dir "$dir" > /dev/null
    rm -rf "$dir"
    hz=$(getconf CLK_TCK)
    python3 -c "print(f'{($after - $before) / $hz / $idle_s:.2f}')" > "$out/idle-r$replicas.txt"
    echo "   $(cat "$out/idle-r$replicas.txt") cores"
  done
fi

for ratio in $ratios; do
  for n in $(seq 1 "$repeat"); do
    for replicas in 1 3; do
      echo "== updates $ratio, replicas $replicas, run $n of $repeat"
      run="$out/$ratio-r$replicas-$n"
      "$bin" bench --workload cure --update-ratio "$ratio" --duration-s "$duration" --warmup-s "$warmup" \
        "${shape[@]}" --replicas "$replicas" --out "$run" > "$run.log" 2>&1 &
      bench_pid=$!
      # The CPU the nine servers and the load generator use inside the measured window (from the first progress
      # line, a few seconds in, to a second before its end): whether the machine was saturated, and the CPU per
      # transaction.
      until grep -q '\[measuring\]' "$run.log" 2>/dev/null || ! kill -0 "$bench_pid" 2>/dev/null; do sleep 0.1; done
      left=$(grep -o '[0-9]*s left' "$run.log" 2>/dev/null | head -1 | tr -dc 0-9 || true)
      if [ "${left:-0}" -ge 3 ] && t0=$(cpu_ticks "$run" "$bench_pid"); then
        s0=$(date +%s%N)
        sleep $((left - 1))
        if t1=$(cpu_ticks "$run" "$bench_pid"); then
          s1=$(date +%s%N)
          python3 -c "print(f'{($t1 - $t0) / $(getconf CLK_TCK) / (($s1 - $s0) / 1e9):.2f}')" > "$run.cores"
        fi
      fi
      wait "$bench_pid"
      rm -rf "$run"/cluster-*
    done
  done
done

python3 - "$out" "$repeat" "$ratios" "$duration" "$warmup" <<'EOF'
import json, pathlib, statistics, sys
out, repeat, ratios = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split()
duration, warmup = sys.argv[4], sys.argv[5]
lines = ["# The cost of replicated partitions: replicas = 3 against replicas = 1", "",
         f"3 DCs × 3 nodes, 50 ms one way, 6 partitions per DC, the `cure` workload (16 closed-loop sessions per DC); "
         f"{repeat} alternating runs of {duration} s after {warmup} s, each on a fresh cluster. Ratio: replicas = 3 "
         "over replicas = 1, per repetition (median and range) and of the medians. Visibility: the server-side p50 "
         "of the stable snapshot's age for the other DCs. Cores: the CPU the nine servers and the load generator used in "
         "the measured window (of the machine's two; below two, the closed loop did not saturate the machine), "
         "median over runs, and per transaction (cores ÷ txn/s of the same run).", ""]
idle = {r: out / f"idle-r{r}.txt" for r in (1, 3)}
if all(p.exists() for p in idle.values()):
    i1, i3 = (float(idle[r].read_text()) for r in (1, 3))
    lines += [f"Idle (no client): the nine servers use {i1:.2f} cores with replicas = 1 and {i3:.2f} with "
              "replicas = 3.", ""]
lines += ["| updates | replicas=1 txn/s (runs) | replicas=3 txn/s (runs) | ratio per run: median (range) | ratio of medians | p50 latency ms r1 / r3 | visibility p50 ms r1 / r3 | cores r1 / r3 | CPU per txn µs r1 / r3 | errors |",
          "|---:|---|---|---|---:|---|---|---|---|---:|"]
for ratio in ratios:
    runs = {r: [json.load(open(out / f"{ratio}-r{r}-{n}" / "report.json"))["runs"][0] for n in range(1, repeat + 1)]
            for r in (1, 3)}
    tput = {r: [x["throughput_per_s"] for x in runs[r]] for r in (1, 3)}
    per_run = [b / a for a, b in zip(tput[1], tput[3]) if a > 0]
    med = {r: statistics.median(tput[r]) for r in (1, 3)}
    lat = {r: statistics.median(x["latency"]["p50_us"] for x in runs[r]) / 1000 for r in (1, 3)}
    def vis(r):
        v = [((x.get("visibility") or {}).get("server") or {}).get("p50_us") for x in runs[r]]
        v = [x for x in v if x]
        return f"{statistics.median(v) / 1000:.1f}" if v else "–"
    # Cores used in the measured window (servers and load generator), and per transaction of the same run.
    def cores(r):
        return [float(p.read_text()) if (p := out / f"{ratio}-r{r}-{n}.cores").exists() else None
                for n in range(1, repeat + 1)]
    def show_cores(r):
        c = [x for x in cores(r) if x is not None]
        return f"{statistics.median(c):.2f}" if c else "–"
    def cpu_per_tx(r):
        c = [x / t * 1e6 for x, t in zip(cores(r), tput[r]) if x is not None and t > 0]
        return f"{statistics.median(c):.0f}" if c else "–"
    errors = sum(x["errors"] for r in (1, 3) for x in runs[r])
    show = lambda xs: " ".join(f"{x:.0f}" for x in xs)
    lines.append(f"| {float(ratio):.0%} | {med[1]:.0f} ({show(tput[1])}) | {med[3]:.0f} ({show(tput[3])}) | "
                 f"{statistics.median(per_run):.2f} ({min(per_run):.2f}–{max(per_run):.2f}) | {med[3] / med[1]:.2f} | "
                 f"{lat[1]:.2f} / {lat[3]:.2f} | {vis(1)} / {vis(3)} | {show_cores(1)} / {show_cores(3)} | "
                 f"{cpu_per_tx(1)} / {cpu_per_tx(3)} | {errors} |")
(out / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF

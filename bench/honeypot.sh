#!/usr/bin/env bash
# The HoneyPot experiment (Munteanu 2017, §4) side by side: the shipped honeypot-uniform and honeypot-pareto
# workloads (50 sessions, 10-key interactive transactions, 10 to 10,000 keys) on one DC of 3 nodes running the
# lease cache, with reads as the node chooses (`cache`: through the cache, unless its gate bypasses a cache that does
# not pay) against reads that bypass it (`--read-from fresh`, the baseline), and with the cache buffering writes too
# (`buffer`: `[cache] buffer_writes = true`), on a fresh cluster for every run, alternating, `repeat` times; then a
# table of medians and ratios per point. `FORCE_CACHE=1` makes the cache and buffer runs ask for the cache
# (`--read-from cache`), as runs before the gate did; `WITH_FORCED=1` adds a fourth configuration, `forced`: the
# cache run asking for the cache, side by side with the gate's. `BATCHED=1` makes interactive transactions send their
# reads in one request and their updates in one (`causet bench --batched`) instead of one request per key.
# Usage: [LEASE_MS=ms] [FORCE_CACHE=1] [BATCHED=1] bench/honeypot.sh [repeat] [duration_s] [warmup_s] [update_ratios]
#          defaults: 3 repetitions, 5 s measured, 2 s warm-up, the workloads' ratios (1, 0, 0.01, 0.1), and the
#          buffering runs' lease LEASE_MS = 1000 (the read-cache runs keep the workloads' own lease)
# Reports go to $OUT/<workload>-<mode>-<n>/ (OUT defaults to bench/results/honeypot); the summary to
# $OUT/summary.md, and plots of it to $OUT/*.svg (each workload's throughput ratios to fresh against the number of
# keys, one line per mode and update ratio; and its throughput at each update ratio).
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=${1:-3}
duration=${2:-5}
warmup=${3:-2}
ratios=${4:-}
lease_ms=${LEASE_MS:-1000}
cached=leader
if [ "${FORCE_CACHE:-0}" = 1 ]; then cached=cache; fi
modes="cache buffer fresh"
if [ "${WITH_FORCED:-0}" = 1 ]; then modes="cache forced buffer fresh"; fi
cargo build --release -q -p causet
bin=target/release/causet
out=${OUT:-bench/results/honeypot}
rm -rf "$out"
mkdir -p "$out"
extra=(--duration-s "$duration" --warmup-s "$warmup")
if [ -n "$ratios" ]; then extra+=(--update-ratio "$ratios"); fi
batched=${BATCHED:-0}
if [ "$batched" = 1 ]; then extra+=(--batched); fi
for workload in honeypot-uniform honeypot-pareto; do
  for n in $(seq 1 "$repeat"); do
    for mode in $modes; do
      echo "== $workload, $mode, run $n of $repeat"
      case $mode in
        buffer) how=(--read-from "$cached" --node-config "cache = { enabled = true, lease_ms = $lease_ms, buffer_writes = true }") ;;
        cache) how=(--read-from "$cached") ;;
        forced) how=(--read-from cache) ;;
        *) how=(--read-from "$mode") ;;
      esac
      $bin bench --workload "$workload" "${how[@]}" "${extra[@]}" --out "$out/$workload-$mode-$n" > /dev/null
      rm -rf "$out/$workload-$mode-$n"/cluster-*
    done
  done
done
python3 - "$out" "$repeat" "$modes" "$lease_ms" "$batched" <<'EOF'
import json, statistics, sys, pathlib
out, repeat, modes, lease_ms = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(), sys.argv[4]
batched = sys.argv[5] == "1"
plots = []
lines = ["# HoneyPot: the lease cache (reads only, and with buffered writes) against reads that bypass it", "",
         f"One DC of 3 nodes, 12 partitions, 50 sessions, 10-key interactive transactions"
         + (" (reads in one request, updates in one: `--batched`)" if batched else " (one request per key)")
         + f"; medians of {repeat} "
         "alternating runs, each on a fresh cluster. cache: reads as the node chooses (through the cache unless its gate "
         "bypasses it), writes committed at once; buffer: the same with `buffer_writes = true`; fresh: the baseline. "
         "Ratios: to fresh, per run, then the median. Hits: the share of reads through the cache that it served, and "
         "in brackets the share of the transactions' reads that went through it (the rest bypassed it).", ""]
for workload in ["honeypot-uniform", "honeypot-pareto"]:
    runs = {}
    for mode in modes:
        for n in range(1, repeat + 1):
            report = json.load(open(out / f"{workload}-{mode}-{n}" / "report.json"))
            for r in report["runs"]:
                p = r["point"]
                key = (p["update_ratio"], p["keys"])
                runs.setdefault(key, {}).setdefault(mode, []).append(r)
    lines += [f"## {workload}", "",
              "| updates | keys | cache txn/s | buffer txn/s | fresh txn/s | cache / fresh (median, range) | buffer / fresh (median, range) | cache p50 ms | buffer p50 ms | fresh p50 ms | buffer p99 ms | fresh p99 ms | cache hits (through it) | buffer hits (through it) |",
              "|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---|---|"]
    if "forced" in modes:
        lines[-2] += " forced txn/s | forced / fresh (median, range) | forced hits |"
        lines[-1] += "---:|---|---|"
    ratios_all, ratio_lines, tput_lines = {}, {}, {}
    for (u, k) in sorted(runs):
        c, b, f = runs[(u, k)]["cache"], runs[(u, k)]["buffer"], runs[(u, k)]["fresh"]
        tput = lambda rs: statistics.median(r["throughput_per_s"] for r in rs)
        lat = lambda rs, q: statistics.median(r["latency"][q] for r in rs) / 1000
        ratio = lambda xs: [a["throughput_per_s"] / z["throughput_per_s"] for a, z in zip(xs, f) if z["throughput_per_s"] > 0]
        rc, rb = ratio(c), ratio(b)
        def hits(rs):
            n = lambda r, k: r.get("cache_reads", {}).get(k, 0)
            through = sum(n(r, "hit") + n(r, "miss") + n(r, "refetch") for r in rs)
            reads = sum(r["operations_per_s"] * r["measured_s"] * (1 - u) for r in rs)
            if through == 0:
                return "–"
            share = sum(n(r, "hit") for r in rs) / through
            return f"{share:.0%} ({min(1.0, through / reads):.0%})" if reads > 0 else f"{share:.0%}"
        rf = ratio(runs[(u, k)]["forced"]) if "forced" in modes else rc
        ratios_all.setdefault(u, []).append((statistics.median(rc), statistics.median(rb), statistics.median(rf)))
        lines.append(f"| {u:.0%} | {k} | {tput(c):.0f} | {tput(b):.0f} | {tput(f):.0f} | {statistics.median(rc):.2f} "
                     f"({min(rc):.2f}–{max(rc):.2f}) | {statistics.median(rb):.2f} ({min(rb):.2f}–{max(rb):.2f}) | "
                     f"{lat(c, 'p50_us'):.2f} | {lat(b, 'p50_us'):.2f} | {lat(f, 'p50_us'):.2f} | "
                     f"{lat(b, 'p99_us'):.2f} | {lat(f, 'p99_us'):.2f} | {hits(c)} | {hits(b)} |")
        for mode, rs in [("cache", rc), ("buffer", rb)] + ([("forced", rf)] if "forced" in modes else []):
            ratio_lines.setdefault(f"{mode}, {u:.0%} updates", []).append([k, statistics.median(rs)])
        for mode in modes:
            tput_lines.setdefault(u, {}).setdefault(mode, []).append([k, tput(runs[(u, k)][mode])])
        if "forced" in modes:
            fo = runs[(u, k)]["forced"]
            lines[-1] += f" {tput(fo):.0f} | {statistics.median(rf):.2f} ({min(rf):.2f}–{max(rf):.2f}) | {hits(fo)} |"
    forced = "forced" in modes
    lines += ["", "| updates | cache / fresh: mean of the points' medians (worst, best) | buffer / fresh: mean (worst, best) |"
              + (" forced / fresh: mean (worst, best) |" if forced else ""),
              "|---:|---|---|" + ("---|" if forced else "")]
    for u, rs in sorted(ratios_all.items()):
        c = [x for x, _, _ in rs]
        b = [y for _, y, _ in rs]
        o = [z for _, _, z in rs]
        lines.append(f"| {u:.0%} | {statistics.mean(c):.2f} ({min(c):.2f}, {max(c):.2f}) | "
                     f"{statistics.mean(b):.2f} ({min(b):.2f}, {max(b):.2f}) |"
                     + (f" {statistics.mean(o):.2f} ({min(o):.2f}, {max(o):.2f}) |" if forced else ""))
    lines.append("")
    plots.append({"file": f"{workload}-ratio.svg", "log_x": True,
                  "title": f"{workload}: throughput ÷ fresh reads (medians of {repeat}; buffer leases {lease_ms} ms)",
                  "x_label": "keys (log scale)", "y_label": "throughput ÷ fresh",
                  "references": [{"y": 1.0, "label": "fresh reads"}, {"y": 3.0, "label": "goal at 90/10 (3×)"}],
                  "series": [{"label": label, "points": pts} for label, pts in ratio_lines.items()]})
    for u, per_mode in sorted(tput_lines.items()):
        plots.append({"file": f"{workload}-throughput-{round(u * 100)}pct.svg", "log_x": True,
                      "title": f"{workload}, {u:.0%} updates: committed transactions / s (medians of {repeat})",
                      "x_label": "keys (log scale)", "y_label": "txn/s",
                      "series": [{"label": mode, "points": pts} for mode, pts in per_mode.items()]})
    lines += [f"![{workload}: ratios]({workload}-ratio.svg)", ""]
(out / "plots.json").write_text(json.dumps({"plots": plots}, indent=1))
(out / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
$bin bench --plot "$out/plots.json" > /dev/null

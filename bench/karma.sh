#!/usr/bin/env bash
# Karma's experiment (Mahmood et al., §evaluation) side by side on eight DCs with the AWS round-trip matrix
# (bench/wan/aws-8dc.toml) and Karma's three rings (the US and Europe, Asia and Australia, Brazil): the shipped
# `karma` workload (single-key reads and writes of 200-byte LWW registers, zipfian) in three placements,
#   full:    every DC holds every object (full replication, "COPS-Ideal");
#   cops-pr: one copy per ring, every DC reads what it does not hold from its own ring's holder (static ring
#            binding, "COPS-PR": `read_from = "own"`);
#   karma-nc: the same placement, reads from the holder measured fastest (`read_from = "nearest"`, the default),
#            no cache ("Karma-NC");
#   karma:   karma-nc with each DC's lease cache on, which keeps what its sessions read from other DCs
#            (Karma's per-DC cache of stable values; here versions bounded by visibility boxes and leases),
# on a fresh cluster each, alternating, `repeat` times; then throughput, latency, the share of reads served at the
# reader's DC, and what each DC stores and sends, from every node's /metrics at the end of each run.
# Usage: bench/karma.sh [repeat] [duration_s] [warmup_s] [update_ratios] [lease_ms] [out_dir] [variants]
#          defaults: 1 repetition, 20 s measured, 5 s warm-up, 0.05 and 0.5 updates, 1000 ms leases,
#          bench/results/karma, "full cops-pr karma-nc karma"
# Reports go to <out_dir>/<ratio>-<variant>-<n>/; the summary to <out_dir>/summary.md.
# DC_CPU_SHARE=0.22 caps each DC's processes at that share of one core (cgroups; needs root), as if each DC ran on
# its own machine; unset, all DCs and the load generator share the machine's cores.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=${1:-1}
duration=${2:-20}
warmup=${3:-5}
ratios=${4:-0.05 0.5}
lease_ms=${5:-1000}
out=${6:-bench/results/karma}
variants=${7:-full cops-pr karma-nc karma}
cargo build --release -q -p causet
bin=target/release/causet
rm -rf "$out"
mkdir -p "$out"
source bench/karma-cluster.sh
for ratio in $ratios; do
  for n in $(seq 1 "$repeat"); do
    for variant in $variants; do
      echo "== updates $ratio, $variant, run $n of $repeat"
      run="$out/$ratio-$variant-$n"
      dir=$(karma_cluster "$bin" "$variant" "$lease_ms")
      $bin bench --workload karma --cluster-dir "$dir" --update-ratio "$ratio" --duration-s "$duration" \
        --warmup-s "$warmup" --out "$run" > /dev/null || { $bin cluster stop --dir "$dir" || true; exit 1; }
      python3 - "$dir/cluster.json" "$run/metrics.json" <<'EOF'
import json, sys, urllib.request
cluster = json.load(open(sys.argv[1]))
per_dc = {}
for node in cluster["nodes"]:
    text = urllib.request.urlopen(f"http://{node['admin']}/metrics", timeout=10).read().decode()
    d = per_dc.setdefault(node["dc"], {"stored_objects": 0, "wan_bytes": 0, "remote_reads": 0, "cache_hits": 0, "cache_misses": 0,
                                       "shipped_writes": 0, "shipped_bytes": 0})
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        value = float(value)
        if name == "causet_stored_objects":
            d["stored_objects"] += value
        elif name.startswith("causet_link_bytes_total{") and f'peer="{node["dc"]}"' not in name:
            d["wan_bytes"] += value
        elif name == "causet_shipped_writes_total":
            d["shipped_writes"] += value
        elif name == "causet_shipped_write_bytes_total":
            d["shipped_bytes"] += value
        elif name == 'causet_remote_reads_total{outcome="sent"}':
            d["remote_reads"] += value
        elif name == 'causet_cache_reads_total{outcome="hit"}':
            d["cache_hits"] += value
        elif name == 'causet_cache_reads_total{outcome="miss"}':
            d["cache_misses"] += value
json.dump(per_dc, open(sys.argv[2], "w"), indent=1)
EOF
      $bin cluster stop --dir "$dir" > /dev/null || true
      rm -rf "$dir"
    done
  done
done
python3 - "$out" "$repeat" "$ratios" "$warmup" "$variants" <<'EOF'
import json, statistics, sys, pathlib
out, repeat, ratios, warmup = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(), float(sys.argv[4])
variants = sys.argv[5].split()
lines = ["# Karma: one copy per ring against full replication, on eight DCs with AWS latencies", "",
         f"8 DCs of one node each (bench/wan/aws-8dc.toml), rings [[0-3], [4-6], [7]], 12 partitions, the `karma` "
         f"workload (16 sessions per DC, single-key operations, zipfian, 200-byte LWW registers); medians of {repeat} "
         "alternating runs, each on a fresh cluster. Local reads: reads not sent to another DC (held here, or served by "
         "the cache), estimated as 1 - remote reads / (the measured rate × (warm-up + measurement) × read share). Stored: objects over all DCs at the end "
         "(the preload writes every key once). Shipped: writes sent to other DCs (once per DC) over the whole run, preload included, and their encoded bytes; "
         "per write: shipped writes / writes committed (the preload's 100,000 and the run's). Link MB: every byte on the links between DCs, heartbeats and "
         "remote reads included, all DCs summed (heartbeats dominate it, and they slow down when the CPU is busy).", "",
         "| updates | placement | txn/s | vs cops-pr | p50 ms | p99 ms | local reads | stored objects | shipped writes | shipped MB | copies per write | link MB | cache hits |",
         "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for ratio in ratios:
    rows = {}
    for v in variants:
        runs = []
        for n in range(1, repeat + 1):
            d = out / f"{ratio}-{v}-{n}"
            report = json.load(open(d / "report.json"))
            metrics = json.load(open(d / "metrics.json"))
            r = report["runs"][0]
            # Reads over warm-up and measurement (the counters run over both), at the measured rate.
            reads = r["throughput_per_s"] * (r["measured_s"] + warmup) * (1 - float(ratio))
            remote = sum(m["remote_reads"] for m in metrics.values())
            runs.append({
                "tput": r["throughput_per_s"], "p50": r["latency"]["p50_us"] / 1000, "p99": r["latency"]["p99_us"] / 1000,
                "stored": sum(m["stored_objects"] for m in metrics.values()),
                "wan": sum(m["wan_bytes"] for m in metrics.values()) / 1e6,
                "hits": sum(m["cache_hits"] for m in metrics.values()),
                "shipped": sum(m["shipped_writes"] for m in metrics.values()),
                "shipped_mb": sum(m["shipped_bytes"] for m in metrics.values()) / 1e6,
                # Writes committed: the preload's one per key, then the run's (warm-up at the measured rate).
                "writes": 100000 + r["throughput_per_s"] * (r["measured_s"] + warmup) * float(ratio),
                "remote": remote, "reads": reads,
            })
        rows[v] = runs
    base = statistics.median(x["tput"] for x in rows["cops-pr"])
    for v in variants:
        med = lambda k: statistics.median(x[k] for x in rows[v])
        local = [1 - x["remote"] / x["reads"] for x in rows[v] if x["reads"]]
        local = f"{statistics.median(local):.0%}" if local else "n/a"
        lines.append(f"| {float(ratio):.0%} | {v} | {med('tput'):.0f} | {med('tput') / base:.2f} | {med('p50'):.1f} | "
                     f"{med('p99'):.1f} | {local} | {med('stored'):.0f} | {med('shipped'):.0f} | {med('shipped_mb'):.1f} | "
                     f"{statistics.median(x['shipped'] / x['writes'] for x in rows[v]):.2f} | {med('wan'):.1f} | {med('hits'):.0f} |")
(out / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF

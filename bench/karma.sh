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
# Usage: bench/karma.sh [repeat] [duration_s] [warmup_s] [update_ratios] [lease_ms] [out_dir] [variants] [sessions]
#          defaults: 1 repetition, 20 s measured, 5 s warm-up, 0.05 and 0.5 updates, 1000 ms leases,
#          bench/results/karma, "full cops-pr karma-nc karma", 16 sessions per DC
# `sessions` may list several counts of sessions per DC ("16 64 256 512"): the paper raised its client threads
# until the system saturated and compared the placements there; the summary gives every point of the sweep and,
# per placement, the point of highest throughput. Each point also reports the throughput of each DC's sessions:
# in a closed loop, a DC that holds everything (Brazil, a ring of its own) never waits for another DC and can
# commit most of the total while the others wait on the WAN.
# Reports go to <out_dir>/<ratio>-<variant>-s<sessions>-<n>/; the summary to <out_dir>/summary.md.
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
sessions_list=${8:-16}
cargo build --release -q -p causet
bin=target/release/causet
rm -rf "$out"
mkdir -p "$out"
source bench/karma-cluster.sh
for ratio in $ratios; do
 for sessions in $sessions_list; do
  for n in $(seq 1 "$repeat"); do
    for variant in $variants; do
      echo "== updates $ratio, $sessions sessions per DC, $variant, run $n of $repeat"
      run="$out/$ratio-$variant-s$sessions-$n"
      dir=$(karma_cluster "$bin" "$variant" "$lease_ms")
      $bin bench --workload karma --cluster-dir "$dir" --update-ratio "$ratio" --duration-s "$duration" \
        --warmup-s "$warmup" --sessions-per-dc "$sessions" --out "$run" > /dev/null \
        || { $bin cluster stop --dir "$dir" || true; exit 1; }
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
done
python3 bench/karma-summary.py "$out" "$repeat" "$ratios" "$warmup" "$variants" "$sessions_list"

#!/usr/bin/env bash
# The harness that produced the runs in this directory (kept as run; bench/karma.sh runs the same commands for
# one binary): A/B of Karma variants, each label with its own causet binary, alternating, on fresh clusters.
# Usage: harness.sh OUT REPEAT WARMUP DURATION "label:bin:variant:nodecfg ..."
# e.g. DC_CPU_SHARE=0.22 harness.sh out 2 100 30 "cops:NEW:cops-pr:" "karma-old:OLD:karma:" "karma-new:NEW:karma:"
# SESSIONS_PER_DC=N overrides the workload's 16 sessions per DC; UPDATE_RATIO=R its 5% updates.
set -uo pipefail
cd /work/main
out=$1 repeat=$2 warmup=$3 duration=$4; shift 4
mkdir -p "$out"
source bench/karma-cluster.sh
for n in $(seq 1 "$repeat"); do
  for spec in "$@"; do
    IFS=: read -r label bin variant nodecfg <<< "$spec"
    run="$out/$label-$n"
    echo "== $label run $n $(date +%T)"
    export KARMA_NODE_CONFIG="$nodecfg"
    dir=$(karma_cluster "$bin" "$variant" 1000)
    "$bin" bench --workload karma --cluster-dir "$dir" --update-ratio "${UPDATE_RATIO:-0.05}" --duration-s "$duration" \
      --warmup-s "$warmup" ${SESSIONS_PER_DC:+--sessions-per-dc "$SESSIONS_PER_DC"} --out "$run" > "$run.log" 2>&1
    python3 - "$dir/cluster.json" "$run/metrics.json" <<'PY'
import json, sys, urllib.request
cluster = json.load(open(sys.argv[1]))
tot = {}
for node in cluster["nodes"]:
    text = urllib.request.urlopen(f"http://{node['admin']}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith("#") or " " not in line: continue
        name, value = line.rsplit(" ", 1)
        if name.startswith("causet_cache_reads_total") or name.startswith("causet_remote_reads_total") or name.startswith("causet_cache_refresh") or name == "causet_cache_entries" or name == "causet_transactions_committed_total" or name == "causet_shipped_writes_total" or name.startswith("causet_replication_go_backs_total"):
            key = name.replace('causet_cache_refreshes_total{outcome="', 'refresh_').replace('causet_cache_reads_total{outcome="', 'cache_').replace('causet_remote_reads_total{outcome="', 'remote_').replace('causet_replication_go_backs_total{cause="', 'go_backs_').replace('"}', '')
            tot[key] = tot.get(key, 0) + float(value)
json.dump(tot, open(sys.argv[2], "w"), indent=1)
PY
    "$bin" cluster stop --dir "$dir" > /dev/null 2>&1 || true
    rm -rf "$dir"
    python3 -c "
import json;r=json.load(open('$run/report.json'))['runs'][0];m=json.load(open('$run/metrics.json'))
print('$label', round(r['throughput_per_s']), 'p50', r['latency']['p50_us']/1000, {k:int(v) for k,v in m.items()})"
  done
done

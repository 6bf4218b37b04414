#!/usr/bin/env bash
set -uo pipefail
cd /work/main
bin=$1 variant=$2 out=$3
mkdir -p "$out"
source bench/karma-cluster.sh
dir=$(karma_cluster "$bin" "$variant" 1000)
python3 - "$dir/cluster.json" > "$out/pids" <<'PY'
import json,sys
for n in json.load(open(sys.argv[1]))["nodes"]: print(n["dc"], n["pid"])
PY
cpu() { while read dc pid; do echo "$dc $(awk '{print $14+$15}' /proc/$pid/stat)"; done < "$out/pids"; }
sleep 15
cpu > "$out/cpu0"; sleep 20; cpu > "$out/cpu1"
paste "$out/cpu0" "$out/cpu1" | awk '{printf "dc%s %.1f%% ",$1,($4-$2)/20}'; echo
"$bin" cluster stop --dir "$dir" > /dev/null 2>&1 || true
rm -rf "$dir"

#!/usr/bin/env bash
# A DC grows by a node under load, online: 2 DCs of 3 nodes (groups of three, 8 partitions, TLS between nodes), the
# shipped `cure` workload at a fixed offered rate against the cluster, and `causet cluster add-node --dc 0
# --rebalance` some seconds into the measured window. Prints how long adding the node and moving replicas onto it
# took, the bench's per-5-s lines (throughput, p50, p99, errors) around it, and which node leads each of DC 0's
# partitions afterwards.
# Usage: bench/add-node.sh [rate] [after_s] [dir]   defaults: 1000 txn/s, 10 s into the measured window,
#                                                    /tmp/causet-add-node
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-1000}
after=${2:-10}
dir=${3:-/tmp/causet-add-node}
cargo build --release -q -p causet
bin=target/release/causet
"$bin" cluster stop --dir "$dir" >/dev/null 2>&1 || true
rm -rf "$dir"
"$bin" cluster start --dcs 2 --nodes-per-dc 3 --partitions 8 --dir "$dir" --base-port 0 >/dev/null
trap '"$bin" cluster stop --dir "$dir" >/dev/null 2>&1 || true' EXIT
log="$dir/bench.log"
"$bin" bench --cluster-dir "$dir" --duration-s 60 --warmup-s 2 --rate "$rate" >"$log" 2>&1 &
bench=$!
until grep -q "measuring" "$log" 2>/dev/null; do sleep 0.5; done
sleep "$after"
start=$(date +%s.%N)
"$bin" cluster add-node --dir "$dir" --dc 0 --rebalance | grep -v "to go;\|see \`placement\`"
end=$(date +%s.%N)
echo "add-node --rebalance took $(echo "$end - $start" | bc) s"
# The first point of the bench's sweep is the one measured while the node joined.
while ! grep -q "^cure 1/5 .*: [0-9]* txn/s" "$log"; do sleep 1; done
kill "$bench" 2>/dev/null || true
grep "^cure 1/5" "$log"
python3 - "$dir" <<'EOF'
import json, sys, urllib.request
cluster = json.load(open(sys.argv[1] + "/cluster.json"))
for n in cluster["nodes"]:
    if n["dc"] == 0 and n["node"] == 0:
        status = json.load(urllib.request.urlopen("http://%s/status" % n["admin"]))
        led = {}
        for p in status["placement"]:
            led.setdefault(p["leader"], []).append(p["partition"])
        print("DC 0: %d nodes; partitions led per node: %s" % (status["nodes"], dict(sorted(led.items()))))
EOF

#!/usr/bin/env bash
# Karma's congestion experiment (Mahmood et al., Figures 7 and 8) on eight DCs with the AWS round-trip matrix
# (bench/wan/aws-8dc.toml) and Karma's three rings: the shipped `karma` workload runs for three phases of
# `phase_s` seconds each; in the second, every round trip into and out of Europe (DC 3, eu-west-1) is `delta` ms
# longer (half of it added to each direction, through the nodes' admin API), then put back. Variants:
#   cops-pr:  one copy per ring, every DC reads what it does not hold from its own ring's holder (static ring
#             binding: `read_from = "own"`), failing over to the next ring after 500 ms without an answer;
#   karma-nc: the same placement, reads from the holder measured fastest (`read_from = "nearest"`, the default),
#             no cache (the paper's Karma-NC);
#   karma:    karma-nc with each DC's lease cache on.
# Throughput comes from `causet bench`'s plain progress lines (one per 5 s, each over its own 5 s).
# DC_CPU_SHARE=0.22 caps each DC's processes at that share of one core (bench/cap-dcs.py; needs root), as if each DC
# ran on its own machine; unset, all DCs and the load generator share the machine's cores.
# Usage: bench/karma-congestion.sh [deltas_ms] [phase_s] [variants] [out_dir] [update_ratio]
#          defaults: "300 600 1200", 20 s, "cops-pr karma-nc", bench/results/karma-congestion, 0.05
set -euo pipefail
cd "$(dirname "$0")/.."
deltas=${1:-300 600 1200}
phase=${2:-20}
variants=${3:-cops-pr karma-nc}
out=${4:-bench/results/karma-congestion}
ratio=${5:-0.05}
warmup=10
cargo build --release -q -p causet
bin=$PWD/target/release/causet
rm -rf "$out"
mkdir -p "$out"
source bench/karma-cluster.sh
# Sets every link into and out of DC 3 to its matrix delay plus `extra` ms (one way).
congest() {
  python3 - "$1" "$2" <<'EOF'
import json, re, sys, tomllib, urllib.request
cluster_dir, extra = sys.argv[1], float(sys.argv[2])
matrix = tomllib.load(open("bench/wan/aws-8dc.toml", "rb"))["rtt_ms"]
cluster = json.load(open(f"{cluster_dir}/cluster.json"))
europe = 3
for node in cluster["nodes"]:
    text = open(node["config"]).read()
    token = re.search(r'^admin_token = "([^"]+)"', text, re.M).group(1)
    me = node["dc"]
    peers = [d for d in range(len(matrix)) if d != me] if me == europe else [europe]
    for peer in peers:
        ms = matrix[me][peer] / 2 + extra
        req = urllib.request.Request(f"http://{node['admin']}/admin/links/{peer}/delay?ms={ms}", method="POST",
                                     headers={"Authorization": f"Bearer {token}"})
        urllib.request.urlopen(req, timeout=10).read()
EOF
}
# Appends every DC's committed transactions so far, with the time, to `file` as a JSON line tagged `label`.
count() {
  python3 - "$1" "$2" "$3" <<'EOF'
import json, sys, time, urllib.request
cluster_dir, file, label = sys.argv[1:4]
at, per_dc = time.time(), {}
for node in json.load(open(f"{cluster_dir}/cluster.json"))["nodes"]:
    text = urllib.request.urlopen(f"http://{node['admin']}/metrics", timeout=10).read().decode()
    n = sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith("causet_transactions_committed_total"))
    per_dc[node["dc"]] = per_dc.get(node["dc"], 0) + n
open(file, "a").write(json.dumps({"label": label, "at": at, "committed": per_dc}) + "\n")
EOF
}
for delta in $deltas; do
  for variant in $variants; do
    echo "== round trips to and from Europe +$delta ms for ${phase} s, $variant"
    run="$out/$delta-$variant"
    dir=$(karma_cluster "$bin" "$variant" 1000)
    mkdir -p "$run"
    $bin bench --workload karma --cluster-dir "$dir" --update-ratio "$ratio" --duration-s $((3 * phase)) \
      --warmup-s "$warmup" --out "$run" > /dev/null 2> "$run/progress.log" &
    bench=$!
    # The first progress line comes 5 s into the warm-up (after the preload; `causet bench` counts the warm-up
    # from there): time the phases from it.
    until grep -q "txn/s" "$run/progress.log" 2>/dev/null; do
      kill -0 $bench 2>/dev/null || { echo "bench failed:" >&2; cat "$run/progress.log" >&2; exit 1; }
      sleep 0.2
    done
    sleep $((warmup - 5))
    count "$dir" "$run/counts.jsonl" before
    sleep "$phase"
    count "$dir" "$run/counts.jsonl" congested
    congest "$dir" "$(python3 -c "print($delta / 2)")"
    echo "   congested at $(date +%T)"
    sleep "$phase"
    count "$dir" "$run/counts.jsonl" after
    congest "$dir" 0
    echo "   restored at $(date +%T)"
    sleep $((phase - 2))
    count "$dir" "$run/counts.jsonl" end
    wait $bench || { $bin cluster stop --dir "$dir" || true; exit 1; }
    curl -sf "http://$(python3 -c "import json; print(json.load(open('$dir/cluster.json'))['nodes'][0]['admin'])")/metrics" \
      | grep '^causet_remote_reads_total' > "$run/dc0-remote-reads.txt" || true
    $bin cluster stop --dir "$dir" > /dev/null || true
    rm -rf "$dir"
  done
done
python3 - "$out" "$phase" "$warmup" "$deltas" "$variants" <<'EOF'
import json, re, statistics, sys, pathlib
out, phase, warmup = pathlib.Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
deltas, variants = sys.argv[4].split(), sys.argv[5].split()
lines = ["# Karma's congestion experiment: round trips to and from Europe lengthened for one phase", "",
         f"8 DCs of one node each (bench/wan/aws-8dc.toml), rings [[0-3], [4-6], [7]], 12 partitions, the `karma` "
         f"workload; three phases of {phase} s after {warmup} s of warm-up, the second with every round trip into and "
         "out of DC 3 (eu-west-1) longer by the amount given. Throughput: mean of `causet bench`'s 5-second lines in "
         "each phase; degradation: the congested phase against the one before.", "",
         "Per DC: committed transactions per second in each phase, from every node's `causet_transactions_committed_total` "
         "read at the phases' boundaries (DCs 0-2 share Europe's ring and read a quarter of what they do not hold from it; "
         "DC 3 is Europe; DCs 4-7 are the other rings).", "",
         "| added RTT | variant | before txn/s | congested txn/s | after txn/s | degradation | congested p99 ms | DCs 0-2 before / congested | DC 3 before / congested | DCs 4-7 before / congested |",
         "|---:|---|---:|---:|---:|---:|---:|---|---|---|"]
pat = re.compile(r"\] +([0-9.]+) txn/s +p50 +([0-9.]+) ms +p99 +([0-9.]+) ms")
for delta in deltas:
    for v in variants:
        windows = [tuple(map(float, m.groups())) for m in map(pat.search, open(out / f"{delta}-{v}" / "progress.log")) if m]
        # Window k (from 1) covers seconds 5(k-1)..5k of the warm-up and measurement.
        def phase_of(k):
            start = 5 * (k - 1) - warmup
            return None if start < 0 else start // phase
        by = {}
        for k, w in enumerate(windows, 1):
            p = phase_of(k)
            if p is not None and p < 3:
                by.setdefault(p, []).append(w)
        mean = lambda p, i: statistics.mean(w[i] for w in by.get(p, [(0, 0, 0)]))
        worst = max((w[2] for w in by.get(1, [(0, 0, 0)])), default=0)
        before, during, after = mean(0, 0), mean(1, 0), mean(2, 0)
        deg = f"{(1 - during / before):.0%}" if before else "n/a"
        counts = {c["label"]: c for c in map(json.loads, open(out / f"{delta}-{v}" / "counts.jsonl"))}
        def rate(a, b, dcs):
            if a not in counts or b not in counts:
                return 0.0
            took = counts[b]["at"] - counts[a]["at"]
            return sum(counts[b]["committed"][str(d)] - counts[a]["committed"][str(d)] for d in dcs) / took
        groups = []
        for dcs in ([0, 1, 2], [3], [4, 5, 6, 7]):
            groups.append(f"{rate('before', 'congested', dcs):.0f} / {rate('congested', 'after', dcs):.0f}")
        lines.append(f"| +{delta} ms | {v} | {before:.0f} | {during:.0f} | {after:.0f} | {deg} | {worst:.0f} | "
                     + " | ".join(groups) + " |")
(out / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF

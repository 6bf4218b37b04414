#!/usr/bin/env bash
# Run 15's series: capped (0.85 of a core per DC) runs of bench/letting-it-be.sh with the two targets in a given
# order, each DC's CPU sampled by process kind (procsample.sh) and analysed (procanalyze.py).
# Usage: BIN=<release build> order.sh OUT N:ORDER..., ORDER "cassandra,lib-cassandra" or the reverse; the series
# ran `order.sh OUT b1:lib-cassandra,cassandra a1:cassandra,lib-cassandra b2:lib-cassandra,cassandra
# a2:cassandra,lib-cassandra` with BIN a release build of e30afc9 (before the script alternated the order itself).
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../../.."
out=$1; shift
for spec in "$@"; do
  n=${spec%%:*}; order=${spec#*:}
  echo "=== $n $order $(date +%T)"
  "$here/procsample.sh" > "$out/samples-$n" & sp=$!
  BIN="${BIN:-target/release/causet}" bench/letting-it-be.sh --repeat 1 --duration-s 20 --warmup-s 5 \
    --jvm-warmup-s 30 --targets "$order" --out "$out/run-$n" --dc-cpu-share 0.85 2>&1 |
    while IFS= read -r l; do echo "$(date +%s.%N) $l"; done > "$out/run-$n.log"
  kill $sp
  grep "^[0-9.]* | [0-9]*% |" "$out/run-$n.log" | cut -d' ' -f2-
  python3 "$here/procanalyze.py" "$out/samples-$n" "$out/run-$n.log"
done
echo "=== done $(date +%T)"

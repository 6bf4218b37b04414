#!/usr/bin/env bash
# Run 13's series: the Letting-It-Be script alternating each DC capped at 0.85 of a core and uncapped, one
# repetition each, on fresh Cassandra nodes. Run 13 used BIN=<a release build of 7ecae95>.
# Usage: series.sh [RUN NUMBERS...] (default 1 2; the second series was `series.sh 3 4`); results in
# ${OUT:-/tmp/series}/{capped,uncapped}-N.
cd "$(dirname "$0")/../../.."
for i in ${@:-1 2}; do
  for mode in capped uncapped; do
    extra=(); [[ $mode == capped ]] && extra=(--dc-cpu-share 0.85)
    echo "=== $i $mode $(date +%T)"
    BIN="${BIN:-target/release/causet}" bench/letting-it-be.sh --repeat 1 --duration-s 20 --warmup-s 5 \
      --jvm-warmup-s 30 --targets cassandra,lib-cassandra --out "${OUT:-/tmp/series}/$mode-$i" "${extra[@]}" 2>&1 |
      grep -v "^wrote\|^causet bench\|writing 100000"
  done
done
echo "=== done $(date +%T)"

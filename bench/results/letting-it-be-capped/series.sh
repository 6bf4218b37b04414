#!/usr/bin/env bash
cd /work/main
# Usage: series.sh [RUN NUMBERS...] (default 1 2; the second series was `series.sh 3 4`)
for i in ${@:-1 2}; do
  for mode in capped uncapped; do
    extra=(); [[ $mode == capped ]] && extra=(--dc-cpu-share 0.85)
    echo "=== $i $mode $(date +%T)"
    BIN=/tmp/causet-join2 bench/letting-it-be.sh --repeat 1 --duration-s 20 --warmup-s 5 --jvm-warmup-s 30 \
      --targets cassandra,lib-cassandra --out /tmp/series/$mode-$i "${extra[@]}" 2>&1 | grep -v "^wrote\|^causet bench\|writing 100000"
  done
done
echo "=== done $(date +%T)"

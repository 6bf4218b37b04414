#!/usr/bin/env bash
# Idle CPU per DC of a small cluster, alternating binaries (the A/B of 2026-12-02: a link's reader no longer
# collects the links to a DC for every message it receives, to ask whether the operator cut them).
# Usage: idle.sh REPEAT DCS BIN... ; one line per run: the binary, then each DC's share of one core over 20 s,
# measured after 10 s (`causet cluster start --dcs DCS --partitions 12 --wan-delay-ms 20`, one node per DC).
set -uo pipefail
repeat=$1 dcs=$2; shift 2
for n in $(seq 1 "$repeat"); do
  for bin in "$@"; do
    dir=$(mktemp -d /tmp/causet-idle-XXXXXX)
    "$bin" cluster start --dcs "$dcs" --partitions 12 --wan-delay-ms 20 --no-tls --base-port 0 --dir "$dir" > /dev/null
    pids=$(python3 -c 'import json,sys; print(" ".join(str(n["pid"]) for n in json.load(open(sys.argv[1]))["nodes"]))' \
      "$dir/cluster.json")
    ticks() { for p in $pids; do awk '{print $14+$15}' "/proc/$p/stat"; done; }
    sleep 10; a=$(ticks); sleep 20; b=$(ticks)
    # /proc/PID/stat counts clock ticks (100 a second): over 20 s, ticks / 20 is the percentage of one core.
    echo "$bin $(paste <(echo "$a") <(echo "$b") | awk '{printf "%.1f%% ", ($2-$1)/20}')"
    "$bin" cluster stop --dir "$dir" > /dev/null 2>&1 || true
    rm -rf "$dir"
  done
done

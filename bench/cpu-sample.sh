#!/usr/bin/env bash
# Samples, every INTERVAL_S seconds (default 1) until stopped, the CPU time of each capped DC's processes — the
# cgroups causet-bench-dc<N> of bench/cap-dcs.py — split by kind: Java (a Cassandra node) and the rest (a proxy or
# a Causet node). One line per DC and sample: UNIX-TIME dc<N> JAVA-TICKS OTHER-TICKS, where ticks are the user and
# system time (1/CLK_TCK s) summed over the group's live processes. bench/cpu-split.py cuts the samples to each
# benchmark point's measured window. bench/letting-it-be.sh --dc-cpu-share runs it on its own.
#
#   bench/cpu-sample.sh [INTERVAL_S] > samples
set -uo pipefail
interval="${1:-1}"
if [[ -d /sys/fs/cgroup/cpu ]]; then root=/sys/fs/cgroup/cpu; else root=/sys/fs/cgroup; fi
while true; do
  t=$(date +%s.%N)
  for d in "$root"/causet-bench-dc*; do
    [[ -d "$d" ]] || continue
    java=0; other=0
    for p in $(cat "$d/cgroup.procs" 2>/dev/null); do
      # Fields 14 and 15 of /proc/PID/stat (utime, stime), after the command name in parentheses.
      read -r comm ticks < <(awk '{print $2, $14 + $15}' "/proc/$p/stat" 2>/dev/null) || continue
      case "$comm" in (*java*) java=$((java + ${ticks:-0})) ;; (*) other=$((other + ${ticks:-0})) ;; esac
    done
    echo "$t ${d##*causet-bench-}" "$java" "$other"
  done
  sleep "$interval"
done

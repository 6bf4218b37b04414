#!/usr/bin/env bash
# Samples, every 2 s, each capped DC's CPU group (bench/cap-dcs.py, cgroup v1): the periods it ran in, the periods
# it was throttled in (it wanted more than its share), and the CPU ticks (1/100 s) of the processes in it.
# Output lines: UNIX-TIME dcN PERIODS THROTTLED THROTTLED-NS TICKS. Run beside `bench/letting-it-be.sh
# --dc-cpu-share S`; stop it with a signal. (Ticks of a process drop out when it exits: use differences within
# one target's measured window only.)
while true; do
  t=$(date +%s.%N)
  for g in 0 1; do
    d=/sys/fs/cgroup/cpu/causet-bench-dc$g
    [ -d "$d" ] || continue
    stat=$(awk '/^nr_periods/{p=$2} /^nr_throttled/{n=$2} /^throttled_time/{s=$2} END{print p, n, s}' "$d/cpu.stat")
    ticks=0
    for p in $(cat "$d/cgroup.procs" 2>/dev/null); do
      x=$(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null)
      ticks=$((ticks + ${x:-0}))
    done
    echo "$t dc$g $stat $ticks"
  done
  sleep 2
done

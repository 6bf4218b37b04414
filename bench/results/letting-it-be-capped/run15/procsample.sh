#!/usr/bin/env bash
# Samples, every 2 s, the CPU ticks (1/100 s) of each capped DC's processes by kind: its Cassandra node (java) and
# its proxy (causet). Output lines: UNIX-TIME dcN JAVA-TICKS PROXY-TICKS. Run beside `bench/letting-it-be.sh
# --dc-cpu-share S`; stop it with a signal. Use differences within one target's measured window only (a process's
# ticks drop out when it exits).
while true; do
  t=$(date +%s.%N)
  for g in 0 1; do
    d=/sys/fs/cgroup/cpu/causet-bench-dc$g
    [ -d "$d" ] || continue
    java=0; proxy=0
    for p in $(cat "$d/cgroup.procs" 2>/dev/null); do
      read -r comm x < <(awk '{print $2, $14+$15}' "/proc/$p/stat" 2>/dev/null) || continue
      case "$comm" in (*java*) java=$((java + ${x:-0})) ;; (*) proxy=$((proxy + ${x:-0})) ;; esac
    done
    echo "$t dc$g $java $proxy"
  done
  sleep 2
done

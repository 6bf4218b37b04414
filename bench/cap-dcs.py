#!/usr/bin/env python3
"""Caps each DC's processes of a local cluster at a share of one core (cgroups; needs root), as if each DC ran on
its own machine: otherwise, on a shared machine, the DCs that serve everything locally take the CPU the others
wait for. Usage: bench/cap-dcs.py CLUSTER_DIR/cluster.json SHARE"""
import json, os, sys

cluster, share = json.load(open(sys.argv[1])), float(sys.argv[2])
v1 = os.path.isdir("/sys/fs/cgroup/cpu")
for node in cluster["nodes"]:
    group = f"/sys/fs/cgroup/{'cpu/' if v1 else ''}causet-bench-dc{node['dc']}"
    os.makedirs(group, exist_ok=True)
    if v1:
        open(f"{group}/cpu.cfs_period_us", "w").write("100000")
        open(f"{group}/cpu.cfs_quota_us", "w").write(str(int(share * 100000)))
    else:
        open(f"{group}/cpu.max", "w").write(f"{int(share * 100000)} 100000")
    open(f"{group}/cgroup.procs", "w").write(str(node["pid"]))

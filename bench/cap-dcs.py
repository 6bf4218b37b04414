#!/usr/bin/env python3
"""Caps each DC's processes of a local cluster at a share of one core (cgroups; needs root), as if each DC ran on
its own machine: otherwise, on a shared machine, the DCs that serve everything locally take the CPU the others
wait for. Two forms:

    bench/cap-dcs.py CLUSTER_DIR/cluster.json SHARE     every node of a Causet cluster, in its DC's group
    bench/cap-dcs.py --pid PID --dc DC SHARE            one process (a Cassandra node, a proxy), in DC's group

Processes of one DC share one group (causet-bench-dc<DC>), and so one share."""
import json, os, sys


def cap(pid, dc, share):
    v1 = os.path.isdir("/sys/fs/cgroup/cpu")
    group = f"/sys/fs/cgroup/{'cpu/' if v1 else ''}causet-bench-dc{dc}"
    os.makedirs(group, exist_ok=True)
    if v1:
        open(f"{group}/cpu.cfs_period_us", "w").write("100000")
        open(f"{group}/cpu.cfs_quota_us", "w").write(str(int(share * 100000)))
    else:
        open(f"{group}/cpu.max", "w").write(f"{int(share * 100000)} 100000")
    # cgroup.procs moves the whole process, every thread of a JVM included.
    open(f"{group}/cgroup.procs", "w").write(str(pid))


args = sys.argv[1:]
if len(args) == 5 and args[0] == "--pid" and args[2] == "--dc":
    cap(int(args[1]), int(args[3]), float(args[4]))
elif len(args) == 2:
    cluster, share = json.load(open(args[0])), float(args[1])
    for node in cluster["nodes"]:
        cap(node["pid"], node["dc"], share)
else:
    sys.exit(__doc__)

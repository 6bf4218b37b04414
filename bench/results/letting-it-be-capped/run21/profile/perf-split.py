#!/usr/bin/env python3
"""Splits the perf samples of both Cassandra nodes over each target's measured window (run 21).

    perf-split.py OUT target...

For each target: OUT/r1-<target>.perf.data and OUT/r1-<target>.pids (perf.sh: every CPU, the nodes' pids), and OUT/r1-<target>/report.json (the 50% point's
window_start_unix_s, measured_s and committed transactions). Samples are counted by thread (its name without its
number) and by where the sampled code lives: the kernel, libjvm (the JVM itself: garbage collection, the JIT
compilers, the interpreter, runtime calls), code without a file (JIT-compiled Java), and other libraries; per
1,000 transactions, at perf's 99 samples a second per CPU (about 10 ms of CPU each).
"""
import collections, json, os, re, subprocess, sys

out, targets = sys.argv[1], sys.argv[2:]

def pool(name):
    return re.sub(r"[-:#_ ]?\d+$", "", name).strip()

def where(dso):
    if "kernel" in dso:
        return "kernel"
    if "libjvm" in dso:
        return "libjvm (GC, JIT compilers, runtime)"
    if dso in ("[unknown]", "") or "perf-" in dso or "anon" in dso:
        return "JIT-compiled Java"
    return "other: " + os.path.basename(dso.strip("()"))

rows = {}
for target in targets:
    run = json.load(open(os.path.join(out, f"r1-{target}", "report.json")))["runs"][0]
    start, duration, txns = run["window_start_unix_s"], run["measured_s"], run["committed"]
    pids = set(open(os.path.join(out, f"r1-{target}.pids")).read().split())
    text = subprocess.run(["perf", "script", "-i", os.path.join(out, f"r1-{target}.perf.data"), "-F", "pid,comm,time,ip,dso"],
                          capture_output=True, text=True, check=True).stdout
    pools, places, n = collections.Counter(), collections.Counter(), 0
    for line in text.splitlines():
        m = re.match(r"\s*(.*?)\s+(\d+)\s+(\d+\.\d+):\s*(?:\S+\s+)?\((.*)\)\s*$", line)
        if not m or m.group(2) not in pids:
            continue
        comm, t, dso = m.group(1), float(m.group(3)), m.group(4)
        if not (start <= t <= start + duration):
            continue
        n += 1
        pools[pool(comm)] += 1
        places[where(dso)] += 1
    rows[target] = (txns, duration, pools, places, n)

for title, idx in (("by where the code lives", 3), ("by thread", 2)):
    print(f"\n### Samples per 1,000 transactions, {title}\n")
    names = sorted({k for r in rows.values() for k in r[idx]}, key=lambda k: -max(r[idx][k] / r[0] for r in rows.values()))
    print("| " + " | ".join(["what"] + targets) + " |")
    print("|" + "---|" * (len(targets) + 1))
    for name in names:
        vals = [rows[t][idx][name] * 1000 / rows[t][0] for t in targets]
        if max(vals) < 0.5:
            continue
        print("| " + " | ".join([name] + [f"{v:.1f}" for v in vals]) + " |")
    print("| **all** | " + " | ".join(f"**{rows[t][4] * 1000 / rows[t][0]:.1f}**" for t in targets) + " |")
print()
for t in targets:
    txns, duration, _, _, n = rows[t]
    print(f"{t}: {txns} transactions in {duration} s, {n} samples in the window")

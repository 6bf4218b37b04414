#!/usr/bin/env python3
"""Reads procsample.sh's samples and the timestamped output of bench/letting-it-be.sh (each line prefixed with the
UNIX time it was printed). For each target and point, each DC's CPU (cores) split between its Cassandra node and its
proxy over the measured window, and the CPU per transaction. The windows are found as in run 14's cganalyze.py:
the 5% point is the last 20 s of the bench, the 50% point the 20 s before the dip in CPU that separates the points.
Usage: procanalyze.py SAMPLES LOG"""
import re, sys

samples, log = sys.argv[1], sys.argv[2]
rows = {}
for line in open(samples):
    t, dc, java, proxy = line.split()
    rows.setdefault(dc, []).append((float(t), int(java), int(proxy)))
dcs = sorted(rows)
n = min(len(rows[dc]) for dc in dcs)

starts, ends, txn = [], [], {}
target = None
for line in open(log):
    t, _, rest = line.partition(" ")
    m = re.search(r"\] (r\d+-[\w-]+): causet bench", rest)
    if m:
        target = m.group(1)
        starts.append((target, float(t)))
    if rest.startswith("causet bench: workload"):
        ends.append(float(t))
    m = re.match(r"existing \d/\d \((\d+)% updates.*?\): (\d+) txn/s", rest)
    if m and target:
        txn[(target, m.group(1))] = int(m.group(2))


def steps(t0, t1):
    out = []
    for i in range(1, n):
        t = rows[dcs[0]][i][0]
        if not t0 <= t <= t1:
            continue
        per = {}
        for dc in dcs:
            a, b = rows[dc][i - 1], rows[dc][i]
            dt = b[0] - a[0]
            per[dc] = ((b[1] - a[1]) / 100.0 / dt, (b[2] - a[2]) / 100.0 / dt)
        if all(j >= 0 and p >= 0 for j, p in per.values()):
            out.append((t, per))
    return out


print("| target | updates | txn/s | " + " | ".join(f"{dc} Cassandra · proxy (cores)" for dc in dcs)
      + " | Cassandra µs per txn | proxies µs per txn |")
print("|---|---|---:|" + "---|" * len(dcs) + "---:|---:|")
for (target, t0), t1 in zip(starts, ends):
    timeline = steps(t0, t1)
    total = lambda s: sum(j + p for j, p in s[1].values())
    before = [s for s in timeline if t1 - 36 <= s[0] < t1 - 24]
    dip = min(before, key=total)[0]
    for point, window in (("50", [s for s in timeline if dip - 21 <= s[0] < dip - 1]),
                          ("5", [s for s in timeline if s[0] >= t1 - 21])):
        m = {dc: (sum(s[1][dc][0] for s in window) / len(window), sum(s[1][dc][1] for s in window) / len(window))
             for dc in dcs}
        x = txn.get((target, point), 0)
        if not x:
            continue
        java = sum(j for j, _ in m.values()) * 1e6 / x
        proxy = sum(p for _, p in m.values()) * 1e6 / x
        print(f"| {target} | {point}% | {x:,} | " + " | ".join(f"{m[dc][0]:.2f} · {m[dc][1]:.2f}" for dc in dcs)
              + f" | {java:.0f} | {proxy:.0f} |")

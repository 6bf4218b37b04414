#!/usr/bin/env python3
"""Reads cgsample.sh's samples and the timestamped output of bench/letting-it-be.sh (each line prefixed with the UNIX
time it was printed; the script prints a target's results only when its `causet bench` ends). For each target it
prints the timeline of each DC's CPU (cores) and throttled periods, 2 s a row, from the bench's start, and then each
DC's mean over the two measured windows: the 5% point is the last 25 s of the bench (5 s warm-up, 20 s measured),
the 50% point the 25 s before the dip in CPU that separates the two points (the script lets the proxies settle
between points). The windows are found from the timeline; check them against it.
Usage: cganalyze.py SAMPLES LOG"""
import re, sys

samples, log = sys.argv[1], sys.argv[2]
rows = {}
for line in open(samples):
    t, dc, periods, thr, _ns, ticks = line.split()
    rows.setdefault(dc, []).append((float(t), int(periods), int(thr), int(ticks)))
dcs = sorted(rows)

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
    """(time, {dc: (cores, throttled, periods)}) for each sample interval inside [t0, t1]."""
    out = []
    for i in range(1, len(rows[dcs[0]])):
        t = rows[dcs[0]][i][0]
        if not t0 <= t <= t1:
            continue
        per = {}
        for dc in dcs:
            a, b = rows[dc][i - 1], rows[dc][i]
            per[dc] = ((b[3] - a[3]) / 100.0 / (b[0] - a[0]), b[2] - a[2], b[1] - a[1])
        if all(c >= 0 for c, _, _ in per.values()):  # a process exited inside the interval: skip it
            out.append((t, per))
    return out


def mean(window):
    return {dc: (sum(p[dc][0] for _, p in window) / len(window),
                 sum(p[dc][1] for _, p in window) / max(1, sum(p[dc][2] for _, p in window))) for dc in dcs}


summary = []
for (target, t0), t1 in zip(starts, ends):
    timeline = steps(t0, t1)
    print(f"## {target}: CPU per DC (cores, throttled/periods), seconds from the bench's start")
    for t, per in timeline:
        print(f"{t - t0:6.1f} " + "  ".join(f"{dc} {c:4.2f} {n:2d}/{p:2d}" for dc, (c, n, p) in per.items()))
    five = [s for s in timeline if s[0] >= t1 - 21]
    total = lambda s: sum(c for c, _, _ in s[1].values())
    # The dip: the interval of least total CPU in the 15 s before the 5% point's window.
    before = [s for s in timeline if t1 - 36 <= s[0] < t1 - 24]
    dip = min(before, key=total)[0]
    print(f"(the 50% point: {dip - 21 - t0:.0f}-{dip - 1 - t0:.0f} s; the 5% point: {t1 - 21 - t0:.0f}-{t1 - t0:.0f} s)")
    fifty = [s for s in timeline if dip - 21 <= s[0] < dip - 1]
    for point, window in (("50", fifty), ("5", five)):
        m = mean(window)
        cores = sum(c for c, _ in m.values())
        n = txn.get((target, point), 0)
        summary.append(f"| {target} | {point}% | {n:,} | " + " | ".join(f"{m[dc][0]:.2f} ({m[dc][1]:.0%})" for dc in dcs)
                       + f" | {cores * 1000 / n:.3f} |" if n else "")
print()
print("| target | updates | txn/s | " + " | ".join(f"{dc} cores (periods throttled)" for dc in dcs)
      + " | CPU ms per transaction (both DCs) |")
print("|---|---|---:|" + "---:|" * len(dcs) + "---:|")
print("\n".join(summary))

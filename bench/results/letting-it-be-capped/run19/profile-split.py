#!/usr/bin/env python3
"""Splits the JFR execution samples of both Cassandra nodes over each target's measured window (run 19).

    profile-split.py OUT target...

For each target: OUT/r1-<target>.node{1,2}.jfr and OUT/r1-<target>/report.json (the 50% point's
window_start_unix_s, duration and committed transactions). Samples are counted by thread pool (the thread's
name without its number) and, for the request threads, by what the stack is doing; per 1,000 transactions.
"""
import collections, datetime, json, os, re, subprocess, sys

out, targets = sys.argv[1], sys.argv[2:]

def samples(path, day):
    # `jfr print` gives the time of day (UTC here) only: `day` is the measured window's date (no run crosses midnight).
    text = subprocess.run(["jfr", "print", "--events", "jdk.ExecutionSample", "--stack-depth", "64", path],
                          capture_output=True, text=True, check=True).stdout
    for event in text.split("jdk.ExecutionSample {")[1:]:
        m = re.search(r"startTime = (\d+):(\d+):([\d.]+)", event)
        if not m:
            continue
        h, mi, s = m.groups()
        t = datetime.datetime(day.year, day.month, day.day, int(h), int(mi), tzinfo=datetime.timezone.utc).timestamp() + float(s)
        thread = re.search(r'sampledThread = "([^"]*)"', event)
        yield t, thread.group(1) if thread else "?", event

def pool(name):
    return re.sub(r"[-:#]?\d+$", "", name)

KINDS = [  # first match wins, in stack order from the top frame down to the thread's root
    ("compaction", "org.apache.cassandra.db.compaction"),
    ("flush", "Memtable.flush"),
    ("read", "ReadCommand"),
    ("read", "SinglePartitionReadQuery"),
    ("write", "Keyspace.apply"),
    ("write", "Mutation.apply"),
    ("write", "ModificationStatement"),
    ("cql", "org.apache.cassandra.cql3"),
    ("transport", "org.apache.cassandra.transport"),
    ("net", "org.apache.cassandra.net"),
    ("netty", "io.netty"),
]

def kind(event):
    frames = re.findall(r"^\s+([\w.$<>]+)\(", event, re.M)
    for label, needle in KINDS:
        if any(needle in f for f in frames):
            return label
    return "other"

rows = {}
for target in targets:
    report = json.load(open(os.path.join(out, f"r1-{target}", "report.json")))
    run = report["runs"][0]  # the one point: 50% updates
    start, duration, txns = run["window_start_unix_s"], run["measured_s"], run["committed"]
    pools, kinds = collections.Counter(), collections.Counter()
    for node in (1, 2):
        day = datetime.datetime.fromtimestamp(start, datetime.timezone.utc).date()
        for t, thread, event in samples(os.path.join(out, f"r1-{target}.node{node}.jfr"), day):
            if start <= t <= start + duration:
                pools[pool(thread)] += 1
                kinds[kind(event)] += 1
    rows[target] = (txns, duration, pools, kinds)

for title, idx in (("by thread pool", 2), ("by what the stack is doing (every thread)", 3)):
    print(f"\n### Samples per 1,000 transactions, {title}\n")
    names = sorted({k for r in rows.values() for k in r[idx]}, key=lambda k: -max(r[idx][k] / r[0] for r in rows.values()))
    print("| " + " | ".join(["what"] + targets) + " |")
    print("|" + "---|" * (len(targets) + 1))
    for n in names:
        vals = [rows[t][idx][n] * 1000 / rows[t][0] for t in targets]
        if max(vals) < 0.5:
            continue
        print("| " + " | ".join([n] + [f"{v:.1f}" for v in vals]) + " |")
    print("| **all** | " + " | ".join(f"**{sum(rows[t][idx].values()) * 1000 / rows[t][0]:.1f}**" for t in targets) + " |")
print()
for t in targets:
    txns, duration, pools, _ = rows[t]
    print(f"{t}: {txns} transactions in {duration} s, {sum(pools.values())} samples")

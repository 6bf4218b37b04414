#!/usr/bin/env python3
"""The summary of bench/karma.sh: every point of the sweep, and each placement at its point of highest throughput.

Usage: karma-summary.py OUT REPEAT RATIOS WARMUP_S VARIANTS SESSIONS
(RATIOS, VARIANTS and SESSIONS space-separated, as bench/karma.sh passes them). Reads OUT/<ratio>-<variant>-s<sessions>-<n>/
{report.json,metrics.json}; writes OUT/summary.md and prints it.
"""
import json
import pathlib
import statistics
import sys

out, repeat, ratios, warmup = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(), float(sys.argv[4])
variants, sessions_list = sys.argv[5].split(), [int(s) for s in sys.argv[6].split()]
if "cops-pr" not in variants:
    sys.exit("karma-summary: the ratios are to cops-pr, which is not among the variants")


def load(ratio, variant, sessions, n):
    d = out / f"{ratio}-{variant}-s{sessions}-{n}"
    report = json.load(open(d / "report.json"))
    metrics = json.load(open(d / "metrics.json"))
    r = report["runs"][0]
    measured = r["measured_s"]
    stored = {int(dc): m["stored_objects"] for dc, m in metrics.items()}
    # A DC holds everything when it stores as many objects as the DC that stores most (Brazil, a ring of its own;
    # every DC under full replication); the others read some objects from other DCs.
    most = max(stored.values())
    whole = {dc for dc, n in stored.items() if n >= 0.99 * most}
    by_dc = [c / measured for c in r.get("committed_by_dc", [])]
    # Reads over warm-up and measurement (the counters run over both), at the measured rate.
    reads = r["throughput_per_s"] * (measured + warmup) * (1 - float(ratio))
    cache = r.get("cache_reads", {})
    cache_reads = sum(cache.values())
    return {
        "tput": r["throughput_per_s"],
        # None where no DC reads elsewhere (full replication).
        "elsewhere": sum(t for dc, t in enumerate(by_dc) if dc not in whole) if len(whole) < len(stored) else None,
        "whole": sum(t for dc, t in enumerate(by_dc) if dc in whole) if by_dc else float("nan"),
        "whole_dcs": sorted(whole),
        "p50": r["latency"]["p50_us"] / 1000,
        "p99": r["latency"]["p99_us"] / 1000,
        "stored": sum(stored.values()),
        "wan": sum(m["wan_bytes"] for m in metrics.values()) / 1e6,
        "hits": sum(m["cache_hits"] for m in metrics.values()),
        "hit_share": cache.get("hit", 0) / cache_reads if cache_reads else None,
        "shipped": sum(m["shipped_writes"] for m in metrics.values()),
        "shipped_mb": sum(m["shipped_bytes"] for m in metrics.values()) / 1e6,
        # Writes committed: the preload's one per key, then the run's (warm-up at the measured rate).
        "writes": 100000 + r["throughput_per_s"] * (measured + warmup) * float(ratio),
        "local": 1 - sum(m["remote_reads"] for m in metrics.values()) / reads if reads else None,
    }


def med(runs, key):
    values = [x[key] for x in runs if x[key] is not None]
    return statistics.median(values) if values else None


def pct(x):
    return "n/a" if x is None else f"{x:.0%}"


points = {(ratio, v, s): [load(ratio, v, s, n) for n in range(1, repeat + 1)]
          for ratio in ratios for v in variants for s in sessions_list}
whole_dcs = points[(ratios[0], "cops-pr", sessions_list[0])][0]["whole_dcs"]
lines = [
    "# Karma: one copy per ring against full replication, on eight DCs with AWS latencies", "",
    f"8 DCs of one node each (bench/wan/aws-8dc.toml), rings [[0-3], [4-6], [7]], 12 partitions, the `karma` workload "
    f"(single-key operations, zipfian, 200-byte LWW registers), closed loop; each point the median of {repeat} "
    f"run{'s' if repeat > 1 else ''}, the placements alternating, each on a fresh cluster.", "",
    "## Every point", "",
    "Throughput of all sessions, and of the sessions of the DCs that read objects held elsewhere (every DC but "
    f"{', '.join(map(str, whole_dcs)) or 'none'} under rings) and of those that hold everything. Ratios are to cops-pr "
    "at the same number of sessions. Hit share: reads through the caches served from them in the measured window.", "",
    "| updates | placement | sessions per DC | txn/s | vs cops-pr | DCs reading elsewhere, txn/s | vs cops-pr | "
    "DCs holding everything, txn/s | p50 ms | p99 ms | cache hit share |",
    "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]
for ratio in ratios:
    for s in sessions_list:
        base = points[(ratio, "cops-pr", s)]
        for v in variants:
            runs = points[(ratio, v, s)]
            e = med(runs, "elsewhere")
            elsewhere = "— | —" if e is None else f"{e:.0f} | {e / med(base, 'elsewhere'):.2f}"
            lines.append(
                f"| {float(ratio):.0%} | {v} | {s} | {med(runs, 'tput'):.0f} | {med(runs, 'tput') / med(base, 'tput'):.2f} | "
                f"{elsewhere} | {med(runs, 'whole'):.0f} | {med(runs, 'p50'):.1f} | {med(runs, 'p99'):.1f} | "
                f"{pct(med(runs, 'hit_share'))} |")
lines += [
    "", "## Each placement at its highest throughput", "",
    "The point of the sweep where each placement's median throughput was highest (the paper raised its client "
    "threads until the system saturated). Local reads: reads not sent to another DC (held here, or served by the "
    "cache), estimated as 1 - remote reads / (the measured rate × (warm-up + measurement) × read share). Stored: "
    "objects over all DCs at the end (the preload writes every key once). Shipped: writes sent to other DCs (once per "
    "DC) over the whole run, preload included, and their encoded bytes; per write: shipped writes / writes committed "
    "(the preload's 100,000 and the run's). Link MB: every byte on the links between DCs, heartbeats and remote reads "
    "included, all DCs summed.", "",
    "| updates | placement | sessions per DC | txn/s | vs cops-pr | p50 ms | p99 ms | local reads | stored objects | "
    "shipped writes | shipped MB | copies per write | link MB | cache hits |",
    "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]
for ratio in ratios:
    best = {v: max(sessions_list, key=lambda s: med(points[(ratio, v, s)], "tput")) for v in variants}
    base = med(points[(ratio, "cops-pr", best["cops-pr"])], "tput")
    for v in variants:
        runs = points[(ratio, v, best[v])]
        copies = statistics.median(x["shipped"] / x["writes"] for x in runs)
        lines.append(
            f"| {float(ratio):.0%} | {v} | {best[v]} | {med(runs, 'tput'):.0f} | {med(runs, 'tput') / base:.2f} | "
            f"{med(runs, 'p50'):.1f} | {med(runs, 'p99'):.1f} | {pct(med(runs, 'local'))} | {med(runs, 'stored'):.0f} | "
            f"{med(runs, 'shipped'):.0f} | {med(runs, 'shipped_mb'):.1f} | {copies:.2f} | {med(runs, 'wan'):.1f} | "
            f"{med(runs, 'hits'):.0f} |")
    if max(best.values()) == sessions_list[-1]:
        lines.append("")
        lines.append(f"(At {float(ratio):.0%} updates some placement was fastest at the sweep's largest point: it may "
                     "not have saturated.)")
(out / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))

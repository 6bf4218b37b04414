#!/usr/bin/env python3
"""Each capped DC's CPU over each benchmark point's measured window, split between Java (a Cassandra node) and the
rest (a proxy or a Causet node), and the CPU per committed transaction: the samples of bench/cpu-sample.sh cut to
the windows that `causet bench` records in report.json (`window_start_unix_s`, `measured_s`).

    bench/cpu-split.py SAMPLES DIR    (every DIR/*/report.json, in the order the points ran; Markdown on stdout)

A process that starts or exits inside a window makes its DC's counts drop: such steps are left out, as are windows
with fewer than two samples (the line says so)."""
import glob, json, os, sys

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def load_samples(path):
    rows = {}
    for line in open(path):
        parts = line.split()
        if len(parts) != 4:
            continue
        t, dc, java, other = parts
        rows.setdefault(dc, []).append((float(t), int(java), int(other)))
    return rows


def window_rates(rows, t0, t1):
    """Mean cores (Java, other) per DC over the steps between samples inside [t0, t1]."""
    out = {}
    for dc, samples in rows.items():
        inside = [s for s in samples if t0 <= s[0] <= t1]
        java = other = span = 0.0
        for a, b in zip(inside, inside[1:]):
            dj, do = b[1] - a[1], b[2] - a[2]
            if dj < 0 or do < 0:
                continue
            java, other, span = java + dj, other + do, span + b[0] - a[0]
        if span > 0:
            out[dc] = (java / CLK_TCK / span, other / CLK_TCK / span)
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = load_samples(sys.argv[1])
    dcs = sorted(rows)
    points = []
    for path in glob.glob(os.path.join(sys.argv[2], "*", "report.json")):
        name = os.path.basename(os.path.dirname(path))
        for run in json.load(open(path)).get("runs", []):
            start = run.get("window_start_unix_s", 0)
            if start > 0:
                points.append((start, name, run))
    points.sort(key=lambda p: p[0])
    print("| target | updates | txn/s | " + " | ".join(f"{dc}: Java · other (cores)" for dc in dcs)
          + " | Java µs per txn | other µs per txn |")
    print("|---|---:|---:|" + "---|" * len(dcs) + "---:|---:|")
    for start, name, run in points:
        rates = window_rates(rows, start, start + run["measured_s"])
        txn = run["throughput_per_s"]
        updates = f"{run['point']['update_ratio'] * 100:g}%"
        if len(rates) < len(dcs) or not dcs or txn <= 0:
            print(f"| {name} | {updates} | {txn:,.0f} | " + " | ".join("no samples" for _ in dcs) + " | | |")
            continue
        java = sum(j for j, _ in rates.values()) * 1e6 / txn
        other = sum(o for _, o in rates.values()) * 1e6 / txn
        print(f"| {name} | {updates} | {txn:,.0f} | "
              + " | ".join(f"{rates[dc][0]:.2f} · {rates[dc][1]:.2f}" for dc in dcs)
              + f" | {java:.0f} | {other:.0f} |")


if __name__ == "__main__":
    main()

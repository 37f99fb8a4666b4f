#!/usr/bin/env python3
"""Draws the server comparison (Benchmarks/server-compare.sh's results.json, one or more runs)
as a chart: for each body size and kind (hits, misses), each server's requests/s over nginx's
in the same run, the median over the runs given, with every run's ratio as a dot.

    Benchmarks/server-chart.py docs/benchmarks-server.png RUN1/results.json [RUN2/results.json ...]

Needs matplotlib (pip install matplotlib).
"""
import json
import statistics
import sys


def ratios(runs):
    """{(size, kind, subject): [rps / nginx's rps, one per run]}, a run's rounds (ROUNDS)
    taken at their median"""
    out = {}
    for rows in runs:
        rounds = {}
        for r in rows:
            rounds.setdefault((r["subject"], r["size"], r["kind"]), []).append(r["rps"])
        by = {key: statistics.median(values) for key, values in rounds.items()}
        for (subject, size, kind), rps in by.items():
            nginx = by.get(("nginx", size, kind))
            if nginx:
                out.setdefault((size, kind, subject), []).append(rps / nginx)
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("server-chart: matplotlib is missing (pip install matplotlib): no chart drawn")
    runs = [json.load(open(path)) for path in sys.argv[2:]]
    found = ratios(runs)
    sizes = [s for s in ("1k", "64k", "1m") if any(k[0] == s for k in found)]
    groups = [(size, kind) for size in sizes for kind in ("hits", "misses")]
    subjects = [("ours", "diskcache-server", "#1f77b4"), ("nginx", "nginx proxy_cache", "#7f7f7f"),
                ("varnish", "Varnish (file storage)", "#ff7f0e")]
    width = 0.26
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for i, (subject, label, color) in enumerate(subjects):
        xs, medians = [], []
        for g, (size, kind) in enumerate(groups):
            values = found.get((size, kind, subject), [])
            if not values:
                continue
            x = g + (i - 1) * width
            xs.append(x)
            medians.append(statistics.median(values))
            ax.scatter([x] * len(values), values, color="black", s=8, zorder=3)
        ax.bar(xs, medians, width, label=label, color=color)
    ax.axhline(1.0, color="black", linewidth=0.6)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{size.upper()}B {kind}" for size, kind in groups])
    ax.set_ylabel("requests/s ÷ nginx's (same run)")
    ax.set_title(f"Caching proxies on loopback, wrk -t2 -c16 ({len(runs)} run{'s' if len(runs) > 1 else ''}; bars: median, dots: runs)")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=110)
    print(f"server-chart: wrote {sys.argv[1]}", file=sys.stderr)


if __name__ == "__main__":
    main()

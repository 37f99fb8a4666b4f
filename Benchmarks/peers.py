#!/usr/bin/env python3
"""Peers for Benchmarks/compare-peers.sh: python-diskcache on the workload `diskcache bench` ran
(same keys, body sizes, entry counts and phase durations), and the report that puts it beside
our store, the raw-file floor, SQLite and Foundation's URLCache, which the bench measures itself
in its own process (SQLite through its C API, so no interpreter stands between it and the disk).

    peers.py run  --bench ours.json --out peers.json --dir /tmp/x
    peers.py report --ours ours-1.json ours-2.json ... --peers peers-1.json ... \
        --markdown docs/benchmarks.md --chart docs/benchmarks-throughput.png --command "..."
"""

import argparse
import collections
import json
import os
import random
import shutil
import statistics
import sys
import time

KEY = "https://example.com/resource/{}"


def label(size):
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20}M"
    if size >= 1 << 10 and size % (1 << 10) == 0:
        return f"{size >> 10}K"
    return str(size)


# ---------------------------------------------------------------------------------------------
# Peers


class PythonDiskCachePeer:
    """python-diskcache's Cache with its defaults (SQLite index in WAL mode with
    synchronous=NORMAL; values over 32 KiB in their own files), no size limit in the way."""

    name = "python-diskcache"

    def __init__(self, directory):
        import diskcache  # pip install diskcache

        self.cache = diskcache.Cache(directory, size_limit=1 << 40)

    def put(self, key, value):
        self.cache.set(key, value)

    def get(self, key):
        return self.cache.get(key)

    def close(self):
        self.cache.close()


def zipf_sampler(count, exponent, rng):
    weights = [1.0 / (rank + 1) ** exponent for rank in range(count)]
    total = sum(weights)
    cdf, acc = [], 0.0
    for w in weights:
        acc += w / total
        cdf.append(acc)
    order = list(range(count))
    rng.shuffle(order)
    import bisect

    def draw():
        return order[min(count - 1, bisect.bisect_left(cdf, rng.random()))]

    return draw


def percentiles(latencies_ns):
    if not latencies_ns:
        return None, None, None
    s = sorted(latencies_ns)
    def at(q):
        import math
        return s[max(0, min(len(s) - 1, math.ceil(len(s) * q) - 1))] / 1000.0
    return at(0.5), at(0.99), s[-1] / 1000.0


def measure(fn, count=None, seconds=None):
    latencies = []
    moved = 0
    clock = time.perf_counter_ns
    start = clock()
    deadline = start + int(seconds * 1e9) if seconds else None
    n = 0
    while True:
        if count is not None and n >= count:
            break
        before = clock()
        if deadline is not None and before >= deadline:
            break
        moved += fn(n)
        latencies.append(clock() - before)
        n += 1
    elapsed = (clock() - start) / 1e9
    p50, p99, pmax = percentiles(latencies)
    return {"operations": n, "seconds": elapsed, "opsPerSecond": n / elapsed if elapsed else 0.0,
            "megabytesPerSecond": moved / elapsed / 1e6 if elapsed else 0.0,
            "p50Microseconds": p50, "p99Microseconds": p99, "maxMicroseconds": pmax}


def run_peer(peer_class, directory, size, count, seconds, zipf_exponent, seed):
    shutil.rmtree(directory, ignore_errors=True)
    peer = peer_class(directory)
    rng = random.Random(seed ^ size)
    body = rng.randbytes(size)
    keys = [KEY.format(i) for i in range(count)]
    rows = []
    put = measure(lambda n: (peer.put(keys[n], body), size)[1], count=count)
    rows.append(("put", put))
    get_rng = random.Random(seed + 1)
    misses = [0]

    def get(_):
        value = peer.get(keys[get_rng.randrange(count)])
        if value is None:
            misses[0] += 1
            return 0
        return len(value)

    rows.append(("get", measure(get, seconds=seconds)))
    mixed_rng = random.Random(seed + 2)
    draw = zipf_sampler(count, zipf_exponent, mixed_rng)

    def mixed(_):
        key = keys[draw()]
        if mixed_rng.randrange(10) == 0:
            peer.put(key, body)
            return size
        value = peer.get(key)
        return 0 if value is None else len(value)

    rows.append(("mixed", measure(mixed, seconds=seconds)))
    peer.close()
    shutil.rmtree(directory, ignore_errors=True)
    result = []
    for op, m in rows:
        row = {"size": size, "operation": op, "subject": peer_class.name, "entries": count, "threads": 1}
        row.update(m)
        if op == "get" and misses[0]:
            row["note"] = f"{misses[0]} misses"
        result.append(row)
    return result


def command_run(args):
    with open(args.bench) as f:
        bench = json.load(f)
    settings = bench["settings"]
    rows = []
    for size in settings["sizes"]:
        count = settings["entriesPerSize"][label(size)]
        for peer_class in (PythonDiskCachePeer,):
            print(f"peers: {label(size)} x {count} {peer_class.name}", file=sys.stderr, flush=True)
            rows += run_peer(peer_class, os.path.join(args.dir, f"{peer_class.name}-{label(size)}"), size, count,
                             settings["durationSeconds"], settings["zipfExponent"], settings["seed"])
    import diskcache
    out = {"python": sys.version.split()[0], "pythonDiskcache": diskcache.__version__, "rows": rows}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


# ---------------------------------------------------------------------------------------------
# Report

BEGIN = "<!-- peers:begin (written by Benchmarks/compare-peers.sh; edits inside are overwritten) -->"
END = "<!-- peers:end -->"


def fmt_rate(v):
    if v is None:
        return "–"
    if v >= 1e6:
        return f"{v / 1e6:.2f} M"
    if v >= 1e4:
        return f"{v / 1e3:.1f} k"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.1f}"


def fmt_ratio(v):
    if v is None:
        return "–"
    if v >= 10:
        return f"{v:.0f}×"
    return f"{v:.2f}×"


def fmt_us(v):
    if v is None:
        return "–"
    if v >= 1000:
        return f"{v / 1000:.1f} ms"
    return f"{v:.1f} µs"


def command_report(args):
    ours_runs = [json.load(open(p)) for p in args.ours]
    peer_runs = [json.load(open(p)) for p in args.peers]
    first = ours_runs[0]
    settings = first["settings"]
    machine = first["machine"]
    sizes = settings["sizes"]
    ucount = settings.get("urlcacheEntries")

    # Median over runs, per (size, op, subject, entries, group). The group keeps apart our
    # store's rows measured beside URLCache (they carry ratioToURLCache) from its main rows:
    # where URLCache's N equals the main N (256K and 4M by default) they would otherwise be
    # pooled into one median with rows of another phase.
    samples = {}
    def group_of(row):
        return "urlcache" if row["subject"] == "urlcache" or "ratioToURLCache" in row else "main"
    def collect(row):
        key = (row["size"], row["operation"], row["subject"], row["entries"], group_of(row))
        samples.setdefault(key, []).append(row)
    for run in ours_runs:
        for row in run["rows"]:
            collect(row)
    for run in peer_runs:
        for row in run["rows"]:
            collect(row)

    def median(size, op, subject, entries, field="opsPerSecond", group="main"):
        rows = samples.get((size, op, subject, entries, group))
        if not rows:
            return None
        values = [r.get(field) for r in rows if r.get(field) is not None]
        return statistics.median(values) if values else None

    lines = [BEGIN, ""]
    lines.append(f"Run on {time.strftime('%Y-%m-%d', time.gmtime())}: {machine['processors']} CPUs ({machine['cpuModel']}), "
                 f"{machine['kernel']}, filesystem {machine['fileSystem']}, "
                 f"{machine['memoryBytes'] / 2**30:.0f} GiB RAM. SQLite {first.get('sqliteVersion', '?')} (C API, in the bench's "
                 f"process), Python {peer_runs[0]['python']}, python-diskcache {peer_runs[0]['pythonDiskcache']}. "
                 f"Median of {len(ours_runs)} runs of each subject, interleaved; one thread; warm page cache; our "
                 f"durability `{settings['durability']}`.")
    floors = {}
    for run in ours_runs:
        for choice in run.get("floors", []):
            floors.setdefault(choice["size"], []).append(choice["description"])
    lines.append("")
    lines.append("Reproduce (from the repository root):")
    lines.append("")
    lines.append("```sh")
    lines.append(args.command)
    lines.append("```")
    lines.append("")
    lines.append("Workload per body size: `put` stores N fresh keys (`https://example.com/resource/<n>`) into an empty "
                 f"store; `get` reads uniformly random keys of those N for {settings['durationSeconds']:g} s; `mixed` is "
                 f"90 % get / 10 % put (replace) on Zipf(s = {settings['zipfExponent']}) keys for the same time. "
                 "N = " + ", ".join(f"{settings['entriesPerSize'][label(s)]} ({label(s)})" for s in sizes) +
                 f"; URLCache runs at N = min(N, {ucount}) and is compared with our store at that same N, in the same process. "
                 "SQLite: one table (key TEXT PRIMARY KEY, value BLOB NOT NULL), WAL, synchronous=NORMAL (FULL when our "
                 "durability is immediate), one autocommit INSERT OR REPLACE per put, measured by `diskcache bench` itself.")
    lines.append("")
    if floors:
        chosen = []
        for size, descriptions in sorted(floors.items()):
            counts = collections.Counter(descriptions).most_common()
            chosen.append(f"{label(size)}: " + ", ".join(f"{d} (in {n} of {len(descriptions)} runs)" for d, n in counts))
        lines.append("The floor is one file per entry holding the body, written the fastest way the bench's probe found "
                     "on this machine at each size: " + "; ".join(chosen) + ".")
        lines.append("")
    lines.append("| size | op | diskcache ops/s | floor ops/s | × floor | SQLite ops/s | × SQLite | python-diskcache ops/s | × python-diskcache | "
                 "URLCache ops/s (N) | × URLCache |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    chart = {}
    wins = []
    for size in sizes:
        n = settings["entriesPerSize"][label(size)]
        un = min(n, ucount) if ucount else None
        for op in ("put", "get", "mixed"):
            ours = median(size, op, "diskcache", n)
            floor = median(size, op, "floor", n)
            sql = median(size, op, "sqlite", n)
            pdc = median(size, op, "python-diskcache", n)
            url = median(size, op, "urlcache", un, group="urlcache") if un else None
            ours_u = median(size, op, "diskcache", un, group="urlcache") if un else None
            ratio = lambda a, b: a / b if a and b else None
            lines.append(f"| {label(size)} | {op} | {fmt_rate(ours)} | {fmt_rate(floor)} | {fmt_ratio(ratio(ours, floor))} | "
                         f"{fmt_rate(sql)} | {fmt_ratio(ratio(ours, sql))} | {fmt_rate(pdc)} | {fmt_ratio(ratio(ours, pdc))} | "
                         f"{fmt_rate(url)} ({un}) | {fmt_ratio(ratio(ours_u, url))} |")
            for subject, value in (("diskcache", ours), ("raw-file floor", floor), ("SQLite (C API)", sql),
                                   ("python-diskcache", pdc), (f"Foundation URLCache (N ≤ {ucount})", url)):
                chart.setdefault((op, subject), []).append((size, value))
            for peer, value in (("SQLite", sql), ("python-diskcache", pdc), ("the raw-file floor", floor)):
                if value and ours and value > ours:
                    wins.append(f"{peer} beats our store at {label(size)} {op}: {fmt_rate(value)} vs {fmt_rate(ours)} ops/s "
                                f"({ours / value:.2f}×).")
    lines.append("")
    lines.append("Latency (median over runs of each run's p50 / p99), microseconds unless marked:")
    lines.append("")
    lines.append("| size | op | diskcache p50 / p99 | floor p50 / p99 | SQLite p50 / p99 | python-diskcache p50 / p99 | URLCache p50 / p99 |")
    lines.append("|---|---|---|---|---|---|---|")
    for size in sizes:
        n = settings["entriesPerSize"][label(size)]
        un = min(n, ucount) if ucount else None
        for op in ("put", "get"):
            cells = []
            for subject, entries in (("diskcache", n), ("floor", n), ("sqlite", n), ("python-diskcache", n), ("urlcache", un)):
                group = "urlcache" if subject == "urlcache" else "main"
                p50 = median(size, op, subject, entries, "p50Microseconds", group)
                p99 = median(size, op, subject, entries, "p99Microseconds", group)
                cells.append(f"{fmt_us(p50)} / {fmt_us(p99)}")
            lines.append(f"| {label(size)} | {op} | " + " | ".join(cells) + " |")
    lines.append("")
    if wins:
        lines.append("Where a peer wins in this run:")
        lines.append("")
        for w in wins:
            lines.append(f"- {w}")
    else:
        lines.append("No peer beat our store on put, get or mixed at any size in this run.")
    lines.append("")
    lines.append(f"![Throughput against body size]({os.path.basename(args.chart)})")
    lines.append("")
    lines.append(END)
    section = "\n".join(lines)

    if os.path.exists(args.markdown):
        text = open(args.markdown).read()
        if BEGIN in text and END in text:
            text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END):]
        else:
            text = text.rstrip("\n") + "\n\n## Side by side with peers\n\n" + section + "\n"
    else:
        text = "# Benchmarks\n\n## Side by side with peers\n\n" + section + "\n"
    with open(args.markdown, "w") as f:
        f.write(text)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing (pip install matplotlib): no chart", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"diskcache": "o-", "raw-file floor": "k--", "SQLite (C API)": "s-", "python-diskcache": "^-"}
    for ax, op in zip(axes, ("put", "get")):
        for (o, subject), points in chart.items():
            if o != op:
                continue
            points = [(s, v) for s, v in points if v]
            if not points:
                continue
            ax.plot([s / 1024 for s, _ in points], [v for _, v in points], styles.get(subject, "x:"), label=subject)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("body size (KiB)")
        ax.set_ylabel("ops/s (one thread)")
        ax.set_title(op)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Throughput against body size, {machine['processors']} CPUs, {machine['fileSystem'].split()[0]}, "
                 f"durability {settings['durability']}, warm page cache", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.chart, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run")
    run.add_argument("--bench", required=True, help="a `diskcache bench --json` output naming the workload")
    run.add_argument("--out", required=True)
    run.add_argument("--dir", required=True, help="scratch directory")
    report = sub.add_parser("report")
    report.add_argument("--ours", nargs="+", required=True)
    report.add_argument("--peers", nargs="+", required=True)
    report.add_argument("--markdown", required=True)
    report.add_argument("--chart", required=True)
    report.add_argument("--command", required=True, help="the command line to print as the way to reproduce")
    args = parser.parse_args()
    command_run(args) if args.action == "run" else command_report(args)


if __name__ == "__main__":
    main()

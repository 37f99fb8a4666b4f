#!/usr/bin/env bash
# Runs, on this machine and in one go, our store (`diskcache bench --json`) with the raw-file
# floor, SQLite (its C API: WAL, synchronous=NORMAL) and Foundation's URLCache, all measured by
# the same bench run in one process, and python-diskcache (Benchmarks/peers.py) on the same
# workload, then rewrites the peers section of docs/benchmarks.md and
# docs/benchmarks-throughput.png.
#
#   Benchmarks/compare-peers.sh [RUNS]          # RUNS (default 3) interleaved runs, medians reported
#
# Needs: python3 with `pip install diskcache matplotlib`. Environment: SCRATCH (build directory,
# default .build-bench), WORK (scratch files, default a new temporary directory), KEEP=1 to
# keep WORK afterwards (the runs' JSON: ours-N.json from diskcache bench, peers-N.json).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
scratch="${SCRATCH:-.build-bench}"
work="${WORK:-$(mktemp -d /tmp/compare-peers-XXXXXX)}"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT

python3 -c 'import diskcache, matplotlib' 2>/dev/null || {
    echo "compare-peers: needs python-diskcache and matplotlib: pip install diskcache matplotlib" >&2
    exit 1
}
swift build -c release --scratch-path "$scratch" --product diskcache >&2
tool="$scratch/release/diskcache"
bench_args=(--json --compare sqlite,urlcache --urlcache-entries 1000)

ours=() peers=()
for run in $(seq 1 "$runs"); do
    echo "compare-peers: run $run of $runs: diskcache bench" >&2
    "$tool" bench "$work/bench" "${bench_args[@]}" > "$work/ours-$run.json"
    echo "compare-peers: run $run of $runs: python-diskcache" >&2
    python3 Benchmarks/peers.py run --bench "$work/ours-$run.json" --out "$work/peers-$run.json" --dir "$work/peers"
    ours+=("$work/ours-$run.json") peers+=("$work/peers-$run.json")
done
python3 Benchmarks/peers.py report --ours "${ours[@]}" --peers "${peers[@]}" \
    --markdown docs/benchmarks.md --chart docs/benchmarks-throughput.png \
    --command "Benchmarks/compare-peers.sh $runs   # diskcache bench ${bench_args[*]}, then Benchmarks/peers.py"
echo "compare-peers: wrote docs/benchmarks.md and docs/benchmarks-throughput.png" >&2

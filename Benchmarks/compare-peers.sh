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
# keep WORK afterwards (the runs' JSON: ours-N.json from diskcache bench, peers-N.json),
# SETTLE_SECONDS (default 370) to wait after a sync before each run.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
scratch="${SCRATCH:-.build-bench}"
work="${WORK:-$(mktemp -d /tmp/compare-peers-XXXXXX)}"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"

python3 -c 'import diskcache, matplotlib' 2>/dev/null || {
    echo "compare-peers: needs python-diskcache and matplotlib: pip install diskcache matplotlib" >&2
    exit 1
}
swift build -c release --scratch-path "$scratch" --product diskcache >&2
tool="$scratch/release/diskcache"
bench_args=(--json --compare sqlite,urlcache --urlcache-entries 1000)

ours=() peers=()
settle() {
    # On ext4 without a journal, a file made within 60 s of a deletion (360 s while that inode's
    # inode-table block is dirty, which the next creations in it make it) pays for every
    # recently freed inode of its group: the previous run's deletions would slow this run's
    # puts, the store's and the floor's but not SQLite's (docs/benchmarks.md). Write everything
    # back, then let more than six minutes pass.
    echo "compare-peers: sync, then ${SETTLE_SECONDS:-370} s for the previous run's deletions to age" >&2
    sync
    sleep "${SETTLE_SECONDS:-370}"
}
for run in $(seq 1 "$runs"); do
    settle
    echo "compare-peers: run $run of $runs: diskcache bench" >&2
    "$tool" bench "$work/bench" "${bench_args[@]}" > "$work/ours-$run.json"
    settle
    echo "compare-peers: run $run of $runs: python-diskcache" >&2
    python3 Benchmarks/peers.py run --bench "$work/ours-$run.json" --out "$work/peers-$run.json" --dir "$work/peers"
    ours+=("$work/ours-$run.json") peers+=("$work/peers-$run.json")
done
python3 Benchmarks/peers.py report --ours "${ours[@]}" --peers "${peers[@]}" \
    --markdown docs/benchmarks.md --chart docs/benchmarks-throughput.png \
    --command "Benchmarks/compare-peers.sh $runs   # diskcache bench ${bench_args[*]}, then Benchmarks/peers.py"
echo "compare-peers: wrote docs/benchmarks.md and docs/benchmarks-throughput.png" >&2

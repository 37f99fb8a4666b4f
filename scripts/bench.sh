#!/usr/bin/env bash
# The main job: builds the diskcache tool (release) and benchmarks disk throughput for cache
# workloads on a temporary cache (removed afterwards). Extra arguments go to `diskcache bench`,
# e.g. `scripts/bench.sh --sizes 4K,1M --json`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
echo "Building diskcache (release)..." >&2
swift build -c release --product diskcache
exec .build/release/diskcache bench "$@"

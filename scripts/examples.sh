#!/usr/bin/env bash
# Builds the example programs (the Examples package, which depends on this one by path) and runs
# each of them: they must compile against the library as it is, and finish without an error.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
examples=(JSONAPICache ThumbnailCache AsyncLookup HummingbirdSessions VaporQuotes CachedDownload)
# SwiftPM passes a package's enabled traits as compiler flags in the order a Set iterates, which
# changes from one run to the next unless hashing is deterministic: a new order of Hummingbird's
# two (`-DConfigurationSupport -DFullFoundation`) recompiles Hummingbird and what depends on it,
# in any of these builds and in scripts/snippets.sh's after them.
for example in "${examples[@]}"; do
    SWIFT_DETERMINISTIC_HASHING=1 swift build --package-path Examples --product "$example"
done
bin="$(SWIFT_DETERMINISTIC_HASHING=1 swift build --package-path Examples --show-bin-path)"
for example in "${examples[@]}"; do
    echo "== $example"
    timeout 120 "$bin/$example"
done

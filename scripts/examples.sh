#!/usr/bin/env bash
# Builds the example programs (the Examples package, which depends on this one by path) and runs
# each of them: they must compile against the library as it is, and finish without an error.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
examples=(JSONAPICache ThumbnailCache AsyncLookup HummingbirdSessions VaporQuotes CachedDownload)
for example in "${examples[@]}"; do
    swift build --package-path Examples --product "$example"
done
bin="$(swift build --package-path Examples --show-bin-path)"
for example in "${examples[@]}"; do
    echo "== $example"
    timeout 120 "$bin/$example"
done

#!/usr/bin/env bash
# Runs every test of the package (the same command CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Caches the tests open with default settings (URLCache, the server's) keep the default
# free-space floor, 2 % of the volume: on a volume with less free, they evict what a test just
# stored and that test fails for a reason that is not its own.
tmp="${TMPDIR:-/tmp}"
read -r size free < <(df -Pk "$tmp" | awk 'NR == 2 {print $2, $4}')
if [ "$free" -lt $((size / 50 + 2 * 1024 * 1024)) ]; then
    echo "test: warning: $((free / 1024)) MiB free on the volume of $tmp; the tests want 2 % of it" \
         "($((size / 50 / 1024)) MiB, the caches' default free-space floor) plus 2 GiB" >&2
fi
# The Hummingbird, Vapor and AsyncHTTPClient integrations and the server are behind package
# traits (off for packages that depend on this one); their tests are built and run only with the
# traits on. scripts/server-cluster.sh builds with the same ones, so CI builds once.
traits=(--traits Hummingbird,Vapor,AsyncHTTPClient,Server)
swift build --build-tests "${traits[@]}"
exec swift test --skip-build "${traits[@]}" "$@"

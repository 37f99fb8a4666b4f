#!/usr/bin/env bash
# Runs every test of the package (the same command CI runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --build-tests
exec swift test --skip-build "$@"

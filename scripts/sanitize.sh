#!/usr/bin/env bash
# Builds and runs every test under Thread Sanitizer, then under Address Sanitizer (with its
# leak checker), and fails if a test fails or either sanitizer reports anything, in the test
# process or in a child it spawns (the `diskcache` tool, the crash-test worker). Arguments are
# passed to `swift test` (for example `--filter MemoryCacheTests`). Each sanitizer builds into
# a directory of its own (.build-tsan, .build-asan), so neither clobbers the other or .build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

root=$PWD
reports=$(mktemp -d)
trap 'rm -rf "$reports"' EXIT
failed=()

# sanitize NAME SWIFT_SANITIZER SCRATCH [swift test arguments...]
sanitize() {
    local name=$1 sanitizer=$2 scratch=$3
    shift 3
    local start=$SECONDS status=0
    echo "== $name: building (--sanitize=$sanitizer, $scratch)" >&2
    swift build --build-tests --sanitize="$sanitizer" --scratch-path "$scratch" --traits Server
    echo "== $name: testing" >&2
    # Reports go to files ($reports/NAME.PID), one per process that has any, so that those of
    # child processes whose output a test captures are counted too.
    swift test --skip-build --sanitize="$sanitizer" --scratch-path "$scratch" --traits Server "$@" || status=$?
    local files
    files=$(find "$reports" -name "$name.*" -type f)
    local count=0
    if [ -n "$files" ]; then
        # shellcheck disable=SC2086 # one path a line, none with spaces (mktemp -d)
        cat $files >&2
        # shellcheck disable=SC2086
        count=$(cat $files | grep -c -E "^WARNING: ThreadSanitizer|^==[0-9]+==ERROR: (Address|Leak)Sanitizer" || true)
    fi
    echo "== $name: $count report(s), swift test exit status $status, $((SECONDS - start)) s" >&2
    if [ "$status" -ne 0 ] || [ "$count" -ne 0 ] || [ -n "$files" ]; then
        failed+=("$name")
    fi
}

# halt_on_error=0: report every race, not only the first; exitcode: a process with reports fails.
# detect_deadlocks=0: TSan's lock-order checker tracks at most 128 mutexes held by one thread; past
# that it fails a CHECK and the process hangs, and DiskCache's removeAll and close hold all 256 of
# its key stripes at once (TieredCache's removeAll 64 more on top).
# The one test that cuts a file short under a mapping being hashed is left to the Address
# Sanitizer run: Thread Sanitizer's runtime does not hand that SIGBUS to the store's handler,
# which jumps out of the hash, and the fault ends the test process.
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 detect_deadlocks=0 log_path=$reports/tsan"
sanitize tsan thread .build-tsan --skip aFileCutShortUnderItsMappingEndsTheHashWithAnErrorNotTheProcess "$@"
unset TSAN_OPTIONS

# The leak checker runs at each process's exit; its suppressions are leaks outside this package
# and LeakSanitizer's false positives on Swift values, each with its reason.
export ASAN_OPTIONS="detect_leaks=1 log_path=$reports/asan"
export LSAN_OPTIONS="suppressions=$root/scripts/lsan-suppressions.txt print_suppressions=0"
sanitize asan address .build-asan "$@"
unset ASAN_OPTIONS LSAN_OPTIONS

if [ ${#failed[@]} -gt 0 ]; then
    echo "error: ${failed[*]} failed (see above)" >&2
    exit 1
fi
echo "== no sanitizer report" >&2

#!/usr/bin/env bash
# Runs one libFuzzer target of the Fuzz/ package for SECONDS seconds, on a temporary copy of
# its seed corpus in Tests/FuzzCorpus/TARGET (libFuzzer adds what it finds to the copy, never
# to the repository), and prints how many inputs it ran.
#
#   scripts/fuzz.sh list                      the targets
#   scripts/fuzz.sh TARGET SECONDS [OPTION…]  build (release, -sanitize=fuzzer,address) and run;
#                                             OPTIONs go to libFuzzer, e.g. -runs=10000000
#
# An input that crashes or breaks an invariant is kept as Fuzz/.build/artifacts/TARGET/crash-*
# (also leak-*, timeout-*, oom-*); replay it with
# `SWIFT_BACKTRACE=enable=no Fuzz/.build/release/<Product> FILE`.
set -euo pipefail
cd "$(dirname "$0")/.."

# target name (the corpus directory) and the product that fuzzes it
targets=(
    "journal FuzzJournal"
    "metadata FuzzMetadata"
    "cache-control FuzzCacheControl"
    "http-date FuzzHTTPDate"
    "vary FuzzVary"
    "etag FuzzEntityTag"
    "age FuzzAge"
    "request-scan FuzzRequestScan"
)

usage() {
    echo "usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer option...]" >&2
    echo "       scripts/fuzz.sh list" >&2
    exit 2
}

[ $# -ge 1 ] || usage
if [ "$1" = "list" ]; then
    for entry in "${targets[@]}"; do echo "${entry%% *}"; done
    exit 0
fi
[ $# -ge 2 ] || usage
target="$1"
seconds="$2"
shift 2
case "$seconds" in '' | *[!0-9]* | 0) echo "error: SECONDS must be a positive whole number" >&2; exit 2 ;; esac
product=""
for entry in "${targets[@]}"; do
    [ "${entry%% *}" = "$target" ] && product="${entry#* }"
done
if [ -z "$product" ]; then
    echo "error: no fuzz target '$target'; scripts/fuzz.sh list names them" >&2
    exit 2
fi

scripts/install-deps.sh
# The root manifest declares the server's module as a library (for request-scan) only then.
export DISKCACHE_FUZZ=1
echo "Building $product (release, fuzzer and address sanitizers)..." >&2
# -enable-testing: the targets reach the decoders through @testable import. -Xswiftc
# -sanitize=fuzzer: --sanitize=fuzzer instruments only the Fuzz package's own modules, and
# libFuzzer would be blind to coverage in the library it is meant to explore.
swift build --package-path Fuzz -c release --sanitize=fuzzer --sanitize=address \
    -Xswiftc -enable-testing -Xswiftc -sanitize=fuzzer --product "$product"
binary="Fuzz/.build/release/$product"

work="$(mktemp -d "${TMPDIR:-/tmp}/fuzz-$target.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
cp -R "Tests/FuzzCorpus/$target/." "$work/corpus/"
artifacts="Fuzz/.build/artifacts/$target"
mkdir -p "$artifacts"

echo "Fuzzing $target for up to $seconds s (working corpus $work/corpus, crashes in $artifacts/)..." >&2
status=0
# SWIFT_BACKTRACE: the Swift runtime's crash handler would take the signal before libFuzzer
# (which must record the input) and trips the address sanitizer while reading memory.
SWIFT_BACKTRACE=enable=no "$binary" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$artifacts/" "$@" "$work/corpus" \
    2>&1 | tee "$work/log" || status=$?

runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)"
elapsed="$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$work/log" | tail -1)"
rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)"
echo "$target: ${runs:-?} executions in ${elapsed:-?} s (${rate:-?} exec/s), working corpus $(find "$work/corpus" -type f | wc -l) inputs" >&2
if [ "$status" -ne 0 ]; then
    echo "$target: libFuzzer stopped with status $status; see $artifacts/" >&2
fi
exit "$status"

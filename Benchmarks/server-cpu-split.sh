#!/usr/bin/env bash
# Where a hit's CPU goes on one machine: the server's and the load generator's. Runs wrk with
# the hit load of a kept Benchmarks/server-compare.sh run (`KEEP=1 WORK=<dir>`, its origin and
# the server under test started again on the same ports) against the server listening on
# PORT, and prints requests/s, p50/p99 and the CPU time (user + system, from /proc/<pid>/stat)
# per request of the server (with its children: nginx's workers, Varnish's child) and of wrk.
#
#   Benchmarks/server-cpu-split.sh /tmp/scA 18083 1m        # 4 s of SIZE=1m hits against ours
#   SECONDS_RUN=8 Benchmarks/server-cpu-split.sh /tmp/scA 18082 1m
set -euo pipefail
work="$1" port="$2" size="$3"
seconds="${SECONDS_RUN:-4}"
# Every process that holds the listening socket (nginx's master and each of its workers).
server=$(ss -ltnp "sport = :$port" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u | tr '\n' ' ')
[ -n "$server" ] || { echo "server-cpu-split: nothing listens on port $port" >&2; exit 1; }
# The CPU time of those processes and their children (Varnish's child), each counted once.
ticks() {
    local total=0 pid
    for pid in $( { printf '%s\n' "$@"; pgrep -P "$(echo "$@" | tr ' ' ',')" 2>/dev/null; } | sort -u); do
        [ -r "/proc/$pid/stat" ] && total=$(( total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0) ))
    done
    echo "$total"
}
out=$(mktemp)
before=$(ticks $server)
SIZE=$size wrk -t2 -c16 -d"${seconds}s" --latency -s "$work/hits.lua" "http://127.0.0.1:$port" > "$out" &
wrk_pid=$!
wrk_ticks=0
# wrk's own CPU time, read until it exits (its /proc entry goes with it).
while kill -0 "$wrk_pid" 2>/dev/null; do
    wrk_ticks=$(awk '{print $14 + $15}' "/proc/$wrk_pid/stat" 2>/dev/null || echo "$wrk_ticks")
    sleep 0.1
done
wait "$wrk_pid"
after=$(ticks $server)
hz=$(getconf CLK_TCK)
requests=$(awk '/requests in/ {print $1}' "$out")
awk -v port="$port" -v size="$size" -v s=$(( after - before )) -v w="$wrk_ticks" -v hz="$hz" -v n="$requests" \
    -v rps="$(awk '/^Requests\/sec/ {print $2}' "$out")" -v p50="$(awk '$1 == "50%" {print $2}' "$out")" \
    -v p99="$(awk '$1 == "99%" {print $2}' "$out")" \
    'BEGIN { printf "port %s %s hits: %s req/s  p50 %s  p99 %s  server %.0f us/req  wrk %.0f us/req\n", port, size, rps, p50, p99, s / hz * 1e6 / n, w / hz * 1e6 / n }'
rm -f "$out"

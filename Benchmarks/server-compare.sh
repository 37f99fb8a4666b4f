#!/usr/bin/env bash
# Puts diskcache-server, nginx (proxy_cache, on disk) and Varnish (file storage) in front of one
# origin (a separate nginx serving static files with Cache-Control: max-age=3600), all on
# loopback with the same cache size, and drives each with wrk: hits (100 stored URLs, warmed
# first) and misses (every URL new, so fetched and stored) at 1 KB, 64 KB and 1 MB. Reports
# requests/s, p50/p99 latency and the server's CPU time per request, as ratios to nginx and
# Varnish measured in the same run. Each measurement starts after a `sync`; a hit run whose
# warm-up requests failed (a cache with full storage) still runs and reports how many did.
#
#   Benchmarks/server-compare.sh                  # 10 s per hit run, 5 s per miss run
#   DURATION=20 MISS_DURATION=5 Benchmarks/server-compare.sh
#
# Installs nginx, varnish and wrk with apt-get when missing. Environment: SCRATCH (build
# directory, default .build-bench), WORK (scratch files, default a new temporary directory),
# KEEP=1 keeps WORK (wrk's output per run, results.json), CONNECTIONS (default 16), THREADS
# (wrk's, default 2), SIZES (default "1k 64k 1m"), CHART (a PNG to draw the ratios into with
# Benchmarks/server-chart.py, which needs matplotlib; it also takes several runs' results.json),
# BASELINE (another diskcache-server binary, say a release build of an earlier commit: measured
# too, in turn with the others, as "baseline", and the table gains a column "÷ baseline"),
# OURS_FLAGS (more options for ours, default --copy-limit 2M; empty for none),
# BASELINE_FLAGS (for the baseline, default none) and ROUNDS (default 1: each size's hits and
# misses are measured that many times, the subjects' order reversed every other round, so that
# none always follows the same one; the table gives each measure's median and the rounds' range
# of ours ÷ baseline).
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${DURATION:-10}"
miss_duration="${MISS_DURATION:-5}"
connections="${CONNECTIONS:-16}"
threads="${THREADS:-2}"
sizes="${SIZES:-1k 64k 1m}"
rounds="${ROUNDS:-1}"
scratch="${SCRATCH:-.build-bench}"
ours_flags="${OURS_FLAGS---copy-limit 2M}"
work="${WORK:-$(mktemp -d /tmp/server-compare-XXXXXX)}"
mkdir -p "$work"
# nginx's workers run as another user: they must be able to read the origin's files.
chmod 755 "$work"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    [ -f "$work/varnish.pid" ] && kill "$(cat "$work/varnish.pid")" 2>/dev/null || true
    sleep 0.5
    [ "${KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

need=()
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v varnishd >/dev/null || [ -x /usr/sbin/varnishd ] || need+=(varnish)
command -v wrk >/dev/null || need+=(wrk)
if [ "${#need[@]}" -gt 0 ]; then
    echo "server-compare: installing ${need[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
export PATH="$PATH:/usr/sbin"
scripts/install-deps.sh >/dev/null
swift build -c release --scratch-path "$scratch" --product diskcache-server --traits Server >&2
server="$scratch/release/diskcache-server"

origin_port=18080 nginx_port=18081 varnish_port=18082 ours_port=18083

# The origin: 100 files of each size.
mkdir -p "$work/origin/root" "$work/origin/logs"
for size in $sizes; do
    mkdir -p "$work/origin/root/$size"
    bytes=$(( $(echo "$size" | sed 's/k$/*1024/; s/m$/*1048576/') ))
    head -c "$bytes" /dev/urandom > "$work/origin/root/$size/0.bin"
    for i in $(seq 1 99); do cp "$work/origin/root/$size/0.bin" "$work/origin/root/$size/$i.bin"; done
done
# tcp_nopush (TCP_CORK) is left off: on loopback it holds each 64 KB response for the 40 ms of a
# delayed ACK (nginx 64 KB hits: 380 req/s with it, 45,000 without). The cache node runs with
# sendfile off and one 1 MiB output buffer, as ours runs with --copy-limit 2M: with wrk on
# the same cores, a body written from memory costs wrk less to read than one sent from the page
# cache by sendfile: nginx's 1 MB hits, 2,346-2,439 req/s with sendfile on and 2,740-3,269 off
# in the same rounds (docs/benchmarks.md, "Where a 1 MB hit's time goes").
common='worker_processes auto; pid PREFIX/nginx.pid; error_log PREFIX/error.log warn; events { worker_connections 4096; }'
cat > "$work/origin/nginx.conf" <<CONF
${common//PREFIX/$work/origin}
http {
    access_log off;
    sendfile on; keepalive_requests 100000;
    server {
        listen 127.0.0.1:$origin_port;
        root $work/origin/root;
        location / { add_header Cache-Control "max-age=3600"; }
    }
}
CONF
mkdir -p "$work/nginx/cache" "$work/nginx/temp"
cat > "$work/nginx/nginx.conf" <<CONF
${common//PREFIX/$work/nginx}
http {
    access_log off;
    sendfile off; output_buffers 1 1m; keepalive_requests 100000;
    proxy_cache_path $work/nginx/cache levels=1:2 keys_zone=bench:64m max_size=2g inactive=1h use_temp_path=off;
    proxy_temp_path $work/nginx/temp;
    upstream origin { server 127.0.0.1:$origin_port; keepalive 32; }
    server {
        listen 127.0.0.1:$nginx_port;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            proxy_cache_key \$uri\$is_args\$args;
            proxy_cache_lock on;
        }
    }
}
CONF
nginx -p "$work/origin" -c "$work/origin/nginx.conf"
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf"
sleep 0.5
pids+=("$(cat "$work/origin/nginx.pid")" "$(cat "$work/nginx/nginx.pid")")
varnishd -j none -n "$work/varnish" -a "127.0.0.1:$varnish_port" -b "127.0.0.1:$origin_port" \
    -s "file,$work/varnish.bin,2G" -P "$work/varnish.pid" -p thread_pools=2 >/dev/null
"$server" --origin "http://127.0.0.1:$origin_port" --cache-dir "$work/ours" --listen "127.0.0.1:$ours_port" \
    --disk-capacity 2G --memory-capacity 64M --log-level warning $ours_flags &
pids+=($!)
baseline_port=18084
if [ -n "${BASELINE:-}" ]; then
    "$BASELINE" --origin "http://127.0.0.1:$origin_port" --cache-dir "$work/baseline" --listen "127.0.0.1:$baseline_port" \
        --disk-capacity 2G --memory-capacity 64M --log-level warning ${BASELINE_FLAGS:-} &
    pids+=($!)
fi
sleep 1

# CPU seconds (user + system) of a process and its children so far: nginx's workers, Varnish's child.
cpu_of() {
    local total=0 pid
    for pid in "$@" $(pgrep -P "$(echo "$@" | tr ' ' ',')" 2>/dev/null); do
        [ -r "/proc/$pid/stat" ] || continue
        total=$(( total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0) ))
    done
    echo "$total"
}
ticks=$(getconf CLK_TCK)
cat > "$work/hits.lua" <<'LUA'
local n = 0
local size = os.getenv("SIZE")
request = function()
    n = n + 1
    return wrk.format("GET", "/" .. size .. "/" .. (n % 100) .. ".bin")
end
LUA
# Every request of a miss run is for a URL no request asked before: the run's name, the wrk
# thread's number (set in each thread's Lua state by setup) and a counter.
cat > "$work/misses.lua" <<'LUA'
local threads = 0
function setup(thread)
    threads = threads + 1
    thread:set("id", threads)
end
local n = 0
local size = os.getenv("SIZE")
request = function()
    n = n + 1
    return wrk.format("GET", "/" .. size .. "/" .. (n % 100) .. ".bin?u=" .. os.getenv("RUN") .. "-" .. id .. "-" .. n)
end
LUA

subjects="nginx:$nginx_port:$(cat "$work/nginx/nginx.pid") varnish:$varnish_port:$(cat "$work/varnish.pid") ours:$ours_port:${pids[2]}"
[ -n "${BASELINE:-}" ] && subjects="$subjects baseline:$baseline_port:${pids[3]}"
echo "[" > "$work/results.json"
first=1
reversed=$(echo "$subjects" | tr ' ' '\n' | tac | tr '\n' ' ')
for size in $sizes; do
    for kind in hits misses; do
        for round in $(seq 1 "$rounds"); do
        order=$subjects
        [ $((round % 2)) = 0 ] && order=$reversed
        for subject in $order; do
            IFS=: read -r name port pid <<< "$subject"
            if [ "$kind" = hits ]; then
                # A cache whose storage is full may fail to store (Varnish's file storage does,
                # answering with errors or cut connections): its hit run goes on, and says so.
                warm_failures=0
                for i in $(seq 0 99); do for _ in 1 2; do
                    # After a few failures the rest are counted as failed without waiting on them.
                    if [ "$warm_failures" -ge 5 ]; then warm_failures=$((warm_failures + 1)); continue; fi
                    curl -s --retry 3 --retry-all-errors --retry-delay 1 -o /dev/null "http://127.0.0.1:$port/$size/$i.bin" \
                        || warm_failures=$((warm_failures + 1))
                done; done
                seconds=$duration
            else
                seconds=$miss_duration
            fi
            # The previous subject's files are written back first: otherwise the one measured
            # after a cache that wrote gigabytes (Varnish's storage file after its misses)
            # creates its files while the disk is busy with the other's writeback.
            sync
            before=$(cpu_of "$pid")
            SIZE=$size RUN="$name$RANDOM" wrk -t"$threads" -c"$connections" -d"${seconds}s" --latency -s "$work/$kind.lua" \
                "http://127.0.0.1:$port" > "$work/$name-$size-$kind.txt"
            after=$(cpu_of "$pid")
            rps=$(awk '/^Requests\/sec/ {print $2}' "$work/$name-$size-$kind.txt")
            total=$(awk '/requests in/ {print $1}' "$work/$name-$size-$kind.txt")
            errors=$(awk '/Non-2xx|Socket errors/ {print}' "$work/$name-$size-$kind.txt" | tr '\n' ' ')
            if [ "$kind" = hits ] && [ "$warm_failures" -gt 0 ]; then
                errors="$errors  warm-up: $warm_failures of 200 requests failed"
            fi
            to_ms() { awk -v v="$1" 'BEGIN { if (v ~ /us$/) { sub(/us$/, "", v); print v / 1000 } else if (v ~ /ms$/) { sub(/ms$/, "", v); print v } else { sub(/s$/, "", v); print v * 1000 } }'; }
            p50=$(to_ms "$(awk '$1 == "50%" {print $2}' "$work/$name-$size-$kind.txt")")
            p99=$(to_ms "$(awk '$1 == "99%" {print $2}' "$work/$name-$size-$kind.txt")")
            cpu_us=$(awk -v t="$(( after - before ))" -v hz="$ticks" -v n="$total" 'BEGIN { printf "%.1f", (n > 0 ? t / hz * 1e6 / n : 0) }')
            printf '%-8s %-4s %-6s %10s req/s  p50 %8s ms  p99 %8s ms  cpu %7s us/req %s\n' "$name" "$size" "$kind" "$rps" "$p50" "$p99" "$cpu_us" "$errors" >&2
            [ $first = 1 ] || echo "," >> "$work/results.json"
            first=0
            printf '{"subject":"%s","size":"%s","kind":"%s","round":%s,"rps":%s,"p50ms":%s,"p99ms":%s,"cpuMicrosPerRequest":%s}' \
                "$name" "$size" "$kind" "$round" "$rps" "$p50" "$p99" "$cpu_us" >> "$work/results.json"
        done
        done
    done
done
echo "]" >> "$work/results.json"

python3 - "$work/results.json" <<'PY'
import json, statistics, sys
rows = json.load(open(sys.argv[1]))
runs = {}
for r in rows:
    runs.setdefault((r["subject"], r["size"], r["kind"]), []).append(r)
# Each measure's median over the rounds (one round: the measure itself).
by = {key: {m: statistics.median(r[m] for r in rs) for m in ("rps", "p99ms", "cpuMicrosPerRequest")} for key, rs in runs.items()}
baseline = any(subject == "baseline" for subject, _, _ in by)
print("| size | kind | ours req/s | ÷ nginx | ÷ Varnish | p99 ours / nginx / Varnish (ms) | CPU µs/req ours / nginx / Varnish |"
      + (" ÷ baseline (rounds) | p99 / CPU µs/req baseline |" if baseline else ""))
print("|---|---|---|---|---|---|---|" + ("---|---|" if baseline else ""))
for (subject, size, kind), r in by.items():
    if subject != "ours": continue
    n, v = by[("nginx", size, kind)], by[("varnish", size, kind)]
    row = (f"| {size} | {kind} | {r['rps']:.0f} | {r['rps'] / n['rps']:.2f} | {r['rps'] / v['rps']:.2f} | "
           f"{r['p99ms']:.2f} / {n['p99ms']:.2f} / {v['p99ms']:.2f} | "
           f"{r['cpuMicrosPerRequest']:.0f} / {n['cpuMicrosPerRequest']:.0f} / {v['cpuMicrosPerRequest']:.0f} |")
    if baseline:
        b = by[("baseline", size, kind)]
        # Ours over the baseline within each round (measured one beside the other): their
        # median, and each round's.
        each = sorted(o["rps"] / p["rps"] for o, p in zip(runs[("ours", size, kind)], runs[("baseline", size, kind)]))
        spread = f" ({', '.join(f'{x:.2f}' for x in each)})" if len(each) > 1 else ""
        row += f" {statistics.median(each):.2f}{spread} | {b['p99ms']:.2f} / {b['cpuMicrosPerRequest']:.0f} |"
    print(row)
PY
if [ -n "${CHART:-}" ]; then
    python3 Benchmarks/server-chart.py "$CHART" "$work/results.json"
fi

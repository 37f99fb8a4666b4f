#!/usr/bin/env bash
# Several diskcache-server nodes behind nginx, which hashes each URL to one node
# (`hash $request_uri consistent`), all on loopback, in front of one origin; then checks that the
# cluster works as a cache tier: every URL is answered by the same node each time, the second
# request for a URL is a hit on that node, and the URLs spread over every node. Stops
# everything at the end (or on failure).
#
#   scripts/server-cluster.sh            # 3 nodes, the debug build
#   NODES=4 CONFIGURATION=release scripts/server-cluster.sh
#   KEEP_RUNNING=1 scripts/server-cluster.sh   # leave it running (front end: http://127.0.0.1:19000)
#
# Installs nginx with apt-get when missing. WORK (default a new temporary directory) holds the
# configurations, caches and logs.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes="${NODES:-3}"
configuration="${CONFIGURATION:-debug}"
work="${WORK:-$(mktemp -d /tmp/server-cluster-XXXXXX)}"
# nginx's workers run as another user: they must be able to read the origin's files.
chmod 755 "$work"
front_port=19000 origin_port=19001 first_node_port=19010
export PATH="$PATH:/usr/sbin"
if ! command -v nginx >/dev/null; then
    echo "server-cluster: installing nginx" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
fi
scripts/install-deps.sh >/dev/null
# The traits scripts/test.sh builds with (the server needs its own, `Server`): the same build.
traits=(--traits Hummingbird,Vapor,AsyncHTTPClient,Server)
swift build -c "$configuration" --product diskcache-server "${traits[@]}" >&2
server="$(swift build -c "$configuration" "${traits[@]}" --show-bin-path)/diskcache-server"

pids=()
stop() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    [ -n "${WORK:-}" ] || rm -rf "$work"
}
[ "${KEEP_RUNNING:-0}" = 1 ] || trap stop EXIT

# The origin: nginx serving small files that may be cached for a minute.
mkdir -p "$work/origin/root" "$work/front"
for i in $(seq 1 30); do echo "resource $i" > "$work/origin/root/r$i.txt"; done
cat > "$work/origin/nginx.conf" <<CONF
worker_processes 1; pid $work/origin/nginx.pid; error_log $work/origin/error.log warn; daemon off;
events {}
http {
    access_log off;
    server { listen 127.0.0.1:$origin_port; root $work/origin/root; location / { add_header Cache-Control "max-age=60"; } }
}
CONF
nginx -p "$work/origin" -c "$work/origin/nginx.conf" &
pids+=($!)

# The nodes: one cache directory each.
upstreams=""
for n in $(seq 1 "$nodes"); do
    port=$((first_node_port + n))
    "$server" --origin "http://127.0.0.1:$origin_port" --cache-dir "$work/node$n" --listen "127.0.0.1:$port" \
        --disk-capacity 256M --via "node$n" --log-level warning &
    pids+=($!)
    upstreams+="        server 127.0.0.1:$port;"$'\n'
done

# Waits (bounded) until a health endpoint answers 200; fails the run with a clear message if not.
# Each node is waited for directly before the front end starts: a request the front end sends to
# a node still starting marks that node down for nginx's fail_timeout (10 s), and the URLs
# hashed to it would fail for that long.
wait_healthy() {
    local what="$1" url="$2"
    for _ in $(seq 1 600); do
        curl -sf -o /dev/null --max-time 2 "$url" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "server-cluster: $what did not answer $url within 60 s" >&2
    exit 1
}
for n in $(seq 1 "$nodes"); do
    wait_healthy "node$n" "http://127.0.0.1:$((first_node_port + n))/_cache/health"
done

# The front end: consistent hashing of the request URI, so each URL lives on one node, and a
# node's going moves only its own share of URLs.
cat > "$work/front/nginx.conf" <<CONF
worker_processes 1; pid $work/front/nginx.pid; error_log $work/front/error.log warn; daemon off;
events {}
http {
    access_log off;
    upstream cache_nodes {
        hash \$request_uri consistent;
$upstreams        keepalive 16;
    }
    server {
        listen 127.0.0.1:$front_port;
        location / {
            proxy_pass http://cache_nodes;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            add_header X-Node \$upstream_addr always;
        }
    }
}
CONF
nginx -p "$work/front" -c "$work/front/nginx.conf" &
pids+=($!)

wait_healthy "the front end" "http://127.0.0.1:$front_port/_cache/health"

failures=0
declare -A used
for i in $(seq 1 30); do
    first=$(curl -s -D - -o /dev/null "http://127.0.0.1:$front_port/r$i.txt" | tr -d '\r')
    second=$(curl -s -D - -o "$work/body" "http://127.0.0.1:$front_port/r$i.txt" | tr -d '\r')
    node1=$(echo "$first" | awk -F': ' 'tolower($1) == "x-node" {print $2}')
    node2=$(echo "$second" | awk -F': ' 'tolower($1) == "x-node" {print $2}')
    cache2=$(echo "$second" | awk -F': ' 'tolower($1) == "x-cache" {print $2}')
    if [ -z "$node1" ] || [ "$node1" != "$node2" ]; then
        echo "server-cluster: /r$i.txt went to $node1, then to $node2" >&2; failures=$((failures + 1))
    fi
    if [ "$cache2" != HIT ] || [ "$(cat "$work/body")" != "resource $i" ]; then
        echo "server-cluster: the second request for /r$i.txt was not a hit with its body (X-Cache: $cache2)" >&2
        failures=$((failures + 1))
    fi
    used[$node1]=1
done
echo "server-cluster: 30 URLs over ${#used[@]} of $nodes nodes: ${!used[*]}" >&2
if [ "${#used[@]}" -ne "$nodes" ]; then
    echo "server-cluster: not every node got a share of the URLs" >&2; failures=$((failures + 1))
fi
if [ "$failures" -ne 0 ]; then
    echo "server-cluster: FAILED ($failures problems)" >&2
    exit 1
fi
echo "server-cluster: every URL stayed on its node and its second request was a hit" >&2
if [ "${KEEP_RUNNING:-0}" = 1 ]; then
    echo "server-cluster: running; front end http://127.0.0.1:$front_port, files in $work; stop with: kill ${pids[*]}" >&2
fi

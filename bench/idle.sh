#!/usr/bin/env bash
# What an idle connection costs: the resident memory per connection of a sidecar on the event loop, a sidecar
# on the goroutine path (TRACECAR_EVENT_LOOP=off) and an HAProxy TCP relay, side by side in one run, each its own
# process in front of the same embedded node. internal/testkit/idleconns opens N connections to each relay, takes each
# through OPTIONS and STARTUP (protocol v4), lets them sit idle for WAIT, and reports VmRSS before and after; then
# it opens MORE connections more and reports what those cost each: the marginal cost of a connection, without the
# steps a relay takes once (a Go process's collector allocates about 1.5 MB of metadata in its first collections,
# which the first N share; HAProxy grows its pools). MORE=0 skips it. It also gives the CPU each relay takes while
# its connections sit idle, in ms per second.
#
#   bench/idle.sh [TRACECAR_BINARY]       from a clone; builds ./cmd/tracecar when no binary is given
#   N=2000 MORE=2000 WAIT=5s BASE_PORT=29700   connections per relay, then more, idle time, first port used (10)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-2000}; MORE=${MORE:-2000}; WAIT=${WAIT:-5s}; P=${BASE_PORT:-29700}
W=$(mktemp -d)
bin=${1:-}
if [ -z "$bin" ]; then
  go build -o "$W/tracecar" ./cmd/tracecar
  bin=$W/tracecar
fi
go build -o "$W/idleconns" ./internal/testkit/idleconns
# Every connection is a socket in the tool and in its relay, and two sockets in the node per relay.
ulimit -n $((4 * (N + MORE) + 1000))

pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
"$bin" node --listen 127.0.0.1:$P --api 127.0.0.1:$((P + 1)) --log-file "$W/node.log" >/dev/null 2>&1 & pids+=($!)
"$bin" sidecar --listen 127.0.0.1:$((P + 2)) --node 127.0.0.1:$P --admin 127.0.0.1:$((P + 3)) \
  --log-file "$W/loop.log" >/dev/null 2>&1 & loop=$!; pids+=($loop)
TRACECAR_EVENT_LOOP=off "$bin" sidecar --listen 127.0.0.1:$((P + 4)) --node 127.0.0.1:$P --admin 127.0.0.1:$((P + 5)) \
  --log-file "$W/goroutines.log" >/dev/null 2>&1 & gr=$!; pids+=($gr)
cat > "$W/hp.cfg" <<CFG
global
  maxconn $((2 * (N + MORE) + 100))
defaults
  mode tcp
  timeout connect 5s
  timeout client 10m
  timeout server 10m
listen cql
  bind 127.0.0.1:$((P + 6))
  server n 127.0.0.1:$P
CFG
haproxy -f "$W/hp.cfg" -db >/dev/null 2>&1 & hp=$!; pids+=($hp)
sleep 1.5
"$W/idleconns" -n "$N" -more "$MORE" -wait "$WAIT" \
  loop=127.0.0.1:$((P + 2))=$loop goroutines=127.0.0.1:$((P + 4))=$gr haproxy=127.0.0.1:$((P + 6))=$hp

#!/usr/bin/env bash
# Measures the sidecar with tracing off against an HAProxy TCP relay (Debian's haproxy),
# both in front of the same embedded node, in one loadcheck run: the DESIGN.md bar is
# off >= 0.97x haproxy. Every process listens on loopback and is stopped on exit.
#
#   scripts/compare-haproxy.sh [extra loadcheck flags, e.g. --rounds 5 --duration 10s]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v haproxy >/dev/null || { echo "needs haproxy: apt-get install -y haproxy" >&2; exit 2; }

base=${BASE_PORT:-29040}
node=127.0.0.1:$((base + 2)) nodeapi=127.0.0.1:$((base + 1))
sidecar=127.0.0.1:$((base + 3)) admin=127.0.0.1:$((base + 0)) relay=127.0.0.1:$((base + 4))
for p in $node $nodeapi $sidecar $admin $relay; do
  if (exec 3<>"/dev/tcp/${p%:*}/${p#*:}") 2>/dev/null; then echo "port $p is taken; set BASE_PORT" >&2; exit 2; fi
done

work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

go build -o "$work/tracecar" ./cmd/tracecar
cat > "$work/haproxy.cfg" <<CFG
global
  maxconn 4096
defaults
  mode tcp
  timeout connect 5s
  timeout client 1m
  timeout server 1m
frontend cql
  bind $relay
  default_backend node
backend node
  server node1 $node
CFG

"$work/tracecar" node --listen "$node" --api "$nodeapi" --log-file "$work/node.log" &
pids+=($!)
env ${SIDECAR_ENV:-} "$work/tracecar" sidecar --listen "$sidecar" --node "$node" --admin "$admin" --log-file "$work/sidecar.log" &
pids+=($!)
haproxy -f "$work/haproxy.cfg" -db &
pids+=($!)
sleep 1

"$work/tracecar" loadcheck --node "$node" --sidecar "$sidecar" --admin "http://$admin" --node-api "http://$nodeapi" \
  --mode "haproxy=target=$relay" --modes haproxy,off,fast,full --baseline haproxy "$@"

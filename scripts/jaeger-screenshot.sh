#!/usr/bin/env bash
# Regenerates docs/jaeger-trace.png: a tracecar trace in Jaeger, taken in headless Chromium.
#
# It builds tracecar and Jaeger (scripts/build-tool.sh, cached), starts Jaeger with
# tools/jaeger/config.yaml and a sidecar with an embedded node on free loopback ports,
# runs prepared SELECTs from the Python driver in sampled mode (so the node's own events
# join the span), picks the slowest SELECT trace from Jaeger's query API and screenshots it.
#
# The Jaeger Go module embeds only a placeholder UI. With JAEGER_UI_ASSETS set to a built
# jaeger-ui folder, the screenshot is of Jaeger's own trace page; without it, of the same
# trace as Jaeger's query API returns it (/api/traces/ID), drawn as a timeline by a small
# HTML page generated here.
#
# Usage: scripts/jaeger-screenshot.sh [OUT.png]   (default docs/jaeger-trace.png)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/jaeger-trace.png}
jaeger=${TRACECAR_JAEGER:-$(scripts/build-tool.sh jaeger)}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/tracecar" ./cmd/tracecar
read -r otlp query qgrpc cql admin < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(5)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')

JAEGER_OTLP_HTTP=127.0.0.1:$otlp JAEGER_QUERY_HTTP=127.0.0.1:$query JAEGER_QUERY_GRPC=127.0.0.1:$qgrpc \
  "$jaeger" --config tools/jaeger/config.yaml >"$work/jaeger.log" 2>&1 &
pids+=($!)
OTEL_SERVICE_NAME=shop-api "$work/tracecar" sidecar --listen 127.0.0.1:$cql --admin 127.0.0.1:$admin \
  --otlp-endpoint http://127.0.0.1:$otlp >"$work/sidecar.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do
  curl -sf "http://127.0.0.1:$query/api/services" >/dev/null && curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null && break
  sleep 0.2
done

# Every request traced, and the node asked to trace it too.
curl -sf -X POST "http://127.0.0.1:$admin/storage_service/trace_probability?probability=1" >/dev/null
CQL_PORT=$cql /usr/bin/python3 - <<'PY'
import os
from cassandra.cluster import Cluster
c = Cluster(['127.0.0.1'], port=int(os.environ['CQL_PORT']), protocol_version=4)
s = c.connect()
s.execute("CREATE KEYSPACE IF NOT EXISTS shop WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
s.execute("CREATE TABLE IF NOT EXISTS shop.orders (customer int, id int, total decimal, PRIMARY KEY (customer, id))")
s.set_keyspace('shop')
ins = s.prepare("INSERT INTO orders (customer, id, total) VALUES (?, ?, ?)")
for i in range(200):
    s.execute(ins, (i % 10, i, i * 1.5))
sel = s.prepare("SELECT id, total FROM orders WHERE customer = ?")
for i in range(30):
    list(s.execute(sel, (i % 10,)))
c.shutdown()
PY

api="http://127.0.0.1:$query/api/traces?service=shop-api&operation=SELECT%20shop.orders&limit=100&lookback=1h"
id=""
for _ in $(seq 100); do
  id=$(curl -sf "$api" | python3 -c '
import json, sys
ts = [t for t in json.load(sys.stdin).get("data") or []
      if any(f.get("value") == "node" for s in t["spans"] for l in s["logs"] for f in l["fields"])]
print(max(ts, key=lambda t: t["spans"][0]["duration"])["traceID"] if ts else "")') || true
  [ -n "$id" ] && break
  sleep 0.3
done
[ -n "$id" ] || { echo "no SELECT trace with node events in Jaeger"; cat "$work/jaeger.log" "$work/sidecar.log"; exit 1; }

if [ -n "${JAEGER_UI_ASSETS:-}" ]; then
  url="http://127.0.0.1:$query/trace/$id"
else
  curl -sf "http://127.0.0.1:$query/api/traces/$id" | python3 scripts/jaeger-trace-html.py "http://127.0.0.1:$query/api/traces/$id" >"$work/trace.html"
  url="file://$work/trace.html"
fi
/usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
  --disable-sync --no-first-run --user-data-dir="$work/chromium" --hide-scrollbars --virtual-time-budget=8000 \
  --screenshot="$PWD/$out" --window-size=1400,1000 "$url" 2>"$work/chromium.log" || { cat "$work/chromium.log"; exit 1; }
echo "wrote $out (trace $id)"

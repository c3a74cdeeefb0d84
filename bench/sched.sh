#!/usr/bin/env bash
# --sched-policy batch against normal under a saturated CPU: two sidecars (one per policy) in front of one node,
# both cores kept busy by two CPU hogs at normal priority (HOG=0: none), and the client at a fixed rate through
# each in turn, R rounds in alternating order; the client's p50, p99 and p99.9 of each run.
#
#   bench/sched.sh [TRACECAR_BINARY]      from a clone; builds ./cmd/tracecar when no binary is given
#   R=4 RATE=2000 D=6s HOG=1              rounds, op/s, run length, the CPU hogs
#
# Ports 29140-29145 on 127.0.0.1 must be free.
set -u
TC=${1:-}; R=${R:-4}; RATE=${RATE:-2000}; D=${D:-6s}
W=$(mktemp -d)
if [ -z "$TC" ]; then go build -o "$W/tracecar" ./cmd/tracecar || exit 1; TC=$W/tracecar; fi
$TC node --listen 127.0.0.1:29142 --api 127.0.0.1:29141 --log-file $W/node.log >/dev/null 2>&1 & NP=$!
$TC sidecar --listen 127.0.0.1:29143 --node 127.0.0.1:29142 --admin 127.0.0.1:29140 --sched-policy normal --log-file $W/n.log --control-socket none >/dev/null 2>&1 & S1=$!
$TC sidecar --listen 127.0.0.1:29145 --node 127.0.0.1:29142 --admin 127.0.0.1:29144 --sched-policy batch --log-file $W/b.log --control-socket none >/dev/null 2>&1 & S2=$!
sleep 2
hogs=()
if [ "${HOG:-1}" = 1 ]; then for i in 1 2; do (while :; do :; done) & hogs+=($!); done; fi
trap 'kill $NP $S1 $S2 "${hogs[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf $W' EXIT
printf '%-6s %-7s %9s %8s %8s %8s\n' round policy op/s p50_ms p99_ms p999_ms
for r in $(seq 1 $R); do
  order="normal batch"; [ $((r % 2)) = 0 ] && order="batch normal"
  for p in $order; do
    if [ $p = normal ]; then sc=127.0.0.1:29143; ad=http://127.0.0.1:29140; else sc=127.0.0.1:29145; ad=http://127.0.0.1:29144; fi
    $TC loadcheck --node 127.0.0.1:29142 --sidecar $sc --admin $ad --modes off --rate $RATE --rounds 1 --duration $D --warmup 1s --target-error 0 --json $W/r.json >$W/out.txt 2>&1 || { tail -5 $W/out.txt; continue; }
    python3 -c "
import json; m=json.load(open('$W/r.json'))['modes'][0]
print('%-6s %-7s %9.0f %8.3f %8.3f %8.3f' % ($r, '$p', m['op_rate'], m['p50_ms'], m['p99_ms'], m['p999_ms']))"
  done
done

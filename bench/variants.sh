#!/usr/bin/env bash
# CPU per operation of HAProxy and of several sidecar builds or settings side by side, in one run: each its own
# process in front of one embedded node, one mode (MODE, default off), rounds alternating the order; one line per
# run: rate, round, name, sidecar (or HAProxy) CPU µs per operation. For A/B of a change at several rates.
#
#   VARIANTS="before:/path/tracecar-a after:/path/tracecar-b spin0:/path/tracecar-b:TRACECAR_LOOP_SPIN=0s" \
#     TC=/path/tracecar RATES="50 200 2000 max" SECS=8 R=3 bench/variants.sh
#
# TC runs the node and loadcheck (default: the first variant's binary). Needs haproxy; ports BASE..BASE+30 (29340).
set -u
first=${VARIANTS%% *}; first=${first#*:}; TC=${TC:-${first%%:*}}
RATES=${RATES:-"50 200"}; SECS=${SECS:-10}; R=${R:-3}; MODE=${MODE:-off}
W=$(mktemp -d); B=${BASE:-29340}
pids=()
trap 'kill ${pids[@]} 2>/dev/null; wait 2>/dev/null; rm -rf $W' EXIT
$TC node --listen 127.0.0.1:$B --api 127.0.0.1:$((B+1)) --log-file $W/node.log >/dev/null 2>&1 & NP=$!; pids+=($NP)
cat > $W/hp.cfg <<CFG
global
  maxconn 4096
defaults
  mode tcp
  timeout connect 5s
  timeout client 1m
  timeout server 1m
listen cql
  bind 127.0.0.1:$((B+2))
  server n 127.0.0.1:$B
CFG
haproxy -f $W/hp.cfg -db >/dev/null 2>&1 & HP=$!; pids+=($HP)
names=(); spids=(); i=0
for v in $VARIANTS; do
  name=${v%%:*}; rest=${v#*:}; bin=${rest%%:*}; envs=${rest#*:}; [ "$envs" = "$rest" ] && envs=""
  port=$((B+10+2*i)); adm=$((B+11+2*i))
  env $(echo $envs | tr ',' ' ') $bin sidecar --listen 127.0.0.1:$port --node 127.0.0.1:$B --admin 127.0.0.1:$adm --log-file $W/sc$i.log ${SCFLAGS:-} >/dev/null 2>&1 & p=$!; pids+=($p)
  names+=($name); spids+=($p); i=$((i+1))
done
sleep 1.5
ticks() { cat /proc/$1/task/*/schedstat | awk '{s += $1} END {printf "%d", s / 1000}'; }
run() { # target-index rate n
  local t=$1 rate=$2 n=$3 pid extra=()
  if [ "$t" = hp ]; then pid=$HP; extra=(--mode haproxy=target=127.0.0.1:$((B+2)) --modes haproxy --baseline haproxy --sidecar 127.0.0.1:$((B+10)) --admin http://127.0.0.1:$((B+11)));
  else pid=${spids[$t]}; extra=(--modes $MODE --baseline $MODE --sidecar 127.0.0.1:$((B+10+2*t)) --admin http://127.0.0.1:$((B+11+2*t))); fi
  local rf=(); [ "$rate" = max ] && rf=(--unthrottled) || rf=(--rate $rate)
  a=$(ticks $pid)
  $TC loadcheck --node 127.0.0.1:$B "${extra[@]}" --rounds 1 --warmup 0s -n $n "${rf[@]}" ${LCFLAGS:-} --json $W/o.json > $W/o.txt 2>&1 || { echo "loadcheck failed $t"; tail -3 $W/o.txt; }
  b=$(ticks $pid)
  python3 -c "print('%.2f' % (($b-$a)/$n))"
}
for rate in $RATES; do
  if [ $rate = max ]; then n=${NMAX:-200000}; else n=$((rate*SECS)); fi
  targets=(hp); for j in ${!names[@]}; do targets+=($j); done
  for r in $(seq $R); do
    order=("${targets[@]}"); if [ $((r%2)) = 0 ]; then order=($(printf '%s\n' "${targets[@]}" | tac)); fi
    for t in "${order[@]}"; do
      v=$(run $t $rate $n); nm=hp; [ $t != hp ] && nm=${names[$t]}
      echo "$rate $r $nm $v"
    done
  done
done

#!/usr/bin/env bash
# CPU per operation of every process on the data path, and the op rate, for each way of reaching the node:
# direct, an HAProxy TCP relay, and the sidecar with tracing off, fast, full and sampled. Each process runs on its
# own on loopback; every run sends a fixed number of write operations with `tracecar loadcheck`; CPU comes from
# the scheduler's per-thread run time (/proc/PID/task/*/schedstat, nanoseconds; user+system) before and after the
# run, summed over the process's threads: /proc/PID/stat's ticks (10 ms) would quantize a run's figure by ±0.1 µs/op.
# Rounds alternate the order of the modes, and their number is even by default, so every mode runs as often early as
# late and drift between rounds shows up as spread, not as bias. Figures are the mean over rounds ± the standard
# error; under each table, the figures the targets are about (off against HAProxy, fast and full against off,
# sampled against full) are paired within each round and given as the median and each round's value.
#
#   bench/compare.sh [--docs] [--out FILE]                     from a clone; builds ./cmd/tracecar
#   N=100000 R=4 RATE=10000 TASKSET=1 BASE_PORT=29140 ...        ops per run, rounds, the fixed rate, pinning, ports
#   EXTRA_SIDECAR='TRACECAR_EVENT_LOOP=off' EXTRA_LABEL=goroutines   also measure a second sidecar (tracing off)
#   CQLPROXY=/path/to/cql-proxy ZDMPROXY=/path/to/zdm-proxy ...     also measure the CQL proxies a user would pick
#                                                                    instead (either or both)
#
# It runs every mode unthrottled and at RATE op/s, writes the markdown table to FILE (default
# bench/results.md), and with --docs (or its old name --readme) puts it into docs/performance.md between the
# "compare.sh" markers, as the results table of tracecar's documentation. The table is
# regenerated, never edited by hand. It installs haproxy with apt-get when it is missing.
#
# CQLPROXY and ZDMPROXY each add that peer as a row of both tables; with neither set, nothing changes.
# The peers are built from their public source outside this repository, never vendored: clone
# github.com/datastax/cql-proxy and `go build .`, github.com/datastax/zdm-proxy and `go build ./proxy` (their
# dependencies come from the module proxy; -buildvcs=true lets the table name the commit each was built from).
# Each runs as its own process in front of the same node, like HAProxy. zdm-proxy exists to write every request to
# two clusters, so it also gets a second `tracecar node` as its "target": its CPU includes that dual write, and the
# second node's CPU, which neither column counts, is given under each table.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-100000}; R=${R:-4}; RATE=${RATE:-10000}; TASKSET=${TASKSET:-}; BASE_PORT=${BASE_PORT:-29140}
EXTRA_SIDECAR=${EXTRA_SIDECAR:-}; EXTRA_LABEL=${EXTRA_LABEL:-extra}
CQLPROXY=${CQLPROXY:-}; ZDMPROXY=${ZDMPROXY:-}
out=bench/results.md readme=
while [ $# -gt 0 ]; do
  case $1 in
    --docs|--readme) readme=1 ;;
    --out) out=$2; shift ;;
    *) echo "unknown argument $1: want --docs or --out FILE" >&2; exit 2 ;;
  esac
  shift
done

for peer in CQLPROXY ZDMPROXY; do
  bin=${!peer}
  if [ -n "$bin" ] && { [ -d "$bin" ] || [ ! -x "$bin" ]; }; then
    echo "$peer=$bin is not an executable file: want the path of the built binary" >&2; exit 2
  fi
done

if ! command -v haproxy >/dev/null; then
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq haproxy >/dev/null
fi

admin=127.0.0.1:$BASE_PORT nodeapi=127.0.0.1:$((BASE_PORT + 1)) node=127.0.0.1:$((BASE_PORT + 2))
sidecar=127.0.0.1:$((BASE_PORT + 3)) relay=127.0.0.1:$((BASE_PORT + 4))
sidecar2=127.0.0.1:$((BASE_PORT + 5)) admin2=127.0.0.1:$((BASE_PORT + 6))
cqlproxy=127.0.0.1:$((BASE_PORT + 7)) zdmproxy=127.0.0.1:$((BASE_PORT + 8))
node2=127.0.0.1:$((BASE_PORT + 9)) node2api=127.0.0.1:$((BASE_PORT + 10))
ports="$admin $nodeapi $node $sidecar $relay $sidecar2 $admin2"
[ -n "$CQLPROXY" ] && ports="$ports $cqlproxy"
[ -n "$ZDMPROXY" ] && ports="$ports $zdmproxy $node2 $node2api"
for p in $ports; do
  if (exec 3<>"/dev/tcp/${p%:*}/${p#*:}") 2>/dev/null; then echo "port $p is taken; set BASE_PORT" >&2; exit 2; fi
done

W=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
go build -o "$W/tracecar" ./cmd/tracecar
TC=$W/tracecar
rev=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && rev="$rev+changes"

pin_node=() pin_relay=()
if [ -n "$TASKSET" ]; then pin_node=(taskset -c 0) pin_relay=(taskset -c 1); fi
"${pin_node[@]}" "$TC" node --listen "$node" --api "$nodeapi" --log-file "$W/node.log" >/dev/null 2>&1 &
NP=$!; pids+=($NP)
N2P=
if [ -n "$ZDMPROXY" ]; then
  "${pin_node[@]}" "$TC" node --listen "$node2" --api "$node2api" --log-file "$W/node2.log" >/dev/null 2>&1 &
  N2P=$!; pids+=($N2P)
fi
"${pin_relay[@]}" "$TC" sidecar --listen "$sidecar" --node "$node" --admin "$admin" --log-file "$W/sc.log" >/dev/null 2>&1 &
SP=$!; pids+=($SP)
S2P=
if [ -n "$EXTRA_SIDECAR" ]; then
  env $EXTRA_SIDECAR "${pin_relay[@]}" "$TC" sidecar --listen "$sidecar2" --node "$node" --admin "$admin2" \
    --log-file "$W/sc2.log" >/dev/null 2>&1 &
  S2P=$!; pids+=($S2P)
fi
cat >"$W/hp.cfg" <<CFG
global
  maxconn 4096
defaults
  mode tcp
  timeout connect 5s
  timeout client 1m
  timeout server 1m
listen cql
  bind $relay
  server n $node
CFG
"${pin_relay[@]}" haproxy -f "$W/hp.cfg" -db >/dev/null 2>&1 &
HP=$!; pids+=($HP)
sleep 2

# await NAME PID HOST:PORT LOG waits up to 20 s for a peer to listen, and stops the script with the tail of its log
# when it exits or does not listen by then. The peers dial the node when they start, so they start after it.
await() {
  for _ in $(seq 40); do
    if ! kill -0 "$2" 2>/dev/null; then
      echo "$1 exited before it listened on $3; the tail of its log:" >&2; tail -n 20 "$4" >&2; exit 1
    fi
    (exec 3<>"/dev/tcp/${3%:*}/${3#*:}") 2>/dev/null && return 0
    sleep 0.5
  done
  echo "$1 does not listen on $3 after 20s; the tail of its log:" >&2; tail -n 20 "$4" >&2; exit 1
}
CPP= ZPP=
if [ -n "$CQLPROXY" ]; then
  "${pin_relay[@]}" "$CQLPROXY" --contact-points 127.0.0.1 --port "${node#*:}" --bind "$cqlproxy" \
    >"$W/cqlproxy.log" 2>&1 &
  CPP=$!; pids+=($CPP)
fi
if [ -n "$ZDMPROXY" ]; then
  env ZDM_ORIGIN_CONTACT_POINTS=127.0.0.1 ZDM_ORIGIN_PORT="${node#*:}" ZDM_ORIGIN_USERNAME=u ZDM_ORIGIN_PASSWORD=p \
    ZDM_TARGET_CONTACT_POINTS=127.0.0.1 ZDM_TARGET_PORT="${node2#*:}" ZDM_TARGET_USERNAME=u ZDM_TARGET_PASSWORD=p \
    ZDM_PROXY_LISTEN_ADDRESS=127.0.0.1 ZDM_PROXY_LISTEN_PORT="${zdmproxy#*:}" ZDM_METRICS_ENABLED=false \
    ZDM_LOG_LEVEL=WARN "${pin_relay[@]}" "$ZDMPROXY" >"$W/zdmproxy.log" 2>&1 &
  ZPP=$!; pids+=($ZPP)
fi
[ -n "$CPP" ] && await cql-proxy "$CPP" "$cqlproxy" "$W/cqlproxy.log"
[ -n "$ZPP" ] && await zdm-proxy "$ZPP" "$zdmproxy" "$W/zdmproxy.log"
# The commit each peer was built from, when its binary carries it (go build -buildvcs=true).
built() { go version -m "$1" 2>/dev/null | awk '$2 ~ /^vcs.revision=/ {sub(/.*=/, "", $2); print substr($2, 1, 7)}'; }
cqlrev= zdmrev=
[ -n "$CPP" ] && cqlrev=$(built "$CQLPROXY")
[ -n "$ZPP" ] && zdmrev=$(built "$ZDMPROXY")

modes="direct haproxy off fast full sampled"
[ -n "$S2P" ] && modes="$modes $EXTRA_LABEL"
[ -n "$CPP" ] && modes="$modes cqlproxy"
[ -n "$ZPP" ] && modes="$modes zdmproxy"
# a loadcheck that refuses to saturate a deployment without --rate takes --unthrottled; its help is read whole,
# since grep -q in a pipe closes it early and, under pipefail, the help's SIGPIPE (1 run in 5) read as "no flag"
unth=; grep -q -- '-unthrottled' <<<"$("$TC" loadcheck -h 2>&1)" && unth=--unthrottled
# CPU time of a process in µs: the sum of its threads' run time in the scheduler (schedstat, in ns).
ticks() { if [ -n "$1" ]; then cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%d", s / 1000}'; else echo 0; fi; }
# The CPUs' time in /proc/stat's ticks, "steal total": on a VM, steal is the time the hypervisor ran something else
# while this machine had work. The scheduler's run time leaves it out (with paravirtual steal accounting), but the
# other tenants' work evicts caches, so a run with much of it is a run on a slower machine: the table says how much.
cpustat() { awk '$1 == "cpu" {t = 0; for (i = 2; i <= 9; i++) t += $i; print $9, t; exit}' /proc/stat; }

# relay_ticks are the sidecar's or the peer's under test; node2_ticks zdm-proxy's target node's (0 without one).
echo "setting,round,mode,ops,op_rate,p99_ms,node_ticks,relay_ticks,haproxy_ticks,node2_ticks,steal_pct" >"$W/runs.csv"
cols=9; [ -n "$N2P" ] && cols=10  # the progress lines on stderr show node2_ticks only when there is a second node
for setting in unthrottled "$RATE"; do
  if [ "$setting" = unthrottled ]; then rate=(${unth:+$unth}); else rate=(--rate "$setting"); fi
  for r in $(seq "$R"); do
    order=$modes
    [ $((r % 2)) -eq 0 ] && order=$(echo "$modes" | tr ' ' '\n' | tac | tr '\n' ' ')
    for m in $order; do
      args=(--modes "$m" --baseline "$m")
      case $m in
        haproxy) args=(--mode "haproxy=target=$relay" --modes haproxy --baseline haproxy) ;;
        "$EXTRA_LABEL") args=(--mode "$m=target=$sidecar2" --modes "$m" --baseline "$m") ;;
        cqlproxy) args=(--mode "$m=target=$cqlproxy" --modes "$m" --baseline "$m") ;;
        zdmproxy) args=(--mode "$m=target=$zdmproxy" --modes "$m" --baseline "$m") ;;
      esac
      sc=$SP
      case $m in "$EXTRA_LABEL") sc=$S2P ;; cqlproxy) sc=$CPP ;; zdmproxy) sc=$ZPP ;; esac
      a_n=$(ticks $NP) a_s=$(ticks $sc) a_h=$(ticks $HP) a_2=$(ticks "$N2P") a_c=$(cpustat)
      "$TC" loadcheck --node "$node" --sidecar "$sidecar" --admin "http://$admin" "${args[@]}" --rounds 1 \
        --warmup 0s -n "$N" "${rate[@]}" --json "$W/run.json" >"$W/run.txt" 2>&1 ||
        { echo "loadcheck failed for $m:" >&2; tail -5 "$W/run.txt" >&2
          case $m in cqlproxy | zdmproxy) echo "the tail of $m's log:" >&2; tail -n 20 "$W/$m.log" >&2 ;; esac
          exit 1; }
      b_n=$(ticks $NP) b_s=$(ticks $sc) b_h=$(ticks $HP) b_2=$(ticks "$N2P") b_c=$(cpustat)
      python3 - "$W/run.json" "$setting" "$r" "$m" "$N" $((b_n - a_n)) $((b_s - a_s)) $((b_h - a_h)) \
        $((b_2 - a_2)) "$a_c" "$b_c" >>"$W/runs.csv" <<'PY'
import json, sys
f, setting, r, m, n, dn, ds, dh, d2, a_c, b_c = sys.argv[1:]
mode = json.load(open(f))["modes"][0]
p99 = mode["p99_ms"]
(s0, t0), (s1, t1) = map(int, a_c.split()), map(int, b_c.split())
steal = round(100 * (s1 - s0) / (t1 - t0), 1) if t1 > t0 else 0.0
print(",".join(map(str, [setting, r, m, n, round(mode["op_rate"], 1), p99, dn, ds, dh, d2, steal])))
PY
      tail -1 "$W/runs.csv" | cut -d, -f1-"$cols",11 >&2
    done
  done
done

host=$(uname -n) cpus=$(nproc) model=$(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)
python3 - "$W/runs.csv" "$(getconf CLK_TCK)" "$N" "$R" "$RATE" "${TASKSET:+yes}" "$host" "$cpus" "$model" \
  "$(date -u '+%Y-%m-%d %H:%M UTC')" "$rev" "${CPP:+${cqlrev:-?}}" "${ZPP:+${zdmrev:-?}}" >"$W/table.md" <<'PY'
import csv, math, statistics, sys, textwrap
runs, hz, n, rounds, rate, pinned, host, cpus, model, date, rev, cqlrev, zdmrev = sys.argv[1:]
hz, n = int(hz), int(n)
rows = list(csv.DictReader(open(runs)))
def stat(xs):
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, 0.0
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    return m, sd / math.sqrt(len(xs))
def fmt(xs, digits=2):
    m, se = stat(xs)
    return f"{m:.{digits}f} ± {se:.{digits}f}"
us = lambda t: int(t) / n  # t is µs of CPU
print(f"`bench/compare.sh` at {rev}, {date}, on {host} ({cpus} CPUs, {model}); {rounds} rounds of {n:,} write")
print(f"operations per mode and setting, 32 workers; " + ("node pinned to CPU 0, relays to CPU 1 with taskset." if pinned else "no taskset pinning."))
print("CPU is each process's run time (user+system, from the scheduler's per-thread schedstat) per operation, in µs;")
print("figures are mean ± standard error over rounds.")
steals = sorted(float(r["steal_pct"]) for r in rows)
if steals:
    print(textwrap.fill(f"The hypervisor took {steals[len(steals) // 2]:.1f}% of the CPUs' time in the median run"
                        f" (steal, from /proc/stat; {steals[0]:.1f}–{steals[-1]:.1f}% over the runs). Run time does not"
                        " count it, but a machine whose cores the host shares runs every process slower and less"
                        " evenly.", width=116, break_on_hyphens=False))
# A peer's commit is "?" when its binary does not carry one, and empty when the peer was not run.
built = lambda name, c: f"{name} at {c}" if c != "?" else f"{name} (commit unknown: built without -buildvcs)"
peers = [built("datastax/cql-proxy", cqlrev)] if cqlrev else []
if zdmrev:
    peers.append(built("datastax/zdm-proxy", zdmrev) + ", which also writes every request to a second node (its"
                 " target, for dual writes), so its relay CPU includes that second write")
if peers:
    print(textwrap.fill("The CQL proxies a user would pick instead each run as their own process in front of the same"
                        " node: " + "; ".join(peers) + ".", width=116, break_on_hyphens=False))
# The figures the targets are about, paired within each round: haproxy and off, off and fast, full and sampled are
# next to each other in every round's order, so drift between rounds cancels instead of adding to the spread.
def paired(setting):
    by = {}
    for r in rows:
        if r["setting"] == setting:
            by.setdefault(r["round"], {})[r["mode"]] = r
    def line(name, f, fmt):
        xs = [f(m) for m in by.values() if all(k in m for k in ("haproxy", "off", "fast", "full", "sampled"))]
        if xs:
            print(f"| {name} | **{fmt(statistics.median(xs))}** | {', '.join(fmt(x) for x in xs)} |")
    cpu = lambda m, k: us(m[k]["relay_ticks"])
    ratio, diff = (lambda x: f"{x:.2f}"), (lambda x: f"{x:+.2f}")
    print()
    print("| paired in each round | median | rounds |")
    print("|---|---|---|")
    line("sidecar off ÷ HAProxy, relay CPU", lambda m: cpu(m, "off") / us(m["haproxy"]["haproxy_ticks"]), ratio)
    line("sidecar off ÷ HAProxy, p99", lambda m: float(m["off"]["p99_ms"]) / float(m["haproxy"]["p99_ms"]), ratio)
    line("fast − off, relay µs/op", lambda m: cpu(m, "fast") - cpu(m, "off"), diff)
    line("full − off, relay µs/op", lambda m: cpu(m, "full") - cpu(m, "off"), diff)
    line("sampled − full, relay µs/op", lambda m: cpu(m, "sampled") - cpu(m, "full"), diff)
    line("sampled ÷ full, node CPU", lambda m: us(m["sampled"]["node_ticks"]) / us(m["full"]["node_ticks"]), ratio)
print()
for setting in dict.fromkeys(r["setting"] for r in rows):
    title = "unthrottled" if setting == "unthrottled" else f"fixed rate, {int(setting):,} op/s"
    print(f"| {title} | op/s | p99 ms | node µs/op | relay µs/op | node + relay µs/op |")
    print("|---|---|---|---|---|---|")
    for mode in dict.fromkeys(r["mode"] for r in rows):
        rs = [r for r in rows if r["setting"] == setting and r["mode"] == mode]
        if not rs:
            continue
        relay = lambda r: 0 if mode == "direct" else us(r["haproxy_ticks"] if mode == "haproxy" else r["relay_ticks"])
        label = {"haproxy": "HAProxy (TCP)", "direct": "direct to the node", "cqlproxy": "datastax/cql-proxy",
                 "zdmproxy": "datastax/zdm-proxy (dual write)"}.get(mode, f"sidecar, {mode}")
        print(f"| {label} | {fmt([float(r['op_rate']) for r in rs], 0)} | {fmt([float(r['p99_ms']) for r in rs])} | "
              f"{fmt([us(r['node_ticks']) for r in rs])} | {'–' if mode == 'direct' else fmt([relay(r) for r in rs])} | "
              f"{fmt([us(r['node_ticks']) + relay(r) for r in rs])} |")
    paired(setting)
    zs = [r for r in rows if r["setting"] == setting and r["mode"] == "zdmproxy"]
    if zs:
        print()
        print(f"datastax/zdm-proxy's target node, its second write: {fmt([us(r['node2_ticks']) for r in zs])} µs/op,"
              " in neither of its columns.")
    print()
PY
mkdir -p "$(dirname "$out")"
cp "$W/table.md" "$out"
cat "$W/table.md"
if [ -n "$readme" ]; then
  python3 - "$W/table.md" <<'PY'
import re, sys
table = open(sys.argv[1]).read()
s = open("docs/performance.md").read()
begin, end = "<!-- compare.sh: begin (regenerated by bench/compare.sh --docs; do not edit) -->", "<!-- compare.sh: end -->"
if begin not in s:
    sys.exit("docs/performance.md has no compare.sh markers")
i, j = s.index(begin) + len(begin), s.index(end)
open("docs/performance.md", "w").write(s[:i] + "\n" + table + s[j:])
PY
fi

#!/usr/bin/env bash
# Builds one of the tools/ modules once per machine and prints the binary's path.
# Usage: scripts/build-tool.sh jaeger|otelrecv
# The binary is cached under ${TRACECAR_TOOL_CACHE:-/var/cache/tracecar}/<tool>-<hash of its
# go.sum>/, so a changed pin rebuilds it and an unchanged one never does. Progress and the
# build time go to stderr.
set -euo pipefail
cd "$(dirname "$0")/../tools/$1"
case "$1" in
  jaeger) pkg=github.com/jaegertracing/jaeger/cmd/jaeger ;;
  otelrecv) pkg=. ;;
  *) echo "build-tool.sh: unknown tool $1 (want jaeger or otelrecv)" >&2; exit 2 ;;
esac
hash=$(cat go.mod go.sum | sha256sum | cut -c1-16)
dir="${TRACECAR_TOOL_CACHE:-/var/cache/tracecar}/$1-$hash"
bin="$dir/$1"
if [ -x "$bin" ]; then
  echo "tool $1: cached $bin" >&2
else
  mkdir -p "$dir"
  start=$(date +%s)
  go build -o "$bin.tmp" "$pkg" >&2
  mv "$bin.tmp" "$bin"
  echo "tool $1: built $bin in $(( $(date +%s) - start ))s" >&2
fi
echo "$bin"

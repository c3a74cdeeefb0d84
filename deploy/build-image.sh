#!/usr/bin/env bash
# Builds tracecar's container image with buildah, from a binary built here.
#
#   deploy/build-image.sh [IMAGE]          IMAGE defaults to localhost/tracecar:dev
#
# TRACECAR_BIN=FILE uses that binary instead of building one (it must be static, as
# CGO_ENABLED=0 builds it). BUILDAH_ISOLATION and STORAGE_DRIVER are buildah's own
# (chroot and vfs work where no container runtime or overlay filesystem does, as in CI).
# It prints the image's id and size.
set -euo pipefail
cd "$(dirname "$0")/.."
image=${1:-localhost/tracecar:dev}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

if [ -n "${TRACECAR_BIN:-}" ]; then
  cp "$TRACECAR_BIN" "$ctx/tracecar"
else
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/tracecar" ./cmd/tracecar
fi
# FROM scratch has no C library: a dynamically linked binary would not start.
if readelf -l "$ctx/tracecar" | grep -q 'program interpreter'; then
  echo "build-image.sh: $ctx/tracecar is dynamically linked; build it with CGO_ENABLED=0" >&2
  exit 1
fi
mkdir -p "$ctx/etc/ssl/certs"
roots=/etc/ssl/certs/ca-certificates.crt
if [ ! -f "$roots" ]; then
  echo "build-image.sh: no $roots (Debian's ca-certificates) to put in the image" >&2
  exit 1
fi
cp "$roots" "$ctx/etc/ssl/certs/"

buildah bud --isolation "${BUILDAH_ISOLATION:-chroot}" -f deploy/Containerfile -t "$image" "$ctx" >&2
id=$(buildah images --noheading --format '{{.ID}}' "$image" | head -1)
size=$(buildah images --noheading --format '{{.Size}}' "$image" | head -1)
echo "image $image id $id size $size"

#!/usr/bin/env bash
# Builds every native part: each directory under shims/ (runs in the guest), host/ (host-side helpers) and test/fixtures/ that has a Makefile.
# Outputs go to build/ (see src/util/paths.ts). make keeps this incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
for mk in shims/*/Makefile host/*/Makefile test/fixtures/*/Makefile; do
  [ -f "$mk" ] || continue
  make -s -C "$(dirname "$mk")" OUT="$PWD/build"
done

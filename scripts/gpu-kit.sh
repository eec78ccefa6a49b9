#!/usr/bin/env bash
# Packs what the GPU checks need from Node into .gpukit/ (ignored by git), small enough to travel to a lent
# GPU machine (the device tool carries at most 64 MiB; node_modules is ~280 MB and the machine has no
# registry): this host's node binary (xz), the smol CLI and bench/cuda.ts as single-file ESM bundles
# (esbuild), and koffi's linux-x64 addon. scripts/gpu-check.sh and gpu-frameworks.sh use the kit when
# node_modules is absent (scripts/gpu-node.sh; SMOL_GPU_KIT=1 forces it).
#   scripts/gpu-kit.sh     then name .gpukit in the device run's carry (.gitignore lists it; the scripts
#                          build the C parts there, so build/ need not travel)
set -euo pipefail
cd "$(dirname "$0")/.."
K=.gpukit
rm -rf "$K"; mkdir -p "$K/node_modules/koffi/build/koffi"
node_bin="$(readlink -f "$(command -v node)")"
tar -C "$(dirname "$node_bin")" -cf - "$(basename "$node_bin")" | xz -T0 -6 >"$K/node.tar.xz"
# koffi is loaded with createRequire from the bundle's own folder: keep it as a real package beside it
cp node_modules/koffi/package.json node_modules/koffi/*.js "$K/node_modules/koffi/"
cp -r node_modules/koffi/build/koffi/linux_x64 "$K/node_modules/koffi/build/koffi/"
bundle() { # entry, out
  npx esbuild "$1" --bundle --platform=node --format=esm --target=node20 --outfile="$2" --log-level=warning \
    --external:koffi --external:better-sqlite3 --external:pg-native --external:cpu-features --external:ssh2 \
    --banner:js="import { createRequire as __smolReq } from 'node:module'; const require = __smolReq(import.meta.url);"
}
bundle test/integration/cuda/smol-dev.ts "$K/smol-dev.mjs"
# the daemon forks ./session-process.js beside its own module (cuda/daemon/spawn.ts): the bundle's folder
bundle src/cuda/daemon/session-process.ts "$K/session-process.js"
bundle bench/cuda.ts "$K/bench-cuda.mjs"
bundle scripts/cuda-coverage.ts "$K/cuda-coverage.mjs"
du -sh "$K" "$K"/* | sed 's/^/gpu-kit: /'

#!/usr/bin/env bash
# Fails when a generated file no longer matches its source (the CUDA protocol spec and symbol list).
set -euo pipefail
cd "$(dirname "$0")/.."
node --import tsx scripts/gen-cuda-protocol.ts --check

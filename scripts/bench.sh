#!/usr/bin/env bash
# Runs every benchmark that exists; each prints medians and ratios against its baseline side by side.
#   --quick   one run of each figure at the smallest sizes (BENCH_QUICK=1): checks that every bench still
#             works on this setup (scripts/test.sh runs this), not a measurement
set -euo pipefail
cd "$(dirname "$0")/.."
limit=()
for a in "$@"; do case "$a" in --quick) export BENCH_QUICK=1 BENCH_RUNS=1; limit=(timeout 900) ;; esac; done
for b in vm agent cuda ledger fork pack io image rollout cloud; do
  [ -n "$(node -e "process.stdout.write(require('./package.json').scripts['bench:$b'] ?? '')")" ] || continue
  echo "== bench:$b"
  "${limit[@]}" npm run --silent "bench:$b"
done

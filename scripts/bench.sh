#!/usr/bin/env bash
# Runs every benchmark that exists; each prints medians and ratios against its baseline side by side.
#   --quick   one run of each figure at the smallest sizes (BENCH_QUICK=1): checks that every bench still
#             works on this setup (scripts/test.sh runs this), not a measurement
set -euo pipefail
cd "$(dirname "$0")/.."
limit=()
for a in "$@"; do case "$a" in --quick) export BENCH_QUICK=1 BENCH_RUNS=1; limit=(timeout 900) ;; esac; done
for b in vm agent cuda ledger fork pack io image rollout cloud api pause; do
  [ -n "$(node -e "process.stdout.write(require('./package.json').scripts['bench:$b'] ?? '')")" ] || continue
  echo "== bench:$b"
  t0=$SECONDS
  "${limit[@]}" npm run --silent "bench:$b"
  # a quick run's cost is CI time: say it, so a bench that grows shows up in the log
  [ -z "${BENCH_QUICK:-}" ] || echo "(bench:$b took $((SECONDS - t0)) s)"
done

#!/usr/bin/env bash
# Runs every benchmark that exists; each prints medians and ratios against its baseline side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
for b in vm agent cuda ledger fork pack io; do
  [ -f "bench/$b.ts" ] && npm run --silent "bench:$b"
done

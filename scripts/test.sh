#!/usr/bin/env bash
# The whole test suite, from a clean clone: setup (idempotent), static checks, unit and integration tests,
# then every bench once in its quick mode (they use the assets setup installed, as smol does).
# SMOL_TEST_LONG=1: the longer forms of tests CI runs shortened (test/helpers/long.ts says which and how).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
echo "== typecheck";   npx tsc -p tsconfig.json --noEmit
echo "== lint";        npx eslint .
echo "== generated";   if [ -f scripts/check-generated.sh ]; then bash scripts/check-generated.sh; fi
echo "== unit";        npx vitest run --project unit
echo "== integration"; npx vitest run --project integration
echo "== benches (quick: each runs once, so none can rot)"; bash scripts/bench.sh --quick

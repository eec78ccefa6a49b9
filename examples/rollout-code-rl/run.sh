#!/usr/bin/env bash
# The code-RL rollout end to end on one machine: a stand-in code model, the gateway in front of it, a warm
# machine whose clones run the unit tests, one worker, then the rewards and the rollout's stats.
# Everything it starts is stopped or removed on the way out. See README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
smol() { ./bin/smol "$@"; }
# (background processes start ./bin/smol itself, not the function: $! must be the process to stop)

WARM=${WARM:-code-rl-env}
# How each test run is isolated: a clone of the warm machine per attempt, removed when the attempt ends.
# This is the one place the example says so.
ISOLATION=(--isolation vm --warm-machine "$WARM")
# The model server: the stand-in (deterministic: some solutions right, some wrong) unless MODEL_URL names
# an OpenAI-compatible one (vLLM, llama.cpp's llama-server) serving the manifest's model.
MODEL_URL=${MODEL_URL:-}

tmp=$(mktemp -d)
export SMOL_LEDGER=${SMOL_LEDGER:-$tmp/ledger.db}
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  smol machine rm --force "$WARM" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
first_line() { # first line a background process printed (its URL)
  for _ in $(seq 300); do if [ -s "$1" ]; then head -n 1 "$1"; return; fi; sleep 0.1; done
  echo "run.sh: nothing printed to $1 in 30 s" >&2; exit 1
}

if [ -z "$MODEL_URL" ]; then
  node --import tsx test/fixtures/upstream/server.ts > "$tmp/model" & pids+=($!)
  MODEL_URL=$(first_line "$tmp/model")
fi
./bin/smol gateway --listen 127.0.0.1:0 --upstream "$MODEL_URL" --env-version code-rl-stand-in --json > "$tmp/gateway" & pids+=($!)
gateway=$(first_line "$tmp/gateway" | sed 's/.*"url":"\([^"]*\)".*/\1/')

smol machine create "$WARM" --forkable --start
smol rollout submit examples/rollout-code-rl/manifest.yaml
# GPU stages go to the gateway, CPU stages into clones; it exits once no work is left anywhere
smol worker --gateway "$gateway" "${ISOLATION[@]}" --concurrency 2 --exit-when-idle 3s

smol rollout results code-rl --stage test
smol rollout stats --rollout code-rl
smol ledger check

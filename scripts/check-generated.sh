#!/usr/bin/env bash
# Fails when a generated file no longer matches its source (the CUDA protocol spec and symbol list, the agent
# protocol spec, the API's OpenAPI document). Every generator runs, so one run names every stale file.
set -uo pipefail
cd "$(dirname "$0")/.."
rc=0
node --import tsx scripts/gen-cuda-protocol.ts --check || rc=1
node --import tsx scripts/gen-agent-protocol.ts --check || rc=1
node --import tsx scripts/gen-openapi.ts --check || rc=1
# the TypeScript SDK's types, from the document just checked
node_modules/.bin/openapi-typescript docs/openapi.json -o src/client/schema.ts --check >/dev/null || { echo "stale generated file: src/client/schema.ts (run: npm run gen:client)" >&2; rc=1; }
exit $rc

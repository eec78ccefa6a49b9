#!/usr/bin/env bash
# Step 7 of README.md: a memory-carrying artifact. Boots a forkable machine, leaves state that exists only in
# RAM (a file on a tmpfs and a running process), packs it running with --with-memory, then resumes it with
# `pack run`. Works in a scratch SMOL_HOME (kernel and images are read from your usual one through
# SMOL_ASSETS) that it removes at the end. Set SMOL to the CLI to use (default: bin/smol from this checkout).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
SMOL="${SMOL:-node $here/../../bin/smol}"
export SMOL_ASSETS="${SMOL_ASSETS:-${SMOL_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/smol}}"
work="$(mktemp -d)"
export SMOL_HOME="$work/home"
trap '$SMOL machine rm --force warm >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

echo "== 1. a forkable machine (its RAM lives in a file), with state that exists only in RAM"
$SMOL machine create warm --forkable --start
$SMOL machine exec warm -- sh -c 'mount -t tmpfs tmpfs /tmp && date > /tmp/packed-at && (setsid sleep 100000 </dev/null >/dev/null 2>&1 &)'
echo "== 2. pack it running: paused only while its devices, RAM and disk are saved"
$SMOL pack create --from-vm warm --with-memory -o "$work/warm.smolmachine"
$SMOL pack inspect "$work/warm.smolmachine"
$SMOL pack verify "$work/warm.smolmachine"
echo "== 3. resume it (the first run extracts into the cache; later runs only resume)"
for i in 1 2; do
  s=$(date +%s%N)
  $SMOL pack run "$work/warm.smolmachine" -- sh -c 'cat /tmp/packed-at; ps | grep "[s]leep 100000"'
  echo "run $i: $(( ($(date +%s%N) - s) / 1000000 )) ms"
done
echo "== 4. where the state cannot load (simulated with a TEST ONLY override), the disk boots with a notice"
SMOL_TEST_RESUME_HOST='{"accelerator":"kvm"}' $SMOL pack run "$work/warm.smolmachine" -- sh -c 'cat /tmp/packed-at 2>/dev/null || echo "no RAM state: booted the disk"'

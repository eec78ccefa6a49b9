#!/usr/bin/env bash
# Steps 1–5 of README.md: keygen, signed reproducible pack, inspect, verify, tamper detection.
# Inputs: KERNEL and INITRD (default: smol's own guest kernel and initramfs under $SMOL_HOME), DISK optional.
# Set SMOL to the CLI to use (default: bin/smol from this checkout, after `npm run build`).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
SMOL="${SMOL:-node $here/../../bin/smol}"
home="${SMOL_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/smol}"
KERNEL="${KERNEL:-$(ls "$home"/kernel/*/vmlinux 2>/dev/null | head -1)}"
INITRD="${INITRD:-$(ls "$home"/images/initramfs/*.cpio 2>/dev/null | head -1)}"
[ -n "$KERNEL" ] && [ -n "$INITRD" ] || { echo "set KERNEL and INITRD (or run \`smol setup\` first)" >&2; exit 69; }
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
disk=(); [ -n "${DISK:-}" ] && disk=(--disk "$DISK")

echo "== 1. keygen";  $SMOL pack keygen -o "$work/release"
echo "== 2. pack twice with a fixed creation time"
for n in a b; do
  SOURCE_DATE_EPOCH=1767225600 $SMOL pack create --kernel "$KERNEL" --initrd "$INITRD" "${disk[@]}" \
    -o "$work/$n.smolmachine" --sign "$work/release.key"
done
sha256sum "$work/a.smolmachine" "$work/b.smolmachine"
cmp "$work/a.smolmachine" "$work/b.smolmachine" && echo "identical bytes"
echo "== 3. inspect"; $SMOL pack inspect "$work/a.smolmachine"
echo "== 4. verify";  $SMOL pack verify "$work/a.smolmachine" --key "$work/release.pub"
echo "== 5. flip one byte in the middle and verify again (expect exit 76 naming the entry)"
size=$(stat -c %s "$work/a.smolmachine")
printf '\xff' | dd of="$work/a.smolmachine" bs=1 seek=$((size / 2)) conv=notrunc status=none
if $SMOL pack verify "$work/a.smolmachine" --key "$work/release.pub"; then echo "tampering went undetected" >&2; exit 1; else echo "detected (exit $?)"; fi

#!/usr/bin/env bash
# Runs some of CPython's own OS-facing regression tests inside a smol machine built from a Debian bookworm
# rootfs (debootstrap, python3 and its test package), and the same tests in a chroot of that rootfs, and
# prints both summaries side by side (issue #20: signals, terminals, /dev, processes as a program sees them).
# Too slow for CI under TCG (the rootfs alone is minutes of downloads); the last result is in docs/images.md.
#   scripts/cpython-tests.sh [WORKDIR] [TEST ...]     (root; default tests: test_signal test_subprocess test_pty)
set -euo pipefail
cd "$(dirname "$0")/.."
work="${1:-/var/tmp/smol-cpython}"; shift || true
tests=("$@"); [ ${#tests[@]} -gt 0 ] || tests=(test_signal test_subprocess test_pty)
[ "$(id -u)" = 0 ] || { echo "cpython-tests: needs root (debootstrap, chroot)" >&2; exit 69; }
command -v debootstrap >/dev/null || apt-get install -y --no-install-recommends debootstrap >/dev/null
rootfs="$work/rootfs"
if [ ! -x "$rootfs/usr/bin/python3" ]; then
  rm -rf "$rootfs"; mkdir -p "$work"
  echo "cpython-tests: debootstrap bookworm into $rootfs (a few minutes)"
  debootstrap --variant=minbase --include=python3,libpython3.11-testsuite bookworm "$rootfs" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log"; exit 1; }
fi
run_tests='python3 -m test -q -u all,-network,-gui --timeout 600 '"${tests[*]}"' 2>&1 | tail -15'
echo "== chroot (host kernel)"
for d in proc sys dev dev/pts; do mountpoint -q "$rootfs/$d" || mount --bind "/$d" "$rootfs/$d"; done
set +e
chroot "$rootfs" /bin/sh -c "$run_tests"; c=$?
for d in dev/pts dev sys proc; do umount "$rootfs/$d"; done
echo "== smol run --image (guest kernel, TCG unless KVM works)"
./bin/smol run --image "$rootfs" --mem 1G --cpus 2 --timeout 40m -- /bin/sh -c "$run_tests"; v=$?
set -e
echo "cpython-tests: chroot exit $c, smol exit $v"
[ $c -eq 0 ] && [ $v -eq 0 ]

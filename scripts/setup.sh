#!/usr/bin/env bash
# Installs everything smol needs on a Debian machine, idempotently and fast when already done:
# Debian packages (as root), npm dependencies, the TypeScript build and native parts (agent, shims),
# then the guest kernel and default image via `smol setup`.
#   --test   also install what the test suite needs (PostgreSQL server, OCI registry, htpasswd and openssl for its auth tests, GNU time for bench:image)
set -euo pipefail
cd "$(dirname "$0")/.."
want_test=0
for a in "$@"; do case "$a" in --test) want_test=1 ;; esac; done

# qemu-system-common ships /usr/lib/qemu/virtiofsd (volumes); qemu-system-x86 pulls it in, named for clarity.
# iproute2 nftables dnsmasq-base tcpdump socat: the network namespace, policy, resolver, denial log and
# forwarders of --net/--allow machines (docs/network.md)
pkgs=(qemu-system-x86 qemu-system-common qemu-utils busybox-static e2fsprogs kmod cpio zstd lz4 gcc make libc6-dev
      iproute2 nftables dnsmasq-base tcpdump socat)
[ "$want_test" = 1 ] && pkgs+=(postgresql docker-registry apache2-utils openssl time)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/smol-apt.log 2>&1 || {
      apt-get update >/tmp/smol-apt.log 2>&1
      apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/smol-apt.log 2>&1 || { tail -20 /tmp/smol-apt.log; exit 69; }
    }
  else
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: run as root, or: sudo apt-get install ${missing[*]}" >&2
    exit 69
  fi
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: npm ci"
  npm ci --no-audit --no-fund >/tmp/smol-npm.log 2>&1 || { tail -20 /tmp/smol-npm.log; exit 1; }
fi

npm run --silent build
if [ -f dist/cli/commands/setup.js ]; then node bin/smol setup; fi

#!/usr/bin/env bash
# Writes a one-layer image tarball in the `docker save` layout (manifest.json, config, layer.tar) from a
# small busybox tree, using only tar and sha256sum: what `docker save` would produce for a FROM-scratch image.
#   bash examples/docker-image/make-tarball.sh OUT.tar
set -euo pipefail
out=$(realpath -m "${1:?usage: make-tarball.sh OUT.tar}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs/bin" "$work/rootfs/etc" "$work/image"
cp /bin/busybox "$work/rootfs/bin/busybox"
for a in sh ls cat echo uname; do ln -s busybox "$work/rootfs/bin/$a"; done
echo "hello from a docker-save image booted by smol" > "$work/rootfs/etc/motd"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work/rootfs" -cf "$work/layer.tar" .
layer=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
mkdir "$work/image/$layer"
mv "$work/layer.tar" "$work/image/$layer/layer.tar"
printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Cmd":["/bin/sh"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$layer" > "$work/image/config.json"
config=$(sha256sum "$work/image/config.json" | cut -d' ' -f1)
mv "$work/image/config.json" "$work/image/$config.json"
printf '[{"Config":"%s.json","RepoTags":["smol/hello:latest"],"Layers":["%s/layer.tar"]}]' "$config" "$layer" > "$work/image/manifest.json"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$work/image" -cf "$out" .
echo "wrote $out"

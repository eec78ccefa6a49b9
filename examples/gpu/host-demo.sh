#!/usr/bin/env bash
# CUDA remoting on the host, no VM: start `smol gpu serve`, run the test programs through the guest shim,
# show the daemon's status. Uses the FAKE CUDA driver unless LIBCUDA points at a real libcuda.so.1.
#   examples/gpu/host-demo.sh            # FAKE driver (works without a GPU)
#   LIBCUDA=/usr/lib/x86_64-linux-gnu/libcuda.so.1 examples/gpu/host-demo.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/build-native.sh
LIBCUDA=${LIBCUDA:-$PWD/build/fake-cuda/libcuda.so.1}
TMP=$(mktemp -d)
smol() { node --import tsx test/integration/cuda/smol-dev.ts "$@"; }
smol gpu serve --listen "unix:$TMP/cuda.sock" --libcuda "$LIBCUDA" --control "$TMP/ctl" &
DAEMON=$!
trap 'kill $DAEMON; rm -rf "$TMP"' EXIT
while [ ! -S "$TMP/cuda.sock" ]; do sleep 0.2; done

export LD_LIBRARY_PATH=$PWD/build SMOL_CUDA_ENDPOINT=unix:$TMP/cuda.sock
build/cuda-programs/driver_vecadd build/cuda-programs/kernels.ptx          # driver API
[ -x build/cuda-programs/runtime_vecadd_static ] && build/cuda-programs/runtime_vecadd_static   # runtime API (nvcc)
build/cuda-programs/nvml_query                                             # NVML
smol gpu status --control "$TMP/ctl"

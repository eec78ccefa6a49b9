# Sourced by scripts/gpu-check.sh and gpu-frameworks.sh: how to run the smol CLI, bench/cuda.ts and
# scripts/cuda-coverage.ts. This checkout's node + tsx when it has node_modules; else (a lent GPU machine:
# no node_modules, no registry) the kit scripts/gpu-kit.sh packed into .gpukit/, its node unpacked to
# /tmp/smol-node. SMOL_GPU_KIT=1 uses the kit even here (to check it). Sets SMOL_DEV, CUDA_BENCH and
# CUDA_COVERAGE (commands, used unquoted).
if [ "${SMOL_GPU_KIT:-0}" != 1 ] && command -v node >/dev/null && [ -d node_modules/tsx ]; then
  SMOL_DEV="node --import tsx test/integration/cuda/smol-dev.ts"
  CUDA_BENCH="node --import tsx bench/cuda.ts"
  CUDA_COVERAGE="node --import tsx scripts/cuda-coverage.ts"
elif [ -d .gpukit ]; then
  if [ ! -x /tmp/smol-node/node ]; then
    mkdir -p /tmp/smol-node && xz -dc .gpukit/node.tar.xz | tar -C /tmp/smol-node -xf - || { echo "gpu: unpacking .gpukit/node.tar.xz failed" >&2; exit 1; }
  fi
  SMOL_DEV="/tmp/smol-node/node .gpukit/smol-dev.mjs"
  CUDA_BENCH="/tmp/smol-node/node .gpukit/bench-cuda.mjs"
  CUDA_COVERAGE="/tmp/smol-node/node .gpukit/cuda-coverage.mjs"
else
  echo "gpu: no node_modules here and no .gpukit: run scripts/gpu-kit.sh where npm works and carry .gpukit" >&2
  exit 69
fi

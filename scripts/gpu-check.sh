#!/usr/bin/env bash
# On a machine with a real NVIDIA GPU and driver: builds the shims and test programs, starts
# `smol gpu serve` on the real libcuda.so.1, runs each program natively and remoted (through the guest
# shim over a Unix socket), and prints a PASS/FAIL table. A second daemon with
# SMOL_CUDA_PARAM_LAYOUT=image reruns the programs with every kernel parameter layout read from the
# module images (the fallback for drivers without cuFuncGetParamInfo). The return-code conformance
# programs (test/fixtures/cuda-programs/conformance) must print the same CASE lines natively and remoted;
# where the real driver disagrees with expected/*.txt the differing lines are printed for that file to
# be corrected. Every program runs under a timeout; the whole check finishes in well under 5 minutes.
#   scripts/gpu-check.sh [--libcuda PATH] [--bench]
# Frameworks (PyTorch, cuBLAS, cuDNN, Triton, ...) native vs remoted: scripts/gpu-frameworks.sh (issue #30).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-node.sh
LIBCUDA=""; BENCH=0
while [ $# -gt 0 ]; do
  case "$1" in
    --libcuda) LIBCUDA="$2"; shift 2 ;;
    --bench) BENCH=1; shift ;;
    *) echo "usage: $0 [--libcuda PATH] [--bench]" >&2; exit 64 ;;
  esac
done
[ -n "$LIBCUDA" ] || LIBCUDA="$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')"
if [ -z "$LIBCUDA" ] || [ ! -e "$LIBCUDA" ]; then echo "gpu-check: no libcuda.so.1 found (pass --libcuda PATH)" >&2; exit 69; fi
NVCC="$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

OUT="$PWD/build"; TMP="$(mktemp -d)"
DAEMON=""; DAEMON_IMG=""
trap 'kill $DAEMON $DAEMON_IMG 2>/dev/null; wait $DAEMON $DAEMON_IMG 2>/dev/null; rm -rf "$TMP"' EXIT
for d in shims/cuda shims/nvml test/fixtures/cuda-programs; do
  make -s -C "$d" OUT="$OUT" ${NVCC:+NVCC=$NVCC} || { echo "gpu-check: build of $d failed" >&2; exit 1; }
done

serve() { # socket name, control name, extra environment...
  local sock="$1" ctl="$2"; shift 2
  env "$@" $SMOL_DEV gpu serve --listen "unix:$TMP/$sock" \
    --libcuda "$LIBCUDA" --control "$TMP/$ctl" >"$TMP/$sock.log" 2>&1 &
}
wait_sock() {
  for _ in $(seq 1 150); do [ -S "$TMP/$1" ] && return 0; sleep 0.2; done
  echo "gpu-check: daemon did not start:" >&2; cat "$TMP/$1.log" >&2; exit 1
}
serve cuda.sock ctl; DAEMON=$!
serve cuda-image.sock ctl-image SMOL_CUDA_PARAM_LAYOUT=image; DAEMON_IMG=$!
wait_sock cuda.sock; wait_sock cuda-image.sock
SOCK=cuda.sock

P="$OUT/cuda-programs"; rows=(); fails=0
run() { # name, expect (ALL PASS | regex), command...
  local name="$1" expect="$2"; shift 2
  local t0 t1 n r nout rout
  t0=$(date +%s%N); nout="$(timeout 120 "$@" 2>&1)"; n=$?; t1=$(date +%s%N)
  local nms=$(( (t1 - t0) / 1000000 ))
  t0=$(date +%s%N); rout="$(LD_LIBRARY_PATH="$OUT" SMOL_CUDA_ENDPOINT="unix:$TMP/$SOCK" timeout 120 "$@" 2>&1)"; r=$?; t1=$(date +%s%N)
  local rms=$(( (t1 - t0) / 1000000 ))
  local verdict=PASS
  if [ $n -ne 0 ] || [ $r -ne 0 ] || ! grep -Eq "$expect" <<<"$rout"; then verdict=FAIL; fails=$((fails + 1)); fi
  # remoted results must equal native ones line by line
  if [ "$verdict" = PASS ] && [ "$(grep '^RESULT' <<<"$nout")" != "$(grep '^RESULT' <<<"$rout")" ]; then verdict=FAIL; fails=$((fails + 1)); fi
  rows+=("$(printf '%-34s %-6s native rc=%-3s %6sms   remoted rc=%-3s %6sms' "$name" "$verdict" "$n" "$nms" "$r" "$rms")")
  [ "$verdict" = FAIL ] && { echo "--- $name native:"; echo "$nout" | tail -5; echo "--- $name remoted:"; echo "$rout" | tail -5; }
}
run "driver API vecadd/saxpy/reduce" "ALL PASS" "$P/driver_vecadd" "$P/kernels.ptx"
run "NVML query" "count: [1-9]" "$P/nvml_query"
if [ -x "$P/runtime_vecadd_static" ]; then
  run "runtime API (static cudart)" "ALL PASS" "$P/runtime_vecadd_static"
  run "runtime API (shared cudart)" "ALL PASS" "$P/runtime_vecadd_shared"
else
  rows+=("runtime API programs               SKIP   (nvcc not found)")
fi
# Return-code conformance: native and remoted must print identical CASE/INFO lines. Each program takes
# a second or two; 20 s timeouts keep a hang (a driver stuck on a stale handle) from eating the budget.
C="$P/conformance"; EXP=test/fixtures/cuda-programs/conformance/expected
NATIVE_LD="$(dirname "$LIBCUDA")"
conf() { # row name, expected file, command...
  local name="$1" exp="$2"; shift 2
  local nout rout n r nc rc verdict=PASS
  nout="$(LD_LIBRARY_PATH="$NATIVE_LD" timeout 20 "$@" 2>&1)"; n=$?
  rout="$(LD_LIBRARY_PATH="$OUT" SMOL_CUDA_ENDPOINT="unix:$TMP/$SOCK" timeout 20 "$@" 2>&1)"; r=$?
  # GPU_CHECK_SAVE=DIR keeps every program's whole output (native.txt, remoted.txt), e.g. to update expectations
  if [ -n "${GPU_CHECK_SAVE:-}" ]; then mkdir -p "$GPU_CHECK_SAVE"
    printf '=== %s\n%s\n' "$(basename "$1")" "$nout" >>"$GPU_CHECK_SAVE/native.txt"
    printf '=== %s\n%s\n' "$(basename "$1")" "$rout" >>"$GPU_CHECK_SAVE/remoted.txt"; fi
  # A case the real driver crashes on (undefined behaviour: it prints CRASH) is compared with nothing;
  # the shim answers it with an error code instead.
  local crashed; crashed="$(sed -n 's/^CASE \(.*\) CRASH$/\1/p' <<<"$nout")"
  nc="$(grep -E '^(CASE|INFO) ' <<<"$nout" | grep -vwFf <(printf '%s\n' "${crashed:-@none@}"))"
  rc="$(grep -E '^(CASE|INFO) ' <<<"$rout" | grep -vwFf <(printf '%s\n' "${crashed:-@none@}"))"
  [ -n "$crashed" ] && echo "--- $name: the real driver crashes on: $(echo $crashed)"
  if [ -z "$nc" ] || [ "$nc" != "$rc" ] || [ $n -ne 0 ] || [ $r -ne 0 ]; then verdict=FAIL; fails=$((fails + 1)); fi
  # Use after destroy is undefined: the real driver crashes on most of these and its codes are only reported
  if [ "${CONF_INFO_ONLY:-}" = 1 ] && [ "$verdict" = FAIL ]; then verdict=INFO; fails=$((fails - 1)); fi
  rows+=("$(printf '%-34s %-6s native rc=%-3s %3s cases   remoted rc=%-3s %3s cases' "$name" "$verdict" "$n" "$(grep -c '^CASE' <<<"$nout")" "$r" "$(grep -c '^CASE' <<<"$rout")")")
  if [ "$verdict" = FAIL ]; then
    echo "--- $name: native (<) vs remoted (>):"; diff <(echo "$nc") <(echo "$rc") | head -60
    [ $n -ne 0 ] && { echo "--- $name native stderr:"; grep -Ev '^(CASE|INFO) ' <<<"$nout" | tail -5; }
    [ $r -ne 0 ] && { echo "--- $name remoted stderr:"; grep -Ev '^(CASE|INFO) ' <<<"$rout" | tail -5; }
  fi
  [ "$exp" = - ] && return 0
  local ed; ed="$(diff <(grep '^CASE' "$exp" | sed 's/ *#.*//') <(grep '^CASE' <<<"$nout"))"
  if [ -n "$ed" ]; then echo "--- $name: $exp (<) vs this driver (>): correct the expectations"; echo "$ed" | head -60; fi
}
# A kernel fault is fatal to the process that ran it (the real driver's rule): the remoted guest must see
# what a native process sees, and every row after these two proves the fault reached no other guest.
run "driver API sticky fault" "launch=0 sync=[1-9]" "$P/driver_vecadd" "$P/kernels.ptx" sticky 4096
conf "fault: the rest of its process" - "$P/fault_isolation" "$P/kernels.ptx"
conf "conformance: init/devices/contexts" "$EXP/conf_init.txt" "$C/conf_init"
conf "conformance: memory" "$EXP/conf_mem.txt" "$C/conf_mem"
conf "conformance: modules/launches" "$EXP/conf_exec.txt" "$C/conf_exec" "$P/kernels.ptx"
CONF_INFO_ONLY=1 conf "conformance: destroyed handles (UB)" "$EXP/conf_handles.txt" "$C/conf_handles" "$P/kernels.ptx"
# The areas' conformance programs (graphs, pools, copies, launch attributes...): each takes the PTX path.
for prog in "$C"/conf_*; do
  case "$(basename "$prog")" in conf_init|conf_mem|conf_exec|conf_handles) continue ;; esac
  conf "conformance: $(basename "$prog" | sed 's/^conf_//')" "$EXP/$(basename "$prog").txt" "$prog" "$P/kernels.ptx"
done
if [ -x "$C/rt_conformance_static" ]; then
  conf "conformance: runtime static" "$EXP/rt_conformance.txt" "$C/rt_conformance_static"
  conf "conformance: runtime shared" "$EXP/rt_conformance.txt" "$C/rt_conformance_shared"
fi
SOCK=cuda-image.sock
FB=test/fixtures/cuda-programs/param-layouts/kernels.fatbin
run "image layouts: driver API PTX" "ALL PASS" "$P/driver_vecadd" "$P/kernels.ptx"
run "image layouts: driver API fatbin" "ALL PASS" "$P/driver_vecadd" "$FB"
[ -x "$P/runtime_vecadd_static" ] && run "image layouts: runtime static" "ALL PASS" "$P/runtime_vecadd_static"
grep -q 'layouts come from the module images' "$TMP/cuda-image.sock.log" || { rows+=("image layouts: daemon log          FAIL   (no fallback line)"); fails=$((fails + 1)); }
echo; echo "CUDA remoting check against $LIBCUDA"
printf '%s\n' "${rows[@]}"
$SMOL_DEV gpu status --control "$TMP/ctl" --json | head -20
if [ "$BENCH" = 1 ]; then timeout 300 $CUDA_BENCH --libcuda "$LIBCUDA"; fi
[ "$fails" -eq 0 ] && echo "gpu-check: ALL PASS" || echo "gpu-check: $fails FAILED"
exit $(( fails > 0 ))

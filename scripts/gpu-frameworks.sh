#!/usr/bin/env bash
# Issue #30: PyTorch, cuBLAS, cuDNN, Triton, cuFFT/cuRAND and NVML through the CUDA remoting, against
# native. On a GPU machine with python3 + torch (cu130), triton and cupy: builds the shims, starts
# `smol gpu serve` on the real libcuda.so.1, runs each workload in scripts/gpu-frameworks/ natively and
# remoted (the shim's libcuda.so.1 first on LD_LIBRARY_PATH), compares their RESULT lines
# (compare.py), kills a workload mid-run on both paths and checks no device memory stays held, and
# prints a PASS/FAIL table, the remoted/native ratios and rows for docs/cuda.md "Frameworks".
# Whole run <= 8 minutes (GPU_FW_BUDGET_S, default 420 s: rows past it are SKIP).
#   scripts/gpu-frameworks.sh [--libcuda PATH] [--only w1,w2] [--out DIR] [--trace]
# --trace: runs the workloads natively only, under the tracing interposer
# (test/fixtures/driver-trace), and writes test/fixtures/driver-usage/<workload>.txt: the driver entry
# points each called, with counts, and the export tables it asked for.
set -uo pipefail
cd "$(dirname "$0")/.."
LIBCUDA=""; TRACE=0; ONLY=""; SAVE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --libcuda) LIBCUDA="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --out) SAVE="$2"; shift 2 ;;
    --trace) TRACE=1; shift ;;
    *) echo "usage: $0 [--libcuda PATH] [--only w1,w2] [--out DIR] [--trace]" >&2; exit 64 ;;
  esac
done
PY="${PYTHON:-python3}"; W=scripts/gpu-frameworks; OUT="$PWD/build"
WORKLOADS=(matmul conv mlp generate triton_kernel graphs fft_rand memstats)
[ -n "$ONLY" ] && IFS=, read -r -a WORKLOADS <<<"$ONLY"
START=$(date +%s); BUDGET="${GPU_FW_BUDGET_S:-420}"
left() { echo $(( BUDGET - ($(date +%s) - START) )); }

for d in shims/cuda shims/nvml test/fixtures/driver-trace; do
  make -s -C "$d" OUT="$OUT" || { echo "gpu-frameworks: build of $d failed" >&2; exit 1; }
done
# The workloads need these; without them nothing below can run (e.g. on a CI host).
missing="$("$PY" - <<'EOF' 2>/dev/null || echo "python3 itself"
import importlib.util as u
print(" ".join(m for m in ("torch", "triton", "cupy", "numpy") if u.find_spec(m) is None))
EOF
)"
if [ -n "$missing" ]; then
  echo "gpu-frameworks: $PY lacks $missing: this needs a GPU machine with PyTorch (cu130), Triton and CuPy installed" >&2
  exit 69
fi
[ -n "$LIBCUDA" ] || LIBCUDA="$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')"
if [ -z "$LIBCUDA" ] || [ ! -e "$LIBCUDA" ]; then echo "gpu-frameworks: no libcuda.so.1 found (pass --libcuda PATH)" >&2; exit 69; fi
GPU="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
echo "gpu-frameworks: $GPU; driver $LIBCUDA; $("$PY" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)')"
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONDONTWRITEBYTECODE=1
TMP="$(mktemp -d)"; [ -n "$SAVE" ] && mkdir -p "$SAVE"
DAEMON=""
trap 'kill $DAEMON 2>/dev/null; wait $DAEMON 2>/dev/null; rm -rf "$TMP"' EXIT

if [ "$TRACE" = 1 ]; then
  mkdir -p test/fixtures/driver-usage
  for w in "${WORKLOADS[@]}"; do
    log="$TMP/$w.trace"
    LD_LIBRARY_PATH="$OUT/driver-trace" SMOL_TRACE_REAL_LIBCUDA="$LIBCUDA" SMOL_TRACE_LOG="$log" SMOL_TRACE_CALLS=0 \
      timeout 120 "$PY" "$W/$w.py" >"$TMP/$w.out" 2>&1; rc=$?
    f="test/fixtures/driver-usage/$w.txt"
    { echo "# $w: driver entry points called (summed over processes) and export tables requested, natively"
      echo "# under test/fixtures/driver-trace; $GPU; $(date -u +%F); exit $rc. Regenerate: scripts/gpu-frameworks.sh --trace"
      awk '$2 == "COUNT" && $3 !~ /^export:/ { split($4, c, "="); split($5, e, "="); n[$3] += c[2]; x[$3] += e[2] }
           END { for (k in n) printf "call %s %d errors=%d\n", k, n[k], x[k] }' "$log" | sort
      awk '$2 == "EXPORT" { k = $3 " " $4; n[k]++ } END { for (k in n) printf "export %s %d\n", k, n[k] }' "$log" | sort
      awk '$2 == "PROC" && /rc=0 / { n++ } $2 == "PROC" && !/rc=0 / { m++ } END { printf "# cuGetProcAddress: %d resolved, %d not found\n", n, m }' "$log"
    } >"$f"
    [ -n "$SAVE" ] && cp "$log" "$SAVE/$w.trace.log"
    printf '%-14s exit %-3s %4s entry points, %s export tables -> %s\n' "$w" "$rc" "$(grep -c '^call' "$f")" "$(grep -c '^export' "$f")" "$f"
    [ $rc -ne 0 ] && tail -3 "$TMP/$w.out"
  done
  exit 0
fi

node --import tsx test/integration/cuda/smol-dev.ts gpu serve --listen "unix:$TMP/cuda.sock" \
  --libcuda "$LIBCUDA" --control "$TMP/ctl" >"$TMP/daemon.log" 2>&1 &
DAEMON=$!
for _ in $(seq 1 150); do [ -S "$TMP/cuda.sock" ] && break; sleep 0.2; done
[ -S "$TMP/cuda.sock" ] || { echo "gpu-frameworks: daemon did not start:" >&2; cat "$TMP/daemon.log" >&2; exit 1; }
REMOTE=(env LD_LIBRARY_PATH="$OUT" SMOL_CUDA_ENDPOINT="unix:$TMP/cuda.sock")
status() { node --import tsx test/integration/cuda/smol-dev.ts gpu status --control "$TMP/ctl" --json; }

rows=(); md=(); fails=0; TODAY="$(date -u +%F)"
for w in "${WORKLOADS[@]}"; do
  t=$(left); [ "$t" -gt 150 ] && t=150
  if [ "$t" -lt 20 ]; then rows+=("$(printf '%-14s SKIP   (time budget spent)' "$w")"); continue; fi
  timeout $((t / 2)) "$PY" "$W/$w.py" >"$TMP/$w.native" 2>&1
  timeout $((t / 2)) "${REMOTE[@]}" "$PY" "$W/$w.py" >"$TMP/$w.remoted" 2>&1
  cmp="$("$PY" "$W/compare.py" "$TMP/$w.native" "$TMP/$w.remoted")"; verdict="$(sed 's/.*"verdict": "\([A-Z]*\)".*/\1/' <<<"$cmp")"
  [ "$verdict" = PASS ] || { verdict=FAIL; fails=$((fails + 1)); echo "--- $w: $cmp"; tail -4 "$TMP/$w.remoted"; }
  ratios="$("$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print(" ".join(f"{k}={v}" for k,v in d["ratios"].items()))' "$cmp")"
  rows+=("$(printf '%-14s %-6s remoted/native: %s' "$w" "$verdict" "$ratios")")
  md+=("| $w | $(grep -q '"ok": true' "$TMP/$w.native" && echo ok || echo fail) | $verdict | $ratios | $TODAY | $GPU |")
  [ -n "$SAVE" ] && cp "$TMP/$w.native" "$TMP/$w.remoted" "$SAVE/"
done

# (i) SIGKILL mid-run: natively the driver must drop the process's memory; remoted, the daemon must end
# the session and its process, which the driver then cleans up the same way.
killed() { # label, command prefix...
  local label="$1"; shift
  "$@" "$PY" "$W/hold.py" >"$TMP/hold.$label" 2>&1 & local pid=$!
  for _ in $(seq 1 300); do grep -q READY "$TMP/hold.$label" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  grep -q READY "$TMP/hold.$label" || { echo "--- hold ($label) never got ready:"; tail -3 "$TMP/hold.$label"; kill -9 $pid 2>/dev/null; return 1; }
  local spids; spids="$(status | "$PY" -c 'import json,sys; print(" ".join(str(s["pid"]) for s in json.load(sys.stdin)["sessions"]))')"
  kill -9 $pid; wait $pid 2>/dev/null
  local watch="$pid $spids"
  for _ in $(seq 1 100); do
    local apps; apps="$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' ')"
    local held=0; for p in $watch; do grep -qx "$p" <<<"$apps" && held=1; done
    local sess; sess="$(status | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["sessions"]))')"
    [ $held = 0 ] && [ "$sess" = 0 ] && return 0
    sleep 0.1
  done
  echo "--- hold ($label): pids $watch still hold device memory or a session is open"; return 1
}
if [ -z "$ONLY" ] || [[ ",$ONLY," == *,hold,* ]]; then
  kv=PASS; killed native env || kv=FAIL; killed remoted "${REMOTE[@]}" || kv=FAIL
  [ $kv = FAIL ] && fails=$((fails + 1))
  rows+=("$(printf '%-14s %-6s SIGKILL mid-run: no device memory or session left (nvidia-smi, gpu status)' kill "$kv")")
  md+=("| kill mid-run | - | $kv | - | $TODAY | $GPU |")
fi

kvm=absent; [ -c /dev/kvm ] && kvm=present
echo; echo "Frameworks through the CUDA remoting against $LIBCUDA ($GPU); microVM prerequisites: /dev/kvm $kvm, qemu-system-x86_64 $(command -v qemu-system-x86_64 >/dev/null && echo found || echo 'not found')"
printf '%s\n' "${rows[@]}"
echo; echo "docs/cuda.md \"Frameworks\" rows (workload | native | remoted | remoted/native | date | GPU):"
printf '%s\n' "${md[@]}" | tee "${SAVE:-$TMP}/table.md"
status | head -c 2000; echo
[ "$fails" -eq 0 ] && echo "gpu-frameworks: ALL PASS" || echo "gpu-frameworks: $fails FAILED"
exit $(( fails > 0 ))

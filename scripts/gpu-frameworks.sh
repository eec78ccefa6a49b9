#!/usr/bin/env bash
# Issue #30: PyTorch, cuBLAS, cuDNN, Triton, cuFFT/cuRAND and NVML through the CUDA remoting, against
# native. On a GPU machine with python3 + torch (cu130), triton and cupy: builds the shims, starts
# `smol gpu serve` on the real libcuda.so.1, runs each workload in scripts/gpu-frameworks/ natively and
# remoted (the shim's libcuda.so.1 first on LD_LIBRARY_PATH), compares their RESULT lines
# (compare.py), kills a workload mid-run on both paths and checks no device memory stays held, and
# prints a PASS/FAIL table, the remoted/native ratios and rows for docs/cuda.md "Frameworks".
# Whole run <= 8 minutes (GPU_FW_BUDGET_S, default 420 s: rows past it are SKIP, exit 3).
#   scripts/gpu-frameworks.sh [--libcuda PATH] [--only w1,w2,kill] [--out DIR] [--trace [--usage DIR]]
#   scripts/gpu-frameworks.sh --selftest [--only ...] [--out DIR] [--trace [--usage DIR]]
#   scripts/gpu-frameworks.sh --apply DIR/table.md [--docs docs/cuda.md]
# --trace: runs the workloads natively only, under the tracing interposer (test/fixtures/driver-trace),
# writes <usage dir>/<workload>.txt (default test/fixtures/driver-usage): the driver entry points each
# called, with counts, and the export tables it asked for; then lists what the shim lacks of them.
# --selftest: the same machinery with no GPU: the FAKE driver (build/fake-cuda) stands in for the real
# one and the workloads are the C programs it runs (selftest.py); the kill row checks the session
# processes instead of nvidia-smi; --trace writes to <--out or build/gpu-frameworks-selftest>/usage.
# --apply: merges a run's table.md into docs/cuda.md's compatibility table (apply_table.py).
# --no-build: use build/ as it is (make is otherwise run on each native part first).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-node.sh
LIBCUDA=""; TRACE=0; ONLY=""; SAVE=""; SELFTEST=0; USAGE=""; APPLY=""; DOCS=docs/cuda.md; BUILD=1
while [ $# -gt 0 ]; do
  case "$1" in
    --libcuda) LIBCUDA="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    --out) SAVE="$2"; shift 2 ;;
    --trace) TRACE=1; shift ;;
    --usage) USAGE="$2"; shift 2 ;;
    --selftest) SELFTEST=1; shift ;;
    --apply) APPLY="$2"; shift 2 ;;
    --docs) DOCS="$2"; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    *) echo "usage: $0 [--selftest] [--no-build] [--libcuda PATH] [--only w1,w2,kill] [--out DIR] [--trace [--usage DIR]] | --apply TABLE [--docs FILE]" >&2; exit 64 ;;
  esac
done
PY="${PYTHON:-python3}"; W=scripts/gpu-frameworks; OUT="$PWD/build"
[ -n "$APPLY" ] && exec "$PY" "$W/apply_table.py" "$APPLY" "$DOCS"
START=$(date +%s); BUDGET="${GPU_FW_BUDGET_S:-420}"
left() { echo $(( BUDGET - ($(date +%s) - START) )); }

DIRS=(shims/cuda shims/nvml test/fixtures/driver-trace)
[ $SELFTEST = 1 ] && DIRS+=(test/fixtures/fake-cuda test/fixtures/cuda-programs)
for d in "${DIRS[@]}"; do
  [ $BUILD = 1 ] || break
  make -s -C "$d" OUT="$OUT" || { echo "gpu-frameworks: build of $d failed" >&2; exit 1; }
done

if [ $SELFTEST = 1 ]; then
  LIBCUDA="${LIBCUDA:-$OUT/fake-cuda/libcuda.so.1}"
  [ -e "$LIBCUDA" ] || { echo "gpu-frameworks: no FAKE driver at $LIBCUDA" >&2; exit 1; }
  GPU="FAKE driver, no GPU"
  mapfile -t WORKLOADS < <("$PY" "$W/selftest.py" --list)
  NATIVE=(env LD_LIBRARY_PATH="$(dirname "$LIBCUDA")"); HOLD=("$PY" "$W/selftest.py" hold)
  USAGE="${USAGE:-${SAVE:-$OUT/gpu-frameworks-selftest}/usage}"
  echo "gpu-frameworks: self-test on the FAKE driver $LIBCUDA"
else
  # The workloads need these; without them nothing below can run (e.g. on a CI host).
  missing="$("$PY" - <<'EOF' 2>/dev/null || echo "python3 itself"
import importlib.util as u
print(" ".join(m for m in ("torch", "triton", "cupy", "numpy") if u.find_spec(m) is None))
EOF
)"
  if [ -n "$missing" ]; then
    echo "gpu-frameworks: $PY lacks $missing: this needs a GPU machine with PyTorch (cu130), Triton and CuPy installed (without one: --selftest)" >&2
    exit 69
  fi
  [ -n "$LIBCUDA" ] || LIBCUDA="$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF; exit}')"
  if [ -z "$LIBCUDA" ] || [ ! -e "$LIBCUDA" ]; then echo "gpu-frameworks: no libcuda.so.1 found (pass --libcuda PATH)" >&2; exit 69; fi
  GPU="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  read -r TV TRV CPV < <("$PY" -c 'import torch, triton, cupy; print(torch.__version__, triton.__version__, cupy.__version__)')
  WORKLOADS=(matmul conv mlp generate triton_kernel graphs fft_rand memstats)
  NATIVE=(env); HOLD=("$PY" "$W/hold.py")
  USAGE="${USAGE:-test/fixtures/driver-usage}"
  echo "gpu-frameworks: $GPU; driver $LIBCUDA; torch $TV, triton $TRV, cupy $CPV"
fi
KILL=1
if [ -n "$ONLY" ]; then
  IFS=, read -r -a picked <<<"$ONLY"; WORKLOADS=(); KILL=0
  for w in "${picked[@]}"; do case "$w" in kill|hold) KILL=1 ;; *) WORKLOADS+=("$w") ;; esac; done
fi
framework() {
  if [ $SELFTEST = 1 ]; then echo "FAKE driver (CPU)"; return; fi
  case "$1" in
    triton_kernel) echo "Triton $TRV, PyTorch $TV" ;;
    fft_rand) echo "PyTorch $TV, CuPy $CPV" ;;
    memstats) echo "PyTorch $TV, NVML" ;;
    *) echo "PyTorch $TV" ;;
  esac
}
workload() { if [ $SELFTEST = 1 ]; then echo "$W/selftest.py $1"; else echo "$W/$1.py"; fi; }
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONDONTWRITEBYTECODE=1
TMP="$(mktemp -d)"; [ -n "$SAVE" ] && mkdir -p "$SAVE"
DAEMON=""
trap 'kill $DAEMON 2>/dev/null; wait $DAEMON 2>/dev/null; rm -rf "$TMP"' EXIT

if [ "$TRACE" = 1 ]; then
  mkdir -p "$USAGE"
  for w in "${WORKLOADS[@]}"; do
    log="$TMP/$w.trace"
    # shellcheck disable=SC2046 # workload is "script [arg]"
    LD_LIBRARY_PATH="$OUT/driver-trace" SMOL_TRACE_REAL_LIBCUDA="$LIBCUDA" SMOL_TRACE_LOG="$log" SMOL_TRACE_CALLS=0 \
      timeout 120 "$PY" $(workload "$w") >"$TMP/$w.out" 2>&1; rc=$?
    f="$USAGE/$w.txt"
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
  echo "What the shim lacks of it (scripts/cuda-coverage.ts --usage):"
  $CUDA_COVERAGE --no-build --usage "$USAGE"
  exit 0
fi

$SMOL_DEV gpu serve --listen "unix:$TMP/cuda.sock" \
  --libcuda "$LIBCUDA" --control "$TMP/ctl" >"$TMP/daemon.log" 2>&1 &
DAEMON=$!
for _ in $(seq 1 150); do [ -S "$TMP/cuda.sock" ] && break; sleep 0.2; done
[ -S "$TMP/cuda.sock" ] || { echo "gpu-frameworks: daemon did not start:" >&2; cat "$TMP/daemon.log" >&2; exit 1; }
REMOTE=(env LD_LIBRARY_PATH="$OUT" SMOL_CUDA_ENDPOINT="unix:$TMP/cuda.sock")
status() { $SMOL_DEV gpu status --control "$TMP/ctl" --json; }

rows=(); md=(); fails=0; skips=0; TODAY="$(date -u +%F)"
for w in "${WORKLOADS[@]}"; do
  t=$(left); [ "$t" -gt 150 ] && t=150
  if [ "$t" -lt 20 ]; then rows+=("$(printf '%-16s SKIP   (time budget spent)' "$w")"); skips=$((skips + 1)); continue; fi
  # shellcheck disable=SC2046
  timeout $((t / 2)) "${NATIVE[@]}" "$PY" $(workload "$w") >"$TMP/$w.native" 2>&1
  # shellcheck disable=SC2046
  timeout $((t / 2)) "${REMOTE[@]}" "$PY" $(workload "$w") >"$TMP/$w.remoted" 2>&1
  cmp="$("$PY" "$W/compare.py" "$TMP/$w.native" "$TMP/$w.remoted")"; verdict="$(sed -n 's/.*"verdict": "\([A-Z]*\)".*/\1/p' <<<"$cmp")"
  [ "$verdict" = PASS ] || { verdict=FAIL; fails=$((fails + 1)); echo "--- $w: $cmp"; tail -4 "$TMP/$w.remoted"; }
  ratios="$("$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print(" ".join(f"{k}={v}" for k,v in d["ratios"].items()))' "$cmp" 2>/dev/null)"
  rows+=("$(printf '%-16s %-6s remoted/native: %s' "$w" "$verdict" "$ratios")")
  md+=("| $w | $(framework "$w") | $(grep -q '"ok": true' "$TMP/$w.native" && echo ok || echo fail) | $verdict | ${ratios:--} | $TODAY | $GPU |")
  [ -n "$SAVE" ] && cp "$TMP/$w.native" "$TMP/$w.remoted" "$SAVE/"
done

# (i) SIGKILL mid-run: natively the driver must drop the process's memory; remoted, the daemon must end
# the session and its process, which the driver then cleans up the same way. On a GPU nvidia-smi says
# which processes hold device memory; on the FAKE, device memory is its process's, so a process gone
# (not a zombie) is memory freed.
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
holders() {
  local apps=""; [ $SELFTEST = 0 ] && apps="$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' ')"
  for p; do if [ $SELFTEST = 1 ]; then alive "$p" && echo "$p"; else grep -qx "$p" <<<"$apps" && echo "$p"; fi; done
}
sessions() { # "<session pids, comma-separated or -> <largest memBytes> <count>"
  status | "$PY" -c 'import json,sys; s=json.load(sys.stdin)["sessions"]; print(",".join(str(x["pid"]) for x in s) or "-", max([x["memBytes"] for x in s] or [0]), len(s))'
}
killed() { # label, command prefix...
  local label="$1"; shift
  "$@" "${HOLD[@]}" >"$TMP/hold.$label" 2>&1 & local pid=$!
  for _ in $(seq 1 300); do grep -q READY "$TMP/hold.$label" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  grep -q READY "$TMP/hold.$label" || { echo "--- hold ($label) never got ready:"; tail -3 "$TMP/hold.$label"; kill -9 $pid 2>/dev/null; return 1; }
  local want spids mem n; want="$(sed -n 's/^READY .*"held_bytes": *\([0-9]*\).*/\1/p' "$TMP/hold.$label")"
  read -r spids mem n < <(sessions)
  if [ "$label" = remoted ] && [ "${mem:-0}" -lt "${want:-1}" ]; then
    echo "--- hold (remoted): the daemon's sessions ($n) show at most ${mem:-?} bytes; the program holds $want"; kill -9 $pid; return 1
  fi
  kill -9 $pid; wait $pid 2>/dev/null
  local watch="$pid ${spids//[,-]/ }" still end=$(( $(date +%s) + 20 ))
  while [ "$(date +%s)" -lt $end ]; do  # each `gpu status` starts node: poll by time, not by count
    still="$(holders $watch)"
    if [ -z "$still" ]; then read -r _ _ n < <(sessions); [ "$n" = 0 ] && return 0; fi
    sleep 0.2
  done
  echo "--- hold ($label): pids ${still:-none} still hold device memory, $n session(s) open"; return 1
}
if [ $KILL = 1 ] && [ "$(left)" -lt 20 ]; then
  rows+=("$(printf '%-16s SKIP   (time budget spent)' kill)"); skips=$((skips + 1))
elif [ $KILL = 1 ]; then
  kv=PASS; killed native "${NATIVE[@]}" || kv=FAIL; killed remoted "${REMOTE[@]}" || kv=FAIL
  [ $kv = FAIL ] && fails=$((fails + 1))
  rows+=("$(printf '%-16s %-6s SIGKILL mid-run: no device memory or session left (%s, gpu status)' kill "$kv" "$([ $SELFTEST = 1 ] && echo 'processes' || echo nvidia-smi)")")
  md+=("| kill mid-run | $(framework hold) | - | $kv | - | $TODAY | $GPU |")
fi

kvm=absent; [ -c /dev/kvm ] && kvm=present
echo; echo "Frameworks through the CUDA remoting against $LIBCUDA ($GPU); microVM prerequisites: /dev/kvm $kvm, qemu-system-x86_64 $(command -v qemu-system-x86_64 >/dev/null && echo found || echo 'not found')"
printf '%s\n' "${rows[@]}"
echo; echo "docs/cuda.md \"Frameworks\" rows (scripts/gpu-frameworks.sh --apply ${SAVE:-DIR}/table.md merges them):"
{ echo "| Workload | Framework | Native | Remoted | Remoted/native | Date | GPU |"; echo "|---|---|---|---|---|---|---|"
  [ ${#md[@]} -gt 0 ] && printf '%s\n' "${md[@]}"; } | tee "${SAVE:-$TMP}/table.md"
status | head -c 2000; echo
if [ "$fails" -gt 0 ]; then echo "gpu-frameworks: $fails FAILED, $skips SKIPPED"; exit 1; fi
if [ "$skips" -gt 0 ]; then echo "gpu-frameworks: no failure, $skips SKIPPED (time budget)"; exit 3; fi
echo "gpu-frameworks: ALL PASS"

"""Workloads for scripts/gpu-frameworks.sh --selftest, which runs the harness itself against the FAKE driver
(no GPU, no PyTorch): the C programs under build/cuda-programs that the FAKE runs natively, each wrapped so
that it prints the same RESULT JSON line as the framework workloads, plus `hold`, a driver-API stand-in
for hold.py (ctypes on whichever libcuda.so.1 the library path gives: the FAKE natively, the shim remoted).
  selftest.py --list      the workload names
  selftest.py NAME        runs one; SMOL_FW_SELFTEST_CORRUPT=NAME alters NAME's remoted output, so a test
                          can prove a wrong remoted result FAILs its row
  selftest.py hold        allocates and keeps working until killed
Runtime-API programs (runtime_vecadd_*, rt_*) are not here: cudart does not run natively on the FAKE."""
import ctypes
import glob
import hashlib
import json
import os
import subprocess
import sys
import time

from common import emit

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROGS = os.path.join(ROOT, "build", "cuda-programs")
PTX = os.path.join(PROGS, "kernels.ptx")
HOLD_BYTES = 64 << 20


def workloads():
    w = {"driver_vecadd": [os.path.join(PROGS, "driver_vecadd"), PTX],
         "fault_isolation": [os.path.join(PROGS, "fault_isolation"), PTX]}
    for p in sorted(glob.glob(os.path.join(PROGS, "conformance", "conf_*"))):
        w[os.path.basename(p)] = [p, PTX]
    return w


def run_one(name):
    argv = workloads().get(name)
    if argv is None:
        emit(name, ok=False, note="no such self-test workload (see --list)")
        return 1
    t0 = time.perf_counter()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired:
        out, rc = "", "timeout"
    ms = round((time.perf_counter() - t0) * 1000, 1)
    # the lines that carry results; the rest (device names, timings) may differ between the paths
    lines = [l for l in out.splitlines() if l.startswith(("RESULT ", "CASE ", "INFO ", "ALL PASS"))]
    if os.environ.get("SMOL_FW_SELFTEST_CORRUPT") == name and os.environ.get("SMOL_CUDA_ENDPOINT"):
        lines.append("CASE corrupted-on-purpose 0")
    ok = rc == 0 and bool(lines) and not any("wrong" in l or l.endswith(" FAIL") for l in lines)
    emit(name, ok=ok, exact={"output": hashlib.sha256("\n".join(lines).encode()).hexdigest()[:24], "lines": str(len(lines))},
         perf={"wall_ms": ms}, note=None if ok else f"exit {rc}, {len(lines)} result lines")
    return 0 if ok else 1


def hold():
    cu = ctypes.CDLL("libcuda.so.1")

    def ck(r, what):
        if r:
            print(f"hold: {what} -> {r}", flush=True)
            sys.exit(1)
    ck(cu.cuInit(0), "cuInit")
    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    ck(cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(HOLD_BYTES)), "cuMemAlloc_v2")
    fill = lambda v: ck(cu.cuMemsetD8_v2(ctypes.c_uint64(ptr.value), ctypes.c_ubyte(v), ctypes.c_size_t(HOLD_BYTES)), "cuMemsetD8_v2")
    fill(7)
    ck(cu.cuCtxSynchronize(), "cuCtxSynchronize")
    print("READY " + json.dumps({"held_bytes": HOLD_BYTES}), flush=True)
    t_end = time.time() + 120
    while time.time() < t_end:  # busy on the device when the kill lands
        fill(int(time.time()) & 0xFF)
        ck(cu.cuCtxSynchronize(), "cuCtxSynchronize")


if __name__ == "__main__":
    arg = sys.argv[1] if len(sys.argv) > 1 else "--list"
    if arg == "--list":
        print("\n".join(workloads()))
    elif arg == "hold":
        hold()
    else:
        sys.exit(run_one(arg))

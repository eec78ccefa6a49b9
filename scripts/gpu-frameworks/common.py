"""Shared by the gpu-frameworks workloads: determinism settings, output digests and the one JSON line
each workload prints (scripts/gpu-frameworks.sh compares a native run's line with a remoted run's)."""
import hashlib
import json
import os
import sys
import time
import traceback


def setup():
    """Deterministic kernels and no TF32, so that a native and a remoted run must agree bit for bit."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def digest(t):
    """sha256 of a tensor's bytes (bf16/fp16 included: viewed as uint8 on the host)."""
    b = t.detach().contiguous().cpu().view(-1).view(__import__("torch").uint8).numpy().tobytes()
    return hashlib.sha256(b).hexdigest()[:24]


def emit(workload, ok=True, exact=None, close=None, perf=None, note=None):
    """exact: must be equal; close: lists of floats equal within rtol; perf: timings for ratios."""
    line = {"workload": workload, "ok": bool(ok), "exact": exact or {}, "close": close or {}, "perf": perf or {}}
    if note:
        line["note"] = note
    print("RESULT " + json.dumps(line), flush=True)


def run(workload, fn):
    """Runs fn() -> dict of emit() arguments; a Python error is a failed result, not a silent crash."""
    t0 = time.perf_counter()
    try:
        r = fn()
    except Exception as e:  # the table must name what failed (often the driver call the shim lacks)
        traceback.print_exc()
        emit(workload, ok=False, note=f"{type(e).__name__}: {e}"[:400])
        sys.exit(1)
    r.setdefault("perf", {})["wall_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    emit(workload, **r)


def timed(torch, fn):
    """Milliseconds of one fn() call, the device synchronised on both sides."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, (time.perf_counter() - t0) * 1000

"""(h) torch.cuda.memory statistics and NVML queries (through libnvidia-ml.so.1, as nvidia-smi does)
while a workload holds memory. Allocator numbers must equal native; NVML answers must be sane."""
import ctypes

from common import run, setup

torch = setup()


class Mem(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def nvml():
    lib = ctypes.CDLL("libnvidia-ml.so.1")
    assert lib.nvmlInit_v2() == 0, "nvmlInit_v2 failed"
    n = ctypes.c_uint()
    assert lib.nvmlDeviceGetCount_v2(ctypes.byref(n)) == 0
    h = ctypes.c_void_p()
    assert lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h)) == 0
    name = ctypes.create_string_buffer(96)
    assert lib.nvmlDeviceGetName(h, name, 96) == 0
    m = Mem()
    assert lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(m)) == 0
    lib.nvmlShutdown()
    return n.value, name.value.decode(), m


def main():
    torch.cuda.reset_peak_memory_stats()
    held = [torch.empty(n << 20, dtype=torch.uint8, device="cuda") for n in (1, 16, 256)]
    del held[1]
    st = torch.cuda.memory_stats()
    free, total = torch.cuda.mem_get_info()
    count, name, m = nvml()
    ok = count >= 1 and m.total > 0 and m.used >= 257 << 20 and free < total
    exact = {k: st[k] for k in ("allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
                               "num_alloc_retries", "num_ooms")}
    exact.update({"memory_allocated": torch.cuda.memory_allocated(), "mem_get_info_total": total,
                  "nvml_count": count, "nvml_name": name, "nvml_total": m.total, "device": torch.cuda.get_device_name()})
    return {"ok": ok, "exact": exact, "note": f"nvml used {m.used >> 20} MiB while holding 257 MiB"}


run("memstats", main)

"""(e) a Triton kernel (compiled here, loaded with cuModuleLoadData/cuLibraryLoad by Triton): bit-identical."""
from common import digest, run, setup

torch = setup()
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def fused(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(x_ptr + i, mask=m)
    y = tl.load(y_ptr + i, mask=m)
    tl.store(out_ptr + i, x * tl.sigmoid(y) + 1.5, mask=m)


def main():
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    fused[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    ref = x * torch.sigmoid(y) + 1.5
    err = (out - ref).abs().max().item()
    return {"ok": err < 1e-5, "exact": {"out": digest(out), "triton": triton.__version__}, "close": {"max_err_vs_torch": [err]}}


run("triton", main)

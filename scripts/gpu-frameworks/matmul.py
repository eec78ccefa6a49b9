"""(a) cuBLAS SGEMM, HGEMM and a bf16 matmul via PyTorch: outputs must be bit-identical to native."""
from common import digest, run, setup

torch = setup()


def main():
    g = torch.Generator(device="cuda").manual_seed(1)
    a = torch.randn(1024, 1024, device="cuda", generator=g)
    b = torch.randn(1024, 1024, device="cuda", generator=g)
    s = a @ b
    # sanity against the CPU (float64), so that two equal wrong answers do not pass
    ref = (a.double().cpu() @ b.double().cpu())
    err = ((s.double().cpu() - ref).abs().max() / ref.abs().max()).item()
    return {"ok": err < 1e-4, "exact": {"sgemm": digest(s), "hgemm": digest(a.half() @ b.half()),
            "bf16": digest(a.bfloat16() @ b.bfloat16()), "bmm": digest(torch.bmm(a.view(4, 512, 512), b.view(4, 512, 512)))},
            "close": {"sgemm_rel_err_vs_cpu": [err]}}


run("matmul", main)

"""(g) cuFFT (torch.fft) and cuRAND (CuPy's generator) round trips: bit-identical, and sane."""
from common import digest, run, setup

torch = setup()


def main():
    x = torch.randn(64, 4096, device="cuda", dtype=torch.float32)
    f = torch.fft.rfft(x)
    back = torch.fft.irfft(f, n=4096)
    fft_err = (back - x).abs().max().item()
    exact = {"rfft": digest(torch.view_as_real(f)), "irfft": digest(back), "fft2": digest(torch.view_as_real(torch.fft.fft2(x)))}
    import cupy  # cupy.random draws through cuRAND
    rs = cupy.random.RandomState(seed=1234)
    u = rs.standard_normal((1 << 20,), dtype=cupy.float32)
    exact["curand_normal"] = digest(torch.as_tensor(u, device="cuda"))
    exact["curand_uniform"] = digest(torch.as_tensor(rs.uniform(size=(1 << 16,), dtype=cupy.float32), device="cuda"))
    mean, std = float(u.mean()), float(u.std())
    ok = fft_err < 1e-4 and abs(mean) < 0.01 and abs(std - 1) < 0.01
    return {"ok": ok, "exact": exact, "close": {"fft_roundtrip_err": [fft_err]}, "note": f"curand mean {mean:.4f} std {std:.4f}"}


run("fft_rand", main)

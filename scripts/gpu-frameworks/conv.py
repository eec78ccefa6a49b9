"""(b) conv2d forward and backward through cuDNN (deterministic algorithms): bit-identical to native."""
from common import digest, run, setup

torch = setup()


def main():
    assert torch.backends.cudnn.is_available(), "cuDNN is not available"
    conv = torch.nn.Conv2d(3, 32, 3, padding=1).cuda()
    x = torch.randn(8, 3, 64, 64, device="cuda", requires_grad=True)
    y = conv(x)
    y.square().mean().backward()
    return {"exact": {"y": digest(y), "dx": digest(x.grad), "dw": digest(conv.weight.grad), "db": digest(conv.bias.grad),
                      "cudnn": torch.backends.cudnn.version()}}


run("conv", main)

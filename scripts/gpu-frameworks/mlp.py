"""(c) a small MLP trained 50 steps with AdamW: losses within 1e-6 relative of native; step time."""
import statistics

from common import digest, run, setup, timed

torch = setup()


def main():
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 512), torch.nn.GELU(),
                                torch.nn.Linear(512, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(512, 256, device="cuda")
    y = torch.randint(0, 10, (512,), device="cuda")
    losses, ms = [], []

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()  # a sync per step, as training loops that log do
    for i in range(50):
        loss, t = timed(torch, step)
        losses.append(loss)
        if i >= 5:
            ms.append(t)
    return {"ok": losses[-1] < losses[0], "exact": {"final_weights": digest(model[4].weight)},
            "close": {"losses": losses}, "perf": {"step_ms": round(statistics.median(ms), 3)}}


run("mlp", main)

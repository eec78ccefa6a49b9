"""(d) a small transformer's greedy generation of 64 tokens: identical tokens; tokens per second."""
import time

from common import run, setup

torch = setup()
V, D, L, PROMPT = 1000, 256, 4, 8


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(V, D)
        self.pos = torch.nn.Embedding(PROMPT + 64, D)
        layer = torch.nn.TransformerEncoderLayer(D, 4, 4 * D, dropout=0.0, batch_first=True)
        self.body = torch.nn.TransformerEncoder(layer, L)
        self.head = torch.nn.Linear(D, V)

    def forward(self, ids):
        n = ids.shape[1]
        h = self.emb(ids) + self.pos(torch.arange(n, device=ids.device))
        mask = torch.nn.Transformer.generate_square_subsequent_mask(n, device=ids.device)
        return self.head(self.body(h, mask=mask, is_causal=True))


def main():
    model = TinyLM().cuda().eval()
    ids = torch.randint(0, V, (1, PROMPT), device="cuda")
    with torch.no_grad():
        model(ids)  # warm-up: kernels loaded before the clock starts
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(64):
            nxt = model(ids)[:, -1].argmax(-1, keepdim=True)  # no KV cache: recomputes, like naive loops
            ids = torch.cat([ids, nxt], 1)
        toks = ids[0, PROMPT:].tolist()
        dt = time.perf_counter() - t0
    return {"exact": {"tokens": toks}, "perf": {"tokens_per_s": round(64 / dt, 2)}}


run("generate", main)

#!/usr/bin/env python3
"""The yardstick of `weft bench step`: the same GPT-2 training step in eager PyTorch.

The model weft trains (token and position embeddings, pre-LayerNorm blocks of
causal self-attention and a GELU(tanh) MLP, a final LayerNorm, the LM head tied
to the token embedding, cross-entropy over the vocabulary padded to a multiple
of 128, AdamW with weight decay 0.1 and global gradient-norm clipping at 1.0),
at weft's presets, on random tokens, timed step by step after warm-up steps.

PyTorch is not a dependency of weft: install it in a scratch virtual
environment to measure, e.g.

    python3 -m venv /tmp/torch-venv && /tmp/torch-venv/bin/pip install torch
    /tmp/torch-venv/bin/python scripts/pytorch_gpt2_bench.py --preset tiny --batch 16

It prints tokens/s (median of the timed steps) and exits 0 with a message when
torch is not installed.
"""

import argparse
import json
import math
import statistics
import sys
import time

PRESETS = {
    "tiny": dict(vocab=256, seq=128, layers=4, width=128, heads=4),
    "gpt2-124m": dict(vocab=50257, seq=1024, layers=12, width=768, heads=12),
}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    p.add_argument("--seq", type=int, help="context length (default: the preset's)")
    p.add_argument("--batch", type=int, default=None, help="sequences per step (tiny 16, gpt2-124m 1)")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                   help="bf16: autocast to bfloat16 around forward (f32 master weights)")
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args()

    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError:
        print("pytorch_gpt2_bench: torch is not installed; install it in a scratch virtual "
              "environment to measure (see the top of this script)")
        return 0

    cfg = dict(PRESETS[a.preset])
    if a.seq:
        cfg["seq"] = a.seq
    batch = a.batch or (16 if a.preset == "tiny" else 1)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    C, H, T, L = cfg["width"], cfg["heads"], cfg["seq"], cfg["layers"]
    V = (cfg["vocab"] + 127) // 128 * 128

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(C)
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)
            self.ln2 = nn.LayerNorm(C)
            self.fc = nn.Linear(C, 4 * C)
            self.fc_proj = nn.Linear(4 * C, C)

        def forward(self, x):
            B_, T_, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(B_, T_, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B_, T_, C))
            return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.wpe = nn.Embedding(T, C)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C)
            for name, w in self.named_parameters():
                if w.dim() == 2:
                    std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                    nn.init.normal_(w, std=std)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for b in self.blocks:
                x = b(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)
            return F.cross_entropy(logits.float().view(-1, V), targets.reshape(-1))

    model = Gpt()
    decay = [w for w in model.parameters() if w.dim() == 2]
    rest = [w for w in model.parameters() if w.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}], lr=6e-4, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(1)

    def step():
        idx = torch.randint(cfg["vocab"], (batch, T + 1), generator=gen)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    step_s = statistics.median(times)
    result = {"framework": f"pytorch {torch.__version__} eager", "preset": a.preset,
              "dtype": a.dtype, "seq": T, "batch": batch, "threads": a.threads,
              "step_s": step_s, "tokens_per_s": batch * T / step_s}
    if a.json:
        print(json.dumps(result))
    else:
        print(f"{result['framework']}: {a.preset} {a.dtype} T={T} B={batch} {a.threads} threads: "
              f"{result['tokens_per_s']:.1f} tokens/s ({1e3 * step_s:.1f} ms/step, median of "
              f"{a.steps})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

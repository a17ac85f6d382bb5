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

import math
import sys

import pytorch_step_timing

PRESETS = {
    "tiny": dict(vocab=256, seq=128, layers=4, width=128, heads=4),
    "gpt2-124m": dict(vocab=50257, seq=1024, layers=12, width=768, heads=12),
}


def main():
    a, cfg, batch = pytorch_step_timing.parse(__doc__.split("\n\n")[0], PRESETS, "tiny", "tiny")

    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError:
        print("pytorch_gpt2_bench: torch is not installed; install it in a scratch virtual "
              "environment to measure (see the top of this script)")
        return 0

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
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for b in self.blocks:
                x = b(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)
            return F.cross_entropy(logits.float().view(-1, V), targets.reshape(-1))

    return pytorch_step_timing.time_training(torch, Gpt(), a, cfg, batch, lr=6e-4)


if __name__ == "__main__":
    sys.exit(main())

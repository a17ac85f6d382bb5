#!/usr/bin/env python3
"""The yardstick of `weft bench step --preset llama-tiny`: the same Llama training step in eager PyTorch.

The model weft trains as a Llama (token embedding, pre-RMSNorm blocks of causal
grouped-query attention with rotary positions (Hugging Face's rotate-half) and a
SwiGLU MLP, no biases, a final RMSNorm, an untied LM head, cross-entropy over
the vocabulary padded to a multiple of 128, AdamW with weight decay 0.1 on 2-D
weights and global gradient-norm clipping at 1.0), at weft's Llama presets, on
random tokens, timed step by step after warm-up steps. Attention is PyTorch's
scaled_dot_product_attention with the key/value heads repeated, as Hugging
Face's LlamaForCausalLM runs it in eager mode.

PyTorch is not a dependency of weft: install it in a scratch virtual
environment to measure, e.g.

    python3 -m venv /tmp/torch-venv && /tmp/torch-venv/bin/pip install torch
    /tmp/torch-venv/bin/python scripts/pytorch_llama_bench.py --preset llama-tiny --batch 16

It prints tokens/s (median of the timed steps) and exits 0 with a message when
torch is not installed.
"""

import math
import sys

import pytorch_step_timing

PRESETS = {
    "llama-tiny": dict(vocab=256, seq=128, layers=4, width=128, heads=8, kv_heads=4, hidden=352),
    "llama-1b": dict(vocab=32000, seq=2048, layers=22, width=2048, heads=32, kv_heads=4,
                     hidden=5632),
}


def build(torch, nn, F, cfg):
    C, H, Hkv, L, T, Fh = (cfg[k] for k in ("width", "heads", "kv_heads", "layers", "seq", "hidden"))
    D = C // H
    V = (cfg["vocab"] + 127) // 128 * 128
    inv = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], dim=1).float()
    sin = torch.cat([ang.sin(), ang.sin()], dim=1).float()

    def rope(x):  # (B, heads, T, D)
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        c, s = cos[: x.shape[2]].to(x.device), sin[: x.shape[2]].to(x.device)
        return x * c + torch.cat([-x2, x1], dim=-1) * s

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.RMSNorm(C, eps=1e-5)
            self.q = nn.Linear(C, H * D, bias=False)
            self.kv = nn.Linear(C, 2 * Hkv * D, bias=False)
            self.proj = nn.Linear(H * D, C, bias=False)
            self.ln2 = nn.RMSNorm(C, eps=1e-5)
            self.gate_up = nn.Linear(C, 2 * Fh, bias=False)
            self.down = nn.Linear(Fh, C, bias=False)

        def forward(self, x):
            B_, T_, _ = x.shape
            h = self.ln1(x)
            q = self.q(h).view(B_, T_, H, D).transpose(1, 2)
            k, v = self.kv(h).view(B_, T_, 2, Hkv, D).permute(2, 0, 3, 1, 4)
            q, k = rope(q), rope(k)
            k = k.repeat_interleave(H // Hkv, dim=1)
            v = v.repeat_interleave(H // Hkv, dim=1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(B_, T_, C))
            g, u = self.gate_up(self.ln2(x)).chunk(2, dim=-1)
            return x + self.down(F.silu(g) * u)

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(V, C)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.RMSNorm(C, eps=1e-5)
            self.head = nn.Linear(C, V, bias=False)
            for name, w in self.named_parameters():
                if w.dim() == 2:
                    last = name.endswith("proj.weight") or name.endswith("down.weight")
                    nn.init.normal_(w, std=0.02 / math.sqrt(2 * L) if last else 0.02)

        def forward(self, idx, targets):
            x = self.wte(idx)
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.float().view(-1, V), targets.reshape(-1))

    return Llama()


def main():
    a, cfg, batch = pytorch_step_timing.parse(__doc__.split("\n\n")[0], PRESETS, "llama-tiny",
                                              "llama-tiny")
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError:
        print("pytorch_llama_bench: torch is not installed; install it in a scratch virtual "
              "environment to measure (see the top of this script)")
        return 0
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = build(torch, nn, F, cfg)
    return pytorch_step_timing.time_training(torch, model, a, cfg, batch, lr=6e-3)


if __name__ == "__main__":
    sys.exit(main())

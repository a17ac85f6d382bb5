#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the shape of `weft bench attention
--device cuda` (qkv from one packed (B, T, 3·H·D) tensor, causal), forward and
backward, once per SDPA backend (flash, cuDNN, memory-efficient), timed with
CUDA events (median of rounds of --iters calls): the peer of weft's fused
attention. Run from an environment with PyTorch and a GPU; not a weft
dependency.

  python3 scripts/pytorch_attention_bench.py [--batch 16 --seq 1024 --heads 12 --head-dim 64]
"""
import argparse
import statistics
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        print("pytorch_attention_bench: PyTorch is not installed here (a scratch environment "
              "with torch runs this peer); nothing timed")
        return 0
    if not torch.cuda.is_available():
        print("pytorch_attention_bench: PyTorch sees no CUDA GPU here; nothing timed")
        return 0
    B, T, H, D = a.batch, a.seq, a.heads, a.head_dim
    dev = torch.device("cuda")
    torch.manual_seed(0)
    qkv = torch.rand(B, T, 3 * H * D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    dout = torch.rand(B, T, H * D, device=dev, dtype=torch.bfloat16)

    def forward():
        q, k, v = qkv.split(H * D, dim=2)
        q, k, v = (x.view(B, T, H, D).transpose(1, 2) for x in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return o.transpose(1, 2).reshape(B, T, H * D)

    def timed(fn):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        samples = []
        for _ in range(a.rounds):
            torch.cuda.synchronize()
            start.record()
            for _ in range(a.iters):
                fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / a.iters / 1e3)
        return statistics.median(samples)

    flops = 4.0 * B * H * T * T * D / 2.0  # as weft bench attention counts them
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    best = None
    for name, backend in [("flash", SDPBackend.FLASH_ATTENTION),
                          ("cuDNN", SDPBackend.CUDNN_ATTENTION),
                          ("efficient", SDPBackend.EFFICIENT_ATTENTION)]:
        try:
            with sdpa_kernel([backend]):
                out = forward()
                out.backward(dout)
                f = timed(lambda: forward())
                # Backward alone: one graph kept, its backward replayed.
                o = forward()
                b = timed(lambda: torch.autograd.grad(o, qkv, dout, retain_graph=True))
        except RuntimeError as e:
            print(f"pytorch sdpa {name}: not available ({str(e).splitlines()[0][:80]})")
            continue
        print(f"pytorch sdpa {name} bf16 B={B} T={T} H={H} D={D}: forward {f * 1e3:.3f} ms "
              f"({flops / f / 1e12:.2f} TFLOP/s), backward {b * 1e3:.3f} ms "
              f"({2.5 * flops / b / 1e12:.2f} TFLOP/s)")
        if best is None or f + b < best[1] + best[2]:
            best = (name, f, b)
    if best:
        print(f"pytorch fastest sdpa: {best[0]} forward {best[1] * 1e3:.3f} ms backward "
              f"{best[2] * 1e3:.3f} ms")


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The yardstick of `weft bench layer --tp N`: a Megatron-style tensor-parallel GPT-2 layer in PyTorch.

One pre-LayerNorm transformer layer (LayerNorm, fused QKV, causal attention,
projection, LayerNorm, fc1 + GELU(tanh), fc2, biases, residuals), split over N
processes as Megatron-LM splits it: QKV and fc1 column-parallel (each rank its
heads and its 4C/N hidden units), the projection and fc2 row-parallel with an
all-reduce of their outputs in forward, and the identity-forward/all-reduce-
backward operator in front of each column-parallel GEMM (Megatron's
copy_to_tensor_model_parallel_region), over torch.distributed's gloo backend,
one process per rank with --threads threads each. Forward + backward of a
(B, T, C) batch, timed after warm-up iterations; the slowest rank's median.

PyTorch is not a dependency of weft: install it in a scratch virtual
environment to measure, e.g.

    python3 -m venv /tmp/torch-venv && /tmp/torch-venv/bin/pip install torch
    /tmp/torch-venv/bin/python scripts/pytorch_tp_layer_bench.py --tp 2 --seq 512

and compare with `weft bench layer --tp 2 --seq 512` (same --batch, --width,
--heads, --threads) run beside it. Prints the median milliseconds per
iteration (and one JSON line with --json); exits 0 with a message when torch
is not installed.
"""

import argparse
import json
import os
import statistics
import sys
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--threads", type=int, default=1, help="threads per rank")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--port", type=int, default=29517)
    p.add_argument("--json", action="store_true")
    return p.parse_args()


def run_rank(rank, a, out):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port)
    dist.init_process_group("gloo", rank=rank, world_size=a.tp)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    C, H, T, B, N = a.width, a.heads, a.seq, a.batch, a.tp
    assert H % N == 0 and (4 * C) % N == 0, "heads and 4C must divide over --tp"
    h, D = H // N, C // H

    class CopyToTp(torch.autograd.Function):  # identity forward, all-reduce backward
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            g = g.contiguous()
            dist.all_reduce(g)
            return g

    class ReduceFromTp(torch.autograd.Function):  # all-reduce forward, identity backward
        @staticmethod
        def forward(ctx, x):
            x = x.contiguous()
            dist.all_reduce(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    def param(*shape):
        return torch.nn.Parameter(torch.randn(*shape) * 0.02)

    ln1, ln2 = torch.nn.LayerNorm(C), torch.nn.LayerNorm(C)
    w_qkv, b_qkv = param(3 * h * D, C), param(3 * h * D)
    w_proj, b_proj = param(C, h * D), param(C)
    w_fc1, b_fc1 = param(4 * C // N, C), param(4 * C // N)
    w_fc2, b_fc2 = param(C, 4 * C // N), param(C)

    def layer(x):
        a_in = CopyToTp.apply(ln1(x))
        q, k, v = F.linear(a_in, w_qkv, b_qkv).view(B, T, 3, h, D).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        att = att.transpose(1, 2).reshape(B, T, h * D)
        x = x + ReduceFromTp.apply(F.linear(att, w_proj)) + b_proj
        m_in = CopyToTp.apply(ln2(x))
        hid = F.gelu(F.linear(m_in, w_fc1, b_fc1), approximate="tanh")
        return x + ReduceFromTp.apply(F.linear(hid, w_fc2)) + b_fc2

    x = torch.randn(B, T, C, requires_grad=True)
    dy = torch.randn(B, T, C)
    times = []
    for i in range(a.warmup + a.iters):
        dist.barrier()
        t0 = time.perf_counter()
        layer(x).backward(dy)
        dist.barrier()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    out[rank] = statistics.median(times)
    dist.destroy_process_group()


def main():
    a = parse()
    try:
        import torch  # noqa: F401
        import torch.multiprocessing as mp
    except ImportError:
        print("pytorch_tp_layer_bench: torch is not installed; install it in a scratch virtual "
              "environment to measure (see the top of this script)")
        return 0
    out = mp.Manager().dict()
    mp.spawn(run_rank, args=(a, out), nprocs=a.tp, join=True)
    ms = 1e3 * max(out.values())
    if a.json:
        print(json.dumps({"peer": "pytorch megatron-style tp layer (gloo)", "tp": a.tp,
                          "batch": a.batch, "seq": a.seq, "width": a.width, "heads": a.heads,
                          "threads": a.threads, "ms": ms}))
    else:
        print(f"pytorch megatron-style TP layer: tp {a.tp}, B {a.batch}, T {a.seq}, C {a.width}, "
              f"{a.heads} heads, {a.threads} thread(s) per rank: {ms:.1f} ms per forward + backward")
    return 0


if __name__ == "__main__":
    sys.exit(main())

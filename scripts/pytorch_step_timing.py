"""What scripts/pytorch_gpt2_bench.py and pytorch_llama_bench.py share: the
command line, the timed loop (an AdamW step with weight decay 0.1 on 2-D
weights and gradient-norm clipping at 1.0, on random tokens, after warm-up
steps, median of the timed steps) and the report."""

import argparse
import json
import statistics
import time


def parse(description, presets, default, small):
    """The common options; `small` is the preset whose default batch is 16."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--preset", choices=sorted(presets), default=default)
    p.add_argument("--seq", type=int, help="context length (default: the preset's)")
    p.add_argument("--batch", type=int, default=None,
                   help=f"sequences per step ({small} 16, the others 1)")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                   help="bf16: autocast to bfloat16 around forward (f32 master weights)")
    p.add_argument("--steps", type=int, default=5, help="timed steps")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args()
    cfg = dict(presets[a.preset])
    if a.seq:
        cfg["seq"] = a.seq
    batch = a.batch or (16 if a.preset == small else 1)
    return a, cfg, batch


def time_training(torch, model, a, cfg, batch, lr):
    """Times model(idx, targets) -> loss trained by AdamW; prints the report."""
    decay = [w for w in model.parameters() if w.dim() == 2]
    rest = [w for w in model.parameters() if w.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(1)
    T = cfg["seq"]

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

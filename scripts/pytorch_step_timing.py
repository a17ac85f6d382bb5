"""What scripts/pytorch_gpt2_bench.py and pytorch_llama_bench.py share: the
command line, the timed loop (an AdamW step with weight decay 0.1 on 2-D
weights and gradient-norm clipping at 1.0, on random tokens, after warm-up
steps, median of the timed steps) and the report.

On a GPU (--device cuda) the step is what people who train there run: bf16
autocast (--dtype bf16), SDPA's fastest backend, fused AdamW, optionally
torch.compile (--compile); the report adds MFU as `weft bench step --device
cuda` counts it (6N + 6LCT FLOPs per token, llm.c's count, over the dense bf16
peak of the data sheet: H100 SXM / H200 989.4 TFLOP/s, H100 PCIe 756) and the
peak GPU memory."""

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
    p.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--peak-tflops", type=float, default=0.0,
                   help="the GPU's dense peak for MFU (default: from the H100/H200 data sheet)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    a = p.parse_args()
    cfg = dict(presets[a.preset])
    if a.seq:
        cfg["seq"] = a.seq
    batch = a.batch or (16 if a.preset == small else 1)
    return a, cfg, batch


def gpu_peak_tflops(torch, a):
    """The dense bf16 (f32 without autocast) peak of the GPU, as weft bench step uses."""
    if a.peak_tflops > 0:
        return a.peak_tflops
    name = torch.cuda.get_device_name(torch.device(a.device))
    bf16 = a.dtype == "bf16"
    if "H100 PCIe" in name:
        return 756.0 if bf16 else 51.2
    if "H100" in name or "H200" in name:
        return 989.4 if bf16 else 66.9
    return 0.0


def time_training(torch, model, a, cfg, batch, lr):
    """Times model(idx, targets) -> loss trained by AdamW; prints the report."""
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    model = model.to(device)
    params = sum(w.numel() for w in model.parameters())
    decay = [w for w in model.parameters() if w.dim() == 2]
    rest = [w for w in model.parameters() if w.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95),
                            fused=cuda)
    run = torch.compile(model) if a.compile else model
    gen = torch.Generator(device=device).manual_seed(1)
    T = cfg["seq"]

    def step():
        idx = torch.randint(cfg["vocab"], (batch, T + 1), generator=gen, device=device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = run(idx[:, :-1], idx[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()  # the host waits for the step, as a training loop's log does

    for _ in range(a.warmup):
        step()
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    step_s = statistics.median(times)
    mode = "torch.compile" if a.compile else "eager"
    result = {"framework": f"pytorch {torch.__version__} {mode}", "preset": a.preset,
              "dtype": a.dtype, "device": a.device, "seq": T, "batch": batch,
              "threads": a.threads, "step_s": step_s, "tokens_per_s": batch * T / step_s}
    extra = ""
    if cuda:
        flops = 6.0 * params + 6.0 * cfg["layers"] * cfg["width"] * T  # per token, llm.c's count
        peak = gpu_peak_tflops(torch, a)
        tflops = result["tokens_per_s"] * flops / 1e12
        result.update({"gpu": torch.cuda.get_device_name(device), "tflops": tflops,
                       "mfu": tflops / peak if peak > 0 else 0.0,
                       "peak_memory_bytes": torch.cuda.max_memory_allocated(device)})
        extra = (f", {tflops:.1f} TFLOP/s, MFU {100 * result['mfu']:.1f}%, peak "
                 f"{result['peak_memory_bytes'] / 2**20:.0f} MiB")
    if a.json:
        print(json.dumps(result))
    else:
        print(f"{result['framework']}: {a.preset} {a.dtype} T={T} B={batch} on {a.device} "
              f"({a.threads} threads): {result['tokens_per_s']:.1f} tokens/s "
              f"({1e3 * step_s:.1f} ms/step, median of {a.steps}){extra}")
    return 0

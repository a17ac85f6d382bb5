#!/usr/bin/env python3
"""The plan against measurement: the first layouts `weft plan --json` ranks,
each run by `weft bench step` with the same options, the layouts alternating
over --rounds rounds (median tokens/s); prints the predicted and measured peak
memory per rank and tokens/s, and whether the pick is within 10% of the
fastest measured.

    scripts/plan_check.py [--weft build/bin/weft] [--top 3] -- PLAN OPTIONS
    scripts/plan_check.py -- --preset llama-tiny --world 4 --seq 512 \
        --global-batch 16 --memory-limit 1GiB
"""
import argparse
import json
import subprocess
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weft", default="build/bin/weft")
    p.add_argument("--top", type=int, default=3)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds alternating the layouts; each layout's median tokens/s is reported")
    p.add_argument("plan", nargs=argparse.REMAINDER)
    a = p.parse_args()
    plan_args = [x for x in a.plan if x != "--"]
    out = subprocess.run([a.weft, "plan", *plan_args, "--json", "--top", str(a.top)],
                         check=True, capture_output=True, text=True).stdout
    layouts = [json.loads(line) for line in out.splitlines() if line.strip()]
    # The shape options of the plan go to bench step too.
    shape = []
    i = 0
    while i < len(plan_args):
        if plan_args[i] in ("--preset", "--seq", "--layers", "--dtype"):
            shape += plan_args[i:i + 2]
        i += 1
    runs = {i: [] for i in range(len(layouts))}
    for _ in range(a.rounds):
        for i, lay in enumerate(layouts):
            cmd = [a.weft, "bench", "step", *shape, *lay["args"], "--steps", str(a.steps), "--warmup", "1",
                   "--no-baseline", "--json"]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            runs[i].append(json.loads(out.splitlines()[-1]))
    rows = []
    for i, lay in enumerate(layouts):
        ms = sorted(runs[i], key=lambda m: m["tokens_per_s"])
        m = dict(ms[len(ms) // 2])
        peak = max(max(r["peak_memory_bytes_per_rank"]) for r in runs[i])
        rows.append((lay, m, peak))
    print(f"{'weft train options':60s} {'pred MiB':>9s} {'meas MiB':>9s} {'ratio':>6s} {'pred tok/s':>11s} {'meas tok/s':>11s}")
    ok = True
    for lay, m, peak in rows:
        ratio = lay["predicted_peak_bytes"] / peak
        ok &= 0.9 <= ratio <= 1.1
        print(f"{' '.join(lay['args']):60s} {lay['predicted_peak_bytes'] / 2**20:9.1f} {peak / 2**20:9.1f} "
              f"{ratio:6.3f} {lay['predicted_tokens_per_s']:11.0f} {m['tokens_per_s']:11.0f}")
    fastest = max(m["tokens_per_s"] for _, m, _ in rows)
    pick = rows[0][1]["tokens_per_s"]
    print(f"pick's measured tokens/s {pick:.0f} = {pick / fastest:.3f} of the fastest of the {len(rows)} "
          f"({'within' if pick >= 0.9 * fastest else 'NOT within'} 10%); memory "
          f"{'within' if ok else 'NOT within'} 10% for every layout")
    return 0 if ok and pick >= 0.9 * fastest else 1


if __name__ == "__main__":
    sys.exit(main())

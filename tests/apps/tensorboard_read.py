"""Reads a `weft train --tensorboard DIR` run back with TensorBoard's own
EventAccumulator and compares every scalar with the run's --metrics JSONL.

usage: tensorboard_read.py DIR METRICS.jsonl
Exits 77 (ctest: skipped) when the tensorboard module is not importable.
"""
import json
import math
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError as e:
    print(f"SKIP: tensorboard is not importable by {sys.executable} ({e}); "
          "configure with -DWEFT_PYTHON=/path/to/python (a virtualenv with tensorboard)")
    sys.exit(77)

tb_dir, metrics_path = sys.argv[1], sys.argv[2]
acc = event_accumulator.EventAccumulator(tb_dir)
acc.Reload()
tags = set(acc.Tags()["scalars"])
expected = {"loss", "val_loss", "lr", "grad_norm", "tokens_per_s"}
if tags != expected:
    sys.exit(f"scalar tags {sorted(tags)}, expected {sorted(expected)}")

lines = [json.loads(l) for l in open(metrics_path) if l.strip()]
checked = 0
for tag in sorted(expected):
    got = {e.step: e.value for e in acc.Scalars(tag)}
    want = {l["step"]: l[tag] for l in lines if tag in l}
    if sorted(got) != sorted(want):
        sys.exit(f"{tag}: steps {sorted(got)} in the event file, {sorted(want)} in the JSONL")
    for step, value in want.items():
        # simple_value is a float32.
        if not math.isclose(got[step], value, rel_tol=1e-6, abs_tol=1e-30):
            sys.exit(f"{tag} at step {step}: {got[step]} in the event file, {value} in the JSONL")
        checked += 1
print(f"tensorboard read {checked} scalars over {len(lines)} steps, "
      f"tags {', '.join(sorted(tags))}: all match {metrics_path}")

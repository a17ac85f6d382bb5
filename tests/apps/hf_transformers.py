"""An exported weft checkpoint as Hugging Face `transformers` sees it.

usage: hf_transformers.py WEFT CHECKPOINT WORKDIR

Exports CHECKPOINT into a model directory, then with transformers:
GPT2LMHeadModel.from_pretrained and AutoTokenizer.from_pretrained load it, the
tokenizer gives weft's byte ids, pipeline("text-generation") generates, and
the loss over a text equals `weft eval` on the same text within 1e-4.

Runs only where transformers (with torch) is importable by this Python; exits
with status 77 (ctest: skipped) and says how to run it otherwise.
"""
import json
import os
import subprocess
import sys


def main():
    weft, checkpoint, work = sys.argv[1:4]
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"skipped: transformers is not importable by {sys.executable} ({e}). To run: "
              "python3 -m venv /tmp/hf && /tmp/hf/bin/pip install torch transformers && "
              "WEFT_HF_PYTHON=/tmp/hf/bin/python ctest -R apps_hf_transformers")
        return 77
    os.makedirs(work, exist_ok=True)
    out = os.path.join(work, "hf-export")
    subprocess.run([weft, "checkpoint", "export", checkpoint, out], check=True)

    text = ("Wisdom is the principal thing; therefore get wisdom: and with all thy getting "
            "get understanding. A fool and his money are soon parted. ") * 8
    data = os.path.join(work, "hf-eval.txt")
    with open(data, "w") as f:
        f.write(text)
    weft_eval = json.loads(subprocess.run(
        [weft, "eval", "--checkpoint", checkpoint, "--data", data, "--json"],
        check=True, capture_output=True, text=True).stdout)

    model = transformers.GPT2LMHeadModel.from_pretrained(out).eval()
    tok = transformers.AutoTokenizer.from_pretrained(out)
    ids = tok(text)["input_ids"]
    assert ids == list(text.encode()), "the tokenizer does not give weft's byte ids"
    assert tok.decode(ids) == text, "the tokenizer does not decode back to the text"

    # weft eval's windows: seq + 1 tokens starting at k * seq.
    seq = model.config.n_positions
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(ids) - 1, seq):
            window = torch.tensor([ids[start:start + seq + 1]])
            logits = model(window[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(
                logits[0].double(), window[0, 1:], reduction="sum")
            total += loss.item()
            count += window.shape[1] - 1
    hf_loss = total / count
    print(f"weft eval loss {weft_eval['loss']:.6f}, transformers {hf_loss:.6f} "
          f"over {count} tokens")
    assert count == weft_eval["tokens"], (count, weft_eval["tokens"])
    assert abs(hf_loss - weft_eval["loss"]) < 1e-4, (hf_loss, weft_eval["loss"])

    generator = transformers.pipeline("text-generation", model=out)
    sample = generator("Wisdom is", max_new_tokens=12, do_sample=False)[0]["generated_text"]
    assert sample.startswith("Wisdom is") and len(sample) > len("Wisdom is"), sample
    print(f"pipeline: {sample!r}")
    print("transformers loads the export: loss matches weft eval")
    return 0


if __name__ == "__main__":
    sys.exit(main())

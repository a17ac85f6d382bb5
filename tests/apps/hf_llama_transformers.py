"""weft's Llama and Mixtral and Hugging Face `transformers`' LlamaForCausalLM and
MixtralForCausalLM, both ways.

usage: hf_llama_transformers.py WEFT CHECKPOINT WORKDIR [MOE_CHECKPOINT]

1. Exports CHECKPOINT (a weft llama-tiny run) into a model directory:
   LlamaForCausalLM.from_pretrained loads it and its loss over a text equals
   `weft eval` on the same text within 1e-4 relative; pipeline("text-generation")
   generates from it.
2. A random LlamaConfig model that transformers saves (grouped-query heads,
   rope_theta 500000, untied head, byte vocabulary) evaluates in weft
   (`weft eval --checkpoint DIR` on the directory) to transformers' loss, and
   imports (`weft checkpoint import`).
3. With MOE_CHECKPOINT (a weft moe-tiny run): the same both ways for Mixtral
   (the export loads as MixtralForCausalLM; a random MixtralConfig model
   evaluates in weft).

Runs only where transformers (with torch) is importable by this Python; exits
with status 77 (ctest: skipped) and says how to run it otherwise.
"""
import json
import os
import subprocess
import sys

TEXT = ("Wisdom is the principal thing; therefore get wisdom: and with all thy getting "
        "get understanding. A fool and his money are soon parted. ") * 8


def weft_eval(weft, model, data):
    return json.loads(subprocess.run(
        [weft, "eval", "--checkpoint", model, "--data", data, "--json"],
        check=True, capture_output=True, text=True).stdout)


def hf_loss(torch, model, ids, seq):
    """The loss as weft eval computes it: windows of seq + 1 tokens starting at
    k * seq, each predicting its last seq tokens (transformers' shifted labels),
    the mean over every predicted token."""
    total, count = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(ids) - 1, seq):
            window = torch.tensor([ids[start:start + seq + 1]])
            logits = model(window[:, :-1]).logits
            total += torch.nn.functional.cross_entropy(
                logits[0].double(), window[0, 1:], reduction="sum").item()
            count += window.shape[1] - 1
    return total / count, count


def compare(what, weft_result, hf, count):
    rel = abs(hf - weft_result["loss"]) / abs(hf)
    print(f"{what}: weft eval loss {weft_result['loss']:.8f}, transformers {hf:.8f} "
          f"over {count} tokens (relative difference {rel:.1e})")
    assert count == weft_result["tokens"], (count, weft_result["tokens"])
    assert abs(hf - weft_result["loss"]) <= 1e-4 * abs(hf), (what, hf, weft_result["loss"])


def export_loads(torch, transformers, weft, checkpoint, work, data, family="llama"):
    out = os.path.join(work, family + "-export")
    subprocess.run([weft, "checkpoint", "export", checkpoint, out], check=True)
    model_class = transformers.MixtralForCausalLM if family == "mixtral" else \
        transformers.LlamaForCausalLM
    model = model_class.from_pretrained(out).eval()
    assert model.config.num_key_value_heads < model.config.num_attention_heads, model.config
    tok = transformers.AutoTokenizer.from_pretrained(out)
    ids = tok(TEXT)["input_ids"]
    assert ids == list(TEXT.encode()), "the tokenizer does not give weft's byte ids"
    loss, count = hf_loss(torch, model, ids, model.config.max_position_embeddings)
    compare(f"weft's {family} export", weft_eval(weft, checkpoint, data), loss, count)
    generator = transformers.pipeline("text-generation", model=out)
    sample = generator("Wisdom is", max_new_tokens=12, do_sample=False)[0]["generated_text"]
    assert sample.startswith("Wisdom is") and len(sample) > len("Wisdom is"), sample
    print(f"pipeline: {sample!r}")


def import_loads(torch, transformers, weft, work, data, family="llama"):
    sizes = dict(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                 rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False)
    if family == "mixtral":
        config = transformers.MixtralConfig(num_local_experts=4, num_experts_per_tok=2,
                                            sliding_window=None, **sizes)
        model_class = transformers.MixtralForCausalLM
    else:
        config = transformers.LlamaConfig(**sizes)
        model_class = transformers.LlamaForCausalLM
    torch.manual_seed(0)
    model = model_class(config).eval()
    # Weights far from the initialization's near-uniform logits, so that a
    # head or a row in the wrong place changes the loss.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, 0.15)
    out = os.path.join(work, family + "-from-transformers")
    model.save_pretrained(out)
    loss, count = hf_loss(torch, model, list(TEXT.encode()), config.max_position_embeddings)
    compare(f"transformers' random {family}", weft_eval(weft, out, data), loss, count)
    imported = os.path.join(work, family + "-imported")
    subprocess.run([weft, "checkpoint", "import", out, imported], check=True)
    compare("the imported checkpoint", weft_eval(weft, imported, data), loss, count)


def main():
    weft, checkpoint, work = sys.argv[1:4]
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"skipped: transformers is not importable by {sys.executable} ({e}). To run: "
              "python3 -m venv /tmp/hf && /tmp/hf/bin/pip install torch transformers && "
              "WEFT_HF_PYTHON=/tmp/hf/bin/python ctest -R apps_hf_llama_transformers")
        return 77
    os.makedirs(work, exist_ok=True)
    data = os.path.join(work, "hf-eval.txt")
    with open(data, "w") as f:
        f.write(TEXT)
    export_loads(torch, transformers, weft, checkpoint, work, data)
    import_loads(torch, transformers, weft, work, data)
    if len(sys.argv) > 4:
        export_loads(torch, transformers, weft, sys.argv[4], work, data, "mixtral")
        import_loads(torch, transformers, weft, work, data, "mixtral")
    print("transformers and weft agree both ways: losses match weft eval")
    return 0


if __name__ == "__main__":
    sys.exit(main())

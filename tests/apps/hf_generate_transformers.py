"""`weft generate --prompt` against transformers' greedy `generate` on model
directories that transformers saves with their tokenizer.

usage: hf_generate_transformers.py WEFT TOKENIZER_DIR WORKDIR

For a GPT-2 and a Llama (small random models, built by transformers from a
config with the vocabulary of TOKENIZER_DIR's gpt2.json and llama3.json, saved
with save_pretrained together with a PreTrainedTokenizerFast over that
tokenizer.json): `weft generate --checkpoint DIR --prompt "The quick brown fox"
--tokens 24 --temperature 0` must print exactly what
tokenizer.decode(model.generate(**tokenizer(prompt), do_sample=False,
max_new_tokens=24)[0], skip_special_tokens=True) gives, and `weft checkpoint
import` of the directory must carry the tokenizer (the same text from the
imported checkpoint).

Runs only where transformers (with torch) is importable by this Python; exits
with status 77 (ctest: skipped) and says how to run it otherwise.
"""
import json
import os
import subprocess
import sys

PROMPT = "The quick brown fox"
TOKENS = 24


def main():
    weft, data, work = sys.argv[1:4]
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"skipped: transformers is not importable by {sys.executable} ({e}). To run: "
              "python3 -m venv /tmp/hf && /tmp/hf/bin/pip install torch transformers && "
              "WEFT_HF_PYTHON=/tmp/hf/bin/python ctest -R apps_hf_generate")
        return 77
    torch.manual_seed(0)
    os.makedirs(work, exist_ok=True)
    failures = []
    for arch, tok_name in [("gpt2", "gpt2.json"), ("llama", "llama3.json")]:
        tok_file = os.path.join(data, tok_name)
        spec = json.load(open(tok_file, encoding="utf-8"))
        vocab = max(max(spec["model"]["vocab"].values()),
                    max(t["id"] for t in spec["added_tokens"])) + 1
        specials = {t["content"] for t in spec["added_tokens"] if t["special"]}
        if arch == "gpt2":
            config = transformers.GPT2Config(vocab_size=vocab, n_positions=128, n_embd=64,
                                             n_layer=2, n_head=2)
            model = transformers.GPT2LMHeadModel(config)
            tok = transformers.PreTrainedTokenizerFast(tokenizer_file=tok_file,
                                                       bos_token="<|endoftext|>",
                                                       eos_token="<|endoftext|>")
        else:
            config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=64,
                                              intermediate_size=128, num_hidden_layers=2,
                                              num_attention_heads=4, num_key_value_heads=2,
                                              max_position_embeddings=128, rms_norm_eps=1e-5,
                                              rope_theta=500000.0, tie_word_embeddings=False)
            model = transformers.LlamaForCausalLM(config)
            tok = transformers.PreTrainedTokenizerFast(tokenizer_file=tok_file,
                                                       bos_token="<|begin_of_text|>",
                                                       eos_token="<|end_of_text|>")
        assert specials
        model.eval()
        # Weights far from the initialization's near-uniform logits, so that
        # the greedy choice is clear-cut (no near ties for rounding to flip).
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("norm.weight") or ".ln_" in name:
                    p.uniform_(0.5, 1.5)
                else:
                    p.normal_(0.0, 0.15)
        # The end-of-sequence token is the tokenizer's, in the model's config and
        # its generation config alike (both sides stop there, if it comes).
        eos = tok.convert_tokens_to_ids(tok.eos_token)
        bos = tok.convert_tokens_to_ids(tok.bos_token)
        for c in (model.config, model.generation_config):
            c.eos_token_id, c.bos_token_id, c.pad_token_id = eos, bos, eos
        out_dir = os.path.join(work, f"hf-gen-{arch}")
        model.save_pretrained(out_dir, safe_serialization=True)
        tok.save_pretrained(out_dir)
        enc = tok(PROMPT, return_tensors="pt")
        with torch.no_grad():
            gen = model.generate(**enc, do_sample=False, max_new_tokens=TOKENS)
        want = tok.decode(gen[0], skip_special_tokens=True)
        for checkpoint in [out_dir, os.path.join(work, f"hf-gen-{arch}-imported")]:
            if checkpoint != out_dir:
                subprocess.run([weft, "checkpoint", "import", out_dir, checkpoint], check=True)
            got = subprocess.run([weft, "generate", "--checkpoint", checkpoint, "--prompt", PROMPT,
                                  "--tokens", str(TOKENS), "--temperature", "0", "--json"],
                                 check=True, capture_output=True, text=True).stdout
            g = json.loads(got)
            if g["prompt_ids"] != enc["input_ids"][0].tolist():
                failures.append(f"{arch} {checkpoint}: prompt ids {g['prompt_ids']} != "
                                f"{enc['input_ids'][0].tolist()}")
            if g["text"] != want:
                failures.append(f"{arch} {checkpoint}: weft {g['text']!r} != transformers {want!r}")
            print(f"{arch} {checkpoint}: {g['text']!r}")
    if failures:
        print("\n".join(failures))
        return 1
    print("hf_generate: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

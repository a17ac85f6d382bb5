"""Text in, text out through the `weft` command line, with the tokenizer
fixtures of tests/text/data (made by the `tokenizers` library).

usage: text_pipeline.py WEFT DATA_DIR WORK_DIR CASE

Cases:
  tokenize  `weft tokenize` gives the library's ids for every fixture text
            (one line per input, threads or not), and `--decode` gives the
            byte-level texts back exactly
  prepare   `weft data prepare` shards hold exactly end-of-text + ids of each
            document (text files and JSON Lines), llm.c's header, the val/train
            split and the tokenizer.json beside them
  model     `weft train` on those shards takes the tokenizer's vocabulary and
            stores tokenizer.json in its checkpoint; `weft generate --prompt`,
            `weft eval --data TEXT`, export (tokenizer files) and import (the
            tokenizer carried again) work with it
  errors    bad input ends with one line "weft: error: ..." and exit status 2
"""
import json
import os
import struct
import subprocess
import sys


def run(args, rc=0, stdin=None):
    p = subprocess.run(args, input=stdin, capture_output=True)
    if p.returncode != rc:
        sys.exit(f"{' '.join(args)}: exit status {p.returncode}, expected {rc}\n"
                 f"{p.stdout.decode(errors='replace')}{p.stderr.decode(errors='replace')}")
    return p


def expect_error(args, pattern, stdin=None):
    p = run(args, rc=2, stdin=stdin)
    out = (p.stdout + p.stderr).decode(errors="replace").strip()
    lines = out.splitlines()
    if len(lines) != 1 or not lines[0].startswith("weft: error: ") or pattern not in lines[0]:
        sys.exit(f"{' '.join(args)}: expected one line 'weft: error: ...{pattern}...', got:\n{out}")


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, count = struct.unpack("<3i", data[:12])
    if (magic, version) == (20240520, 1):
        width = 2
    elif (magic, version) == (20240801, 7):
        width = 4
    else:
        sys.exit(f"{path}: header {magic} {version} is not llm.c's")
    body = data[256 * 4:]
    if len(body) != count * width:
        sys.exit(f"{path}: {len(body)} bytes for {count} tokens")
    return list(struct.unpack(f"<{count}{'H' if width == 2 else 'I'}", body))


TEXTS = ["license.txt", "python_source.txt", "unicode_stress.txt"]


def case_tokenize(weft, data, work):
    expected = json.load(open(os.path.join(data, "expected.json"), encoding="utf-8"))
    texts = [os.path.join(data, t) for t in TEXTS]
    for name in ["gpt2", "llama3", "llama2"]:
        tok = os.path.join(data, name + ".json")
        for threads in ["1", "3"]:
            out = run([weft, "tokenize", "--tokenizer", tok, "--threads", threads, *texts]).stdout
            lines = out.decode().split("\n")
            assert lines[-1] == "" and len(lines) == len(TEXTS) + 1, f"{name}: {len(lines)} lines"
            for text, line in zip(TEXTS, lines):
                got = [int(x) for x in line.split()]
                if got != expected[name][text]["ids"]:
                    sys.exit(f"{name} --threads {threads} on {text}: ids differ from the library's")
        if name == "llama2":
            continue
        # Byte-level: the texts come back exactly, through a pipe.
        ids = run([weft, "tokenize", "--tokenizer", tok, *texts]).stdout
        back = run([weft, "tokenize", "--tokenizer", tok, "--decode", "-"], stdin=ids).stdout
        want = b"".join(open(t, "rb").read() for t in texts)
        if back != want:
            sys.exit(f"{name}: tokenize | tokenize --decode does not give the texts back")
    # A directory holding tokenizer.json, and standard input.
    os.makedirs(os.path.join(work, "tokdir"), exist_ok=True)
    with open(os.path.join(work, "tokdir", "tokenizer.json"), "wb") as f:
        f.write(open(os.path.join(data, "gpt2.json"), "rb").read())
    out = run([weft, "tokenize", "--tokenizer", os.path.join(work, "tokdir"), "-"],
              stdin=open(texts[2], "rb").read()).stdout
    assert [int(x) for x in out.split()] == expected["gpt2"][TEXTS[2]]["ids"]


def prepare(weft, data, work, tokenizer, out_name, extra=()):
    out = os.path.join(work, out_name)
    jsonl = os.path.join(work, "docs.jsonl")
    with open(jsonl, "w", encoding="utf-8") as f:
        for t in TEXTS:
            f.write(json.dumps({"text": open(os.path.join(data, t), encoding="utf-8",
                                             newline="").read(), "id": t}) + "\n")
    inputs = [os.path.join(data, t) for t in TEXTS] + [jsonl]
    p = run([weft, "data", "prepare", "--tokenizer", os.path.join(data, tokenizer), "--output", out,
             "--threads", "2", *extra, *inputs])
    return out, p.stdout.decode()


def case_prepare(weft, data, work):
    expected = json.load(open(os.path.join(data, "expected.json"), encoding="utf-8"))
    spec = json.load(open(os.path.join(data, "gpt2.json"), encoding="utf-8"))
    eot = next(t["id"] for t in spec["added_tokens"] if t["content"] == "<|endoftext|>")
    out, summary = prepare(weft, data, work, "gpt2.json", "shards",
                           ["--shard-tokens", "5000", "--val-tokens", "1000"])
    assert "6 documents" in summary and "<|endoftext|>" in summary, summary
    want = []
    for _ in range(2):  # the text files, then the same texts as JSON Lines
        for t in TEXTS:
            want += [eot] + expected["gpt2"][t]["ids"]  # GPT-2 adds no special tokens
    files = sorted(f for f in os.listdir(out) if f.endswith(".bin"))
    val = read_shard(os.path.join(out, "data_val_000000.bin"))
    assert len(val) == 1000, len(val)
    train = [f for f in files if "_train_" in f]
    assert train[0] == "data_train_000001.bin", files
    got = list(val)
    for f in train:
        shard = read_shard(os.path.join(out, f))
        assert len(shard) <= 5000
        got += shard
    if got != want:
        sys.exit("the shards do not hold end-of-text + ids of each document")
    assert os.path.exists(os.path.join(out, "tokenizer.json"))
    # Again with fewer, larger shards: the older shards of the name go.
    out, _ = prepare(weft, data, work, "gpt2.json", "shards",
                     ["--shard-tokens", "100000", "--val-tokens", "1000"])
    files = sorted(f for f in os.listdir(out) if f.endswith(".bin"))
    assert files == ["data_train_000001.bin", "data_val_000000.bin"], files
    # Llama-2 style: the BOS (<s>) is the end-of-text token, ids without it.
    out, summary = prepare(weft, data, work, "llama2.json", "shards-llama2", ["--val-tokens", "0"])
    got = read_shard(os.path.join(out, "data_train_000001.bin"))
    want = []
    for _ in range(2):
        for t in TEXTS:
            want += [1] + expected["llama2"][t]["ids"][1:]
    if got != want:
        sys.exit("llama2: the shards do not hold <s> + ids of each document")


def case_model(weft, data, work):
    out, _ = prepare(weft, data, work, "llama3.json", "shards-model", ["--val-tokens", "2000"])
    ck = os.path.join(work, "ck-text")
    trained = run([weft, "train", "--data", os.path.join(out, "data_train_*.bin"), "--val-data",
         os.path.join(out, "data_val_000000.bin"), "--layers", "2", "--width", "64", "--heads", "2",
         "--seq", "64", "--steps", "3", "--micro-batch", "2", "--eval-every", "0",
         "--sample-tokens", "8", "--sample-prompt", "The quick", "--save", ck, "--overwrite"])
    # The end-of-run sample: --sample-prompt through the tokenizer, the
    # continuation decoded to text.
    assert "sample:\n" in trained.stdout.decode(), trained.stdout.decode()
    index = json.load(open(os.path.join(ck, "step-000003", "index.json")))
    assert index["model"]["vocab"] == 2000, index["model"]
    assert index["tokenizer"]["file"] == "tokenizer.json"
    tj = os.path.join(ck, "step-000003", "tokenizer.json")
    assert open(tj, "rb").read() == open(os.path.join(data, "llama3.json"), "rb").read()
    gen = run([weft, "generate", "--checkpoint", ck, "--prompt", "The quick brown fox",
               "--tokens", "6", "--temperature", "0", "--json"]).stdout
    g = json.loads(gen)
    # The prompt as the library encodes it: BOS first.
    bos = g["prompt_ids"][0]
    spec = json.load(open(os.path.join(data, "llama3.json"), encoding="utf-8"))
    assert bos == next(t["id"] for t in spec["added_tokens"]
                       if t["content"] == "<|begin_of_text|>"), g
    assert g["text"].startswith("The quick brown fox"), g
    run([weft, "eval", "--checkpoint", ck, "--data", os.path.join(data, "license.txt"),
         "--max-tokens", "300"])
    exported = os.path.join(work, "exported-text")
    run([weft, "checkpoint", "export", ck, exported])
    for f in ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]:
        assert os.path.exists(os.path.join(exported, f)), f
    special = json.load(open(os.path.join(exported, "special_tokens_map.json")))
    assert special["bos_token"] == "<|begin_of_text|>", special
    ids = {t["content"]: t["id"] for t in spec["added_tokens"]}
    for f in ["config.json", "generation_config.json"]:
        c = json.load(open(os.path.join(exported, f)))
        assert c["bos_token_id"] == ids["<|begin_of_text|>"], (f, c)
        assert c["eos_token_id"] == ids["<|end_of_text|>"], (f, c)
    imported = os.path.join(work, "imported-text")
    run([weft, "checkpoint", "import", exported, imported])
    gen2 = json.loads(run([weft, "generate", "--checkpoint", imported, "--prompt",
                           "The quick brown fox", "--tokens", "6", "--temperature", "0",
                           "--json"]).stdout)
    assert gen2["prompt_ids"] == g["prompt_ids"], (gen2, g)
    # The exported directory itself (as a Hugging Face directory) too.
    gen3 = json.loads(run([weft, "generate", "--checkpoint", exported, "--prompt",
                           "The quick brown fox", "--tokens", "6", "--temperature", "0",
                           "--json"]).stdout)
    assert gen3["prompt_ids"] == g["prompt_ids"], (gen3, g)
    # A resumed run keeps storing it.
    run([weft, "train", "--resume", ck, "--steps", "4", "--sample-tokens", "0"])
    assert open(os.path.join(ck, "step-000004", "tokenizer.json"), "rb").read() == \
        open(os.path.join(data, "llama3.json"), "rb").read()
    # `weft checkpoint verify` checks the tokenizer too; a damaged one is named.
    out = run([weft, "checkpoint", "verify", ck]).stdout.decode()
    assert "tokenizer.json" in out and "checksum ok" in out, out
    damaged = os.path.join(work, "ck-damaged")
    import shutil
    shutil.rmtree(damaged, ignore_errors=True)
    shutil.copytree(os.path.join(ck, "step-000003"), damaged)
    with open(os.path.join(damaged, "tokenizer.json"), "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 1]))
    expect_error([weft, "generate", "--checkpoint", damaged, "--prompt", "x", "--tokens", "2"],
                 "does not match its checksum")
    p = run([weft, "checkpoint", "verify", damaged], rc=2)
    assert b"tokenizer.json" in p.stdout + p.stderr, p
    # A prompt longer than the context (64).
    expect_error([weft, "generate", "--checkpoint", ck, "--prompt", "word " * 100],
                 "longer than the model's context of 64")


def case_errors(weft, data, work):
    os.makedirs(work, exist_ok=True)
    bad_json = os.path.join(work, "bad-tokenizer.json")
    with open(bad_json, "w") as f:
        f.write('{"model": {"type": "BPE", ')
    expect_error([weft, "tokenize", "--tokenizer", bad_json, "-"], "not valid JSON", stdin=b"x")
    spec = json.load(open(os.path.join(data, "gpt2.json"), encoding="utf-8"))
    spec["pre_tokenizer"] = {"type": "BertPreTokenizer"}
    unsupported = os.path.join(work, "bert-tokenizer.json")
    with open(unsupported, "w", encoding="utf-8") as f:
        json.dump(spec, f)
    expect_error([weft, "tokenize", "--tokenizer", unsupported, "-"], "BertPreTokenizer", stdin=b"x")
    gpt2 = os.path.join(data, "gpt2.json")
    expect_error([weft, "tokenize", "--tokenizer", gpt2, "--decode", "-"],
                 "token id 99999 (at position 1)", stdin=b"10 99999\n")
    expect_error([weft, "tokenize", "--tokenizer", gpt2, "--decode", "-"],
                 "'x7' is not a token id", stdin=b"10 x7\n")
    latin1 = os.path.join(work, "latin1.txt")
    with open(latin1, "wb") as f:
        f.write(b"caf\xe9 au lait")
    expect_error([weft, "tokenize", "--tokenizer", gpt2, latin1], "(byte offset 3)")
    expect_error([weft, "data", "prepare", "--tokenizer", gpt2, "--output",
                  os.path.join(work, "bad-shards"), latin1], "(byte offset 3)")
    jsonl = os.path.join(work, "no-field.jsonl")
    with open(jsonl, "w") as f:
        f.write('{"body": "hello"}\n')
    expect_error([weft, "data", "prepare", "--tokenizer", gpt2, "--output",
                  os.path.join(work, "bad-shards"), jsonl], "has no string field \"text\"")
    expect_error([weft, "data", "prepare", "--tokenizer", gpt2, "--output",
                  os.path.join(work, "bad-shards"), "--eot", "<nope>", latin1], "--eot <nope>")
    expect_error([weft, "tokenize", "--tokenizer", work, "-"], "holds no tokenizer.json", stdin=b"")


def main():
    weft, data, work, case = sys.argv[1:5]
    work = os.path.join(work, "text-" + case)
    os.makedirs(work, exist_ok=True)
    {"tokenize": case_tokenize, "prepare": case_prepare, "model": case_model,
     "errors": case_errors}[case](weft, data, work)
    print(f"{case}: ok")


if __name__ == "__main__":
    main()

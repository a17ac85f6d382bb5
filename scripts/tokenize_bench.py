#!/usr/bin/env python3
"""`weft tokenize --threads N` against Hugging Face tokenizers' encode_batch on
N threads, on the same ~16 MB of text, with the same tokenizer.json.

Needs the `tokenizers` library in a scratch virtual environment (never a
dependency of weft):
    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers
    /tmp/tokvenv/bin/python scripts/tokenize_bench.py --weft build/bin/weft

The text: license texts (/usr/share/common-licenses), Python sources (the
standard library of this Python) and the Unicode stress text of tests/text/data,
cut into documents of at most 64 KiB, repeated until --megabytes; one file a
document (weft reads the files; the library gets the same strings in memory).
weft's time is the whole command (start, reading the tokenizer and the files,
writing the ids to /dev/null); the library's is encode_batch alone. Each side
runs --repeats times and keeps its best; the ids are checked to be the same.
Prints one table row per tokenizer; the ratio is weft's MB/s over the library's.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "text", "data")


def corpus(megabytes):
    sources = sorted(glob.glob("/usr/share/common-licenses/*"))
    sources += sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))
    sources.append(os.path.join(DATA, "unicode_stress.txt"))
    texts = []
    for path in sources:
        if not os.path.isfile(path):
            continue
        try:
            text = open(path, encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        for i in range(0, len(text), 65536):
            texts.append(text[i:i + 65536])
    docs, total, i = [], 0, 0
    while total < megabytes * 1e6:
        docs.append(texts[i % len(texts)])
        total += len(docs[-1].encode())
        i += 1
    return docs, total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weft", default="build/bin/weft")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--megabytes", type=float, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tokenizer", action="append",
                    help="tokenizer.json files (default: the three of tests/text/data)")
    args = ap.parse_args()
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)  # before tokenizers starts its pool
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    try:
        from tokenizers import Tokenizer
    except ImportError:
        sys.exit("needs the tokenizers library: python3 -m venv /tmp/tokvenv && "
                 "/tmp/tokvenv/bin/pip install tokenizers; run with /tmp/tokvenv/bin/python")
    tokenizers = args.tokenizer or [os.path.join(DATA, n + ".json") for n in ("gpt2", "llama3", "llama2")]
    docs, total = corpus(args.megabytes)
    mb = total / 1e6
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for k, d in enumerate(docs):
            path = os.path.join(tmp, f"doc{k:05d}.txt")
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(d)
            files.append(path)
        for tj in tokenizers:
            lib = Tokenizer.from_file(tj)
            lib_best, lib_ids = float("inf"), None
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                enc = lib.encode_batch(docs)
                lib_best = min(lib_best, time.perf_counter() - t0)
                lib_ids = enc
            cmd = [args.weft, "tokenize", "--tokenizer", tj, "--threads", str(args.threads), *files]
            weft_best, out = float("inf"), None
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                p = subprocess.run(cmd, capture_output=True, check=True)
                weft_best = min(weft_best, time.perf_counter() - t0)
                out = p.stdout
            lines = out.decode().split("\n")[:-1]
            same = len(lines) == len(docs) and all(
                [int(x) for x in line.split()] == e.ids for line, e in zip(lines, lib_ids))
            rows.append((os.path.basename(tj), weft_best, lib_best, same))
    print(f"{mb:.1f} MB in {len(docs)} documents, {args.threads} threads each, best of {args.repeats}")
    print(f"{'tokenizer':<16} {'weft s':>8} {'weft MB/s':>10} {'tokenizers s':>13} "
          f"{'tokenizers MB/s':>16} {'ratio':>6}  same ids")
    for name, w, l, same in rows:
        print(f"{name:<16} {w:8.3f} {mb / w:10.1f} {l:13.3f} {mb / l:16.1f} {l / w:6.2f}  {same}")
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

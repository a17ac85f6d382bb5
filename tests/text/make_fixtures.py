#!/usr/bin/env python3
"""Writes the tokenizer test fixtures of tests/text/data/ with Hugging Face's
`tokenizers` library, the reference weft's text layer must agree with exactly.

Needs a scratch virtual environment (never a dependency of weft):
    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers
    /tmp/tokvenv/bin/python tests/text/make_fixtures.py

Trains three small tokenizers on the fortunes corpus (/usr/share/games/fortunes,
Debian's `fortunes` package), text none of the test texts comes from:
  gpt2.json    GPT-2 style: byte-level BPE, the ByteLevel regex
  llama3.json  Llama-3 style: Split(Llama-3 regex) + ByteLevel without regex,
               ignore_merges, a TemplateProcessing BOS
  llama2.json  Llama-2 style (as transformers converts it): Prepend/Replace
               normalizers, no pre-tokenizer, BPE with byte_fallback and
               fuse_unk, <0x..> byte tokens, a TemplateProcessing BOS
and writes, for each test text (license.txt, python_source.txt,
unicode_stress.txt), the library's ids (`encode(text).ids`) and decodings
(`decode(ids)`, `decode(ids, skip_special_tokens=True)`) to expected.json.
variants.json holds components swapped into those tokenizers (every
normalizer, pre-tokenizer, Split behavior, decoder weft supports, added-token
options) and the library's ids and decodings for each on the stress text.
"""
import glob
import json
import os
import sys

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
TEXTS = ["license.txt", "python_source.txt", "unicode_stress.txt"]
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
VOCAB = 2000
CAMEL = {"removed": "Removed", "isolated": "Isolated",
         "merged_with_previous": "MergedWithPrevious", "merged_with_next": "MergedWithNext",
         "contiguous": "Contiguous"}


def corpus():
    files = sorted(f for f in glob.glob("/usr/share/games/fortunes/*")
                   if os.path.isfile(f) and not f.endswith((".dat", ".u8")))
    docs = []
    for f in files:
        text = open(f, encoding="utf-8", errors="replace").read()
        docs.extend(d.strip() for d in text.split("\n%\n") if d.strip())
    if not docs:
        sys.exit("no fortunes: apt-get install fortunes")
    return docs


def read(name):
    with open(os.path.join(DATA, name), encoding="utf-8", newline="") as f:
        return f.read()


def gpt2(docs):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(docs, trainer)
    return tok


def llama3(docs):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB,
                                  special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(docs, trainer)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return tok


def llama2(docs):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"],
                                  limit_alphabet=120, show_progress=False)
    tok.train_from_iterator(docs, trainer)
    # As Llama 2's file: the 256 byte tokens after the three specials, the
    # sentencepiece-style normalizers and decoders, no pre-tokenizer.
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    specials = ["<unk>", "<s>", "</s>"]
    rest = sorted((t for t in vocab if t not in specials), key=lambda t: vocab[t])
    order = specials + [f"<0x{b:02X}>" for b in range(256)] + rest
    spec["model"]["vocab"] = {t: i for i, t in enumerate(order)}
    for a in spec["added_tokens"]:
        a["id"] = order.index(a["content"])
    spec["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    spec["pre_tokenizer"] = None
    spec["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    spec["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<s>", "type_id": 1}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    return Tokenizer.from_str(json.dumps(spec, ensure_ascii=False))


def expect(tok, text):
    ids = tok.encode(text).ids
    return {"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
            "decoded_skip": tok.decode(ids, skip_special_tokens=True)}


def bl(use_regex=True, add_prefix_space=False):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": True,
            "use_regex": use_regex}


def seq(*items):
    return {"type": "Sequence", "pretokenizers": list(items)}


def nseq(*items):
    return {"type": "Sequence", "normalizers": list(items)}


def split(pattern, behavior, invert=False, string=False):
    return {"type": "Split", "pattern": {"String" if string else "Regex": pattern},
            "behavior": CAMEL[behavior], "invert": invert}


def variants():
    """(name, base, {field: replacement}, extra added tokens) for variants.json."""
    out = [("bytelevel_prefix_space", "gpt2", {"pre_tokenizer": bl(True, True)}),
           ("bytelevel_no_regex", "gpt2", {"pre_tokenizer": bl(False)}),
           ("digits_individual", "gpt2",
            {"pre_tokenizer": seq({"type": "Digits", "individual_digits": True}, bl())}),
           ("digits_contiguous", "gpt2",
            {"pre_tokenizer": seq({"type": "Digits", "individual_digits": False}, bl(False))}),
           ("whitespace", "gpt2", {"pre_tokenizer": seq({"type": "Whitespace"}, bl(False))}),
           ("whitespace_split", "gpt2",
            {"pre_tokenizer": seq({"type": "WhitespaceSplit"}, bl(False))}),
           ("split_string", "gpt2",
            {"pre_tokenizer": seq(split(" ", "merged_with_next", string=True), bl(False))})]
    for behavior in ["removed", "isolated", "merged_with_previous", "merged_with_next",
                     "contiguous"]:
        out.append(("punctuation_" + behavior, "gpt2",
                    {"pre_tokenizer": seq({"type": "Punctuation", "behavior": CAMEL[behavior]},
                                          bl(False))}))
        for invert in [False, True]:
            out.append((f"split_{behavior}{'_invert' if invert else ''}", "gpt2",
                        {"pre_tokenizer": seq(split(r"\s+|\p{P}+|\d", behavior, invert),
                                              bl(False))}))
    for form in ["NFC", "NFKC", "NFD", "NFKD", "Lowercase"]:
        out.append(("normalizer_" + form.lower(), "gpt2", {"normalizer": {"type": form}}))
    out += [("normalizer_strip", "gpt2",
             {"normalizer": {"type": "Strip", "strip_left": True, "strip_right": True}}),
            ("normalizer_replace_regex", "gpt2",
             {"normalizer": {"type": "Replace", "pattern": {"Regex": r"\s+"}, "content": " "}}),
            ("normalizer_sequence", "gpt2",
             {"normalizer": nseq({"type": "NFKC"}, {"type": "Lowercase"},
                                 {"type": "Prepend", "prepend": "Ġ"})})]
    for scheme in ["first", "always", "never"]:
        for do_split in [True, False]:
            out.append((f"metaspace_{scheme}{'_split' if do_split else ''}", "llama2",
                        {"normalizer": None,
                         "pre_tokenizer": {"type": "Metaspace", "replacement": "▁",
                                           "prepend_scheme": scheme, "split": do_split},
                         "decoder": {"type": "Metaspace", "replacement": "▁",
                                     "prepend_scheme": scheme, "split": do_split}}))
    out.append(("llama2_no_bos", "llama2", {"post_processor": None}))
    return out


ADDED = [AddedToken("brown fox", normalized=True), AddedToken("über", normalized=False),
         AddedToken("[MASK]", lstrip=True, rstrip=True, special=True),
         AddedToken("dog", single_word=True, normalized=False),
         AddedToken("<sep>", special=True, normalized=False)]
ADDED_TEXT = ("The quick brown fox jumps over the lazy dog; hotdog, dogs.  [MASK]  über "
              "Übergröße<sep>brown  fox dog\n")


def main():
    docs = corpus()
    made = {"gpt2": gpt2(docs), "llama3": llama3(docs), "llama2": llama2(docs)}
    expected = {}
    for name, tok in made.items():
        with open(os.path.join(DATA, name + ".json"), "w", encoding="utf-8") as f:
            f.write(tok.to_str(pretty=False))
        expected[name] = {t: expect(tok, read(t)) for t in TEXTS}
    with open(os.path.join(DATA, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, separators=(",", ":"))

    stress = read("unicode_stress.txt")
    out = []
    for name, base, fields in variants():
        spec = json.loads(made[base].to_str())
        spec.update(fields)
        tok = Tokenizer.from_str(json.dumps(spec, ensure_ascii=False))
        out.append({"name": name, "base": base, "fields": fields, "text": "unicode_stress.txt",
                    **expect(tok, stress)})
    for base in ["gpt2", "llama2"]:
        tok = Tokenizer.from_str(made[base].to_str())
        tok.add_tokens([t for t in ADDED if not t.special])
        tok.add_special_tokens([t for t in ADDED if t.special])
        spec = json.loads(tok.to_str())
        out.append({"name": "added_tokens_" + base, "base": base,
                    "fields": {"added_tokens": spec["added_tokens"]}, "text": ADDED_TEXT,
                    **expect(tok, ADDED_TEXT)})
    with open(os.path.join(DATA, "variants.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Write a tiny llama-architecture GGUF model, deterministically, for serving tests that need a
real engine and no download: 2 layers, 64-wide, 4 heads, a SentencePiece-style vocabulary of
byte tokens and a few word pieces, float32 weights drawn from a seeded generator. llama.cpp's
llama-server loads it and answers /v1/models and /v1/completions (the text is noise; the
speed and the protocol are real).

    python3 scripts/make-tiny-gguf.py OUT.gguf [--seed N]
    python3 scripts/make-tiny-gguf.py --dir MODEL_DIR [--seed N]

`--dir` writes a model folder as the recipes mount it at /models: `tiny.gguf`, the same
vocabulary as a Hugging Face `tokenizer.json` (a unigram model with byte fallback, read by
`transformers.AutoTokenizer`, so benchmark clients count tokens without a download) with its
`tokenizer_config.json`, and `book.txt`, a generated text for benchmark prompts.

Needs the `gguf` and `numpy` packages (requirements-test.txt pins them). The same seed gives the
same bytes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import gguf
import numpy as np

SPECIAL = ["<unk>", "<s>", "</s>"]
WORDS = ["the", "a", "of", "and", "to", "in", "is", "it", "that", "hello", "world"]
SPACE = "\u2581"  # SentencePiece's word boundary


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, token types): unknown/control, the 256 byte tokens, then word pieces."""
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces = list(dict.fromkeys([SPACE + w for w in WORDS] + letters + [SPACE + c for c in letters] + [SPACE]))
    tokens = SPECIAL + [f"<0x{b:02X}>" for b in range(256)] + pieces
    scores = [0.0] * (len(SPECIAL) + 256) + [-float(i) for i in range(len(pieces))]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + \
        [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL] * len(pieces)
    return tokens, scores, [int(t) for t in types]


def write(path: str, seed: int, layers: int = 2, width: int = 64, heads: int = 4, ff: int = 128,
          context: int = 2048) -> None:
    rng = np.random.default_rng(seed)
    tokens, scores, types = vocabulary()
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name("enginebuild-tiny")
    writer.add_context_length(context)
    writer.add_embedding_length(width)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_rope_dimension_count(width // heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)

    def weight(name: str, *shape: int) -> None:
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    def ones(name: str) -> None:
        writer.add_tensor(name, np.ones(width, dtype=np.float32))

    weight("token_embd.weight", len(tokens), width)
    ones("output_norm.weight")
    weight("output.weight", len(tokens), width)
    for i in range(layers):
        ones(f"blk.{i}.attn_norm.weight")
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            weight(f"blk.{i}.{part}.weight", width, width)
        ones(f"blk.{i}.ffn_norm.weight")
        weight(f"blk.{i}.ffn_gate.weight", ff, width)
        weight(f"blk.{i}.ffn_down.weight", width, ff)
        weight(f"blk.{i}.ffn_up.weight", ff, width)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def tokenizer_json() -> dict:
    """The vocabulary as `tokenizers` reads it: SentencePiece's normalisation (spaces become the
    word boundary, one is prepended), a unigram model over the same pieces with the same scores
    and byte fallback, and the decoder that undoes both."""
    tokens, scores, types = vocabulary()
    special = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for i, t in enumerate(SPECIAL)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                    {"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": True,
                  "vocab": [[t, s if ty == int(gguf.TokenType.NORMAL) else 0.0]
                            for t, s, ty in zip(tokens, scores, types, strict=False)]},
    }


TOKENIZER_CONFIG = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                    "unk_token": "<unk>", "clean_up_tokenization_spaces": False}


def book(seed: int, words: int = 60000) -> str:
    """A text of the vocabulary's words in seeded order, in sentences and paragraphs: enough
    tokens for benchmark prompts of a few thousand tokens, written here rather than downloaded."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(WORDS), size=words)
    lengths = rng.integers(5, 15, size=words)
    out, sentence, count = [], [], 0
    for pick, length in zip(picks, lengths, strict=False):
        sentence.append(WORDS[pick])
        if len(sentence) >= length:
            out.append(" ".join(sentence).capitalize() + ".")
            sentence, count = [], count + 1
            if count % 8 == 0:
                out.append("\n\n")
    return " ".join(out).replace(" \n\n ", "\n\n").strip() + "\n"


def write_dir(folder: str, seed: int) -> None:
    os.makedirs(folder, exist_ok=True)
    write(os.path.join(folder, "tiny.gguf"), seed)
    for name, text in (("tokenizer.json", json.dumps(tokenizer_json(), indent=1, ensure_ascii=False) + "\n"),
                       ("tokenizer_config.json", json.dumps(TOKENIZER_CONFIG, indent=1) + "\n"),
                       ("book.txt", book(seed))):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("out", nargs="?", help="the .gguf file to write")
    target.add_argument("--dir", help="a model folder to write (the .gguf, its tokenizer and a text)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.dir:
        write_dir(args.dir, args.seed)
    else:
        write(args.out, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Write a tiny llama-architecture GGUF model, deterministically, for serving tests that need a
real engine and no download: 2 layers, 64-wide, 4 heads, a SentencePiece-style vocabulary of
byte tokens and a few word pieces, float32 weights drawn from a seeded generator. llama.cpp's
llama-server loads it and answers /v1/models and /v1/completions (the text is noise; the
speed and the protocol are real).

    python3 scripts/make-tiny-gguf.py OUT.gguf [--seed N]

Needs the `gguf` and `numpy` packages (requirements.txt pins them). The same seed gives the
same bytes.
"""
from __future__ import annotations

import argparse
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    write(args.out, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

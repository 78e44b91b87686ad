"""A tiny random Llama GGUF with a real model's tokenizer and chat template, for the training smoke
test (examples -> a few steps -> GGUF adapter -> loaded by the engine) in seconds instead of hours.

The tokenizer, chat template and special tokens are copied from a source GGUF (the default model),
so decisiond renders the same prompts; the weights are random (seeded), 2 blocks of width 64.

Usage: python training/tiny_model.py --source BASE.gguf --out TINY.gguf
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter

N_EMBD, N_FF, N_HEAD, N_HEAD_KV, N_LAYER = 64, 128, 4, 2, 2


def copy_field(writer: GGUFWriter, reader: GGUFReader, key: str) -> None:
    field = reader.fields[key]
    vtype = field.types[0]
    if vtype == GGUFValueType.ARRAY:
        writer.add_array(key, field.contents())
    elif vtype == GGUFValueType.STRING:
        writer.add_string(key, field.contents())
    else:
        writer.add_key_value(key, field.contents(), vtype)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True, type=Path, help="GGUF whose tokenizer is copied")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    reader = GGUFReader(a.source)
    vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    w = GGUFWriter(a.out, "llama")
    w.add_name("decisiond tiny test model")
    w.add_context_length(2048)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_file_type(0)  # all F32
    for key in reader.fields:
        if key.startswith("tokenizer."):
            copy_field(w, reader, key)
    rng = np.random.default_rng(a.seed)

    def rand(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    head_dim = N_EMBD // N_HEAD
    w.add_tensor("token_embd.weight", rand(vocab, N_EMBD))
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    for i in range(N_LAYER):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", rand(N_EMBD, N_EMBD))
        w.add_tensor(f"blk.{i}.attn_k.weight", rand(N_HEAD_KV * head_dim, N_EMBD))
        w.add_tensor(f"blk.{i}.attn_v.weight", rand(N_HEAD_KV * head_dim, N_EMBD))
        w.add_tensor(f"blk.{i}.attn_output.weight", rand(N_EMBD, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", rand(N_FF, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_up.weight", rand(N_FF, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_down.weight", rand(N_EMBD, N_FF))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"tiny_model: wrote {a.out} ({a.out.stat().st_size} bytes, vocab {vocab})")


if __name__ == "__main__":
    main()

"""Time one forward and backward pass of SmolLM2-135M's shape in float32 and under bfloat16
autocast on this CPU (docs/decisions/099-no-bfloat16-on-avx2.md): where the CPU has no native
bfloat16 (AVX2 only) PyTorch emulates it, and the autocast is many times slower.

Usage: training/.venv/bin/python bench/bf16-autocast.py [--threads 2] [--tokens 512] [--rounds 2]
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import AutoModelForCausalLM, LlamaConfig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=512, help="tokens per sequence (two sequences a batch)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds of both modes")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    # SmolLM2-135M's shape; random weights time the same as the real ones.
    cfg = LlamaConfig(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                      num_key_value_heads=3, vocab_size=49152, max_position_embeddings=2048)
    model = AutoModelForCausalLM.from_config(cfg)
    ids = torch.randint(0, cfg.vocab_size, (2, a.tokens))
    print(f"cpu capability {torch.backends.cpu.get_cpu_capability()}, "
          f"oneDNN bfloat16 {torch.ops.mkldnn._is_mkldnn_bf16_supported()}", flush=True)
    for _ in range(a.rounds):
        for bf16 in (False, True):
            start = time.time()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = model.model(input_ids=ids).last_hidden_state.float().pow(2).mean()
            loss.backward()
            model.zero_grad()
            print(f"{'bfloat16' if bf16 else 'float32 '} {time.time() - start:6.1f} s forward and backward, "
                  f"{ids.numel()} tokens", flush=True)


if __name__ == "__main__":
    main()

"""Merge GGUF LoRA adapters of the same base and shape into one of the same rank.

The merged update of every weight is the weighted sum of the adapters' updates,
    dW = sum_i w_i * B_i @ A_i        (weights w_i sum to 1),
cut back to the adapters' rank r by a truncated SVD (dW ~ U_r S_r V_r^T, written as
lora_b = U_r sqrt(S_r), lora_a = sqrt(S_r) V_r^T), so serving it costs what one adapter costs.
All adapters must have the same alpha (the scale alpha / r is left out of the sum and applied by
llama.cpp as before). It prints the share of the summed update's energy (sum of squared singular
values) the rank-r cut keeps: the smallest and the median over all weights.

Averaging the weights of fine-tuned copies of one base ("model soups", Wortsman et al. 2022,
arXiv:2203.05482) is what the merge does for LoRA updates. Why the shipped adapter is such a
merge: docs/decisions/073-balanced-mix-and-merged-adapter.md; averages of more runs were tried
in docs/experiments/075-adapter-soups.md.

Usage: python training/merge_adapters.py --adapter A.gguf --adapter B.gguf [--adapter C.gguf ...]
                                          [--weights 0.5,0.25,0.25] --out OUT.gguf
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGUFWriter


def lora_tensors(reader: GGUFReader) -> dict[str, np.ndarray]:
    """Every tensor of an adapter as float32, by GGUF name (`blk.N.<weight>.lora_a|lora_b`)."""
    return {t.name: np.array(t.data, dtype=np.float32) for t in reader.tensors}


def alpha_of(reader: GGUFReader) -> float:
    return float(reader.fields["adapter.lora.alpha"].contents())


def merge(adapters: list[Path], weights: list[float], out: Path) -> tuple[float, float]:
    """Write the weighted merge of `adapters` to `out`; returns the (smallest, median) share of
    the summed update's energy that the rank cut keeps.
    Raises SystemExit when the adapters differ in alpha, in the weights they adapt or in shape,
    or when the weights do not match the adapters or do not sum to 1."""
    if len(adapters) < 2 or len(weights) != len(adapters):
        raise SystemExit(f"merge: {len(adapters)} adapters and {len(weights)} weights; need at least two, one weight each")
    if abs(sum(weights) - 1) > 1e-6:
        raise SystemExit(f"merge: the weights sum to {sum(weights)}, not 1")
    readers = [GGUFReader(p) for p in adapters]
    alphas = {alpha_of(r) for r in readers}
    if len(alphas) != 1:
        raise SystemExit(f"merge: alpha differs ({sorted(alphas)})")
    tensors = [lora_tensors(r) for r in readers]
    if any(set(t) != set(tensors[0]) for t in tensors):
        raise SystemExit("merge: the adapters adapt different weights")
    w = GGUFWriter(str(out), str(readers[0].fields["general.architecture"].contents()))
    w.add_type("adapter")
    w.add_string("adapter.type", "lora")
    w.add_name("decision")
    w.add_float32("adapter.lora.alpha", alphas.pop())
    kept = []
    for name in sorted({n[: -len(".lora_a")] for n in tensors[0] if n.endswith(".lora_a")}):
        pairs = [(t[name + ".lora_a"], t[name + ".lora_b"]) for t in tensors]
        a0, b0 = pairs[0]
        for a, b in pairs[1:]:
            if a.shape != a0.shape or b.shape != b0.shape:
                raise SystemExit(f"merge: {name} has shapes {a0.shape}, {b0.shape} against {a.shape}, {b.shape}")
        rank = a0.shape[0]
        update = sum(wi * (b @ a) for wi, (a, b) in zip(weights, pairs))
        u, s, vt = np.linalg.svd(update, full_matrices=False)
        kept.append(float((s[:rank] ** 2).sum() / max((s**2).sum(), 1e-30)))
        if len(s) < rank:  # a weight narrower than the rank: pad with zero directions
            pad = rank - len(s)
            u, s, vt = np.pad(u, ((0, 0), (0, pad))), np.pad(s, (0, pad)), np.pad(vt, ((0, pad), (0, 0)))
        root = np.sqrt(s[:rank])
        w.add_tensor(name + ".lora_a", (root[:, None] * vt[:rank]).astype(np.float16))
        w.add_tensor(name + ".lora_b", (u[:, :rank] * root[None, :]).astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return min(kept), float(np.median(kept))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--adapter", action="append", required=True, type=Path, help="GGUF LoRA adapter (two or more)")
    ap.add_argument("--weights", help="comma-separated weight of each --adapter, summing to 1 (default: equal)")
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args()
    n = len(a.adapter)
    weights = [float(x) for x in a.weights.split(",")] if a.weights else [1 / n] * n
    low, median = merge(a.adapter, weights, a.out)
    print(f"merge: wrote {a.out}; rank cut kept {low:.3f} of the update's energy at least, {median:.3f} median")


if __name__ == "__main__":
    main()

"""Merge two GGUF LoRA adapters of the same base and shape into one of the same rank.

The merged update of every weight is the weighted sum of the two adapters' updates,
    dW = w * B1 @ A1 + (1 - w) * B2 @ A2,
cut back to the adapters' rank r by a truncated SVD (dW ~ U_r S_r V_r^T, written as
lora_b = U_r sqrt(S_r), lora_a = sqrt(S_r) V_r^T), so serving it costs what one adapter costs.
Both adapters must have the same alpha (the scale alpha / r is left out of the sum and applied by
llama.cpp as before). It prints the share of each update's energy (sum of squared singular values)
the rank-r cut keeps: the smallest and the median over all weights.

Why the shipped adapter is such a merge: docs/decisions/073-balanced-mix-and-merged-adapter.md.

Usage: python training/merge_adapters.py --first A.gguf --second B.gguf --weight 0.5 --out OUT.gguf
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


def merge(first: Path, second: Path, weight: float, out: Path) -> tuple[float, float]:
    """Write the merged adapter to `out`; returns (smallest, median) energy share kept."""
    r1, r2 = GGUFReader(first), GGUFReader(second)
    if alpha_of(r1) != alpha_of(r2):
        raise SystemExit(f"merge: alpha differs ({alpha_of(r1)} and {alpha_of(r2)})")
    t1, t2 = lora_tensors(r1), lora_tensors(r2)
    if set(t1) != set(t2):
        raise SystemExit("merge: the adapters adapt different weights")
    w = GGUFWriter(str(out), str(r1.fields["general.architecture"].contents()))
    w.add_type("adapter")
    w.add_string("adapter.type", "lora")
    w.add_name("decision")
    w.add_float32("adapter.lora.alpha", alpha_of(r1))
    kept = []
    for name in sorted({n[: -len(".lora_a")] for n in t1 if n.endswith(".lora_a")}):
        a1, b1, a2, b2 = t1[name + ".lora_a"], t1[name + ".lora_b"], t2[name + ".lora_a"], t2[name + ".lora_b"]
        if a1.shape != a2.shape or b1.shape != b2.shape:
            raise SystemExit(f"merge: {name} has shapes {a1.shape}, {b1.shape} against {a2.shape}, {b2.shape}")
        rank = a1.shape[0]
        u, s, vt = np.linalg.svd(weight * b1 @ a1 + (1 - weight) * b2 @ a2, full_matrices=False)
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
    ap.add_argument("--first", required=True, type=Path, help="GGUF LoRA adapter")
    ap.add_argument("--second", required=True, type=Path, help="GGUF LoRA adapter of the same base, rank and alpha")
    ap.add_argument("--weight", type=float, default=0.5, help="weight of the first adapter's update (the second gets 1 - weight)")
    ap.add_argument("--out", required=True, type=Path)
    a = ap.parse_args()
    low, median = merge(a.first, a.second, a.weight, a.out)
    print(f"merge: wrote {a.out}; rank cut kept {low:.3f} of the update's energy at least, {median:.3f} median")


if __name__ == "__main__":
    main()

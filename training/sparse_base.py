"""A base GGUF made small enough to carry to a lent GPU: the embedding rows no training example
uses are zeroed, so the file compresses to its used part (docs/TRAINING.md, "On a lent GPU").

Gemma 3 270M's embedding is 262,144 rows (178 MB of its 253 MB as Q8_0); a render of the whole
broad mix uses a small share of them. Zeroed rows are valid blocks (scale 0), so transformers
loads the file as it is; `train.py --vocab-rows` then keeps the full-vocabulary term's softmax to
the rows kept, which are written beside it. The weights the adapter trains against are the base's
own wherever an example reaches them.

Usage: python training/sparse_base.py --model BASE.gguf --data TOKENS.jsonl [--data ...]
                                      --out SPARSE.gguf --rows ROWS.json
Prints the rows kept and the bytes zeroed. Raises SystemExit when the file has no token_embd.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
from gguf import GGUFReader


def used_tokens(paths: list[Path]) -> set[int]:
    """Every token id in the renders' prefixes, branches and labels."""
    seen: set[int] = set()
    for path in paths:
        with path.open() as f:
            for line in f:
                if not line.strip():
                    continue
                e = json.loads(line)
                seen.update(e["prefix"])
                seen.update(e["branch"])
                for label in e["labels"]:
                    seen.update(label)
    return seen


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--data", required=True, type=Path, action="append", help="`decisiond render` output")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--rows", required=True, type=Path, help="where the kept token ids go (JSON list)")
    a = ap.parse_args()

    keep = used_tokens(a.data)
    reader = GGUFReader(str(a.model))
    embd = next((t for t in reader.tensors if t.name == "token_embd.weight"), None)
    if embd is None:
        raise SystemExit(f"sparse_base: {a.model} has no token_embd.weight")
    n_rows = int(embd.shape[-1])
    row_bytes = int(embd.n_bytes) // n_rows
    offset = int(embd.data_offset)
    shutil.copyfile(a.model, a.out)
    data = np.memmap(a.out, dtype=np.uint8, mode="r+", offset=offset, shape=(n_rows, row_bytes))
    drop = np.ones(n_rows, dtype=bool)
    drop[sorted(keep)] = False
    data[drop] = 0
    data.flush()
    a.rows.write_text(json.dumps(sorted(keep)))
    print(f"sparse_base: kept {len(keep)} of {n_rows} rows, zeroed {int(drop.sum()) * row_bytes} bytes")


if __name__ == "__main__":
    main()

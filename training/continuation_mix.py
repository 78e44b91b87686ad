"""The questions of a continuation run: every score question of a rendered mix, and three times
their tokens in other questions drawn at random (each at most 1,200 tokens), so a run that
continues from an adapter learns a new score readout without forgetting the rest
(docs/decisions/076-level-text-continuation.md).

Input and output are `decisiond render` JSONL (one question a line).

Usage: python training/continuation_mix.py --tokens MIX.tokens.jsonl --out OUT.tokens.jsonl [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

OTHER_PER_SCORE_TOKEN = 3
LONGEST_OTHER = 1200


def tokens_of(example: dict) -> int:
    return len(example["prefix"]) + len(example["branch"]) + sum(len(label) for label in example["labels"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", required=True, type=Path, help="rendered mix (decisiond render --out)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    lines = [line for line in a.tokens.read_text().splitlines() if line.strip()]
    examples = [json.loads(line) for line in lines]
    score = [i for i, e in enumerate(examples) if e["type"] == "score"]
    other = [i for i, e in enumerate(examples) if e["type"] != "score"]
    budget = OTHER_PER_SCORE_TOKEN * sum(tokens_of(examples[i]) for i in score)
    rng = random.Random(a.seed)
    rng.shuffle(other)
    picked, used = [], 0
    for i in other:
        if tokens_of(examples[i]) > LONGEST_OTHER:
            continue
        picked.append(i)
        used += tokens_of(examples[i])
        if used > budget:
            break
    chosen = score + picked
    rng.shuffle(chosen)
    a.out.write_text("".join(lines[i] + "\n" for i in chosen))
    print(f"continuation mix: {len(score)} score and {len(picked)} other questions to {a.out}")


if __name__ == "__main__":
    main()

"""The questions of a continuation run: the questions it is to learn (every score question of a
rendered mix, or the questions of a `--focus` file), and `--replay` times their tokens in other
questions of the mix drawn at random (each at most 1,200 tokens), so a run that continues from an
adapter learns the new questions without forgetting the rest
(docs/experiments/076-level-text-continuation.md, 077-answer-relevance-transfer.md).

Input and output are `decisiond render` JSONL (one question a line).

With `--anchor` the replayed questions are marked `"anchor": true`: train.py learns them from the
answers of the adapter the run starts from instead of their labels
(docs/decisions/082-anchored-replay.md).

`--twins` adds the rendered pairs of `note_twins.py`, all anchored, each noted twin marked with its
clean twin's id (`"twin"`), which train.py learns from the answer its teacher gives the clean one
(docs/decisions/097-notes-name-any-answer.md). They count as focus for the replay budget.

Usage: python training/continuation_mix.py --tokens MIX.tokens.jsonl --out OUT.tokens.jsonl
           [--focus NEW.tokens.jsonl] [--focus-limit N] [--replay 3] [--seed 7]
           [--replay-also MORE.tokens.jsonl] [--anchor] [--twins TWINS.tokens.jsonl]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

LONGEST_OTHER = 1200


def tokens_of(example: dict) -> int:
    return len(example["prefix"]) + len(example["branch"]) + sum(len(label) for label in example["labels"])


def twinned(example: dict) -> str:
    """A rendered note twin's line, anchored; a noted one (id `<clean id>~note`) names its clean twin."""
    twin = {"twin": example["id"].removesuffix("~note")} if example["id"].endswith("~note") else {}
    return json.dumps({**example, "anchor": True, **twin})


def read_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", required=True, type=Path, help="rendered mix (decisiond render --out)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--focus", type=Path, help="rendered questions to learn (default: the mix's score questions)")
    ap.add_argument("--focus-limit", type=int, default=0, help="at most this many focus questions, drawn at random (0: all)")
    ap.add_argument("--replay", type=float, default=3.0, help="tokens of other questions per focus token")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--replay-also", type=Path, help="rendered questions replayed besides the drawn ones (all of them, outside the --replay budget)")
    ap.add_argument("--anchor", action="store_true", help="mark the other questions to be learned from the initial adapter's answers (train.py)")
    ap.add_argument("--twins", type=Path, help="rendered note twins (note_twins.py), learned from the initial adapter's answers to the clean twin")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    lines = read_lines(a.tokens)
    examples = [json.loads(line) for line in lines]
    twins = [twinned(json.loads(line)) for line in read_lines(a.twins)] if a.twins else []
    if a.focus or a.twins:
        focus = read_lines(a.focus) if a.focus else []
        other = list(range(len(lines)))
    else:
        focus = [lines[i] for i, e in enumerate(examples) if e["type"] == "score"]
        other = [i for i, e in enumerate(examples) if e["type"] != "score"]
    if a.focus_limit and len(focus) > a.focus_limit:
        focus = rng.sample(focus, a.focus_limit)
    budget = a.replay * sum(tokens_of(json.loads(line)) for line in focus + twins)

    def replayed(line: str) -> str:
        """A replayed question's line, marked to be learned from the initial adapter with --anchor."""
        return json.dumps({**json.loads(line), "anchor": True}) if a.anchor else line

    rng.shuffle(other)
    picked, used = [], 0
    for i in other:
        if used >= budget:
            break
        tokens = tokens_of(examples[i])
        if tokens > LONGEST_OTHER:
            continue
        picked.append(replayed(lines[i]))
        used += tokens
    if a.replay_also:
        picked.extend(replayed(line) for line in read_lines(a.replay_also))
    chosen = focus + twins + picked
    rng.shuffle(chosen)
    a.out.write_text("".join(line + "\n" for line in chosen))
    print(f"continuation mix: {len(focus)} focus, {len(twins)} twin and {len(picked)} other questions ({used} tokens) to {a.out}")


if __name__ == "__main__":
    main()

"""Twin questions for a note-invariance continuation (docs/decisions/097-notes-name-any-answer.md).

Reads a mix of requests (`augment.py` / `broad_mix.py` output: one `{id, request, expected}` a
line), draws questions whose state carries no steering note, and writes each twice: as it is
(the clean twin, id unchanged) and with a note addressed to the model appended to its state that
names an answer drawn uniformly from the question's answers, the right one included (the noted
twin, id `<id>~note`, `"twin"`: the clean twin's id). A note then says nothing about the answer,
and `train.py` learns each noted twin from the answer its teacher gives the clean one, so the
adapter answers the same with or without the note: text in the state is evidence, never an
instruction, and never an instruction to do the opposite either.

Usage: python training/note_twins.py --mix MIX.jsonl --out TWINS.jsonl [--n 1200] [--seed 11]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from augment import STEER, note_answers, steer


def has_note(state) -> bool:
    """Whether a state already carries one of `augment.py`'s steering notes."""
    text = json.dumps(state)
    return any(template.split("{x}")[0] in text for template in STEER)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mix", required=True, type=Path, help="requests of a mix (augment.py output)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--n", type=int, default=1200, help="twin pairs to write")
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    items = [json.loads(line) for line in a.mix.read_text().splitlines() if line.strip()]
    clean = [e for e in items if len(e["request"]["questions"]) == 1 and not has_note(e["request"]["state"])]
    picked = rng.sample(clean, min(a.n, len(clean)))
    with a.out.open("w") as f:
        for e in picked:
            question = next(iter(e["request"]["questions"].values()))
            noted = {
                **e,
                "id": f"{e['id']}~note",
                "twin": e["id"],
                "request": {**e["request"], "state": steer(e["request"]["state"], rng.choice(note_answers(question)), rng)},
            }
            f.write(json.dumps(e) + "\n")
            f.write(json.dumps(noted) + "\n")
    print(f"note twins: {len(picked)} pairs of {len(clean)} clean questions to {a.out}")


if __name__ == "__main__":
    main()

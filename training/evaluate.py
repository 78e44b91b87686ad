"""Quick quality check of a base or a trained PEFT adapter, in PyTorch, on rendered examples.

Reads examples written by `decisiond render --split test` (token ids from the server's own prompt
code) and computes each question's answer distribution the way decisiond's readout does: the
probability of a label is the product of the full next-token softmax along its token path, then
renormalised over the question's labels (src/decision/labels.ts, decide.ts). It prints accuracy,
mean NLL and the share of the most frequent prediction per dataset, so a training recipe can be
compared in minutes instead of a full `decisiond eval` run. The figures that count are
`decisiond eval`'s (docs/QUALITY.md); this is the trainer's own quick probe.

Usage: python training/evaluate.py --model GGUF --data TEST.tokens.jsonl [--adapter DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import Counter, defaultdict
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM


def label_logprobs(model, e: dict) -> list[float]:
    """ln P(label) for each label of one rendered question: the chained full-softmax
    probabilities along each label's tokens after prefix + branch (not yet renormalised)."""
    ctx = torch.tensor([e["prefix"] + e["branch"]])
    out = model(input_ids=ctx, use_cache=True)
    first = torch.log_softmax(out.logits[0, -1].float(), -1)
    labels: list[list[int]] = e["labels"]
    scores = [float(first[lab[0]]) for lab in labels]
    longer = [i for i, lab in enumerate(labels) if len(lab) > 1]
    if longer:
        cache = out.past_key_values
        width = max(len(labels[i]) - 1 for i in longer)
        ids = torch.zeros((len(longer), width), dtype=torch.long)
        mask = torch.zeros((len(longer), ctx.shape[1] + width), dtype=torch.long)
        mask[:, : ctx.shape[1]] = 1
        for row, i in enumerate(longer):
            cont = labels[i][:-1]
            ids[row, : len(cont)] = torch.tensor(cont)
            mask[row, ctx.shape[1] : ctx.shape[1] + len(cont)] = 1
        cache.batch_repeat_interleave(len(longer))
        pos = torch.arange(ctx.shape[1], ctx.shape[1] + width).unsqueeze(0).expand(len(longer), -1)
        logits = model(input_ids=ids, attention_mask=mask, past_key_values=cache, position_ids=pos).logits
        logp = torch.log_softmax(logits.float(), -1)
        for row, i in enumerate(longer):
            lab = labels[i]
            for d in range(1, len(lab)):
                scores[i] += float(logp[row, d - 1, lab[d]])
    return scores


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, type=Path, help="the base GGUF file")
    ap.add_argument("--data", required=True, type=Path, help="examples from `decisiond render --split test`")
    ap.add_argument("--adapter", type=Path, help="PEFT adapter folder from train.py (omit: the base alone)")
    ap.add_argument("--limit", type=int, default=0, help="at most this many examples per dataset (0: all)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write every question's probabilities here")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    model = AutoModelForCausalLM.from_pretrained(str(a.model.parent), gguf_file=a.model.name, dtype=torch.float32)
    if a.adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(a.adapter))
    model.eval()
    examples = [json.loads(line) for line in a.data.read_text().splitlines() if line.strip()]
    per: dict[str, list[dict]] = defaultdict(list)
    for e in examples:
        per[e["id"].split(":")[0]].append(e)
    rows = []
    t0 = time.time()
    with torch.inference_mode():
        for name, items in per.items():
            for e in items[: a.limit or None]:
                s = label_logprobs(model, e)
                top = max(s)
                z = math.log(sum(math.exp(v - top) for v in s)) + top
                p = [math.exp(v - z) for v in s]
                rows.append({"dataset": name, "id": e["id"], "type": e["type"], "gold": e["gold"], "p": p})
    print(f"{len(rows)} questions in {time.time() - t0:.0f} s")
    by: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by[r["dataset"]].append(r)
        by[f"type:{r['type']}"].append(r)
    for name, rs in by.items():
        acc = sum(max(range(len(r["p"])), key=r["p"].__getitem__) == r["gold"] for r in rs) / len(rs)
        nll = sum(-math.log(max(r["p"][r["gold"]], 1e-12)) for r in rs) / len(rs)
        common = Counter(max(range(len(r["p"])), key=r["p"].__getitem__) for r in rs).most_common(1)[0][1] / len(rs)
        print(f"{name:16s} n={len(rs):4d} acc={acc:.3f} nll={nll:.3f} top-share={common:.2f}")
    if a.json:
        a.json.write_text(json.dumps(rows))


if __name__ == "__main__":
    main()

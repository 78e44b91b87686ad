"""Decision-tuning: a LoRA adapter for a GGUF base, trained where decisiond reads its answers.

Input: token-id examples from `decisiond render` (src/evaluation/render.ts): per question the
shared prefix, the question's branch, each label's token sequence and the gold label. The base is
loaded straight from the GGUF file decisiond serves (transformers dequantizes it), so the adapter
is trained against the weights llama.cpp runs.

Loss (docs/TRAINING.md): the readout's own softmax over the question's labels. Labels form a trie
of token sequences (src/decision/labels.ts); the gold label's probability is the product, along its
path, of the softmax over the candidate tokens at each node (a hierarchical softmax that equals the
readout's chained probability once the labels hold the mass). Score questions add the squared
distance between the predicted and gold cumulative distributions over levels (squared EMD,
Hou et al. 2016, arXiv 1611.05916), so levels are ordered classes.

Usage: python training/train.py --model GGUF --data EXAMPLES.jsonl --out DIR [--minutes M]
                                [--init-adapter ADAPTER.gguf]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import time
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


# GGUF LoRA tensor names (llama.cpp's convert_lora_to_gguf.py) of the PEFT modules in TARGETS.
GGUF_MODULES = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def unpermute(w: torch.Tensor, heads: int) -> torch.Tensor:
    """Inverse of llama.cpp's `LlamaModel.permute` (convert_hf_to_gguf.py) on the rows of a q or k
    projection: GGUF interleaves the rotary halves of each head, Hugging Face keeps them apart."""
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def load_gguf_adapter(model, path: Path, config) -> int:
    """Copies a GGUF LoRA adapter (e.g. the shipped one, or a merge of several) into the PEFT
    model's LoRA weights, so training continues from it. The adapter must have the run's rank,
    alpha and layers (`--rank`, `--alpha`, `--layers`). For llama bases the q and k updates are
    un-permuted back to Hugging Face's row order.
    Returns the number of tensors copied; raises SystemExit on any mismatch."""
    from gguf import GGUFReader

    reader = GGUFReader(path)
    tensors = {t.name: torch.tensor(t.data.astype("float32")) for t in reader.tensors}
    alpha = float(reader.fields["adapter.lora.alpha"].contents())
    llama = config.model_type == "llama"
    copied = 0
    for name, param in model.named_parameters():
        if ".lora_A." not in name and ".lora_B." not in name:
            continue
        layer = int(name.split(".layers.")[1].split(".")[0])
        module = next(m for m in GGUF_MODULES if f".{m}." in name)
        side = "lora_a" if ".lora_A." in name else "lora_b"
        key = f"blk.{layer}.{GGUF_MODULES[module]}.weight.{side}"
        if key not in tensors:
            raise SystemExit(f"init-adapter: {path} has no {key} (is it for these --layers?)")
        value = tensors.pop(key)
        if side == "lora_b" and llama and module == "self_attn.q_proj":
            value = unpermute(value, config.num_attention_heads)
        if side == "lora_b" and llama and module == "self_attn.k_proj":
            value = unpermute(value, config.num_key_value_heads)
        if value.shape != param.shape:
            raise SystemExit(f"init-adapter: {key} is {tuple(value.shape)}, the run's is {tuple(param.shape)} (--rank?)")
        with torch.no_grad():
            param.copy_(value)
        copied += 1
    if tensors:
        raise SystemExit(f"init-adapter: {len(tensors)} tensors of {path} adapt no module of this run, e.g. {next(iter(tensors))}")
    if alpha != model.peft_config["default"].lora_alpha:
        raise SystemExit(f"init-adapter: alpha {alpha}, the run's is {model.peft_config['default'].lora_alpha} (--alpha)")
    return copied


def load_examples(path: Path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        e = json.loads(line)
        if e.get("split", "fit") != "fit":
            raise SystemExit(f"{e['id']} is a {e['split']} row: train on the fit split only")
        out.append(e)
    return out


def nodes_of(e: dict) -> tuple[list[int], list[tuple[int, list[int], int]]]:
    """The sequence to evaluate and, per trie node on the gold path, (position, candidates, gold
    index among them). A node with a single candidate has no choice to make among the labels, but
    the readout still multiplies in its full-vocabulary probability, so it is kept for that term."""
    labels: list[list[int]] = e["labels"]
    gold = labels[e["gold"]]
    seq = e["prefix"] + e["branch"] + gold[:-1]
    start = len(e["prefix"]) + len(e["branch"]) - 1
    nodes = []
    for depth, tok in enumerate(gold):
        cands: list[int] = []
        for lab in labels:
            if len(lab) > depth and lab[:depth] == gold[:depth] and lab[depth] not in cands:
                cands.append(lab[depth])
        nodes.append((start + depth, cands, cands.index(tok)))
    return seq, nodes


def batches(examples: list[dict], budget: int, rng: random.Random) -> list[list[dict]]:
    """Examples grouped by length into batches of at most `budget` padded tokens, shuffled."""
    order = sorted(examples, key=lambda e: len(e["_seq"]))
    out, cur, longest = [], [], 0
    for e in order:
        n = len(e["_seq"])
        if cur and max(longest, n) * (len(cur) + 1) > budget:
            out.append(cur)
            cur, longest = [], 0
        cur.append(e)
        longest = max(longest, n)
    if cur:
        out.append(cur)
    rng.shuffle(out)
    return out


def run_layers(inner, hidden: torch.Tensor, mask: torch.Tensor, layers) -> torch.Tensor:
    """`hidden` [batch, tokens, width] through `layers` of the decoder `inner` (a LlamaModel or
    alike), with its causal-and-padding mask and rotary position embeddings, as its own forward
    builds them."""
    from transformers.masking_utils import create_causal_mask

    pos = torch.arange(hidden.shape[1], device=hidden.device).unsqueeze(0)
    causal = create_causal_mask(config=inner.config, inputs_embeds=hidden, attention_mask=mask, cache=None, position_ids=pos)
    rope = inner.rotary_emb(hidden, position_ids=pos)
    for layer in layers:
        hidden = layer(hidden, attention_mask=causal, position_embeddings=rope, position_ids=pos)
    return hidden


class LowerCache:
    """Hidden states after the frozen lower blocks, per batch, computed on the first pass and
    reused on the next ones: with LoRA on the top N blocks only, the blocks below never change,
    so each later pass costs the top blocks alone (bfloat16, about 1.2 KB a token for a
    576-wide model)."""

    def __init__(self, cut: int):
        self.cut = cut
        self.store: dict[int, torch.Tensor] = {}

    def hidden(self, inner, key: int, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The last hidden state of batch `key` (token ids `ids`, padding mask `mask`)."""
        layers = inner.layers[: inner.config.num_hidden_layers]
        if key not in self.store:
            with torch.no_grad():
                low = run_layers(inner, inner.embed_tokens(ids), mask, layers[: self.cut])
            self.store[key] = low.to(torch.bfloat16)
        return inner.norm(run_layers(inner, self.store[key], mask, layers[self.cut :]))


def prepare(e: dict) -> None:
    """Per-example index lists for `step_loss`: the gold-path nodes' positions, their gold token
    (full-vocabulary term) and weight, and the branching nodes' candidates (padded) and gold index."""
    nodes = e["_nodes"]
    e["_pos"] = [pos for pos, _, _ in nodes]
    e["_tok"] = [c[g] for _, c, g in nodes]
    e["_single"] = [len(c) == 1 for _, c, _ in nodes]
    e["_branch"] = [(k, c, g) for k, (_, c, g) in enumerate(nodes) if len(c) > 1]
    e["_ordinal"] = e["type"] == "score" and all(len(lab) == 1 for lab in e["labels"])
    e["_anchor"] = bool(e.get("anchor"))
    e["_twin"] = e.get("twin")


def take_twin_teachers(examples: list[dict]) -> int:
    """Gives each example with a `"twin"` (a noted twin of `note_twins.py`) the teacher answer of
    the example it names, its clean twin, so it learns to answer with the note as without it.
    Both must be anchored and have the same labels. Returns how many took one.
    Raises SystemExit when a twin is missing or differs in its labels."""
    by_id = {e["id"]: e for e in examples}
    taken = 0
    for e in examples:
        if not e["_twin"]:
            continue
        clean = by_id.get(e["_twin"])
        if clean is None or not (e["_anchor"] and clean["_anchor"]) or clean["labels"] != e["labels"]:
            raise SystemExit(f"example {e['id']}: its twin {e['_twin']} is missing, not anchored or asks other labels")
        e["_teacher"] = clean["_teacher"]
        taken += 1
    return taken


def tokens_of(e: dict) -> set[int]:
    """Every token a prepared example reads or is scored on: its sequence, its gold path and the
    candidates of its branching nodes."""
    return set(e["_seq"]) | set(e["_tok"]) | {t for _, c, _ in e["_branch"] for t in c}


def step_loss(model, embed_weight: torch.Tensor, batch: list[dict], ordinal: float, vocab: float,
              cache: LowerCache | None = None, key: int = 0, teach: bool = False,
              vocab_rows: tuple[torch.Tensor, torch.Tensor] | None = None):
    """Mean loss of a batch: restricted-softmax cross-entropy at each branching gold-path node,
    the full-vocabulary cross-entropy of the gold token at every gold-path node (weight 1 where the
    node has a single candidate, `vocab` elsewhere: the readout chains full-softmax probabilities,
    so the labels must hold the mass), plus the squared-EMD term for score questions.

    An anchored example (`"anchor": true`, written by `continuation_mix.py --anchor`) is learned
    from its teacher's distribution instead of its gold label: at each branching node,
    cross-entropy against the restricted softmax the initial adapter gave there (`e["_teacher"]`),
    with no full-vocabulary gold term and no EMD term, so replay keeps the adapter's answers, not
    the labels' (learning without forgetting, Li and Hoiem 2016, arXiv 1606.09282). Its
    single-candidate nodes (the rest of a multi-token label) keep their full-vocabulary term. A
    noted twin (`"twin"`, `note_twins.py`) is learned the same way from the teacher's distribution
    on the clean twin it names (`take_twin_teachers`).

    With `teach`, nothing is learned: the branching nodes' restricted distributions are stored
    as each anchored example's `_teacher` (a list of probability tensors, one per node) and None
    is returned.

    `vocab_rows` (the output embedding's rows of some token ids, and each vocabulary id's index
    among them) restricts the full-vocabulary softmax to those tokens: a base carried with the
    embedding rows no example uses zeroed (`training/sparse_base.py`) would otherwise put logit 0
    on every zeroed row.

    All nodes of the batch are gathered into one matrix, so a step costs a fixed number of kernels
    whatever the batch holds (this matters on a GPU, where launches dominate at this model size)."""
    dev = embed_weight.device
    n = max(len(e["_seq"]) for e in batch)
    ids = torch.zeros((len(batch), n), dtype=torch.long)
    mask = torch.zeros((len(batch), n), dtype=torch.long)
    for i, e in enumerate(batch):
        ids[i, : len(e["_seq"])] = torch.tensor(e["_seq"])
        mask[i, : len(e["_seq"])] = 1
    ids, mask = ids.to(dev), mask.to(dev)
    inner = model.base_model.model.model
    if cache is not None:
        hidden = cache.hidden(inner, key, ids, mask)
    else:
        hidden = inner(input_ids=ids, attention_mask=mask).last_hidden_state
    rows = [i for i, e in enumerate(batch) for _ in e["_pos"]]
    cols = [p for e in batch for p in e["_pos"]]
    h = hidden[torch.tensor(rows, device=dev), torch.tensor(cols, device=dev)].float()  # [nodes, width]
    gold_tok = torch.tensor([t for e in batch for t in e["_tok"]], device=dev)
    weight = torch.tensor(
        [1.0 if s else (0.0 if e["_anchor"] else vocab) for e in batch for s in e["_single"]], device=dev
    )
    if vocab_rows is None:
        full = torch.log_softmax(h @ embed_weight.T, -1).gather(1, gold_tok[:, None])[:, 0]
    else:
        kept_weight, index = vocab_rows
        full = torch.log_softmax(h @ kept_weight.T, -1).gather(1, index[gold_tok][:, None])[:, 0]
    total = -(weight * full).sum()
    # Branching nodes: softmax restricted to the candidates, padded to the widest node.
    offsets, at = [], 0
    for e in batch:
        offsets.append(at)
        at += len(e["_pos"])
    branch = [(offsets[i] + k, c, g, e["_ordinal"] and k == 0) for i, e in enumerate(batch) for k, c, g in e["_branch"]]
    if branch:
        width = max(len(c) for _, c, _, _ in branch)
        cand = torch.zeros((len(branch), width), dtype=torch.long)
        valid = torch.zeros((len(branch), width), dtype=torch.bool)
        for j, (_, c, _, _) in enumerate(branch):
            cand[j, : len(c)] = torch.tensor(c)
            valid[j, : len(c)] = True
        cand, valid = cand.to(dev), valid.to(dev)
        hb = h[torch.tensor([r for r, _, _, _ in branch], device=dev)]
        logits = torch.einsum("nw,nkw->nk", hb, embed_weight[cand]).masked_fill(~valid, float("-inf"))
        logp = torch.log_softmax(logits, -1)
        owner = [(i, k) for i, e in enumerate(batch) for k in range(len(e["_branch"]))]
        anchored = [batch[i]["_anchor"] for i, _ in owner]
        if teach:
            probs = logp.exp().float().cpu()
            for j, (i, k) in enumerate(owner):
                if anchored[j]:
                    batch[i].setdefault("_teacher", []).append(probs[j, : len(branch[j][1])])
            return None
        gold = torch.tensor([g for _, _, g, _ in branch], device=dev)
        hard = torch.tensor([not x for x in anchored], device=dev, dtype=logp.dtype)
        total = total - (logp.gather(1, gold[:, None])[:, 0] * hard).sum()
        if any(anchored):
            target = torch.zeros((len(branch), width))
            for j, (i, k) in enumerate(owner):
                if anchored[j]:
                    t = batch[i]["_teacher"][k]
                    target[j, : len(t)] = t
            total = total - (target.to(dev) * logp.masked_fill(~valid, 0.0)).sum()
        scored = [j for j, (_, _, _, o) in enumerate(branch) if o and not anchored[j]]
        if ordinal > 0 and scored:
            for j in scored:
                k = len(branch[j][1])
                cdf = torch.cumsum(logp[j, :k].exp(), 0)
                target = torch.zeros_like(cdf)
                target[branch[j][2] :] = 1
                total = total + ordinal * ((cdf - target) ** 2).sum()
    return None if teach else total / len(batch)


def bf16_computed(device: str) -> bool:
    """Whether `device` computes bfloat16 matrix products natively: any CUDA GPU, or a CPU on which
    oneDNN does (AVX-512 or AMX). On an AVX2-only CPU PyTorch emulates them, many times slower
    than float32 (measured in docs/decisions/099-no-bfloat16-on-avx2.md)."""
    if torch.device(device).type != "cpu":
        return True
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def save_base_config(base, folder: Path) -> None:
    """The base's Hugging Face config, as llama.cpp's LoRA converter reads it (an architecture
    name, no GGUF quantization entry)."""
    cfg = base.config.to_dict()
    cfg["architectures"] = [type(base).__name__]
    cfg.pop("quantization_config", None)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, type=Path, help="the GGUF file decisiond serves")
    ap.add_argument("--data", required=True, type=Path, help="examples from `decisiond render`")
    ap.add_argument("--out", required=True, type=Path, help="folder for the PEFT adapter and logs")
    ap.add_argument("--minutes", type=float, default=100, help="wall-time budget of the training loop")
    ap.add_argument("--epochs", type=float, default=3.0, help="passes over the data (the time budget may end it first)")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=int, default=32)
    ap.add_argument("--layers", type=int, default=0, help="LoRA on the top N layers only (0: all)")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--batch-tokens", type=int, default=2048)
    ap.add_argument("--ordinal", type=float, default=1.0, help="weight of the score questions' squared-EMD term")
    ap.add_argument("--vocab", type=float, default=0.2, help="weight of the full-vocabulary term at branching nodes")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bf16", action="store_true",
                    help="bfloat16 autocast where the device computes it (any CUDA GPU, CPUs with AVX-512 or AMX); float32 elsewhere")
    ap.add_argument("--device", default="cpu", help="torch device: cpu, or cuda where a GPU is at hand (docs/TRAINING.md)")
    ap.add_argument("--save-every", type=float, default=0, help="save the adapter every this many minutes (0: at the end only)")
    ap.add_argument("--no-cache", action="store_true", help="recompute the frozen lower blocks every pass")
    ap.add_argument("--max-len", type=int, default=0, help="leave out examples longer than this (0: none)")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: no limit; smoke tests)")
    ap.add_argument("--vocab-rows", type=Path,
                    help="JSON list of token ids: the full-vocabulary term's softmax runs over these only "
                    "(a base whose other embedding rows were zeroed to travel, training/sparse_base.py)")
    ap.add_argument("--init-adapter", type=Path, help="GGUF LoRA adapter to continue from (same rank, alpha and layers)")
    a = ap.parse_args()
    if a.bf16 and not bf16_computed(a.device):
        print("bf16: this CPU has no native bfloat16 (AVX-512 or AMX), and PyTorch would emulate it "
              "many times slower than float32: training in float32", flush=True)
        a.bf16 = False

    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    if a.threads:
        torch.set_num_threads(a.threads)
    a.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    base = AutoModelForCausalLM.from_pretrained(
        str(a.model.parent), gguf_file=a.model.name, dtype=torch.float32
    )
    print(f"loaded {a.model.name} in {time.time() - t0:.1f} s", flush=True)
    n_layers = base.config.num_hidden_layers
    layers = list(range(n_layers - a.layers, n_layers)) if a.layers else None
    cfg = LoraConfig(
        r=a.rank,
        lora_alpha=a.alpha,
        lora_dropout=0.0,
        target_modules=TARGETS,
        layers_to_transform=layers,
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(base, cfg)
    if a.init_adapter:
        n = load_gguf_adapter(model, a.init_adapter, base.config)
        print(f"init-adapter: {n} tensors from {a.init_adapter}", flush=True)
    model = model.to(a.device)
    model.print_trainable_parameters()
    embed_weight = base.get_output_embeddings().weight.detach()
    vocab_rows = None
    if a.vocab_rows:
        ids = sorted(set(json.loads(a.vocab_rows.read_text())))
        rows = torch.tensor(ids, device=a.device)
        index = torch.full((embed_weight.shape[0],), -1, dtype=torch.long, device=a.device)
        index[rows] = torch.arange(len(ids), device=a.device)
        # The kept rows gathered once, not at every step.
        vocab_rows = (embed_weight[rows], index)
        print(f"vocab-rows: the full-vocabulary term over {len(ids)} tokens", flush=True)

    examples = load_examples(a.data)
    for e in examples:
        e["_seq"], e["_nodes"] = nodes_of(e)
        prepare(e)
    examples = [e for e in examples if e["_branch"] and (not a.max_len or len(e["_seq"]) <= a.max_len)]
    if vocab_rows is not None:
        kept = set(ids)
        missing = next((e["id"] for e in examples if not tokens_of(e) <= kept), None)
        if missing is not None:
            raise SystemExit(f"--vocab-rows {a.vocab_rows} lacks tokens of example {missing}: "
                             "make the rows from the same render (training/sparse_base.py)")
    plan = batches(examples, a.batch_tokens, rng)
    total_steps = max(1, int(len(plan) * a.epochs))
    if a.max_steps:
        total_steps = min(total_steps, a.max_steps)
    tokens_total = sum(len(e["_seq"]) for e in examples)
    print(f"{len(examples)} examples, {tokens_total} tokens, {len(plan)} batches a pass, {total_steps} steps", flush=True)

    # run_layers rebuilds a Llama-style forward (one rotary embedding, one causal mask); other
    # architectures (Gemma 3's sliding-window layers) run their own forward every pass.
    cacheable = base.config.model_type == "llama" and not a.no_cache and a.device == "cpu"
    cache = LowerCache(n_layers - a.layers) if cacheable and a.layers and a.layers < n_layers else None
    anchored = sum(e["_anchor"] for e in examples)
    if anchored:
        if not a.init_adapter:
            raise SystemExit("anchored examples need --init-adapter: their teacher is the adapter the run starts from")
        t1 = time.time()
        model.eval()
        with torch.no_grad(), torch.autocast(torch.device(a.device).type, dtype=torch.bfloat16, enabled=a.bf16):
            for key, batch in enumerate(plan):
                # A noted twin's own teacher answer is replaced by its clean twin's: no pass for it.
                if any(e["_anchor"] and not e["_twin"] for e in batch):
                    step_loss(model, embed_weight, batch, a.ordinal, a.vocab, cache, key, teach=True, vocab_rows=vocab_rows)
        print(f"teacher: {anchored} anchored examples in {time.time() - t1:.0f} s", flush=True)
        twins = take_twin_teachers(examples)
        if twins:
            print(f"teacher: {twins} noted twins learn their clean twin's answer", flush=True)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0)
    warmup = 1 / 30  # of the run's progress

    def lr_at(step: int) -> float:
        """Linear warm-up over the first 1/30 of the run, then a cosine decay to 0 at its end.

        Progress is the larger of the step fraction and the time fraction, so a run cut short by
        --minutes warms up and decays on its clock rather than on steps it will never take
        (docs/QUALITY.md, "Transfer": a 12-minute run spent 235 of its 338 steps warming up).
        """
        progress = max((step + 1) / total_steps, (time.time() - start) / (a.minutes * 60))
        if progress < warmup:
            return a.lr * progress / warmup
        done = (progress - warmup) / (1 - warmup)
        return a.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, done)))

    log = (a.out / "loss.csv").open("w", newline="")
    w = csv.writer(log)
    w.writerow(["step", "seconds", "tokens", "loss", "lr"])
    model.train()
    start = time.time()
    seen_tokens = 0
    step = 0
    smoothed = None
    deadline = start + a.minutes * 60
    last_save = start
    while step < total_steps and time.time() < deadline:
        key = step % len(plan)
        batch = plan[key]
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        with torch.autocast(torch.device(a.device).type, dtype=torch.bfloat16, enabled=a.bf16):
            loss = step_loss(model, embed_weight, batch, a.ordinal, a.vocab, cache, key, vocab_rows=vocab_rows)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        seen_tokens += sum(len(e["_seq"]) for e in batch)
        step += 1
        value = loss.item()
        smoothed = value if smoothed is None else 0.98 * smoothed + 0.02 * value
        w.writerow([step, round(time.time() - start, 1), seen_tokens, round(value, 5), f"{lr_at(step - 1):.3g}"])
        if a.save_every and time.time() - last_save > a.save_every * 60:
            last_save = time.time()
            model.save_pretrained(str(a.out / f"checkpoint-{step}"))
        if step % 20 == 0 or step == 1:
            log.flush()
            el = time.time() - start
            print(f"step {step}/{total_steps} loss {smoothed:.4f} {seen_tokens / el:.0f} tok/s {el / 60:.1f} min", flush=True)
    log.close()
    elapsed = time.time() - start
    model.save_pretrained(str(a.out))
    save_base_config(base, a.out / "base-config")
    summary = {
        "steps": step,
        "planned_steps": total_steps,
        "examples": len(examples),
        "tokens_seen": seen_tokens,
        "seconds": round(elapsed, 1),
        "tokens_per_second": round(seen_tokens / max(elapsed, 1e-9), 1),
        "final_loss_smoothed": smoothed,
        "rank": a.rank,
        "alpha": a.alpha,
        "layers": a.layers or n_layers,
        "lr": a.lr,
        "batch_tokens": a.batch_tokens,
        "threads": torch.get_num_threads(),
        "device": a.device,
        "init_adapter": a.init_adapter.name if a.init_adapter else None,
    }
    (a.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()

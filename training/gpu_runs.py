"""Several decision-tuning runs at once on one GPU: the full mix and the leave-group-out runs.

At SmolLM2-135M's size a training step on an H100/H200 is bound by Python and kernel launches,
not by the GPU (decision 071: 0.27-0.42 s a step whatever the batch), so runs started side by
side share one GPU at little cost to each. This driver takes one rendered mix
(`decisiond render`), writes each run's share of it (leaving out its datasets), starts one
`train.py` per run with the GPU recipe of `training/run.sh --device cuda`, and waits for all.
The GGUF export and the calibration profile are done afterwards where Node and llama.cpp are
(docs/TRAINING.md; docs/decisions/093-broad-mix-on-a-lent-gpu.md).

Plan file (JSON): a list of runs, each
  {"name": "without-intents", "exclude": ["atis", "snips", "hwu64"], "init": null, "lr": 1.5e-3}
`exclude` lists dataset names (the part of an example id before ':'), `init` an optional GGUF
adapter to continue from, `lr` the run's peak learning rate, `args` optional further train.py
arguments of that run alone (e.g. "--rank 32 --alpha 64"), after --train-args.

Usage: python training/gpu_runs.py --model GGUF --data TOKENS.jsonl --plan PLAN.json --out DIR
                                   [--minutes M] [--device cuda] [--max-steps N] [--train-args "..."]
Writes DIR/<name>/adapter (train.py's output) and DIR/<name>/train.log; exits 1 when a run failed.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def split_mix(data: Path, plan: list[dict], out: Path) -> dict[str, int]:
    """Writes each run's examples (the mix without its excluded datasets) to out/<name>/train.tokens.jsonl.
    Returns the number of examples per run."""
    files, counts = {}, {}
    for run in plan:
        (out / run["name"]).mkdir(parents=True, exist_ok=True)
        files[run["name"]] = (out / run["name"] / "train.tokens.jsonl").open("w")
        counts[run["name"]] = 0
    with data.open() as f:
        for line in f:
            if not line.strip():
                continue
            dataset = json.loads(line)["id"].split(":")[0]
            for run in plan:
                if dataset not in run["exclude"]:
                    files[run["name"]].write(line if line.endswith("\n") else line + "\n")
                    counts[run["name"]] += 1
    for handle in files.values():
        handle.close()
    return counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, type=Path, help="the base GGUF file")
    ap.add_argument("--data", required=True, type=Path, help="the whole mix from `decisiond render`")
    ap.add_argument("--plan", required=True, type=Path, help="JSON list of runs (module docstring)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--minutes", type=float, default=6, help="each run's training-loop budget")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--max-steps", type=int, default=0, help="stop each run after this many steps (smoke tests)")
    ap.add_argument("--train-args", default="", help="further train.py arguments for every run; they override the recipe's")
    a = ap.parse_args()

    plan = json.loads(a.plan.read_text())
    names = [r["name"] for r in plan]
    if len(set(names)) != len(names):
        raise SystemExit(f"gpu_runs: run names repeat in {a.plan}")
    counts = split_mix(a.data, plan, a.out)
    print(f"gpu_runs: {json.dumps(counts)}", flush=True)
    procs = []
    for run in plan:
        folder = a.out / run["name"]
        cmd = [
            sys.executable, str(HERE / "train.py"), "--model", str(a.model),
            "--data", str(folder / "train.tokens.jsonl"), "--out", str(folder / "adapter"),
            "--minutes", str(a.minutes), "--layers", "18", "--max-len", "2048", "--bf16",
            "--device", a.device, "--batch-tokens", "16384", "--lr", str(run["lr"]), "--epochs", "3",
            "--threads", "1",
        ]
        if run.get("init"):
            cmd += ["--init-adapter", str(run["init"])]
        if a.max_steps:
            cmd += ["--max-steps", str(a.max_steps)]
        cmd += shlex.split(a.train_args) + shlex.split(run.get("args", ""))
        log = (folder / "train.log").open("w")
        procs.append((run["name"], subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log))
    start = time.time()
    failed = []
    for name, proc, log in procs:
        code = proc.wait()
        log.close()
        tail = (a.out / name / "train.log").read_text().strip().splitlines()[-1:]
        print(f"gpu_runs: {name} exit {code} at {time.time() - start:.0f} s: {tail[0] if tail else ''}", flush=True)
        if code != 0:
            failed.append(name)
    if failed:
        raise SystemExit(f"gpu_runs: failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# The whole decision-tuning run (docs/TRAINING.md): datasets -> augmented fit rows -> token ids
# rendered by decisiond's own prompt code -> LoRA training -> GGUF adapter -> calibration profile.
#
# Usage: npm run train -- [--model NAME|PATH] [--minutes M] [--exclude DATASET]... [--out DIR]
#   --model    base GGUF (catalogue name or path; default smollm2-135m-instruct)
#   --minutes  wall-time budget of the training loop (default 110)
#   --exclude  leave a dataset out of training (transfer runs; repeatable)
#   --out      work folder (default .decisiond-train/<model>); the adapter lands in adapters/
#              and its profile in profiles/ only for a full run (no --exclude)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
model=smollm2-135m-instruct minutes=110 out="" excludes=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --minutes) minutes="$2"; shift 2 ;;
    --exclude) excludes+=("$2"); shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "train: unknown argument $1" >&2; exit 2 ;;
  esac
done
name="$(basename "$model" .gguf)"
out="${out:-.decisiond-train/$name${excludes:+-without-$(IFS=-; echo "${excludes[*]}")}}"
mkdir -p "$out/data"
py="$(bash training/setup.sh)"
npm run build --silent
cli="node dist/cli/main.js"
if [ -f "$model" ]; then modelPath="$(realpath "$model")"; else modelPath="$($cli pull "$model" 2>/dev/null | tail -1)"; fi
datasets=(sst2 sst5 ag_news trec banking77 boolq rte cb climate_fever wikiqa)
for d in "${datasets[@]}"; do
  [ -f "$out/data/$d.jsonl" ] || $cli eval convert --dataset "$d" --out "$out/data/$d.jsonl"
done
"$py" training/augment.py --data-dir "$out/data" --out "$out/train.jsonl" --calibration-out "$out/calibration" \
  ${excludes[@]/#/--exclude }
$cli render --model "$modelPath" --data "$out/train.jsonl" --split fit --out "$out/train.tokens.jsonl"
"$py" training/train.py --model "$modelPath" --data "$out/train.tokens.jsonl" --out "$out/adapter" \
  --minutes "$minutes" --layers 18 --bf16 --batch-tokens 1024 --lr 1e-3 --max-len 2048 --epochs 5
"$py" training/plot_loss.py --csv "$out/adapter/loss.csv" --out "$out/adapter/loss.png"
"$py" training/export_gguf.py --adapter "$out/adapter" --out "$out/$name.decision.gguf"
if [ ${#excludes[@]} -eq 0 ]; then
  mkdir -p adapters
  cp "$out/$name.decision.gguf" "adapters/$name.decision.gguf"
  cp "$out/adapter/loss.png" "docs/training-loss-$name.png"
  cp "$out/adapter/summary.json" "adapters/$name.decision.json"
  # The profile is fitted on the fit rows augment.py held back from training (answers to rows the
  # adapter never saw), the eval forms of the datasets with enough of them.
  fit=()
  for d in sst2 sst5 ag_news banking77 boolq climate_fever wikiqa; do fit+=(--data "$out/calibration/$d.jsonl"); done
  $cli calibrate --model "$model" --adapter "adapters/$name.decision.gguf" "${fit[@]}" --limit 60 --min-questions 30
fi
echo "train: adapter $out/$name.decision.gguf"

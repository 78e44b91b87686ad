#!/usr/bin/env bash
# The whole decision-tuning run (docs/TRAINING.md): datasets -> augmented fit rows -> token ids
# rendered by decisiond's own prompt code -> LoRA training -> GGUF adapter -> calibration profile.
#
# Usage: npm run train -- [--model NAME|PATH] [--device cpu|cuda] [--minutes M] [--exclude DATASET]...
#                         [--merge-with ADAPTER.gguf] [--score-labels numbers|levels] [--lr LR] [--out DIR]
#   --model    base GGUF (catalogue name or path; default smollm2-135m-instruct)
#   --device   cpu (default): the 2-core recipe, 7.5k questions in 110 minutes; cuda: the GPU recipe,
#              17.9k questions (up to four times the rows, each drawn twice, banking77 capped) in
#              2.6 minutes on one H200; the shipped adapter is one such run merged with decision
#              071's adapter (--merge-with; docs/TRAINING.md)
#   --minutes  wall-time budget of the training loop (default 110 on cpu, 2.6 on cuda)
#   --exclude  leave a dataset out of training (transfer runs; repeatable)
#   --merge-with ADAPTER.gguf  average the new adapter with this one (training/merge_adapters.py,
#              weight 0.5, same rank): how the shipped adapter was made
#              (docs/decisions/073-balanced-mix-and-merged-adapter.md)
#   --score-labels levels  train the score questions on their level texts instead of numbers
#              (`decisiond render --score-labels`); an adapter trained so is served with
#              TUNED_READOUT.scoreLabels = "levels" (docs/decisions/074-score-level-labels.md)
#   --lr       peak learning rate instead of the recipe's (1e-3 on cpu, 1.5e-3 on cuda); Gemma 3 270M
#              does not learn at 1e-3 and trains at 3e-4 (docs/decisions/078-base-choice-tuned.md)
#   --out      work folder (default .decisiond-train/<model>); the adapter lands in adapters/
#              and its profile in profiles/ only for a full run (no --exclude)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
model=smollm2-135m-instruct device=cpu minutes="" lr="" out="" mergeWith="" scoreLabels=numbers excludes=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --minutes) minutes="$2"; shift 2 ;;
    --lr) lr="$2"; shift 2 ;;
    --device) device="$2"; shift 2 ;;
    --exclude) excludes+=("$2"); shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --merge-with) mergeWith="$(realpath "$2")"; shift 2 ;;
    --score-labels) scoreLabels="$2"; shift 2 ;;
    *) echo "train: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$device" in
  # The data mix and step size of each recipe (docs/decisions/071-gpu-decision-tuning.md and
  # 073-balanced-mix-and-merged-adapter.md).
  cpu) mix=(--scale 1 --repeat 1 --banking-full 150); fit=(--bf16 --batch-tokens 1024 --lr 1e-3 --epochs 5); minutes="${minutes:-110}" ;;
  cuda) mix=(--scale 4 --repeat 2 --banking-full 150 --banking-rows 1500); fit=(--bf16 --device cuda --batch-tokens 16384 --lr 1.5e-3 --epochs 4); minutes="${minutes:-2.6}" ;;
  *) echo "train: --device is cpu or cuda, not $device" >&2; exit 2 ;;
esac
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
  "${mix[@]}" ${excludes[@]/#/--exclude }
$cli render --model "$modelPath" --data "$out/train.jsonl" --split fit --score-labels "$scoreLabels" --out "$out/train.tokens.jsonl"
"$py" training/train.py --model "$modelPath" --data "$out/train.tokens.jsonl" --out "$out/adapter" \
  --minutes "$minutes" --layers 18 --max-len 2048 "${fit[@]}" ${lr:+--lr "$lr"}
"$py" training/plot_loss.py --csv "$out/adapter/loss.csv" --out "$out/adapter/loss.png"
"$py" training/export_gguf.py --adapter "$out/adapter" --out "$out/$name.decision.gguf"
if [ -n "$mergeWith" ]; then
  mv "$out/$name.decision.gguf" "$out/$name.trained.gguf"
  "$py" training/merge_adapters.py --adapter "$mergeWith" --adapter "$out/$name.trained.gguf" --weights 0.5,0.5 \
    --out "$out/$name.decision.gguf"
fi
if [ ${#excludes[@]} -eq 0 ]; then
  mkdir -p adapters
  cp "$out/$name.decision.gguf" "adapters/$name.decision.gguf"
  cp "$out/adapter/loss.png" "docs/training-loss-$name.png"
  cp "$out/adapter/summary.json" "adapters/$name.decision.json"
  # The profile is fitted on the fit rows augment.py held back from training (answers to rows the
  # adapter never saw), in the eval forms of every dataset; the option counts with too few of
  # them take their question type's temperature (docs/decisions/072).
  fit=()
  for d in sst2 sst5 ag_news trec banking77 boolq rte cb climate_fever wikiqa; do fit+=(--data "$out/calibration/$d.jsonl"); done
  $cli calibrate --model "$model" --adapter "adapters/$name.decision.gguf" "${fit[@]}" --limit 120 --min-questions 30 \
    --score-labels "$scoreLabels"
fi
echo "train: adapter $out/$name.decision.gguf"

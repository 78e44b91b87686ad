#!/usr/bin/env bash
# The whole decision-tuning run (docs/TRAINING.md): datasets -> augmented fit rows -> token ids
# rendered by decisiond's own prompt code -> LoRA training -> GGUF adapter -> calibration profile.
#
# Usage: npm run train -- [--model NAME|PATH] [--device cpu|cuda] [--minutes M] [--exclude DATASET]...
#                         [--exclude-group GROUP]... [--init-adapter ADAPTER.gguf|none]
#                         [--merge-with ADAPTER.gguf] [--score-labels numbers|levels] [--lr LR] [--out DIR]
#                         [--render-only]
#   --model    base GGUF (catalogue name or path; default smollm2-135m-instruct)
#   --device   cpu (default): the 2-core recipe, the broad mix of issue 48 (39 datasets, issue 30's ten
#              at 0.4 of their rows) for one pass, continuing the shipped adapter, 75 minutes;
#              cuda: the GPU recipe, the broad mix at three times the rows, drawn twice, from the
#              base, in at most 10 minutes on one H100/H200 (docs/decisions/088-broad-mix-and-transfer.md)
#   --minutes  wall-time budget of the training loop (default 75 on cpu, 8 on cuda)
#   --exclude  leave a dataset out of training (transfer runs; repeatable)
#   --exclude-group  leave a task group out (`decisiond eval groups`: intents, similarity, emotions,
#              science, truth; repeatable): the leave-group-out protocol
#   --init-adapter  continue from this GGUF adapter (same rank, alpha, layers); default on cpu the
#              catalogue model's shipped adapter, on cuda none; `none` trains from the base
#   --merge-with ADAPTER.gguf  average the new adapter with this one (training/merge_adapters.py,
#              weight 0.5, same rank) (docs/decisions/073-balanced-mix-and-merged-adapter.md)
#   --score-labels levels  train the score questions on their level texts instead of numbers
#              (`decisiond render --score-labels`); an adapter trained so is served with
#              TUNED_READOUT.scoreLabels = "levels" (docs/decisions/074-score-level-labels.md)
#   --lr       peak learning rate instead of the recipe's (8e-4 on cpu, 1.5e-3 on cuda); Gemma 3 270M
#              does not learn at 1e-3 and trains at 3e-4 (docs/decisions/078-base-choice-tuned.md)
#   --threads  CPU threads of the training loop (default: the cores); 1 keeps a run's pace when
#              other work shares the machine (two spinning PyTorch threads stall behind any third process)
#   --out      work folder (default .decisiond-train/<model>); the adapter lands in adapters/
#              and its profile in profiles/ only for a full run (no --exclude)
#   --render-only  stop after the mix is rendered to OUT/train.tokens.jsonl (what a lent GPU
#              session carries: training/gpu_carry.sh)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
model=smollm2-135m-instruct device=cpu minutes="" lr="" out="" mergeWith="" renderOnly="" scoreLabels=numbers init="" threads="" excludes=() groups=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --minutes) minutes="$2"; shift 2 ;;
    --lr) lr="$2"; shift 2 ;;
    --device) device="$2"; shift 2 ;;
    --exclude) excludes+=("$2"); shift 2 ;;
    --exclude-group) groups+=("$2"); shift 2 ;;
    --init-adapter) init="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --merge-with) mergeWith="$(realpath "$2")"; shift 2 ;;
    --score-labels) scoreLabels="$2"; shift 2 ;;
    --render-only) renderOnly=1; shift ;;
    *) echo "train: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$device" in
  # The data mix and step size of each recipe (docs/decisions/088-broad-mix-and-transfer.md).
  cpu) mix=(--broad --first-scale 0.4); fit=(--bf16 --batch-tokens 1024 --lr 8e-4 --epochs 1); minutes="${minutes:-75}" ;;
  cuda) mix=(--broad --scale 3 --repeat 2 --first-scale 0.5 --banking-full 150); fit=(--bf16 --device cuda --batch-tokens 16384 --lr 1.5e-3 --epochs 3); minutes="${minutes:-8}" ;;
  *) echo "train: --device is cpu or cuda, not $device" >&2; exit 2 ;;
esac
name="$(basename "$model" .gguf)"
py="$(bash training/setup.sh)"
npm run build --silent
cli="node dist/cli/main.js"
for g in "${groups[@]}"; do
  while read -r d; do excludes+=("$d"); done < <($cli eval groups "$g")
done
out="${out:-.decisiond-train/$name${groups:+-without-$(IFS=-; echo "${groups[*]}")}}"
[ ${#groups[@]} -eq 0 ] && [ ${#excludes[@]} -gt 0 ] && out="${out}-without-$(IFS=-; echo "${excludes[*]}")"
mkdir -p "$out/data"
if [ -f "$model" ]; then modelPath="$(realpath "$model")"; else modelPath="$($cli pull "$model" 2>/dev/null | tail -1)"; fi
if [ -z "$init" ] && [ "$device" = cpu ] && [ -f "adapters/$name.decision.gguf" ]; then init="adapters/$name.decision.gguf"; fi
[ "$init" = none ] && init=""
initFlags=()
if [ -n "$init" ]; then
  # A run that continues keeps its start: the shipped adapter may be replaced at the end.
  cp "$init" "$out/init.gguf"
  initFlags=(--init-adapter "$out/init.gguf")
fi
while read -r d; do
  [ -f "$out/data/$d.jsonl" ] || $cli eval convert --dataset "$d" --out "$out/data/$d.jsonl" 2>/dev/null
done < <($cli eval datasets)
(cd training && "$py" augment.py --data-dir "$root/$out/data" --out "$root/$out/train.jsonl" \
  --calibration-out "$root/$out/calibration" "${mix[@]}" ${excludes[@]/#/--exclude })
$cli render --model "$modelPath" --data "$out/train.jsonl" --split fit --score-labels "$scoreLabels" --out "$out/train.tokens.jsonl"
[ -n "$renderOnly" ] && { echo "train: rendered $out/train.tokens.jsonl"; exit 0; }
"$py" training/train.py --model "$modelPath" --data "$out/train.tokens.jsonl" --out "$out/adapter" \
  --minutes "$minutes" --layers 18 --max-len 2048 "${fit[@]}" ${lr:+--lr "$lr"} ${threads:+--threads "$threads"} "${initFlags[@]}"
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
  # The bundle: the summary with the fingerprint of the prompt format the examples were rendered in
  # (the server refuses the adapter when its prompt code renders another; decision/fingerprint.ts).
  "$py" -c 'import json,sys; s=json.load(open(sys.argv[1])); s["promptFingerprint"]=open(sys.argv[2]).read().strip(); json.dump(s,open(sys.argv[3],"w"),indent=2)' \
    "$out/adapter/summary.json" "$out/train.tokens.jsonl.fingerprint" "adapters/$name.decision.json"
  # The profile is fitted on the fit rows augment.py held back from training (answers to rows the
  # adapter never saw), in the eval forms of every dataset; the option counts with too few of
  # them take their question type's temperature (docs/decisions/072).
  fit=()
  for f in "$out"/calibration/*.jsonl; do [ -s "$f" ] && fit+=(--data "$f"); done
  $cli calibrate --model "$model" --adapter "adapters/$name.decision.gguf" "${fit[@]}" --limit 30 --min-questions 30 \
    --score-labels "$scoreLabels"
fi
echo "train: adapter $out/$name.decision.gguf"

#!/usr/bin/env bash
# Packs what a lent GPU session carries (docs/TRAINING.md, "A lent GPU, step by step"): a call
# carries at most 64 MiB with the working tree, so the SmolLM2 base (98.4 MB, near-incompressible
# nibbles) travels in two parts over two calls on the same warm machine (decision 093).
#
# Usage (here, in the repository root):
#   bash training/gpu_carry.sh prepare PLAN.json [INIT ...]
#       the `cuda` recipe's mix (`run.sh --device cuda --render-only`, in .decisiond-train/gpu) in
#       xz, the plan, the `gguf` wheel, the plan's further start adapters (paths in the plan:
#       .gpu-carry/run/<file name>) and the base in two parts: .gpu-carry/base-1/part.aa (first
#       call), .gpu-carry/run/part.ab (second). An INIT is a file, or NAME=REVISION:PATH, an
#       adapter this repository once shipped, taken from git as .gpu-carry/run/NAME (a session
#       starts on a fresh machine: only what git holds is there), e.g.
#       c3.gguf=9bad9e8:adapters/smollm2-135m-instruct.decision.gguf
#   bash training/gpu_carry.sh aside    moves bench/results/ (36 MB, tracked) out of the tree the
#                                       calls copy, to .gpu-carry/results-aside
#   bash training/gpu_carry.sh back     puts it back (run it before any commit)
# `prepare` prints the two `run` calls and the sizes they carry.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
carry=.gpu-carry
case "${1:-}" in
  aside)
    [ -d "$carry/results-aside" ] && { echo "gpu_carry: already aside" >&2; exit 1; }
    mkdir -p "$carry" && mv bench/results "$carry/results-aside" && echo "bench/results moved aside"
    exit 0 ;;
  back)
    [ -d "$carry/results-aside" ] || { echo "gpu_carry: nothing aside" >&2; exit 1; }
    mv "$carry/results-aside" bench/results && echo "bench/results back"
    exit 0 ;;
  prepare) shift ;;
  *) sed -n "2,/^# .prepare. prints/p" "$0" >&2; exit 2 ;;
esac
plan="${1:?a plan file, e.g. training/plans/098-notes-fixed.json}"
shift
py="$(bash training/setup.sh)"
# The `cuda` recipe's mix, rendered by the recipe itself (run.sh builds dist/ on the way).
mix=.decisiond-train/gpu
bash training/run.sh --device cuda --render-only --out "$mix"
base="$(node dist/cli/main.js pull smollm2-135m-instruct 2>/dev/null | tail -1)"
# the Q4_1 file the catalogue downloads, not the Q8_0 made from it: training reads the original
base="$(dirname "$base")/SmolLM2-135M-Instruct.Q4_1.gguf"
mkdir -p "$carry/base-1" "$carry/run"
xz -T2 -6 -c "$mix/train.tokens.jsonl" > "$carry/run/train.tokens.jsonl.xz"
cp "$plan" "$carry/run/plan.json"
for init in "$@"; do
  case "$init" in
    *=*:*) git show "${init#*=}" > "$carry/run/${init%%=*}" ;;
    *) cp "$init" "$carry/run/" ;;
  esac
done
# A start adapter the plan names and nobody carries would stop its run on the device.
"$py" -c 'import json, os, sys
missing = [r["init"] for r in json.load(open(sys.argv[1])) if r.get("init") and not os.path.isfile(r["init"])]
sys.exit(f"gpu_carry: the plan starts from {missing}: pass them as INIT" if missing else 0)' "$plan"
rm -f "$carry"/run/gguf-*.whl
"$py" -m pip download --quiet --no-deps --only-binary :all: -d "$carry/run" "$(grep '^gguf==' training/requirements.txt)"
# Split so that the first call's part and the tree stay under 64 MiB.
half=$((54500 * 1000))
head -c "$half" "$base" > "$carry/base-1/part.aa"
tail -c +"$((half + 1))" "$base" > "$carry/run/part.ab"
sha="$(sha256sum "$base" | cut -d' ' -f1)"
tree="$(git ls-files -z | { while IFS= read -r -d '' f; do if [ -f "$f" ]; then printf '%s\0' "$f"; fi; done; } | du -cb --files0-from=- | tail -1 | cut -f1)"
results="$(du -sb bench/results 2>/dev/null | cut -f1)" || results=0
mb() { echo $(($1 / 1000000)); }
echo "tree $(mb "$tree") MB, bench/results $(mb "${results:-0}") MB of it (\`aside\` takes it out);" \
  "first call +$(mb "$(du -sb "$carry/base-1" | cut -f1)") MB, second +$(mb "$(du -sb "$carry/run" | cut -f1)") MB; 64 MiB is 67.1 MB"
cat <<EOF
first call:  carry [".gpu-carry/base-1"], command: mkdir -p /root/base && cp .gpu-carry/base-1/part.aa /root/base/ && nvidia-smi -L
second call: carry [".gpu-carry/run"], command: bash training/gpu_session.sh .gpu-carry/run '/root/base/part.aa .gpu-carry/run/part.ab' $sha 6.5
EOF

#!/usr/bin/env bash
# The GPU recipe's runs on a lent accelerator that cannot reach a package index (docs/TRAINING.md,
# docs/decisions/093-broad-mix-on-a-lent-gpu.md): assembles the base GGUF carried in parts (or
# the parts of its xz stream: a sparse base, training/sparse_base.py, decision 096), installs the
# carried `gguf` wheel, runs every run of the plan side by side (training/gpu_runs.py; the plan of
# decision 093 is training/plans/093-broad-mix.json, whose `init` was the adapter shipped before
# it, c3) and packs the adapters, in fp16, two runs a tarball (one for adapters over 8 MB), into
# $OUT. Rendering before and GGUF export after happen where Node is.
#
# Usage (on the accelerator, in the repository root):
#   bash training/gpu_session.sh CARRY_DIR PARTS_GLOB SHA256 MINUTES [EXTRA]
#   CARRY_DIR  folder with plan.json, train.tokens.jsonl.xz and gguf-*.whl
#   PARTS_GLOB the base's parts in order, or those of its xz stream (e.g. '/root/base/part.* .dev/part.ab')
#   SHA256     the base GGUF's checksum (the assembled file must match it)
#   MINUTES    each run's training-loop budget
#   EXTRA      optional further gpu_runs.py arguments (a CPU smoke test: '--device cpu --max-steps 1')
set -uo pipefail
carry="$1" parts="$2" sha="$3" minutes="$4" extra="${5:-}"
out="${OUT:-/tmp/out}" work=/tmp/gpu-runs
mkdir -p "$out" "$work"
# shellcheck disable=SC2086 # a list of paths on purpose
if [ "$(cat $parts | head -c 6 | od -An -tx1 | tr -d ' ')" = fd377a585a00 ]; then
  cat $parts | xz -dc > "$work/base.gguf" # parts of an xz stream (a sparse base, training/sparse_base.py)
else
  cat $parts > "$work/base.gguf"
fi
echo "$sha  $work/base.gguf" | sha256sum -c - || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$carry"/gguf-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
xz -dc "$carry/train.tokens.jsonl.xz" > "$work/train.tokens.jsonl"
nvidia-smi -L
python3 -c 'import torch, transformers, peft; print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__)'
( while sleep 45; do nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader; done ) &
watcher=$!
# A sparse base travels with the token ids whose embedding rows it kept (training/sparse_base.py).
rows=()
[ -f "$carry/vocab-rows.json" ] && rows=(--train-args "--vocab-rows $carry/vocab-rows.json")
# shellcheck disable=SC2086
python3 training/gpu_runs.py --model "$work/base.gguf" --data "$work/train.tokens.jsonl" --plan "$carry/plan.json" \
  --out "$work/runs" --minutes "$minutes" "${rows[@]}" $extra 2>&1 | tee "$out/gpu_runs.log"
kill "$watcher"
# fp16 weights (what the GGUF export writes anyway), two runs a tarball (one where a run's
# adapter is over 8 MB, as Gemma's are): the way back takes at most 8 files of 16 MiB.
python3 - "$work/runs" <<'EOF'
import sys, torch
from pathlib import Path
from safetensors.torch import load_file, save_file
for f in Path(sys.argv[1]).glob("*/adapter/adapter_model.safetensors"):
    save_file({k: v.half() for k, v in load_file(str(f)).items()}, str(f))
EOF
cd "$work/runs" || exit 1
mapfile -t names < <(ls)
per=2
for n in "${names[@]}"; do
  [ "$(stat -c %s "$n/adapter/adapter_model.safetensors" 2>/dev/null || echo 0)" -gt 8000000 ] && per=1
done
for ((i = 0; i < ${#names[@]}; i += per)); do
  tar -cf "$out/runs-$((i / per)).tar" --exclude train.tokens.jsonl --exclude README.md "${names[@]:i:per}"
done
ls -la "$out"

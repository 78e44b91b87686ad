#!/usr/bin/env bash
# Creates the training environment (training/.venv) from training/requirements.txt, once.
# Idempotent: an environment whose requirements file is unchanged is reused.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${DECISIOND_TRAIN_VENV:-$here/.venv}"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"
  exit 0
fi
python3 -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --upgrade pip >&2
# torch pulls about 3 GB of CUDA wheels from PyPI: a connection cut part way is resumed, not
# fatal (pip 25.1 and later; a CI run failed on one cut six times).
resume=()
if "$venv/bin/python" -m pip install --help | grep -q -- --resume-retries; then
  resume=(--resume-retries 30)
fi
"$venv/bin/python" -m pip install --quiet --retries 10 "${resume[@]}" -r "$here/requirements.txt" >&2
echo "$want" > "$stamp"
echo "$venv/bin/python"

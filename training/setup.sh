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
"$venv/bin/python" -m pip install --quiet -r "$here/requirements.txt" >&2
echo "$want" > "$stamp"
echo "$venv/bin/python"
